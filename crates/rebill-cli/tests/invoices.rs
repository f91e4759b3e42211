//! Invoices, adjustments and transactions over HTTP against `rebill serve`, on SQLite and on
//! PostgreSQL: pending adjustments invoiced with exact totals and sequential numbers per site,
//! `will_not_invoice`, previews, state spellings before and from 2.10, `invoice_collection` from
//! 2.10, lists with filters and HEAD counts, one-off transactions approved and declined (every
//! decline stored), dunning of a declined invoice (paid by a retry after the billing info is
//! updated; failed when the retries run out), and no card number in the database.

use rebill_testkit::*;
use serde_json::Value;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;
const DAY: i64 = 86_400;

fn serve(db: &str) -> Server {
    start_with(db, Options { clock: Some(T0), ..Options::default() })
}

/// The text of the first `<name …>text</name>` after `from` in `body`.
fn tag_after<'a>(body: &'a str, from: &str, name: &str) -> Option<&'a str> {
    let start = body.find(from)?;
    let rest = &body[start..];
    let open = rest
        .find(&format!("<{name}>"))
        .map(|i| (i, name.len() + 2))
        .into_iter()
        .chain(rest.find(&format!("<{name} ")).and_then(|i| rest[i..].find('>').map(|j| (i, j + 1))));
    let (i, len) = open.min_by_key(|(i, _)| *i)?;
    let text = &rest[i + len..];
    Some(&text[..text.find(&format!("</{name}>"))?])
}

fn tag<'a>(body: &'a str, name: &str) -> Option<&'a str> {
    tag_after(body, "", name)
}

#[track_caller]
fn has(reply: &Reply, text: &str) {
    assert!(reply.body.contains(text), "expected {text} in\n{}", reply.body);
}

#[track_caller]
fn lacks(reply: &Reply, text: &str) {
    assert!(!reply.body.contains(text), "did not expect {text} in\n{}", reply.body);
}

#[track_caller]
fn status(reply: &Reply, code: u16) {
    assert_eq!(reply.status, code, "{}\n{}", reply.head, reply.body);
}

fn get(s: &Server, version: &str, path: &str) -> Reply {
    authed(s, "GET", path, &[("X-Api-Version", version)], "")
}

fn post(s: &Server, version: &str, path: &str, body: &str) -> Reply {
    authed(s, "POST", path, &xml_at(version), body)
}

fn count(s: &Server, path: &str) -> i64 {
    let r = authed(s, "HEAD", path, &[("X-Api-Version", "2.11")], "");
    status(&r, 200);
    r.header("x-records").and_then(|v| v.parse().ok()).expect("X-Records")
}

fn create_account(s: &Server, code: &str) {
    let body = format!(
        "<account><account_code>{code}</account_code><email>{code}@example.com</email>\
         <first_name>Ada</first_name><last_name>Lovelace</last_name></account>"
    );
    status(&post(s, "2.11", "/v2/accounts", &body), 201);
}

fn adjustment(s: &Server, code: &str, unit: i64, quantity: i64, description: &str) -> Reply {
    let body = format!(
        "<adjustment><description>{description}</description><unit_amount_in_cents>{unit}</unit_amount_in_cents>\
         <quantity>{quantity}</quantity><currency>USD</currency></adjustment>"
    );
    post(s, "2.11", &format!("/v2/accounts/{code}/adjustments"), &body)
}

/// Makes a card token through the token endpoint with the site's public key.
fn card_token(s: &Server, number: &str) -> String {
    let body = format!(
        "key={}&number={number}&month=11&year=2029&cvv=321&first_name=Grace&last_name=Hopper\
         &address1=1+Navy+Way&postal_code=20001&country=US",
        s.public_key
    );
    let reply = request(s, "POST", "/js/v1/token", &[("Content-Type", "application/x-www-form-urlencoded")], &body);
    status(&reply, 200);
    let value: Value = serde_json::from_str(&reply.body).expect("json");
    value["id"].as_str().expect("id").to_owned()
}

fn set_card(s: &Server, code: &str, number: &str) -> Reply {
    let token = card_token(s, number);
    let body = format!("<billing_info><token_id>{token}</token_id></billing_info>");
    authed(s, "PUT", &format!("/v2/accounts/{code}/billing_info"), &xml_at("2.11"), &body)
}

fn advance(s: &Server, amount: &str) {
    let r = authed(
        s,
        "POST",
        "/sandbox/clock",
        &[("Content-Type", "application/xml; charset=utf-8")],
        &format!("<clock><advance>{amount}</advance></clock>"),
    );
    status(&r, 200);
}

fn iso(t: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp(t, 0)
        .expect("time")
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn invoices_scenario(db: &str) {
    let s = serve(db);
    create_account(&s, "a1");

    // Pending adjustments: two charges and a credit.
    let r = adjustment(&s, "a1", 1000, 2, "Widgets");
    status(&r, 201);
    let widgets = tag(&r.body, "uuid").expect("uuid").to_owned();
    assert_eq!(r.header("location"), Some(format!("http://{}/v2/adjustments/{widgets}", s.addr)));
    has(&r, "<adjustment href=");
    has(&r, "type=\"charge\"");
    has(&r, "<state>pending</state>");
    has(&r, "<origin>debit</origin>");
    has(&r, "<total_in_cents type=\"integer\">2000</total_in_cents>");
    status(&adjustment(&s, "a1", 550, 1, "Setup"), 201);
    let r = adjustment(&s, "a1", -300, 1, "Goodwill");
    status(&r, 201);
    has(&r, "type=\"credit\"");
    has(&r, "<origin>credit</origin>");
    let goodwill = tag(&r.body, "uuid").expect("uuid").to_owned();
    let r = get(&s, "2.11", &format!("/v2/adjustments/{widgets}"));
    status(&r, 200);
    has(&r, "<description>Widgets</description>");
    assert_eq!(count(&s, "/v2/accounts/a1/adjustments?state=pending"), 3);
    assert_eq!(count(&s, "/v2/accounts/a1/adjustments?type=credit"), 1);
    // Bad adjustments.
    let r = post(&s, "2.11", "/v2/accounts/a1/adjustments", "<adjustment><currency>USD</currency></adjustment>");
    status(&r, 422);
    has(&r, "field=\"adjustment.unit_amount_in_cents\" symbol=\"blank\"");
    status(&adjustment(&s, "nobody", 100, 1, "x"), 404);

    // A preview writes nothing.
    let r = post(&s, "2.9", "/v2/accounts/a1/invoices/preview", "");
    status(&r, 200);
    has(&r, "<invoice>");
    has(&r, "<total_in_cents type=\"integer\">2250</total_in_cents>");
    has(&r, "<invoice_number type=\"integer\" nil=\"nil\"></invoice_number>");
    let r = post(&s, "2.10", "/v2/accounts/a1/invoices/preview", "");
    status(&r, 200);
    has(&r, "<invoice_collection>");
    has(&r, "<subtotal_before_discount_in_cents type=\"integer\">2250</subtotal_before_discount_in_cents>");

    // Invoice the pending adjustments (manual collection: nothing is charged).
    let body = "<invoice><po_number>PO-7</po_number><collection_method>manual</collection_method>\
                <net_terms type=\"integer\">30</net_terms></invoice>";
    let r = post(&s, "2.9", "/v2/accounts/a1/invoices", body);
    status(&r, 201);
    assert_eq!(r.header("location"), Some(format!("http://{}/v2/invoices/1001", s.addr)));
    has(&r, &format!("<invoice href=\"http://{}/v2/invoices/1001\">", s.addr));
    has(&r, "<invoice_number type=\"integer\">1001</invoice_number>");
    has(&r, "<state>open</state>");
    has(&r, "<subtotal_in_cents type=\"integer\">2250</subtotal_in_cents>");
    has(&r, "<subtotal_after_discount_in_cents type=\"integer\">2250</subtotal_after_discount_in_cents>");
    has(&r, "<total_in_cents type=\"integer\">2250</total_in_cents>");
    has(&r, "<po_number>PO-7</po_number>");
    has(&r, "<net_terms type=\"integer\">30</net_terms>");
    has(&r, &format!("<account href=\"http://{}/v2/accounts/a1\"/>", s.addr));
    has(&r, "<a name=\"mark_successful\"");
    lacks(&r, "<balance_in_cents");
    assert_eq!(r.body.matches("<adjustment ").count(), 3, "{}", r.body);
    assert_eq!(r.body.matches("<state>invoiced</state>").count(), 3, "{}", r.body);
    // Nothing left to invoice.
    assert_error(&post(&s, "2.9", "/v2/accounts/a1/invoices", ""), 422, "will_not_invoice");
    assert_eq!(count(&s, "/v2/accounts/a1/adjustments?state=pending"), 0);
    assert_error(&authed(&s, "DELETE", &format!("/v2/adjustments/{goodwill}"), &[], ""), 422, "invalid_transition");
    let r = get(&s, "2.11", &format!("/v2/adjustments/{goodwill}"));
    has(&r, &format!("<invoice href=\"http://{}/v2/invoices/1001\"/>", s.addr));

    // A pending adjustment can be deleted.
    let r = adjustment(&s, "a1", 99, 1, "Oops");
    let oops = tag(&r.body, "uuid").expect("uuid").to_owned();
    status(&authed(&s, "DELETE", &format!("/v2/adjustments/{oops}"), &[], ""), 204);
    assert_error(&get(&s, "2.11", &format!("/v2/adjustments/{oops}")), 404, "not_found");

    // From 2.10 an invoice collection, the new names and the new state spellings.
    create_account(&s, "a2");
    status(&adjustment(&s, "a2", 4200, 1, "Gizmo"), 201);
    let r = post(
        &s,
        "2.10",
        "/v2/accounts/a2/invoices",
        "<invoice><collection_method>manual</collection_method></invoice>",
    );
    status(&r, 201);
    has(&r, "<invoice_collection>");
    has(&r, "<charge_invoice");
    has(&r, "<invoice_number type=\"integer\">1002</invoice_number>");
    has(&r, "<state>pending</state>");
    has(&r, "<subtotal_before_discount_in_cents type=\"integer\">4200</subtotal_before_discount_in_cents>");
    has(&r, "<subtotal_in_cents type=\"integer\">4200</subtotal_in_cents>");
    has(&r, "<credit_invoices type=\"array\">");
    assert_eq!(r.header("location"), Some(format!("http://{}/v2/invoices/1002", s.addr)));

    let r = get(&s, "2.9", "/v2/invoices/1001");
    status(&r, 200);
    has(&r, "<state>open</state>");
    let r = get(&s, "2.10", "/v2/invoices/1001");
    has(&r, "<state>pending</state>");
    has(&r, "<discount_in_cents type=\"integer\">0</discount_in_cents>");
    assert_error(&get(&s, "2.10", "/v2/invoices/999"), 404, "not_found");
    assert_error(&get(&s, "2.10", "/v2/invoices/abc"), 404, "not_found");

    // Mark paid and failed.
    let r = authed(&s, "PUT", "/v2/invoices/1001/mark_successful", &[("X-Api-Version", "2.9")], "");
    status(&r, 200);
    has(&r, "<state>collected</state>");
    has(&r, "<a name=\"refund\"");
    lacks(&r, "<a name=\"mark_failed\"");
    assert_error(
        &authed(&s, "PUT", "/v2/invoices/1001/mark_failed", &[("X-Api-Version", "2.9")], ""),
        422,
        "invalid_transition",
    );
    let r = authed(&s, "PUT", "/v2/invoices/1002/mark_failed", &[("X-Api-Version", "2.10")], "");
    status(&r, 200);
    has(&r, "<invoice_collection>");
    has(&r, "<state>failed</state>");

    // Lists with the state filter in both spellings, HEAD counts, per account.
    assert_eq!(count(&s, "/v2/invoices"), 2);
    assert_eq!(count(&s, "/v2/invoices?state=paid"), 1);
    assert_eq!(count(&s, "/v2/invoices?state=collected"), 1);
    assert_eq!(count(&s, "/v2/invoices?state=failed"), 1);
    assert_eq!(count(&s, "/v2/invoices?state=open"), 0);
    assert_eq!(count(&s, "/v2/accounts/a2/invoices"), 1);
    assert_eq!(count(&s, &format!("/v2/invoices?begin_time={}", iso(T0 + 1))), 0);
    let r = get(&s, "2.9", "/v2/invoices?state=collected");
    status(&r, 200);
    has(&r, "<invoices type=\"array\">");
    has(&r, "<invoice_number type=\"integer\">1001</invoice_number>");
    lacks(&r, "<invoice_number type=\"integer\">1002</invoice_number>");
    assert_eq!(r.header("x-records").as_deref(), Some("1"));
    let r = get(&s, "2.11", "/v2/invoices?state=voided");
    assert_error(&r, 400, "invalid_parameter");
    assert_error(&get(&s, "2.11", "/v2/accounts/nobody/invoices"), 404, "not_found");

    // Numbers are per site.
    let other = s.cli_json(&["site", "create", "--name", "other"]);
    let key = other["private_key"].as_str().expect("key").to_owned();
    let body = "<account><account_code>a1</account_code></account>";
    status(&authed_with(&s, &key, "POST", "/v2/accounts", &xml_at("2.11"), body), 201);
    let body = "<adjustment><unit_amount_in_cents>100</unit_amount_in_cents><currency>EUR</currency></adjustment>";
    status(&authed_with(&s, &key, "POST", "/v2/accounts/a1/adjustments", &xml_at("2.11"), body), 201);
    let body = "<invoice><collection_method>manual</collection_method></invoice>";
    let r = authed_with(&s, &key, "POST", "/v2/accounts/a1/invoices", &xml_at("2.9"), body);
    status(&r, 201);
    has(&r, "<invoice_number type=\"integer\">1001</invoice_number>");
    has(&r, "<currency>EUR</currency>");
    // And the first site goes on where it was.
    status(&adjustment(&s, "a1", 1, 1, "Penny"), 201);
    let r =
        post(&s, "2.9", "/v2/accounts/a1/invoices", "<invoice><collection_method>manual</collection_method></invoice>");
    has(&r, "<invoice_number type=\"integer\">1003</invoice_number>");
}

/// A manually collected invoice is pending until its due date (net terms) and past due after
/// it; paying it settles it.
fn manual_due_scenario(db: &str) {
    let s = serve(db);
    create_account(&s, "m1");
    status(&adjustment(&s, "m1", 5000, 1, "Consulting"), 201);
    let body =
        "<invoice><collection_method>manual</collection_method><net_terms type=\"integer\">30</net_terms></invoice>";
    let r = post(&s, "2.11", "/v2/accounts/m1/invoices", body);
    status(&r, 201);
    has(&r, "<state>pending</state>");
    // Due on T0 + 30 days (`due_on` is shown on sites with Credit Memos).
    advance(&s, "29days");
    has(&get(&s, "2.11", "/v2/invoices/1001"), "<state>pending</state>");
    assert_eq!(count(&s, "/v2/invoices?state=past_due"), 0);
    advance(&s, "1day");
    let r = get(&s, "2.11", "/v2/invoices/1001");
    has(&r, "<state>past_due</state>");
    assert_eq!(count(&s, "/v2/invoices?state=past_due"), 1);
    has(&get(&s, "2.11", "/v2/accounts/m1"), "<has_past_due_invoice type=\"boolean\">true</has_past_due_invoice>");
    // No collection attempt is made for a manual invoice.
    assert_eq!(count(&s, "/v2/accounts/m1/transactions"), 0);
    status(&authed(&s, "PUT", "/v2/invoices/1001/mark_successful", &[("X-Api-Version", "2.11")], ""), 200);
    has(&get(&s, "2.11", "/v2/invoices/1001"), "<state>paid</state>");
    has(&get(&s, "2.11", "/v2/accounts/m1"), "<has_past_due_invoice type=\"boolean\">false</has_past_due_invoice>");
}

/// `GET /v2/invoices/{n}` with `Accept: application/pdf`: the invoice's PDF in the language of
/// `Accept-Language` (named by `Content-Language`; en-US when there is no translation); XML
/// errors.
fn pdf_scenario(db: &str) {
    let s = serve(db);
    create_account(&s, "a1");
    status(&adjustment(&s, "a1", 1250, 2, "Widgets"), 201);
    let r = post(
        &s,
        "2.11",
        "/v2/accounts/a1/invoices",
        "<invoice><collection_method>manual</collection_method></invoice>",
    );
    status(&r, 201);
    let pdf_request = |path: &str, accept: &str, language: Option<&str>| {
        let auth = format!("Basic {}", basic(&s.key));
        let language = language.map(|l| format!("Accept-Language: {l}\r\n")).unwrap_or_default();
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAuthorization: {auth}\r\nAccept: {accept}\r\n\
             {language}X-Api-Version: 2.11\r\n\r\n",
            s.addr
        );
        raw_bytes(&s.addr, &request)
    };
    // The PDF's text and its Content-Language.
    let pdf_text = |language: Option<&str>| {
        let (code, head, body) = pdf_request("/v2/invoices/1001", "application/pdf", language);
        assert_eq!(code, 200, "{language:?}: {head}");
        let lower = head.to_ascii_lowercase();
        assert!(lower.contains("content-type: application/pdf"), "{head}");
        let content_language = lower
            .lines()
            .find_map(|l| l.strip_prefix("content-language: "))
            .map(|l| l.trim().to_owned())
            .unwrap_or_else(|| panic!("{language:?}: no Content-Language in {head}"));
        let doc = lopdf::Document::load_mem(&body).expect("a PDF");
        let pages: Vec<u32> = doc.get_pages().keys().copied().collect();
        (doc.extract_text(&pages).expect("text"), content_language)
    };
    let shows = |text: &str, expected: &[&str]| {
        for e in expected {
            assert!(text.contains(e), "{e:?} missing from:\n{text}");
        }
    };

    let english = ["Invoice 1001", "Invoice date", "Widgets", "25.00 USD", "Pending", "Balance", "TEST INVOICE"];
    let (text, language) = pdf_text(None);
    shows(&text, &english);
    assert_eq!(language, "en-us");

    let german =
        ["Rechnung 1001", "Rechnungsdatum", "Widgets", "12,50", "25,00 USD", "Ausstehend", "Saldo", "Fälligkeitsdatum"];
    for asked in ["de-DE", "de-CH;q=0.9, en;q=0.5", "German"] {
        let (text, language) = pdf_text(Some(asked));
        shows(&text, &german);
        assert!(!text.contains("Invoice date") && !text.contains("Balance"), "{asked}: no English label:\n{text}");
        assert_eq!(language, "de-de", "{asked}");
    }
    let (text, language) = pdf_text(Some("fr-CA,fr;q=0.9,en;q=0.8"));
    shows(&text, &["Facture 1001", "Date de facture", "25,00 USD", "En attente", "Solde"]);
    assert_eq!(language, "fr-fr");
    let (text, language) = pdf_text(Some("es-MX"));
    shows(&text, &["Factura 1001", "Fecha de factura", "25,00 USD", "Pendiente"]);
    assert_eq!(language, "es-es");
    // A language without a translation, an unknown name and a garbled value: en-US.
    for asked in ["ja-JP", "Danish", ";;q=x,,"] {
        let (text, language) = pdf_text(Some(asked));
        shows(&text, &english);
        assert_eq!(language, "en-us", "{asked}");
    }

    // Errors stay XML documents, in any language; a PDF is only an invoice's.
    for language in [None, Some("de-DE")] {
        let (code, head, body) = pdf_request("/v2/invoices/999", "application/pdf", language);
        assert_eq!(code, 404, "{head}");
        assert!(head.to_ascii_lowercase().contains("content-type: application/xml"), "{head}");
        assert!(String::from_utf8_lossy(&body).contains("<symbol>not_found</symbol>"), "{head}");
    }
    let (code, _, _) = pdf_request("/v2/accounts/a1", "application/pdf", Some("de-DE"));
    assert_eq!(code, 406);
    // XML is still what an XML client gets.
    let r = get(&s, "2.11", "/v2/invoices/1001");
    status(&r, 200);
    has(&r, "<invoice href=");
}

#[test]
fn invoices_download_as_pdf() {
    on_both_backends("invoices_pdf", pdf_scenario);
}

#[test]
fn manual_invoices_are_past_due_after_their_net_terms() {
    on_both_backends("invoices_manual_due", manual_due_scenario);
}

#[test]
fn adjustments_are_invoiced_with_exact_totals_and_sequential_numbers() {
    on_both_backends("invoices", invoices_scenario);
}

/// Declining test cards and the code each declines with.
const DECLINES: &[(&str, &str, &str)] = &[
    ("4000000000000002", "declined", "soft"),
    ("4000000000000010", "fraud_address", "fraud"),
    ("4000000000000044", "fraud_advanced_verification", "fraud"),
    ("4000000000000051", "declined_card_number", "hard"),
    ("4000000000000069", "expired_card", "hard"),
    ("4000000000000077", "insufficient_funds", "soft"),
    ("4000000000000085", "fraud_gateway", "fraud"),
    ("4000000000000093", "fraud_ip_address", "fraud"),
    ("4000000000001190", "fraud_risk_check", "fraud"),
    ("4000000000000101", "fraud_security_code", "fraud"),
    ("4000000000000119", "call_issuer", "soft"),
    ("4000000000000200", "invalid_data", "hard"),
    ("4000000000000226", "declined_expiration_date", "hard"),
    ("4000000000000309", "gateway_timeout", "communication"),
    ("4000000000000317", "duplicate_transaction", "duplicate"),
    ("4000000000000325", "card_type_not_accepted", "hard"),
    ("4000000000000341", "declined_saveable", "soft"),
    ("4000000000003220", "three_d_secure_action_required", "three_d_secure_action_required"),
];

fn transaction_body(code: &str, amount: i64, billing: &str) -> String {
    format!(
        "<transaction><amount_in_cents>{amount}</amount_in_cents><currency>USD</currency>\
         <description>Consulting</description><account><account_code>{code}</account_code>\
         <email>{code}@example.com</email>{billing}</account></transaction>"
    )
}

fn token_billing(s: &Server, number: &str) -> String {
    format!("<billing_info><token_id>{}</token_id></billing_info>", card_token(s, number))
}

fn transactions_scenario(db: &str) {
    let s = serve(db);
    // Approved: the account is created and keeps the card as its billing info.
    let r = post(&s, "2.11", "/v2/transactions", &transaction_body("t1", 1500, &token_billing(&s, "4111111111111111")));
    status(&r, 201);
    let uuid = tag(&r.body, "uuid").expect("uuid").to_owned();
    assert_eq!(r.header("location"), Some(format!("http://{}/v2/transactions/{uuid}", s.addr)));
    has(&r, "<transaction href=");
    has(&r, "type=\"credit_card\"");
    has(&r, "<status>success</status>");
    has(&r, "<action>purchase</action>");
    has(&r, "<amount_in_cents type=\"integer\">1500</amount_in_cents>");
    has(&r, "<last_four>1111</last_four>");
    has(&r, &format!("<invoice href=\"http://{}/v2/invoices/1001\"/>", s.addr));
    has(&r, "<a name=\"refund\"");
    lacks(&r, "4111111111111111");
    let r = get(&s, "2.11", &format!("/v2/transactions/{uuid}"));
    status(&r, 200);
    has(&r, "<status>success</status>");
    let r = get(&s, "2.11", "/v2/accounts/t1/billing_info");
    status(&r, 200);
    has(&r, "<last_four>1111</last_four>");
    let r = get(&s, "2.9", "/v2/invoices/1001");
    has(&r, "<state>collected</state>");
    has(&r, "<origin>one_time</origin>");
    has(&r, "<description>Consulting</description>");
    has(&r, &format!("<transaction href=\"http://{}/v2/transactions/{uuid}\"", s.addr));

    // A second charge uses the stored billing info.
    let r = post(&s, "2.11", "/v2/transactions", &transaction_body("t1", 700, ""));
    status(&r, 201);
    has(&r, "<status>success</status>");

    // Without billing info.
    let r = post(&s, "2.11", "/v2/transactions", &transaction_body("t2", 700, ""));
    assert_error(&r, 400, "billing_info_required");
    let r = post(&s, "2.11", "/v2/transactions", "<transaction><currency>USD</currency></transaction>");
    status(&r, 422);
    has(&r, "field=\"transaction.amount_in_cents\"");

    // Every decline answers the transaction error document and is stored.
    for (i, (number, code, category)) in DECLINES.iter().enumerate() {
        let account = format!("d{i}");
        let r = post(&s, "2.11", "/v2/transactions", &transaction_body(&account, 1000, &token_billing(&s, number)));
        status(&r, 422);
        assert_eq!(tag(&r.body, "error_code"), Some(*code), "{number}: {}", r.body);
        assert_eq!(tag(&r.body, "error_category"), Some(*category), "{number}");
        has(&r, "<errors>");
        has(&r, "<status>declined</status>");
        has(&r, "<failure_type>declined</failure_type>");
        if *code == "fraud_security_code" {
            has(&r, "field=\"transaction.account.billing_info.verification_value\" symbol=\"declined_bad\"");
            has(&r, "<cvv_result code=\"N\">No Match</cvv_result>");
        } else {
            has(&r, "field=\"transaction.base\" symbol=\"declined\"");
        }
        has(&r, &format!("<first_six>{}</first_six>", &number[..6]));
        has(&r, &format!("<last_four>{}</last_four>", &number[number.len() - 4..]));
        let uuid = tag_after(&r.body, "<transaction ", "uuid").expect("uuid").to_owned();
        let stored = get(&s, "2.11", &format!("/v2/transactions/{uuid}"));
        status(&stored, 200);
        has(&stored, "<status>declined</status>");
        assert_eq!(tag(&stored.body, "error_code"), Some(*code));
        // The card becomes billing info only when the gateway keeps it despite the decline.
        let billing = get(&s, "2.11", &format!("/v2/accounts/{account}/billing_info"));
        assert_eq!(billing.status, if *code == "declined_saveable" { 200 } else { 404 }, "{number}");
    }
    let declined = DECLINES.len() as i64;
    assert_eq!(count(&s, "/v2/transactions?state=failed&type=purchase"), declined);
    assert_eq!(count(&s, "/v2/transactions?state=successful&type=purchase"), 2);
    assert_eq!(count(&s, "/v2/accounts/t1/transactions"), 2);
    assert_eq!(count(&s, "/v2/invoices?state=failed"), declined);
    let r = get(&s, "2.11", "/v2/transactions?state=failed&per_page=2");
    status(&r, 200);
    assert_eq!(r.body.matches("<transaction href=").count(), 2);
    assert!(r.header("link").is_some_and(|l| l.contains("rel=\"next\"")), "{}", r.head);
    assert_error(&get(&s, "2.11", "/v2/transactions?state=pending"), 400, "invalid_parameter");

    // Billing info verifications are recorded too, and a declined one resolves.
    create_account(&s, "v1");
    let r = set_card(&s, "v1", "4000000000000077");
    status(&r, 422);
    let uuid = tag_after(&r.body, "<transaction ", "uuid").expect("uuid").to_owned();
    let r = get(&s, "2.11", &format!("/v2/transactions/{uuid}"));
    status(&r, 200);
    has(&r, "<action>verify</action>");
    has(&r, "<origin>api_verify_card</origin>");

    // The fraud reference from 2.10.
    let r = post(&s, "2.11", "/v2/transactions", &transaction_body("f1", 100, &token_billing(&s, "4222222222222220")));
    status(&r, 201);
    let uuid = tag(&r.body, "uuid").expect("uuid").to_owned();
    let r = get(&s, "2.10", &format!("/v2/transactions/{uuid}"));
    has(&r, "<fraud_info>");
    has(&r, "<reference>");
    let r = get(&s, "2.9", &format!("/v2/transactions/{uuid}"));
    has(&r, "<fraud>");
    lacks(&r, "<fraud_info>");

    // No card number reaches the database file.
    if let Some(path) = db.strip_prefix("sqlite://") {
        for suffix in ["", "-wal"] {
            let bytes = std::fs::read(format!("{path}{suffix}")).unwrap_or_default();
            let text = String::from_utf8_lossy(&bytes);
            for (number, _, _) in DECLINES.iter().chain([&("4111111111111111", "", "")]) {
                assert!(!text.contains(number), "{number} in the database{suffix}");
            }
        }
    }
}

#[test]
fn one_off_transactions_approve_and_every_decline_is_stored() {
    on_both_backends("transactions", transactions_scenario);
}

fn dunning_scenario(db: &str) {
    let s = serve(db);
    // A card the gateway keeps although it declines.
    create_account(&s, "p1");
    status(&set_card(&s, "p1", "4000000000000341"), 422);
    status(&get(&s, "2.11", "/v2/accounts/p1/billing_info"), 200);
    status(&adjustment(&s, "p1", 5000, 1, "Service"), 201);
    let r = post(&s, "2.11", "/v2/accounts/p1/invoices", "");
    status(&r, 201);
    has(&r, "<state>past_due</state>");
    has(&r, &format!("<attempt_next_collection_at type=\"datetime\">{}</attempt_next_collection_at>", iso(T0 + DAY)));
    has(&r, "<status>declined</status>");
    let number = tag(&r.body, "invoice_number").expect("number").to_owned();
    assert_eq!(count(&s, "/v2/invoices?state=past_due"), 1);
    let r = get(&s, "2.11", "/v2/accounts/p1");
    has(&r, "<has_past_due_invoice type=\"boolean\">true</has_past_due_invoice>");

    // The customer updates the card; the retry a day later collects.
    status(&set_card(&s, "p1", "4111111111111111"), 200);
    advance(&s, "3 days");
    let r = get(&s, "2.11", "/v2/accounts/p1");
    has(&r, "<has_past_due_invoice type=\"boolean\">false</has_past_due_invoice>");
    let r = get(&s, "2.11", &format!("/v2/invoices/{number}"));
    has(&r, "<state>paid</state>");
    has(&r, &format!("<closed_at type=\"datetime\">{}</closed_at>", iso(T0 + DAY)));
    has(&r, "<attempt_next_collection_at type=\"datetime\" nil=\"nil\"></attempt_next_collection_at>");
    assert_eq!(r.body.matches("<status>declined</status>").count(), 1, "{}", r.body);
    assert_eq!(r.body.matches("<status>success</status>").count(), 1, "{}", r.body);
    has(&r, "<recurring type=\"boolean\">true</recurring>");
    // The paid invoice is not retried again.
    advance(&s, "10 days");
    let r = get(&s, "2.11", &format!("/v2/invoices/{number}"));
    assert_eq!(r.body.matches("<transaction href=").count(), 2, "{}", r.body);

    // A card that keeps declining: retried 1, 3, 5 and 7 days after, then failed.
    create_account(&s, "p2");
    status(&set_card(&s, "p2", "4000000000000341"), 422);
    status(&adjustment(&s, "p2", 2500, 1, "Service"), 201);
    let r = post(&s, "2.9", "/v2/accounts/p2/invoices", "");
    status(&r, 201);
    has(&r, "<state>past_due</state>");
    let number = tag(&r.body, "invoice_number").expect("number").to_owned();
    let created = T0 + 13 * DAY;
    advance(&s, "4 days");
    let r = get(&s, "2.11", &format!("/v2/invoices/{number}"));
    has(&r, "<state>past_due</state>");
    has(
        &r,
        &format!(
            "<attempt_next_collection_at type=\"datetime\">{}</attempt_next_collection_at>",
            iso(created + 5 * DAY)
        ),
    );
    assert_eq!(r.body.matches("<status>declined</status>").count(), 3, "{}", r.body);
    advance(&s, "4 days");
    let r = get(&s, "2.9", &format!("/v2/invoices/{number}"));
    has(&r, "<state>failed</state>");
    has(&r, &format!("<closed_at type=\"datetime\">{}</closed_at>", iso(created + 7 * DAY)));
    assert_eq!(r.body.matches("<status>declined</status>").count(), 5, "{}", r.body);
    lacks(&r, "<a name=\"mark_successful\"");

    // No billing info: past due with retries and no transaction, then failed.
    create_account(&s, "p3");
    status(&adjustment(&s, "p3", 300, 1, "Service"), 201);
    let r = post(&s, "2.11", "/v2/accounts/p3/invoices", "");
    status(&r, 201);
    has(&r, "<state>past_due</state>");
    lacks(&r, "<transaction href=");
    let number = tag(&r.body, "invoice_number").expect("number").to_owned();
    advance(&s, "8 days");
    let r = get(&s, "2.11", &format!("/v2/invoices/{number}"));
    has(&r, "<state>failed</state>");

    // Collect now: a declined attempt answers the decline; mark_successful settles.
    create_account(&s, "p4");
    status(&set_card(&s, "p4", "4000000000000341"), 422);
    status(&adjustment(&s, "p4", 900, 1, "Service"), 201);
    let r = post(&s, "2.11", "/v2/accounts/p4/invoices", "");
    let number = tag(&r.body, "invoice_number").expect("number").to_owned();
    let r = authed(&s, "PUT", &format!("/v2/invoices/{number}/collect"), &[("X-Api-Version", "2.11")], "");
    status(&r, 422);
    has(&r, "<error_code>declined_saveable</error_code>");
    status(&set_card(&s, "p4", "5555555555554444"), 200);
    // From 2.10 collect answers an invoice collection: the charge invoice, no credit invoices.
    let r = authed(&s, "PUT", &format!("/v2/invoices/{number}/collect"), &[("X-Api-Version", "2.11")], "");
    status(&r, 200);
    assert!(r.body.contains("?>\n<invoice_collection>\n  <charge_invoice href="), "{}", r.body);
    let charge = format!("<charge_invoice href=\"http://{}/v2/invoices/{number}\">", s.addr);
    has(&r, &charge);
    has(&r, &format!("<invoice_number type=\"integer\">{number}</invoice_number>"));
    assert_eq!(tag_after(&r.body, &charge, "state"), Some("paid"), "{}", r.body);
    has(&r, "<status>success</status>");
    has(&r, "<credit_invoices type=\"array\">\n  </credit_invoices>");
    assert_eq!(count(&s, "/v2/invoices?state=past_due"), 0);

    // Before 2.10 collect answers the invoice itself.
    create_account(&s, "p5");
    status(&set_card(&s, "p5", "4000000000000341"), 422);
    status(&adjustment(&s, "p5", 700, 1, "Service"), 201);
    let r = post(&s, "2.9", "/v2/accounts/p5/invoices", "");
    status(&r, 201);
    has(&r, "<state>past_due</state>");
    let number = tag(&r.body, "invoice_number").expect("number").to_owned();
    status(&set_card(&s, "p5", "4111111111111111"), 200);
    let r = authed(&s, "PUT", &format!("/v2/invoices/{number}/collect"), &[("X-Api-Version", "2.9")], "");
    status(&r, 200);
    assert!(r.body.contains(&format!("?>\n<invoice href=\"http://{}/v2/invoices/{number}\">", s.addr)), "{}", r.body);
    has(&r, "<state>collected</state>");
    has(&r, "<total_in_cents type=\"integer\">700</total_in_cents>");
    lacks(&r, "<invoice_collection>");
    lacks(&r, "<charge_invoice");
    assert_eq!(count(&s, "/v2/invoices?state=past_due"), 0);
}

#[test]
fn declined_invoices_are_retried_until_paid_or_failed() {
    on_both_backends("dunning", dunning_scenario);
}

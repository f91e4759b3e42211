//! Offline payments over HTTP against `rebill serve`, on SQLite and on PostgreSQL:
//! `POST /v2/invoices/{n}/transactions` answers 201 with `Location` and the transaction (root
//! `type` = payment method, no gateway), a partial payment leaves the invoice pending and the
//! rest pays it (`collected` before 2.10, `paid` from 2.10, both transactions on it), the
//! shapes at 2.4, 2.9 and 2.11, and every refusal's document.

use rebill_testkit::*;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;
const DAY: i64 = 86_400;

#[track_caller]
fn has(reply: &Reply, text: &str) {
    assert!(reply.body.contains(text), "expected {text} in\n{}", reply.body);
}

#[track_caller]
fn lacks(reply: &Reply, text: &str) {
    assert!(!reply.body.contains(text), "did not expect {text} in\n{}", reply.body);
}

fn get(s: &Server, version: &str, path: &str) -> Reply {
    authed(s, "GET", path, &[("X-Api-Version", version)], "")
}

fn post(s: &Server, version: &str, path: &str, body: &str) -> Reply {
    authed(s, "POST", path, &xml_at(version), body)
}

fn iso(t: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp(t, 0)
        .expect("time")
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A new account `code` with one invoice of `cents`, collected as `collection_method` says;
/// answers the invoice's number.
fn invoice(s: &Server, code: &str, cents: i64, collection_method: &str) -> String {
    let body = format!("<account><account_code>{code}</account_code><email>{code}@example.com</email></account>");
    ok(post(s, "2.11", "/v2/accounts", &body), 201);
    let body = format!(
        "<adjustment><description>Consulting</description><unit_amount_in_cents>{cents}</unit_amount_in_cents>\
         <currency>USD</currency></adjustment>"
    );
    ok(post(s, "2.11", &format!("/v2/accounts/{code}/adjustments"), &body), 201);
    let body = format!(
        "<invoice><collection_method>{collection_method}</collection_method>\
         <net_terms type=\"integer\">30</net_terms></invoice>"
    );
    let r = ok(post(s, "2.9", &format!("/v2/accounts/{code}/invoices"), &body), 201);
    field(&r.body, "invoice_number")
}

fn pay(s: &Server, version: &str, number: &str, body: &str) -> Reply {
    post(s, version, &format!("/v2/invoices/{number}/transactions"), body)
}

/// Asserts a 422 `<errors>` document with one error on `field` with `symbol`.
#[track_caller]
fn refused(reply: &Reply, field: &str, symbol: &str) {
    assert_eq!(reply.status, 422, "{}\n{}", reply.head, reply.body);
    has(reply, "<errors>");
    has(reply, &format!("<error field=\"{field}\" symbol=\"{symbol}\""));
}

fn scenario(db: &str) {
    let s = start_with(db, Options { clock: Some(T0), ..Options::default() });
    let number = invoice(&s, "o1", 5000, "manual");
    let base = format!("http://{}", s.addr);

    // A partial payment by check, collected yesterday.
    let collected = T0 - DAY;
    let body = format!(
        "<transaction><payment_method>check</payment_method><amount_in_cents type=\"integer\">2000</amount_in_cents>\
         <collected_at type=\"datetime\">{}</collected_at><description>Check 1234</description></transaction>",
        iso(collected)
    );
    let r = ok(pay(&s, "2.11", &number, &body), 201);
    let uuid = field(&r.body, "uuid");
    assert_eq!(r.header("location"), Some(format!("{base}/v2/transactions/{uuid}")));
    has(&r, &format!("<transaction href=\"{base}/v2/transactions/{uuid}\" type=\"check\">"));
    has(&r, &format!("<account href=\"{base}/v2/accounts/o1\"/>"));
    has(&r, &format!("<invoice href=\"{base}/v2/invoices/{number}\"/>"));
    has(&r, "<action>purchase</action>");
    has(&r, "<amount_in_cents type=\"integer\">2000</amount_in_cents>");
    has(&r, "<currency>USD</currency>");
    has(&r, "<status>success</status>");
    has(&r, "<payment_method>check</payment_method>");
    has(&r, "<source>transaction</source>");
    has(&r, "<origin>api</origin>");
    has(&r, "<message>Manually entered transaction</message>");
    has(&r, "<description>Check 1234</description>");
    has(&r, "<gateway_type nil=\"nil\"></gateway_type>");
    has(&r, "<test type=\"boolean\">true</test>");
    has(&r, "<recurring type=\"boolean\">false</recurring>");
    has(&r, "<voidable type=\"boolean\">false</voidable>");
    has(&r, "<refundable type=\"boolean\">true</refundable>");
    has(&r, &format!("<collected_at type=\"datetime\">{}</collected_at>", iso(collected)));
    has(&r, &format!("<created_at type=\"datetime\">{}</created_at>", iso(T0)));
    has(&r, "<account_code>o1</account_code>");
    has(&r, &format!("<a name=\"refund\" href=\"{base}/v2/transactions/{uuid}\" method=\"delete\"/>"));
    lacks(&r, "<transaction_error");
    lacks(&r, "<fraud");

    // The transaction reads back the same; the invoice is still pending with it.
    let read = ok(get(&s, "2.11", &format!("/v2/transactions/{uuid}")), 200);
    assert_eq!(read.body, r.body, "the transaction as entered is the transaction as read");
    let i = ok(get(&s, "2.11", &format!("/v2/invoices/{number}")), 200);
    has(&i, "<state>pending</state>");
    has(&i, &format!("<transaction href=\"{base}/v2/transactions/{uuid}\" type=\"check\">"));
    has(&i, "<a name=\"mark_successful\"");
    assert_eq!(count(&s, "/v2/accounts/o1/transactions"), 1);

    // The rest at 2.9, without an amount, by wire transfer: the invoice is collected.
    let body = "<transaction><payment_method>wire_transfer</payment_method><currency>USD</currency></transaction>";
    let r = ok(pay(&s, "2.9", &number, body), 201);
    let wire = field(&r.body, "uuid");
    assert_eq!(r.header("location"), Some(format!("{base}/v2/transactions/{wire}")));
    has(&r, "type=\"wire_transfer\">");
    has(&r, "<amount_in_cents type=\"integer\">3000</amount_in_cents>");
    has(&r, "<description nil=\"nil\"></description>");
    has(&r, &format!("<collected_at type=\"datetime\">{}</collected_at>", iso(T0)));
    let i = ok(get(&s, "2.9", &format!("/v2/invoices/{number}")), 200);
    has(&i, "<state>collected</state>");
    has(&i, &format!("<closed_at type=\"datetime\">{}</closed_at>", iso(T0)));
    assert_eq!(i.body.matches("<transaction href=").count(), 2, "{}", i.body);
    has(&i, &format!("<transaction href=\"{base}/v2/transactions/{uuid}\" type=\"check\">"));
    has(&i, &format!("<transaction href=\"{base}/v2/transactions/{wire}\" type=\"wire_transfer\">"));
    lacks(&i, "<a name=\"mark_successful\"");
    let i = ok(get(&s, "2.11", &format!("/v2/invoices/{number}")), 200);
    has(&i, "<state>paid</state>");
    assert_eq!(count(&s, "/v2/invoices?state=paid"), 1);
    assert_eq!(count(&s, "/v2/accounts/o1/transactions"), 2);

    // A paid invoice takes nothing more.
    let body = "<transaction><payment_method>check</payment_method></transaction>";
    refused(&pay(&s, "2.11", &number, body), "transaction.base", "invalid_transition");

    // Before 2.5 the transaction has no gateway, origin, message or description elements.
    let old = invoice(&s, "o2", 700, "manual");
    let r = ok(pay(&s, "2.4", &old, "<transaction><payment_method>money_order</payment_method></transaction>"), 201);
    has(&r, "type=\"money_order\">");
    has(&r, "<amount_in_cents type=\"integer\">700</amount_in_cents>");
    for element in ["<gateway_type", "<origin>", "<message>", "<description"] {
        lacks(&r, element);
    }
    has(&ok(get(&s, "2.4", &format!("/v2/invoices/{old}")), 200), "<state>collected</state>");

    // Refusals.
    let open = invoice(&s, "o3", 1000, "manual");
    let check = "<transaction><payment_method>check</payment_method></transaction>";
    assert_error(&pay(&s, "2.11", "999999", check), 404, "not_found");
    assert_error(&pay(&s, "2.11", "abc", check), 404, "not_found");
    refused(&pay(&s, "2.11", &open, "<transaction></transaction>"), "transaction.payment_method", "blank");
    refused(&pay(&s, "2.11", &open, ""), "transaction.payment_method", "blank");
    let r = pay(&s, "2.11", &open, "<transaction><payment_method>bitcoin</payment_method></transaction>");
    refused(&r, "transaction.payment_method", "invalid");
    has(&r, "is not one of credit_card, paypal, eft, wire_transfer, money_order, check, other");
    let long = format!(
        "<transaction><payment_method>check</payment_method><description>{}</description></transaction>",
        "d".repeat(51)
    );
    refused(&pay(&s, "2.11", &open, &long), "transaction.description", "too_long");
    let amount = |cents: i64| {
        format!(
            "<transaction><payment_method>check</payment_method>\
             <amount_in_cents type=\"integer\">{cents}</amount_in_cents></transaction>"
        )
    };
    refused(&pay(&s, "2.11", &open, &amount(0)), "transaction.amount_in_cents", "greater_than");
    refused(&pay(&s, "2.11", &open, &amount(-5)), "transaction.amount_in_cents", "greater_than");
    let r = pay(&s, "2.11", &open, &amount(1001));
    refused(&r, "transaction.amount_in_cents", "less_than_or_equal_to");
    has(&r, "must be less than or equal to the invoice's balance (1000)");
    let euros = "<transaction><payment_method>check</payment_method><currency>EUR</currency></transaction>";
    refused(&pay(&s, "2.11", &open, euros), "transaction.currency", "invalid");
    let other = "<transaction><payment_method>check</payment_method><accounting_code>x</accounting_code></transaction>";
    refused(&pay(&s, "2.11", &open, other), "transaction.accounting_code", "not_supported");
    assert_error(&pay(&s, "2.11", &open, "<transaction><color>red</color></transaction>"), 400, "invalid_xml");
    // An automatically collected invoice (past due: the account has no billing info).
    let automatic = invoice(&s, "o4", 800, "automatic");
    refused(&pay(&s, "2.11", &automatic, check), "transaction.base", "invalid_collection_method");
    // A failed invoice, and a refund invoice of a site without Credit Memos (a credit).
    let failed = invoice(&s, "o5", 900, "manual");
    ok(authed(&s, "PUT", &format!("/v2/invoices/{failed}/mark_failed"), &[("X-Api-Version", "2.11")], ""), 200);
    refused(&pay(&s, "2.11", &failed, check), "transaction.base", "invalid_transition");
    let credit = invoice(&s, "o6", -400, "manual");
    refused(&pay(&s, "2.11", &credit, check), "transaction.base", "invalid_transition");
    // Nothing was written by any refusal.
    assert_eq!(count(&s, "/v2/accounts/o3/transactions"), 0);
    has(&ok(get(&s, "2.11", &format!("/v2/invoices/{open}")), 200), "<state>pending</state>");
    assert_eq!(count(&s, "/v2/transactions"), 3);
}

fn count(s: &Server, path: &str) -> i64 {
    let r = ok(authed(s, "HEAD", path, &[("X-Api-Version", "2.11")], ""), 200);
    r.header("x-records").and_then(|v| v.parse().ok()).expect("X-Records")
}

#[test]
fn offline_payments_pay_manual_invoices() {
    on_both_backends("offline", scenario);
}

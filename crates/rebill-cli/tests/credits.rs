//! Credit invoices and credit payments end to end over HTTP against `rebill serve`, on SQLite
//! and on PostgreSQL, on a site with Credit Memos (made with the CLI) and on one without: a
//! credit adjustment invoiced becomes a credit invoice (open, negative balance, the collection's
//! credit invoice) or a legacy one (paid); the account's renewal moved on by the sandbox clock,
//! and an invoice of pending charges, are paid by the credit through credit payments, to the
//! cent; voids in full and in part (refusals, 404 without Credit Memos or below 2.10); the credit
//! payment endpoints; the account balance netting credit; the original and credit invoice lists
//! and credit adjustments; and the same reads at 2.9 (old names, no Credit Memos elements) and
//! 2.11.

use rebill_testkit::*;
use serde_json::Value;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;

/// A site of the server, by its keys.
struct Site<'a> {
    s: &'a Server,
    key: String,
    public_key: String,
    credit_memos: bool,
}

impl Site<'_> {
    fn base(&self) -> String {
        format!("http://{}", self.s.addr)
    }

    fn send(&self, method: &str, version: &str, path: &str, body: &str) -> Reply {
        authed_with(self.s, &self.key, method, path, &xml_at(version), body)
    }

    fn get(&self, version: &str, path: &str) -> Reply {
        authed_with(self.s, &self.key, "GET", path, &[("X-Api-Version", version)], "")
    }

    fn count(&self, path: &str) -> i64 {
        let r = authed_with(self.s, &self.key, "HEAD", path, &[("X-Api-Version", "2.11")], "");
        status(&r, 200);
        r.header("x-records").and_then(|v| v.parse().ok()).expect("X-Records")
    }

    /// A card token made with the site's public key.
    fn card_token(&self, number: &str) -> String {
        let body = format!(
            "key={}&number={number}&month=12&year=2031&cvv=123&first_name=Verena&last_name=Example\
             &address1=123+Main+St.&city=San+Francisco&state=CA&postal_code=94105&country=US",
            self.public_key
        );
        let headers = [("Content-Type", "application/x-www-form-urlencoded")];
        let reply = request(self.s, "POST", "/js/v1/token", &headers, &body);
        status(&reply, 200);
        let value: Value = serde_json::from_str(&reply.body).expect("json");
        value["id"].as_str().expect("id").to_owned()
    }

    fn advance(&self, amount: &str) {
        let headers = [("Content-Type", "application/xml; charset=utf-8")];
        let body = format!("<clock><advance>{amount}</advance></clock>");
        status(&authed_with(self.s, &self.key, "POST", "/sandbox/clock", &headers, &body), 200);
    }

    fn adjustment(&self, code: &str, cents: i64, description: &str) -> Reply {
        let body = format!(
            "<adjustment><description>{description}</description><unit_amount_in_cents>{cents}</unit_amount_in_cents>\
             <currency>USD</currency></adjustment>"
        );
        let r = self.send("POST", "2.11", &format!("/v2/accounts/{code}/adjustments"), &body);
        status(&r, 201);
        r
    }

    /// Invoices the account's pending adjustments at `version`.
    fn invoice_pending(&self, code: &str, version: &str) -> Reply {
        let r = self.send("POST", version, &format!("/v2/accounts/{code}/invoices"), "");
        status(&r, 201);
        r
    }

    /// The account balance document with these USD cents.
    fn balance_document(&self, code: &str, past_due: bool, cents: i64) -> String {
        let base = self.base();
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<account_balance href=\"{base}/v2/accounts/{code}/balance\">\n  \
             <account href=\"{base}/v2/accounts/{code}\"/>\n  <past_due type=\"boolean\">{past_due}</past_due>\n  \
             <balance_in_cents>\n    <USD type=\"integer\">{cents}</USD>\n  </balance_in_cents>\n</account_balance>\n"
        )
    }

    #[track_caller]
    fn assert_balance(&self, code: &str, past_due: bool, cents: i64) {
        for version in ["2.9", "2.11"] {
            let r = self.get(version, &format!("/v2/accounts/{code}/balance"));
            assert_eq!((r.status, r.body.as_str()), (200, self.balance_document(code, past_due, cents).as_str()));
        }
    }
}

#[track_caller]
fn status(reply: &Reply, code: u16) {
    assert_eq!(reply.status, code, "{}\n{}", reply.head, reply.body);
}

#[track_caller]
fn has(reply: &Reply, text: &str) {
    assert!(reply.body.contains(text), "expected {text} in\n{}", reply.body);
}

#[track_caller]
fn lacks(reply: &Reply, text: &str) {
    assert!(!reply.body.contains(text), "did not expect {text} in\n{}", reply.body);
}

/// The body from the first `<name` element on (to read the fields of a nested element).
fn from<'a>(body: &'a str, name: &str) -> &'a str {
    body.find(&format!("<{name}")).map_or("", |i| &body[i..])
}

/// The elements `<name …>…</name>` of a body, in order.
fn elements<'a>(body: &'a str, name: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{name} "), format!("</{name}>"));
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(i) = rest.find(&open) {
        let Some(j) = rest[i..].find(&close) else { break };
        out.push(&rest[i..i + j + close.len()]);
        rest = &rest[i + j + close.len()..];
    }
    out
}

fn cents(name: &str, value: i64) -> String {
    format!("<{name} type=\"integer\">{value}</{name}>")
}

/// The credit of one site: credit invoiced, used by a renewal and an invoice of pending
/// charges, voided (with Credit Memos), listed and read at 2.9 and 2.11.
fn credit_scenario(site: &Site) {
    let base = site.base();
    let cm = site.credit_memos;
    let plan = "<plan><plan_code>gold</plan_code><name>Gold</name>\
                <unit_amount_in_cents><USD>1000</USD></unit_amount_in_cents></plan>";
    status(&site.send("POST", "2.11", "/v2/plans", plan), 201);
    let token = site.card_token("4111111111111111");
    let body = format!(
        "<subscription><plan_code>gold</plan_code><currency>USD</currency>\
         <account><account_code>c1</account_code><email>c1@example.com</email>\
         <billing_info><token_id>{token}</token_id></billing_info></account></subscription>"
    );
    status(&site.send("POST", "2.11", "/v2/subscriptions", &body), 201);
    site.assert_balance("c1", false, 0);

    // A credit of 3.00 invoiced: invoice 1002 holds it.
    let credit = site.adjustment("c1", -300, "Goodwill");
    has(&credit, "type=\"credit\"");
    let r = site.invoice_pending("c1", "2.11");
    assert_eq!(r.header("location"), Some(format!("{base}/v2/invoices/1002")));
    has(&r, "<invoice_collection>");
    if cm {
        // The collection's one credit invoice, no charge invoice.
        has(&r, "<charge_invoice nil=\"nil\"></charge_invoice>");
        let made = from(&r.body, "credit_invoice ");
        assert!(made.starts_with(&format!("<credit_invoice href=\"{base}/v2/invoices/1002\">")), "{}", r.body);
        for expected in [
            "<state>open</state>".to_owned(),
            "<type>credit</type>".to_owned(),
            // Posted credits: origin `credit`.
            "<origin>credit</origin>".to_owned(),
            cents("total_in_cents", -300),
            cents("balance_in_cents", -300),
            // Its balance can be paid out (as an external refund: no card paid for it).
            cents("refundable_total_in_cents", 300),
            format!("<a name=\"void\" href=\"{base}/v2/invoices/1002/void\" method=\"put\"/>"),
            format!("<a name=\"refund\" href=\"{base}/v2/invoices/1002/refund\" method=\"post\"/>"),
            format!("<original_invoices href=\"{base}/v2/invoices/1002/original_invoices\"/>"),
        ] {
            assert!(made.contains(&expected), "{expected} in {made}");
        }
        assert!(!made.contains("name=\"mark_successful\""), "{made}");
    } else {
        // A legacy invoice: paid, its negative total the credit; the collection's charge invoice.
        let made = from(&r.body, "charge_invoice ");
        assert!(made.starts_with(&format!("<charge_invoice href=\"{base}/v2/invoices/1002\">")), "{}", r.body);
        assert!(made.contains("<state>paid</state>") && made.contains(&cents("total_in_cents", -300)), "{made}");
        for absent in ["<type>", "<balance_in_cents", "name=\"void\"", "name=\"refund\"", "<credit_invoice "] {
            lacks(&r, absent);
        }
    }
    site.assert_balance("c1", false, -300);
    // A preview of more credit shows a credit invoice too, nothing written.
    site.adjustment("c1", -50, "Preview only");
    let preview = site.send("POST", "2.11", "/v2/accounts/c1/invoices/preview", "");
    status(&preview, 200);
    if cm {
        has(&preview, "<charge_invoice nil=\"nil\"></charge_invoice>");
        has(&preview, "<credit_invoice>");
        has(&preview, &cents("balance_in_cents", -50));
        has(&preview, "<origin>credit</origin>");
    } else {
        has(&preview, "<charge_invoice>");
        has(&preview, &cents("total_in_cents", -50));
    }
    let pending = site.get("2.11", "/v2/accounts/c1/adjustments?state=pending");
    let pending_uuid = tag(&pending.body, "uuid").expect("pending credit");
    status(&site.send("DELETE", "2.11", &format!("/v2/adjustments/{pending_uuid}"), ""), 204);

    // The renewal a month later: 10.00, 3.00 of it paid by the credit, the card charged 7.00.
    site.advance("1month");
    let r = site.get("2.11", "/v2/invoices/1003");
    status(&r, 200);
    for expected in [
        "<state>paid</state>".to_owned(),
        cents("total_in_cents", 1000),
        cents("refundable_total_in_cents", 1000),
        format!("<a name=\"refund\" href=\"{base}/v2/invoices/1003/refund\" method=\"post\"/>"),
    ] {
        has(&r, &expected);
    }
    if cm {
        has(&r, &cents("balance_in_cents", 0));
        has(&r, "<type>charge</type>");
        has(&r, "<origin>renewal</origin>");
        has(&r, &format!("<credit_invoices href=\"{base}/v2/invoices/1003/credit_invoices\"/>"));
    }
    let transactions = elements(&r.body, "transaction");
    assert_eq!(transactions.len(), 1, "{}", r.body);
    assert!(transactions[0].contains(&cents("amount_in_cents", 700)), "{}", transactions[0]);
    assert!(transactions[0].contains("<status>success</status>"), "{}", transactions[0]);
    let payments = elements(&r.body, "credit_payment");
    assert_eq!(payments.len(), 1, "{}", r.body);
    let payment = payments[0];
    for expected in [
        "<action>payment</action>".to_owned(),
        cents("amount_in_cents", 300),
        "<currency>USD</currency>".to_owned(),
        format!("<original_invoice href=\"{base}/v2/invoices/1002\"/>"),
        format!("<applied_to_invoice href=\"{base}/v2/invoices/1003\"/>"),
        format!("<account href=\"{base}/v2/accounts/c1\"/>"),
        "<voided_at type=\"datetime\" nil=\"nil\"></voided_at>".to_owned(),
    ] {
        assert!(payment.contains(&expected), "{expected} in {payment}");
    }
    let renewal_payment = tag(payment, "uuid").expect("uuid");
    // The credit is used up: closed (Credit Memos) or a legacy invoice still paid.
    let r = site.get("2.11", "/v2/invoices/1002");
    if cm {
        has(&r, "<state>closed</state>");
        has(&r, &cents("balance_in_cents", 0));
        lacks(&r, "name=\"void\"");
        has(&r, &format!("<credit_payment href=\"{base}/v2/credit_payments/{renewal_payment}\">"));
    } else {
        has(&r, "<state>paid</state>");
    }
    site.assert_balance("c1", false, 0);

    // The credit payment endpoints (2.10).
    let r = site.get("2.11", &format!("/v2/credit_payments/{renewal_payment}"));
    status(&r, 200);
    assert!(
        r.body.contains(&format!("<credit_payment href=\"{base}/v2/credit_payments/{renewal_payment}\">")),
        "{}",
        r.body
    );
    has(&r, &cents("amount_in_cents", 300));
    assert_error(&site.get("2.11", "/v2/credit_payments/nope"), 404, "not_found");
    assert_error(&site.get("2.9", &format!("/v2/credit_payments/{renewal_payment}")), 404, "not_found");
    assert_error(&site.get("2.9", "/v2/credit_payments"), 404, "not_found");
    assert_eq!(site.count("/v2/credit_payments"), 1);
    assert_eq!(site.count("/v2/accounts/c1/credit_payments"), 1);
    let r = site.get("2.10", "/v2/accounts/c1/credit_payments");
    status(&r, 200);
    has(&r, "<credit_payments type=\"array\">");
    assert_error(&site.get("2.11", "/v2/accounts/nobody/credit_payments"), 404, "not_found");

    // An invoice of pending charges paid by credit: a credit of 5.00, then a charge of 2.00
    // paid in full by it, nothing charged.
    site.adjustment("c1", -500, "Refund of a fee");
    site.invoice_pending("c1", "2.11");
    site.assert_balance("c1", false, -500);
    let transactions = site.count("/v2/accounts/c1/transactions");
    site.adjustment("c1", 200, "Extra seat");
    let r = site.invoice_pending("c1", "2.11");
    let charge = from(&r.body, "charge_invoice ");
    assert!(charge.starts_with(&format!("<charge_invoice href=\"{base}/v2/invoices/1005\">")), "{}", r.body);
    assert!(charge.contains("<state>paid</state>") && charge.contains(&cents("total_in_cents", 200)), "{charge}");
    assert!(elements(charge, "transaction").is_empty(), "nothing charged: {charge}");
    let payments = elements(charge, "credit_payment");
    assert_eq!(payments.len(), 1, "{charge}");
    assert!(payments[0].contains(&cents("amount_in_cents", 200)), "{}", payments[0]);
    assert!(payments[0].contains(&format!("<original_invoice href=\"{base}/v2/invoices/1004\"/>")));
    site.assert_balance("c1", false, -300);
    assert_eq!(site.count("/v2/credit_payments"), 2);
    assert_eq!(site.count("/v2/accounts/c1/transactions"), transactions, "nothing charged");

    // Original and credit invoices, credit adjustments. A refund makes the links; here the
    // credit invoice 1004 is linked to the renewal 1003 it credits, and its line to the
    // renewal's charge, in the database.
    let renewal_line = tag(from(&site.get("2.11", "/v2/invoices/1003").body, "line_items"), "uuid").expect("line");
    let r = site.get("2.11", "/v2/invoices/1004");
    let credit_line = tag(from(&r.body, "line_items"), "uuid").expect("line");
    let db = &site.s.database;
    let site_id = format!("(SELECT site_id FROM invoices WHERE uuid = '{}')", field(&r.body, "uuid"));
    sql(
        db,
        &format!(
            "UPDATE invoices SET original_invoice_id = (SELECT id FROM invoices WHERE invoice_number = 1003 \
             AND site_id = {site_id}) WHERE invoice_number = 1004 AND site_id = {site_id}"
        ),
    );
    sql(
        db,
        &format!(
            "UPDATE adjustments SET original_adjustment_id = (SELECT id FROM adjustments WHERE uuid = '{renewal_line}') \
             WHERE uuid = '{credit_line}'"
        ),
    );
    let r = site.get("2.11", "/v2/invoices/1004/original_invoices");
    status(&r, 200);
    assert_eq!(r.header("x-records").as_deref(), Some("1"));
    assert_eq!(elements(&r.body, "invoice").len(), 1, "{}", r.body);
    has(&r, &format!("<invoice href=\"{base}/v2/invoices/1003\">"));
    let r = site.get("2.11", "/v2/invoices/1003/credit_invoices");
    status(&r, 200);
    assert_eq!(r.header("x-records").as_deref(), Some("1"));
    has(&r, &format!("<invoice href=\"{base}/v2/invoices/1004\">"));
    has(&r, &format!("<original_invoice href=\"{base}/v2/invoices/1003\"/>"));
    let r = site.get("2.11", "/v2/invoices/1003/original_invoices");
    assert_eq!((r.status, r.header("x-records").as_deref()), (200, Some("0")));
    assert_error(&site.get("2.11", "/v2/invoices/999/credit_invoices"), 404, "not_found");
    assert_error(&site.get("2.9", "/v2/invoices/1003/credit_invoices"), 404, "not_found");
    // What the renewal can still refund: 10.00 paid less the 5.00 credited.
    let r = site.get("2.11", "/v2/invoices/1003");
    has(&r, &cents("refundable_total_in_cents", 500));
    let r = site.get("2.11", &format!("/v2/adjustments/{renewal_line}/credit_adjustments"));
    status(&r, 200);
    assert_eq!(r.header("x-records").as_deref(), Some("1"));
    has(&r, &format!("<adjustment href=\"{base}/v2/adjustments/{credit_line}\" type=\"credit\">"));
    has(&r, &format!("<original_adjustment_uuid>{renewal_line}</original_adjustment_uuid>"));
    has(&r, &format!("<original_adjustment href=\"{base}/v2/adjustments/{renewal_line}\"/>"));
    let r = site.get("2.11", &format!("/v2/adjustments/{renewal_line}"));
    has(&r, &cents("refundable_total_in_cents", 500));
    has(&r, &format!("<credit_adjustments href=\"{base}/v2/adjustments/{renewal_line}/credit_adjustments\"/>"));
    assert_error(&site.get("2.11", "/v2/adjustments/nope/credit_adjustments"), 404, "not_found");

    // The same reads at 2.9: old state names, no Credit Memos elements.
    let r = site.get("2.9", "/v2/invoices/1004");
    status(&r, 200);
    has(&r, if cm { "<state>open</state>" } else { "<state>collected</state>" });
    for absent in ["<type>", "<balance_in_cents", "<credit_payments", "name=\"void\"", "<original_invoices"] {
        lacks(&r, absent);
    }
    has(&r, &format!("<original_invoice href=\"{base}/v2/invoices/1003\"/>"));
    let r = site.get("2.9", "/v2/invoices/1002");
    has(&r, "<state>collected</state>");
    let r = site.get("2.9", "/v2/invoices/1003");
    has(&r, "<state>collected</state>");
    lacks(&r, "<credit_payment");
    has(&r, &cents("refundable_total_in_cents", 500));
    let r = site.get("2.9", &format!("/v2/adjustments/{credit_line}"));
    lacks(&r, "<original_adjustment_uuid>");
    has(&r, &format!("<original_adjustment href=\"{base}/v2/adjustments/{renewal_line}\"/>"));
    let r = site.get("2.11", "/v2/invoices/1004");
    has(&r, if cm { "<state>open</state>" } else { "<state>paid</state>" });

    if !cm {
        // Without Credit Memos there is no void.
        assert_error(&site.send("PUT", "2.11", "/v2/invoices/1004/void", ""), 404, "not_found");
        return;
    }
    // Void: 1004 had 2.00 of its 5.00 used, the rest is voided and it closes.
    assert_error(&site.send("PUT", "2.9", "/v2/invoices/1004/void", ""), 404, "not_found");
    let r = site.send("PUT", "2.11", "/v2/invoices/1004/void", "");
    status(&r, 200);
    assert!(r.body.contains(&format!("<invoice href=\"{base}/v2/invoices/1004\">")), "{}", r.body);
    has(&r, "<state>closed</state>");
    has(&r, &cents("balance_in_cents", 0));
    lacks(&r, "name=\"void\"");
    let moved: Vec<(String, String)> = elements(&r.body, "credit_payment")
        .iter()
        .map(|p| (tag(p, "action").unwrap_or_default(), tag(p, "amount_in_cents").unwrap_or_default()))
        .collect();
    let expected = [("payment", "200"), ("reduction", "300")].map(|(a, c)| (a.to_owned(), c.to_owned()));
    assert_eq!(moved, expected, "{}", r.body);
    let reduction = elements(&r.body, "credit_payment")[1].to_owned();
    assert!(reduction.contains(&format!("<original_invoice href=\"{base}/v2/invoices/1004\"/>")), "{reduction}");
    assert!(reduction.contains(&format!("<applied_to_invoice href=\"{base}/v2/invoices/1004\"/>")), "{reduction}");
    site.assert_balance("c1", false, 0);
    // Voided whole: a credit nothing used.
    site.adjustment("c1", -250, "Apology");
    site.invoice_pending("c1", "2.11");
    let r = site.send("PUT", "2.11", "/v2/invoices/1006/void", "");
    status(&r, 200);
    has(&r, "<state>voided</state>");
    has(&r, &cents("total_in_cents", -250));
    has(&r, &cents("balance_in_cents", 0));
    // Pre-2.10 clients read a voided credit invoice as failed.
    has(&site.get("2.9", "/v2/invoices/1006"), "<state>failed</state>");
    assert_eq!(site.count("/v2/credit_payments"), 4);
    site.assert_balance("c1", false, 0);
    // Refused: voided, closed, a charge invoice; unknown.
    for number in ["1006", "1004", "1005"] {
        let r = site.send("PUT", "2.11", &format!("/v2/invoices/{number}/void"), "");
        status(&r, 422);
        has(&r, "<errors>");
        has(&r, "field=\"invoice.base\" symbol=\"not_voidable\"");
    }
    assert_error(&site.send("PUT", "2.11", "/v2/invoices/999/void", ""), 404, "not_found");
    // The credit payments of the account, newest first.
    let r = site.get("2.11", "/v2/accounts/c1/credit_payments?per_page=2");
    status(&r, 200);
    assert_eq!(r.header("x-records").as_deref(), Some("4"));
    assert_eq!(elements(&r.body, "credit_payment").len(), 2);
    assert!(r.header("link").is_some_and(|l| l.contains("rel=\"next\"")), "{}", r.head);
    has(&r, "<action>reduction</action>");
}

fn credits(db: &str) {
    let s = serve_at(db, T0, &[]);
    let made = s.cli_json(&["site", "create", "--name", "memos", "--credit-memos"]);
    assert_eq!(made["credit_memos"], true);
    let with = Site {
        s: &s,
        key: made["private_key"].as_str().expect("key").to_owned(),
        public_key: made["public_key"].as_str().expect("public key").to_owned(),
        credit_memos: true,
    };
    credit_scenario(&with);
    let without = Site { s: &s, key: s.key.clone(), public_key: s.public_key.clone(), credit_memos: false };
    credit_scenario(&without);
}

#[test]
fn credit_invoices_and_credit_payments_with_and_without_credit_memos() {
    on_both_backends("credits", credits);
}

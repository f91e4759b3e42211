//! Write-offs over HTTP against `rebill serve`, on SQLite and on PostgreSQL: a charge invoice
//! paid in part by credit and marked failed on a site with Credit Memos is written off (the
//! credit payment voided and its credit back on the account, a closed `write_off` credit
//! invoice, a `write_off` credit payment, listed in the 2.10 answer's `credit_invoices`); on a
//! site without Credit Memos nothing is written off.

use rebill_testkit::*;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;

#[track_caller]
fn status(reply: &Reply, code: u16) {
    assert_eq!(reply.status, code, "{}\n{}", reply.head, reply.body);
}

#[track_caller]
fn has(reply: &Reply, text: &str) {
    assert!(reply.body.contains(text), "expected {text} in\n{}", reply.body);
}

fn send(s: &Server, method: &str, version: &str, path: &str, body: &str) -> Reply {
    authed(s, method, path, &xml_at(version), body)
}

fn get(s: &Server, version: &str, path: &str) -> Reply {
    authed(s, "GET", path, &[("X-Api-Version", version)], "")
}

fn cents(name: &str, value: i64) -> String {
    format!("<{name} type=\"integer\">{value}</{name}>")
}

/// The account `code` with 300 cents of credit (a credit adjustment invoiced) and a manual
/// invoice of 1000 the credit paid 300 of; answers the credit invoice's and the charge
/// invoice's numbers.
fn in_part_by_credit(s: &Server, code: &str) -> (String, String) {
    let body = format!("<account><account_code>{code}</account_code></account>");
    status(&send(s, "POST", "2.11", "/v2/accounts", &body), 201);
    let adjustment = |cents: i64| {
        let body = format!(
            "<adjustment><description>Goodwill</description><unit_amount_in_cents>{cents}</unit_amount_in_cents>\
             <currency>USD</currency></adjustment>"
        );
        status(&send(s, "POST", "2.11", &format!("/v2/accounts/{code}/adjustments"), &body), 201);
    };
    adjustment(-300);
    let r = send(s, "POST", "2.9", &format!("/v2/accounts/{code}/invoices"), "");
    status(&r, 201);
    let credit = field(&r.body, "invoice_number");
    adjustment(1000);
    let manual = "<invoice><collection_method>manual</collection_method><net_terms>30</net_terms></invoice>";
    let r = send(s, "POST", "2.9", &format!("/v2/accounts/{code}/invoices"), manual);
    status(&r, 201);
    (credit, field(&r.body, "invoice_number"))
}

fn with_credit_memos(db: &str) {
    let s = start_with(db, Options { clock: Some(T0), ..Options::default() });
    s.cli(&["site", "update", "--name", "sandbox", "--credit-memos", "true"]);
    let (credit, charge) = in_part_by_credit(&s, "w1");
    let r = get(&s, "2.10", &format!("/v2/invoices/{charge}"));
    has(&r, &cents("balance_in_cents", 700));
    has(&get(&s, "2.10", &format!("/v2/invoices/{credit}")), "<state>closed</state>");

    let r = send(&s, "PUT", "2.10", &format!("/v2/invoices/{charge}/mark_failed"), "");
    status(&r, 200);
    has(&r, "<invoice_collection>");
    let list = r.body.find("<credit_invoices type=\"array\">").expect("credit invoices");
    let charge_part = &r.body[r.body.find("<charge_invoice").expect("charge invoice")..list];
    assert!(charge_part.contains("<state>failed</state>"), "{charge_part}");
    assert!(charge_part.contains(&cents("balance_in_cents", 0)), "{charge_part}");
    let credits = &r.body[list..];
    for expected in [
        "<origin>write_off</origin>",
        "<type>credit</type>",
        "<state>closed</state>",
        &cents("total_in_cents", -1000),
        &cents("balance_in_cents", 0),
        "<credit_reason_code>write_off</credit_reason_code>",
    ] {
        assert!(credits.contains(expected), "{expected} in {credits}");
    }
    let write_off = field(credits, "invoice_number");

    // The credit that paid 300 is back on its credit invoice, open again; the payment voided.
    let r = get(&s, "2.10", &format!("/v2/invoices/{credit}"));
    has(&r, "<state>open</state>");
    has(&r, &cents("balance_in_cents", -300));
    let payments = get(&s, "2.10", "/v2/accounts/w1/credit_payments");
    status(&payments, 200);
    let entries: Vec<&str> = payments.body.split("<credit_payment href=").skip(1).collect();
    assert_eq!(entries.len(), 2, "{}", payments.body);
    let used = entries.iter().find(|p| p.contains("<action>payment</action>")).expect("the payment");
    assert!(used.contains(&cents("amount_in_cents", 300)) && !used.contains("<voided_at nil=\"nil\">"), "{used}");
    let off = entries.iter().find(|p| p.contains("<action>write_off</action>")).expect("the write-off payment");
    assert!(off.contains(&cents("amount_in_cents", 1000)), "{off}");
    assert!(off.contains(&format!("/v2/invoices/{write_off}\"/>")), "{off}");
    assert!(off.contains(&format!("/v2/invoices/{charge}\"/>")), "{off}");
    // The lists filter by action.
    let offs = get(&s, "2.10", "/v2/accounts/w1/credit_payments?action=write_off");
    assert_eq!(offs.body.matches("<credit_payment href=").count(), 1, "{}", offs.body);
    has(&offs, "<action>write_off</action>");
    let all_offs = get(&s, "2.10", "/v2/credit_payments?action=write_off");
    assert_eq!(all_offs.body.matches("<credit_payment href=").count(), 1, "{}", all_offs.body);
    let r = get(&s, "2.10", "/v2/credit_payments?action=gift");
    status(&r, 400);
    has(&r, "<symbol>invalid_parameter</symbol>");
    // The account holds its 300 of credit again and owes nothing.
    let balance = get(&s, "2.10", "/v2/accounts/w1/balance");
    has(&balance, "<USD type=\"integer\">-300</USD>");
    has(&balance, "<past_due type=\"boolean\">false</past_due>");
    // The write-off credits the charge invoice; a second mark_failed is refused.
    let originals = get(&s, "2.10", &format!("/v2/invoices/{write_off}/original_invoices"));
    has(&originals, &format!("<invoice_number type=\"integer\">{charge}</invoice_number>"));
    status(&send(&s, "PUT", "2.10", &format!("/v2/invoices/{charge}/mark_failed"), ""), 422);
    // Read at 2.9: the failed invoice alone, old names.
    let (_, other) = in_part_by_credit(&s, "w2");
    let r = send(&s, "PUT", "2.9", &format!("/v2/invoices/{other}/mark_failed"), "");
    status(&r, 200);
    assert!(r.body.contains("<invoice href=") && !r.body.contains("<invoice_collection"), "{}", r.body);
    has(&r, "<state>failed</state>");
}

fn without_credit_memos(db: &str) {
    let s = start_with(db, Options { clock: Some(T0), ..Options::default() });
    let (_, charge) = in_part_by_credit(&s, "n1");
    let r = send(&s, "PUT", "2.10", &format!("/v2/invoices/{charge}/mark_failed"), "");
    status(&r, 200);
    has(&r, "<credit_invoices type=\"array\">\n  </credit_invoices>");
    has(&r, "<state>failed</state>");
    let invoices = get(&s, "2.10", "/v2/accounts/n1/invoices");
    assert!(!invoices.body.contains("write_off"), "{}", invoices.body);
}

#[test]
fn failed_invoices_are_written_off_with_credit_memos() {
    on_both_backends("write_offs_cm", with_credit_memos);
}

#[test]
fn failed_invoices_are_not_written_off_without_credit_memos() {
    on_both_backends("write_offs_legacy", without_credit_memos);
}

//! Transactions given back over HTTP (`DELETE /v2/transactions/{uuid}`) against `rebill serve`,
//! on SQLite and on PostgreSQL, on sites without Credit Memos (read at 2.9) and with them (read
//! at 2.10 and 2.11): a void before the purchase settles (00:00 UTC after it, on the site clock)
//! and refunds after it or of a part, the `voidable`/`refundable` flags at each step, the invoices
//! that record them to the cent, the sandbox's declines and the refusals.

use rebill_testkit::*;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;
/// 2027-01-16T00:00:00Z: the purchases made at T0 settle.
const SETTLED: i64 = T0 + 16 * 3600;

fn serve(db: &str) -> Server {
    start_with(db, Options { clock: Some(T0), ..Options::default() })
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

fn get(s: &Server, version: &str, path: &str) -> Reply {
    authed(s, "GET", path, &[("X-Api-Version", version)], "")
}

fn give_back(s: &Server, version: &str, uuid: &str, amount: Option<i64>) -> Reply {
    let path = match amount {
        Some(n) => format!("/v2/transactions/{uuid}?amount_in_cents={n}"),
        None => format!("/v2/transactions/{uuid}"),
    };
    authed(s, "DELETE", &path, &[("X-Api-Version", version)], "")
}

/// An account paying with `card` and an invoice of `cents` it paid; answers the invoice number
/// and the uuid of the purchase that paid it.
fn paid(s: &Server, code: &str, card: &str, cents: i64) -> (String, String) {
    let body = format!("<account><account_code>{code}</account_code><email>{code}@example.com</email></account>");
    status(&authed(s, "POST", "/v2/accounts", &xml_at("2.11"), &body), 201);
    let body = format!("<billing_info><token_id>{}</token_id></billing_info>", card_token(s, card));
    status(&authed(s, "PUT", &format!("/v2/accounts/{code}/billing_info"), &xml_at("2.11"), &body), 200);
    let body = format!(
        "<adjustment><description>Order</description><unit_amount_in_cents>{cents}</unit_amount_in_cents>\
         <currency>USD</currency></adjustment>"
    );
    status(&authed(s, "POST", &format!("/v2/accounts/{code}/adjustments"), &xml_at("2.11"), &body), 201);
    let r = authed(s, "POST", &format!("/v2/accounts/{code}/invoices"), &xml_at("2.9"), "");
    status(&r, 201);
    has(&r, "<state>collected</state>");
    let number = field(&r.body, "invoice_number");
    let transactions = &r.body[r.body.find("<transactions").expect("transactions")..];
    (number, field(transactions, "uuid"))
}

#[track_caller]
fn flags(s: &Server, uuid: &str, voidable: bool, refundable: bool) {
    let r = get(s, "2.11", &format!("/v2/transactions/{uuid}"));
    status(&r, 200);
    has(&r, &format!("<voidable type=\"boolean\">{voidable}</voidable>"));
    has(&r, &format!("<refundable type=\"boolean\">{refundable}</refundable>"));
    assert_eq!(r.body.contains("<a name=\"refund\""), refundable, "refund anchor: {}", r.body);
}

/// The uuid a `Location` header names.
fn located(r: &Reply) -> String {
    let location = r.header("location").expect("Location");
    location.rsplit('/').next().expect("uuid").to_owned()
}

/// The account's invoices' (number, total, state) at `version`, newest first.
fn invoices(s: &Server, version: &str, code: &str) -> Vec<(String, String, String)> {
    let r = get(s, version, &format!("/v2/accounts/{code}/invoices"));
    status(&r, 200);
    r.body
        .split("\n  <invoice href=")
        .skip(1)
        .map(|one| (field(one, "invoice_number"), field(one, "total_in_cents"), field(one, "state")))
        .collect()
}

fn without_credit_memos(db: &str) {
    let s = serve(db);

    // Unsettled and given back whole: a void. No Location; the purchase as it is now.
    let (number, purchase) = paid(&s, "v1", "4111111111111111", 5000);
    flags(&s, &purchase, true, true);
    let r = give_back(&s, "2.9", &purchase, None);
    status(&r, 202);
    assert!(r.header("location").is_none(), "{}", r.head);
    has(&r, &format!("<uuid>{purchase}</uuid>"));
    has(&r, "<action>purchase</action>");
    has(&r, "<status>void</status>");
    has(&r, "<voidable type=\"boolean\">false</voidable>");
    has(&r, "<refundable type=\"boolean\">false</refundable>");
    lacks(&r, "<a name=\"refund\"");
    flags(&s, &purchase, false, false);
    // The invoice is credited in full by a legacy refund invoice that holds no transaction.
    let all = invoices(&s, "2.9", "v1");
    assert_eq!(all[0].1, "-5000");
    assert_eq!(all[0].2, "collected");
    assert_eq!(all[1], (number.clone(), "5000".to_owned(), "collected".to_owned()));
    let refund_invoice = get(&s, "2.9", &format!("/v2/invoices/{}", all[0].0));
    has(&refund_invoice, "<transactions type=\"array\">\n  </transactions>");
    let original = get(&s, "2.11", &format!("/v2/invoices/{number}"));
    has(&original, "<refundable_total_in_cents type=\"integer\">0</refundable_total_in_cents>");
    let balance = get(&s, "2.11", "/v2/accounts/v1/balance");
    has(&balance, "<past_due type=\"boolean\">false</past_due>");
    has(&balance, "<USD type=\"integer\">0</USD>");
    // Nothing is left: a second void is refused with the error table's code.
    let r = give_back(&s, "2.9", &purchase, None);
    status(&r, 422);
    has(&r, "field=\"transaction.base\" symbol=\"transaction_already_voided\"");

    // A part of an unsettled purchase is a refund (a void cannot cancel a part).
    let (number, purchase) = paid(&s, "v2", "4111111111111111", 5000);
    let r = give_back(&s, "2.9", &purchase, Some(1500));
    status(&r, 202);
    let refund = located(&r);
    assert_ne!(refund, purchase);
    has(&r, &format!("<uuid>{purchase}</uuid>"));
    has(&r, "<status>success</status>");
    has(&r, "<voidable type=\"boolean\">false</voidable>");
    has(&r, "<refundable type=\"boolean\">true</refundable>");
    let r = get(&s, "2.9", &format!("/v2/transactions/{refund}"));
    has(&r, "<action>refund</action>");
    has(&r, "<amount_in_cents type=\"integer\">1500</amount_in_cents>");
    has(&r, &format!("/v2/transactions/{purchase}\"/>"));
    flags(&s, &refund, false, false);
    let original = get(&s, "2.11", &format!("/v2/invoices/{number}"));
    has(&original, "<refundable_total_in_cents type=\"integer\">3500</refundable_total_in_cents>");
    // More than is left, nothing, and not a number are refused.
    let r = give_back(&s, "2.9", &purchase, Some(3501));
    status(&r, 422);
    has(&r, "field=\"transaction.amount_in_cents\" symbol=\"total_credit_exceeds_capture\"");
    let r = give_back(&s, "2.9", &purchase, Some(0));
    status(&r, 422);
    has(&r, "field=\"transaction.amount_in_cents\" symbol=\"invalid_amount\"");
    let r = authed(&s, "DELETE", &format!("/v2/transactions/{purchase}?amount_in_cents=ten"), &[], "");
    status(&r, 422);
    has(&r, "field=\"transaction.amount_in_cents\" symbol=\"not_a_number\"");
    // A refund transaction is not given back again; an unknown uuid is 404.
    let r = give_back(&s, "2.9", &refund, None);
    status(&r, 422);
    has(&r, "field=\"transaction.base\" symbol=\"not_refundable\"");
    let r = give_back(&s, "2.9", "0123456789abcdef0123456789abcdef", None);
    status(&r, 404);

    // After settlement the rest is a refund too: 3500, and the invoice is credited in full.
    let (_, settled) = paid(&s, "v3", "4111111111111111", 2000);
    s.set_clock(SETTLED - 1);
    flags(&s, &settled, true, true);
    s.set_clock(SETTLED);
    flags(&s, &settled, false, true);
    let r = give_back(&s, "2.9", &purchase, None);
    status(&r, 202);
    let rest = located(&r);
    has(&r, "<refundable type=\"boolean\">false</refundable>");
    let r = get(&s, "2.9", &format!("/v2/transactions/{rest}"));
    has(&r, "<amount_in_cents type=\"integer\">3500</amount_in_cents>");
    let original = get(&s, "2.11", &format!("/v2/invoices/{number}"));
    has(&original, "<refundable_total_in_cents type=\"integer\">0</refundable_total_in_cents>");
    let totals: Vec<String> = invoices(&s, "2.9", "v2").into_iter().map(|i| i.1).collect();
    assert_eq!(totals, ["-3500", "-1500", "5000"]);
    let r = give_back(&s, "2.9", &purchase, None);
    status(&r, 422);
    has(&r, "field=\"transaction.base\" symbol=\"transaction_already_refunded\"");
    // The settled purchase, whole: a refund with its Location, not a void.
    let r = give_back(&s, "2.9", &settled, None);
    status(&r, 202);
    assert_ne!(located(&r), settled);
    has(&r, "<status>success</status>");

    // 4000000000002024: the purchase succeeds, the void and the refund are declined. Nothing is
    // given back: the 422 transaction error document of the declined refund.
    let (number, purchase) = paid(&s, "v4", "4000000000002024", 3000);
    let r = give_back(&s, "2.9", &purchase, None);
    status(&r, 422);
    has(&r, "<transaction_error>");
    has(&r, "symbol=\"declined\"");
    has(&r, "<action>refund</action>");
    has(&r, "<status>declined</status>");
    flags(&s, &purchase, true, true);
    let original = get(&s, "2.11", &format!("/v2/invoices/{number}"));
    has(&original, "<refundable_total_in_cents type=\"integer\">3000</refundable_total_in_cents>");
    let states: Vec<String> = invoices(&s, "2.11", "v4").into_iter().map(|i| i.2).collect();
    assert_eq!(states, ["failed", "paid"], "the legacy refund invoice failed");
}

fn with_credit_memos(db: &str) {
    let s = serve(db);
    s.cli(&["site", "update", "--name", "sandbox", "--credit-memos", "true"]);

    // A void: a closed credit invoice of -5000 crediting the charge invoice, no credit left.
    let (number, purchase) = paid(&s, "c1", "4111111111111111", 5000);
    let r = give_back(&s, "2.10", &purchase, None);
    status(&r, 202);
    assert!(r.header("location").is_none(), "{}", r.head);
    has(&r, "<status>void</status>");
    let all = invoices(&s, "2.11", "c1");
    assert_eq!((all[0].1.as_str(), all[0].2.as_str()), ("-5000", "closed"));
    let credit = get(&s, "2.11", &format!("/v2/invoices/{}", all[0].0));
    has(&credit, "<type>credit</type>");
    has(&credit, "<origin>refund</origin>");
    has(&credit, "<balance_in_cents type=\"integer\">0</balance_in_cents>");
    has(
        &credit,
        &format!("<original_invoices href=\"http://{}/v2/invoices/{}/original_invoices\"/>", s.addr, all[0].0),
    );
    let originals = get(&s, "2.11", &format!("/v2/invoices/{}/original_invoices", all[0].0));
    has(&originals, &format!("<invoice_number type=\"integer\">{number}</invoice_number>"));
    has(&get(&s, "2.11", "/v2/accounts/c1/balance"), "<USD type=\"integer\">0</USD>");

    // A part after settlement: a closed credit invoice holding the refund transaction.
    let (_, purchase) = paid(&s, "c2", "4111111111111111", 5000);
    s.set_clock(SETTLED);
    flags(&s, &purchase, false, true);
    let r = give_back(&s, "2.11", &purchase, Some(1250));
    status(&r, 202);
    let refund = located(&r);
    let all = invoices(&s, "2.11", "c2");
    assert_eq!((all[0].1.as_str(), all[0].2.as_str()), ("-1250", "closed"));
    let credit = get(&s, "2.11", &format!("/v2/invoices/{}", all[0].0));
    has(&credit, &format!("<uuid>{refund}</uuid>"));
    has(&credit, "<amount_in_cents type=\"integer\">1250</amount_in_cents>");

    // Declined refund with Credit Memos: answered as declined, and the amount stays the
    // account's credit on an open credit invoice.
    let (_, purchase) = paid(&s, "c3", "4000000000002024", 3000);
    let r = give_back(&s, "2.11", &purchase, None);
    status(&r, 422);
    has(&r, "<transaction_error>");
    has(&r, "<status>declined</status>");
    let all = invoices(&s, "2.11", "c3");
    assert_eq!((all[0].1.as_str(), all[0].2.as_str()), ("-3000", "open"));
    has(&get(&s, "2.11", "/v2/accounts/c3/balance"), "<USD type=\"integer\">-3000</USD>");
}

#[test]
fn transactions_given_back_without_credit_memos() {
    on_both_backends("txn_refunds_legacy", without_credit_memos);
}

#[test]
fn transactions_given_back_with_credit_memos() {
    on_both_backends("txn_refunds_cm", with_credit_memos);
}

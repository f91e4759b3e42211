//! What released v2 client libraries send and follow, end to end against `rebill serve` on
//! SQLite and on PostgreSQL: `currency` beside `token_id` in every billing info that takes a
//! token (the official Python client sends it on each), `canceled_at` on a terminated
//! subscription, the account balance every account links to, and verification transactions
//! that are neither refundable nor voidable.

use rebill_testkit::*;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;
const DECLARATION: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
const BESIDE_TOKEN: &str = "is not allowed together with token_id";

fn serve(db: &str) -> Server {
    serve_at(db, T0, &[])
}

fn send(s: &Server, method: &str, path: &str, body: &str) -> Reply {
    authed(s, method, path, &xml_at("2.11"), body)
}

fn get_at(s: &Server, version: &str, path: &str) -> Reply {
    authed(s, "GET", path, &[("X-Api-Version", version)], "")
}

fn get(s: &Server, path: &str) -> Reply {
    get_at(s, "2.11", path)
}

/// Plan `gold`: 1000 cents a month in USD and EUR.
fn gold_plan(s: &Server) {
    let body = "<plan><plan_code>gold</plan_code><name>Gold</name>\
                <unit_amount_in_cents><USD>1000</USD><EUR>900</EUR></unit_amount_in_cents></plan>";
    ok(send(s, "POST", "/v2/plans", body), 201);
}

/// `<billing_info>` as the Python client (2.2.20 and later) writes it for a token.
fn python_billing_info(token: &str, currency: &str) -> String {
    format!("<billing_info><token_id>{token}</token_id><currency>{currency}</currency></billing_info>")
}

fn create_account(s: &Server, code: &str) {
    ok(send(s, "POST", "/v2/accounts", &format!("<account><account_code>{code}</account_code></account>")), 201);
}

/// The exact 422 document of field errors, each refused with `message`.
#[track_caller]
fn assert_field_errors(reply: &Reply, fields: &[&str], message: &str) {
    let mut expected = format!("{DECLARATION}<errors>\n");
    for f in fields {
        expected.push_str(&format!("  <error field=\"{f}\" symbol=\"invalid\" lang=\"en-US\">{message}</error>\n"));
    }
    expected.push_str("</errors>\n");
    assert_eq!((reply.status, reply.body.as_str()), (422, expected.as_str()), "{}", reply.head);
}

/// The `<transaction …>…</transaction>` elements of a list document.
fn transactions(body: &str) -> Vec<&str> {
    body.split("<transaction href=").skip(1).collect()
}

#[track_caller]
fn assert_not_refundable(transaction: &str) {
    assert!(transaction.contains("<refundable type=\"boolean\">false</refundable>"), "{transaction}");
    assert!(transaction.contains("<voidable type=\"boolean\">false</voidable>"), "{transaction}");
    assert!(!transaction.contains("<a name=\"refund\""), "{transaction}");
}

// ---------------------------------------------------------------------------------------------
// §1.1 currency beside a token

fn currency_beside_a_token(db: &str) {
    let s = serve(db);
    gold_plan(&s);

    // Subscription create with the account and its billing info nested.
    let token = card_token(&s, "4111111111111111");
    let body = format!(
        "<subscription><plan_code>gold</plan_code><currency>USD</currency>\
         <account><account_code>py1</account_code>{}</account>\
         </subscription>",
        python_billing_info(&token, "USD")
    );
    let r = ok(send(&s, "POST", "/v2/subscriptions", &body), 201);
    assert_eq!(field(&r.body, "state"), "active");
    assert_eq!(field(&ok(get(&s, "/v2/accounts/py1/billing_info"), 200).body, "last_four"), "1111");

    // Billing info update (in either order): the currency names the verification's currency.
    let token = card_token(&s, "5555555555554444");
    let body = format!("<billing_info><currency>EUR</currency><token_id>{token}</token_id></billing_info>");
    let r = ok(send(&s, "PUT", "/v2/accounts/py1/billing_info", &body), 200);
    assert_eq!(field(&r.body, "last_four"), "4444");
    assert!(!r.body.contains("<currency>"), "currency is request-only: {}", r.body);
    let list = ok(get(&s, "/v2/accounts/py1/transactions"), 200);
    let verifications: Vec<&str> =
        transactions(&list.body).into_iter().filter(|t| t.contains("<action>verify</action>")).collect();
    assert_eq!(verifications.len(), 2, "{}", list.body);
    assert!(verifications.iter().any(|t| t.contains("<currency>EUR</currency>")), "{}", list.body);
    assert!(verifications.iter().any(|t| t.contains("<currency>USD</currency>")), "{}", list.body);

    // Account create and update with nested billing info.
    let token = card_token(&s, "4111111111111111");
    let body = format!("<account><account_code>py2</account_code>{}</account>", python_billing_info(&token, "USD"));
    ok(send(&s, "POST", "/v2/accounts", &body), 201);
    assert_eq!(field(&ok(get(&s, "/v2/accounts/py2/billing_info"), 200).body, "last_four"), "1111");
    let token = card_token(&s, "5555555555554444");
    let body = format!("<account><first_name>Ada</first_name>{}</account>", python_billing_info(&token, "USD"));
    let r = ok(send(&s, "PUT", "/v2/accounts/py2", &body), 200);
    assert_eq!(field(&r.body, "first_name"), "Ada");
    assert_eq!(field(&ok(get(&s, "/v2/accounts/py2/billing_info"), 200).body, "last_four"), "4444");

    // A one-off transaction for a new account.
    let token = card_token(&s, "4111111111111111");
    let body = format!(
        "<transaction><amount_in_cents>1500</amount_in_cents><currency>USD</currency>\
         <account><account_code>py3</account_code>{}</account></transaction>",
        python_billing_info(&token, "USD")
    );
    let r = ok(send(&s, "POST", "/v2/transactions", &body), 201);
    assert_eq!(field(&r.body, "status"), "success");

    // Payment data beside a token is still refused, whatever else is sent, and uses no token.
    let token = card_token(&s, "4111111111111111");
    let cases = [
        ("<number>4111111111111111</number>", vec!["number"]),
        ("<address1>1 Main St</address1><zip>94105</zip>", vec!["address1", "zip"]),
        (
            "<account_number>111111111</account_number><routing_number>123456780</routing_number>",
            vec!["routing_number", "account_number"],
        ),
        ("<first_name>Ada</first_name>", vec!["first_name"]),
    ];
    for (extra, elements) in &cases {
        let info = format!("<billing_info><token_id>{token}</token_id><currency>USD</currency>{extra}</billing_info>");
        let fields: Vec<String> = elements.iter().map(|e| format!("billing_info.{e}")).collect();
        let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
        assert_field_errors(&send(&s, "PUT", "/v2/accounts/py1/billing_info", &info), &fields, BESIDE_TOKEN);

        let nested: Vec<String> = elements.iter().map(|e| format!("account.billing_info.{e}")).collect();
        let nested: Vec<&str> = nested.iter().map(String::as_str).collect();
        let body = format!("<account><account_code>no1</account_code>{info}</account>");
        assert_field_errors(&send(&s, "POST", "/v2/accounts", &body), &nested, BESIDE_TOKEN);

        let nested: Vec<String> = elements.iter().map(|e| format!("subscription.account.billing_info.{e}")).collect();
        let nested: Vec<&str> = nested.iter().map(String::as_str).collect();
        let body = format!(
            "<subscription><plan_code>gold</plan_code><currency>USD</currency>\
             <account><account_code>no2</account_code>{info}</account></subscription>"
        );
        assert_field_errors(&send(&s, "POST", "/v2/subscriptions", &body), &nested, BESIDE_TOKEN);

        let nested: Vec<String> = elements.iter().map(|e| format!("transaction.account.billing_info.{e}")).collect();
        let nested: Vec<&str> = nested.iter().map(String::as_str).collect();
        let body = format!(
            "<transaction><amount_in_cents>100</amount_in_cents><currency>USD</currency>\
             <account><account_code>no3</account_code>{info}</account></transaction>"
        );
        assert_field_errors(&send(&s, "POST", "/v2/transactions", &body), &nested, BESIDE_TOKEN);
    }
    for code in ["no1", "no2", "no3"] {
        assert_error(&get(&s, &format!("/v2/accounts/{code}")), 404, "not_found");
    }
    // The refused requests left the token unused.
    let r = ok(send(&s, "PUT", "/v2/accounts/py1/billing_info", &python_billing_info(&token, "USD")), 200);
    assert_eq!(field(&r.body, "last_four"), "1111");

    // A currency that is not one is refused before the token is used.
    let token = card_token(&s, "5555555555554444");
    let r = send(&s, "PUT", "/v2/accounts/py1/billing_info", &python_billing_info(&token, "DOLLARS"));
    assert_field_errors(&r, &["billing_info.currency"], "is not a 3-letter ISO 4217 currency code");
    ok(send(&s, "PUT", "/v2/accounts/py1/billing_info", &python_billing_info(&token, "USD")), 200);
}

#[test]
fn currency_is_accepted_beside_a_token_and_payment_data_is_not() {
    on_both_backends("compat_currency", currency_beside_a_token);
}

// ---------------------------------------------------------------------------------------------
// §1.5 canceled_at after terminate

fn subscribe(s: &Server, code: &str) -> String {
    let token = card_token(s, "4111111111111111");
    let body = format!(
        "<subscription><plan_code>gold</plan_code><currency>USD</currency>\
         <account><account_code>{code}</account_code>{}</account></subscription>",
        python_billing_info(&token, "USD")
    );
    field(&ok(send(s, "POST", "/v2/subscriptions", &body), 201).body, "uuid")
}

fn terminated_subscriptions_are_canceled(db: &str) {
    let s = serve(db);
    gold_plan(&s);

    // Terminated while active: canceled and expired now.
    let uuid = subscribe(&s, "t1");
    sandbox_clock(&s, "<advance>3days</advance>");
    let r = ok(send(&s, "PUT", &format!("/v2/subscriptions/{uuid}/terminate?refund=none"), ""), 200);
    assert_eq!(field(&r.body, "state"), "expired");
    assert_eq!(field(&r.body, "canceled_at"), "2027-01-18T08:00:00Z");
    assert_eq!(field(&r.body, "expires_at"), "2027-01-18T08:00:00Z");
    let read = ok(get(&s, &format!("/v2/subscriptions/{uuid}")), 200);
    assert_eq!(read.body, r.body, "the stored subscription answers the same");

    // Canceled first, terminated later: the cancel's time stays, it expires at the termination.
    let uuid = subscribe(&s, "t2");
    let r = ok(send(&s, "PUT", &format!("/v2/subscriptions/{uuid}/cancel"), ""), 200);
    assert_eq!(field(&r.body, "canceled_at"), "2027-01-18T08:00:00Z");
    assert_eq!(field(&r.body, "expires_at"), "2027-02-18T08:00:00Z");
    sandbox_clock(&s, "<advance>2days</advance>");
    let r = ok(send(&s, "PUT", &format!("/v2/subscriptions/{uuid}/terminate?refund=none"), ""), 200);
    assert_eq!(field(&r.body, "state"), "expired");
    assert_eq!(field(&r.body, "canceled_at"), "2027-01-18T08:00:00Z");
    assert_eq!(field(&r.body, "expires_at"), "2027-01-20T08:00:00Z");
    assert_eq!(ok(get(&s, &format!("/v2/subscriptions/{uuid}")), 200).body, r.body);
}

#[test]
fn a_terminated_subscription_has_canceled_at_and_expires_at() {
    on_both_backends("compat_terminate", terminated_subscriptions_are_canceled);
}

// ---------------------------------------------------------------------------------------------
// §1.6 account balance

/// The exact balance document of account `code`.
fn balance_document(s: &Server, code: &str, past_due: bool, balances: &[(&str, i64)]) -> String {
    let base = format!("http://{}", s.addr);
    let mut out = format!(
        "{DECLARATION}<account_balance href=\"{base}/v2/accounts/{code}/balance\">\n  \
         <account href=\"{base}/v2/accounts/{code}\"/>\n  \
         <past_due type=\"boolean\">{past_due}</past_due>\n  <balance_in_cents>\n"
    );
    for (currency, cents) in balances {
        out.push_str(&format!("    <{currency} type=\"integer\">{cents}</{currency}>\n"));
    }
    out.push_str("  </balance_in_cents>\n</account_balance>\n");
    out
}

#[track_caller]
fn assert_balance(s: &Server, code: &str, past_due: bool, balances: &[(&str, i64)]) {
    let r = get(s, &format!("/v2/accounts/{code}/balance"));
    assert_eq!(
        (r.status, r.body.as_str()),
        (200, balance_document(s, code, past_due, balances).as_str()),
        "{}",
        r.head
    );
}

/// A manual invoice of one adjustment of `cents` in `currency`, due in 30 days; its number.
fn manual_invoice(s: &Server, code: &str, cents: i64, currency: &str) -> String {
    let body = format!(
        "<adjustment><description>Work</description><unit_amount_in_cents>{cents}</unit_amount_in_cents>\
         <currency>{currency}</currency></adjustment>"
    );
    ok(send(s, "POST", &format!("/v2/accounts/{code}/adjustments"), &body), 201);
    let body =
        "<invoice><collection_method>manual</collection_method><net_terms type=\"integer\">30</net_terms></invoice>";
    let r = ok(send(s, "POST", &format!("/v2/accounts/{code}/invoices"), body), 201);
    field(&r.body, "invoice_number")
}

fn account_balance(db: &str) {
    let s = serve(db);
    assert_error(&get(&s, "/v2/accounts/nobody/balance"), 404, "not_found");

    // Without plans or invoices: the default currency at zero.
    create_account(&s, "b1");
    assert_balance(&s, "b1", false, &[("USD", 0)]);

    // Every currency the site's plans are priced in, zeros included; the account links to it.
    gold_plan(&s);
    assert_balance(&s, "b1", false, &[("EUR", 0), ("USD", 0)]);
    let account = ok(get(&s, "/v2/accounts/b1"), 200);
    let link = format!("<account_balance href=\"http://{}/v2/accounts/b1/balance\"/>", s.addr);
    assert!(account.body.contains(&link), "{}", account.body);

    // Open invoices are owed; past due once their net terms pass.
    let usd = manual_invoice(&s, "b1", 5000, "USD");
    assert_balance(&s, "b1", false, &[("EUR", 0), ("USD", 5000)]);
    sandbox_clock(&s, "<advance>15days</advance>");
    let eur = manual_invoice(&s, "b1", 700, "EUR");
    assert_balance(&s, "b1", false, &[("EUR", 700), ("USD", 5000)]);
    sandbox_clock(&s, "<advance>15days</advance>");
    assert_eq!(field(&ok(get(&s, &format!("/v2/invoices/{usd}")), 200).body, "state"), "past_due");
    assert_balance(&s, "b1", true, &[("EUR", 700), ("USD", 5000)]);
    // Every version from 2.3 answers the same document; older ones have no balance.
    let first = get_at(&s, "2.3", "/v2/accounts/b1/balance");
    assert_eq!((first.status, first.body), (200, balance_document(&s, "b1", true, &[("EUR", 700), ("USD", 5000)])));
    assert_error(&get_at(&s, "2.2", "/v2/accounts/b1/balance"), 400, "unavailable_in_api_version");
    assert!(!ok(get_at(&s, "2.2", "/v2/accounts/b1"), 200).body.contains("<account_balance"), "no link before 2.3");

    // Paid invoices are not owed; failed ones are written off.
    ok(send(&s, "PUT", &format!("/v2/invoices/{usd}/mark_successful"), ""), 200);
    assert_balance(&s, "b1", false, &[("EUR", 700), ("USD", 0)]);
    ok(send(&s, "PUT", &format!("/v2/invoices/{eur}/mark_failed"), ""), 200);
    assert_balance(&s, "b1", false, &[("EUR", 0), ("USD", 0)]);

    // An invoiced currency the plans are not priced in is listed too; other accounts' invoices
    // are not counted.
    create_account(&s, "b2");
    manual_invoice(&s, "b2", 300, "GBP");
    assert_balance(&s, "b2", false, &[("EUR", 0), ("GBP", 300), ("USD", 0)]);
    assert_balance(&s, "b1", false, &[("EUR", 0), ("USD", 0)]);

    // A closed account still has its balance.
    let closed = authed(&s, "DELETE", "/v2/accounts/b2", &[("X-Api-Version", "2.11")], "");
    assert_eq!(closed.status, 204, "{}", closed.body);
    assert_balance(&s, "b2", false, &[("EUR", 0), ("GBP", 300), ("USD", 0)]);
}

#[test]
fn the_account_balance_sums_open_invoices_per_currency() {
    on_both_backends("compat_balance", account_balance);
}

// ---------------------------------------------------------------------------------------------
// §1.7 verification transactions

fn verifications_are_not_refundable(db: &str) {
    let s = serve(db);
    create_account(&s, "v1");

    // An approved verification.
    let token = card_token(&s, "4111111111111111");
    ok(send(&s, "PUT", "/v2/accounts/v1/billing_info", &python_billing_info(&token, "USD")), 200);
    // A declined verification.
    let token = card_token(&s, "4000000000000002");
    let declined = send(&s, "PUT", "/v2/accounts/v1/billing_info", &python_billing_info(&token, "USD"));
    assert_eq!(declined.status, 422, "{}", declined.body);
    assert_not_refundable(&declined.body);
    // An approved and a declined purchase.
    let charge = |number: &str| {
        let token = card_token(&s, number);
        let body = format!(
            "<transaction><amount_in_cents>1200</amount_in_cents><currency>USD</currency>\
             <account><account_code>v1</account_code><billing_info><token_id>{token}</token_id></billing_info>\
             </account></transaction>"
        );
        send(&s, "POST", "/v2/transactions", &body)
    };
    let approved = ok(charge("5555555555554444"), 201);
    let refund_anchor = format!(
        "<a name=\"refund\" href=\"http://{}/v2/transactions/{}\" method=\"delete\"/>",
        s.addr,
        field(&approved.body, "uuid")
    );
    assert!(approved.body.contains(&refund_anchor), "{}", approved.body);
    assert!(approved.body.contains("<refundable type=\"boolean\">true</refundable>"), "{}", approved.body);
    let declined_purchase = charge("4000000000000002");
    assert_eq!(declined_purchase.status, 422, "{}", declined_purchase.body);
    assert_not_refundable(&declined_purchase.body);

    // As listed and read one by one.
    let list = ok(get(&s, "/v2/accounts/v1/transactions"), 200);
    let all = transactions(&list.body);
    assert_eq!(all.len(), 4, "{}", list.body);
    for t in &all {
        let uuid = field(t, "uuid");
        let one = ok(get(&s, &format!("/v2/transactions/{uuid}")), 200);
        let refundable = t.contains("<action>purchase</action>") && t.contains("<status>success</status>");
        if refundable {
            assert!(one.body.contains("<refundable type=\"boolean\">true</refundable>"), "{}", one.body);
            assert!(one.body.contains(&refund_anchor), "{}", one.body);
            assert!(t.contains(&refund_anchor), "{t}");
        } else {
            assert_not_refundable(t);
            assert_not_refundable(&one.body);
        }
    }
    let verifies: Vec<&str> = all.iter().copied().filter(|t| t.contains("<action>verify</action>")).collect();
    assert_eq!(verifies.len(), 2, "{}", list.body);
    assert!(verifies.iter().any(|t| t.contains("<status>success</status>")), "{}", list.body);
    assert!(verifies.iter().any(|t| t.contains("<status>declined</status>")), "{}", list.body);
    let purchases: Vec<&str> = all.iter().copied().filter(|t| t.contains("<action>purchase</action>")).collect();
    assert_eq!(purchases.len(), 2, "{}", list.body);
}

#[test]
fn verifications_and_declines_are_neither_refundable_nor_voidable() {
    on_both_backends("compat_verify", verifications_are_not_refundable);
}

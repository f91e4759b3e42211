//! A downgrade with `timeframe=now` gives back the unused part of the period as credit, which
//! pays the next renewal by itself — over HTTP against `rebill serve`, on SQLite and on
//! PostgreSQL, on a site with Credit Memos (a credit invoice of origin `immediate_change`, used
//! through a `payment` credit payment) and on one without (a legacy negative invoice whose
//! credit the renewal takes).

use rebill_testkit::*;

/// 2027-01-15T08:00:00Z; the monthly period to February 15 is 31 days.
const T0: i64 = 1_800_000_000;

#[track_caller]
fn status(reply: &Reply, code: u16) {
    assert_eq!(reply.status, code, "{}\n{}", reply.head, reply.body);
}

#[track_caller]
fn has(reply: &Reply, text: &str) {
    assert!(reply.body.contains(text), "expected {text} in\n{}", reply.body);
}

fn send(s: &Server, method: &str, path: &str, body: &str) -> Reply {
    authed(s, method, path, &xml_at("2.11"), body)
}

fn plan(s: &Server, code: &str, cents: i64) {
    let body = format!(
        "<plan><plan_code>{code}</plan_code><name>Plan {code}</name>\
         <unit_amount_in_cents><USD>{cents}</USD></unit_amount_in_cents></plan>"
    );
    status(&send(s, "POST", "/v2/plans", &body), 201);
}

/// `number:origin:total:state:balance` of the account's invoices in order.
fn invoices(db: &str, account: &str) -> Vec<String> {
    sql(
        db,
        &format!(
            "SELECT CAST(i.invoice_number AS TEXT) || ':' || i.origin || ':' || CAST(i.total AS TEXT) || ':' \
             || i.state || ':' || CAST(i.balance AS TEXT) \
             FROM invoices i JOIN accounts a ON a.id = i.account_id WHERE a.account_code = '{account}' \
             ORDER BY i.invoice_number"
        ),
    )
}

/// The purchases charged to the account's card, in order.
fn charged(db: &str, account: &str) -> Vec<String> {
    sql(
        db,
        &format!(
            "SELECT CAST(t.amount AS TEXT) FROM transactions t JOIN accounts a ON a.id = t.account_id \
             WHERE a.account_code = '{account}' AND t.action = 'purchase' AND t.status = 'success' ORDER BY t.id"
        ),
    )
}

fn downgrade(db: &str, credit_memos: bool) {
    let s = serve_at(db, T0, &[]);
    if credit_memos {
        s.cli(&["site", "update", "--name", "sandbox", "--credit-memos", "true"]);
    }
    plan(&s, "pro", 6200);
    plan(&s, "basic", 3100);
    let token = card_token(&s, "4111111111111111");
    let body = format!(
        "<subscription><plan_code>pro</plan_code><currency>USD</currency>\
         <account><account_code>d1</account_code><billing_info><token_id>{token}</token_id></billing_info></account>\
         </subscription>"
    );
    let r = send(&s, "POST", "/v2/subscriptions", &body);
    status(&r, 201);
    let path = format!("/v2/subscriptions/{}", field(&r.body, "uuid"));
    sandbox_clock(&s, "<now>2027-01-31T08:00:00Z</now>");

    // 15 of 31 days left: a credit of 3000 (pro) and a charge of 1500 (basic): -1500.
    let change = "<subscription><plan_code>basic</plan_code><timeframe>now</timeframe></subscription>";
    let preview = send(&s, "POST", &format!("{path}/preview"), change);
    status(&preview, 200);
    // The preview's cost is what the change gives back; with Credit Memos its invoice collection
    // holds the credit invoice the change makes, and no charge invoice.
    assert_eq!(field(&preview.body, "cost_in_cents"), "-1500");
    if credit_memos {
        has(&preview, "<charge_invoice nil=\"nil\"></charge_invoice>");
        has(&preview, "<origin>immediate_change</origin>");
        has(&preview, "<balance_in_cents type=\"integer\">-1500</balance_in_cents>");
    } else {
        assert!(!preview.body.contains("<credit_invoice>"), "{}", preview.body);
    }
    status(&send(&s, "PUT", &path, change), 200);
    let made = invoices(db, "d1");
    let expected =
        if credit_memos { "1002:immediate_change:-1500:open:-1500" } else { "1002:immediate_change:-1500:paid:-1500" };
    assert_eq!(made, ["1001:purchase:6200:paid:0", expected]);
    let balance = authed(&s, "GET", "/v2/accounts/d1/balance", &[("X-Api-Version", "2.11")], "");
    has(&balance, "<USD type=\"integer\">-1500</USD>");

    // February 15 renews basic (3100): the credit pays 1500, the card the other 1600.
    sandbox_clock(&s, "<now>2027-02-15T08:00:00Z</now>");
    let made = invoices(db, "d1");
    assert_eq!(made.len(), 3, "{made:?}");
    assert_eq!(made[2], "1003:renewal:3100:paid:0");
    let closed =
        if credit_memos { "1002:immediate_change:-1500:closed:0" } else { "1002:immediate_change:-1500:paid:0" };
    assert_eq!(made[1], closed);
    assert_eq!(charged(db, "d1"), ["6200", "1600"]);
    let used = sql(db, "SELECT action || ':' || CAST(amount AS TEXT) FROM credit_payments ORDER BY id");
    assert_eq!(used, ["payment:1500"]);
    let balance = authed(&s, "GET", "/v2/accounts/d1/balance", &[("X-Api-Version", "2.11")], "");
    has(&balance, "<USD type=\"integer\">0</USD>");
    if credit_memos {
        let renewal = authed(&s, "GET", "/v2/invoices/1003", &[("X-Api-Version", "2.11")], "");
        has(&renewal, "<action>payment</action>");
        has(&renewal, "<amount_in_cents type=\"integer\">1500</amount_in_cents>");
    }
}

#[test]
fn a_downgrade_now_pays_the_next_renewal_with_credit_memos() {
    on_both_backends("downgrade_cm", |db| downgrade(db, true));
}

#[test]
fn a_downgrade_now_pays_the_next_renewal_without_credit_memos() {
    on_both_backends("downgrade_legacy", |db| downgrade(db, false));
}

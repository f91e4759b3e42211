//! Subscription previews show the invoices the operation would make (`invoice_collection`, from
//! 2.10 on a site with Credit Memos) — over HTTP against `rebill serve`, on SQLite and on
//! PostgreSQL: a creation's charge invoice, an upgrade's prorated charge invoice and a
//! downgrade's credit invoice (with a nil charge invoice), each without a number or an href and
//! nothing written; the real downgrade then makes the credit invoice its preview showed. Below
//! 2.10, and on a site without Credit Memos, previews show no `invoice_collection`.

use rebill_testkit::*;

/// 2027-01-15T08:00:00Z; the monthly period to February 15 is 31 days.
const T0: i64 = 1_800_000_000;

#[track_caller]
fn status(reply: &Reply, code: u16) {
    assert_eq!(reply.status, code, "{}\n{}", reply.head, reply.body);
}

#[track_caller]
fn has(body: &str, text: &str) {
    assert!(body.contains(text), "expected {text} in\n{body}");
}

fn send(s: &Server, version: &str, method: &str, path: &str, body: &str) -> Reply {
    authed(s, method, path, &xml_at(version), body)
}

fn plan(s: &Server, code: &str, cents: i64) {
    let body = format!(
        "<plan><plan_code>{code}</plan_code><name>Plan {code}</name>\
         <unit_amount_in_cents><USD>{cents}</USD></unit_amount_in_cents></plan>"
    );
    status(&send(s, "2.11", "POST", "/v2/plans", &body), 201);
}

/// A new account `code` with a card, subscribing to `plan_code`.
fn subscription(s: &Server, code: &str, plan_code: &str) -> String {
    let token = card_token(s, "4111111111111111");
    format!(
        "<subscription><plan_code>{plan_code}</plan_code><currency>USD</currency>\
         <account><account_code>{code}</account_code><billing_info><token_id>{token}</token_id></billing_info>\
         </account></subscription>"
    )
}

fn count(db: &str, table: &str) -> String {
    sql(db, &format!("SELECT CAST(COUNT(*) AS TEXT) FROM {table}")).concat()
}

/// `number:kind:origin:total:state:balance` of the site's invoices in order.
fn invoices(db: &str) -> Vec<String> {
    sql(
        db,
        "SELECT CAST(invoice_number AS TEXT) || ':' || kind || ':' || origin || ':' || CAST(total AS TEXT) || ':' \
         || state || ':' || CAST(balance AS TEXT) FROM invoices ORDER BY invoice_number",
    )
}

/// The `<invoice_collection>` of a preview, which must be there.
#[track_caller]
fn collection(body: &str) -> String {
    field(body, "invoice_collection")
}

/// The text of `<name>` in the part of `body` before its line items (the invoice's own field).
#[track_caller]
fn invoice_field(invoice: &str, name: &str) -> String {
    let head = invoice.split("<line_items").next().unwrap_or_default();
    field(head, name)
}

/// A previewed invoice as the reference shows one: no href, no number, no transactions.
#[track_caller]
fn unwritten(invoice: &str) {
    has(invoice, r#"<invoice_number type="integer" nil="nil"></invoice_number>"#);
    assert!(!invoice.contains("/v2/invoices/"), "{invoice}");
    assert!(tag(invoice, "uuid").is_none_or(|u| u.is_empty()), "{invoice}");
}

/// The story on a site with Credit Memos at `version` (2.10 or 2.11).
fn previews_show_invoices(db: &str, version: &str) {
    let s = serve_at(db, T0, &[]);
    s.cli(&["site", "update", "--name", "sandbox", "--credit-memos", "true"]);
    plan(&s, "basic", 3100);
    plan(&s, "pro", 6200);
    plan(&s, "max", 9300);

    // (1) A creation for a new account: its first payment, 6200, on a pending charge invoice.
    let r = send(&s, version, "POST", "/v2/subscriptions/preview", &subscription(&s, "n1", "pro"));
    status(&r, 200);
    assert_eq!(field(&r.body, "cost_in_cents"), "6200");
    let c = collection(&r.body);
    let charge = field(&c, "charge_invoice");
    unwritten(&charge);
    assert_eq!(invoice_field(&charge, "total_in_cents"), "6200");
    assert_eq!(invoice_field(&charge, "balance_in_cents"), "6200");
    assert_eq!(invoice_field(&charge, "state"), "pending");
    assert_eq!(invoice_field(&charge, "origin"), "purchase");
    assert_eq!(invoice_field(&charge, "type"), "charge");
    let lines = field(&charge, "line_items");
    assert_eq!(lines.matches("<adjustment").count(), 1, "{lines}");
    has(&lines, "<state>pending</state>");
    has(&lines, r#"<total_in_cents type="integer">6200</total_in_cents>"#);
    has(&c, r#"<credit_invoices type="array">"#);
    assert_eq!(field(&c, "credit_invoices").trim(), "");
    // Nothing written: no account, subscription or invoice.
    assert_eq!(
        (count(db, "accounts"), count(db, "subscriptions"), count(db, "invoices")),
        ("0".into(), "0".into(), "0".into())
    );

    // The subscription itself, and a creation preview for the account it made.
    let r = send(&s, version, "POST", "/v2/subscriptions", &subscription(&s, "d1", "pro"));
    status(&r, 201);
    let path = format!("/v2/subscriptions/{}", field(&r.body, "uuid"));
    let again = "<subscription><plan_code>basic</plan_code><currency>USD</currency>\
                 <account><account_code>d1</account_code></account></subscription>";
    let r = send(&s, version, "POST", "/v2/subscriptions/preview", again);
    status(&r, 200);
    let charge = field(&collection(&r.body), "charge_invoice");
    unwritten(&charge);
    assert_eq!(invoice_field(&charge, "total_in_cents"), field(&r.body, "cost_in_cents"));
    assert_eq!(invoice_field(&charge, "total_in_cents"), "3100");
    assert_eq!(invoices(db), ["1001:charge:purchase:6200:paid:0"]);

    sandbox_clock(&s, "<now>2027-01-31T08:00:00Z</now>");

    // (3) An upgrade with 15 of 31 days left: a credit of 6200 × 15/31 = 3000 for pro and a
    // charge of 9300 × 15/31 = 4500 for max, 1500 on a pending charge invoice.
    let upgrade = "<subscription><plan_code>max</plan_code><timeframe>now</timeframe></subscription>";
    let r = send(&s, version, "POST", &format!("{path}/preview"), upgrade);
    status(&r, 200);
    assert_eq!(field(&r.body, "cost_in_cents"), "1500");
    let c = collection(&r.body);
    let charge = field(&c, "charge_invoice");
    unwritten(&charge);
    assert_eq!(invoice_field(&charge, "total_in_cents"), "1500");
    assert_eq!(invoice_field(&charge, "state"), "pending");
    assert_eq!(invoice_field(&charge, "origin"), "immediate_change");
    let lines = field(&charge, "line_items");
    assert_eq!(lines.matches("<adjustment").count(), 2, "{lines}");
    assert_eq!(lines.matches("<state>pending</state>").count(), 2, "{lines}");
    has(&lines, r#"<total_in_cents type="integer">-3000</total_in_cents>"#);
    has(&lines, r#"<total_in_cents type="integer">4500</total_in_cents>"#);
    assert_eq!(field(&c, "credit_invoices").trim(), "");

    // (2) A downgrade: a credit of 3000 for pro and a charge of 3100 × 15/31 = 1500 for basic,
    // -1500 on an open credit invoice, and no charge invoice.
    let downgrade = "<subscription><plan_code>basic</plan_code><timeframe>now</timeframe></subscription>";
    let r = send(&s, version, "POST", &format!("{path}/preview"), downgrade);
    status(&r, 200);
    assert_eq!(field(&r.body, "cost_in_cents"), "-1500");
    let c = collection(&r.body);
    has(&c, r#"<charge_invoice nil="nil"></charge_invoice>"#);
    let credits = field(&c, "credit_invoices");
    assert_eq!(credits.matches("<credit_invoice").count(), 1, "{credits}");
    let credit = field(&credits, "credit_invoice");
    unwritten(&credit);
    assert_eq!(invoice_field(&credit, "state"), "open");
    assert_eq!(invoice_field(&credit, "origin"), "immediate_change");
    assert_eq!(invoice_field(&credit, "type"), "credit");
    assert_eq!(invoice_field(&credit, "total_in_cents"), "-1500");
    assert_eq!(invoice_field(&credit, "balance_in_cents"), "-1500");
    let lines = field(&credit, "line_items");
    assert_eq!(lines.matches("<state>pending</state>").count(), 2, "{lines}");
    // Previews write nothing.
    assert_eq!(invoices(db), ["1001:charge:purchase:6200:paid:0"]);

    // The change itself makes the credit invoice its preview showed.
    status(&send(&s, version, "PUT", &path, downgrade), 200);
    assert_eq!(invoices(db), ["1001:charge:purchase:6200:paid:0", "1002:credit:immediate_change:-1500:open:-1500"]);
    let made = send(&s, version, "GET", "/v2/invoices/1002", "");
    status(&made, 200);
    for name in ["total_in_cents", "balance_in_cents", "subtotal_in_cents", "state", "origin", "type"] {
        assert_eq!(invoice_field(&made.body, name), invoice_field(&credit, name), "{name}");
    }
    // A normal answer holds no invoice collection (the element is nil).
    let got = send(&s, version, "GET", &path, "");
    status(&got, 200);
    has(&got.body, r#"<invoice_collection nil="nil"></invoice_collection>"#);
}

#[test]
fn previews_show_their_invoices_at_2_11() {
    on_both_backends("sub_previews_211", |db| previews_show_invoices(db, "2.11"));
}

#[test]
fn previews_show_their_invoices_at_2_10() {
    on_both_backends("sub_previews_210", |db| previews_show_invoices(db, "2.10"));
}

/// Previews at `version` on a site with or without Credit Memos show no invoice collection.
fn previews_without_collection(db: &str, version: &str, credit_memos: bool) {
    let s = serve_at(db, T0, &[]);
    if credit_memos {
        s.cli(&["site", "update", "--name", "sandbox", "--credit-memos", "true"]);
    }
    plan(&s, "basic", 3100);
    plan(&s, "pro", 6200);
    // `cost_in_cents` is a 2.10 field too.
    let cost = |body: &str| tag(body, "cost_in_cents").unwrap_or_default();
    let priced = |cents: &str| if version == "2.9" { String::new() } else { cents.to_owned() };
    let r = send(&s, version, "POST", "/v2/subscriptions/preview", &subscription(&s, "n1", "pro"));
    status(&r, 200);
    assert_eq!(cost(&r.body), priced("6200"));
    assert!(!r.body.contains("invoice_collection"), "{}", r.body);
    let r = send(&s, version, "POST", "/v2/subscriptions", &subscription(&s, "d1", "pro"));
    status(&r, 201);
    let path = format!("/v2/subscriptions/{}", field(&r.body, "uuid"));
    sandbox_clock(&s, "<now>2027-01-31T08:00:00Z</now>");
    let downgrade = "<subscription><plan_code>basic</plan_code><timeframe>now</timeframe></subscription>";
    let r = send(&s, version, "POST", &format!("{path}/preview"), downgrade);
    status(&r, 200);
    assert_eq!(cost(&r.body), priced("-1500"));
    assert!(!r.body.contains("invoice_collection"), "{}", r.body);
    assert_eq!(count(db, "invoices"), "1");
}

#[test]
fn previews_below_2_10_show_no_invoice_collection() {
    on_both_backends("sub_previews_29", |db| previews_without_collection(db, "2.9", true));
}

#[test]
fn previews_without_credit_memos_show_no_invoice_collection() {
    on_both_backends("sub_previews_legacy", |db| previews_without_collection(db, "2.11", false));
}

/// Coupons: a creation preview's invoice is discounted by the codes the creation redeems (none
/// redeemed by the preview), and a change preview's by the account's redemptions, as the
/// invoices the creation and the change then make.
fn previews_take_coupons(db: &str) {
    let s = serve_at(db, T0, &[]);
    s.cli(&["site", "update", "--name", "sandbox", "--credit-memos", "true"]);
    plan(&s, "pro", 6200);
    plan(&s, "max", 9300);
    let percent = "<coupon><coupon_code>save</coupon_code><name>Save</name>\
                   <discount_type>percent</discount_type><discount_percent>10</discount_percent></coupon>";
    status(&send(&s, "2.11", "POST", "/v2/coupons", percent), 201);
    let body = subscription(&s, "c1", "pro").replace("<currency>", "<coupon_code>save</coupon_code><currency>");

    // 10 % of 6200 off the first payment; cost_in_cents is the engine's charge before discounts.
    let r = send(&s, "2.11", "POST", "/v2/subscriptions/preview", &body);
    status(&r, 200);
    assert_eq!(field(&r.body, "cost_in_cents"), "6200");
    let charge = field(&collection(&r.body), "charge_invoice");
    assert_eq!(invoice_field(&charge, "discount_in_cents"), "620");
    assert_eq!(invoice_field(&charge, "total_in_cents"), "5580");
    assert_eq!(count(db, "redemptions"), "0");

    let r = send(&s, "2.11", "POST", "/v2/subscriptions", &body);
    status(&r, 201);
    assert_eq!(invoices(db), ["1001:charge:purchase:5580:paid:0"]);
    let path = format!("/v2/subscriptions/{}", field(&r.body, "uuid"));

    // An upgrade with 15 of 31 days left, discounted by the account's redemption.
    sandbox_clock(&s, "<now>2027-01-31T08:00:00Z</now>");
    let upgrade = "<subscription><plan_code>max</plan_code><timeframe>now</timeframe></subscription>";
    let r = send(&s, "2.11", "POST", &format!("{path}/preview"), upgrade);
    status(&r, 200);
    assert_eq!(field(&r.body, "cost_in_cents"), "1500");
    let previewed = field(&collection(&r.body), "charge_invoice");
    assert_ne!(invoice_field(&previewed, "discount_in_cents"), "0", "{previewed}");
    // A coupon code the change would refuse, the preview refuses.
    let unknown = upgrade.replace("<timeframe>", "<coupon_code>nope</coupon_code><timeframe>");
    let r = send(&s, "2.11", "POST", &format!("{path}/preview"), &unknown);
    status(&r, 422);
    has(&r.body, r#"field="subscription.coupon_code" symbol="invalid""#);
    assert_eq!(send(&s, "2.11", "PUT", &path, &unknown).status, 422);
    // So is a free-trial coupon: a running subscription's trial is not started again.
    let trial = "<coupon><coupon_code>trial</coupon_code><name>Trial</name><discount_type>free_trial</discount_type>\
                 <free_trial_amount>1</free_trial_amount><free_trial_unit>month</free_trial_unit></coupon>";
    status(&send(&s, "2.11", "POST", "/v2/coupons", trial), 201);
    let with_trial = upgrade.replace("<timeframe>", "<coupon_code>trial</coupon_code><timeframe>");
    let r = send(&s, "2.11", "POST", &format!("{path}/preview"), &with_trial);
    status(&r, 422);
    has(&r.body, r#"field="subscription.coupon_code" symbol="invalid""#);
    assert_eq!(send(&s, "2.11", "PUT", &path, &with_trial).status, 422);
    // A code redeemed on the subscription stacks on the account's coupon: 10 % of the 4500 charge
    // for max (450), then 5 % of the 4050 left (202.50, rounded half up: 203).
    let extra = "<coupon><coupon_code>extra</coupon_code><name>Extra</name><discount_type>percent</discount_type>\
                 <discount_percent>5</discount_percent><redemption_resource>subscription</redemption_resource></coupon>";
    status(&send(&s, "2.11", "POST", "/v2/coupons", extra), 201);
    let with_extra = upgrade.replace("<timeframe>", "<coupon_code>extra</coupon_code><timeframe>");
    let r = send(&s, "2.11", "POST", &format!("{path}/preview"), &with_extra);
    status(&r, 200);
    let previewed = field(&collection(&r.body), "charge_invoice");
    assert_eq!(invoice_field(&previewed, "discount_in_cents"), "653", "{previewed}");
    status(&send(&s, "2.11", "PUT", &path, &with_extra), 200);
    let made = send(&s, "2.11", "GET", "/v2/invoices/1002", "");
    status(&made, 200);
    for name in ["subtotal_before_discount_in_cents", "discount_in_cents", "total_in_cents", "origin", "type"] {
        assert_eq!(invoice_field(&made.body, name), invoice_field(&previewed, name), "{name}");
    }
}

#[test]
fn previews_are_discounted_as_their_invoices() {
    on_both_backends("sub_previews_coupons", previews_take_coupons);
}

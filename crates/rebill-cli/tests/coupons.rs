//! Coupons and redemptions end to end over HTTP against `rebill serve`, on SQLite and on
//! PostgreSQL: coupon stories across a year of renewals on the sandbox clock (forever,
//! single-use, temporal ending on time, free trial, a coupon redeemed on an account before its
//! renewals, a subscription-level coupon, one-time charges), every invoice checked to the cent;
//! the coupon catalogue (create, edit, expire, restore, states and anchors); limits
//! (`max_redemptions`, per account, `redeem_by_date`); unique codes generated and redeemed once
//! each; the refusals with their symbols; the decisions of `docs/coupons.md`.

use rebill_testkit::*;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;

fn serve(db: &str, now: i64) -> Server {
    serve_at(db, now, &[])
}

fn post(s: &Server, path: &str, body: &str) -> Reply {
    authed(s, "POST", path, &xml_at("2.11"), body)
}

fn put(s: &Server, path: &str, body: &str) -> Reply {
    authed(s, "PUT", path, &xml_at("2.11"), body)
}

fn get_at(s: &Server, version: &str, path: &str) -> Reply {
    authed(s, "GET", path, &[("X-Api-Version", version)], "")
}

fn get(s: &Server, path: &str) -> Reply {
    get_at(s, "2.11", path)
}

fn delete(s: &Server, path: &str) -> Reply {
    authed(s, "DELETE", path, &[("X-Api-Version", "2.11")], "")
}

fn advance(s: &Server, amount: &str) -> Reply {
    sandbox_clock(s, &format!("<advance>{amount}</advance>"))
}

/// Every `<name>` text in order.
fn all_tags(body: &str, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(i) = rest.find(&format!("<{name}")) {
        let after = &rest[i..];
        match tag(after, name) {
            Some(t) => out.push(t),
            None => break,
        }
        rest = &after[name.len() + 1..];
    }
    out
}

fn plan(s: &Server, code: &str, cents: i64, extra: &str) {
    let body = format!(
        "<plan><plan_code>{code}</plan_code><name>Plan {code}</name>\
         <unit_amount_in_cents><USD>{cents}</USD></unit_amount_in_cents>{extra}</plan>"
    );
    ok(post(s, "/v2/plans", &body), 201);
}

/// Creates coupon `code` named after it with `terms` (the discount and the rest).
fn coupon(s: &Server, code: &str, terms: &str) -> Reply {
    post(
        s,
        "/v2/coupons",
        &format!("<coupon><coupon_code>{code}</coupon_code><name>Coupon {code}</name>{terms}</coupon>"),
    )
}

const PERCENT_10: &str = "<discount_type>percent</discount_type><discount_percent>10</discount_percent>";

/// Creates a subscription of a new account paying by card; answers the reply.
fn subscribe(s: &Server, account: &str, plan_code: &str, extra: &str) -> Reply {
    let token = card_token(s, "4111111111111111");
    let body = format!(
        "<subscription><plan_code>{plan_code}</plan_code><currency>USD</currency>\
         <account><account_code>{account}</account_code><email>{account}@example.com</email>\
         <first_name>Verena</first_name><last_name>Example</last_name>\
         <billing_info><token_id>{token}</token_id></billing_info></account>{extra}</subscription>"
    );
    post(s, "/v2/subscriptions", &body)
}

/// An account paying by card, without a subscription.
fn account(s: &Server, code: &str) {
    let token = card_token(s, "4111111111111111");
    let body = format!(
        "<account><account_code>{code}</account_code><email>{code}@example.com</email>\
         <billing_info><token_id>{token}</token_id></billing_info></account>"
    );
    ok(post(s, "/v2/accounts", &body), 201);
}

fn redeem(s: &Server, code: &str, account: &str, extra: &str) -> Reply {
    let body =
        format!("<redemption><account_code>{account}</account_code><currency>USD</currency>{extra}</redemption>");
    post(s, &format!("/v2/coupons/{code}/redeem"), &body)
}

/// The account's invoice totals in order.
fn totals(db: &str, account: &str) -> Vec<i64> {
    sql(
        db,
        &format!(
            "SELECT CAST(i.total AS TEXT) FROM invoices i JOIN accounts a ON a.id = i.account_id \
             WHERE a.account_code = '{account}' ORDER BY i.invoice_number"
        ),
    )
    .iter()
    .map(|t| t.parse().expect("total"))
    .collect()
}

/// `state:total_discounted` of the account's redemptions, oldest first.
fn redemptions(db: &str, account: &str) -> Vec<String> {
    sql(
        db,
        &format!(
            "SELECT r.state || ':' || CAST(r.total_discounted AS TEXT) FROM redemptions r \
             JOIN accounts a ON a.id = r.account_id WHERE a.account_code = '{account}' ORDER BY r.id"
        ),
    )
}

fn a_year_of_coupons(db: &str) {
    let s = serve(db, T0);
    plan(&s, "gold", 1000, "");
    plan(&s, "silver", 2000, "");
    plan(&s, "setup", 1000, "<setup_fee_in_cents><USD>300</USD></setup_fee_in_cents>");
    plan(
        &s,
        "trialplan",
        1000,
        "<trial_interval_length>7</trial_interval_length><trial_interval_unit>days</trial_interval_unit>",
    );
    ok(coupon(&s, "ten", PERCENT_10), 201);
    ok(
        coupon(
            &s,
            "first5",
            "<discount_type>dollars</discount_type><discount_in_cents><USD>500</USD></discount_in_cents>\
             <duration>single_use</duration>",
        ),
        201,
    );
    ok(
        coupon(
            &s,
            "half3",
            "<discount_type>percent</discount_type><discount_percent>50</discount_percent>\
             <duration>temporal</duration><temporal_unit>month</temporal_unit><temporal_amount>3</temporal_amount>",
        ),
        201,
    );
    ok(
        coupon(
            &s,
            "trial1",
            "<discount_type>free_trial</discount_type><free_trial_amount>1</free_trial_amount>\
             <free_trial_unit>month</free_trial_unit>",
        ),
        201,
    );
    ok(
        coupon(
            &s,
            "twenty1",
            "<discount_type>percent</discount_type><discount_percent>20</discount_percent><duration>single_use</duration>",
        ),
        201,
    );
    ok(
        coupon(
            &s,
            "subonly",
            "<discount_type>percent</discount_type><discount_percent>25</discount_percent>\
             <redemption_resource>subscription</redemption_resource>",
        ),
        201,
    );
    ok(
        coupon(
            &s,
            "nonplan",
            "<discount_type>dollars</discount_type><discount_in_cents><USD>700</USD></discount_in_cents>\
             <applies_to_all_plans>false</applies_to_all_plans><plan_codes><plan_code>silver</plan_code></plan_codes>\
             <applies_to_non_plan_charges>true</applies_to_non_plan_charges>",
        ),
        201,
    );

    // Forever, 10 %: 1000 - 100 on the first invoice.
    let f1 = ok(subscribe(&s, "f1", "gold", "<coupon_code>ten</coupon_code>"), 201);
    let first = ok(get(&s, "/v2/invoices/1001"), 200);
    assert_eq!(field(&first.body, "subtotal_before_discount_in_cents"), "1000", "{}", first.body);
    assert_eq!(field(&first.body, "discount_in_cents"), "100");
    assert_eq!(field(&first.body, "subtotal_in_cents"), "900");
    assert_eq!(field(&first.body, "total_in_cents"), "900");
    // Before 2.10 `subtotal_in_cents` is the amount before discount.
    let old = ok(get_at(&s, "2.9", "/v2/invoices/1001"), 200);
    assert_eq!(field(&old.body, "subtotal_in_cents"), "1000", "{}", old.body);
    assert_eq!(field(&old.body, "subtotal_after_discount_in_cents"), "900");
    let lines = sql(
        db,
        "SELECT CAST(a.discount AS TEXT) || ':' || CAST(a.total AS TEXT) FROM adjustments a \
                         JOIN invoices i ON i.id = a.invoice_id WHERE i.invoice_number = 1001",
    );
    assert_eq!(lines, ["100:900"]);
    let on_invoice = ok(get(&s, "/v2/invoices/1001/redemptions"), 200);
    assert_eq!(all_tags(&on_invoice.body, "coupon_code"), ["ten"], "{}", on_invoice.body);
    let f1_uuid = field(&f1.body, "uuid");
    // An account-level redemption is not a subscription's.
    let of_sub = ok(get(&s, &format!("/v2/subscriptions/{f1_uuid}/redemptions")), 200);
    assert!(all_tags(&of_sub.body, "uuid").is_empty(), "{}", of_sub.body);

    // Single use, 5 USD over the setup fee first: 300 + 1000 - 500 = 800, then full price.
    ok(subscribe(&s, "s1", "setup", "<coupon_code>first5</coupon_code>"), 201);
    let setup_lines = sql(
        db,
        "SELECT a.origin || ':' || CAST(a.discount AS TEXT) FROM adjustments a JOIN accounts c ON c.id = a.account_id \
         WHERE c.account_code = 's1' ORDER BY a.id",
    );
    let mut sorted = setup_lines.clone();
    sorted.sort();
    assert_eq!(sorted, ["plan:200", "setup_fee:300"], "{setup_lines:?}");

    // Temporal, 50 % for 3 months: it lapses one hour before 2027-04-15T08:00.
    ok(subscribe(&s, "t1", "gold", "<coupon_code>half3</coupon_code>"), 201);

    // A free-trial coupon sets a one-month trial.
    let ft = ok(subscribe(&s, "ft", "gold", "<coupon_code>trial1</coupon_code>"), 201);
    assert_eq!(field(&ft.body, "trial_ends_at"), "2027-02-15T08:00:00Z", "{}", ft.body);

    // Single use on a trial without a setup fee: the first paid invoice takes it.
    ok(subscribe(&s, "su", "trialplan", "<coupon_code>twenty1</coupon_code>"), 201);

    // A coupon redeemed on the account after the subscription: its renewals are discounted.
    ok(subscribe(&s, "ar", "gold", ""), 201);
    let redeemed = ok(redeem(&s, "ten", "ar", ""), 201);
    assert_eq!(
        redeemed.header("location").as_deref(),
        Some(format!("http://{}/v2/accounts/ar/redemption", s.addr).as_str()),
        "{}",
        redeemed.head
    );
    let r_uuid = field(&redeemed.body, "uuid");
    assert!(
        redeemed.body.contains(&format!("<redemption href=\"http://{}/v2/accounts/ar/redemptions/{r_uuid}\">", s.addr)),
        "{}",
        redeemed.body
    );
    assert_eq!(field(&redeemed.body, "state"), "active");
    assert_eq!(field(&redeemed.body, "single_use"), "false");

    // A subscription-level coupon: 25 % of that subscription only.
    let sr = ok(subscribe(&s, "sr", "gold", "<coupon_code>subonly</coupon_code>"), 201);
    let sr_uuid = field(&sr.body, "uuid");
    let of_sr = ok(get(&s, &format!("/v2/subscriptions/{sr_uuid}/redemptions")), 200);
    assert_eq!(all_tags(&of_sr.body, "subscription_uuid"), [sr_uuid], "{}", of_sr.body);

    // Two codes in one request stack, oldest first: 10 % of 1000, then 5 USD of the 900 left.
    let both = "<coupon_codes><coupon_code>ten</coupon_code><coupon_code>first5</coupon_code></coupon_codes>";
    ok(subscribe(&s, "mc", "gold", both), 201);
    assert_eq!(totals(db, "mc"), [400]);

    // One-time charges with a coupon that applies to them (and to silver only): 2000 - 700.
    account(&s, "oo");
    ok(redeem(&s, "nonplan", "oo", ""), 201);
    let charge = "<adjustment><description>Setup work</description><unit_amount_in_cents>2000</unit_amount_in_cents>\
                  <currency>USD</currency></adjustment>";
    ok(post(&s, "/v2/accounts/oo/adjustments", charge), 201);
    // The preview shows the discount the invoice gets.
    let previewed = ok(post(&s, "/v2/accounts/oo/invoices/preview", "<invoice/>"), 200);
    assert!(
        previewed.body.contains("<discount_in_cents type=\"integer\">700</discount_in_cents>"),
        "{}",
        previewed.body
    );
    assert!(previewed.body.contains("<total_in_cents type=\"integer\">1300</total_in_cents>"), "{}", previewed.body);
    let billed = ok(post(&s, "/v2/accounts/oo/invoices", "<invoice/>"), 201);
    assert!(billed.body.contains("<discount_in_cents type=\"integer\">700</discount_in_cents>"), "{}", billed.body);
    assert_eq!(totals(db, "oo"), [1300]);
    assert_eq!(
        sql(
            db,
            "SELECT CAST(a.discount AS TEXT) FROM adjustments a JOIN accounts c ON c.id = a.account_id \
                 WHERE c.account_code = 'oo'"
        ),
        ["700"]
    );

    // A year of renewals, one clock month at a time.
    for _ in 0..12 {
        advance(&s, "1month");
    }
    assert_eq!(totals(db, "f1"), [900; 13]);
    assert_eq!(redemptions(db, "f1"), ["active:1300"]);
    let mut s1 = vec![800];
    s1.extend([1000; 12]);
    assert_eq!(totals(db, "s1"), s1);
    assert_eq!(redemptions(db, "s1"), ["inactive:500"]);
    let mut t1 = vec![500, 500, 500];
    t1.extend([1000; 10]);
    assert_eq!(totals(db, "t1"), t1);
    assert_eq!(redemptions(db, "t1"), ["inactive:1500"]);
    // Trial until Feb 15, then twelve paid months to Jan 15 2028 (the trial invoice, if any, is 0).
    let ft_paid: Vec<i64> = totals(db, "ft").into_iter().filter(|t| *t != 0).collect();
    assert_eq!(ft_paid, [1000; 12]);
    let mut su = vec![800];
    su.extend([1000; 11]);
    let su_paid: Vec<i64> = totals(db, "su").into_iter().filter(|t| *t != 0).collect();
    assert_eq!(su_paid, su);
    assert_eq!(redemptions(db, "su"), ["inactive:200"]);
    let mut ar = vec![1000];
    ar.extend([900; 12]);
    assert_eq!(totals(db, "ar"), ar);
    assert_eq!(redemptions(db, "ar"), ["active:1200"]);
    assert_eq!(totals(db, "sr"), [750; 13]);
    let mut mc = vec![400];
    mc.extend([900; 12]);
    assert_eq!(totals(db, "mc"), mc);
    assert_eq!(redemptions(db, "mc"), ["active:1300", "inactive:500"]);

    // The lists: the lapsed temporal redemption is shown inactive, the used single-use one not.
    let t1_list = ok(get(&s, "/v2/accounts/t1/redemptions"), 200);
    assert_eq!(all_tags(&t1_list.body, "state"), ["inactive"], "{}", t1_list.body);
    assert_eq!(field(&t1_list.body, "total_discounted_in_cents"), "1500");
    let s1_list = ok(get(&s, "/v2/accounts/s1/redemptions"), 200);
    assert!(all_tags(&s1_list.body, "uuid").is_empty(), "{}", s1_list.body);
    let single = ok(get(&s, "/v2/accounts/f1/redemption"), 200);
    assert_eq!(field(&single.body, "coupon_code"), "ten");
    assert_eq!(field(&single.body, "total_discounted_in_cents"), "1300");
    assert!(
        single.body.contains(&format!("<invoice href=\"http://{}/v2/invoices/1001\"/>", s.addr)),
        "{}",
        single.body
    );

    // Removing a redemption stops the discount from the next renewal on.
    ok(delete(&s, &format!("/v2/accounts/ar/redemptions/{r_uuid}")), 204);
    assert_error(&delete(&s, &format!("/v2/accounts/ar/redemptions/{r_uuid}")), 404, "not_found");
    advance(&s, "1month");
    assert_eq!(totals(db, "ar").last(), Some(&1000));
    assert_eq!(totals(db, "f1").last(), Some(&900));
    // Every redemption use left its event.
    let discounted = sql(db, "SELECT CAST(COUNT(*) AS TEXT) FROM domain_events WHERE kind = 'invoice.discounted'");
    assert_ne!(discounted, ["0"]);
}

#[test]
fn a_year_of_coupons_on_both_backends() {
    on_both_backends("coupons_year", a_year_of_coupons);
}

fn catalogue_limits_and_refusals(db: &str) {
    let s = serve(db, T0);
    plan(&s, "gold", 1000, "");
    plan(&s, "silver", 2000, "");

    // Create: 201 with Location, redeemable, the redeem anchor; `hosted_description` read as the
    // description.
    let made = ok(coupon(&s, "save", &format!("{PERCENT_10}<hosted_description>Ten off</hosted_description>")), 201);
    assert_eq!(made.header("location").as_deref(), Some(format!("http://{}/v2/coupons/save", s.addr).as_str()));
    assert_eq!(field(&made.body, "state"), "redeemable");
    assert_eq!(field(&made.body, "description"), "Ten off");
    assert_eq!(field(&made.body, "duration"), "forever");
    assert_eq!(field(&made.body, "redemption_resource"), "account");
    assert!(
        made.body.contains(&format!(
            "<a name=\"redeem\" href=\"http://{}/v2/coupons/save/redeem\" method=\"post\"/>",
            s.addr
        )),
        "{}",
        made.body
    );
    assert!(!made.body.contains("name=\"restore\""), "{}", made.body);

    // Create refusals.
    let r = coupon(&s, "x1", "<discount_type>percent</discount_type>");
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.body.contains("field=\"coupon.discount_percent\" symbol=\"blank\""), "{}", r.body);
    let r = coupon(&s, "x2", "<discount_type>percent</discount_type><discount_percent>150</discount_percent>");
    assert!(r.body.contains("field=\"coupon.discount_percent\" symbol=\"invalid\""), "{}", r.body);
    let r = coupon(&s, "x3", &format!("{PERCENT_10}<applies_to_all_plans>false</applies_to_all_plans>"));
    assert!(r.body.contains("symbol=\"must_apply_to_plans_or_non_plan_charges\""), "{}", r.body);
    let r = coupon(
        &s,
        "x4",
        &format!(
            "{PERCENT_10}<applies_to_all_plans>false</applies_to_all_plans><plan_codes><plan_code>nope</plan_code></plan_codes>"
        ),
    );
    assert!(r.body.contains("field=\"coupon.plan_codes\" symbol=\"invalid\""), "{}", r.body);
    let r = coupon(&s, "save", PERCENT_10);
    assert!(r.body.contains("field=\"coupon.coupon_code\" symbol=\"taken\""), "{}", r.body);
    let r = coupon(&s, "x5", "<discount_type>dollars</discount_type>");
    assert!(r.body.contains("field=\"coupon.discount_in_cents\" symbol=\"blank\""), "{}", r.body);

    // Lists by state.
    let list = ok(get(&s, "/v2/coupons"), 200);
    assert_eq!(all_tags(&list.body, "coupon_code"), ["save"]);
    assert_eq!(list.header("x-records").as_deref(), Some("1"));
    assert!(all_tags(&ok(get(&s, "/v2/coupons?state=expired"), 200).body, "coupon_code").is_empty());
    assert_error(&get(&s, "/v2/coupons?state=bogus"), 400, "invalid_parameter");

    // Edit: the editable terms only.
    let edited = ok(
        put(&s, "/v2/coupons/save", "<coupon><name>Save more</name><max_redemptions>5</max_redemptions></coupon>"),
        200,
    );
    assert_eq!(field(&edited.body, "name"), "Save more");
    assert_eq!(field(&edited.body, "max_redemptions"), "5");
    let r = put(&s, "/v2/coupons/save", "<coupon><discount_type>dollars</discount_type></coupon>");
    assert_error(&r, 400, "attributes_not_allowed");
    assert!(r.body.contains("You are not allowed to edit attributes discount_type."), "{}", r.body);
    assert_error(&put(&s, "/v2/coupons/save/restore", "<coupon/>"), 400, "active_coupon");

    // Expire, then restore.
    ok(delete(&s, "/v2/coupons/save"), 204);
    let expired = ok(get(&s, "/v2/coupons/save"), 200);
    assert_eq!(field(&expired.body, "state"), "expired");
    assert!(expired.body.contains("name=\"restore\""), "{}", expired.body);
    assert!(!expired.body.contains("name=\"redeem\""), "{}", expired.body);
    assert_eq!(all_tags(&ok(get(&s, "/v2/coupons?state=expired"), 200).body, "coupon_code"), ["save"]);
    let r =
        put(&s, "/v2/coupons/save/restore", "<coupon><redeem_by_date>2026-01-01T00:00:00Z</redeem_by_date></coupon>");
    assert!(r.body.contains("field=\"coupon.redeem_by_date\" symbol=\"in_past\""), "{}", r.body);
    let restored = ok(put(&s, "/v2/coupons/save/restore", "<coupon/>"), 200);
    assert_eq!(field(&restored.body, "state"), "redeemable");
    assert_error(&delete(&s, "/v2/coupons/nothing"), 404, "not_found");

    // max_redemptions: two accounts, then maxed out; restored with a higher cap.
    ok(coupon(&s, "two", &format!("{PERCENT_10}<max_redemptions>2</max_redemptions>")), 201);
    for a in ["b1", "b2", "b3"] {
        account(&s, a);
    }
    ok(redeem(&s, "two", "b1", ""), 201);
    ok(redeem(&s, "two", "b2", ""), 201);
    let r = redeem(&s, "two", "b3", "");
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.body.contains("field=\"coupon.base\" symbol=\"maxed_out\""), "{}", r.body);
    let maxed = ok(get(&s, "/v2/coupons/two"), 200);
    assert_eq!(field(&maxed.body, "state"), "maxed_out");
    assert_eq!(all_tags(&ok(get(&s, "/v2/coupons?state=maxed_out"), 200).body, "coupon_code"), ["two"]);
    let r = put(&s, "/v2/coupons/two/restore", "<coupon><max_redemptions>2</max_redemptions></coupon>");
    assert!(r.body.contains("field=\"coupon.max_redemptions\" symbol=\"too_low\""), "{}", r.body);
    ok(put(&s, "/v2/coupons/two/restore", "<coupon><max_redemptions>3</max_redemptions></coupon>"), 200);
    ok(redeem(&s, "two", "b3", ""), 201);
    // A removed redemption still counts.
    let b1 = ok(get(&s, "/v2/accounts/b1/redemption"), 200);
    ok(delete(&s, &format!("/v2/accounts/b1/redemptions/{}", field(&b1.body, "uuid"))), 204);
    assert_eq!(field(&ok(get(&s, "/v2/coupons/two"), 200).body, "state"), "maxed_out");
    assert!(all_tags(&ok(get(&s, "/v2/accounts/b1/redemptions"), 200).body, "uuid").is_empty());
    assert_eq!(all_tags(&ok(get(&s, "/v2/coupons/two/redemptions"), 200).body, "uuid").len(), 3);

    // Per account.
    ok(coupon(&s, "once", &format!("{PERCENT_10}<max_redemptions_per_account>1</max_redemptions_per_account>")), 201);
    ok(redeem(&s, "once", "b2", ""), 201);
    let r = redeem(&s, "once", "b2", "");
    assert!(r.body.contains("field=\"coupon.base\" symbol=\"maxed_out_for_account\""), "{}", r.body);

    // Subscription coupons need a subscription, of a plan they apply to.
    ok(
        coupon(
            &s,
            "silversub",
            &format!(
                "{PERCENT_10}<redemption_resource>subscription</redemption_resource>\
                 <applies_to_all_plans>false</applies_to_all_plans><plan_codes><plan_code>silver</plan_code></plan_codes>"
            ),
        ),
        201,
    );
    let r = redeem(&s, "silversub", "b2", "");
    assert!(r.body.contains("field=\"coupon.subscription\" symbol=\"must_be_present\""), "{}", r.body);
    let gold = ok(subscribe(&s, "g1", "gold", ""), 201);
    let r =
        redeem(&s, "silversub", "g1", &format!("<subscription_uuid>{}</subscription_uuid>", field(&gold.body, "uuid")));
    assert!(r.body.contains("field=\"coupon.subscription_uuid\" symbol=\"not_valid_for_redemption\""), "{}", r.body);
    // Not for the plan on a new subscription either.
    let r = subscribe(&s, "g2", "gold", "<coupon_code>silversub</coupon_code>");
    assert!(r.body.contains("field=\"subscription.coupon_code\" symbol=\"invalid\""), "{}", r.body);
    assert!(sql(db, "SELECT account_code FROM accounts WHERE account_code = 'g2'").is_empty());

    // Free-trial coupons only on new subscriptions.
    ok(
        coupon(
            &s,
            "freeweek",
            "<discount_type>free_trial</discount_type><free_trial_amount>1</free_trial_amount><free_trial_unit>week</free_trial_unit>",
        ),
        201,
    );
    let r = redeem(&s, "freeweek", "b2", "");
    assert!(r.body.contains("field=\"coupon.base\" symbol=\"invalid\""), "{}", r.body);

    // Unknown coupon: 404 (also on redeem); unknown account: 404.
    assert_error(&redeem(&s, "savemore", "b2", ""), 404, "not_found");
    assert!(redeem(&s, "savemore", "b2", "").body.contains("Couldn't find Coupon with coupon_code = savemore"));
    assert_error(&redeem(&s, "once", "nobody", ""), 404, "not_found");
    assert_error(&get(&s, "/v2/coupons/savemore"), 404, "not_found");

    // redeem_by_date: redeemable until then, expired after on the site clock.
    ok(coupon(&s, "soon", &format!("{PERCENT_10}<redeem_by_date>2027-01-17T08:00:00Z</redeem_by_date>")), 201);
    advance(&s, "3days");
    let soon = ok(get(&s, "/v2/coupons/soon"), 200);
    assert_eq!(field(&soon.body, "state"), "expired");
    let r = redeem(&s, "soon", "b2", "");
    assert!(r.body.contains("field=\"coupon.base\" symbol=\"expired\""), "{}", r.body);
    let r = subscribe(&s, "g3", "gold", "<coupon_code>soon</coupon_code>");
    assert!(
        r.body
            .contains("<error field=\"subscription.coupon_code\" symbol=\"invalid\" lang=\"en-US\">is invalid</error>"),
        "{}",
        r.body
    );
    // The code of an expired coupon may be taken again.
    ok(coupon(&s, "soon", PERCENT_10), 201);
    assert_eq!(field(&ok(get(&s, "/v2/coupons/soon"), 200).body, "state"), "redeemable");

    // A coupon on a change with timeframe now only.
    let g1_uuid = field(&gold.body, "uuid");
    let r = put(
        &s,
        &format!("/v2/subscriptions/{g1_uuid}"),
        "<subscription><coupon_code>save</coupon_code></subscription>",
    );
    assert!(r.body.contains("field=\"subscription.coupon_code\" symbol=\"invalid\""), "{}", r.body);
    let r = put(
        &s,
        &format!("/v2/subscriptions/{g1_uuid}"),
        "<subscription><plan_code>silver</plan_code><timeframe>renewal</timeframe><coupon_code>save</coupon_code></subscription>",
    );
    assert!(r.body.contains("field=\"subscription.coupon_code\" symbol=\"invalid\""), "{}", r.body);
    // A change refused after its coupon was redeemed takes the redemption back.
    let redeemed = || {
        sql(
            db,
            "SELECT COUNT(*) FROM redemptions r JOIN coupons c ON c.id = r.coupon_id          WHERE c.coupon_code = 'save' AND r.removed_at IS NULL",
        )
    };
    let before = redeemed();
    let r = put(
        &s,
        &format!("/v2/subscriptions/{g1_uuid}"),
        "<subscription><plan_code>silver</plan_code><timeframe>now</timeframe><coupon_code>save</coupon_code>\
         <imported_trial>true</imported_trial></subscription>",
    );
    assert_eq!(r.status, 422, "{}", r.body);
    assert_eq!(redeemed(), before, "the refused change's redemption is taken back");
    ok(
        put(
            &s,
            &format!("/v2/subscriptions/{g1_uuid}"),
            "<subscription><plan_code>silver</plan_code><timeframe>now</timeframe><coupon_code>save</coupon_code></subscription>",
        ),
        200,
    );
    // The change's invoice: the unused gold credited, silver charged, 10 % off the charge.
    let change = sql(
        db,
        "SELECT CAST(i.discount AS TEXT) || ':' || CAST(i.subtotal_before_discount AS TEXT) FROM invoices i \
         JOIN accounts a ON a.id = i.account_id WHERE a.account_code = 'g1' ORDER BY i.invoice_number DESC LIMIT 1",
    );
    let parts: Vec<i64> = change[0].split(':').map(|p| p.parse().expect("amount")).collect();
    let charged: i64 = sql(
        db,
        "SELECT CAST(d.total + d.discount AS TEXT) FROM adjustments d JOIN accounts a ON a.id = d.account_id \
         WHERE a.account_code = 'g1' AND d.origin = 'plan' AND d.unit_amount = 2000",
    )[0]
    .parse()
    .expect("charge");
    assert_eq!(parts[0], (charged * 10 + 50) / 100, "{change:?} {charged}");
}

#[test]
fn catalogue_limits_and_refusals_on_both_backends() {
    on_both_backends("coupons_catalogue", catalogue_limits_and_refusals);
}

fn unique_codes(db: &str) {
    let s = serve(db, T0);
    let bulk = ok(
        coupon(
            &s,
            "thanks",
            &format!(
                "{PERCENT_10}<coupon_type>bulk</coupon_type><unique_code_template>'thanks'9999</unique_code_template>"
            ),
        ),
        201,
    );
    assert!(bulk.body.contains("name=\"generate\""), "{}", bulk.body);
    assert!(!bulk.body.contains("name=\"redeem\""), "{}", bulk.body);
    assert_eq!(field(&bulk.body, "max_redemptions_per_account"), "1");

    let made = ok(
        post(&s, "/v2/coupons/thanks/generate", "<coupon><number_of_unique_codes>3</number_of_unique_codes></coupon>"),
        201,
    );
    assert!(made.body.is_empty(), "{}", made.body);
    let location = made.header("location").expect("location");
    let prefix = format!("http://{}/v2/coupons/thanks/unique_coupon_codes?cursor=", s.addr);
    assert!(location.starts_with(&prefix) && location.ends_with("&per_page=3"), "{location}");
    let path = location.trim_start_matches(&format!("http://{}", s.addr)).to_owned();
    let first = ok(get(&s, &path), 200);
    let first_codes = all_tags(&first.body, "coupon_code");
    assert_eq!(first_codes.len(), 3, "{}", first.body);
    // A second batch: its Location lists the new codes first.
    let again = ok(
        post(&s, "/v2/coupons/thanks/generate", "<coupon><number_of_unique_codes>2</number_of_unique_codes></coupon>"),
        201,
    );
    let path2 =
        again.header("location").expect("location").trim_start_matches(&format!("http://{}", s.addr)).to_owned();
    let second_codes = all_tags(&ok(get(&s, &path2), 200).body, "coupon_code");
    assert_eq!(second_codes.len(), 2);
    assert!(second_codes.iter().all(|c| !first_codes.contains(c)));
    let all = ok(get(&s, "/v2/coupons/thanks/unique_coupon_codes"), 200);
    let mut codes = all_tags(&all.body, "coupon_code");
    assert_eq!(codes.len(), 5);
    codes.sort();
    codes.dedup();
    assert_eq!(codes.len(), 5);
    for c in &codes {
        assert!(c.len() == 10 && c.starts_with("thanks") && c[6..].bytes().all(|b| b.is_ascii_digit()), "{c}");
    }
    assert_eq!(field(&ok(get(&s, "/v2/coupons/thanks"), 200).body, "unique_coupon_codes_count"), "5");
    assert_eq!(
        sql(db, "SELECT CAST(COUNT(*) AS TEXT) FROM domain_events WHERE kind = 'coupon.codes_generated'"),
        ["2"]
    );

    // Each code redeemed once.
    for (i, code) in codes.iter().enumerate() {
        let a = format!("u{i}");
        account(&s, &a);
        let one = ok(get(&s, &format!("/v2/coupons/{code}")), 200);
        assert_eq!(field(&one.body, "coupon_type"), "unique_code");
        assert!(
            one.body.contains(&format!("<bulk_coupon href=\"http://{}/v2/coupons/thanks\"/>", s.addr)),
            "{}",
            one.body
        );
        assert!(one.body.contains("name=\"redeem\""), "{}", one.body);
        ok(redeem(&s, code, &a, ""), 201);
        let used = ok(get(&s, &format!("/v2/coupons/{code}")), 200);
        assert_eq!(field(&used.body, "state"), "maxed_out");
        assert!(used.body.contains("name=\"restore\""), "{}", used.body);
        assert!(!tag(&used.body, "redeemed_at").unwrap_or_default().is_empty(), "{}", used.body);
    }
    account(&s, "late");
    let r = redeem(&s, &codes[0], "late", "");
    assert!(r.body.contains("field=\"coupon.base\" symbol=\"maxed_out\""), "{}", r.body);
    // One code per account.
    ok(
        post(&s, "/v2/coupons/thanks/generate", "<coupon><number_of_unique_codes>1</number_of_unique_codes></coupon>"),
        201,
    );
    let fresh = all_tags(&ok(get(&s, "/v2/coupons/thanks/unique_coupon_codes?per_page=1"), 200).body, "coupon_code");
    let r = redeem(&s, &fresh[0], "u0", "");
    assert!(r.body.contains("symbol=\"maxed_out_for_account\""), "{}", r.body);
    // The bulk coupon itself is not redeemed.
    let r = redeem(&s, "thanks", "late", "");
    assert!(r.body.contains("field=\"coupon.coupon_code\" symbol=\"invalid\""), "{}", r.body);
    assert_eq!(all_tags(&ok(get(&s, "/v2/coupons/thanks/redemptions"), 200).body, "uuid").len(), 5);

    // Generate refusals.
    let r = post(
        &s,
        "/v2/coupons/thanks/generate",
        "<coupon><number_of_unique_codes>201</number_of_unique_codes></coupon>",
    );
    assert_error(&r, 400, "number_of_unique_codes");
    assert!(r.body.contains("You are limited to generating 200 at a time"), "{}", r.body);
    ok(coupon(&s, "single", PERCENT_10), 201);
    let r =
        post(&s, "/v2/coupons/single/generate", "<coupon><number_of_unique_codes>2</number_of_unique_codes></coupon>");
    assert_error(&r, 400, "number_of_unique_codes");
    assert!(r.body.contains("Coupon must be of type bulk to generate unique codes"), "{}", r.body);
    assert_error(&get(&s, "/v2/coupons/nothing/unique_coupon_codes"), 404, "not_found");

    // Expiring the bulk coupon expires its codes not redeemed; the redeemed ones stay maxed out.
    ok(delete(&s, "/v2/coupons/thanks"), 204);
    assert_eq!(field(&ok(get(&s, &format!("/v2/coupons/{}", fresh[0])), 200).body, "state"), "expired");
    assert_eq!(field(&ok(get(&s, &format!("/v2/coupons/{}", codes[0])), 200).body, "state"), "maxed_out");
    ok(put(&s, "/v2/coupons/thanks/restore", "<coupon/>"), 200);
    assert_eq!(field(&ok(get(&s, &format!("/v2/coupons/{}", fresh[0])), 200).body, "state"), "redeemable");
}

#[test]
fn unique_codes_on_both_backends() {
    on_both_backends("coupons_unique", unique_codes);
}

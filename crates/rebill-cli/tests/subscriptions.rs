//! Subscriptions end to end over HTTP against `rebill serve`, on SQLite and on PostgreSQL:
//! creation with a token (account created inline), reads and lists with the state filters,
//! renewals driven by the sandbox clock with every invoice checked to the cent, pauses, plan
//! changes now and at renewal, cancel and reactivate, declines and recovery, refused
//! simultaneous changes, account flags, the CLI clock and two service processes sharing one
//! PostgreSQL database.

use rebill_testkit::*;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;

/// A server on `db` with the clock at `now` and its own vault key file.
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

fn advance(s: &Server, amount: &str) -> Reply {
    sandbox_clock(s, &format!("<advance>{amount}</advance>"))
}

fn clock_to(s: &Server, at: &str) -> Reply {
    sandbox_clock(s, &format!("<now>{at}</now>"))
}

fn plan(s: &Server, code: &str, cents: i64, extra: &str) {
    let body = format!(
        "<plan><plan_code>{code}</plan_code><name>Plan {code}</name>\
         <unit_amount_in_cents><USD>{cents}</USD><EUR>{cents}</EUR></unit_amount_in_cents>{extra}</plan>"
    );
    ok(post(s, "/v2/plans", &body), 201);
}

/// Plan `daily`: 100 cents a day.
fn daily_plan(s: &Server) {
    plan(
        s,
        "daily",
        100,
        "<plan_interval_length>1</plan_interval_length><plan_interval_unit>days</plan_interval_unit>",
    );
}

/// Creates a subscription of a new account paying with `card`; answers the reply.
fn subscribe(s: &Server, account: &str, plan_code: &str, card: &str, extra: &str) -> Reply {
    let token = card_token(s, card);
    let body = format!(
        "<subscription><plan_code>{plan_code}</plan_code><currency>USD</currency>\
         <account><account_code>{account}</account_code><email>{account}@example.com</email>\
         <first_name>Verena</first_name><last_name>Example</last_name>\
         <billing_info><token_id>{token}</token_id></billing_info></account>{extra}</subscription>"
    );
    post(s, "/v2/subscriptions", &body)
}

fn uuid_of(reply: &Reply) -> String {
    field(&reply.body, "uuid")
}

fn sub_path(uuid: &str) -> String {
    format!("/v2/subscriptions/{uuid}")
}

fn create_get_list_and_renew(db: &str) {
    let s = serve(db, T0);
    plan(&s, "gold", 1000, "");
    let created = ok(subscribe(&s, "a1", "gold", "4111111111111111", ""), 201);
    let uuid = uuid_of(&created);
    assert_eq!(uuid.len(), 32);
    assert_eq!(
        created.header("location").as_deref(),
        Some(format!("http://{}/v2/subscriptions/{uuid}", s.addr).as_str()),
        "{}",
        created.head
    );
    let b = &created.body;
    assert_eq!(field(b, "state"), "active");
    assert_eq!(field(b, "plan_code"), "gold");
    assert_eq!(field(b, "name"), "Plan gold");
    assert_eq!(field(b, "unit_amount_in_cents"), "1000");
    assert_eq!(field(b, "quantity"), "1");
    assert_eq!(field(b, "activated_at"), "2027-01-15T08:00:00Z");
    assert_eq!(field(b, "current_period_started_at"), "2027-01-15T08:00:00Z");
    assert_eq!(field(b, "current_period_ends_at"), "2027-02-15T08:00:00Z");
    assert!(b.contains(&format!("<account href=\"http://{}/v2/accounts/a1\"/>", s.addr)), "{b}");
    assert!(
        b.contains(&format!(
            "<a name=\"cancel\" href=\"http://{}/v2/subscriptions/{uuid}/cancel\" method=\"put\"/>",
            s.addr
        )),
        "{b}"
    );
    assert!(!b.contains("name=\"reactivate\""), "{b}");
    assert!(!b.contains("name=\"resume\""), "{b}");

    // The account was created inline with its billing info; its flags follow the subscription.
    let account = ok(get(&s, "/v2/accounts/a1"), 200);
    assert_eq!(field(&account.body, "email"), "a1@example.com");
    assert_eq!(field(&account.body, "has_live_subscription"), "true");
    assert_eq!(field(&account.body, "has_active_subscription"), "true");
    assert_eq!(field(&account.body, "has_paused_subscription"), "false");
    let info = ok(get(&s, "/v2/accounts/a1/billing_info"), 200);
    assert_eq!(field(&info.body, "last_four"), "1111");

    // Reads and lists.
    let got = ok(get(&s, &sub_path(&uuid)), 200);
    assert_eq!(field(&got.body, "current_period_ends_at"), "2027-02-15T08:00:00Z");
    let list = ok(get(&s, "/v2/subscriptions"), 200);
    assert_eq!(list.header("x-records").as_deref(), Some("1"));
    assert_eq!(all_tags(&list.body, "uuid"), vec![uuid.clone()]);
    let list = ok(get(&s, "/v2/accounts/a1/subscriptions?state=active"), 200);
    assert_eq!(all_tags(&list.body, "uuid"), vec![uuid.clone()]);
    for state in ["in_trial", "past_due", "canceled", "expired", "future", "paused"] {
        let r = ok(get(&s, &format!("/v2/subscriptions?state={state}")), 200);
        assert_eq!(r.header("x-records").as_deref(), Some("0"), "{state}");
    }
    let head = ok(authed(&s, "HEAD", "/v2/subscriptions?state=live", &[("X-Api-Version", "2.11")], ""), 200);
    assert_eq!(head.header("x-records").as_deref(), Some("1"));
    assert_error(&get(&s, "/v2/subscriptions?state=bogus"), 400, "invalid_parameter");
    assert_error(&get(&s, "/v2/subscriptions/nope"), 404, "not_found");
    assert_error(&get(&s, "/v2/accounts/nobody/subscriptions"), 404, "not_found");

    // Twelve months of renewals, one per clock month, on the anchor's day and hour.
    for month in 1..=12u32 {
        let r = advance(&s, "1month");
        assert!(r.body.contains("<jobs_run type=\"integer\">1</jobs_run>"), "month {month}: {}", r.body);
        let got = ok(get(&s, &sub_path(&uuid)), 200);
        let (y, m) = (2027 + (month as i32) / 12, month % 12 + 1);
        assert_eq!(field(&got.body, "current_period_started_at"), format!("{y}-{m:02}-15T08:00:00Z"), "month {month}");
    }
    let got = ok(get(&s, &sub_path(&uuid)), 200);
    assert_eq!(field(&got.body, "current_period_ends_at"), "2028-02-15T08:00:00Z");
    // One paid invoice per period, each exactly the price; the subscription links the last.
    let bills = invoices(db, "a1");
    assert_eq!(bills.len(), 13);
    for (i, bill) in bills.iter().enumerate() {
        let origin = if i == 0 { "purchase" } else { "renewal" };
        assert_eq!(bill, &format!("{}:{origin}:1000:paid", 1001 + i), "{bills:?}");
    }
    assert!(got.body.contains(&format!("<invoice href=\"http://{}/v2/invoices/1013\"/>", s.addr)), "{}", got.body);
    assert_eq!(
        sql(db, "SELECT CAST(COUNT(*) AS TEXT) FROM transactions WHERE status = 'success' AND amount = 1000"),
        ["13"]
    );
}

/// The account's invoices in order: `number:origin:total:state`.
fn invoices(db: &str, account: &str) -> Vec<String> {
    sql(
        db,
        &format!(
            "SELECT CAST(i.invoice_number AS TEXT) || ':' || i.origin || ':' || CAST(i.total AS TEXT) || ':' || i.state \
             FROM invoices i JOIN accounts a ON a.id = i.account_id WHERE a.account_code = '{account}' \
             ORDER BY i.invoice_number"
        ),
    )
}

/// The account's invoice totals in order.
fn totals(db: &str, account: &str) -> Vec<i64> {
    invoices(db, account).iter().map(|i| i.split(':').nth(2).and_then(|t| t.parse().ok()).expect("total")).collect()
}

#[test]
fn create_get_list_and_renew_on_both_backends() {
    on_both_backends("subs_basic", create_get_list_and_renew);
}

fn pause_resume_cancel_reactivate(db: &str) {
    let s = serve(db, T0);
    plan(&s, "gold", 1000, "");
    let uuid = uuid_of(&ok(subscribe(&s, "p1", "gold", "4111111111111111", ""), 201));
    let path = sub_path(&uuid);

    // Feb 15 renewal, then a pause of 2 cycles scheduled on Feb 20 for the next renewal.
    advance(&s, "1month");
    advance(&s, "5days");
    let pause_body = "<subscription><remaining_pause_cycles>2</remaining_pause_cycles></subscription>";
    let r = ok(put(&s, &format!("{path}/pause"), pause_body), 200);
    assert_eq!(field(&r.body, "state"), "active");
    assert_eq!(field(&r.body, "paused_at"), "2027-03-15T08:00:00Z");
    assert_eq!(field(&r.body, "remaining_pause_cycles"), "2");
    // Pause and resume exist from 2.11 only.
    assert_error(&authed(&s, "PUT", &format!("{path}/pause"), &xml_at("2.10"), pause_body), 404, "not_found");

    // Mar 15: paused, nothing due until May 15; older versions see it as active.
    advance(&s, "1month");
    let r = ok(get(&s, &path), 200);
    assert_eq!(field(&r.body, "state"), "paused");
    assert_eq!(field(&r.body, "current_period_started_at"), "2027-03-15T08:00:00Z");
    assert_eq!(field(&r.body, "remaining_pause_cycles"), "1");
    assert!(r.body.contains("name=\"resume\""), "{}", r.body);
    assert_eq!(field(&ok(get_at(&s, "2.10", &path), 200).body, "state"), "active");
    assert_eq!(field(&ok(get(&s, "/v2/accounts/p1"), 200).body, "has_paused_subscription"), "true");
    assert_eq!(ok(get(&s, "/v2/subscriptions?state=paused"), 200).header("x-records").as_deref(), Some("1"));
    advance(&s, "1month");
    let r = ok(get(&s, &path), 200);
    assert_eq!((field(&r.body, "state"), field(&r.body, "remaining_pause_cycles")), ("paused".into(), "0".into()));
    // May 15: renews normally and is active again.
    advance(&s, "1month");
    let r = ok(get(&s, &path), 200);
    assert_eq!(field(&r.body, "state"), "active");
    assert_eq!(field(&r.body, "current_period_started_at"), "2027-05-15T08:00:00Z");
    assert_eq!(field(&r.body, "current_period_ends_at"), "2027-06-15T08:00:00Z");
    assert_eq!(field(&ok(get(&s, "/v2/accounts/p1"), 200).body, "has_paused_subscription"), "false");
    // Jan 15, Feb 15, nothing on Mar 15 and Apr 15, May 15.
    assert_eq!(totals(db, "p1"), [1000, 1000, 1000]);
    assert_eq!(
        sql(db, "SELECT CAST(start_date AS TEXT) FROM adjustments WHERE origin = 'plan' ORDER BY start_date"),
        [T0.to_string(), (T0 + 31 * 86_400).to_string(), (T0 + 120 * 86_400).to_string()]
    );

    // A manual resume: paused from Jun 15, resumed on Jun 20 with a new period from then.
    ok(
        put(
            &s,
            &format!("{path}/pause"),
            "<subscription><remaining_pause_cycles>3</remaining_pause_cycles></subscription>",
        ),
        200,
    );
    advance(&s, "1month");
    clock_to(&s, "2027-06-20T12:00:00Z");
    assert_error(&put(&s, &format!("{path}/reactivate"), ""), 422, "not_canceled");
    let r = ok(put(&s, &format!("{path}/resume"), ""), 200);
    assert_eq!(field(&r.body, "state"), "active");
    assert_eq!(field(&r.body, "current_period_started_at"), "2027-06-20T12:00:00Z");
    assert_eq!(field(&r.body, "current_period_ends_at"), "2027-07-20T12:00:00Z");
    assert_error(&put(&s, &format!("{path}/resume"), ""), 422, "not_paused");
    // The resume is invoiced at once: a full period from Jun 20 (June 15 was a paused renewal).
    assert_eq!(totals(db, "p1"), [1000, 1000, 1000, 1000]);
    assert_eq!(invoices(db, "p1").last().map(String::as_str), Some("1004:renewal:1000:paid"));

    // Cancel, then reactivate before the period ends; cancel again and let it expire.
    let r = ok(put(&s, &format!("{path}/cancel"), ""), 200);
    assert_eq!(field(&r.body, "state"), "canceled");
    assert_eq!(field(&r.body, "canceled_at"), "2027-06-20T12:00:00Z");
    assert_eq!(field(&r.body, "expires_at"), "2027-07-20T12:00:00Z");
    assert!(r.body.contains("name=\"reactivate\""), "{}", r.body);
    assert_error(&put(&s, &format!("{path}/cancel"), ""), 422, "already_canceled");
    assert_eq!(field(&ok(get(&s, "/v2/accounts/p1"), 200).body, "has_canceled_subscription"), "true");
    let r = ok(put(&s, &format!("{path}/reactivate"), ""), 200);
    assert_eq!(field(&r.body, "state"), "active");
    assert_eq!(tag(&r.body, "expires_at").as_deref(), Some(""));
    ok(put(&s, &format!("{path}/cancel"), ""), 200);
    advance(&s, "1month");
    let r = ok(get(&s, &path), 200);
    assert_eq!(field(&r.body, "state"), "expired");
    assert_eq!(field(&r.body, "expires_at"), "2027-07-20T12:00:00Z");
    assert_error(&put(&s, &format!("{path}/reactivate"), ""), 422, "already_expired");
    assert_eq!(ok(get(&s, "/v2/subscriptions"), 200).header("x-records").as_deref(), Some("0"));
    assert_eq!(ok(get(&s, "/v2/subscriptions?state=expired"), 200).header("x-records").as_deref(), Some("1"));
    let account = ok(get(&s, "/v2/accounts/p1"), 200);
    assert_eq!(field(&account.body, "has_live_subscription"), "false");

    // Terminate with refund=none (refund=partial and full: tests/refunds.rs).
    let other = uuid_of(&ok(subscribe(&s, "p2", "gold", "4111111111111111", ""), 201));
    assert_error(&put(&s, &format!("/v2/subscriptions/{other}/terminate?refund=some"), ""), 400, "invalid_parameter");
    let r = ok(put(&s, &format!("/v2/subscriptions/{other}/terminate?refund=none"), ""), 200);
    assert_eq!(field(&r.body, "state"), "expired");
    assert_eq!(field(&r.body, "expires_at"), "2027-07-20T12:00:00Z");
    assert_eq!(field(&r.body, "canceled_at"), "2027-07-20T12:00:00Z");
    // Events: each accepted action once, in order, with the action it accepted.
    let actions = sql(
        db,
        &format!(
            "SELECT kind || ' ' || payload FROM domain_events WHERE subject = '{uuid}' \
             AND payload LIKE '%\"action\":{{\"action\":%' ORDER BY id"
        ),
    );
    let names: Vec<(&str, &str)> = actions
        .iter()
        .map(|a| {
            let kind = a.split(' ').next().unwrap_or_default();
            let action = a.split("\"action\":{\"action\":\"").nth(1).and_then(|r| r.split('"').next());
            (kind, action.unwrap_or_default())
        })
        .collect();
    assert_eq!(
        names,
        [
            ("subscription.pause_scheduled", "pause"),
            ("subscription.pause_scheduled", "pause"),
            ("subscription.resumed", "resume"),
            ("subscription.canceled", "cancel"),
            ("subscription.reactivated", "reactivate"),
            ("subscription.canceled", "cancel")
        ]
    );
}

/// The pause request's other cases (reference §4.1): a new count replaces a scheduled pause's and
/// 0 cancels it; on a paused subscription a count adjusts the pause and 0 resumes it at the next
/// renewal; a manual resume applies the change pending for the renewal.
fn pause_counts_and_pending_changes(db: &str) {
    let s = serve(db, T0);
    plan(&s, "gold", 1000, "");
    plan(&s, "silver", 500, "");
    let uuid = uuid_of(&ok(subscribe(&s, "q1", "gold", "4111111111111111", ""), 201));
    let path = sub_path(&uuid);
    let pause = |n: u32| {
        let body = format!("<subscription><remaining_pause_cycles>{n}</remaining_pause_cycles></subscription>");
        ok(put(&s, &format!("{path}/pause"), &body), 200)
    };
    let state = |r: &Reply| (field(&r.body, "state"), tag(&r.body, "paused_at").unwrap_or_default());

    // Jan 20: scheduled for Feb 15, then 3 cycles instead of 2, then called off.
    clock_to(&s, "2027-01-20T08:00:00Z");
    let r = pause(2);
    assert_eq!(state(&r), ("active".into(), "2027-02-15T08:00:00Z".into()));
    let r = pause(3);
    assert_eq!(field(&r.body, "remaining_pause_cycles"), "3");
    assert_eq!(state(&r), ("active".into(), "2027-02-15T08:00:00Z".into()));
    let r = pause(0);
    assert_eq!(state(&r), ("active".into(), String::new()));
    assert!(!r.body.contains("name=\"resume\""), "{}", r.body);
    // Feb 15 renews as usual.
    clock_to(&s, "2027-02-15T08:00:00Z");
    assert_eq!(state(&ok(get(&s, &path), 200)), ("active".into(), String::new()));
    assert_eq!(totals(db, "q1"), [1000, 1000]);

    // Feb 20: one cycle from Mar 15; on Mar 20 the running pause is made 3 cycles long.
    clock_to(&s, "2027-02-20T08:00:00Z");
    pause(1);
    clock_to(&s, "2027-03-15T08:00:00Z");
    let r = ok(get(&s, &path), 200);
    assert_eq!(field(&r.body, "state"), "paused");
    assert_eq!(field(&r.body, "remaining_pause_cycles"), "0");
    clock_to(&s, "2027-03-20T08:00:00Z");
    let r = pause(3);
    assert_eq!((field(&r.body, "state"), field(&r.body, "remaining_pause_cycles")), ("paused".into(), "3".into()));
    clock_to(&s, "2027-04-15T08:00:00Z");
    let r = ok(get(&s, &path), 200);
    assert_eq!((field(&r.body, "state"), field(&r.body, "remaining_pause_cycles")), ("paused".into(), "2".into()));
    // Apr 20: 0 ends the pause at the next renewal, May 15, which is billed again.
    clock_to(&s, "2027-04-20T08:00:00Z");
    let r = pause(0);
    assert_eq!(field(&r.body, "state"), "paused");
    clock_to(&s, "2027-05-15T08:00:00Z");
    let r = ok(get(&s, &path), 200);
    assert_eq!(field(&r.body, "state"), "active");
    assert_eq!(field(&r.body, "current_period_ends_at"), "2027-06-15T08:00:00Z");
    // Jan 15, Feb 15, nothing on Mar 15 and Apr 15, May 15.
    assert_eq!(totals(db, "q1"), [1000, 1000, 1000]);

    // Paused again from Jun 15; a plan change for the renewal waits, and the manual resume on
    // Jun 20 applies it: a full silver period from Jun 20.
    clock_to(&s, "2027-05-20T08:00:00Z");
    pause(2);
    clock_to(&s, "2027-06-18T08:00:00Z");
    let change = "<subscription><plan_code>silver</plan_code><timeframe>renewal</timeframe></subscription>";
    let r = ok(put(&s, &path, change), 200);
    assert_eq!(field(&r.body, "plan_code"), "gold");
    let pending = tag(&r.body, "pending_subscription").unwrap_or_default();
    assert!(pending.contains("<plan_code>silver</plan_code>"), "{}", r.body);
    clock_to(&s, "2027-06-20T08:00:00Z");
    let r = ok(put(&s, &format!("{path}/resume"), ""), 200);
    assert_eq!(field(&r.body, "state"), "active");
    assert_eq!(field(&r.body, "plan_code"), "silver");
    assert_eq!(field(&r.body, "unit_amount_in_cents"), "500");
    assert!(r.body.contains("<pending_subscription type=\"subscription\" nil=\"nil\">"), "{}", r.body);
    assert_eq!(field(&r.body, "current_period_started_at"), "2027-06-20T08:00:00Z");
    assert_eq!(field(&r.body, "current_period_ends_at"), "2027-07-20T08:00:00Z");
    assert_eq!(totals(db, "q1"), [1000, 1000, 1000, 500]);
    // Jul 20 renews silver.
    clock_to(&s, "2027-07-20T08:00:00Z");
    assert_eq!(totals(db, "q1"), [1000, 1000, 1000, 500, 500]);
}

#[test]
fn pause_counts_and_pending_changes_on_both_backends() {
    on_both_backends("subs_pause_counts", pause_counts_and_pending_changes);
}

#[test]
fn pause_resume_cancel_and_reactivate_on_both_backends() {
    on_both_backends("subs_pause", pause_resume_cancel_reactivate);
}

fn changes_trials_and_refusals(db: &str) {
    let s = serve(db, T0);
    // January 15 → February 15 is 31 days.
    plan(&s, "basic", 3100, "");
    plan(&s, "pro", 6200, "");
    plan(
        &s,
        "trial",
        2000,
        "<trial_interval_length>14</trial_interval_length><trial_interval_unit>days</trial_interval_unit>",
    );
    let uuid = uuid_of(&ok(subscribe(&s, "c1", "basic", "4111111111111111", ""), 201));
    let path = sub_path(&uuid);
    clock_to(&s, "2027-01-31T08:00:00Z");
    // 15 of 31 days left: credit 1500 of basic, charge 3000 of pro (previewed, then made).
    let body = "<subscription><plan_code>pro</plan_code><timeframe>now</timeframe></subscription>";
    let preview = ok(post(&s, &format!("{path}/preview"), body), 200);
    assert_eq!(field(&preview.body, "cost_in_cents"), "1500");
    assert_eq!(field(&preview.body, "plan_code"), "pro");
    assert_eq!(field(&ok(get(&s, &path), 200).body, "plan_code"), "basic");
    let r = ok(put(&s, &path, body), 200);
    assert_eq!(field(&r.body, "plan_code"), "pro");
    assert_eq!(field(&r.body, "unit_amount_in_cents"), "6200");
    assert_eq!(field(&r.body, "current_period_ends_at"), "2027-02-15T08:00:00Z");
    assert_eq!(invoices(db, "c1"), ["1001:purchase:3100:paid", "1002:immediate_change:1500:paid"]);
    assert_eq!(
        sql(
            db,
            "SELECT CAST(total AS TEXT) || ':' || origin FROM adjustments WHERE invoice_id = (SELECT id FROM invoices WHERE invoice_number = 1002) ORDER BY id"
        ),
        ["-1500:credit", "3000:plan"]
    );
    // At renewal: the change waits in pending_subscription.
    let body =
        "<subscription><plan_code>basic</plan_code><quantity>2</quantity><timeframe>renewal</timeframe></subscription>";
    let r = ok(put(&s, &path, body), 200);
    assert_eq!(field(&r.body, "plan_code"), "pro");
    let pending = field(&r.body, "pending_subscription");
    assert_eq!(field(&pending, "plan_code"), "basic");
    assert_eq!(field(&pending, "quantity"), "2");
    assert!(r.body.contains("<pending_subscription type=\"subscription\">"), "{}", r.body);
    advance(&s, "15days");
    let r = ok(get(&s, &path), 200);
    assert_eq!((field(&r.body, "plan_code"), field(&r.body, "quantity")), ("basic".into(), "2".into()));
    // The renewal bills the pending terms: 2 × 3100.
    assert_eq!(totals(db, "c1"), [3100, 1500, 6200]);
    assert!(r.body.contains("<pending_subscription type=\"subscription\" nil=\"nil\">"), "{}", r.body);

    // Refusals: an unknown plan, another currency, imported_trial outside a trial.
    let r = put(&s, &path, "<subscription><plan_code>nope</plan_code></subscription>");
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.body.contains("field=\"subscription.plan_code\""), "{}", r.body);
    let r = put(&s, &path, "<subscription><currency>EUR</currency></subscription>");
    assert!(r.status == 422 && r.body.contains("field=\"subscription.currency\""), "{}", r.body);
    assert_error(
        &put(&s, &path, "<subscription><imported_trial>true</imported_trial></subscription>"),
        422,
        "imported_trial_not_in_trial",
    );
    let r = put(&s, &path, "<subscription><quantity>0</quantity></subscription>");
    assert!(r.status == 422 && r.body.contains("field=\"subscription.quantity\""), "{}", r.body);
    let r = subscribe(&s, "c2", "basic", "4111111111111111", "<imported_trial>true</imported_trial>");
    assert_error(&r, 422, "imported_trial_not_in_trial");

    // A trial from the plan: in_trial filter, imported_trial changeable during the trial only.
    let t = ok(subscribe(&s, "c3", "trial", "4111111111111111", "<imported_trial>true</imported_trial>"), 201);
    assert_eq!(field(&t.body, "trial_started_at"), "2027-02-15T08:00:00Z");
    assert_eq!(field(&t.body, "trial_ends_at"), "2027-03-01T08:00:00Z");
    assert_eq!(field(&t.body, "imported_trial"), "true");
    let trial_uuid = uuid_of(&t);
    let r = ok(get(&s, "/v2/subscriptions?state=in_trial"), 200);
    assert_eq!(all_tags(&r.body, "uuid"), vec![trial_uuid.clone()]);
    let r =
        ok(put(&s, &sub_path(&trial_uuid), "<subscription><imported_trial>false</imported_trial></subscription>"), 200);
    assert_eq!(field(&r.body, "imported_trial"), "false");
    advance(&s, "14days");
    assert_eq!(ok(get(&s, "/v2/subscriptions?state=in_trial"), 200).header("x-records").as_deref(), Some("0"));
    let r = put(&s, &sub_path(&trial_uuid), "<subscription><imported_trial>true</imported_trial></subscription>");
    assert_error(&r, 422, "imported_trial_not_in_trial");

    // Postpone and notes.
    let r = ok(put(&s, &format!("{path}/postpone?next_renewal_date=2027-04-01T00:00:00Z"), ""), 200);
    assert_eq!(field(&r.body, "current_period_ends_at"), "2027-04-01T00:00:00Z");
    assert_error(&put(&s, &format!("{path}/postpone?next_renewal_date=2020-01-01"), ""), 422, "invalid_renewal_date");
    // Later clients name it next_bill_date and send a date-time without an offset (UTC), or with
    // the offset's `+` unescaped (a space once the query is decoded); `bulk` changes nothing.
    let r = ok(put(&s, &format!("{path}/postpone?next_bill_date=2027-04-10T00:00:00&bulk=false"), ""), 200);
    assert_eq!(field(&r.body, "current_period_ends_at"), "2027-04-10T00:00:00Z");
    let r = ok(put(&s, &format!("{path}/postpone?next_bill_date=2027-04-20T02:00:00+02:00&bulk=true"), ""), 200);
    assert_eq!(field(&r.body, "current_period_ends_at"), "2027-04-20T00:00:00Z");
    let r = ok(put(&s, &format!("{path}/postpone?next_renewal_date=2027-04-25T00:00:00+00:00"), ""), 200);
    assert_eq!(field(&r.body, "current_period_ends_at"), "2027-04-25T00:00:00Z");
    // Both names: the same instant is accepted, different ones refused and nothing changes.
    let r = ok(
        put(&s, &format!("{path}/postpone?next_renewal_date=2027-04-28&next_bill_date=2027-04-28T00:00:00Z"), ""),
        200,
    );
    assert_eq!(field(&r.body, "current_period_ends_at"), "2027-04-28T00:00:00Z");
    let r = put(&s, &format!("{path}/postpone?next_renewal_date=2027-05-01&next_bill_date=2027-05-02"), "");
    assert_error(&r, 400, "invalid_parameter");
    assert!(r.body.contains("next_renewal_date and next_bill_date name different dates"), "{}", r.body);
    let r = put(&s, &format!("{path}/postpone?bulk=false"), "");
    assert_error(&r, 400, "invalid_parameter");
    assert!(r.body.contains("next_renewal_date (or next_bill_date) is required"), "{}", r.body);
    assert_error(&put(&s, &format!("{path}/postpone?next_bill_date=soon"), ""), 400, "invalid_parameter");
    assert_eq!(field(&ok(get(&s, &path), 200).body, "current_period_ends_at"), "2027-04-28T00:00:00Z");
    let r = ok(
        put(&s, &format!("{path}/notes"), "<subscription><customer_notes>Thanks!</customer_notes></subscription>"),
        200,
    );
    assert_eq!(field(&r.body, "customer_notes"), "Thanks!");
    assert_eq!(field(&ok(get(&s, &path), 200).body, "customer_notes"), "Thanks!");
    // The account route creates on an existing account only.
    let r = post(
        &s,
        "/v2/accounts/c1/subscriptions",
        "<subscription><plan_code>pro</plan_code><currency>USD</currency></subscription>",
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let r = post(
        &s,
        "/v2/accounts/zz/subscriptions",
        "<subscription><plan_code>pro</plan_code><currency>USD</currency></subscription>",
    );
    assert_error(&r, 404, "not_found");
    let r = post(&s, "/v2/subscriptions", "<subscription><plan_code>pro</plan_code></subscription>");
    assert_eq!(r.status, 422, "{}", r.body);
}

#[test]
fn changes_trials_and_refusals_on_both_backends() {
    on_both_backends("subs_changes", changes_trials_and_refusals);
}

fn simultaneous_changes(db: &str) {
    let s = serve(db, T0);
    plan(&s, "gold", 1000, "");
    let uuid = uuid_of(&ok(subscribe(&s, "s1", "gold", "4111111111111111", ""), 201));
    let path = sub_path(&uuid);
    // A change in progress elsewhere (another process holds the claim): refused, then accepted
    // once it is released.
    sql(
        db,
        &format!("UPDATE subscriptions SET lock_token = 'elsewhere', locked_until = {} WHERE uuid = '{uuid}'", T0 + 30),
    );
    assert_error(&put(&s, &format!("{path}/cancel"), ""), 422, "simultaneous_request");
    let r = put(&s, &format!("{path}/notes"), "<subscription><customer_notes>x</customer_notes></subscription>");
    assert_error(&r, 422, "simultaneous_request");
    assert_eq!(field(&ok(get(&s, &path), 200).body, "state"), "active");
    // A claim whose lease ran out (its process died) does not block for ever.
    s.set_clock(T0 + 31);
    ok(put(&s, &format!("{path}/notes"), "<subscription><customer_notes>y</customer_notes></subscription>"), 200);

    // Concurrent changes: each is accepted or refused whole (never both of a pair refused), and
    // exactly the accepted ones are in the history. Pairs are sent until one pair overlapped:
    // then exactly one of the two is refused with simultaneous_request.
    let change = |i: usize| {
        let addr = s.addr.clone();
        let key = s.key.clone();
        let path = path.clone();
        std::thread::spawn(move || {
            let body =
                format!("<subscription><quantity>{}</quantity><timeframe>renewal</timeframe></subscription>", i + 2);
            let auth = format!("Basic {}", basic(&key));
            let mut req = format!("PUT {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
            for (n, v) in [
                ("Authorization", auth.as_str()),
                ("Accept", "application/xml"),
                ("Content-Type", "application/xml; charset=utf-8"),
                ("X-Api-Version", "2.11"),
            ] {
                req.push_str(&format!("{n}: {v}\r\n"));
            }
            req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
            raw(&addr, &req)
        })
    };
    let mut accepted = 0;
    let mut overlapped = false;
    for round in 0..50 {
        let pair = [change(2 * round), change(2 * round + 1)];
        let replies: Vec<Reply> = pair.into_iter().map(|t| t.join().expect("thread")).collect();
        let ok_count = replies.iter().filter(|r| r.status == 200).count();
        for r in replies.iter().filter(|r| r.status != 200) {
            assert_error(r, 422, "simultaneous_request");
        }
        assert!(ok_count >= 1, "both changes of a pair were refused: {replies:#?}");
        accepted += ok_count;
        if ok_count == 1 {
            overlapped = true;
            break;
        }
    }
    assert!(overlapped, "no pair of concurrent changes overlapped in 50 tries");
    let changes = sql(
        db,
        &format!(
            "SELECT kind FROM domain_events WHERE subject = '{uuid}' AND payload LIKE '%\"action\":{{\"action\":%'"
        ),
    );
    assert_eq!(changes.len(), accepted, "one event per accepted change: {changes:?}");
    assert!(
        sql(db, &format!("SELECT lock_token FROM subscriptions WHERE uuid = '{uuid}' AND lock_token IS NOT NULL"))
            .is_empty()
    );
}

#[test]
fn simultaneous_changes_on_both_backends() {
    on_both_backends("subs_simultaneous", simultaneous_changes);
}

fn cli_clock(db: &str) {
    let s = serve(db, T0);
    daily_plan(&s);
    let uuid = uuid_of(&ok(subscribe(&s, "d1", "daily", "4111111111111111", ""), 201));
    let out = s.cli_json(&["clock", "advance", "--site", "sandbox", "3days"]);
    assert_eq!(out["now"], "2027-01-18T08:00:00Z");
    assert_eq!(out["jobs_run"], 3);
    let r = ok(get(&s, &sub_path(&uuid)), 200);
    assert_eq!(field(&r.body, "current_period_started_at"), "2027-01-18T08:00:00Z");
    // The site by its id (as `rebill site list` shows it) works as well as by its name.
    let sites = s.cli_json(&["site", "list"]);
    let id = sites["sites"][0]["id"].as_i64().expect("site id").to_string();
    let out = s.cli_json(&["clock", "set", "--site", &id, "2027-01-20T09:00:00Z"]);
    assert_eq!(out["jobs_run"], 2);
    let r = ok(get(&s, &sub_path(&uuid)), 200);
    assert_eq!(field(&r.body, "current_period_ends_at"), "2027-01-21T08:00:00Z");
}

/// Months in one clock call with the service's own scheduler running beside it: the call
/// answers only when every renewal due on the way is done, whoever ran it.
fn months_in_one_call(db: &str) {
    let s = serve(db, T0);
    daily_plan(&s);
    let uuids: Vec<String> =
        (0..2).map(|i| uuid_of(&ok(subscribe(&s, &format!("y{i}"), "daily", "4111111111111111", ""), 201))).collect();
    // 2027-01-15 → 2027-05-15 is 120 days: 120 daily renewals of each subscription.
    let r = advance(&s, "4months");
    assert_eq!(field(&r.body, "now"), "2027-05-15T08:00:00Z");
    assert_eq!(field(&r.body, "jobs_run"), (2 * 120).to_string());
    for (i, uuid) in uuids.iter().enumerate() {
        let r = ok(get(&s, &sub_path(uuid)), 200);
        assert_eq!(field(&r.body, "current_period_started_at"), "2027-05-15T08:00:00Z");
        assert_eq!(field(&r.body, "current_period_ends_at"), "2027-05-16T08:00:00Z");
        assert_eq!(totals(db, &format!("y{i}")), vec![100; 121]);
    }
}

#[test]
fn months_in_one_clock_call_on_both_backends() {
    on_both_backends("subs_months_call", months_in_one_call);
}

#[test]
fn cli_clock_runs_due_renewals_on_both_backends() {
    on_both_backends("subs_cli_clock", cli_clock);
}

fn declines_and_recovery(db: &str) {
    let s = serve(db, T0);
    plan(&s, "gold", 1000, "");
    // Approved with the customer present, declined on merchant-initiated (renewal) charges.
    let uuid = uuid_of(&ok(subscribe(&s, "r1", "gold", "4000008400001629", ""), 201));
    let path = sub_path(&uuid);
    advance(&s, "1month");
    assert_eq!(invoices(db, "r1"), ["1001:purchase:1000:paid", "1002:renewal:1000:past_due"]);
    let r = ok(get(&s, &path), 200);
    assert_eq!(field(&r.body, "state"), "active");
    assert_eq!(field(&r.body, "current_period_started_at"), "2027-02-15T08:00:00Z");
    let past_due = ok(get(&s, "/v2/subscriptions?state=past_due"), 200);
    assert_eq!(all_tags(&past_due.body, "uuid"), vec![uuid.clone()]);
    // The customer updates the card; the next retry (a day after the invoice) collects it.
    let token = card_token(&s, "4111111111111111");
    let body = format!("<billing_info><token_id>{token}</token_id></billing_info>");
    ok(put(&s, "/v2/accounts/r1/billing_info", &body), 200);
    advance(&s, "1day");
    assert_eq!(invoices(db, "r1"), ["1001:purchase:1000:paid", "1002:renewal:1000:paid"]);
    assert_eq!(ok(get(&s, "/v2/subscriptions?state=past_due"), 200).header("x-records").as_deref(), Some("0"));
    // Renewals go on from the card on file.
    advance(&s, "1month");
    assert_eq!(totals(db, "r1"), [1000, 1000, 1000]);

    // Every retry declines: the invoice fails and the subscription expires when retries end.
    let other = uuid_of(&ok(subscribe(&s, "r2", "gold", "4000008400001629", ""), 201));
    advance(&s, "1month");
    assert_eq!(invoices(db, "r2").last().map(|i| i.ends_with(":past_due")), Some(true));
    advance(&s, "6days");
    assert_eq!(field(&ok(get(&s, &sub_path(&other)), 200).body, "state"), "active");
    advance(&s, "1day");
    assert_eq!(invoices(db, "r2").last().map(|i| i.ends_with(":1000:failed")), Some(true), "{:?}", invoices(db, "r2"));
    let r = ok(get(&s, &sub_path(&other)), 200);
    assert_eq!(field(&r.body, "state"), "expired");
    advance(&s, "1month");
    assert_eq!(invoices(db, "r2").len(), 2);

    // No payment method for a first payment: nothing of the subscription is kept.
    ok(post(&s, "/v2/accounts", "<account><account_code>r3</account_code></account>"), 201);
    let r = post(
        &s,
        "/v2/accounts/r3/subscriptions",
        "<subscription><plan_code>gold</plan_code><currency>USD</currency></subscription>",
    );
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.body.contains("field=\"subscription.account.billing_info\""), "{}", r.body);
    assert_eq!(
        ok(get(&s, "/v2/accounts/r3/subscriptions?state=expired"), 200).header("x-records").as_deref(),
        Some("0")
    );
    assert_eq!(ok(get(&s, "/v2/accounts/r3/subscriptions"), 200).header("x-records").as_deref(), Some("0"));
    // A declined card is refused by its verification before anything is created.
    let r = subscribe(&s, "r4", "gold", "4000000000000002", "");
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.body.contains("<error_code>declined</error_code>"), "{}", r.body);
    assert_eq!(
        sql(
            db,
            "SELECT CAST(COUNT(*) AS TEXT) FROM subscriptions s JOIN accounts a ON a.id = s.account_id WHERE a.account_code IN ('r3', 'r4')"
        ),
        ["0"]
    );
    // A card refused before the first charge leaves nothing behind: not the account the request
    // would have created, and no subscription; the same request then works with a good card.
    for card in ["4000000000000002", "4000000000000101"] {
        let r = subscribe(&s, "r0", "gold", card, "");
        assert_eq!(r.status, 422, "{}", r.body);
        assert!(r.body.contains("<transaction_error>"), "{}", r.body);
        assert_error(&get(&s, "/v2/accounts/r0"), 404, "not_found");
    }
    let body = "<subscription><plan_code>gold</plan_code><currency>USD</currency>\
        <account><account_code>r0</account_code><billing_info><token_id>unknown</token_id></billing_info>\
        </account></subscription>";
    assert_error(&post(&s, "/v2/subscriptions", body), 422, "token_invalid");
    assert_error(&get(&s, "/v2/accounts/r0"), 404, "not_found");
    ok(subscribe(&s, "r0", "gold", "4111111111111111", ""), 201);
    let made = invoices(db, "r0");
    assert!(made.len() == 1 && made[0].ends_with(":purchase:1000:paid"), "{made:?}");
}

#[test]
fn declines_and_recovery_on_both_backends() {
    on_both_backends("subs_declines", declines_and_recovery);
}

fn yearly_plan(db: &str) {
    // 2028-02-29T00:00:00Z, a leap day.
    let s = serve(db, 1_835_395_200);
    plan(
        &s,
        "annual",
        12_000,
        "<plan_interval_length>12</plan_interval_length><plan_interval_unit>months</plan_interval_unit>",
    );
    let uuid = uuid_of(&ok(subscribe(&s, "y1", "annual", "4111111111111111", ""), 201));
    let r = ok(get(&s, &sub_path(&uuid)), 200);
    assert_eq!(field(&r.body, "current_period_ends_at"), "2029-02-28T00:00:00Z");
    for end in ["2030-02-28T00:00:00Z", "2031-02-28T00:00:00Z", "2032-02-29T00:00:00Z"] {
        advance(&s, "1year");
        assert_eq!(field(&ok(get(&s, &sub_path(&uuid)), 200).body, "current_period_ends_at"), end);
    }
    assert_eq!(totals(db, "y1"), [12_000; 4]);
}

#[test]
fn yearly_plan_on_both_backends() {
    on_both_backends("subs_yearly", yearly_plan);
}

/// Two service processes on one PostgreSQL database, both running their schedulers, with the
/// service clock moving under them: every renewal is invoiced and charged exactly once.
#[test]
fn two_processes_never_bill_a_renewal_twice() {
    let database = postgres_database("subs_two");
    let db = database.url().to_owned();
    let a = serve(&db, T0);
    let b = start_with(
        &db,
        Options {
            clock_file: a.clock.clone(),
            existing_database: true,
            args: &["--vault-key-file", &vault_key_file()],
            ..Options::default()
        },
    );
    daily_plan(&a);
    let count = 5;
    for i in 0..count {
        ok(subscribe(&a, &format!("t{i}"), "daily", "4111111111111111", ""), 201);
    }
    let wait_for = |expected: usize| {
        for _ in 0..200 {
            let n: usize = sql(&db, "SELECT CAST(COUNT(*) AS TEXT) FROM invoices")[0].parse().expect("count");
            let busy = sql(&db, "SELECT uuid FROM subscriptions WHERE lock_token IS NOT NULL");
            if n >= expected && busy.is_empty() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    // Both schedulers see the same jobs come due; the service clock moves a day, then three.
    let mut now = T0;
    let mut expected = count;
    for days in [1, 3, 1, 2] {
        now += days * 86_400;
        a.set_clock(now);
        expected += count * days as usize;
        wait_for(expected);
        // A second look changes nothing.
        std::thread::sleep(std::time::Duration::from_millis(1200));
    }
    // The CLI moving the site's clock while both schedulers run.
    let out = a.cli_json(&["clock", "advance", "--site", "sandbox", "2days"]);
    assert_eq!(out["now"], "2027-01-24T08:00:00Z");
    expected += count * 2;
    wait_for(expected);
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let n: usize = sql(&db, "SELECT CAST(COUNT(*) AS TEXT) FROM invoices")[0].parse().expect("count");
    assert_eq!(n, expected);
    // The second process works too: with the first one stopped, it runs the next day's renewals.
    drop(a);
    now += 86_400;
    b.set_clock(now);
    expected += count;
    wait_for(expected);
    let n: usize = sql(&db, "SELECT CAST(COUNT(*) AS TEXT) FROM invoices")[0].parse().expect("count");
    assert_eq!(n, expected, "the second process alone renewed");
    let duplicates = sql(
        &db,
        "SELECT subscription_uuid FROM adjustments WHERE origin = 'plan' \
         GROUP BY subscription_uuid, period_start HAVING COUNT(*) > 1",
    );
    assert!(duplicates.is_empty(), "{duplicates:?}");
    assert_eq!(
        sql(&db, "SELECT CAST(COUNT(*) AS TEXT) FROM transactions WHERE status = 'success' AND action = 'purchase'"),
        [expected.to_string()]
    );
    assert_eq!(sql(&db, "SELECT CAST(SUM(total) AS TEXT) FROM invoices"), [(expected * 100).to_string()]);
    drop(b);
}

fn add_ons_setup_fees_and_previews(db: &str) {
    let s = serve(db, T0);
    plan(&s, "team", 1000, "<setup_fee_in_cents><USD>500</USD></setup_fee_in_cents>");
    let seat = "<add_on><add_on_code>seat</add_on_code><name>Seat</name>\
                <unit_amount_in_cents><USD>200</USD></unit_amount_in_cents></add_on>";
    ok(post(&s, "/v2/plans/team/add_ons", seat), 201);
    let add_ons = |n: i64| {
        format!(
            "<subscription_add_ons><subscription_add_on><add_on_code>seat</add_on_code>\
             <quantity>{n}</quantity></subscription_add_on></subscription_add_ons>"
        )
    };
    // A preview writes nothing.
    let body = format!(
        "<subscription><plan_code>team</plan_code><currency>USD</currency>\
         <account><account_code>e1</account_code></account>{}</subscription>",
        add_ons(3)
    );
    let preview = ok(post(&s, "/v2/subscriptions/preview", &body), 200);
    assert_eq!(field(&preview.body, "cost_in_cents"), "2100");
    assert!(tag(&preview.body, "uuid").is_none_or(|u| u.is_empty()), "{}", preview.body);
    assert_error(&get(&s, "/v2/accounts/e1"), 404, "not_found");
    // Setup fee, plan and three seats on the first invoice.
    let created = ok(subscribe(&s, "e1", "team", "4111111111111111", &add_ons(3)), 201);
    let uuid = uuid_of(&created);
    assert_eq!(field(&created.body, "add_on_code"), "seat");
    assert_eq!(field(&field(&created.body, "subscription_add_on"), "quantity"), "3");
    assert_eq!(field(&field(&created.body, "subscription_add_on"), "name"), "Seat");
    let invoice = ok(get(&s, "/v2/invoices/1001"), 200);
    assert_eq!(field(&invoice.body, "total_in_cents"), "2100");
    assert_eq!(field(&invoice.body, "state"), "paid");
    // Two more seats on Jan 31 (16 of 31 days used): previewed, then invoiced the same.
    clock_to(&s, "2027-01-31T08:00:00Z");
    let change = format!("<subscription>{}</subscription>", add_ons(5));
    let cost = field(&ok(post(&s, &format!("{}/preview", sub_path(&uuid)), &change), 200).body, "cost_in_cents");
    let changed = ok(put(&s, &sub_path(&uuid), &change), 200);
    assert_eq!(field(&field(&changed.body, "subscription_add_on"), "quantity"), "5");
    assert_eq!(field(&changed.body, "plan_code"), "team");
    assert_eq!(totals(&s.database, "e1")[1].to_string(), cost);
    // 15/31 of 400 more for seats; the plan's credit and charge cancel out.
    assert_eq!(cost, "194");
    // An add-on the plan does not have, and a currency the plan is not priced in.
    let bad = "<subscription><subscription_add_ons><subscription_add_on><add_on_code>desk</add_on_code>\
               </subscription_add_on></subscription_add_ons></subscription>";
    let r = put(&s, &sub_path(&uuid), bad);
    assert!(r.status == 422 && r.body.contains("subscription.subscription_add_ons[0].add_on_code"), "{}", r.body);
    let r = post(
        &s,
        "/v2/accounts/e1/subscriptions",
        "<subscription><plan_code>team</plan_code><currency>GBP</currency></subscription>",
    );
    assert!(r.status == 422 && r.body.contains("field=\"subscription.currency\""), "{}", r.body);
    // The next renewal bills the full period of the new terms.
    advance(&s, "15days");
    assert_eq!(totals(&s.database, "e1"), [2100, 194, 2000]);
}

#[test]
fn add_ons_setup_fees_and_previews_on_both_backends() {
    on_both_backends("subs_add_ons", add_ons_setup_fees_and_previews);
}

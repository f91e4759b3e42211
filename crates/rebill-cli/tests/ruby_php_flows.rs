//! Requests as the released Ruby (2.15.3) and PHP (2.10.1) v2 clients send them, end to end
//! against `rebill serve` on SQLite and on PostgreSQL: times written by Ruby's `Time#to_s`
//! (`2027-01-14 20:49:03 UTC`, `+0100`) and with `-05:00` offsets in bodies and queries, read as
//! ISO 8601 is (`docs/times.md`), garbage still refused as before; a resume while a pause is only
//! scheduled (the scheduled pause is dropped); the account balance from API 2.3 only.

use rebill_testkit::*;

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;

fn serve(db: &str) -> Server {
    serve_at(db, T0, &[])
}

/// A request as the Ruby client sends it: XML body without a declaration (when there is one),
/// `X-Api-Version` 2.11.
fn send(s: &Server, method: &str, path: &str, body: &str) -> Reply {
    authed(s, method, path, &xml_at("2.11"), body)
}

fn get(s: &Server, path: &str) -> Reply {
    send(s, "GET", path, "")
}

fn get_at(s: &Server, version: Option<&str>, path: &str) -> Reply {
    match version {
        Some(v) => authed(s, "GET", path, &[("X-Api-Version", v)], ""),
        None => authed(s, "GET", path, &[], ""),
    }
}

/// The query value as Ruby's `CGI.escape(value.to_s)` writes it (space → `+`, `:` and `+`
/// escaped).
fn cgi_escape(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        match b {
            b' ' => out.push('+'),
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => out.push(char::from(b)),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn plan(s: &Server, code: &str, cents: i64) {
    let body = format!(
        "<plan><plan_code>{code}</plan_code><name>Plan {code}</name>\
         <unit_amount_in_cents><USD>{cents}</USD></unit_amount_in_cents></plan>"
    );
    ok(send(s, "POST", "/v2/plans", &body), 201);
}

/// A subscription of a new account `account` paying by card, with `extra` elements.
fn subscribe(s: &Server, account: &str, plan_code: &str, extra: &str) -> Reply {
    let token = card_token(s, "4111111111111111");
    let body = format!(
        "<subscription><plan_code>{plan_code}</plan_code><currency>USD</currency>\
         <account><account_code>{account}</account_code><email>{account}@example.com</email>\
         <billing_info><token_id>{token}</token_id></billing_info></account>{extra}</subscription>"
    );
    send(s, "POST", "/v2/subscriptions", &body)
}

/// A manual invoice of `cents` for a new account `code`; answers its number.
fn manual_invoice(s: &Server, code: &str, cents: i64) -> String {
    ok(send(s, "POST", "/v2/accounts", &format!("<account><account_code>{code}</account_code></account>")), 201);
    let body = format!(
        "<adjustment><description>Consulting</description><unit_amount_in_cents>{cents}</unit_amount_in_cents>\
         <currency>USD</currency></adjustment>"
    );
    ok(send(s, "POST", &format!("/v2/accounts/{code}/adjustments"), &body), 201);
    let body = "<invoice><collection_method>manual</collection_method><net_terms>30</net_terms></invoice>";
    field(&ok(send(s, "POST", &format!("/v2/accounts/{code}/invoices"), body), 201).body, "invoice_number")
}

fn records(reply: &Reply) -> String {
    reply.header("x-records").unwrap_or_default()
}

/// A 422 `<errors>` document with one `invalid` error on `field`.
#[track_caller]
fn invalid_field(reply: &Reply, field: &str) {
    assert_eq!(reply.status, 422, "{}\n{}", reply.head, reply.body);
    let error =
        format!("<error field=\"{field}\" symbol=\"invalid\" lang=\"en-US\">is not an ISO 8601 date-time</error>");
    assert!(reply.body.contains(&error), "{}", reply.body);
}

// ---------------------------------------------------------------------------------------------
// Times in bodies

fn times_in_bodies(db: &str) {
    let s = serve(db);
    let number = manual_invoice(&s, "rb1", 9000);
    let pay = |collected_at: &str| {
        // `Invoice#enter_offline_payment` with a `Time`: Nokogiri writes the value's `to_s`.
        let body = format!(
            "<transaction><payment_method>check</payment_method><amount_in_cents>1000</amount_in_cents>\
             <collected_at>{collected_at}</collected_at></transaction>"
        );
        send(&s, "POST", &format!("/v2/invoices/{number}/transactions"), &body)
    };
    for (sent, read) in [
        ("2027-01-14 20:49:03 UTC", "2027-01-14T20:49:03Z"),
        ("2027-01-14 21:49:03 +0100", "2027-01-14T20:49:03Z"),
        ("2027-01-14 15:49:03 -05:00", "2027-01-14T20:49:03Z"),
        ("2027-01-14T15:49:03-05:00", "2027-01-14T20:49:03Z"),
        ("2027-01-01 00:30:00 +0100", "2026-12-31T23:30:00Z"),
        ("2027-01-14", "2027-01-14T00:00:00Z"),
    ] {
        let r = ok(pay(sent), 201);
        assert_eq!(field(&r.body, "collected_at"), read, "{sent}");
        let uuid = field(&r.body, "uuid");
        assert_eq!(field(&ok(get(&s, &format!("/v2/transactions/{uuid}")), 200).body, "collected_at"), read);
    }
    // Garbage is refused as before, naming the element.
    for bad in ["2027-01-14 20:49:03 CET", "yesterday", "2027-01-14 20:49 UTC", "2027-01-14 25:00:00 UTC", "1799999999"]
    {
        invalid_field(&pay(bad), "transaction.collected_at");
    }
    assert_eq!(records(&get(&s, "/v2/accounts/rb1/transactions")), "6", "only the accepted payments");

    // A subscription starting later, written in local time.
    plan(&s, "gold", 1000);
    let r = ok(subscribe(&s, "rb2", "gold", "<starts_at>2027-02-01 09:00:00 +0100</starts_at>"), 201);
    assert_eq!(field(&r.body, "state"), "future");
    let sub = format!("/v2/subscriptions/{}", field(&r.body, "uuid"));
    // It starts at 08:00 UTC: a second before, still future (the clock's `now` in Ruby's form too).
    let r = sandbox_clock(&s, "<now>2027-02-01 08:59:59 +0100</now>");
    assert_eq!(field(&r.body, "now"), "2027-02-01T07:59:59Z");
    assert_eq!(field(&ok(get(&s, &sub), 200).body, "state"), "future");
    sandbox_clock(&s, "<now>2027-02-01 08:00:00 UTC</now>");
    let r = ok(get(&s, &sub), 200);
    assert_eq!(field(&r.body, "state"), "active");
    assert_eq!(field(&r.body, "activated_at"), "2027-02-01T08:00:00Z");
    invalid_field(
        &subscribe(&s, "rb3", "gold", "<starts_at>2027-02-01 09:00:00 Europe/Paris</starts_at>"),
        "subscription.starts_at",
    );
}

#[test]
fn times_in_bodies_are_read_as_the_ruby_client_writes_them() {
    on_both_backends("ruby-body-times", times_in_bodies);
}

// ---------------------------------------------------------------------------------------------
// Times in queries

fn times_in_queries(db: &str) {
    let s = serve(db);
    plan(&s, "gold", 1000);
    let uuid = field(&ok(subscribe(&s, "rq1", "gold", ""), 201).body, "uuid");
    let postpone = |query: &str| send(&s, "PUT", &format!("/v2/subscriptions/{uuid}/postpone?{query}"), "");

    // `Subscription#postpone(Time, bulk)`: `next_renewal_date=#{CGI.escape(time.to_s)}&bulk=false`.
    for (time, ends) in [
        ("2027-03-01 12:00:00 UTC", "2027-03-01T12:00:00Z"),
        ("2027-03-02 13:00:00 +0100", "2027-03-02T12:00:00Z"),
        ("2027-03-03 07:00:00 -05:00", "2027-03-03T12:00:00Z"),
    ] {
        let r = ok(postpone(&format!("next_renewal_date={}&bulk=false", cgi_escape(time))), 200);
        assert_eq!(field(&r.body, "current_period_ends_at"), ends, "{time}");
    }
    let read = ok(get(&s, &format!("/v2/subscriptions/{uuid}")), 200);
    assert_eq!(field(&read.body, "current_period_ends_at"), "2027-03-03T12:00:00Z");
    assert_eq!(cgi_escape("2027-03-02 13:00:00 +0100"), "2027-03-02+13%3A00%3A00+%2B0100");
    // Sent unescaped, the offset's `+` decodes to a space and still counts.
    let r = ok(postpone("next_renewal_date=2027-03-04+13:00:00++0100"), 200);
    assert_eq!(field(&r.body, "current_period_ends_at"), "2027-03-04T12:00:00Z");
    let r = ok(postpone("next_renewal_date=2027-03-05T13:00:00+01:00"), 200);
    assert_eq!(field(&r.body, "current_period_ends_at"), "2027-03-05T12:00:00Z");
    for bad in ["2027-03-01 12:00:00 CET", "2027-03-01 12:00 UTC", "next week", "2027-03-01 12:00:00 +2400"] {
        let r = postpone(&format!("next_renewal_date={}", cgi_escape(bad)));
        assert_error(&r, 400, "invalid_parameter");
        assert!(r.body.contains("next_renewal_date must be an ISO 8601 date or date-time"), "{bad}: {}", r.body);
    }

    // List filters: `Account.find_each(begin_time: Time, end_time: Time)`. The account was
    // created at 2027-01-15T08:00:00Z.
    let list = |query: &str| ok(get(&s, &format!("/v2/accounts?{query}")), 200);
    let window = |begin: &str, end: &str| {
        records(&list(&format!("begin_time={}&end_time={}", cgi_escape(begin), cgi_escape(end))))
    };
    assert_eq!(window("2027-01-15 08:00:00 UTC", "2027-01-15 08:00:00 UTC"), "1", "inclusive bounds");
    assert_eq!(window("2027-01-15 09:00:00 +0100", "2027-01-15 03:00:00 -05:00"), "1");
    assert_eq!(window("2027-01-15 09:00:01 +0100", "2027-01-16 00:00:00 UTC"), "0", "a second later");
    assert_eq!(window("2027-01-01 00:00:00 UTC", "2027-01-15 02:59:59 -05:00"), "0", "a second earlier");
    assert_eq!(records(&list("begin_time=2027-01-15+09:00:00++0100")), "1");
    for bad in ["2027-01-15 08:00:00 GMT+1", "2027-01-15 08:00:00.1234567890 UTC", "15/01/2027"] {
        let r = get(&s, &format!("/v2/accounts?begin_time={}", cgi_escape(bad)));
        assert_error(&r, 400, "invalid_parameter");
        assert!(r.body.contains("begin_time must be an ISO 8601 date or date-time"), "{bad}: {}", r.body);
    }
}

#[test]
fn times_in_queries_are_read_as_the_ruby_client_writes_them() {
    on_both_backends("ruby-query-times", times_in_queries);
}

// ---------------------------------------------------------------------------------------------
// Resume while a pause is only scheduled

fn resume_of_a_scheduled_pause(db: &str) {
    let s = serve(db);
    plan(&s, "gold", 1000);
    let uuid = field(&ok(subscribe(&s, "rp1", "gold", ""), 201).body, "uuid");
    let path = format!("/v2/subscriptions/{uuid}");

    // `Subscription#pause(1)`, then `#resume` before the period ends.
    let pause = "<subscription><remaining_pause_cycles>1</remaining_pause_cycles></subscription>";
    let r = ok(send(&s, "PUT", &format!("{path}/pause"), pause), 200);
    assert_eq!(field(&r.body, "state"), "active");
    assert_eq!(field(&r.body, "paused_at"), "2027-02-15T08:00:00Z");
    let r = ok(send(&s, "PUT", &format!("{path}/resume"), ""), 200);
    assert_eq!(field(&r.body, "state"), "active");
    assert!(r.body.contains("<paused_at type=\"datetime\" nil=\"nil\">"), "{}", r.body);
    assert!(r.body.contains("<remaining_pause_cycles type=\"integer\" nil=\"nil\">"), "{}", r.body);
    assert_eq!(field(&r.body, "current_period_ends_at"), "2027-02-15T08:00:00Z", "the paid period runs on");
    assert_eq!(records(&get(&s, "/v2/accounts/rp1/invoices")), "1", "no charge for it");
    // Nothing is scheduled any more: a second resume has nothing to resume.
    assert_error(&send(&s, "PUT", &format!("{path}/resume"), ""), 422, "not_paused");

    // The renewal that would have started the pause renews (and charges) as usual.
    sandbox_clock(&s, "<advance>1month</advance>");
    let r = ok(get(&s, &path), 200);
    assert_eq!(field(&r.body, "state"), "active");
    assert_eq!(field(&r.body, "current_period_started_at"), "2027-02-15T08:00:00Z");
    assert_eq!(records(&get(&s, "/v2/accounts/rp1/invoices")), "2");
    assert_eq!(records(&get(&s, "/v2/subscriptions?state=paused")), "0");

    // A paused subscription still resumes at once, with a new billed period from now.
    ok(send(&s, "PUT", &format!("{path}/pause"), pause), 200);
    sandbox_clock(&s, "<advance>1month</advance>");
    assert_eq!(field(&ok(get(&s, &path), 200).body, "state"), "paused");
    let r = ok(send(&s, "PUT", &format!("{path}/resume"), ""), 200);
    assert_eq!(field(&r.body, "state"), "active");
    assert_eq!(field(&r.body, "current_period_started_at"), "2027-03-15T08:00:00Z");
    assert_eq!(records(&get(&s, "/v2/accounts/rp1/invoices")), "3");

    // The events name each accepted resume once: the first dropped a scheduled pause, the second
    // ended a pause.
    let resumed = sql(
        db,
        &format!(
            "SELECT kind FROM domain_events WHERE subject = '{uuid}' \
             AND kind IN ('subscription.resumed', 'subscription.pause_canceled') ORDER BY id"
        ),
    );
    assert_eq!(resumed, ["subscription.pause_canceled", "subscription.resumed"], "{resumed:?}");
}

#[test]
fn resume_while_a_pause_is_scheduled_drops_the_pause() {
    on_both_backends("ruby-resume-scheduled", resume_of_a_scheduled_pause);
}

// ---------------------------------------------------------------------------------------------
// The account balance exists from 2.3

fn balance_from_2_3(db: &str) {
    let s = serve(db);
    ok(send(&s, "POST", "/v2/accounts", "<account><account_code>bal1</account_code></account>"), 201);
    for version in [None, Some("2.2")] {
        let r = get_at(&s, version, "/v2/accounts/bal1/balance");
        assert_error(&r, 400, "unavailable_in_api_version");
        // Even for an account that does not exist: the version is checked first.
        assert_error(&get_at(&s, version, "/v2/accounts/nobody/balance"), 400, "unavailable_in_api_version");
    }
    for version in ["2.3", "2.9", "2.11"] {
        let r = ok(get_at(&s, Some(version), "/v2/accounts/bal1/balance"), 200);
        assert!(r.body.contains("<USD type=\"integer\">0</USD>"), "{version}: {}", r.body);
    }
    assert_error(&get_at(&s, Some("2.3"), "/v2/accounts/nobody/balance"), 404, "not_found");
    // The account links to its balance where the balance exists.
    assert!(!ok(get_at(&s, Some("2.2"), "/v2/accounts/bal1"), 200).body.contains("<account_balance"));
    let link = format!("<account_balance href=\"http://{}/v2/accounts/bal1/balance\"/>", s.addr);
    assert!(ok(get_at(&s, Some("2.3"), "/v2/accounts/bal1"), 200).body.contains(&link));
}

#[test]
fn the_account_balance_exists_from_2_3() {
    on_both_backends("ruby-balance-version", balance_from_2_3);
}

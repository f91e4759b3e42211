//! Sandbox clock control end to end: `POST /sandbox/clock` moves a sandbox site's clock (by an
//! amount or to a time, never back), business times of the site follow it, other sites and
//! production sites are unaffected, and the CLI does the same.

use rebill_testkit::*;

/// 2027-01-31T10:00:00Z.
const T0: i64 = 1_801_389_600;

fn post_clock(s: &Server, key: &str, body: &str) -> Reply {
    authed_with(s, key, "POST", "/sandbox/clock", &[("Content-Type", "application/xml; charset=utf-8")], body)
}

fn scenario(db: &str) {
    let s = start_with(db, Options { clock: Some(T0), ..Options::default() });
    // By an amount: months by the calendar, clamped to the month's end.
    let r = post_clock(&s, &s.key, "<clock><advance>1month</advance></clock>");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("<now type=\"datetime\">2027-02-28T10:00:00Z</now>"), "{}", r.body);
    assert!(r.body.contains("<jobs_run type=\"integer\">0</jobs_run>"), "{}", r.body);
    // Business times of the site follow its clock.
    let created =
        authed(&s, "POST", "/v2/accounts", &xml_at("2.11"), "<account><account_code>c1</account_code></account>");
    assert_eq!(created.status, 201, "{}", created.body);
    assert!(
        created.body.contains("<created_at type=\"datetime\">2027-02-28T10:00:00Z</created_at>"),
        "{}",
        created.body
    );
    // To a time; never back.
    let r = post_clock(&s, &s.key, "<clock><now>2027-03-01T00:00:00Z</now></clock>");
    assert!(r.body.contains("<now type=\"datetime\">2027-03-01T00:00:00Z</now>"), "{}", r.body);
    let r = post_clock(&s, &s.key, "<clock><now>2027-02-01T00:00:00Z</now></clock>");
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.body.contains("field=\"clock.now\""), "{}", r.body);
    // The service's own clock moving on moves the site's clock with it.
    s.set_clock(T0 + 3600);
    let r = post_clock(&s, &s.key, "<clock><advance>0 seconds</advance></clock>");
    assert!(r.body.contains("<now type=\"datetime\">2027-03-01T01:00:00Z</now>"), "{}", r.body);
    // Refusals: bad amounts, both or neither, unknown elements, no key, read-only keys, production.
    for body in [
        "<clock><advance>1 fortnight</advance></clock>",
        "<clock/>",
        "<clock><advance>1day</advance><now>2030-01-01T00:00:00Z</now></clock>",
    ] {
        assert_eq!(post_clock(&s, &s.key, body).status, 422, "{body}");
    }
    assert_error(&post_clock(&s, &s.key, "<clock><speed>2</speed></clock>"), 400, "invalid_xml");
    let r = request(&s, "POST", "/sandbox/clock", &[], "<clock><advance>1day</advance></clock>");
    assert_eq!(r.status, 401);
    let ro = s.cli_json(&["keys", "create", "--site", "sandbox", "--read-only"]);
    let r = post_clock(&s, ro["private_key"].as_str().expect("key"), "<clock><advance>1day</advance></clock>");
    assert_error(&r, 403, "forbidden");
    let prod = s.cli_json(&["site", "create", "--name", "live", "--mode", "production"]);
    let r = post_clock(&s, prod["private_key"].as_str().expect("key"), "<clock><advance>1day</advance></clock>");
    assert_error(&r, 403, "forbidden");
    // Another sandbox site keeps its own time.
    let other = s.cli_json(&["site", "create", "--name", "other"]);
    let r = authed_with(
        &s,
        other["private_key"].as_str().expect("key"),
        "POST",
        "/v2/accounts",
        &xml_at("2.11"),
        "<account><account_code>o1</account_code></account>",
    );
    assert!(r.body.contains("<created_at type=\"datetime\">2027-01-31T11:00:00Z</created_at>"), "{}", r.body);
}

#[test]
fn sandbox_clock() {
    on_both_backends("clock", scenario);
}

//! The database goes away under a running service, as a dead primary or a network cut takes it
//! (every connection closed, new ones refused, by a forwarder in front of PostgreSQL): requests
//! answer 503 with `Retry-After`, never 500 and never a half-done change; `/readyz` says not
//! ready; once the database answers again the same process serves requests and its scheduler
//! carries on, without a restart.

use std::time::{Duration, Instant};

use rebill_testkit::tcp_cut::TcpCut;
use rebill_testkit::*;

fn xml() -> [(&'static str, &'static str); 2] {
    xml_at("2.11")
}

/// Waits until `/readyz` answers `status`.
#[track_caller]
fn await_ready(s: &Server, status: u16) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if request(s, "GET", "/readyz", &[], "").status == status {
            return;
        }
        assert!(Instant::now() < deadline, "/readyz never answered {status}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_database_that_goes_away_is_503_with_retry_after_and_the_service_comes_back_by_itself() {
    let database = postgres_database("outage");
    let forwarder = TcpCut::start("127.0.0.1:5432");
    let url = forwarder.route(database.url());
    let s = start_with(&url, Options { clock: Some(1_800_000_000), capture_stderr: true, ..Options::default() });
    let plan = "<plan><plan_code>m</plan_code><name>M</name><unit_amount_in_cents><USD>500</USD>\
                </unit_amount_in_cents><plan_interval_length>1</plan_interval_length>\
                <plan_interval_unit>months</plan_interval_unit></plan>";
    ok(authed(&s, "POST", "/v2/plans", &xml(), plan), 201);
    ok(authed(&s, "POST", "/v2/accounts", &xml(), "<account><account_code>before</account_code></account>"), 201);

    forwarder.cut();
    for (method, path, body) in [
        ("POST", "/v2/accounts", "<account><account_code>during</account_code></account>"),
        ("GET", "/v2/accounts/before", ""),
        ("GET", "/v2/plans", ""),
    ] {
        let r = authed(&s, method, path, &xml(), body);
        assert_error(&r, 503, "service_unavailable");
        assert_eq!(r.header("Retry-After").as_deref(), Some("5"), "{method} {path}: {}", r.head);
    }
    await_ready(&s, 503);
    assert_eq!(request(&s, "GET", "/healthz", &[], "").status, 200, "the process is alive");

    forwarder.restore();
    await_ready(&s, 200);
    // The same process serves again; the write refused during the outage left nothing behind.
    ok(authed(&s, "GET", "/v2/accounts/before", &xml(), ""), 200);
    ok(authed(&s, "GET", "/v2/accounts/during", &xml(), ""), 404);
    ok(authed(&s, "POST", "/v2/accounts", &xml(), "<account><account_code>during</account_code></account>"), 201);
    // Its scheduler runs again too: a clock move runs the due work and answers.
    let moved = authed(&s, "POST", "/sandbox/clock", &xml(), "<clock><advance>1day</advance></clock>");
    ok(moved, 200);

    let log = s.log();
    assert!(!log.contains("status=500"), "no request answered 500:\n{log}");
    assert!(log.contains("the database is unavailable"), "the outage is logged:\n{log}");
}

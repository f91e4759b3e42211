//! Operating the service, end to end against the real binary: the health endpoints (`/healthz`,
//! `/readyz`) without a key on both backends, readiness lost with the database, and log lines
//! as JSON for log shippers (`--log-format json`).

use rebill_testkit::*;

fn health(db: &str) {
    let s = start(db);
    let alive = request(&s, "GET", "/healthz", &[], "");
    assert_eq!((alive.status, alive.body.as_str()), (200, "ok\n"));
    assert_eq!(alive.header("Content-Type").as_deref(), Some("text/plain; charset=utf-8"));
    let ready = request(&s, "GET", "/readyz", &[], "");
    assert_eq!((ready.status, ready.body.as_str()), (200, "ready\n"));
    assert!(ready.header("X-RateLimit-Limit").is_none(), "outside the API's layers: {}", ready.head);
    // The API itself still wants a key.
    assert_eq!(request(&s, "GET", "/v2/accounts", &[("Accept", "application/xml")], "").status, 401);
}

#[test]
fn health_endpoints_answer_without_a_key() {
    on_both_backends("health", health);
}

/// Without its database the process is alive but not ready, and says nothing more.
#[test]
fn readiness_follows_the_database() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let database = postgres_database("readiness");
    let s = start_with(database.url(), Options { capture_stderr: true, ..Options::default() });
    assert_eq!(request(&s, "GET", "/readyz", &[], "").status, 200);
    runtime.block_on(rebill_store::testing::drop_postgres_database(database.url()));
    let r = request(&s, "GET", "/readyz", &[], "");
    assert_eq!((r.status, r.body.as_str()), (503, "not ready\n"));
    assert_eq!(request(&s, "GET", "/healthz", &[], "").status, 200, "still alive");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !s.log().contains("not ready: the database does not answer") {
        assert!(std::time::Instant::now() < deadline, "the reason is logged:\n{}", s.log());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `--log-format json`: every line is one JSON object, and the request line carries the same
/// fields as the text format.
#[test]
fn log_lines_as_json() {
    let db = rebill_store::testing::fresh_sqlite_url("json_log");
    let s = start_with(&db, Options { capture_stderr: true, args: &["--log-format", "json"], ..Options::default() });
    assert_eq!(authed(&s, "GET", "/v2/accounts/nobody", &[("X-Api-Version", "2.11")], "").status, 404);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let request_line = loop {
        let log = s.log();
        let lines: Vec<serde_json::Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
            .collect();
        if let Some(line) = lines.into_iter().find(|l| l["path"] == "/v2/accounts/nobody") {
            break line;
        }
        assert!(std::time::Instant::now() < deadline, "no request line in:\n{log}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(request_line["message"], "request");
    assert_eq!(request_line["level"], "INFO");
    assert_eq!(request_line["method"], "GET");
    assert_eq!(request_line["status"], 404);
    assert_eq!(request_line["site"], "1");
    assert_eq!(request_line["api_version"], "2.11");
    assert!(request_line["duration_ms"].is_string() && request_line["timestamp"].is_string(), "{request_line}");
}

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

/// Whether the service has read everything sent on the connection from local port `client` to
/// `server` (the server side's receive queue in /proc/net/tcp is empty).
fn server_read_all(server: &str, client: u16) -> bool {
    let port = |addr: &str| addr.rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
    let server_port: u16 = server.rsplit(':').next().and_then(|p| p.parse().ok()).expect("a port");
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    table.lines().skip(1).any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        f.len() > 4
            && port(f[1]) == Some(server_port)
            && port(f[2]) == Some(client)
            && f[4].split(':').nth(1).is_some_and(|rx| u64::from_str_radix(rx, 16) == Ok(0))
    })
}

/// SIGTERM: the listener closes at once, a request in flight finishes and is answered, and the
/// process exits 0. A second signal ends a process still waiting at once.
#[test]
fn sigterm_lets_requests_in_flight_finish() {
    use std::io::{Read, Write};
    let db = rebill_store::testing::fresh_sqlite_url("shutdown");
    let mut s = start_with(&db, Options { capture_stderr: true, ..Options::default() });
    let auth = base64_key(&s.key);
    let body = "<account><account_code>late</account_code></account>";
    let (first, rest) = body.split_at(20);
    let mut conn = std::net::TcpStream::connect(&s.addr).expect("connect");
    let head = format!(
        "POST /v2/accounts HTTP/1.1\r\nHost: {}\r\nAuthorization: Basic {auth}\r\nAccept: application/xml\r\n\
         X-Api-Version: 2.11\r\nContent-Type: application/xml; charset=utf-8\r\nContent-Length: {}\r\n\r\n",
        s.addr,
        body.len()
    );
    conn.write_all(head.as_bytes()).expect("head");
    conn.write_all(first.as_bytes()).expect("half the body");
    let client = conn.local_addr().expect("local address").port();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !server_read_all(&s.addr, client) {
        assert!(std::time::Instant::now() < deadline, "the service did not read the request");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    s.signal("TERM");
    // No new connection once the listener closed.
    while std::net::TcpStream::connect(&s.addr).is_ok() {
        assert!(std::time::Instant::now() < deadline, "the listener stayed open");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    conn.write_all(rest.as_bytes()).expect("the rest of the body");
    let mut reply = String::new();
    conn.read_to_string(&mut reply).expect("the reply");
    assert!(reply.starts_with("HTTP/1.1 201"), "{reply}");
    let status = s.wait_exit(std::time::Duration::from_secs(20)).expect("the service exits");
    assert!(status.success(), "{status:?}\n{}", s.log());
    assert!(s.log().contains("every connection finished"), "{}", s.log());

    // A second signal while a request waits: the process ends at once, not after the grace.
    let db = rebill_store::testing::fresh_sqlite_url("shutdown_twice");
    let mut s = start_with(&db, Options { capture_stderr: true, ..Options::default() });
    let mut conn = std::net::TcpStream::connect(&s.addr).expect("connect");
    let head = head.replace(&format!("Basic {auth}"), &format!("Basic {}", base64_key(&s.key)));
    conn.write_all(head.as_bytes()).expect("head");
    let client = conn.local_addr().expect("local address").port();
    while !server_read_all(&s.addr, client) {
        assert!(std::time::Instant::now() < deadline + std::time::Duration::from_secs(10), "not read");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    s.signal("TERM");
    let log_deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !s.log().contains("stopping") {
        assert!(std::time::Instant::now() < log_deadline, "{}", s.log());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    s.signal("INT");
    let status = s.wait_exit(std::time::Duration::from_secs(5)).expect("exits well before the 20 s grace");
    assert!(!status.success());
}

fn base64_key(key: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(format!("{key}:"))
}

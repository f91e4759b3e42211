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
    // The database was closed: SQLite's write-ahead log went into the database file, and the
    // account written in the last moment is there.
    let file = db.strip_prefix("sqlite://").expect("a SQLite URL");
    assert!(!std::path::Path::new(&format!("{file}-wal")).exists(), "the write-ahead log is left:\n{}", s.log());
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let late = runtime.block_on(async {
        let store = rebill_store::Store::connect(&db).await.expect("the database");
        let site = store.sites().await.expect("sites").first().expect("the sandbox site").id;
        store.account(site, "late").await.expect("the account")
    });
    assert!(late.is_some(), "the account made during the shutdown is in the database");

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

/// 2027-01-15T08:00:00Z.
const T0: i64 = 1_800_000_000;
const DAY: i64 = 86_400;

/// `GET /metrics` on the metrics listener: 200 in the Prometheus text format.
fn scrape(addr: &str) -> String {
    let reply = raw(addr, "GET /metrics HTTP/1.1\r\nHost: metrics\r\nConnection: close\r\n\r\n");
    assert_eq!(reply.status, 200, "{}", reply.head);
    assert_eq!(reply.header("Content-Type").as_deref(), Some("text/plain; version=0.0.4; charset=utf-8"));
    reply.body
}

/// Scrapes until `done` holds for the exposition (at most 60 s).
fn scrape_until(addr: &str, what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let text = scrape(addr);
        if done(&text) {
            return text;
        }
        assert!(std::time::Instant::now() < deadline, "{what}:\n{text}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `--metrics-listen`: every metric of the catalogue on a listener of its own, counting what the
/// service did (requests, a rate-limit refusal, renewals paid and declined, gateway calls,
/// webhook deliveries) and reading the gauges from the database.
fn metrics(db: &str) {
    use rebill_testkit::receiver::Receiver;
    let receiver = Receiver::start(Vec::new(), None);
    let key_file = vault_key_file();
    let args = ["--vault-key-file", &key_file, "--metrics-listen", "127.0.0.1:0", "--webhook-retry-scale", "0.01"];
    let s = start_with(db, Options { clock: Some(T0), args: &args, ..Options::default() });
    let addr = s
        .banner
        .iter()
        .find_map(|l| l.strip_prefix("metrics on http://"))
        .and_then(|a| a.trim().strip_suffix("/metrics"))
        .expect("the metrics address is printed before the API's")
        .to_owned();
    assert_ne!(addr, s.addr);
    let out = std::process::Command::new(bin())
        .args(["--database", db, "webhooks", "add", "--site", "sandbox", "--url", &receiver.url])
        .env("REBILL_VAULT_KEY_FILE", &key_file)
        .output()
        .expect("run rebill");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Not on the API's listener.
    assert_eq!(authed(&s, "GET", "/metrics", &[], "").status, 404);

    let xml = xml_at("2.11");
    let plan = "<plan><plan_code>m</plan_code><name>M</name><unit_amount_in_cents><USD>500</USD>\
                </unit_amount_in_cents><plan_interval_length>1</plan_interval_length>\
                <plan_interval_unit>months</plan_interval_unit></plan>";
    ok(authed(&s, "POST", "/v2/plans", &xml, plan), 201);
    for code in ["paying", "declining"] {
        let token = card_token(&s, "4111111111111111");
        let body = format!(
            "<subscription><plan_code>m</plan_code><currency>USD</currency><account><account_code>{code}\
             </account_code><billing_info><token_id>{token}</token_id></billing_info></account></subscription>"
        );
        ok(authed(&s, "POST", "/v2/subscriptions", &xml, &body), 201);
    }
    // A card that is stored but declines its charges: the second renewal is declined.
    let token = card_token(&s, "4000000000000341");
    let body = format!("<billing_info><token_id>{token}</token_id></billing_info>");
    ok(authed(&s, "PUT", "/v2/accounts/declining/billing_info", &xml, &body), 422);
    ok(authed(&s, "GET", "/v2/accounts/paying", &xml, ""), 200);
    ok(authed(&s, "GET", "/v2/accounts/nobody", &xml, ""), 404);

    // The renewals are due at T0 + 31 days; no dunning retry is due yet an hour later.
    s.set_clock(T0 + 31 * DAY + 3600);
    let renewal = rebill_app::platform::metrics::RENEWAL_PAYMENTS;
    // Counted as they finish: the declined renewal's job ends after its payment is declined.
    scrape_until(&addr, "two renewals run, one paid and one declined", |text| {
        sample(text, "rebill_renewals_run_total", &[]) == Some(2.0)
            && sample(text, renewal, &[("outcome", "paid")]) == Some(1.0)
            && sample(text, renewal, &[("outcome", "declined")]) == Some(1.0)
            && sample(text, "rebill_scheduler_lag_seconds", &[]) == Some(0.0)
    });
    let text = scrape_until(&addr, "the notifications delivered", |text| {
        sample(text, "rebill_webhook_queue_depth", &[]) == Some(0.0)
            && sample(text, "rebill_webhook_deliveries_total", &[("outcome", "delivered")])
                .is_some_and(|n| n as usize >= receiver.count() && n >= 1.0)
    });
    assert_eq!(
        sample(&text, "rebill_webhook_deliveries_total", &[("outcome", "delivered")]),
        Some(receiver.count() as f64)
    );

    // Requests by endpoint, method and status, with their latency.
    let get = [("endpoint", "get_account"), ("method", "GET")];
    assert_eq!(sample(&text, "rebill_http_requests_total", &[get[0], get[1], ("status", "200")]), Some(1.0));
    assert_eq!(sample(&text, "rebill_http_requests_total", &[get[0], get[1], ("status", "404")]), Some(1.0));
    assert_eq!(sample(&text, "rebill_http_request_duration_seconds_count", &get), Some(2.0));
    assert_eq!(
        sample(&text, "rebill_http_request_duration_seconds_bucket", &[get[0], get[1], ("le", "+Inf")]),
        Some(2.0)
    );
    let tokens = [("endpoint", "tokens"), ("method", "POST"), ("status", "200")];
    assert_eq!(sample(&text, "rebill_http_requests_total", &tokens), Some(3.0));
    let created = [("endpoint", "create_subscription"), ("method", "POST"), ("status", "201")];
    assert_eq!(sample(&text, "rebill_http_requests_total", &created), Some(2.0));
    assert_eq!(sample(&text, "rebill_http_requests_total", &[("endpoint", "unrouted"), ("status", "404")]), Some(1.0));

    // Gateway calls by outcome: two cards stored, one refused; two first charges, one renewal
    // approved and one declined.
    let calls = "rebill_gateway_calls_total";
    let call = |operation: &'static str, outcome: &'static str| {
        sample(&text, calls, &[("gateway", "test"), ("operation", operation), ("outcome", outcome)])
    };
    assert_eq!(call("purchase", "approved"), Some(3.0));
    assert_eq!(call("purchase", "declined"), Some(1.0));
    assert!(call("store_payment_method", "approved").is_some_and(|n| n >= 2.0), "{text}");
    assert_eq!(sample(&text, "rebill_gateway_call_duration_seconds_count", &[("operation", "purchase")]), Some(4.0));

    // Gauges from the database and the pools.
    assert_eq!(sample(&text, "rebill_scheduler_lag_seconds", &[]), Some(0.0));
    assert!(sample(&text, "rebill_db_connections", &[("pool", "main"), ("state", "idle")]).is_some(), "{text}");
    assert!(sample(&text, "rebill_db_connections", &[("pool", "main"), ("state", "in_use")]).is_some(), "{text}");

    // A refusal by the rate limit (the window of a limit of 1 a minute holds 5 requests).
    s.cli(&["site", "update", "--name", "sandbox", "--rate-limit", "1"]);
    let refused = (0..6).map(|_| authed(&s, "GET", "/v2/accounts/paying", &xml, "")).find(|r| r.status != 200);
    assert_error(&refused.expect("the window fills within 6 requests"), 429, "rate_limit_exceeded");
    let text = scrape(&addr);
    assert_eq!(sample(&text, "rebill_rate_limit_refusals_total", &[("site", "sandbox")]), Some(1.0));

    // Every metric of the catalogue is there, described; those of reconciliations have samples
    // only on a site with a real gateway (tests/stripe.rs, `reconciliation`).
    use rebill_app::platform::metrics::{CATALOGUE, RECONCILE_DIFFERENCES, RECONCILE_RUNS};
    for metric in CATALOGUE.iter().filter(|m| ![RECONCILE_DIFFERENCES, RECONCILE_RUNS].contains(&m.name)) {
        assert!(text.contains(&format!("# HELP {} ", metric.name)), "{} is not described:\n{text}", metric.name);
        assert!(text.contains(&format!("# TYPE {} ", metric.name)), "{} has no samples:\n{text}", metric.name);
    }
}

#[test]
fn metrics_on_their_own_listener() {
    on_both_backends("metrics", metrics);
}

/// Subscriptions whose first renewal is due at once: `n` monthly subscriptions of one account
/// with a card, made at T0 (four clients at a time).
fn due_renewals(s: &Server, n: usize) {
    let xml = xml_at("2.11");
    let plan = "<plan><plan_code>m</plan_code><name>M</name><unit_amount_in_cents><USD>500</USD>\
                </unit_amount_in_cents><plan_interval_length>1</plan_interval_length>\
                <plan_interval_unit>months</plan_interval_unit></plan>";
    ok(authed(s, "POST", "/v2/plans", &xml, plan), 201);
    let token = card_token(s, "4111111111111111");
    let first = format!(
        "<subscription><plan_code>m</plan_code><currency>USD</currency><account><account_code>payer</account_code>\
         <billing_info><token_id>{token}</token_id></billing_info></account></subscription>"
    );
    ok(authed(s, "POST", "/v2/subscriptions", &xml, &first), 201);
    let more = "<subscription><plan_code>m</plan_code><currency>USD</currency><account>\
                <account_code>payer</account_code></account></subscription>";
    std::thread::scope(|scope| {
        for part in 0..4 {
            scope.spawn(move || {
                for _ in (1 + part..n).step_by(4) {
                    ok(authed(s, "POST", "/v2/subscriptions", &xml, more), 201);
                }
            });
        }
    });
}

/// The first value of a one-row count.
fn count(db: &str, statement: &str) -> i64 {
    sql(db, statement).first().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("a count from {statement}"))
}

const RENEWAL_INVOICES: &str = "SELECT COUNT(*) FROM invoices WHERE origin = 'renewal'";
const RENEWALS_DONE: &str = "SELECT COUNT(*) FROM jobs WHERE kind = 'renewal' AND done_at IS NOT NULL";

/// Moves the clock past the renewals and sends SIGTERM once some of their invoices are made but
/// not all: the scheduler is in the middle of its run.
fn term_during_renewals(s: &Server, n: i64, at: i64) -> i64 {
    s.set_clock(at);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let made = count(&s.database, RENEWAL_INVOICES);
        if made > 0 {
            assert!(made < n, "the renewals ran before the signal could be sent; make more of them");
            s.signal("TERM");
            return made;
        }
        assert!(std::time::Instant::now() < deadline, "no renewal ran");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Every renewal billed exactly once: one renewal invoice per subscription, each paid by exactly
/// one successful transaction, none left processing, every first renewal job done.
fn billed_once(db: &str, n: i64) {
    assert_eq!(count(db, RENEWAL_INVOICES), n);
    assert_eq!(count(db, "SELECT COUNT(*) FROM transactions WHERE origin = 'recurring'"), n, "one charge each");
    assert_eq!(count(db, "SELECT COUNT(DISTINCT invoice_id) FROM transactions WHERE origin = 'recurring'"), n);
    let paid_by = "SELECT COUNT(*) FROM transactions t JOIN invoices i ON i.id = t.invoice_id \
                   WHERE i.origin = 'renewal' AND t.status = 'success'";
    assert_eq!(count(db, paid_by), n, "one successful charge per renewal invoice");
    assert_eq!(count(db, "SELECT COUNT(*) FROM invoices WHERE origin = 'renewal' AND state <> 'paid'"), 0);
    assert_eq!(count(db, "SELECT COUNT(*) FROM transactions WHERE status = 'processing'"), 0);
    assert_eq!(count(db, RENEWALS_DONE), n);
}

/// SIGTERM during a scheduler run of renewals: within the grace the run finishes (every renewal
/// billed once) and the process exits 0; with no grace the run is stopped, and the renewals it
/// held run again once their claims end (a restart later), each billed exactly once.
#[test]
fn sigterm_during_renewals_bills_each_once() {
    const N: i64 = 500;
    let renewal_time = T0 + 31 * DAY + 60;

    // A grace long enough: the run under way finishes before the process exits.
    let db = rebill_store::testing::fresh_sqlite_url("shutdown_renewals");
    let mut s = start_with(&db, Options { clock: Some(T0), capture_stderr: true, ..Options::default() });
    due_renewals(&s, N as usize);
    let made = term_during_renewals(&s, N, renewal_time);
    let status = s.wait_exit(std::time::Duration::from_secs(60)).expect("the service exits");
    assert!(status.success(), "{status:?}\n{}", s.log());
    assert!(!s.log().contains("stopped at the end of the grace"), "{}", s.log());
    eprintln!("SIGTERM after {made} of {N} renewal invoices; the run finished");
    billed_once(&db, N);

    // No grace: the run is cut; what it held runs again after its leases, once.
    let database = postgres_database("shutdown_renewals");
    let db = database.url().to_owned();
    let args = ["--shutdown-grace", "0"];
    let mut s = start_with(&db, Options { clock: Some(T0), capture_stderr: true, args: &args, ..Options::default() });
    due_renewals(&s, N as usize);
    let made = term_during_renewals(&s, N, renewal_time);
    let status = s.wait_exit(std::time::Duration::from_secs(60)).expect("the service exits");
    assert!(status.success(), "{status:?}\n{}", s.log());
    let done = count(&db, RENEWALS_DONE);
    eprintln!("SIGTERM after {made} of {N} renewal invoices; {done} renewals done when the process ended");
    assert!(done < N, "the run was cut short: {done} of {N} done\n{}", s.log());
    assert!(s.log().contains("stopped at the end of the grace"), "{}", s.log());
    // Restarted after the claims' leases ended: the rest run, each renewal billed once.
    let later = renewal_time + rebill_app::operations::scheduler::LEASE_SECONDS + 60;
    let s = start_with(&db, Options { clock: Some(later), existing_database: true, ..Options::default() });
    // A charge the cut run had begun is settled by its settle job, a job of its own that runs
    // after the renewal's: both are awaited.
    let processing = "SELECT COUNT(*) FROM transactions WHERE status = 'processing'";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while count(&db, RENEWALS_DONE) < N || count(&db, processing) > 0 {
        assert!(std::time::Instant::now() < deadline, "renewals left: {}", N - count(&db, RENEWALS_DONE));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    billed_once(&db, N);
    drop(s);
}

//! Protocol rules that need time or volume, end to end over HTTP against the real binary on
//! SQLite and PostgreSQL: rate limits at their exact boundaries (sandbox and production, the
//! sliding window, 429, header values, alert de-duplication, counters shared by two processes),
//! key and site changes reaching every process at once,
//! deprecated and sunset API versions, key regeneration with and without the 12-hour grace, and
//! header-name casing checked on the raw bytes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use rebill_testkit::*;

/// A minute-aligned instant (2026-11-22T06:00:00Z) plus 30 seconds.
const T0: i64 = 1_795_327_200 + 30;

/// A keep-alive connection for sending many requests quickly.
struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    host: String,
}

impl Conn {
    fn open(addr: &str) -> Self {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Self { reader: BufReader::new(stream.try_clone().expect("clone")), writer: stream, host: addr.to_owned() }
    }

    /// Sends one request and returns the status and the header lines.
    fn send(&mut self, method: &str, path: &str, key: &str) -> (u16, Vec<String>) {
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Basic {}\r\nAccept: application/xml\r\nContent-Length: 0\r\n\r\n",
            self.host,
            basic(key)
        );
        self.writer.write_all(req.as_bytes()).expect("send");
        let mut status_line = String::new();
        self.reader.read_line(&mut status_line).expect("status line");
        let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status");
        let mut headers = Vec::new();
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).expect("header");
            let line = line.trim_end().to_owned();
            if line.is_empty() {
                break;
            }
            if let Some((n, v)) = line.split_once(':')
                && n.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().expect("length");
            }
            headers.push(line);
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).expect("body");
        (status, headers)
    }
}

fn header_of(headers: &[String], name: &str) -> Option<i64> {
    headers.iter().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        (n == name).then(|| v.trim().parse().ok())?
    })
}

/// Sends `n` requests over four connections; returns how many were refused with 429.
fn burst(addr: &str, key: &str, method: &str, n: usize) -> usize {
    let per = n / 4;
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let (addr, key, method) = (addr.to_owned(), key.to_owned(), method.to_owned());
            let count = if i == 3 { n - per * 3 } else { per };
            std::thread::spawn(move || {
                let mut conn = Conn::open(&addr);
                (0..count).filter(|_| conn.send(&method, "/v2/accounts/nobody", &key).0 == 429).count()
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().expect("burst thread")).sum()
}

fn rate_alerts(s: &Server) -> usize {
    let alerts = s.cli_json(&["alerts", "list"]);
    alerts["alerts"].as_array().expect("alerts").iter().filter(|a| a["kind"] == "rate_limit").count()
}

fn sandbox_rate_limit(db: &str) {
    let s = start_with(db, Options { clock: Some(T0), ..Options::default() });
    s.cli(&["site", "update", "--name", "sandbox", "--contact", "tech@example.com"]);
    let minute_end = (T0 / 60) * 60;
    let mut conn = Conn::open(&s.addr);
    let (status, headers) = conn.send("GET", "/v2/accounts/nobody", &s.key);
    assert_eq!(status, 404);
    assert_eq!(header_of(&headers, "X-RateLimit-Limit"), Some(2000));
    assert_eq!(header_of(&headers, "X-RateLimit-Remaining"), Some(1999));
    assert_eq!(header_of(&headers, "X-RateLimit-Reset"), Some(minute_end + 300));
    // Every method counts on a sandbox site: 1,998 more reads and writes leave exactly one.
    assert_eq!(burst(&s.addr, &s.key, "POST", 999) + burst(&s.addr, &s.key, "GET", 999), 0);
    let (status, headers) = conn.send("DELETE", "/v2/accounts/nobody", &s.key);
    assert_eq!(status, 404, "the 2,000th request of the window is served");
    assert_eq!(header_of(&headers, "X-RateLimit-Remaining"), Some(0));
    assert_eq!(rate_alerts(&s), 0);
    // The 2,001st is refused, with an XML error and the headers; it is not counted.
    let r = authed(&s, "GET", "/v2/accounts/nobody", &[], "");
    assert_error(&r, 429, "rate_limit_exceeded");
    assert_eq!(r.header("X-RateLimit-Remaining").as_deref(), Some("0"));
    assert_eq!(r.header("X-RateLimit-Reset"), Some((minute_end + 300).to_string()));
    assert_eq!(rate_alerts(&s), 1, "reaching the limit alerts the technical contact");
    assert_eq!(burst(&s.addr, &s.key, "GET", 8), 8);
    // A minute later the window still holds all 2,000: refused, one alert in three hours.
    s.set_clock(T0 + 60);
    assert_error(&authed(&s, "GET", "/v2/accounts/nobody", &[], ""), 429, "rate_limit_exceeded");
    assert_eq!(rate_alerts(&s), 1);
    // Once the minute leaves the five-minute window, requests are served again.
    s.set_clock(minute_end + 299);
    assert_error(&authed(&s, "GET", "/v2/accounts/nobody", &[], ""), 429, "rate_limit_exceeded");
    s.set_clock(minute_end + 300);
    let r = authed(&s, "GET", "/v2/accounts/nobody", &[], "");
    assert_eq!(r.status, 404);
    assert_eq!(r.header("X-RateLimit-Remaining").as_deref(), Some("1999"));
    assert_eq!(r.header("X-RateLimit-Reset"), Some((minute_end + 600).to_string()));
    // Hitting the limit again within three hours of the alert sends none; after, one more.
    assert_eq!(burst(&s.addr, &s.key, "GET", 2001), 2);
    assert_eq!(rate_alerts(&s), 1);
    s.set_clock(T0 + 3 * 3600 + 60);
    assert_eq!(burst(&s.addr, &s.key, "GET", 2001), 1);
    assert_eq!(rate_alerts(&s), 2);
    let alerts = s.cli_json(&["alerts", "list"]);
    let last = alerts["alerts"].as_array().expect("alerts").last().cloned().expect("an alert");
    assert_eq!(last["recipient"], "tech@example.com");
}

fn production_rate_limit(db: &str) {
    let s = start_with(db, Options { clock: Some(T0), ..Options::default() });
    s.cli(&["site", "update", "--name", "sandbox", "--mode", "production"]);
    // Only GET and HEAD count in production; writes are neither counted nor refused.
    assert_eq!(burst(&s.addr, &s.key, "POST", 40), 0);
    let mut conn = Conn::open(&s.addr);
    let (_, headers) = conn.send("GET", "/v2/accounts/nobody", &s.key);
    assert_eq!(header_of(&headers, "X-RateLimit-Limit"), Some(5000));
    assert_eq!(header_of(&headers, "X-RateLimit-Remaining"), Some(4999));
    // 1,000 in each of four earlier minutes would be the whole window; here 2,000 two minutes
    // ago and then 2,999 now: 4,000+ in one minute is fine while the window has room.
    s.set_clock(T0 + 120);
    assert_eq!(burst(&s.addr, &s.key, "GET", 2998), 0);
    let (status, headers) = conn.send("GET", "/v2/accounts/nobody", &s.key);
    assert_eq!(status, 404);
    assert_eq!(header_of(&headers, "X-RateLimit-Remaining"), Some(2000));
    assert_eq!(burst(&s.addr, &s.key, "GET", 2000), 0);
    let (status, headers) = conn.send("GET", "/v2/accounts/nobody", &s.key);
    assert_eq!(status, 429);
    assert_eq!(header_of(&headers, "X-RateLimit-Remaining"), Some(0));
    assert_eq!(header_of(&headers, "X-RateLimit-Reset"), Some((T0 + 120) / 60 * 60 + 300));
    let (status, headers) = conn.send("POST", "/v2/accounts/nobody", &s.key);
    assert_eq!(status, 405, "writes are not limited in production");
    assert_eq!(header_of(&headers, "X-RateLimit-Remaining"), Some(0));
    // The first GET's minute leaves the window: exactly one request of room.
    s.set_clock(T0 / 60 * 60 + 300);
    assert_eq!(conn.send("GET", "/v2/accounts/nobody", &s.key).0, 404);
    assert_eq!(conn.send("GET", "/v2/accounts/nobody", &s.key).0, 429);
}

#[test]
fn rate_limits_sandbox() {
    on_both_backends("rate_sandbox", sandbox_rate_limit);
}

#[test]
fn rate_limits_production() {
    on_both_backends("rate_production", production_rate_limit);
}

/// A fresh PostgreSQL database with two `rebill serve` processes on it, sharing one clock file
/// (the first created the sandbox site, whose key is `a.key`).
fn two_processes(tag: &str) -> (rebill_store::testing::TestDatabase, Server, Server) {
    let database = postgres_database(tag);
    let a = start_with(database.url(), Options { clock: Some(T0), ..Options::default() });
    let options = Options { clock_file: a.clock.clone(), existing_database: true, ..Options::default() };
    let b = start_with(database.url(), options);
    (database, a, b)
}

/// Two service processes on one PostgreSQL database share one count: together they never admit
/// more than the window. A request may be refused while the other process holds an unused share
/// of its reservation (at most one share, 5 % of the limit, per other process), and once the
/// leases end what is left of the window is usable again: the window fills exactly.
#[test]
fn rate_limit_is_shared_by_processes() {
    let (database, a, b) = two_processes("rate_shared");
    let db = database.url();
    let handles: Vec<_> = [a.addr.clone(), b.addr.clone()]
        .into_iter()
        .map(|addr| {
            let key = a.key.clone();
            std::thread::spawn(move || burst(&addr, &key, "GET", 1100))
        })
        .collect();
    let refused: usize = handles.into_iter().map(|h| h.join().expect("thread")).sum();
    let admitted = 2200 - refused;
    let share = 2000 / 20;
    assert!(admitted <= 2000, "two processes admitted {admitted} of a window of 2,000");
    assert!(admitted >= 2000 - share, "{admitted} admitted: more refused than one share held by the other process");
    // The processes give back what they reserved and did not use once their leases end (a
    // second); the buckets then hold exactly what was admitted.
    let counted = || sql(db, "SELECT CAST(COALESCE(SUM(count), 0) AS BIGINT) FROM rate_buckets")[0].parse::<usize>();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while counted() != Ok(admitted) {
        assert!(std::time::Instant::now() < deadline, "unused reservations were not given back: {:?}", counted());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // What is left of the window is served, by either process, and then nothing more.
    let mut conn = Conn::open(&b.addr);
    for _ in admitted..2000 {
        assert_eq!(conn.send("GET", "/v2/accounts/nobody", &a.key).0, 404);
    }
    assert_error(&authed(&a, "GET", "/v2/accounts/nobody", &[], ""), 429, "rate_limit_exceeded");
    let r = authed_with(&b, &a.key, "GET", "/v2/accounts/nobody", &[], "");
    assert_error(&r, 429, "rate_limit_exceeded");
}

/// Two service processes on one PostgreSQL database keep authenticated keys and their sites in
/// memory: a key blocked or a site changed through the CLI, or a sandbox clock moved through
/// one process, holds in both as soon as the change returns.
#[test]
fn key_and_site_changes_reach_every_process_at_once() {
    let (_database, a, b) = two_processes("settings_shared");
    let servers = [&a, &b];
    for s in servers {
        assert_eq!(authed_with(s, &a.key, "GET", "/v2/accounts/nobody", &[], "").status, 404, "the key is kept");
    }
    let keys = a.cli_json(&["keys", "list", "--site", "sandbox"]);
    let first = keys["keys"][0]["id"].as_i64().expect("id").to_string();
    let regen = a.cli_json(&["keys", "regenerate", &first, "--old-key", "block", "--site", "sandbox"]);
    let new_key = regen["private_key"].as_str().expect("key").to_owned();
    for s in servers {
        assert_eq!(authed_with(s, &a.key, "GET", "/v2/accounts/nobody", &[], "").status, 401, "blocked at once");
        assert_eq!(authed_with(s, &new_key, "GET", "/v2/accounts/nobody", &[], "").status, 404);
    }
    // A site's settings: its rate limit.
    a.cli(&["site", "update", "--name", "sandbox", "--rate-limit", "7"]);
    for s in servers {
        let r = authed_with(s, &new_key, "GET", "/v2/accounts/nobody", &[], "");
        assert_eq!(r.header("X-RateLimit-Limit").as_deref(), Some("35"));
    }
    a.cli(&["site", "update", "--name", "sandbox", "--rate-limit", "default"]);
    // The sandbox clock moved through one process is the other's at once.
    let xml = [("Content-Type", "application/xml; charset=utf-8"), ("X-Api-Version", "2.11")];
    let moved = authed_with(&a, &new_key, "POST", "/sandbox/clock", &xml, "<clock><advance>1day</advance></clock>");
    assert_eq!(moved.status, 200, "{}", moved.body);
    let body = "<account><account_code>later</account_code></account>";
    let created = authed_with(&b, &new_key, "POST", "/v2/accounts", &xml, body);
    assert_eq!(created.status, 201, "{}", created.body);
    let day_after = chrono::DateTime::from_timestamp(T0 + 86_400, 0).expect("time").format("%Y-%m-%d").to_string();
    assert!(created.body.contains(&format!("<created_at type=\"datetime\">{day_after}")), "{}", created.body);
}

fn versions_and_casing(db: &str) {
    let sunset = T0 + 3600;
    let arg = "2.2=2026-11-22T07:00:30Z";
    let s = start_with(db, Options { clock: Some(T0), args: &["--deprecate", arg], ..Options::default() });
    assert_eq!(rebill_server_sunset(arg), sunset);
    let r = authed(&s, "GET", "/v2/accounts/nobody", &[("X-Api-Version", "2.2")], "");
    assert_error(&r, 404, "not_found");
    // Names exactly as clients look them up, on the raw bytes.
    for name in [
        "Content-Type",
        "X-Api-Version",
        "X-RateLimit-Limit",
        "X-RateLimit-Remaining",
        "X-RateLimit-Reset",
        "Service-Deprecated",
        "Service-Sunset-Date",
    ] {
        assert!(r.has_exact_header(name), "{name} in\n{}", r.head);
    }
    assert!(r.head.contains("\r\nService-Deprecated: TRUE\r\n"), "{}", r.head);
    assert!(r.head.contains("\r\nService-Sunset-Date: 2026-11-22T07:00:30Z\r\n"), "{}", r.head);
    // Other versions are not deprecated.
    let r = authed(&s, "GET", "/v2/accounts/nobody", &[("X-Api-Version", "2.11")], "");
    assert!(r.header("Service-Deprecated").is_none(), "{}", r.head);
    let r = authed(&s, "DELETE", "/v2/accounts", &[], "");
    assert!(r.has_exact_header("Allow"), "{}", r.head);
    // After the sunset the version is refused; the supported list leaves it out.
    s.set_clock(sunset);
    let r = authed(&s, "GET", "/v2/accounts/nobody", &[("X-Api-Version", "2.2")], "");
    assert_error(&r, 400, "unsupported_api_version");
    assert!(r.body.contains("was sunset at 2026-11-22T07:00:30Z"), "{}", r.body);
    assert!(r.body.contains("supported versions: 2.0, 2.3, 2.4"), "{}", r.body);
    assert_eq!(authed(&s, "GET", "/v2/accounts/nobody", &[("X-Api-Version", "2.3")], "").status, 404);
    // An operator-set rate limit replaces the mode's default.
    s.cli(&["site", "update", "--name", "sandbox", "--rate-limit", "7"]);
    let r = authed(&s, "GET", "/v2/accounts/nobody", &[("X-Api-Version", "2.3")], "");
    assert_eq!(r.header("X-RateLimit-Limit").as_deref(), Some("35"));
    s.cli(&["site", "update", "--name", "sandbox", "--rate-limit", "default"]);
    let r = authed(&s, "GET", "/v2/accounts/nobody", &[("X-Api-Version", "2.3")], "");
    assert_eq!(r.header("X-RateLimit-Limit").as_deref(), Some("2000"));
    // A bad setting stops the service before it starts.
    let out = std::process::Command::new(bin())
        .args(["--database", db, "serve", "--listen", "127.0.0.1:0", "--deprecate", "2.2=someday"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an ISO 8601 date"), "{:?}", out);
}

fn rebill_server_sunset(arg: &str) -> i64 {
    let (_, date) = arg.split_once('=').expect("setting");
    chrono::DateTime::parse_from_rfc3339(date).expect("date").timestamp()
}

#[test]
fn deprecated_versions_and_header_casing() {
    on_both_backends("versions", versions_and_casing);
}

fn key_regeneration(db: &str) {
    let s = start_with(db, Options { clock: Some(T0), ..Options::default() });
    let keys = s.cli_json(&["keys", "list", "--site", "sandbox"]);
    let first = keys["keys"][0]["id"].as_i64().expect("id").to_string();
    // Keep the old key for 12 hours.
    let regen = s.cli_json(&["keys", "regenerate", &first, "--old-key", "keep-12h", "--site", "sandbox"]);
    let new_key = regen["private_key"].as_str().expect("key").to_owned();
    assert_eq!(authed_with(&s, &new_key, "GET", "/v2/accounts/nobody", &[], "").status, 404);
    s.set_clock(T0 + 12 * 3600 - 1);
    assert_eq!(authed(&s, "GET", "/v2/accounts/nobody", &[], "").status, 404, "the old key works for 12 hours");
    s.set_clock(T0 + 12 * 3600);
    assert_eq!(authed(&s, "GET", "/v2/accounts/nobody", &[], "").status, 401, "and not after");
    // Block the old key at once.
    let second = regen["id"].as_i64().expect("id").to_string();
    let regen = s.cli_json(&["keys", "regenerate", &second, "--old-key", "block", "--site", "sandbox"]);
    assert_eq!(authed_with(&s, &new_key, "GET", "/v2/accounts/nobody", &[], "").status, 401);
    let newest = regen["private_key"].as_str().expect("key");
    assert_eq!(authed_with(&s, newest, "GET", "/v2/accounts/nobody", &[], "").status, 404);
    // Each change queued an alert for the technical contact.
    let alerts = s.cli_json(&["alerts", "list"]);
    let kinds: Vec<&str> =
        alerts["alerts"].as_array().expect("alerts").iter().filter_map(|a| a["kind"].as_str()).collect();
    assert_eq!(kinds, ["key_regenerated", "key_regenerated"]);
    // Plan limits: five keys on a sandbox site, the last one never removed.
    for _ in 0..4 {
        s.cli(&["keys", "create", "--site", "sandbox"]);
    }
    let out = std::process::Command::new(bin())
        .args(["--database", db, "keys", "create", "--site", "sandbox"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("5 active private keys"), "{:?}", out);
}

#[test]
fn key_regeneration_with_and_without_grace() {
    on_both_backends("regeneration", key_regeneration);
}

/// When the database goes away mid-flight, requests get a 503 to retry that names no internals.
#[test]
fn internal_errors_do_not_leak() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let database = postgres_database("internal");
    let s = start(database.url());
    assert_eq!(authed(&s, "GET", "/v2/accounts/nobody", &[], "").status, 404);
    runtime.block_on(rebill_store::testing::drop_postgres_database(database.url()));
    // The database went away under the service: a 503 to retry (docs/deploy.md), saying nothing
    // of the cause.
    let r = authed(&s, "GET", "/v2/accounts/nobody", &[], "");
    assert_error(&r, 503, "service_unavailable");
    assert_eq!(r.header("Retry-After").as_deref(), Some("5"), "{}", r.head);
    let lower = r.body.to_lowercase();
    for secret in ["database", "sqlx", "postgres", "rebill_test", "connection", "error returned"] {
        assert!(!lower.contains(secret), "{secret} leaked: {}", r.body);
    }
}

fn conditional_gets_and_canonical_names(db: &str) {
    let s = start_with(db, Options { clock: Some(T0), ..Options::default() });
    let body = "<account><account_code>etag-1</account_code><email>a@example.com</email></account>";
    let r = authed(&s, "POST", "/v2/accounts", &xml_at("2.11"), body);
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.has_exact_header("Location"), "{}", r.head);
    assert_eq!(r.header("Location"), Some(format!("http://{}/v2/accounts/etag-1", s.addr)));

    // A GET carries a strong ETag; sending it back gives 304 without a body.
    let r = authed(&s, "GET", "/v2/accounts/etag-1", &[("X-Api-Version", "2.11")], "");
    assert_eq!(r.status, 200);
    assert!(r.has_exact_header("ETag"), "{}", r.head);
    let tag = r.header("ETag").expect("etag");
    assert!(tag.starts_with('"') && tag.ends_with('"') && tag.len() == 34, "{tag}");
    let r304 = authed(&s, "GET", "/v2/accounts/etag-1", &[("X-Api-Version", "2.11"), ("If-None-Match", &tag)], "");
    assert_eq!(r304.status, 304, "{}", r304.head);
    assert_eq!(r304.body, "");
    assert_eq!(r304.header("ETag").as_deref(), Some(tag.as_str()));
    assert!(r304.has_exact_header("X-RateLimit-Remaining"), "{}", r304.head);
    // The tag belongs to the version's body: another version, another tag.
    let other = authed(&s, "GET", "/v2/accounts/etag-1", &[("X-Api-Version", "2.10"), ("If-None-Match", &tag)], "");
    assert_eq!(other.status, 200);
    assert_ne!(other.header("ETag"), Some(tag.clone()));
    // A change makes the old tag stale.
    s.set_clock(T0 + 5);
    let put = "<account><first_name>Grace</first_name></account>";
    assert_eq!(authed(&s, "PUT", "/v2/accounts/etag-1", &xml_at("2.11"), put).status, 200);
    let r = authed(&s, "GET", "/v2/accounts/etag-1", &[("X-Api-Version", "2.11"), ("If-None-Match", &tag)], "");
    assert_eq!(r.status, 200);
    assert!(r.body.contains("<first_name>Grace</first_name>"), "{}", r.body);

    // Lists: Link and X-Records as clients spell them, on GET and on HEAD; ETag on the page.
    authed(&s, "POST", "/v2/accounts", &xml_at("2.11"), "<account><account_code>etag-2</account_code></account>");
    let r = authed(&s, "GET", "/v2/accounts?per_page=1", &[("X-Api-Version", "2.11")], "");
    for name in ["Link", "X-Records", "ETag", "X-RateLimit-Limit", "X-Api-Version", "Content-Type"] {
        assert!(r.has_exact_header(name), "{name} in\n{}", r.head);
    }
    let tag = r.header("ETag").expect("etag");
    let r304 = authed(&s, "GET", "/v2/accounts?per_page=1", &[("X-Api-Version", "2.11"), ("If-None-Match", &tag)], "");
    assert_eq!(r304.status, 304);
    let head = authed(&s, "HEAD", "/v2/accounts", &[("X-Api-Version", "2.6")], "");
    assert_eq!(head.status, 200);
    assert!(head.head.contains("\r\nX-Records: 2"), "{}", head.head);
    assert_eq!(head.body, "");

    // A 401's challenge and a create's Location as clients spell them.
    let anonymous = format!(
        "GET /v2/accounts HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept: application/xml\r\nX-Api-Version: 2.11\r\n\r\n",
        s.addr
    );
    let r = raw(&s.addr, &anonymous);
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(r.has_exact_header("WWW-Authenticate"), "{}", r.head);
    let r =
        authed(&s, "POST", "/v2/accounts", &xml_at("2.11"), "<account><account_code>etag-3</account_code></account>");
    assert_eq!(r.status, 201, "{}", r.body);
    assert!(r.has_exact_header("Location"), "{}", r.head);

    // An absolute-form target is routed by its path; hrefs use the host the client called.
    let absolute = format!(
        "GET http://{0}/v2/accounts/etag-1 HTTP/1.1\r\nHost: {0}\r\nConnection: close\r\nAuthorization: Basic {1}\r\nAccept: application/xml\r\nX-Api-Version: 2.11\r\n\r\n",
        s.addr,
        basic(&s.key)
    );
    let r = raw(&s.addr, &absolute);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains(&format!("<account href=\"http://{}/v2/accounts/etag-1\">", s.addr)), "{}", r.body);
}

#[test]
fn conditional_gets_lists_and_header_names() {
    on_both_backends("etag", conditional_gets_and_canonical_names);
}

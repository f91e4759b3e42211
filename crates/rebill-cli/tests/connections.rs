//! The HTTP request boundary: bodies without a Content-Type, bodies that stall (408), the bound
//! on open connections, links built from `--public-url` instead of the Host header, and the
//! request log.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use rebill_testkit::*;

const XML: &str = "application/xml; charset=utf-8";

/// Asserts an XML `<error>` with exactly this status, symbol and description.
#[track_caller]
fn assert_exact_error(reply: &Reply, status: u16, symbol: &str, description: &str) {
    assert_error(reply, status, symbol);
    assert_eq!(field(&reply.body, "description"), description, "{}", reply.body);
}

/// Reads one reply from a kept-alive connection (the head, then Content-Length bytes).
fn read_reply(stream: &mut TcpStream) -> std::io::Result<Reply> {
    let mut bytes = Vec::new();
    let mut byte = [0u8; 1];
    while !bytes.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte)? == 0 {
            return Err(std::io::Error::new(ErrorKind::UnexpectedEof, "closed before a reply"));
        }
        bytes.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&bytes[..bytes.len() - 4]).into_owned();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let reply = Reply { status, head, body: String::new() };
    let length: usize = reply.header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body)?;
    Ok(Reply { body: String::from_utf8_lossy(&body).into_owned(), ..reply })
}

/// Sends the start of a request that never finishes, and reads the reply the service gives on
/// its own; returns it with the time it took. The connection must then be closed by the service.
fn stalled(addr: &str, partial: &str) -> (Reply, Duration) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let started = Instant::now();
    stream.write_all(partial.as_bytes()).expect("send");
    let reply = read_reply(&mut stream).expect("a reply before the read timeout");
    let elapsed = started.elapsed();
    let mut rest = Vec::new();
    assert_eq!(stream.read_to_end(&mut rest).expect("the service closes the connection"), 0);
    (reply, elapsed)
}

fn head(s: &Server, method: &str, path: &str, extra: &str) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Basic {}\r\nAccept: application/xml\r\n\
         X-Api-Version: 2.11\r\n{extra}\r\n",
        s.addr,
        basic(&s.key)
    )
}

// ---------------------------------------------------------------------------------------------
// No Content-Type

fn content_types(db: &str) {
    let s = start(db);
    // A body without a Content-Type is read as XML (released Node clients send it so).
    let body = "<account><account_code>no-ct</account_code><email>ada@example.com</email></account>";
    let r = ok(authed(&s, "POST", "/v2/accounts", &[("X-Api-Version", "2.11")], body), 201);
    assert_eq!(field(&r.body, "account_code"), "no-ct");
    assert_eq!(field(&r.body, "email"), "ada@example.com");
    let update = "<account><first_name>Ada</first_name></account>";
    let r = ok(authed(&s, "PUT", "/v2/accounts/no-ct", &[("X-Api-Version", "2.11")], update), 200);
    assert_eq!(field(&r.body, "first_name"), "Ada");
    // Broken XML without a Content-Type is refused as XML would be.
    let r = authed(&s, "POST", "/v2/accounts", &[("X-Api-Version", "2.11")], "<account>");
    assert_error(&r, 400, "invalid_xml");
    // A Content-Type that is present and not XML in UTF-8 is still 415.
    let message = "POST and PUT bodies must be sent as application/xml; charset=utf-8.";
    for ct in ["application/json", "text/xml", "application/xml; charset=iso-8859-1", ""] {
        let r = authed(&s, "POST", "/v2/accounts", &[("Content-Type", ct), ("X-Api-Version", "2.11")], body);
        assert_exact_error(&r, 415, "unsupported_media_type", message);
    }
    let r = authed(&s, "PUT", "/v2/accounts/no-ct", &[("Content-Type", "application/json")], update);
    assert_exact_error(&r, 415, "unsupported_media_type", message);
    // Nothing refused was stored.
    let r = ok(authed(&s, "GET", "/v2/accounts", &[("X-Api-Version", "2.11")], ""), 200);
    assert_eq!(r.body.matches("<account href=").count(), 1, "{}", r.body);
}

#[test]
fn bodies_without_a_content_type_are_xml() {
    on_both_backends("no_ct", content_types);
}

// ---------------------------------------------------------------------------------------------
// Stalled bodies

#[test]
fn stalled_bodies_get_408_and_lose_their_connection() {
    let s = start_with(
        &rebill_store::testing::fresh_sqlite_url("stalled"),
        Options { args: &["--body-timeout", "1"], ..Options::default() },
    );
    let description = "The request body did not arrive within 1 seconds.";
    // Content-Length 1000, 9 bytes sent.
    let partial = format!(
        "{}<account>",
        head(&s, "POST", "/v2/accounts", &format!("Content-Type: {XML}\r\nContent-Length: 1000\r\n"))
    );
    let (r, took) = stalled(&s.addr, &partial);
    assert_exact_error(&r, 408, "request_timeout", description);
    assert_eq!(r.header("connection").as_deref(), Some("close"), "{}", r.head);
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(10), "{took:?}");

    // A request refused before its body is needed is answered at once, without reading it.
    let partial = format!(
        "POST /v2/accounts HTTP/1.1\r\nHost: {}\r\nAccept: application/xml\r\nContent-Type: {XML}\r\n\
         Content-Length: 1000\r\n\r\n<account>",
        s.addr
    );
    let (r, took) = stalled(&s.addr, &partial);
    assert_eq!((r.status, r.body.as_str()), (401, "HTTP Basic: Access denied."));
    assert!(took < Duration::from_millis(900), "{took:?}");
    let partial = format!(
        "{}<account>",
        head(&s, "POST", "/v2/accounts", "Content-Type: application/json\r\nContent-Length: 1000\r\n")
    );
    let (r, took) = stalled(&s.addr, &partial);
    assert_error(&r, 415, "unsupported_media_type");
    assert!(took < Duration::from_millis(900), "{took:?}");

    // A chunked body stalled in the middle of a chunk.
    let partial = format!(
        "{}20\r\n<account><accou",
        head(&s, "POST", "/v2/accounts", &format!("Content-Type: {XML}\r\nTransfer-Encoding: chunked\r\n"))
    );
    let (r, _) = stalled(&s.addr, &partial);
    assert_exact_error(&r, 408, "request_timeout", description);

    // A chunked body that never sends its last chunk.
    let partial = format!(
        "{}9\r\n<account>\r\n",
        head(&s, "PUT", "/v2/accounts/a1", &format!("Content-Type: {XML}\r\nTransfer-Encoding: chunked\r\n"))
    );
    let (r, _) = stalled(&s.addr, &partial);
    assert_exact_error(&r, 408, "request_timeout", description);

    // The same holds outside the API: the sandbox clock and the token library's endpoint (JSON).
    let partial = format!(
        "{}<clock>",
        head(&s, "POST", "/sandbox/clock", &format!("Content-Type: {XML}\r\nContent-Length: 50\r\n"))
    );
    let (r, _) = stalled(&s.addr, &partial);
    assert_exact_error(&r, 408, "request_timeout", description);
    let partial = format!(
        "POST /js/v1/token HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: 300\r\n\r\nkey=pk-",
        s.addr
    );
    let (r, _) = stalled(&s.addr, &partial);
    assert_eq!(r.status, 408, "{}", r.head);
    assert_eq!(r.header("access-control-allow-origin").as_deref(), Some("*"));
    let error: serde_json::Value = serde_json::from_str(&r.body).expect("json");
    assert_eq!(error["error"]["code"], "api-error");
    assert_eq!(error["error"]["message"], description);

    // A declared body over the limit is refused at once, a body that arrives in time is served.
    let partial = head(&s, "POST", "/v2/accounts", &format!("Content-Type: {XML}\r\nContent-Length: 2000000\r\n"));
    let (r, took) = stalled(&s.addr, &partial);
    assert_exact_error(&r, 413, "request_too_large", "Request bodies are limited to 1048576 bytes.");
    assert!(took < Duration::from_millis(900), "no wait for a body that is refused anyway: {took:?}");
    let body = "<account><account_code>in-time</account_code></account>";
    ok(authed(&s, "POST", "/v2/accounts", &xml_at("2.11"), body), 201);
    let chunked = format!(
        "{}{:x}\r\n{body}\r\n0\r\n\r\n",
        head(
            &s,
            "PUT",
            "/v2/accounts/in-time",
            &format!("Content-Type: {XML}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n")
        ),
        body.len()
    );
    let r = raw(&s.addr, &chunked);
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn the_body_timeout_is_checked_at_start() {
    let out = Command::new(bin())
        .args(["--database", &rebill_store::testing::fresh_sqlite_url("timeout_arg"), "serve"])
        .args(["--listen", "127.0.0.1:0", "--body-timeout", "0"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--body-timeout"), "{out:?}");
}

// ---------------------------------------------------------------------------------------------
// Connection bound

#[test]
fn open_connections_are_bounded_and_waiting_clients_are_served_later() {
    let s = start_with(
        &rebill_store::testing::fresh_sqlite_url("bound"),
        Options { args: &["--max-connections", "2"], ..Options::default() },
    );
    let get = head(&s, "GET", "/v2/accounts", "");
    let open = || {
        let mut stream = TcpStream::connect(&s.addr).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
        stream.write_all(get.as_bytes()).expect("send");
        let r = read_reply(&mut stream).expect("reply");
        assert_eq!(r.status, 200, "{}", r.body);
        stream
    };
    // Two kept-alive connections hold both slots.
    let first = open();
    let mut second = open();
    // A third client connects (the listen backlog takes it) but is not served…
    let mut third = TcpStream::connect(&s.addr).expect("connect");
    third.write_all(get.as_bytes()).expect("send");
    third.set_read_timeout(Some(Duration::from_secs(1))).expect("timeout");
    let mut byte = [0u8; 1];
    let waiting = third.read(&mut byte).expect_err("no reply while both slots are taken");
    assert!(matches!(waiting.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut), "{waiting:?}");
    // …the slots still serve their connections…
    second.write_all(get.as_bytes()).expect("send");
    assert_eq!(read_reply(&mut second).expect("reply").status, 200);
    // …and once one closes, the waiting client gets its answer.
    let started = Instant::now();
    drop(first);
    third.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let r = read_reply(&mut third).expect("served after a slot freed");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(started.elapsed() < Duration::from_secs(10));
}

// ---------------------------------------------------------------------------------------------
// Links: --public-url versus the Host header

fn request_as(s: &Server, host: &str, method: &str, path: &str, body: &str) -> Reply {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nAuthorization: Basic {}\r\n\
         Accept: application/xml\r\nX-Api-Version: 2.11\r\n",
        basic(&s.key)
    );
    if !body.is_empty() {
        req.push_str(&format!("Content-Type: {XML}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    raw(&s.addr, &req)
}

fn links(db: &str) {
    let base = "https://billing.example.com/rebill";
    let s = start_with(
        db,
        Options { args: &["--public-url", "https://billing.example.com/rebill/"], ..Options::default() },
    );
    assert!(s.banner.iter().any(|l| l == &format!("links use the public URL {base}")), "{:?}", s.banner);
    let body = "<account><account_code>linked</account_code></account>";
    let r = request_as(&s, "evil.example", "POST", "/v2/accounts", body);
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.header("location"), Some(format!("{base}/v2/accounts/linked")));
    assert!(r.body.contains(&format!("<account href=\"{base}/v2/accounts/linked\">")), "{}", r.body);
    assert!(!r.body.contains("evil.example"), "{}", r.body);
    ok(
        request_as(
            &s,
            "evil.example",
            "POST",
            "/v2/accounts",
            "<account><account_code>second</account_code></account>",
        ),
        201,
    );
    let r = request_as(&s, "evil.example", "GET", "/v2/accounts?per_page=1", "");
    assert_eq!(r.status, 200, "{}", r.body);
    let link = r.header("link").expect("Link");
    assert!(link.starts_with(&format!("<{base}/v2/accounts?")), "{link}");
    assert!(!r.body.contains("evil.example") && !link.contains("evil.example"), "{link}\n{}", r.body);
    // A request without a Host header gets the same links.
    let no_host = format!(
        "GET /v2/accounts/linked HTTP/1.1\r\nConnection: close\r\nAuthorization: Basic {}\r\nAccept: application/xml\r\n\r\n",
        basic(&s.key)
    );
    let r = raw(&s.addr, &no_host);
    assert!(r.body.contains(&format!("href=\"{base}/v2/accounts/linked\"")), "{}", r.body);
    drop(s);

    // Without --public-url, links follow the Host header (local development).
    let s = start_with(db, Options { existing_database: true, ..Options::default() });
    assert!(s.banner.iter().any(|l| l.starts_with("links use the request's Host header")), "{:?}", s.banner);
}

#[test]
fn links_use_the_public_url_whatever_the_host_header_says() {
    on_both_backends("public_url", links);
}

#[test]
fn the_public_url_comes_from_the_environment_too_and_is_checked_at_start() {
    let db = rebill_store::testing::fresh_sqlite_url("public_env");
    let s = start_with(&db, Options { env: &[("REBILL_PUBLIC_URL", "http://10.0.0.5:8080")], ..Options::default() });
    let r =
        request_as(&s, "evil.example", "POST", "/v2/accounts", "<account><account_code>env</account_code></account>");
    assert_eq!(r.header("location").as_deref(), Some("http://10.0.0.5:8080/v2/accounts/env"));
    drop(s);
    for (bad, problem) in [
        ("ftp://billing.example.com", "the scheme must be http or https"),
        ("https://billing.example.com/?a=1", "a query or fragment is not allowed"),
        ("https://billing.example.com/#top", "a query or fragment is not allowed"),
        ("billing.example.com", "expected http://HOST or https://HOST"),
        ("https://", "a host is required"),
        ("https://user:pw@billing.example.com", "user information is not allowed"),
    ] {
        let out = Command::new(bin())
            .args(["--database", &db, "serve", "--listen", "127.0.0.1:0", "--public-url", bad])
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{bad}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("public URL `{bad}`: {problem}")), "{bad}: {err}");
    }
}

// ---------------------------------------------------------------------------------------------
// Request log

fn request_log(db: &str) {
    let s = start_with(db, Options { capture_stderr: true, ..Options::default() });
    ok(
        authed(
            &s,
            "GET",
            "/v2/accounts?per_page=1&email=secret.person%40example.com&sort=created_at",
            &[("X-Api-Version", "2.11")],
            "",
        ),
        200,
    );
    assert_eq!(authed(&s, "GET", "/v2/widgets", &[], "").status, 404);
    let card = "4111111111111111";
    let jsonp = format!(
        "/js/v1/token?key={}&number={card}&month=12&year=2031&cvv=987&first_name=Verena&last_name=Example\
         &_method=post&callback=cb",
        s.public_key
    );
    assert_eq!(request(&s, "GET", &jsonp, &[], "").status, 200);
    let wanted = [
        "method=GET path=/v2/accounts query=per_page=1&email&sort=created_at status=200",
        "method=GET path=/v2/widgets query= status=404",
        "method=GET path=/js/v1/token query=key&number&month&year&cvv&first_name&last_name&_method=post&callback status=200",
    ];
    let deadline = Instant::now() + Duration::from_secs(10);
    let log = loop {
        let log = s.log();
        if wanted.iter().all(|w| log.contains(w)) || Instant::now() > deadline {
            break log;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    for w in wanted {
        assert!(log.contains(w), "missing `{w}` in:\n{log}");
    }
    let accounts = log.lines().find(|l| l.contains("path=/v2/accounts ")).expect("the accounts line");
    assert!(accounts.contains(" INFO rebill::request: request "), "{accounts}");
    assert!(accounts.contains(" site=1 api_version=2.11"), "{accounts}");
    assert!(accounts.contains(" duration_ms="), "{accounts}");
    let widgets = log.lines().find(|l| l.contains("path=/v2/widgets ")).expect("the widgets line");
    assert!(widgets.ends_with(" site=1 api_version=2.0"), "{widgets}");
    let token = log.lines().find(|l| l.contains("path=/js/v1/token ")).expect("the token line");
    // The token call names the site of its public key (it has no API version).
    assert!(token.ends_with(" site=1 api_version=-"), "{token}");
    for secret in [s.key.as_str(), basic(&s.key).as_str(), "secret.person", card, s.public_key.as_str()] {
        assert!(!log.contains(secret), "`{secret}` reached the log:\n{log}");
    }
}

#[test]
fn every_request_is_logged_without_secrets() {
    on_both_backends("request_log", request_log);
}

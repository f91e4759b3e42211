//! The transport against a scripted HTTP server: what rebill itself never answers (502, 503,
//! 412, a dropped connection, a document that does not decode) and the exact request the client
//! sends. The end-to-end suite against the real service is `crates/rebill-cli/tests/rust_client.rs`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rebill_client::models::Account;
use rebill_client::{ApiVersion, Client, Error, RetryPolicy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the scripted server does with one request.
#[derive(Clone)]
enum Step {
    /// Answer with this status, extra headers and body.
    Answer(u16, Vec<(&'static str, String)>, &'static str),
    /// Close the connection without answering.
    Drop,
}

/// A request as the server received it: the request line and the head.
#[derive(Debug, Clone)]
struct Seen {
    line: String,
    head: String,
}

struct Scripted {
    addr: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Scripted {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }

    fn client(&self, policy: RetryPolicy) -> Client {
        Client::builder()
            .base_url(format!("http://{}", self.addr))
            .api_key("k3y")
            .api_version(ApiVersion::new(2, 9))
            .retry_policy(policy)
            .build()
            .expect("client")
    }
}

/// Serves `steps` in order, one per connection (then 500s).
async fn scripted(steps: Vec<Step>) -> Scripted {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        let mut steps = steps.into_iter();
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let mut buffer = Vec::new();
            let mut chunk = [0u8; 4096];
            // The head, then as much body as Content-Length says.
            let head_end = loop {
                let Ok(n) = socket.read(&mut chunk).await else { break None };
                if n == 0 {
                    break None;
                }
                buffer.extend_from_slice(&chunk[..n]);
                if let Some(i) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                    break Some(i);
                }
            };
            let Some(head_end) = head_end else { continue };
            let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
            let length = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            while buffer.len() < head_end + 4 + length {
                match socket.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                }
            }
            let line = head.lines().next().unwrap_or_default().to_owned();
            log.lock().expect("lock").push(Seen { line, head: head.clone() });
            match steps.next().unwrap_or(Step::Answer(500, vec![], "")) {
                Step::Drop => drop(socket),
                Step::Answer(status, headers, body) => {
                    let mut out = format!(
                        "HTTP/1.1 {status} X\r\nConnection: close\r\nContent-Type: application/xml; charset=utf-8\r\nContent-Length: {}\r\n",
                        body.len()
                    );
                    for (name, value) in headers {
                        out.push_str(&format!("{name}: {value}\r\n"));
                    }
                    out.push_str("\r\n");
                    out.push_str(body);
                    let _ = socket.write_all(out.as_bytes()).await;
                    let _ = socket.shutdown().await;
                }
            }
        }
    });
    Scripted { addr, seen }
}

const ACCOUNT: &str = "<account><account_code>a b/c</account_code></account>";

fn quick() -> RetryPolicy {
    RetryPolicy { max_retries: 2, base_delay: Duration::from_millis(10), max_delay: Duration::from_millis(50) }
}

#[tokio::test]
async fn reads_retry_on_502_and_503_and_give_up_after_the_bound() {
    let server = scripted(vec![
        Step::Answer(503, vec![], ""),
        Step::Answer(502, vec![], ""),
        Step::Answer(200, vec![], ACCOUNT),
    ])
    .await;
    let account = server.client(quick()).accounts().get("a b/c").await.expect("the third attempt succeeds");
    assert_eq!(account.account_code.as_deref(), Some("a b/c"));
    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|s| s.line == "GET /v2/accounts/a%20b%2Fc HTTP/1.1"), "{seen:?}");

    let server = scripted(vec![Step::Answer(503, vec![], ""); 5]).await;
    let e = server.client(quick()).accounts().get("a").await.expect_err("every attempt 503");
    assert!(matches!(e, Error::Api { status: 503, .. }), "{e:?}");
    assert_eq!(server.seen().len(), 3, "the first attempt and two retries");

    let server = scripted(vec![Step::Answer(503, vec![], ""); 5]).await;
    let e = server.client(RetryPolicy::none()).accounts().get("a").await.expect_err("503");
    assert!(matches!(e, Error::Api { status: 503, .. }), "{e:?}");
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn writes_are_never_retried() {
    let server = scripted(vec![Step::Answer(503, vec![], ""), Step::Answer(201, vec![], ACCOUNT)]).await;
    let e = server.client(quick()).accounts().create(&Account::default()).await.expect_err("503");
    assert!(matches!(e, Error::Api { status: 503, .. }), "{e:?}");
    assert_eq!(server.seen().len(), 1);

    let server = scripted(vec![Step::Drop, Step::Answer(201, vec![], ACCOUNT)]).await;
    let e = server.client(quick()).accounts().create(&Account::default()).await.expect_err("dropped");
    assert!(matches!(e, Error::Transport(_)), "{e:?}");
    assert_eq!(server.seen().len(), 1, "a write whose answer was lost may have happened");
}

#[tokio::test]
async fn reads_retry_on_a_dropped_connection() {
    let server = scripted(vec![Step::Drop, Step::Answer(200, vec![], ACCOUNT)]).await;
    let account = server.client(quick()).accounts().get("x").await.expect("the retry succeeds");
    assert_eq!(account.account_code.as_deref(), Some("a b/c"));
    assert_eq!(server.seen().len(), 2);
}

#[tokio::test]
async fn requests_carry_the_key_version_agent_and_document() {
    let server = scripted(vec![Step::Answer(201, vec![], ACCOUNT)]).await;
    let account = Account { account_code: Some("n1".into()), ..Account::default() };
    server.client(quick()).accounts().create(&account).await.expect("created");
    let seen = server.seen();
    let head = seen[0].head.to_ascii_lowercase();
    assert_eq!(seen[0].line, "POST /v2/accounts HTTP/1.1");
    // "k3y:" in Base64.
    assert!(seen[0].head.contains("Basic azN5Og=="), "{head}");
    assert!(head.contains("x-api-version: 2.9"), "{head}");
    assert!(head.contains("accept: application/xml"), "{head}");
    assert!(head.contains("content-type: application/xml; charset=utf-8"), "{head}");
    assert!(head.contains(&format!("user-agent: rebill-client/{}", env!("CARGO_PKG_VERSION"))), "{head}");
}

#[tokio::test]
async fn a_429_is_waited_out_when_the_policy_allows() {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("time").as_secs();
    let reset = (now + 2).to_string();
    let limited = vec![
        ("X-RateLimit-Limit", "5".to_owned()),
        ("X-RateLimit-Remaining", "0".to_owned()),
        ("X-RateLimit-Reset", reset.clone()),
    ];
    let server = scripted(vec![
        Step::Answer(429, limited.clone(), "<error><symbol>rate_limit_exceeded</symbol></error>"),
        Step::Answer(200, vec![], ACCOUNT),
    ])
    .await;
    let client = Client::builder()
        .base_url(format!("http://{}", server.addr))
        .api_key("k")
        .wait_on_rate_limit(Duration::from_secs(5))
        .build()
        .expect("client");
    let started = Instant::now();
    client.accounts().get("x").await.expect("after the wait");
    assert!(started.elapsed() >= Duration::from_secs(1), "{:?}", started.elapsed());
    assert_eq!(server.seen().len(), 2);
    let rate = client.rate_limit().expect("the 429's headers");
    assert_eq!((rate.limit, rate.remaining, rate.reset_at.timestamp().to_string()), (5, 0, reset.clone()));

    // Without the policy the 429 is the answer.
    let server = scripted(vec![Step::Answer(429, limited, ""), Step::Answer(200, vec![], ACCOUNT)]).await;
    let e = server.client(quick()).accounts().get("x").await.expect_err("429");
    assert!(matches!(e, Error::RateLimited { reset_at: Some(t) } if t.timestamp().to_string() == reset), "{e:?}");
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn precondition_failed_and_undecodable_answers() {
    let server = scripted(vec![
        Step::Answer(412, vec![], "<error><symbol>precondition_failed</symbol></error>"),
        Step::Answer(200, vec![], "<account><created_at type=\"datetime\">yesterday</created_at></account>"),
        Step::Answer(200, vec![], "<plan/>"),
    ])
    .await;
    let client = server.client(quick());
    let e = client.subscriptions().cancel("u").await.expect_err("412");
    assert!(matches!(e, Error::PreconditionFailed), "{e:?}");
    let e = client.accounts().get("x").await.expect_err("a bad date");
    assert!(matches!(&e, Error::Decode { path, .. } if path == "account.created_at"), "{e:?}");
    let e = client.accounts().get("x").await.expect_err("another resource");
    assert!(matches!(&e, Error::Decode { .. }), "{e:?}");
}

//! What rebill's end-to-end suites share (a dev-dependency, never a dependency): start
//! `rebill serve` on a database, send raw HTTP/1.1 requests (so the exact bytes on the wire are
//! visible), run the `rebill` CLI, run a scenario on both backends, an SMTP sink ([`sink`]), a
//! webhook receiver ([`receiver`]), cached Python virtualenvs for suites that run Python programs
//! ([`python_venv`]), and a real Stripe peer, `localstripe` ([`localstripe`]), behind a proxy
//! that behaves as Stripe does where localstripe does not and makes faults ([`stripe_proxy`]).

pub mod localstripe;
mod python;
pub mod receiver;
pub mod sink;
pub mod stripe_proxy;
pub mod tcp_cut;

pub use python::{python_venv, target_dir};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use base64::Engine;

/// The `rebill` binary the suites run: `CARGO_BIN_EXE_rebill` when cargo sets it, else the
/// `rebill` beside the test executable's `deps` directory (where cargo builds it for the
/// integration tests of `rebill-cli`).
pub fn bin() -> PathBuf {
    if let Some(path) = std::env::var_os("CARGO_BIN_EXE_rebill") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the test executable's path");
    let dir = exe.parent().and_then(|deps| deps.parent()).expect("the target directory of the test executable");
    dir.join(format!("rebill{}", std::env::consts::EXE_SUFFIX))
}

/// A running `rebill serve` (killed on drop).
pub struct Server {
    child: Child,
    pub addr: String,
    /// The private key printed for the sandbox site created on the empty database.
    pub key: String,
    pub public_key: String,
    pub database: String,
    /// The file the service reads "now" from, when started with [`Options::clock`].
    pub clock: Option<PathBuf>,
    /// Everything the service wrote to stderr so far, when started with
    /// [`Options::capture_stderr`].
    pub stderr: Option<std::sync::Arc<std::sync::Mutex<String>>>,
    /// What the service printed on stdout before `listening on`.
    pub banner: Vec<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How to start a server.
#[derive(Default)]
pub struct Options<'a> {
    /// Extra arguments after `serve`.
    pub args: &'a [&'a str],
    /// Start the clock file at this epoch second (the service then reads time from it).
    pub clock: Option<i64>,
    /// An existing clock file (e.g. shared by two servers).
    pub clock_file: Option<PathBuf>,
    /// Expect the sandbox site's keys on stdout (false when the database already has a site).
    pub existing_database: bool,
    /// Keep the service's stderr (its log) in [`Server::stderr`] instead of passing it through.
    pub capture_stderr: bool,
    /// Extra environment variables of the service.
    pub env: &'a [(&'a str, &'a str)],
}

pub fn start(database: &str) -> Server {
    start_with(database, Options::default())
}

pub fn start_with(database: &str, options: Options) -> Server {
    let clock = options.clock_file.clone().or_else(|| {
        options.clock.map(|t| {
            let dir = std::env::temp_dir().join(format!(
                "rebill-clock-{}-{}",
                std::process::id(),
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
            ));
            std::fs::create_dir_all(&dir).expect("clock directory");
            let file = dir.join("now");
            std::fs::write(&file, t.to_string()).expect("clock file");
            file
        })
    });
    let mut command = Command::new(bin());
    command.args(["--database", database, "serve", "--listen", "127.0.0.1:0"]).args(options.args);
    if let Some(file) = &clock {
        command.env("REBILL_CLOCK_FILE", file);
    }
    command.envs(options.env.iter().copied());
    let stderr_mode = if options.capture_stderr { Stdio::piped() } else { Stdio::inherit() };
    let mut child = command.stdout(Stdio::piped()).stderr(stderr_mode).spawn().expect("start rebill serve");
    let stderr = child.stderr.take().map(|pipe| {
        let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = text.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                eprintln!("{line}");
                if let Ok(mut all) = sink.lock() {
                    all.push_str(&line);
                    all.push('\n');
                }
            }
        });
        text
    });
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut key = String::new();
    let mut public_key = String::new();
    let mut banner = Vec::new();
    let addr = loop {
        let line = lines.next().expect("a line from rebill serve").expect("utf-8");
        banner.push(line.clone());
        if let Some(k) = line.strip_prefix("private key: ") {
            key = k.trim().to_owned();
        }
        if let Some(k) = line.strip_prefix("public key:") {
            public_key = k.trim().to_owned();
        }
        if let Some(a) = line.strip_prefix("listening on http://") {
            break a.trim().to_owned();
        }
    };
    if !options.existing_database {
        assert_eq!(key.len(), 32, "an empty database gets a sandbox site whose key is printed");
    }
    // Keep draining stdout so the service never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Server { child, addr, key, public_key, database: database.to_owned(), clock, stderr, banner }
}

impl Server {
    /// Sends the signal `name` (`TERM`, `INT`, …) to the service.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill").arg(format!("-{name}")).arg(self.child.id().to_string()).status();
        assert!(status.is_ok_and(|s| s.success()), "kill -{name} failed");
    }

    /// Waits at most `timeout` for the service to exit; its exit status (`None`: still running).
    pub fn wait_exit(&mut self, timeout: std::time::Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// What the service logged so far (started with [`Options::capture_stderr`]).
    pub fn log(&self) -> String {
        let text = self.stderr.as_ref().expect("server started with capture_stderr");
        text.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Moves the service's clock to `now` (epoch seconds).
    pub fn set_clock(&self, now: i64) {
        let file = self.clock.as_ref().expect("server started with a clock");
        std::fs::write(file, now.to_string()).expect("write clock");
    }

    /// Runs `rebill --database <db> ARGS…` (with the server's clock) and returns stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        let mut command = Command::new(bin());
        command.args(["--database", &self.database]).args(args);
        if let Some(file) = &self.clock {
            command.env("REBILL_CLOCK_FILE", file);
        }
        let out = command.output().expect("run rebill");
        assert!(out.status.success(), "rebill {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("utf-8")
    }

    /// Runs a CLI command with `--json` and parses its output.
    pub fn cli_json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.push("--json");
        serde_json::from_str(&self.cli(&all)).expect("json")
    }
}

/// One HTTP reply.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    /// Status line and headers exactly as received.
    pub head: String,
    pub body: String,
}

impl Reply {
    /// A header's value, the name compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }

    /// Whether a header line starts with `name:` spelled exactly so.
    pub fn has_exact_header(&self, name: &str) -> bool {
        self.head.lines().skip(1).any(|l| l.split_once(':').is_some_and(|(n, _)| n == name))
    }
}

/// Sends one raw request and reads the whole reply (the request should say `Connection: close`).
pub fn raw(addr: &str, request: &str) -> Reply {
    let (status, head, body) = raw_bytes(addr, request);
    Reply { status, head, body: String::from_utf8(body).expect("utf-8 reply") }
}

/// Sends `request` and answers the status, the head and the body's bytes (any content).
pub fn raw_bytes(addr: &str, request: &str) -> (u16, String, Vec<u8>) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.write_all(request.as_bytes()).expect("send");
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).expect("read");
    let split = bytes.windows(4).position(|w| w == b"\r\n\r\n").expect("head and body");
    let head = String::from_utf8(bytes[..split].to_vec()).expect("utf-8 head");
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status");
    (status, head, bytes[split + 4..].to_vec())
}

pub fn basic(key: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{key}:"))
}

/// A request with the given headers (Host, `Connection: close` and Content-Length added).
pub fn request(s: &Server, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", s.addr);
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    raw(&s.addr, &req)
}

/// A request with the server's key and `Accept: application/xml`, plus `extra` headers.
pub fn authed(s: &Server, method: &str, path: &str, extra: &[(&str, &str)], body: &str) -> Reply {
    authed_with(s, &s.key, method, path, extra, body)
}

/// Like [`authed`] with another private key.
pub fn authed_with(s: &Server, key: &str, method: &str, path: &str, extra: &[(&str, &str)], body: &str) -> Reply {
    let auth = format!("Basic {}", basic(key));
    let mut headers = vec![("Authorization", auth.as_str()), ("Accept", "application/xml")];
    headers.extend_from_slice(extra);
    request(s, method, path, &headers, body)
}

/// Headers of an XML write at `version`.
pub fn xml_at(version: &str) -> [(&str, &str); 2] {
    [("Content-Type", "application/xml; charset=utf-8"), ("X-Api-Version", version)]
}

/// Asserts an XML `<error>` reply with `status` and `symbol`.
pub fn assert_error(reply: &Reply, status: u16, symbol: &str) {
    assert_eq!(reply.status, status, "{}\n{}", reply.head, reply.body);
    assert_eq!(reply.header("content-type").as_deref(), Some("application/xml; charset=utf-8"), "{}", reply.head);
    assert!(reply.body.contains(&format!("<symbol>{symbol}</symbol>")), "{}", reply.body);
}

/// Runs `f` with a server on a fresh SQLite database and on a fresh PostgreSQL database; the
/// PostgreSQL database is dropped afterwards (also when `f` panics).
pub fn on_both_backends(tag: &str, f: impl Fn(&str) + Send + Sync + Clone + 'static) {
    f(&rebill_store::testing::fresh_sqlite_url(tag));
    let database = postgres_database(tag);
    f(database.url());
}

/// A fresh PostgreSQL database, dropped with the returned value.
pub fn postgres_database(tag: &str) -> rebill_store::testing::TestDatabase {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(rebill_store::testing::fresh_postgres_database(tag))
}

/// A key file for the service's vault in a fresh temporary directory (the service creates the
/// key on first start).
pub fn vault_key_file() -> String {
    let dir = std::env::temp_dir().join(format!(
        "rebill-vault-{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).expect("key directory");
    dir.join("vault.key").display().to_string()
}

/// A server on `db` with the clock file at `now`, its own vault key file and `extra` arguments.
pub fn serve_at(db: &str, now: i64, extra: &[&str]) -> Server {
    let key_file = vault_key_file();
    let mut args: Vec<&str> = vec!["--vault-key-file", &key_file];
    args.extend_from_slice(extra);
    start_with(db, Options { clock: Some(now), args: &args, ..Options::default() })
}

/// Asserts the reply's status and hands the reply on.
#[track_caller]
pub fn ok(reply: Reply, status: u16) -> Reply {
    assert_eq!(reply.status, status, "{}\n{}", reply.head, reply.body);
    reply
}

/// The text of the first `<name …>text</name>` element (empty for `<name/>`).
pub fn tag(body: &str, name: &str) -> Option<String> {
    let start = body.find(&format!("<{name}"))?;
    let rest = &body[start + name.len() + 1..];
    if !(rest.starts_with('>') || rest.starts_with(' ')) {
        return tag(&body[start + name.len() + 1..], name);
    }
    let open_end = rest.find('>')?;
    if rest[..open_end].ends_with('/') {
        return Some(String::new());
    }
    let text = &rest[open_end + 1..];
    let end = text.find(&format!("</{name}>"))?;
    Some(text[..end].to_owned())
}

/// [`tag`], which must be there.
#[track_caller]
pub fn field(body: &str, name: &str) -> String {
    tag(body, name).unwrap_or_else(|| panic!("no <{name}> in {body}"))
}

/// A card token from the token endpoint (expiry 12/2031, CVV 123, a San Francisco address).
#[track_caller]
pub fn card_token(s: &Server, number: &str) -> String {
    let body = format!(
        "key={}&number={number}&month=12&year=2031&cvv=123&first_name=Verena&last_name=Example\
         &address1=123+Main+St.&city=San+Francisco&state=CA&postal_code=94105&country=US",
        s.public_key
    );
    let reply = request(s, "POST", "/js/v1/token", &[("Content-Type", "application/x-www-form-urlencoded")], &body);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let value: serde_json::Value = serde_json::from_str(&reply.body).expect("json");
    value["id"].as_str().expect("id").to_owned()
}

/// `POST /sandbox/clock` with `<clock>{inner}</clock>` (e.g. `<advance>1month</advance>`),
/// which must answer 200.
#[track_caller]
pub fn sandbox_clock(s: &Server, inner: &str) -> Reply {
    let headers = [("Content-Type", "application/xml; charset=utf-8")];
    ok(authed(s, "POST", "/sandbox/clock", &headers, &format!("<clock>{inner}</clock>")), 200)
}

/// Runs one SQL statement on the service's database and answers the first column of each row
/// (as text).
pub fn sql(db: &str, statement: &str) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        use sqlx::{Connection, Row};
        sqlx::any::install_default_drivers();
        let mut conn = sqlx::AnyConnection::connect(db).await.expect("connect to the service's database");
        let rows = sqlx::query(statement).fetch_all(&mut conn).await.expect("query");
        let _ = conn.close().await;
        rows.iter()
            .map(|r| {
                r.try_get::<String, _>(0).or_else(|_| r.try_get::<i64, _>(0).map(|v| v.to_string())).unwrap_or_default()
            })
            .collect()
    })
}

/// Where a client hangs up a request it sends ([`hang_up`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Right after the request head, before any of the body.
    AfterHead,
    /// Half-way through the body.
    MidBody,
    /// Right after the last byte of the body.
    AfterBody,
    /// This many milliseconds after the last byte of the body, while rebill works: the hang-up
    /// itself is timed, nothing is awaited.
    WhileWorking(u64),
}

impl Cut {
    /// Whether the request with `body` had arrived whole when the client hung up.
    pub fn whole(self, body: &str) -> bool {
        match self {
            Cut::AfterHead | Cut::MidBody => body.is_empty(),
            Cut::AfterBody | Cut::WhileWorking(_) => true,
        }
    }
}

/// Sends `method path` to `server` with `key`, the XML headers of version 2.11 and `body`, and
/// closes the connection at `cut` without reading a byte of the answer.
pub fn hang_up(server: &Server, key: &str, method: &str, path: &str, body: &str, cut: Cut) {
    use std::io::Write;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Basic {}\r\nAccept: application/xml\r\n\
         Content-Type: application/xml; charset=utf-8\r\nX-Api-Version: 2.11\r\nContent-Length: {}\r\n\r\n",
        server.addr,
        basic(key),
        body.len()
    );
    let mut stream = std::net::TcpStream::connect(&server.addr).expect("connect");
    stream.set_nodelay(true).expect("no delay");
    stream.write_all(head.as_bytes()).expect("the head");
    match cut {
        Cut::AfterHead => {}
        Cut::MidBody => stream.write_all(&body.as_bytes()[..body.len() / 2]).expect("half the body"),
        Cut::AfterBody => stream.write_all(body.as_bytes()).expect("the body"),
        Cut::WhileWorking(ms) => {
            stream.write_all(body.as_bytes()).expect("the body");
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
    }
    drop(stream);
}

/// The sum of the samples of `name` whose labels include `labels` (`None`: no such sample), in a
/// Prometheus text exposition.
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(name) else { continue };
        let (set, value) = match rest.strip_prefix('{') {
            Some(inner) => match inner.split_once("} ") {
                Some((set, value)) => (set, value),
                None => continue,
            },
            None => match rest.strip_prefix(' ') {
                Some(value) => ("", value),
                None => continue,
            },
        };
        let pairs: Vec<(&str, &str)> =
            set.split(',').filter_map(|pair| pair.split_once('=')).map(|(k, v)| (k, v.trim_matches('"'))).collect();
        if labels.iter().all(|wanted| pairs.contains(wanted)) {
            let value: f64 = value.trim().parse().unwrap_or_else(|e| panic!("{line}: {e}"));
            found = Some(found.unwrap_or(0.0) + value);
        }
    }
    found
}

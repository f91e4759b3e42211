//! A fake Stripe for the end-to-end suites of the card gateway: [`LocalStripe`] runs
//! [localstripe](https://github.com/adrienverge/localstripe) (a Python program that serves
//! Stripe's API from memory, pinned in `python/localstripe-requirements.txt` and installed into a
//! cached virtualenv by [`crate::python_venv`]), and [`DroppingProxy`] stands between the service
//! and it to lose answers (the request reached Stripe and acted, the service never hears back)
//! or to hold requests (so that a `kill -9` lands in the middle of a batch).
//!
//! localstripe takes any key that starts with `sk_test_` ([`API_KEY`] here) and starts empty with
//! `--from-scratch`. It keeps its objects in memory and also writes all of them to
//! `/tmp/localstripe.pickle` after every write: that path is hard-coded in
//! `localstripe/resources.py` (`Store.dump_to_disk`, an absolute path that neither the working
//! directory nor `TMPDIR` changes), so every instance on the machine writes the same file. That is
//! harmless here: with `--from-scratch` an instance never reads it, and each instance's own state
//! is in its memory. Each instance still runs in a temporary directory of its own (working
//! directory and `TMPDIR`), which holds its log.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub use proxy::DroppingProxy;

/// The pinned requirements of the localstripe virtualenv.
pub const REQUIREMENTS: &str = include_str!("../python/localstripe-requirements.txt");

/// The secret key the suites give localstripe (it takes any `sk_test_…`).
pub const API_KEY: &str = "sk_test_rebill";

/// The file localstripe writes its whole store to after every write (hard-coded).
const PICKLE: &str = "/tmp/localstripe.pickle";

/// How long localstripe may take to answer once started.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The localstripe version pinned in [`REQUIREMENTS`] (`localstripe==…`).
pub fn pinned_version() -> &'static str {
    REQUIREMENTS
        .lines()
        .find_map(|line| line.trim().strip_prefix("localstripe=="))
        .map(str::trim)
        .expect("python/localstripe-requirements.txt pins localstripe==<version>")
}

/// The interpreter of the virtualenv holding localstripe (made on first use, see
/// [`crate::python_venv`]).
pub fn python() -> PathBuf {
    let requirements = Path::new(env!("CARGO_MANIFEST_DIR")).join("python").join("localstripe-requirements.txt");
    let check = format!(
        "import importlib.metadata, localstripe.server; \
         assert importlib.metadata.version('localstripe') == '{}'",
        pinned_version()
    );
    crate::python_venv("localstripe-venv", &requirements, REQUIREMENTS, &[&check])
}

/// A running localstripe on `127.0.0.1` (it listens on `::`, both IPv4 and IPv6), killed on drop.
pub struct LocalStripe {
    /// `http://127.0.0.1:PORT`, the base URL of its API (`/v1/…`).
    pub base: String,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// What it printed (its access log and any traceback).
    pub log: PathBuf,
    /// Its temporary directory (working directory and `TMPDIR`), removed on drop unless the
    /// thread is panicking.
    pub dir: PathBuf,
    child: Child,
}

impl Drop for LocalStripe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("localstripe at {}: its log is {}", self.base, self.log.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl LocalStripe {
    /// Starts `<venv python> -m localstripe --port <free port> --from-scratch` and waits until it
    /// answers `GET /v1/customers`; panics (with its log) when it does not. A port taken by
    /// someone else between choosing and binding it is retried with another.
    pub fn start() -> LocalStripe {
        let python = python();
        if let Err(e) = std::fs::OpenOptions::new().append(true).open(PICKLE)
            && e.kind() == std::io::ErrorKind::PermissionDenied
        {
            panic!("localstripe writes {PICKLE} after every write and cannot write it here ({e}): remove it");
        }
        let dir = unique_temp_dir("rebill-localstripe");
        let log = dir.join("localstripe.log");
        for _attempt in 0..10 {
            let port = free_port();
            let log_file = File::create(&log).unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
            let err_file = log_file.try_clone().unwrap_or_else(|e| panic!("share {}: {e}", log.display()));
            let mut child = Command::new(&python)
                .args(["-m", "localstripe", "--port", &port.to_string(), "--from-scratch"])
                .current_dir(&dir)
                .env("TMPDIR", &dir)
                .env("PYTHONUNBUFFERED", "1")
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .stdin(Stdio::null())
                .stdout(log_file)
                .stderr(err_file)
                .spawn()
                .unwrap_or_else(|e| panic!("start localstripe with {}: {e}", python.display()));
            let addr = format!("127.0.0.1:{port}");
            match wait_until_ready(&mut child, &addr, &log) {
                Ready::Yes => {
                    return LocalStripe { base: format!("http://{addr}"), addr, log, dir, child };
                }
                Ready::PortTaken => continue,
                Ready::Failed(why) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("localstripe did not start on {addr}: {why}\n--- its log\n{}", read_log(&log));
                }
            }
        }
        panic!("localstripe found no free port in 10 tries\n--- its last log\n{}", read_log(&log));
    }

    /// What it printed so far.
    pub fn log_text(&self) -> String {
        read_log(&self.log)
    }

    /// `GET path_and_query` with the key; panics unless it answers 2xx with JSON.
    #[track_caller]
    pub fn get_json(&self, path_and_query: &str) -> serde_json::Value {
        self.call("GET", path_and_query, &[])
    }

    /// `POST path` with `fields` form-encoded and the key; panics unless it answers 2xx with JSON.
    #[track_caller]
    pub fn post_form(&self, path: &str, fields: &[(&str, &str)]) -> serde_json::Value {
        self.call("POST", path, fields)
    }

    /// `DELETE path` with the key; panics unless it answers 2xx with JSON.
    #[track_caller]
    pub fn delete(&self, path: &str) -> serde_json::Value {
        self.call("DELETE", path, &[])
    }

    #[track_caller]
    fn call(&self, method: &str, path: &str, fields: &[(&str, &str)]) -> serde_json::Value {
        let body = form_encode(fields);
        let (status, text) = stripe_request(&self.addr, method, path, &body).unwrap_or_else(|e| {
            panic!("{method} {}{path}: {e}\n--- localstripe's log\n{}", self.base, self.log_text())
        });
        assert!((200..300).contains(&status), "{method} {}{path} answered {status}:\n{text}", self.base);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {}{path}: not JSON ({e}):\n{text}", self.base))
    }
}

enum Ready {
    Yes,
    PortTaken,
    Failed(String),
}

/// Polls a just started localstripe: ready once it has bound its port (it says `Running on`) and
/// answers `GET /v1/customers` with a list.
fn wait_until_ready(child: &mut Child, addr: &str, log: &Path) -> Ready {
    let started = Instant::now();
    let mut pause = Duration::from_millis(10);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                return if read_log(log).contains("Address already in use") {
                    Ready::PortTaken
                } else {
                    Ready::Failed(format!("it exited ({status})"))
                };
            }
            Ok(None) => {}
            Err(e) => return Ready::Failed(format!("cannot watch it: {e}")),
        }
        if read_log(log).contains("Running on ")
            && let Ok((200, body)) = stripe_request(addr, "GET", "/v1/customers", "")
            && body.contains("\"object\": \"list\"")
        {
            return Ready::Yes;
        }
        if started.elapsed() > START_TIMEOUT {
            return Ready::Failed(format!("it did not answer GET /v1/customers within {START_TIMEOUT:?}"));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

fn read_log(log: &Path) -> String {
    std::fs::read(log).map(|bytes| String::from_utf8_lossy(&bytes).into_owned()).unwrap_or_default()
}

/// One request to a Stripe-like API at `addr` with [`API_KEY`] (`Connection: close`; a non-empty
/// body is sent form-encoded): the status and the body.
pub fn stripe_request(addr: &str, method: &str, path: &str, form_body: &str) -> std::io::Result<(u16, String)> {
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {API_KEY}\r\nConnection: close\r\n");
    if !form_body.is_empty() {
        request.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
    }
    let _ = write!(request, "Content-Length: {}\r\n\r\n{form_body}", form_body.len());
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    stream.write_all(request.as_bytes())?;
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes)?;
    let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let split = bytes.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| invalid("an answer without a head"))?;
    let head = String::from_utf8_lossy(&bytes[..split]);
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| invalid("no status"))?;
    Ok((status, String::from_utf8_lossy(&bytes[split + 4..]).into_owned()))
}

/// `application/x-www-form-urlencoded` of `fields` (`a=1&b=x+y`).
pub fn form_encode(fields: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (i, (name, value)) in fields.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        encode_into(&mut out, name);
        out.push('=');
        encode_into(&mut out, value);
    }
    out
}

fn encode_into(out: &mut String, text: &str) {
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => out.push(char::from(byte)),
            b' ' => out.push('+'),
            _ => {
                let _ = write!(out, "%{byte:02X}");
            }
        }
    }
}

/// A port on 127.0.0.1 that was free a moment ago (bound and released).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0 to find a free port");
    listener.local_addr().expect("the address of a bound listener").port()
}

/// A fresh directory under the system's temporary directory.
fn unique_temp_dir(prefix: &str) -> PathBuf {
    static SEQUENCE: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let dir = std::env::temp_dir().join(format!(
        "{prefix}-{}-{nanos}-{}",
        std::process::id(),
        SEQUENCE.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir
}

mod proxy {
    //! The forwarding proxy behind [`DroppingProxy`].

    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// Requests larger than this (head and body) are refused.
    const MAX_REQUEST: usize = 64 * 1024 * 1024;

    /// An HTTP/1.1 forwarding proxy on `127.0.0.1` in front of one upstream, which can lose the
    /// upstream's answers and hold requests. It runs on a thread of its own (so sync tests can use
    /// it) and stops when dropped.
    ///
    /// Client connections may be kept alive; each request goes upstream on a connection of its
    /// own (`Connection: close`, `Host` set to the upstream), its body sent with
    /// `Content-Length` (chunked request bodies are answered 501), and the upstream's answer is
    /// read to its end before it is passed on. An upstream that cannot be reached is answered
    /// 502 by the proxy. Dropping it closes every connection; requests still held then are not
    /// forwarded.
    pub struct DroppingProxy {
        /// `http://127.0.0.1:PORT`: give this to the service instead of the upstream.
        pub base: String,
        /// `127.0.0.1:PORT`.
        pub addr: String,
        state: Arc<State>,
        shutdown: Option<tokio::sync::oneshot::Sender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl Drop for DroppingProxy {
        fn drop(&mut self) {
            if let Some(shutdown) = self.shutdown.take() {
                let _ = shutdown.send(());
            }
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
    }

    struct State {
        /// `host:port` of the upstream.
        upstream: String,
        rules: Mutex<Rules>,
    }

    #[derive(Default)]
    struct Rules {
        drops: Vec<DropRule>,
        delays: Vec<(String, String, Duration)>,
        /// Method and target of each request received, in order.
        received: Vec<(String, String)>,
        /// Method and target of each request whose upstream answer was read in full.
        forwarded: Vec<(String, String)>,
    }

    struct DropRule {
        method: String,
        prefix: String,
        remaining: usize,
    }

    fn matches(method: &str, target: &str, rule_method: &str, prefix: &str) -> bool {
        method.eq_ignore_ascii_case(rule_method) && target.starts_with(prefix)
    }

    impl State {
        fn rules(&self) -> std::sync::MutexGuard<'_, Rules> {
            self.rules.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
        }
    }

    impl DroppingProxy {
        /// Starts a proxy forwarding to `upstream_base` (`http://host:port`, no path).
        pub fn start(upstream_base: &str) -> DroppingProxy {
            let upstream = upstream_base
                .strip_prefix("http://")
                .map(|rest| rest.trim_end_matches('/'))
                .filter(|authority| !authority.is_empty() && !authority.contains('/'))
                .unwrap_or_else(|| panic!("the proxy's upstream is http://host:port, not {upstream_base:?}"))
                .to_owned();
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the proxy on 127.0.0.1");
            let addr = listener.local_addr().expect("the proxy's address").to_string();
            listener.set_nonblocking(true).expect("a non-blocking listener for the proxy");
            let state = Arc::new(State { upstream, rules: Mutex::new(Rules::default()) });
            let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
            let shared = state.clone();
            let thread = std::thread::Builder::new()
                .name(format!("proxy-{addr}"))
                .spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("a runtime for the proxy");
                    runtime.block_on(async move {
                        let listener =
                            tokio::net::TcpListener::from_std(listener).expect("the proxy's listener on tokio");
                        let accept = async {
                            loop {
                                match listener.accept().await {
                                    Ok((client, _)) => {
                                        tokio::spawn(connection(client, shared.clone()));
                                    }
                                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                                }
                            }
                        };
                        tokio::select! {
                            _ = stop => {}
                            () = accept => {}
                        }
                    });
                    // Dropping the runtime ends the connections still open.
                })
                .expect("start the proxy's thread");
            DroppingProxy {
                base: format!("http://{addr}"),
                addr,
                state,
                shutdown: Some(shutdown),
                thread: Some(thread),
            }
        }

        /// The next `count` requests whose method is `method` and whose target (path and query)
        /// starts with `path_prefix` are forwarded upstream in full and the upstream's answer is
        /// read to its end (so the upstream has acted on them); then the client's connection is
        /// closed without a byte of the answer. Adds to earlier calls.
        pub fn drop_answers(&self, method: &str, path_prefix: &str, count: usize) {
            self.state.rules().drops.push(DropRule {
                method: method.to_owned(),
                prefix: path_prefix.to_owned(),
                remaining: count,
            });
        }

        /// Requests matching `method` and `path_prefix` are held for `delay` before they are
        /// forwarded (the longest delay applies when several match; `Duration::ZERO` takes the
        /// rule away). A held request is forwarded even when its client has gone away meanwhile,
        /// as when the client died just after sending it: wait for [`count`](Self::count) to
        /// see it land.
        pub fn delay(&self, method: &str, path_prefix: &str, delay: Duration) {
            let mut rules = self.state.rules();
            rules.delays.retain(|(m, p, _)| !(m.eq_ignore_ascii_case(method) && p == path_prefix));
            if !delay.is_zero() {
                rules.delays.push((method.to_owned(), path_prefix.to_owned(), delay));
            }
        }

        /// How many requests matching `method` and `path_prefix` were forwarded so far: sent
        /// upstream and answered by it in full (dropped answers included).
        pub fn count(&self, method: &str, path_prefix: &str) -> usize {
            let rules = self.state.rules();
            rules.forwarded.iter().filter(|(m, t)| matches(m, t, method, path_prefix)).count()
        }

        /// How many requests matching `method` and `path_prefix` the proxy received so far (held
        /// ones included, as soon as they are read in full).
        pub fn received(&self, method: &str, path_prefix: &str) -> usize {
            let rules = self.state.rules();
            rules.received.iter().filter(|(m, t)| matches(m, t, method, path_prefix)).count()
        }
    }

    /// One request as read from a client.
    struct Request {
        method: String,
        target: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        /// Whether the client keeps the connection after this request.
        keep_alive: bool,
    }

    impl Request {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
        }
    }

    enum Read {
        Request(Request),
        /// The client closed the connection (between requests or in the middle of one).
        Closed,
        /// The request cannot be forwarded: answer this status and reason, then close.
        Refuse(u16, &'static str),
    }

    async fn connection(mut client: TcpStream, state: Arc<State>) {
        let mut buffer = Vec::new();
        loop {
            let request = match read_request(&mut client, &mut buffer).await {
                Read::Request(request) => request,
                Read::Closed => return,
                Read::Refuse(status, reason) => {
                    let _ = client.write_all(simple_answer(status, reason).as_bytes()).await;
                    return;
                }
            };
            let (delay, drop_answer) = {
                let mut rules = state.rules();
                rules.received.push((request.method.clone(), request.target.clone()));
                let delay = rules
                    .delays
                    .iter()
                    .filter(|(m, p, _)| matches(&request.method, &request.target, m, p))
                    .map(|(_, _, d)| *d)
                    .max()
                    .unwrap_or(Duration::ZERO);
                // The index of the rule whose answer this request loses (rules are never removed).
                let drop_answer = rules
                    .drops
                    .iter()
                    .position(|r| r.remaining > 0 && matches(&request.method, &request.target, &r.method, &r.prefix));
                if let Some(rule) = drop_answer.and_then(|index| rules.drops.get_mut(index)) {
                    rule.remaining -= 1;
                }
                (delay, drop_answer)
            };
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let answer = match forward(&state.upstream, &request).await {
                Ok(answer) => answer,
                Err(e) => {
                    // The upstream never answered: the loss of an answer is still to come.
                    if let Some(index) = drop_answer
                        && let Some(rule) = state.rules().drops.get_mut(index)
                    {
                        rule.remaining += 1;
                    }
                    let reason = format!("the proxy could not reach {}: {e}", state.upstream);
                    let _ = client.write_all(simple_answer(502, &reason).as_bytes()).await;
                    return;
                }
            };
            state.rules().forwarded.push((request.method.clone(), request.target.clone()));
            if drop_answer.is_some() {
                // Dropping the connection closes it: the client gets no byte of the answer.
                return;
            }
            let Some((answer, close)) = pass_on(&answer, &request) else {
                let reason = format!("the upstream {} sent an answer without a head", state.upstream);
                let _ = client.write_all(simple_answer(502, &reason).as_bytes()).await;
                return;
            };
            if client.write_all(&answer).await.is_err() || close {
                return;
            }
        }
    }

    /// Reads one request (head and `Content-Length` body) from the client; bytes read past it
    /// stay in `buffer` for the next one.
    async fn read_request(client: &mut TcpStream, buffer: &mut Vec<u8>) -> Read {
        let head_end = loop {
            if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break end;
            }
            if buffer.len() > MAX_REQUEST {
                return Read::Refuse(431, "the request's head is too large for the proxy");
            }
            if !read_more(client, buffer).await {
                return Read::Closed;
            }
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let mut request_line = lines.next().unwrap_or_default().split(' ');
        let (Some(method), Some(target), Some(version)) =
            (request_line.next(), request_line.next(), request_line.next())
        else {
            return Read::Refuse(400, "the proxy cannot read the request line");
        };
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
            .collect();
        let mut request = Request {
            method: method.to_owned(),
            target: target.to_owned(),
            headers,
            body: Vec::new(),
            keep_alive: false,
        };
        let connection = request.header("connection").map(str::to_ascii_lowercase).unwrap_or_default();
        request.keep_alive = if version.eq_ignore_ascii_case("HTTP/1.1") {
            !connection.split(',').any(|token| token.trim() == "close")
        } else {
            connection.split(',').any(|token| token.trim() == "keep-alive")
        };
        if request.header("transfer-encoding").is_some_and(|te| !te.eq_ignore_ascii_case("identity")) {
            return Read::Refuse(501, "the proxy takes request bodies with Content-Length only");
        }
        let length = match request.header("content-length").map(str::parse::<usize>) {
            None => 0,
            Some(Ok(length)) if length <= MAX_REQUEST => length,
            Some(_) => return Read::Refuse(400, "the proxy cannot use the request's Content-Length"),
        };
        let body_start = head_end + 4;
        if length > 0
            && buffer.len() < body_start + length
            && request.header("expect").is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
            && client.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await.is_err()
        {
            return Read::Closed;
        }
        while buffer.len() < body_start + length {
            if !read_more(client, buffer).await {
                return Read::Closed;
            }
        }
        request.body = buffer[body_start..body_start + length].to_vec();
        buffer.drain(..body_start + length);
        Read::Request(request)
    }

    /// Reads what the client sent next into `buffer`; false when it closed the connection.
    async fn read_more(client: &mut TcpStream, buffer: &mut Vec<u8>) -> bool {
        let mut chunk = [0u8; 16 * 1024];
        match client.read(&mut chunk).await {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                buffer.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    /// Sends `request` upstream on a connection of its own and reads the answer to its end.
    async fn forward(upstream: &str, request: &Request) -> std::io::Result<Vec<u8>> {
        const HOP_BY_HOP: [&str; 9] = [
            "connection",
            "keep-alive",
            "proxy-connection",
            "host",
            "expect",
            "content-length",
            "transfer-encoding",
            "te",
            "upgrade",
        ];
        let mut head = format!("{} {} HTTP/1.1\r\nHost: {upstream}\r\n", request.method, request.target);
        for (name, value) in &request.headers {
            if !HOP_BY_HOP.iter().any(|hop| name.eq_ignore_ascii_case(hop)) {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
        }
        if !request.body.is_empty() || request.header("content-length").is_some() {
            head.push_str(&format!("Content-Length: {}\r\n", request.body.len()));
        }
        head.push_str("Connection: close\r\n\r\n");
        let mut stream = TcpStream::connect(upstream).await?;
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&request.body);
        stream.write_all(&bytes).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok(answer)
    }

    /// The upstream's `answer` as the client gets it, and whether the client's connection closes
    /// after it: `Connection` headers go, the body gets a `Content-Length` when the upstream
    /// delimited it by closing, and `Connection: close` is said when the client did not ask to
    /// keep the connection. None when the answer has no head.
    fn pass_on(answer: &[u8], request: &Request) -> Option<(Vec<u8>, bool)> {
        let head_end = answer.windows(4).position(|w| w == b"\r\n\r\n")?;
        let head = String::from_utf8_lossy(&answer[..head_end]);
        let body = &answer[head_end + 4..];
        let mut lines = head.split("\r\n");
        let status_line = lines.next()?;
        let status: u16 = status_line.split(' ').nth(1).and_then(|s| s.parse().ok())?;
        let mut out = format!("{status_line}\r\n");
        let mut delimited = false;
        for line in lines {
            let name = line.split_once(':').map(|(n, _)| n.trim()).unwrap_or(line);
            if ["connection", "keep-alive"].iter().any(|hop| name.eq_ignore_ascii_case(hop)) {
                continue;
            }
            delimited |= name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("transfer-encoding");
            out.push_str(line);
            out.push_str("\r\n");
        }
        let bodiless = request.method.eq_ignore_ascii_case("HEAD") || status < 200 || status == 204 || status == 304;
        if !delimited && !bodiless {
            out.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        let close = !request.keep_alive;
        if close {
            out.push_str("Connection: close\r\n");
        }
        out.push_str("\r\n");
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(body);
        Some((bytes, close))
    }

    /// A short plain-text answer of the proxy itself, closing the connection.
    fn simple_answer(status: u16, reason: &str) -> String {
        format!(
            "HTTP/1.1 {status} Proxy\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{reason}",
            reason.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_encoded() {
        assert_eq!(
            form_encode(&[("email", "a+b@example.com"), ("metadata[k]", "x y")]),
            "email=a%2Bb%40example.com&metadata%5Bk%5D=x+y"
        );
        assert_eq!(form_encode(&[]), "");
    }

    #[test]
    fn the_pinned_version_is_read_from_the_requirements() {
        assert_eq!(pinned_version(), "1.15.10");
    }
}

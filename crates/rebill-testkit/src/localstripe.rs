//! A fake Stripe for the end-to-end suites of the card gateway: [`LocalStripe`] runs
//! [localstripe](https://github.com/adrienverge/localstripe) (a Python program that serves
//! Stripe's API from memory, pinned in `python/localstripe-requirements.txt` and installed into a
//! cached virtualenv by [`crate::python_venv`]), and [`StripeProxy`] stands between the service
//! and it to add what Stripe does and localstripe does not (idempotency keys, the intents list
//! newest first with its `customer` and `created` filters), to lose answers (the request
//! reached Stripe and acted, the service never hears back), to hold requests or answers (so that
//! a `kill -9` lands in the middle of a batch) and to fail them.
//!
//! What localstripe does on its own: it ignores `Idempotency-Key` (every request acts); it lists
//! in the order it made the objects (oldest first), except refunds (newest first by the second
//! they were made, those of one second oldest first); `GET /v1/payment_intents` refuses
//! `customer` and `created` (400 `Unexpected customer`); `GET /v1/refunds?payment_intent=pi_…`
//! works for an intent that was charged, and answers a plain-text 500 for one that never was
//! (it reads the intent's `latest_charge`).
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

pub use crate::stripe_proxy::{DroppingProxy, StripeProxy};

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
    stripe_send(addr, method, path, form_body, &[]).map(|answer| (answer.status, answer.body))
}

/// An answer of a Stripe-like API, as [`stripe_send`] reads it.
#[derive(Clone, Debug)]
pub struct StripeAnswer {
    pub status: u16,
    /// Every header, in order, as sent.
    pub headers: Vec<(String, String)>,
    /// Everything after the head (the proxy and localstripe delimit it by `Content-Length` and
    /// close).
    pub body: String,
}

impl StripeAnswer {
    /// The value of the first header named `name` (compared without case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The body as JSON; panics when it is not.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }
}

/// [`stripe_request`] with `headers` added to the request (e.g. `Idempotency-Key`), answering
/// the headers too.
pub fn stripe_send(
    addr: &str,
    method: &str,
    path: &str,
    form_body: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<StripeAnswer> {
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {API_KEY}\r\nConnection: close\r\n");
    for (name, value) in headers {
        let _ = write!(request, "{name}: {value}\r\n");
    }
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
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| invalid("no status"))?;
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect();
    Ok(StripeAnswer { status, headers, body: String::from_utf8_lossy(&bytes[split + 4..]).into_owned() })
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

/// Appends `text` percent-encoded as a name or value of a form or a query (`+` for a space).
pub(crate) fn encode_into(out: &mut String, text: &str) {
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

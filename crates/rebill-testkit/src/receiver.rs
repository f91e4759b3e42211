//! A webhook receiver on 127.0.0.1 for the suites: it records every request (headers and body)
//! and answers a scripted status (then 200, or what [`Receiver::answer`] set), optionally after
//! holding the request.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A notification as the receiver got it.
#[derive(Debug, Clone)]
pub struct Received {
    /// When it arrived.
    pub at: Instant,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Received {
    /// The value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The root element of the body: the notification's kind.
    pub fn kind(&self) -> String {
        let root = self.body.lines().nth(1).unwrap_or_default();
        root.trim().trim_start_matches('<').trim_end_matches('>').to_owned()
    }
}

/// See the module documentation.
pub struct Receiver {
    /// `http://127.0.0.1:PORT/hooks`.
    pub url: String,
    got: Arc<Mutex<Vec<Received>>>,
    fallback: Arc<AtomicU16>,
}

impl Receiver {
    /// Answers `statuses` in turn (then 200, or what [`Receiver::answer`] set), each after holding
    /// the request `hold` long.
    pub fn start(statuses: Vec<u16>, hold: Option<Duration>) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the receiver");
        let url = format!("http://{}/hooks", listener.local_addr().expect("the receiver's address"));
        let got = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(statuses.into_iter()));
        let fallback = Arc::new(AtomicU16::new(200));
        let (sink, answer) = (got.clone(), fallback.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let (sink, script, answer) = (sink.clone(), script.clone(), answer.clone());
                std::thread::spawn(move || {
                    let Ok(clone) = stream.try_clone() else { return };
                    let mut reader = BufReader::new(clone);
                    let mut line = String::new();
                    if reader.read_line(&mut line).is_err() {
                        return;
                    }
                    let mut headers = Vec::new();
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                            break;
                        }
                        if let Some((n, v)) = h.trim().split_once(':') {
                            headers.push((n.trim().to_owned(), v.trim().to_owned()));
                        }
                    }
                    let length = headers
                        .iter()
                        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                        .and_then(|(_, v)| v.parse().ok())
                        .unwrap_or(0);
                    let mut body = vec![0u8; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    if let Ok(mut all) = sink.lock() {
                        all.push(Received { at: Instant::now(), headers, body: String::from_utf8_lossy(&body).into() });
                    }
                    if let Some(hold) = hold {
                        std::thread::sleep(hold);
                    }
                    let next = script.lock().ok().and_then(|mut s| s.next());
                    let status = next.unwrap_or_else(|| answer.load(Ordering::SeqCst));
                    let _ = write!(stream, "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                });
            }
        });
        Receiver { url, got, fallback }
    }

    /// Answers `status` from now on, once the scripted statuses are used up.
    pub fn answer(&self, status: u16) {
        self.fallback.store(status, Ordering::SeqCst);
    }

    /// Everything received so far.
    pub fn got(&self) -> Vec<Received> {
        self.got.lock().map(|g| g.clone()).unwrap_or_default()
    }

    /// How many requests arrived so far.
    pub fn count(&self) -> usize {
        self.got.lock().map(|g| g.len()).unwrap_or_default()
    }

    /// Waits until `n` requests arrived (60 s at most).
    #[track_caller]
    pub fn wait_for(&self, n: usize) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let got = self.got();
            if got.len() >= n {
                return got;
            }
            assert!(Instant::now() < deadline, "{} of {n} notifications arrived: {got:#?}", got.len());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

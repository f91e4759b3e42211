//! A small SMTP server for tests: a stand-in for the external mail server that speaks just
//! enough SMTP for lettre (greeting, EHLO/HELO, MAIL, RCPT, DATA, RSET, NOOP, QUIT) and keeps
//! what it receives. It can refuse every recipient with a 550.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// One message as the sink received it.
#[derive(Debug, Clone)]
pub struct Received {
    pub mail_from: String,
    pub rcpt_to: Vec<String>,
    /// The message as sent after DATA (dot-unstuffed, CRLF line ends).
    pub data: String,
}

impl Received {
    /// The value of the first header named `name` (unfolded).
    pub fn header(&self, name: &str) -> Option<String> {
        let head = self.data.split("\r\n\r\n").next().unwrap_or_default();
        let mut value: Option<String> = None;
        for line in head.split("\r\n") {
            if let Some(v) = value.as_mut() {
                if line.starts_with([' ', '\t']) {
                    v.push_str(line);
                    continue;
                }
                break;
            }
            match line.split_once(':') {
                Some((n, v)) if n.eq_ignore_ascii_case(name) => value = Some(v.trim().to_owned()),
                _ => {}
            }
        }
        value
    }

    /// The body, decoded from quoted-printable when the message says so.
    pub fn body(&self) -> String {
        let raw = self.data.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
        let encoding = self.header("Content-Transfer-Encoding").unwrap_or_default();
        let text = if encoding.eq_ignore_ascii_case("quoted-printable") {
            let bytes = quoted_printable::decode(raw, quoted_printable::ParseMode::Robust).expect("quoted-printable");
            String::from_utf8(bytes).expect("UTF-8 body")
        } else {
            raw.to_owned()
        };
        text.trim_end_matches("\r\n").to_owned()
    }
}

#[derive(Default)]
struct State {
    received: Mutex<Vec<Received>>,
    refuse_recipients: AtomicBool,
    connections: AtomicUsize,
}

/// A running sink; it stops when dropped.
pub struct Sink {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Sink {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the SMTP sink");
        let addr = listener.local_addr().expect("sink address");
        let state = Arc::new(State::default());
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                shared.connections.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(session(stream, shared.clone()));
            }
        });
        Self { addr, state, task }
    }

    /// `smtp://127.0.0.1:PORT` (no TLS).
    pub fn url(&self) -> String {
        format!("smtp://{}", self.addr)
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().expect("sink state").clone()
    }

    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// Answers 550 to every RCPT TO from now on (`false`: accepts again).
    pub fn refuse_recipients(&self, refuse: bool) {
        self.state.refuse_recipients.store(refuse, Ordering::SeqCst);
    }
}

/// A URL on which nothing listens.
pub async fn closed_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    drop(listener);
    format!("smtp://{addr}")
}

async fn session(stream: TcpStream, state: Arc<State>) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read);
    let mut reply = async |text: &str| write.write_all(text.as_bytes()).await.is_ok();
    if !reply("220 sink ESMTP ready\r\n").await {
        return;
    }
    let mut mail_from = String::new();
    let mut rcpt_to = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        match lines.read_line(&mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let command = line.trim_end().to_owned();
        let upper = command.to_ascii_uppercase();
        let answer = if upper.starts_with("EHLO") || upper.starts_with("HELO") {
            "250 sink\r\n"
        } else if let Some(from) = upper.starts_with("MAIL FROM:").then(|| command[10..].trim().to_owned()) {
            mail_from = from;
            rcpt_to.clear();
            "250 2.1.0 ok\r\n"
        } else if upper.starts_with("RCPT TO:") {
            if state.refuse_recipients.load(Ordering::SeqCst) {
                "550 5.1.1 mailbox unavailable\r\n"
            } else {
                rcpt_to.push(command[8..].trim().to_owned());
                "250 2.1.5 ok\r\n"
            }
        } else if upper == "DATA" {
            if !reply("354 end with <CRLF>.<CRLF>\r\n").await {
                return;
            }
            let mut data = String::new();
            loop {
                line.clear();
                match lines.read_line(&mut line).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                if line == ".\r\n" {
                    break;
                }
                data.push_str(line.strip_prefix('.').unwrap_or(&line));
            }
            let message = Received { mail_from: mail_from.clone(), rcpt_to: std::mem::take(&mut rcpt_to), data };
            state.received.lock().expect("sink state").push(message);
            "250 2.0.0 queued\r\n"
        } else if upper == "RSET" {
            rcpt_to.clear();
            "250 2.0.0 ok\r\n"
        } else if upper == "NOOP" {
            "250 2.0.0 ok\r\n"
        } else if upper == "QUIT" {
            let _ = reply("221 2.0.0 bye\r\n").await;
            return;
        } else {
            "500 5.5.2 unknown command\r\n"
        };
        if !reply(answer).await {
            return;
        }
    }
}

//! HTTP/1.1 as the proxy speaks it: requests read from a client, sent upstream on a connection
//! of their own, answers read to their end and written back with a `Content-Length`.

use std::fmt;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Requests larger than this (head and body) are refused.
const MAX_REQUEST: usize = 64 * 1024 * 1024;

/// Request headers that concern one connection only: not sent upstream.
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

/// One request as read from a client.
pub(super) struct Request {
    pub(super) method: String,
    /// Path and query, as sent.
    pub(super) target: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Vec<u8>,
    /// Whether the client keeps the connection after this request.
    pub(super) keep_alive: bool,
}

impl Request {
    /// The value of the first header named `name` (compared without case).
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The target's path (without the query).
    pub(super) fn path(&self) -> &str {
        self.target.split_once('?').map_or(self.target.as_str(), |(path, _)| path)
    }

    /// The target's query (after `?`), empty when there is none.
    pub(super) fn query(&self) -> &str {
        self.target.split_once('?').map_or("", |(_, query)| query)
    }
}

/// What [`read_request`] got from a client.
pub(super) enum Read {
    Request(Request),
    /// The client closed the connection (between requests or in the middle of one).
    Closed,
    /// The request cannot be forwarded: answer this status and reason, then close.
    Refuse(u16, &'static str),
}

/// An HTTP answer, its body decoded from however it was delimited on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    /// The reason phrase of the status line (may be empty).
    pub(crate) reason: String,
    /// Every header but those of the connection and the body's framing (`Connection`,
    /// `Keep-Alive`, `Content-Length`, `Transfer-Encoding`), in order.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

/// Why an upstream's answer cannot be read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BadAnswer {
    /// No `\r\n\r\n` ends a head.
    NoHead,
    /// The status line has no three-digit status.
    NoStatus,
    /// A chunked body whose chunk sizes cannot be read or that ends early.
    BadChunks,
}

impl fmt::Display for BadAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BadAnswer::NoHead => "an answer without a head",
            BadAnswer::NoStatus => "an answer without a status",
            BadAnswer::BadChunks => "an answer whose chunked body cannot be read",
        })
    }
}

impl std::error::Error for BadAnswer {}

impl Answer {
    /// An answer of the proxy itself: `status`, `Content-Type: application/json`, `body`.
    pub(crate) fn json(status: u16, body: &serde_json::Value) -> Answer {
        Answer {
            status,
            reason: reason_phrase(status).to_owned(),
            headers: vec![("Content-Type".to_owned(), "application/json".to_owned())],
            body: body.to_string().into_bytes(),
        }
    }

    /// A short plain-text answer of the proxy itself.
    pub(crate) fn text(status: u16, text: &str) -> Answer {
        Answer {
            status,
            reason: "Proxy".to_owned(),
            headers: vec![("Content-Type".to_owned(), "text/plain; charset=utf-8".to_owned())],
            body: text.as_bytes().to_vec(),
        }
    }

    /// Reads a whole answer as an upstream sent it on a connection it then closed: the body is
    /// delimited by `Content-Length` (a shorter body is taken as it is), by chunks, or by the
    /// end of the bytes.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Answer, BadAnswer> {
        let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n").ok_or(BadAnswer::NoHead)?;
        let head = String::from_utf8_lossy(&bytes[..head_end]);
        let rest = &bytes[head_end + 4..];
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let mut parts = status_line.splitn(3, ' ');
        let _version = parts.next();
        let status =
            parts.next().filter(|s| s.len() == 3).and_then(|s| s.parse::<u16>().ok()).ok_or(BadAnswer::NoStatus)?;
        let reason = parts.next().unwrap_or_default().to_owned();
        let mut headers = Vec::new();
        let mut length = None;
        let mut chunked = false;
        for line in lines {
            let Some((name, value)) = line.split_once(':') else { continue };
            let (name, value) = (name.trim(), value.trim());
            if name.eq_ignore_ascii_case("content-length") {
                length = value.parse::<usize>().ok();
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.to_ascii_lowercase().split(',').any(|coding| coding.trim() == "chunked");
            } else if !name.eq_ignore_ascii_case("connection") && !name.eq_ignore_ascii_case("keep-alive") {
                headers.push((name.to_owned(), value.to_owned()));
            }
        }
        let body = if chunked {
            unchunk(rest).ok_or(BadAnswer::BadChunks)?
        } else if let Some(length) = length {
            rest[..length.min(rest.len())].to_vec()
        } else {
            rest.to_vec()
        };
        Ok(Answer { status, reason, headers, body })
    }

    /// The value of the first header named `name` (compared without case).
    #[cfg(test)]
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The answer as a client gets it for a request with `method`, and whether the client's
    /// connection closes after it: the body with a `Content-Length` (none for `HEAD`, 1xx, 204
    /// and 304 answers), and `Connection: close` when the client did not keep the connection.
    pub(super) fn to_wire(&self, method: &str, keep_alive: bool) -> (Vec<u8>, bool) {
        let mut out = format!("HTTP/1.1 {} {}\r\n", self.status, self.reason);
        for (name, value) in &self.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        let bodiless =
            method.eq_ignore_ascii_case("HEAD") || self.status < 200 || self.status == 204 || self.status == 304;
        if !bodiless {
            out.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        }
        let close = !keep_alive;
        if close {
            out.push_str("Connection: close\r\n");
        }
        out.push_str("\r\n");
        let mut bytes = out.into_bytes();
        if !bodiless {
            bytes.extend_from_slice(&self.body);
        }
        (bytes, close)
    }
}

/// The body of a `Transfer-Encoding: chunked` answer (trailers are dropped); None when the
/// chunks cannot be read or the last chunk is missing.
fn unchunk(mut bytes: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = bytes.windows(2).position(|w| w == b"\r\n")?;
        let line = std::str::from_utf8(&bytes[..line_end]).ok()?;
        let size = usize::from_str_radix(line.split(';').next()?.trim(), 16).ok()?;
        bytes = &bytes[line_end + 2..];
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(bytes.get(..size)?);
        bytes = bytes.get(size..)?.strip_prefix(b"\r\n")?;
    }
}

/// The usual reason phrase of the statuses the proxy answers by itself.
fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        409 => "Conflict",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        _ => "Proxy",
    }
}

/// Reads one request (head and `Content-Length` body) from the client; bytes read past it stay
/// in `buffer` for the next one.
pub(super) async fn read_request(client: &mut TcpStream, buffer: &mut Vec<u8>) -> Read {
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
    let (Some(method), Some(target), Some(version)) = (request_line.next(), request_line.next(), request_line.next())
    else {
        return Read::Refuse(400, "the proxy cannot read the request line");
    };
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect();
    let mut request =
        Request { method: method.to_owned(), target: target.to_owned(), headers, body: Vec::new(), keep_alive: false };
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

/// Sends `request` upstream with `target` instead of its own, on a connection of its own
/// (`Connection: close`, `Host` set to the upstream, every other header but the hop-by-hop ones
/// as the client sent it, the body with `Content-Length`), and reads the answer to its end.
pub(super) async fn forward(upstream: &str, request: &Request, target: &str) -> std::io::Result<Vec<u8>> {
    let mut head = format!("{} {target} HTTP/1.1\r\nHost: {upstream}\r\n", request.method);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_delimited_by_its_length_is_read_and_written_again() {
        let answer = Answer::parse(
            b"HTTP/1.1 402 Payment Required\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\
              Connection: close\r\nX-Other: a:b\r\n\r\n{}trailing",
        )
        .expect("an answer");
        assert_eq!(answer.status, 402);
        assert_eq!(answer.reason, "Payment Required");
        assert_eq!(answer.body, b"{}");
        assert_eq!(answer.header("content-type"), Some("application/json"));
        assert_eq!(answer.header("x-other"), Some("a:b"));
        assert_eq!(answer.header("connection"), None, "the connection's headers are not kept");
        let (bytes, close) = answer.to_wire("POST", true);
        assert!(!close);
        assert_eq!(
            String::from_utf8_lossy(&bytes),
            "HTTP/1.1 402 Payment Required\r\nContent-Type: application/json\r\nX-Other: a:b\r\n\
             Content-Length: 2\r\n\r\n{}"
        );
        let (bytes, close) = answer.to_wire("POST", false);
        assert!(close);
        assert!(String::from_utf8_lossy(&bytes).contains("\r\nConnection: close\r\n\r\n{}"));
    }

    #[test]
    fn chunked_and_close_delimited_bodies_are_read() {
        let chunked = Answer::parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nabcd\r\n2\r\nef\r\n0\r\nT: 1\r\n\r\n",
        )
        .expect("an answer");
        assert_eq!(chunked.body, b"abcdef");
        assert_eq!(chunked.header("transfer-encoding"), None);
        assert_eq!(
            Answer::parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nab"),
            Err(BadAnswer::BadChunks)
        );
        let closed = Answer::parse(b"HTTP/1.0 200 OK\r\n\r\nuntil the end").expect("an answer");
        assert_eq!(closed.body, b"until the end");
        assert_eq!(Answer::parse(b"HTTP/1.1 200 OK\r\n"), Err(BadAnswer::NoHead));
        assert_eq!(Answer::parse(b"HTTP/1.1 OK\r\n\r\n"), Err(BadAnswer::NoStatus));
    }

    #[test]
    fn bodiless_answers_get_no_length() {
        let answer = Answer { status: 204, reason: "No Content".to_owned(), headers: Vec::new(), body: Vec::new() };
        let (bytes, _) = answer.to_wire("DELETE", true);
        assert_eq!(String::from_utf8_lossy(&bytes), "HTTP/1.1 204 No Content\r\n\r\n");
        let answer = Answer::text(200, "abc");
        let (bytes, _) = answer.to_wire("HEAD", true);
        assert!(String::from_utf8_lossy(&bytes).ends_with("charset=utf-8\r\n\r\n"));
    }
}

//! HTTP for the benchmarks: one raw HTTP/1.1 request over a fresh connection, keep-alive
//! `reqwest` clients, and card tokens from the client-side library's endpoint.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{Context, ensure};
use base64::Engine;

/// The credentials of HTTP Basic with `key` as the user and no password (without `Basic `).
pub fn basic(key: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{key}:"))
}

/// One request at API 2.11 over a fresh connection; returns status and body.
pub fn call(addr: &str, key: &str, method: &str, path: &str, body: &str) -> anyhow::Result<(u16, String)> {
    let auth = basic(key);
    let mut stream = TcpStream::connect(addr)?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: Basic {auth}\r\n\
         Accept: application/xml\r\nX-Api-Version: 2.11\r\nContent-Type: application/xml; charset=utf-8\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    let (head, body) = reply.split_once("\r\n\r\n").context("an HTTP reply")?;
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).context("a status")?;
    Ok((status, body.to_owned()))
}

/// An HTTP client holding one keep-alive connection (its requests follow each other), sending
/// `headers` with every request.
pub fn http_client(headers: &[(&'static str, String)]) -> anyhow::Result<reqwest::Client> {
    let mut map = reqwest::header::HeaderMap::new();
    for (name, value) in headers {
        map.insert(*name, value.parse()?);
    }
    Ok(reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(1)
        .timeout(Duration::from_secs(120))
        .default_headers(map)
        .build()?)
}

/// The headers of an API request at 2.11 with a private key (for [`http_client`]).
pub fn api_headers(key: &str) -> [(&'static str, String); 4] {
    [
        ("authorization", format!("Basic {}", basic(key))),
        ("accept", "application/xml".to_owned()),
        ("x-api-version", "2.11".to_owned()),
        ("content-type", "application/xml; charset=utf-8".to_owned()),
    ]
}

/// The form of a sandbox card that approves, as the client-side library posts it to
/// `/js/v1/token` (with the site's public key as `key`).
pub const CARD_FORM: [(&str, &str); 11] = [
    ("number", "4111111111111111"),
    ("month", "12"),
    ("year", "2031"),
    ("cvv", "123"),
    ("first_name", "Verena"),
    ("last_name", "Example"),
    ("address1", "123 Main St."),
    ("city", "San Francisco"),
    ("state", "CA"),
    ("postal_code", "94105"),
    ("country", "US"),
];

/// Sends `POST /js/v1/token` for the card of [`CARD_FORM`] to `url`; answers the status and the
/// reply's body.
pub async fn post_card_token(client: &reqwest::Client, url: &str, public_key: &str) -> reqwest::Result<(u16, String)> {
    let mut form = vec![("key", public_key)];
    form.extend(CARD_FORM);
    let reply = client.post(url).form(&form).send().await?;
    let status = reply.status().as_u16();
    Ok((status, reply.text().await?))
}

/// The token id of a `/js/v1/token` reply with status 200.
pub fn token_id(status: u16, text: &str) -> anyhow::Result<String> {
    ensure!(status == 200, "POST /js/v1/token answered {status}:\n{text}");
    let value: serde_json::Value = serde_json::from_str(text).context("the token reply")?;
    Ok(value["id"].as_str().with_context(|| format!("a token id in {text}"))?.to_owned())
}

//! What the examples share (each uses all of it): a client from `REBILL_BASE_URL` and
//! `REBILL_API_KEY`, and amounts as text.

use rebill_client::{ApiVersion, Client};

/// The client of the examples, at API 2.11.
pub fn client() -> Result<Client, Box<dyn std::error::Error>> {
    let base_url = std::env::var("REBILL_BASE_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".to_owned());
    let api_key = std::env::var("REBILL_API_KEY").map_err(|_| "set REBILL_API_KEY to a private key of the site")?;
    Ok(Client::builder().base_url(base_url).api_key(api_key).api_version(ApiVersion::V2_11).build()?)
}

/// Cents as `12.34 USD`.
pub fn money(cents: i64, currency: &str) -> String {
    format!("{}{}.{:02} {currency}", if cents < 0 { "-" } else { "" }, cents.abs() / 100, cents.abs() % 100)
}

//! Streams every invoice of the site, 200 a page (the stream follows `Link: rel="next"`), and
//! prints the totals per state and currency; the count comes from a HEAD request first.
//!
//! ```sh
//! REBILL_BASE_URL=http://127.0.0.1:8080 REBILL_API_KEY=… cargo run -p rebill-client --example page_invoices
//! ```

mod common;

use std::collections::BTreeMap;

use futures_util::TryStreamExt;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = common::client()?;
    let expected = client.invoices().list().count().await?;
    println!("{expected} invoices");
    let mut totals: BTreeMap<(String, String), (u64, i64)> = BTreeMap::new();
    let mut seen = 0u64;
    let mut invoices = Box::pin(client.invoices().list().per_page(200).stream());
    while let Some(invoice) = invoices.try_next().await? {
        seen += 1;
        let state = invoice.state.map(|s| format!("{s:?}")).unwrap_or_default();
        let currency = invoice.currency.unwrap_or_default();
        let entry = totals.entry((state, currency)).or_default();
        entry.0 += 1;
        entry.1 += invoice.total_in_cents.unwrap_or_default();
    }
    for ((state, currency), (count, cents)) in &totals {
        println!("{state:>10} {count:>6} invoices {:>16}", common::money(*cents, currency));
    }
    println!("{seen} invoices read");
    Ok(())
}

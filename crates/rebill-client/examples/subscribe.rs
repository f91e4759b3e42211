//! Subscribes a new customer: creates the plan `example-monthly` if it is missing, tokenizes a
//! test card at `/js/v1/token` (as the checkout page's library would, with the site's public
//! key), creates an account with the token and a subscription, and prints the invoice.
//!
//! ```sh
//! REBILL_BASE_URL=http://127.0.0.1:8080 REBILL_API_KEY=… REBILL_PUBLIC_KEY=… \
//!     cargo run -p rebill-client --example subscribe [ACCOUNT_CODE]
//! ```

mod common;
mod signup;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = common::client()?;
    let code = std::env::args().nth(1).unwrap_or_else(|| signup::fresh_code("customer"));
    signup::subscribe(&client, &code).await?;
    for invoice in client.accounts().list_invoices(&code).page().await?.items {
        println!(
            "invoice {}: {:?}, {}",
            invoice.invoice_number.unwrap_or_default(),
            invoice.state,
            common::money(invoice.total_in_cents.unwrap_or_default(), invoice.currency.as_deref().unwrap_or("USD"))
        );
    }
    Ok(())
}

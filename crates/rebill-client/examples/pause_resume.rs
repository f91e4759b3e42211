//! Pauses a subscription and resumes it (API 2.11), on a subscription of its own: subscribes a
//! new customer as the `subscribe` example does (plan `example-monthly`, card token, account,
//! subscription), schedules a pause of CYCLES billing cycles (default 1) from the next renewal,
//! then resumes, which drops the pause while it is only scheduled (a paused subscription would
//! resume now, with a new billed period).
//!
//! ```sh
//! REBILL_BASE_URL=http://127.0.0.1:8080 REBILL_API_KEY=… REBILL_PUBLIC_KEY=… \
//!     cargo run -p rebill-client --example pause_resume [CYCLES]
//! ```

mod common;
mod signup;

use rebill_client::models::Subscription;

fn show(step: &str, s: &Subscription) {
    let price = common::money(s.unit_amount_in_cents.unwrap_or_default(), s.currency.as_deref().unwrap_or("USD"));
    println!(
        "{step}: state {:?} at {price} a cycle, paused at {}, remaining pause cycles {}, period ends {}",
        s.state,
        s.paused_at.map(|t| t.to_rfc3339()).unwrap_or_else(|| "-".into()),
        s.remaining_pause_cycles.map(|c| c.to_string()).unwrap_or_else(|| "-".into()),
        s.current_period_ends_at.map(|t| t.to_rfc3339()).unwrap_or_else(|| "-".into()),
    );
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = common::client()?;
    let cycles: i64 = std::env::args().nth(1).map(|c| c.parse()).transpose()?.unwrap_or(1);
    let subscription = signup::subscribe(&client, &signup::fresh_code("pauser")).await?;
    let uuid = subscription.uuid.ok_or("the new subscription has no uuid")?;

    let paused = client.subscriptions().pause_cycles(&uuid, cycles).await?;
    show(&format!("pause of {cycles} cycle(s) scheduled from the next renewal"), &paused);
    let resumed = client.subscriptions().resume(&uuid).await?;
    show("resumed (the scheduled pause dropped)", &resumed);
    Ok(())
}

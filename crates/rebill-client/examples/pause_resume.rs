//! Pauses a subscription or resumes it (API 2.11): a paused subscription is resumed now; any
//! other has a pause of CYCLES billing cycles (default 1) scheduled from its next renewal.
//!
//! ```sh
//! REBILL_BASE_URL=http://127.0.0.1:8080 REBILL_API_KEY=… \
//!     cargo run -p rebill-client --example pause_resume SUBSCRIPTION_UUID [CYCLES]
//! ```

mod common;

use rebill_client::models::SubscriptionState;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = common::client()?;
    let mut args = std::env::args().skip(1);
    let uuid = args.next().ok_or("usage: pause_resume SUBSCRIPTION_UUID [CYCLES]")?;
    let cycles: i64 = args.next().map(|c| c.parse()).transpose()?.unwrap_or(1);
    let subscription = client.subscriptions().get(&uuid).await?;
    let after = if subscription.state == Some(SubscriptionState::Paused) {
        println!("{uuid} is paused: resuming it now");
        client.subscriptions().resume(&uuid).await?
    } else {
        println!("{uuid} is {:?}: pausing it for {cycles} cycle(s) from its next renewal", subscription.state);
        client.subscriptions().pause_cycles(&uuid, cycles).await?
    };
    let price =
        common::money(after.unit_amount_in_cents.unwrap_or_default(), after.currency.as_deref().unwrap_or("USD"));
    println!(
        "state {:?} at {price} a cycle, paused at {}, remaining pause cycles {}, period ends {}",
        after.state,
        after.paused_at.map(|t| t.to_rfc3339()).unwrap_or_else(|| "-".into()),
        after.remaining_pause_cycles.map(|c| c.to_string()).unwrap_or_else(|| "-".into()),
        after.current_period_ends_at.map(|t| t.to_rfc3339()).unwrap_or_else(|| "-".into()),
    );
    Ok(())
}

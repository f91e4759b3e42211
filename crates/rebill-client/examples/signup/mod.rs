//! What the examples that sign a customer up share (each uses all of it): the plan
//! `example-monthly`, created when missing; a test card tokenized at `/js/v1/token` with the
//! site's public key (`REBILL_PUBLIC_KEY`), as the checkout page's library would; an account
//! with that token and a subscription to the plan.

use rebill_client::models::{Account, BillingInfo, Plan, Subscription};
use rebill_client::{Client, Error, Money};

/// The plan the examples subscribe to.
pub const PLAN: &str = "example-monthly";

/// A new account `code` paying by card, subscribed to [`PLAN`] (created at 19.99 USD a month
/// when it is missing); answers the subscription.
pub async fn subscribe(client: &Client, code: &str) -> Result<Subscription, Box<dyn std::error::Error>> {
    let public_key =
        std::env::var("REBILL_PUBLIC_KEY").map_err(|_| "set REBILL_PUBLIC_KEY to the site's public key")?;
    match client.plans().get(PLAN).await {
        Ok(plan) => println!("plan {PLAN}: {}", plan.name.unwrap_or_default()),
        Err(Error::NotFound { .. }) => {
            let plan = Plan {
                plan_code: Some(PLAN.into()),
                name: Some("Example monthly".into()),
                unit_amount_in_cents: Some(Money::single("USD", 1999)),
                ..Plan::default()
            };
            client.plans().create(&plan).await?;
            println!("plan {PLAN}: created at 19.99 USD a month");
        }
        Err(e) => return Err(e.into()),
    }

    // The card goes to rebill's token endpoint, never to the merchant's server.
    let base_url = std::env::var("REBILL_BASE_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".to_owned());
    let form = format!(
        "key={public_key}&number=4111111111111111&month=12&year=2031&cvv=123&first_name=Ada&last_name=Lovelace\
         &address1=1+Main+St&city=London&postal_code=N1&country=GB"
    );
    let answer = reqwest::Client::new()
        .post(format!("{}/js/v1/token", base_url.trim_end_matches('/')))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await?
        .text()
        .await?;
    let token: serde_json::Value = serde_json::from_str(&answer)?;
    let token = token["id"].as_str().ok_or_else(|| format!("no token: {answer}"))?.to_owned();

    let account = Account {
        account_code: Some(code.to_owned()),
        email: Some(format!("{code}@example.com")),
        first_name: Some("Ada".into()),
        last_name: Some("Lovelace".into()),
        billing_info: Some(Box::new(BillingInfo { token_id: Some(token), ..BillingInfo::default() })),
        ..Account::default()
    };
    client.accounts().create(&account).await?;
    let subscription = Subscription {
        plan_code: Some(PLAN.into()),
        currency: Some("USD".into()),
        account: Some(Box::new(Account { account_code: Some(code.to_owned()), ..Account::default() })),
        ..Subscription::default()
    };
    let subscription = client.subscriptions().create(&subscription).await?;
    println!(
        "subscription {} for {code}: {:?}, renews {}",
        subscription.uuid.as_deref().unwrap_or_default(),
        subscription.state,
        subscription.current_period_ends_at.map(|t| t.to_rfc3339()).unwrap_or_default()
    );
    Ok(subscription)
}

/// An account code of the moment, `{prefix}-{epoch microseconds}`, so runs one after the other
/// make accounts of their own.
pub fn fresh_code(prefix: &str) -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    format!("{prefix}-{}", now.as_micros())
}

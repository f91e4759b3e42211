//! Webhook endpoints of a site (`rebill webhooks add/list/remove`): where its push
//! notifications go. An endpoint is an http or https URL (checked when it is added), optional
//! HTTP Basic credentials, the notification kinds it takes (all when none are named; names from
//! [`rebill_webhooks::kinds`]) and its Standard Webhooks signing secret, made here from 32
//! random bytes, shown once when the endpoint is added and stored sealed with the vault key
//! (context [`secret_context`]), like the HTTP password.

use std::collections::HashMap;
use std::sync::Arc;

use rebill_store::webhooks::{
    AfterAttempt, Attempt, Delivery, DeliveryState, Endpoint, EndpointError, NewDelivery, NewEndpoint, Redelivery,
};
use rebill_store::{Site, StoreError};
use rebill_webhooks::kinds::kind;
use rebill_webhooks::schedule;
use rebill_webhooks::signing::{SECRET_BYTES, Secret};

use crate::Services;

/// The vault context of a site's endpoint secrets and passwords.
pub fn secret_context(site_id: i64) -> Vec<u8> {
    format!("webhook-endpoint:{site_id}").into_bytes()
}

/// Why an endpoint was refused.
#[derive(Debug, thiserror::Error)]
pub enum WebhookEndpointError {
    #[error("the URL must be an http:// or https:// URL with a host, without credentials or a fragment: {0}")]
    InvalidUrl(String),
    #[error("unknown notification kind `{0}`")]
    UnknownKind(String),
    #[error("an HTTP password needs an HTTP user")]
    PasswordWithoutUser,
    #[error("the site already has {} webhook endpoints", rebill_store::webhooks::MAX_ENDPOINTS)]
    Limit,
    #[error("no webhook endpoint {0}")]
    NotFound(i64),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<EndpointError> for WebhookEndpointError {
    fn from(e: EndpointError) -> Self {
        match e {
            EndpointError::Limit => WebhookEndpointError::Limit,
            EndpointError::Store(e) => WebhookEndpointError::Store(e),
        }
    }
}

/// An endpoint to add, as an operator gives it.
#[derive(Debug, Clone, Default)]
pub struct EndpointRequest<'a> {
    pub url: &'a str,
    pub http_user: Option<&'a str>,
    pub http_password: Option<&'a str>,
    /// Kind names, with or without their `_notification` suffix; empty: every kind.
    pub kinds: &'a [String],
}

/// The URL of an endpoint, normalised, or why it is refused.
fn checked_url(text: &str) -> Result<String, WebhookEndpointError> {
    let invalid = || WebhookEndpointError::InvalidUrl(text.trim().to_owned());
    let url = url::Url::parse(text.trim()).map_err(|_| invalid())?;
    let fine = matches!(url.scheme(), "http" | "https")
        && url.host_str().is_some_and(|h| !h.is_empty())
        && url.username().is_empty()
        && url.password().is_none()
        && url.fragment().is_none();
    if !fine {
        return Err(invalid());
    }
    Ok(url.to_string())
}

/// Adds an endpoint to the site; answers it with its signing secret (`whsec_…`), which is never
/// shown again.
pub async fn add_endpoint(
    services: &Services,
    site: &Site,
    request: &EndpointRequest<'_>,
    now: i64,
) -> Result<(Endpoint, String), WebhookEndpointError> {
    let url = checked_url(request.url)?;
    let kinds = request
        .kinds
        .iter()
        .filter(|k| !k.trim().is_empty())
        .map(|k| kind(k).map(str::to_owned).ok_or_else(|| WebhookEndpointError::UnknownKind(k.trim().to_owned())))
        .collect::<Result<Vec<_>, _>>()?;
    let user = request.http_user.map(str::trim).filter(|u| !u.is_empty());
    let password = request.http_password.map(|p| p.trim_end_matches(['\n', '\r'])).filter(|p| !p.is_empty());
    if password.is_some() && user.is_none() {
        return Err(WebhookEndpointError::PasswordWithoutUser);
    }
    let mut bytes = [0u8; SECRET_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| StoreError::Invalid(format!("no random source for a secret: {e}")))?;
    let secret = Secret::from_bytes(&bytes).reveal();
    let context = secret_context(site.id);
    let secret_sealed = services.vault.seal_text(&secret, &context);
    let password_sealed = password.map(|p| services.vault.seal_text(p, &context));
    let new = NewEndpoint {
        url: &url,
        http_user: user,
        http_password_sealed: password_sealed.as_deref(),
        kinds: (!kinds.is_empty()).then_some(kinds.as_slice()),
        secret_sealed: &secret_sealed,
    };
    let endpoint = services.store.add_webhook_endpoint(site.id, &new, now).await?;
    Ok((endpoint, secret))
}

/// The live endpoints of the site (of every site with `None`), oldest first.
pub async fn endpoints(services: &Services, site: Option<&Site>) -> Result<Vec<Endpoint>, StoreError> {
    services.store.webhook_endpoints(site.map(|s| s.id)).await
}

/// Removes the endpoint `id` (notifications stop going to it); answers it.
pub async fn remove_endpoint(services: &Services, id: i64, now: i64) -> Result<Endpoint, WebhookEndpointError> {
    services.store.remove_webhook_endpoint(id, now).await?.ok_or(WebhookEndpointError::NotFound(id))
}

// ---------------------------------------------------------------------------------------------
// Deliveries seen and redelivered by the operator (`rebill webhooks deliveries/redeliver`)

/// The site's deliveries (of one of its endpoints, live or removed, and in one state when
/// given), oldest first, each with its attempts.
pub async fn deliveries(
    services: &Services,
    site: &Site,
    endpoint_id: Option<i64>,
    state: Option<DeliveryState>,
) -> Result<Vec<(Delivery, Vec<Attempt>)>, WebhookEndpointError> {
    if let Some(id) = endpoint_id {
        match services.store.webhook_endpoint(id).await? {
            Some(endpoint) if endpoint.site_id == site.id => {}
            _ => return Err(WebhookEndpointError::NotFound(id)),
        }
    }
    Ok(services.store.webhook_deliveries(site.id, endpoint_id, state).await?)
}

/// Why a delivery was not redelivered.
#[derive(Debug, thiserror::Error)]
pub enum RedeliverError {
    #[error("no webhook delivery {0}")]
    NotFound(i64),
    #[error("webhook delivery {id} is {}: only a failed delivery is redelivered", state.as_str())]
    NotFailed { id: i64, state: DeliveryState },
    #[error("webhook delivery {0} is not redelivered: its endpoint was removed")]
    EndpointRemoved(i64),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Puts the failed delivery `id` back to `retrying`, due at `now_ms` (real time, see
/// [`real_now_ms`]): it keeps its `webhook-id`, its attempts and their count, so it gets one
/// more attempt and is failed again if that fails (the schedule has no retry left after the
/// tenth); answers it.
pub async fn redeliver(services: &Services, id: i64, now_ms: i64) -> Result<Delivery, RedeliverError> {
    match services.store.redeliver_webhook_delivery(id, now_ms).await? {
        Redelivery::Redelivered(delivery) => Ok(delivery),
        Redelivery::NotFailed(state) => Err(RedeliverError::NotFailed { id, state }),
        Redelivery::EndpointRemoved => Err(RedeliverError::EndpointRemoved(id)),
        Redelivery::NotFound => Err(RedeliverError::NotFound(id)),
    }
}

/// [`redeliver`] for every failed delivery of the site (of every site with `None`) whose
/// endpoint is live; answers their ids.
pub async fn redeliver_failed(services: &Services, site: Option<&Site>, now_ms: i64) -> Result<Vec<i64>, StoreError> {
    services.store.redeliver_failed_webhook_deliveries(site.map(|s| s.id), now_ms).await
}

// ---------------------------------------------------------------------------------------------
// Notifications and their delivery

/// How long a process holds the deliveries it claimed (milliseconds): twice as long as an
/// attempt may take ([`rebill_webhooks::schedule::TIMEOUT`]), so a claim never ends while its
/// attempt runs; a process that dies holds its endpoint's next delivery this long at most.
pub const CLAIM_MS: i64 = 10_000;
/// Events turned into notifications per step.
pub const DERIVE_BATCH: i64 = 500;

/// While a scheduler run is under way, each of the worker's two loops rests this many times
/// as long as its last step took (at least its interval): busy a tenth of the time at most.
const PACED_REST: u32 = 9;

/// Real time in milliseconds: webhooks run on it, never on a sandbox site's clock.
pub fn real_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// A notification's `webhook-id`: `msg_` and 32 random hexadecimal digits.
fn message_id() -> Result<String, StoreError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| StoreError::Invalid(format!("no random source for an id: {e}")))?;
    Ok(format!("msg_{}", hex::encode(bytes)))
}

/// Turns the next events into their notifications, one delivery per endpoint that takes the
/// kind, and marks the events notified (see [`rebill_store::webhooks`]); answers how many events
/// were marked.
pub async fn derive(services: &Services, limit: i64) -> Result<usize, StoreError> {
    let events = services.store.unnotified_events(limit).await?;
    if events.is_empty() {
        return Ok(0);
    }
    // Each site's endpoints and settings, read once for the batch.
    let mut endpoints: HashMap<i64, Vec<Endpoint>> = HashMap::new();
    let mut sites: HashMap<i64, Site> = HashMap::new();
    for event in &events {
        if let std::collections::hash_map::Entry::Vacant(new) = endpoints.entry(event.site_id) {
            let site_endpoints = services.store.webhook_endpoints(Some(event.site_id)).await?;
            if !site_endpoints.is_empty() {
                sites.insert(event.site_id, services.store.site(&event.site_id.to_string()).await?);
            }
            new.insert(site_endpoints);
        }
    }
    let reads = crate::operations::notifications::Resources::read(services, &sites, &events).await?;
    let mut deliveries = Vec::new();
    for event in &events {
        let (Some(site), Some(endpoints)) = (sites.get(&event.site_id), endpoints.get(&event.site_id)) else {
            continue;
        };
        for (kind, body) in crate::operations::notifications::of(services, &reads, site, event).await? {
            for endpoint in endpoints.iter().filter(|e| e.takes(kind)) {
                deliveries.push(NewDelivery {
                    site_id: event.site_id,
                    endpoint_id: endpoint.id,
                    event_id: event.id,
                    kind: kind.to_owned(),
                    message_id: message_id()?,
                    body: body.clone(),
                });
            }
        }
    }
    let ids: Vec<i64> = events.iter().map(|e| e.id).collect();
    services.store.record_notifications(&ids, &deliveries, real_now_ms()).await
}

/// A POST of a notification.
#[derive(Debug, Clone)]
pub struct Post {
    pub url: String,
    /// HTTP Basic user and password.
    pub basic: Option<(String, String)>,
    /// Headers beside `Content-Type` (the Standard Webhooks headers).
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
    pub timeout: std::time::Duration,
}

/// What a POST got: the status code, or why there was none (never holding a secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Posted {
    Status(u16),
    Failed(String),
}

/// Sends notifications (the binary provides an HTTP client that follows no redirect).
pub trait Poster: Send + Sync {
    fn post(&self, post: Post) -> std::pin::Pin<Box<dyn std::future::Future<Output = Posted> + Send + '_>>;
}

/// Deliveries of one endpoint claimed at a time: sent one after the other, in order, over the
/// poster's kept-alive connection.
pub const SEND_BATCH: usize = 500;

/// Attempts of a run recorded together, in one transaction, while the next ones are sent. A
/// crash loses the record of at most [`UNRECORDED_AT_MOST`] attempts per endpoint (they are
/// sent again once their claim ends).
pub const RECORD_EVERY: usize = 25;

/// Attempts of one endpoint sent but not recorded at any moment, at most: a group being
/// recorded and the next being sent.
pub const UNRECORDED_AT_MOST: usize = 2 * RECORD_EVERY;

/// Sends every delivery due now, each endpoint's in order (a run of them at a time) and
/// endpoints at once (a slow or failing endpoint holds up no other); records each attempt and
/// what follows it (delivered, a retry on the schedule scaled by `retry_scale`, or failed).
/// Answers how many were attempted.
pub async fn deliver_due(services: &Services, poster: Arc<dyn Poster>, retry_scale: f64) -> Result<usize, StoreError> {
    let now = real_now_ms();
    let claimed_until = now + CLAIM_MS;
    let runs = services.store.claim_due_deliveries(now, claimed_until, SEND_BATCH).await?;
    let mut running = tokio::task::JoinSet::new();
    for run in runs {
        let (services, poster) = (services.clone(), poster.clone());
        running.spawn(async move { send_run(&services, poster.as_ref(), &run, retry_scale, claimed_until).await });
    }
    let mut attempted = 0;
    while let Some(done) = running.join_next().await {
        match done {
            Ok(Ok(n)) => attempted += n,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "webhook attempts could not be recorded; they are claimed again later")
            }
            Err(e) => tracing::warn!(error = %e, "a webhook run stopped"),
        }
    }
    Ok(attempted)
}

/// Sends a claimed run of one endpoint's deliveries in order until one fails (the rest wait
/// for its retry: order is kept) or too little of the claim is left for another attempt to end
/// within it (the rest are let go and claimed again). The attempts are recorded
/// [`RECORD_EVERY`] at a time, each group while the next is being sent. Answers how many were
/// attempted.
async fn send_run(
    services: &Services,
    poster: &dyn Poster,
    run: &[Delivery],
    retry_scale: f64,
    claimed_until: i64,
) -> Result<usize, StoreError> {
    let Some(first) = run.first() else { return Ok(0) };
    let Some(endpoint) = services.store.webhook_endpoint(first.new.endpoint_id).await? else {
        let ids: Vec<i64> = run.iter().map(|d| d.id).collect();
        services.store.record_attempts(&[], &ids).await?;
        return Ok(0);
    };
    let context = secret_context(endpoint.site_id);
    let secret = services.vault.open_text(&endpoint.secret_sealed, &context).ok().and_then(|s| Secret::parse(&s).ok());
    let basic = match (&endpoint.http_user, &endpoint.http_password_sealed) {
        (Some(user), Some(sealed)) => services.vault.open_text(sealed, &context).ok().map(|p| (user.clone(), p)),
        (Some(user), None) => Some((user.clone(), String::new())),
        _ => None,
    };
    // An attempt starts only when it ends, timeout and all, a second before the claim does.
    let last_start = claimed_until - i64::try_from(schedule::TIMEOUT.as_millis()).unwrap_or(i64::MAX) - 1_000;
    let sender = Sender { poster, endpoint: &endpoint, secret: secret.as_ref(), basic, retry_scale, last_start };
    let mut unrecorded: Vec<(i64, Attempt, AfterAttempt)> = Vec::new();
    let mut sent = 0;
    loop {
        let group = &run[sent..(sent + RECORD_EVERY).min(run.len())];
        let recording = async {
            if unrecorded.is_empty() { Ok(()) } else { services.store.record_attempts(&unrecorded, &[]).await }
        };
        let ((attempted, go_on), recorded) = tokio::join!(sender.send(group), recording);
        recorded?;
        sent += attempted.len();
        unrecorded = attempted;
        if !go_on || sent == run.len() {
            let rest: Vec<i64> = run[sent..].iter().map(|d| d.id).collect();
            services.store.record_attempts(&unrecorded, &rest).await?;
            return Ok(sent);
        }
    }
}

/// What sends the deliveries of one endpoint's claimed run.
struct Sender<'a> {
    poster: &'a dyn Poster,
    endpoint: &'a Endpoint,
    secret: Option<&'a Secret>,
    basic: Option<(String, String)>,
    retry_scale: f64,
    /// The last time (ms) an attempt may start.
    last_start: i64,
}

impl Sender<'_> {
    /// Sends `group` in order until one is not delivered or the claim is too near its end;
    /// answers the attempts made and whether the run goes on.
    async fn send(&self, group: &[Delivery]) -> (Vec<(i64, Attempt, AfterAttempt)>, bool) {
        let mut attempted = Vec::with_capacity(group.len());
        for delivery in group {
            if real_now_ms() > self.last_start {
                return (attempted, false);
            }
            let (record, after) =
                attempt(self.poster, self.endpoint, self.secret, self.basic.clone(), delivery, self.retry_scale).await;
            let delivered = matches!(after, AfterAttempt::Delivered);
            attempted.push((delivery.id, record, after));
            if !delivered {
                return (attempted, false);
            }
        }
        (attempted, true)
    }
}

/// One attempt of a claimed delivery: the attempt to record and what it leaves.
async fn attempt(
    poster: &dyn Poster,
    endpoint: &Endpoint,
    secret: Option<&Secret>,
    basic: Option<(String, String)>,
    delivery: &Delivery,
    retry_scale: f64,
) -> (Attempt, AfterAttempt) {
    let started = real_now_ms();
    let timestamp = started / 1000;
    let posted = match secret {
        Some(secret) => {
            let signature = secret.sign(&delivery.new.message_id, timestamp, delivery.new.body.as_bytes());
            let post = Post {
                url: endpoint.url.clone(),
                basic,
                headers: vec![
                    ("webhook-id", delivery.new.message_id.clone()),
                    ("webhook-timestamp", timestamp.to_string()),
                    ("webhook-signature", signature),
                ],
                body: delivery.new.body.clone(),
                timeout: schedule::TIMEOUT,
            };
            poster.post(post).await
        }
        None => Posted::Failed("the endpoint's secret cannot be opened with this vault key".to_owned()),
    };
    let finished = real_now_ms();
    let (status_code, error, ok) = match &posted {
        Posted::Status(code) => (Some(i64::from(*code)), None, (200..300).contains(code)),
        Posted::Failed(e) => (None, Some(e.clone()), false),
    };
    let after = if ok {
        AfterAttempt::Delivered
    } else {
        let retry = u32::try_from(delivery.attempts).unwrap_or(u32::MAX);
        match schedule::scaled(retry, retry_scale) {
            Some(delay) => AfterAttempt::Retry(finished + i64::try_from(delay.as_millis()).unwrap_or(i64::MAX)),
            None => AfterAttempt::Failed,
        }
    };
    let outcome = match after {
        AfterAttempt::Delivered => "delivered",
        AfterAttempt::Retry(_) => "retrying",
        AfterAttempt::Failed => "failed",
    };
    metrics::counter!(crate::platform::metrics::WEBHOOK_DELIVERIES, "outcome" => outcome).increment(1);
    let seconds = (finished - started).max(0) as f64 / 1000.0;
    metrics::histogram!(crate::platform::metrics::WEBHOOK_DURATION, "outcome" => outcome).record(seconds);
    (Attempt { at: started, status_code, error, duration_ms: finished - started }, after)
}

/// Derives and delivers until the process ends, in two loops side by side: the next events
/// become notifications, and the due deliveries are sent. Each loop goes on at once while its
/// last step found something to do and otherwise waits `interval`. While a scheduler run is
/// under way in this process ([`crate::operations::scheduler::Runs`]: renewals, money), each
/// rests after every step [`PACED_REST`] times as long as the step took, so each loop is busy
/// at most a tenth of the time and billing keeps the cores and the database; the notifications
/// catch up at full speed once the run ends.
pub async fn run(services: Services, poster: Arc<dyn Poster>, retry_scale: f64, interval: std::time::Duration) {
    let deriving = paced(&services, interval, || async {
        match derive(&services, DERIVE_BATCH).await {
            Ok(n) => n as i64 >= DERIVE_BATCH,
            Err(e) => {
                tracing::warn!(error = %e, "turning events into webhook notifications failed; trying again");
                false
            }
        }
    });
    let delivering = paced(&services, interval, || async {
        match deliver_due(&services, poster.clone(), retry_scale).await {
            // Something was sent: the endpoints' next deliveries may be due at once.
            Ok(sent) => sent > 0,
            Err(e) => {
                tracing::warn!(error = %e, "sending webhook notifications failed; trying again");
                false
            }
        }
    });
    tokio::join!(deriving, delivering);
}

/// Runs `step` until the process ends: again at once when it answers that there is more to do
/// (after a rest while a scheduler run is under way), else after `interval`.
async fn paced<F, Fut>(services: &Services, interval: std::time::Duration, step: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    loop {
        let started = std::time::Instant::now();
        let more = step().await;
        if !more {
            tokio::time::sleep(interval).await;
        } else if services.runs.under_way() {
            tokio::time::sleep(interval.max(started.elapsed() * PACED_REST)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use rebill_store::testing::both_backends;
    use rebill_store::{Mode, NewSite, Plan};

    use super::*;
    use crate::SystemClock;

    fn acme_site() -> NewSite {
        NewSite { name: "acme".into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos: false, contact: None }
    }

    /// Services over `store` and its new sandbox site `acme`.
    async fn acme(store: &rebill_store::Store) -> (Services, Site) {
        let (site, _) = store.create_site(&acme_site(), 100).await.expect("site");
        (Services::new(store.clone(), Arc::new(SystemClock)), site)
    }

    #[test]
    fn urls_are_checked() {
        for good in ["https://example.com/hooks", "http://127.0.0.1:8080/h?x=1", "HTTPS://Example.com"] {
            assert!(checked_url(good).is_ok(), "{good}");
        }
        for bad in
            ["", "example.com/h", "ftp://example.com", "https://user:pw@example.com/", "https://e.com/#x", "http://"]
        {
            assert!(matches!(checked_url(bad), Err(WebhookEndpointError::InvalidUrl(_))), "{bad}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn endpoints_keep_their_secrets_sealed() {
        for store in both_backends("app_webhooks").await {
            let (services, site) = acme(&store).await;
            let kinds = vec!["new_account".to_owned(), "paid_charge_invoice_notification".to_owned()];
            let request = EndpointRequest {
                url: " https://example.com/hooks ",
                http_user: Some("hooks"),
                http_password: Some("pa55word\n"),
                kinds: &kinds,
            };
            let (endpoint, secret) = add_endpoint(&services, &site, &request, 200).await.expect("add");
            assert!(secret.starts_with("whsec_"), "{secret}");
            assert!(Secret::parse(&secret).is_ok());
            assert_eq!(endpoint.url, "https://example.com/hooks");
            assert_eq!(
                endpoint.kinds,
                Some(vec!["new_account_notification".to_owned(), "paid_charge_invoice_notification".to_owned()])
            );
            let context = secret_context(site.id);
            assert!(!endpoint.secret_sealed.contains(&secret[6..]));
            assert_eq!(services.vault.open_text(&endpoint.secret_sealed, &context).expect("open"), secret);
            let password = endpoint.http_password_sealed.as_deref().expect("a password");
            assert!(!password.contains("pa55word"));
            assert_eq!(services.vault.open_text(password, &context).expect("open"), "pa55word");

            let refused = |kinds: &'static [&'static str], url: &'static str, user: Option<&'static str>| {
                let kinds: Vec<String> = kinds.iter().map(|k| (*k).to_owned()).collect();
                let services = services.clone();
                let site = site.clone();
                async move {
                    let request = EndpointRequest { url, http_user: user, http_password: Some("p"), kinds: &kinds };
                    add_endpoint(&services, &site, &request, 300).await.expect_err("refused")
                }
            };
            assert!(
                matches!(refused(&["nope"], "https://e.com", Some("u")).await, WebhookEndpointError::UnknownKind(k) if k == "nope")
            );
            assert!(matches!(refused(&[], "mailto:x@e.com", Some("u")).await, WebhookEndpointError::InvalidUrl(_)));
            assert!(matches!(refused(&[], "https://e.com", None).await, WebhookEndpointError::PasswordWithoutUser));
            assert_eq!(endpoints(&services, Some(&site)).await.expect("list").len(), 1, "refusals store nothing");

            remove_endpoint(&services, endpoint.id, 400).await.expect("remove");
            assert!(matches!(
                remove_endpoint(&services, endpoint.id, 400).await,
                Err(WebhookEndpointError::NotFound(_))
            ));
            assert!(endpoints(&services, None).await.expect("list").is_empty());
        }
    }

    /// Answers every POST with the status it holds.
    struct Answering(std::sync::atomic::AtomicU16);

    impl Poster for Answering {
        fn post(&self, _: Post) -> std::pin::Pin<Box<dyn std::future::Future<Output = Posted> + Send + '_>> {
            let status = self.0.load(std::sync::atomic::Ordering::SeqCst);
            Box::pin(async move { Posted::Status(status) })
        }
    }

    /// While a scheduler run is under way the worker rests between its steps, but it goes on:
    /// notifications made during a long run of renewals still go out.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn notifications_go_out_while_a_scheduler_run_is_under_way() {
        for store in both_backends("app_paced").await {
            let (services, site) = acme(&store).await;
            let request = EndpointRequest { url: "http://127.0.0.1:9/h", ..EndpointRequest::default() };
            add_endpoint(&services, &site, &request, 100).await.expect("endpoint");
            let run_under_way = services.runs.start();
            let poster = Arc::new(Recording::default());
            let worker = tokio::spawn(run(services.clone(), poster.clone(), 1.0, std::time::Duration::from_millis(20)));
            let ctx = crate::Context { site: site.clone(), now: 100 };
            for code in ["c1", "c2", "c3"] {
                let fields = rebill_store::accounts::AccountFields::default();
                crate::customers::accounts::create(&services, &ctx, code, &fields, None).await.expect("account");
            }
            let delivered = || async {
                deliveries(&services, &site, None, Some(DeliveryState::Delivered)).await.expect("list").len()
            };
            let waited = tokio::time::timeout(std::time::Duration::from_secs(30), async {
                while delivered().await < 3 {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            })
            .await;
            assert!(services.runs.under_way());
            assert!(waited.is_ok(), "{} of 3 notifications delivered while a run was under way", delivered().await);
            assert_eq!(poster.sent.lock().expect("sent").len(), 3, "each sent once");
            drop(run_under_way);
            worker.abort();
        }
    }

    /// Keeps each POST's `webhook-id` in order; answers 500 to the POST numbered `fails` (from
    /// 1), if any, and 200 to every other.
    #[derive(Default)]
    struct Recording {
        fails: Option<usize>,
        sent: std::sync::Mutex<Vec<String>>,
    }

    impl Poster for Recording {
        fn post(&self, post: Post) -> std::pin::Pin<Box<dyn std::future::Future<Output = Posted> + Send + '_>> {
            let mut sent = self.sent.lock().expect("sent");
            let id = post.headers.iter().find(|(name, _)| *name == "webhook-id").map(|(_, v)| v.clone());
            sent.push(id.unwrap_or_default());
            let status = if Some(sent.len()) == self.fails { 500 } else { 200 };
            Box::pin(async move { Posted::Status(status) })
        }
    }

    /// A run longer than the groups its attempts are recorded in (each recorded while the next
    /// is sent) stops at its first failure with every attempt recorded and the rest let go: the
    /// next step sends the failed one again, then the rest, in order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_run_stops_at_its_first_failure_with_every_attempt_recorded() {
        const ACCOUNTS: usize = 3 * RECORD_EVERY;
        const FAILS: usize = RECORD_EVERY + 12;
        for store in both_backends("app_run_groups").await {
            let (services, site) = acme(&store).await;
            let request = EndpointRequest { url: "http://127.0.0.1:9/h", ..EndpointRequest::default() };
            add_endpoint(&services, &site, &request, 100).await.expect("endpoint");
            let ctx = crate::Context { site: site.clone(), now: 100 };
            for n in 0..ACCOUNTS {
                let fields = rebill_store::accounts::AccountFields::default();
                crate::customers::accounts::create(&services, &ctx, &format!("c{n}"), &fields, None)
                    .await
                    .expect("account");
            }
            derive(&services, DERIVE_BATCH).await.expect("derive");
            let poster = Arc::new(Recording { fails: Some(FAILS), ..Recording::default() });
            // Retries due at once: the failed one is due again at the next step.
            assert_eq!(deliver_due(&services, poster.clone(), 0.0).await.expect("deliver"), FAILS);
            let listed = deliveries(&services, &site, None, None).await.expect("deliveries");
            assert_eq!(listed.len(), ACCOUNTS);
            for (n, (delivery, attempts)) in listed.iter().enumerate() {
                let codes: Vec<Option<i64>> = attempts.iter().map(|a| a.status_code).collect();
                let (state, expected) = match n + 1 {
                    k if k < FAILS => (DeliveryState::Delivered, vec![Some(200)]),
                    k if k == FAILS => (DeliveryState::Retrying, vec![Some(500)]),
                    _ => (DeliveryState::Pending, vec![]),
                };
                assert_eq!((delivery.state, codes), (state, expected), "delivery {}", n + 1);
            }
            // Nothing is left claimed: the next step takes the failed one and the rest at once.
            assert_eq!(deliver_due(&services, poster.clone(), 0.0).await.expect("deliver"), ACCOUNTS - FAILS + 1);
            let listed = deliveries(&services, &site, None, None).await.expect("deliveries");
            assert!(listed.iter().all(|(d, _)| d.state == DeliveryState::Delivered), "{listed:?}");
            let mut expected: Vec<String> = listed.iter().map(|(d, _)| d.new.message_id.clone()).collect();
            expected.insert(FAILS, expected[FAILS - 1].clone());
            assert_eq!(*poster.sent.lock().expect("sent"), expected, "in order, the failed one twice");
        }
    }

    /// The state and attempts of the endpoint's one delivery.
    async fn state_of(services: &Services, site: &Site, endpoint: i64) -> (DeliveryState, Vec<Attempt>) {
        let listed = deliveries(services, site, Some(endpoint), None).await.expect("deliveries");
        let (delivery, attempts) = listed.into_iter().next().expect("the delivery");
        assert_eq!(usize::try_from(delivery.attempts).ok(), Some(attempts.len()));
        (delivery.state, attempts)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_redelivered_notification_gets_one_more_attempt() {
        for store in both_backends("app_redeliver").await {
            let (services, site) = acme(&store).await;
            let (other, _) =
                store.create_site(&NewSite { name: "globex".into(), ..acme_site() }, 100).await.expect("site");
            let request = EndpointRequest { url: "http://127.0.0.1:9/h", ..EndpointRequest::default() };
            let (endpoint, _) = add_endpoint(&services, &site, &request, 100).await.expect("endpoint");
            let (elsewhere, _) = add_endpoint(&services, &other, &request, 100).await.expect("endpoint");
            let ctx = crate::Context { site: site.clone(), now: 100 };
            crate::customers::accounts::create(
                &services,
                &ctx,
                "c1",
                &rebill_store::accounts::AccountFields::default(),
                None,
            )
            .await
            .expect("account");
            derive(&services, DERIVE_BATCH).await.expect("derive");
            let listed = deliveries(&services, &site, None, None).await.expect("deliveries");
            assert_eq!(listed.len(), 1, "{listed:?}");
            let id = listed[0].0.id;
            // Unscaled to nothing, eleven failed attempts make it failed.
            let poster = Arc::new(Answering(std::sync::atomic::AtomicU16::new(500)));
            for _ in 0..20 {
                deliver_due(&services, poster.clone(), 0.0).await.expect("deliver");
            }
            let (now, attempts) = state_of(&services, &site, endpoint.id).await;
            assert_eq!((now, attempts.len()), (DeliveryState::Failed, 11));

            // Redelivered: one more attempt, then failed again.
            let again = redeliver(&services, id, real_now_ms()).await.expect("redeliver");
            assert_eq!((again.state, again.attempts), (DeliveryState::Retrying, 11));
            assert!(matches!(
                redeliver(&services, id, real_now_ms()).await,
                Err(RedeliverError::NotFailed { state: DeliveryState::Retrying, .. })
            ));
            assert_eq!(deliver_due(&services, poster.clone(), 0.0).await.expect("deliver"), 1);
            assert_eq!(deliver_due(&services, poster.clone(), 0.0).await.expect("deliver"), 0, "no retry left");
            let (now, attempts) = state_of(&services, &site, endpoint.id).await;
            assert_eq!((now, attempts.len()), (DeliveryState::Failed, 12));

            // Every failed delivery of the site, redelivered to a receiver that is back.
            poster.0.store(200, std::sync::atomic::Ordering::SeqCst);
            assert_eq!(
                redeliver_failed(&services, Some(&other), real_now_ms()).await.expect("globex"),
                Vec::<i64>::new()
            );
            assert_eq!(redeliver_failed(&services, Some(&site), real_now_ms()).await.expect("acme"), [id]);
            deliver_due(&services, poster.clone(), 0.0).await.expect("deliver");
            let (now, attempts) = state_of(&services, &site, endpoint.id).await;
            assert_eq!((now, attempts.len()), (DeliveryState::Delivered, 13));
            assert_eq!(attempts.iter().map(|a| a.status_code).next_back(), Some(Some(200)));

            assert!(matches!(
                redeliver(&services, id, real_now_ms()).await,
                Err(RedeliverError::NotFailed { state: DeliveryState::Delivered, .. })
            ));
            assert!(matches!(redeliver(&services, id + 1_000, real_now_ms()).await, Err(RedeliverError::NotFound(_))));
            assert!(matches!(
                deliveries(&services, &site, Some(elsewhere.id), None).await,
                Err(WebhookEndpointError::NotFound(n)) if n == elsewhere.id
            ));
            let delivered = deliveries(&services, &site, None, Some(DeliveryState::Delivered)).await.expect("list");
            assert_eq!(delivered.len(), 1);
            assert!(deliveries(&services, &site, None, Some(DeliveryState::Failed)).await.expect("list").is_empty());
        }
    }
}

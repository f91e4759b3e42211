//! rebill alert e-mails: drains the store's alert outbox to an SMTP server.
//!
//! The store queues alerts (private-key changes, rate limit reached) in its outbox; [`run`]
//! (started by `rebill serve` through [`spawn`]) looks at the outbox every few seconds. With an
//! SMTP configuration ([`MailConfig`]) a [`Mailer`] claims the due alerts, sends each one with
//! lettre and marks it sent, or records the failure so that it is tried again later with backoff
//! (see [`rebill_store::outbox`]); several service processes may share one database, a claimed
//! alert is sent by one of them only. Without an SMTP configuration the alerts stay in the outbox
//! and each one is logged once when it is queued.
//!
//! Logs carry an alert's id, recipient, kind and subject, never its body.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lettre::message::header::ContentType;
use lettre::message::{Mailbox, Message};
use lettre::transport::smtp::AsyncSmtpTransportBuilder;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use rebill_store::outbox::ClaimedAlert;
use rebill_store::{Alert, Store, StoreError};

/// From address used when none is configured.
pub const DEFAULT_FROM: &str = "rebill <alerts@rebill.localhost>";

/// How often [`spawn`] looks at the outbox.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);

/// Longest time one message may take, connection included.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// Alerts claimed at a time.
const BATCH: i64 = 10;

/// Batches sent in one look at the outbox, at most.
const MAX_BATCHES: usize = 10;

/// Lease of a claimed batch: long enough to send every message of the batch, each within
/// [`SEND_TIMEOUT`], with a margin. A message is not started when the rest of the lease could
/// not cover it, so a lease never runs out while its alert is being sent.
const LEASE: Duration = Duration::from_secs(BATCH.unsigned_abs() * SEND_TIMEOUT.as_secs() + 60);

/// Margin kept between the end of a send and the end of its lease.
const LEASE_MARGIN: Duration = Duration::from_secs(30);

/// Alerts logged at a time.
const ANNOUNCE_BATCH: i64 = 100;

/// Current time as UTC epoch seconds (injectable for tests).
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system clock.
pub fn system_clock() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// A failure of the mailer.
#[derive(Debug, thiserror::Error)]
pub enum MailError {
    #[error("SMTP URL `{url}`: {source}")]
    SmtpUrl { url: String, source: lettre::transport::smtp::Error },
    #[error("From address `{address}`: {source}")]
    From { address: String, source: lettre::address::AddressError },
    #[error("recipient `{address}`: {source}")]
    Recipient { address: String, source: lettre::address::AddressError },
    #[error("cannot build the message: {0}")]
    Message(#[from] lettre::error::Error),
    #[error("SMTP: {0}")]
    Smtp(#[from] lettre::transport::smtp::Error),
    #[error("SMTP server did not finish within {0:?}")]
    Timeout(Duration),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where and as whom alert e-mails are sent.
#[derive(Clone)]
pub struct MailConfig {
    transport: AsyncSmtpTransportBuilder,
    from: Mailbox,
    server: String,
}

impl MailConfig {
    /// Checks an SMTP URL as lettre's `AsyncSmtpTransport::from_url` reads it (`smtp://host:port`
    /// without TLS, `smtp://host?tls=required` for STARTTLS, `smtps://user:pass@host` for TLS;
    /// user and password percent-encoded) and a From address (`None`: [`DEFAULT_FROM`]).
    pub fn new(smtp_url: &str, from: Option<&str>) -> Result<Self, MailError> {
        let server = redact(smtp_url);
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(smtp_url)
            .map_err(|source| MailError::SmtpUrl { url: server.clone(), source })?
            .timeout(Some(SEND_TIMEOUT));
        let address = from.unwrap_or(DEFAULT_FROM);
        let from = address.parse().map_err(|source| MailError::From { address: address.to_owned(), source })?;
        Ok(Self { transport, from, server })
    }

    /// The From address.
    pub fn from(&self) -> &Mailbox {
        &self.from
    }

    /// The SMTP URL without its password, for logs.
    pub fn server(&self) -> &str {
        &self.server
    }
}

impl std::fmt::Debug for MailConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MailConfig").field("server", &self.server).field("from", &self.from.to_string()).finish()
    }
}

/// The URL with its user information (credentials) replaced by `***`.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://***{}", &rest[at..]),
        None => url.to_owned(),
    }
}

/// What one look at the outbox did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Drained {
    /// Alerts sent.
    pub sent: usize,
    /// Deliveries that failed (the alerts are tried again later).
    pub failed: usize,
}

/// Sends the outbox's alerts through SMTP.
pub struct Mailer {
    store: Store,
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    clock: Clock,
}

impl std::fmt::Debug for Mailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailer").field("from", &self.from.to_string()).finish_non_exhaustive()
    }
}

impl Mailer {
    pub fn new(store: Store, config: &MailConfig, clock: Clock) -> Self {
        Self { store, transport: config.transport.clone().build(), from: config.from.clone(), clock }
    }

    /// Sends every alert due now, a batch at a time; failures are recorded in the outbox and
    /// logged. An error is returned only when the outbox itself cannot be read or written.
    pub async fn deliver_due(&self) -> Result<Drained, MailError> {
        let mut drained = Drained::default();
        for _ in 0..MAX_BATCHES {
            let lease = i64::try_from(LEASE.as_secs()).unwrap_or(i64::MAX);
            let started = Instant::now();
            let claimed = self.store.claim_alerts((self.clock)(), lease, BATCH).await?;
            let full = claimed.len() == usize::try_from(BATCH).unwrap_or(usize::MAX);
            let mut pending = claimed.iter();
            for alert in pending.by_ref() {
                if started.elapsed() + SEND_TIMEOUT + LEASE_MARGIN > LEASE {
                    // Too close to the end of the lease: give this one back (and the rest below).
                    self.store.release_alert(alert).await?;
                    break;
                }
                match self.send(alert).await {
                    Ok(()) => {
                        self.store.mark_alert_sent(alert, (self.clock)()).await?;
                        drained.sent += 1;
                        tracing::info!(
                            alert = alert.alert.id,
                            recipient = %alert.recipient,
                            kind = %alert.alert.kind,
                            subject = %alert.alert.subject,
                            "alert e-mail sent"
                        );
                    }
                    Err(error) => {
                        let message = error.to_string();
                        let next = self.store.record_alert_failure(alert, &message, (self.clock)()).await?;
                        drained.failed += 1;
                        tracing::warn!(
                            alert = alert.alert.id,
                            recipient = %alert.recipient,
                            kind = %alert.alert.kind,
                            attempts = alert.attempts,
                            next_attempt_at = next,
                            error = %message,
                            "alert e-mail not sent; it stays in the outbox"
                        );
                    }
                }
            }
            for alert in pending {
                self.store.release_alert(alert).await?;
            }
            if !full {
                break;
            }
        }
        Ok(drained)
    }

    /// Sends one claimed alert.
    async fn send(&self, claimed: &ClaimedAlert) -> Result<(), MailError> {
        let message = self.message(claimed)?;
        tokio::time::timeout(SEND_TIMEOUT, self.transport.send(message))
            .await
            .map_err(|_| MailError::Timeout(SEND_TIMEOUT))??;
        Ok(())
    }

    /// The e-mail for an alert. Its Message-ID names the alert, so that a receiver can tell a
    /// repeated delivery (after a lost acknowledgement) from a new alert.
    fn message(&self, claimed: &ClaimedAlert) -> Result<Message, MailError> {
        let alert = &claimed.alert;
        let to: Mailbox = claimed
            .recipient
            .parse()
            .map_err(|source| MailError::Recipient { address: claimed.recipient.clone(), source })?;
        let id = format!("<alert.{}.{}.{}@{}>", alert.id, alert.site_id, alert.created_at, self.from.email.domain());
        Ok(Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(alert.subject.clone())
            .message_id(Some(id))
            .header(ContentType::TEXT_PLAIN)
            .body(alert.body.clone())?)
    }
}

/// Logs each alert queued since the last call once (every alert without SMTP; with SMTP only
/// those that have no recipient and so stay in the outbox). Returns how many were logged.
async fn announce(store: &Store, smtp: bool, now: i64) -> Result<usize, MailError> {
    let mut logged = 0;
    loop {
        let alerts = store.announce_alerts(now, ANNOUNCE_BATCH).await?;
        for alert in &alerts {
            logged += usize::from(log_queued(alert, smtp));
        }
        if alerts.len() < usize::try_from(ANNOUNCE_BATCH).unwrap_or(usize::MAX) {
            return Ok(logged);
        }
    }
}

fn log_queued(alert: &Alert, smtp: bool) -> bool {
    let recipient = alert.recipient.as_deref().filter(|r| !r.is_empty());
    match (smtp, recipient) {
        (true, Some(_)) => false,
        (true, None) => {
            tracing::info!(
                alert = alert.id,
                recipient = %"none",
                kind = %alert.kind,
                subject = %alert.subject,
                "alert queued without a recipient (the site has no technical contact); it stays in the outbox"
            );
            true
        }
        (false, recipient) => {
            tracing::info!(
                alert = alert.id,
                recipient = %recipient.unwrap_or("none"),
                kind = %alert.kind,
                subject = %alert.subject,
                "alert queued; no SMTP server is configured, so it stays in the outbox"
            );
            true
        }
    }
}

/// One look at the outbox: logs newly queued alerts and, with a mailer, sends the due ones.
pub async fn drain_once(store: &Store, mailer: Option<&Mailer>, now: i64) -> Result<Drained, MailError> {
    announce(store, mailer.is_some(), now).await?;
    match mailer {
        Some(mailer) => mailer.deliver_due().await,
        None => Ok(Drained::default()),
    }
}

/// Looks at the outbox every `interval` until the task is aborted; errors are logged and the
/// next look tries again.
pub async fn run<C>(store: Store, config: Option<MailConfig>, clock: C, interval: Duration)
where
    C: Fn() -> i64 + Send + Sync + 'static,
{
    let clock: Clock = Arc::new(clock);
    let mailer = config.as_ref().map(|config| Mailer::new(store.clone(), config, clock.clone()));
    match &config {
        Some(config) => {
            tracing::info!(server = config.server(), from = %config.from(), "alert e-mails go out through SMTP")
        }
        None => tracing::info!("no SMTP server configured: alerts stay in the outbox and are logged when queued"),
    }
    let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(10)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if let Err(error) = drain_once(&store, mailer.as_ref(), clock()).await {
            tracing::warn!(error = %error, "alert outbox");
        }
    }
}

/// Starts [`run`] on the current tokio runtime with the system clock, looking at the outbox
/// every [`DEFAULT_INTERVAL`]. Abort the handle to stop it.
pub fn spawn(store: Store, config: Option<MailConfig>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(run(store, config, system_clock, DEFAULT_INTERVAL))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_redacted_for_logs() {
        assert_eq!(redact("smtps://user:secret@mail.example:465"), "smtps://***@mail.example:465");
        assert_eq!(redact("smtp://mail.example:25/helo.example"), "smtp://mail.example:25/helo.example");
        assert_eq!(redact("smtp://a%40b:p@ss@host?tls=required"), "smtp://***@host?tls=required");
        assert_eq!(redact("nonsense"), "nonsense");
    }

    #[test]
    fn configurations_are_checked() {
        let config = MailConfig::new("smtp://127.0.0.1:2525", None).expect("plain SMTP");
        assert_eq!(config.from().to_string(), DEFAULT_FROM);
        assert!(MailConfig::new("smtps://user:secret@mail.example", Some("ops@example.com")).is_ok());
        assert!(MailConfig::new("smtp://mail.example?tls=required", None).is_ok());
        let err = MailConfig::new("imap://user:secret@mail.example", None).expect_err("not SMTP");
        assert!(err.to_string().starts_with("SMTP URL `imap://***@mail.example`"), "{err}");
        assert!(!format!("{err:?}").contains("secret"));
        assert!(matches!(MailConfig::new("smtp://localhost", Some("not an address")), Err(MailError::From { .. })));
        let config = MailConfig::new("smtps://user:secret@mail.example", None).expect("config");
        assert!(!format!("{config:?}").contains("secret"));
    }
}

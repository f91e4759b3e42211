//! rebill's business operations without HTTP or XML: every function takes [`Services`] (the
//! store, the payment gateway, the token vault and the service clock), plain domain values and
//! usually a [`Context`] (the site and "now" on its clock), and answers typed results and errors.
//! The HTTP handlers, the scheduler, the CLI and tests call them alike.
//!
//! | Module | Use cases |
//! |---|---|
//! | [`accounts`] | create (with billing info, all or nothing), update, close, reopen, balance |
//! | [`payment_methods`] | read, verify and save an account's billing info; a payment method for one charge |
//! | [`invoicing`] | invoicing and collection: invoices of engine lines, one-off lines and pending adjustments, charging the stored payment method, dunning retries, manual invoices falling due, mark paid or failed, collect now |
//! | [`subscriptions`] | the stored subscription documents, catching up, invoicing a subscription's charges, scheduled subscription jobs, the reaction to their invoices paid or failed later |
//! | [`renewals`] | plain renewals due together, in batches |
//! | [`scheduler`] | running due jobs; catching a site up with its clock |
//! | [`clock`] | moving a sandbox site's clock on |
//! | [`jobs`] | job outcomes and their recording |
//! | [`gateways`] | the payment gateway of each site: configured (Stripe), the sandbox's, or none in production |
//! | [`events`] | the domain events every change records, and delivering them to their subscribers |
//! | [`transactions`] | one-off charges of an account |
//! | [`offline_payments`] | payments made outside rebill entered on a manual invoice |
//! | [`catalog`] | plans and add-ons: create, update, delete, get, list |
//! | [`adjustments`] | an account's pending one-off charges and credits: create, delete, get, list |
//! | [`credit_invoices`] | voiding a credit invoice's balance; the original invoices of a credit invoice, the credit invoices of a charge invoice, the credit lines of an adjustment |
//! | [`queries`] | reading accounts (with their activity), invoices (with their lines, transactions and credit payments), subscriptions, transactions and credit payments, one or a page at a time |
//! | [`tokens`] | the client-side library's tokens: the site of a public key, a card or bank account sealed into a token, purging expired ones, the vault's key file |
//! | [`sites`] | authenticating a private key outside the API's layers (sandbox clock); the demo page's sandbox site and key |
//! | [`documents`] | an invoice's PDF |
//! | [`gift_cards`] | gift card products, purchases (and previews), delivery, redemption (also inside a subscription's creation), reads |
//! | [`purchases`] | a purchase: an account with subscriptions, one-off charges and a gift card on one invoice paid by one transaction (preview, authorize) |
//! | [`notifications`] | the push notifications of a domain event: kinds and bodies |
//! | [`webhooks`] | a site's webhook endpoints: add (URL checked, signing secret made and sealed), list, remove |
//! | [`instant`] | ISO 8601 dates and date-times as epoch seconds |
//! | [`error`] | [`AppError`](error::AppError), the umbrella every use case's error converts into |
//! | [`model`] | the domain values the use cases take and answer, for adapters |

pub mod accounts;
pub mod adjustments;
pub mod catalog;
pub mod clock;
pub mod context;
pub mod coupons;
pub mod credit_invoices;
pub mod cvv;
pub mod documents;
pub mod error;
pub mod events;
pub mod gateways;
pub mod gift_cards;
pub mod instant;
pub mod invoicing;
pub mod jobs;
pub mod model;
pub mod notifications;
pub mod offline_payments;
pub mod payment_methods;
pub mod purchases;
pub mod queries;
pub mod reactions;
pub mod refunds;
pub mod renewals;
pub mod scheduler;
pub mod settlement;
pub mod shipping_addresses;
pub mod sites;
pub mod subscription_documents;
pub mod subscriptions;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tokens;
pub mod transactions;
pub mod webhooks;
pub mod write_offs;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use rebill_billing::gateway::{Decline, Gateway, GatewayFuture, Outcome};
use rebill_billing::vault::Vault;
use rebill_store::Store;

pub use context::Context;

/// The source of "now" (UTC epoch seconds); tests inject their own.
pub trait Clock: Send + Sync {
    fn now(&self) -> i64;
}

/// The system clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default()
    }
}

/// A clock read from a file holding epoch seconds (`REBILL_CLOCK_FILE`), so that end-to-end
/// tests can move time for a running service. Falls back to the system clock when the file is
/// missing or unreadable.
pub struct FileClock(pub std::path::PathBuf);

impl Clock for FileClock {
    fn now(&self) -> i64 {
        std::fs::read_to_string(&self.0).ok().and_then(|t| t.trim().parse().ok()).unwrap_or_else(|| SystemClock.now())
    }
}

/// What the use cases work with.
#[derive(Clone)]
pub struct Services {
    pub store: Store,
    /// Each site's payment gateway ([`Services::gateway`]).
    pub gateways: Arc<gateways::Gateways>,
    /// The cipher of the payment data tokens hold.
    pub vault: Arc<Vault>,
    /// The service clock (a sandbox site's clock is this plus its offset).
    pub clock: Arc<dyn Clock>,
    /// How long a gateway call may take before it counts as a `gateway_timeout` decline.
    pub gateway_timeout: std::time::Duration,
}

/// How long a gateway call may take by default.
pub const GATEWAY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl Services {
    /// Services with the sandbox gateway and a vault over a random key that lives as long as the
    /// process (see [`Services::with_vault`]).
    pub fn new(store: Store, clock: Arc<dyn Clock>) -> Self {
        Self {
            store,
            gateways: Arc::new(gateways::Gateways::default()),
            vault: Arc::new(Vault::ephemeral()),
            clock,
            gateway_timeout: GATEWAY_TIMEOUT,
        }
    }

    /// Uses this gateway for every site, whatever is configured (tests).
    pub fn with_gateway(mut self, gateway: Arc<dyn Gateway>) -> Self {
        self.gateways = Arc::new(gateways::Gateways::fixed(gateway));
        self
    }

    /// Builds the real gateways configured for sites with `builder`.
    pub fn with_gateway_builder(mut self, builder: Arc<dyn gateways::GatewayBuilder>) -> Self {
        self.gateways = Arc::new(gateways::Gateways::with_builder(builder));
        self
    }

    /// Bounds every gateway call by `timeout`.
    pub fn with_gateway_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.gateway_timeout = timeout;
        self
    }

    /// Waits for a gateway call at most [`Services::gateway_timeout`]. A call that does not answer
    /// in time is a decline of the `communication` category (`gateway_timeout`), as the gateway
    /// contract treats every failure to reach the gateway: the transaction is recorded declined
    /// and, like any decline, never retried under its own idempotency key.
    pub async fn bounded(&self, call: GatewayFuture<'_>) -> Outcome {
        match tokio::time::timeout(self.gateway_timeout, call).await {
            Ok(outcome) => outcome,
            Err(_) => Outcome::Declined(timed_out()),
        }
    }

    /// Uses this vault (a persistent key, so tokens survive a restart).
    pub fn with_vault(mut self, vault: Vault) -> Self {
        self.vault = Arc::new(vault);
        self
    }
}

/// The decline of a gateway call that did not answer within [`Services::gateway_timeout`].
pub(crate) fn timed_out() -> Decline {
    Decline { code: "gateway_timeout", gateway_error_code: None, cvv_result: None, avs_result: None, reference: None }
}

/// An epoch-seconds time as a UTC date-time (`None` out of range).
pub fn time(secs: i64) -> Option<DateTime<Utc>> {
    DateTime::<Utc>::from_timestamp(secs, 0)
}

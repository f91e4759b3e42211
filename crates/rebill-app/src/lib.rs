//! rebill's business operations without HTTP or XML: every function takes [`Services`] (the
//! store, the payment gateway, the token vault and the service clock), plain domain values and
//! usually a [`Context`] (the site and "now" on its clock), and answers typed results and errors.
//! The HTTP handlers, the scheduler, the CLI and tests call them alike.
//!
//! The crate is cut by business capability. Each capability is a module whose own docs say what
//! it owns and what it must not touch; the directions between them run one way, top to bottom
//! (checked by `tests/modules.rs`):
//!
//! | Capability | What it holds |
//! |---|---|
//! | [`operations`] | the scheduler, sandbox clocks, push notifications and webhook endpoints, the test harness |
//! | [`selling`] | purchases and gift cards |
//! | [`collection`] | settling open invoices (dunning, mark paid or failed, collect now, offline payments) and the reactions that follow |
//! | [`money_back`] | refunds, credit paid back to cards, write-offs, credit invoices |
//! | [`subscriptions`] | the subscription lifecycle and batched renewals |
//! | [`billing`] | invoices and their first collection, adjustments, one-off transactions, reads, invoice PDFs |
//! | [`customers`] | accounts, payment methods (and the CVV check), shipping addresses |
//! | [`catalog`] | plans, add-ons, coupons and redemptions |
//! | [`platform`] | errors, the context, events, jobs, gateways and transaction records, subscription documents, sites, tokens |
//!
//! `customers` and `catalog` share a layer. Inside each capability its submodules are ranked the
//! same way (`APP_INSIDE` in `tests/modules.rs`). Why the cut falls where it does is explained in
//! `ARCHITECTURE.md`, "rebill-app by capability".
//!
//! The crate root holds [`Services`] and the clocks.
//!
//! # Services
//!
//! - The [`Store`]: every read and write goes through it.
//! - Each site's gateway, resolved per call by [`Services::gateway`]: the configured one (built by
//!   the [`GatewayBuilder`](platform::gateways::GatewayBuilder) the binary provides; this crate
//!   knows no gateway's wire), else the sandbox gateway on sandbox sites and a gateway declining
//!   `no_gateway` on production sites ([`platform::gateways`]). Every call is bounded by
//!   [`Services::gateway_timeout`]: one that does not answer in time is a `gateway_timeout`
//!   decline.
//! - The vault sealing what tokens hold, gateway keys and webhook secrets.
//! - The service [`Clock`] ([`SystemClock`]; [`FileClock`] reads "now" from a file, for
//!   end-to-end tests). A sandbox site's "now" is the service clock plus its offset; a scheduled
//!   job runs at its own due time.
//!
//! # Errors
//!
//! Each use case answers its own precise error type. Each converts (`From`) into
//! [`AppError`](platform::error::AppError), which classifies it for an adapter: not found (what,
//! by which key), refused (field errors), declined by the gateway (with the transaction),
//! conflict or busy, or internal (the source kept for the log). The server answers an `AppError`
//! by its kind where an endpoint has no more precise document.
//!
//! # Events and reactions
//!
//! Every business change records its domain events in the database transaction that makes it
//! ([`platform::events`]). What follows a change in another capability runs from those events,
//! not from a call up the directions: a paid or failed invoice reaches its subscriptions, and a
//! failed charge invoice its write-off, through [`collection::reactions`], which the use case
//! that recorded the event drains before it returns and the scheduler sweeps after a crash.
//! Notifications to webhook endpoints are made from the same rows ([`operations::webhooks`]).
//!
//! # Tests
//!
//! `tests/` runs the use cases in process on both backends with the harness of
//! `operations::testing` (feature `testing`: a clock the test moves, a gateway that declines,
//! cannot be reached or never answers on demand). Among them: `failure_injection.rs` (a decline,
//! an unreachable or silent gateway in the middle of a batch of renewals, and a run that dies
//! between recording its transactions and completing them: nothing is charged or invoiced twice),
//! `renewal_paths.rs` (every renewal branch one job at a time, in one batch and through the
//! general path leaves the same rows), `events.rs` (the event of every operation, and a reaction
//! interrupted after its event), `refund_recovery.rs` (refunds, voids and payouts whose run died
//! at the gateway, finished once by the recovery job) and `adapter_use_cases.rs` (the catalogue,
//! adjustments, reads, tokens and sites).

pub mod billing;
pub mod catalog;
pub mod collection;
pub mod customers;
pub mod money_back;
pub mod operations;
pub mod platform;
pub mod selling;
pub mod subscriptions;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use rebill_billing::gateway::{Decline, Gateway, GatewayFuture, Outcome, Pending};
use rebill_billing::vault::Vault;
use rebill_store::Store;

pub use platform::context::Context;

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
    pub gateways: Arc<platform::gateways::Gateways>,
    /// The cipher of the payment data tokens hold.
    pub vault: Arc<Vault>,
    /// The service clock (a sandbox site's clock is this plus its offset).
    pub clock: Arc<dyn Clock>,
    /// How long a gateway call may take before it counts as a `gateway_timeout` decline.
    pub gateway_timeout: std::time::Duration,
    /// The scheduler's runs under way in this process (work that can wait paces itself while
    /// one is).
    pub runs: Arc<operations::scheduler::Runs>,
}

/// How long a gateway call may take by default.
pub const GATEWAY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl Services {
    /// Services with the sandbox gateway and a vault over a random key that lives as long as the
    /// process (see [`Services::with_vault`]).
    pub fn new(store: Store, clock: Arc<dyn Clock>) -> Self {
        Self {
            store,
            gateways: Arc::new(platform::gateways::Gateways::default()),
            vault: Arc::new(Vault::ephemeral()),
            clock,
            gateway_timeout: GATEWAY_TIMEOUT,
            runs: Arc::default(),
        }
    }

    /// Uses this gateway for every site, whatever is configured (tests).
    pub fn with_gateway(mut self, gateway: Arc<dyn Gateway>) -> Self {
        self.gateways = Arc::new(platform::gateways::Gateways::fixed(gateway));
        self
    }

    /// Builds the real gateways configured for sites with `builder`.
    pub fn with_gateway_builder(mut self, builder: Arc<dyn platform::gateways::GatewayBuilder>) -> Self {
        self.gateways = Arc::new(platform::gateways::Gateways::with_builder(builder));
        self
    }

    /// Bounds every gateway call by `timeout`.
    pub fn with_gateway_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.gateway_timeout = timeout;
        self
    }

    /// Waits for a gateway call at most [`Services::gateway_timeout`]. A call that does not answer
    /// in time has an unknown outcome ([`Outcome::Pending`], `gateway_timeout`): the gateway may
    /// still act on it, so it is never taken for a decline; the transaction stays `processing`
    /// until the gateway's own record settles it.
    pub async fn bounded(&self, call: GatewayFuture<'_>) -> Outcome {
        match tokio::time::timeout(self.gateway_timeout, call).await {
            Ok(outcome) => outcome,
            Err(_) => Outcome::Pending(Pending::new("gateway_timeout")),
        }
    }

    /// Uses this vault (a persistent key, so tokens survive a restart).
    pub fn with_vault(mut self, vault: Vault) -> Self {
        self.vault = Arc::new(vault);
        self
    }
}

/// The decline of a call that stores a payment method (no money moves) and did not answer
/// within [`Services::gateway_timeout`].
pub(crate) fn timed_out() -> Decline {
    Decline { code: "gateway_timeout", gateway_error_code: None, cvv_result: None, avs_result: None, reference: None }
}

/// An epoch-seconds time as a UTC date-time (`None` out of range).
pub fn time(secs: i64) -> Option<DateTime<Utc>> {
    DateTime::<Utc>::from_timestamp(secs, 0)
}

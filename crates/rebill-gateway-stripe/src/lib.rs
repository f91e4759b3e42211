//! rebill's Stripe gateway: [`StripeGateway`] implements
//! [`rebill_billing::gateway::Gateway`] over Stripe's HTTP API.
//!
//! ```no_run
//! # fn main() -> Result<(), rebill_gateway_stripe::ConfigError> {
//! use rebill_gateway_stripe::{StripeConfig, StripeGateway};
//! let gateway = StripeGateway::new(StripeConfig::new("sk_test_…", "https://api.stripe.com"))?;
//! # let _ = gateway; Ok(()) }
//! ```
//!
//! # Configuration and transport
//!
//! [`StripeConfig`]: the secret key, the API base ([`DEFAULT_API_BASE`],
//! `https://api.stripe.com`, for Stripe itself; trailing slashes and a trailing `/v1` are
//! dropped) and the timeout of each HTTP call (20 s by default, [`StripeConfig::with_timeout`]).
//! One `reqwest` client (rustls) per gateway. Requests are form-encoded in Stripe's bracket
//! notation (`card[number]`, `metadata[rebill_attempt]`), authenticated with
//! `Authorization: Bearer <key>`, made at the pinned API version [`API_VERSION`]
//! (`Stripe-Version`), and answered in JSON. [`Gateway::kind`] is `stripe`;
//! [`Gateway::is_test`] is whether the key is a test key (`sk_test_`, `rk_test_`).
//!
//! The key never appears in an error, a log line or `Debug` output (only its last four
//! characters, in `Debug`); neither does card data. Warnings go through `tracing`.
//!
//! # Stored payment methods
//!
//! A stored reference is `<customer id>/<payment method id>` (`cus_…/pm_…`,
//! [`reference::StoredMethod`]); a reference not of that form is declined
//! `gateway_token_not_found`. Storing a card ([`Gateway::store_payment_method`]):
//!
//! 1. the customer of the replaced method, when `replacing` is a Stripe reference, else a new
//!    one (`POST /v1/customers`);
//! 2. a PaymentMethod (`POST /v1/payment_methods`, `type=card`, number, expiry, and the security
//!    code only when the card has one);
//! 3. attached to the customer (`POST /v1/payment_methods/{pm}/attach`): this is where Stripe
//!    checks the card, and a refusal is the decline. When the replaced method's customer no
//!    longer exists, a new customer takes the card;
//! 4. when replacing a method of the same customer, the replaced method is detached
//!    (`POST /v1/payment_methods/{old}/detach`); a failed detach is only logged.
//!
//! Each of these calls made for a verification or a purchase carries an `Idempotency-Key`
//! derived from the attempt's key (`rebill-verify-<key>-customer`, `-method`, `-attach`,
//! `-detach`; `rebill-store-<key>-…` for a purchase with a card); a bare
//! [`Gateway::store_payment_method`] has no attempt key and sends none (no money moves: a
//! repeat leaves at most an unused customer).
//!
//! Storing a [`PaymentMethod::Stored`] reference answers it as it is (when it has the form
//! above; else `gateway_token_not_found`). Bank accounts are refused
//! by name everywhere (`ach_transactions_not_supported`): rebill takes no US bank account
//! payments through Stripe.
//!
//! Because PaymentMethods are made from card numbers on the server, the Stripe account must be
//! allowed to send raw card data to its API.
//!
//! # Verifications
//!
//! [`Gateway::verify`] of a card stores it as above (the attach is Stripe's check of the card)
//! and approves with the new reference in [`Approval::stored`] and the PaymentMethod's id as
//! the reference; the CVV and AVS results are those of the PaymentMethod's `card.checks` when
//! Stripe gives them (the street and postal code of the request are sent as the method's
//! billing address). A stored reference is verified with a SetupIntent (`POST
//! /v1/setup_intents`, `usage=off_session`, then `POST /v1/setup_intents/{id}/confirm` with
//! the method): `succeeded` approves (the reference is the SetupIntent's id),
//! `requires_action` declines `three_d_secure_action_required`, a refusal is mapped as below.
//!
//! # Purchases
//!
//! [`Gateway::purchase`] charges a stored method in one call: `POST /v1/payment_intents`
//! with the amount, lowercase currency, customer, payment method,
//! `payment_method_types[]=card`, `confirm=true`, `capture_method=automatic` (confirmed and
//! captured at once), `off_session=true` for recurring charges, `metadata[rebill_attempt]` =
//! the idempotency key and `metadata[rebill_invoice]` = the invoice when given,
//! `expand[]=latest_charge`, and header `Idempotency-Key: rebill-purchase-<key>`. Stripe keeps
//! the key's result for 24 hours, so a second create of the attempt answers the first one's
//! result (or 409 while it still runs) and never charges again; a charge of a stored card is
//! thus one call against Stripe's rate limits, and no authorization is ever left uncaptured.
//! An authorization (`requires_capture`) found by a look-up was made by an earlier rebill that
//! authorized and captured in two steps (an attempt pending across an upgrade): it is captured
//! (`POST /v1/payment_intents/{id}/capture`, key `rebill-purchase-<key>-capture`); a capture
//! whose answer is lost is read back and sent again only while the intent is still uncaptured.
//! A card is stored first (under the replaced method's customer when there is one, without
//! detaching the replaced method) and the approval carries the new reference in
//! [`Approval::stored`]. The invoice goes in the metadata only, not in a `description`, as the
//! local Stripe peer the tests run against (`localstripe`) refuses that parameter.
//!
//! | PaymentIntent status | Outcome |
//! |---|---|
//! | `succeeded` | approved, reference = the PaymentIntent's id |
//! | `processing` | pending: still moving at Stripe, settled once it has moved on |
//! | `requires_capture` (made by an earlier version) | captured first (see above), then as its new status |
//! | `requires_action` | `three_d_secure_action_required`, reference = the PaymentIntent's id |
//! | `requires_payment_method` and any other | declined from its `last_payment_error` |
//! | a 402 answer | declined from the error body (its `payment_intent.id` as the reference) |
//!
//! CVV and AVS results come from the charge's `payment_method_details.card.checks` when the
//! answer holds the expanded `latest_charge` (absent results are no results): `cvc_check`
//! `pass` is `M`, `fail` `N`; street and postal checks give AVS `Y`, `N`, `Z` or `A` as the
//! sandbox gateway reports them ([`errors::card_checks`]).
//!
//! ## Nobody is charged twice
//!
//! An attempt is found again by its key: the look-up lists the customer's PaymentIntents (`GET
//! /v1/payment_intents?customer=<cus>&limit=100`, newest first, then `starting_after=<last id>`
//! while `has_more`, at most 20 pages) for one whose `metadata.rebill_attempt` is the key; a
//! canceled one does not count. The account's intents are never paged through: a resumed
//! purchase of a raw card learns its customer by storing the card again under the same keys
//! (Stripe answers each call with what the first made), which it may do only with
//! [`PaymentRequest::may_resend`]; without it the outcome is pending (rebill itself charges
//! stored methods only, whose reference names the customer).
//!
//! - A **resumed** attempt ([`PaymentRequest::resumed`]) is looked up before anything is
//!   created; when found, its outcome is answered. Found nowhere, it is sent again under the same
//!   `Idempotency-Key` only with [`PaymentRequest::may_resend`] (Stripe still keeps the key, so
//!   it answers the first request's result, or 409 while that still runs); otherwise it is
//!   declined `gateway_timeout` (`attempt_not_found`). When the look-up cannot be made, the
//!   outcome is [`Outcome::Pending`] and nothing is created.
//! - When the create's answer is **lost** (a connection error, a timeout, a body that cannot be
//!   read after sending) or Stripe says to retry (`Stripe-Should-Retry: true`, 429, 409
//!   `idempotency_key_in_use`, 5xx), the attempt is looked up before anything else. Found: its
//!   outcome. Not found: the create is sent again with the same `Idempotency-Key` (at most 2
//!   more tries, 200 ms · 2ⁿ apart). When no try is answered, or a look-up cannot be made, the
//!   outcome is **pending** (`gateway_timeout`, `gateway_unavailable`, `gateway_error`), never a
//!   decline: the caller settles it later from Stripe's record. A capture or confirm whose answer
//!   is lost and that cannot be read back is pending too, with the intent as its reference; an
//!   intent still `processing` is pending.
//!
//! A purchase without an idempotency key cannot be looked up and is never sent twice; a lost
//! answer leaves it pending.
//!
//! # Refunds and voids
//!
//! [`Gateway::refund`]: an amount of zero or less is declined `invalid_amount` without a call;
//! else `POST /v1/refunds` with `payment_intent` = the purchase's reference, `amount`,
//! `metadata[rebill_attempt]` = the key and `Idempotency-Key: rebill-refund-<key>`. The
//! approval's reference is the refund's id (`re_…`). With a key, the refunds of the intent
//! (`GET /v1/refunds?payment_intent=…&limit=100`) are looked up for one made under it before
//! the first try (a refund is few calls, and a recovery run asks again under the same key) and
//! whenever an answer is lost, with the same bounded retries as purchases. A refund `failed`
//! or `canceled`, or refused with a 4xx, is declined `transaction_cannot_be_refunded` with
//! Stripe's code kept as the gateway code (a 401, a 429 or a 5xx keep their own mapping, as
//! they say nothing of the purchase).
//!
//! [`Gateway::void`]: Stripe card payments are captured at once, so voiding an unsettled
//! purchase is Stripe's full refund before payout: the intent is read
//! (`GET /v1/payment_intents/{id}`); `succeeded` is refunded in full (no amount, key
//! `rebill-void-<key>`, looked up like a refund), an intent not captured (`requires_capture`,
//! or never charged) is canceled (`POST /v1/payment_intents/{id}/cancel`), a canceled one is
//! already void. The approval's reference is the voided purchase's (the intent's id); a
//! refusal is `transaction_cannot_be_voided`.
//!
//! # Records for reconciliation
//!
//! [`Gateway::records`] lists the PaymentIntents (`GET /v1/payment_intents?created[gte]=…`) and
//! Refunds (`GET /v1/refunds?created[gte]=…`) made since a time, 100 a page, newest first, every
//! page (at most 1,000 of each; more is reported incomplete). An intent `succeeded` moved its
//! `amount_received`; `requires_capture` holds its `amount_capturable`; `processing` is moving;
//! any other status moved nothing. A refund `failed` or `canceled` moved nothing, one
//! `requires_action` is moving, any other (`succeeded`, `pending`) moved its amount. Each
//! record carries its `metadata.rebill_attempt`.
//!
//! # Security codes, banks
//!
//! Stripe cannot check a stored card's security code again from a server (that takes a
//! Stripe.js CVC token), so [`Gateway::checks_stored_cvv`] is false and
//! [`Gateway::check_cvv`] declines `gateway_error`. [`Gateway::bank_name`] knows no bank.
//!
//! # Errors
//!
//! Stripe's error answers are declines through one function, [`errors::decline_from_error`],
//! over the data table `data/stripe_errors.toml` (Stripe `decline_code`, then `code`, then the
//! HTTP status, then the error `type`; anything else is `declined`; a 401 is looked up by its
//! status first). A bad key (401) is `invalid_login` (the table's code for credentials the
//! gateway refuses), a rate limit `gateway_rate_limited`, Stripe's own failure (5xx)
//! `gateway_error`. Stripe's most specific code is kept as the decline's gateway code; Stripe's
//! message never is (that of a 401 quotes part of the key). Each row is tested with the error
//! body Stripe documents for it (`tests/fixtures/stripe_error_bodies.json`).
//!
//! Retries of other calls (at most 2 more, 200 ms · 2ⁿ apart) are made only when Stripe says
//! it is safe (`Stripe-Should-Retry: true`, 429, 409 `idempotency_key_in_use`, 5xx) and only
//! for GETs and requests carrying an `Idempotency-Key`; a GET whose answer is lost is retried
//! too. A POST without a key whose answer is lost is not sent again: `gateway_unavailable`
//! (or `gateway_timeout`).
//!
//! # Tests
//!
//! `tests/localstripe.rs` runs the gateway against `localstripe` (started per test by
//! `rebill-testkit`), with a proxy that loses answers; `tests/scripted.rs` checks the wire
//! (form encoding, headers, the key of every try) and the answers `localstripe` never gives
//! (5xx, 429, 409, `Stripe-Should-Retry`) against a scripted server; `tests/error_mapping.rs`
//! checks the error table row by row.

use std::fmt;
use std::time::Duration;

use rebill_billing::gateway::{
    CvvRequest, Gateway, GatewayFuture, Outcome, PaymentMethod, PaymentRequest, RecordsFuture, RefundRequest,
    StoreFuture, VoidRequest,
};

pub mod errors;
mod http;
mod payments;
mod records;
pub mod reference;
mod refunds;

pub use http::API_VERSION;

#[cfg(doc)]
use rebill_billing::gateway::Approval;

/// Stripe's API root.
pub const DEFAULT_API_BASE: &str = "https://api.stripe.com";
/// The default timeout of each HTTP call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// The gateway code of the security-code re-check Stripe cannot make.
pub const CVV_RECHECK_UNSUPPORTED: &str = "stripe: cvv re-check of a stored card is not supported";

/// How to reach Stripe. `Debug` shows only the key's last four characters.
#[derive(Clone)]
pub struct StripeConfig {
    /// The account's secret (or restricted) key.
    pub secret_key: String,
    /// The API root, e.g. `https://api.stripe.com` (normalised: trailing slashes and a trailing
    /// `/v1` are dropped).
    pub api_base: String,
    /// The timeout of each HTTP call (connecting, sending and reading the answer).
    pub timeout: Duration,
}

impl StripeConfig {
    /// A configuration with the key, the API root ([`DEFAULT_API_BASE`] for Stripe itself) and
    /// the default timeout ([`DEFAULT_TIMEOUT`]).
    pub fn new(secret_key: impl Into<String>, api_base: impl Into<String>) -> Self {
        Self { secret_key: secret_key.into(), api_base: api_base.into(), timeout: DEFAULT_TIMEOUT }
    }

    /// The same configuration with another timeout per HTTP call.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

impl fmt::Debug for StripeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StripeConfig")
            .field("secret_key", &Redacted(&self.secret_key))
            .field("api_base", &self.api_base)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// A key shown by its last four characters only (none when it is short).
struct Redacted<'a>(&'a str);

impl fmt::Debug for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let chars: Vec<char> = self.0.chars().collect();
        if chars.len() >= 12 {
            let last: String = chars[chars.len() - 4..].iter().collect();
            write!(f, "\"****{last}\"")
        } else {
            f.write_str("\"****\"")
        }
    }
}

/// Why a gateway could not be built. Never holds the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("the Stripe secret key is empty")]
    EmptyKey,
    #[error("the Stripe secret key holds characters an HTTP header cannot carry")]
    KeyNotHeaderSafe,
    #[error("the Stripe API base `{0}` is not an http or https URL")]
    ApiBase(String),
    #[error("the Stripe timeout must be longer than zero")]
    ZeroTimeout,
    #[error("the HTTP client could not be built: {0}")]
    Client(String),
}

/// The Stripe gateway (see the crate documentation).
pub struct StripeGateway {
    http: http::Http,
    key_hint: String,
    timeout: Duration,
    test: bool,
}

impl fmt::Debug for StripeGateway {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StripeGateway")
            .field("api_base", &self.http.base())
            .field("secret_key", &format_args!("{}", self.key_hint))
            .field("timeout", &self.timeout)
            .field("test", &self.test)
            .finish()
    }
}

/// The API base without trailing slashes or `/v1`; `None` when it is not an http(s) URL.
fn normalise_base(base: &str) -> Option<String> {
    let mut base = base.trim().trim_end_matches('/');
    if let Some(root) = base.strip_suffix("/v1") {
        base = root.trim_end_matches('/');
    }
    let rest = base.strip_prefix("https://").or_else(|| base.strip_prefix("http://"))?;
    let valid = !rest.is_empty() && !rest.contains(['?', '#', ' ']);
    valid.then(|| base.to_owned())
}

impl StripeGateway {
    /// A gateway for the configured account.
    pub fn new(config: StripeConfig) -> Result<Self, ConfigError> {
        let key = config.secret_key.trim();
        if key.is_empty() {
            return Err(ConfigError::EmptyKey);
        }
        if !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ConfigError::KeyNotHeaderSafe);
        }
        let base = normalise_base(&config.api_base).ok_or_else(|| ConfigError::ApiBase(config.api_base.clone()))?;
        if config.timeout.is_zero() {
            return Err(ConfigError::ZeroTimeout);
        }
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .user_agent(concat!("rebill-gateway-stripe/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ConfigError::Client(e.to_string()))?;
        Ok(Self {
            key_hint: format!("{:?}", Redacted(key)),
            test: key.starts_with("sk_test_") || key.starts_with("rk_test_"),
            timeout: config.timeout,
            http: http::Http::new(client, base, key.to_owned()),
        })
    }

    /// The normalised API base requests go to.
    pub fn api_base(&self) -> &str {
        self.http.base()
    }
}

impl Gateway for StripeGateway {
    fn kind(&self) -> &'static str {
        "stripe"
    }

    fn is_test(&self) -> bool {
        self.test
    }

    fn purchase<'a>(&'a self, request: &'a PaymentRequest<'a>) -> GatewayFuture<'a> {
        Box::pin(self.purchase_payment(request))
    }

    fn verify<'a>(&'a self, request: &'a PaymentRequest<'a>) -> GatewayFuture<'a> {
        Box::pin(self.verify_payment(request))
    }

    fn refund<'a>(&'a self, request: &'a RefundRequest<'a>) -> GatewayFuture<'a> {
        Box::pin(self.refund_payment(request))
    }

    fn void<'a>(&'a self, request: &'a VoidRequest<'a>) -> GatewayFuture<'a> {
        Box::pin(self.void_payment(request))
    }

    fn store_payment_method<'a>(&'a self, method: PaymentMethod<'a>, replacing: Option<&'a str>) -> StoreFuture<'a> {
        Box::pin(self.store(method, replacing))
    }

    fn accepts_bank_accounts(&self) -> bool {
        false
    }

    fn bank_name(&self, _routing_number: &str) -> Option<String> {
        None
    }

    fn check_cvv<'a>(&'a self, _request: &'a CvvRequest<'a>) -> GatewayFuture<'a> {
        Box::pin(std::future::ready(Outcome::Declined(errors::decline("gateway_error", CVV_RECHECK_UNSUPPORTED))))
    }

    fn checks_stored_cvv(&self) -> bool {
        false
    }

    fn records(&self, since: i64) -> RecordsFuture<'_> {
        Box::pin(self.list_records(since))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk_test_51Hx9ZqLkdIwHu7ixSecretPartabcd";

    #[test]
    fn debug_output_never_shows_the_key() {
        let config = StripeConfig::new(KEY, "http://127.0.0.1:1/");
        let shown = format!("{config:?}");
        assert!(!shown.contains("Secret") && !shown.contains("sk_test_") && shown.contains("****abcd"), "{shown}");
        let gateway = StripeGateway::new(config).expect("a gateway");
        let shown = format!("{gateway:?}");
        assert!(!shown.contains("Secret") && !shown.contains("sk_test_") && shown.contains("****abcd"), "{shown}");
        assert!(shown.contains("http://127.0.0.1:1"), "{shown}");
        assert_eq!(format!("{:?}", StripeConfig::new("sk_x", "")), format!("{:?}", StripeConfig::new("sk_y", "")));
    }

    #[test]
    fn kind_and_test_mode() {
        let gateway = |key: &str| StripeGateway::new(StripeConfig::new(key, DEFAULT_API_BASE)).expect("a gateway");
        assert_eq!(gateway(KEY).kind(), "stripe");
        assert!(gateway(KEY).is_test());
        assert!(gateway("rk_test_abc").is_test());
        assert!(!gateway("sk_live_abc").is_test());
        assert!(!gateway("rk_live_abc").is_test());
        assert!(!gateway(KEY).checks_stored_cvv());
        assert_eq!(gateway(KEY).bank_name("123456780"), None);
    }

    #[test]
    fn api_bases_are_normalised() {
        let base = |b: &str| StripeGateway::new(StripeConfig::new(KEY, b)).map(|g| g.api_base().to_owned());
        assert_eq!(base("https://api.stripe.com").as_deref(), Ok("https://api.stripe.com"));
        assert_eq!(base("https://api.stripe.com/").as_deref(), Ok("https://api.stripe.com"));
        assert_eq!(base(" https://api.stripe.com/v1/ ").as_deref(), Ok("https://api.stripe.com"));
        assert_eq!(base("http://127.0.0.1:8420").as_deref(), Ok("http://127.0.0.1:8420"));
        assert!(matches!(base("api.stripe.com"), Err(ConfigError::ApiBase(_))));
        assert!(matches!(base("https://"), Err(ConfigError::ApiBase(_))));
    }

    #[test]
    fn bad_configurations_are_refused_without_the_key() {
        assert_eq!(StripeGateway::new(StripeConfig::new("  ", DEFAULT_API_BASE)).err(), Some(ConfigError::EmptyKey));
        let err = StripeGateway::new(StripeConfig::new("sk_test_with space", DEFAULT_API_BASE)).expect_err("refused");
        assert_eq!(err, ConfigError::KeyNotHeaderSafe);
        assert!(!err.to_string().contains("with space"));
        let zero = StripeConfig::new(KEY, DEFAULT_API_BASE).with_timeout(Duration::ZERO);
        assert_eq!(StripeGateway::new(zero).err(), Some(ConfigError::ZeroTimeout));
    }

    #[tokio::test]
    async fn cvv_rechecks_are_declined_without_a_call() {
        let gateway = StripeGateway::new(StripeConfig::new(KEY, "http://127.0.0.1:1")).expect("gateway");
        let request = CvvRequest { reference: "cus_1/pm_1", verification_value: "123", idempotency_key: None };
        match gateway.check_cvv(&request).await {
            Outcome::Declined(d) => {
                assert_eq!(d.code, "gateway_error");
                assert_eq!(d.gateway_error_code.as_deref(), Some(CVV_RECHECK_UNSUPPORTED));
            }
            other => panic!("{other:?}"),
        }
    }
}

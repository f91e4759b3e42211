//! The payment gateway of each site.
//!
//! | Site | Gateway |
//! |---|---|
//! | a gateway set (`rebill gateway set`) | that gateway (Stripe), sandbox and production alike |
//! | sandbox, none set | the sandbox test gateway ([`SandboxGateway`]) |
//! | production, none set | [`NoGateway`]: every charge, verification and refund is declined `no_gateway` |
//!
//! A real gateway is built by the [`GatewayBuilder`] the process was started with (the binary
//! knows Stripe; this crate knows no gateway's wire) from the site's stored configuration: its
//! secret key sealed with the vault key (context [`key_context`]), opened only here and handed
//! to the builder. A built gateway is kept per site and version and rebuilt when the row
//! changes, so `rebill gateway set` reaches every process at its next call.
//!
//! Tests may fix one gateway for every site ([`Gateways::fixed`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rebill_billing::gateway::{
    CvvRequest, Decline, Gateway, GatewayFuture, Outcome, PaymentMethod, PaymentRequest, RecordsFuture, RefundRequest,
    SandboxGateway, StoreFuture, VoidRequest,
};
use rebill_billing::vault::Vault;
use rebill_store::gateways::{NewSiteGateway, SiteGateway};
use rebill_store::{Mode, Site, StoreError};

use crate::Services;
use crate::platform::metrics;

/// The gateway kinds `rebill gateway set` accepts.
pub const KINDS: &[&str] = &["stripe"];
/// Stripe's API root, the default `--api-base`.
pub const STRIPE_API_BASE: &str = "https://api.stripe.com";

/// Builds a real gateway from a site's configuration (the binary's composition root provides
/// it). The secret key must not appear in the error.
pub trait GatewayBuilder: Send + Sync {
    fn build(&self, kind: &str, secret_key: &str, api_base: &str) -> Result<Arc<dyn Gateway>, String>;
}

/// The vault context a site's gateway key is sealed under.
pub fn key_context(site_id: i64) -> Vec<u8> {
    format!("site-gateway:{site_id}").into_bytes()
}

/// The gateways built so far: site id → (row version, gateway).
type Built = HashMap<i64, (i64, Arc<dyn Gateway>)>;

/// Which gateway each site uses (see the module documentation).
pub struct Gateways {
    fixed: Option<Arc<dyn Gateway>>,
    builder: Option<Arc<dyn GatewayBuilder>>,
    built: Mutex<Built>,
}

impl Default for Gateways {
    fn default() -> Self {
        Self { fixed: None, builder: None, built: Mutex::new(HashMap::new()) }
    }
}

impl Gateways {
    /// One gateway for every site, whatever is configured (tests).
    pub fn fixed(gateway: Arc<dyn Gateway>) -> Self {
        Self { fixed: Some(gateway), ..Self::default() }
    }

    /// Sites' configured gateways built by `builder`.
    pub fn with_builder(builder: Arc<dyn GatewayBuilder>) -> Self {
        Self { builder: Some(builder), ..Self::default() }
    }

    fn built(&self, vault: &Vault, config: &SiteGateway) -> Arc<dyn Gateway> {
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((version, gateway)) = built.get(&config.site_id)
            && *version == config.version
        {
            return gateway.clone();
        }
        let gateway: Arc<dyn Gateway> = match self.build(vault, config) {
            Ok(gateway) => gateway,
            Err(problem) => {
                tracing::error!(site = config.site_id, kind = %config.kind, %problem, "the site's gateway cannot be used");
                Arc::new(NoGateway { code: "gateway_account_setup_incomplete" })
            }
        };
        built.insert(config.site_id, (config.version, gateway.clone()));
        gateway
    }

    fn build(&self, vault: &Vault, config: &SiteGateway) -> Result<Arc<dyn Gateway>, String> {
        let builder =
            self.builder.as_ref().ok_or_else(|| format!("this process cannot build a {} gateway", config.kind))?;
        let key = vault
            .open_text(&config.secret_sealed, &key_context(config.site_id))
            .map_err(|e| format!("the secret key cannot be opened with this vault key: {e}"))?;
        builder.build(&config.kind, &key, &config.api_base)
    }
}

impl Services {
    /// The gateway of the site `site_id` (see the module documentation).
    pub async fn gateway(&self, site_id: i64) -> Result<Arc<dyn Gateway>, StoreError> {
        if let Some(fixed) = &self.gateways.fixed {
            return Ok(fixed.clone());
        }
        let choice = self
            .store
            .site_gateway_choice(site_id)
            .await?
            .ok_or_else(|| StoreError::UnknownSite(site_id.to_string()))?;
        let gateway: Arc<dyn Gateway> = match (choice.gateway, choice.mode) {
            (Some(config), _) => self.gateways.built(&self.vault, &config),
            (None, Mode::Sandbox) => Arc::new(SandboxGateway),
            (None, Mode::Production) => Arc::new(NoGateway { code: "no_gateway" }),
        };
        Ok(Arc::new(Measured(gateway)))
    }
}

/// The job that reconciles a site's transactions with its gateway's records every
/// [`RECONCILE_EVERY`] seconds (subject: the site's id; run by `collection::reconciliation`).
pub const RECONCILE_JOB: &str = "reconcile_gateway";
/// Seconds between two reconciliations of a site (the site's clock).
pub const RECONCILE_EVERY: i64 = 3600;

/// The due time of the reconciliation after `site_now`: the next full hour of the site's
/// clock, so that every process schedules the same row.
pub fn next_reconcile(site_now: i64) -> i64 {
    site_now.div_euclid(RECONCILE_EVERY) * RECONCILE_EVERY + RECONCILE_EVERY
}

/// A gateway whose every call is counted and timed ([`metrics::GATEWAY_CALLS`],
/// [`metrics::GATEWAY_DURATION`]); every gateway a use case gets is one.
struct Measured(Arc<dyn Gateway>);

/// One gateway call being measured: recorded when it answers, or as `abandoned` when its future
/// is dropped first (the caller stopped waiting at the gateway timeout).
struct CallMeasure {
    gateway: &'static str,
    operation: &'static str,
    started: std::time::Instant,
    outcome: Option<&'static str>,
}

impl CallMeasure {
    fn start(gateway: &'static str, operation: &'static str) -> Self {
        Self { gateway, operation, started: std::time::Instant::now(), outcome: None }
    }
}

impl Drop for CallMeasure {
    fn drop(&mut self) {
        let labels = [
            ("gateway", self.gateway),
            ("operation", self.operation),
            ("outcome", self.outcome.unwrap_or("abandoned")),
        ];
        ::metrics::counter!(metrics::GATEWAY_CALLS, &labels).increment(1);
        ::metrics::histogram!(metrics::GATEWAY_DURATION, &labels).record(self.started.elapsed().as_secs_f64());
    }
}

/// The outcome label of a decline: `error` when the gateway could not be reached or failed
/// (the `communication` category), else `declined`.
fn decline_label(decline: &Decline) -> &'static str {
    if decline.error().category == "communication" { "error" } else { "declined" }
}

fn outcome_label(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Approved(_) => "approved",
        Outcome::Declined(decline) => decline_label(decline),
        Outcome::Pending(_) => "unknown",
    }
}

impl Measured {
    fn call<'a>(&'a self, operation: &'static str, call: GatewayFuture<'a>) -> GatewayFuture<'a> {
        let gateway = self.0.kind();
        Box::pin(async move {
            let mut measure = CallMeasure::start(gateway, operation);
            let outcome = call.await;
            measure.outcome = Some(outcome_label(&outcome));
            outcome
        })
    }
}

impl Gateway for Measured {
    fn kind(&self) -> &'static str {
        self.0.kind()
    }

    fn is_test(&self) -> bool {
        self.0.is_test()
    }

    fn purchase<'a>(&'a self, request: &'a PaymentRequest<'a>) -> GatewayFuture<'a> {
        self.call("purchase", self.0.purchase(request))
    }

    fn verify<'a>(&'a self, request: &'a PaymentRequest<'a>) -> GatewayFuture<'a> {
        self.call("verify", self.0.verify(request))
    }

    fn refund<'a>(&'a self, request: &'a RefundRequest<'a>) -> GatewayFuture<'a> {
        self.call("refund", self.0.refund(request))
    }

    fn void<'a>(&'a self, request: &'a VoidRequest<'a>) -> GatewayFuture<'a> {
        self.call("void", self.0.void(request))
    }

    fn store_payment_method<'a>(&'a self, method: PaymentMethod<'a>, replacing: Option<&'a str>) -> StoreFuture<'a> {
        let gateway = self.0.kind();
        let call = self.0.store_payment_method(method, replacing);
        Box::pin(async move {
            let mut measure = CallMeasure::start(gateway, "store_payment_method");
            let stored = call.await;
            measure.outcome = Some(match &stored {
                Ok(_) => "approved",
                Err(decline) => decline_label(decline),
            });
            stored
        })
    }

    fn bank_name(&self, routing_number: &str) -> Option<String> {
        self.0.bank_name(routing_number)
    }

    fn accepts_bank_accounts(&self) -> bool {
        self.0.accepts_bank_accounts()
    }

    fn check_cvv<'a>(&'a self, request: &'a CvvRequest<'a>) -> GatewayFuture<'a> {
        self.call("check_cvv", self.0.check_cvv(request))
    }

    fn checks_stored_cvv(&self) -> bool {
        self.0.checks_stored_cvv()
    }

    fn records(&self, since: i64) -> RecordsFuture<'_> {
        self.0.records(since)
    }
}

/// Why a gateway configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum GatewayConfigError {
    #[error("unknown gateway {0:?} (known: stripe)")]
    UnknownKind(String),
    #[error("the secret key is empty or not a Stripe secret key (sk_live_…, sk_test_…, rk_live_…, rk_test_…)")]
    MalformedKey,
    #[error("the API base must be an http:// or https:// URL")]
    MalformedBase,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A site's gateway as people are shown it: never the key, only its last four characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayView {
    pub kind: String,
    pub key_last4: String,
    pub api_base: String,
    pub test: bool,
    pub updated_at: i64,
}

fn view(config: &SiteGateway, test: bool) -> GatewayView {
    GatewayView {
        kind: config.kind.clone(),
        key_last4: config.key_last4.clone(),
        api_base: config.api_base.clone(),
        test,
        updated_at: config.updated_at,
    }
}

/// Whether a Stripe key is a test key.
pub fn stripe_test_key(key: &str) -> bool {
    key.starts_with("sk_test_") || key.starts_with("rk_test_")
}

/// Sets the site's gateway; the key is sealed before it is stored.
pub async fn set(
    services: &Services,
    site: &Site,
    kind: &str,
    secret_key: &str,
    api_base: Option<&str>,
    now: i64,
) -> Result<GatewayView, GatewayConfigError> {
    if !KINDS.contains(&kind) {
        return Err(GatewayConfigError::UnknownKind(kind.to_owned()));
    }
    let key = secret_key.trim();
    let shaped =
        ["sk_live_", "sk_test_", "rk_live_", "rk_test_"].iter().any(|p| key.len() > p.len() + 3 && key.starts_with(p))
            && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !shaped {
        return Err(GatewayConfigError::MalformedKey);
    }
    let base = api_base.unwrap_or(STRIPE_API_BASE).trim().trim_end_matches('/');
    let rest = base.strip_prefix("https://").or_else(|| base.strip_prefix("http://"));
    if rest.is_none_or(|r| r.is_empty() || r.contains(char::is_whitespace)) {
        return Err(GatewayConfigError::MalformedBase);
    }
    let sealed = services.vault.seal_text(key, &key_context(site.id));
    let last4: String = key.chars().rev().take(4).collect::<Vec<_>>().into_iter().rev().collect();
    let new = NewSiteGateway { kind, secret_sealed: &sealed, key_last4: &last4, api_base: base };
    let stored = services.store.set_site_gateway(site.id, &new, now).await?;
    // Its records are compared with rebill's every hour from now on.
    services.store.schedule_job(site.id, RECONCILE_JOB, &site.id.to_string(), next_reconcile(site.now(now))).await?;
    Ok(view(&stored, stripe_test_key(key)))
}

/// The site's gateway, if one is set.
pub async fn show(services: &Services, site: &Site) -> Result<Option<GatewayView>, StoreError> {
    let Some(config) = services.store.site_gateway(site.id).await? else { return Ok(None) };
    let test = services
        .vault
        .open_text(&config.secret_sealed, &key_context(site.id))
        .map(|key| stripe_test_key(&key))
        .unwrap_or(false);
    Ok(Some(view(&config, test)))
}

/// Removes the site's gateway (back to the sandbox gateway, or none in production); answers
/// whether one was set.
pub async fn remove(services: &Services, site: &Site) -> Result<bool, StoreError> {
    services.store.remove_site_gateway(site.id).await
}

/// The gateway of a site that has none it can use: every call is declined with `code`
/// (`no_gateway` on a production site without a gateway; `gateway_account_setup_incomplete`
/// when the configured one cannot be built).
#[derive(Debug, Clone, Copy)]
pub struct NoGateway {
    pub code: &'static str,
}

impl NoGateway {
    fn decline(&self) -> Decline {
        Decline { code: self.code, gateway_error_code: None, cvv_result: None, avs_result: None, reference: None }
    }

    fn answer<'a>(&self) -> GatewayFuture<'a> {
        let decline = self.decline();
        Box::pin(async move { Outcome::Declined(decline) })
    }
}

impl Gateway for NoGateway {
    fn kind(&self) -> &'static str {
        "none"
    }

    fn is_test(&self) -> bool {
        false
    }

    fn purchase<'a>(&'a self, _request: &'a PaymentRequest<'a>) -> GatewayFuture<'a> {
        self.answer()
    }

    fn verify<'a>(&'a self, _request: &'a PaymentRequest<'a>) -> GatewayFuture<'a> {
        self.answer()
    }

    fn refund<'a>(&'a self, _request: &'a RefundRequest<'a>) -> GatewayFuture<'a> {
        self.answer()
    }

    fn void<'a>(&'a self, _request: &'a VoidRequest<'a>) -> GatewayFuture<'a> {
        self.answer()
    }

    fn store_payment_method<'a>(&'a self, _method: PaymentMethod<'a>, _replacing: Option<&'a str>) -> StoreFuture<'a> {
        let decline = self.decline();
        Box::pin(async move { Err(Box::new(decline)) })
    }

    fn bank_name(&self, _routing_number: &str) -> Option<String> {
        None
    }

    fn check_cvv<'a>(&'a self, _request: &'a CvvRequest<'a>) -> GatewayFuture<'a> {
        self.answer()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use rebill_billing::gateway::SandboxGateway;
    use rebill_store::testing::both_backends;
    use rebill_store::{NewSite, Plan, SiteUpdate};

    use super::*;
    use crate::SystemClock;

    /// Builds sandbox gateways for "stripe" configurations, recording the keys it was given.
    #[derive(Default)]
    struct Recording {
        keys: Mutex<Vec<(String, String, String)>>,
        built: AtomicUsize,
    }

    impl GatewayBuilder for Recording {
        fn build(&self, kind: &str, secret_key: &str, api_base: &str) -> Result<Arc<dyn Gateway>, String> {
            self.built.fetch_add(1, Ordering::SeqCst);
            self.keys.lock().expect("keys").push((kind.to_owned(), secret_key.to_owned(), api_base.to_owned()));
            if secret_key.ends_with("broken") {
                return Err("refused".to_owned());
            }
            Ok(Arc::new(SandboxGateway))
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_site_gets_its_gateway() {
        for store in both_backends("app_gateways").await {
            let recording = Arc::new(Recording::default());
            let services = Services::new(store.clone(), Arc::new(SystemClock)).with_gateway_builder(recording.clone());
            let new = NewSite {
                name: "acme".into(),
                mode: Mode::Sandbox,
                plan: Plan::Core,
                credit_memos: false,
                contact: None,
            };
            let (site, _) = store.create_site(&new, 100).await.expect("site");
            assert_eq!(
                services.gateway(site.id).await.expect("gateway").kind(),
                "test",
                "sandbox: the sandbox gateway"
            );

            let production = SiteUpdate { mode: Some(Mode::Production), ..SiteUpdate::default() };
            let site = store.update_site("acme", &production).await.expect("production");
            let none = services.gateway(site.id).await.expect("gateway");
            assert_eq!((none.kind(), none.is_test()), ("none", false));
            let request =
                RefundRequest { amount_in_cents: 100, currency: "USD", reference: "r", idempotency_key: None };
            match none.refund(&request).await {
                Outcome::Declined(d) => assert_eq!(d.code, "no_gateway"),
                other => panic!("{other:?}"),
            }
            assert!(none.store_payment_method(PaymentMethod::Stored { reference: "x" }, None).await.is_err());

            // Refusals before anything is stored.
            for (kind, key, base) in [
                ("paypal", "sk_test_abcdef", None),
                ("stripe", "pk_test_abcdef", None),
                ("stripe", "sk_test_ab cd", None),
                ("stripe", "sk_test_abcdef", Some("ftp://x")),
            ] {
                assert!(set(&services, &site, kind, key, base, 200).await.is_err(), "{kind} {key} {base:?}");
            }
            assert!(store.site_gateway(site.id).await.expect("read").is_none());

            let view = set(&services, &site, "stripe", " sk_live_abcdef123456\n", Some("http://127.0.0.1:9/"), 200)
                .await
                .expect("set");
            assert_eq!((view.kind.as_str(), view.key_last4.as_str(), view.test), ("stripe", "3456", false));
            assert_eq!(view.api_base, "http://127.0.0.1:9");
            let stored = store.site_gateway(site.id).await.expect("read").expect("stored");
            assert!(!stored.secret_sealed.contains("abcdef123456"), "sealed, never in clear");
            assert_eq!(show(&services, &site).await.expect("show"), Some(view));

            // Built once with the opened key, kept while the row stays, rebuilt when it changes.
            services.gateway(site.id).await.expect("gateway");
            services.gateway(site.id).await.expect("gateway");
            assert_eq!(recording.built.load(Ordering::SeqCst), 1);
            assert_eq!(
                recording.keys.lock().expect("keys")[0],
                ("stripe".to_owned(), "sk_live_abcdef123456".to_owned(), "http://127.0.0.1:9".to_owned())
            );
            set(&services, &site, "stripe", "sk_test_abcdef654321", None, 300).await.expect("set again");
            services.gateway(site.id).await.expect("gateway");
            assert_eq!(recording.built.load(Ordering::SeqCst), 2);
            assert_eq!(recording.keys.lock().expect("keys")[1].2, STRIPE_API_BASE);

            // A configuration the builder refuses declines instead of failing requests.
            set(&services, &site, "stripe", "sk_test_keybroken", None, 400).await.expect("set");
            let broken = services.gateway(site.id).await.expect("gateway");
            match broken.purchase(&sample_purchase()).await {
                Outcome::Declined(d) => assert_eq!(d.code, "gateway_account_setup_incomplete"),
                other => panic!("{other:?}"),
            }

            // A process without a builder cannot use it either, and says so by declining.
            let plain = Services::new(store.clone(), Arc::new(SystemClock));
            assert_eq!(plain.gateway(site.id).await.expect("gateway").kind(), "none");

            assert!(remove(&services, &site).await.expect("remove"));
            assert_eq!(services.gateway(site.id).await.expect("gateway").kind(), "none", "production again");
            let sandbox = SiteUpdate { mode: Some(Mode::Sandbox), ..SiteUpdate::default() };
            let site = store.update_site("acme", &sandbox).await.expect("sandbox");
            assert_eq!(services.gateway(site.id).await.expect("gateway").kind(), "test");
        }
    }

    fn sample_purchase() -> PaymentRequest<'static> {
        PaymentRequest {
            amount_in_cents: 100,
            currency: "USD",
            method: PaymentMethod::Stored { reference: "x" },
            address: Default::default(),
            recurring: false,
            idempotency_key: None,
            resumed: false,
            may_resend: false,
            invoice: None,
            replacing: None,
        }
    }
}

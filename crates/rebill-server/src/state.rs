//! The service's shared state and settings: [`AppState`] (the use cases' services and the
//! [`Config`]), the settings themselves, and [`RequestContext`], what the protocol layers learned
//! about a request. Every other module of the service reads these; this module reads none of
//! them.

use std::sync::{Arc, OnceLock};

use chrono::{DateTime, SecondsFormat, Utc};
use rebill_app::platform::instant::parse_instant;
use rebill_app::{Clock, Services};
use rebill_store::{ApiKey, Site, Store};
use rebill_xml::{ApiVersion, WireContext};

/// Default largest request body (1 MiB).
pub const BODY_LIMIT: usize = 1 << 20;

/// A deprecated API version and the moment it stops being served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deprecation {
    pub version: ApiVersion,
    /// UTC epoch seconds.
    pub sunset: i64,
}

/// A bad `VERSION=SUNSET` setting.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadDeprecation(String);

impl Deprecation {
    /// Parses `2.2=2027-06-30T00:00:00Z` (or a bare date, meaning its midnight UTC).
    pub fn parse(text: &str) -> Result<Self, BadDeprecation> {
        let (version, sunset) = text.split_once('=').ok_or_else(|| {
            BadDeprecation(format!("`{text}`: expected VERSION=SUNSET, e.g. 2.2=2027-06-30T00:00:00Z"))
        })?;
        let version = ApiVersion::parse(version.trim())
            .map_err(|_| BadDeprecation(format!("`{version}` is not a supported API version")))?;
        let sunset = parse_instant(sunset.trim())
            .ok_or_else(|| BadDeprecation(format!("`{sunset}` is not an ISO 8601 date or date-time")))?;
        Ok(Self { version, sunset })
    }

    /// The sunset as ISO 8601 (`2027-06-30T00:00:00Z`).
    pub fn sunset_text(&self) -> String {
        DateTime::<Utc>::from_timestamp(self.sunset, 0)
            .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true))
            .unwrap_or_default()
    }
}

/// Default deadline for reading a whole request body (408 after it).
pub const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Default bound on open client connections (kept below the common 1,024 file-descriptor limit,
/// with room for database connections and files).
pub const MAX_CONNECTIONS: usize = 512;

/// Settings of the service.
#[derive(Debug, Clone)]
pub struct Config {
    pub body_limit: usize,
    pub deprecations: Vec<Deprecation>,
    /// How long reading a whole request body may take, from the end of its head (408 after).
    pub body_timeout: std::time::Duration,
    /// Open client connections at most; at the bound the service stops accepting until one
    /// closes (see [`wire::serve`]).
    pub max_connections: usize,
    /// The service's public base URL: every href and `Location` uses it whatever the request's
    /// `Host` says. `None`: built from `Host` (local development).
    pub public_url: Option<PublicUrl>,
    /// Serve the demo checkout page (`/demo`, sandbox sites only).
    pub demo: bool,
    /// How long, once asked to stop, requests in flight and the scheduler's run may take.
    pub shutdown_grace: std::time::Duration,
}

/// How long requests in flight may take to finish once the service is asked to stop.
pub const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(20);

impl Default for Config {
    fn default() -> Self {
        Self {
            body_limit: BODY_LIMIT,
            deprecations: Vec::new(),
            body_timeout: BODY_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
            public_url: None,
            demo: false,
            shutdown_grace: SHUTDOWN_GRACE,
        }
    }
}

/// A checked public base URL: `http` or `https`, a host, an optional path, no query, fragment
/// or user information, no trailing slash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl(String);

/// A public URL that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("public URL `{url}`: {problem}")]
pub struct BadPublicUrl {
    url: String,
    problem: &'static str,
}

impl PublicUrl {
    /// Checks `text` (`https://billing.example.com`, `http://10.0.0.5:8080/rebill/`); a trailing
    /// slash is trimmed.
    pub fn parse(text: &str) -> Result<Self, BadPublicUrl> {
        let bad = |problem| BadPublicUrl { url: text.to_owned(), problem };
        let (scheme, rest) = text.split_once("://").ok_or_else(|| bad("expected http://HOST or https://HOST"))?;
        let rest = rest.trim_end_matches('/');
        if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
            return Err(bad("the scheme must be http or https"));
        }
        if rest.contains(['?', '#']) {
            return Err(bad("a query or fragment is not allowed"));
        }
        if !rest.bytes().all(|b| b.is_ascii_graphic()) || rest.contains(['<', '>', '"', '\\']) {
            return Err(bad("only printable ASCII without spaces, quotes or angle brackets is allowed"));
        }
        let host = rest.split('/').next().unwrap_or_default();
        if host.is_empty() {
            return Err(bad("a host is required"));
        }
        if host.contains('@') {
            return Err(bad("user information is not allowed"));
        }
        Ok(Self(format!("{}://{rest}", scheme.to_ascii_lowercase())))
    }

    /// The URL, without a trailing slash.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for PublicUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Config {
    pub fn deprecation(&self, version: ApiVersion) -> Option<&Deprecation> {
        self.deprecations.iter().find(|d| d.version == version)
    }

    /// The supported versions still served at `now`.
    pub fn available_list(&self, now: i64) -> String {
        ApiVersion::supported_list()
            .split(", ")
            .filter(|v| ApiVersion::parse(v).ok().and_then(|v| self.deprecation(v)).is_none_or(|d| now < d.sunset))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Shared state of the service: the use cases' [`Services`] (store, gateway, vault, clock; reached
/// through `Deref`) and the service's settings, behind one reference count (every protocol
/// layer holds a clone of it for each request, so a clone is one count, not one per service).
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

/// What an [`AppState`] shares.
#[derive(Clone)]
pub struct Shared {
    pub services: Services,
    pub config: Config,
    /// The scheduler task of this process, once [`crate::serve`] started it (readiness).
    pub(crate) scheduler: OnceLock<tokio::task::AbortHandle>,
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl std::ops::Deref for Shared {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.services
    }
}

impl AppState {
    /// Whether this process's scheduler was started and still runs.
    pub(crate) fn scheduler_running(&self) -> bool {
        self.scheduler.get().is_some_and(|task| !task.is_finished())
    }

    /// State with the sandbox gateway and a vault over a random key that lives as long as the
    /// process (see [`AppState::with_vault`]).
    pub fn new(store: Store, clock: Arc<dyn Clock>, config: Config) -> Self {
        Self(Arc::new(Shared { services: Services::new(store, clock), config, scheduler: OnceLock::new() }))
    }

    /// The services, to change while the state is built (copied if already shared).
    fn services_mut(&mut self) -> &mut Services {
        &mut Arc::make_mut(&mut self.0).services
    }

    /// Uses this gateway.
    pub fn with_gateway(mut self, gateway: Arc<dyn rebill_billing::gateway::Gateway>) -> Self {
        let services = self.services_mut();
        *services = services.clone().with_gateway(gateway);
        self
    }

    /// Uses this vault (a persistent key, so tokens survive a restart).
    pub fn with_vault(mut self, vault: rebill_billing::vault::Vault) -> Self {
        let services = self.services_mut();
        *services = services.clone().with_vault(vault);
        self
    }

    /// Builds the real gateways configured for sites with `builder`.
    pub fn with_gateway_builder(mut self, builder: Arc<dyn rebill_app::platform::gateways::GatewayBuilder>) -> Self {
        let services = self.services_mut();
        *services = services.clone().with_gateway_builder(builder);
        self
    }
}

/// What the protocol layers learned about a request.
#[derive(Clone, Debug)]
pub struct RequestContext {
    pub version: ApiVersion,
    pub site: Site,
    pub key: ApiKey,
    pub wire: WireContext,
    /// "Now" on the site's clock (epoch seconds): the service's clock, moved on for a sandbox
    /// site whose clock was advanced. Every business time of the request uses it.
    pub now: i64,
}

/// The request asks for an invoice's PDF document (`Accept: application/pdf` on
/// `GET /v2/invoices/{invoice_number}`, without `application/xml`): set by the `Accept` layer (`layers::accept`), read by
/// the invoice lookup.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WantsPdf;

/// What inner layers learn about a request for its log line and metrics (site, API version,
/// the endpoint of the API table it was routed to).
#[derive(Clone, Default)]
pub(crate) struct LogFields(Arc<(OnceLock<i64>, OnceLock<ApiVersion>, OnceLock<&'static str>)>);

impl LogFields {
    pub(crate) fn endpoint(&self, name: &'static str) {
        let _ = self.0.2.set(name);
    }

    /// The endpoint routed to, if the request reached one.
    pub(crate) fn routed(&self) -> Option<&'static str> {
        self.0.2.get().copied()
    }

    pub(crate) fn site(&self, id: i64) {
        let _ = self.0.0.set(id);
    }

    pub(crate) fn version(&self, version: ApiVersion) {
        let _ = self.0.1.set(version);
    }

    /// The site and API version learned so far.
    pub(crate) fn learned(&self) -> (Option<i64>, Option<ApiVersion>) {
        (self.0.0.get().copied(), self.0.1.get().copied())
    }
}

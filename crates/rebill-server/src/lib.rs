//! The rebill HTTP service. Every `/v2/` request passes the protocol rules of the spec as
//! middleware layers (see [`layers`]): body size 413, `Accept` 406, `X-Api-Version` 400 and
//! deprecation headers, HTTP Basic 401, rate limit 429 with `X-RateLimit-*`, site standing 402,
//! read-only keys 403, `Content-Type` 415. Routing then uses the generated endpoint table (see
//! [`dispatch`]): 404 for unknown routes and routes newer than the version, 405 with `Allow`,
//! the endpoint's handler, or 501 naming an endpoint not built yet — never a fake success.
//! [`wire`] serves HTTP/1.1 with canonical header names and a bound on open connections; around
//! everything, a request body must arrive within a deadline (408) and every request is logged
//! in one line.

mod accounts;
mod billing_info;
mod coupons;
mod demo;
mod dispatch;
mod gift_cards;
mod handlers;
mod invoices;
pub mod js_library;
pub mod layers;
mod lists;
mod payments;
mod plans;
mod purchases;
mod request;
pub mod respond;
pub mod sandbox;
mod shipping_addresses;
mod subscriptions;
pub mod tokens;
mod views;
pub mod webhook_poster;
pub mod wire;

use std::sync::Arc;

use axum::Router;
use axum::middleware::{from_fn, from_fn_with_state};
use chrono::{DateTime, SecondsFormat, Utc};
use rebill_app::instant::parse_instant;
use rebill_store::{ApiKey, Site, Store};
use rebill_xml::{ApiVersion, WireContext};

/// Default largest request body (1 MiB).
pub const BODY_LIMIT: usize = 1 << 20;

pub use rebill_app::{Clock, FileClock, Services, SystemClock};

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
}

impl Default for Config {
    fn default() -> Self {
        Self {
            body_limit: BODY_LIMIT,
            deprecations: Vec::new(),
            body_timeout: BODY_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
            public_url: None,
            demo: false,
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
/// through `Deref`) and the service's settings.
#[derive(Clone)]
pub struct AppState {
    pub services: Services,
    pub config: Arc<Config>,
}

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.services
    }
}

impl AppState {
    /// State with the sandbox gateway and a vault over a random key that lives as long as the
    /// process (see [`AppState::with_vault`]).
    pub fn new(store: Store, clock: Arc<dyn Clock>, config: Config) -> Self {
        Self { services: Services::new(store, clock), config: Arc::new(config) }
    }

    /// Uses this gateway.
    pub fn with_gateway(mut self, gateway: Arc<dyn rebill_billing::gateway::Gateway>) -> Self {
        self.services = self.services.with_gateway(gateway);
        self
    }

    /// Uses this vault (a persistent key, so tokens survive a restart).
    pub fn with_vault(mut self, vault: rebill_billing::vault::Vault) -> Self {
        self.services = self.services.with_vault(vault);
        self
    }

    /// Builds the real gateways configured for sites with `builder`.
    pub fn with_gateway_builder(mut self, builder: Arc<dyn rebill_app::gateways::GatewayBuilder>) -> Self {
        self.services = self.services.with_gateway_builder(builder);
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

/// The service's router: the client-side library's endpoints under `/js/v1`, and every other
/// path through the API's protocol layers to the dispatch over the endpoint table.
/// Around everything, the request log (one line per request); every route reads its body
/// within the body deadline (408).
pub fn router(state: AppState) -> Router {
    Router::new()
        .nest(tokens::PREFIX, tokens::routes().layer(from_fn_with_state(state.clone(), layers::token_body_deadline)))
        .nest(js_library::PREFIX, js_library::v4_routes())
        .route("/sandbox/clock", axum::routing::post(sandbox::clock))
        .merge(if state.config.demo { demo::routes() } else { Router::new() })
        .fallback_service(api_router(state.clone()))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(layers::panic_response))
        .layer(from_fn(layers::request_log))
        .with_state(state)
}

/// The API (`/v2/…`): the protocol layers around the dispatch over the endpoint table.
fn api_router(state: AppState) -> Router {
    Router::new()
        .fallback(dispatch::dispatch)
        .layer(from_fn_with_state(state.clone(), layers::body_deadline))
        .layer(from_fn(layers::etag))
        .layer(from_fn(layers::content_type))
        .layer(from_fn(layers::read_only))
        .layer(from_fn(layers::standing))
        .layer(from_fn_with_state(state.clone(), layers::rate_limit))
        .layer(from_fn_with_state(state.clone(), layers::authenticate))
        .layer(from_fn_with_state(state.clone(), layers::api_version))
        .layer(from_fn(layers::accept))
        .layer(from_fn_with_state(state.clone(), layers::body_limit))
        .with_state(state)
}

/// Serves on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, state: AppState) -> std::io::Result<()> {
    let scheduler = tokio::spawn(rebill_app::scheduler::run(state.services.clone()));
    let max_connections = state.config.max_connections;
    let served = wire::serve(listener, router(state), max_connections).await;
    scheduler.abort();
    served
}

#[cfg(test)]
mod tests {
    use super::PublicUrl;

    #[test]
    fn public_urls_are_checked_and_trimmed() {
        let url = |text: &str| PublicUrl::parse(text).map(|u| u.as_str().to_owned());
        assert_eq!(url("https://billing.example.com/").as_deref(), Ok("https://billing.example.com"));
        assert_eq!(url("HTTP://10.0.0.5:8080/rebill//").as_deref(), Ok("http://10.0.0.5:8080/rebill"));
        for bad in ["", "billing.example.com", "ftp://x", "https://", "https:///path", "https://x/?q", "https://x/#f"] {
            assert!(PublicUrl::parse(bad).is_err(), "{bad}");
        }
        for bad in ["https://a@x", "https://x y", "https://x/<p>", "https://x/\"p"] {
            assert!(PublicUrl::parse(bad).is_err(), "{bad}");
        }
    }
}

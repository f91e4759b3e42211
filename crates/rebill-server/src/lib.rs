//! The rebill HTTP service: the adapter between the wire and the use cases of `rebill-app`.
//!
//! Every `/v2/` request passes the protocol rules of the spec as middleware layers (see
//! [`layers`]), in a fixed order: body size 413, `Accept` 406, `X-Api-Version` 400 and
//! deprecation headers, HTTP Basic 401, rate limit 429 with `X-RateLimit-*`, site standing 402,
//! read-only keys 403, `Content-Type` 415, `ETag`/304 on GETs; handlers never re-check them.
//! Routing then uses the generated endpoint table (`dispatch`): 404 for unknown routes and
//! routes newer than the version, 405 with `Allow`, the endpoint's handler, or 501 naming an
//! endpoint not built yet — never a fake success. [`wire`] serves HTTP/1.1 with header names
//! spelled as clients expect, at most [`Config::max_connections`] open connections and a 30 s
//! limit on request heads, and runs every request that writes (any method but `GET`, `HEAD` and
//! `OPTIONS`) to its end in a task of its own, also when its client hangs up; around
//! everything, a request body must arrive within
//! [`Config::body_timeout`] (408), a panic is a 500 that names no internals, and every request is
//! logged in one line (never a header, a body or a query value outside a few list parameters).
//!
//! # Handlers are adapters
//!
//! A handler decodes its request, calls one use case and encodes the answer. `handlers` binds
//! each built endpoint's id to its handler through the marker type of the same name
//! (`EndpointId::CreateAccount` → `Routed<api::CreateAccount>`), so a handler can decode only the
//! request body its table entry names and answer only its response body (or the later one from
//! the version the table names), with the table's status; another body type does not compile.
//! Handlers never call the store: they name domain values through `rebill_app::platform::model`
//! and `rebill-billing`, and only [`layers`] (authentication, rate limits, site standing) and
//! the shared state ([`AppState`]) use `rebill-store` (checked by `tests/layering.rs`). A use
//! case's `AppError` is answered by its kind ([`respond::app_error`]: 404 naming what is missing,
//! 422 field errors, 500 with the cause only logged) where an endpoint has no more precise
//! document. Hrefs and `Location` use [`Config::public_url`] when set, else the `Host` header.
//!
//! # Modules, by layer
//!
//! Top to bottom; a module names only its own layer or lower ones (checked by
//! `tests/modules.rs`): the router (this file) and the routes outside the API table
//! (`demo`, [`sandbox`]); [`layers`]; `dispatch`; `handlers`; the endpoint modules, which share
//! only the helpers below and never import each other (`accounts`, `billing_info`, `coupons`,
//! `gift_cards`, `invoices`, `payments`, `plans`, `purchases`, `shipping_addresses`,
//! `subscriptions`, [`tokens`], [`js_library`], [`webhook_poster`]); the helpers `request` and
//! `views`, then `lists`, then [`respond`], [`wire`] and [`metrics`] (the recorder, the request
//! metrics and the metrics listener); and `state` at the bottom.
//!
//! # Outside `/v2/`
//!
//! - [`tokens`]: the client-side library's token endpoint (`/js/v1`, JSON or JSONP, CORS), over
//!   `rebill_app::platform::tokens`; its answers carry no links.
//! - [`js_library`]: the library itself, embedded in the binary (`/js/v4/service.js`, the hosted
//!   field page with its own CSP, the `/js/v1` helper endpoints). Card fields are frames of
//!   rebill's origin that request the token themselves; the page gets only field states and the
//!   token id. The sources are in `js/`.
//! - [`sandbox`]: `POST /sandbox/clock`, a sandbox site moving its clock on, over
//!   `rebill_app::operations::clock`; its answer has no hrefs.
//! - `demo`: the demo checkout page (`rebill serve --demo`), calling the API inside rebill as the
//!   first sandbox site, never handing a key to the page.
//! - [`webhook_poster`]: the HTTP poster of webhook deliveries.
//!
//! [`serve`] also runs `rebill_app::operations::scheduler` in the background.

mod accounts;
mod billing_info;
mod coupons;
mod demo;
mod dispatch;
mod gift_cards;
mod handlers;
mod health;
mod invoices;
pub mod js_library;
pub mod layers;
pub mod lists;
pub mod metrics;
mod payments;
mod plans;
mod purchases;
mod request;
pub mod respond;
pub mod sandbox;
mod shipping_addresses;
mod state;
mod subscriptions;
pub mod tokens;
mod views;
pub mod webhook_poster;
pub mod wire;

use axum::Router;
use axum::extract::Request;
use axum::middleware::{from_fn, from_fn_with_state};
use layers::Rule;
use tower::ServiceBuilder;

pub use rebill_app::{Clock, FileClock, Services, SystemClock};
pub use state::{
    AppState, BODY_LIMIT, BODY_TIMEOUT, BadDeprecation, BadPublicUrl, Config, Deprecation, MAX_CONNECTIONS, PublicUrl,
    RequestContext, SHUTDOWN_GRACE,
};

/// The service's router: the client-side library's endpoints under `/js/v1`, and every other
/// path through the API's protocol layers to the dispatch over the endpoint table.
/// Around everything, the request log (one line per request); every route reads its body
/// within the body deadline (408).
///
/// The layers around everything and the API's protocol layers are each composed once, as one
/// stack (`ServiceBuilder`), and wrapped around the routes as a whole: `Router::layer` would
/// wrap every route in every layer, each level a boxed route that a request clones along with
/// all the levels below it.
pub fn router(state: AppState) -> Router {
    let routes = Router::new()
        .nest(tokens::PREFIX, tokens::routes().layer(from_fn_with_state(state.clone(), layers::token_body_deadline)))
        .nest(js_library::PREFIX, js_library::v4_routes())
        .route("/sandbox/clock", axum::routing::post(sandbox::clock))
        .route("/healthz", axum::routing::get(health::healthz))
        .route("/readyz", axum::routing::get(health::readyz))
        .merge(if state.config.demo { demo::routes() } else { Router::new() })
        .fallback_service(api_router(state.clone()))
        .with_state(state);
    Router::new().fallback_service(
        ServiceBuilder::new()
            .layer(from_fn(layers::request_log))
            .layer(tower_http::catch_panic::CatchPanicLayer::custom(layers::panic_response))
            .service(routes),
    )
}

/// The API (`/v2/…`): the protocol layers, outermost first, around the dispatch over the
/// endpoint table.
fn api_router(state: AppState) -> Router {
    // The endpoint table's routes, built now: a table that cannot be routed stops the service
    // at its start, not at its first request.
    rebill_models::routes();
    let dispatch = Router::new().fallback(dispatch::dispatch).with_state(state.clone());
    let body_limit = state.config.body_limit;
    Router::new().fallback_service(
        ServiceBuilder::new()
            .layer(Rule::new(move |request: &mut Request| layers::body_limit(body_limit, request)))
            .layer(Rule::new(layers::accept))
            .layer(from_fn_with_state(state.clone(), layers::api_version))
            .layer(from_fn_with_state(state.clone(), layers::authenticate))
            .layer(from_fn_with_state(state.clone(), layers::rate_limit))
            .layer(Rule::new(layers::standing))
            .layer(Rule::new(layers::read_only))
            .layer(Rule::new(layers::content_type))
            .layer(from_fn(layers::etag))
            .layer(from_fn_with_state(state, layers::body_deadline))
            .service(dispatch),
    )
}

/// Serves on `listener` until `shutdown` completes, then stops gracefully: no new connection,
/// requests in flight finish (also writes whose clients went away, see [`wire`]), the scheduler
/// finishes the run it is in — all within `Config::shutdown_grace` from the moment `shutdown`
/// completed. A scheduler run still going when the grace ends is stopped; the
/// jobs it held are claimed again when their leases end and run once more (every job is
/// idempotent, so nothing is billed twice).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let scheduler = tokio::spawn(rebill_app::operations::scheduler::run_until(state.services.clone(), stopped));
    let _ = state.scheduler.set(scheduler.abort_handle());
    let settings = tokio::spawn(state.store.clone().watch_settings());
    let max_connections = state.config.max_connections;
    let grace = state.config.shutdown_grace;
    // The grace runs from the moment the service is asked to stop.
    let asked = std::sync::OnceLock::new();
    let shutdown = async {
        shutdown.await;
        let _ = asked.set(tokio::time::Instant::now());
    };
    let served = wire::serve(listener, router(state), max_connections, shutdown, grace).await;
    let _ = stop.send(true);
    let left = grace.saturating_sub(asked.get().map_or(grace, |at| at.elapsed()));
    let abort = scheduler.abort_handle();
    if tokio::time::timeout(left, scheduler).await.is_err() {
        tracing::warn!(
            "the scheduler's run was stopped at the end of the grace; its jobs run again when their leases end"
        );
        abort.abort();
    }
    settings.abort();
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

//! The metrics exposition: `GET /metrics` in the Prometheus text format on a listener of its own
//! (`rebill serve --metrics-listen ADDR`, off by default), so it is never reachable where the API
//! is. Every metric is in the catalogue `rebill_app::platform::metrics`; this module records the
//! request metrics (from the request log layer) and the rate-limit refusals, and reads the
//! gauges that live in the database (webhook queue, scheduler lag) and the pools when scraped.
//!
//! The recorder is the `metrics-exporter-prometheus` one, installed once per process
//! ([`install`]). Until it is, nothing is recorded here and the use cases' recording does
//! nothing either.

use std::sync::OnceLock;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use rebill_app::platform::metrics::{self as catalogue, BUCKETS};

use crate::state::AppState;

/// Why the recorder could not be installed.
#[derive(Debug, thiserror::Error)]
#[error("the metrics recorder cannot be installed: {0}")]
pub struct MetricsError(String);

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process's recorder (once; later calls answer the same handle) and describes
/// every metric of the catalogue.
pub fn install() -> Result<PrometheusHandle, MetricsError> {
    if let Some(handle) = HANDLE.get() {
        return Ok(handle.clone());
    }
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_duration_seconds".to_owned()), BUCKETS)
        .map_err(|e| MetricsError(e.to_string()))?
        .install_recorder()
        .map_err(|e| MetricsError(e.to_string()))?;
    catalogue::describe();
    let handle = HANDLE.get_or_init(|| handle).clone();
    Ok(handle)
}

/// Whether a recorder is installed (the request path records only then).
pub(crate) fn enabled() -> bool {
    HANDLE.get().is_some()
}

/// The method as a label: one of the methods HTTP defines, else `other` (a request chooses its
/// method freely; a label must not).
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// Records one answered request (called by the request log layer).
pub(crate) fn request(endpoint: &'static str, method: &Method, status: StatusCode, elapsed: Duration) {
    if !enabled() {
        return;
    }
    let method = method_label(method);
    let status = status.as_u16().to_string();
    metrics::counter!(catalogue::HTTP_REQUESTS, "endpoint" => endpoint, "method" => method, "status" => status)
        .increment(1);
    metrics::histogram!(catalogue::HTTP_DURATION, "endpoint" => endpoint, "method" => method)
        .record(elapsed.as_secs_f64());
}

/// Records a request refused by the site's rate limit.
pub(crate) fn rate_limited(site: &str) {
    if enabled() {
        metrics::counter!(catalogue::RATE_LIMIT_REFUSALS, "site" => site.to_owned()).increment(1);
    }
}

/// How often the recorder's histograms are drained while nobody scrapes.
const UPKEEP: Duration = Duration::from_secs(5);

/// Serves `GET /metrics` on `listener` until the task is dropped (with the recorder's upkeep).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    handle: PrometheusHandle,
) -> std::io::Result<()> {
    let upkeep = handle.clone();
    let keeper = tokio::spawn(async move {
        let mut ticker = tokio::time::interval(UPKEEP);
        loop {
            ticker.tick().await;
            upkeep.run_upkeep();
        }
    });
    let app = Router::new().route("/metrics", axum::routing::get(scrape)).with_state((state, handle));
    let served = crate::wire::serve(listener, app, 16, std::future::pending(), Duration::ZERO).await;
    keeper.abort();
    served
}

/// `GET /metrics`: the gauges read now, then every metric in the text format.
async fn scrape(State((state, handle)): State<(AppState, PrometheusHandle)>) -> Response {
    match rebill_app::operations::health::gauges(&state).await {
        Ok(gauges) => {
            metrics::gauge!(catalogue::WEBHOOK_QUEUE).set(gauges.webhook_queue as f64);
            metrics::gauge!(catalogue::SCHEDULER_LAG).set(gauges.scheduler_lag_seconds as f64);
            for pool in &gauges.pools {
                let (name, in_use, idle) = (pool.pool, f64::from(pool.in_use()), f64::from(pool.idle));
                metrics::gauge!(catalogue::DB_CONNECTIONS, "pool" => name, "state" => "in_use").set(in_use);
                metrics::gauge!(catalogue::DB_CONNECTIONS, "pool" => name, "state" => "idle").set(idle);
            }
        }
        // The counters are still worth answering; the gauges keep their last values.
        Err(e) => tracing::warn!(error = %e, "reading the metrics' gauges from the database"),
    }
    let text = handle.render();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_come_from_a_fixed_set() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::from_bytes(b"BREW").expect("a method")), "other");
    }
}

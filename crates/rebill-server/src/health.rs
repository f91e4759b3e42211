//! Health for operators, outside the API and its layers (no key, no rate limit): `GET /healthz`
//! answers while the process serves; `GET /readyz` answers 200 when the database answers with
//! every migration applied and the scheduler runs, else 503. Both answer plain text without
//! details; the reason of a 503 goes to the log.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::state::AppState;

const TEXT: [(header::HeaderName, &str); 1] = [(header::CONTENT_TYPE, "text/plain; charset=utf-8")];

/// `GET /healthz`: the process is alive.
pub(crate) async fn healthz() -> Response {
    (StatusCode::OK, TEXT, "ok\n").into_response()
}

/// `GET /readyz`: the process can do its work.
pub(crate) async fn readyz(State(state): State<AppState>) -> Response {
    let scheduler = state.scheduler_running();
    if !scheduler {
        tracing::warn!("not ready: the scheduler is not running");
    }
    let database = rebill_app::operations::health::database_ready(&state).await;
    if scheduler && database {
        (StatusCode::OK, TEXT, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, TEXT, "not ready\n").into_response()
    }
}

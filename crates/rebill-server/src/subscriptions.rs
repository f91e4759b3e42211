//! Endpoints of this module (not built yet: `handles` refuses every id, so dispatch answers 501).

use axum::extract::Request;
use axum::response::Response;
use rebill_models::api::EndpointId;

use crate::AppState;
use crate::handlers::Call;

/// Whether this module serves the endpoint.
pub(crate) fn handles(id: EndpointId) -> bool {
    let _ = id;
    false
}

pub(crate) async fn handle(state: &AppState, call: &Call, request: Request) -> Response {
    let _ = (state, request);
    crate::respond::internal(&format!("{} routed to a module that does not serve it", call.endpoint.name))
}

/// Runs a scheduled subscription job (renewal, trial end, pause start or end, expiration, …).
pub(crate) async fn run_job(state: &AppState, job: &rebill_store::jobs::Job) -> Result<(), crate::scheduler::JobError> {
    let _ = state;
    Err(crate::scheduler::JobError::UnknownKind(job.kind.clone()))
}

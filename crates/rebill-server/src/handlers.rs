//! Endpoint handlers, thin over the store: each reads its request, calls the domain, writes the
//! response. `handle` answers `None` for an endpoint not built yet (the caller makes that a 501).

use axum::extract::Request;
use axum::response::Response;
use rebill_models::Endpoint;
use rebill_models::api::EndpointId;

use crate::{AppState, RequestContext};

/// One routed request.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub id: EndpointId,
    pub endpoint: &'static Endpoint,
    /// Path parameters, percent-decoded, in template order.
    pub params: Vec<String>,
    pub ctx: RequestContext,
    /// A HEAD request (list endpoints from 2.6: count only).
    pub head: bool,
}

pub(crate) async fn handle(state: &AppState, call: Call, request: Request) -> Option<Response> {
    let _ = (state, &request);
    match call.id {
        _ => None,
    }
}

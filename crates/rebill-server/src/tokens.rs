//! The token endpoint of the client-side library (`/js/v1/token`), outside `/v2/`: not built yet.

use axum::Router;

use crate::AppState;

/// Routes under `/js/v1`.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
}

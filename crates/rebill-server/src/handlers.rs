//! Endpoint handlers, thin over the store: each reads its request, calls the domain, writes the
//! response. `handle` answers `None` for an endpoint not built yet (the caller makes that a 501).

use axum::extract::Request;
use axum::response::Response;
use rebill_models::api::EndpointId;

use crate::request::Call;
use crate::{AppState, accounts, billing_info, invoices, plans, subscriptions};

pub(crate) async fn handle(state: &AppState, call: Call, request: Request) -> Option<Response> {
    // Only the owned request may be held across an await (a body is not `Sync`).
    let query = request.uri().query().map(str::to_owned);
    Some(match call.id {
        EndpointId::ListAccounts => accounts::list(state, &call, query.as_deref()).await,
        EndpointId::CreateAccount => accounts::create(state, &call, request).await,
        EndpointId::GetAccount => accounts::get(state, &call).await,
        EndpointId::UpdateAccount => accounts::update(state, &call, request).await,
        EndpointId::CloseAccount => accounts::close(state, &call).await,
        EndpointId::ReopenAccount => accounts::reopen(state, &call).await,
        EndpointId::GetAccountBalance => accounts::balance(state, &call).await,
        id if billing_info::handles(id) => billing_info::handle(state, &call, request).await,
        id if plans::handles(id) => plans::handle(state, &call, request).await,
        id if invoices::handles(id) => invoices::handle(state, &call, request).await,
        id if subscriptions::handles(id) => subscriptions::handle(state, &call, request).await,
        _ => return None,
    })
}

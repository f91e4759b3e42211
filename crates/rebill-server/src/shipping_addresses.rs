//! Shipping address endpoints: `GET/POST /v2/accounts/{account_code}/shipping_addresses` and
//! `GET/PUT/DELETE …/shipping_addresses/{shipping_address_id}`, over
//! [`rebill_app::customers::shipping_addresses`] (decisions in docs/shipping-addresses.md).
//!
//! - Create answers 201 with `Location`; an exact duplicate of an address the account holds
//!   answers the existing one the same way (nothing added). A 21st address is a 422
//!   `shipping_address.base` `too_many`.
//! - An id that is not an integer, or not one of the account's live addresses, is a 404.
//! - Delete answers 204; an address a live subscription ships to is refused with 422
//!   `shipping_address_in_use`.

// A refusal is the finished HTTP response, built once per request: its size does not matter.
#![allow(clippy::result_large_err)]

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use rebill_app::customers::shipping_addresses::{self, ShippingError};
use rebill_app::platform::error::{AppError, Missing};
use rebill_models::api::{self, EndpointId};
use rebill_models::validate::Operation;
use rebill_models::{ApiEndpoint, ShippingAddress};
use rebill_xml::WireContext;

use crate::lists::ListQuery;
use crate::request::{Routed, validated};
use crate::respond::{self, with_location};
use crate::state::AppState;
use crate::views::{shipping_address_view, shipping_fields};

/// The answer to a refused shipping-address operation.
fn shipping_error(ctx: &WireContext, error: ShippingError) -> Response {
    match error {
        ShippingError::InUse(uuid) => respond::error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "shipping_address_in_use",
            &format!(
                "This shipping address is used by subscription {uuid}; give the subscription another shipping \
                 address first."
            ),
        ),
        other => respond::app_error(ctx, "shipping_address", AppError::from(other)),
    }
}

/// The path's address id (not an integer: no such address).
fn address_id<E: ApiEndpoint>(call: &Routed<'_, E>) -> Result<i64, Response> {
    call.params[1].parse::<i64>().map_err(|_| {
        respond::missing(&Missing { resource: "ShippingAddress", key: "id", value: call.params[1].clone() })
    })
}

/// Reads, decodes and validates a `<shipping_address>` request body.
async fn address_request<E: ApiEndpoint<Request = ShippingAddress>>(
    state: &AppState,
    call: &Routed<'_, E>,
    request: Request,
    op: Operation,
) -> Result<ShippingAddress, Response> {
    let doc = call.decode(state, request).await?;
    validated(call, &doc, op)?;
    Ok(doc)
}

/// `GET /v2/accounts/{account_code}/shipping_addresses` (and HEAD: the count).
pub(crate) async fn list(
    state: &AppState,
    call: &Routed<'_, api::ListShippingAddresses>,
    query: Option<&str>,
) -> Response {
    let query = match ListQuery::parse(query, call.endpoint.filters) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    let code = &call.params[0];
    let page = match shipping_addresses::list(state, &call.context(), code, &query.page()).await {
        Ok(page) => page,
        Err(e) => return shipping_error(&call.ctx.wire, e),
    };
    let items: Vec<ShippingAddress> =
        if call.head { Vec::new() } else { page.items.iter().map(|a| shipping_address_view(code, a)).collect() };
    let path = call.endpoint.render(&[code]);
    call.answer_page(&path, &query, &items, page.next, page.total)
}

/// `POST /v2/accounts/{account_code}/shipping_addresses`: 201 with `Location`.
pub(crate) async fn create(
    state: &AppState,
    call: &Routed<'_, api::CreateShippingAddress>,
    request: Request,
) -> Response {
    let ctx = &call.ctx.wire;
    let code = &call.params[0];
    let doc = match address_request(state, call, request, Operation::Create).await {
        Ok(doc) => doc,
        Err(response) => return response,
    };
    match shipping_addresses::create(state, &call.context(), code, &shipping_fields(&doc)).await {
        Ok(resolved) => {
            let id = resolved.address.id.to_string();
            let location = EndpointId::GetShippingAddress.endpoint().render(&[code, &id]);
            with_location(call.answer(&shipping_address_view(code, &resolved.address)), ctx, &location)
        }
        Err(e) => shipping_error(ctx, e),
    }
}

/// `GET /v2/accounts/{account_code}/shipping_addresses/{shipping_address_id}`.
pub(crate) async fn get(state: &AppState, call: &Routed<'_, api::GetShippingAddress>) -> Response {
    let id = match address_id(call) {
        Ok(id) => id,
        Err(response) => return response,
    };
    let code = &call.params[0];
    match shipping_addresses::get(state, &call.context(), code, id).await {
        Ok(address) => call.answer(&shipping_address_view(code, &address)),
        Err(e) => shipping_error(&call.ctx.wire, e),
    }
}

/// `PUT /v2/accounts/{account_code}/shipping_addresses/{shipping_address_id}`: only the
/// elements sent change.
pub(crate) async fn update(
    state: &AppState,
    call: &Routed<'_, api::UpdateShippingAddress>,
    request: Request,
) -> Response {
    let id = match address_id(call) {
        Ok(id) => id,
        Err(response) => return response,
    };
    let doc = match address_request(state, call, request, Operation::Update).await {
        Ok(doc) => doc,
        Err(response) => return response,
    };
    let code = &call.params[0];
    match shipping_addresses::update(state, &call.context(), code, id, &shipping_fields(&doc)).await {
        Ok(address) => call.answer(&shipping_address_view(code, &address)),
        Err(e) => shipping_error(&call.ctx.wire, e),
    }
}

/// `DELETE /v2/accounts/{account_code}/shipping_addresses/{shipping_address_id}`: 204.
pub(crate) async fn delete(state: &AppState, call: &Routed<'_, api::DeleteShippingAddress>) -> Response {
    let id = match address_id(call) {
        Ok(id) => id,
        Err(response) => return response,
    };
    match shipping_addresses::delete(state, &call.context(), &call.params[0], id).await {
        Ok(()) => call.answer_empty(),
        Err(e) => shipping_error(&call.ctx.wire, e),
    }
}

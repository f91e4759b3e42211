//! Request plumbing shared by the endpoint modules: the routed [`Call`], reading a body within
//! the limit, decoding and validating a request document, query parameters, hrefs and the
//! refusals several endpoints share. Endpoint modules import this module (and `respond`,
//! `lists`), never each other.

// A refusal is the finished HTTP response, built once per request: its size does not matter.
#![allow(clippy::result_large_err)]

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use rebill_app::error::Missing;
use rebill_app::model::billing_info::BillingFields;
use rebill_models::api::EndpointId;
use rebill_models::validate::{Operation, Rejection, Validate, reject_decode, validate};
use rebill_models::{BankAccountType, BillingInfo, Endpoint};
use rebill_xml::{Href, Mode, XmlResource};

use crate::{AppState, RequestContext, respond};
use rebill_app::Context;
use rebill_app::payment_methods::BillingRequest;

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

impl Call {
    /// The business context of the request: its site and the site's "now".
    pub(crate) fn context(&self) -> Context {
        Context { site: self.ctx.site.clone(), now: self.ctx.now }
    }
}

/// The request body, at most `limit` bytes (413 beyond).
pub(crate) async fn read_body(request: Request, limit: usize) -> Result<axum::body::Bytes, Response> {
    axum::body::to_bytes(request.into_body(), limit).await.map_err(|e| {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(err) = source {
            if err.is::<http_body_util::LengthLimitError>() {
                return respond::error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "request_too_large",
                    &format!("Request bodies are limited to {limit} bytes."),
                );
            }
            source = err.source();
        }
        respond::error(StatusCode::BAD_REQUEST, "invalid_request", "The request body could not be read.")
    })
}

/// Reads and decodes a request document (400 `invalid_xml` or 422 for a refused one; an empty
/// body is not a document).
pub(crate) async fn decode<T: XmlResource>(state: &AppState, call: &Call, request: Request) -> Result<T, Response> {
    let ctx = &call.ctx.wire;
    let body = read_body(request, state.config.body_limit).await?;
    rebill_xml::from_xml::<T>(&body, ctx, Mode::Request).map_err(|e| respond::rejection(&reject_decode(&e), ctx))
}

/// Reads and decodes an optional request document (`None` when the body is empty or blank).
pub(crate) async fn decode_optional<T: XmlResource>(
    state: &AppState,
    call: &Call,
    request: Request,
) -> Result<Option<T>, Response> {
    let ctx = &call.ctx.wire;
    let bytes = read_body(request, state.config.body_limit).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    rebill_xml::from_xml::<T>(&bytes, ctx, Mode::Request)
        .map(Some)
        .map_err(|e| respond::rejection(&reject_decode(&e), ctx))
}

/// Validates a decoded request document for `op` (422 `<errors>`).
pub(crate) fn validated<T: Validate + XmlResource>(call: &Call, doc: &T, op: Operation) -> Result<(), Response> {
    let ctx = &call.ctx.wire;
    validate(doc, ctx, op).map_err(|errors| respond::rejection(&Rejection::Invalid(errors), ctx))
}

/// The query parameter `name`, if sent (the last one counts).
pub(crate) fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v.into_owned())
        .last()
}

/// The path of endpoint `id` with these parameters, as an href.
pub(crate) fn href(id: EndpointId, params: &[&str]) -> Href {
    Href::path(id.endpoint().render(params))
}

/// The plain values of a decoded `<billing_info>` request.
pub(crate) fn billing_request(info: &BillingInfo) -> BillingRequest {
    let unsupported = [
        ("paypal_billing_agreement_id", info.paypal_billing_agreement_id.is_some()),
        ("amazon_billing_agreement_id", info.amazon_billing_agreement_id.is_some()),
        ("external_hpp_type", info.external_hpp_type.is_some()),
    ]
    .iter()
    .find_map(|(element, given)| given.then_some(*element));
    BillingRequest {
        details: BillingFields {
            first_name: info.first_name.clone(),
            last_name: info.last_name.clone(),
            company: info.company.clone(),
            address1: info.address1.clone(),
            address2: info.address2.clone(),
            city: info.city.clone(),
            state: info.state.clone(),
            zip: info.zip.clone(),
            country: info.country.clone(),
            phone: info.phone.clone(),
            vat_number: info.vat_number.clone(),
            ip_address: info.ip_address.clone(),
            geo_code: info.geo_code.clone(),
            ..BillingFields::default()
        },
        token_id: info.token_id.clone(),
        number: info.number.clone(),
        month: info.month,
        year: info.year,
        verification_value: info.verification_value.clone(),
        routing_number: info.routing_number.clone(),
        account_number: info.account_number.clone(),
        account_type: info.account_type.as_ref().map(|t| {
            match t {
                BankAccountType::Checking => "checking",
                BankAccountType::Savings => "savings",
                BankAccountType::Unknown(other) => other.as_str(),
            }
            .to_owned()
        }),
        name_on_account: info.name_on_account.clone(),
        currency: info.currency.clone(),
        unsupported,
    }
}

/// 404 for an account code the site does not have.
pub(crate) fn account_not_found(code: &str) -> Response {
    respond::missing(&Missing::account(code))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    fn request(body: &'static [u8]) -> Request {
        Request::new(Body::from(body))
    }

    #[tokio::test]
    async fn bodies_are_read_up_to_the_limit() {
        let bytes = read_body(request(b"<account/>"), 10).await.expect("within the limit");
        assert_eq!(&bytes[..], b"<account/>");
        let refused = read_body(request(b"<account></account>"), 10).await.expect_err("over the limit");
        assert_eq!(refused.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let body = axum::body::to_bytes(refused.into_body(), 4096).await.expect("body");
        let text = String::from_utf8_lossy(&body);
        assert!(text.contains("<symbol>request_too_large</symbol>"), "{text}");
    }

    #[test]
    fn the_last_query_parameter_counts() {
        assert_eq!(query_param(Some("refund=none&refund=full"), "refund").as_deref(), Some("full"));
        assert_eq!(query_param(Some("a=1"), "refund"), None);
        assert_eq!(query_param(None, "refund"), None);
    }
}

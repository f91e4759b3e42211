//! Request plumbing shared by the endpoint modules: the routed [`Call`], reading a body within
//! the limit, decoding and validating a request document, query parameters, hrefs and the
//! refusals several endpoints share. Endpoint modules import this module (and `respond`,
//! `lists`), never each other.

// A refusal is the finished HTTP response, built once per request: its size does not matter.
#![allow(clippy::result_large_err)]

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rebill_app::platform::error::Missing;
use rebill_app::platform::model::billing_info::BillingFields;
use rebill_models::api::EndpointId;
use rebill_models::validate::{Operation, Rejection, Validate, reject_decode, validate};
use rebill_models::{ApiEndpoint, BankAccountType, BillingInfo, Endpoint, LaterResponse};
use rebill_xml::{Href, Mode, WireContext, XmlResource};
use std::marker::PhantomData;

use crate::lists::{self, ListBody, ListQuery};
use crate::respond;
use crate::state::{AppState, RequestContext};
use rebill_app::Context;
use rebill_app::customers::payment_methods::BillingRequest;
use rebill_app::platform::model::Position;

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

/// A routed call of endpoint `E`: the [`Call`] bound to the marker type of its table entry
/// (`rebill_models::api::*`), made only by the dispatch in `handlers.rs` (from the id whose name
/// is the marker's). The endpoint's body types come from the marker: the request decodes only
/// as `E::Request`, the answer is only `E::Response` (a list: its element type; an endpoint
/// whose resource changes at a version: `E::Later` from then on), written with the table's
/// status. A handler naming another type does not compile.
pub(crate) struct Routed<'c, E> {
    call: &'c Call,
    endpoint: PhantomData<fn() -> E>,
}

impl<E> std::ops::Deref for Routed<'_, E> {
    type Target = Call;

    fn deref(&self) -> &Call {
        self.call
    }
}

impl<'c, E: ApiEndpoint> Routed<'c, E> {
    /// `call` as a call of `E`; `None` when it was routed to another endpoint.
    pub(crate) fn bind(call: &'c Call) -> Option<Self> {
        is_endpoint::<E>(call.endpoint).then_some(Routed { call, endpoint: PhantomData })
    }

    /// Reads and decodes the request document (400 `invalid_xml` or 422 for a refused one; an
    /// empty body is not a document).
    pub(crate) async fn decode(&self, state: &AppState, request: Request) -> Result<E::Request, Response>
    where
        E::Request: XmlResource,
    {
        let ctx = &self.ctx.wire;
        let body = read_body(request, state.config.body_limit).await?;
        rebill_xml::from_xml::<E::Request>(&body, ctx, Mode::Request)
            .map_err(|e| respond::rejection(&reject_decode(&e), ctx))
    }

    /// Reads and decodes an optional request document (`None` when the body is empty or blank).
    pub(crate) async fn decode_optional(
        &self,
        state: &AppState,
        request: Request,
    ) -> Result<Option<E::Request>, Response>
    where
        E::Request: XmlResource,
    {
        let ctx = &self.ctx.wire;
        let bytes = read_body(request, state.config.body_limit).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        rebill_xml::from_xml::<E::Request>(&bytes, ctx, Mode::Request)
            .map(Some)
            .map_err(|e| respond::rejection(&reject_decode(&e), ctx))
    }

    /// The answer: `body` with the table's status. At a version where the table names a later
    /// resource ([`Routed::answer_by_version`]) this is a 500: the handler is wrong.
    pub(crate) fn answer(&self, body: &E::Response) -> Response
    where
        E::Response: XmlResource,
    {
        answer::<E>(&self.ctx.wire, body)
    }

    /// The answer of an endpoint whose resource changes at a version: `body` below it, `later(body)`
    /// from it on, with the table's status.
    pub(crate) fn answer_by_version(&self, body: E::Response, later: impl FnOnce(E::Response) -> E::Later) -> Response
    where
        E: LaterResponse,
        E::Response: XmlResource,
        E::Later: XmlResource,
    {
        answer_by_version::<E>(&self.ctx.wire, body, later)
    }

    /// The answer without a body (the table's status: 204, or 202 with a `Location`).
    pub(crate) fn answer_empty(&self) -> Response
    where
        E: ApiEndpoint<Response = ()>,
    {
        status::<E>().into_response()
    }

    /// A list page (HEAD: only the count): `items` of the table's element type, `X-Records`, `Link`.
    pub(crate) fn answer_page(
        &self,
        path: &str,
        query: &ListQuery,
        items: &[ListItem<E>],
        next: Option<Position>,
        total: i64,
    ) -> Response
    where
        E::Response: ListBody,
    {
        lists::page_response(&self.ctx.wire, E::ENDPOINT.list_root, path, query, items, next, total, self.head)
    }
}

/// Whether `endpoint` is the table entry of the marker type `E`.
fn is_endpoint<E: ApiEndpoint>(endpoint: &Endpoint) -> bool {
    std::ptr::eq(endpoint, E::ENDPOINT)
}

/// The table's success status of `E`.
fn status<E: ApiEndpoint>() -> StatusCode {
    StatusCode::from_u16(E::ENDPOINT.status).unwrap_or(StatusCode::OK)
}

/// `E`'s answer `body` in `ctx` (see [`Routed::answer`]).
fn answer<E: ApiEndpoint>(ctx: &WireContext, body: &E::Response) -> Response
where
    E::Response: XmlResource,
{
    if E::ENDPOINT.response_at(ctx.version) != E::ENDPOINT.response {
        return respond::invariant(&format!("{} answered its earlier resource at {}", E::ENDPOINT.name, ctx.version));
    }
    respond::resource(status::<E>(), body, ctx)
}

/// `E`'s answer `body` or `later(body)` in `ctx` (see [`Routed::answer_by_version`]).
fn answer_by_version<E>(ctx: &WireContext, body: E::Response, later: impl FnOnce(E::Response) -> E::Later) -> Response
where
    E: LaterResponse,
    E::Response: XmlResource,
    E::Later: XmlResource,
{
    if E::later_at(ctx.version) {
        respond::resource(status::<E>(), &later(body), ctx)
    } else {
        respond::resource(status::<E>(), &body, ctx)
    }
}

/// The element type of the list endpoint `E`.
pub(crate) type ListItem<E> = <<E as ApiEndpoint>::Response as ListBody>::Item;

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
    use rebill_models::api;
    use rebill_xml::{ApiVersion, Features};

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

    fn at(version: ApiVersion) -> WireContext {
        WireContext::new(version, Features::none(), "http://rebill.test")
    }

    async fn text(response: Response) -> String {
        let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.expect("body");
        String::from_utf8_lossy(&body).into_owned()
    }

    #[test]
    fn a_call_binds_only_to_the_marker_of_its_endpoint() {
        let create = EndpointId::CreateAccount.endpoint();
        assert!(is_endpoint::<api::CreateAccount>(create));
        // Same resource, other entries of the table.
        assert!(!is_endpoint::<api::UpdateAccount>(create));
        assert!(!is_endpoint::<api::GetAccount>(create));
    }

    #[tokio::test]
    async fn answers_carry_the_table_status_and_body() {
        let account = rebill_models::Account { account_code: Some("a".into()), ..Default::default() };
        let response = answer::<api::CreateAccount>(&at(ApiVersion::new(2, 11)), &account);
        assert_eq!(response.status(), StatusCode::CREATED);
        assert!(text(response).await.contains("<account_code>a</account_code>"));
        let response = answer::<api::GetAccount>(&at(ApiVersion::new(2, 11)), &account);
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(status::<api::CloseAccount>(), StatusCode::NO_CONTENT);
    }

    #[tokio::test]
    async fn a_response_that_changes_at_a_version_is_the_table_s_resource_at_each_version() {
        let invoice = || rebill_models::Invoice { invoice_number: Some(7), ..Default::default() };
        let wrap = |i: rebill_models::Invoice| rebill_models::InvoiceCollection {
            charge_invoice: Some(Box::new(i)),
            credit_invoices: Some(Vec::new()),
        };
        let before = at(ApiVersion::new(2, 9));
        let body = text(answer_by_version::<api::MarkInvoiceFailed>(&before, invoice(), wrap)).await;
        assert!(body.contains("<invoice ") && !body.contains("<invoice_collection"), "{body}");
        // The earlier resource is still right below the change.
        assert_eq!(answer::<api::MarkInvoiceFailed>(&before, &invoice()).status(), StatusCode::OK);

        let after = at(ApiVersion::new(2, 10));
        let response = answer_by_version::<api::CreateInvoice>(&after, invoice(), wrap);
        assert_eq!(response.status(), StatusCode::CREATED);
        let body = text(response).await;
        assert!(body.contains("<invoice_collection") && body.contains("<charge_invoice"), "{body}");
        // From the change on, answering the earlier resource is a handler's mistake: a 500.
        let wrong = answer::<api::MarkInvoiceFailed>(&after, &invoice());
        assert_eq!(wrong.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[test]
    fn the_last_query_parameter_counts() {
        assert_eq!(query_param(Some("refund=none&refund=full"), "refund").as_deref(), Some("full"));
        assert_eq!(query_param(Some("a=1"), "refund"), None);
        assert_eq!(query_param(None, "refund"), None);
    }
}

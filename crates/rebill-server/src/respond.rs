//! Response builders shared by the layers and the handlers: XML documents with the API's
//! content type, single-error documents and decode refusals.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use rebill_app::platform::error::{AppError, Missing};
use rebill_models::ApiError;
use rebill_models::validate::{Rejection, Violation, errors_document, single_error};
use rebill_xml::{ApiVersion, Features, Mode, WireContext, XmlResource};

/// Content type of every XML body.
pub const XML: &str = "application/xml; charset=utf-8";

/// An XML body with `status`.
pub fn xml(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static(XML))], body).into_response()
}

/// One resource document written for the request's context.
/// 200 with a PDF document (an invoice's).
pub fn pdf(bytes: Vec<u8>) -> Response {
    let mut response = (StatusCode::OK, bytes).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/pdf"));
    response
}

pub fn resource<T: XmlResource>(status: StatusCode, value: &T, ctx: &WireContext) -> Response {
    xml(status, rebill_xml::to_xml(value, ctx, Mode::Response))
}

/// An `<error>` document (symbol and description).
pub fn error(status: StatusCode, symbol: &str, description: &str) -> Response {
    api_error(status, &single_error(symbol, description))
}

/// An `<error>` document.
pub fn api_error(status: StatusCode, error: &ApiError) -> Response {
    let ctx = WireContext::new(ApiVersion::default(), Features::none(), "");
    xml(status, rebill_xml::to_xml(error, &ctx, Mode::Response))
}

/// 404 `not_found`.
pub fn not_found(description: &str) -> Response {
    error(StatusCode::NOT_FOUND, "not_found", description)
}

/// 404 naming what is missing (`Couldn't find Plan with plan_code = gold`).
pub fn missing(missing: &Missing) -> Response {
    not_found(&format!("Couldn't find {} with {} = {}", missing.resource, missing.key, missing.value))
}

/// The answer to a use case's error by its kind ([`AppError`]): 404 naming what is missing; 422
/// `<errors>` with the refused fields under `root` (`plan` makes `plan.plan_code`); 422
/// `declined` for a decline; 422 `invalid_transition` for a conflict; a 500 for the rest (the
/// cause is logged). Endpoints whose refusals have documents of their own (declines with their
/// transaction, a busy subscription) answer those before falling back to this.
pub fn app_error(ctx: &WireContext, root: &str, failure: AppError) -> Response {
    match failure {
        AppError::NotFound(m) => missing(&m),
        AppError::Refused(fields) => {
            let violations: Vec<Violation> = fields
                .into_iter()
                .map(|f| Violation { field: format!("{root}.{}", f.field), symbol: f.symbol, message: f.message })
                .collect();
            rejection(&Rejection::Invalid(errors_document(&violations)), ctx)
        }
        AppError::Declined(_) => error(StatusCode::UNPROCESSABLE_ENTITY, "declined", "The payment was declined."),
        AppError::Conflict(why) => error(StatusCode::UNPROCESSABLE_ENTITY, "invalid_transition", &why),
        AppError::Internal(cause) => internal(cause.as_ref()),
    }
}

/// A 500 that tells the client nothing about the cause (the cause is logged) — or, when the
/// cause is the database being unavailable (a lost connection, a failover under way:
/// `rebill_app::platform::error::database_unavailable`), [`unavailable`].
pub fn internal(cause: &(dyn std::error::Error + 'static)) -> Response {
    if rebill_app::platform::error::database_unavailable(cause) {
        tracing::warn!(%cause, "the database is unavailable");
        return unavailable();
    }
    invariant(cause)
}

/// Seconds a client is told to wait before retrying a request the database could not take
/// (`Retry-After`): about the time a failover takes.
pub const RETRY_AFTER_SECONDS: u64 = 5;

/// 503 `service_unavailable` with `Retry-After`: the database could not take the request now
/// (nothing was changed by it, or, for a COMMIT whose answer was lost, what it did is settled
/// as any unknown outcome is); the same request may succeed in a few seconds.
pub fn unavailable() -> Response {
    let mut response = error(
        StatusCode::SERVICE_UNAVAILABLE,
        "service_unavailable",
        "The service is temporarily unavailable; please retry in a few seconds.",
    );
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
    response
}

/// A 500 that tells the client nothing about the cause (the cause, an error or a message
/// naming a broken invariant, is logged).
pub fn invariant(cause: &dyn std::fmt::Display) -> Response {
    tracing::error!(%cause, "internal error");
    error(StatusCode::INTERNAL_SERVER_ERROR, "internal_server_error", "An internal error occurred; please retry later.")
}

/// The 500 of a request whose handler panicked: it tells the client nothing about the cause.
pub(crate) fn panicked() -> Response {
    invariant(&"a request handler panicked")
}

/// 400 `invalid_xml` or 422 validation errors for a refused request body.
pub fn rejection(rejection: &Rejection, ctx: &WireContext) -> Response {
    let status = StatusCode::from_u16(rejection.status()).unwrap_or(StatusCode::UNPROCESSABLE_ENTITY);
    xml(status, rejection.to_xml(ctx))
}

/// 422 `<errors>` with one field error.
pub fn field_error(ctx: &WireContext, field: &str, symbol: &'static str, message: &str) -> Response {
    let violation = Violation { field: field.to_owned(), symbol, message: message.to_owned() };
    rejection(&Rejection::Invalid(errors_document(&[violation])), ctx)
}

/// Adds `Location: {base}{path}` (the absolute URL of a created resource).
pub fn with_location(mut response: Response, ctx: &WireContext, path: &str) -> Response {
    match HeaderValue::from_str(&format!("{}{path}", ctx.base_url())) {
        Ok(v) => {
            response.headers_mut().insert(header::LOCATION, v);
            response
        }
        Err(e) => internal(&e),
    }
}

/// An epoch-seconds time as a response datetime.
pub fn time(secs: i64) -> Option<DateTime<Utc>> {
    DateTime::<Utc>::from_timestamp(secs, 0)
}

/// 204 answer to a CORS preflight.
pub fn preflight(request: &axum::extract::Request, methods: &'static str) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(methods));
    let asked = request.headers().get(header::ACCESS_CONTROL_REQUEST_HEADERS).cloned();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        asked.unwrap_or_else(|| HeaderValue::from_static("Content-Type")),
    );
    headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("86400"));
    response
}

/// Whether `name` is safe to write as a JavaScript callback: dotted identifiers, at most 128
/// characters.
pub fn valid_callback(name: &str) -> bool {
    let ident = |part: &str| {
        let mut chars = part.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
    };
    !name.is_empty() && name.len() <= 128 && name.split('.').all(ident)
}

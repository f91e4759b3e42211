//! The rebill HTTP service. Every `/v2/` request passes the protocol rules of the spec, in this
//! order, each a middleware layer: body size (413), `Accept` (406), `X-Api-Version` (400 for an
//! unsupported version), HTTP Basic authentication with a private key (401), production sites
//! not in good standing (402), read-only keys (403 for writes), `Content-Type` on POST and PUT (415). Routing then uses the generated
//! endpoint table: unknown paths and routes newer than the requested version are 404, a wrong
//! method is 405 with `Allow`, and endpoints whose behaviour is not built yet answer 501 with an
//! XML error naming the endpoint — never a fake success.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use rebill_models::validate::single_error;
use rebill_models::{ApiError, allowed_methods, api::ENDPOINTS, route};
use rebill_store::{ApiKey, Site, Store};
use rebill_xml::{ApiVersion, Features, Mode, WireContext};

/// Largest request body accepted (1 MiB).
pub const BODY_LIMIT: usize = 1 << 20;

/// The source of "now" (UTC epoch seconds); tests inject their own.
pub trait Clock: Send + Sync {
    fn now(&self) -> i64;
}

/// The system clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or_default()
    }
}

/// Shared state of the service.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub clock: Arc<dyn Clock>,
}

/// What the protocol layers learned about a request.
#[derive(Clone, Debug)]
pub struct RequestContext {
    pub version: ApiVersion,
    pub site: Site,
    pub key: ApiKey,
    pub wire: WireContext,
}

const XML: &str = "application/xml; charset=utf-8";

/// An XML `<error>` response.
pub fn error_response(status: StatusCode, symbol: &str, description: &str) -> Response {
    xml_response(status, &single_error(symbol, description))
}

fn xml_response(status: StatusCode, error: &ApiError) -> Response {
    let ctx = WireContext::new(ApiVersion::default(), Features::none(), "");
    let body = rebill_xml::to_xml(error, &ctx, Mode::Response);
    (status, [(header::CONTENT_TYPE, XML)], body).into_response()
}

/// The service's router.
pub fn router(state: AppState) -> Router {
    Router::new()
        .fallback(dispatch)
        .layer(middleware::from_fn(content_type))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .layer(middleware::from_fn(api_version))
        .layer(middleware::from_fn(accept))
        .layer(middleware::from_fn(body_limit))
        .with_state(state)
}

/// 413 for a declared body over the limit (bodies are also cut off while read).
async fn body_limit(request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len > BODY_LIMIT) {
        return error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            &format!("Request bodies are limited to {BODY_LIMIT} bytes."),
        );
    }
    next.run(request).await
}

fn accepts_xml(headers: &HeaderMap) -> bool {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else { return false };
    accept.split(',').any(|part| {
        let media = part.split(';').next().unwrap_or_default().trim();
        media.eq_ignore_ascii_case("application/xml")
    })
}

/// 406 unless the client accepts `application/xml`.
async fn accept(request: Request, next: Next) -> Response {
    if !accepts_xml(request.headers()) {
        return error_response(
            StatusCode::NOT_ACCEPTABLE,
            "not_acceptable",
            "The Accept header must be application/xml.",
        );
    }
    next.run(request).await
}

/// Parses `X-Api-Version` (absent: 2.0); an unsupported value is a 400.
async fn api_version(mut request: Request, next: Next) -> Response {
    let version = match request.headers().get("x-api-version") {
        None => ApiVersion::default(),
        Some(value) => match value.to_str().ok().map(ApiVersion::parse) {
            Some(Ok(v)) => v,
            _ => {
                let text = String::from_utf8_lossy(value.as_bytes()).into_owned();
                return error_response(
                    StatusCode::BAD_REQUEST,
                    "unsupported_api_version",
                    &format!(
                        "API version `{text}` is not supported; supported versions: {}.",
                        ApiVersion::supported_list()
                    ),
                );
            }
        },
    };
    request.extensions_mut().insert(version);
    let mut response = next.run(request).await;
    if let Ok(v) = HeaderValue::from_str(&version.to_string()) {
        response.headers_mut().insert("x-api-version", v);
    }
    response
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::WWW_AUTHENTICATE, "Basic realm=\"rebill\"")],
        "HTTP Basic: Access denied.",
    )
        .into_response()
}

/// The private key of an `Authorization: Basic` header (user name = key, empty password).
fn basic_key(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let key = text.split_once(':').map_or(text.as_str(), |(user, _)| user);
    (!key.is_empty()).then(|| key.to_owned())
}

/// 401 without a valid key; 402 for a production site not in good standing; 403 for a write
/// with a read-only key.
async fn authenticate(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let Some(key) = basic_key(request.headers()) else { return unauthorized() };
    let found = match state.store.authenticate(&key, state.clock.now()).await {
        Ok(found) => found,
        Err(_) => {
            return error_response(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", "An internal error occurred.");
        }
    };
    let Some((site, api_key)) = found else { return unauthorized() };
    if site.mode == rebill_store::Mode::Production && !site.good_standing {
        return error_response(
            StatusCode::PAYMENT_REQUIRED,
            "payment_required",
            "This site is not in good standing (unpaid invoices); the API is unavailable until it is.",
        );
    }
    let read = matches!(*request.method(), Method::GET | Method::HEAD);
    if api_key.read_only && !read {
        return error_response(
            StatusCode::FORBIDDEN,
            "forbidden",
            "This API key is read-only: it may only make GET and HEAD requests.",
        );
    }
    let version = request.extensions().get::<ApiVersion>().copied().unwrap_or_default();
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.to_string()))
        .unwrap_or_default();
    let features =
        if site.credit_memos { Features::none().with("credit_memos").unwrap_or_default() } else { Features::none() };
    let wire = WireContext::new(version, features, &format!("http://{host}"));
    request.extensions_mut().insert(RequestContext { version, site, key: api_key, wire });
    next.run(request).await
}

/// 415 unless a POST or PUT with a body says `application/xml; charset=utf-8` (an empty action
/// PUT such as `…/cancel` needs no Content-Type).
async fn content_type(request: Request, next: Next) -> Response {
    let writes = matches!(*request.method(), Method::POST | Method::PUT);
    // HTTP/1.1: without Content-Length or Transfer-Encoding there is no body.
    let headers = request.headers();
    let has_body = headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|n| n > 0);
    if writes && has_body {
        let ok = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|ct| {
            let mut parts = ct.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default();
            media.eq_ignore_ascii_case("application/xml")
                && parts
                    .all(|p| !p.to_ascii_lowercase().starts_with("charset=") || p.eq_ignore_ascii_case("charset=utf-8"))
        });
        if !ok {
            return error_response(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "POST and PUT bodies must be sent as application/xml; charset=utf-8.",
            );
        }
    }
    next.run(request).await
}

fn table_method(method: &Method) -> Option<rebill_models::Method> {
    Some(match *method {
        Method::GET | Method::HEAD => rebill_models::Method::Get,
        Method::POST => rebill_models::Method::Post,
        Method::PUT => rebill_models::Method::Put,
        Method::DELETE => rebill_models::Method::Delete,
        _ => return None,
    })
}

/// Routing over the generated endpoint table.
async fn dispatch(request: Request<Body>) -> Response {
    let path = request.uri().path().to_owned();
    let Some(ctx) = request.extensions().get::<RequestContext>().cloned() else {
        return error_response(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", "An internal error occurred.");
    };
    let not_found =
        || error_response(StatusCode::NOT_FOUND, "not_found", &format!("Couldn't find anything at {path}."));
    let found = table_method(request.method()).and_then(|m| route(&ENDPOINTS, m, &path));
    let Some((endpoint, _params)) = found else {
        let allowed: Vec<&str> =
            allowed_methods(&ENDPOINTS, &path, &ctx.wire).into_iter().map(|m| m.as_str()).collect();
        if allowed.is_empty() {
            return not_found();
        }
        let mut response = error_response(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            &format!("{} is not valid at {path}; allowed: {}.", request.method(), allowed.join(", ")),
        );
        if let Ok(v) = HeaderValue::from_str(&allowed.join(", ")) {
            response.headers_mut().insert(header::ALLOW, v);
        }
        return response;
    };
    if !endpoint.available(&ctx.wire) {
        return not_found();
    }
    error_response(
        StatusCode::NOT_IMPLEMENTED,
        "not_implemented",
        &format!(
            "The endpoint {} ({} {}) is not implemented yet.",
            endpoint.name,
            endpoint.method.as_str(),
            endpoint.path
        ),
    )
}

/// Serves on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, state: AppState) -> std::io::Result<()> {
    axum::serve(listener, router(state)).await
}

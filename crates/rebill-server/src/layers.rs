//! The protocol rules of every `/v2/` request, one middleware layer each, outermost first:
//! body size (413), `Accept` (406), `X-Api-Version` (400 unsupported or sunset; deprecation
//! headers), HTTP Basic authentication (401), rate limit (429 and the `X-RateLimit-*` headers),
//! site standing (402), read-only keys (403), `Content-Type` on writes (415; a body without one
//! is read as XML), and innermost `ETag` / `If-None-Match` (304) on GETs.
//!
//! A rule that decides from the request alone (body size, `Accept`, standing, read-only keys,
//! `Content-Type`) is a [`Rule`] layer, which neither boxes its inner service nor its future; a
//! rule that awaits something or changes the response is an `axum` `from_fn` layer.
//!
//! Around every route (the API, `/js/v1` and `/sandbox/clock`): the request log
//! ([`request_log`], one line per request at info). Innermost, just before the handler, the body
//! deadline ([`body_deadline`]: the whole body must arrive within `Config::body_timeout`, else
//! 408); `/js/v1` has its own ([`token_body_deadline`]) and the sandbox clock reads its body
//! within the same deadline after authenticating ([`read_body`]).

use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use rebill_store::Mode as SiteMode;
use rebill_xml::{ApiVersion, Features, WireContext};

use crate::respond;
use crate::state::{AppState, LogFields, RequestContext, WantsPdf};

pub(crate) static X_API_VERSION: HeaderName = HeaderName::from_static("x-api-version");
pub(crate) static SERVICE_DEPRECATED: HeaderName = HeaderName::from_static("service-deprecated");
pub(crate) static SERVICE_SUNSET_DATE: HeaderName = HeaderName::from_static("service-sunset-date");
pub(crate) static X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
pub(crate) static X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
pub(crate) static X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// A handler that panicked: a 500 telling the client nothing about the cause.
pub(crate) fn panic_response(_cause: Box<dyn std::any::Any + Send + 'static>) -> Response {
    respond::panicked()
}

/// A protocol rule that decides from the request alone: it answers a request it refuses, or
/// lets it through (possibly marking it). As a layer ([`Rule::new`]) it costs nothing per
/// request beyond the check: its future is the inner service's, or the refusal, never boxed.
#[derive(Clone)]
pub struct Rule<F>(F);

impl<F> Rule<F>
where
    F: Fn(&mut Request) -> Option<Response> + Clone,
{
    /// The layer of the rule `check`: `Some` is the answer to a refused request.
    pub fn new(check: F) -> Self {
        Self(check)
    }
}

impl<S, F: Clone> tower::Layer<S> for Rule<F> {
    type Service = RuleService<S, F>;

    fn layer(&self, inner: S) -> Self::Service {
        RuleService { inner, check: self.0.clone() }
    }
}

/// The service of a [`Rule`] around `S`.
#[derive(Clone)]
pub struct RuleService<S, F> {
    inner: S,
    check: F,
}

impl<S, F> tower::Service<Request> for RuleService<S, F>
where
    S: tower::Service<Request, Response = Response, Error = std::convert::Infallible>,
    F: Fn(&mut Request) -> Option<Response>,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures_util::future::Either<std::future::Ready<Result<Response, Self::Error>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        match (self.check)(&mut request) {
            Some(refused) => futures_util::future::Either::Left(std::future::ready(Ok(refused))),
            None => futures_util::future::Either::Right(self.inner.call(request)),
        }
    }
}

/// 413 for a declared body over `limit` bytes (bodies are also cut off while read).
pub fn body_limit(limit: usize, request: &mut Request) -> Option<Response> {
    let declared =
        request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    declared.is_some_and(|len| len > limit as u64).then(|| {
        respond::error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            &format!("Request bodies are limited to {limit} bytes."),
        )
    })
}

fn accepts(headers: &HeaderMap, wanted: &str) -> bool {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else { return false };
    accept.split(',').any(|part| {
        let media = part.split(';').next().unwrap_or_default().trim();
        media.eq_ignore_ascii_case(wanted)
    })
}

/// 406 unless the client accepts `application/xml`, or `application/pdf` on the lookup of an
/// invoice (its PDF; errors are still XML documents, as clients read them).
pub fn accept(request: &mut Request) -> Option<Response> {
    if !accepts(request.headers(), "application/xml") {
        let invoice_lookup = request.method() == axum::http::Method::GET
            && crate::dispatch::endpoint_of(request.method(), request.uri().path())
                == Some(rebill_models::api::EndpointId::GetInvoice);
        if !(invoice_lookup && accepts(request.headers(), "application/pdf")) {
            return Some(respond::error(
                StatusCode::NOT_ACCEPTABLE,
                "not_acceptable",
                "The Accept header must be application/xml (or application/pdf for an invoice).",
            ));
        }
        request.extensions_mut().insert(WantsPdf);
    }
    None
}

/// Parses `X-Api-Version` (absent: 2.0). An unsupported version, or a deprecated one past its
/// sunset, is a 400; a deprecated one answers with `Service-Deprecated` and `Service-Sunset-Date`.
pub async fn api_version(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let version = match request.headers().get(&X_API_VERSION) {
        None => ApiVersion::default(),
        Some(value) => match value.to_str().ok().map(ApiVersion::parse) {
            Some(Ok(v)) => v,
            _ => {
                let text = String::from_utf8_lossy(value.as_bytes()).into_owned();
                return respond::error(
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
    let deprecation = state.config.deprecation(version);
    if let Some(d) = deprecation
        && state.clock.now() >= d.sunset
    {
        return respond::error(
            StatusCode::BAD_REQUEST,
            "unsupported_api_version",
            &format!(
                "API version {version} was sunset at {} and is no longer accessible; supported versions: {}.",
                d.sunset_text(),
                state.config.available_list(state.clock.now())
            ),
        );
    }
    request.extensions_mut().insert(version);
    if let Some(log) = request.extensions().get::<LogFields>() {
        log.version(version);
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&version.to_string()) {
        headers.insert(X_API_VERSION.clone(), v);
    }
    if let Some(d) = deprecation {
        headers.insert(SERVICE_DEPRECATED.clone(), HeaderValue::from_static("TRUE"));
        if let Ok(v) = HeaderValue::from_str(&d.sunset_text()) {
            headers.insert(SERVICE_SUNSET_DATE.clone(), v);
        }
    }
    response
}

pub(crate) fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::WWW_AUTHENTICATE, "Basic realm=\"rebill\"")],
        "HTTP Basic: Access denied.",
    )
        .into_response()
}

/// The private key of an `Authorization: Basic` header (user name = key, empty password).
pub fn basic_key(headers: &HeaderMap) -> Option<String> {
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

/// The base of hrefs and `Location`: the configured public URL, or else the scheme, host and
/// port the client called (local development).
pub fn base_url(state: &AppState, request: &Request) -> String {
    if let Some(url) = &state.config.public_url {
        return url.as_str().to_owned();
    }
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic()) && !h.contains(['/', '<', '>', '"']))
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.to_string()))
        .unwrap_or_else(|| "localhost".to_owned());
    format!("http://{host}")
}

/// 401 without a valid key; otherwise the request carries its [`RequestContext`].
pub(crate) async fn authenticate(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let Some(key) = basic_key(request.headers()) else { return unauthorized() };
    let found = match state.store.authenticate(&key, state.clock.now()).await {
        Ok(found) => found,
        Err(e) => return respond::internal(&e),
    };
    let Some((site, api_key)) = found else { return unauthorized() };
    let version = request.extensions().get::<ApiVersion>().copied().unwrap_or_default();
    let features =
        if site.credit_memos { Features::none().with("credit_memos").unwrap_or_default() } else { Features::none() };
    let wire = WireContext::new(version, features, &base_url(&state, &request));
    if let Some(log) = request.extensions().get::<LogFields>() {
        log.site(site.id);
    }
    let now = site.now(state.clock.now());
    request.extensions_mut().insert(RequestContext { version, site, key: api_key, wire, now });
    next.run(request).await
}

fn context(request: &Request) -> Option<&RequestContext> {
    request.extensions().get::<RequestContext>()
}

/// The site's rate limit (sliding five-minute window of one-minute buckets, shared by every
/// process on the database): 429 when over, `X-RateLimit-*` headers on every authenticated
/// response. Sandbox sites count every request, production sites only GET and HEAD.
pub(crate) async fn rate_limit(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(ctx) = context(&request) else { return next.run(request).await };
    let site = ctx.site.clone();
    let counted = site.mode == SiteMode::Sandbox || matches!(*request.method(), Method::GET | Method::HEAD);
    let decision = match state.store.rate_limit(&site, counted, state.clock.now()).await {
        Ok(d) => d,
        Err(e) => return respond::internal(&e),
    };
    let mut response = if decision.allowed {
        next.run(request).await
    } else {
        crate::metrics::rate_limited(&site.name);
        respond::error(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_exceeded",
            &format!(
                "Too many requests: this site may make {} requests in a sliding five-minute window; retry after {}.",
                decision.limit, decision.reset
            ),
        )
    };
    let headers = response.headers_mut();
    headers.insert(X_RATELIMIT_LIMIT.clone(), HeaderValue::from(decision.limit));
    headers.insert(X_RATELIMIT_REMAINING.clone(), HeaderValue::from(decision.remaining));
    headers.insert(X_RATELIMIT_RESET.clone(), HeaderValue::from(decision.reset));
    response
}

/// 402 for a production site not in good standing.
pub(crate) fn standing(request: &mut Request) -> Option<Response> {
    let ctx = context(request)?;
    (ctx.site.mode == SiteMode::Production && !ctx.site.good_standing).then(|| {
        respond::error(
            StatusCode::PAYMENT_REQUIRED,
            "payment_required",
            "This site is not in good standing (unpaid invoices); the API is unavailable until it is.",
        )
    })
}

/// 403 for a write with a read-only key.
pub(crate) fn read_only(request: &mut Request) -> Option<Response> {
    let read = matches!(*request.method(), Method::GET | Method::HEAD);
    (!read && context(request).is_some_and(|ctx| ctx.key.read_only)).then(|| {
        respond::error(
            StatusCode::FORBIDDEN,
            "forbidden",
            "This API key is read-only: it may only make GET and HEAD requests.",
        )
    })
}

/// Whether a request has a body (HTTP/1.1: without Content-Length or Transfer-Encoding it has none).
pub fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|n| n > 0)
}

/// 415 when a POST or PUT body says it is something other than `application/xml` in UTF-8. A
/// body without a Content-Type is read as XML (released clients send one so), and an empty
/// action PUT such as `…/cancel` needs none.
pub fn content_type(request: &mut Request) -> Option<Response> {
    let writes = matches!(*request.method(), Method::POST | Method::PUT);
    if !writes || !has_body(request.headers()) {
        return None;
    }
    let given = request.headers().get(header::CONTENT_TYPE)?;
    let ok = given.to_str().ok().is_some_and(|ct| {
        let mut parts = ct.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        media.eq_ignore_ascii_case("application/xml")
            && parts.all(|p| !p.to_ascii_lowercase().starts_with("charset=") || p.eq_ignore_ascii_case("charset=utf-8"))
    });
    (!ok).then(|| {
        respond::error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "POST and PUT bodies must be sent as application/xml; charset=utf-8.",
        )
    })
}

/// `ETag` on every successful GET (a strong validator: 128 bits of the body's BLAKE3 hash; the
/// body is already specific to the API version and site features), and 304 without a body when
/// `If-None-Match` holds it.
pub async fn etag(request: Request, next: Next) -> Response {
    if request.method() != Method::GET {
        return next.run(request).await;
    }
    let if_none_match = request.headers().get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let response = next.run(request).await;
    if response.status() != StatusCode::OK {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes,
        Err(e) => return respond::internal(&e),
    };
    let tag = format!("\"{}\"", &blake3::hash(&bytes).to_hex()[..32]);
    let matched = if_none_match.is_some_and(|list| {
        list.split(',').map(|t| t.trim()).any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == tag)
    });
    if let Ok(v) = HeaderValue::from_str(&tag) {
        parts.headers.insert(header::ETAG, v);
    }
    if matched {
        parts.status = StatusCode::NOT_MODIFIED;
        parts.headers.remove(header::CONTENT_TYPE);
        parts.headers.remove(header::CONTENT_LENGTH);
        return Response::from_parts(parts, axum::body::Body::empty());
    }
    Response::from_parts(parts, axum::body::Body::from(bytes))
}

/// Why a body could not be buffered.
enum BodyFailure {
    TooLarge,
    Unreadable,
    TimedOut,
}

/// Reads a whole body of at most `limit` bytes within `timeout`.
async fn read_within(body: axum::body::Body, limit: usize, timeout: Duration) -> Result<Bytes, BodyFailure> {
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => {
            let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
            while let Some(err) = source {
                if err.is::<http_body_util::LengthLimitError>() {
                    return Err(BodyFailure::TooLarge);
                }
                source = err.source();
            }
            Err(BodyFailure::Unreadable)
        }
        Err(_) => Err(BodyFailure::TimedOut),
    }
}

fn timeout_message(timeout: Duration) -> String {
    format!("The request body did not arrive within {} seconds.", timeout.as_secs_f64())
}

/// The XML answer to a body that could not be read (408 closes the connection).
fn xml_body_failure(failure: BodyFailure, limit: usize, timeout: Duration) -> Response {
    match failure {
        BodyFailure::TooLarge => respond::error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            &format!("Request bodies are limited to {limit} bytes."),
        ),
        BodyFailure::Unreadable => {
            respond::error(StatusCode::BAD_REQUEST, "invalid_request", "The request body could not be read.")
        }
        BodyFailure::TimedOut => {
            let mut response =
                respond::error(StatusCode::REQUEST_TIMEOUT, "request_timeout", &timeout_message(timeout));
            response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            response
        }
    }
}

/// Reads the whole body of a request outside the API's layers (the sandbox clock, after its
/// authentication) within `Config::body_timeout`: 413, 400 or 408 as [`body_deadline`].
pub(crate) async fn read_body(state: &AppState, request: Request) -> Result<Bytes, Response> {
    let (limit, timeout) = (state.config.body_limit, state.config.body_timeout);
    read_within(request.into_body(), limit, timeout).await.map_err(|f| xml_body_failure(f, limit, timeout))
}

/// Reads the whole request body before the handler sees it, within `Config::body_timeout` from
/// the end of the request head: a body that stalls (fewer bytes than its Content-Length, a chunk
/// that never ends) gets 408 `request_timeout` and the connection is closed, so no client can
/// hold a connection open by sending slowly. It sits innermost, after every refusal that needs
/// no body (401, 429, 402, 403, 415): a request refused anyway is answered without reading its
/// body, and only authenticated requests are buffered (at most `Config::body_limit` bytes, 413
/// beyond). The handler then reads the buffered body.
pub(crate) async fn body_deadline(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if !has_body(request.headers()) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let (limit, timeout) = (state.config.body_limit, state.config.body_timeout);
    match read_within(body, limit, timeout).await {
        Ok(bytes) => next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await,
        Err(failure) => xml_body_failure(failure, limit, timeout),
    }
}

/// [`body_deadline`] for the token library's endpoints (`/js/v1`, public: the site is named in
/// the body): at most [`crate::tokens::TOKEN_BODY_LIMIT`] bytes are buffered, and failures are
/// answered in the library's JSON (`{"error": {"code", "message"}}`, any origin).
pub(crate) async fn token_body_deadline(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if !has_body(request.headers()) {
        return next.run(request).await;
    }
    let limit = crate::tokens::TOKEN_BODY_LIMIT.min(state.config.body_limit);
    let timeout = state.config.body_timeout;
    let declared =
        request.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    let (parts, body) = request.into_parts();
    let read = if declared.is_some_and(|len| len > limit as u64) {
        Err(BodyFailure::TooLarge)
    } else {
        read_within(body, limit, timeout).await
    };
    let (status, code, message) = match read {
        Ok(bytes) => return next.run(Request::from_parts(parts, axum::body::Body::from(bytes))).await,
        Err(BodyFailure::TooLarge) => {
            (StatusCode::PAYLOAD_TOO_LARGE, "invalid-parameter", format!("Requests are limited to {limit} bytes."))
        }
        Err(BodyFailure::Unreadable) => {
            (StatusCode::BAD_REQUEST, "api-error", "The request body could not be read.".to_owned())
        }
        Err(BodyFailure::TimedOut) => (StatusCode::REQUEST_TIMEOUT, "api-error", timeout_message(timeout)),
    };
    let body = serde_json::json!({ "error": { "code": code, "message": message } }).to_string();
    let mut response = (
        status,
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=utf-8")),
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*")),
        ],
        body,
    )
        .into_response();
    if status == StatusCode::REQUEST_TIMEOUT {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Query parameters whose values are logged; every other parameter is logged by name only
/// (values such as card numbers in a JSONP token call, e-mail addresses or codes never reach
/// the log).
pub const LOGGED_QUERY_VALUES: &[&str] =
    &["per_page", "cursor", "sort", "order", "state", "begin_time", "end_time", "type", "_method"];

/// The longest path or query written to the log (longer ones are cut, marked with `…`).
const LOGGED_MAX: usize = 256;

fn cut(text: &str) -> String {
    if text.len() <= LOGGED_MAX {
        return text.to_owned();
    }
    let mut end = LOGGED_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The query as logged: parameter names, with values only for [`LOGGED_QUERY_VALUES`].
pub fn loggable_query(query: &str) -> String {
    let parts: Vec<String> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decoded = percent_encoding::percent_decode_str(name).decode_utf8_lossy();
            if LOGGED_QUERY_VALUES.contains(&decoded.as_ref()) { format!("{name}={value}") } else { name.to_owned() }
        })
        .collect();
    cut(&parts.join("&"))
}

/// The endpoint label of a request the API table did not route: the route outside the API its
/// path is under, or `unrouted`.
fn route_label(path: &str) -> &'static str {
    let under = |prefix: &str| path == prefix || path.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('/'));
    if under(crate::tokens::PREFIX) {
        "tokens"
    } else if under(crate::js_library::PREFIX) {
        "js"
    } else if path == "/healthz" {
        "healthz"
    } else if path == "/readyz" {
        "readyz"
    } else if path == "/sandbox/clock" {
        "sandbox_clock"
    } else if under("/demo") {
        "demo"
    } else {
        "unrouted"
    }
}

/// One line per request at info (target `rebill::request`): method, path, query (see
/// [`loggable_query`]), status, duration, site id and API version when known. Never a header
/// value (so never `Authorization`) and never a body. Records the request's metrics too
/// (`crate::metrics::request`).
pub(crate) async fn request_log(mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let uri = request.uri().clone();
    let fields = LogFields::default();
    request.extensions_mut().insert(fields.clone());
    let response = next.run(request).await;
    let endpoint = fields.routed().unwrap_or_else(|| route_label(uri.path()));
    crate::metrics::request(endpoint, &method, response.status(), started.elapsed());
    // The line's text is made only when it is written.
    if !tracing::enabled!(target: "rebill::request", tracing::Level::INFO) {
        return response;
    }
    let path = cut(uri.path());
    let query = uri.query().map(loggable_query).unwrap_or_default();
    let (site, version) = fields.learned();
    let site = site.map(|s| s.to_string()).unwrap_or_else(|| "-".to_owned());
    let version = version.map(|v| v.to_string()).unwrap_or_else(|| "-".to_owned());
    tracing::info!(
        target: "rebill::request",
        method = %method,
        path = %path,
        query = %query,
        status = response.status().as_u16(),
        duration_ms = format_args!("{:.1}", started.elapsed().as_secs_f64() * 1000.0),
        site = %site,
        api_version = %version,
        "request"
    );
    response
}

#[cfg(test)]
mod tests {
    use super::route_label;

    #[test]
    fn requests_outside_the_api_table_are_labelled_by_route() {
        assert_eq!(route_label("/js/v1/token"), "tokens");
        assert_eq!(route_label("/js/v4/service.js"), "js");
        assert_eq!(route_label("/js/v44"), "unrouted");
        assert_eq!(route_label("/healthz"), "healthz");
        assert_eq!(route_label("/healthzz"), "unrouted");
        assert_eq!(route_label("/demo"), "demo");
        assert_eq!(route_label("/v2/whatever"), "unrouted");
    }
}

//! The client-side library, embedded in the binary (`rebill serve` needs no other file), and the
//! helper endpoints a merchant page's library calls besides the token endpoint:
//!
//! - `GET /js/v4/service.js` (the `service` global) and `GET /js/v4/service.css` (the optional
//!   stylesheet): cached for a day by browsers and shared caches, revalidated through an `ETag`
//!   (a hash of the content; `If-None-Match` answers 304). The URL holds no version, so the
//!   lifetime stays at a day: a new rebill reaches every page by the next day.
//! - `GET /js/v1/field.html` (and `field-canary.html`, the same page): the hosted field page that
//!   merchant pages of any origin frame, with a Content-Security-Policy of its own (scripts from
//!   rebill only: no inline script, no `eval`; requests to rebill only). Its script and base
//!   stylesheet are `GET /js/v1/field.js` and `GET /js/v1/field.css`.
//! - `GET /js/v1/risk/preflights` → `{"preflights":[]}`, `GET /js/v1/risk/info` →
//!   `{"profiles":[]}`, `GET /js/v1/engage/settings` → the JSON error `engage-not-enabled` (404),
//!   `POST /js/v1/events` → 200 `{}` (the body is read and dropped). Each also answers JSONP
//!   (`callback=NAME`, always status 200) and CORS preflights, like the token endpoint.
//!
//! The field page speaks the bus protocol of the token-library reference (§2, §9), for rebill's
//! `service.js` and for merchant pages that run the original v4 library unchanged with its `api`
//! at `/js/v1`: the field config in the URL fragment (the page configuration under `service`, or
//! `recurly` from the original library); messages `{event, body, groupId}` and the JSON-string
//! form (`service_event`/`service_message`, `recurly_event`/`recurly_message`); from the fields
//! `hostedField:ready`, `state:change`, `focus`, `blur`, `submit`, `tab:previous`, `tab:next`;
//! from the page `hostedField:configure`, `hostedFields:configure`, `hostedFields:ready`,
//! `hostedFields:state:change`, `hostedField:<type>:focus!`, `destroy` and `token:init {id,
//! inputs}`, which the broker field (`card`, else `number`) answers after `risk/preflights` and
//! `POST token` with `token:done:<id> {err, token}` (`err` a plain object); and Elements (a field
//! whose config has an `elementId`): `element:<id>:ready|state:change|focus|blur|submit|tab:*`
//! out, `element:<id>:configure!`, `element:<id>:focus!`, `elements:ready!` and
//! `elements:peer-announce {ids}` in, the broker reading only the frames of its set. Auto-advance
//! runs number → expiry → cvv inside the combined field and month → year → cvv across the
//! individual fields (a field focuses its same-origin sibling). A font from the public web-font
//! catalogue never delays the field; when it is not there within a bound the field keeps the rest
//! of the stack. Where rebill differs:
//! - a field posts to the page with the page's origin as target; only the ready announcement
//!   (the type and the empty initial state) goes to `*`, and only in browsers without
//!   `location.ancestorOrigins`, before the page's first message pins its origin; a string
//!   message (which has no group) is taken only once the origin is pinned;
//! - not spoken: co-badged cards (`coBadge:ready`), and an `inputType` changed by a restyle;
//! - fields not ready within `timeout` make the page emit `error` with the code
//!   `hosted-fields-timeout`.
//!
//! The sources live in `crates/rebill-server/js/`: `core.js` (pure parts shared by the page and
//! the field: card brands, Luhn, formatting, validation, option merging) is wrapped together with
//! `service.js` or `field.js` into one function scope per served script, so the page gains only
//! the `service` global.

use std::sync::LazyLock;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::respond::{preflight, valid_callback};
use crate::state::AppState;

/// Where the library's script and stylesheet are nested.
pub const PREFIX: &str = "/js/v4";

/// The page script: the pure parts and the library in one function scope.
const SERVICE_JS: &str = concat!(
    "/* rebill client-side library: service.js */\n(function () {\n",
    include_str!("../js/core.js"),
    include_str!("../js/service.js"),
    "})();\n"
);

/// The hosted field's script: the pure parts and the field in one function scope.
const FIELD_JS: &str = concat!(
    "/* rebill hosted field */\n(function () {\n",
    include_str!("../js/core.js"),
    include_str!("../js/field.js"),
    "})();\n"
);

const SERVICE_CSS: &str = include_str!("../js/service.css");
const FIELD_CSS: &str = include_str!("../js/field.css");
const FIELD_HTML: &str = include_str!("../js/field.html");

/// The field page's own policy: its script and stylesheet from rebill, fonts from the public
/// web-font catalogue, requests to rebill only, framed by any merchant page.
pub const FIELD_CSP: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self' 'unsafe-inline' https://fonts.googleapis.com; font-src https://fonts.gstatic.com; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors *";

/// One embedded file with its content type, caching and validator.
struct Asset {
    body: &'static str,
    content_type: &'static str,
    cache_control: &'static str,
    etag: String,
}

impl Asset {
    fn new(body: &'static str, content_type: &'static str, cache_control: &'static str) -> Self {
        let digest = Sha256::digest(body.as_bytes());
        let hex: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
        Self { body, content_type, cache_control, etag: format!("\"{hex}\"") }
    }

    fn serve(&self, request: &Request, extra: &[(header::HeaderName, &'static str)]) -> Response {
        if !matches!(*request.method(), Method::GET | Method::HEAD) {
            return method_not_allowed();
        }
        let fresh = request
            .headers()
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|tag| tag.trim().trim_start_matches("W/") == self.etag));
        let mut response = if fresh { StatusCode::NOT_MODIFIED.into_response() } else { self.body.into_response() };
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(self.content_type));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(self.cache_control));
        headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
        if let Ok(etag) = HeaderValue::from_str(&self.etag) {
            headers.insert(header::ETAG, etag);
        }
        for (name, value) in extra {
            headers.insert(name.clone(), HeaderValue::from_static(value));
        }
        response
    }
}

const DAY: &str = "public, max-age=86400";

static SERVICE_JS_ASSET: LazyLock<Asset> =
    LazyLock::new(|| Asset::new(SERVICE_JS, "application/javascript; charset=utf-8", DAY));
static SERVICE_CSS_ASSET: LazyLock<Asset> = LazyLock::new(|| Asset::new(SERVICE_CSS, "text/css; charset=utf-8", DAY));
static FIELD_JS_ASSET: LazyLock<Asset> =
    LazyLock::new(|| Asset::new(FIELD_JS, "application/javascript; charset=utf-8", DAY));
static FIELD_CSS_ASSET: LazyLock<Asset> = LazyLock::new(|| Asset::new(FIELD_CSS, "text/css; charset=utf-8", DAY));
static FIELD_HTML_ASSET: LazyLock<Asset> =
    LazyLock::new(|| Asset::new(FIELD_HTML, "text/html; charset=utf-8", "no-cache"));

/// Routes under [`PREFIX`].
pub(crate) fn v4_routes() -> Router<AppState> {
    Router::new()
        .route("/service.js", axum::routing::any(|r: Request| async move { SERVICE_JS_ASSET.serve(&r, &[]) }))
        .route("/service.css", axum::routing::any(|r: Request| async move { SERVICE_CSS_ASSET.serve(&r, &[]) }))
        .fallback(|| async { StatusCode::NOT_FOUND })
}

/// Routes merged into the token endpoint's router under `/js/v1` (which adds CORS).
pub(crate) fn v1_routes() -> Router<AppState> {
    Router::new()
        .route("/field.html", axum::routing::any(field_page))
        .route("/field-canary.html", axum::routing::any(field_page))
        .route("/field.js", axum::routing::any(|r: Request| async move { FIELD_JS_ASSET.serve(&r, &[]) }))
        .route("/field.css", axum::routing::any(|r: Request| async move { FIELD_CSS_ASSET.serve(&r, &[]) }))
        .route("/risk/preflights", axum::routing::any(|r: Request| helper(r, Helper::Preflights)))
        .route("/risk/info", axum::routing::any(|r: Request| helper(r, Helper::RiskInfo)))
        .route("/engage/settings", axum::routing::any(|r: Request| helper(r, Helper::EngageSettings)))
        .route("/events", axum::routing::any(|r: Request| helper(r, Helper::Events)))
}

async fn field_page(request: Request) -> Response {
    FIELD_HTML_ASSET
        .serve(&request, &[(header::CONTENT_SECURITY_POLICY, FIELD_CSP), (header::REFERRER_POLICY, "no-referrer")])
}

fn method_not_allowed() -> Response {
    let body = json!({ "error": { "code": "invalid-parameter", "message": "Use one of: GET, HEAD." } });
    let mut response = json_response(StatusCode::METHOD_NOT_ALLOWED, &body);
    response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    response
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=utf-8"))], body.to_string())
        .into_response()
}

/// The helper endpoints the library calls around tokens.
#[derive(Clone, Copy)]
enum Helper {
    Preflights,
    RiskInfo,
    EngageSettings,
    Events,
}

impl Helper {
    fn methods(self) -> &'static str {
        match self {
            Helper::Events => "GET, POST, OPTIONS",
            _ => "GET, OPTIONS",
        }
    }

    fn answer(self) -> (StatusCode, Value) {
        match self {
            Helper::Preflights => (StatusCode::OK, json!({ "preflights": [] })),
            Helper::RiskInfo => (StatusCode::OK, json!({ "profiles": [] })),
            Helper::EngageSettings => (
                StatusCode::NOT_FOUND,
                json!({ "error": { "code": "engage-not-enabled", "message": "Engagement is not enabled for this site." } }),
            ),
            Helper::Events => (StatusCode::OK, json!({})),
        }
    }
}

async fn helper(request: Request, which: Helper) -> Response {
    let method = request.method().clone();
    if method == Method::OPTIONS {
        return preflight(&request, which.methods());
    }
    if !(method == Method::GET || method == Method::HEAD || (method == Method::POST && matches!(which, Helper::Events)))
    {
        let body =
            json!({ "error": { "code": "invalid-parameter", "message": format!("Use one of: {}.", which.methods()) } });
        let mut response = json_response(StatusCode::METHOD_NOT_ALLOWED, &body);
        response.headers_mut().insert(header::ALLOW, HeaderValue::from_static(which.methods()));
        return response;
    }
    let callback = request.uri().query().and_then(|q| {
        form_urlencoded::parse(q.as_bytes()).find(|(name, _)| name == "callback").map(|(_, v)| v.into_owned())
    });
    // The body of an event is dropped unread beyond the token endpoint's bound (applied by its
    // layer before this handler runs).
    drop(request);
    let (status, body) = which.answer();
    match callback {
        None => json_response(status, &body),
        Some(name) if valid_callback(&name) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, HeaderValue::from_static("application/javascript; charset=utf-8"))],
            format!("{name}({body})"),
        )
            .into_response(),
        Some(_) => json_response(
            StatusCode::BAD_REQUEST,
            &json!({ "error": {
                "code": "invalid-parameter",
                "message": "callback must be a JavaScript identifier (letters, digits, _, $ and dots).",
                "fields": ["callback"],
                "details": [{ "field": "callback", "messages": ["is invalid"] }],
            }}),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_scripts_wrap_the_shared_core_in_one_scope() {
        for script in [SERVICE_JS, FIELD_JS] {
            assert!(script.contains("function luhn"), "the core is inside");
            assert!(script.trim_end().ends_with("})();"));
        }
        assert!(SERVICE_JS.contains("ServiceError"));
        assert!(FIELD_HTML.contains("<script src=\"field.js\"></script>"));
        assert!(!FIELD_HTML.contains("<script>"), "no inline script");
    }

    #[test]
    fn etags_follow_the_content() {
        let a = Asset::new("a", "text/plain", DAY);
        let b = Asset::new("b", "text/plain", DAY);
        assert_ne!(a.etag, b.etag);
        assert_eq!(a.etag, Asset::new("a", "text/plain", DAY).etag);
        assert_eq!(a.etag.len(), 26);
    }
}

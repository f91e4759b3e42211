//! The demo checkout page (`rebill serve --demo`; off by default), for the first sandbox site:
//!
//! - `GET /demo`: the page (sources in `js/demo/`), carrying the site's public key; it loads the
//!   client-side library from this rebill, lists the site's plans, collects the name and the card
//!   through the hosted fields (or a bank account), and subscribes.
//! - `GET /demo/plans`: the site's plans, as `GET /v2/plans` writes them (XML).
//! - `POST /demo/subscribe` (form-encoded `plan_code`, `token_id`, `first_name`, `last_name`,
//!   `email`, `currency`): creates an account and its subscription, then answers JSON
//!   `{status, subscription, invoices}` (the API's status and XML documents).
//!
//! The server side calls the API inside rebill as the site (the request context of the site's
//! first active private key, without the key itself), so no private key ever reaches the page.
//! It can do nothing but list plans, subscribe a new account, and read that account's invoices.

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rebill_app::platform::model::Site;
use rebill_app::platform::sites::{self, SiteError};
use rebill_app::platform::tokens::new_id;
use rebill_xml::{ApiVersion, Features, WireContext};
use serde_json::json;

use crate::dispatch;
use crate::layers::base_url;
use crate::state::{AppState, RequestContext};

const PAGE: &str = include_str!("../js/demo/demo.html");
const SCRIPT: &str = include_str!("../js/demo/demo.js");
const STYLE: &str = include_str!("../js/demo/demo.css");

/// The demo page's policy: everything from this rebill (the library, its field frames, the demo's
/// own endpoints), fonts from the public web-font catalogue.
const PAGE_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' https://fonts.googleapis.com; \
     font-src https://fonts.gstatic.com; img-src 'self' data:; connect-src 'self'; frame-src 'self'; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// A largest demo form.
const FORM_LIMIT: usize = 8 * 1024;

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/demo", axum::routing::get(page))
        .route("/demo/demo.js", axum::routing::get(|| async { asset(SCRIPT, "application/javascript; charset=utf-8") }))
        .route("/demo/demo.css", axum::routing::get(|| async { asset(STYLE, "text/css; charset=utf-8") }))
        .route("/demo/plans", axum::routing::get(plans))
        .route("/demo/subscribe", axum::routing::post(subscribe))
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

fn text(status: StatusCode, message: &str) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], message.to_owned()).into_response()
}

/// The first sandbox site, or the answer saying there is none.
async fn sandbox_site(state: &AppState) -> Result<Site, Response> {
    match sites::first_sandbox(&state.services).await {
        Ok(site) => Ok(site),
        Err(SiteError::NoSandboxSite) => {
            Err(text(StatusCode::NOT_FOUND, "The demo needs a sandbox site (rebill site create --name NAME)."))
        }
        Err(e) => {
            tracing::error!(cause = %e, "demo: listing sites");
            Err(text(StatusCode::INTERNAL_SERVER_ERROR, "The sites could not be read."))
        }
    }
}

/// Whether a public key can be written into the page as is.
fn plain_key(key: &str) -> bool {
    !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

async fn page(State(state): State<AppState>) -> Response {
    let site = match sandbox_site(&state).await {
        Ok(site) => site,
        Err(response) => return response,
    };
    if !plain_key(&site.public_key) {
        return text(StatusCode::INTERNAL_SERVER_ERROR, "The site's public key cannot be shown.");
    }
    let body = PAGE.replace("{{public_key}}", &site.public_key).replace("{{site}}", &escape(&site.name));
    let mut response =
        ([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-store")], body)
            .into_response();
    response.headers_mut().insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(PAGE_CSP));
    response
}

/// Text escaped for HTML and XML.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// One API call inside rebill as `site` (version 2.11): (status, body).
async fn call(state: &AppState, site: &Site, base: &str, method: Method, path: &str, body: String) -> (u16, String) {
    let now = state.clock.now();
    let key = match sites::writing_key(&state.services, site).await {
        Ok(key) => key,
        Err(e) => {
            tracing::error!(cause = %e, "demo: listing keys");
            None
        }
    };
    let Some(key) = key else {
        return (503, "The sandbox site has no active private key.".to_owned());
    };
    let version = ApiVersion::parse("2.11").unwrap_or_default();
    let features =
        if site.credit_memos { Features::none().with("credit_memos").unwrap_or_default() } else { Features::none() };
    let wire = WireContext::new(version, features, base);
    let mut request = match Request::builder()
        .method(method)
        .uri(path)
        .header(header::ACCEPT, "application/xml")
        .header(header::CONTENT_TYPE, "application/xml; charset=utf-8")
        .body(Body::from(body))
    {
        Ok(request) => request,
        Err(e) => return (500, e.to_string()),
    };
    request.extensions_mut().insert(RequestContext { version, site: site.clone(), key, wire, now: site.now(now) });
    let response = dispatch::dispatch(State(state.clone()), request).await;
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), 4 * 1024 * 1024).await.unwrap_or_default();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

async fn plans(State(state): State<AppState>, request: Request) -> Response {
    let site = match sandbox_site(&state).await {
        Ok(site) => site,
        Err(response) => return response,
    };
    let base = base_url(&state, &request);
    let (status, body) = call(&state, &site, &base, Method::GET, "/v2/plans?per_page=50", String::new()).await;
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    (status, [(header::CONTENT_TYPE, "application/xml; charset=utf-8"), (header::CACHE_CONTROL, "no-store")], body)
        .into_response()
}

async fn subscribe(State(state): State<AppState>, request: Request) -> Response {
    let site = match sandbox_site(&state).await {
        Ok(site) => site,
        Err(response) => return response,
    };
    let base = base_url(&state, &request);
    let Ok(bytes) = axum::body::to_bytes(request.into_body(), FORM_LIMIT).await else {
        return text(StatusCode::PAYLOAD_TOO_LARGE, "The form is too large.");
    };
    let form: std::collections::HashMap<String, String> = form_urlencoded::parse(&bytes).into_owned().collect();
    let get = |name: &str| escape(form.get(name).map(|v| v.trim()).unwrap_or_default());
    let account_code = format!("demo-{}", new_id().to_ascii_lowercase());
    let subscription = format!(
        "<subscription><plan_code>{}</plan_code><currency>{}</currency>\
         <account><account_code>{account_code}</account_code><email>{}</email>\
         <first_name>{}</first_name><last_name>{}</last_name>\
         <billing_info><token_id>{}</token_id></billing_info></account></subscription>",
        get("plan_code"),
        get("currency"),
        get("email"),
        get("first_name"),
        get("last_name"),
        get("token_id"),
    );
    let (status, created) = call(&state, &site, &base, Method::POST, "/v2/subscriptions", subscription).await;
    let invoices = if status == 201 {
        call(&state, &site, &base, Method::GET, &format!("/v2/accounts/{account_code}/invoices"), String::new()).await.1
    } else {
        String::new()
    };
    let body = json!({ "status": status, "subscription": created, "invoices": invoices });
    ([(header::CONTENT_TYPE, "application/json; charset=utf-8"), (header::CACHE_CONTROL, "no-store")], body.to_string())
        .into_response()
}

//! An HTTP/1.1 request head (parsed by `httparse`, the parser under hyper) through the
//! service's protocol layers that read headers, in the order `api_router` stacks them:
//! `body_limit` (Content-Length), `accept` (Accept; the invoice lookup's PDF through the
//! endpoint table's routing), `api_version` (X-Api-Version, deprecations and sunsets),
//! `content_type` (Content-Type, Content-Length, Transfer-Encoding) and `etag` (If-None-Match).
//! Behind them, in place of authentication and the dispatch (which need the database): the
//! Authorization header's key (`basic_key`), the base URL from Host (`base_url`), the body test
//! (`has_body`), the logged query (`loggable_query`), a CORS preflight's answer (`preflight`)
//! and a JSONP callback's name (`valid_callback`).
//!
//! Input: the request head and, after the blank line, a body.

#![no_main]

use std::sync::OnceLock;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::{from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use libfuzzer_sys::fuzz_target;
use rebill_server::layers::Rule;
use rebill_server::{AppState, layers, respond};
use tower::ServiceExt;

/// What every GET that passes the layers answers (the seeds' `If-None-Match` holds its tag).
const BODY: &str = "<ok/>";

/// Stands in for authentication and the dispatch: reads what they read from the head.
async fn inner(State(state): State<AppState>, request: Request) -> Response {
    let _key = layers::basic_key(request.headers());
    let base = layers::base_url(&state, &request);
    assert!(base.starts_with("http://"), "base URL {base}");
    let _ = layers::has_body(request.headers());
    let _ = layers::loggable_query(request.uri().query().unwrap_or_default());
    if let Some(query) = request.uri().query() {
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            if name == "callback" {
                let _ = respond::valid_callback(&value);
            }
        }
    }
    if request.method() == Method::OPTIONS {
        return respond::preflight(&request, "GET, POST, OPTIONS");
    }
    (StatusCode::OK, BODY).into_response()
}

fn router() -> &'static Router {
    static ROUTER: OnceLock<Router> = OnceLock::new();
    ROUTER.get_or_init(|| {
        let state = rebill_fuzz::state().clone();
        let limit = state.config.body_limit;
        Router::new()
            .fallback(inner)
            .layer(from_fn(layers::etag))
            .layer(Rule::new(layers::content_type))
            .layer(from_fn_with_state(state.clone(), layers::api_version))
            .layer(Rule::new(layers::accept))
            .layer(Rule::new(move |request: &mut Request| layers::body_limit(limit, request)))
            .with_state(state)
    })
}

/// The request of a head and body, or `None` where hyper would refuse it first.
fn request(data: &[u8]) -> Option<Request> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut head = httparse::Request::new(&mut headers);
    let httparse::Status::Complete(length) = head.parse(data).ok()? else { return None };
    let method = Method::from_bytes(head.method?.as_bytes()).ok()?;
    let uri: Uri = head.path?.parse().ok()?;
    let mut builder = axum::http::Request::builder().method(method).uri(uri);
    for header in head.headers.iter() {
        let name = HeaderName::from_bytes(header.name.as_bytes()).ok()?;
        let value = HeaderValue::from_bytes(header.value).ok()?;
        builder = builder.header(name, value);
    }
    builder.body(Body::from(data[length..].to_vec())).ok()
}

fuzz_target!(|data: &[u8]| {
    let Some(request) = request(data) else { return };
    let get = request.method() == Method::GET;
    let Ok(response) = rebill_fuzz::runtime().block_on(router().clone().oneshot(request));
    if response.status() == StatusCode::NOT_MODIFIED {
        assert!(get, "only a GET is answered 304");
        assert!(response.headers().contains_key(axum::http::header::ETAG), "a 304 carries its ETag");
    }
});

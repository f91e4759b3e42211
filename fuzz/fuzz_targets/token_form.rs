//! The token endpoint of the client-side library (`/js/v1/token`, `/js/v1/bank`): its request
//! read by the service's own `tokens::read_call` (a form-encoded POST body with the query
//! string beside it, or a JSONP GET with its callback), then every check `create_token` and the
//! token use case make before the database, through their own functions: the public key's
//! characters, the form (`tokens::token_request`: the fields' characters and bounds, unsupported
//! bank types), the card or bank account and the country (`rebill_app::platform::tokens::check`),
//! and the error the library receives (`tokens::token_error`).
//!
//! Input: byte 0 is the method (bit 0: POST, else GET) and whether a Content-Type is sent (bit
//! 1); then the query string up to the first newline, the Content-Type up to the next, and the
//! body.

#![no_main]

use std::collections::HashMap;

use axum::body::Body;
use axum::http::{Method, Request, header};
use libfuzzer_sys::fuzz_target;
use rebill_app::platform::tokens::check as check_payment;
use rebill_server::tokens::{self, Answer};

/// The site's "now" of every card check: 2027-01-15, so that expiry years around it matter.
const NOW: i64 = 1_800_000_000;

/// What the endpoint checks after reading the call, up to the store: the same functions
/// `create_token` and the token use case call.
fn check(params: &HashMap<String, String>, answer: &Answer, is_get: bool) {
    if is_get && params.get("_method").map(String::as_str) != Some("post") {
        return;
    }
    // The public key: a blank one, or one with a character XML forbids, is refused unlooked.
    let _key = params
        .get("key")
        .map(|k| k.trim())
        .filter(|k| !k.is_empty() && rebill_xml::reader::find_forbidden(k).is_none());
    let request = match tokens::token_request(params) {
        Ok(request) => request,
        Err(error) => {
            let _ = answer.error(&error);
            return;
        }
    };
    if let Err(error) = check_payment(&request, NOW) {
        let _ = answer.error(&tokens::token_error(error));
    }
    if let Some(routing) = params.get("routing_number") {
        let _ = rebill_billing::card::is_valid_routing_number(routing.trim());
    }
}

fuzz_target!(|data: &[u8]| {
    let [flags, rest @ ..] = data else { return };
    let mut parts = rest.splitn(3, |b| *b == b'\n');
    let query = parts.next().unwrap_or_default();
    let content_type = parts.next().unwrap_or_default();
    let body = parts.next().unwrap_or_default();
    let Ok(query) = std::str::from_utf8(query) else { return };
    let method = if flags & 1 != 0 { Method::POST } else { Method::GET };
    let uri = if query.is_empty() { "/token".to_owned() } else { format!("/token?{query}") };
    let mut builder = Request::builder().method(method.clone()).uri(uri.as_str());
    if flags & 2 != 0 {
        builder = builder.header(header::CONTENT_TYPE, content_type);
    }
    // What hyper would refuse never reaches the endpoint.
    let Ok(request) = builder.body(Body::from(body.to_vec())) else { return };
    let state = rebill_fuzz::state();
    rebill_fuzz::runtime().block_on(async {
        if let Ok((params, answer)) = tokens::read_call(state, request).await {
            check(&params, &answer, method == Method::GET);
        }
    });
});

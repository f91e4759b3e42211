//! The token endpoint of the client-side library (`/js/v1/token`, `/js/v1/bank`): its request
//! read by the service's own `tokens::read_call` (a form-encoded POST body with the query
//! string beside it, or a JSONP GET with its callback), then every check `create_token` and the
//! token use case make before the database: the public key's characters, the fields' characters
//! and bounds (`check_characters_and_bounds`), unsupported bank types, the card or bank account
//! (`rebill_billing::card`), the country, and the `validation` error the library receives.
//!
//! Input: byte 0 is the method (bit 0: POST, else GET) and whether a Content-Type is sent (bit
//! 1); then the query string up to the first newline, the Content-Type up to the next, and the
//! body.

#![no_main]

use std::collections::HashMap;

use axum::body::Body;
use axum::http::{Method, Request, header};
use libfuzzer_sys::fuzz_target;
use rebill_app::platform::tokens::valid_country;
use rebill_billing::card::{BankInput, CardInput, validate_bank_account, validate_card};
use rebill_server::tokens::{self, Answer};

/// The site's "now" of every card check: 2027-01-15, so that expiry years around it matter.
const NOW: i64 = 1_800_000_000;

/// What the endpoint checks after reading the call, up to the store.
fn check(params: &HashMap<String, String>, answer: &Answer, is_get: bool) {
    if is_get && params.get("_method").map(String::as_str) != Some("post") {
        return;
    }
    // The public key: a blank one, or one with a character XML forbids, is refused unlooked.
    let _key = params
        .get("key")
        .map(|k| k.trim())
        .filter(|k| !k.is_empty() && rebill_xml::reader::find_forbidden(k).is_none());
    if let Err(error) = tokens::check_characters_and_bounds(params) {
        let _ = answer.error(&error);
        return;
    }
    let text = |name: &str| params.get(name).map(String::as_str);
    let fields = tokens::address_fields(params);
    let country_invalid = fields.country.as_deref().is_some_and(|c| !valid_country(c));
    let bank_params =
        ["routing_number", "account_number", "account_number_confirmation", "account_type", "name_on_account"];
    let errors = if params.get("number").is_none() && bank_params.iter().any(|p| params.contains_key(*p)) {
        let input = BankInput {
            routing_number: text("routing_number"),
            account_number: text("account_number"),
            account_number_confirmation: text("account_number_confirmation"),
            confirm: true,
            account_type: text("account_type"),
            name_on_account: text("name_on_account"),
        };
        validate_bank_account(&input).err()
    } else {
        let input = CardInput {
            number: text("number"),
            month: text("month"),
            year: text("year"),
            cvv: text("cvv"),
            first_name: text("first_name"),
            last_name: text("last_name"),
        };
        validate_card(&input, NOW).err()
    };
    if errors.is_some() || country_invalid {
        let error = tokens::validation(&errors.unwrap_or_default(), country_invalid);
        let _ = answer.error(&error);
    }
    if let Some(routing) = text("routing_number") {
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

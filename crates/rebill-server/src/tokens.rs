//! The endpoints of the client-side library under `/js/v1`, outside the `/v2/` protocol layers:
//!
//! - `POST /js/v1/token` (form-encoded) turns card or bank-account details into a token that
//!   lives 20 minutes; `GET /js/v1/token?…&_method=post&callback=NAME` is the same call as JSONP,
//!   answered `NAME(<json>)` with status 200 even for errors (a script served with an error status
//!   may never run its callback).
//! - `GET /js/v1/bank?routing_number=…` names the bank of a routing number.
//!
//! Every answer is JSON (`{"id": …, "type": …}` or `{"error": {"code", "message", "fields",
//! "details"}}`; the library decides success from the body, not the status) and carries
//! `Access-Control-Allow-Origin: *`; `OPTIONS` answers preflights. The site is named by its
//! public key (`key`); a card or bank account is checked with the same code as billing-info
//! updates (`rebill_billing::card`). The card number and CVV, or the account number, are sealed
//! with the vault key before they are stored, and are never logged.
//!
//! Choices where the contract is silent:
//! - Statuses for non-JSONP answers: 200 for a token; 422 for `validation`, `invalid-parameter`
//!   and `invalid-routing-number`; 400 for `invalid-public-key`; 404 `not-found`; 405, 413 and 415
//!   for a wrong method, an oversized body and a body that is not form-encoded.
//! - A request is a bank account when it has no `number` but has a bank field.
//! - Tokenizing contacts no gateway: declines surface when the token is used.
//! - Every form field a token reads ([`TOKEN_FIELDS`]) is checked before anything else looks at
//!   it: a character XML forbids (the values end up in XML documents) or more characters than the
//!   matching `billing_info` field allows in the API (`BillingInfo::MAX_LENGTHS`, from the
//!   schema) is a `validation` error on that field. A public key holding such a character is
//!   `invalid-public-key` without a lookup.
//! - The request's card expiry is checked on the site's clock; the token's lifetime runs on the
//!   service's clock.

use std::collections::HashMap;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rebill_app::platform::model::Site;
use rebill_app::platform::model::billing_info::BillingFields;
use rebill_app::platform::tokens::{self as use_case, TokenError, TokenPayment, TokenRequest};
use rebill_billing::card::{BankInput, CardInput, Field, FieldError};
use rebill_models::BillingInfo;
use rebill_xml::reader::find_forbidden;
use serde_json::{Value, json};

use crate::respond::{preflight, valid_callback};
use crate::state::AppState;
use crate::state::LogFields;

/// Largest token request (form body or JSONP query), below the API's body limit.
pub const TOKEN_BODY_LIMIT: usize = 32 * 1024;

/// Where the routes of this module are nested.
pub const PREFIX: &str = "/js/v1";

/// Routes under [`PREFIX`].
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/token", axum::routing::any(token))
        .route("/tokens", axum::routing::any(token))
        .route("/bank", axum::routing::any(bank))
        .merge(crate::js_library::v1_routes())
        .fallback(not_found)
        .layer(axum::middleware::map_response(cors))
}

/// Every answer may be read by any origin (no credentials are involved); answers that say
/// nothing about caching are not stored.
async fn cors(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    headers.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    response
}

/// A library error.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    /// (field, messages) in order.
    details: Vec<(String, Vec<String>)>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), details: Vec::new() }
    }

    fn with_field(mut self, field: &str, message: &str) -> Self {
        match self.details.iter_mut().find(|(f, _)| f == field) {
            Some((_, messages)) => messages.push(message.to_owned()),
            None => self.details.push((field.to_owned(), vec![message.to_owned()])),
        }
        self
    }

    fn body(&self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if !self.details.is_empty() {
            error["fields"] = json!(self.details.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>());
            error["details"] =
                json!(self.details.iter().map(|(f, m)| json!({ "field": f, "messages": m })).collect::<Vec<_>>());
        }
        json!({ "error": error })
    }
}

fn invalid_public_key() -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid-public-key", "The public key is not valid.")
}

/// How to answer: JSON, or JSONP through a callback.
pub enum Answer {
    Json,
    Jsonp(String),
}

impl Answer {
    fn send(&self, status: StatusCode, body: &Value) -> Response {
        match self {
            Answer::Json => (
                status,
                [(header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=utf-8"))],
                body.to_string(),
            )
                .into_response(),
            Answer::Jsonp(callback) => (
                StatusCode::OK,
                [
                    (header::CONTENT_TYPE, HeaderValue::from_static("application/javascript; charset=utf-8")),
                    (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
                ],
                format!("{callback}({body})"),
            )
                .into_response(),
        }
    }

    pub fn error(&self, error: &ApiError) -> Response {
        self.send(error.status, &error.body())
    }
}

/// Form or query parameters (the first occurrence of a name wins).
fn parse_params(bytes: &[u8]) -> HashMap<String, String> {
    let mut params = HashMap::new();
    for (name, value) in form_urlencoded::parse(bytes) {
        params.entry(name.into_owned()).or_insert_with(|| value.into_owned());
    }
    params
}

/// The parameters of a library call and how to answer it, or the answer refusing it.
pub async fn read_call(state: &AppState, request: Request) -> Result<(HashMap<String, String>, Answer), Response> {
    let limit = state.config.body_limit.min(TOKEN_BODY_LIMIT);
    let query = request.uri().query().unwrap_or_default().to_owned();
    if request.method() == Method::GET {
        let params = parse_params(query.as_bytes());
        let answer = match params.get("callback") {
            None => Answer::Json,
            Some(c) if valid_callback(c) => Answer::Jsonp(c.clone()),
            Some(_) => {
                let error = ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid-parameter",
                    "callback must be a JavaScript identifier (letters, digits, _, $ and dots).",
                )
                .with_field("callback", "is invalid");
                return Err(Answer::Json.error(&error));
            }
        };
        if query.len() > limit {
            let error = ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid-parameter",
                format!("Requests are limited to {limit} bytes."),
            );
            return Err(answer.error(&error));
        }
        return Ok((params, answer));
    }
    let content_type = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    if !essence.is_empty() && !essence.eq_ignore_ascii_case("application/x-www-form-urlencoded") {
        let error = ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid-parameter",
            "The request body must be application/x-www-form-urlencoded.",
        );
        return Err(Answer::Json.error(&error));
    }
    let body = axum::body::to_bytes(request.into_body(), limit).await.map_err(|e| {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(err) = source {
            if err.is::<http_body_util::LengthLimitError>() {
                return Answer::Json.error(&ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "invalid-parameter",
                    format!("Requests are limited to {limit} bytes."),
                ));
            }
            source = err.source();
        }
        Answer::Json.error(&ApiError::new(StatusCode::BAD_REQUEST, "api-error", "The request body could not be read."))
    })?;
    let mut params = parse_params(&body);
    // Parameters in the query string count too (the body wins).
    for (name, value) in parse_params(query.as_bytes()) {
        params.entry(name).or_insert(value);
    }
    Ok((params, Answer::Json))
}

fn method_not_allowed(allow: &'static str) -> Response {
    let error = ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "invalid-parameter", format!("Use one of: {allow}."));
    let mut response = Answer::Json.error(&error);
    response.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
    response
}

/// Any other path under `/js/v1`.
async fn not_found(request: Request) -> Response {
    if request.method() == Method::OPTIONS {
        return preflight(&request, "GET, POST, OPTIONS");
    }
    // Inside the nested router the path has lost its prefix.
    let path = format!("{PREFIX}{}", request.uri().path());
    let error = ApiError::new(StatusCode::NOT_FOUND, "not-found", format!("Nothing is at {path}."));
    Answer::Json.error(&error)
}

/// The site of the call's public key (also named in the request's log line).
async fn site_of(
    state: &AppState,
    params: &HashMap<String, String>,
    log: Option<&LogFields>,
) -> Result<Site, ApiError> {
    let key = params
        .get("key")
        .map(|k| k.trim())
        .filter(|k| !k.is_empty() && find_forbidden(k).is_none())
        .ok_or_else(invalid_public_key)?;
    match use_case::site_for_public_key(&state.services, key).await {
        Ok(site) => {
            if let Some(log) = log {
                log.site(site.id);
            }
            Ok(site)
        }
        Err(TokenError::InvalidPublicKey) => Err(invalid_public_key()),
        Err(e) => {
            tracing::error!(cause = %e, "public key lookup failed");
            Err(internal_error())
        }
    }
}

/// `/js/v1/token`.
async fn token(State(state): State<AppState>, request: Request) -> Response {
    match *request.method() {
        Method::OPTIONS => return preflight(&request, "GET, POST, OPTIONS"),
        Method::GET | Method::POST => {}
        _ => return method_not_allowed("GET, POST, OPTIONS"),
    }
    let is_get = request.method() == Method::GET;
    let log = request.extensions().get::<LogFields>().cloned();
    let (params, answer) = match read_call(&state, request).await {
        Ok(call) => call,
        Err(response) => return response,
    };
    if is_get && params.get("_method").map(String::as_str) != Some("post") {
        let error = ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid-parameter",
            "A token is made by POST, or by GET with _method=post.",
        );
        return answer.error(&error);
    }
    match create_token(&state, &params, log.as_ref()).await {
        Ok(body) => answer.send(StatusCode::OK, &body),
        Err(error) => answer.error(&error),
    }
}

/// `/js/v1/bank`: `{"bank_name": …}` for a known routing number.
async fn bank(State(state): State<AppState>, request: Request) -> Response {
    match *request.method() {
        Method::OPTIONS => return preflight(&request, "GET, OPTIONS"),
        Method::GET => {}
        _ => return method_not_allowed("GET, OPTIONS"),
    }
    let log = request.extensions().get::<LogFields>().cloned();
    let (params, answer) = match read_call(&state, request).await {
        Ok(call) => call,
        Err(response) => return response,
    };
    let site = match site_of(&state, &params, log.as_ref()).await {
        Ok(site) => site,
        Err(error) => return answer.error(&error),
    };
    let routing = params.get("routing_number").map(|r| r.trim()).unwrap_or_default();
    match use_case::bank_name(&state.services, &site, routing).await {
        Ok(Some(name)) => answer.send(StatusCode::OK, &json!({ "bank_name": name })),
        Ok(None) => answer.error(&invalid_routing_number()),
        Err(e) => {
            tracing::error!(cause = %e, "reading the site's gateway failed");
            answer.error(&internal_error())
        }
    }
}

fn invalid_routing_number() -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid-routing-number", "The routing number is not valid.")
        .with_field("routing_number", "is invalid")
}

/// A parameter's value, trimmed; `None` when absent or blank.
fn param<'p>(params: &'p HashMap<String, String>, name: &str) -> Option<&'p str> {
    params.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// The library's wording of a card or bank problem.
fn token_message(e: &FieldError) -> String {
    match (e.field, e.problem) {
        // The library calls a missing number or expiry invalid.
        (Field::Number | Field::Month | Field::Year, _) => "is invalid".to_owned(),
        (_, problem) => problem.message(),
    }
}

/// The address and name fields every token may carry.
pub fn address_fields(params: &HashMap<String, String>) -> BillingFields {
    let text = |name: &str| param(params, name).map(str::to_owned);
    BillingFields {
        first_name: text("first_name"),
        last_name: text("last_name"),
        company: text("company"),
        address1: text("address1"),
        address2: text("address2"),
        city: text("city"),
        state: text("state"),
        zip: text("postal_code").or_else(|| text("zip")),
        country: text("country").map(|c| c.to_ascii_uppercase()),
        phone: text("phone"),
        vat_number: text("vat_number"),
        ..BillingFields::default()
    }
}

const BANK_PARAMS: [&str; 5] =
    ["routing_number", "account_number", "account_number_confirmation", "account_type", "name_on_account"];

/// The form fields a token reads, each with the `billing_info` field that holds the same value
/// in the API: a field is bounded by that field's schema bound (`BillingInfo::MAX_LENGTHS`);
/// one without a string bound there (month, year, account type) must parse as a number or a
/// known word, so its length needs no bound of its own.
const TOKEN_FIELDS: [(&str, &str); 21] = [
    ("number", "number"),
    ("month", "month"),
    ("year", "year"),
    ("cvv", "verification_value"),
    ("first_name", "first_name"),
    ("last_name", "last_name"),
    ("company", "company"),
    ("address1", "address1"),
    ("address2", "address2"),
    ("city", "city"),
    ("state", "state"),
    ("postal_code", "zip"),
    ("zip", "zip"),
    ("country", "country"),
    ("phone", "phone"),
    ("vat_number", "vat_number"),
    ("routing_number", "routing_number"),
    ("account_number", "account_number"),
    ("account_number_confirmation", "account_number"),
    ("account_type", "account_type"),
    ("name_on_account", "name_on_account"),
];

/// The schema's bound of the `billing_info` field `field`, if it is a bounded string.
fn billing_info_bound(field: &str) -> Option<usize> {
    BillingInfo::MAX_LENGTHS.iter().find(|(name, _)| *name == field).map(|(_, max)| *max)
}

/// The `validation` error of form fields holding a character XML forbids or too many
/// characters (counted after trimming, as stored), before any other check sees them.
fn check_characters_and_bounds(params: &HashMap<String, String>) -> Result<(), ApiError> {
    let mut error =
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "validation", "There was an error validating your request.");
    for (name, field) in TOKEN_FIELDS {
        let Some(value) = params.get(name) else { continue };
        if find_forbidden(value).is_some() {
            error = error.with_field(name, "contains a character that is not allowed");
        } else if let Some(max) = billing_info_bound(field)
            && value.trim().chars().count() > max
        {
            error = error.with_field(name, &format!("is too long (maximum is {max} characters)"));
        }
    }
    if error.details.is_empty() { Ok(()) } else { Err(error) }
}

/// Bank account types the original library can ask tokens for that rebill does not tokenize
/// (only US bank accounts are): refused by name, so the page's callback gets a clear error.
const UNSUPPORTED_BANK_TYPES: [&str; 3] = ["iban_bank_account", "bacs_bank_account", "becs_bank_account"];

/// The token request a form asks for, after the checks made on the form itself: the fields'
/// characters and bounds ([`check_characters_and_bounds`]) and the bank account types rebill
/// does not tokenize. A bank account when no card number is given and a bank field is.
pub fn token_request(params: &HashMap<String, String>) -> Result<TokenRequest<'_>, ApiError> {
    check_characters_and_bounds(params)?;
    if let Some(kind) = params.get("type").filter(|t| UNSUPPORTED_BANK_TYPES.contains(&t.as_str())) {
        let message = format!("Bank accounts of type {kind} are not supported.");
        return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid-parameter", message)
            .with_field("type", "is not supported"));
    }
    let text = |name: &str| params.get(name).map(String::as_str);
    let is_bank = params.get("number").is_none() && BANK_PARAMS.iter().any(|p| params.contains_key(*p));
    let payment = if is_bank {
        TokenPayment::Bank(BankInput {
            routing_number: text("routing_number"),
            account_number: text("account_number"),
            account_number_confirmation: text("account_number_confirmation"),
            confirm: true,
            account_type: text("account_type"),
            name_on_account: text("name_on_account"),
        })
    } else {
        TokenPayment::Card(CardInput {
            number: text("number"),
            month: text("month"),
            year: text("year"),
            cvv: text("cvv"),
            first_name: text("first_name"),
            last_name: text("last_name"),
        })
    };
    Ok(TokenRequest { payment, fields: address_fields(params) })
}

/// The library's error for a refused token.
pub fn token_error(error: TokenError) -> ApiError {
    match error {
        TokenError::InvalidRoutingNumber => invalid_routing_number(),
        TokenError::Invalid { errors, country } => validation(&errors, country),
        TokenError::CvvLength(message) => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid-parameter", format!("Cvv [{}]", json!(message)))
                .with_field("cvv", &message)
        }
        TokenError::InvalidPublicKey => invalid_public_key(),
        e @ TokenError::Store(_) => {
            tracing::error!(cause = %e, "storing a token failed");
            internal_error()
        }
    }
}

/// Checks the details, stores the token and answers its JSON.
async fn create_token(
    state: &AppState,
    params: &HashMap<String, String>,
    log: Option<&LogFields>,
) -> Result<Value, ApiError> {
    let site = site_of(state, params, log).await?;
    let request = token_request(params)?;
    let token = use_case::issue(&state.services, &site, &request).await.map_err(token_error)?;
    Ok(json!({ "id": token.id, "type": token.kind.as_str() }))
}

fn internal_error() -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "api-error", "An internal error occurred; retry later.")
}

/// The `validation` error of field problems (and of an invalid country).
fn validation(errors: &[FieldError], country_invalid: bool) -> ApiError {
    let mut error =
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "validation", "There was an error validating your request.");
    for e in errors {
        error = error.with_field(e.field.token_param(), &token_message(e));
    }
    if country_invalid {
        error = error.with_field("country", "is invalid");
    }
    // An expiry the library cannot read marks both of its fields.
    let has = |f: &str| error.details.iter().any(|(field, _)| field == f);
    if has("month") != has("year") {
        let missing = if has("month") { "year" } else { "month" };
        error = error.with_field(missing, "is invalid");
        error.details.sort_by_key(|(f, _)| FIELD_ORDER.iter().position(|o| o == f).unwrap_or(usize::MAX));
    }
    error
}

/// Order of fields in error details.
const FIELD_ORDER: [&str; 12] = [
    "number",
    "month",
    "year",
    "first_name",
    "last_name",
    "cvv",
    "routing_number",
    "account_number",
    "account_number_confirmation",
    "account_type",
    "name_on_account",
    "country",
];

#[cfg(test)]
mod tests {
    use super::*;
    use rebill_billing::card::Problem;

    #[test]
    fn token_fields_take_their_bounds_from_the_billing_info_schema() {
        for (name, field) in TOKEN_FIELDS {
            let unbounded = matches!(field, "month" | "year" | "account_type");
            assert_eq!(billing_info_bound(field).is_none(), unbounded, "{name} → billing_info.{field}");
        }
        let params = |pairs: &[(&str, String)]| -> HashMap<String, String> {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect()
        };
        let max = billing_info_bound("first_name").expect("bounded");
        assert!(check_characters_and_bounds(&params(&[("first_name", "é".repeat(max))])).is_ok());
        assert!(check_characters_and_bounds(&params(&[("ignored", "\u{0}".to_owned())])).is_ok());
        let refused = check_characters_and_bounds(&params(&[
            ("first_name", "A\u{0}B".to_owned()),
            ("city", "x".repeat(max + 1)),
            ("cvv", "1\u{FFFF}".to_owned()),
        ]))
        .expect_err("refused");
        assert_eq!(
            refused.body(),
            json!({ "error": {
                "code": "validation",
                "message": "There was an error validating your request.",
                "fields": ["cvv", "first_name", "city"],
                "details": [
                    { "field": "cvv", "messages": ["contains a character that is not allowed"] },
                    { "field": "first_name", "messages": ["contains a character that is not allowed"] },
                    { "field": "city", "messages": [format!("is too long (maximum is {max} characters)")] },
                ],
            }})
        );
    }

    #[test]
    fn callbacks_are_plain_identifiers() {
        for ok in ["cb", "__jp0", "service.callbacks.c1", "$x_1"] {
            assert!(valid_callback(ok), "{ok}");
        }
        for bad in ["", "1cb", "a b", "alert(1)", "a..b", "a.", "x;y", &"a".repeat(129)] {
            assert!(!valid_callback(bad), "{bad}");
        }
    }

    #[test]
    fn errors_list_their_fields_and_details() {
        let body = validation(
            &[
                FieldError { field: Field::Number, problem: Problem::Blank },
                FieldError { field: Field::Month, problem: Problem::Blank },
                FieldError { field: Field::FirstName, problem: Problem::Blank },
            ],
            false,
        )
        .body();
        assert_eq!(
            body,
            json!({ "error": {
                "code": "validation",
                "message": "There was an error validating your request.",
                "fields": ["number", "month", "year", "first_name"],
                "details": [
                    { "field": "number", "messages": ["is invalid"] },
                    { "field": "month", "messages": ["is invalid"] },
                    { "field": "year", "messages": ["is invalid"] },
                    { "field": "first_name", "messages": ["can't be blank"] },
                ],
            }})
        );
        assert_eq!(
            invalid_public_key().body(),
            json!({ "error": { "code": "invalid-public-key", "message": "The public key is not valid." } })
        );
    }
}

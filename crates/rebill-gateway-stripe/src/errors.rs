//! Stripe's error answers as declines: the mapping table (`data/stripe_errors.toml`), the one
//! parsing function every call's error goes through ([`decline_from_error`]), and the CVV and
//! AVS results of a card's `checks`.

use std::sync::OnceLock;

use rebill_billing::gateway::{CheckResult, Decline};
use serde::Deserialize;
use serde_json::Value;

/// One row of the mapping: a Stripe `decline_code`, `code` or error `type` and the code of the
/// transaction error table it maps to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Row {
    pub stripe: String,
    pub code: String,
}

#[derive(Deserialize)]
struct Table {
    errors: Vec<Row>,
}

const DATA: &str = include_str!("../data/stripe_errors.toml");

/// The code answered for an error that no row maps.
pub const UNMAPPED: &str = "declined";

/// Every row, in the file's order.
pub fn rows() -> &'static [Row] {
    static TABLE: OnceLock<Table> = OnceLock::new();
    // The file ships inside the binary and is parsed by this crate's tests.
    &TABLE.get_or_init(|| toml::from_str(DATA).expect("data/stripe_errors.toml is a valid mapping")).errors
}

/// The transaction error code a Stripe code maps to, when a row names it and its code is a row
/// of the transaction error table.
pub fn mapped(stripe: &str) -> Option<&'static str> {
    let row = rows().iter().find(|r| r.stripe == stripe)?;
    rebill_billing::errors::lookup(&row.code).map(|info| info.code.as_str())
}

/// The error object of an answer (`{"error": {...}}`), or `Null`.
fn error_object(body: &Value) -> &Value {
    &body["error"]
}

/// A string field of a JSON object, when it is a non-empty string.
pub(crate) fn text<'v>(value: &'v Value, field: &str) -> Option<&'v str> {
    value.get(field).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// What the HTTP status alone says, named as Stripe names the error.
fn status_key(status: u16) -> Option<&'static str> {
    match status {
        401 => Some("authentication_error"),
        404 => Some("resource_missing"),
        429 => Some("rate_limit"),
        500..=599 => Some("api_error"),
        _ => None,
    }
}

/// The decline of an error answer: `status` is the HTTP status, `body` the parsed JSON answer
/// (`Null` when it was not JSON). See `data/stripe_errors.toml` for the order of the look-ups.
///
/// The decline keeps Stripe's most specific code (`decline_code`, else `code`, else `type`) as
/// its `gateway_error_code`, and the id of the PaymentIntent the error names as its reference.
/// Stripe's message is never kept: an authentication error's message quotes part of the key.
pub fn decline_from_error(status: u16, body: &Value) -> Decline {
    let error = error_object(body);
    let decline_code = text(error, "decline_code");
    let code = text(error, "code");
    let kind = text(error, "type");
    let by_status = status_key(status);
    let keys: [Option<&str>; 4] =
        if status == 401 { [by_status, decline_code, code, kind] } else { [decline_code, code, by_status, kind] };
    let mapped_code = keys.iter().flatten().find_map(|k| mapped(k)).unwrap_or(UNMAPPED);
    let gateway_error_code = decline_code
        .or(code)
        .or(by_status.filter(|_| status == 401))
        .or(kind)
        .map(str::to_owned)
        .or_else(|| Some(format!("http_{status}")));
    let reference = error.get("payment_intent").and_then(|pi| text(pi, "id")).map(str::to_owned);
    let (mut cvv_result, avs_result) = match error.get("payment_intent").map(|pi| &pi["latest_charge"]) {
        Some(charge) if charge.is_object() => charge_checks(charge),
        _ => (None, None),
    };
    if cvv_result.is_none() && (decline_code == Some("incorrect_cvc") || code == Some("incorrect_cvc")) {
        cvv_result = Some(check("N", "No Match"));
    }
    Decline { code: mapped_code, gateway_error_code, cvv_result, avs_result, reference }
}

/// A decline of `code` (a row of the transaction error table) with Stripe's own code.
pub(crate) fn decline(code: &'static str, gateway_error_code: impl Into<String>) -> Decline {
    Decline {
        code,
        gateway_error_code: Some(gateway_error_code.into()),
        cvv_result: None,
        avs_result: None,
        reference: None,
    }
}

pub(crate) fn check(code: &str, message: &str) -> CheckResult {
    CheckResult { code: code.to_owned(), message: message.to_owned() }
}

/// The CVV and AVS results of a charge (`payment_method_details.card.checks`); absent checks
/// give no result.
pub fn charge_checks(charge: &Value) -> (Option<CheckResult>, Option<CheckResult>) {
    card_checks(&charge["payment_method_details"]["card"]["checks"])
}

/// The CVV and AVS results of a card's `checks` object (of a charge or a PaymentMethod).
///
/// CVV: `pass` is `M`, `fail` is `N`, `unavailable` or `unchecked` no result. AVS, street
/// (`address_line1_check`) and postal code (`address_postal_code_check`): both pass `Y`, both
/// fail `N`, street fails and postal passes `Z`, street passes and postal fails `A`; one checked
/// and the other not: the checked one decides (`A` or `Z` when it passed, `N` when it failed).
pub fn card_checks(checks: &Value) -> (Option<CheckResult>, Option<CheckResult>) {
    let state = |field: &str| match text(checks, field) {
        Some("pass") => Some(true),
        Some("fail") => Some(false),
        _ => None,
    };
    let cvv = state("cvc_check").map(|pass| if pass { check("M", "Match") } else { check("N", "No Match") });
    let avs = match (state("address_line1_check"), state("address_postal_code_check")) {
        (Some(true), Some(true)) => Some(check("Y", "Street address and 5-digit postal code match.")),
        (Some(false), Some(false)) | (Some(false), None) | (None, Some(false)) => {
            Some(check("N", "Street address and postal code do not match."))
        }
        (Some(false), Some(true)) | (None, Some(true)) => {
            Some(check("Z", "Street address does not match, but 5-digit postal code matches."))
        }
        (Some(true), Some(false)) | (Some(true), None) => {
            Some(check("A", "Street address matches, but 5-digit and 9-digit postal code do not match."))
        }
        (None, None) => None,
    };
    (cvv, avs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashSet;

    #[test]
    fn every_row_maps_to_a_code_of_the_transaction_error_table() {
        assert!(rows().len() > 50);
        let mut seen = HashSet::new();
        for row in rows() {
            assert!(seen.insert(row.stripe.as_str()), "{} is listed twice", row.stripe);
            assert!(
                rebill_billing::errors::lookup(&row.code).is_some(),
                "{}: {} is not a v2 code",
                row.stripe,
                row.code
            );
            assert_eq!(mapped(&row.stripe), Some(row.code.as_str()));
        }
        assert!(rebill_billing::errors::lookup(UNMAPPED).is_some());
    }

    #[test]
    fn decline_code_first_then_code_then_status_then_type() {
        let body =
            json!({"error": {"type": "card_error", "code": "card_declined", "decline_code": "insufficient_funds"}});
        let d = decline_from_error(402, &body);
        assert_eq!((d.code, d.gateway_error_code.as_deref()), ("insufficient_funds", Some("insufficient_funds")));
        // An unknown decline code falls back to the code.
        let body = json!({"error": {"type": "card_error", "code": "card_declined", "decline_code": "brand_new"}});
        assert_eq!(decline_from_error(402, &body).code, "declined");
        // Neither code: the status, then the type.
        let body = json!({"error": {"type": "invalid_request_error", "message": "Bad request"}});
        assert_eq!(decline_from_error(400, &body).code, "invalid_data");
        assert_eq!(decline_from_error(404, &body).code, "gateway_token_not_found");
        assert_eq!(decline_from_error(429, &Value::Null).code, "gateway_rate_limited");
        assert_eq!(decline_from_error(503, &Value::Null).code, "gateway_error");
        let d = decline_from_error(418, &Value::Null);
        assert_eq!((d.code, d.gateway_error_code.as_deref()), (UNMAPPED, Some("http_418")));
    }

    #[test]
    fn a_bad_key_is_a_configuration_decline_that_never_quotes_the_key() {
        let body = json!({"error": {
            "message": "Invalid API Key provided: sk_test_********************cdef",
            "type": "invalid_request_error"
        }});
        let d = decline_from_error(401, &body);
        assert_eq!(d.code, "invalid_login");
        assert_eq!(d.gateway_error_code.as_deref(), Some("authentication_error"));
        assert!(!format!("{d:?}").contains("cdef"));
    }

    #[test]
    fn the_payment_intent_of_a_card_error_is_the_reference() {
        let body = json!({"error": {
            "type": "card_error", "code": "incorrect_cvc", "decline_code": "incorrect_cvc",
            "payment_intent": {"id": "pi_3MtwBwLkdIwHu7ix28a3tqPa", "object": "payment_intent", "latest_charge": "ch_1"}
        }});
        let d = decline_from_error(402, &body);
        assert_eq!(d.reference.as_deref(), Some("pi_3MtwBwLkdIwHu7ix28a3tqPa"));
        assert_eq!(d.code, "fraud_security_code");
        assert_eq!(d.cvv_result.map(|r| r.code).as_deref(), Some("N"));
    }

    #[test]
    fn checks_give_cvv_and_avs_results() {
        let results = |cvc: &str, line1: &str, postal: &str| {
            let (cvv, avs) = card_checks(&json!({
                "cvc_check": cvc, "address_line1_check": line1, "address_postal_code_check": postal
            }));
            (cvv.map(|r| r.code).unwrap_or_default(), avs.map(|r| r.code).unwrap_or_default())
        };
        assert_eq!(results("pass", "pass", "pass"), ("M".into(), "Y".into()));
        assert_eq!(results("fail", "fail", "fail"), ("N".into(), "N".into()));
        assert_eq!(results("pass", "fail", "pass"), ("M".into(), "Z".into()));
        assert_eq!(results("pass", "pass", "fail"), ("M".into(), "A".into()));
        assert_eq!(results("unavailable", "unchecked", "unavailable"), (String::new(), String::new()));
        assert_eq!(results("unchecked", "unchecked", "pass"), (String::new(), "Z".into()));
        assert_eq!(card_checks(&Value::Null), (None, None));
        assert_eq!(charge_checks(&json!({"id": "ch_1"})), (None, None));
        let charge = json!({"payment_method_details": {"card": {"checks": {"cvc_check": "pass"}}}});
        assert_eq!(charge_checks(&charge).0.map(|r| r.code).as_deref(), Some("M"));
    }
}

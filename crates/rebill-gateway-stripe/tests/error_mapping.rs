//! Every row of `data/stripe_errors.toml`, tested with the error body Stripe documents for it
//! (`tests/fixtures/stripe_error_bodies.json`: the HTTP status and the body, keyed by the row's
//! Stripe code) through the function every call's error goes through.

use std::collections::BTreeSet;

use rebill_gateway_stripe::errors::{decline_from_error, rows};
use serde_json::Value;

const FIXTURES: &str = include_str!("fixtures/stripe_error_bodies.json");

fn fixtures() -> serde_json::Map<String, Value> {
    match serde_json::from_str(FIXTURES).expect("the fixtures are JSON") {
        Value::Object(map) => map,
        other => panic!("the fixtures are an object keyed by Stripe code, not {other}"),
    }
}

#[test]
fn every_row_has_a_fixture_and_every_fixture_a_row() {
    let fixtures = fixtures();
    let listed: BTreeSet<&str> = rows().iter().map(|r| r.stripe.as_str()).collect();
    let documented: BTreeSet<&str> = fixtures.keys().map(String::as_str).collect();
    assert_eq!(listed, documented);
}

#[test]
fn each_documented_error_maps_to_its_row() {
    let fixtures = fixtures();
    for row in rows() {
        let fixture = &fixtures[&row.stripe];
        let status = fixture["status"].as_u64().and_then(|s| u16::try_from(s).ok()).expect("a status");
        let body = &fixture["body"];
        let error = &body["error"];
        assert!(error["type"].is_string(), "{}: a Stripe error body has a type", row.stripe);
        let decline = decline_from_error(status, body);
        assert_eq!(decline.code, row.code, "{}", row.stripe);
        assert!(rebill_billing::errors::lookup(decline.code).is_some(), "{}", row.stripe);
        // Stripe's own code is kept: the most specific one the body holds.
        let expected = error["decline_code"]
            .as_str()
            .or(error["code"].as_str())
            .or((status == 401).then_some("authentication_error"))
            .or(error["type"].as_str());
        assert_eq!(decline.gateway_error_code.as_deref(), expected, "{}", row.stripe);
        // The PaymentIntent an error names is the decline's reference.
        assert_eq!(decline.reference.as_deref(), error["payment_intent"]["id"].as_str(), "{}", row.stripe);
        // Nothing of a key quoted in a message is kept.
        let shown = format!("{decline:?}");
        assert!(!shown.contains("sk_") && !shown.contains("4ZQr") && !shown.contains("cdef"), "{shown}");
    }
}

#[test]
fn the_documented_examples_decline_as_their_rows_say() {
    let fixtures = fixtures();
    let code = |stripe: &str| {
        let fixture = &fixtures[stripe];
        let status = fixture["status"].as_u64().and_then(|s| u16::try_from(s).ok()).expect("a status");
        decline_from_error(status, &fixture["body"]).code
    };
    for (stripe, v2) in [
        ("generic_decline", "declined"),
        ("insufficient_funds", "insufficient_funds"),
        ("lost_card", "fraud_stolen_card"),
        ("stolen_card", "fraud_stolen_card"),
        ("expired_card", "expired_card"),
        ("incorrect_cvc", "fraud_security_code"),
        ("invalid_cvc", "fraud_security_code"),
        ("incorrect_number", "invalid_card_number"),
        ("invalid_number", "invalid_card_number"),
        ("incorrect_zip", "fraud_address"),
        ("do_not_honor", "declined"),
        ("card_not_supported", "card_type_not_accepted"),
        ("currency_not_supported", "currency_not_supported"),
        ("duplicate_transaction", "duplicate_transaction"),
        ("fraudulent", "fraud_gateway"),
        ("authentication_required", "three_d_secure_action_required"),
        ("call_issuer", "call_issuer"),
        ("invalid_expiry_month", "declined_expiration_date"),
        ("invalid_expiry_year", "declined_expiration_date"),
        ("api_error", "gateway_error"),
        ("api_connection_error", "gateway_error"),
        ("authentication_error", "invalid_login"),
    ] {
        assert_eq!(code(stripe), v2, "{stripe}");
    }
}

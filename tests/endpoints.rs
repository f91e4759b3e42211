//! The generated endpoint table: every endpoint the spec names is there with its since-version,
//! every request and response resource exists, and routing by method and path works.

use rebill_models::api::{self, ENDPOINTS, EndpointId};
use rebill_models::{ApiEndpoint, Body, Method, RESOURCES, routes};
use rebill_xml::ApiVersion;

/// The spec's "HTTP endpoints named" table (`:param` written `{param}`), with since-versions
/// from its changelog.
const SPEC: &[(&str, &str, Option<&str>)] = &[
    ("GET", "/v2/accounts", None),
    ("POST", "/v2/accounts", None),
    ("PUT", "/v2/accounts/{account_code}", None),
    ("GET", "/v2/accounts/{account_code}/invoices", None),
    ("GET", "/v2/accounts/{account_code}/credit_payments", Some("2.10")),
    ("PUT", "/v2/accounts/{account_code}/billing_info", None),
    ("POST", "/v2/accounts/{account_code}/billing_info/verify_cvv", Some("2.10")),
    ("POST", "/v2/accounts/{account_code}/shipping_addresses", None),
    ("PUT", "/v2/accounts/{account_code}/shipping_addresses/{shipping_address_id}", None),
    ("POST", "/v2/subscriptions", None),
    ("PUT", "/v2/subscriptions/{uuid}", None),
    ("GET", "/v2/subscriptions/{uuid}", None),
    ("PUT", "/v2/subscriptions/{uuid}/pause", Some("2.11")),
    ("PUT", "/v2/subscriptions/{uuid}/resume", Some("2.11")),
    ("POST", "/v2/purchases", None),
    ("POST", "/v2/purchases/preview", None),
    ("GET", "/v2/adjustments/{uuid}", None),
    ("GET", "/v2/adjustments/{uuid}/credit_adjustments", Some("2.10")),
    ("GET", "/v2/invoices", None),
    ("GET", "/v2/invoices/{invoice_number}", None),
    ("POST", "/v2/invoices/{invoice_number}/refund", None),
    ("PUT", "/v2/invoices/{invoice_number}/void", Some("2.10")),
    ("GET", "/v2/invoices/{invoice_number}/original_invoices", Some("2.10")),
    ("GET", "/v2/invoices/{invoice_number}/credit_invoices", Some("2.10")),
    ("GET", "/v2/credit_payments", Some("2.10")),
    ("GET", "/v2/credit_payments/{uuid}", Some("2.10")),
    ("GET", "/v2/transactions", None),
    ("GET", "/v2/transactions/{uuid}", None),
    ("POST", "/v2/gift_cards", None),
    // Named without paths in the spec; paths from the reference.
    ("POST", "/v2/subscriptions/preview", None),
    ("POST", "/v2/subscriptions/{uuid}/preview", None),
    ("POST", "/v2/accounts/{account_code}/invoices", None),
    ("POST", "/v2/accounts/{account_code}/invoices/preview", None),
    ("POST", "/v2/transactions", None),
];

fn method(text: &str) -> Method {
    match text {
        "GET" => Method::Get,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        other => panic!("unknown method {other}"),
    }
}

#[test]
fn every_spec_endpoint_is_in_the_table_with_its_version() {
    for (m, path, since) in SPEC {
        let endpoint = ENDPOINTS
            .iter()
            .find(|e| e.method == method(m) && e.path == *path)
            .unwrap_or_else(|| panic!("{m} {path} is missing from schema/endpoints.toml"));
        let since = since.map(|s| ApiVersion::parse(s).expect("version"));
        assert_eq!(endpoint.since, since, "{m} {path}");
    }
}

#[test]
fn the_complete_service_endpoints_are_there_too() {
    for (m, path) in [
        ("DELETE", "/v2/accounts/{account_code}"),
        ("PUT", "/v2/accounts/{account_code}/reopen"),
        ("GET", "/v2/accounts/{account_code}/balance"),
        ("POST", "/v2/accounts/{account_code}/adjustments"),
        ("DELETE", "/v2/accounts/{account_code}/billing_info"),
        ("POST", "/v2/plans"),
        ("PUT", "/v2/plans/{plan_code}/add_ons/{add_on_code}"),
        ("POST", "/v2/coupons/{coupon_code}/redeem"),
        ("PUT", "/v2/subscriptions/{uuid}/cancel"),
        ("PUT", "/v2/subscriptions/{uuid}/terminate"),
        ("PUT", "/v2/subscriptions/{uuid}/reactivate"),
        ("PUT", "/v2/subscriptions/{uuid}/postpone"),
        ("PUT", "/v2/subscriptions/{uuid}/notes"),
        ("PUT", "/v2/invoices/{invoice_number}/mark_successful"),
        ("PUT", "/v2/invoices/{invoice_number}/mark_failed"),
        ("PUT", "/v2/invoices/{invoice_number}/collect"),
        ("DELETE", "/v2/transactions/{uuid}"),
        ("POST", "/v2/gift_cards/preview"),
        ("POST", "/v2/gift_cards/{redemption_code}/redeem"),
    ] {
        assert!(ENDPOINTS.iter().any(|e| e.method == method(m) && e.path == path), "{m} {path} is missing");
    }
}

#[test]
fn request_and_response_resources_exist() {
    let known = |name: &str| RESOURCES.iter().any(|r| r.name == name);
    for e in ENDPOINTS.iter() {
        if let Some(request) = e.request {
            assert!(known(request), "{}: request `{request}`", e.name);
        }
        match e.response {
            Body::Resource(r) | Body::List(r) => assert!(known(r), "{}: response `{r}`", e.name),
            Body::Empty => assert!(matches!(e.status, 201 | 202 | 204), "{}", e.name),
        }
        for (_, r) in e.later {
            assert!(known(r), "{}: later response `{r}`", e.name);
        }
    }
}

fn same<A: 'static, B: 'static>() -> bool {
    std::any::TypeId::of::<A>() == std::any::TypeId::of::<B>()
}

#[test]
fn marker_types_carry_the_body_types() {
    assert!(same::<<api::ListAccounts as ApiEndpoint>::Response, Vec<rebill_models::Account>>());
    assert!(same::<<api::CreateAccount as ApiEndpoint>::Request, rebill_models::Account>());
    assert!(same::<<api::RefundInvoice as ApiEndpoint>::Request, rebill_models::InvoiceRefund>());
    assert!(same::<<api::CloseAccount as ApiEndpoint>::Response, ()>());
    assert_eq!(api::PauseSubscription::ENDPOINT.path, "/v2/subscriptions/{uuid}/pause");
    assert_eq!(EndpointId::PauseSubscription.endpoint(), api::PauseSubscription::ENDPOINT);
}

#[test]
fn routing_by_method_and_path() {
    let (e, params) = routes().route(Method::Put, "/v2/subscriptions/abc/pause").expect("pause");
    assert_eq!((e.name, params), ("pause_subscription", vec!["abc"]));
    let (e, _) = routes().route(Method::Post, "/v2/subscriptions/preview").expect("preview");
    assert_eq!(e.name, "preview_subscription", "a literal segment wins over a parameter");
    let (e, params) = routes().route(Method::Post, "/v2/subscriptions/abc/preview").expect("change preview");
    assert_eq!((e.name, params), ("preview_subscription_change", vec!["abc"]));
    let (e, _) = routes().route(Method::Post, "/v2/accounts/a%2Fb/shipping_addresses/").expect("trailing slash");
    assert_eq!(e.name, "create_shipping_address");
    assert!(routes().route(Method::Get, "/v2/nothing").is_none());
    assert!(routes().route(Method::Get, "/v2/accounts//invoices").is_none());
    let ctx =
        |v: &str| rebill_xml::WireContext::new(ApiVersion::parse(v).expect("v"), rebill_xml::Features::none(), "");
    let mut allowed: Vec<_> =
        routes().allowed_methods("/v2/accounts/abc", &ctx("2.0")).iter().map(|m| m.as_str()).collect();
    allowed.sort_unstable();
    assert_eq!(allowed, ["DELETE", "GET", "PUT"]);
    assert!(routes().allowed_methods("/v2/subscriptions/abc/pause", &ctx("2.10")).is_empty(), "pause is 2.11");
    assert_eq!(routes().allowed_methods("/v2/subscriptions/abc/pause", &ctx("2.11")), [Method::Put]);
}

#[test]
fn rendering_encodes_parameters() {
    assert_eq!(api::GetAccount::ENDPOINT.render(&["a b/c"]), "/v2/accounts/a%20b%2Fc");
}

#[test]
fn versions_and_features_gate_routes() {
    let ctx = |v: &str, f: &str| {
        rebill_xml::WireContext::new(ApiVersion::parse(v).expect("v"), rebill_xml::Features::parse(f).expect("f"), "")
    };
    let pause = api::PauseSubscription::ENDPOINT;
    assert!(!pause.available(&ctx("2.10", "")));
    assert!(pause.available(&ctx("2.11", "")));
    let void = api::VoidInvoice::ENDPOINT;
    assert!(!void.available(&ctx("2.11", "")));
    assert!(void.available(&ctx("2.10", "credit_memos")));
    let purchase = api::CreatePurchase::ENDPOINT;
    assert_eq!(purchase.response_at(ApiVersion::new(2, 9)), Body::Resource("invoice"));
    assert_eq!(purchase.response_at(ApiVersion::new(2, 10)), Body::Resource("invoice_collection"));
}

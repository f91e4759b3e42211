//! Bad and hostile input: each case gives a typed error (with the element path where one
//! exists), never a panic and never an entity expansion.

use proptest::test_runner::{Config, TestRunner};
use rebill_models::{Account, InvoiceRefund, Model, ResourceVisitor, Subscription, visit_resources};
use rebill_tests::{ctx, example_ctx, workspace_root};
use rebill_xml::{ApiVersion, DecodeError, DecodeErrorKind, Features, Mode, XmlResource, from_xml};

fn request<T: XmlResource>(doc: &str) -> Result<T, DecodeError> {
    from_xml::<T>(doc.as_bytes(), &example_ctx(), Mode::Request)
}

fn request_at<T: XmlResource>(doc: &str, version: &str, features: &str) -> Result<T, DecodeError> {
    let c = ctx(ApiVersion::parse(version).expect("version"), &Features::parse(features).expect("features"));
    from_xml::<T>(doc.as_bytes(), &c, Mode::Request)
}

#[test]
fn unknown_element_in_a_request_names_its_path() {
    let err = request::<Subscription>(
        "<subscription><plan_code>gold</plan_code><account><account_code>a</account_code><billing_info><colour>red</colour></billing_info></account></subscription>",
    )
    .expect_err("unknown element");
    assert_eq!(err.kind(), &DecodeErrorKind::UnknownElement);
    assert_eq!(err.path(), "subscription.account.billing_info.colour");
    assert_eq!(err.to_string(), "unknown element at `subscription.account.billing_info.colour`");
}

#[test]
fn card_number_is_accepted_in_requests_only_where_the_schema_has_it() {
    let ok = request::<Subscription>(
        "<subscription><account><account_code>a</account_code><billing_info><number>4111111111111111</number></billing_info></account></subscription>",
    )
    .expect("billing_info.number is a request field");
    let number = ok.account.and_then(|a| a.billing_info).and_then(|b| b.number);
    assert_eq!(number.as_deref(), Some("4111111111111111"));
}

#[test]
fn response_only_element_in_a_request() {
    let err = request::<Subscription>("<subscription><uuid>abc</uuid></subscription>").expect_err("read-only");
    assert_eq!(err.kind(), &DecodeErrorKind::ResponseOnly);
    assert_eq!(err.path(), "subscription.uuid");
}

#[test]
fn elements_of_other_versions_and_features() {
    let err =
        request_at::<Subscription>("<subscription><imported_trial>true</imported_trial></subscription>", "2.7", "")
            .expect_err("2.8 element at 2.7");
    assert_eq!(err.kind(), &DecodeErrorKind::NotAtVersion(ApiVersion::new(2, 7)));
    assert_eq!(err.path(), "subscription.imported_trial");
    let ok: Subscription =
        request_at("<subscription><imported_trial>true</imported_trial></subscription>", "2.8", "").expect("2.8");
    assert_eq!(ok.imported_trial, Some(true));

    let err = request_at::<Account>("<account><preferred_locale>fr-FR</preferred_locale></account>", "2.10", "")
        .expect_err("2.11 element at 2.10");
    assert_eq!(err.kind(), &DecodeErrorKind::NotAtVersion(ApiVersion::new(2, 10)));

    let err = request_at::<Subscription>(
        "<subscription><credit_customer_notes>x</credit_customer_notes></subscription>",
        "2.11",
        "",
    )
    .expect_err("feature-gated");
    assert_eq!(err.kind(), &DecodeErrorKind::FeatureRequired("credit_memos"));
    assert_eq!(err.path(), "subscription.credit_customer_notes");
}

#[test]
fn refund_method_and_refund_apply_order_follow_the_version() {
    let old: InvoiceRefund =
        request_at("<invoice><refund_apply_order>credit</refund_apply_order></invoice>", "2.9", "").expect("2.9");
    let new: InvoiceRefund =
        request_at("<invoice><refund_method>credit_first</refund_method></invoice>", "2.10", "").expect("2.10");
    assert_eq!(old.refund_method, new.refund_method);
    let err =
        request_at::<InvoiceRefund>("<invoice><refund_apply_order>credit</refund_apply_order></invoice>", "2.10", "")
            .expect_err("refund_apply_order from 2.10");
    assert_eq!(
        (err.kind(), err.path().as_str()),
        (&DecodeErrorKind::NotAtVersion(ApiVersion::new(2, 10)), "invoice.refund_apply_order")
    );
    let err = request_at::<InvoiceRefund>("<invoice><refund_method>all_credit</refund_method></invoice>", "2.10", "")
        .expect_err("all_credit needs credit memos");
    assert!(matches!(err.kind(), DecodeErrorKind::InvalidValue { value, .. } if value == "all_credit"), "{err}");
    assert_eq!(err.path(), "invoice.refund_method");
    let ok: InvoiceRefund =
        request_at("<invoice><refund_method>all_credit</refund_method></invoice>", "2.10", "credit_memos")
            .expect("with credit memos");
    assert!(ok.refund_method.is_some());
}

#[test]
fn bad_integer() {
    let err = request::<Subscription>("<subscription><quantity type=\"integer\">abc</quantity></subscription>")
        .expect_err("abc");
    assert_eq!(err.kind(), &DecodeErrorKind::InvalidValue { value: "abc".into(), expected: "an integer".into() });
    assert_eq!(err.path(), "subscription.quantity");
    assert_eq!(err.to_string(), "`abc` is not an integer at `subscription.quantity`");
}

#[test]
fn nil_on_a_required_field() {
    let err = request::<Account>("<account><account_code nil=\"nil\"/></account>").expect_err("nil");
    assert_eq!((err.kind(), err.path().as_str()), (&DecodeErrorKind::NilNotAllowed, "account.account_code"));
    // A nil on an optional field is an explicit null.
    let ok: Account = request("<account><email nil=\"nil\"></email></account>").expect("optional nil");
    assert_eq!(ok.email, None);
}

#[test]
fn unclosed_tag() {
    let err = request::<Account>("<account><email>a@b.c</email>").expect_err("unclosed");
    assert!(matches!(err.kind(), DecodeErrorKind::Malformed { .. }), "{err}");
    assert!(err.is_syntax());
    let err = request::<Account>("<account><email>a@b.c</account>").expect_err("mismatched");
    assert!(matches!(err.kind(), DecodeErrorKind::Malformed { .. }), "{err}");
}

#[test]
fn unescaped_ampersand() {
    let err = request::<Account>("<account><company_name>A & B</company_name></account>").expect_err("bare &");
    assert!(err.is_syntax(), "{err}");
}

#[test]
fn invalid_utf8() {
    let err = from_xml::<Account>(b"<account><email>\xc3\x28</email></account>", &example_ctx(), Mode::Request)
        .expect_err("invalid utf-8");
    assert_eq!(err.kind(), &DecodeErrorKind::InvalidUtf8 { position: 16 });
}

#[test]
fn billion_laughs_is_refused_without_expansion() {
    let doc = r#"<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<account><email>&lol4;</email></account>"#;
    let err = request::<Account>(doc).expect_err("doctype");
    assert_eq!(err.kind(), &DecodeErrorKind::Doctype);
}

#[test]
fn external_entity_is_refused() {
    let doc = r#"<?xml version="1.0"?><!DOCTYPE account [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><account><email>&xxe;</email></account>"#;
    assert_eq!(request::<Account>(doc).expect_err("doctype").kind(), &DecodeErrorKind::Doctype);
    // Without a DOCTYPE, an undeclared entity is an error as well (never looked up).
    let err = request::<Account>("<account><email>&xxe;</email></account>").expect_err("entity");
    assert_eq!(err.kind(), &DecodeErrorKind::UnknownEntity("xxe".into()));
    assert_eq!(err.path(), "account.email");
}

#[test]
fn wrong_root_and_trailing_content() {
    let err = request::<Account>("<subscription/>").expect_err("root");
    assert_eq!(
        err.kind(),
        &DecodeErrorKind::UnexpectedRoot { expected: "account".into(), found: "subscription".into() }
    );
    let err = request::<Account>("<account/><account/>").expect_err("two roots");
    assert_eq!(err.kind(), &DecodeErrorKind::TrailingContent);
}

#[test]
fn deep_nesting_is_bounded() {
    let depth = 10_000;
    let doc = format!("<account>{}{}</account>", "<address>".repeat(depth), "</address>".repeat(depth));
    // Responses skip the unknown nesting without recursion; requests refuse the element.
    let lenient = from_xml::<Account>(doc.as_bytes(), &example_ctx(), Mode::Response).expect("skipped");
    assert!(lenient.address.is_some());
    let err = request::<Account>(&doc).expect_err("nested addresses");
    assert_eq!(err.path(), "account.address.address");
}

/// Mutated golden inputs (truncated, bytes flipped, bytes inserted) never panic.
#[test]
fn mutated_examples_never_panic() {
    let dir = workspace_root().join("schema/examples");
    let decoded = std::cell::Cell::new(0usize);
    let calls = std::cell::Cell::new(0usize);
    for info in rebill_models::RESOURCES {
        let Ok(text) = std::fs::read(dir.join(format!("{}.xml", info.name))) else { continue };
        let len = text.len();
        let strategy = (0..len, 0..len, proptest::num::u8::ANY, 0u8..4);
        let mut runner = TestRunner::new(Config { cases: 256, failure_persistence: None, ..Config::default() });
        runner
            .run(&strategy, |(at, other, byte, how)| {
                calls.set(calls.get() + 1);
                let mut doc = text.clone();
                match how {
                    0 => doc.truncate(at),
                    1 => doc[at] = byte,
                    2 => doc.insert(at, byte),
                    _ => doc.swap(at, other),
                }
                for mode in [Mode::Request, Mode::Response] {
                    if let Some(Ok(_)) = rebill_models::transcode(info.name, &doc, &example_ctx(), &example_ctx(), mode)
                    {
                        decoded.set(decoded.get() + 1);
                    }
                }
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{}: {e}", info.name));
    }
    // Many mutations (inside text, say) still decode: the decoders really ran on them.
    assert!(decoded.get() > calls.get() / 10, "only {} of {} mutated documents decoded", decoded.get(), calls.get());
}

/// Each resource's example rewritten as a request body (its request fields only), then mutated:
/// strict request decoding of every request root never panics.
struct MutatedRequests {
    checked: usize,
}

impl ResourceVisitor for MutatedRequests {
    fn visit<T: Model>(&mut self, name: &'static str) {
        let Ok(text) = std::fs::read(workspace_root().join(format!("schema/examples/{name}.xml"))) else { return };
        let c = example_ctx();
        let info = rebill_models::RESOURCES.iter().find(|r| r.name == name).expect("resource info");
        let mode = if info.request_only { Mode::Request } else { Mode::Response };
        let value: T = from_xml(&text, &c, mode).unwrap_or_else(|e| panic!("{name}: {e}"));
        let request = rebill_xml::to_xml(&value, &c, Mode::Request).into_bytes();
        // The unmutated request body reads back strictly.
        from_xml::<T>(&request, &c, Mode::Request).unwrap_or_else(|e| panic!("{name} as a request: {e}"));
        let len = request.len();
        let mut runner = TestRunner::new(Config { cases: 128, failure_persistence: None, ..Config::default() });
        runner
            .run(&(0..len, 0..len, proptest::num::u8::ANY, 0u8..4), |(at, other, byte, how)| {
                let mut doc = request.clone();
                match how {
                    0 => doc.truncate(at),
                    1 => doc[at] = byte,
                    2 => doc.insert(at, byte),
                    _ => doc.swap(at, other),
                }
                let _ = from_xml::<T>(&doc, &c, Mode::Request);
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        self.checked += 1;
    }
}

#[test]
fn mutated_request_bodies_never_panic() {
    let mut visitor = MutatedRequests { checked: 0 };
    visit_resources(&mut visitor);
    assert!(visitor.checked >= 20, "only {} resources have examples", visitor.checked);
}

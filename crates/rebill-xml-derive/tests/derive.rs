//! The derives on small hand-written types: encoding, strict and lenient decoding, renames,
//! feature gates, attributes and anchors.

// The derives emit `#[cfg(feature = "arbitrary")]` items for the deriving crate; this test crate
// has no such feature.
#![allow(unexpected_cfgs)]

use rebill_xml::{ApiVersion, DecodeErrorKind, Features, Href, Mode, Project, WireContext, XmlEnum, from_xml, to_xml};
use rebill_xml_derive::{XmlEnum, XmlResource};

#[derive(Debug, Clone, PartialEq, XmlEnum)]
#[xml(name = "state")]
enum State {
    #[xml(rename(value = "open", until = "2.10"), rename(value = "pending", since = "2.10"))]
    Pending,
    #[xml(value = "paid")]
    Paid,
    #[xml(value = "voided", since = "2.10", feature = "credit_memos", fallback = "Paid")]
    Voided,
    #[xml(unknown)]
    Unknown(String),
}

#[derive(Debug, Clone, PartialEq, Default, XmlResource)]
#[xml(root = "thing", plural = "things", href = "/v2/things/{code}")]
struct Thing {
    #[xml(kind = "enum", attribute = "type")]
    kind: Option<State>,
    #[xml(kind = "string", required)]
    code: Option<String>,
    #[xml(
        kind = "cents",
        direction = "response",
        rename(element = "subtotal_in_cents", until = "2.10"),
        rename(element = "subtotal_before_in_cents", since = "2.10")
    )]
    before: Option<i64>,
    #[xml(
        kind = "cents",
        direction = "response",
        since = "2.5",
        rename(element = "subtotal_after_in_cents", until = "2.10"),
        rename(element = "subtotal_in_cents", since = "2.10")
    )]
    after: Option<i64>,
    #[xml(kind = "enum")]
    state: Option<State>,
    #[xml(kind = "string", direction = "request")]
    secret: Option<String>,
    #[xml(kind = "string", since = "2.10", feature = "credit_memos")]
    notes: Option<String>,
    #[xml(kind = "resource")]
    child: Option<Box<Thing>>,
    #[xml(kind = "list", item = "thing")]
    children: Option<Vec<Thing>>,
    #[xml(kind = "link", direction = "response")]
    owner: Option<Href>,
    #[xml(kind = "anchor", anchor = "cancel", method = "put", direction = "response")]
    cancel: Option<Href>,
}

fn ctx(version: &str, features: &str) -> WireContext {
    WireContext::new(
        ApiVersion::parse(version).expect("version"),
        Features::parse(features).expect("features"),
        "https://x.test",
    )
}

fn sample() -> Thing {
    Thing {
        kind: Some(State::Paid),
        code: Some("a&b".into()),
        before: Some(100),
        after: Some(90),
        state: Some(State::Voided),
        secret: Some("s".into()),
        notes: Some(String::new()),
        child: Some(Box::new(Thing { code: Some("c".into()), ..Thing::default() })),
        children: Some(vec![]),
        owner: Some(Href::path("/v2/owners/1")),
        cancel: Some(Href::path("/v2/things/a%26b/cancel")),
    }
}

#[test]
fn response_renames_follow_the_version() {
    let old = to_xml(&sample(), &ctx("2.9", "credit_memos"), Mode::Response);
    assert!(old.contains("<thing href=\"https://x.test/v2/things/a%26b\" type=\"paid\">"), "{old}");
    assert!(old.contains("<subtotal_in_cents type=\"integer\">100</subtotal_in_cents>"), "{old}");
    assert!(old.contains("<subtotal_after_in_cents type=\"integer\">90</subtotal_after_in_cents>"), "{old}");
    assert!(old.contains("<state>paid</state>"), "fallback before 2.10: {old}");
    assert!(!old.contains("notes"), "{old}");
    assert!(!old.contains("secret"), "{old}");
    let new = to_xml(&sample(), &ctx("2.10", "credit_memos"), Mode::Response);
    assert!(new.contains("<subtotal_before_in_cents type=\"integer\">100</subtotal_before_in_cents>"), "{new}");
    assert!(new.contains("<subtotal_in_cents type=\"integer\">90</subtotal_in_cents>"), "{new}");
    assert!(new.contains("<state>voided</state>"), "{new}");
    assert!(new.contains("<notes></notes>"), "{new}");
    assert!(new.contains("<child href=\"https://x.test/v2/things/c\">"), "{new}");
    assert!(new.contains("<state nil=\"nil\"></state>"), "nil inside child: {new}");
    assert!(new.contains("<owner href=\"https://x.test/v2/owners/1\"/>"), "{new}");
    assert!(
        new.trim_end()
            .ends_with("<a name=\"cancel\" href=\"https://x.test/v2/things/a%26b/cancel\" method=\"put\"/>\n</thing>"),
        "{new}"
    );
    let without = to_xml(&sample(), &ctx("2.10", ""), Mode::Response);
    assert!(without.contains("<state>paid</state>") && !without.contains("notes"), "{without}");
}

#[test]
fn round_trips_to_the_projection() {
    for version in ["2.0", "2.5", "2.9", "2.10", "2.11"] {
        for features in ["", "credit_memos"] {
            for mode in [Mode::Request, Mode::Response] {
                let c = ctx(version, features);
                let xml = to_xml(&sample(), &c, mode);
                let back: Thing = from_xml(xml.as_bytes(), &c, mode).unwrap_or_else(|e| panic!("{e}\n{xml}"));
                assert_eq!(back, sample().project(&c, mode), "{version} {features} {mode:?}\n{xml}");
            }
        }
    }
}

#[test]
fn strict_requests_name_the_element() {
    let c = ctx("2.9", "");
    let err =
        from_xml::<Thing>(b"<thing><child><bogus>1</bogus></child></thing>", &c, Mode::Request).expect_err("unknown");
    assert_eq!(err.kind(), &DecodeErrorKind::UnknownElement);
    assert_eq!(err.path(), "thing.child.bogus");
    let err = from_xml::<Thing>(b"<thing><subtotal_in_cents>1</subtotal_in_cents></thing>", &c, Mode::Request)
        .expect_err("read-only");
    assert_eq!((err.kind(), err.path().as_str()), (&DecodeErrorKind::ResponseOnly, "thing.subtotal_in_cents"));
    let err = from_xml::<Thing>(b"<thing><notes>x</notes></thing>", &c, Mode::Request).expect_err("version");
    assert_eq!(err.kind(), &DecodeErrorKind::NotAtVersion(ApiVersion::new(2, 9)));
    let err =
        from_xml::<Thing>(b"<thing><notes>x</notes></thing>", &ctx("2.10", ""), Mode::Request).expect_err("feature");
    assert_eq!(err.kind(), &DecodeErrorKind::FeatureRequired("credit_memos"));
    let err = from_xml::<Thing>(b"<thing><code nil=\"nil\"/></thing>", &c, Mode::Request).expect_err("nil");
    assert_eq!((err.kind(), err.path().as_str()), (&DecodeErrorKind::NilNotAllowed, "thing.code"));
    let err = from_xml::<Thing>(b"<thing><state>closed</state></thing>", &c, Mode::Request).expect_err("enum");
    assert!(err.to_string().contains("one of: open, paid"), "{err}");
    let err = from_xml::<Thing>(
        b"<thing><children><thing><code>1</code></thing><thing><x/></thing></children></thing>",
        &c,
        Mode::Request,
    )
    .expect_err("index");
    assert_eq!(err.path(), "thing.children[1].x");
}

#[test]
fn lenient_responses_skip_and_keep() {
    let c = ctx("2.9", "");
    let doc = b"<thing><new_field><deep>1</deep></new_field><state>frozen</state><code>x</code><a name=\"later\" href=\"/\" method=\"put\"/></thing>";
    let thing: Thing = from_xml(doc, &c, Mode::Response).expect("lenient");
    assert_eq!(thing.state, Some(State::Unknown("frozen".into())));
    assert_eq!(thing.code.as_deref(), Some("x"));
    assert_eq!(State::from_wire("open", &c), Some(State::Pending));
    assert_eq!(State::from_wire("pending", &c), None);
    assert_eq!(State::Pending.name(), "pending");
}

#[test]
fn typed_and_untyped_request_elements() {
    let c = ctx("2.11", "credit_memos");
    let a: Thing =
        from_xml(b"<thing type=\"paid\"><code type=\"string\">x</code></thing>", &c, Mode::Request).expect("typed");
    let b: Thing = from_xml(b"<?xml version=\"1.0\"?><thing type=\"paid\"><code>x</code></thing>", &c, Mode::Request)
        .expect("untyped");
    assert_eq!(a, b);
    assert_eq!(a.kind, Some(State::Paid));
}

#[test]
fn empty_typed_request_elements_are_nil() {
    let c = ctx("2.11", "credit_memos");
    // An empty enum element is nil, as `nil="nil"` is; an empty string element is the empty
    // string.
    for xml in [
        "<thing><code></code><state></state></thing>",
        "<thing><code/><state/></thing>",
        "<thing><code></code><state nil=\"nil\"/></thing>",
    ] {
        let thing: Thing = from_xml(xml.as_bytes(), &c, Mode::Request).expect(xml);
        assert_eq!((thing.code.as_deref(), thing.state), (Some(""), None), "{xml}");
    }
    // A text that is not a value is still refused.
    let err = from_xml::<Thing>(b"<thing><state>closed</state></thing>", &c, Mode::Request).expect_err("enum");
    assert!(matches!(err.kind(), DecodeErrorKind::InvalidValue { .. }), "{err:?}");
}

#[derive(Debug, Clone, PartialEq, Default, XmlResource)]
#[xml(root = "error")]
struct FieldError {
    #[xml(kind = "string", attribute = "field")]
    field: Option<String>,
    #[xml(kind = "string", attribute = "symbol")]
    symbol: Option<String>,
    #[xml(kind = "text")]
    message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Default, XmlResource)]
#[xml(root = "errors")]
struct Errors {
    #[xml(kind = "string")]
    note: Option<String>,
    #[xml(kind = "list", item = "error", inline)]
    errors: Option<Vec<FieldError>>,
}

#[test]
fn text_content_and_inline_lists() {
    let c = ctx("2.11", "");
    let doc = Errors {
        note: Some("n".into()),
        errors: Some(vec![
            FieldError {
                field: Some("account.email".into()),
                symbol: Some("invalid_email".into()),
                message: Some("is not a valid email address".into()),
            },
            FieldError { field: Some("account.code".into()), symbol: Some("blank".into()), message: None },
        ]),
    };
    let xml = to_xml(&doc, &c, Mode::Response);
    assert!(
        xml.contains(
            "\n  <error field=\"account.email\" symbol=\"invalid_email\">is not a valid email address</error>\n"
        ),
        "{xml}"
    );
    assert!(xml.contains("<error field=\"account.code\" symbol=\"blank\" nil=\"nil\"></error>"), "{xml}");
    let back: Errors = from_xml(xml.as_bytes(), &c, Mode::Response).expect("read back");
    assert_eq!(back, doc);
    let empty = Errors { note: None, errors: Some(vec![]) };
    let back: Errors = from_xml(to_xml(&empty, &c, Mode::Response).as_bytes(), &c, Mode::Response).expect("empty");
    assert_eq!(back, empty.project(&c, Mode::Response));
    assert_eq!(back.errors, None);
    let err = from_xml::<FieldError>(b"<error field=\"a\"><b/></error>", &c, Mode::Request).expect_err("child in text");
    assert_eq!(err.kind(), &DecodeErrorKind::UnexpectedChild("b".into()));
}

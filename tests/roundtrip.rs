//! Property tests over every generated resource type, every API version, every feature set and
//! both directions: a value written for a context reads back as its projection onto that
//! context (the fields that exist there), and reading arbitrary bytes never panics.

use proptest::test_runner::{Config, TestCaseError, TestRunner};
use rebill_models::{Model, ResourceVisitor, visit_resources};
use rebill_tests::{ctx, feature_sets, features_label, versions};
use rebill_xml::arbitrary::strategy;
use rebill_xml::{Mode, from_xml, to_xml};

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() })
}

struct RoundTrip {
    checked: usize,
}

impl ResourceVisitor for RoundTrip {
    fn visit<T: Model>(&mut self, name: &'static str) {
        for features in feature_sets() {
            for &version in versions() {
                for mode in [Mode::Request, Mode::Response] {
                    let c = ctx(version, &features);
                    let result = runner(24).run(&strategy::<T>(), |value| {
                        let xml = to_xml(&value, &c, mode);
                        let back: T = from_xml(xml.as_bytes(), &c, mode)
                            .map_err(|e| TestCaseError::fail(format!("{e}\n{xml}")))?;
                        let expected = value.project(&c, mode);
                        if back != expected {
                            return Err(TestCaseError::fail(format!(
                                "read back {back:#?}\nexpected {expected:#?}\n{xml}"
                            )));
                        }
                        // Writing the read value again gives the same document.
                        let again = to_xml(&back, &c, mode);
                        if again != xml {
                            return Err(TestCaseError::fail(format!("second write differs:\n{xml}\n---\n{again}")));
                        }
                        Ok(())
                    });
                    if let Err(e) = result {
                        panic!("{name} at {version} ({}) {mode:?}: {e}", features_label(&features));
                    }
                    self.checked += 1;
                }
            }
        }
    }
}

#[test]
fn encode_then_decode_gives_the_projection() {
    let mut visitor = RoundTrip { checked: 0 };
    visit_resources(&mut visitor);
    assert_eq!(visitor.checked, rebill_models::RESOURCES.len() * versions().len() * feature_sets().len() * 2);
}

struct NeverPanics;

impl ResourceVisitor for NeverPanics {
    fn visit<T: Model>(&mut self, _name: &'static str) {
        let c = ctx(rebill_xml::version::LATEST_VERSION, &rebill_xml::Features::all());
        let bytes = proptest::collection::vec(proptest::num::u8::ANY, 0..256);
        runner(64)
            .run(&bytes, |input| {
                let _ = from_xml::<T>(&input, &c, Mode::Request);
                let _ = from_xml::<T>(&input, &c, Mode::Response);
                let _ = rebill_xml::list_from_xml::<T>(&input, &c, Mode::Response);
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{e}"));
        // Near-valid input: the root element around arbitrary text.
        let text = "[<>/a-z\" =&;#0-9]{0,64}";
        runner(64)
            .run(&text, |inner| {
                let doc = format!("<{root}>{inner}</{root}>", root = T::ROOT);
                let _ = from_xml::<T>(doc.as_bytes(), &c, Mode::Request);
                let _ = from_xml::<T>(doc.as_bytes(), &c, Mode::Response);
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn decoding_arbitrary_bytes_never_panics() {
    visit_resources(&mut NeverPanics);
}

/// A field that lives only in the root href (`href_only`) is written there, percent-encoded, and
/// read back from it; requests carry neither.
#[test]
fn href_only_fields_travel_in_the_root_href() {
    use rebill_models::{AccountBalance, BillingInfo, BillingInfoType};
    let c = ctx(rebill_xml::version::LATEST_VERSION, &rebill_xml::Features::none());
    let balance = AccountBalance { account_code: Some("a b+@/ü".into()), past_due: Some(false), ..Default::default() };
    let xml = to_xml(&balance, &c, Mode::Response);
    assert!(
        xml.contains("<account_balance href=\"https://api.rebill.test/v2/accounts/a%20b%2B%40%2F%C3%BC/balance\">"),
        "{xml}"
    );
    assert!(!xml.contains("<account_code"), "{xml}");
    assert_eq!(from_xml::<AccountBalance>(xml.as_bytes(), &c, Mode::Response).expect("read"), balance);
    // Without the code there is no href, and an href of another shape sets nothing.
    let bare = AccountBalance { account_code: None, ..balance.clone() };
    assert!(to_xml(&bare, &c, Mode::Response).contains("<account_balance>"));
    let foreign = xml.replace("/balance\"", "/other\"");
    assert_eq!(from_xml::<AccountBalance>(foreign.as_bytes(), &c, Mode::Response).expect("read"), bare);

    let info = BillingInfo {
        account_code: Some("abc".into()),
        kind: Some(BillingInfoType::CreditCard),
        first_name: Some("V".into()),
        ..Default::default()
    };
    let xml = to_xml(&info, &c, Mode::Response);
    assert!(
        xml.contains(
            "<billing_info href=\"https://api.rebill.test/v2/accounts/abc/billing_info\" type=\"credit_card\">"
        ),
        "{xml}"
    );
    assert_eq!(from_xml::<BillingInfo>(xml.as_bytes(), &c, Mode::Response).expect("read"), info);
    let request = to_xml(&info, &c, Mode::Request);
    assert!(request.contains("<billing_info type=\"credit_card\">") && !request.contains("abc"), "{request}");
}

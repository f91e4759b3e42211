//! Golden files: every example under schema/examples/ written at every API version, with and
//! without each site feature, plus a per-resource summary of what changes at each version
//! boundary. Review changes with `cargo insta review`.

use rebill_models::RESOURCES;
use rebill_tests::{ctx, example_ctx, feature_sets, features_label, versions, workspace_root};
use rebill_xml::Mode;

fn examples() -> Vec<(&'static rebill_models::ResourceInfo, String)> {
    let dir = workspace_root().join("schema/examples");
    let mut out = Vec::new();
    for info in RESOURCES {
        let path = dir.join(format!("{}.xml", info.name));
        if let Ok(text) = std::fs::read_to_string(&path) {
            out.push((info, text));
        }
    }
    out
}

fn mode(info: &rebill_models::ResourceInfo) -> Mode {
    if info.request_only { Mode::Request } else { Mode::Response }
}

fn transcode(info: &rebill_models::ResourceInfo, input: &str, to: &rebill_xml::WireContext) -> String {
    rebill_models::transcode(info.name, input.as_bytes(), &example_ctx(), to, mode(info))
        .expect("resource exists")
        .unwrap_or_else(|e| panic!("schema/examples/{}.xml: {e}", info.name))
}

#[test]
fn the_core_resources_have_examples() {
    let names: Vec<_> = examples().iter().map(|(i, _)| i.name).collect();
    for required in ["account", "billing_info", "shipping_address", "plan", "subscription", "invoice", "refund"] {
        assert!(names.contains(&required), "schema/examples/{required}.xml is missing");
    }
}

/// Examples are canonical: written at the latest version with every feature, they read and
/// write back byte for byte, so no element in them is silently skipped.
#[test]
fn examples_are_canonical() {
    for (info, text) in examples() {
        let again = transcode(info, &text, &example_ctx());
        let diff = similar::TextDiff::from_lines(text.as_str(), again.as_str());
        assert!(
            text == again,
            "schema/examples/{}.xml is not canonical (fix it, or regenerate it with `cargo xtask xml --resource {} --from 2.11 --to 2.11 --features credit_memos`):\n{}",
            info.name,
            info.name,
            diff.unified_diff()
        );
    }
}

#[test]
fn every_version_and_feature_set() {
    for (info, text) in examples() {
        for features in feature_sets() {
            for &version in versions() {
                let out = transcode(info, &text, &ctx(version, &features));
                let name = format!("{}__{}__{}", info.name, version, features_label(&features));
                insta::assert_snapshot!(name, out);
            }
        }
    }
}

/// What appears, disappears or changes at each version boundary, per feature set.
#[test]
fn version_boundaries() {
    for (info, text) in examples() {
        let mut report = String::new();
        for features in feature_sets() {
            report.push_str(&format!("## features: {}\n", features_label(&features)));
            let mut previous: Option<(rebill_xml::ApiVersion, String)> = None;
            for &version in versions() {
                let out = transcode(info, &text, &ctx(version, &features));
                if let Some((prev_version, prev)) = &previous {
                    let diff = similar::TextDiff::from_lines(prev.as_str(), out.as_str());
                    let changes: Vec<String> = diff
                        .iter_all_changes()
                        .filter(|c| c.tag() != similar::ChangeTag::Equal)
                        .map(|c| {
                            let sign = if c.tag() == similar::ChangeTag::Delete { '-' } else { '+' };
                            format!("  {sign} {}", c.value().trim())
                        })
                        .collect();
                    if !changes.is_empty() {
                        report.push_str(&format!("{prev_version} -> {version}\n{}\n", changes.join("\n")));
                    }
                }
                previous = Some((version, out));
            }
        }
        insta::assert_snapshot!(format!("{}__boundaries", info.name), report);
    }
}

/// A validation-error document is `<errors>` of `<error field symbol lang>` only: the decline
/// parts are left out, not written as nil (clients take `<transaction_error>` for a decline).
#[test]
fn validation_errors_document() {
    let doc = rebill_models::Errors {
        errors: Some(vec![rebill_models::FieldError {
            field: Some("subscription.account.address.country".into()),
            symbol: Some("invalid".into()),
            lang: Some("en-US".into()),
            message: Some("is not a valid ISO 3166 country code".into()),
        }]),
        ..Default::default()
    };
    let xml = rebill_xml::to_xml(&doc, &example_ctx(), Mode::Response);
    assert_eq!(
        xml,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<errors>\n  <error field=\"subscription.account.address.country\" symbol=\"invalid\" lang=\"en-US\">is not a valid ISO 3166 country code</error>\n</errors>\n"
    );
}

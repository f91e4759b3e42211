//! The crate layering (ARCHITECTURE.md, "Dependency rules"), checked over `cargo metadata`: a
//! crate that gains a forbidden dependency, directly or through another workspace crate, fails
//! this test with the rule it broke.
//!
//! Only the workspace's own manifests are read (`--no-deps`), so the check needs no network:
//! a crate's dependencies are its declared ones plus those of the workspace crates it depends
//! on, followed transitively (normal dependencies; dev-dependencies only count for the
//! "who may depend on" rules).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// A crate and the dependencies it must never have, with the reason.
struct Forbidden {
    krate: &'static str,
    dependencies: &'static [&'static str],
    why: &'static str,
}

/// A dependency feature a crate must never turn on.
struct ForbiddenFeature {
    krate: &'static str,
    dependency: &'static str,
    feature: &'static str,
    why: &'static str,
}

/// A crate only the listed crates may depend on (in any kind of dependency).
struct OnlyDependedOnBy {
    krate: &'static str,
    dependents: &'static [&'static str],
    why: &'static str,
}

const FORBIDDEN: &[Forbidden] = &[
    Forbidden {
        krate: "rebill-billing",
        dependencies: &[
            "sqlx",
            "axum",
            "hyper",
            "hyper-util",
            "http",
            "tower",
            "rebill-store",
            "rebill-xml",
            "rebill-models",
            "rebill-server",
            "rebill-app",
        ],
        why: "the billing domain does no I/O and knows no wire format",
    },
    Forbidden {
        krate: "rebill-store",
        dependencies: &[
            "axum",
            "hyper",
            "hyper-util",
            "http",
            "tower",
            "rebill-xml",
            "rebill-models",
            "rebill-server",
            "rebill-app",
        ],
        why: "storage knows neither HTTP nor XML nor the use cases above it",
    },
    Forbidden {
        krate: "rebill-app",
        dependencies: &[
            "axum",
            "hyper",
            "hyper-util",
            "http",
            "tower",
            "tower-http",
            "rebill-xml",
            "rebill-models",
            "rebill-server",
        ],
        why: "the use cases take plain domain inputs: no HTTP, no wire format, no server",
    },
    Forbidden {
        krate: "rebill-models",
        dependencies: &["rebill-store", "rebill-server", "rebill-app", "sqlx", "axum", "hyper"],
        why: "the generated models are the wire contract, shared with clients: no storage, no service",
    },
    Forbidden {
        krate: "rebill-xml",
        dependencies: &["rebill-store", "rebill-server", "rebill-app", "sqlx", "axum", "hyper"],
        why: "the wire dialect is shared with clients: no storage, no service",
    },
    Forbidden {
        krate: "rebill-client",
        dependencies: &["rebill-store", "rebill-app", "rebill-server", "rebill-billing", "axum", "sqlx"],
        why: "the client is a merchant's dependency: the models, the wire format and HTTP, nothing of the service",
    },
];

const FORBIDDEN_FEATURES: &[ForbiddenFeature] = &[ForbiddenFeature {
    krate: "rebill-billing",
    dependency: "tokio",
    feature: "net",
    why: "the billing domain does no I/O",
}];

const ONLY_DEPENDED_ON_BY: &[OnlyDependedOnBy] = &[OnlyDependedOnBy {
    krate: "rebill-server",
    dependents: &["rebill-cli", "rebill-load-bench"],
    why: "the HTTP service is an adapter at the edge: the binary and the benchmarks start it, nothing builds on it",
}];

/// A workspace crate's declared dependencies: name, kind (`None` for normal), features.
type Declared = Vec<(String, Option<String>, Vec<String>)>;

fn workspace() -> BTreeMap<String, Declared> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata answers JSON");
    let mut crates = BTreeMap::new();
    for package in metadata["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().expect("package name").to_owned();
        let declared = package["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .map(|d| {
                let name = d["name"].as_str().expect("dependency name").to_owned();
                let kind = d["kind"].as_str().map(str::to_owned);
                let features =
                    d["features"].as_array().into_iter().flatten().filter_map(|f| f.as_str().map(str::to_owned));
                (name, kind, features.collect())
            })
            .collect();
        crates.insert(name, declared);
    }
    crates
}

/// Every normal dependency of `krate`, with the path of workspace crates it comes through.
fn normal_dependencies(crates: &BTreeMap<String, Declared>, krate: &str) -> BTreeMap<String, Vec<String>> {
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut stack = vec![(krate.to_owned(), vec![krate.to_owned()])];
    let mut seen = BTreeSet::new();
    while let Some((name, path)) = stack.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let Some(declared) = crates.get(&name) else { continue };
        for (dep, kind, _) in declared {
            if kind.is_some() || dep == &name {
                continue;
            }
            let mut via = path.clone();
            via.push(dep.clone());
            found.entry(dep.clone()).or_insert_with(|| via.clone());
            if crates.contains_key(dep) {
                stack.push((dep.clone(), via));
            }
        }
    }
    found
}

#[test]
fn crates_keep_their_layers() {
    let crates = workspace();
    let mut broken = Vec::new();
    for rule in FORBIDDEN {
        let deps = normal_dependencies(&crates, rule.krate);
        for forbidden in rule.dependencies {
            if let Some(via) = deps.get(*forbidden) {
                broken.push(format!(
                    "{} must not depend on {forbidden} ({}), but does: {}",
                    rule.krate,
                    rule.why,
                    via.join(" -> ")
                ));
            }
        }
    }
    for rule in FORBIDDEN_FEATURES {
        let Some(declared) = crates.get(rule.krate) else { continue };
        for (dep, kind, features) in declared {
            if dep == rule.dependency && kind.is_none() && features.iter().any(|f| f == rule.feature) {
                broken.push(format!(
                    "{} must not turn on {}'s `{}` feature ({})",
                    rule.krate, rule.dependency, rule.feature, rule.why
                ));
            }
        }
    }
    for rule in ONLY_DEPENDED_ON_BY {
        for (name, declared) in &crates {
            let depends = declared.iter().any(|(dep, _, _)| dep == rule.krate);
            if depends && name != rule.krate && !rule.dependents.contains(&name.as_str()) {
                broken.push(format!(
                    "{name} must not depend on {} (only {} may: {})",
                    rule.krate,
                    rule.dependents.join(", "),
                    rule.why
                ));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "the crate layering is broken (see ARCHITECTURE.md, Dependency rules):\n- {}",
        broken.join("\n- ")
    );
}

#[test]
fn the_rules_name_real_crates() {
    // A rule about a crate that was renamed would silently check nothing.
    let crates = workspace();
    let named =
        FORBIDDEN.iter().map(|r| r.krate).chain(FORBIDDEN_FEATURES.iter().map(|r| r.krate)).chain(
            ONLY_DEPENDED_ON_BY.iter().flat_map(|r| std::iter::once(r.krate).chain(r.dependents.iter().copied())),
        );
    for krate in named {
        assert!(crates.contains_key(krate), "a layering rule names {krate}, which is not a workspace crate");
    }
}

#[test]
fn a_forbidden_dependency_is_found_through_another_workspace_crate() {
    let mut crates = BTreeMap::new();
    crates.insert(
        "a".to_owned(),
        vec![("b".to_owned(), None, Vec::new()), ("x".to_owned(), Some("dev".to_owned()), Vec::new())],
    );
    crates.insert("b".to_owned(), vec![("axum".to_owned(), None, Vec::new())]);
    let deps = normal_dependencies(&crates, "a");
    assert_eq!(deps.get("axum").map(|v| v.join(" -> ")).as_deref(), Some("a -> b -> axum"));
    assert!(!deps.contains_key("x"), "dev-dependencies are not normal dependencies");
}

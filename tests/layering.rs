//! The crate layering (ARCHITECTURE.md, "Dependency rules"), checked over `cargo metadata`: a
//! crate that gains a forbidden dependency, directly or through another workspace crate, fails
//! this test with the rule it broke.
//!
//! Only the workspace's own manifests are read (`--no-deps`), so the check needs no network:
//! a crate's dependencies are its declared ones plus those of the workspace crates it depends
//! on, followed transitively (normal dependencies; dev-dependencies only count for the
//! "who may depend on" rules).
//!
//! Inside the server, the handlers are adapters over `rebill-app`: a source-level check fails
//! when a module of `crates/rebill-server/src` other than the protocol layers (`layers.rs`),
//! the crate root (`lib.rs`) and the shared state (`state.rs`, which builds `AppState` over a
//! store and holds the request context's site and key) names `rebill_store` or
//! reaches the store (`.store`) in its code (comments and string literals do not count).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
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
    Forbidden {
        krate: "rebill-gateway-stripe",
        dependencies: &["rebill-store", "rebill-app", "rebill-server", "rebill-xml", "rebill-models", "sqlx", "axum"],
        why: "a gateway speaks its provider's API behind the `Gateway` trait: no storage, no use cases, no rebill wire format",
    },
    Forbidden {
        krate: "rebill-webhooks",
        dependencies: &[
            "sqlx",
            "axum",
            "hyper",
            "http",
            "tower",
            "reqwest",
            "rebill-store",
            "rebill-app",
            "rebill-server",
        ],
        why: "the webhooks' rules (kinds, signatures, the retry schedule) are shared by the use cases and the sender: no I/O",
    },
    Forbidden {
        krate: "rebill-pdf",
        dependencies: &[
            "rebill-store",
            "rebill-app",
            "rebill-server",
            "rebill-billing",
            "rebill-xml",
            "rebill-models",
            "sqlx",
            "axum",
            "tokio",
        ],
        why: "invoice documents are laid out from plain values: no storage, no domain rules, no wire format, no I/O",
    },
];

const FORBIDDEN_FEATURES: &[ForbiddenFeature] = &[ForbiddenFeature {
    krate: "rebill-billing",
    dependency: "tokio",
    feature: "net",
    why: "the billing domain does no I/O",
}];

const ONLY_DEPENDED_ON_BY: &[OnlyDependedOnBy] = &[
    OnlyDependedOnBy {
        krate: "rebill-server",
        dependents: &["rebill-cli", "rebill-load-bench"],
        why: "the HTTP service is an adapter at the edge: the binary and the benchmarks start it, nothing builds on it",
    },
    OnlyDependedOnBy {
        krate: "rebill-gateway-stripe",
        dependents: &["rebill-cli", "rebill-load-bench"],
        why: "a real gateway is chosen at the composition root (the binary's `GatewayBuilder`); the use cases see only the `Gateway` trait",
    },
];

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

/// Modules of the server that may reach the store: the protocol layers (authentication, rate
/// limits: plumbing, not handlers), the crate root and the shared state building `AppState`.
const SERVER_STORE_MODULES: [&str; 3] = ["layers.rs", "lib.rs", "state.rs"];

/// `source` without its comments and with the contents of its string and character literals
/// blanked, so that only code is left.
fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_char(out.chars().last()) {
            // A raw string: r"…", r#"…"#, …
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            i += 2 + hashes;
            let closing: String = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            while i < chars.len() && !chars[i..].iter().collect::<String>().starts_with(&closing) {
                i += 1;
            }
            i += closing.chars().count();
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A character literal ('x', '\n', '\'') or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push_str("' '");
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_char(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// What in `source` reaches the store: `rebill_store` named, or a `.store` field or method
/// (whitespace between the dot and the name included), each with its line.
fn store_uses(source: &str) -> Vec<(usize, String)> {
    let code = code_only(source);
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        if line.contains("rebill_store") {
            found.push((n + 1, "names rebill_store".to_owned()));
        }
    }
    let chars: Vec<char> = code.chars().collect();
    let mut line = 1;
    for (i, &c) in chars.iter().enumerate() {
        if c == '\n' {
            line += 1;
        }
        if c != '.' || chars.get(i + 1) == Some(&'.') || (i > 0 && chars[i - 1] == '.') {
            continue;
        }
        let rest: String = chars[i + 1..].iter().skip_while(|c| c.is_whitespace()).take(6).collect();
        if rest.starts_with("store") && !ident_char(rest.chars().nth(5)) {
            found.push((line, "reaches .store".to_owned()));
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn server_handlers_do_not_reach_the_store() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/rebill-server/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(files.len() > 10, "the server's modules are found in {}", src.display());
    let mut broken = Vec::new();
    for path in &files {
        let relative = path.strip_prefix(&src).expect("under src").display().to_string();
        if SERVER_STORE_MODULES.contains(&relative.as_str()) {
            continue;
        }
        let source = std::fs::read_to_string(path).expect("read a server module");
        for (line, what) in store_uses(&source) {
            broken.push(format!("crates/rebill-server/src/{relative}:{line} {what}"));
        }
    }
    for allowed in SERVER_STORE_MODULES {
        assert!(src.join(allowed).exists(), "the allowed module {allowed} exists");
    }
    assert!(
        broken.is_empty(),
        "server handlers call rebill-app, never the store (only {} may; see ARCHITECTURE.md):\n- {}",
        SERVER_STORE_MODULES.join(" and "),
        broken.join("\n- ")
    );
}

#[test]
fn the_store_check_sees_code_and_skips_comments_and_strings() {
    let lines = |source: &str| store_uses(source).into_iter().map(|(line, _)| line).collect::<Vec<_>>();
    assert_eq!(lines("use rebill_store::Site;"), [1]);
    assert_eq!(lines("fn f() {\n    state.store.plan(1).await\n}"), [2]);
    assert_eq!(lines("let s = &state.store;"), [1]);
    assert_eq!(lines("services\n    .store\n    .account(1)"), [2]);
    assert_eq!(lines("let x = state.services.store.sites();"), [1]);
    // Not code, or not the store.
    assert!(lines("// state.store.plan() and rebill_store\n/* rebill_store */ let a = 1;").is_empty());
    assert!(lines("/// Reads `rebill_store::Site`.\nfn f() {}").is_empty());
    assert!(lines("let s = \"state.store.x rebill_store\"; let r = r#\"a.store\"#;").is_empty());
    assert!(lines("let q = '\"'; let t = state.store_name; let u = x.stored; let v = 0..store;").is_empty());
    assert!(lines("fn f<'a>(x: &'a str) {}").is_empty());
}

//! Module directions inside a crate (ARCHITECTURE.md, "Inside the crates"), checked over the
//! source: each crate listed below ranks its modules in layers, top first. A module may name
//! modules of its own layer or of a lower one, never of a higher one, and the modules of one
//! layer may not name each other in a circle. A back-edge or a circle fails this test with the
//! paths that make it; a module missing from the list fails it too (each new module is placed).
//!
//! A module names another through a `crate::`, `super::` or `self::` path anywhere in its code:
//! `use` trees, paths in expressions, types and patterns, and `crate::` paths inside macro
//! invocations. Test code (`#[cfg(test)]` items) and comments do not count. A path to an item of
//! the crate root is an edge to the module the root re-exports it from (`pub use module::Item`),
//! else to the root.
//!
//! The same rule holds one level down inside a module directory (`within`): its submodules in
//! layers, where a path to an item of the directory's own `mod.rs` is an edge to `mod`. Paths
//! that leave the directory are the upper level's business.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A crate's modules (or a module directory's submodules) in layers, top first.
struct Layers {
    src: &'static str,
    /// The module directory below `src` whose submodules are ranked (none: the crate's own).
    within: &'static [&'static str],
    layers: &'static [&'static [&'static str]],
}

impl Layers {
    /// The directory whose modules are ranked, as the failures name it.
    fn place(&self) -> String {
        std::iter::once(self.src).chain(self.within.iter().copied()).collect::<Vec<_>>().join("/")
    }
}

/// The service: the router and the routes outside the API table above the protocol layers,
/// the layers above the dispatch over the endpoint table, the dispatch above the endpoint
/// modules, and those above the request, list and view helpers and the shared state.
const SERVER: Layers = Layers {
    src: "crates/rebill-server/src",
    within: &[],
    layers: &[
        &["lib", "demo", "sandbox"],
        &["layers"],
        &["dispatch"],
        &["handlers"],
        &[
            "accounts",
            "billing_info",
            "coupons",
            "gift_cards",
            "invoices",
            "payments",
            "plans",
            "purchases",
            "shipping_addresses",
            "subscriptions",
            "tokens",
            "js_library",
            "webhook_poster",
            "health",
        ],
        &["request", "views"],
        &["lists"],
        &["respond", "wire", "metrics"],
        &["state"],
    ],
};

/// The store: the writes that span aggregates above the aggregates (each owning its tables),
/// those above the domain events, the shared transaction, paging, documents and dialect, then
/// the crate root (`Store`, `StoreError`) and the connection types.
const STORE: Layers = Layers {
    src: "crates/rebill-store/src",
    within: &[],
    layers: &[
        &["gift_cards", "invoicing", "payments", "refunds", "shipped_lines"],
        &[
            "accounts",
            "add_ons",
            "billing_info",
            "coupons",
            "credits",
            "gateways",
            "gauges",
            "invoices",
            "jobs",
            "outbox",
            "plans",
            "rate",
            "settings",
            "shipping_addresses",
            "subscriptions",
            "tokens",
            "webhooks",
        ],
        &["events"],
        &["dialect", "document", "keys", "list", "testing", "work"],
        &["lib"],
        &["checkpoints", "db"],
        &["sqlite"],
        &["values"],
    ],
};

const APP_SRC: &str = "crates/rebill-app/src";

/// The use cases, by business capability (ARCHITECTURE.md, "rebill-app by capability"): what
/// runs them (the scheduler, clocks, notifications) above selling, which composes the rest; the
/// settling of invoices above money back, both above subscriptions, which invoice through
/// billing; billing above the customers it charges and the catalogue it prices from; the shared
/// platform at the bottom.
const APP: Layers = Layers {
    src: APP_SRC,
    within: &[],
    layers: &[
        &["operations"],
        &["selling"],
        &["collection"],
        &["money_back"],
        &["subscriptions"],
        &["billing"],
        &["customers", "catalog"],
        &["platform"],
        &["lib"],
    ],
};

/// Inside the capabilities: each directory's submodules in layers (`mod` is its `mod.rs`).
const APP_INSIDE: &[Layers] = &[
    Layers {
        src: APP_SRC,
        within: &["operations"],
        layers: &[&["webhooks", "clock", "health", "testing"], &["notifications", "scheduler"], &["mod"]],
    },
    Layers { src: APP_SRC, within: &["selling"], layers: &[&["purchases"], &["gift_cards"], &["mod"]] },
    Layers {
        src: APP_SRC,
        within: &["collection"],
        layers: &[&["settlement", "offline_payments", "reconciliation"], &["reactions"], &["mod"]],
    },
    Layers {
        src: APP_SRC,
        within: &["money_back"],
        layers: &[&["write_offs"], &["refunds", "credit_invoices"], &["mod"]],
    },
    Layers { src: APP_SRC, within: &["subscriptions"], layers: &[&["renewals"], &["lifecycle"], &["mod"]] },
    Layers {
        src: APP_SRC,
        within: &["billing"],
        layers: &[&["adjustments", "transactions", "documents"], &["queries"], &["invoicing"], &["mod"]],
    },
    Layers {
        src: APP_SRC,
        within: &["customers"],
        layers: &[&["accounts", "cvv"], &["payment_methods", "shipping_addresses"], &["mod"]],
    },
    Layers { src: APP_SRC, within: &["catalog"], layers: &[&["coupons", "plans"], &["mod"]] },
    Layers {
        src: APP_SRC,
        within: &["platform"],
        layers: &[
            &["transaction_records", "gateways", "tokens", "sites"],
            &["events", "jobs", "subscription_documents"],
            &["error", "context", "instant", "metrics", "model"],
            &["mod"],
        ],
    },
];

/// The crates whose module directions are checked.
const CRATES: &[&Layers] = &[&SERVER, &STORE, &APP];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The modules of a directory (files, and directories with a `mod.rs`) by name, each with
/// every `.rs` file it holds; the directory's own root (`lib.rs` of a crate's `src`, else
/// `mod.rs`) is `lib` or `mod`.
fn modules(dir: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut found = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("an entry").path();
        let name = path.file_stem().and_then(|s| s.to_str()).expect("a name").to_owned();
        if path.extension().is_some_and(|e| e == "rs") {
            found.insert(name, vec![path]);
        } else if path.join("mod.rs").is_file() {
            found.insert(name, files_below(&path));
        }
    }
    found
}

/// Every `.rs` file below a directory, sorted.
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a directory") {
            let p = entry.expect("an entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

/// The module path of a source file below `src` (`billing/invoicing/mod.rs` is
/// `billing::invoicing`, `lib.rs` the crate root).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("a file below src");
    let mut path: Vec<String> = relative.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    let last = path.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        path.push(stem.to_owned());
    }
    path
}

/// Every crate-relative path a file's code names (test items left out), resolved from
/// `crate::`, `super::` and `self::`; each path as its segments after `crate`.
struct CratePaths {
    here: Vec<String>,
    named: BTreeSet<Vec<String>>,
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && a.parse_args::<syn::Meta>().is_ok_and(|m| m.path().is_ident("test")))
        || attrs.iter().any(|a| a.path().is_ident("test"))
}

impl CratePaths {
    fn new(here: Vec<String>) -> Self {
        Self { here, named: BTreeSet::new() }
    }

    /// Records a path given by its segments when it starts at the crate, its parent or itself.
    fn record(&mut self, segments: &[String]) {
        let Some(first) = segments.first() else { return };
        let resolved = match first.as_str() {
            "crate" => segments[1..].to_vec(),
            "self" => self.here.iter().chain(&segments[1..]).cloned().collect(),
            "super" => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                let Some(base) = self.here.len().checked_sub(ups) else { return };
                self.here[..base].iter().chain(&segments[ups..]).cloned().collect()
            }
            _ => return,
        };
        if !resolved.is_empty() {
            self.named.insert(resolved);
        }
    }

    fn use_tree(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(&p.tree, prefix);
                prefix.pop();
            }
            syn::UseTree::Name(n) if n.ident == "self" => self.record(prefix),
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                self.record(prefix);
                prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.record(prefix);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.record(prefix),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(t, prefix);
                }
            }
        }
    }

    /// `crate::a::b…` inside a macro's tokens.
    fn tokens(&mut self, tokens: proc_macro2::TokenStream) {
        let tokens: Vec<proc_macro2::TokenTree> = tokens.into_iter().collect();
        let colons = |i: usize| {
            tokens
                .get(i..i + 2)
                .is_some_and(|p| p.iter().all(|t| matches!(t, proc_macro2::TokenTree::Punct(c) if c.as_char() == ':')))
        };
        for (i, t) in tokens.iter().enumerate() {
            match t {
                proc_macro2::TokenTree::Group(g) => self.tokens(g.stream()),
                proc_macro2::TokenTree::Ident(id) if id == "crate" => {
                    let mut segments = vec!["crate".to_owned()];
                    let mut at = i + 1;
                    while colons(at) {
                        let Some(proc_macro2::TokenTree::Ident(next)) = tokens.get(at + 2) else { break };
                        segments.push(next.to_string());
                        at += 3;
                    }
                    self.record(&segments);
                }
                _ => {}
            }
        }
    }
}

impl<'ast> Visit<'ast> for CratePaths {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            _ => &[],
        };
        if !is_test(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        // An inline module's paths start from the module itself.
        self.here.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.here.pop();
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&item.tree, &mut Vec::new());
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.record(&segments);
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
    }
}

/// The names the crate root re-exports from its modules: `pub use module::{Item, …}`.
fn root_reexports(lib: &syn::File) -> BTreeMap<String, String> {
    fn walk(tree: &syn::UseTree, module: Option<&str>, out: &mut BTreeMap<String, String>) {
        match tree {
            syn::UseTree::Path(p) => {
                let name = p.ident.to_string();
                walk(&p.tree, Some(module.unwrap_or(&name)), out);
            }
            syn::UseTree::Name(n) => {
                if let Some(m) = module {
                    out.insert(n.ident.to_string(), m.to_owned());
                }
            }
            syn::UseTree::Rename(r) => {
                if let Some(m) = module {
                    out.insert(r.rename.to_string(), m.to_owned());
                }
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    walk(t, module, out);
                }
            }
            syn::UseTree::Glob(_) => {}
        }
    }
    let mut out = BTreeMap::new();
    for item in &lib.items {
        if let syn::Item::Use(u) = item {
            walk(&u.tree, None, &mut out);
        }
    }
    out
}

/// The module edges of a crate's `src` (or of the directory `within` below it): module → the
/// modules of the same directory its code names (itself left out).
fn edges(src: &Path, within: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let dir = within.iter().fold(src.to_path_buf(), |d, m| d.join(m));
    let root = if within.is_empty() { "lib" } else { "mod" };
    let modules = modules(&dir);
    let parse = |path: &Path| -> syn::File {
        let text = std::fs::read_to_string(path).expect("a source file");
        syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let reexports = modules.get(root).map(|files| root_reexports(&parse(&files[0]))).unwrap_or_default();
    let mut edges = BTreeMap::new();
    for (name, files) in &modules {
        let mut targets = BTreeSet::new();
        for file in files {
            let mut paths = CratePaths::new(module_path(src, file));
            paths.visit_file(&parse(file));
            for path in paths.named {
                let Some(rest) =
                    path.strip_prefix(within.iter().map(|m| (*m).to_owned()).collect::<Vec<_>>().as_slice())
                else {
                    continue;
                };
                let Some(first) = rest.first() else { continue };
                let target = match modules.contains_key(first) {
                    true => first.clone(),
                    false => reexports.get(first).filter(|m| modules.contains_key(*m)).cloned().unwrap_or(root.into()),
                };
                if &target != name {
                    targets.insert(target);
                }
            }
        }
        edges.insert(name.clone(), targets);
    }
    edges
}

/// What breaks the layering of `layers` given `edges`: modules without a layer, back-edges, and
/// circles inside a layer.
fn breaches(layers: &Layers, edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut rank: BTreeMap<&str, usize> = BTreeMap::new();
    for (n, layer) in layers.layers.iter().enumerate() {
        for m in *layer {
            rank.insert(m, n);
        }
    }
    let mut found = Vec::new();
    for module in edges.keys() {
        if !rank.contains_key(module.as_str()) {
            found.push(format!("{}: module `{module}` has no layer", layers.place()));
        }
    }
    for (module, targets) in edges {
        let Some(&from) = rank.get(module.as_str()) else { continue };
        for target in targets {
            if let Some(&to) = rank.get(target.as_str())
                && to < from
            {
                found.push(format!(
                    "{}: `{module}` (layer {from}) names `{target}` (layer {to}, above it)",
                    layers.place()
                ));
            }
        }
    }
    // Circles among the modules of one layer: a depth-first search over same-layer edges.
    fn circle<'a>(
        at: &'a str,
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        same: &dyn Fn(&str) -> bool,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|m| *m == at) {
            let mut cycle: Vec<String> = path[start..].iter().map(|m| (*m).to_owned()).collect();
            cycle.push(at.to_owned());
            return Some(cycle);
        }
        if done.contains(at) {
            return None;
        }
        path.push(at);
        for next in edges.get(at).into_iter().flatten().filter(|t| same(t)) {
            if let Some(cycle) = circle(next, edges, same, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(at);
        None
    }
    for layer in layers.layers {
        let same = |m: &str| layer.contains(&m);
        let mut done = BTreeSet::new();
        for module in *layer {
            if let Some(cycle) = circle(module, edges, &same, &mut Vec::new(), &mut done) {
                found.push(format!("{}: a circle in one layer: {}", layers.src, cycle.join(" → ")));
                break;
            }
        }
    }
    found
}

#[test]
fn modules_name_only_their_own_layer_or_lower_ones() {
    let mut found = Vec::new();
    for layers in CRATES.iter().copied().chain(APP_INSIDE) {
        found.extend(breaches(layers, &edges(&root().join(layers.src), layers.within)));
    }
    assert!(found.is_empty(), "module directions broken:\n{}", found.join("\n"));
}

/// The check itself: a back-edge, a circle and an unplaced module are each found.
#[test]
fn back_edges_circles_and_unplaced_modules_are_found() {
    let layers = Layers { src: "example", within: &[], layers: &[&["top"], &["a", "b"], &["bottom"]] };
    let edges = |list: &[(&str, &[&str])]| -> BTreeMap<String, BTreeSet<String>> {
        list.iter().map(|(m, t)| ((*m).to_owned(), t.iter().map(|t| (*t).to_owned()).collect())).collect()
    };
    let fine = edges(&[("top", &["a", "bottom"]), ("a", &["b", "bottom"]), ("b", &[]), ("bottom", &[])]);
    assert!(breaches(&layers, &fine).is_empty());
    let back = edges(&[("top", &["a"]), ("a", &[]), ("b", &[]), ("bottom", &["a"])]);
    assert_eq!(breaches(&layers, &back), ["example: `bottom` (layer 2) names `a` (layer 1, above it)"]);
    let round = edges(&[("top", &[]), ("a", &["b"]), ("b", &["a"]), ("bottom", &[])]);
    assert_eq!(breaches(&layers, &round), ["example: a circle in one layer: a → b → a"]);
    let unplaced = edges(&[("top", &[]), ("a", &[]), ("b", &[]), ("bottom", &[]), ("new", &[])]);
    assert_eq!(breaches(&layers, &unplaced), ["example: module `new` has no layer"]);
    // The source walk finds `use` trees, paths in code and paths in macros, not test items, and
    // resolves `super::` and `self::` from the file's own module.
    let file: syn::File = syn::parse_str(
        "use crate::{a, b::X};\n\
         use super::{c, super::d::Y};\n\
         fn f() { crate::e::g(); self::h::i(); m!(crate::j::k); }\n\
         #[cfg(test)] mod tests { use crate::l; }",
    )
    .expect("parses");
    let mut paths = CratePaths::new(vec!["cap".into(), "sub".into()]);
    paths.visit_file(&file);
    let named: Vec<String> = paths.named.into_iter().map(|p| p.join("::")).collect();
    assert_eq!(
        named,
        ["a", "b::X", "cap::c", "cap::sub::h::i", "d::Y", "e::g", "j::k"],
        "every crate-relative path, resolved"
    );
}

//! Module directions inside a crate (ARCHITECTURE.md, "Inside the crates"), checked over the
//! source: each crate listed below ranks its modules in layers, top first. A module may name
//! modules of its own layer or of a lower one, never of a higher one, and the modules of one
//! layer may not name each other in a circle. A back-edge or a circle fails this test with the
//! paths that make it; a module missing from the list fails it too (each new module is placed).
//!
//! A module names another through a `crate::` path anywhere in its code: `use` trees, paths in
//! expressions, types and patterns, and `crate::` paths inside macro invocations. Test code
//! (`#[cfg(test)]` items) and comments do not count. A path to an item of the crate root is an
//! edge to the module the root re-exports it from (`pub use module::Item`), else to the root.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A crate's modules in layers, top first.
struct Layers {
    src: &'static str,
    layers: &'static [&'static [&'static str]],
}

/// The service: the router and the routes outside the API table above the protocol layers,
/// the layers above the dispatch over the endpoint table, the dispatch above the endpoint
/// modules, and those above the request, list and view helpers and the shared state.
const SERVER: Layers = Layers {
    src: "crates/rebill-server/src",
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
        ],
        &["request", "views"],
        &["lists"],
        &["respond", "wire"],
        &["state"],
    ],
};

/// The store: the writes that span aggregates above the aggregates (each owning its tables),
/// those above the domain events, the shared transaction, paging, documents and dialect, then
/// the crate root (`Store`, `StoreError`) and the connection types.
const STORE: Layers = Layers {
    src: "crates/rebill-store/src",
    layers: &[
        &["gift_cards", "invoicing", "payments", "refunds", "shipped_lines"],
        &[
            "accounts",
            "add_ons",
            "billing_info",
            "coupons",
            "credits",
            "gateways",
            "invoices",
            "jobs",
            "outbox",
            "plans",
            "rate",
            "shipping_addresses",
            "subscriptions",
            "tokens",
            "webhooks",
        ],
        &["events"],
        &["dialect", "document", "keys", "list", "testing", "work"],
        &["lib"],
        &["db"],
    ],
};

/// The use cases: what runs them (the webhook worker, the scheduler, the sandbox clock, the
/// test harness) above the operations that span several aggregates, those above the reactions
/// to events, and so down through money back, subscriptions, customers and invoicing to the
/// coupons, the stored documents and the shared pieces (errors, events, jobs, the context).
const APP: Layers = Layers {
    src: "crates/rebill-app/src",
    layers: &[
        &["webhooks", "clock", "testing"],
        &["notifications", "scheduler", "purchases"],
        &["settlement", "offline_payments"],
        &["reactions"],
        &["write_offs", "renewals", "gift_cards", "cvv"],
        &["refunds"],
        &["subscriptions", "accounts", "adjustments", "transactions"],
        &["payment_methods", "credit_invoices", "documents"],
        &["queries"],
        &["invoicing"],
        &["coupons", "shipping_addresses", "catalog"],
        &["subscription_documents", "jobs", "events", "tokens", "sites", "gateways"],
        &["error", "context", "instant", "model", "lib"],
    ],
};

/// The crates whose module directions are checked.
const CRATES: &[&Layers] = &[&SERVER, &STORE, &APP];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The top-level modules of a crate's `src` (files and directories with a `mod.rs`), by name;
/// the crate root is `lib`.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut found = BTreeMap::new();
    for entry in std::fs::read_dir(src).expect("a source directory") {
        let path = entry.expect("an entry").path();
        let name = path.file_stem().and_then(|s| s.to_str()).expect("a name").to_owned();
        if path.extension().is_some_and(|e| e == "rs") {
            found.insert(name, path);
        } else if path.join("mod.rs").is_file() {
            found.insert(name, path.join("mod.rs"));
        }
    }
    found
}

/// Every `.rs` file of a module (its file, and for a directory every file below it).
fn files_of(path: &Path) -> Vec<PathBuf> {
    if path.file_name().is_some_and(|n| n == "mod.rs") {
        let dir = path.parent().expect("a directory");
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
    } else {
        vec![path.to_path_buf()]
    }
}

/// The first segment after `crate` of every `crate::` path in a file's code (test items left
/// out).
#[derive(Default)]
struct CratePaths {
    named: BTreeSet<String>,
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && a.parse_args::<syn::Meta>().is_ok_and(|m| m.path().is_ident("test")))
        || attrs.iter().any(|a| a.path().is_ident("test"))
}

impl CratePaths {
    fn use_tree(&mut self, tree: &syn::UseTree, after_crate: bool) {
        match tree {
            syn::UseTree::Path(p) if after_crate => {
                self.named.insert(p.ident.to_string());
            }
            syn::UseTree::Path(p) => self.use_tree(&p.tree, p.ident == "crate"),
            syn::UseTree::Name(n) if after_crate => {
                self.named.insert(n.ident.to_string());
            }
            syn::UseTree::Rename(r) if after_crate => {
                self.named.insert(r.ident.to_string());
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(t, after_crate);
                }
            }
            _ => {}
        }
    }

    fn tokens(&mut self, tokens: proc_macro2::TokenStream) {
        let tokens: Vec<proc_macro2::TokenTree> = tokens.into_iter().collect();
        for (i, t) in tokens.iter().enumerate() {
            match t {
                proc_macro2::TokenTree::Group(g) => self.tokens(g.stream()),
                proc_macro2::TokenTree::Ident(id) if id == "crate" => {
                    let colons = tokens.get(i + 1..i + 3).is_some_and(|p| {
                        p.iter().all(|t| matches!(t, proc_macro2::TokenTree::Punct(c) if c.as_char() == ':'))
                    });
                    if let (true, Some(proc_macro2::TokenTree::Ident(next))) = (colons, tokens.get(i + 3)) {
                        self.named.insert(next.to_string());
                    }
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

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&item.tree, false);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let mut segments = path.segments.iter();
        if let (Some(first), Some(second)) = (segments.next(), segments.next())
            && first.ident == "crate"
        {
            self.named.insert(second.ident.to_string());
        }
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

/// The module edges of a crate: module → the modules its code names (itself left out).
fn edges(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules(src);
    let parse = |path: &Path| -> syn::File {
        let text = std::fs::read_to_string(path).expect("a source file");
        syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let reexports = modules.get("lib").map(|p| root_reexports(&parse(p))).unwrap_or_default();
    let mut edges = BTreeMap::new();
    for (name, path) in &modules {
        let mut paths = CratePaths::default();
        for file in files_of(path) {
            paths.visit_file(&parse(&file));
        }
        let targets: BTreeSet<String> = paths
            .named
            .into_iter()
            .map(|n| match modules.contains_key(&n) {
                true => n,
                false => {
                    reexports.get(&n).filter(|m| modules.contains_key(*m)).cloned().unwrap_or_else(|| "lib".into())
                }
            })
            .filter(|t| t != name)
            .collect();
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
            found.push(format!("{}: module `{module}` has no layer", layers.src));
        }
    }
    for (module, targets) in edges {
        let Some(&from) = rank.get(module.as_str()) else { continue };
        for target in targets {
            if let Some(&to) = rank.get(target.as_str())
                && to < from
            {
                found
                    .push(format!("{}: `{module}` (layer {from}) names `{target}` (layer {to}, above it)", layers.src));
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
    for layers in CRATES {
        found.extend(breaches(layers, &edges(&root().join(layers.src))));
    }
    assert!(found.is_empty(), "module directions broken:\n{}", found.join("\n"));
}

/// The check itself: a back-edge, a circle and an unplaced module are each found.
#[test]
fn back_edges_circles_and_unplaced_modules_are_found() {
    let layers = Layers { src: "example", layers: &[&["top"], &["a", "b"], &["bottom"]] };
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
    // The source walk finds `use` trees, paths in code and paths in macros, not test items.
    let file: syn::File = syn::parse_str(
        "use crate::{a, b::X};\n\
         fn f() { crate::c::g(); m!(crate::d::h); }\n\
         #[cfg(test)] mod tests { use crate::e; }",
    )
    .expect("parses");
    let mut paths = CratePaths::default();
    paths.visit_file(&file);
    assert_eq!(paths.named.into_iter().collect::<Vec<_>>(), ["a", "b", "c", "d"]);
}

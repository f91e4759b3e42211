//! The endpoint methods of `rebill-client`: one file per resource group (the first path segment
//! after `/v2/`: `accounts`, `subscriptions`, …) with a group type (`client.accounts()`) whose
//! methods call the endpoints of `schema/endpoints.toml` through their `ApiEndpoint` marker
//! types, plus `mod.rs` with the group accessors, the list filter markers and the filter values
//! of the model enums.
//!
//! Method names are the endpoint's name without the group's resource word (`create_account` →
//! `accounts().create`, `pause_subscription` → `subscriptions().pause`, `list_account_invoices`
//! → `accounts().list_invoices`); two endpoints of a group with the same method name are an
//! error.

use std::collections::BTreeMap;
use std::path::Path;

use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;
use rebill_schema::{Endpoint, ResponseBody, Schema};

use crate::{GenerateError, GeneratedFile, doc_attrs, ident, render};

/// Where the client's endpoint methods go, relative to the workspace root.
pub const CLIENT_DIR: &str = "crates/rebill-client/src/generated";

/// A group of endpoints sharing the first path segment.
struct Group<'s> {
    /// `accounts`, `gift_cards`.
    name: String,
    endpoints: Vec<(&'s Endpoint, String)>,
}

fn group_name(e: &Endpoint) -> Option<&str> {
    e.path.strip_prefix("/v2/")?.split('/').next().filter(|s| !s.is_empty() && !s.starts_with('{'))
}

/// The endpoint's name without the group's resource word.
fn method_name(endpoint: &str, group: &str, singular: &str) -> String {
    let tokens: Vec<&str> = endpoint.split('_').collect();
    for word in [singular, group] {
        let word: Vec<&str> = word.split('_').collect();
        if let Some(at) = tokens.windows(word.len()).position(|w| w == word.as_slice()) {
            let rest: Vec<&str> = tokens[..at].iter().chain(&tokens[at + word.len()..]).copied().collect();
            if !rest.is_empty() {
                return rest.join("_");
            }
        }
    }
    endpoint.to_owned()
}

fn render_error(message: String) -> GenerateError {
    GenerateError::Render { file: CLIENT_DIR.to_owned(), message }
}

fn groups(schema: &Schema) -> Result<Vec<Group<'_>>, GenerateError> {
    let mut groups: Vec<Group> = Vec::new();
    for e in &schema.endpoints {
        let name =
            group_name(e).ok_or_else(|| render_error(format!("{}: no resource segment in {}", e.name, e.path)))?;
        let singular = name.strip_suffix('s').unwrap_or(name).to_owned();
        let method = method_name(&e.name, name, &singular);
        let group = match groups.iter_mut().position(|g| g.name == name) {
            Some(i) => &mut groups[i],
            None => {
                groups.push(Group { name: name.to_owned(), endpoints: Vec::new() });
                let last = groups.len() - 1;
                &mut groups[last]
            }
        };
        if let Some((other, _)) = group.endpoints.iter().find(|(_, m)| *m == method) {
            return Err(render_error(format!(
                "{} and {} would both be `{}().{method}`",
                other.name, e.name, group.name
            )));
        }
        group.endpoints.push((e, method));
    }
    Ok(groups)
}

fn safe_ident(name: &str) -> Ident {
    if syn::parse_str::<Ident>(name).is_ok() { ident(name) } else { Ident::new_raw(name, Span::call_site()) }
}

/// The marker type of the distinct filter set, named by its sorted filters (`state` → `State`,
/// `type`+`state` → `StateType`).
fn filter_marker(filters: &[String]) -> Ident {
    let mut names: Vec<&str> = filters.iter().map(String::as_str).collect();
    names.sort_unstable();
    ident(&rebill_schema::camel_case(&names.join("_")))
}

/// Generates the client's files.
pub fn client_files(schema: &Schema) -> Result<Vec<GeneratedFile>, GenerateError> {
    let groups = groups(schema)?;
    let mut files = Vec::new();
    for group in &groups {
        let file = format!("{}.rs", group.name);
        files.push(GeneratedFile {
            path: Path::new(CLIENT_DIR).join(&file),
            contents: render(&file, "endpoints.toml", group_file(schema, group))?,
        });
    }
    files.push(GeneratedFile {
        path: Path::new(CLIENT_DIR).join("mod.rs"),
        contents: render("mod.rs", "*.toml", mod_file(schema, &groups))?,
    });
    Ok(files)
}

fn rust_type(schema: &Schema, resource: &str) -> TokenStream {
    let name = ident(&schema.resource(resource).map(|r| r.rust_name.clone()).unwrap_or_default());
    quote!(rebill_models::#name)
}

fn facts(e: &Endpoint) -> String {
    let mut facts = format!("`{} {}`", e.method.as_str(), e.path);
    if let Some(v) = e.since {
        facts.push_str(&format!(", since API {v}"));
    }
    if let Some(f) = &e.feature {
        facts.push_str(&format!(", sites with `{f}`"));
    }
    for (v, r) in &e.later {
        facts.push_str(&format!("; answers `{r}` from {v}"));
    }
    facts
}

fn group_file(schema: &Schema, group: &Group) -> TokenStream {
    let group_type = ident(&rebill_schema::camel_case(&group.name));
    let group_doc = doc_attrs(&format!("The endpoints under `/v2/{}` (`client.{}()`).", group.name, group.name));
    let mut methods = Vec::new();
    let mut builders = Vec::new();
    for (e, method) in &group.endpoints {
        let marker = ident(&rebill_schema::camel_case(&e.name));
        let method_ident = safe_ident(method);
        let params: Vec<Ident> = e.params().iter().map(|p| safe_ident(p)).collect();
        let mut args: Vec<TokenStream> = params.iter().map(|p| quote!(#p: &str)).collect();
        let mut call = quote!(Call::<api::#marker>::new(&self.client, &[#(#params),*]));
        if let Some(request) = &e.request {
            let t = rust_type(schema, request);
            let name = safe_ident(request);
            args.push(quote!(#name: &#t));
            call = quote!(#call.body(#name));
        }
        let mut doc = format!("{}\n\n{}", e.doc, facts(e));
        let (output, finish) = match &e.response {
            ResponseBody::List(resource) => {
                let t = rust_type(schema, resource);
                let filters = if e.filters.is_empty() {
                    quote!(crate::NoFilters)
                } else {
                    let marker = filter_marker(&e.filters);
                    quote!(filters::#marker)
                };
                doc.push_str("\n\nA list: `.page()`, `.stream()`, `.count()` (HEAD, from API 2.6).");
                let doc = doc_attrs(&doc);
                methods.push(quote! {
                    #doc
                    pub fn #method_ident(&self, #(#args),*) -> List<#t, #filters> {
                        List::new::<api::#marker>(&self.client, &[#(#params),*])
                    }
                });
                continue;
            }
            ResponseBody::Empty => (quote!(()), quote!(empty())),
            ResponseBody::Resource(resource) => {
                let t = rust_type(schema, resource);
                match e.later.last() {
                    None => (t, quote!(resource())),
                    // The resource of the latest change (the table changes each response once).
                    Some((_, later)) => {
                        let l = rust_type(schema, later);
                        (quote!(ByVersion<#t, #l>), quote!(by_version()))
                    }
                }
            }
        };
        if e.query.is_empty() {
            let doc = doc_attrs(&doc);
            methods.push(quote! {
                #doc
                pub async fn #method_ident(&self, #(#args),*) -> Result<#output, Error> {
                    #call.#finish.await
                }
            });
        } else {
            let builder = ident(&format!("{}Request", rebill_schema::camel_case(&e.name)));
            let query_names = e.query.iter().map(|q| q.as_str()).collect::<Vec<_>>().join("`, `");
            doc.push_str(&format!(
                "\n\nOptional query parameters `{query_names}` on the returned request; send it with `.await`."
            ));
            let doc = doc_attrs(&doc);
            methods.push(quote! {
                #doc
                pub fn #method_ident(&self, #(#args),*) -> #builder {
                    #builder { call: #call }
                }
            });
            let setters = e.query.iter().map(|q| {
                let name = safe_ident(q);
                let doc = doc_attrs(&format!("Sets the `{q}` query parameter."));
                quote! {
                    #doc
                    pub fn #name(mut self, value: impl std::fmt::Display) -> Self {
                        self.call = self.call.query(#q, value.to_string());
                        self
                    }
                }
            });
            let builder_doc = doc_attrs(&format!(
                "A `{}` request (`{}().{method}(…)`): set its query parameters, then `.await` it.",
                e.name, group.name
            ));
            builders.push(quote! {
                #builder_doc
                pub struct #builder {
                    call: Call<api::#marker>,
                }

                impl #builder {
                    #(#setters)*
                }

                impl std::fmt::Debug for #builder {
                    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(stringify!(#builder))
                    }
                }

                impl IntoFuture for #builder {
                    type Output = Result<#output, Error>;
                    type IntoFuture = Pin<Box<dyn Future<Output = Result<#output, Error>> + Send>>;

                    fn into_future(self) -> Self::IntoFuture {
                        Box::pin(self.call.#finish)
                    }
                }
            });
        }
    }
    quote! {
        //! Generated endpoint methods; see the group type.
        #![allow(unused_imports)]
        use std::future::{Future, IntoFuture};
        use std::pin::Pin;

        use rebill_models::api;

        use crate::call::Call;
        use crate::{ByVersion, Client, Error, List};
        use super::filters;

        #group_doc
        #[derive(Debug, Clone)]
        pub struct #group_type {
            pub(crate) client: Client,
        }

        impl #group_type {
            #(#methods)*
        }

        #(#builders)*
    }
}

fn mod_file(schema: &Schema, groups: &[Group]) -> TokenStream {
    let mods: Vec<Ident> = groups.iter().map(|g| ident(&g.name)).collect();
    let accessors = groups.iter().map(|g| {
        let name = ident(&g.name);
        let t = ident(&rebill_schema::camel_case(&g.name));
        let doc = doc_attrs(&format!("The endpoints under `/v2/{}`.", g.name));
        quote! {
            #doc
            pub fn #name(&self) -> #t {
                #t { client: self.clone() }
            }
        }
    });
    let mut sets: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in schema.endpoints.iter().filter(|e| !e.filters.is_empty()) {
        sets.entry(filter_marker(&e.filters).to_string()).or_insert_with(|| e.filters.clone());
    }
    let markers = sets.iter().map(|(marker, filters)| {
        let marker = ident(marker);
        let doc = doc_attrs(&format!("Lists filtered by `{}`.", filters.join("`, `")));
        let setters = filters.iter().map(|f| {
            let name = safe_ident(f);
            let doc = doc_attrs(&format!(
                "Only records whose `{f}` is `value` (a string, or a model enum spelled as the client's version spells it)."
            ));
            quote! {
                #doc
                pub fn #name(self, value: impl crate::FilterValue) -> Self {
                    self.filter(#f, value)
                }
            }
        });
        quote! {
            #doc
            #[derive(Debug, Clone, Copy)]
            pub struct #marker;

            impl<T: rebill_xml::XmlResource + Send + 'static> crate::List<T, #marker> {
                #(#setters)*
            }
        }
    });
    let enums = schema.enums.iter().map(|d| {
        let t = ident(&d.rust_name);
        quote! {
            impl crate::FilterValue for rebill_models::#t {
                fn filter_value(&self, ctx: &rebill_xml::WireContext) -> String {
                    crate::list::enum_value(self, ctx)
                }
            }
        }
    });
    let doc = doc_attrs(
        "The client's endpoint methods, one module per resource group of `schema/endpoints.toml`, \
         the list filter markers and the filter values of the model enums.",
    );
    quote! {
        #doc
        #(pub mod #mods;)*
        #(pub use #mods::*;)*

        /// The filter sets of list endpoints: `List<T, F>` has a method per filter of `F`.
        pub mod filters {
            #(#markers)*
        }

        impl crate::Client {
            #(#accessors)*
        }

        #(#enums)*
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_names_drop_the_group_word() {
        let m = |e: &str, g: &str| method_name(e, g, g.strip_suffix('s').unwrap_or(g));
        assert_eq!(m("create_account", "accounts"), "create");
        assert_eq!(m("list_accounts", "accounts"), "list");
        assert_eq!(m("get_account_balance", "accounts"), "get_balance");
        assert_eq!(m("list_account_invoices", "accounts"), "list_invoices");
        assert_eq!(m("create_invoice", "accounts"), "create_invoice");
        assert_eq!(m("pause_subscription", "subscriptions"), "pause");
        assert_eq!(m("preview_subscription_change", "subscriptions"), "preview_change");
        assert_eq!(m("mark_invoice_successful", "invoices"), "mark_successful");
        assert_eq!(m("redeem_gift_card", "gift_cards"), "redeem");
        assert_eq!(m("list_credit_payments", "credit_payments"), "list");
    }
}

//! Parsing of the `#[xml(...)]` attributes.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{Attribute, LitStr};

/// A version literal such as `"2.10"`, checked for shape (the schema loader checks that it is
/// a supported version before code is generated).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u8, pub u8);

impl Version {
    pub fn parse(lit: &LitStr) -> syn::Result<Self> {
        let text = lit.value();
        let parsed = text.split_once('.').and_then(|(a, b)| Some(Version(a.parse().ok()?, b.parse().ok()?)));
        parsed.ok_or_else(|| syn::Error::new(lit.span(), format!("`{text}` is not a version like \"2.10\"")))
    }
}

pub fn version_tokens(v: Option<Version>) -> TokenStream {
    match v {
        Some(Version(a, b)) => {
            quote!(::core::option::Option::Some(::rebill_xml::ApiVersion::new(#a, #b)))
        }
        None => quote!(::core::option::Option::None),
    }
}

/// `ctx.version.within(since, until)` as tokens (or `true` when unbounded).
pub fn range_check(since: Option<Version>, until: Option<Version>) -> TokenStream {
    if since.is_none() && until.is_none() {
        return quote!(true);
    }
    let s = version_tokens(since);
    let u = version_tokens(until);
    quote!(ctx.version.within(#s, #u))
}

#[derive(Clone, Debug)]
pub struct Rename {
    pub name: String,
    pub since: Option<Version>,
    pub until: Option<Version>,
}

#[derive(Default, Debug)]
pub struct RangeAttrs {
    pub since: Option<Version>,
    pub until: Option<Version>,
    pub feature: Option<String>,
}

/// `rename(<name_key> = "…", since = "…", until = "…")`, where `name_key` is `element` for
/// fields and `value` for enum values.
fn parse_rename(meta: &syn::meta::ParseNestedMeta, name_key: &str) -> syn::Result<Rename> {
    let mut rename = Rename { name: String::new(), since: None, until: None };
    meta.parse_nested_meta(|inner| {
        let lit = inner.value()?.parse::<LitStr>()?;
        if inner.path.is_ident(name_key) {
            rename.name = lit.value();
        } else if inner.path.is_ident("since") {
            rename.since = Some(Version::parse(&lit)?);
        } else if inner.path.is_ident("until") {
            rename.until = Some(Version::parse(&lit)?);
        } else {
            return Err(inner.error(format!("expected `{name_key}`, `since` or `until`")));
        }
        Ok(())
    })?;
    if rename.name.is_empty() {
        return Err(meta.error(format!("`rename` needs `{name_key}`")));
    }
    Ok(rename)
}

/// Struct-level attributes.
#[derive(Default)]
pub struct ResourceAttrs {
    pub root: Option<String>,
    pub plural: Option<String>,
    pub href: Option<LitStr>,
}

pub fn resource_attrs(attrs: &[Attribute]) -> syn::Result<ResourceAttrs> {
    let mut out = ResourceAttrs::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("xml")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("root") {
                out.root = Some(meta.value()?.parse::<LitStr>()?.value());
            } else if meta.path.is_ident("plural") {
                out.plural = Some(meta.value()?.parse::<LitStr>()?.value());
            } else if meta.path.is_ident("href") {
                out.href = Some(meta.value()?.parse::<LitStr>()?);
            } else {
                return Err(meta.error("expected `root`, `plural` or `href`"));
            }
            Ok(())
        })?;
    }
    Ok(out)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Scalar,
    Money,
    Enum,
    Resource,
    List,
    Values,
    Link,
    Anchor,
    Text,
}

impl Kind {
    fn parse(lit: &LitStr) -> syn::Result<Self> {
        Ok(match lit.value().as_str() {
            "string" | "integer" | "boolean" | "datetime" | "date" | "float" | "cents" => Kind::Scalar,
            "money" => Kind::Money,
            "enum" => Kind::Enum,
            "resource" => Kind::Resource,
            "list" => Kind::List,
            "values" => Kind::Values,
            "link" => Kind::Link,
            "anchor" => Kind::Anchor,
            "text" => Kind::Text,
            other => {
                return Err(syn::Error::new(lit.span(), format!("unknown kind `{other}`")));
            }
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Request,
    Response,
    Both,
}

/// Field-level attributes.
pub struct FieldAttrs {
    pub kind: Kind,
    pub element: Option<String>,
    pub renames: Vec<Rename>,
    pub range: RangeAttrs,
    pub direction: Direction,
    pub required: bool,
    pub attribute: Option<String>,
    pub typed: bool,
    pub inline: bool,
    pub omit_empty: bool,
    /// `href_only`: the value has no element; it is a parameter of the resource's root `href`,
    /// written there and parsed back from it (responses).
    pub href_only: bool,
    /// `fixed_attribute(name = "lang", value = "en-US")`: written on the element of a value.
    pub fixed_attributes: Vec<(String, String)>,
    pub item: Option<String>,
    pub anchor: Option<String>,
    pub method: Option<String>,
}

pub fn field_attrs(attrs: &[Attribute], span: Span) -> syn::Result<FieldAttrs> {
    let mut kind = None;
    let mut out = FieldAttrs {
        kind: Kind::Scalar,
        element: None,
        renames: Vec::new(),
        range: RangeAttrs::default(),
        direction: Direction::Both,
        required: false,
        attribute: None,
        typed: false,
        inline: false,
        omit_empty: false,
        href_only: false,
        fixed_attributes: Vec::new(),
        item: None,
        anchor: None,
        method: None,
    };
    for attr in attrs.iter().filter(|a| a.path().is_ident("xml")) {
        attr.parse_nested_meta(|meta| {
            let string = |meta: &syn::meta::ParseNestedMeta| -> syn::Result<LitStr> { meta.value()?.parse::<LitStr>() };
            if meta.path.is_ident("kind") {
                kind = Some(Kind::parse(&string(&meta)?)?);
            } else if meta.path.is_ident("element") {
                out.element = Some(string(&meta)?.value());
            } else if meta.path.is_ident("rename") {
                let rename = parse_rename(&meta, "element")?;
                out.renames.push(rename);
            } else if meta.path.is_ident("since") {
                out.range.since = Some(Version::parse(&string(&meta)?)?);
            } else if meta.path.is_ident("until") {
                out.range.until = Some(Version::parse(&string(&meta)?)?);
            } else if meta.path.is_ident("feature") {
                out.range.feature = Some(string(&meta)?.value());
            } else if meta.path.is_ident("direction") {
                let lit = string(&meta)?;
                out.direction = match lit.value().as_str() {
                    "request" => Direction::Request,
                    "response" => Direction::Response,
                    "both" => Direction::Both,
                    _ => {
                        return Err(syn::Error::new(lit.span(), "expected request, response or both"));
                    }
                };
            } else if meta.path.is_ident("required") {
                out.required = true;
            } else if meta.path.is_ident("typed") {
                out.typed = true;
            } else if meta.path.is_ident("inline") {
                out.inline = true;
            } else if meta.path.is_ident("omit_empty") {
                out.omit_empty = true;
            } else if meta.path.is_ident("href_only") {
                out.href_only = true;
            } else if meta.path.is_ident("fixed_attribute") {
                let (mut name, mut value) = (None, None);
                meta.parse_nested_meta(|inner| {
                    let lit = inner.value()?.parse::<LitStr>()?.value();
                    if inner.path.is_ident("name") {
                        name = Some(lit);
                    } else if inner.path.is_ident("value") {
                        value = Some(lit);
                    } else {
                        return Err(inner.error("expected `name` or `value`"));
                    }
                    Ok(())
                })?;
                match (name, value) {
                    (Some(n), Some(v)) => out.fixed_attributes.push((n, v)),
                    _ => return Err(meta.error("`fixed_attribute` needs `name` and `value`")),
                }
            } else if meta.path.is_ident("attribute") {
                out.attribute = Some(string(&meta)?.value());
            } else if meta.path.is_ident("item") {
                out.item = Some(string(&meta)?.value());
            } else if meta.path.is_ident("anchor") {
                out.anchor = Some(string(&meta)?.value());
            } else if meta.path.is_ident("method") {
                out.method = Some(string(&meta)?.value());
            } else {
                return Err(meta.error("unknown xml field attribute"));
            }
            Ok(())
        })?;
    }
    out.kind = kind.ok_or_else(|| syn::Error::new(span, "missing `#[xml(kind = \"…\")]`"))?;
    Ok(out)
}

/// Variant-level attributes of an enum.
#[derive(Default)]
pub struct VariantAttrs {
    pub value: Option<String>,
    pub renames: Vec<Rename>,
    pub range: RangeAttrs,
    pub fallback: Option<syn::Ident>,
    pub unknown: bool,
}

pub fn variant_attrs(attrs: &[Attribute]) -> syn::Result<VariantAttrs> {
    let mut out = VariantAttrs::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("xml")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("value") {
                out.value = Some(meta.value()?.parse::<LitStr>()?.value());
            } else if meta.path.is_ident("rename") {
                let rename = parse_rename(&meta, "value")?;
                out.renames.push(rename);
            } else if meta.path.is_ident("since") {
                out.range.since = Some(Version::parse(&meta.value()?.parse::<LitStr>()?)?);
            } else if meta.path.is_ident("until") {
                out.range.until = Some(Version::parse(&meta.value()?.parse::<LitStr>()?)?);
            } else if meta.path.is_ident("feature") {
                out.range.feature = Some(meta.value()?.parse::<LitStr>()?.value());
            } else if meta.path.is_ident("fallback") {
                let lit = meta.value()?.parse::<LitStr>()?;
                out.fallback = Some(syn::Ident::new(&lit.value(), lit.span()));
            } else if meta.path.is_ident("unknown") {
                out.unknown = true;
            } else {
                return Err(meta.error("unknown xml variant attribute"));
            }
            Ok(())
        })?;
    }
    Ok(out)
}

/// Whether a field/value with these bounds exists in `ctx`, as tokens.
pub fn presence(range: &RangeAttrs) -> TokenStream {
    let versions = range_check(range.since, range.until);
    match &range.feature {
        Some(f) => quote!((#versions && ctx.features.has(#f))),
        None => versions,
    }
}

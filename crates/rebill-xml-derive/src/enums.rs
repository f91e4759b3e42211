//! `#[derive(XmlEnum)]` for enums whose spelling depends on the version and site features.

use proc_macro2::TokenStream;
use quote::quote;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, Ident, LitStr};

use crate::attrs::{self, RangeAttrs, Rename, VariantAttrs};

struct Variant {
    ident: Ident,
    attrs: VariantAttrs,
}

impl Variant {
    fn renames(&self) -> Vec<Rename> {
        if self.attrs.renames.is_empty() {
            let value = self.attrs.value.clone().unwrap_or_else(|| self.ident.to_string());
            vec![Rename { name: value, since: None, until: None }]
        } else {
            self.attrs.renames.clone()
        }
    }

    fn exists(&self) -> TokenStream {
        attrs::presence(&self.attrs.range)
    }

    fn has_bounds(&self) -> bool {
        let RangeAttrs { since, until, feature } = &self.attrs.range;
        since.is_some() || until.is_some() || feature.is_some()
    }

    /// The spelling at `ctx.version`, assuming the value exists there.
    fn spelling(&self) -> TokenStream {
        let renames = self.renames();
        let mut iter = renames.iter().rev();
        let Some(last) = iter.next() else {
            return quote!("");
        };
        let last = &last.name;
        let mut expr = quote!(#last);
        for r in iter {
            let check = attrs::range_check(r.since, r.until);
            let name = &r.name;
            expr = quote!(if #check { #name } else { #expr });
        }
        expr
    }
}

pub fn derive(input: DeriveInput) -> syn::Result<TokenStream> {
    let name = &input.ident;
    let Data::Enum(data) = &input.data else {
        return Err(syn::Error::new(input.span(), "XmlEnum derives only for enums"));
    };
    let mut enum_name = None;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("xml")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("name") {
                enum_name = Some(meta.value()?.parse::<LitStr>()?.value());
                Ok(())
            } else {
                Err(meta.error("expected `name`"))
            }
        })?;
    }
    let enum_name = enum_name.unwrap_or_else(|| name.to_string());

    let mut variants = Vec::new();
    let mut unknown = None;
    for v in &data.variants {
        let attrs = attrs::variant_attrs(&v.attrs)?;
        if attrs.unknown {
            if !matches!(&v.fields, Fields::Unnamed(f) if f.unnamed.len() == 1) {
                return Err(syn::Error::new(v.span(), "the unknown variant must hold one String"));
            }
            unknown = Some(v.ident.clone());
            continue;
        }
        if !matches!(v.fields, Fields::Unit) {
            return Err(syn::Error::new(v.span(), "enum values must be unit variants"));
        }
        if attrs.fallback.is_none()
            && (attrs.range.since.is_some() || attrs.range.until.is_some() || attrs.range.feature.is_some())
        {
            return Err(syn::Error::new(v.span(), "a value with `since`, `until` or `feature` needs a `fallback`"));
        }
        variants.push(Variant { ident: v.ident.clone(), attrs });
    }
    let unknown = unknown.ok_or_else(|| {
        syn::Error::new(input.span(), "an XmlEnum needs an `#[xml(unknown)] Unknown(String)` variant")
    })?;

    let wire_arms = variants.iter().map(|v| {
        let ident = &v.ident;
        let spelling = v.spelling();
        match (&v.attrs.fallback, v.has_bounds()) {
            (Some(fallback), true) => {
                let exists = v.exists();
                quote!(Self::#ident => if #exists { #spelling } else { Self::#fallback.wire_value(ctx) },)
            }
            _ => quote!(Self::#ident => #spelling,),
        }
    });

    let from_arms = variants.iter().flat_map(|v| {
        let ident = &v.ident;
        let exists = v.exists();
        v.renames()
            .into_iter()
            .map(move |r| {
                let check = attrs::range_check(r.since, r.until);
                let value = r.name;
                quote!(#value if #exists && #check => ::core::option::Option::Some(Self::#ident),)
            })
            .collect::<Vec<_>>()
    });

    let list_items = variants.iter().map(|v| {
        let exists = v.exists();
        let spelling = v.spelling();
        quote!(if #exists { out.push(#spelling); })
    });

    let name_arms = variants.iter().map(|v| {
        let ident = &v.ident;
        let text = to_snake(&ident.to_string());
        quote!(Self::#ident => #text,)
    });
    let from_name_arms = variants.iter().map(|v| {
        let ident = &v.ident;
        let text = to_snake(&ident.to_string());
        quote!(#text => ::core::option::Option::Some(Self::#ident),)
    });
    let all_idents = variants.iter().map(|v| &v.ident);
    let count = variants.len();

    Ok(quote! {
        impl ::rebill_xml::XmlEnum for #name {
            const NAME: &'static str = #enum_name;

            #[allow(unused_variables)]
            fn wire_value(&self, ctx: &::rebill_xml::WireContext) -> &str {
                match self {
                    #(#wire_arms)*
                    Self::#unknown(value) => value.as_str(),
                }
            }

            #[allow(unused_variables)]
            fn from_wire(value: &str, ctx: &::rebill_xml::WireContext) -> ::core::option::Option<Self> {
                match value {
                    #(#from_arms)*
                    _ => ::core::option::Option::None,
                }
            }

            fn unknown(value: ::std::string::String) -> Self {
                Self::#unknown(value)
            }

            #[allow(unused_variables)]
            fn wire_values(ctx: &::rebill_xml::WireContext) -> ::std::vec::Vec<&'static str> {
                let mut out = ::std::vec::Vec::new();
                #(#list_items)*
                out
            }
        }

        impl #name {
            /// Every known value, in schema order.
            pub const ALL: [Self; #count] = [#(Self::#all_idents),*];

            /// The schema name of the value (stable across versions; use it for storage).
            pub fn name(&self) -> &str {
                match self {
                    #(#name_arms)*
                    Self::#unknown(value) => value.as_str(),
                }
            }

            /// The value with this schema name.
            pub fn from_name(name: &str) -> ::core::option::Option<Self> {
                match name {
                    #(#from_name_arms)*
                    _ => ::core::option::Option::None,
                }
            }
        }

        impl ::rebill_xml::Project for #name {
            fn project(&self, ctx: &::rebill_xml::WireContext, _mode: ::rebill_xml::Mode) -> Self {
                <Self as ::rebill_xml::XmlEnum>::from_wire(::rebill_xml::XmlEnum::wire_value(self, ctx), ctx)
                    .unwrap_or_else(|| ::core::clone::Clone::clone(self))
            }
        }

        #[cfg(feature = "arbitrary")]
        impl ::rebill_xml::arbitrary::Arbitrary for #name {
            fn arbitrary(g: &mut ::rebill_xml::arbitrary::Gen) -> Self {
                ::core::clone::Clone::clone(g.pick(&Self::ALL))
            }
        }
    })
}

/// `PastDue` → `past_due`.
fn to_snake(camel: &str) -> String {
    let mut out = String::new();
    for (i, ch) in camel.chars().enumerate() {
        if ch.is_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.extend(ch.to_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}

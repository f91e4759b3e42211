//! Derive macros for the rebill XML codec.
//!
//! The generator (`cargo xtask regen`) emits plain structs and enums carrying `#[xml(...)]`
//! attributes; these derives implement encoding, decoding, projection to a version and random
//! generation from those attributes (the split prost uses between prost-build and prost-derive).
//!
//! Struct: `#[xml(root = "invoice", plural = "invoices", href = "/v2/invoices/{invoice_number}")]`.
//! Field: `#[xml(kind = "cents", direction = "response", since = "2.5", feature = "credit_memos",
//! rename(element = "subtotal_in_cents", until = "2.10"), required, attribute = "type", typed,
//! item = "adjustment", anchor = "cancel", method = "put", omit_empty,
//! fixed_attribute(name = "lang", value = "en-US"), href_only)]`; an `href_only` field has no
//! element: it is a parameter of the struct's `href`, written there and read back from it.
//! Enum value: `#[xml(value = "failed")]`, `#[xml(rename(value = "open", until = "2.10"))]`,
//! `#[xml(since = "2.11", fallback = "Active")]`, `#[xml(unknown)] Unknown(String)`.

mod attrs;
mod enums;
mod resource;

use proc_macro::TokenStream;
use syn::{DeriveInput, parse_macro_input};

/// Implements `XmlResource`, `Project` (and, with the `arbitrary` feature of the deriving
/// crate, `Arbitrary`) for a struct of `Option` fields.
#[proc_macro_derive(XmlResource, attributes(xml))]
pub fn derive_xml_resource(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    resource::derive(input).unwrap_or_else(syn::Error::into_compile_error).into()
}

/// Implements `XmlEnum`, `Project`, `ALL`, `name`/`from_name` (and `Arbitrary` with the
/// `arbitrary` feature) for an enum of unit values plus an `Unknown(String)` variant.
#[proc_macro_derive(XmlEnum, attributes(xml))]
pub fn derive_xml_enum(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    enums::derive(input).unwrap_or_else(syn::Error::into_compile_error).into()
}

//! `#[derive(XmlResource)]` for structs.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, GenericArgument, Ident, PathArguments, Type};

use crate::attrs::{self, Direction, FieldAttrs, Kind, Version};

struct Field {
    ident: Ident,
    inner: Type,
    attrs: FieldAttrs,
}

impl Field {
    /// Element names with the version range each applies to (clipped to the field's range).
    fn elements(&self) -> Vec<(String, Option<Version>, Option<Version>)> {
        let own = (self.attrs.range.since, self.attrs.range.until);
        if self.attrs.inline {
            return vec![(self.attrs.item.clone().unwrap_or_default(), own.0, own.1)];
        }
        if self.attrs.renames.is_empty() {
            let name = self.attrs.element.clone().unwrap_or_else(|| self.ident.to_string());
            return vec![(name, own.0, own.1)];
        }
        self.attrs
            .renames
            .iter()
            .map(|r| (r.name.clone(), max_since(own.0, r.since), min_until(own.1, r.until)))
            .collect()
    }

    fn presence(&self) -> TokenStream {
        let range = attrs::presence(&self.attrs.range);
        let dir = direction_tokens(self.attrs.direction);
        quote!((#range && #dir.allows(mode)))
    }

    /// The element name at `ctx.version`, as an expression.
    fn element_expr(&self) -> TokenStream {
        let elements = self.elements();
        let mut iter = elements.iter().rev();
        let Some((last, _, _)) = iter.next() else {
            return quote!("");
        };
        let mut expr = quote!(#last);
        for (name, since, until) in iter {
            let check = attrs::range_check(*since, *until);
            expr = quote!(if #check { #name } else { #expr });
        }
        expr
    }
}

fn max_since(a: Option<Version>, b: Option<Version>) -> Option<Version> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn min_until(a: Option<Version>, b: Option<Version>) -> Option<Version> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn direction_tokens(d: Direction) -> TokenStream {
    match d {
        Direction::Request => quote!(::rebill_xml::Direction::Request),
        Direction::Response => quote!(::rebill_xml::Direction::Response),
        Direction::Both => quote!(::rebill_xml::Direction::Both),
    }
}

/// `Option<T>` → `T`, and for boxes and vectors the element type inside.
fn unwrap_type(ty: &Type, wrapper: &str) -> Option<Type> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if last.ident != wrapper {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.first()? {
        GenericArgument::Type(t) => Some(t.clone()),
        _ => None,
    }
}

pub fn derive(input: DeriveInput) -> syn::Result<TokenStream> {
    let name = &input.ident;
    let top = attrs::resource_attrs(&input.attrs)?;
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new(input.span(), "XmlResource derives only for structs"));
    };
    let Fields::Named(named) = &data.fields else {
        return Err(syn::Error::new(input.span(), "XmlResource needs named fields"));
    };
    let mut fields = Vec::new();
    for f in &named.named {
        let ident = f.ident.clone().ok_or_else(|| syn::Error::new(f.span(), "unnamed field"))?;
        let attrs = attrs::field_attrs(&f.attrs, f.span())?;
        let option = unwrap_type(&f.ty, "Option")
            .ok_or_else(|| syn::Error::new(f.ty.span(), "every XmlResource field must be an Option"))?;
        let inner = match attrs.kind {
            Kind::Resource => unwrap_type(&option, "Box")
                .ok_or_else(|| syn::Error::new(f.ty.span(), "a resource field must be Option<Box<T>>"))?,
            Kind::List | Kind::Values => unwrap_type(&option, "Vec")
                .ok_or_else(|| syn::Error::new(f.ty.span(), "a list field must be Option<Vec<T>>"))?,
            _ => option,
        };
        if attrs.kind == Kind::Anchor && (attrs.anchor.is_none() || attrs.method.is_none()) {
            return Err(syn::Error::new(f.span(), "an anchor field needs `anchor` and `method`"));
        }
        if matches!(attrs.kind, Kind::List | Kind::Values) && attrs.item.is_none() {
            return Err(syn::Error::new(f.span(), "a list field needs `item`"));
        }
        if attrs.attribute.is_some() && !matches!(attrs.kind, Kind::Scalar | Kind::Enum) {
            return Err(syn::Error::new(f.span(), "only scalar and enum fields can be attributes"));
        }
        if attrs.href_only
            && (attrs.kind != Kind::Scalar || attrs.attribute.is_some() || attrs.direction != Direction::Response)
        {
            return Err(syn::Error::new(
                f.span(),
                "an `href_only` field is a response-only scalar without an attribute",
            ));
        }
        fields.push(Field { ident, inner, attrs });
    }
    if let Some(f) = fields.iter().find(|f| f.attrs.href_only) {
        let named = top.href.as_ref().is_some_and(|h| h.value().contains(&format!("{{{}}}", f.ident)));
        if !named {
            return Err(syn::Error::new(f.ident.span(), "an `href_only` field must be named in the resource's `href`"));
        }
    }

    let root = top.root.clone().unwrap_or_else(|| name.to_string());
    let plural = match &top.plural {
        Some(p) => quote!(::core::option::Option::Some(#p)),
        None => quote!(::core::option::Option::None),
    };
    let href = href_fn(&top, &fields)?;
    let elements = elements_table(&fields);
    let write_attributes = write_attributes(&fields);
    let write_children = write_children(&fields);
    let read_attribute = read_attribute(&top, &fields);
    let read_child = read_child(&fields);
    let project = project(&fields);
    let text = text_fns(&fields);
    let arbitrary = arbitrary(name, &fields);

    Ok(quote! {
        impl ::rebill_xml::XmlResource for #name {
            const ROOT: &'static str = #root;
            const PLURAL: ::core::option::Option<&'static str> = #plural;
            const ELEMENTS: &'static [::rebill_xml::ElementInfo] = &[#elements];

            #href

            #text

            #[allow(unused_variables)]
            fn write_attributes(&self, w: &mut ::rebill_xml::XmlWriter, ctx: &::rebill_xml::WireContext, mode: ::rebill_xml::Mode) {
                #write_attributes
            }

            #[allow(unused_variables)]
            fn write_children(&self, w: &mut ::rebill_xml::XmlWriter, ctx: &::rebill_xml::WireContext, mode: ::rebill_xml::Mode) {
                #write_children
            }

            #[allow(unused_variables, clippy::match_single_binding)]
            fn read_attribute(&mut self, key: &str, value: &str, ctx: &::rebill_xml::WireContext, mode: ::rebill_xml::Mode) -> ::core::result::Result<(), ::rebill_xml::DecodeError> {
                #read_attribute
            }

            #[allow(unused_variables, clippy::match_single_binding)]
            fn read_child<'a>(&mut self, r: &mut ::rebill_xml::XmlReader<'a>, tag: ::rebill_xml::Tag<'a>, ctx: &::rebill_xml::WireContext) -> ::core::result::Result<(), ::rebill_xml::DecodeError> {
                #read_child
            }
        }

        impl ::rebill_xml::Project for #name {
            #[allow(unused_variables)]
            fn project(&self, ctx: &::rebill_xml::WireContext, mode: ::rebill_xml::Mode) -> Self {
                #project
            }
        }

        #arbitrary
    })
}

fn href_fn(top: &attrs::ResourceAttrs, fields: &[Field]) -> syn::Result<TokenStream> {
    let Some(pattern) = &top.href else {
        return Ok(quote!(
            fn href_path(&self) -> ::core::option::Option<::std::string::String> {
                ::core::option::Option::None
            }
        ));
    };
    let text = pattern.value();
    let mut steps = Vec::new();
    let mut rest = text.as_str();
    while let Some(open) = rest.find('{') {
        let literal = &rest[..open];
        if !literal.is_empty() {
            steps.push(quote!(path.push_str(#literal);));
        }
        let close =
            rest[open..].find('}').ok_or_else(|| syn::Error::new(pattern.span(), "unclosed `{` in href pattern"))?
                + open;
        let field_name = &rest[open + 1..close];
        if !fields.iter().any(|f| f.ident == field_name) {
            return Err(syn::Error::new(pattern.span(), format!("href pattern names unknown field `{field_name}`")));
        }
        let ident = Ident::new(field_name, pattern.span());
        steps.push(quote! {
            ::rebill_xml::value::push_path_segment(&mut path, &::std::string::ToString::to_string(self.#ident.as_ref()?));
        });
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        steps.push(quote!(path.push_str(#rest);));
    }
    Ok(quote! {
        fn href_path(&self) -> ::core::option::Option<::std::string::String> {
            let mut path = ::std::string::String::new();
            #(#steps)*
            ::core::option::Option::Some(path)
        }
    })
}

/// `HAS_TEXT`, `text_value` and `read_text` for a resource with a text field.
fn text_fns(fields: &[Field]) -> TokenStream {
    let Some(f) = fields.iter().find(|f| f.attrs.kind == Kind::Text) else { return quote!() };
    let ident = &f.ident;
    let present = f.presence();
    // Nothing of it would be written: `<x nil="nil"></x>`, the same as no value at all.
    let checks = fields.iter().map(|g| {
        let g_ident = &g.ident;
        let g_present = g.presence();
        quote!((!#g_present || self.#g_ident.is_none()))
    });
    let blank = quote!(true #(&& #checks)*);
    quote! {
        const HAS_TEXT: bool = true;

        fn is_blank(&self, ctx: &::rebill_xml::WireContext, mode: ::rebill_xml::Mode) -> bool {
            #blank
        }

        fn text_value(&self, ctx: &::rebill_xml::WireContext, mode: ::rebill_xml::Mode) -> ::core::option::Option<&str> {
            if #present { self.#ident.as_deref() } else { ::core::option::Option::None }
        }

        fn read_text(&mut self, text: ::std::string::String, ctx: &::rebill_xml::WireContext, mode: ::rebill_xml::Mode) -> ::core::result::Result<(), ::rebill_xml::DecodeError> {
            if #present {
                self.#ident = ::core::option::Option::Some(text);
            } else if mode == ::rebill_xml::Mode::Request && !text.trim().is_empty() {
                return ::core::result::Result::Err(::rebill_xml::DecodeErrorKind::UnexpectedText.into());
            }
            ::core::result::Result::Ok(())
        }
    }
}

fn elements_table(fields: &[Field]) -> TokenStream {
    let mut entries = Vec::new();
    for f in fields.iter().filter(|f| f.attrs.attribute.is_none() && f.attrs.kind != Kind::Text && !f.attrs.href_only) {
        let dir = direction_tokens(f.attrs.direction);
        let feature = match &f.attrs.range.feature {
            Some(x) => quote!(::core::option::Option::Some(#x)),
            None => quote!(::core::option::Option::None),
        };
        let elements = if f.attrs.kind == Kind::Anchor {
            vec![("a".to_owned(), f.attrs.range.since, f.attrs.range.until)]
        } else {
            f.elements()
        };
        for (element, since, until) in elements {
            let since = attrs::version_tokens(since);
            let until = attrs::version_tokens(until);
            entries.push(quote! {
                ::rebill_xml::ElementInfo { element: #element, since: #since, until: #until, direction: #dir, feature: #feature },
            });
        }
    }
    quote!(#(#entries)*)
}

fn write_attributes(fields: &[Field]) -> TokenStream {
    let mut out = Vec::new();
    for f in fields {
        let Some(attr) = &f.attrs.attribute else {
            continue;
        };
        let ident = &f.ident;
        let present = f.presence();
        let text = match f.attrs.kind {
            Kind::Enum => quote!(::rebill_xml::XmlEnum::wire_value(v, ctx)),
            _ => quote!(::core::convert::AsRef::<str>::as_ref(v)),
        };
        out.push(quote! {
            if #present {
                if let ::core::option::Option::Some(v) = &self.#ident {
                    w.attr(#attr, #text);
                }
            }
        });
    }
    quote!(#(#out)*)
}

fn write_children(fields: &[Field]) -> TokenStream {
    let mut out = Vec::new();
    let ordered = fields
        .iter()
        .filter(|f| {
            f.attrs.attribute.is_none() && !f.attrs.href_only && !matches!(f.attrs.kind, Kind::Anchor | Kind::Text)
        })
        .chain(fields.iter().filter(|f| f.attrs.kind == Kind::Anchor));
    for f in ordered {
        let ident = &f.ident;
        let inner = &f.inner;
        let present = f.presence();
        let element = f.element_expr();
        let write = match f.attrs.kind {
            Kind::Scalar if !f.attrs.fixed_attributes.is_empty() => {
                let pairs = f.attrs.fixed_attributes.iter().map(|(n, v)| quote!((#n, #v)));
                quote!(::rebill_xml::codec::write_scalar_with::<#inner>(w, #element, &self.#ident, mode, &[#(#pairs),*]))
            }
            Kind::Scalar => {
                quote!(::rebill_xml::codec::write_scalar::<#inner>(w, #element, &self.#ident, mode))
            }
            Kind::Enum => {
                quote!(::rebill_xml::codec::write_enum::<#inner>(w, #element, &self.#ident, ctx, mode))
            }
            Kind::Money => {
                quote!(::rebill_xml::codec::write_money(w, #element, &self.#ident, mode))
            }
            Kind::Resource => {
                let typed = f.attrs.typed;
                quote!(::rebill_xml::codec::write_nested::<#inner>(w, #element, &self.#ident, ctx, mode, #typed))
            }
            Kind::List if f.attrs.inline => {
                let item = f.attrs.item.clone().unwrap_or_default();
                quote!(::rebill_xml::codec::write_inline_list::<#inner>(w, #item, &self.#ident, ctx, mode))
            }
            Kind::List => {
                let item = f.attrs.item.clone().unwrap_or_default();
                quote!(::rebill_xml::codec::write_list::<#inner>(w, #element, #item, &self.#ident, ctx, mode))
            }
            Kind::Values => {
                let item = f.attrs.item.clone().unwrap_or_default();
                quote!(::rebill_xml::codec::write_values::<#inner>(w, #element, #item, &self.#ident))
            }
            Kind::Link => quote!(::rebill_xml::codec::write_link(w, #element, &self.#ident, ctx)),
            Kind::Anchor => {
                let anchor = f.attrs.anchor.clone().unwrap_or_default();
                let method = f.attrs.method.clone().unwrap_or_default();
                quote!(::rebill_xml::codec::write_anchor(w, #anchor, #method, &self.#ident, ctx))
            }
            Kind::Text => unreachable!("text fields are filtered out"),
        };
        if f.attrs.omit_empty {
            out.push(quote!(if #present && self.#ident.is_some() { #write; }));
        } else {
            out.push(quote!(if #present { #write; }));
        }
    }
    quote!(#(#out)*)
}

fn read_attribute(top: &attrs::ResourceAttrs, fields: &[Field]) -> TokenStream {
    let mut arms = Vec::new();
    let href_params: Vec<TokenStream> = fields
        .iter()
        .filter(|f| f.attrs.href_only)
        .map(|f| {
            let ident = &f.ident;
            let name = ident.to_string();
            let present = f.presence();
            quote!(#name if #present => { self.#ident = ::core::option::Option::Some(value); })
        })
        .collect();
    if let (Some(pattern), false) = (&top.href, href_params.is_empty()) {
        // The root href of a response carries these fields; another URL shape leaves them unset.
        arms.push(quote! {
            "href" if mode == ::rebill_xml::Mode::Response => {
                for (name, value) in ::rebill_xml::value::href_params(#pattern, value, ctx).unwrap_or_default() {
                    match name {
                        #(#href_params)*
                        _ => {}
                    }
                }
            }
        });
    }
    for f in fields {
        let Some(attr) = &f.attrs.attribute else {
            continue;
        };
        let ident = &f.ident;
        let inner = &f.inner;
        let present = f.presence();
        let parse = match f.attrs.kind {
            Kind::Enum => {
                quote!(::rebill_xml::codec::parse_enum::<#inner>(value, ctx, mode).map_err(|e| e.within(#attr))?)
            }
            _ => quote! {
                <#inner as ::rebill_xml::XmlScalar>::parse_text(value).ok_or_else(|| {
                    ::rebill_xml::DecodeError::new(::rebill_xml::DecodeErrorKind::InvalidValue {
                        value: value.to_owned(),
                        expected: <#inner as ::rebill_xml::XmlScalar>::EXPECTED.to_owned(),
                    }).within(#attr)
                })?
            },
        };
        arms.push(quote!(#attr if #present => { self.#ident = ::core::option::Option::Some(#parse); }));
    }
    quote! {
        match key {
            #(#arms)*
            _ => {}
        }
        ::core::result::Result::Ok(())
    }
}

fn read_child(fields: &[Field]) -> TokenStream {
    let mut select = Vec::new();
    let mut anchor_select = Vec::new();
    let mut actions = Vec::new();
    for (index, f) in fields
        .iter()
        .enumerate()
        .filter(|(_, f)| f.attrs.attribute.is_none() && f.attrs.kind != Kind::Text && !f.attrs.href_only)
    {
        let index = index as u32;
        let ident = &f.ident;
        let inner = &f.inner;
        let present = f.presence();
        let required = f.attrs.required;
        if f.attrs.kind == Kind::Anchor {
            let anchor = f.attrs.anchor.clone().unwrap_or_default();
            anchor_select.push(quote!(#anchor if #present => #index,));
            actions.push(quote! {
                #index => { self.#ident = ::rebill_xml::codec::read_link(r, tag, ctx).map_err(|e| e.within("a"))?; }
            });
            continue;
        }
        for (element, since, until) in f.elements() {
            let check = attrs::range_check(since, until);
            select.push(quote!(#element if #present && #check => #index,));
        }
        let element = f.element_expr();
        if f.attrs.inline {
            let item = f.attrs.item.clone().unwrap_or_default();
            actions.push(quote! {
                #index => { ::rebill_xml::codec::read_inline_item::<#inner>(r, tag, ctx, &mut self.#ident).map_err(|e| e.within(#item))?; }
            });
            continue;
        }
        let read = match f.attrs.kind {
            Kind::Scalar => quote!(::rebill_xml::codec::read_scalar::<#inner>(r, tag, #required)),
            Kind::Enum => quote!(::rebill_xml::codec::read_enum::<#inner>(r, tag, ctx, #required)),
            Kind::Money => quote!(::rebill_xml::codec::read_money(r, tag, #required)),
            Kind::Resource => {
                quote!(::rebill_xml::codec::read_nested::<#inner>(r, tag, ctx, #required))
            }
            Kind::List => {
                let item = f.attrs.item.clone().unwrap_or_default();
                quote!(::rebill_xml::codec::read_list::<#inner>(r, tag, #item, ctx))
            }
            Kind::Values => {
                let item = f.attrs.item.clone().unwrap_or_default();
                quote!(::rebill_xml::codec::read_values::<#inner>(r, tag, #item))
            }
            Kind::Link => quote!(::rebill_xml::codec::read_link(r, tag, ctx)),
            Kind::Anchor | Kind::Text => unreachable!("anchors handled above, text fields filtered out"),
        };
        actions.push(quote_spanned! {ident.span()=>
            #index => { self.#ident = #read.map_err(|e| e.within(#element))?; }
        });
    }
    let anchor_arm = if anchor_select.is_empty() {
        quote!()
    } else {
        quote! {
            "a" => tag
                .with_attribute("name", |anchor| match anchor {
                    #(#anchor_select)*
                    _ => u32::MAX,
                })?
                .unwrap_or(u32::MAX),
        }
    };
    quote! {
        let mode = r.mode();
        let field: u32 = match tag.name() {
            #(#select)*
            #anchor_arm
            _ => u32::MAX,
        };
        match field {
            #(#actions)*
            _ => ::rebill_xml::codec::unclaimed_child(r, tag, ctx, <Self as ::rebill_xml::XmlResource>::ELEMENTS)?,
        }
        ::core::result::Result::Ok(())
    }
}

fn project(fields: &[Field]) -> TokenStream {
    let inits = fields.iter().map(|f| {
        let ident = &f.ident;
        let present = f.presence();
        let inner = &f.inner;
        let blank = quote!(<#inner as ::rebill_xml::XmlResource>::is_blank);
        let keep = match f.attrs.kind {
            // A blank text resource is written as a bare nil element, which reads back as none.
            Kind::Resource => quote!(.filter(|v| !#blank(v, ctx, mode))),
            Kind::List => {
                let items = quote!(.map(|v: ::std::vec::Vec<#inner>| v.into_iter().filter(|x| !#blank(x, ctx, mode)).collect::<::std::vec::Vec<_>>()));
                // An empty inline list writes nothing, so it reads back as absent.
                if f.attrs.inline { quote!(#items.filter(|v| !v.is_empty())) } else { items }
            }
            _ => quote!(),
        };
        if f.attrs.href_only {
            // Written only inside the root href, which needs every parameter of the pattern.
            return quote! {
                #ident: if #present && <Self as ::rebill_xml::XmlResource>::href_path(self).is_some() {
                    ::rebill_xml::Project::project(&self.#ident, ctx, mode)
                } else {
                    ::core::option::Option::None
                },
            };
        }
        quote! {
            #ident: if #present { ::rebill_xml::Project::project(&self.#ident, ctx, mode)#keep } else { ::core::option::Option::None },
        }
    });
    quote!(Self { #(#inits)* })
}

fn arbitrary(name: &Ident, fields: &[Field]) -> TokenStream {
    let inits = fields.iter().map(|f| {
        let ident = &f.ident;
        match f.attrs.kind {
            Kind::Resource | Kind::List => quote! {
                #ident: if g.coin() { g.nested() } else { ::core::option::Option::None },
            },
            _ => quote!(#ident: ::rebill_xml::arbitrary::Arbitrary::arbitrary(g),),
        }
    });
    quote! {
        #[cfg(feature = "arbitrary")]
        impl ::rebill_xml::arbitrary::Arbitrary for #name {
            fn arbitrary(g: &mut ::rebill_xml::arbitrary::Gen) -> Self {
                Self { #(#inits)* }
            }
        }
    }
}

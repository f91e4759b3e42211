//! Codec traits implemented by the derive macros, the per-kind field helpers the derived code
//! calls, and the document-level entry points.

use std::borrow::Cow;

use chrono::{DateTime, NaiveDate, Utc};

use crate::context::{Direction, Mode, WireContext};
use crate::error::{DecodeError, DecodeErrorKind};
use crate::reader::{Tag, XmlReader};
use crate::value::{Href, Money, XmlScalar};
use crate::version::ApiVersion;
use crate::writer::XmlWriter;

/// An enumerated value whose wire spelling may depend on the version and site features.
pub trait XmlEnum: Sized + Clone {
    /// Name used in error messages ("invoice_state").
    const NAME: &'static str;
    /// The value as written for `ctx` (a value that does not exist there is written as its
    /// fallback).
    fn wire_value(&self, ctx: &WireContext) -> &str;
    /// The value a wire spelling stands for in `ctx`, if any.
    fn from_wire(value: &str, ctx: &WireContext) -> Option<Self>;
    /// A value this build does not know (lenient response reading).
    fn unknown(value: String) -> Self;
    /// The spellings accepted in `ctx`.
    fn wire_values(ctx: &WireContext) -> Vec<&'static str>;
}

/// A resource: an element with attributes and child elements.
pub trait XmlResource: Sized + Default {
    /// The resource's own element name.
    const ROOT: &'static str;
    /// The list element name, for resources that come in lists.
    const PLURAL: Option<&'static str>;
    /// Every element the resource knows, at any version (for error diagnosis).
    const ELEMENTS: &'static [ElementInfo];

    /// Whether the resource's content is text (beside attributes) instead of child elements.
    const HAS_TEXT: bool = false;

    /// Whether a text resource would be written as a bare `nil` element (no text, no
    /// attributes) in this context: it then reads back as no value.
    fn is_blank(&self, _ctx: &WireContext, _mode: Mode) -> bool {
        false
    }

    /// The text content to write in this context (resources with a text field).
    fn text_value(&self, _ctx: &WireContext, _mode: Mode) -> Option<&str> {
        None
    }

    /// Stores text content read from the document (resources with a text field).
    fn read_text(&mut self, _text: String, _ctx: &WireContext, _mode: Mode) -> Result<(), DecodeError> {
        Ok(())
    }

    /// The path of the resource's own URL, when it has one and its identifier is set.
    fn href_path(&self) -> Option<String>;
    /// Writes the attributes of the resource's start tag (other than `href`).
    fn write_attributes(&self, w: &mut XmlWriter, ctx: &WireContext, mode: Mode);
    /// Writes the child elements.
    fn write_children(&self, w: &mut XmlWriter, ctx: &WireContext, mode: Mode);
    /// Reads one attribute of the start tag; unknown attributes are ignored.
    fn read_attribute(&mut self, key: &str, value: &str, ctx: &WireContext, mode: Mode) -> Result<(), DecodeError>;
    /// Reads one child element (and consumes it).
    fn read_child<'a>(&mut self, r: &mut XmlReader<'a>, tag: Tag<'a>, ctx: &WireContext) -> Result<(), DecodeError>;
}

/// Keeps what a context can carry: fields absent at the version, for the features or in the
/// document's direction are cleared and enum values take their spelling there. For any value
/// `x`, decoding `x` written for `ctx` gives `x.project(ctx, mode)`.
pub trait Project {
    #[must_use]
    fn project(&self, ctx: &WireContext, mode: Mode) -> Self;
}

macro_rules! project_by_clone {
    ($($t:ty),*) => {$(
        impl Project for $t {
            fn project(&self, _: &WireContext, _: Mode) -> Self { self.clone() }
        }
    )*};
}
project_by_clone!(String, i64, bool, f64, DateTime<Utc>, NaiveDate, Money, Href);

impl<T: Project> Project for Option<T> {
    fn project(&self, ctx: &WireContext, mode: Mode) -> Self {
        self.as_ref().map(|v| v.project(ctx, mode))
    }
}

impl<T: Project> Project for Box<T> {
    fn project(&self, ctx: &WireContext, mode: Mode) -> Self {
        Box::new((**self).project(ctx, mode))
    }
}

impl<T: Project> Project for Vec<T> {
    fn project(&self, ctx: &WireContext, mode: Mode) -> Self {
        self.iter().map(|v| v.project(ctx, mode)).collect()
    }
}

/// Where and when an element exists; one entry per (field, element name range).
#[derive(Debug, Clone, Copy)]
pub struct ElementInfo {
    pub element: &'static str,
    pub since: Option<ApiVersion>,
    pub until: Option<ApiVersion>,
    pub direction: Direction,
    pub feature: Option<&'static str>,
}

/// Handles a child element no field claimed in this context: skipped in responses, an error
/// naming the element in requests (telling apart unknown, other-version, feature-gated and
/// read-only elements).
pub fn unclaimed_child<'a>(
    r: &mut XmlReader<'a>,
    tag: Tag<'a>,
    ctx: &WireContext,
    elements: &[ElementInfo],
) -> Result<(), DecodeError> {
    if r.mode() == Mode::Response {
        return r.skip(&tag);
    }
    let name = tag.name();
    let candidates = || elements.iter().filter(|e| e.element == name);
    let kind = if candidates().next().is_none() {
        DecodeErrorKind::UnknownElement
    } else if let Some(e) =
        candidates().find(|e| ctx.version.within(e.since, e.until) && e.feature.is_some_and(|f| !ctx.features.has(f)))
    {
        DecodeErrorKind::FeatureRequired(e.feature.unwrap_or_default())
    } else if candidates().any(|e| ctx.version.within(e.since, e.until)) {
        DecodeErrorKind::ResponseOnly
    } else {
        DecodeErrorKind::NotAtVersion(ctx.version)
    };
    Err(DecodeError::new(kind).within(name))
}

// ---- writing fields ----

pub fn write_scalar<S: XmlScalar>(w: &mut XmlWriter, name: &str, value: &Option<S>, mode: Mode) {
    match value {
        Some(v) => w.value(name, S::TYPE_ATTR, |out| v.write_text(out)),
        None if mode == Mode::Response => w.nil(name, S::TYPE_ATTR),
        None => {}
    }
}

/// Like [`write_scalar`], with fixed attributes on the element of a value
/// (`<description lang="en-US">…</description>`).
pub fn write_scalar_with<S: XmlScalar>(
    w: &mut XmlWriter,
    name: &str,
    value: &Option<S>,
    mode: Mode,
    attributes: &[(&str, &str)],
) {
    match value {
        Some(v) => w.value_with(name, S::TYPE_ATTR, attributes, |out| v.write_text(out)),
        None if mode == Mode::Response => w.nil(name, S::TYPE_ATTR),
        None => {}
    }
}

pub fn write_enum<E: XmlEnum>(w: &mut XmlWriter, name: &str, value: &Option<E>, ctx: &WireContext, mode: Mode) {
    match value {
        Some(v) => w.text(name, v.wire_value(ctx)),
        None if mode == Mode::Response => w.nil(name, None),
        None => {}
    }
}

pub fn write_money(w: &mut XmlWriter, name: &str, value: &Option<Money>, mode: Mode) {
    match value {
        Some(money) => {
            w.open(name);
            w.open_end();
            for (currency, cents) in &money.0 {
                w.value(currency, Some("integer"), |out| cents.write_text(out));
            }
            w.close(name);
        }
        None if mode == Mode::Response => w.nil(name, None),
        None => {}
    }
}

/// Writes a whole resource element (start tag with `href` and attributes, children, end tag).
pub fn write_resource<T: XmlResource>(
    w: &mut XmlWriter,
    name: &str,
    value: &T,
    ctx: &WireContext,
    mode: Mode,
    type_attr: Option<&str>,
) {
    w.open(name);
    if mode == Mode::Response
        && let Some(path) = value.href_path()
    {
        w.attr_joined("href", ctx.base_url(), &path);
    }
    if let Some(t) = type_attr {
        w.attr("type", t);
    }
    value.write_attributes(w, ctx, mode);
    if T::HAS_TEXT {
        match value.text_value(ctx, mode) {
            Some(text) => w.text_end(name, text),
            None => {
                if mode == Mode::Response {
                    w.attr("nil", "nil");
                }
                w.text_end(name, "");
            }
        }
        return;
    }
    w.open_end();
    value.write_children(w, ctx, mode);
    w.close(name);
}

/// Writes a list whose items are direct children of the resource (no wrapper element).
pub fn write_inline_list<T: XmlResource>(
    w: &mut XmlWriter,
    item: &str,
    value: &Option<Vec<T>>,
    ctx: &WireContext,
    mode: Mode,
) {
    for v in value.iter().flatten().filter(|v| !v.is_blank(ctx, mode)) {
        write_resource(w, item, v, ctx, mode, None);
    }
}

pub fn write_nested<T: XmlResource>(
    w: &mut XmlWriter,
    name: &str,
    value: &Option<Box<T>>,
    ctx: &WireContext,
    mode: Mode,
    typed: bool,
) {
    let type_attr = typed.then_some(T::ROOT);
    match value {
        Some(v) => write_resource(w, name, &**v, ctx, mode, type_attr),
        None if mode == Mode::Response => w.nil(name, type_attr),
        None => {}
    }
}

pub fn write_list<T: XmlResource>(
    w: &mut XmlWriter,
    name: &str,
    item: &str,
    value: &Option<Vec<T>>,
    ctx: &WireContext,
    mode: Mode,
) {
    if let Some(items) = value {
        w.open(name);
        w.attr("type", "array");
        w.open_end();
        // A blank text item would read back as nothing: leave it out.
        for v in items.iter().filter(|v| !v.is_blank(ctx, mode)) {
            write_resource(w, item, v, ctx, mode, None);
        }
        w.close_list(name);
    }
}

pub fn write_values<S: XmlScalar>(w: &mut XmlWriter, name: &str, item: &str, value: &Option<Vec<S>>) {
    if let Some(items) = value {
        w.open(name);
        w.attr("type", "array");
        w.open_end();
        for v in items {
            w.value(item, S::TYPE_ATTR, |out| v.write_text(out));
        }
        w.close_list(name);
    }
}

pub fn write_link(w: &mut XmlWriter, name: &str, value: &Option<Href>, ctx: &WireContext) {
    if let Some(href) = value {
        let (base, rest) = href.parts(ctx);
        w.link(name, base, rest);
    }
}

pub fn write_anchor(w: &mut XmlWriter, anchor: &str, method: &str, value: &Option<Href>, ctx: &WireContext) {
    if let Some(href) = value {
        let (base, rest) = href.parts(ctx);
        w.anchor(anchor, base, rest, method);
    }
}

// ---- reading fields ----

/// A `nil` element: refused for required fields in requests, otherwise an absent value.
fn nil_value<'a>(r: &mut XmlReader<'a>, tag: &Tag<'a>, required: bool) -> Result<(), DecodeError> {
    nil_allowed(r, required)?;
    r.skip(tag)
}

/// Whether a value may be nil: not for a required field in a request.
fn nil_allowed(r: &XmlReader<'_>, required: bool) -> Result<(), DecodeError> {
    if required && r.mode() == Mode::Request {
        return Err(DecodeErrorKind::NilNotAllowed.into());
    }
    Ok(())
}

/// The empty-element rule of requests: an element of a typed value (anything but free text:
/// integers, amounts, floats, booleans, dates, times, enum values) with no text, or only
/// whitespace, is nil, exactly as if it carried `nil="nil"`. Clients send an unset value that way
/// (`<max_redemptions></max_redemptions>`, `<redeem_by_date/>`). A string keeps its empty text:
/// there the empty string is a value of its own. Responses are read as written (the writer never
/// writes an empty typed element; a nil one carries `nil`).
fn empty_is_nil(r: &XmlReader<'_>, text: &str) -> bool {
    r.mode() == Mode::Request && text.trim_matches([' ', '\t', '\r', '\n']).is_empty()
}

pub fn read_scalar<'a, S: XmlScalar>(
    r: &mut XmlReader<'a>,
    tag: Tag<'a>,
    required: bool,
) -> Result<Option<S>, DecodeError> {
    if tag.is_nil() {
        nil_value(r, &tag, required)?;
        return Ok(None);
    }
    let text = r.text(&tag)?;
    if S::TYPE_ATTR.is_some() && empty_is_nil(r, &text) {
        nil_allowed(r, required)?;
        return Ok(None);
    }
    // Only a failed parse needs the text again; strings take it over without a copy.
    let kept = if S::TYPE_ATTR.is_some() { Some(text.clone()) } else { None };
    match S::from_text(text) {
        Some(v) => Ok(Some(v)),
        None => Err(DecodeErrorKind::InvalidValue {
            value: kept.map(Cow::into_owned).unwrap_or_default(),
            expected: S::EXPECTED.to_owned(),
        }
        .into()),
    }
}

pub fn read_enum<'a, E: XmlEnum>(
    r: &mut XmlReader<'a>,
    tag: Tag<'a>,
    ctx: &WireContext,
    required: bool,
) -> Result<Option<E>, DecodeError> {
    if tag.is_nil() {
        nil_value(r, &tag, required)?;
        return Ok(None);
    }
    let text = r.text(&tag)?;
    if empty_is_nil(r, &text) {
        nil_allowed(r, required)?;
        return Ok(None);
    }
    parse_enum(&text, ctx, r.mode()).map(Some)
}

/// Parses an enum spelling: unknown values are an error in requests and kept in responses.
pub fn parse_enum<E: XmlEnum>(text: &str, ctx: &WireContext, mode: Mode) -> Result<E, DecodeError> {
    if let Some(v) = E::from_wire(text.trim(), ctx) {
        return Ok(v);
    }
    match mode {
        Mode::Response => Ok(E::unknown(text.to_owned())),
        Mode::Request => Err(DecodeErrorKind::InvalidValue {
            value: text.to_owned(),
            expected: format!("a valid {} (one of: {})", E::NAME, E::wire_values(ctx).join(", ")),
        }
        .into()),
    }
}

pub fn read_money<'a>(r: &mut XmlReader<'a>, tag: Tag<'a>, required: bool) -> Result<Option<Money>, DecodeError> {
    if tag.is_nil() {
        nil_value(r, &tag, required)?;
        return Ok(None);
    }
    let mut money = Money::default();
    while let Some(child) = r.next_child(&tag)? {
        let currency = child.name().to_owned();
        if !Money::is_currency_code(&currency) {
            if r.mode() == Mode::Response {
                r.skip(&child)?;
                continue;
            }
            return Err(DecodeError::new(DecodeErrorKind::UnknownElement).within(&currency));
        }
        let cents = read_scalar::<i64>(r, child, true).map_err(|e| e.within(&currency))?;
        if let Some(cents) = cents {
            match money.0.iter_mut().find(|(c, _)| *c == currency) {
                Some(slot) => slot.1 = cents,
                None => money.0.push((currency, cents)),
            }
        }
    }
    Ok(Some(money))
}

/// Reads a resource element (its `tag` already read) into `value`, which must be
/// `T::default()`: attributes, then children. Returns `false` for a `nil` element (refused for
/// required fields in requests). Decoding in place keeps large structs from being moved around.
fn read_resource_into<'a, T: XmlResource>(
    r: &mut XmlReader<'a>,
    tag: Tag<'a>,
    ctx: &WireContext,
    required: bool,
    value: &mut T,
) -> Result<bool, DecodeError> {
    let mode = r.mode();
    let nil = tag.for_each_attribute(|key, attr| value.read_attribute(key, attr, ctx, mode))?;
    if T::HAS_TEXT {
        // `nil` on a text resource nulls the text only; its attributes stay. With no attributes
        // either, there is no value at all.
        if nil {
            r.skip(&tag)?;
            return Ok(!value.is_blank(ctx, mode));
        } else {
            let text = r.text(&tag)?.into_owned();
            value.read_text(text, ctx, mode)?;
        }
        return Ok(true);
    }
    if nil {
        nil_value(r, &tag, required)?;
        return Ok(false);
    }
    while let Some(child) = r.next_child(&tag)? {
        value.read_child(r, child, ctx)?;
    }
    Ok(true)
}

/// Reads a resource element (its `tag` already read): attributes, then children.
/// A `nil` element gives `None`.
pub fn read_resource<'a, T: XmlResource>(
    r: &mut XmlReader<'a>,
    tag: Tag<'a>,
    ctx: &WireContext,
) -> Result<Option<T>, DecodeError> {
    let mut value = T::default();
    Ok(read_resource_into(r, tag, ctx, false, &mut value)?.then_some(value))
}

pub fn read_nested<'a, T: XmlResource>(
    r: &mut XmlReader<'a>,
    tag: Tag<'a>,
    ctx: &WireContext,
    required: bool,
) -> Result<Option<Box<T>>, DecodeError> {
    let mut value = Box::<T>::default();
    Ok(read_resource_into(r, tag, ctx, required, &mut *value)?.then_some(value))
}

pub fn read_list<'a, T: XmlResource>(
    r: &mut XmlReader<'a>,
    tag: Tag<'a>,
    item: &str,
    ctx: &WireContext,
) -> Result<Option<Vec<T>>, DecodeError> {
    if tag.is_nil() {
        r.skip(&tag)?;
        return Ok(None);
    }
    let mut items = Vec::new();
    while let Some(child) = r.next_child(&tag)? {
        if child.name() != item {
            if r.mode() == Mode::Response {
                r.skip(&child)?;
                continue;
            }
            return Err(DecodeError::new(DecodeErrorKind::UnknownElement).within(child.name()));
        }
        let index = items.len();
        items.push(T::default());
        let slot = items.last_mut().expect("just pushed");
        if !read_resource_into(r, child, ctx, false, slot).map_err(|e| e.at_index(index))? {
            items.pop();
        }
    }
    Ok(Some(items))
}

/// Reads one item of an inline list (a repeated direct child) and appends it; a `nil` item
/// adds nothing.
pub fn read_inline_item<'a, T: XmlResource>(
    r: &mut XmlReader<'a>,
    tag: Tag<'a>,
    ctx: &WireContext,
    items: &mut Option<Vec<T>>,
) -> Result<(), DecodeError> {
    let index = items.as_ref().map_or(0, Vec::len);
    let mut value = T::default();
    if read_resource_into(r, tag, ctx, false, &mut value).map_err(|e| e.at_index(index))? {
        items.get_or_insert_with(Vec::new).push(value);
    }
    Ok(())
}

pub fn read_values<'a, S: XmlScalar>(
    r: &mut XmlReader<'a>,
    tag: Tag<'a>,
    item: &str,
) -> Result<Option<Vec<S>>, DecodeError> {
    if tag.is_nil() {
        r.skip(&tag)?;
        return Ok(None);
    }
    let mut items = Vec::new();
    while let Some(child) = r.next_child(&tag)? {
        if child.name() != item {
            if r.mode() == Mode::Response {
                r.skip(&child)?;
                continue;
            }
            return Err(DecodeError::new(DecodeErrorKind::UnknownElement).within(child.name()));
        }
        let index = items.len();
        if let Some(v) = read_scalar::<S>(r, child, true).map_err(|e| e.at_index(index))? {
            items.push(v);
        }
    }
    Ok(Some(items))
}

pub fn read_link<'a>(r: &mut XmlReader<'a>, tag: Tag<'a>, ctx: &WireContext) -> Result<Option<Href>, DecodeError> {
    let href = tag.with_attribute("href", |h| Href::from_wire(h, ctx))?;
    r.skip(&tag)?;
    Ok(href)
}

// ---- documents ----

/// Writes one resource as a whole document.
pub fn to_xml<T: XmlResource>(value: &T, ctx: &WireContext, mode: Mode) -> String {
    let mut w = XmlWriter::new();
    w.declaration();
    write_resource(&mut w, T::ROOT, value, ctx, mode, None);
    w.finish()
}

/// Writes a list document (`<invoices type="array">…`).
///
/// # Panics
/// If the resource has no list name (a schema property checked by the generator).
pub fn list_to_xml<T: XmlResource>(items: &[T], ctx: &WireContext, mode: Mode) -> String {
    list_to_xml_in(T::PLURAL.unwrap_or(T::ROOT), items, ctx, mode)
}

/// Writes a list document under the root element `plural` (a list whose root is not its
/// resource's plural, such as `<unique_coupon_codes type="array">` of `<coupon>` items).
pub fn list_to_xml_in<T: XmlResource>(plural: &str, items: &[T], ctx: &WireContext, mode: Mode) -> String {
    let mut w = XmlWriter::with_capacity(items.len() * 2048 + 128);
    w.declaration();
    w.open(plural);
    w.attr("type", "array");
    w.open_end();
    for item in items {
        write_resource(&mut w, T::ROOT, item, ctx, mode, None);
    }
    w.close_list(plural);
    w.finish()
}

fn root_tag<'a>(r: &mut XmlReader<'a>, expected: &str) -> Result<Tag<'a>, DecodeError> {
    let tag = r.root()?;
    if tag.name() != expected {
        return Err(
            DecodeErrorKind::UnexpectedRoot { expected: expected.to_owned(), found: tag.name().to_owned() }.into()
        );
    }
    Ok(tag)
}

/// Reads one resource document.
pub fn from_xml<T: XmlResource>(input: &[u8], ctx: &WireContext, mode: Mode) -> Result<T, DecodeError> {
    let mut r = XmlReader::new(input, mode)?;
    let tag = root_tag(&mut r, T::ROOT)?;
    let value = read_resource::<T>(&mut r, tag, ctx).map_err(|e| e.within(T::ROOT))?.unwrap_or_default();
    r.finish()?;
    Ok(value)
}

/// Reads a list document.
pub fn list_from_xml<T: XmlResource>(input: &[u8], ctx: &WireContext, mode: Mode) -> Result<Vec<T>, DecodeError> {
    list_from_xml_in(T::PLURAL.unwrap_or(T::ROOT), input, ctx, mode)
}

/// Reads a list document whose root element is `plural` (see [`list_to_xml_in`]).
pub fn list_from_xml_in<T: XmlResource>(
    plural: &str,
    input: &[u8],
    ctx: &WireContext,
    mode: Mode,
) -> Result<Vec<T>, DecodeError> {
    let mut r = XmlReader::new(input, mode)?;
    let tag = root_tag(&mut r, plural)?;
    let items = read_list::<T>(&mut r, tag, T::ROOT, ctx).map_err(|e| e.within(plural))?.unwrap_or_default();
    r.finish()?;
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads the document's root element as one scalar value.
    fn scalar<S: XmlScalar>(xml: &str, mode: Mode, required: bool) -> Result<Option<S>, DecodeError> {
        let mut r = XmlReader::new(xml.as_bytes(), mode)?;
        let tag = r.root()?;
        let value = read_scalar::<S>(&mut r, tag, required)?;
        r.finish()?;
        Ok(value)
    }

    const EMPTY_FORMS: [&str; 4] = ["<x></x>", "<x/>", "<x type=\"integer\"></x>", "<x>\n  </x>"];

    #[test]
    fn an_empty_typed_element_of_a_request_is_nil() {
        for xml in EMPTY_FORMS {
            assert_eq!(scalar::<i64>(xml, Mode::Request, false), Ok(None), "{xml}");
            assert_eq!(scalar::<bool>(xml, Mode::Request, false), Ok(None), "{xml}");
            assert_eq!(scalar::<f64>(xml, Mode::Request, false), Ok(None), "{xml}");
            assert_eq!(scalar::<DateTime<Utc>>(xml, Mode::Request, false), Ok(None), "{xml}");
            assert_eq!(scalar::<NaiveDate>(xml, Mode::Request, false), Ok(None), "{xml}");
        }
        // The same as `nil="nil"`.
        assert_eq!(scalar::<i64>("<x nil=\"nil\"/>", Mode::Request, false), Ok(None));
        // Values are read as before.
        assert_eq!(scalar::<i64>("<x> 5 </x>", Mode::Request, false), Ok(Some(5)));
        assert_eq!(scalar::<bool>("<x>true</x>", Mode::Request, false), Ok(Some(true)));
    }

    #[test]
    fn an_empty_string_stays_an_empty_string() {
        for xml in ["<x></x>", "<x/>"] {
            assert_eq!(scalar::<String>(xml, Mode::Request, true), Ok(Some(String::new())), "{xml}");
            assert_eq!(scalar::<String>(xml, Mode::Response, false), Ok(Some(String::new())), "{xml}");
        }
        assert_eq!(scalar::<String>("<x> </x>", Mode::Request, false), Ok(Some(" ".to_owned())));
    }

    #[test]
    fn an_empty_typed_element_of_a_required_field_is_refused_as_nil_is() {
        for xml in EMPTY_FORMS.into_iter().chain(["<x nil=\"nil\"/>"]) {
            let err = scalar::<i64>(xml, Mode::Request, true).expect_err(xml);
            assert_eq!(err.kind(), &DecodeErrorKind::NilNotAllowed, "{xml}");
        }
        // An empty amount of a currency is a required value left out.
        let mut r = XmlReader::new(b"<x><USD></USD></x>", Mode::Request).expect("reader");
        let tag = r.root().expect("root");
        let err = read_money(&mut r, tag, false).expect_err("empty amount");
        assert_eq!((err.kind(), err.path().as_str()), (&DecodeErrorKind::NilNotAllowed, "USD"));
    }

    #[test]
    fn text_that_is_not_empty_is_still_checked() {
        let err = scalar::<i64>("<x>ten</x>", Mode::Request, false).expect_err("not a number");
        assert!(matches!(err.kind(), DecodeErrorKind::InvalidValue { .. }), "{err:?}");
        let err = scalar::<bool>("<x>yes</x>", Mode::Request, false).expect_err("not a boolean");
        assert!(matches!(err.kind(), DecodeErrorKind::InvalidValue { .. }), "{err:?}");
    }

    #[test]
    fn responses_are_read_as_written() {
        // The writer never writes an empty typed element, so a response that has one is not
        // taken for nil: it stays the decoding error it always was.
        assert!(scalar::<i64>("<x></x>", Mode::Response, false).is_err());
    }
}

//! A scoped pull reader over quick-xml for the v2 dialect.
//!
//! The reader never expands entities: DOCTYPE declarations are refused, and only the five
//! predefined entities and numeric character references are decoded. Each [`Tag`] handed out
//! must be consumed by exactly one of [`XmlReader::text`], [`XmlReader::skip`] or a loop over
//! [`XmlReader::next_child`] that runs until it returns `None`.

use std::borrow::Cow;

use quick_xml::Reader;
use quick_xml::events::{BytesRef, BytesStart, Event};

use crate::context::Mode;
use crate::error::{DecodeError, DecodeErrorKind};

/// Deepest element nesting the decoders accept (the schema's real depth is far smaller).
pub const MAX_DEPTH: usize = 32;

/// A start tag (or a self-closing tag) read from the document.
#[derive(Debug)]
pub struct Tag<'a> {
    start: BytesStart<'a>,
    empty: bool,
}

impl<'a> Tag<'a> {
    /// The element name as written (with any prefix).
    pub fn name(&self) -> &str {
        self.start.name().0
    }

    /// Whether the tag was self-closing (`<x/>`).
    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// The element carries a `nil` attribute (any value, any prefix): an explicit null.
    pub fn is_nil(&self) -> bool {
        self.start.attributes().flatten().any(|a| {
            let key = a.key.0;
            key == "nil" || key.ends_with(":nil")
        })
    }

    /// The unescaped value of one attribute, if present.
    pub fn attribute(&self, key: &str) -> Result<Option<Cow<'_, str>>, DecodeError> {
        for attr in self.start.attributes() {
            let attr = attr.map_err(|e| malformed(0, &e.to_string()))?;
            if attr.key.0 == key {
                return unescape_attr(&attr).map(Some);
            }
        }
        Ok(None)
    }

    /// Every attribute as (name, unescaped value).
    pub fn attributes(&self) -> Result<Vec<(&str, Cow<'_, str>)>, DecodeError> {
        let mut out = Vec::new();
        for attr in self.start.attributes() {
            let attr = attr.map_err(|e| malformed(0, &e.to_string()))?;
            let value = unescape_attr(&attr)?;
            out.push((attr.key.0, value));
        }
        Ok(out)
    }
}

/// Attribute-value normalisation (XML 1.0 §3.3.3): literal tabs and line breaks become spaces,
/// then the predefined entities and character references are decoded. Other entities are refused.
fn unescape_attr<'x>(attr: &quick_xml::events::attributes::Attribute<'x>) -> Result<Cow<'x, str>, DecodeError> {
    let raw = &attr.value;
    if !raw.bytes().any(|b| matches!(b, b'&' | b'\t' | b'\n' | b'\r')) {
        return Ok(raw.clone());
    }
    let mut out = String::with_capacity(raw.len());
    let mut rest: &str = raw;
    while let Some(i) = rest.find(['&', '\t', '\n', '\r']) {
        out.push_str(&rest[..i]);
        if rest.as_bytes()[i] == b'&' {
            let end =
                rest[i..].find(';').ok_or_else(|| malformed(0, "unterminated reference in an attribute value"))? + i;
            out.push(resolve_name(&rest[i + 1..end])?);
            rest = &rest[end + 1..];
        } else {
            // `\r\n` counts as one line break.
            out.push(' ');
            let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
            rest = &rest[i + skip..];
        }
    }
    out.push_str(rest);
    Ok(Cow::Owned(out))
}

fn malformed(position: u64, message: &str) -> DecodeError {
    DecodeErrorKind::Malformed { position, message: message.to_owned() }.into()
}

/// Pull reader over one in-memory document.
pub struct XmlReader<'a> {
    inner: Reader<&'a [u8]>,
    mode: Mode,
    depth: usize,
}

impl<'a> XmlReader<'a> {
    /// Starts reading `input`, which must be UTF-8.
    pub fn new(input: &'a [u8], mode: Mode) -> Result<Self, DecodeError> {
        let text = std::str::from_utf8(input)
            .map_err(|e| DecodeError::new(DecodeErrorKind::InvalidUtf8 { position: e.valid_up_to() as u64 }))?;
        let mut inner = Reader::from_str(text);
        let config = inner.config_mut();
        config.trim_text(false);
        config.check_end_names = true;
        config.expand_empty_elements = false;
        config.allow_dangling_amp = false;
        Ok(Self { inner, mode, depth: 0 })
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    fn read(&mut self) -> Result<Event<'a>, DecodeError> {
        self.inner.read_event().map_err(|e| {
            let position = self.inner.error_position();
            match e {
                quick_xml::Error::Escape(quick_xml::escape::EscapeError::UnrecognizedEntity(_, name)) => {
                    DecodeErrorKind::UnknownEntity(name).into()
                }
                other => malformed(position, &other.to_string()),
            }
        })
    }

    fn unclosed(&self) -> DecodeError {
        malformed(self.inner.buffer_position(), "unexpected end of document: an element is not closed")
    }

    fn enter(&mut self) -> Result<(), DecodeError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(DecodeErrorKind::TooDeep(MAX_DEPTH).into());
        }
        Ok(())
    }

    /// Reads up to the root element, skipping the XML declaration, comments and whitespace.
    pub fn root(&mut self) -> Result<Tag<'a>, DecodeError> {
        loop {
            match self.read()? {
                Event::Decl(_) | Event::Comment(_) | Event::PI(_) => {}
                Event::Text(t) if is_blank(&t) => {}
                Event::DocType(_) => return Err(DecodeErrorKind::Doctype.into()),
                Event::Start(start) => {
                    self.enter()?;
                    return Ok(Tag { start, empty: false });
                }
                Event::Empty(start) => return Ok(Tag { start, empty: true }),
                Event::Eof => return Err(DecodeErrorKind::NoRoot.into()),
                Event::End(_) => {
                    return Err(malformed(self.inner.buffer_position(), "end tag without start tag"));
                }
                Event::Text(_) | Event::CData(_) | Event::GeneralRef(_) => {
                    return Err(malformed(self.inner.buffer_position(), "text outside the root element"));
                }
            }
        }
    }

    /// Checks that nothing but comments and whitespace follows the root element.
    pub fn finish(&mut self) -> Result<(), DecodeError> {
        loop {
            match self.read()? {
                Event::Eof => return Ok(()),
                Event::Comment(_) | Event::PI(_) => {}
                Event::Text(t) if is_blank(&t) => {}
                Event::DocType(_) => return Err(DecodeErrorKind::Doctype.into()),
                _ => return Err(DecodeErrorKind::TrailingContent.into()),
            }
        }
    }

    /// The next child element of `parent`, or `None` once `parent` is closed. Whitespace and
    /// comments between children are skipped; other text is an error in request mode.
    pub fn next_child(&mut self, parent: &Tag<'a>) -> Result<Option<Tag<'a>>, DecodeError> {
        if parent.empty {
            return Ok(None);
        }
        loop {
            match self.read()? {
                Event::Start(start) => {
                    self.enter()?;
                    return Ok(Some(Tag { start, empty: false }));
                }
                Event::Empty(start) => return Ok(Some(Tag { start, empty: true })),
                Event::End(_) => {
                    self.depth -= 1;
                    return Ok(None);
                }
                Event::Text(t) => {
                    if self.mode == Mode::Request && !is_blank(&t) {
                        return Err(DecodeErrorKind::UnexpectedText.into());
                    }
                }
                Event::CData(_) | Event::GeneralRef(_) => {
                    if self.mode == Mode::Request {
                        return Err(DecodeErrorKind::UnexpectedText.into());
                    }
                }
                Event::Comment(_) | Event::PI(_) | Event::Decl(_) => {}
                Event::DocType(_) => return Err(DecodeErrorKind::Doctype.into()),
                Event::Eof => return Err(self.unclosed()),
            }
        }
    }

    /// The text content of a value element, with entities and character references decoded.
    pub fn text(&mut self, tag: &Tag<'a>) -> Result<Cow<'a, str>, DecodeError> {
        if tag.empty {
            return Ok(Cow::Borrowed(""));
        }
        let mut text: Option<Cow<'a, str>> = None;
        loop {
            match self.read()? {
                Event::Text(t) => append(&mut text, t.xml10_content()),
                Event::CData(c) => append(&mut text, c.xml10_content()),
                Event::GeneralRef(r) => {
                    let ch = resolve_reference(&r)?;
                    let mut buf = [0u8; 4];
                    append(&mut text, Cow::Owned(ch.encode_utf8(&mut buf).to_owned()));
                }
                Event::End(_) => {
                    self.depth -= 1;
                    return Ok(text.unwrap_or(Cow::Borrowed("")));
                }
                Event::Start(s) | Event::Empty(s) => {
                    return Err(DecodeErrorKind::UnexpectedChild(s.name().0.to_owned()).into());
                }
                Event::Comment(_) | Event::PI(_) | Event::Decl(_) => {}
                Event::DocType(_) => return Err(DecodeErrorKind::Doctype.into()),
                Event::Eof => return Err(self.unclosed()),
            }
        }
    }

    /// Skips an element and everything inside it.
    pub fn skip(&mut self, tag: &Tag<'a>) -> Result<(), DecodeError> {
        if tag.empty {
            return Ok(());
        }
        self.inner.read_to_end(tag.start.name()).map_err(|e| {
            let position = self.inner.error_position();
            malformed(position, &e.to_string())
        })?;
        self.depth -= 1;
        Ok(())
    }
}

fn is_blank(text: &str) -> bool {
    text.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

fn append<'a>(text: &mut Option<Cow<'a, str>>, more: Cow<'a, str>) {
    match text {
        None => *text = Some(more),
        Some(existing) => existing.to_mut().push_str(&more),
    }
}

fn resolve_reference(r: &BytesRef<'_>) -> Result<char, DecodeError> {
    resolve_name(r)
}

/// The character a reference (`amp`, `#x41`, `#65`) stands for.
fn resolve_name(name: &str) -> Result<char, DecodeError> {
    if let Some(number) = name.strip_prefix('#') {
        let code = match number.strip_prefix('x') {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => number.parse::<u32>().ok(),
        };
        return code
            .filter(|c| *c != 0 && !number.starts_with(['+', '-']) && !number.starts_with("x+"))
            .and_then(char::from_u32)
            .ok_or_else(|| DecodeErrorKind::InvalidCharRef(name.to_owned()).into());
    }
    match name {
        "amp" => Ok('&'),
        "lt" => Ok('<'),
        "gt" => Ok('>'),
        "quot" => Ok('"'),
        "apos" => Ok('\''),
        other => Err(DecodeErrorKind::UnknownEntity(other.to_owned()).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root_text(doc: &str) -> Result<String, DecodeError> {
        let mut r = XmlReader::new(doc.as_bytes(), Mode::Request)?;
        let root = r.root()?;
        let text = r.text(&root)?.into_owned();
        r.finish()?;
        Ok(text)
    }

    #[test]
    fn decodes_entities_and_char_refs() {
        assert_eq!(root_text("<a>x &amp; y &lt;&#x41;&#66;&gt;</a>").as_deref(), Ok("x & y <AB>"));
        assert_eq!(root_text("<a><![CDATA[<raw>]]></a>").as_deref(), Ok("<raw>"));
        assert_eq!(root_text("<a/>").as_deref(), Ok(""));
    }

    #[test]
    fn refuses_unknown_entities_and_doctype() {
        let err = root_text("<a>&xxe;</a>").expect_err("unknown entity");
        assert_eq!(err.kind(), &DecodeErrorKind::UnknownEntity("xxe".into()));
        let err = root_text("<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>").expect_err("doctype");
        assert_eq!(err.kind(), &DecodeErrorKind::Doctype);
    }

    #[test]
    fn reports_unclosed_and_trailing_content() {
        assert!(matches!(root_text("<a>x").expect_err("unclosed").kind(), DecodeErrorKind::Malformed { .. }));
        assert_eq!(root_text("<a>x</a><b/>").expect_err("trailing").kind(), &DecodeErrorKind::TrailingContent);
        assert_eq!(root_text("  ").expect_err("empty").kind(), &DecodeErrorKind::NoRoot);
    }

    #[test]
    fn refuses_invalid_utf8() {
        let err = XmlReader::new(b"<a>\xff</a>", Mode::Request).err().expect("invalid utf-8");
        assert_eq!(err.kind(), &DecodeErrorKind::InvalidUtf8 { position: 3 });
    }

    #[test]
    fn limits_depth() {
        let doc = format!("{}{}", "<a>".repeat(MAX_DEPTH + 5), "</a>".repeat(MAX_DEPTH + 5));
        let mut r = XmlReader::new(doc.as_bytes(), Mode::Response).expect("utf-8");
        let mut tags = vec![r.root().expect("root")];
        let err = loop {
            let parent = tags.last().expect("a parent");
            match r.next_child(parent) {
                Ok(Some(tag)) => tags.push(tag),
                Ok(None) => panic!("document ended early"),
                Err(e) => break e,
            }
        };
        assert_eq!(err.kind(), &DecodeErrorKind::TooDeep(MAX_DEPTH));
    }
}

#[cfg(test)]
mod attribute_tests {
    use super::*;

    #[test]
    fn attribute_values_are_normalised_and_unescaped() {
        let doc = "<a k=\"x&amp;y&#13;&#x41;\tz\r\nw\"/>";
        let mut r = XmlReader::new(doc.as_bytes(), Mode::Request).expect("utf-8");
        let tag = r.root().expect("root");
        assert_eq!(tag.attribute("k").expect("valid").as_deref(), Some("x&y\rA z w"));
        let doc = "<a k=\"&bogus;\"/>";
        let mut r = XmlReader::new(doc.as_bytes(), Mode::Request).expect("utf-8");
        let tag = r.root().expect("root");
        assert_eq!(
            tag.attribute("k").expect_err("unknown entity").kind(),
            &DecodeErrorKind::UnknownEntity("bogus".into())
        );
    }
}

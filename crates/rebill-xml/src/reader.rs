//! A scoped pull reader over quick-xml for the v2 dialect.
//!
//! The reader never expands entities: DOCTYPE declarations are refused, and only the five
//! predefined entities and numeric character references are decoded. Characters XML 1.0 forbids
//! (raw or as references) are refused wherever they occur. Each [`Tag`] handed out
//! must be consumed by exactly one of [`XmlReader::text`], [`XmlReader::skip`] or a loop over
//! [`XmlReader::next_child`] that runs until it returns `None`.

use std::borrow::Cow;

use quick_xml::Reader;
use quick_xml::events::{BytesRef, BytesStart, Event};

use crate::context::Mode;
use crate::error::{DecodeError, DecodeErrorKind};

/// Deepest element nesting the decoders accept (the schema's real depth is far smaller).
pub const MAX_DEPTH: usize = 32;

/// Whether XML 1.0 allows `c` in a document (production \[2\] `Char`): tab, line feed, carriage
/// return and everything from U+0020 except the surrogates, U+FFFE and U+FFFF.
pub fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// The byte offset and value of the first character in `text` that XML 1.0 forbids (C0 controls
/// other than tab, line feed and carriage return; U+FFFE; U+FFFF). Surrogates cannot occur in a
/// `str`.
pub fn find_forbidden(text: &str) -> Option<(usize, char)> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            x if x < 0x20 && !matches!(x, b'\t' | b'\n' | b'\r') => return Some((i, char::from(x))),
            // U+FFFE and U+FFFF are EF BF BE and EF BF BF in UTF-8.
            0xEF if b.get(i + 1) == Some(&0xBF) && matches!(b.get(i + 2), Some(0xBE | 0xBF)) => {
                return Some((i, if b[i + 2] == 0xBE { '\u{FFFE}' } else { '\u{FFFF}' }));
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Refuses `text` when it holds a character XML forbids.
fn check_chars(text: &str) -> Result<(), DecodeError> {
    match find_forbidden(text) {
        Some((_, c)) => Err(DecodeErrorKind::ForbiddenChar(u32::from(c)).into()),
        None => Ok(()),
    }
}

/// A start tag (or a self-closing tag) read from the document.
#[derive(Debug)]
pub struct Tag<'a> {
    start: BytesStart<'a>,
    empty: bool,
    /// Check attributes for duplicates (requests). Responses skip the check, which costs an
    /// allocation per tag on large list pages.
    strict: bool,
    /// The document holds a character XML forbids somewhere: check each attribute value.
    suspect: bool,
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
        // Most elements have no attributes, or none mentioning `nil`: check the raw text first.
        let raw = self.start.attributes_raw().as_bytes();
        if !raw.windows(3).any(|w| w == b"nil") {
            return false;
        }
        let mut nil = false;
        let _ = self.visit_raw(|key, _| {
            nil |= is_nil_key(key);
            Ok(!nil)
        });
        nil
    }

    fn attrs(&self) -> quick_xml::events::attributes::Attributes<'_> {
        let mut attrs = self.start.attributes();
        attrs.with_checks(self.strict);
        attrs
    }

    /// Calls `visit` with each attribute's name and raw (still escaped) value until it returns
    /// `false`. Lenient (response) tags use a small scanner for the common well-formed shape;
    /// requests, and anything the scanner does not recognise, go through quick-xml's attribute
    /// parser, which reports malformed and duplicate attributes.
    fn visit_raw(&self, mut visit: impl FnMut(&str, &str) -> Result<bool, DecodeError>) -> Result<(), DecodeError> {
        if !self.strict {
            let mut outcome = Ok(());
            let scanned = scan_attributes(self.start.attributes_raw(), |key, value| match visit(key, value) {
                Ok(more) => more,
                Err(e) => {
                    outcome = Err(e);
                    false
                }
            });
            if scanned {
                return outcome;
            }
        }
        for attr in self.attrs() {
            let attr = attr.map_err(|e| malformed(0, &e.to_string()))?;
            if !visit(attr.key.0, &attr.value)? {
                break;
            }
        }
        Ok(())
    }

    /// The unescaped value of one attribute, if present.
    pub fn attribute(&self, key: &str) -> Result<Option<String>, DecodeError> {
        self.with_attribute(key, str::to_owned)
    }

    /// Applies `f` to the unescaped value of one attribute, if present (without copying it).
    pub fn with_attribute<R>(&self, key: &str, f: impl FnOnce(&str) -> R) -> Result<Option<R>, DecodeError> {
        let mut f = Some(f);
        let mut found = None;
        self.visit_raw(|k, raw| {
            if k != key {
                return Ok(true);
            }
            if let Some(f) = f.take() {
                found = Some(f(&self.attr_value(raw)?));
            }
            Ok(false)
        })?;
        Ok(found)
    }

    /// Calls `visit` with each attribute (name, unescaped value); returns whether one of them
    /// was `nil`. Stops at the first error.
    pub fn for_each_attribute(
        &self,
        mut visit: impl FnMut(&str, &str) -> Result<(), DecodeError>,
    ) -> Result<bool, DecodeError> {
        let mut nil = false;
        self.visit_raw(|key, raw| {
            if is_nil_key(key) {
                nil = true;
            } else {
                visit(key, &self.attr_value(raw)?)?;
            }
            Ok(true)
        })?;
        Ok(nil)
    }

    /// An attribute value unescaped, refused when it holds a character XML forbids.
    fn attr_value<'r>(&self, raw: &'r str) -> Result<Cow<'r, str>, DecodeError> {
        if self.suspect {
            check_chars(raw)?;
        }
        unescape_attr(raw)
    }
}

/// Splits well-formed attribute text (` a="1" b='2'`) into (name, raw value) pairs, calling
/// `visit` until it returns `false`. Returns `false` when the text has any other shape, so that
/// the caller can let quick-xml's parser report the error.
fn scan_attributes(raw: &str, mut visit: impl FnMut(&str, &str) -> bool) -> bool {
    let b = raw.as_bytes();
    let ws = |c: u8| matches!(c, b' ' | b'\t' | b'\r' | b'\n');
    let mut i = 0;
    loop {
        while i < b.len() && ws(b[i]) {
            i += 1;
        }
        if i == b.len() {
            return true;
        }
        let start = i;
        while i < b.len() && !ws(b[i]) && !matches!(b[i], b'=' | b'"' | b'\'' | b'<' | b'>') {
            i += 1;
        }
        let name = &raw[start..i];
        while i < b.len() && ws(b[i]) {
            i += 1;
        }
        if name.is_empty() || i == b.len() || b[i] != b'=' {
            return false;
        }
        i += 1;
        while i < b.len() && ws(b[i]) {
            i += 1;
        }
        if i == b.len() || !matches!(b[i], b'"' | b'\'') {
            return false;
        }
        let quote = b[i];
        i += 1;
        let Some(len) = memchr::memchr(quote, &b[i..]) else { return false };
        let value = &raw[i..i + len];
        if value.contains('<') {
            return false;
        }
        i += len + 1;
        if i < b.len() && !ws(b[i]) {
            return false;
        }
        if !visit(name, value) {
            return true;
        }
    }
}

fn is_nil_key(key: &str) -> bool {
    key == "nil" || key.ends_with(":nil")
}

/// Attribute-value normalisation (XML 1.0 §3.3.3): literal tabs and line breaks become spaces,
/// then the predefined entities and character references are decoded. Other entities are refused.
fn unescape_attr(raw: &str) -> Result<Cow<'_, str>, DecodeError> {
    let bytes = raw.as_bytes();
    if memchr::memchr3(b'&', b'\t', b'\n', bytes).is_none() && memchr::memchr(b'\r', bytes).is_none() {
        return Ok(Cow::Borrowed(raw));
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
    /// Where the first character XML forbids is, if the document has one. Text and attribute
    /// values are then checked one by one (so the error names the element); whatever is left
    /// (in a comment, a name, whitespace) is refused by [`finish`](Self::finish).
    forbidden: Option<(usize, char)>,
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
        Ok(Self { inner, mode, depth: 0, forbidden: find_forbidden(text) })
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

    fn tag(&self, start: BytesStart<'a>, empty: bool) -> Tag<'a> {
        Tag { start, empty, strict: self.mode == Mode::Request, suspect: self.forbidden.is_some() }
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
                    return Ok(self.tag(start, false));
                }
                Event::Empty(start) => return Ok(self.tag(start, true)),
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

    /// Checks that nothing but comments and whitespace follows the root element, and that the
    /// document holds no character XML forbids.
    pub fn finish(&mut self) -> Result<(), DecodeError> {
        if let Some((position, c)) = self.forbidden {
            return Err(malformed(position as u64, &format!("character U+{:04X} is not allowed in XML", u32::from(c))));
        }
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
                    return Ok(Some(self.tag(start, false)));
                }
                Event::Empty(start) => return Ok(Some(self.tag(start, true))),
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

    /// The text content of a value element, with entities and character references decoded;
    /// refused when it holds a character XML forbids (raw or as a reference).
    pub fn text(&mut self, tag: &Tag<'a>) -> Result<Cow<'a, str>, DecodeError> {
        let text = self.text_unchecked(tag)?;
        if self.forbidden.is_some() {
            check_chars(&text)?;
        }
        Ok(text)
    }

    fn text_unchecked(&mut self, tag: &Tag<'a>) -> Result<Cow<'a, str>, DecodeError> {
        if tag.empty {
            return Ok(Cow::Borrowed(""));
        }
        // The common shapes first: `<x></x>` and `<x>text</x>`.
        let first = match self.read()? {
            Event::End(_) => {
                self.depth -= 1;
                return Ok(Cow::Borrowed(""));
            }
            Event::Text(t) => {
                let content = t.into_inner();
                if content.contains('\r') { Cow::Owned(normalize_eols(&content)) } else { content }
            }
            other => return self.text_slow(None, other),
        };
        match self.read()? {
            Event::End(_) => {
                self.depth -= 1;
                Ok(first)
            }
            other => self.text_slow(Some(first), other),
        }
    }

    /// The general case of [`text`](Self::text): several text, CDATA and reference events.
    fn text_slow(&mut self, mut text: Option<Cow<'a, str>>, mut event: Event<'a>) -> Result<Cow<'a, str>, DecodeError> {
        loop {
            match event {
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
            event = self.read()?;
        }
    }

    /// Skips an element and everything inside it (iteratively, whatever the nesting).
    pub fn skip(&mut self, tag: &Tag<'a>) -> Result<(), DecodeError> {
        if tag.empty {
            return Ok(());
        }
        let mut open = 1usize;
        loop {
            match self.read()? {
                Event::Start(_) => open += 1,
                Event::End(_) => {
                    open -= 1;
                    if open == 0 {
                        self.depth -= 1;
                        return Ok(());
                    }
                }
                Event::DocType(_) => return Err(DecodeErrorKind::Doctype.into()),
                Event::Eof => return Err(self.unclosed()),
                _ => {}
            }
        }
    }
}

/// XML 1.0 end-of-line handling: `\r\n` and lone `\r` become `\n`.
fn normalize_eols(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
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
            .filter(|_| !number.starts_with(['+', '-']) && !number.starts_with("x+"))
            .and_then(char::from_u32)
            .filter(|c| is_xml_char(*c))
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
    fn refuses_characters_xml_forbids() {
        let forbidden: Vec<char> = (0u32..0x20)
            .filter(|c| ![9, 10, 13].contains(c))
            .chain([0xFFFE, 0xFFFF])
            .filter_map(char::from_u32)
            .collect();
        for c in forbidden {
            let code = u32::from(c);
            let raw = root_text(&format!("<a>x{c}y</a>")).expect_err("raw character");
            assert_eq!(raw.kind(), &DecodeErrorKind::ForbiddenChar(code), "U+{code:04X}");
            assert!(raw.is_syntax());
            for reference in [format!("&#{code};"), format!("&#x{code:x};"), format!("&#x{code:X};")] {
                let err = root_text(&format!("<a>x{reference}y</a>")).expect_err("reference");
                assert_eq!(err.kind(), &DecodeErrorKind::InvalidCharRef(reference[1..reference.len() - 1].to_owned()));
                assert!(err.is_syntax());
            }
            for mode in [Mode::Request, Mode::Response] {
                for attr in [format!("{c}"), format!("&#{code};")] {
                    let doc = format!("<a k=\"1{attr}\"/>");
                    let mut r = XmlReader::new(doc.as_bytes(), mode).expect("utf-8");
                    let tag = r.root().expect("root");
                    assert!(tag.attribute("k").expect_err("attribute").is_syntax(), "{mode:?} {doc:?}");
                }
                // Anywhere else (a comment, whitespace between elements): refused at the end.
                let doc = format!("<a><!-- {c} --></a>");
                let mut r = XmlReader::new(doc.as_bytes(), mode).expect("utf-8");
                let root = r.root().expect("root");
                assert!(r.next_child(&root).expect("no child").is_none());
                assert!(r.finish().expect_err("comment").is_syntax());
            }
        }
        // The allowed neighbours pass.
        assert_eq!(
            root_text("<a>\t&#9;&#10;&#13;&#xD7FF;&#xE000;&#xFFFD;&#x10000;&#x10FFFF;\u{FFFD}</a>").as_deref(),
            Ok("\t\t\n\r\u{D7FF}\u{E000}\u{FFFD}\u{10000}\u{10FFFF}\u{FFFD}")
        );
        for bad in ["&#xD800;", "&#x110000;", "&#0;", "&#x0;", "&#65536000000;"] {
            assert!(root_text(&format!("<a>{bad}</a>")).is_err(), "{bad}");
        }
    }

    #[test]
    fn finds_forbidden_characters() {
        assert_eq!(find_forbidden("abc\u{FFFD}é\t\r\n"), None);
        assert_eq!(find_forbidden("ab\u{0}"), Some((2, '\u{0}')));
        assert_eq!(find_forbidden("é\u{FFFF}"), Some((2, '\u{FFFF}')));
        assert_eq!(find_forbidden("\u{FFFE}"), Some((0, '\u{FFFE}')));
        assert!(!is_xml_char('\u{B}') && !is_xml_char('\u{FFFE}') && is_xml_char('\u{10FFFF}'));
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
        // The lenient scanner and quick-xml's parser agree.
        let mut r = XmlReader::new(doc.as_bytes(), Mode::Response).expect("utf-8");
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

#[cfg(test)]
mod scanner_tests {
    use super::*;

    fn scan(raw: &str) -> Option<Vec<(String, String)>> {
        let mut out = Vec::new();
        scan_attributes(raw, |k, v| {
            out.push((k.to_owned(), v.to_owned()));
            true
        })
        .then_some(out)
    }

    #[test]
    fn scans_the_common_shapes() {
        assert_eq!(scan(""), Some(vec![]));
        assert_eq!(
            scan(" href=\"https://x/a?b=1\" type = 'charge'"),
            Some(vec![("href".into(), "https://x/a?b=1".into()), ("type".into(), "charge".into())])
        );
    }

    #[test]
    fn leaves_odd_shapes_to_quick_xml() {
        for odd in [" k=1", " k=\"1\"j=\"2\"", " k", " =\"1\"", " k=\"<\"", " k=\"open"] {
            assert_eq!(scan(odd), None, "{odd}");
        }
    }

    #[test]
    fn malformed_attributes_are_errors_in_both_modes() {
        for mode in [Mode::Request, Mode::Response] {
            let mut r = XmlReader::new(b"<a k=1/>", mode).expect("utf-8");
            let tag = r.root().expect("root");
            assert!(tag.attribute("k").is_err(), "{mode:?}");
        }
    }
}

#[cfg(test)]
mod text_tests {
    use super::*;

    fn text(doc: &str) -> String {
        let mut r = XmlReader::new(doc.as_bytes(), Mode::Response).expect("utf-8");
        let root = r.root().expect("root");
        let t = r.text(&root).expect("text").into_owned();
        r.finish().expect("end");
        t
    }

    #[test]
    fn line_ends_are_normalised_and_mixed_content_joined() {
        assert_eq!(text("<a>x\r\ny\rz</a>"), "x\ny\nz");
        assert_eq!(text("<a>x&#13;y</a>"), "x\ry");
        assert_eq!(text("<a>a<!-- c -->b&amp;<![CDATA[<c>]]></a>"), "ab&<c>");
        assert_eq!(text("<a></a>"), "");
    }
}

//! An indenting XML writer for the v2 dialect (2 spaces, one element per line).

/// Appends `text` escaped for element content.
pub fn escape_text(out: &mut String, text: &str) {
    escape(out, text, false);
}

/// Appends `text` escaped for a double-quoted attribute value.
pub fn escape_attr(out: &mut String, text: &str) {
    escape(out, text, true);
}

/// What the writer puts in place of a character XML 1.0 forbids (U+FFFD REPLACEMENT CHARACTER).
pub const REPLACEMENT: char = '\u{FFFD}';

/// Eight copies of a byte, one in each byte of a word.
const fn splat(b: u8) -> u64 {
    u64::from_ne_bytes([b; 8])
}

/// Whether a word of eight bytes of text may hold one that [`escape`] changes: a byte below
/// 0x20 (controls, tab and line breaks), one of `&`, `<`, `>` (and `"` in an attribute), or a
/// byte of a non-ASCII character (0xEF starts U+FFFE and U+FFFF). A word without any of them
/// is copied as it is; one with one is looked at byte by byte. (Bit tricks on a word: a byte
/// below `n` borrows in `x - n`, and a byte equal to `b` is a zero byte of `x ^ b`.)
#[inline]
fn may_change(word: u64, attr: bool) -> bool {
    const LOW: u64 = splat(0x01);
    const HIGH: u64 = splat(0x80);
    let zero_in = |v: u64| v.wrapping_sub(LOW) & !v & HIGH;
    let below_space = word.wrapping_sub(splat(0x20)) & !word & HIGH;
    let special = zero_in(word ^ splat(b'&')) | zero_in(word ^ splat(b'<')) | zero_in(word ^ splat(b'>'));
    let quote = if attr { zero_in(word ^ splat(b'"')) } else { 0 };
    (below_space | special | quote | (word & HIGH)) != 0
}

/// Escapes `text` into `out`. Characters XML forbids (C0 controls other than tab and line
/// breaks, U+FFFE, U+FFFF) are written as [`REPLACEMENT`], so no document the writer produces is
/// ill-formed, whatever a value holds.
#[inline]
fn escape(out: &mut String, text: &str, attr: bool) {
    let bytes = text.as_bytes();
    let mut last = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Eight bytes at a time past those that pass unchanged.
        if let Some(word) = bytes.get(i..i + 8)
            && let Ok(word) = <[u8; 8]>::try_from(word)
            && !may_change(u64::from_ne_bytes(word), attr)
        {
            i += 8;
            continue;
        }
        let b = bytes[i];
        let (replacement, len): (&str, usize) = match b {
            b'&' => ("&amp;", 1),
            b'<' => ("&lt;", 1),
            b'>' => ("&gt;", 1),
            b'"' if attr => ("&quot;", 1),
            b'\n' if attr => ("&#10;", 1),
            b'\t' if attr => ("&#9;", 1),
            b'\r' => ("&#13;", 1),
            b'\n' | b'\t' => {
                i += 1;
                continue;
            }
            0..=0x1f => ("\u{FFFD}", 1),
            // U+FFFE and U+FFFF (EF BF BE, EF BF BF).
            0xEF if bytes.get(i + 1) == Some(&0xBF) && matches!(bytes.get(i + 2), Some(0xBE | 0xBF)) => ("\u{FFFD}", 3),
            _ => {
                i += 1;
                continue;
            }
        };
        out.push_str(&text[last..i]);
        out.push_str(replacement);
        i += len;
        last = i;
    }
    out.push_str(&text[last..]);
}

/// Builds one document.
#[derive(Debug, Default)]
pub struct XmlWriter {
    out: String,
    depth: usize,
    /// The last thing written was a start tag (so a close tag goes on the same line).
    just_opened: bool,
}

impl XmlWriter {
    pub fn new() -> Self {
        Self::with_capacity(1024)
    }

    pub fn with_capacity(bytes: usize) -> Self {
        Self { out: String::with_capacity(bytes), depth: 0, just_opened: false }
    }

    /// Writes the XML declaration; call first.
    pub fn declaration(&mut self) {
        self.out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
    }

    #[inline]
    fn line(&mut self) {
        const SPACES: &str = "                                                                ";
        if !self.out.is_empty() {
            self.out.push('\n');
            let mut indent = self.depth * 2;
            while indent > 0 {
                let n = indent.min(SPACES.len());
                self.out.push_str(&SPACES[..n]);
                indent -= n;
            }
        }
    }

    /// Starts `<name`; follow with [`attr`](Self::attr) calls and [`open_end`](Self::open_end).
    #[inline]
    pub fn open(&mut self, name: &str) {
        self.line();
        self.out.push('<');
        self.out.push_str(name);
    }

    #[inline]
    pub fn attr(&mut self, key: &str, value: &str) {
        self.out.push(' ');
        self.out.push_str(key);
        self.out.push_str("=\"");
        escape_attr(&mut self.out, value);
        self.out.push('"');
    }

    /// Writes an attribute whose value is the concatenation of two parts (a base URL and a
    /// path), without building the joined string.
    #[inline]
    pub fn attr_joined(&mut self, key: &str, first: &str, second: &str) {
        self.out.push(' ');
        self.out.push_str(key);
        self.out.push_str("=\"");
        escape_attr(&mut self.out, first);
        escape_attr(&mut self.out, second);
        self.out.push('"');
    }

    /// Ends the start tag opened by [`open`](Self::open).
    #[inline]
    pub fn open_end(&mut self) {
        self.out.push('>');
        self.depth += 1;
        self.just_opened = true;
    }

    /// Ends a start tag opened by [`open`](Self::open) with text content and the end tag, on
    /// one line (`<cvv_result code="N">No Match</cvv_result>`).
    #[inline]
    pub fn text_end(&mut self, name: &str, text: &str) {
        self.out.push('>');
        escape_text(&mut self.out, text);
        self.push_end(name);
    }

    /// Closes an element opened by [`open`](Self::open) / [`open_end`](Self::open_end).
    #[inline]
    pub fn close(&mut self, name: &str) {
        self.depth -= 1;
        if !self.just_opened {
            self.line();
        }
        self.push_end(name);
    }

    /// Closes a `type="array"` element; an empty list keeps a line break between its tags.
    #[inline]
    pub fn close_list(&mut self, name: &str) {
        self.depth -= 1;
        self.line();
        self.push_end(name);
    }

    #[inline]
    fn push_end(&mut self, name: &str) {
        self.out.push_str("</");
        self.out.push_str(name);
        self.out.push('>');
        self.just_opened = false;
    }

    /// Writes a value element; `write_value` appends the already escaped content.
    #[inline]
    pub fn value(&mut self, name: &str, type_attr: Option<&str>, write_value: impl FnOnce(&mut String)) {
        self.open(name);
        if let Some(t) = type_attr {
            self.attr("type", t);
        }
        self.out.push('>');
        write_value(&mut self.out);
        self.push_end(name);
    }

    /// Writes a value element with further attributes after `type`.
    #[inline]
    pub fn value_with(
        &mut self,
        name: &str,
        type_attr: Option<&str>,
        attributes: &[(&str, &str)],
        write_value: impl FnOnce(&mut String),
    ) {
        self.open(name);
        if let Some(t) = type_attr {
            self.attr("type", t);
        }
        for (key, value) in attributes {
            self.attr(key, value);
        }
        self.out.push('>');
        write_value(&mut self.out);
        self.push_end(name);
    }

    /// Writes a string value element.
    #[inline]
    pub fn text(&mut self, name: &str, text: &str) {
        self.value(name, None, |out| escape_text(out, text));
    }

    /// Writes `<name type="…" nil="nil"></name>`.
    #[inline]
    pub fn nil(&mut self, name: &str, type_attr: Option<&str>) {
        self.open(name);
        if let Some(t) = type_attr {
            self.attr("type", t);
        }
        self.out.push_str(" nil=\"nil\">");
        self.push_end(name);
    }

    /// Writes `<name href="…"/>`; the URL is `base` followed by `path`.
    #[inline]
    pub fn link(&mut self, name: &str, base: &str, path: &str) {
        self.open(name);
        self.attr_joined("href", base, path);
        self.out.push_str("/>");
        self.just_opened = false;
    }

    /// Writes `<a name="…" href="…" method="…"/>`; the URL is `base` followed by `path`.
    #[inline]
    pub fn anchor(&mut self, name: &str, base: &str, path: &str, method: &str) {
        self.open("a");
        self.attr("name", name);
        self.attr_joined("href", base, path);
        self.attr("method", method);
        self.out.push_str("/>");
        self.just_opened = false;
    }

    pub fn finish(mut self) -> String {
        self.out.push('\n');
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_text_and_attributes() {
        let mut s = String::new();
        escape_text(&mut s, "a & <b> \"q\"\r\n\t");
        assert_eq!(s, "a &amp; &lt;b&gt; \"q\"&#13;\n\t");
        let mut s = String::new();
        escape_attr(&mut s, "x=\"1\"\n\t");
        assert_eq!(s, "x=&quot;1&quot;&#10;&#9;");
    }

    #[test]
    fn never_writes_a_character_xml_forbids() {
        let forbidden: Vec<char> = (0u32..0x20)
            .filter(|c| ![9, 10, 13].contains(c))
            .chain([0xFFFE, 0xFFFF])
            .filter_map(char::from_u32)
            .collect();
        for c in forbidden {
            for attr in [false, true] {
                let mut s = String::new();
                escape(&mut s, &format!("a{c}b{c}"), attr);
                assert_eq!(s, "a\u{FFFD}b\u{FFFD}", "U+{:04X}", u32::from(c));
            }
        }
        // Neighbours of the forbidden characters pass unchanged.
        let mut s = String::new();
        escape_text(&mut s, "\u{FFFD}\u{FFFC}\u{EFBF}\u{10000}é");
        assert_eq!(s, "\u{FFFD}\u{FFFC}\u{EFBF}\u{10000}é");
        let mut w = XmlWriter::new();
        w.open("x");
        w.attr("k", "\u{0}");
        w.text_end("x", "\u{1b}[31m\u{FFFF}");
        assert_eq!(w.finish(), "<x k=\"\u{FFFD}\">\u{FFFD}[31m\u{FFFD}</x>\n");
    }

    /// Character by character, what [`escape`] writes.
    fn escaped_one_by_one(text: &str, attr: bool) -> String {
        let mut out = String::new();
        for c in text.chars() {
            match c {
                '&' => out.push_str("&amp;"),
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                '"' if attr => out.push_str("&quot;"),
                '\n' if attr => out.push_str("&#10;"),
                '\t' if attr => out.push_str("&#9;"),
                '\r' => out.push_str("&#13;"),
                '\n' | '\t' => out.push(c),
                '\u{0}'..='\u{1f}' | '\u{FFFE}' | '\u{FFFF}' => out.push(REPLACEMENT),
                other => out.push(other),
            }
        }
        out
    }

    proptest::proptest! {
        /// The word-at-a-time scan changes exactly what a character-by-character escape does,
        /// wherever the characters fall within the words.
        #[test]
        fn escapes_as_character_by_character(
            text in "[a-z&<>\"\n\t\r\u{0}-\u{1f}é\u{FFFD}-\u{FFFF}\u{EFBF}\u{10000} ]{0,40}",
            attr: bool,
        ) {
            let mut s = String::new();
            escape(&mut s, &text, attr);
            proptest::prop_assert_eq!(s, escaped_one_by_one(&text, attr));
        }
    }

    #[test]
    fn indents_nested_elements() {
        let mut w = XmlWriter::new();
        w.declaration();
        w.open("account");
        w.attr("href", "https://x/v2/accounts/1");
        w.open_end();
        w.text("email", "a@b.c");
        w.nil("closed_at", Some("datetime"));
        w.open("address");
        w.open_end();
        w.close("address");
        w.open("list");
        w.attr("type", "array");
        w.open_end();
        w.close_list("list");
        w.close("account");
        assert_eq!(
            w.finish(),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<account href=\"https://x/v2/accounts/1\">\n  <email>a@b.c</email>\n  <closed_at type=\"datetime\" nil=\"nil\"></closed_at>\n  <address></address>\n  <list type=\"array\">\n  </list>\n</account>\n"
        );
    }
}

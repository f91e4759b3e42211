//! The request boundary as a property, over every text field of every resource a request can
//! carry (found in the schema, decoded through the generated types): any string sent there —
//! raw, escaped or as character references, of any length around the bounds — is either
//! refused (a decode error naming the element, or a validation error naming the field), or,
//! when accepted, written back as XML that a strict parser reads back to the same string.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use quick_xml::events::Event;
use rebill_models::validate::{Operation, Validation};
use rebill_models::{Model, ResourceVisitor, visit_resources};
use rebill_schema::{Direction, Field, FieldType, Format, Schema};
use rebill_tests::{ctx, workspace_root};
use rebill_xml::version::LATEST_VERSION;
use rebill_xml::{Features, Mode, from_xml, to_xml};

/// XML 1.0 production \[2\] `Char`, written out here independently of the runtime's check.
fn is_xml_char(c: char) -> bool {
    let c = u32::from(c);
    c == 0x9 || c == 0xA || c == 0xD || (0x20..=0xD7FF).contains(&c) || (0xE000..=0xFFFD).contains(&c) || c >= 0x10000
}

/// One piece of a sent string: a character written as itself (escaped only where XML needs it)
/// or as a character reference.
#[derive(Debug, Clone)]
enum Piece {
    Raw(char),
    Ref { c: char, hex: bool },
}

/// A string a request may carry: pieces, then `pad` letters to reach the length bounds.
#[derive(Debug, Clone)]
struct Sent {
    pieces: Vec<Piece>,
    pad: usize,
}

impl Sent {
    /// The string the client means.
    fn value(&self) -> String {
        let mut s: String = self
            .pieces
            .iter()
            .map(|p| match p {
                Piece::Raw(c) | Piece::Ref { c, .. } => *c,
            })
            .collect();
        s.extend(std::iter::repeat_n('x', self.pad));
        s
    }

    /// The string as written in a document: in an attribute value, or as element text.
    fn written(&self, attribute: bool) -> String {
        let mut out = String::new();
        for p in &self.pieces {
            match *p {
                Piece::Ref { c, hex: true } => out.push_str(&format!("&#x{:X};", u32::from(c))),
                Piece::Ref { c, hex: false } => out.push_str(&format!("&#{};", u32::from(c))),
                // Line ends and (in attributes) tabs and line breaks are normalised by XML
                // parsers; a client sends them as references.
                Piece::Raw(c) if c == '\r' || (attribute && matches!(c, '\t' | '\n')) => {
                    out.push_str(&format!("&#{};", u32::from(c)));
                }
                Piece::Raw('&') => out.push_str("&amp;"),
                Piece::Raw('<') => out.push_str("&lt;"),
                Piece::Raw('>') => out.push_str("&gt;"),
                Piece::Raw('"') if attribute => out.push_str("&quot;"),
                Piece::Raw(c) => out.push(c),
            }
        }
        out.extend(std::iter::repeat_n('x', self.pad));
        out
    }
}

fn char_strategy() -> impl Strategy<Value = char> {
    let interesting: Vec<char> = vec![
        '\u{0}',
        '\u{1}',
        '\u{8}',
        '\u{9}',
        '\u{A}',
        '\u{B}',
        '\u{C}',
        '\u{D}',
        '\u{E}',
        '\u{1F}',
        '\u{7F}',
        '\u{85}',
        '\u{D7FF}',
        '\u{E000}',
        '\u{FFFD}',
        '\u{FFFE}',
        '\u{FFFF}',
        '\u{10000}',
        '\u{10FFFF}',
        '&',
        '<',
        '>',
        '"',
        '\'',
        ';',
        '#',
        ']',
        '/',
        '.',
        '%',
        '+',
        '@',
        ' ',
        'a',
        'Z',
        '0',
        '-',
        '_',
        'é',
        '中',
        '🙂',
    ];
    prop_oneof![3 => proptest::sample::select(interesting), 1 => any::<char>()]
}

fn sent_strategy() -> impl Strategy<Value = Sent> {
    let piece = (char_strategy(), 0u8..4).prop_map(|(c, how)| match how {
        0 => Piece::Ref { c, hex: true },
        1 => Piece::Ref { c, hex: false },
        _ => Piece::Raw(c),
    });
    let pad = prop_oneof![
        4 => Just(0usize),
        1 => 44usize..56,
        1 => 250usize..260,
        1 => 2040usize..2052,
        1 => 3994usize..4006,
    ];
    (proptest::collection::vec(piece, 0..8), pad).prop_map(|(pieces, pad)| Sent { pieces, pad })
}

/// Resolves the references of raw XML text or attribute text, refusing characters XML forbids.
fn resolve_references(raw: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = raw;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let end = rest[i..].find(';').ok_or("unterminated reference")? + i;
        let name = &rest[i + 1..end];
        out.push(resolve_one(name)?);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn resolve_one(name: &str) -> Result<char, String> {
    let c = match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        _ => {
            let number = name.strip_prefix('#').ok_or_else(|| format!("entity &{name};"))?;
            let code = match number.strip_prefix('x') {
                Some(hex) => u32::from_str_radix(hex, 16),
                None => number.parse(),
            }
            .map_err(|_| format!("bad reference &{name};"))?;
            char::from_u32(code).ok_or_else(|| format!("bad reference &{name};"))?
        }
    };
    if is_xml_char(c) { Ok(c) } else { Err(format!("reference &{name}; to a character XML forbids")) }
}

/// Where the field's value is in a document.
#[derive(Debug, Clone)]
enum Place {
    Attribute(String),
    Element(String),
    Item { element: String, item: String },
    Text,
}

/// Reads `doc` strictly (well-formed, only XML characters, raw or referenced) and returns the
/// value at `place` under the root (the first item, for a list).
fn strict_read(doc: &str, place: &Place) -> Result<Option<String>, String> {
    if let Some(c) = doc.chars().find(|c| !is_xml_char(*c)) {
        return Err(format!("document holds U+{:04X}", u32::from(c)));
    }
    let mut reader = quick_xml::Reader::from_str(doc);
    reader.config_mut().check_end_names = true;
    let mut depth = 0usize;
    let mut path: Vec<String> = Vec::new();
    let mut found: Option<String> = None;
    let mut collecting = false;
    let target: Vec<&str> = match place {
        Place::Attribute(_) | Place::Text => vec![],
        Place::Element(e) => vec![e.as_str()],
        Place::Item { element, item } => vec![element.as_str(), item.as_str()],
    };
    loop {
        let event = reader.read_event().map_err(|e| e.to_string())?;
        match event {
            Event::Start(start) if depth == 0 => {
                found = root_attribute(&start, place)?.or(found);
                depth = 1;
                collecting = matches!(place, Place::Text);
                if collecting {
                    found = Some(String::new());
                }
            }
            Event::Empty(start) if depth == 0 => {
                found = root_attribute(&start, place)?.or(found);
                if matches!(place, Place::Text) {
                    found = Some(String::new());
                }
            }
            Event::Start(start) => {
                depth += 1;
                path.push(start.name().0.to_owned());
                if found.is_none() && path.iter().map(String::as_str).eq(target.iter().copied()) {
                    collecting = true;
                    found = Some(String::new());
                }
            }
            Event::Empty(start) => {
                path.push(start.name().0.to_owned());
                if found.is_none() && path.iter().map(String::as_str).eq(target.iter().copied()) {
                    found = Some(String::new());
                }
                path.pop();
            }
            Event::End(_) => {
                if path.iter().map(String::as_str).eq(target.iter().copied()) && !matches!(place, Place::Text) {
                    collecting = false;
                }
                depth -= 1;
                path.pop();
                if depth == 0 {
                    collecting = false;
                }
            }
            Event::Text(t) => {
                if collecting && let Some(v) = found.as_mut() {
                    v.push_str(&t.xml10_content());
                }
            }
            Event::GeneralRef(r) => {
                let c = resolve_one(&r)?;
                if collecting && let Some(v) = found.as_mut() {
                    v.push(c);
                }
            }
            Event::CData(c) => {
                if collecting && let Some(v) = found.as_mut() {
                    v.push_str(&c.xml10_content());
                }
            }
            Event::Eof => break,
            Event::DocType(_) => return Err("DOCTYPE".into()),
            Event::Decl(_) | Event::Comment(_) | Event::PI(_) => {}
        }
    }
    Ok(found)
}

/// The value of the attribute at `place` on the root tag, references resolved.
fn root_attribute(start: &quick_xml::events::BytesStart<'_>, place: &Place) -> Result<Option<String>, String> {
    let Place::Attribute(name) = place else { return Ok(None) };
    for attr in start.attributes() {
        let attr = attr.map_err(|e| e.to_string())?;
        if attr.key.0 == name.as_str() {
            return resolve_references(&attr.value).map(Some);
        }
    }
    Ok(None)
}

struct Boundary<'s> {
    schema: &'s Schema,
    fields: usize,
}

/// The rules the schema declares for a field, checked against the outcome.
fn must_refuse(field: &Field, value: &str) -> bool {
    let chars = value.chars().count();
    let too_long = field.max_length.is_some_and(|max| chars > max);
    let bad_code =
        field.format == Some(Format::Code) && !value.trim().is_empty() && !rebill_models::validate::is_code(value);
    too_long || bad_code || value.chars().any(|c| !is_xml_char(c))
}

impl ResourceVisitor for Boundary<'_> {
    fn visit<T: Model>(&mut self, name: &'static str) {
        let resource = self.schema.resources.iter().find(|r| r.name == name).expect("every type is in the schema");
        let latest = self.schema.versions.last().copied().expect("versions");
        let c = ctx(LATEST_VERSION, &Features::all());
        for field in resource.fields.iter().filter(|f| f.direction != Direction::Response && f.is_textual()) {
            let Some(element) = field.element_at(latest) else { continue };
            let max =
                field.max_length.unwrap_or_else(|| panic!("{name}.{}: a request string without a bound", field.name));
            assert!(max <= 4000, "{name}.{}: bound {max}", field.name);
            let (place, decode_path, field_path) = match (&field.ty, &field.attribute) {
                (_, Some(attr)) => (Place::Attribute(attr.clone()), T::ROOT.to_owned(), format!("{}.@{attr}", T::ROOT)),
                (FieldType::Text, None) => (Place::Text, T::ROOT.to_owned(), format!("{}.#text", T::ROOT)),
                (FieldType::Values { item, .. }, None) => (
                    Place::Item { element: element.clone(), item: item.clone() },
                    format!("{}.{element}[0]", T::ROOT),
                    format!("{}.{element}[0]", T::ROOT),
                ),
                _ => (
                    Place::Element(element.clone()),
                    format!("{}.{element}", T::ROOT),
                    format!("{}.{element}", T::ROOT),
                ),
            };
            let write_mode = if field.direction == Direction::Both { Mode::Response } else { Mode::Request };
            let mut runner = TestRunner::new(Config { cases: 48, failure_persistence: None, ..Config::default() });
            let result = runner.run(&sent_strategy(), |sent| {
                let value = sent.value();
                let root = T::ROOT;
                let doc = match &place {
                    Place::Attribute(attr) => format!("<{root} {attr}=\"{}\"/>", sent.written(true)),
                    Place::Text => format!("<{root}>{}</{root}>", sent.written(false)),
                    Place::Element(e) => format!("<{root}><{e}>{}</{e}></{root}>", sent.written(false)),
                    Place::Item { element, item } => format!(
                        "<{root}><{element} type=\"array\"><{item}>{}</{item}></{element}></{root}>",
                        sent.written(false)
                    ),
                };
                let decoded = match from_xml::<T>(doc.as_bytes(), &c, Mode::Request) {
                    Err(e) => {
                        // Refused while decoding: only for characters XML forbids, naming the element.
                        prop_assert!(value.chars().any(|c| !is_xml_char(c)), "refused a valid string: {e}\n{doc:?}");
                        prop_assert!(e.is_syntax(), "{e}");
                        prop_assert_eq!(e.path(), decode_path.clone(), "{}", e);
                        return Ok(());
                    }
                    Ok(v) => v,
                };
                prop_assert!(value.chars().all(is_xml_char), "accepted a forbidden character\n{doc:?}");
                let mut v = Validation::new(&c, Operation::Update);
                decoded.validate(&mut v, T::ROOT);
                let ours: Vec<_> = v.violations().iter().filter(|x| x.field == field_path).collect();
                if !ours.is_empty() {
                    // Refused by validation, naming the field.
                    return Ok(());
                }
                prop_assert!(!must_refuse(field, &value), "accepted {} characters of {value:?}", value.chars().count());
                // Accepted: written back, a strict parser reads the same string.
                let written = to_xml(&decoded, &c, write_mode);
                let back = strict_read(&written, &place).map_err(|e| TestCaseError::fail(format!("{e}\n{written}")))?;
                prop_assert_eq!(back.as_deref(), Some(value.as_str()), "{}", written);
                Ok(())
            });
            if let Err(e) = result {
                panic!("{name}.{} ({element}): {e}", field.name);
            }
            self.fields += 1;
        }
    }
}

#[test]
fn every_request_string_is_refused_or_written_back_unchanged() {
    let schema = rebill_schema::load_dir(&workspace_root().join("schema")).unwrap_or_else(|e| panic!("{e}"));
    let mut visitor = Boundary { schema: &schema, fields: 0 };
    visit_resources(&mut visitor);
    // Every request resource's text fields were exercised (account, billing info, plan, …).
    assert!(visitor.fields >= 100, "only {} fields", visitor.fields);
}

#[test]
fn the_strict_reader_refuses_what_xml_forbids() {
    let place = Place::Element("a".into());
    assert_eq!(strict_read("<r><a>x&amp;&#x41;</a></r>", &place), Ok(Some("x&A".into())));
    assert_eq!(strict_read("<r><a/></r>", &place), Ok(Some(String::new())));
    assert!(strict_read("<r><a>\u{1}</a></r>", &place).is_err());
    assert!(strict_read("<r><a>&#1;</a></r>", &place).is_err());
    assert!(strict_read("<r><a>&#xFFFE;</a></r>", &place).is_err());
    assert!(strict_read("<r><a>x</b></r>", &place).is_err());
    let attr = Place::Attribute("k".into());
    assert_eq!(strict_read("<r k=\"a&#10;b\"/>", &attr), Ok(Some("a\nb".into())));
    assert!(strict_read("<r k=\"&#0;\"/>", &attr).is_err());
}

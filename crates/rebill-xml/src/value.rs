//! Value types of the dialect: scalars, multi-currency money and hrefs.

use std::borrow::Cow;

use chrono::{DateTime, Datelike, NaiveDate, Timelike, Utc};

use crate::context::WireContext;
use crate::writer::escape_text;

/// A value written as the text of one element.
pub trait XmlScalar: Sized + Clone {
    /// The `type` attribute written on output (`integer`, `boolean`, …), `None` for strings.
    const TYPE_ATTR: Option<&'static str>;
    /// How an invalid value is described in errors ("an integer").
    const EXPECTED: &'static str;
    /// Appends the escaped text form.
    fn write_text(&self, out: &mut String);
    /// Parses the (unescaped) text form; typed values ignore surrounding whitespace.
    fn parse_text(text: &str) -> Option<Self>;
    /// Like [`parse_text`](Self::parse_text), taking ownership of text that is already owned.
    fn from_text(text: Cow<'_, str>) -> Option<Self> {
        Self::parse_text(&text)
    }
}

impl XmlScalar for String {
    const TYPE_ATTR: Option<&'static str> = None;
    const EXPECTED: &'static str = "a string";
    fn write_text(&self, out: &mut String) {
        escape_text(out, self);
    }
    fn parse_text(text: &str) -> Option<Self> {
        Some(text.to_owned())
    }
    fn from_text(text: Cow<'_, str>) -> Option<Self> {
        Some(text.into_owned())
    }
}

impl XmlScalar for i64 {
    const TYPE_ATTR: Option<&'static str> = Some("integer");
    const EXPECTED: &'static str = "an integer";
    fn write_text(&self, out: &mut String) {
        out.push_str(itoa::Buffer::new().format(*self));
    }
    fn parse_text(text: &str) -> Option<Self> {
        let t = text.trim();
        let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    }
}

impl XmlScalar for bool {
    const TYPE_ATTR: Option<&'static str> = Some("boolean");
    const EXPECTED: &'static str = "a boolean (true or false)";
    fn write_text(&self, out: &mut String) {
        out.push_str(if *self { "true" } else { "false" });
    }
    fn parse_text(text: &str) -> Option<Self> {
        match text.trim() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }
}

impl XmlScalar for f64 {
    const TYPE_ATTR: Option<&'static str> = Some("float");
    const EXPECTED: &'static str = "a decimal number";
    fn write_text(&self, out: &mut String) {
        use std::fmt::Write;
        // `Display` for f64 prints the shortest text that reads back to the same value; whole
        // numbers keep a decimal point (`1.0`), as the dialect writes them.
        let start = out.len();
        let _ = write!(out, "{self}");
        if !out[start..].contains('.') {
            out.push_str(".0");
        }
    }
    fn parse_text(text: &str) -> Option<Self> {
        let t = text.trim();
        let ok =
            !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'));
        if !ok {
            return None;
        }
        t.parse::<f64>().ok().filter(|v| v.is_finite())
    }
}

impl XmlScalar for DateTime<Utc> {
    const TYPE_ATTR: Option<&'static str> = Some("datetime");
    const EXPECTED: &'static str = "an ISO 8601 date-time";
    fn write_text(&self, out: &mut String) {
        write_date(out, self.date_naive());
        out.push('T');
        push2(out, self.hour());
        out.push(':');
        push2(out, self.minute());
        out.push(':');
        push2(out, self.second());
        let nanos = self.nanosecond() % 1_000_000_000;
        if nanos != 0 {
            let mut frac = format!("{nanos:09}");
            while frac.ends_with('0') {
                frac.pop();
            }
            out.push('.');
            out.push_str(&frac);
        }
        out.push('Z');
    }
    fn parse_text(text: &str) -> Option<Self> {
        parse_datetime(text)
    }
}

/// A date-time as a request carries it, converted to UTC; `None` for anything else. Surrounding
/// whitespace is ignored. The grammar (`docs/times.md`), every part fixed-width and the whole
/// read once from the start, so nothing else is accepted:
///
/// ```text
/// instant = date [ ("T" | "t" | " ") time [ [" "] zone ] ]
/// date    = YYYY "-" MM "-" DD                      (a date alone: 00:00:00 UTC)
/// time    = hh ":" mm ":" ss [ "." 1*9DIGIT ]
/// zone    = "Z" | "z" | "UTC" | ("+" | "-") hh [ [":"] mm ]   (none: UTC; hh ≤ 23, mm ≤ 59)
/// ```
///
/// So ISO 8601 / RFC 3339 (`2026-11-26T20:49:03Z`, `…T21:49:03+01:00`) and Ruby's `Time#to_s`
/// (`2026-11-26 20:49:03 UTC`, `2026-11-26 21:49:03 +0100`) read the same instant.
pub fn parse_datetime(text: &str) -> Option<DateTime<Utc>> {
    let t = text.trim();
    parse_utc_seconds(t).or_else(|| InstantText::new(t, false).read())
}

/// [`parse_datetime`] for a query value: a `+` sent unescaped in a query decodes to a space, so
/// an offset's digits after a space (`2026-11-26 21:49:03  0100`, `2026-11-26T21:49:03 01:00`)
/// read as a positive offset.
pub fn parse_query_datetime(text: &str) -> Option<DateTime<Utc>> {
    let t = text.trim();
    parse_utc_seconds(t).or_else(|| InstantText::new(t, true).read())
}

/// The reader behind [`parse_datetime`]: a cursor over the bytes of the text.
struct InstantText<'t> {
    bytes: &'t [u8],
    at: usize,
    /// A space may stand for the `+` of an offset (query values).
    lost_plus: bool,
}

impl<'t> InstantText<'t> {
    fn new(text: &'t str, lost_plus: bool) -> Self {
        Self { bytes: text.as_bytes(), at: 0, lost_plus }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        if found {
            self.at += 1;
        }
        found
    }

    fn eat_str(&mut self, word: &str) -> bool {
        let found = self.bytes.get(self.at..self.at + word.len()) == Some(word.as_bytes());
        if found {
            self.at += word.len();
        }
        found
    }

    /// Exactly `n` ASCII digits as a number.
    fn number(&mut self, n: usize) -> Option<u32> {
        let digits = self.bytes.get(self.at..self.at + n)?;
        let value =
            digits.iter().try_fold(0u32, |acc, &d| d.is_ascii_digit().then(|| acc * 10 + u32::from(d - b'0')))?;
        self.at += n;
        Some(value)
    }

    fn read(mut self) -> Option<DateTime<Utc>> {
        let year = i32::try_from(self.number(4)?).ok()?;
        self.eat(b'-').then_some(())?;
        let month = self.number(2)?;
        self.eat(b'-').then_some(())?;
        let date = NaiveDate::from_ymd_opt(year, month, self.number(2)?)?;
        if self.peek().is_none() {
            return Some(date.and_hms_opt(0, 0, 0)?.and_utc());
        }
        (self.eat(b'T') || self.eat(b't') || self.eat(b' ')).then_some(())?;
        let hour = self.number(2)?;
        self.eat(b':').then_some(())?;
        let minute = self.number(2)?;
        self.eat(b':').then_some(())?;
        let second = self.number(2)?;
        let nanos = if self.eat(b'.') { self.fraction()? } else { 0 };
        // Seconds 00–59 only: chrono reads no leap second from an hour, minute and second.
        let local = date.and_hms_nano_opt(hour, minute, second, nanos)?;
        let east = self.zone()?;
        (self.at == self.bytes.len()).then_some(())?;
        local.and_utc().checked_sub_signed(chrono::TimeDelta::seconds(i64::from(east)))
    }

    /// One to nine digits after the decimal point, as nanoseconds.
    fn fraction(&mut self) -> Option<u32> {
        let start = self.at;
        let mut nanos = 0u32;
        while let Some(d) = self.peek().filter(u8::is_ascii_digit) {
            if self.at - start == 9 {
                return None;
            }
            nanos = nanos * 10 + u32::from(d - b'0');
            self.at += 1;
        }
        let len = u32::try_from(self.at - start).ok().filter(|n| *n > 0)?;
        Some(nanos * 10u32.pow(9 - len))
    }

    /// The zone after the time, as seconds east of UTC (none: UTC).
    fn zone(&mut self) -> Option<i32> {
        let spaces = usize::from(self.eat(b' ')) + usize::from(self.lost_plus && self.eat(b' '));
        if self.peek().is_none() {
            // A trailing space was trimmed away, so this is the end of a zone-less time.
            return (spaces == 0).then_some(0);
        }
        let sign = if spaces > 0 && self.lost_plus && self.peek().is_some_and(|b| b.is_ascii_digit()) {
            1
        } else if spaces > 1 {
            // Two spaces only where the second was the offset's `+`.
            return None;
        } else if self.eat(b'Z') || self.eat(b'z') || self.eat_str("UTC") {
            return Some(0);
        } else if self.eat(b'+') {
            1
        } else if self.eat(b'-') {
            -1
        } else {
            return None;
        };
        let hours = self.number(2)?;
        let minutes = match self.peek() {
            None => 0,
            Some(b':') => {
                self.at += 1;
                self.number(2)?
            }
            Some(_) => self.number(2)?,
        };
        if hours > 23 || minutes > 59 {
            return None;
        }
        i32::try_from(hours * 3600 + minutes * 60).ok().map(|s| sign * s)
    }
}

impl XmlScalar for NaiveDate {
    const TYPE_ATTR: Option<&'static str> = Some("date");
    const EXPECTED: &'static str = "an ISO 8601 date";
    fn write_text(&self, out: &mut String) {
        write_date(out, *self);
    }
    fn parse_text(text: &str) -> Option<Self> {
        NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d").ok()
    }
}

fn push2(out: &mut String, n: u32) {
    out.push(char::from(b'0' + (n / 10 % 10) as u8));
    out.push(char::from(b'0' + (n % 10) as u8));
}

fn write_date(out: &mut String, date: NaiveDate) {
    let year = date.year();
    if (0..=9999).contains(&year) {
        let y = year as u32;
        push2(out, y / 100);
        push2(out, y % 100);
    } else {
        out.push_str(&format!("{year:+05}"));
    }
    out.push('-');
    push2(out, date.month());
    out.push('-');
    push2(out, date.day());
}

/// Fast path for the common `YYYY-MM-DDTHH:MM:SSZ` form.
fn parse_utc_seconds(t: &str) -> Option<DateTime<Utc>> {
    let b = t.as_bytes();
    if b.len() != 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' || b[19] != b'Z'
    {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<u32> {
        b[range].iter().try_fold(0u32, |acc, &d| d.is_ascii_digit().then(|| acc * 10 + u32::from(d - b'0')))
    };
    let date = NaiveDate::from_ymd_opt(num(0..4)? as i32, num(5..7)?, num(8..10)?)?;
    let time = date.and_hms_opt(num(11..13)?, num(14..16)?, num(17..19)?)?;
    Some(time.and_utc())
}

/// A multi-currency amount in cents: `<unit_amount_in_cents><USD type="integer">1000</USD>…`.
/// Currencies keep their order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Money(pub Vec<(String, i64)>);

impl Money {
    pub fn single(currency: &str, cents: i64) -> Self {
        Self(vec![(currency.to_owned(), cents)])
    }

    pub fn get(&self, currency: &str) -> Option<i64> {
        self.0.iter().find(|(c, _)| c == currency).map(|(_, v)| *v)
    }

    /// Whether `name` is a plausible currency element (three upper-case ASCII letters).
    pub fn is_currency_code(name: &str) -> bool {
        name.len() == 3 && name.bytes().all(|b| b.is_ascii_uppercase())
    }
}

/// A URL of a resource: a path starting with `/` (written on the context's base URL) or an
/// absolute URL kept as read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Href(String);

impl Href {
    /// A path on the serving host, such as `/v2/accounts/abc`.
    pub fn path(path: impl Into<String>) -> Self {
        Self(path.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The URL as written for `ctx`, in two parts: the base URL (empty for an absolute URL) and
    /// the rest.
    pub fn parts<'x>(&'x self, ctx: &'x WireContext) -> (&'x str, &'x str) {
        if self.0.starts_with('/') { (ctx.base_url(), &self.0) } else { ("", &self.0) }
    }

    /// The URL as written for `ctx`.
    pub fn absolute(&self, ctx: &WireContext) -> Cow<'_, str> {
        if self.0.starts_with('/') {
            Cow::Owned(format!("{}{}", ctx.base_url(), self.0))
        } else {
            Cow::Borrowed(&self.0)
        }
    }

    /// Reads an href; one on the context's base URL becomes a path again.
    pub fn from_wire(url: &str, ctx: &WireContext) -> Self {
        match url.strip_prefix(ctx.base_url()) {
            Some(rest) if rest.starts_with('/') && !ctx.base_url().is_empty() => Self(rest.to_owned()),
            _ => Self(url.to_owned()),
        }
    }
}

/// Appends `segment` percent-encoded for use as one URL path segment.
pub fn push_path_segment(out: &mut String, segment: &str) {
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
    let bytes = segment.as_bytes();
    let mut run_start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if unreserved(b) {
            continue;
        }
        // The run before this byte is ASCII, so it is always text.
        out.push_str(std::str::from_utf8(&bytes[run_start..i]).unwrap_or_default());
        out.push('%');
        out.push(char::from(b"0123456789ABCDEF"[usize::from(b >> 4)]));
        out.push(char::from(b"0123456789ABCDEF"[usize::from(b & 15)]));
        run_start = i + 1;
    }
    out.push_str(std::str::from_utf8(&bytes[run_start..]).unwrap_or_default());
}

/// The parameters of an href `pattern` (`/v2/accounts/{account_code}/balance`, each `{name}` a
/// whole path segment) in an href read from a document, percent-decoded, in pattern order; `None`
/// when the href's path does not have the pattern's shape (another service's URL, a segment
/// that is not UTF-8 once decoded). The href may be absolute on any base URL or a bare path.
pub fn href_params(pattern: &'static str, href: &str, ctx: &WireContext) -> Option<Vec<(&'static str, String)>> {
    let href = Href::from_wire(href, ctx);
    let url = href.as_str();
    let path = if url.starts_with('/') {
        url
    } else {
        let after_scheme = &url[url.find("://")? + 3..];
        &after_scheme[after_scheme.find('/')?..]
    };
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let mut params = Vec::new();
    let mut segments = path.split('/');
    for expected in pattern.split('/') {
        let segment = segments.next()?;
        match expected.strip_prefix('{').and_then(|e| e.strip_suffix('}')) {
            Some(name) => params.push((name, percent_decode(segment)?)),
            None if segment == expected => {}
            None => return None,
        }
    }
    segments.next().is_none().then_some(params)
}

/// Undoes [`push_path_segment`]; `None` for a broken escape or bytes that are not UTF-8.
fn percent_decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = segment.get(i + 1..i + 3).filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Features;
    use crate::version::ApiVersion;

    fn text<T: XmlScalar>(v: &T) -> String {
        let mut s = String::new();
        v.write_text(&mut s);
        s
    }

    #[test]
    fn integers_are_strict() {
        assert_eq!(i64::parse_text(" 42 "), Some(42));
        assert_eq!(i64::parse_text("-7"), Some(-7));
        for bad in ["abc", "", "1.5", "1e3", "9999999999999999999999", "- 1"] {
            assert_eq!(i64::parse_text(bad), None, "{bad}");
        }
    }

    #[test]
    fn datetimes_normalise_to_utc() {
        let dt = DateTime::<Utc>::parse_text("2011-04-30T12:00:00Z").expect("fast path");
        assert_eq!(text(&dt), "2011-04-30T12:00:00Z");
        let offset = DateTime::<Utc>::parse_text("2011-04-30T04:00:00-08:00").expect("offset");
        assert_eq!(offset, dt);
        let frac = DateTime::<Utc>::parse_text("2011-04-30T12:00:00.250Z").expect("fraction");
        assert_eq!(text(&frac), "2011-04-30T12:00:00.25Z");
        let date_only = DateTime::<Utc>::parse_text("2011-04-30").expect("date");
        assert_eq!(text(&date_only), "2011-04-30T00:00:00Z");
        assert_eq!(DateTime::<Utc>::parse_text("2011-02-30T12:00:00Z"), None);
        assert_eq!(DateTime::<Utc>::parse_text("yesterday"), None);
    }

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).map(|t| t.with_timezone(&Utc)).expect("a test instant")
    }

    #[test]
    fn iso_and_ruby_time_forms_read_the_same_instant() {
        let at = utc("2026-11-26T20:49:03Z");
        for form in [
            "2026-11-26T20:49:03Z",
            "2026-11-26t20:49:03z",
            "2026-11-26T20:49:03",
            "2026-11-26T20:49:03+00:00",
            "2026-11-26T21:49:03+01:00",
            "2026-11-26T15:49:03-05:00",
            "2026-11-26T15:49:03-0500",
            "2026-11-26T15:49:03-05",
            " 2026-11-26T20:49:03Z\n",
            // Ruby's Time#to_s, in UTC and local time.
            "2026-11-26 20:49:03 UTC",
            "2026-11-26 21:49:03 +0100",
            "2026-11-26 15:49:03 -0500",
            "2026-11-26 15:49:03 -05:00",
            "2026-11-26 20:49:03",
            "2026-11-26 20:49:03Z",
            "2026-11-26 21:49:03+01:00",
        ] {
            assert_eq!(parse_datetime(form), Some(at), "{form:?}");
            assert_eq!(parse_query_datetime(form), Some(at), "{form:?} in a query");
        }
        assert_eq!(parse_datetime("2026-11-26 20:49:03.25 UTC"), Some(at + chrono::TimeDelta::milliseconds(250)));
        assert_eq!(parse_datetime("2026-11-26T20:49:03.000000001Z"), Some(at + chrono::TimeDelta::nanoseconds(1)));
        assert_eq!(parse_datetime("2026-11-26"), Some(utc("2026-11-26T00:00:00Z")));
        // Across midnight and the year's end.
        assert_eq!(parse_datetime("2027-01-01 00:30:00 +0100"), Some(utc("2026-12-31T23:30:00Z")));
        assert_eq!(parse_datetime("2026-12-31 23:30:00 -0100"), Some(utc("2027-01-01T00:30:00Z")));
    }

    #[test]
    fn a_plus_lost_to_a_space_in_a_query_is_an_offset() {
        let at = Some(utc("2026-11-26T20:49:03Z"));
        assert_eq!(parse_query_datetime("2026-11-26 21:49:03  0100"), at);
        assert_eq!(parse_query_datetime("2026-11-26T21:49:03 01:00"), at);
        assert_eq!(parse_query_datetime("2026-11-26 21:49:03 0100"), at);
        // Only in a query: a body carries its `+`.
        assert_eq!(parse_datetime("2026-11-26 21:49:03  0100"), None);
        assert_eq!(parse_datetime("2026-11-26T21:49:03 01:00"), None);
        assert_eq!(parse_query_datetime("2026-11-26 21:49:03   0100"), None);
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "",
            "tomorrow",
            "1799539200",
            "26-11-26",
            "2026-1-26",
            "2026-11-26T",
            "2026-11-26T20:49",
            "2026-11-26T20:49Z",
            "2026-11-26T20:49:3Z",
            "2026-11-26T24:00:00Z",
            "2026-11-26T20:60:00Z",
            "2026-11-26T20:49:60Z",
            "2026-13-01T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-11-26T20:49:03.Z",
            "2026-11-26T20:49:03.1234567891Z",
            "2026-11-26T20:49:03+24:00",
            "2026-11-26T20:49:03+01:60",
            "2026-11-26T20:49:03+1",
            "2026-11-26T20:49:03+01:0",
            "2026-11-26T20:49:03+01:00:00",
            "2026-11-26T20:49:03ZZ",
            "2026-11-26 20:49:03 utc",
            "2026-11-26 20:49:03 CET",
            "2026-11-26 20:49:03 Europe/Paris",
            "2026-11-26 20:49:03  UTC",
            "2026-11-26  20:49:03 UTC",
            "2026-11-26_20:49:03",
            "+2026-11-26T20:49:03Z",
            "２０２６-11-26T20:49:03Z",
            "2026-11-26T20:49:03\u{0}Z",
        ] {
            assert_eq!(parse_datetime(bad), None, "{bad:?}");
            assert_eq!(parse_query_datetime(bad), None, "{bad:?} in a query");
        }
    }

    mod properties {
        use chrono::{FixedOffset, SecondsFormat};
        use proptest::prelude::*;

        use super::super::{parse_datetime, parse_query_datetime};
        use super::{DateTime, Utc};

        fn instant() -> impl Strategy<Value = DateTime<Utc>> {
            // 1000-01-01 … 9998-12-31, whole seconds or with nanoseconds.
            (-30_610_224_000i64..253_370_764_800, prop_oneof![Just(0u32), 0u32..1_000_000_000])
                .prop_map(|(secs, nanos)| DateTime::from_timestamp(secs, nanos).unwrap_or_default())
        }

        proptest! {
            #[test]
            fn every_form_of_an_instant_reads_back_as_it(at in instant(), east in -(23 * 3600 + 59 * 60)..=(23 * 3600 + 59 * 60i32), style in 0..5u8) {
                let east = east / 60 * 60;
                let offset = FixedOffset::east_opt(east).expect("an offset below a day");
                let local = at.with_timezone(&offset);
                let text = match style {
                    0 => at.to_rfc3339_opts(SecondsFormat::AutoSi, true),
                    1 => local.to_rfc3339_opts(SecondsFormat::Nanos, false),
                    2 => local.format("%Y-%m-%d %H:%M:%S%.f %z").to_string(),
                    3 => at.format("%Y-%m-%d %H:%M:%S%.f UTC").to_string(),
                    _ => local.format("%Y-%m-%dT%H:%M:%S%.f%:z").to_string(),
                };
                prop_assert_eq!(parse_datetime(&text), Some(at), "{}", text);
                prop_assert_eq!(parse_query_datetime(&text), Some(at), "{} in a query", text);
                // The same text through a query that lost its `+` to a space.
                prop_assert_eq!(parse_query_datetime(&text.replace('+', " ")), Some(at), "{} without +", text);
            }

            #[test]
            fn any_text_is_read_or_refused_without_panic(text in "[0-9TZtz :.+-]{0,40}|\\PC{0,40}") {
                let body = parse_datetime(&text);
                let query = parse_query_datetime(&text);
                // A query reads at least what a body reads, the same way.
                if body.is_some() {
                    prop_assert_eq!(body, query);
                }
            }
        }
    }

    #[test]
    fn floats_and_booleans() {
        assert_eq!(text(&0.0875f64), "0.0875");
        assert_eq!(text(&1.0f64), "1.0");
        assert_eq!(f64::parse_text("1.0"), Some(1.0));
        assert_eq!(f64::parse_text("0.0875"), Some(0.0875));
        assert_eq!(f64::parse_text("NaN"), None);
        assert_eq!(f64::parse_text("inf"), None);
        assert_eq!(bool::parse_text("true"), Some(true));
        assert_eq!(bool::parse_text("yes"), None);
    }

    #[test]
    fn hrefs_follow_the_base_url() {
        let ctx = WireContext::new(ApiVersion::default(), Features::none(), "https://api.rebill.test");
        let href = Href::path("/v2/accounts/a");
        assert_eq!(href.absolute(&ctx), "https://api.rebill.test/v2/accounts/a");
        assert_eq!(Href::from_wire("https://api.rebill.test/v2/accounts/a", &ctx), href);
        assert_eq!(Href::from_wire("https://elsewhere/v2/x", &ctx).as_str(), "https://elsewhere/v2/x");
    }

    #[test]
    fn path_segments_are_percent_encoded() {
        let mut s = String::new();
        push_path_segment(&mut s, "a b/ü");
        assert_eq!(s, "a%20b%2F%C3%BC");
        for (segment, encoded) in [("", ""), ("acct-1_a.b~c", "acct-1_a.b~c"), ("ü", "%C3%BC"), ("x ", "x%20")] {
            let mut s = String::from("/");
            push_path_segment(&mut s, segment);
            assert_eq!(s, format!("/{encoded}"));
        }
    }

    proptest::proptest! {
        /// Every segment is encoded with unreserved bytes as they are and every other byte of
        /// its UTF-8 as `%XX`, and decodes back to itself.
        #[test]
        fn any_path_segment_is_encoded_byte_by_byte_and_decodes_back(segment in "\\PC{0,24}") {
            let mut encoded = String::new();
            push_path_segment(&mut encoded, &segment);
            let expected: String = segment
                .bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { char::from(b).to_string() } else { format!("%{b:02X}") }
                })
                .collect();
            proptest::prop_assert_eq!(&encoded, &expected);
            proptest::prop_assert_eq!(percent_decode(&encoded), Some(segment));
        }
    }

    #[test]
    fn href_parameters_are_read_back() {
        let ctx = WireContext::new(ApiVersion::default(), Features::none(), "https://api.rebill.test");
        let pattern = "/v2/accounts/{account_code}/balance";
        let mut path = String::from("/v2/accounts/");
        push_path_segment(&mut path, "a b/ü+@");
        path.push_str("/balance");
        let absolute = format!("https://api.rebill.test{path}");
        let expected = Some(vec![("account_code", "a b/ü+@".to_owned())]);
        assert_eq!(href_params(pattern, &absolute, &ctx), expected);
        assert_eq!(href_params(pattern, &path, &ctx), expected);
        assert_eq!(href_params(pattern, &format!("http://other:8080{path}?x=1"), &ctx), expected);
        assert_eq!(
            href_params(pattern, "https://api.rebill.test/v2/accounts//balance", &ctx),
            Some(vec![("account_code", String::new())])
        );
        for wrong in [
            "https://api.rebill.test/v2/accounts/abc",
            "https://api.rebill.test/v2/accounts/abc/balance/x",
            "https://api.rebill.test/v2/plans/abc/balance",
            "https://api.rebill.test/v2/accounts/%ZZ/balance",
            "https://api.rebill.test/v2/accounts/%FF/balance",
            "https://api.rebill.test/v2/accounts/%+1/balance",
            "no-url",
        ] {
            assert_eq!(href_params(pattern, wrong, &ctx), None, "{wrong}");
        }
    }
}

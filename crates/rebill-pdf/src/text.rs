//! Text for the page: the WinAnsi bytes of a string, dates and amounts as shown, truncating and
//! wrapping to a width.

use chrono::{DateTime, Utc};

use crate::metrics;

/// `s` in the WinAnsi encoding of the base fonts: Latin-1 as it is, the typographic marks of
/// Windows-1252 at their codes, `?` for anything else (and for control characters).
pub fn encode(s: &str) -> Vec<u8> {
    s.chars()
        .map(|c| match c {
            ' '..='~' => c as u8,
            '\u{a0}'..='\u{ff}' => c as u32 as u8,
            '€' => 0x80,
            '‚' => 0x82,
            '„' => 0x84,
            '…' => 0x85,
            '‘' => 0x91,
            '’' => 0x92,
            '“' => 0x93,
            '”' => 0x94,
            '•' => 0x95,
            '–' => 0x96,
            '—' => 0x97,
            '™' => 0x99,
            _ => b'?',
        })
        .collect()
}

/// A date as the invoice shows it: `Jan 5, 2027` (UTC).
pub fn format_date(at: DateTime<Utc>) -> String {
    at.format("%b %-d, %Y").to_string()
}

/// An amount in cents with two decimals and thousands separators: `-1,234.56`.
pub fn format_money(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let abs = cents.unsigned_abs();
    let units = (abs / 100).to_string();
    let mut grouped = String::with_capacity(units.len() + units.len() / 3);
    for (i, digit) in units.chars().enumerate() {
        if i > 0 && (units.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    format!("{sign}{grouped}.{:02}", abs % 100)
}

/// `s` cut to fit `max` points at `size` (ending in `…` when cut).
pub fn truncate(s: &str, max: f32, size: f32) -> String {
    if metrics::width(s, size) <= max {
        return s.to_owned();
    }
    let mut out = String::new();
    for c in s.chars() {
        out.push(c);
        if metrics::width(&out, size) + metrics::width("…", size) > max {
            out.pop();
            break;
        }
    }
    out.push('…');
    out
}

/// `s` broken into lines of at most `max` points at `size`, at spaces (a word longer than a
/// line is truncated); line breaks of `s` are kept.
pub fn wrap(s: &str, max: f32, size: f32) -> Vec<String> {
    let mut lines = Vec::new();
    for paragraph in s.lines() {
        let mut line = String::new();
        for word in paragraph.split_whitespace() {
            let candidate = if line.is_empty() { word.to_owned() } else { format!("{line} {word}") };
            if metrics::width(&candidate, size) <= max {
                line = candidate;
            } else {
                if !line.is_empty() {
                    lines.push(std::mem::take(&mut line));
                }
                line = truncate(word, max, size);
            }
        }
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn amounts_have_two_decimals_and_groups() {
        let cases = [(0, "0.00"), (5, "0.05"), (-5, "-0.05"), (123_456, "1,234.56"), (100_000_000, "1,000,000.00")];
        for (cents, shown) in cases {
            assert_eq!(format_money(cents), shown);
        }
        assert_eq!(format_money(i64::MIN), "-92,233,720,368,547,758.08");
    }

    #[test]
    fn dates_are_us_english() {
        let at = Utc.with_ymd_and_hms(2027, 1, 5, 23, 59, 0).single().expect("date");
        assert_eq!(format_date(at), "Jan 5, 2027");
    }

    #[test]
    fn encoding_keeps_latin_1_and_marks_the_rest() {
        assert_eq!(encode("Café €5 – ok"), b"Caf\xe9 \x805 \x96 ok");
        assert_eq!(encode("日本\u{7}"), b"???");
    }

    #[test]
    fn long_text_is_cut_and_wrapped_to_the_width() {
        let cut = truncate(&"W".repeat(100), 100.0, 10.0);
        assert!(cut.ends_with('…') && metrics::width(&cut, 10.0) <= 100.0, "{cut}");
        assert_eq!(truncate("short", 100.0, 10.0), "short");
        let lines = wrap("one two three four five six seven\nnext", 60.0, 10.0);
        assert!(lines.len() > 2 && lines.iter().all(|l| metrics::width(l, 10.0) <= 60.0), "{lines:?}");
        assert_eq!(lines.last().map(String::as_str), Some("next"));
    }
}

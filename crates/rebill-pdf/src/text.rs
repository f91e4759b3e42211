//! Text for the page: the WinAnsi bytes of a string, truncating and wrapping to a width.

use crate::metrics::{self, Font};

/// `s` in the WinAnsi encoding of the base fonts (Windows-1252): Latin-1 as it is (é, ü, ñ, ß,
/// the no-break space, …), the other marks and letters of Windows-1252 at their codes (€, …,
/// quotes and dashes, Œ, Š, Ž, Ÿ, …), `?` for anything else (and for control characters).
pub fn encode(s: &str) -> Vec<u8> {
    s.chars()
        .map(|c| match c {
            ' '..='~' => c as u8,
            '\u{a0}'..='\u{ff}' => c as u32 as u8,
            '€' => 0x80,
            '‚' => 0x82,
            'ƒ' => 0x83,
            '„' => 0x84,
            '…' => 0x85,
            '†' => 0x86,
            '‡' => 0x87,
            'ˆ' => 0x88,
            '‰' => 0x89,
            'Š' => 0x8a,
            '‹' => 0x8b,
            'Œ' => 0x8c,
            'Ž' => 0x8e,
            '‘' => 0x91,
            '’' => 0x92,
            '“' => 0x93,
            '”' => 0x94,
            '•' => 0x95,
            '–' => 0x96,
            '—' => 0x97,
            '˜' => 0x98,
            '™' => 0x99,
            'š' => 0x9a,
            '›' => 0x9b,
            'œ' => 0x9c,
            'ž' => 0x9e,
            'Ÿ' => 0x9f,
            _ => b'?',
        })
        .collect()
}

/// `s` cut to fit `max` points in `font` at `size` (ending in `…` when cut). A text as wide
/// as `max` within rounding fits.
pub fn truncate(s: &str, max: f32, font: Font, size: f32) -> String {
    let max = max + 0.01;
    if metrics::width(s, font, size) <= max {
        return s.to_owned();
    }
    let ellipsis = metrics::width("…", font, size);
    let mut out = String::new();
    let mut used = 0.0;
    for c in s.chars() {
        let w = metrics::width(c.encode_utf8(&mut [0; 4]), font, size);
        if used + w + ellipsis > max {
            break;
        }
        used += w;
        out.push(c);
    }
    out.push('…');
    out
}

/// `s` broken into lines of at most `max` points in the regular font at `size`, at spaces (a
/// word longer than a line is truncated); line breaks of `s` are kept.
pub fn wrap(s: &str, max: f32, size: f32) -> Vec<String> {
    let mut lines = Vec::new();
    for paragraph in s.lines() {
        let mut line = String::new();
        for word in paragraph.split_whitespace() {
            let candidate = if line.is_empty() { word.to_owned() } else { format!("{line} {word}") };
            if metrics::width(&candidate, Font::Regular, size) <= max {
                line = candidate;
            } else {
                if !line.is_empty() {
                    lines.push(std::mem::take(&mut line));
                }
                line = truncate(word, max, Font::Regular, size);
            }
        }
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_keeps_windows_1252_and_marks_the_rest() {
        assert_eq!(encode("Café €5 – ok"), b"Caf\xe9 \x805 \x96 ok");
        assert_eq!(
            encode("Grüße, año, Français, Œuvre, Škoda"),
            b"Gr\xfc\xdfe, a\xf1o, Fran\xe7ais, \x8cuvre, \x8akoda"
        );
        assert_eq!(encode("1\u{a0}234"), b"1\xa0234");
        assert_eq!(encode("日本\u{7}\u{7f}\u{202f}"), b"?????");
    }

    #[test]
    fn long_text_is_cut_and_wrapped_to_the_width() {
        for font in [Font::Regular, Font::Bold] {
            let cut = truncate(&"W".repeat(100), 100.0, font, 10.0);
            assert!(cut.ends_with('…') && metrics::width(&cut, font, 10.0) <= 100.0, "{cut}");
        }
        assert_eq!(truncate("short", 100.0, Font::Regular, 10.0), "short");
        let lines = wrap("one two three four five six seven\nnext", 60.0, 10.0);
        assert!(lines.len() > 2 && lines.iter().all(|l| metrics::width(l, Font::Regular, 10.0) <= 60.0), "{lines:?}");
        assert_eq!(lines.last().map(String::as_str), Some("next"));
    }
}

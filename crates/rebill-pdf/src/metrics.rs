//! Glyph widths of Helvetica (thousandths of the font size, from its Adobe font metrics), for
//! right-aligned columns and wrapping. Helvetica-Bold is measured with the same table: its
//! digits and punctuation, all that is right-aligned, have the same widths.

/// Widths of the printable ASCII characters, from space (32) to tilde (126).
const ASCII: [u16; 95] = [
    278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278, // space … /
    556, 556, 556, 556, 556, 556, 556, 556, 556, 556, // 0 … 9
    278, 278, 584, 584, 584, 556, 1015, // : … @
    667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778, 667, 778, 722, 667, 611, 722, 667, 944,
    667, 667, 611, // A … Z
    278, 278, 278, 469, 556, 333, // [ … `
    556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556, 556, 556, 333, 500, 278, 556, 500, 722,
    500, 500, 500, // a … z
    334, 260, 334, 584, // { … ~
];

/// Width of a character other than printable ASCII (most accented letters are as wide as
/// their base letter; this is the width of the typical lowercase letter).
const OTHER: u16 = 556;

/// The width of `s` at `size` points.
pub fn width(s: &str, size: f32) -> f32 {
    let thousandths: u32 = s
        .chars()
        .map(|c| {
            let code = c as u32;
            if (32..127).contains(&code) { u32::from(ASCII[(code - 32) as usize]) } else { u32::from(OTHER) }
        })
        .sum();
    thousandths as f32 * size / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_and_punctuation_measure_as_helvetica() {
        assert_eq!(width("0", 10.0), 5.56);
        assert_eq!(width("1,234.56", 1000.0), (6.0 * 556.0 + 2.0 * 278.0));
        assert_eq!(width("-", 1000.0), 333.0);
        assert_eq!(width("Wi", 1000.0), 944.0 + 222.0);
        assert_eq!(width("é", 1000.0), 556.0);
    }
}

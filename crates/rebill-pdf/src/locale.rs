//! The languages an invoice PDF is written in, how a request names one (`Accept-Language`, or a
//! language's name as some released clients send it), and each language's dates and numbers.

use chrono::{DateTime, Datelike, Utc};

/// A language of the invoice PDF, with its date and number formats. A request for a language
/// without a translation gets [`Locale::EnUs`], as does a request for none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Locale {
    /// English (United States): `Jan 5, 2027`, `1,234.56`.
    #[default]
    EnUs,
    /// German (Germany): `5. Jan. 2027`, `1.234,56`.
    DeDe,
    /// French (France): `5 janv. 2027`, `1 234,56` (a no-break space between groups).
    FrFr,
    /// Spanish (Spain): `5 ene 2027`, `1234,56` and `12.345,67` (groups from five digits on).
    EsEs,
}

impl Locale {
    /// Every language, the default first.
    pub const ALL: [Locale; 4] = [Locale::EnUs, Locale::DeDe, Locale::FrFr, Locale::EsEs];

    /// The language tag (`de-DE`).
    pub fn tag(self) -> &'static str {
        match self {
            Locale::EnUs => "en-US",
            Locale::DeDe => "de-DE",
            Locale::FrFr => "fr-FR",
            Locale::EsEs => "es-ES",
        }
    }

    /// The language an `Accept-Language` value asks for, by RFC 9110: the entries in order of
    /// their quality (`q`, 1 when absent; the first listed wins a tie; `q=0` and entries with a
    /// malformed `q` are left out), each matched by its primary subtag (`fr`, `fr-CA` and
    /// `fr_FR` → French; `*` → the default). An entry may also be a language's English or own
    /// name (`German`, `Deutsch`), as the Go client sends them. The first entry with a
    /// translation decides; none (an unknown language, an empty or garbled value) →
    /// [`Locale::EnUs`].
    pub fn from_accept_language(value: &str) -> Locale {
        let mut best: Option<(u16, Locale)> = None;
        for entry in value.split(',') {
            let mut parts = entry.split(';');
            let range = parts.next().unwrap_or_default().trim();
            let mut quality = Some(1000);
            for parameter in parts {
                let (name, value) = parameter.split_once('=').unwrap_or((parameter, ""));
                if name.trim().eq_ignore_ascii_case("q") {
                    quality = parse_quality(value.trim());
                }
            }
            let (Some(q), Some(locale)) = (quality.filter(|q| *q > 0), Self::of_range(range)) else { continue };
            if best.is_none_or(|(best_q, _)| q > best_q) {
                best = Some((q, locale));
            }
        }
        best.map(|(_, locale)| locale).unwrap_or_default()
    }

    /// The language of one language range or name, if it has a translation.
    fn of_range(range: &str) -> Option<Locale> {
        if range == "*" {
            return Some(Locale::default());
        }
        let primary = range.split(['-', '_']).next().unwrap_or_default();
        let by_subtag = [("en", Locale::EnUs), ("de", Locale::DeDe), ("fr", Locale::FrFr), ("es", Locale::EsEs)];
        if let Some((_, locale)) = by_subtag.iter().find(|(subtag, _)| primary.eq_ignore_ascii_case(subtag)) {
            return Some(*locale);
        }
        let by_name = [
            ("English", Locale::EnUs),
            ("German", Locale::DeDe),
            ("Deutsch", Locale::DeDe),
            ("French", Locale::FrFr),
            ("Français", Locale::FrFr),
            ("Francais", Locale::FrFr),
            ("Spanish", Locale::EsEs),
            ("Español", Locale::EsEs),
            ("Espanol", Locale::EsEs),
        ];
        by_name.iter().find(|(name, _)| range.to_lowercase() == name.to_lowercase()).map(|(_, locale)| *locale)
    }

    /// A date as the invoice shows it (UTC): `Jan 5, 2027`, `5. Jan. 2027`, `5 janv. 2027`,
    /// `5 ene 2027`.
    pub fn format_date(self, at: DateTime<Utc>) -> String {
        let month = at.month0() as usize;
        let (day, year) = (at.day(), at.year());
        match self {
            Locale::EnUs => {
                const MONTHS: [&str; 12] =
                    ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
                format!("{} {day}, {year}", MONTHS[month])
            }
            Locale::DeDe => {
                const MONTHS: [&str; 12] =
                    ["Jan.", "Feb.", "März", "Apr.", "Mai", "Juni", "Juli", "Aug.", "Sept.", "Okt.", "Nov.", "Dez."];
                format!("{day}. {} {year}", MONTHS[month])
            }
            Locale::FrFr => {
                const MONTHS: [&str; 12] =
                    ["janv.", "févr.", "mars", "avr.", "mai", "juin", "juil.", "août", "sept.", "oct.", "nov.", "déc."];
                format!("{day} {} {year}", MONTHS[month])
            }
            Locale::EsEs => {
                const MONTHS: [&str; 12] =
                    ["ene", "feb", "mar", "abr", "may", "jun", "jul", "ago", "sept", "oct", "nov", "dic"];
                format!("{day} {} {year}", MONTHS[month])
            }
        }
    }

    /// An amount in cents with two decimals, the language's separators and a leading minus
    /// sign when negative: `-1,234.56`, `-1.234,56`.
    pub fn format_money(self, cents: i64) -> String {
        let abs = cents.unsigned_abs();
        let sign = if cents < 0 { "-" } else { "" };
        format!("{sign}{}{}{:02}", self.group(abs / 100), self.decimal_separator(), abs % 100)
    }

    /// A whole number with the language's group separators (`-1.000`).
    pub fn format_integer(self, n: i64) -> String {
        let sign = if n < 0 { "-" } else { "" };
        format!("{sign}{}", self.group(n.unsigned_abs()))
    }

    fn decimal_separator(self) -> char {
        match self {
            Locale::EnUs => '.',
            Locale::DeDe | Locale::FrFr | Locale::EsEs => ',',
        }
    }

    /// `n`'s digits in groups of three: `,` (English), `.` (German, Spanish) or a no-break space
    /// (French); Spanish groups only numbers of five digits or more.
    fn group(self, n: u64) -> String {
        let (separator, min_digits) = match self {
            Locale::EnUs => (',', 4),
            Locale::DeDe => ('.', 4),
            Locale::FrFr => ('\u{a0}', 4),
            Locale::EsEs => ('.', 5),
        };
        let digits = n.to_string();
        if digits.len() < min_digits {
            return digits;
        }
        let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
        for (i, digit) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                grouped.push(separator);
            }
            grouped.push(digit);
        }
        grouped
    }
}

/// A quality value (`0`, `0.5`, `1.000`) in thousandths; `None` when malformed or above 1.
fn parse_quality(value: &str) -> Option<u16> {
    let (whole, fraction) = value.split_once('.').unwrap_or((value, ""));
    if !matches!(whole, "0" | "1") || fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let thousandths: u16 = format!("{whole}{fraction:0<3}").parse().ok()?;
    (thousandths <= 1000).then_some(thousandths)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn negotiate(value: &str) -> &'static str {
        Locale::from_accept_language(value).tag()
    }

    #[test]
    fn language_tags_pick_their_language_and_regions_fall_back_to_it() {
        for (value, tag) in [
            ("de-DE", "de-DE"),
            ("de", "de-DE"),
            ("de-CH", "de-DE"),
            ("DE-de", "de-DE"),
            ("fr", "fr-FR"),
            ("fr-CA", "fr-FR"),
            ("fr_FR", "fr-FR"),
            ("es-MX", "es-ES"),
            ("es-419", "es-ES"),
            ("en-GB", "en-US"),
            ("en-US", "en-US"),
            ("en", "en-US"),
        ] {
            assert_eq!(negotiate(value), tag, "{value:?}");
        }
    }

    #[test]
    fn qualities_order_the_entries_and_the_first_listed_wins_a_tie() {
        for (value, tag) in [
            ("fr;q=0.5, de;q=0.9", "de-DE"),
            ("fr-CA,fr;q=0.9,en-US;q=0.8,en;q=0.7", "fr-FR"),
            ("en;q=0.1, es", "es-ES"),
            ("es, de", "es-ES"),
            ("de;q=0.8, fr;q=0.8", "de-DE"),
            ("de;Q=0.2, fr ; q=0.3", "fr-FR"),
            ("de;q=1.000, fr;q=0.999", "de-DE"),
            ("da-DK, de;q=0.5", "de-DE"),
            ("ja, zh-CN;q=0.9, es;q=0.1", "es-ES"),
        ] {
            assert_eq!(negotiate(value), tag, "{value:?}");
        }
    }

    #[test]
    fn refused_malformed_and_unknown_entries_leave_the_default() {
        for value in [
            "",
            "   ",
            "*",
            "de;q=0",
            "de;q=0.000, *;q=0.1",
            "de;q=2",
            "de;q=abc",
            "de;q=0.1234",
            "de;q=-1",
            "ja-JP",
            "Danish",
            "Klingon, tlh",
            ",,;;==",
            "\u{0}\u{7f}ü",
            "*, de;q=0.5",
        ] {
            assert_eq!(negotiate(value), "en-US", "{value:?}");
        }
        assert_eq!(negotiate("de;q=0, fr"), "fr-FR", "an excluded language is skipped");
        assert_eq!(negotiate("de;q=oops, fr;q=0.1"), "fr-FR", "an entry with a malformed quality is skipped");
    }

    #[test]
    fn language_names_pick_their_language_and_unknown_names_english() {
        for (value, tag) in [
            ("English", "en-US"),
            ("German", "de-DE"),
            ("german", "de-DE"),
            ("Deutsch", "de-DE"),
            ("French", "fr-FR"),
            ("Français", "fr-FR"),
            ("Spanish", "es-ES"),
            ("ESPAÑOL", "es-ES"),
            ("Danish", "en-US"),
            ("Hindi", "en-US"),
            ("Japanese", "en-US"),
            ("Turkish", "en-US"),
        ] {
            assert_eq!(negotiate(value), tag, "{value:?}");
        }
    }

    #[test]
    fn qualities_parse_in_thousandths() {
        assert_eq!(parse_quality("1"), Some(1000));
        assert_eq!(parse_quality("1."), Some(1000));
        assert_eq!(parse_quality("0.5"), Some(500));
        assert_eq!(parse_quality("0.05"), Some(50));
        assert_eq!(parse_quality("0.001"), Some(1));
        assert_eq!(parse_quality("0"), Some(0));
        assert_eq!(parse_quality("1.001"), None);
        assert_eq!(parse_quality("1.5"), None);
        assert_eq!(parse_quality(".5"), None);
        assert_eq!(parse_quality(""), None);
        assert_eq!(parse_quality("0.5x"), None);
    }

    #[test]
    fn dates_have_each_languages_month_names_and_order() {
        let jan = Utc.with_ymd_and_hms(2027, 1, 5, 23, 59, 0).single().expect("date");
        let mar = Utc.with_ymd_and_hms(2027, 3, 1, 0, 0, 0).single().expect("date");
        let dec = Utc.with_ymd_and_hms(2027, 12, 31, 0, 0, 0).single().expect("date");
        let cases = [
            (Locale::EnUs, ["Jan 5, 2027", "Mar 1, 2027", "Dec 31, 2027"]),
            (Locale::DeDe, ["5. Jan. 2027", "1. März 2027", "31. Dez. 2027"]),
            (Locale::FrFr, ["5 janv. 2027", "1 mars 2027", "31 déc. 2027"]),
            (Locale::EsEs, ["5 ene 2027", "1 mar 2027", "31 dic 2027"]),
        ];
        for (locale, shown) in cases {
            assert_eq!([jan, mar, dec].map(|d| locale.format_date(d)), shown, "{locale:?}");
        }
    }

    #[test]
    fn amounts_have_each_languages_separators() {
        let cases: [(i64, [&str; 4]); 7] = [
            (0, ["0.00", "0,00", "0,00", "0,00"]),
            (5, ["0.05", "0,05", "0,05", "0,05"]),
            (-5, ["-0.05", "-0,05", "-0,05", "-0,05"]),
            (99_999, ["999.99", "999,99", "999,99", "999,99"]),
            (123_456, ["1,234.56", "1.234,56", "1\u{a0}234,56", "1234,56"]),
            (-1_234_567, ["-12,345.67", "-12.345,67", "-12\u{a0}345,67", "-12.345,67"]),
            (100_000_000, ["1,000,000.00", "1.000.000,00", "1\u{a0}000\u{a0}000,00", "1.000.000,00"]),
        ];
        for (cents, shown) in cases {
            assert_eq!(Locale::ALL.map(|l| l.format_money(cents)), shown, "{cents}");
        }
        assert_eq!(Locale::EnUs.format_money(i64::MIN), "-92,233,720,368,547,758.08");
        assert_eq!(Locale::DeDe.format_integer(-1000), "-1.000");
        assert_eq!(Locale::EsEs.format_integer(1000), "1000");
        assert_eq!(Locale::EnUs.format_integer(i64::MIN), "-9,223,372,036,854,775,808");
    }

    proptest! {
        #[test]
        fn any_header_value_negotiates_without_panicking(value in any::<String>()) {
            let locale = Locale::from_accept_language(&value);
            prop_assert!(Locale::ALL.contains(&locale));
        }

        #[test]
        fn amounts_read_back_as_their_cents(cents in any::<i64>()) {
            for locale in Locale::ALL {
                let shown = locale.format_money(cents);
                let digits: String = shown.chars().filter(|c| c.is_ascii_digit() || *c == '-').collect();
                prop_assert_eq!(digits.parse::<i128>().ok(), Some(i128::from(cents)), "{}", shown);
            }
        }
    }
}

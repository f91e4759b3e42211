//! Instants as people and clients write them (ISO 8601 dates and date-times), as UTC epoch
//! seconds: the times of list filters, terminations and postponements, sunsets of API versions
//! and the CLI's clock.

use chrono::{DateTime, NaiveDate, Utc};

/// An ISO 8601 date-time (any offset, converted to UTC; without an offset it is UTC) or date
/// (midnight UTC), as epoch seconds. A space in the offset's place (`2027-01-10T00:00:00 02:00`)
/// is read as `+`: clients that put a date-time into a query unescaped send `+` there, and a
/// query's `+` decodes to a space.
pub fn parse_instant(text: &str) -> Option<i64> {
    let unescaped = match text.len().checked_sub(6).and_then(|at| text.split_at_checked(at)) {
        Some((head, offset)) if head.contains('T') && offset.starts_with(' ') => format!("{head}+{}", &offset[1..]),
        _ => text.to_owned(),
    };
    if let Ok(t) = DateTime::parse_from_rfc3339(&unescaped) {
        return Some(t.with_timezone(&Utc).timestamp());
    }
    if let Ok(t) = chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f") {
        return Some(t.and_utc().timestamp());
    }
    let date = NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
    Some(date.and_hms_opt(0, 0, 0)?.and_utc().timestamp())
}

#[cfg(test)]
mod tests {
    use super::parse_instant;

    #[test]
    fn dates_date_times_and_offsets_read_as_utc() {
        assert_eq!(parse_instant("2027-01-10"), Some(1_799_539_200));
        assert_eq!(parse_instant("2027-01-10T00:00:00Z"), Some(1_799_539_200));
        assert_eq!(parse_instant("2027-01-10T00:00:00"), Some(1_799_539_200));
        assert_eq!(parse_instant("2027-01-10T02:00:00+02:00"), Some(1_799_539_200));
        assert_eq!(parse_instant("2027-01-10T02:00:00 02:00"), Some(1_799_539_200), "a query's + read as space");
        assert_eq!(parse_instant("2027-01-10T00:00:00.5Z"), Some(1_799_539_200));
        for bad in ["", "tomorrow", "2027-13-01", "2027-01-10T25:00:00Z", "1799539200"] {
            assert_eq!(parse_instant(bad), None, "{bad}");
        }
    }
}

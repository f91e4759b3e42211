//! Billing intervals and period arithmetic.
//!
//! A subscription is billed in periods laid out from an *anchor* instant: the `n`-th boundary is
//! the anchor plus `n` intervals, always computed from the anchor itself (never by stepping from
//! the previous boundary), so month-end anchors keep their day:
//!
//! - **months**: the calendar month advances by `n × length`, the day of month is the anchor's day
//!   clamped to the last day of the target month, the time of day is kept (Jan 31 → Feb 28/29 →
//!   Mar 31 → Apr 30);
//! - **days**: exact 24-hour steps (`n × length × 86 400` seconds; times are UTC, so there is no
//!   daylight-saving shift).
//!
//! Every boundary is strictly later than the one before it. A period is half-open:
//! `[start, end)`.
//!
//! # How to use
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use rebill_billing::period::{Interval, Period};
//!
//! let anchor = Utc.with_ymd_and_hms(2024, 1, 31, 9, 30, 0).unwrap();
//! let monthly = Interval::months(1);
//! assert_eq!(monthly.boundary(anchor, 1).unwrap(), Utc.with_ymd_and_hms(2024, 2, 29, 9, 30, 0).unwrap());
//! assert_eq!(monthly.boundary(anchor, 2).unwrap(), Utc.with_ymd_and_hms(2024, 3, 31, 9, 30, 0).unwrap());
//!
//! // The period an instant falls in, and its number (0 = the period starting at the anchor).
//! let at = Utc.with_ymd_and_hms(2024, 3, 15, 0, 0, 0).unwrap();
//! let (index, period) = monthly.period_containing(anchor, at).unwrap();
//! assert_eq!(index, 1);
//! assert_eq!(period, Period::new(
//!     Utc.with_ymd_and_hms(2024, 2, 29, 9, 30, 0).unwrap(),
//!     Utc.with_ymd_and_hms(2024, 3, 31, 9, 30, 0).unwrap(),
//! ).unwrap());
//!
//! // A 14-day trial ends exactly 14 × 24 hours later.
//! let trial_end = Interval::days(14).add_to(anchor).unwrap();
//! assert_eq!(trial_end, Utc.with_ymd_and_hms(2024, 2, 14, 9, 30, 0).unwrap());
//!
//! // A 12-cycle term ends after the 12th period.
//! assert_eq!(monthly.term_end(anchor, 12).unwrap(), Utc.with_ymd_and_hms(2025, 1, 31, 9, 30, 0).unwrap());
//! ```

use chrono::{DateTime, Datelike, NaiveDate, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

/// Seconds in one day step.
const SECONDS_PER_DAY: i64 = 86_400;

/// Why a period computation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PeriodError {
    /// An interval must be at least one day or one month long.
    #[error("an interval length must be at least 1")]
    ZeroLength,
    /// The result lies outside the representable date range.
    #[error("date out of range")]
    OutOfRange,
    /// The instant lies before the anchor, so no period of the schedule contains it.
    #[error("instant before the anchor of the billing schedule")]
    BeforeAnchor,
    /// A period must end after it starts.
    #[error("a period must end after it starts")]
    EmptyPeriod,
}

/// The unit of an [`Interval`]; the names are the schema's `interval_unit` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntervalUnit {
    /// Exact 24-hour days.
    Days,
    /// Calendar months, clamped to the month's last day.
    Months,
}

impl IntervalUnit {
    /// The schema name (`days` or `months`).
    pub fn name(self) -> &'static str {
        match self {
            IntervalUnit::Days => "days",
            IntervalUnit::Months => "months",
        }
    }

    /// Parses a schema name; `None` for anything else.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "days" => Some(IntervalUnit::Days),
            "months" => Some(IntervalUnit::Months),
            _ => None,
        }
    }
}

/// A billing (or trial) interval: `length` units, e.g. 1 month, 12 months, 7 days.
///
/// A zero length is representable (it arrives from input) but every computation refuses it
/// with [`PeriodError::ZeroLength`]; use [`Interval::new`] to validate up front.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Interval {
    /// Number of units, at least 1.
    pub length: u32,
    /// Days or months.
    pub unit: IntervalUnit,
}

impl Interval {
    /// A validated interval.
    pub fn new(length: u32, unit: IntervalUnit) -> Result<Self, PeriodError> {
        if length == 0 {
            return Err(PeriodError::ZeroLength);
        }
        Ok(Self { length, unit })
    }

    /// `length` days (not validated).
    pub const fn days(length: u32) -> Self {
        Self { length, unit: IntervalUnit::Days }
    }

    /// `length` months (not validated).
    pub const fn months(length: u32) -> Self {
        Self { length, unit: IntervalUnit::Months }
    }

    /// The `n`-th boundary of the schedule anchored at `anchor` (`n = 0` is the anchor itself).
    pub fn boundary(&self, anchor: DateTime<Utc>, n: u32) -> Result<DateTime<Utc>, PeriodError> {
        self.signed_boundary(anchor, i64::from(n))
    }

    /// The boundary `n` intervals from the anchor, `n` possibly negative.
    fn signed_boundary(&self, anchor: DateTime<Utc>, n: i64) -> Result<DateTime<Utc>, PeriodError> {
        if self.length == 0 {
            return Err(PeriodError::ZeroLength);
        }
        let steps = n.checked_mul(i64::from(self.length)).ok_or(PeriodError::OutOfRange)?;
        match self.unit {
            IntervalUnit::Days => {
                let seconds = steps.checked_mul(SECONDS_PER_DAY).ok_or(PeriodError::OutOfRange)?;
                let delta = TimeDelta::try_seconds(seconds).ok_or(PeriodError::OutOfRange)?;
                anchor.checked_add_signed(delta).ok_or(PeriodError::OutOfRange)
            }
            IntervalUnit::Months => add_months(anchor, steps).ok_or(PeriodError::OutOfRange),
        }
    }

    /// The instant one interval after `at` (a trial end, the end of a period starting at `at`).
    pub fn add_to(&self, at: DateTime<Utc>) -> Result<DateTime<Utc>, PeriodError> {
        self.boundary(at, 1)
    }

    /// The period of the schedule anchored at `anchor` that contains `at`, with its number
    /// (0 = the period starting at the anchor). `at` on a boundary belongs to the period that
    /// starts there.
    pub fn period_containing(&self, anchor: DateTime<Utc>, at: DateTime<Utc>) -> Result<(u32, Period), PeriodError> {
        if self.length == 0 {
            return Err(PeriodError::ZeroLength);
        }
        if at < anchor {
            return Err(PeriodError::BeforeAnchor);
        }
        let length = i64::from(self.length);
        // A close estimate, corrected below by at most a step or two.
        let estimate = match self.unit {
            IntervalUnit::Days => (at - anchor).num_seconds() / (length * SECONDS_PER_DAY),
            IntervalUnit::Months => {
                let months = (i64::from(at.year()) - i64::from(anchor.year())) * 12 + i64::from(at.month())
                    - i64::from(anchor.month());
                (months / length).max(0)
            }
        };
        let mut k = u32::try_from(estimate).map_err(|_| PeriodError::OutOfRange)?;
        while k > 0 && self.boundary(anchor, k)? > at {
            k -= 1;
        }
        loop {
            let next = k.checked_add(1).ok_or(PeriodError::OutOfRange)?;
            if self.boundary(anchor, next)? <= at {
                k = next;
            } else {
                break;
            }
        }
        let next = k.checked_add(1).ok_or(PeriodError::OutOfRange)?;
        Ok((k, Period { start: self.boundary(anchor, k)?, end: self.boundary(anchor, next)? }))
    }

    /// The first boundary of the schedule strictly after `at` (`at` before the anchor gives the
    /// anchor).
    pub fn next_boundary_after(&self, anchor: DateTime<Utc>, at: DateTime<Utc>) -> Result<DateTime<Utc>, PeriodError> {
        if at < anchor {
            if self.length == 0 {
                return Err(PeriodError::ZeroLength);
            }
            return Ok(anchor);
        }
        Ok(self.period_containing(anchor, at)?.1.end)
    }

    /// When a term of `cycles` periods starting at the anchor ends, if nothing (pause,
    /// postponement, plan change) moves the schedule in between.
    pub fn term_end(&self, anchor: DateTime<Utc>, cycles: u32) -> Result<DateTime<Utc>, PeriodError> {
        self.boundary(anchor, cycles)
    }

    /// The periods of the schedule anchored at `anchor`, in order; ends when dates run out of
    /// range (or at once for a zero-length interval).
    pub fn periods(&self, anchor: DateTime<Utc>) -> Periods {
        Periods { interval: *self, anchor, next: 0 }
    }
}

/// Iterator over the periods of a schedule; see [`Interval::periods`].
#[derive(Debug, Clone)]
pub struct Periods {
    interval: Interval,
    anchor: DateTime<Utc>,
    next: u32,
}

impl Iterator for Periods {
    type Item = Period;

    fn next(&mut self) -> Option<Period> {
        let after = self.next.checked_add(1)?;
        let start = self.interval.boundary(self.anchor, self.next).ok()?;
        let end = self.interval.boundary(self.anchor, after).ok()?;
        self.next = after;
        Some(Period { start, end })
    }
}

/// A half-open span of time `[start, end)` with `start < end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Period {
    /// First instant of the period.
    pub start: DateTime<Utc>,
    /// First instant after the period.
    pub end: DateTime<Utc>,
}

impl Period {
    /// A period; refuses `end <= start`.
    pub fn new(start: DateTime<Utc>, end: DateTime<Utc>) -> Result<Self, PeriodError> {
        if end <= start {
            return Err(PeriodError::EmptyPeriod);
        }
        Ok(Self { start, end })
    }

    /// Whether `at` lies in `[start, end)`.
    pub fn contains(&self, at: DateTime<Utc>) -> bool {
        self.start <= at && at < self.end
    }

    /// Whether `other` lies entirely inside this period.
    pub fn covers(&self, other: &Period) -> bool {
        self.start <= other.start && other.end <= self.end
    }

    /// Length in whole seconds (sub-second parts are ignored).
    pub fn seconds(&self) -> i64 {
        (self.end - self.start).num_seconds()
    }
}

/// The trial end for a trial of `trial` starting at `start` (the same arithmetic as a period).
pub fn trial_end(start: DateTime<Utc>, trial: Interval) -> Result<DateTime<Utc>, PeriodError> {
    trial.add_to(start)
}

/// `anchor` moved by `months` calendar months, day clamped to the target month's end.
fn add_months(anchor: DateTime<Utc>, months: i64) -> Option<DateTime<Utc>> {
    let naive = anchor.naive_utc();
    let date = naive.date();
    let total = i64::from(date.year()).checked_mul(12)?.checked_add(i64::from(date.month0()))?.checked_add(months)?;
    let year = i32::try_from(total.div_euclid(12)).ok()?;
    let month = u32::try_from(total.rem_euclid(12)).ok()? + 1;
    let day = date.day().min(days_in_month(year, month)?);
    let target = NaiveDate::from_ymd_opt(year, month, day)?;
    Some(target.and_time(naive.time()).and_utc())
}

/// Number of days in `month` (1–12) of `year`.
fn days_in_month(year: i32, month: u32) -> Option<u32> {
    let first_of_next = if month == 12 {
        NaiveDate::from_ymd_opt(year.checked_add(1)?, 1, 1)?
    } else {
        NaiveDate::from_ymd_opt(year, month + 1, 1)?
    };
    Some(first_of_next.pred_opt()?.day())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn t(y: i32, m: u32, d: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, d, 12, 0, 0).single().expect("valid date")
    }

    #[test]
    fn month_end_anchor_keeps_its_day() {
        let monthly = Interval::months(1);
        let anchor = t(2023, 1, 31);
        let got: Vec<_> = (0..6).map(|n| monthly.boundary(anchor, n).expect("in range")).collect();
        assert_eq!(
            got,
            vec![t(2023, 1, 31), t(2023, 2, 28), t(2023, 3, 31), t(2023, 4, 30), t(2023, 5, 31), t(2023, 6, 30)]
        );
        // Leap year.
        assert_eq!(monthly.boundary(t(2024, 1, 31), 1).expect("in range"), t(2024, 2, 29));
        // Day 30 anchors: February clamps, March comes back to 30.
        assert_eq!(monthly.boundary(t(2023, 1, 30), 1).expect("in range"), t(2023, 2, 28));
        assert_eq!(monthly.boundary(t(2023, 1, 30), 2).expect("in range"), t(2023, 3, 30));
    }

    #[test]
    fn yearly_from_leap_day() {
        let yearly = Interval::months(12);
        let anchor = t(2024, 2, 29);
        assert_eq!(yearly.boundary(anchor, 1).expect("in range"), t(2025, 2, 28));
        assert_eq!(yearly.boundary(anchor, 2).expect("in range"), t(2026, 2, 28));
        assert_eq!(yearly.boundary(anchor, 4).expect("in range"), t(2028, 2, 29));
    }

    #[test]
    fn days_are_exact_24_hour_steps() {
        let weekly = Interval::days(7);
        let anchor = Utc.with_ymd_and_hms(2024, 3, 8, 23, 15, 7).single().expect("valid");
        let b = weekly.boundary(anchor, 3).expect("in range");
        assert_eq!((b - anchor).num_seconds(), 21 * 86_400);
        assert_eq!(b, Utc.with_ymd_and_hms(2024, 3, 29, 23, 15, 7).single().expect("valid"));
    }

    #[test]
    fn containing_period_and_boundaries() {
        let monthly = Interval::months(1);
        let anchor = t(2023, 1, 31);
        let (index, period) = monthly.period_containing(anchor, t(2023, 3, 31)).expect("after anchor");
        assert_eq!(index, 2);
        assert_eq!(period, Period { start: t(2023, 3, 31), end: t(2023, 4, 30) });
        let (index, _) = monthly.period_containing(anchor, t(2023, 3, 30)).expect("after anchor");
        assert_eq!(index, 1);
        assert_eq!(monthly.period_containing(anchor, t(2023, 1, 1)), Err(PeriodError::BeforeAnchor));
        assert_eq!(monthly.next_boundary_after(anchor, t(2023, 2, 28)).expect("ok"), t(2023, 3, 31));
        assert_eq!(monthly.next_boundary_after(anchor, t(2022, 2, 28)).expect("ok"), anchor);
    }

    #[test]
    fn zero_length_and_out_of_range_are_errors() {
        assert_eq!(Interval::new(0, IntervalUnit::Days), Err(PeriodError::ZeroLength));
        assert_eq!(Interval::months(0).boundary(t(2024, 1, 1), 1), Err(PeriodError::ZeroLength));
        assert_eq!(Interval::months(u32::MAX).boundary(t(2024, 1, 1), u32::MAX), Err(PeriodError::OutOfRange));
        assert_eq!(Interval::days(u32::MAX).boundary(t(2024, 1, 1), u32::MAX), Err(PeriodError::OutOfRange));
        assert_eq!(Interval::months(0).periods(t(2024, 1, 1)).next(), None);
    }

    #[test]
    fn periods_iterate_and_names_round_trip() {
        let periods: Vec<_> = Interval::days(7).periods(t(2024, 1, 1)).take(3).collect();
        assert_eq!(periods[2], Period { start: t(2024, 1, 15), end: t(2024, 1, 22) });
        for unit in [IntervalUnit::Days, IntervalUnit::Months] {
            assert_eq!(IntervalUnit::from_name(unit.name()), Some(unit));
        }
        assert_eq!(trial_end(t(2024, 1, 1), Interval::days(14)).expect("ok"), t(2024, 1, 15));
        assert!(Period::new(t(2024, 1, 2), t(2024, 1, 1)).is_err());
    }

    fn arb_anchor() -> impl Strategy<Value = DateTime<Utc>> {
        // 1970 .. 2100
        (0i64..4_102_444_800).prop_map(|s| DateTime::from_timestamp(s, 0).unwrap_or_default())
    }

    fn arb_interval() -> impl Strategy<Value = Interval> {
        prop_oneof![(1u32..400).prop_map(Interval::days), (1u32..36).prop_map(Interval::months)]
    }

    proptest! {
        #[test]
        fn boundaries_strictly_increase(anchor in arb_anchor(), interval in arb_interval(), n in 0u32..200) {
            let a = interval.boundary(anchor, n).expect("in range");
            let b = interval.boundary(anchor, n + 1).expect("in range");
            prop_assert!(a < b);
            // A boundary is never further than one interval's worth of days/months from the
            // unclamped value: at most 3 days short for months.
            if interval.unit == IntervalUnit::Months {
                prop_assert!((b - a).num_days() >= 28 * i64::from(interval.length) - 3);
            } else {
                prop_assert_eq!((b - a).num_seconds(), i64::from(interval.length) * 86_400);
            }
        }

        #[test]
        fn containing_period_contains(anchor in arb_anchor(), interval in arb_interval(), offset in 0i64..(40 * 366 * 86_400)) {
            let at = anchor + TimeDelta::seconds(offset);
            let (index, period) = interval.period_containing(anchor, at).expect("after anchor");
            prop_assert!(period.contains(at));
            prop_assert_eq!(period.start, interval.boundary(anchor, index).expect("in range"));
            prop_assert_eq!(interval.next_boundary_after(anchor, at).expect("in range"), period.end);
        }
    }
}

//! Prorating amounts over partial periods, in integer cents, by seconds.
//!
//! Rounding is half-up on the magnitude (half away from zero), so a credit is always the exact
//! negative of the matching charge. Two ways of cutting an amount are offered:
//!
//! - [`share`] / [`share_of_period`]: the share for a part, rounded once. Two shares of
//!   complementary parts add up to the whole or are at most 1 cent off (both halves of an exact
//!   `x.5` round up).
//! - [`span_amount`]: the amount of a span measured from the period start, as the difference of
//!   the rounded amounts "due up to" its two ends. Spans that touch the period start or end are
//!   still rounded once, and the spans of any partition of a period add up to the whole **exactly**.
//!   Line items use this one, so a charge for `[start, t)` plus a charge for `[t, end)` is the full
//!   price, and a full refund after a mid-period change nets to zero.
//!
//! # How to use
//!
//! ```
//! use chrono::{TimeZone, Utc};
//! use rebill_billing::period::Period;
//! use rebill_billing::proration::{share, span_amount, split};
//!
//! // January has 31 days; a change on the 16th leaves 16 of them.
//! let jan = Period::new(
//!     Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap(),
//!     Utc.with_ymd_and_hms(2025, 2, 1, 0, 0, 0).unwrap(),
//! ).unwrap();
//! let at = Utc.with_ymd_and_hms(2025, 1, 16, 0, 0, 0).unwrap();
//!
//! // The rest of January at $30.00 a month: 3000 × 16/31 = 1548.39.
//! assert_eq!(span_amount(3000, jan, Period::new(at, jan.end).unwrap()).unwrap(), 1548);
//!
//! // Splitting a period is exact.
//! let (before, after) = split(1001, jan, at).unwrap();
//! assert_eq!(before + after, 1001);
//! assert_eq!(after, span_amount(1001, jan, Period::new(at, jan.end).unwrap()).unwrap());
//!
//! // A plain share, rounded once half-up: 1001 × 1/2 = 500.5 → 501.
//! assert_eq!(share(1001, 1, 2).unwrap(), 501);
//! ```

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::period::Period;

/// Why a proration could not be computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProrationError {
    /// The whole must be longer than zero seconds.
    #[error("cannot prorate over an empty period")]
    EmptyPeriod,
    /// The part must lie within the whole (`0 ≤ part ≤ whole`, span inside the period).
    #[error("the prorated span lies outside its period")]
    OutsidePeriod,
    /// The result does not fit in 64-bit cents.
    #[error("amount out of range")]
    Overflow,
}

/// The fraction of a period a line item pays for, in seconds (`part / whole`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Proration {
    /// Seconds paid for.
    pub part_seconds: i64,
    /// Seconds in the whole period.
    pub whole_seconds: i64,
}

impl Proration {
    /// The fraction as a float, for display only (the adjustment's `proration_rate`); amounts are
    /// never computed from it.
    pub fn rate(&self) -> f64 {
        if self.whole_seconds == 0 {
            return 0.0;
        }
        // Display only: the precision of a float is enough for a rate.
        self.part_seconds as f64 / self.whole_seconds as f64
    }
}

/// `amount × part / whole`, rounded once, half-up on the magnitude.
///
/// Requires `whole > 0` and `0 ≤ part ≤ whole`; the result then lies between 0 and `amount`.
pub fn share(amount: i64, part: i64, whole: i64) -> Result<i64, ProrationError> {
    if whole <= 0 {
        return Err(ProrationError::EmptyPeriod);
    }
    if part < 0 || part > whole {
        return Err(ProrationError::OutsidePeriod);
    }
    Ok(round_div(i128::from(amount) * i128::from(part), i128::from(whole)))
}

/// The share of `amount` (the price of the whole `period`) for `span`, by seconds, rounded once.
pub fn share_of_period(amount: i64, period: Period, span: Period) -> Result<i64, ProrationError> {
    if !period.covers(&span) {
        return Err(ProrationError::OutsidePeriod);
    }
    share(amount, span.seconds(), period.seconds())
}

/// The part of `amount` due for `[period.start, at)`, rounded half-up (clamped to the period).
pub fn due_until(amount: i64, period: Period, at: DateTime<Utc>) -> Result<i64, ProrationError> {
    let at = at.clamp(period.start, period.end);
    share(amount, Period { start: period.start, end: at }.seconds(), period.seconds())
}

/// The amount of `span` within `period` (priced `amount` in full) as
/// `due_until(span.end) − due_until(span.start)`: spans partitioning a period add up to `amount`
/// exactly; each is within 1 cent of the exact fraction and rounded once when it touches the
/// period's start or end.
pub fn span_amount(amount: i64, period: Period, span: Period) -> Result<i64, ProrationError> {
    if !period.covers(&span) {
        return Err(ProrationError::OutsidePeriod);
    }
    let to = due_until(amount, period, span.end)?;
    let from = due_until(amount, period, span.start)?;
    to.checked_sub(from).ok_or(ProrationError::Overflow)
}

/// `amount` cut at `at` into the parts for `[start, at)` and `[at, end)`; they add up exactly.
pub fn split(amount: i64, period: Period, at: DateTime<Utc>) -> Result<(i64, i64), ProrationError> {
    if !(period.start <= at && at <= period.end) {
        return Err(ProrationError::OutsidePeriod);
    }
    let before = due_until(amount, period, at)?;
    Ok((before, amount.checked_sub(before).ok_or(ProrationError::Overflow)?))
}

/// `n / d` rounded half away from zero, `d > 0`; the quotient of a share always fits in i64
/// because `|n / d| ≤ |amount|`.
fn round_div(n: i128, d: i128) -> i64 {
    let q = n / d;
    let r = n % d;
    let q = if 2 * r.abs() >= d { q + n.signum() } else { q };
    // |q| ≤ |amount| ≤ i64::MAX, so the conversion cannot fail; saturate rather than panic.
    i64::try_from(q).unwrap_or(if q < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeDelta, TimeZone};
    use proptest::prelude::*;

    fn t(y: i32, m: u32, d: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, d, 0, 0, 0).single().expect("valid date")
    }

    #[test]
    fn rounding_is_half_up_on_the_magnitude() {
        assert_eq!(share(1001, 1, 2), Ok(501));
        assert_eq!(share(-1001, 1, 2), Ok(-501));
        assert_eq!(share(1000, 1, 3), Ok(333));
        assert_eq!(share(2000, 1, 3), Ok(667));
        assert_eq!(share(1000, 0, 3), Ok(0));
        assert_eq!(share(1000, 3, 3), Ok(1000));
        assert_eq!(share(i64::MAX, 1, 1), Ok(i64::MAX));
        assert_eq!(share(100, 1, 0), Err(ProrationError::EmptyPeriod));
        assert_eq!(share(100, 2, 1), Err(ProrationError::OutsidePeriod));
        assert_eq!(share(100, -1, 1), Err(ProrationError::OutsidePeriod));
    }

    #[test]
    fn exact_span_cents() {
        let feb = Period { start: t(2025, 2, 1), end: t(2025, 3, 1) }; // 28 days
        let rest = Period { start: t(2025, 2, 8), end: feb.end };
        assert_eq!(span_amount(1000, feb, rest), Ok(750));
        assert_eq!(
            span_amount(1000, feb, Period { start: t(2025, 3, 1), end: t(2025, 3, 2) }),
            Err(ProrationError::OutsidePeriod)
        );
        // Share of a period vs the exact span amount: both halves of 1001 round up with share.
        let mid = feb.start + TimeDelta::days(14);
        let first = Period { start: feb.start, end: mid };
        let second = Period { start: mid, end: feb.end };
        assert_eq!(share_of_period(1001, feb, first), Ok(501));
        assert_eq!(share_of_period(1001, feb, second), Ok(501));
        assert_eq!(span_amount(1001, feb, first), Ok(501));
        assert_eq!(span_amount(1001, feb, second), Ok(500));
        assert!((Proration { part_seconds: 1, whole_seconds: 4 }.rate() - 0.25).abs() < 1e-12);
    }

    fn arb_case() -> impl Strategy<Value = (i64, Period, i64, i64)> {
        (-10_000_000_000i64..10_000_000_000, 1i64..(400 * 86_400), 0u32..=1_000_000, 0u32..=1_000_000).prop_map(
            |(amount, len, a, b)| {
                let start = t(2024, 1, 1);
                let period = Period { start, end: start + TimeDelta::seconds(len) };
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let x = len * i64::from(lo) / 1_000_000;
                let y = len * i64::from(hi) / 1_000_000;
                (amount, period, x, y)
            },
        )
    }

    proptest! {
        #[test]
        fn share_is_bounded_and_close((amount, period, x, _y) in arb_case()) {
            let whole = period.seconds();
            let s = share(amount, x, whole).expect("valid");
            // Between 0 and the amount.
            prop_assert!(s.abs() <= amount.abs());
            prop_assert!(s == 0 || s.signum() == amount.signum());
            // Within half a cent of the exact value: |s·whole − amount·x| ≤ whole/2.
            let err = (i128::from(s) * i128::from(whole) - i128::from(amount) * i128::from(x)).abs();
            prop_assert!(2 * err <= i128::from(whole));
        }

        #[test]
        fn credit_and_charge_of_a_split_period_are_within_a_cent((amount, period, x, _y) in arb_case()) {
            let at = period.start + TimeDelta::seconds(x);
            let whole = period.seconds();
            let first = share(amount, x, whole).expect("valid");
            let second = share(amount, whole - x, whole).expect("valid");
            prop_assert!((first + second - amount).abs() <= 1);
            let (before, after) = split(amount, period, at).expect("inside");
            prop_assert_eq!(before + after, amount);
            prop_assert_eq!(before, first);
            prop_assert!((after - second).abs() <= 1);
        }

        #[test]
        fn spans_partition_exactly((amount, period, x, y) in arb_case()) {
            let a = period.start + TimeDelta::seconds(x);
            let b = period.start + TimeDelta::seconds(y);
            let parts = [
                Period { start: period.start, end: a },
                Period { start: a, end: b },
                Period { start: b, end: period.end },
            ];
            let mut sum = 0i64;
            for part in parts {
                let v = span_amount(amount, period, part).expect("inside");
                // Each span within 1 cent of its exact fraction.
                let err = (i128::from(v) * i128::from(period.seconds())
                    - i128::from(amount) * i128::from(part.seconds())).abs();
                prop_assert!(err <= i128::from(period.seconds()));
                sum += v;
            }
            prop_assert_eq!(sum, amount);
        }
    }
}

//! When a transaction settles, and how money is given back: a void or a refund.
//!
//! # Settlement
//!
//! Gateways settle once a day: every transaction approved before the daily cut-off is sent to
//! the banks at the cut-off, and from then on money has moved. rebill's cut-off is 00:00:00 UTC,
//! so a transaction made at epoch second `t` (on the site's clock, so a sandbox clock moved on
//! settles its transactions too) settles at the first midnight UTC strictly after `t`
//! ([`settles_at`]): one made at 23:59:59 settles a second later, one made at 00:00:00 a whole day
//! later. It is settled from that instant on ([`is_settled`]).
//!
//! # Giving money back
//!
//! Before settlement no money has moved, so giving back the whole transaction cancels it: a
//! **void** (the transaction becomes `voided`, nothing is left to give back). After settlement,
//! and for any part of a transaction, money goes back by a **refund**, a transaction of its own;
//! refunds add up until the whole amount has been given back. [`give_back`] takes that decision,
//! and [`voidable`] and [`refundable`] are the flags a transaction shows, taken from the same
//! decision.

use crate::errors::{TransactionErrorInfo, lookup_or_unknown};

/// Seconds in a day: the settlement cut-off comes every day at 00:00:00 UTC.
pub const DAY: i64 = 86_400;

/// The instant (epoch second) at which a transaction made at `t` settles: the first daily
/// cut-off, 00:00:00 UTC, strictly after `t`. Saturates at `i64::MAX` for instants within a day of
/// the end of the range.
pub fn settles_at(t: i64) -> i64 {
    t.div_euclid(DAY).checked_add(1).and_then(|days| days.checked_mul(DAY)).unwrap_or(i64::MAX)
}

/// Whether a transaction made at `t` has settled at `now` (the cut-off instant included).
pub fn is_settled(t: i64, now: i64) -> bool {
    now >= settles_at(t)
}

/// What is left to give back of a transaction of `original_amount` cents of which
/// `already_refunded` cents have been refunded: never below zero nor above the original amount.
pub fn remaining(original_amount: i64, already_refunded: i64) -> i64 {
    original_amount.saturating_sub(already_refunded.max(0)).clamp(0, original_amount.max(0))
}

/// How (part of) a transaction is given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveBack {
    /// The transaction is voided: unsettled, nothing refunded before, the whole amount.
    Void { amount: i64 },
    /// A refund transaction of `amount` cents.
    Refund { amount: i64 },
}

impl GiveBack {
    /// The cents given back.
    pub fn amount(self) -> i64 {
        match self {
            GiveBack::Void { amount } | GiveBack::Refund { amount } => amount,
        }
    }

    pub fn is_void(self) -> bool {
        matches!(self, GiveBack::Void { .. })
    }
}

/// Why nothing can be given back. Each is a code of the transaction error table ([`Self::code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GiveBackError {
    /// `transaction_already_voided`.
    #[error("the transaction has already been voided")]
    AlreadyVoided,
    /// `transaction_already_refunded`: the whole amount has been refunded (or the transaction
    /// has no amount).
    #[error("the transaction has already been refunded in full")]
    AlreadyRefunded,
    /// `total_credit_exceeds_capture`.
    #[error("{requested} cents exceed the {remaining} cents left to give back")]
    ExceedsRemaining { requested: i64, remaining: i64 },
    /// `invalid_amount`.
    #[error("the amount to give back must be positive, not {requested} cents")]
    InvalidAmount { requested: i64 },
}

impl GiveBackError {
    /// The `error_code` of the transaction error table.
    pub fn code(&self) -> &'static str {
        match self {
            GiveBackError::AlreadyVoided => "transaction_already_voided",
            GiveBackError::AlreadyRefunded => "transaction_already_refunded",
            GiveBackError::ExceedsRemaining { .. } => "total_credit_exceeds_capture",
            GiveBackError::InvalidAmount { .. } => "invalid_amount",
        }
    }

    /// The table row of [`Self::code`] (category and messages).
    pub fn error(&self) -> &'static TransactionErrorInfo {
        lookup_or_unknown(self.code())
    }
}

/// How to give back `requested` cents (`None`: everything left) of a transaction of
/// `original_amount` cents of which `already_refunded` have been refunded, `settled` or not
/// ([`is_settled`]) and `voided` or not.
///
/// The checks come in this order: a voided transaction has nothing to give back; then one with
/// nothing left; then the amount must be positive and at most what is left. The whole amount of
/// an unsettled transaction nothing was refunded from is a void; anything else a refund (a part
/// of an unsettled transaction too: a void cannot cancel part of a transaction).
pub fn give_back(
    original_amount: i64,
    already_refunded: i64,
    requested: Option<i64>,
    settled: bool,
    voided: bool,
) -> Result<GiveBack, GiveBackError> {
    if voided {
        return Err(GiveBackError::AlreadyVoided);
    }
    let left = remaining(original_amount, already_refunded);
    if left == 0 {
        return Err(GiveBackError::AlreadyRefunded);
    }
    let amount = requested.unwrap_or(left);
    if amount <= 0 {
        return Err(GiveBackError::InvalidAmount { requested: amount });
    }
    if amount > left {
        return Err(GiveBackError::ExceedsRemaining { requested: amount, remaining: left });
    }
    if !settled && already_refunded <= 0 && amount == original_amount {
        Ok(GiveBack::Void { amount })
    } else {
        Ok(GiveBack::Refund { amount })
    }
}

/// Whether the transaction can be voided: giving back everything left would be a void (it is
/// unsettled, not voided, has an amount and nothing was refunded from it).
pub fn voidable(original_amount: i64, already_refunded: i64, settled: bool, voided: bool) -> bool {
    matches!(give_back(original_amount, already_refunded, None, settled, voided), Ok(GiveBack::Void { .. }))
}

/// Whether (part of) the transaction can be given back: something is left and it is not voided.
/// An unsettled transaction is refundable too (in full that is done as a void).
pub fn refundable(original_amount: i64, already_refunded: i64, voided: bool) -> bool {
    give_back(original_amount, already_refunded, None, true, voided).is_ok()
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, NaiveTime, TimeZone, Utc};
    use proptest::prelude::*;

    use super::*;
    use crate::errors::lookup;

    fn t(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> i64 {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).single().expect("valid time").timestamp()
    }

    #[test]
    fn a_transaction_settles_at_the_next_midnight_utc() {
        let cases = [
            // Made during the day: that night.
            (t(2027, 3, 14, 9, 30, 0), t(2027, 3, 15, 0, 0, 0)),
            (t(2027, 3, 14, 23, 59, 59), t(2027, 3, 15, 0, 0, 0)),
            // Made at the cut-off itself: the next one, a day later.
            (t(2027, 3, 15, 0, 0, 0), t(2027, 3, 16, 0, 0, 0)),
            (t(2027, 3, 15, 0, 0, 1), t(2027, 3, 16, 0, 0, 0)),
            // Across month, year and leap day.
            (t(2027, 12, 31, 18, 0, 0), t(2028, 1, 1, 0, 0, 0)),
            (t(2028, 2, 28, 12, 0, 0), t(2028, 2, 29, 0, 0, 0)),
            (t(2028, 2, 29, 12, 0, 0), t(2028, 3, 1, 0, 0, 0)),
            // Around the epoch.
            (0, DAY),
            (-1, 0),
            (-DAY, 0),
            (-DAY - 1, -DAY),
        ];
        for (made, settles) in cases {
            assert_eq!(settles_at(made), settles, "{made}");
            assert!(!is_settled(made, made), "{made}: not at once");
            assert!(!is_settled(made, settles - 1), "{made}: not before the cut-off");
            assert!(is_settled(made, settles), "{made}: at the cut-off");
            assert!(is_settled(made, settles + DAY), "{made}: and after");
        }
        assert_eq!(settles_at(i64::MAX), i64::MAX);
        let first = (i128::from(i64::MIN).div_euclid(i128::from(DAY)) + 1) * i128::from(DAY);
        assert_eq!(i128::from(settles_at(i64::MIN)), first);
    }

    #[test]
    fn the_whole_of_an_unsettled_transaction_is_voided() {
        assert_eq!(give_back(1000, 0, None, false, false), Ok(GiveBack::Void { amount: 1000 }));
        assert_eq!(give_back(1000, 0, Some(1000), false, false), Ok(GiveBack::Void { amount: 1000 }));
        assert!(voidable(1000, 0, false, false));
        assert!(refundable(1000, 0, false));
    }

    #[test]
    fn a_settled_transaction_or_a_part_is_refunded() {
        // Settled: the whole or a part.
        assert_eq!(give_back(1000, 0, None, true, false), Ok(GiveBack::Refund { amount: 1000 }));
        assert_eq!(give_back(1000, 0, Some(250), true, false), Ok(GiveBack::Refund { amount: 250 }));
        // Unsettled, a part.
        assert_eq!(give_back(1000, 0, Some(999), false, false), Ok(GiveBack::Refund { amount: 999 }));
        // Unsettled, the rest after a partial refund: a refund, the transaction cannot be voided.
        assert_eq!(give_back(1000, 250, None, false, false), Ok(GiveBack::Refund { amount: 750 }));
        assert_eq!(give_back(1000, 250, Some(750), false, false), Ok(GiveBack::Refund { amount: 750 }));
        assert!(!voidable(1000, 250, false, false) && refundable(1000, 250, false));
        assert!(!voidable(1000, 0, true, false) && refundable(1000, 0, false));
        // Refunds add up to the whole.
        assert_eq!(give_back(1000, 999, None, true, false), Ok(GiveBack::Refund { amount: 1 }));
    }

    #[test]
    fn what_cannot_be_given_back() {
        let cases = [
            // Voided: whatever is asked, settled or not.
            ((1000, 0, None, false, true), GiveBackError::AlreadyVoided),
            ((1000, 0, Some(-5), true, true), GiveBackError::AlreadyVoided),
            // Nothing left.
            ((1000, 1000, None, true, false), GiveBackError::AlreadyRefunded),
            ((1000, 1000, Some(1), false, false), GiveBackError::AlreadyRefunded),
            ((1000, 1200, None, true, false), GiveBackError::AlreadyRefunded),
            ((0, 0, None, false, false), GiveBackError::AlreadyRefunded),
            // More than is left.
            ((1000, 0, Some(1001), false, false), GiveBackError::ExceedsRemaining { requested: 1001, remaining: 1000 }),
            ((1000, 400, Some(601), true, false), GiveBackError::ExceedsRemaining { requested: 601, remaining: 600 }),
            // No positive amount.
            ((1000, 0, Some(0), false, false), GiveBackError::InvalidAmount { requested: 0 }),
            ((1000, 400, Some(-1), true, false), GiveBackError::InvalidAmount { requested: -1 }),
        ];
        for ((original, refunded, requested, settled, voided), expected) in cases {
            assert_eq!(give_back(original, refunded, requested, settled, voided), Err(expected), "{expected:?}");
        }
        assert!(!voidable(1000, 0, false, true) && !refundable(1000, 0, true));
        assert!(!voidable(1000, 1000, false, false) && !refundable(1000, 1000, false));
        assert!(!voidable(0, 0, false, false) && !refundable(0, 0, false));
    }

    #[test]
    fn every_refusal_is_a_hard_code_of_the_error_table() {
        let errors = [
            GiveBackError::AlreadyVoided,
            GiveBackError::AlreadyRefunded,
            GiveBackError::ExceedsRemaining { requested: 2, remaining: 1 },
            GiveBackError::InvalidAmount { requested: 0 },
        ];
        let codes = [
            "transaction_already_voided",
            "transaction_already_refunded",
            "total_credit_exceeds_capture",
            "invalid_amount",
        ];
        for (error, code) in errors.iter().zip(codes) {
            assert_eq!(error.code(), code);
            let row = lookup(code).unwrap_or_else(|| panic!("{code} is in the table"));
            assert_eq!(error.error(), row);
            assert_eq!(row.category, "hard", "{code}");
        }
        assert_eq!(
            GiveBackError::ExceedsRemaining { requested: 601, remaining: 600 }.to_string(),
            "601 cents exceed the 600 cents left to give back"
        );
    }

    #[test]
    fn what_is_left_stays_between_zero_and_the_original_amount() {
        assert_eq!(remaining(1000, 0), 1000);
        assert_eq!(remaining(1000, 300), 700);
        assert_eq!(remaining(1000, 1300), 0);
        assert_eq!(remaining(1000, -50), 1000);
        assert_eq!(remaining(-10, 0), 0);
        assert_eq!(remaining(i64::MAX, i64::MIN), i64::MAX);
        assert_eq!(remaining(i64::MIN, i64::MAX), 0);
    }

    fn arb_give_back() -> impl Strategy<Value = (i64, i64, Option<i64>, bool, bool)> {
        (0i64..=1_000_000_000, any::<bool>(), any::<bool>()).prop_flat_map(|(original, settled, voided)| {
            (
                Just(original),
                prop_oneof![Just(0i64), 0..=original, original..=original.saturating_add(1000), -1000i64..0],
                proptest::option::of(prop_oneof![
                    -1000i64..=0,
                    1..=original.max(1),
                    original..=original.saturating_add(1000),
                    any::<i64>()
                ]),
                Just(settled),
                Just(voided),
            )
        })
    }

    proptest! {
        #[test]
        fn settlement_is_the_next_cut_off(made in any::<i64>(), later in 0i64..(3 * DAY)) {
            let at = settles_at(made);
            if made < i64::MAX - DAY {
                prop_assert!(at > made && at - made <= DAY);
                prop_assert_eq!(at.rem_euclid(DAY), 0);
                // The cut-off of every instant of that day is the same.
                prop_assert_eq!(settles_at(at - 1), at);
                prop_assert_eq!(settles_at(at - DAY), at);
            }
            // Once settled, settled for ever; transactions made later settle no earlier.
            if let Some(now) = made.checked_add(later) {
                prop_assert!(settles_at(now) >= at);
                if is_settled(made, now) {
                    prop_assert!(now.checked_add(DAY).is_none_or(|after| is_settled(made, after)));
                }
            }
        }

        #[test]
        fn settlement_is_midnight_utc(made in -10_000_000_000i64..10_000_000_000) {
            let at = DateTime::<Utc>::from_timestamp(settles_at(made), 0).expect("in range");
            prop_assert_eq!(at.time(), NaiveTime::MIN);
            let made_at = DateTime::<Utc>::from_timestamp(made, 0).expect("in range");
            prop_assert_eq!(made_at.date_naive().succ_opt(), Some(at.date_naive()));
        }

        #[test]
        fn give_back_never_exceeds_what_is_left(
            (original, refunded, requested, settled, voided) in arb_give_back()
        ) {
            let left = remaining(original, refunded);
            prop_assert!((0..=original).contains(&left));
            match give_back(original, refunded, requested, settled, voided) {
                Ok(g) => {
                    prop_assert!(!voided);
                    prop_assert!(g.amount() > 0 && g.amount() <= left);
                    prop_assert_eq!(g.amount(), requested.unwrap_or(left));
                    // A void only unsettled, nothing refunded before, and the whole amount.
                    if g.is_void() {
                        prop_assert!(!settled && refunded <= 0 && g.amount() == original);
                    } else {
                        prop_assert!(settled || refunded > 0 || g.amount() < original);
                    }
                }
                Err(GiveBackError::AlreadyVoided) => prop_assert!(voided),
                Err(GiveBackError::AlreadyRefunded) => prop_assert!(!voided && left == 0),
                Err(GiveBackError::InvalidAmount { requested: r }) => {
                    prop_assert!(!voided && left > 0 && r <= 0 && requested == Some(r));
                }
                Err(GiveBackError::ExceedsRemaining { requested: r, remaining: l }) => {
                    prop_assert!(!voided && l == left && r > left && requested == Some(r));
                }
            }
        }

        #[test]
        fn the_flags_agree_with_give_back(
            (original, refunded, _requested, settled, voided) in arb_give_back()
        ) {
            let whole = give_back(original, refunded, None, settled, voided);
            prop_assert_eq!(voidable(original, refunded, settled, voided), matches!(whole, Ok(GiveBack::Void { .. })));
            prop_assert_eq!(refundable(original, refunded, voided), whole.is_ok());
            prop_assert_eq!(refundable(original, refunded, voided), !voided && remaining(original, refunded) > 0);
            // Voidable only while unsettled, and then also refundable.
            if voidable(original, refunded, settled, voided) {
                prop_assert!(!settled && refundable(original, refunded, voided));
                prop_assert_eq!(whole, Ok(GiveBack::Void { amount: original }));
            }
        }
    }
}

//! The arithmetic of giving money back on an invoice: which part of a refund goes back as
//! account credit, to the gateway's transactions or outside the gateway ([`split`]), what a
//! refund of some units of a line is worth ([`units_amount`], [`prorated`]), how a refund of an
//! amount spreads over the lines ([`spread`]) and the tax it takes back ([`tax_share`]).
//!
//! Every function keeps the cents whole: parts always add up to what is split, and giving back
//! everything piece by piece gives back exactly what was paid.

/// Where a refund goes first (`refund_method`; before 2.10 `refund_apply_order` `credit` /
/// `transaction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefundMethod {
    /// What credit paid goes back as credit; the rest to the transactions.
    CreditFirst,
    /// What transactions paid goes back to them; the rest as credit.
    TransactionFirst,
    /// Everything as credit (Credit Memos).
    AllCredit,
    /// Everything to the transactions (Credit Memos).
    AllTransaction,
}

impl RefundMethod {
    /// The schema name.
    pub fn as_str(self) -> &'static str {
        match self {
            RefundMethod::CreditFirst => "credit_first",
            RefundMethod::TransactionFirst => "transaction_first",
            RefundMethod::AllCredit => "all_credit",
            RefundMethod::AllTransaction => "all_transaction",
        }
    }

    /// Whether the method exists only on sites with Credit Memos.
    pub fn needs_credit_memos(self) -> bool {
        matches!(self, RefundMethod::AllCredit | RefundMethod::AllTransaction)
    }
}

/// What an invoice can still give back, by how it was paid (cents, each ≥ 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refundable {
    /// Paid with the account's credit.
    pub credit: i64,
    /// Paid through the gateway (card, bank account), still refundable there.
    pub gateway: i64,
    /// Paid outside the gateway (offline payments, invoices marked paid).
    pub outside: i64,
    /// Of `credit`, what can go back to the gateway payments that paid for that credit (a
    /// refund kept as credit traces back to the purchase it refunded).
    pub traced: i64,
}

impl Refundable {
    pub fn total(&self) -> i64 {
        self.credit + self.gateway + self.outside
    }
}

/// Where the parts of a refund go (cents, each ≥ 0, adding up to the refund).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Split {
    /// Back to the account as credit.
    pub to_credit: i64,
    /// Refunded through the gateway.
    pub to_gateway: i64,
    /// Given back outside the gateway.
    pub to_outside: i64,
    /// Of what credit paid, given back through the gateway to the payments that paid for the
    /// credit (`all_transaction`).
    pub credit_to_gateway: i64,
}

impl Split {
    /// What the split gives back in all.
    pub fn total(&self) -> i64 {
        self.to_credit + self.to_gateway + self.to_outside + self.credit_to_gateway
    }
}

/// Why a refund cannot be split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    /// Nothing (or less than nothing) to refund.
    #[error("the refund amount must be positive")]
    NotPositive,
    /// More than the invoice can still give back.
    #[error("the refund is more than the {0} cents left to refund")]
    MoreThanRefundable(i64),
    /// `all_transaction` asks more than the invoice's payments, and the payments behind the
    /// credit that paid it, can give back.
    #[error("the invoice's payments can give back only {0} cents")]
    MoreThanPayments(i64),
}

/// Splits a refund of `amount` by `method`.
///
/// | method | credit | gateway, then outside |
/// |---|---|---|
/// | `credit_first` | what credit paid, first | the rest |
/// | `transaction_first` | the rest | first |
/// | `all_credit` | everything | nothing |
/// | `all_transaction` | nothing | everything: what they paid, then what credit paid back to the payments behind that credit (`traced`) |
pub fn split(amount: i64, method: RefundMethod, left: Refundable) -> Result<Split, SplitError> {
    if amount <= 0 {
        return Err(SplitError::NotPositive);
    }
    if amount > left.total() {
        return Err(SplitError::MoreThanRefundable(left.total()));
    }
    let payments = |amount: i64| {
        let to_gateway = amount.min(left.gateway);
        (to_gateway, amount - to_gateway)
    };
    Ok(match method {
        RefundMethod::AllCredit => Split { to_credit: amount, ..Split::default() },
        RefundMethod::CreditFirst => {
            let to_credit = amount.min(left.credit);
            let (to_gateway, to_outside) = payments(amount - to_credit);
            Split { to_credit, to_gateway, to_outside, credit_to_gateway: 0 }
        }
        RefundMethod::TransactionFirst => {
            let paid = amount.min(left.gateway + left.outside);
            let (to_gateway, to_outside) = payments(paid);
            Split { to_credit: amount - paid, to_gateway, to_outside, credit_to_gateway: 0 }
        }
        RefundMethod::AllTransaction => {
            let paid = left.gateway + left.outside;
            let traced = left.traced.clamp(0, left.credit);
            if amount > paid + traced {
                return Err(SplitError::MoreThanPayments(paid + traced));
            }
            let direct = amount.min(paid);
            let (to_gateway, to_outside) = payments(direct);
            Split { to_credit: 0, to_gateway, to_outside, credit_to_gateway: amount - direct }
        }
    })
}

/// The worth of `units` more units of a line of `quantity` units totalling `total`, `done`
/// units having been given back already: the units' share, rounded down, such that giving back
/// every unit gives back exactly `total`.
pub fn units_amount(total: i64, quantity: i64, done: i64, units: i64) -> i64 {
    if quantity <= 0 {
        return 0;
    }
    let upto = |n: i64| (i128::from(total) * i128::from(n.clamp(0, quantity)) / i128::from(quantity)) as i64;
    upto(done + units) - upto(done)
}

/// `amount` for the `left` seconds still to come of a period of `whole` seconds (rounded down;
/// the whole amount when the period has not begun, nothing once it is over).
pub fn prorated(amount: i64, left: i64, whole: i64) -> i64 {
    if whole <= 0 {
        return 0;
    }
    (i128::from(amount) * i128::from(left.clamp(0, whole)) / i128::from(whole)) as i64
}

/// Spreads `amount` over lines that can still give back `left` (each ≥ 0), in proportion to
/// what they can give back, the last line with something left taking the rounding: the parts
/// add up to `amount` and none exceeds its line's `left`. `amount` must not exceed the sum.
pub fn spread(amount: i64, left: &[i64]) -> Vec<i64> {
    let sum: i64 = left.iter().map(|l| (*l).max(0)).sum();
    if sum <= 0 || amount <= 0 {
        return vec![0; left.len()];
    }
    let amount = amount.min(sum);
    let mut parts: Vec<i64> =
        left.iter().map(|l| (i128::from((*l).max(0)) * i128::from(amount) / i128::from(sum)) as i64).collect();
    let mut rest = amount - parts.iter().sum::<i64>();
    // Whole cents left by rounding down go to the lines with room, from the last one back.
    for (part, l) in parts.iter_mut().zip(left).rev() {
        if rest == 0 {
            break;
        }
        let room = (*l).max(0) - *part;
        let more = room.min(rest);
        *part += more;
        rest -= more;
    }
    parts
}

/// The tax inside `part` of a line whose total `total` includes `tax`: the same share, rounded
/// half away from zero, never more than the tax.
pub fn tax_share(total: i64, tax: i64, part: i64) -> i64 {
    if total == 0 || tax == 0 {
        return 0;
    }
    let n = i128::from(tax) * i128::from(part);
    let d = i128::from(total);
    let q = n / d;
    let r = n % d;
    let q = if 2 * r.abs() >= d.abs() { q + n.signum() * d.signum() } else { q };
    (q as i64).clamp(tax.min(0), tax.max(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PAID: Refundable = Refundable { credit: 2000, gateway: 8000, outside: 0, traced: 0 };

    #[test]
    fn methods_split_as_the_reference_tells() {
        // $100 paid by $20 credit and $80 card.
        assert_eq!(
            split(5000, RefundMethod::CreditFirst, PAID),
            Ok(Split { to_credit: 2000, to_gateway: 3000, to_outside: 0, credit_to_gateway: 0 })
        );
        assert_eq!(
            split(5000, RefundMethod::TransactionFirst, PAID),
            Ok(Split { to_credit: 0, to_gateway: 5000, to_outside: 0, credit_to_gateway: 0 })
        );
        assert_eq!(
            split(10000, RefundMethod::AllCredit, PAID),
            Ok(Split { to_credit: 10000, to_gateway: 0, to_outside: 0, credit_to_gateway: 0 })
        );
        assert_eq!(
            split(8000, RefundMethod::AllTransaction, PAID),
            Ok(Split { to_credit: 0, to_gateway: 8000, to_outside: 0, credit_to_gateway: 0 })
        );
        assert_eq!(split(9000, RefundMethod::AllTransaction, PAID), Err(SplitError::MoreThanPayments(8000)));
        assert_eq!(
            split(10000, RefundMethod::TransactionFirst, PAID),
            Ok(Split { to_credit: 2000, to_gateway: 8000, to_outside: 0, credit_to_gateway: 0 })
        );
        assert_eq!(split(10001, RefundMethod::CreditFirst, PAID), Err(SplitError::MoreThanRefundable(10000)));
        // The credit part goes back to the card behind the credit as far as it can be traced.
        let traced = Refundable { traced: 1500, ..PAID };
        assert_eq!(
            split(9500, RefundMethod::AllTransaction, traced),
            Ok(Split { to_credit: 0, to_gateway: 8000, to_outside: 0, credit_to_gateway: 1500 })
        );
        assert_eq!(split(9501, RefundMethod::AllTransaction, traced), Err(SplitError::MoreThanPayments(9500)));
        let overtraced = Refundable { traced: 5000, ..PAID };
        assert_eq!(split(10001, RefundMethod::AllTransaction, overtraced), Err(SplitError::MoreThanRefundable(10000)));
        assert_eq!(
            split(10000, RefundMethod::AllTransaction, overtraced).map(|s| s.credit_to_gateway),
            Ok(2000),
            "never more than credit paid"
        );
        assert_eq!(split(0, RefundMethod::CreditFirst, PAID), Err(SplitError::NotPositive));
        let outside = Refundable { credit: 0, gateway: 300, outside: 700, traced: 0 };
        assert_eq!(
            split(500, RefundMethod::CreditFirst, outside),
            Ok(Split { to_credit: 0, to_gateway: 300, to_outside: 200, credit_to_gateway: 0 })
        );
    }

    #[test]
    fn units_give_back_the_whole_line_exactly() {
        assert_eq!(units_amount(1000, 3, 0, 1), 333);
        assert_eq!(units_amount(1000, 3, 1, 1), 333);
        assert_eq!(units_amount(1000, 3, 2, 1), 334);
        assert_eq!(units_amount(1000, 3, 0, 3), 1000);
        assert_eq!(units_amount(1000, 3, 3, 1), 0, "nothing past the last unit");
        assert_eq!(prorated(10000, 10 * 86_400, 30 * 86_400), 3333, "10 of 30 days of $100");
        assert_eq!(prorated(10000, -5, 100), 0);
        assert_eq!(prorated(10000, 500, 100), 10000);
    }

    #[test]
    fn amounts_spread_in_proportion() {
        assert_eq!(spread(100, &[530]), vec![100]);
        assert_eq!(spread(100, &[300, 600]), vec![33, 67]);
        assert_eq!(spread(900, &[300, 600]), vec![300, 600]);
        assert_eq!(spread(1, &[0, 5]), vec![0, 1]);
        assert_eq!(tax_share(530, 30, 100), 6, "V229: 100 of 500 + 30 tax is 94 + 6");
        assert_eq!(tax_share(530, 30, 530), 30);
        assert_eq!(tax_share(-530, -30, -100), -6);
    }

    proptest! {
        #[test]
        fn splits_add_up_and_stay_within_what_was_paid(
            credit in 0i64..100_000, gateway in 0i64..100_000, outside in 0i64..100_000,
            traced in 0i64..100_000, amount in 1i64..300_000, m in 0usize..4,
        ) {
            let left = Refundable { credit, gateway, outside, traced };
            let method = [RefundMethod::CreditFirst, RefundMethod::TransactionFirst, RefundMethod::AllCredit,
                RefundMethod::AllTransaction][m];
            if let Ok(s) = split(amount, method, left) {
                prop_assert_eq!(s.total(), amount);
                prop_assert!(s.to_gateway <= gateway && s.to_outside <= outside);
                prop_assert!(s.credit_to_gateway <= traced.min(credit));
                prop_assert!(s.to_credit >= 0 && s.to_gateway >= 0 && s.to_outside >= 0 && s.credit_to_gateway >= 0);
                if method == RefundMethod::CreditFirst {
                    prop_assert!(s.to_credit <= credit);
                }
            } else {
                prop_assert!(amount > left.total() || method == RefundMethod::AllTransaction);
            }
        }

        #[test]
        fn spreads_add_up_within_each_line(left in proptest::collection::vec(0i64..10_000, 1..6), share in 0.0f64..1.0) {
            let sum: i64 = left.iter().sum();
            let amount = (sum as f64 * share) as i64;
            let parts = spread(amount, &left);
            if sum > 0 && amount > 0 {
                prop_assert_eq!(parts.iter().sum::<i64>(), amount);
            }
            for (p, l) in parts.iter().zip(&left) {
                prop_assert!(*p >= 0 && p <= l);
            }
        }

        #[test]
        fn units_one_by_one_make_the_total(total in -100_000i64..100_000, quantity in 1i64..50) {
            let sum: i64 = (0..quantity).map(|done| units_amount(total, quantity, done, 1)).sum();
            prop_assert_eq!(sum, total);
        }
    }
}

//! How an invoice is collected: the collection policy (what happens to a new invoice, and after
//! each attempt to charge it), the dunning schedule of retries and the due date of net terms.
//! Times are UTC epoch seconds on the site's clock.
//!
//! | Outcome | [`Collect::Automatic`] | [`Collect::Once`] | [`Collect::Manual`] |
//! |---|---|---|---|
//! | balance ≤ 0 | paid at once, no charge | same | same |
//! | approved | paid | paid | — (pending; past due once its due date passes unpaid) |
//! | declined, or no stored payment method | past due, retried at [`RETRY_DAYS`]; failed after the last | failed | — |

use crate::states::InvoiceTransition;

/// Days after an invoice's creation at which a past-due invoice is retried (1, 3, 5 and 7).
pub const RETRY_DAYS: [i64; 4] = [1, 3, 5, 7];

const DAY: i64 = 86_400;

/// How a new invoice is collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collect {
    /// Not charged: the invoice stays pending until paid otherwise (`mark_successful`), and
    /// becomes past due when its due date passes unpaid.
    Manual,
    /// Charged now; a decline (or no payment method) makes it past due with dunning retries.
    Automatic,
    /// Charged now; a decline (or no payment method) makes it failed at once, without retries
    /// (one-off transactions, purchases that must not linger).
    Once,
}

/// What to do with a new invoice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstStep {
    /// Nothing to collect: paid at once.
    PayNow,
    /// Wait for the customer; the invoice falls due at this time.
    AwaitPayment { due_at: Option<i64> },
    /// Charge the payment method now.
    Charge,
}

/// What a new invoice with this balance and due date needs.
pub fn first_step(balance_in_cents: i64, collect: Collect, due_at: Option<i64>) -> FirstStep {
    if balance_in_cents <= 0 {
        FirstStep::PayNow
    } else if collect == Collect::Manual {
        FirstStep::AwaitPayment { due_at }
    } else {
        FirstStep::Charge
    }
}

/// The result of one attempt to charge an invoice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    Approved,
    Declined,
    /// No payment method to charge (counts as a failed attempt, without a transaction).
    NoPaymentMethod,
}

/// What follows an attempt to charge an invoice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfterAttempt {
    /// The invoice's state change.
    pub change: InvoiceTransition,
    /// When the next retry runs (only with [`InvoiceTransition::Retry`]).
    pub next_retry_at: Option<i64>,
    /// The failed attempts counted so far (`None`: unchanged).
    pub failed_attempts: Option<i64>,
}

/// What follows attempt number `attempt` (0: the first charge; then the retry's number) of an
/// invoice created at `created_at`.
pub fn after_attempt(collect: Collect, attempt: i64, outcome: Attempt, created_at: i64) -> AfterAttempt {
    if outcome == Attempt::Approved {
        return AfterAttempt { change: InvoiceTransition::Pay, next_retry_at: None, failed_attempts: None };
    }
    if collect == Collect::Once {
        return AfterAttempt { change: InvoiceTransition::Fail, next_retry_at: None, failed_attempts: None };
    }
    match next_retry(created_at, attempt) {
        Some(at) => {
            AfterAttempt { change: InvoiceTransition::Retry, next_retry_at: Some(at), failed_attempts: Some(attempt) }
        }
        None => AfterAttempt { change: InvoiceTransition::Fail, next_retry_at: None, failed_attempts: Some(attempt) },
    }
}

/// When the retry after `failed_retries` failed retries of an invoice created at `created_at`
/// runs (`None` when none is left).
pub fn next_retry(created_at: i64, failed_retries: i64) -> Option<i64> {
    let days = usize::try_from(failed_retries).ok().and_then(|i| RETRY_DAYS.get(i))?;
    Some(created_at.saturating_add(days * DAY))
}

/// The due date of an invoice created at `at` with `net_terms` days (negative terms count as 0).
pub fn due_date(at: i64, net_terms: i64) -> i64 {
    at.saturating_add(net_terms.max(0).saturating_mul(DAY))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_invoices_take_the_first_step_of_the_table() {
        for collect in [Collect::Manual, Collect::Automatic, Collect::Once] {
            assert_eq!(first_step(0, collect, Some(9)), FirstStep::PayNow);
            assert_eq!(first_step(-5, collect, Some(9)), FirstStep::PayNow);
        }
        assert_eq!(first_step(1, Collect::Manual, Some(9)), FirstStep::AwaitPayment { due_at: Some(9) });
        assert_eq!(first_step(1, Collect::Automatic, None), FirstStep::Charge);
        assert_eq!(first_step(1, Collect::Once, None), FirstStep::Charge);
    }

    #[test]
    fn declines_retry_on_the_schedule_then_fail() {
        let created = 1_000;
        let mut retries = Vec::new();
        for attempt in 0..=4 {
            let after = after_attempt(Collect::Automatic, attempt, Attempt::Declined, created);
            assert_eq!(after.failed_attempts, Some(attempt));
            retries.push((after.change, after.next_retry_at.map(|t| (t - created) / DAY)));
        }
        assert_eq!(
            retries,
            [
                (InvoiceTransition::Retry, Some(1)),
                (InvoiceTransition::Retry, Some(3)),
                (InvoiceTransition::Retry, Some(5)),
                (InvoiceTransition::Retry, Some(7)),
                (InvoiceTransition::Fail, None),
            ]
        );
        assert_eq!(
            after_attempt(Collect::Automatic, 2, Attempt::NoPaymentMethod, created),
            after_attempt(Collect::Automatic, 2, Attempt::Declined, created),
            "no payment method counts as a failed attempt"
        );
    }

    #[test]
    fn approvals_pay_and_one_time_charges_fail_at_once() {
        for collect in [Collect::Automatic, Collect::Once] {
            let paid = after_attempt(collect, 3, Attempt::Approved, 0);
            assert_eq!((paid.change, paid.next_retry_at, paid.failed_attempts), (InvoiceTransition::Pay, None, None));
        }
        assert_eq!(after_attempt(Collect::Once, 0, Attempt::Declined, 0).change, InvoiceTransition::Fail);
        assert_eq!(after_attempt(Collect::Once, 0, Attempt::NoPaymentMethod, 0).change, InvoiceTransition::Fail);
    }

    #[test]
    fn due_dates_add_whole_days_and_never_overflow() {
        assert_eq!(due_date(100, 30), 100 + 30 * DAY);
        assert_eq!(due_date(100, -3), 100);
        assert_eq!(due_date(i64::MAX - 1, 1), i64::MAX);
        assert_eq!(next_retry(i64::MAX, 0), Some(i64::MAX));
        assert_eq!(next_retry(0, -1), None);
    }
}

//! The invoice and transaction state machines: the states (stored and written on the wire by
//! their schema names) and which change may happen from which state. The store changes a state
//! only by compare-and-set from the states a change allows ([`InvoiceTransition::from_states`]), so
//! two processes settling one invoice cannot both win.
//!
//! | Invoice transition | From | To |
//! |---|---|---|
//! | [`InvoiceTransition::Pay`] (collected, marked paid, nothing to pay) | pending, processing, past due | paid |
//! | [`InvoiceTransition::Fail`] (given up, marked failed, charged once and declined) | pending, processing, past due | failed |
//! | [`InvoiceTransition::Retry`] (automatic collection declined, a retry left) | pending, processing, past due | past due |
//! | [`InvoiceTransition::FallDue`] (a manual invoice unpaid at its due date) | pending | past due |
//!
//! Credit invoices (money owed to the account) have their own states, decided by their balance
//! ([`credit_state`]): `processing` while a refund of theirs awaits the gateway, `open` while
//! credit is left, `closed` once it is used up (by payments, refunds or a void of what was
//! left), `voided` when the whole balance was voided unused. Only an open credit invoice can be
//! voided ([`InvoiceState::is_voidable`]).
//!
//! | Transaction transition | From | To |
//! |---|---|---|
//! | [`TransactionTransition::Approve`] | processing | success |
//! | [`TransactionTransition::Decline`] | processing | declined |
//! | [`TransactionTransition::Void`] | success | void |

/// Why a state change is not allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an invoice or transaction in state `{from}` cannot {change}")]
pub struct IllegalTransition {
    pub from: &'static str,
    pub change: &'static str,
}

macro_rules! named_states {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every state.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The schema name.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// The state with this schema name.
            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }
    };
}

named_states! {
    /// State of an invoice (schema `invoice_state`; `pending` and `paid` are written `open` and
    /// `collected` before 2.10 by the codec).
    InvoiceState {
        /// Created, not collected yet (manual invoices wait here until paid or due).
        Pending = "pending",
        /// A collection is being made.
        Processing = "processing",
        /// Collection failed or the due date passed; retries may follow.
        PastDue = "past_due",
        Paid = "paid",
        /// Given up: no more collection.
        Failed = "failed",
        /// A credit invoice with credit left to use.
        Open = "open",
        /// A credit invoice whose credit is used up (spent, refunded or partly voided).
        Closed = "closed",
        /// A credit invoice whose whole balance was voided unused.
        Voided = "voided",
    }
}

named_states! {
    /// Outcome of a transaction; `processing` while the gateway is being called.
    TransactionStatus { Processing = "processing", Success = "success", Declined = "declined", Void = "void" }
}

impl InvoiceState {
    /// The states of an open invoice: it can still be paid, collected, retried or failed.
    pub const OPEN: [InvoiceState; 3] = [InvoiceState::Pending, InvoiceState::Processing, InvoiceState::PastDue];

    /// Whether the invoice can still be paid, collected, retried or failed.
    pub fn is_open(self) -> bool {
        Self::OPEN.contains(&self)
    }

    /// Whether the invoice can be collected now (`collect`): pending or past due, not while a
    /// collection is being made.
    pub fn is_collectable(self) -> bool {
        matches!(self, InvoiceState::Pending | InvoiceState::PastDue)
    }

    /// Whether a credit invoice in this state can be voided: open, not while a refund of its
    /// is processing, not once closed or voided.
    pub fn is_voidable(self) -> bool {
        self == InvoiceState::Open
    }

    /// The state `change` leads to from this one.
    pub fn apply(self, change: InvoiceTransition) -> Result<InvoiceState, IllegalTransition> {
        if change.from_states().contains(&self) {
            Ok(change.to())
        } else {
            Err(IllegalTransition { from: self.as_str(), change: change.name() })
        }
    }
}

/// The state of a credit invoice of `total` (≤ 0) with `balance` (≤ 0) left, once no refund of
/// its is processing: open while credit is left; voided when the whole balance was voided unused
/// (`voided` is the amount voided, ≥ 0); closed otherwise.
pub fn credit_state(total: i64, balance: i64, voided: i64) -> InvoiceState {
    if balance < 0 {
        InvoiceState::Open
    } else if voided > 0 && voided == -total {
        InvoiceState::Voided
    } else {
        InvoiceState::Closed
    }
}

/// A change of an invoice's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InvoiceTransition {
    /// Collected, marked paid, or nothing to pay.
    Pay,
    /// Given up: the last retry failed, marked failed, or a one-time charge was declined.
    Fail,
    /// Automatic collection declined (or no payment method) with a retry left.
    Retry,
    /// A manual invoice still unpaid at its due date.
    FallDue,
}

impl InvoiceTransition {
    /// The states this change may start from.
    pub fn from_states(self) -> &'static [InvoiceState] {
        match self {
            InvoiceTransition::Pay | InvoiceTransition::Fail | InvoiceTransition::Retry => &InvoiceState::OPEN,
            InvoiceTransition::FallDue => &[InvoiceState::Pending],
        }
    }

    /// The state this change leads to.
    pub fn to(self) -> InvoiceState {
        match self {
            InvoiceTransition::Pay => InvoiceState::Paid,
            InvoiceTransition::Fail => InvoiceState::Failed,
            InvoiceTransition::Retry | InvoiceTransition::FallDue => InvoiceState::PastDue,
        }
    }

    fn name(self) -> &'static str {
        match self {
            InvoiceTransition::Pay => "be paid",
            InvoiceTransition::Fail => "fail",
            InvoiceTransition::Retry => "be retried",
            InvoiceTransition::FallDue => "fall due",
        }
    }
}

/// A change of a transaction's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionTransition {
    /// The gateway approved it.
    Approve,
    /// The gateway declined it.
    Decline,
    /// An approved transaction voided before settlement.
    Void,
}

impl TransactionTransition {
    /// The statuses this change may start from.
    pub fn from_statuses(self) -> &'static [TransactionStatus] {
        match self {
            TransactionTransition::Approve | TransactionTransition::Decline => &[TransactionStatus::Processing],
            TransactionTransition::Void => &[TransactionStatus::Success],
        }
    }

    /// The status this change leads to.
    pub fn to(self) -> TransactionStatus {
        match self {
            TransactionTransition::Approve => TransactionStatus::Success,
            TransactionTransition::Decline => TransactionStatus::Declined,
            TransactionTransition::Void => TransactionStatus::Void,
        }
    }

    /// The completion of a gateway call: approved or declined.
    pub fn completion(approved: bool) -> Self {
        if approved { TransactionTransition::Approve } else { TransactionTransition::Decline }
    }
}

impl TransactionStatus {
    /// The status `change` leads to from this one.
    pub fn apply(self, change: TransactionTransition) -> Result<TransactionStatus, IllegalTransition> {
        if change.from_statuses().contains(&self) {
            Ok(change.to())
        } else {
            let name = match change {
                TransactionTransition::Approve => "be approved",
                TransactionTransition::Decline => "be declined",
                TransactionTransition::Void => "be voided",
            };
            Err(IllegalTransition { from: self.as_str(), change: name })
        }
    }

    /// Whether the transaction's outcome is known (the gateway answered).
    pub fn is_complete(self) -> bool {
        self != TransactionStatus::Processing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INVOICE_CHANGES: [InvoiceTransition; 4] =
        [InvoiceTransition::Pay, InvoiceTransition::Fail, InvoiceTransition::Retry, InvoiceTransition::FallDue];

    #[test]
    fn names_round_trip() {
        for s in InvoiceState::ALL {
            assert_eq!(InvoiceState::parse(s.as_str()), Some(*s));
        }
        for s in TransactionStatus::ALL {
            assert_eq!(TransactionStatus::parse(s.as_str()), Some(*s));
        }
        assert_eq!(InvoiceState::parse("collected"), None, "wire spellings are the codec's business");
    }

    #[test]
    fn settled_invoices_never_change_again() {
        for from in [InvoiceState::Paid, InvoiceState::Failed] {
            assert!(!from.is_open() && !from.is_collectable());
            for change in INVOICE_CHANGES {
                assert!(from.apply(change).is_err(), "{from:?} {change:?}");
            }
        }
    }

    #[test]
    fn open_invoices_follow_the_table() {
        use InvoiceState::*;
        let table = [
            (Pending, [Some(Paid), Some(Failed), Some(PastDue), Some(PastDue)]),
            (Processing, [Some(Paid), Some(Failed), Some(PastDue), None]),
            (PastDue, [Some(Paid), Some(Failed), Some(PastDue), None]),
        ];
        for (from, expected) in table {
            assert!(from.is_open());
            for (change, to) in INVOICE_CHANGES.into_iter().zip(expected) {
                assert_eq!(from.apply(change).ok(), to, "{from:?} {change:?}");
            }
        }
        assert!(Pending.is_collectable() && PastDue.is_collectable() && !Processing.is_collectable());
    }

    #[test]
    fn credit_invoices_follow_their_balance() {
        assert_eq!(credit_state(-100, -100, 0), InvoiceState::Open);
        assert_eq!(credit_state(-100, -30, 0), InvoiceState::Open);
        assert_eq!(credit_state(-100, 0, 0), InvoiceState::Closed, "used up");
        assert_eq!(credit_state(-100, 0, 100), InvoiceState::Voided, "voided whole");
        assert_eq!(credit_state(-100, 0, 70), InvoiceState::Closed, "voided what was left");
        assert!(InvoiceState::Open.is_voidable());
        for s in [InvoiceState::Closed, InvoiceState::Voided, InvoiceState::Processing, InvoiceState::Paid] {
            assert!(!s.is_voidable(), "{s:?}");
        }
        for s in [InvoiceState::Open, InvoiceState::Closed, InvoiceState::Voided] {
            assert!(!s.is_open() && !s.is_collectable(), "{s:?}");
        }
    }

    #[test]
    fn transactions_complete_once_and_only_success_voids() {
        use TransactionStatus::*;
        assert_eq!(Processing.apply(TransactionTransition::completion(true)), Ok(Success));
        assert_eq!(Processing.apply(TransactionTransition::completion(false)), Ok(Declined));
        assert_eq!(Success.apply(TransactionTransition::Void), Ok(Void));
        for done in [Success, Declined, Void] {
            assert!(done.is_complete());
            assert!(done.apply(TransactionTransition::Approve).is_err());
            assert!(done.apply(TransactionTransition::Decline).is_err());
        }
        for not_voidable in [Processing, Declined, Void] {
            assert!(not_voidable.apply(TransactionTransition::Void).is_err());
        }
        assert_eq!(
            Declined.apply(TransactionTransition::Void).map_err(|e| e.to_string()),
            Err("an invoice or transaction in state `declined` cannot be voided".to_owned())
        );
    }
}

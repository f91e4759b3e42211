//! Reconciliation: rebill's transactions through a gateway compared with the gateway's own
//! records ([`crate::gateway::GatewayRecord`]), by the attempt key every call that moves money
//! carries (a purchase's and a refund's key is its transaction's uuid; a void's is
//! [`void_key`] of the purchase it voids). Pure: the use case reads both sides.
//!
//! Per attempt key, the money rebill shows is compared with the money the gateway moved:
//!
//! - a purchase `success` or `void` shows its amount taken (a void gives it back by a refund
//!   under [`void_key`], or by cancelling an authorization, which took nothing); any other
//!   status shows nothing taken;
//! - a refund `success` shows its amount given back; any other status nothing;
//! - a transaction still `processing` is **pending**: its settle job decides it, and it is
//!   counted, not compared;
//! - a gateway record still being processed counts with the amount asked for;
//! - an authorization held and never captured is always a difference.
//!
//! A gateway record without an attempt key was not made by rebill: counted as foreign, not
//! compared. A rebill transaction with no record at the gateway is reported only when it lies
//! in the window (the gateway's records are listed from the window's start).

use std::collections::{BTreeMap, HashMap};

use crate::gateway::{GatewayRecord, RecordKind, RecordState};

/// The prefix of the attempt key of a void ([`void_key`]).
const VOID_PREFIX: &str = "void:";

/// The attempt key of the void of the purchase `purchase_uuid`.
pub fn void_key(purchase_uuid: &str) -> String {
    format!("{VOID_PREFIX}{purchase_uuid}")
}

/// The purchase whose void made the attempt key `key`, if it is a void's.
pub fn voided_purchase(key: &str) -> Option<&str> {
    key.strip_prefix(VOID_PREFIX)
}

/// What a rebill transaction is, for reconciliation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryAction {
    Purchase,
    Refund,
}

/// A transaction's status, for reconciliation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryStatus {
    Success,
    /// A purchase given back whole by a void.
    Void,
    /// Declined, failed or any other status in which no money moved.
    NoMoney,
    /// The gateway's answer is not known yet.
    Processing,
}

/// One of rebill's transactions through the gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The transaction's uuid: the attempt key of its gateway call.
    pub uuid: String,
    pub action: EntryAction,
    pub status: EntryStatus,
    pub amount: i64,
    pub invoice_number: Option<i64>,
    /// Whether it was made in the compared window (a missing gateway record is reported only
    /// then).
    pub in_window: bool,
}

/// What kind of difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DifferenceKind {
    /// The gateway took money that rebill does not show collected.
    PaymentNotRecorded,
    /// rebill shows money collected that the gateway did not take.
    PaymentMissing,
    /// An authorization holds the customer's funds, never captured nor cancelled.
    AuthorizationHeld,
    /// The gateway gave money back that rebill does not show refunded.
    RefundNotRecorded,
    /// rebill shows money refunded that the gateway did not give back.
    RefundMissing,
    /// Both moved money, not the same amount.
    AmountDiffers,
}

impl DifferenceKind {
    /// Its name in reports and logs.
    pub fn name(self) -> &'static str {
        match self {
            DifferenceKind::PaymentNotRecorded => "payment_not_recorded",
            DifferenceKind::PaymentMissing => "payment_missing_at_gateway",
            DifferenceKind::AuthorizationHeld => "authorization_held",
            DifferenceKind::RefundNotRecorded => "refund_not_recorded",
            DifferenceKind::RefundMissing => "refund_missing_at_gateway",
            DifferenceKind::AmountDiffers => "amount_differs",
        }
    }

    /// What it means, in a sentence.
    pub fn meaning(self) -> &'static str {
        match self {
            DifferenceKind::PaymentNotRecorded => "the gateway took money that rebill does not show collected",
            DifferenceKind::PaymentMissing => "rebill shows money collected that the gateway did not take",
            DifferenceKind::AuthorizationHeld => "an authorization holds the customer's funds, never captured",
            DifferenceKind::RefundNotRecorded => "the gateway gave money back that rebill does not show refunded",
            DifferenceKind::RefundMissing => "rebill shows money refunded that the gateway did not give back",
            DifferenceKind::AmountDiffers => "rebill and the gateway moved different amounts",
        }
    }
}

/// One difference between rebill and the gateway, for one attempt key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub kind: DifferenceKind,
    /// Payment or refund.
    pub record: RecordKind,
    /// The attempt key.
    pub attempt: String,
    /// rebill's transaction of the attempt (the voided purchase, for a void), if any.
    pub transaction: Option<String>,
    pub invoice_number: Option<i64>,
    /// The gateway's records of the attempt.
    pub references: Vec<String>,
    /// Cents rebill shows moved.
    pub rebill_amount: i64,
    /// Cents the gateway moved (or holds, for an authorization).
    pub gateway_amount: i64,
}

/// The outcome of a comparison.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Every difference, payments first, then by attempt key.
    pub differences: Vec<Difference>,
    /// Attempt keys that agree.
    pub matched: usize,
    /// Transactions still `processing` (not compared: their settle job decides them).
    pub pending: usize,
    /// Gateway records without an attempt key (not made by rebill).
    pub foreign: usize,
}

/// Money a set of one attempt's records moved, with whether any holds funds.
fn moved(records: &[&GatewayRecord]) -> (i64, bool) {
    let mut amount = 0;
    let mut held = false;
    for r in records {
        match r.state {
            RecordState::Moved | RecordState::Moving => amount += r.amount,
            RecordState::Held => held = true,
            RecordState::Nothing => {}
        }
    }
    (amount, held)
}

/// The kind of a difference between what rebill shows and what the gateway moved.
fn kind_of(record: RecordKind, rebill: i64, gateway: i64) -> Option<DifferenceKind> {
    let kind = match (record, rebill, gateway) {
        _ if rebill == gateway => return None,
        (RecordKind::Payment, 0, _) => DifferenceKind::PaymentNotRecorded,
        (RecordKind::Payment, _, 0) => DifferenceKind::PaymentMissing,
        (RecordKind::Refund, 0, _) => DifferenceKind::RefundNotRecorded,
        (RecordKind::Refund, _, 0) => DifferenceKind::RefundMissing,
        _ => DifferenceKind::AmountDiffers,
    };
    Some(kind)
}

/// Compares rebill's transactions with the gateway's records (see the module documentation).
/// `entries` holds the transactions of the window and those the records name by key.
pub fn compare(entries: &[Entry], records: &[GatewayRecord]) -> Comparison {
    let by_uuid: HashMap<&str, &Entry> = entries.iter().map(|e| (e.uuid.as_str(), e)).collect();
    let mut out = Comparison::default();
    // Ordered by key, so that reports come out the same every time.
    let mut payments: BTreeMap<&str, Vec<&GatewayRecord>> = BTreeMap::new();
    let mut refunds: BTreeMap<&str, Vec<&GatewayRecord>> = BTreeMap::new();
    for record in records {
        let Some(attempt) = record.attempt.as_deref() else {
            out.foreign += 1;
            continue;
        };
        let side = match record.kind {
            RecordKind::Payment => &mut payments,
            RecordKind::Refund => &mut refunds,
        };
        side.entry(attempt).or_default().push(record);
    }
    let difference = |kind, record, attempt: &str, entry: Option<&Entry>, found: &[&GatewayRecord], r, g| Difference {
        kind,
        record,
        attempt: attempt.to_owned(),
        transaction: entry.map(|e| e.uuid.clone()),
        invoice_number: entry.and_then(|e| e.invoice_number),
        references: found.iter().map(|r| r.reference.clone()).collect(),
        rebill_amount: r,
        gateway_amount: g,
    };

    for (&attempt, found) in &payments {
        let entry = by_uuid.get(attempt).copied().filter(|e| e.action == EntryAction::Purchase);
        if entry.is_some_and(|e| e.status == EntryStatus::Processing) {
            out.pending += 1;
            continue;
        }
        let (taken, held) = moved(found);
        let shown = entry.map_or(0, |e| match e.status {
            EntryStatus::Success => e.amount,
            // A void gives back a captured payment by a refund (compared below), or cancels an
            // authorization, which took nothing.
            EntryStatus::Void if taken > 0 => e.amount,
            _ => 0,
        });
        let mut agrees = true;
        if held {
            let holding = found.iter().filter(|r| r.state == RecordState::Held).map(|r| r.amount).sum();
            out.differences.push(difference(
                DifferenceKind::AuthorizationHeld,
                RecordKind::Payment,
                attempt,
                entry,
                found,
                shown,
                holding,
            ));
            agrees = false;
        }
        if let Some(kind) = kind_of(RecordKind::Payment, shown, taken) {
            out.differences.push(difference(kind, RecordKind::Payment, attempt, entry, found, shown, taken));
            agrees = false;
        }
        out.matched += usize::from(agrees);
    }

    for (&attempt, found) in &refunds {
        let (entry, shown) = match voided_purchase(attempt) {
            Some(purchase) => {
                let entry = by_uuid.get(purchase).copied().filter(|e| e.action == EntryAction::Purchase);
                (entry, entry.map_or(0, |e| if e.status == EntryStatus::Void { e.amount } else { 0 }))
            }
            None => {
                let entry = by_uuid.get(attempt).copied().filter(|e| e.action == EntryAction::Refund);
                (entry, entry.map_or(0, |e| if e.status == EntryStatus::Success { e.amount } else { 0 }))
            }
        };
        if entry.is_some_and(|e| e.status == EntryStatus::Processing) {
            out.pending += 1;
            continue;
        }
        let (given, _) = moved(found);
        match kind_of(RecordKind::Refund, shown, given) {
            Some(kind) => {
                out.differences.push(difference(kind, RecordKind::Refund, attempt, entry, found, shown, given))
            }
            None => out.matched += 1,
        }
    }

    // What rebill shows in the window that the gateway has no record of.
    for e in entries.iter().filter(|e| e.in_window) {
        match (e.action, e.status) {
            // Counted above when the gateway has a record of it.
            (_, EntryStatus::Processing)
                if !payments.contains_key(e.uuid.as_str()) && !refunds.contains_key(e.uuid.as_str()) =>
            {
                out.pending += 1;
            }
            (EntryAction::Purchase, EntryStatus::Success | EntryStatus::Void) => {
                if !payments.contains_key(e.uuid.as_str()) {
                    let kind = DifferenceKind::PaymentMissing;
                    out.differences.push(difference(kind, RecordKind::Payment, &e.uuid, Some(e), &[], e.amount, 0));
                } else if e.status == EntryStatus::Void {
                    // Voided by a refund when the payment was taken, by a cancel when not.
                    let key = void_key(&e.uuid);
                    let taken = moved(&payments[e.uuid.as_str()]).0;
                    if taken > 0 && !refunds.contains_key(key.as_str()) {
                        let kind = DifferenceKind::RefundMissing;
                        out.differences.push(difference(kind, RecordKind::Refund, &key, Some(e), &[], e.amount, 0));
                    }
                }
            }
            (EntryAction::Refund, EntryStatus::Success) if !refunds.contains_key(e.uuid.as_str()) => {
                let kind = DifferenceKind::RefundMissing;
                out.differences.push(difference(kind, RecordKind::Refund, &e.uuid, Some(e), &[], e.amount, 0));
            }
            _ => {}
        }
    }
    out.differences.sort_by(|a, b| {
        let record = |d: &Difference| u8::from(d.record == RecordKind::Refund);
        (record(a), &a.attempt, a.kind).cmp(&(record(b), &b.attempt, b.kind))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(uuid: &str, action: EntryAction, status: EntryStatus, amount: i64) -> Entry {
        Entry { uuid: uuid.into(), action, status, amount, invoice_number: Some(1001), in_window: true }
    }

    fn record(
        kind: RecordKind,
        reference: &str,
        attempt: Option<&str>,
        state: RecordState,
        amount: i64,
    ) -> GatewayRecord {
        GatewayRecord {
            kind,
            reference: reference.into(),
            attempt: attempt.map(str::to_owned),
            payment: None,
            state,
            amount,
            currency: "USD".into(),
            created_at: 0,
        }
    }

    use EntryAction::{Purchase, Refund};
    use EntryStatus::{NoMoney, Processing, Success, Void};
    use RecordKind::{Payment, Refund as RefundRecord};
    use RecordState::{Held, Moved, Moving, Nothing};

    fn kinds(c: &Comparison) -> Vec<(&str, DifferenceKind)> {
        c.differences.iter().map(|d| (d.attempt.as_str(), d.kind)).collect()
    }

    #[test]
    fn agreeing_sides_have_no_difference() {
        let entries = [
            entry("p1", Purchase, Success, 2000),
            entry("p2", Purchase, NoMoney, 500),
            entry("r1", Refund, Success, 700),
            entry("p3", Purchase, Void, 900),
            entry("p4", Purchase, Void, 300),
        ];
        let records = [
            record(Payment, "pi_1", Some("p1"), Moved, 2000),
            record(Payment, "pi_2", Some("p2"), Nothing, 500),
            record(RefundRecord, "re_1", Some("r1"), Moved, 700),
            record(Payment, "pi_3", Some("p3"), Moved, 900),
            record(RefundRecord, "re_3", Some("void:p3"), Moved, 900),
            // Voided before capture: cancelled, nothing taken.
            record(Payment, "pi_4", Some("p4"), Nothing, 300),
            record(Payment, "pi_x", None, Moved, 100),
        ];
        let c = compare(&entries, &records);
        assert_eq!(kinds(&c), []);
        assert_eq!((c.matched, c.pending, c.foreign), (6, 0, 1));
    }

    #[test]
    fn money_on_one_side_only_is_a_difference() {
        let entries = [
            entry("p1", Purchase, NoMoney, 2000),
            entry("p2", Purchase, Success, 500),
            entry("r1", Refund, NoMoney, 700),
            entry("r2", Refund, Success, 300),
            entry("p3", Purchase, Success, 900),
            entry("p5", Purchase, Void, 400),
        ];
        let records = [
            record(Payment, "pi_1", Some("p1"), Moved, 2000),
            record(RefundRecord, "re_1", Some("r1"), Moved, 700),
            record(Payment, "pi_3", Some("p3"), Moved, 800),
            record(Payment, "pi_4", Some("p4"), Moved, 100),
            record(Payment, "pi_5", Some("p5"), Moved, 400),
        ];
        let c = compare(&entries, &records);
        assert_eq!(
            kinds(&c),
            [
                ("p1", DifferenceKind::PaymentNotRecorded),
                ("p2", DifferenceKind::PaymentMissing),
                ("p3", DifferenceKind::AmountDiffers),
                ("p4", DifferenceKind::PaymentNotRecorded),
                ("r1", DifferenceKind::RefundNotRecorded),
                ("r2", DifferenceKind::RefundMissing),
                ("void:p5", DifferenceKind::RefundMissing),
            ]
        );
        let p3 = &c.differences[2];
        assert_eq!(
            (p3.rebill_amount, p3.gateway_amount, p3.references.as_slice()),
            (900, 800, ["pi_3".to_owned()].as_slice())
        );
        assert_eq!(c.differences[3].transaction, None, "no transaction of rebill's has the key");
        assert_eq!(c.matched, 1, "the voided payment itself agrees");
    }

    #[test]
    fn a_held_authorization_is_always_a_difference() {
        let entries = [entry("p1", Purchase, NoMoney, 2000)];
        let records = [record(Payment, "pi_1", Some("p1"), Held, 2000)];
        let c = compare(&entries, &records);
        assert_eq!(kinds(&c), [("p1", DifferenceKind::AuthorizationHeld)]);
        assert_eq!(c.differences[0].gateway_amount, 2000);
    }

    #[test]
    fn pending_transactions_are_counted_not_compared() {
        let entries = [
            entry("p1", Purchase, Processing, 2000),
            entry("r1", Refund, Processing, 100),
            entry("p2", Purchase, Processing, 300),
        ];
        let records =
            [record(Payment, "pi_1", Some("p1"), Moved, 2000), record(RefundRecord, "re_1", Some("r1"), Moving, 100)];
        let c = compare(&entries, &records);
        assert_eq!(kinds(&c), []);
        assert_eq!((c.matched, c.pending), (0, 3));
    }

    #[test]
    fn what_lies_outside_the_window_is_compared_only_by_the_gateways_records() {
        let mut old = entry("p1", Purchase, Success, 2000);
        old.in_window = false;
        let mut refunded = entry("p2", Purchase, Success, 500);
        refunded.in_window = false;
        let records = [record(RefundRecord, "re_2", Some("r9"), Moved, 500)];
        let c = compare(&[old, refunded], &records);
        // The old purchase is not reported missing (its record lies before the window); the
        // refund is the gateway's with no rebill refund of that key.
        assert_eq!(kinds(&c), [("r9", DifferenceKind::RefundNotRecorded)]);
    }

    #[test]
    fn a_key_of_the_other_action_is_not_taken_for_the_attempt() {
        // A refund record whose key is a purchase's uuid is no refund rebill made.
        let entries = [entry("p1", Purchase, Success, 2000)];
        let records =
            [record(Payment, "pi_1", Some("p1"), Moved, 2000), record(RefundRecord, "re_1", Some("p1"), Moved, 2000)];
        let c = compare(&entries, &records);
        assert_eq!(kinds(&c), [("p1", DifferenceKind::RefundNotRecorded)]);
        assert_eq!(c.differences[0].record, RecordKind::Refund);
    }
}

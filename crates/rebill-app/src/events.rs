//! Domain events: every business change records one (or a few) in the same database transaction
//! as the change ([`rebill_store::events`]); webhooks will publish from the same rows.
//!
//! | Subject | Kinds |
//! |---|---|
//! | account code | `account.created`, `account.updated`, `account.closed`, `account.reopened`, `billing_info.updated`, `billing_info.removed` |
//! | subscription uuid | `subscription.created`, `.activated`, `.changed`, `.updated`, `.renewed`, `.trial_ended`, `.pause_scheduled`, `.pause_canceled` (a scheduled pause dropped by a resume), `.paused`, `.paused_renewal`, `.resumed`, `.canceled`, `.reactivated`, `.postponed`, `.past_due`, `.recovered`, `.expired` |
//! | invoice number | `invoice.created`, `invoice.past_due`, `invoice.dunning`, `invoice.paid`, `invoice.failed`; credit invoices `credit_invoice.closed`, `.voided`, `.reopened`, `.processing` ([`rebill_store::credits`]) |
//! | credit payment uuid | `credit_payment.created`, `credit_payment.voided` |
//! | transaction uuid | `transaction.approved`, `transaction.declined` |
//! | account code | `shipping_address.created`, `.updated`, `.deleted` ([`crate::shipping_addresses`]) |
//! | gift card id | `gift_card.purchased`, `gift_card.delivered`, `gift_card.redeemed` (see [`crate::gift_cards`]) |
//! | gift card product code | `gift_card_product.added`, `gift_card_product.removed` |
//! | coupon code | `coupon.created`, `coupon.updated`, `coupon.expired`, `coupon.restored`, `coupon.codes_generated` (see [`crate::coupons`]) |
//! | redemption uuid | `redemption.created`, `redemption.removed`; an invoice's use of redemptions is `invoice.discounted` (subject: the invoice number) |
//!
//! Databases older than the events hold `subscription.history` events too: the subscription
//! history they had, kept by the migration (one per accepted action, the action as payload).
//!
//! The payload is a small JSON object: the account code and what the change was (states,
//! amounts, the action a subscription accepted, what settled an invoice).
//!
//! # Reactions
//!
//! The subscriptions react to an invoice paid or failed after the call that invoiced it
//! ([`crate::subscriptions::reacts_to`]): its past-due subscriptions recover, or they expire.
//! Such an event is recorded as awaiting its reaction, and [`drain`] delivers awaiting events to
//! their subscriber, in order, then marks each handled. A use case that settles an invoice
//! drains its invoice's events before it returns (so its answer shows the subscriptions as they
//! end up), and the scheduler drains whatever a crash left behind. A reaction runs at least once:
//! one interrupted before its mark runs again, which is harmless because reactions are
//! idempotent (a recovered subscription is not past due any more, an expired one stays expired);
//! once marked it never runs again.

use rebill_store::events::{Awaiting, Event, NewEvent};
use serde_json::{Value, json};

use crate::Services;
use crate::jobs::JobError;

pub const ACCOUNT_CREATED: &str = "account.created";
pub const ACCOUNT_UPDATED: &str = "account.updated";
pub const ACCOUNT_CLOSED: &str = "account.closed";
pub const ACCOUNT_REOPENED: &str = "account.reopened";
pub const BILLING_INFO_UPDATED: &str = "billing_info.updated";
pub const BILLING_INFO_REMOVED: &str = "billing_info.removed";
pub const SUBSCRIPTION_CREATED: &str = "subscription.created";
pub const SUBSCRIPTION_PAST_DUE: &str = "subscription.past_due";
pub const SUBSCRIPTION_RECOVERED: &str = "subscription.recovered";
pub const SUBSCRIPTION_EXPIRED: &str = "subscription.expired";
pub const INVOICE_CREATED: &str = "invoice.created";
pub const INVOICE_PAST_DUE: &str = "invoice.past_due";
pub const INVOICE_PAID: &str = "invoice.paid";
pub const INVOICE_FAILED: &str = "invoice.failed";
/// A dunning event of an automatically collected invoice: a collection declined, the invoice
/// entering or staying in dunning (payload: `dunning_events_count`, `final`).
pub const INVOICE_DUNNING: &str = "invoice.dunning";
pub const TRANSACTION_APPROVED: &str = "transaction.approved";
pub const TRANSACTION_DECLINED: &str = "transaction.declined";
/// A failed charge invoice written off with Credit Memos (subject: its number).
pub const INVOICE_WRITTEN_OFF: &str = "invoice.written_off";
/// A successful purchase voided before it settled (subject: its uuid).
pub const TRANSACTION_VOIDED: &str = "transaction.voided";
/// A refund invoice settled: what it gives back is given (or, with Credit Memos, kept as credit).
pub const INVOICE_REFUNDED: &str = "invoice.refunded";
/// A refund invoice of a site without Credit Memos failed: the gateway declined the refund.
pub const INVOICE_REFUND_FAILED: &str = "invoice.refund_failed";
/// A credit payment made (see `rebill_store::credits`).
pub const CREDIT_PAYMENT_CREATED: &str = rebill_store::credits::CREDIT_PAYMENT_CREATED;

/// Events delivered at a time by [`drain`].
const DRAIN_BATCH: i64 = 100;

/// An event of `kind` at `at` (site clock) with `payload`, recorded now (service clock); it
/// awaits a reaction when a subscriber reacts to it.
pub fn new(services: &Services, kind: &str, at: i64, payload: Value) -> NewEvent {
    NewEvent {
        kind: kind.to_owned(),
        at,
        recorded_at: services.clock.now(),
        awaits_reaction: crate::subscriptions::reacts_to(kind, &payload),
        payload: payload.to_string(),
    }
}

/// An event of an account (`account.*`, `billing_info.*`): the payload names the account.
pub fn account(services: &Services, kind: &str, at: i64, account_code: &str) -> NewEvent {
    new(services, kind, at, json!({ "account_code": account_code }))
}

/// Delivers the events of `scope` that await their reaction to their subscriber, in order, and
/// marks each handled once its reaction ran; answers how many were handled. The first reaction
/// that fails stops the drain with its error (its event stays awaiting for a later drain).
pub async fn drain(services: &Services, scope: Awaiting<'_>) -> Result<usize, JobError> {
    run(services, scope, false).await
}

/// [`drain`] going on past a reaction that fails (it is logged and stays awaiting for the next
/// sweep): the scheduler's pick-up of reactions a crash interrupted.
pub async fn sweep(services: &Services, scope: Awaiting<'_>) -> Result<usize, JobError> {
    run(services, scope, true).await
}

async fn run(services: &Services, scope: Awaiting<'_>, keep_going: bool) -> Result<usize, JobError> {
    let mut handled = 0;
    let mut after = 0;
    loop {
        let events = services.store.awaiting_events(scope, after, DRAIN_BATCH).await?;
        let Some(last) = events.last() else { return Ok(handled) };
        after = last.id;
        for event in &events {
            match deliver(services, event).await {
                Ok(()) => {
                    if services.store.mark_event_handled(event.id, services.clock.now()).await? {
                        handled += 1;
                    }
                }
                Err(e) if keep_going => {
                    tracing::warn!(event = event.id, kind = %event.kind, subject = %event.subject, error = %e,
                        "the reaction to an event failed; the next sweep tries again");
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Runs the reaction of the event's subscriber.
async fn deliver(services: &Services, event: &Event) -> Result<(), JobError> {
    match event.kind.as_str() {
        INVOICE_PAID => crate::subscriptions::on_invoice_settled(services, event).await,
        INVOICE_FAILED => {
            crate::subscriptions::on_invoice_settled(services, event).await?;
            crate::write_offs::on_invoice_failed(services, event).await
        }
        // No subscriber reacts to other kinds (they are never recorded as awaiting).
        _ => Ok(()),
    }
}

//! The reactions to domain events. The subscriptions react to an invoice paid or failed after
//! the call that invoiced it: its past-due subscriptions recover, or they expire; a failed
//! charge invoice of a Credit Memos site is written off. Such an event is recorded as awaiting
//! its reaction ([`crate::platform::events::reacts_to`]), and [`drain`] delivers awaiting events to their
//! subscriber, in order, then marks each handled. A use case that settles an invoice drains its
//! invoice's events before it returns ([`crate::collection::settlement`], offline payments), so its answer
//! shows the subscriptions as they end up, and the scheduler sweeps whatever a crash left
//! behind. A reaction runs at least once: one interrupted before its mark runs again, which is
//! harmless because reactions are idempotent (a recovered subscription is not past due any
//! more, an expired one stays expired); once marked it never runs again.
//!
//! What an invoice paid for follows its payment too: a gift card waiting for its purchase
//! invoice is purchased and delivered when that invoice is paid, and discarded when its payment
//! is declined ([`gift_card_purchased`], [`gift_card_settled`]), alike whether the answer came at
//! once (the purchase's own call) or later (the settle job).

use rebill_store::StoreError;
use rebill_store::events::{Awaiting, Event};
use rebill_store::gift_cards::GiftCard;
use rebill_store::invoices::Invoice;
use serde_json::json;

use crate::Services;
use crate::platform::events::{self, GIFT_CARD_DELIVERED, GIFT_CARD_PURCHASED, INVOICE_FAILED, INVOICE_PAID};
use crate::platform::jobs::JobError;

/// Kind of the job delivering a gift card at its `deliver_at` (subject: the card's id; run by
/// `selling::gift_cards::run_delivery`).
pub const GIFT_CARD_DELIVERY_JOB: &str = "gift_card_delivery";

/// Events delivered at a time by [`drain`].
const DRAIN_BATCH: i64 = 100;

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
        INVOICE_PAID => crate::subscriptions::lifecycle::on_invoice_settled(services, event).await,
        INVOICE_FAILED => {
            crate::subscriptions::lifecycle::on_invoice_settled(services, event).await?;
            crate::money_back::write_offs::on_invoice_failed(services, event).await
        }
        // No subscriber reacts to other kinds (they are never recorded as awaiting).
        _ => Ok(()),
    }
}

/// A gift card whose purchase invoice was paid: purchased at `at` (`gift_card.purchased`), and
/// delivered then (`gift_card.delivered`) when no `deliver_at` was asked or that time has passed
/// already (a payment whose answer came late), else by its delivery job at `deliver_at`. The
/// purchase's own call and the settle job confirm a card alike. `None` when the card was not
/// waiting for its purchase (confirmed already, or discarded).
pub async fn gift_card_purchased(
    services: &Services,
    card: &GiftCard,
    at: i64,
) -> Result<Option<GiftCard>, StoreError> {
    let deliver_at = card.delivery.deliver_at.filter(|due| *due > at);
    let delivered = deliver_at.is_none().then_some(at);
    let mut recorded = vec![events::gift_card(services, GIFT_CARD_PURCHASED, at, card, json!({}))];
    if delivered.is_some() {
        recorded.push(events::gift_card(services, GIFT_CARD_DELIVERED, at, card, json!({})));
    }
    if let Some(due) = deliver_at {
        // The job first: a crash after it leaves a job that finds the card purchased or not.
        services.store.schedule_job(card.site_id, GIFT_CARD_DELIVERY_JOB, &card.id.to_string(), due).await?;
    }
    services.store.confirm_gift_card(card.id, at, delivered, &recorded).await
}

/// The gift card waiting for the payment of `invoice` (its purchase invoice), once that payment
/// is known after the call that made it (the settle job): paid, the card is purchased
/// ([`gift_card_purchased`]); declined, it is discarded, and nothing of it is kept, as when the
/// purchase is declined at once. An invoice no card waits for needs nothing.
pub async fn gift_card_settled(services: &Services, invoice: &Invoice, paid: bool, at: i64) -> Result<(), StoreError> {
    let Some(card) = services.store.gift_card_awaiting(invoice.id).await? else { return Ok(()) };
    if paid {
        gift_card_purchased(services, &card, at).await?;
    } else {
        services.store.discard_gift_card(card.id).await?;
    }
    Ok(())
}

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

use rebill_store::events::{Awaiting, Event};

use crate::Services;
use crate::platform::events::{INVOICE_FAILED, INVOICE_PAID};
use crate::platform::jobs::JobError;

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

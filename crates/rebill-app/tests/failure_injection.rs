//! The use cases in process, over a real store on both backends, with a scriptable gateway:
//! a decline injected in the middle of a batch of renewals touches only its own invoice, running
//! the scheduler again bills nothing twice, and the dunning retry charges the declined invoice
//! once.

mod common;

use common::{DAY, Scripted, T0, TestClock, subscribers};
use rebill_app::scheduler;
use rebill_store::PageRequest;
use rebill_store::invoicing::{InvoiceFilter, InvoiceState, TransactionFilter, TransactionStatus};
use rebill_store::testing::both_backends;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decline_in_the_middle_of_a_batch_touches_only_its_subscription_and_nothing_is_billed_twice() {
    for store in both_backends("app_failure_injection").await {
        let backend = store.backend();
        // Purchases 1-5 are the first payments; 6-10 the renewals, run as one batch; the 8th
        // (the third renewal) is declined.
        let gateway = Scripted::declining(&[8]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 5).await;
        assert_eq!(gateway.purchases(), 5, "{backend:?}: first payments");

        // A month later (February 1st) every renewal is due; the dunning retry of a declined
        // one is a day after its invoice.
        clock.set(T0 + 31 * DAY + 3600);
        let ran = scheduler::run_due(&services, Some(&ctx.site)).await.expect("renewals ran");
        assert!(ran >= 5, "{backend:?}: {ran} jobs ran");
        assert_eq!(gateway.purchases(), 10, "{backend:?}: one charge per renewal");

        let page = PageRequest { limit: 100, ..PageRequest::default() };
        let invoices =
            services.store.list_invoices(ctx.site.id, &InvoiceFilter::default(), &page).await.expect("invoices").items;
        let states: Vec<InvoiceState> = invoices.iter().map(|i| i.state).collect();
        assert_eq!(invoices.len(), 10, "{backend:?}: {states:?}");
        assert_eq!(states.iter().filter(|s| **s == InvoiceState::Paid).count(), 9, "{backend:?}: {states:?}");
        assert_eq!(states.iter().filter(|s| **s == InvoiceState::PastDue).count(), 1, "{backend:?}: {states:?}");
        let declined = services
            .store
            .list_transactions(
                ctx.site.id,
                &TransactionFilter { statuses: vec![TransactionStatus::Declined], ..TransactionFilter::default() },
                &page,
            )
            .await
            .expect("transactions")
            .items;
        assert_eq!(declined.len(), 1, "{backend:?}: the injected decline only");
        let past_due = invoices.iter().find(|i| i.state == InvoiceState::PastDue).expect("a past-due invoice");
        assert_eq!(declined[0].invoice_number, Some(past_due.invoice_number), "{backend:?}");

        // Running the scheduler again at the same time finds nothing due: nothing is charged or
        // invoiced twice.
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("second run");
        assert_eq!(gateway.purchases(), 10, "{backend:?}: no second charge");
        let again =
            services.store.list_invoices(ctx.site.id, &InvoiceFilter::default(), &page).await.expect("invoices");
        assert_eq!(again.items.len(), 10, "{backend:?}: no second invoice");

        // The retry a day later charges the declined invoice once (approved this time).
        clock.set(T0 + 32 * DAY + 3600);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("retry");
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("nothing left");
        assert_eq!(gateway.purchases(), 11, "{backend:?}: one retry");
        let retried = services.store.invoice_by_id(past_due.id).await.expect("invoice").expect("kept");
        assert_eq!(retried.state, InvoiceState::Paid, "{backend:?}");
        let amounts = gateway.purchases.lock().map(|p| p.clone()).unwrap_or_default();
        assert!(amounts.iter().all(|a| *a == 1000), "{backend:?}: {amounts:?}");
    }
}

//! The use cases in process, over a real store on both backends, with a scriptable gateway:
//! a decline injected in the middle of a batch of renewals touches only its own invoice, running
//! the scheduler again bills nothing twice, and the dunning retry charges the declined invoice
//! once; a gateway that cannot be reached or does not answer in the middle of a batch declines
//! only its own renewal (unreachable: a `communication` decline, retried by dunning; silent: an
//! unknown outcome, settled by asking again under the same key); a run that dies between
//! recording its transactions `processing` and completing them is finished by the next run after
//! its leases end, asking the gateway again under the same idempotency keys, and bills nothing
//! twice.

use std::time::Duration;

use rebill_app::operations::scheduler;
use rebill_app::operations::testing::{DAY, Script, Scripted, T0, TestClock, subscribers};
use rebill_billing::states::{InvoiceState, TransactionStatus};
use rebill_store::invoices::{Invoice, InvoiceFilter, Transaction, TransactionFilter};
use rebill_store::testing::both_backends;
use rebill_store::{PageRequest, Store};

fn page() -> PageRequest {
    PageRequest { limit: 100, ..PageRequest::default() }
}

async fn invoices(store: &Store, site_id: i64) -> Vec<Invoice> {
    store.list_invoices(site_id, &InvoiceFilter::default(), &page()).await.expect("invoices").items
}

async fn transactions(store: &Store, site_id: i64, statuses: Vec<TransactionStatus>) -> Vec<Transaction> {
    let filter = TransactionFilter { statuses, ..TransactionFilter::default() };
    store.list_transactions(site_id, &filter, &page()).await.expect("transactions").items
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_gateway_declines_only_its_own_renewal_and_a_silent_one_is_settled_later() {
    for store in both_backends("app_gateway_failures").await {
        let backend = store.backend();
        // Purchases 1-4 are the first payments, 5-8 the renewals: the 6th cannot reach the
        // gateway, the 7th never answers.
        let gateway = Scripted::following(&[(6, Script::Error), (7, Script::Hang)]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 4).await;
        let services = services.with_gateway_timeout(Duration::from_millis(200));

        clock.set(T0 + 31 * DAY + 3600);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("renewals ran");
        // The silent call's outcome is not known: its settle job (due 30 s after the renewal,
        // so within this run) asks the gateway again under the same key, which approves it.
        assert_eq!(gateway.purchases(), 9, "{backend:?}: one call per renewal, one more for the silent one");
        assert_eq!(gateway.distinct_keys(), 8, "{backend:?}: asked again under its own key");
        let all = invoices(&services.store, ctx.site.id).await;
        let past_due: Vec<&Invoice> = all.iter().filter(|i| i.state == InvoiceState::PastDue).collect();
        assert_eq!((all.len(), past_due.len()), (8, 1), "{backend:?}");
        assert!(all.iter().all(|i| matches!(i.state, InvoiceState::Paid | InvoiceState::PastDue)), "{backend:?}");
        let declined = transactions(&services.store, ctx.site.id, vec![TransactionStatus::Declined]).await;
        let codes: Vec<String> =
            declined.iter().filter_map(|t| t.result.failure.as_ref().map(|f| f.error_code.clone())).collect();
        assert_eq!(codes, ["gateway_unavailable"], "{backend:?}: a call that did not answer is never declined");
        let processing = transactions(&services.store, ctx.site.id, vec![TransactionStatus::Processing]).await;
        assert!(processing.is_empty(), "{backend:?}: every call has an outcome");

        // The dunning retry a day later charges the declined one once, under a key of its own.
        clock.set(T0 + 32 * DAY + 3600);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("retries");
        assert_eq!(gateway.purchases(), 10, "{backend:?}: one retry");
        assert_eq!(gateway.distinct_keys(), 9, "{backend:?}");
        let all = invoices(&services.store, ctx.site.id).await;
        assert!(all.iter().all(|i| i.state == InvoiceState::Paid), "{backend:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_dies_mid_charge_is_finished_by_the_next_run_without_charging_twice() {
    for store in both_backends("app_crash_mid_charge").await {
        let backend = store.backend();
        // Purchases 1-3 are the first payments; the renewals run as one batch and the second
        // renewal's call (the 5th) never answers: the run dies there.
        let gateway = Scripted::following(&[(5, Script::Hang)]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 3).await;

        clock.set(T0 + 31 * DAY + 3600);
        // One runner, so that the three renewals are one batch (runners side by side may split
        // them, and a batch of the others would finish before the hung call).
        let run = {
            let (services, site) = (services.clone(), ctx.site.clone());
            tokio::spawn(async move { scheduler::run_due_with(&services, Some(&site), scheduler::BATCH, 1).await })
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while gateway.purchases() < 5 {
            assert!(tokio::time::Instant::now() < deadline, "{backend:?}: the renewals never reached the gateway");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        run.abort();
        assert!(run.await.is_err_and(|e| e.is_cancelled()), "{backend:?}: the run died");
        let processing = transactions(&services.store, ctx.site.id, vec![TransactionStatus::Processing]).await;
        assert_eq!(processing.len(), 3, "{backend:?}: the batch's transactions were recorded before its calls");
        let before = invoices(&services.store, ctx.site.id).await;
        assert_eq!(before.iter().filter(|i| i.state == InvoiceState::Pending).count(), 3, "{backend:?}");

        // Another process takes over once the dead run's leases have ended.
        clock.set(T0 + 31 * DAY + 3 * 3600);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("recovery");
        let after = invoices(&services.store, ctx.site.id).await;
        assert_eq!(after.len(), 6, "{backend:?}: nothing invoiced twice");
        assert!(after.iter().all(|i| i.state == InvoiceState::Paid), "{backend:?}");
        let processing = transactions(&services.store, ctx.site.id, vec![TransactionStatus::Processing]).await;
        assert!(processing.is_empty(), "{backend:?}: every recorded transaction completed");
        let approved: Vec<Transaction> = transactions(&services.store, ctx.site.id, vec![TransactionStatus::Success])
            .await
            .into_iter()
            .filter(|t| t.new.action == "purchase")
            .collect();
        assert_eq!(approved.len(), 6, "{backend:?}: one purchase per invoice (besides the cards' verifications)");
        // The gateway was asked again only under the keys it had been given: 6 payments.
        assert_eq!(gateway.distinct_keys(), 6, "{backend:?}");
        for invoice in &after {
            let of_invoice = approved.iter().filter(|t| t.invoice_number == Some(invoice.invoice_number)).count();
            assert_eq!(of_invoice, 1, "{backend:?}: invoice {}", invoice.invoice_number);
        }

        // Nothing is left to do, and a later run changes nothing.
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("nothing left");
        assert_eq!(gateway.distinct_keys(), 6, "{backend:?}");
    }
}

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

        let page = page();
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

//! Refunds, voids and payouts of credit whose run dies while the gateway has their call, on both backends: the
//! refund invoice and its refund transaction were recorded `processing` before the call, so the
//! recovery job finishes them once due, asking the gateway again under the same idempotency
//! key; nothing is given back twice and nothing recorded is lost.

use std::sync::Arc;
use std::time::Duration;

use rebill_app::billing::adjustments;
use rebill_app::billing::invoicing::{self, Invoiced};
use rebill_app::customers::accounts;
use rebill_app::customers::payment_methods;
use rebill_app::money_back::refunds::{self, GivenBack, RECOVERY_SECONDS, RefundError, RefundRequest};
use rebill_app::operations::scheduler;
use rebill_app::operations::testing::{Call, Script, Scripted, T0, TestClock, card};
use rebill_app::{Context, Services};
use rebill_billing::refund::RefundMethod;
use rebill_billing::states::{InvoiceState, TransactionStatus};
use rebill_store::accounts::AccountFields;
use rebill_store::invoices::{Invoice, InvoiceTerms, Transaction};
use rebill_store::testing::both_backends;
use rebill_store::{Mode, NewSite, Plan, Store};

async fn site(store: Store, gateway: Arc<Scripted>) -> (Services, Context, Arc<TestClock>) {
    site_with(store, gateway, false).await
}

async fn site_with(store: Store, gateway: Arc<Scripted>, credit_memos: bool) -> (Services, Context, Arc<TestClock>) {
    let clock = TestClock::starting(T0);
    let services = Services::new(store, clock.clone()).with_gateway(gateway);
    let new = NewSite { name: "recovery".into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos, contact: None };
    let (site, _) = services.store.create_site(&new, T0).await.expect("site");
    (services, Context { site, now: T0 }, clock)
}

/// An account paying by card and an invoice of `cents` it paid; answers the invoice and its
/// purchase.
async fn paid(services: &Services, ctx: &Context, code: &str, cents: i64) -> (Invoice, Transaction) {
    let account = accounts::create(services, ctx, code, &AccountFields::default(), None).await.expect("account");
    payment_methods::apply(services, ctx, &account, &card()).await.expect("billing info");
    let charge = adjustments::NewCharge { unit_amount_in_cents: cents, currency: "USD".into(), ..Default::default() };
    adjustments::create(services, ctx, &account, &charge).await.expect("adjustment");
    let Invoiced { invoice, .. } =
        invoicing::invoice_pending(services, ctx, &account, InvoiceTerms::default()).await.expect("invoiced");
    assert_eq!(invoice.state, InvoiceState::Paid);
    let purchase = services
        .store
        .invoice_transactions(invoice.id)
        .await
        .expect("transactions")
        .into_iter()
        .find(|t| t.new.action == "purchase")
        .expect("the purchase");
    (invoice, purchase)
}

/// The refund invoices of `original`.
async fn refund_invoices(services: &Services, ctx: &Context, original: &Invoice) -> Vec<Invoice> {
    let page = rebill_store::PageRequest { limit: 50, ..Default::default() };
    let filter = rebill_store::invoices::InvoiceFilter { account_id: Some(original.account_id), ..Default::default() };
    let all = services.store.list_invoices(ctx.site.id, &filter, &page).await.expect("invoices").items;
    all.into_iter().filter(|i| i.original_invoice_id == Some(original.id)).collect()
}

/// Waits until `done` holds of the gateway (its call was made and is hanging).
async fn until(gateway: &Scripted, done: impl Fn(&Scripted) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !done(gateway) {
        assert!(tokio::time::Instant::now() < deadline, "the gateway was never called");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_stopped_at_the_gateway_is_finished_once_by_its_recovery_job() {
    for store in both_backends("app_refund_recovery").await {
        let backend = store.backend();
        let gateway = Scripted::scripting(&[(Call::Refund, 1, Script::Hang)]);
        let (services, ctx, clock) = site(store, gateway.clone()).await;
        let (original, purchase) = paid(&services, &ctx, "r1", 5000).await;

        let request = RefundRequest::of_amount(Some(3000), RefundMethod::CreditFirst);
        let run = {
            let (services, ctx, number) = (services.clone(), ctx.clone(), original.invoice_number.to_string());
            tokio::spawn(async move { refunds::refund_invoice(&services, &ctx, &number, &request).await })
        };
        until(&gateway, |g| g.refunds() == 1).await;
        run.abort();
        assert!(run.await.is_err_and(|e| e.is_cancelled()), "{backend:?}: the run died");
        let stopped = refund_invoices(&services, &ctx, &original).await;
        assert_eq!(stopped.len(), 1, "{backend:?}");
        assert_eq!(stopped[0].state, InvoiceState::Processing, "{backend:?}");
        let waiting = services.store.invoice_transactions(stopped[0].id).await.expect("transactions");
        assert_eq!(waiting.len(), 1, "{backend:?}");
        assert_eq!((waiting[0].status(), waiting[0].new.amount), (TransactionStatus::Processing, 3000));

        // Not due yet: nothing runs. Once due, the job asks again under the same key.
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("run");
        assert_eq!(gateway.refunds(), 1, "{backend:?}");
        clock.set(T0 + RECOVERY_SECONDS);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("recovery");
        assert_eq!(gateway.refunds(), 2, "{backend:?}");
        assert_eq!(gateway.distinct_refund_keys(), 1, "{backend:?}: the same refund, asked again");
        let finished = services.store.invoice_by_id(stopped[0].id).await.expect("read").expect("refund invoice");
        assert_eq!(finished.state, InvoiceState::Paid, "{backend:?}");
        assert_eq!((finished.amounts.total, finished.amounts.balance), (-3000, 0), "{backend:?}");
        let done = services.store.transaction_by_id(waiting[0].id).await.expect("read").expect("refund");
        assert_eq!(done.status(), TransactionStatus::Success, "{backend:?}");
        let purchase = services.store.transaction_by_id(purchase.id).await.expect("read").expect("purchase");
        assert_eq!(purchase.refunded, 3000, "{backend:?}");

        // A later run changes nothing; what is left to refund is the 2000 not refunded.
        clock.set(T0 + 2 * RECOVERY_SECONDS);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("nothing left");
        assert_eq!(gateway.refunds(), 2, "{backend:?}");
        let ctx = Context { site: ctx.site.clone(), now: T0 + 2 * RECOVERY_SECONDS };
        let more = RefundRequest::of_amount(Some(2001), RefundMethod::CreditFirst);
        let refused = refunds::refund_invoice(&services, &ctx, &original.invoice_number.to_string(), &more).await;
        assert!(matches!(refused, Err(RefundError::Refused(_))), "{backend:?}: {refused:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_void_stopped_at_the_gateway_is_finished_once_by_its_recovery_job() {
    for store in both_backends("app_void_recovery").await {
        let backend = store.backend();
        let gateway = Scripted::scripting(&[(Call::Void, 1, Script::Hang)]);
        let (services, ctx, clock) = site(store, gateway.clone()).await;
        let (original, purchase) = paid(&services, &ctx, "v1", 4000).await;

        let run = {
            let (services, ctx, uuid) = (services.clone(), ctx.clone(), purchase.uuid.clone());
            tokio::spawn(async move { refunds::give_back_transaction(&services, &ctx, &uuid, None).await })
        };
        until(&gateway, |g| g.voids() == 1).await;
        run.abort();
        assert!(run.await.is_err_and(|e| e.is_cancelled()), "{backend:?}: the run died");
        let stopped = refund_invoices(&services, &ctx, &original).await;
        assert_eq!(stopped.len(), 1, "{backend:?}");
        assert_eq!(stopped[0].state, InvoiceState::Processing, "{backend:?}");
        assert!(services.store.invoice_transactions(stopped[0].id).await.expect("transactions").is_empty());
        let still = services.store.transaction_by_id(purchase.id).await.expect("read").expect("purchase");
        assert_eq!(still.status(), TransactionStatus::Success, "{backend:?}");

        // Giving it back again meanwhile is refused: the invoice has nothing left to refund.
        let again = refunds::give_back_transaction(&services, &ctx, &purchase.uuid, None).await;
        assert!(matches!(again, Err(RefundError::Refused(_))), "{backend:?}: {again:?}");

        clock.set(T0 + RECOVERY_SECONDS);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("recovery");
        assert_eq!((gateway.voids(), gateway.distinct_void_keys()), (2, 1), "{backend:?}: the same void, asked again");
        assert_eq!(gateway.refunds(), 0, "{backend:?}");
        let voided = services.store.transaction_by_id(purchase.id).await.expect("read").expect("purchase");
        assert_eq!(voided.status(), TransactionStatus::Void, "{backend:?}");
        let finished = services.store.invoice_by_id(stopped[0].id).await.expect("read").expect("refund invoice");
        assert_eq!(finished.state, InvoiceState::Paid, "{backend:?}");
        assert_eq!((finished.amounts.total, finished.amounts.balance), (-4000, 0), "{backend:?}");
        let ctx = Context { site: ctx.site.clone(), now: T0 + RECOVERY_SECONDS };
        let after = refunds::give_back_transaction(&services, &ctx, &purchase.uuid, None).await;
        assert!(matches!(after, Err(RefundError::Refused(_))), "{backend:?}: {after:?}");
        assert!(!matches!(after, Ok(GivenBack::Voided(_))));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payout_of_credit_stopped_at_the_gateway_is_finished_once_by_its_recovery_job() {
    for store in both_backends("app_payout_recovery").await {
        let backend = store.backend();
        let gateway = Scripted::scripting(&[(Call::Refund, 1, Script::Hang)]);
        let (services, ctx, clock) = site_with(store, gateway.clone(), true).await;
        let (original, purchase) = paid(&services, &ctx, "c1", 4000).await;
        let all = |method| RefundRequest::of_amount(None, method);
        // All of it as credit (no gateway call), then that credit paid back to the card.
        let number = original.invoice_number.to_string();
        let credit = refunds::refund_invoice(&services, &ctx, &number, &all(RefundMethod::AllCredit)).await;
        let credit = credit.expect("credit invoice");
        assert_eq!((credit.state, credit.amounts.balance), (InvoiceState::Open, -4000), "{backend:?}");
        let run = {
            let (services, ctx, number) = (services.clone(), ctx.clone(), credit.invoice_number.to_string());
            let request = all(RefundMethod::CreditFirst);
            tokio::spawn(async move { refunds::refund_invoice(&services, &ctx, &number, &request).await })
        };
        until(&gateway, |g| g.refunds() == 1).await;
        run.abort();
        assert!(run.await.is_err_and(|e| e.is_cancelled()), "{backend:?}: the run died");
        // The credit left the balance when the payout was recorded; the invoice waits.
        let stopped = services.store.invoice_by_id(credit.id).await.expect("read").expect("credit invoice");
        assert_eq!((stopped.state, stopped.amounts.balance), (InvoiceState::Processing, 0), "{backend:?}");
        let waiting = services.store.invoice_transactions(credit.id).await.expect("transactions");
        assert_eq!(waiting.len(), 1, "{backend:?}");
        assert_eq!((waiting[0].status(), waiting[0].new.amount), (TransactionStatus::Processing, 4000));
        assert_eq!(waiting[0].new.original_transaction_id, Some(purchase.id), "{backend:?}: back to the card");

        clock.set(T0 + RECOVERY_SECONDS);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("recovery");
        assert_eq!(gateway.refunds(), 2, "{backend:?}");
        assert_eq!(gateway.distinct_refund_keys(), 1, "{backend:?}: the same refund, asked again");
        let finished = services.store.invoice_by_id(credit.id).await.expect("read").expect("credit invoice");
        assert_eq!((finished.state, finished.amounts.balance), (InvoiceState::Closed, 0), "{backend:?}");
        let payments = services.store.invoice_credit_payments(credit.id).await.expect("credit payments");
        let refunds: Vec<_> = payments.iter().filter(|p| p.action.as_str() == "refund").collect();
        assert_eq!(refunds.len(), 1, "{backend:?}");
        assert_eq!((refunds[0].amount, refunds[0].voided_at), (4000, None), "{backend:?}");
        let purchase = services.store.transaction_by_id(purchase.id).await.expect("read").expect("purchase");
        assert_eq!(purchase.refunded, 4000, "{backend:?}");
        // Nothing is left to pay out.
        let ctx = Context { site: ctx.site.clone(), now: T0 + RECOVERY_SECONDS };
        let again = refunds::refund_invoice(
            &services,
            &ctx,
            &credit.invoice_number.to_string(),
            &all(RefundMethod::CreditFirst),
        )
        .await;
        assert!(matches!(again, Err(RefundError::Refused(_))), "{backend:?}: {again:?}");
    }
}

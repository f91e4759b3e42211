//! Payments whose outcome is not known, in process over a real store on both backends with a
//! scriptable gateway: a lost answer leaves the transaction `processing` and the invoice as it
//! was (never declined), the settle job asks the gateway again under the same key and does what
//! the answer calls for (paid; or failed for a one-off charge), no new attempt of the invoice
//! starts meanwhile, and a transaction left `processing` by a stopped process is found by the
//! sweep and settled.

use rebill_app::billing::transactions::{Charged, OneOffCharge, charge_once};
use rebill_app::collection::settlement::{STALE_SECONDS, Settlement, settle_invoice};
use rebill_app::operations::scheduler;
use rebill_app::operations::testing::{Script, Scripted, T0, TestClock, subscribers};
use rebill_app::{Context, Services};
use rebill_billing::states::{InvoiceState, TransactionStatus};
use rebill_store::accounts::AccountFields;
use rebill_store::invoices::{Invoice, Transaction, TransactionFilter};
use rebill_store::testing::both_backends;
use rebill_store::{PageRequest, StoreError};

fn one_off(amount_in_cents: i64) -> OneOffCharge {
    OneOffCharge {
        account_code: "a0".into(),
        account_fields: AccountFields::default(),
        amount_in_cents,
        currency: "USD".into(),
        description: "A one-off charge".into(),
        accounting_code: None,
        product_code: None,
        tax_exempt: None,
        tax_code: None,
        billing_info: None,
    }
}

async fn charge(services: &Services, ctx: &Context, amount_in_cents: i64) -> Transaction {
    match charge_once(services, ctx, &one_off(amount_in_cents)).await.expect("charged") {
        Charged::Transaction(t) => *t,
        Charged::ByCredit(invoice) => panic!("paid by credit: {invoice:?}"),
    }
}

async fn reread(services: &Services, t: &Transaction) -> (Transaction, Invoice) {
    let t = services.store.transaction(t.site_id, &t.uuid).await.expect("read").expect("the transaction");
    let number = t.invoice_number.expect("an invoice");
    let invoice = services.store.invoice(t.site_id, number).await.expect("read").expect("the invoice");
    (t, invoice)
}

async fn processing(services: &Services, site_id: i64) -> Result<Vec<Transaction>, StoreError> {
    let filter = TransactionFilter { statuses: vec![TransactionStatus::Processing], ..TransactionFilter::default() };
    let page = PageRequest { limit: 100, ..PageRequest::default() };
    Ok(services.store.list_transactions(site_id, &filter, &page).await?.items)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_is_pending_and_the_settle_job_records_what_the_gateway_did() {
    for store in both_backends("app_pending_settled").await {
        let backend = store.backend();
        // Purchase 1 is the signup; the one-off charge's answer (2) is lost after the gateway
        // charged it.
        let gateway = Scripted::following(&[(2, Script::Lost)]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 1).await;

        let t = charge(&services, &ctx, 2500).await;
        assert_eq!(t.status(), TransactionStatus::Processing, "{backend:?}: not known, never declined");
        let (_, invoice) = reread(&services, &t).await;
        assert_eq!(invoice.state, InvoiceState::Pending, "{backend:?}: the invoice waits for the outcome");

        // The merchant's collect while it is pending starts no new attempt: the pending one is it.
        let ctx_now = Context { site: ctx.site.clone(), now: T0 + 5 };
        let before = gateway.purchases();
        let answered = settle_invoice(&services, &ctx_now, &invoice, Settlement::Collect).await.expect("collect");
        assert_eq!(gateway.purchases(), before, "{backend:?}: no gateway call while an attempt is pending");
        assert_eq!(answered.state, InvoiceState::Pending, "{backend:?}");

        // The settle job is due 30 s later: it asks again under the same key.
        clock.set(T0 + 31);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("settled");
        let (t, invoice) = reread(&services, &t).await;
        assert_eq!(t.status(), TransactionStatus::Success, "{backend:?}");
        assert_eq!(invoice.state, InvoiceState::Paid, "{backend:?}");
        assert_eq!(gateway.purchases(), 3, "{backend:?}: asked once more");
        assert_eq!(gateway.distinct_keys(), 2, "{backend:?}: under the same key");
        assert!(processing(&services, ctx.site.id).await.expect("read").is_empty(), "{backend:?}");

        // Nothing more happens later.
        clock.set(T0 + 2 * STALE_SECONDS);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("nothing left");
        assert_eq!(gateway.purchases(), 3, "{backend:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_one_off_charge_declined_at_the_gateway_fails_its_invoice() {
    for store in both_backends("app_pending_declined").await {
        let backend = store.backend();
        // The one-off charge's answer is lost (2), and asked again the gateway declines it (3).
        let gateway = Scripted::following(&[(2, Script::Lost), (3, Script::Decline)]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 1).await;
        let t = charge(&services, &ctx, 2500).await;
        assert_eq!(t.status(), TransactionStatus::Processing, "{backend:?}");

        clock.set(T0 + 31);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("settled");
        let (t, invoice) = reread(&services, &t).await;
        assert_eq!(t.status(), TransactionStatus::Declined, "{backend:?}");
        assert_eq!(invoice.state, InvoiceState::Failed, "{backend:?}: a one-off charge is charged once");
        assert_eq!(gateway.distinct_keys(), 2, "{backend:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_outcome_stays_pending_until_the_gateway_answers() {
    for store in both_backends("app_pending_again").await {
        let backend = store.backend();
        // Lost twice (2, then the settle job's 3): still not known; the next try (4) answers.
        let gateway = Scripted::following(&[(2, Script::Lost), (3, Script::Lost)]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 1).await;
        let t = charge(&services, &ctx, 2500).await;

        clock.set(T0 + 31);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("asked again");
        let (again, invoice) = reread(&services, &t).await;
        assert_eq!(gateway.purchases(), 3, "{backend:?}");
        assert_eq!(again.status(), TransactionStatus::Processing, "{backend:?}: still not known");
        assert_eq!(invoice.state, InvoiceState::Pending, "{backend:?}");

        // Asked again after a backoff, never before.
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("not yet");
        assert_eq!(gateway.purchases(), 3, "{backend:?}: the next try waits its backoff");
        clock.set(T0 + 3600);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("answered");
        let (settled, invoice) = reread(&services, &t).await;
        assert_eq!(settled.status(), TransactionStatus::Success, "{backend:?}");
        assert_eq!(invoice.state, InvoiceState::Paid, "{backend:?}");
        assert_eq!(gateway.distinct_keys(), 2, "{backend:?}: one key for the one attempt");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_charge_whose_process_stopped_is_found_by_the_sweep_and_settled() {
    for store in both_backends("app_pending_swept").await {
        let backend = store.backend();
        // The one-off charge (2) never answers and its process dies: the task is aborted.
        let gateway = Scripted::following(&[(2, Script::Hang)]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 1).await;
        let run = {
            let (services, ctx) = (services.clone(), ctx.clone());
            tokio::spawn(async move { charge_once(&services, &ctx, &one_off(2500)).await.map(|_| ()) })
        };
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        while gateway.purchases() < 2 {
            assert!(tokio::time::Instant::now() < deadline, "{backend:?}: the charge never reached the gateway");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        run.abort();
        assert!(run.await.is_err_and(|e| e.is_cancelled()), "{backend:?}: the process died mid-charge");
        let left = processing(&services, ctx.site.id).await.expect("read");
        assert_eq!(left.len(), 1, "{backend:?}: recorded processing before the call");

        // Before it is stale, nothing touches it (its call could still be running).
        clock.set(T0 + STALE_SECONDS - 1);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("not stale yet");
        assert_eq!(gateway.purchases(), 2, "{backend:?}");

        clock.set(T0 + STALE_SECONDS + 1);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("swept and settled");
        let (t, invoice) = reread(&services, &left[0]).await;
        assert_eq!(t.status(), TransactionStatus::Success, "{backend:?}");
        assert_eq!(invoice.state, InvoiceState::Paid, "{backend:?}");
        assert_eq!(gateway.purchases(), 3, "{backend:?}: asked once more");
        assert_eq!(gateway.distinct_keys(), 2, "{backend:?}: under the attempt's key");
    }
}

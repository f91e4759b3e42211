//! Payments whose outcome is not known, in process over a real store on both backends with a
//! scriptable gateway: a lost answer leaves the transaction `processing` and the invoice as it
//! was (never declined), the settle job asks the gateway again under the same key and does what
//! the answer calls for (paid; or failed for a one-off charge), no new attempt of the invoice
//! starts meanwhile, and a transaction left `processing` by a stopped process is found by the
//! sweep and settled.
//!
//! What follows a late answer is what an answer at once would have done: a gift card bought
//! with a pending payment waits for it and is then purchased and delivered, or discarded; a card
//! the request named is saved as billing info when approved late (a signup's was saved before
//! its charge); a renewal declined late leaves the same rows as one declined at once (past due,
//! dunning), a signup declined late expires. An invoice is neither marked paid nor failed while
//! a payment of it is processing. Whether a request may be sent again under its key is judged by
//! real time since the attempt began, not by the site's clock.

use rebill_app::billing::transactions::{Charged, OneOffCharge, charge_once};
use rebill_app::collection::settlement::{RESEND_SECONDS, STALE_SECONDS, SettleError, Settlement, settle_invoice};
use rebill_app::customers::payment_methods::BillingRequest;
use rebill_app::operations::scheduler;
use rebill_app::operations::testing::{DAY, Script, Scripted, T0, TestClock, at, card, subscribers};
use rebill_app::platform::error::AppError;
use rebill_app::selling::gift_cards::{self, DELIVERY_JOB, Delivery, GiftCardError, ListFilter, Purchase};
use rebill_app::subscriptions::lifecycle::{self as subscriptions, Details, Loaded, Subscribe};
use rebill_app::{Context, Services};
use rebill_billing::gateway::{
    CvvRequest, Gateway, GatewayFuture, PaymentMethod, PaymentRequest, RefundRequest, StoreFuture, VoidRequest,
};
use rebill_billing::lifecycle::{NewSubscription, SubscriptionTerms};
use rebill_billing::period::{Interval, IntervalUnit};
use rebill_billing::states::{InvoiceState, TransactionStatus};
use rebill_store::accounts::AccountFields;
use rebill_store::billing_info::BillingInfo;
use rebill_store::invoices::{Invoice, InvoiceFilter, Transaction, TransactionFilter};
use rebill_store::testing::both_backends;
use rebill_store::{PageRequest, StoreError};
use std::sync::Arc;

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

// ---------------------------------------------------------------------------------------------
// What follows a late answer

/// A card the subscribers do not have (theirs ends in 1111).
fn new_card() -> BillingRequest {
    BillingRequest { number: Some("5555555555554444".into()), ..card() }
}

fn one_off_for(account_code: &str, billing_info: Option<BillingRequest>) -> OneOffCharge {
    OneOffCharge { account_code: account_code.into(), billing_info, ..one_off(2500) }
}

async fn charge_for(services: &Services, ctx: &Context, charge: &OneOffCharge) -> Transaction {
    match charge_once(services, ctx, charge).await.expect("charged") {
        Charged::Transaction(t) => *t,
        Charged::ByCredit(invoice) => panic!("paid by credit: {invoice:?}"),
    }
}

async fn kinds(services: &Services, site_id: i64, subject: &str) -> Vec<String> {
    services.store.events(site_id, subject).await.expect("events").into_iter().map(|e| e.kind).collect()
}

async fn billing_info(services: &Services, ctx: &Context, code: &str) -> Option<BillingInfo> {
    let account = services.store.account(ctx.site.id, code).await.expect("read").expect("the account");
    services.store.billing_info(account.id).await.expect("read")
}

/// The billing info as a charge shows it: type and payment fields, without times or reference.
fn card_of(info: &BillingInfo) -> String {
    let f = &info.fields;
    format!("{:?} {:?} {:?} {:?} {:?} {:?}", info.kind, f.card_type, f.first_six, f.last_four, f.month, f.year)
}

fn gift(gifter: &str, deliver_at: Option<i64>) -> Purchase {
    Purchase {
        product_code: "gift_card".into(),
        unit_amount_in_cents: 2000,
        currency: "USD".into(),
        delivery: Some(Delivery {
            method: "email".into(),
            email_address: Some("friend@example.com".into()),
            deliver_at,
            ..Delivery::default()
        }),
        gifter_account_code: gifter.into(),
        ..Purchase::default()
    }
}

async fn gifts_of(services: &Services, ctx: &Context, gifter: &str) -> usize {
    let filter = ListFilter { gifter_account_code: Some(gifter.into()), ..ListFilter::default() };
    let page = PageRequest { limit: 100, ..PageRequest::default() };
    gift_cards::list(services, ctx, &filter, &page).await.expect("cards").items.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gift_card_whose_payment_is_pending_waits_for_it_and_is_purchased_as_at_once_when_approved() {
    for store in both_backends("app_pending_gift").await {
        let backend = store.backend();
        // Purchase 1 is the signup, 2 a card bought at once; the answers of 3 (delivered at once)
        // and 4 (delivered two days later, paid with a new card) are lost after the gateway
        // charged them.
        let gateway = Scripted::following(&[(3, Script::Lost), (4, Script::Lost)]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 1).await;
        gift_cards::add_product(&services, &ctx, "gift_card", "USD", &[2000]).await.expect("product");
        let site = ctx.site.id;

        let at_once = gift_cards::purchase(&services, &ctx, &gift("a0", None)).await.expect("bought");
        let pending = gift_cards::purchase(&services, &ctx, &gift("a0", None)).await.expect("answered, pending");
        let with_new_card = Purchase { billing_info: Some(new_card()), ..gift("a0", Some(T0 + 2 * DAY)) };
        let old_card = billing_info(&services, &ctx, "a0").await.expect("a0's card");
        let later = gift_cards::purchase(&services, &ctx, &with_new_card).await.expect("answered");
        assert_eq!(billing_info(&services, &ctx, "a0").await.as_ref(), Some(&old_card), "{backend:?}");

        // Meanwhile the card waits for its payment: shown, neither purchased nor delivered, not
        // redeemable, nothing recorded of it.
        for bought in [&pending, &later] {
            assert_eq!(bought.transaction.status(), TransactionStatus::Processing, "{backend:?}");
            assert_eq!(bought.invoice.state, InvoiceState::Pending, "{backend:?}");
            assert_eq!((bought.card.purchased_at, bought.card.delivered_at), (None, None), "{backend:?}");
        }
        let id = pending.card.id.to_string();
        let shown = gift_cards::get(&services, &ctx, &id).await.expect("shown while its payment is processing");
        assert_eq!((shown.purchased_at, shown.delivered_at), (None, None), "{backend:?}");
        assert_eq!(gifts_of(&services, &ctx, "a0").await, 3, "{backend:?}");
        let code = pending.card.redemption_code.clone();
        assert!(
            matches!(gift_cards::redeem(&services, &ctx, &code, "a0").await, Err(GiftCardError::CodeNotFound(_))),
            "{backend:?}: not redeemable before it is paid"
        );
        assert!(kinds(&services, site, &id).await.is_empty(), "{backend:?}");

        // The settle job learns that the gateway approved: purchased and delivered as at once.
        clock.set(T0 + 31);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("settled");
        let card = gift_cards::get(&services, &ctx, &id).await.expect("purchased");
        assert_eq!((card.purchased_at, card.delivered_at), (Some(T0 + 31), Some(T0 + 31)), "{backend:?}");
        assert_eq!(kinds(&services, site, &id).await, ["gift_card.purchased", "gift_card.delivered"], "{backend:?}");
        assert_eq!(
            kinds(&services, site, &id).await,
            kinds(&services, site, &at_once.card.id.to_string()).await,
            "{backend:?}: the same events as a card bought at once"
        );
        let invoice = services.store.invoice(site, card.purchase_invoice_number).await.expect("read").expect("invoice");
        assert_eq!(invoice.state, InvoiceState::Paid, "{backend:?}");
        assert_eq!(gateway.distinct_keys(), 4, "{backend:?}: asked again under the same keys");
        gift_cards::redeem(&services, &ctx, &code, "a0").await.expect("redeemable once paid");

        // The card to deliver later: purchased now, delivered by its job at `deliver_at`; the
        // new card that paid it is the gifter's billing info now.
        let new_card_saved = billing_info(&services, &ctx, "a0").await.expect("a0's card");
        assert_eq!(new_card_saved.fields.last_four.as_deref(), Some("4444"), "{backend:?}");
        assert_eq!(new_card_saved.gateway_reference, later.transaction.new.payment_reference, "{backend:?}");
        let later_id = later.card.id.to_string();
        let card = gift_cards::get(&services, &ctx, &later_id).await.expect("purchased");
        assert_eq!((card.purchased_at, card.delivered_at), (Some(T0 + 31), None), "{backend:?}");
        let jobs: Vec<(String, i64)> = services
            .store
            .pending_jobs(&later_id)
            .await
            .expect("jobs")
            .into_iter()
            .map(|j| (j.kind, j.due_at))
            .collect();
        assert_eq!(jobs, [(DELIVERY_JOB.to_owned(), T0 + 2 * DAY)], "{backend:?}");
        clock.set(T0 + 2 * DAY);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("delivered");
        let card = gift_cards::get(&services, &ctx, &later_id).await.expect("delivered");
        assert_eq!(card.delivered_at, Some(T0 + 2 * DAY), "{backend:?}");
        assert_eq!(
            kinds(&services, site, &later_id).await,
            ["gift_card.purchased", "gift_card.delivered"],
            "{backend:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gift_card_whose_pending_payment_is_declined_is_discarded_as_at_once() {
    for store in both_backends("app_pending_gift_no").await {
        let backend = store.backend();
        // Purchase 2 is declined at once; 3's answer is lost, and asked again (4) the gateway
        // declines it.
        let gateway = Scripted::following(&[(2, Script::Decline), (3, Script::Lost), (4, Script::Decline)]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 1).await;
        gift_cards::add_product(&services, &ctx, "gift_card", "USD", &[2000]).await.expect("product");

        let refused = gift_cards::purchase(&services, &ctx, &gift("a0", None)).await;
        let Err(GiftCardError::Declined(declined_at_once)) = refused else { panic!("{backend:?}: {refused:?}") };
        assert_eq!(gifts_of(&services, &ctx, "a0").await, 0, "{backend:?}");
        let pending = gift_cards::purchase(&services, &ctx, &gift("a0", None)).await.expect("answered, pending");
        assert_eq!(gifts_of(&services, &ctx, "a0").await, 1, "{backend:?}: shown while processing");

        clock.set(T0 + 31);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("settled");
        let id = pending.card.id.to_string();
        assert!(
            matches!(gift_cards::get(&services, &ctx, &id).await, Err(GiftCardError::NotFound(_))),
            "{backend:?}: nothing of the card is kept"
        );
        assert_eq!(gifts_of(&services, &ctx, "a0").await, 0, "{backend:?}");
        assert!(kinds(&services, ctx.site.id, &id).await.is_empty(), "{backend:?}");
        let (t, invoice) = reread(&services, &pending.transaction).await;
        assert_eq!(t.status(), TransactionStatus::Declined, "{backend:?}");
        let left = services.store.gift_card_awaiting(invoice.id).await.expect("read");
        assert_eq!(left, None, "{backend:?}: the card is removed, not only hidden");
        let (_, failed_at_once) = reread(&services, &declined_at_once).await;
        assert_eq!((invoice.state, failed_at_once.state), (InvoiceState::Failed, InvoiceState::Failed), "{backend:?}");
        let redeem = gift_cards::redeem(&services, &ctx, &pending.card.redemption_code, "a0").await;
        assert!(matches!(redeem, Err(GiftCardError::CodeNotFound(_))), "{backend:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invoice_is_neither_marked_paid_nor_failed_while_its_payment_is_processing() {
    for store in both_backends("app_pending_marks").await {
        let backend = store.backend();
        let gateway = Scripted::following(&[(2, Script::Lost)]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 1).await;
        let t = charge(&services, &ctx, 2500).await;
        let (_, invoice) = reread(&services, &t).await;

        let later = Context { site: ctx.site.clone(), now: T0 + 5 };
        for how in [Settlement::Paid, Settlement::Failed] {
            match settle_invoice(&services, &later, &invoice, how).await {
                Err(SettleError::PaymentProcessing(processing)) => {
                    assert_eq!(processing.uuid, t.uuid, "{backend:?}: names the payment processing");
                    let refused = AppError::from(SettleError::PaymentProcessing(processing));
                    assert!(matches!(refused, AppError::Conflict(_)), "{backend:?}: {refused:?}");
                }
                other => panic!("{backend:?}: {how:?} while processing: {other:?}"),
            }
        }
        let (_, unchanged) = reread(&services, &t).await;
        assert_eq!(unchanged.state, InvoiceState::Pending, "{backend:?}");
        assert_eq!(kinds(&services, ctx.site.id, &invoice.invoice_number.to_string()).await, ["invoice.created"]);

        // Known, the payment pays the invoice once; marking it now finds it settled.
        clock.set(T0 + 31);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("settled");
        let (_, paid) = reread(&services, &t).await;
        assert_eq!(paid.state, InvoiceState::Paid, "{backend:?}");
        let now = Context { site: ctx.site.clone(), now: T0 + 40 };
        let marked = settle_invoice(&services, &now, &paid, Settlement::Failed).await;
        assert!(matches!(marked, Err(SettleError::NotOpen)), "{backend:?}: {marked:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_named_by_a_one_off_charge_approved_late_is_saved_as_at_once() {
    for store in both_backends("app_pending_new_card").await {
        let backend = store.backend();
        // Purchase 2 charges a new card at once; 3 and 4 a new card whose answer is lost; asked
        // again, the gateway approves 3 and declines 4 (by its amount).
        let gateway = Scripted::following(&[(3, Script::Lost), (4, Script::Lost)]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 1).await;
        let old = billing_info(&services, &ctx, "a0").await.expect("a0's card");

        let at_once = charge_for(&services, &ctx, &one_off_for("now", Some(new_card()))).await;
        assert_eq!(at_once.status(), TransactionStatus::Success, "{backend:?}");
        let saved_at_once = billing_info(&services, &ctx, "now").await.expect("saved at once");
        let late = charge_for(&services, &ctx, &one_off_for("a0", Some(new_card()))).await;
        let declined =
            charge_for(&services, &ctx, &OneOffCharge { amount_in_cents: 2600, ..one_off_for("no", Some(new_card())) })
                .await;
        if let Ok(mut amounts) = gateway.decline_amounts.lock() {
            amounts.push(2600);
        }
        for t in [&late, &declined] {
            assert_eq!(t.status(), TransactionStatus::Processing, "{backend:?}");
        }
        // Not saved while the outcome is not known: a0 keeps its card.
        assert_eq!(billing_info(&services, &ctx, "a0").await.as_ref(), Some(&old), "{backend:?}");
        assert_eq!(billing_info(&services, &ctx, "no").await, None, "{backend:?}");

        clock.set(T0 + 31);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("settled");
        let (late, _) = reread(&services, &late).await;
        assert_eq!(late.status(), TransactionStatus::Success, "{backend:?}");
        let saved_late = billing_info(&services, &ctx, "a0").await.expect("saved late");
        assert_eq!(card_of(&saved_late), card_of(&saved_at_once), "{backend:?}: the card the charge named");
        assert_ne!(card_of(&saved_late), card_of(&old), "{backend:?}");
        assert_eq!(saved_late.gateway_reference, late.new.payment_reference, "{backend:?}: the method charged");
        assert_eq!(at_once.new.payment_reference, saved_at_once.gateway_reference, "{backend:?}");
        let updated = |k: &Vec<String>| k.iter().filter(|k| *k == "billing_info.updated").count();
        assert_eq!(updated(&kinds(&services, ctx.site.id, "a0").await), 2, "{backend:?}: at signup, and now");
        assert_eq!(updated(&kinds(&services, ctx.site.id, "now").await), 1, "{backend:?}");
        // Declined late (not `declined_saveable`): nothing saved, as at once.
        let (declined, _) = reread(&services, &declined).await;
        assert_eq!(declined.status(), TransactionStatus::Declined, "{backend:?}");
        assert_eq!(billing_info(&services, &ctx, "no").await, None, "{backend:?}");
    }
}

/// Subscribes a new account `code` to gold with `billing_info`, at `ctx.now`.
async fn signup(services: &Services, ctx: &Context, code: &str, billing_info: BillingRequest) -> Loaded {
    let plan = services.store.plan(ctx.site.id, "gold").await.expect("read").expect("the plan");
    let new = NewSubscription {
        uuid: rebill_store::invoices::new_uuid(),
        terms: SubscriptionTerms {
            plan_code: "gold".into(),
            currency: "USD".into(),
            interval: Interval::new(1, IntervalUnit::Months).expect("interval"),
            unit_amount_in_cents: 1000,
            quantity: 1,
            add_ons: Vec::new(),
            setup_fee_in_cents: 0,
        },
        starts_at: None,
        trial: None,
        total_billing_cycles: None,
        imported_trial: false,
    };
    let input = Subscribe {
        existing: None,
        account_code: code.into(),
        account_fields: Some(AccountFields::default()),
        billing_info: Some(billing_info),
        plan_id: plan.id,
        drafted: subscriptions::draft(new, at(ctx.now)).expect("drafted"),
        details: Details { account_code: code.into(), ..Details::default() },
        coupon_codes: Vec::new(),
    };
    subscriptions::create(services, ctx, input).await.expect("subscribed")
}

async fn first_payment(services: &Services, ctx: &Context, code: &str) -> Transaction {
    let account = services.store.account(ctx.site.id, code).await.expect("read").expect("the account");
    let filter = TransactionFilter { account_id: Some(account.id), ..TransactionFilter::default() };
    let page = PageRequest { limit: 100, ..PageRequest::default() };
    let all = services.store.list_transactions(ctx.site.id, &filter, &page).await.expect("transactions").items;
    all.into_iter().find(|t| t.new.action == "purchase").expect("a purchase")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signup_stores_its_card_before_charging_so_a_late_answer_has_nothing_more_to_save() {
    for store in both_backends("app_pending_signup").await {
        let backend = store.backend();
        // Purchase 2 is a signup approved at once; 3's answer is lost, asked again (4) approved;
        // 5's answer is lost, asked again (6) declined.
        let gateway = Scripted::following(&[(3, Script::Lost), (5, Script::Lost), (6, Script::Decline)]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 1).await;

        signup(&services, &ctx, "now", new_card()).await;
        let late = signup(&services, &ctx, "late", new_card()).await;
        let t = first_payment(&services, &ctx, "late").await;
        assert_eq!(t.status(), TransactionStatus::Processing, "{backend:?}");
        // The card was verified and stored before the charge: the charge names it.
        let before = billing_info(&services, &ctx, "late").await.expect("stored before the charge");
        assert_eq!(before.gateway_reference, t.new.payment_reference, "{backend:?}");

        clock.set(T0 + 31);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("settled");
        let (t, invoice) = reread(&services, &t).await;
        assert_eq!((t.status(), invoice.state), (TransactionStatus::Success, InvoiceState::Paid), "{backend:?}");
        let after = billing_info(&services, &ctx, "late").await.expect("kept");
        assert_eq!(after, before, "{backend:?}: nothing more to store");
        let at_once = billing_info(&services, &ctx, "now").await.expect("stored");
        assert_eq!(card_of(&after), card_of(&at_once), "{backend:?}");
        let late = services.store.subscription(ctx.site.id, &late.record.uuid).await.expect("read").expect("it");
        assert_eq!((late.state.as_str(), late.past_due), ("active", false), "{backend:?}");

        // Declined late: the creation a decline at once would have refused ends: it expires.
        let later = Context { site: ctx.site.clone(), now: T0 + 31 };
        let declined = signup(&services, &later, "declined", new_card()).await;
        clock.set(T0 + 62);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("settled");
        let declined = services.store.subscription(ctx.site.id, &declined.record.uuid).await.expect("read");
        let declined = declined.expect("the subscription");
        assert_eq!(declined.state, "expired", "{backend:?}");
        let (t, invoice) = reread(&services, &first_payment(&services, &ctx, "declined").await).await;
        assert_eq!((t.status(), invoice.state), (TransactionStatus::Declined, InvoiceState::Failed), "{backend:?}");
    }
}

/// The rows a renewal leaves on its subscription and invoice, without ids, uuids or times of
/// recording.
async fn renewal_rows(services: &Services, ctx: &Context) -> Vec<String> {
    let site = ctx.site.id;
    let uuid = format!("{:032x}", 0);
    let sub = services.store.subscription(site, &uuid).await.expect("read").expect("the subscription");
    let page = PageRequest { limit: 100, ..PageRequest::default() };
    let invoices = services.store.list_invoices(site, &InvoiceFilter::default(), &page).await.expect("invoices");
    let invoice = invoices.items.into_iter().find(|i| i.origin == "renewal").expect("the renewal's invoice");
    let jobs = |jobs: Vec<rebill_store::jobs::Job>| -> Vec<(String, i64)> {
        jobs.into_iter().map(|j| (j.kind, j.due_at)).collect()
    };
    let number = invoice.invoice_number.to_string();
    let filter = TransactionFilter { statuses: Vec::new(), ..TransactionFilter::default() };
    let transactions = services.store.list_transactions(site, &filter, &page).await.expect("transactions").items;
    let renewal = transactions.iter().find(|t| t.invoice_number == Some(invoice.invoice_number)).expect("its charge");
    vec![
        format!("subscription {} past due {} value {}", sub.state, sub.past_due, sub.value),
        format!("subscription events {:?}", kinds(services, site, &uuid).await),
        format!("subscription jobs {:?}", jobs(services.store.pending_jobs(&uuid).await.expect("jobs"))),
        format!(
            "invoice {:?} attempts {} next {:?} closed {:?} amounts {:?}",
            invoice.state,
            invoice.collection_attempts,
            invoice.attempt_next_collection_at,
            invoice.closed_at,
            invoice.amounts
        ),
        format!("invoice events {:?}", kinds(services, site, &number).await),
        format!("invoice jobs {:?}", jobs(services.store.pending_jobs(&invoice.uuid).await.expect("jobs"))),
        format!("charge {:?} {:?}", renewal.status(), renewal.result.failure.as_ref().map(|f| &f.error_code)),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_declined_late_leaves_the_rows_a_decline_at_once_leaves() {
    let at_once = both_backends("app_renew_no_now").await;
    let late = both_backends("app_renew_no_late").await;
    for (now_store, late_store) in at_once.into_iter().zip(late) {
        let backend = now_store.backend();
        // Purchase 1 is the signup, 2 the renewal: declined at once; or its answer lost, and
        // asked again (3) declined.
        let (now_services, now_ctx) = run(now_store, Scripted::declining(&[2])).await;
        let gateway = Scripted::following(&[(2, Script::Lost), (3, Script::Decline)]);
        let (late_services, late_ctx) = run(late_store, gateway.clone()).await;
        assert_eq!(gateway.purchases(), 3, "{backend:?}: the settle job asked again in the same run");

        let (now_rows, late_rows) =
            (renewal_rows(&now_services, &now_ctx).await, renewal_rows(&late_services, &late_ctx).await);
        assert!(now_rows[0].starts_with("subscription active past due true"), "{backend:?}: {}", now_rows[0]);
        assert!(now_rows[5].contains("dunning"), "{backend:?}: {}", now_rows[5]);
        for (now, late) in now_rows.iter().zip(&late_rows) {
            assert_eq!(late, now, "{backend:?}");
        }
        // The renewal's attempt kept the service's time it began at.
        let renewal = renewal_charge(&late_services, &late_ctx).await;
        let facts = late_services.store.attempt_of(renewal.id).await.expect("read").expect("the attempt");
        assert_eq!(facts.begun_service_at, Some(T0 + 31 * DAY + 3600), "{backend:?}");
    }
}

/// One subscriber renewed a month after `T0`, through `gateway`.
async fn run(store: rebill_store::Store, gateway: std::sync::Arc<Scripted>) -> (Services, Context) {
    let clock = TestClock::starting(T0);
    let (services, ctx) = subscribers(store, gateway, clock.clone(), 1).await;
    clock.set(T0 + 31 * DAY + 3600);
    scheduler::run_due(&services, Some(&ctx.site)).await.expect("renewed");
    (services, ctx)
}

/// The charge of the renewal's invoice.
async fn renewal_charge(services: &Services, ctx: &Context) -> Transaction {
    let page = PageRequest { limit: 100, ..PageRequest::default() };
    let filter = TransactionFilter::default();
    let all = services.store.list_transactions(ctx.site.id, &filter, &page).await.expect("transactions").items;
    let invoices = services.store.list_invoices(ctx.site.id, &InvoiceFilter::default(), &page).await.expect("read");
    let renewal = invoices.items.iter().find(|i| i.origin == "renewal").expect("the renewal's invoice").invoice_number;
    all.into_iter().find(|t| t.invoice_number == Some(renewal)).expect("its charge")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_sent_again_under_its_key_by_real_time_not_by_the_sites_clock() {
    for store in both_backends("app_pending_resend").await {
        let backend = store.backend();
        // The one-off charges' requests (2, and 4 twice) never reach the gateway; asked again,
        // the gateway finds nothing under their keys and charges only requests it may be sent
        // again (3), else declines them (6).
        let gateway = Scripted::following(&[(2, Script::Unsent), (4, Script::Unsent), (5, Script::Unsent)]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 1).await;
        let first = charge(&services, &ctx, 2500).await;

        // The sandbox site's clock moves two days ahead while 31 s of real time pass: the key is
        // still kept, so the request is sent again.
        clock.set(T0 + 31);
        let site = services.store.set_site_clock(&ctx.site, T0 + 2 * DAY, T0 + 31).await.expect("clock moved");
        scheduler::run_due(&services, Some(&site)).await.expect("settled");
        let (first, invoice) = reread(&services, &first).await;
        assert_eq!((first.status(), invoice.state), (TransactionStatus::Success, InvoiceState::Paid), "{backend:?}");
        assert_eq!(gateway.resumed_calls()[2], (true, true), "{backend:?}: looked up, and sent again");

        // A charge whose request is still found nowhere after 23 h of real time is declined:
        // the gateway may have forgotten its key.
        let now = Context { site: site.clone(), now: site.now(services.clock.now()) };
        let second = charge(&services, &now, 2600).await;
        assert_eq!(second.status(), TransactionStatus::Processing, "{backend:?}");
        clock.set(T0 + 31 + 40);
        scheduler::run_due(&services, Some(&site)).await.expect("asked again");
        let (again, _) = reread(&services, &second).await;
        assert_eq!(again.status(), TransactionStatus::Processing, "{backend:?}: may still be sent again, not found");
        assert_eq!(gateway.resumed_calls().last(), Some(&(true, true)), "{backend:?}");
        clock.set(T0 + 31 + RESEND_SECONDS);
        scheduler::run_due(&services, Some(&site)).await.expect("settled");
        let (second, invoice) = reread(&services, &second).await;
        assert_eq!(gateway.resumed_calls().last(), Some(&(true, false)), "{backend:?}: looked up only");
        assert_eq!(
            (second.status(), invoice.state),
            (TransactionStatus::Declined, InvoiceState::Failed),
            "{backend:?}"
        );
        let code = second.result.failure.as_ref().and_then(|f| f.gateway_error_code.clone());
        assert_eq!(code.as_deref(), Some("attempt_not_found"), "{backend:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_offline_payment_is_entered_while_a_charge_of_the_invoice_is_processing() {
    use rebill_app::billing::{adjustments, invoicing};
    use rebill_app::collection::offline_payments::{self, OfflinePayment, OfflinePaymentError};
    use rebill_store::invoices::{CollectionMethod, InvoiceTerms};
    for store in both_backends("app_pending_offline").await {
        let backend = store.backend();
        // Purchase 1 is the signup; the merchant's collect of the manual invoice (2) is lost.
        let gateway = Scripted::following(&[(2, Script::Lost)]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 1).await;
        let account = services.store.account(ctx.site.id, "a0").await.expect("read").expect("a0");
        let charge = adjustments::NewCharge {
            unit_amount_in_cents: 4000,
            currency: "USD".into(),
            description: Some("Consulting".into()),
            ..adjustments::NewCharge::default()
        };
        adjustments::create(&services, &ctx, &account, &charge).await.expect("adjustment");
        let terms =
            InvoiceTerms { collection_method: CollectionMethod::Manual, net_terms: 30, ..InvoiceTerms::default() };
        let invoice = invoicing::invoice_pending(&services, &ctx, &account, terms).await.expect("invoice").invoice;
        let collected = settle_invoice(&services, &ctx, &invoice, Settlement::Collect).await.expect("collect");
        assert_eq!(collected.state, InvoiceState::Pending, "{backend:?}: the charge's outcome is not known");
        let charging = processing(&services, ctx.site.id).await.expect("read");
        assert_eq!(charging.len(), 1, "{backend:?}");

        let check = OfflinePayment {
            payment_method: Some("check".into()),
            amount_in_cents: Some(4000),
            ..OfflinePayment::default()
        };
        let number = invoice.invoice_number.to_string();
        match offline_payments::enter(&services, &ctx, &number, &check).await {
            Err(OfflinePaymentError::PaymentProcessing(uuid)) => {
                assert_eq!(uuid, charging[0].uuid, "{backend:?}: names the charge processing")
            }
            other => panic!("{backend:?}: a check entered while the card charge is processing: {other:?}"),
        }
        let unchanged = services.store.invoice_by_id(invoice.id).await.expect("read").expect("invoice");
        assert_eq!((unchanged.state, unchanged.amounts.balance), (InvoiceState::Pending, 4000), "{backend:?}");

        // The charge went through: the invoice is paid once, and a check finds it paid.
        clock.set(T0 + 31);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("settled");
        let paid = services.store.invoice_by_id(invoice.id).await.expect("read").expect("invoice");
        assert_eq!((paid.state, paid.amounts.balance), (InvoiceState::Paid, 0), "{backend:?}");
        let late = offline_payments::enter(&services, &ctx, &number, &check).await;
        assert!(matches!(late, Err(OfflinePaymentError::NotOpen(_))), "{backend:?}: {late:?}");
    }
}

/// A settle job whose process stopped after it recorded the gateway's answer, before what
/// follows it: the job is claimed again and finds the transaction settled; what the invoice shows
/// was not done is done then — the approved charge pays its invoice, the declined one-off charge
/// fails its invoice — and only once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settle_job_stopped_after_recording_the_answer_does_what_follows_when_run_again() {
    use rebill_app::platform::transaction_records::result_of;
    use rebill_billing::gateway::{Approval, Decline, Outcome};
    for store in both_backends("app_pending_follow_up").await {
        let backend = store.backend();
        // Purchase 1 is the signup; the answers of the one-off charges (2, 3) are lost.
        let gateway = Scripted::following(&[(2, Script::Lost), (3, Script::Lost)]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 1).await;
        let approved = charge(&services, &ctx, 2500).await;
        let declined = charge(&services, &ctx, 700).await;
        for t in [&approved, &declined] {
            assert_eq!(t.status(), TransactionStatus::Processing, "{backend:?}");
        }

        // What the settle job's first run recorded before it stopped.
        let approval = Approval {
            reference: "ref-approved".into(),
            code: "approved",
            cvv_result: None,
            avs_result: None,
            chargeback_expected: false,
            stored: None,
        };
        let decline =
            Decline { code: "declined", gateway_error_code: None, cvv_result: None, avs_result: None, reference: None };
        let at = T0 + 30;
        for (t, outcome) in [(&approved, Outcome::Approved(approval)), (&declined, Outcome::Declined(decline))] {
            let (_, recorded) =
                services.store.settle_transaction(t.id, &result_of(&outcome, at), at, &[]).await.expect("recorded");
            assert!(recorded, "{backend:?}");
            let (_, invoice) = reread(&services, t).await;
            assert_eq!(invoice.state, InvoiceState::Pending, "{backend:?}: stopped before what follows");
        }

        // Claimed again: the jobs find the answers recorded and do what follows.
        clock.set(T0 + 31);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("run");
        let (_, paid) = reread(&services, &approved).await;
        let (_, failed) = reread(&services, &declined).await;
        assert_eq!((paid.state, failed.state), (InvoiceState::Paid, InvoiceState::Failed), "{backend:?}");
        let paid_events = kinds(&services, ctx.site.id, &paid.invoice_number.to_string()).await;
        assert_eq!(paid_events.iter().filter(|k| *k == "invoice.paid").count(), 1, "{backend:?}: {paid_events:?}");
        assert_eq!(gateway.purchases(), 3, "{backend:?}: the gateway was not asked again");

        // Run again (another job of the transaction), nothing more happens.
        for t in [&approved, &declined] {
            services.store.schedule_job(ctx.site.id, "settle_payment", &t.uuid, T0 + 40).await.expect("scheduled");
        }
        clock.set(T0 + 41);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("run");
        let again = kinds(&services, ctx.site.id, &paid.invoice_number.to_string()).await;
        assert_eq!(again, paid_events, "{backend:?}: nothing recorded twice");
        let failed_again = kinds(&services, ctx.site.id, &failed.invoice_number.to_string()).await;
        assert_eq!(failed_again.iter().filter(|k| *k == "invoice.failed").count(), 1, "{backend:?}: {failed_again:?}");
    }
}

/// The scripted gateway, noting the settle jobs waiting for each purchase's transaction (its
/// idempotency key is the transaction's uuid) while the purchase is under way.
struct Watching {
    inner: Arc<Scripted>,
    store: rebill_store::Store,
    seen: std::sync::Mutex<Vec<Vec<(String, i64)>>>,
}

impl Gateway for Watching {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn is_test(&self) -> bool {
        self.inner.is_test()
    }

    fn purchase<'a>(&'a self, request: &'a PaymentRequest<'a>) -> GatewayFuture<'a> {
        Box::pin(async move {
            let key = request.idempotency_key.unwrap_or_default();
            let jobs = self.store.pending_jobs(key).await.expect("jobs");
            let waiting = jobs.into_iter().map(|j| (j.kind, j.due_at)).collect();
            self.seen.lock().expect("seen").push(waiting);
            self.inner.purchase(request).await
        })
    }

    fn verify<'a>(&'a self, request: &'a PaymentRequest<'a>) -> GatewayFuture<'a> {
        self.inner.verify(request)
    }

    fn refund<'a>(&'a self, request: &'a RefundRequest<'a>) -> GatewayFuture<'a> {
        self.inner.refund(request)
    }

    fn void<'a>(&'a self, request: &'a VoidRequest<'a>) -> GatewayFuture<'a> {
        self.inner.void(request)
    }

    fn store_payment_method<'a>(&'a self, method: PaymentMethod<'a>, replacing: Option<&'a str>) -> StoreFuture<'a> {
        self.inner.store_payment_method(method, replacing)
    }

    fn bank_name(&self, routing_number: &str) -> Option<String> {
        self.inner.bank_name(routing_number)
    }

    fn check_cvv<'a>(&'a self, request: &'a CvvRequest<'a>) -> GatewayFuture<'a> {
        self.inner.check_cvv(request)
    }
}

/// A charge a request makes has its settle job while its call is under way, due once the call
/// is long over (no job runs the request again if its process stops between recording the
/// answer and what follows it; `a_settle_job_stopped_after_recording_the_answer…` shows what
/// the job then does); once what follows is recorded, the job goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_charge_a_request_made_has_its_settle_job_until_what_follows_is_recorded() {
    for store in both_backends("app_pending_guard").await {
        let backend = store.backend();
        // Purchase 1 is the signup; the one-off charge 2 is approved, 3 declined, at once.
        let gateway = Scripted::following(&[(3, Script::Decline)]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 1).await;
        let watching =
            Arc::new(Watching { inner: gateway.clone(), store: services.store.clone(), seen: Default::default() });
        let services = services.with_gateway(watching.clone());
        let approved = charge(&services, &ctx, 2500).await;
        let declined = charge(&services, &ctx, 700).await;
        assert_eq!(declined.status(), TransactionStatus::Declined, "{backend:?}: declined at once");
        let seen = watching.seen.lock().expect("seen").clone();
        let guard = vec![("settle_payment".to_owned(), T0 + STALE_SECONDS)];
        assert_eq!(seen, [guard.clone(), guard], "{backend:?}: the settle job waits while each call is under way");
        for t in [&approved, &declined] {
            assert!(services.store.pending_jobs(&t.uuid).await.expect("jobs").is_empty(), "{backend:?}");
        }
        let (_, paid) = reread(&services, &approved).await;
        let (_, failed) = reread(&services, &declined).await;
        assert_eq!((paid.state, failed.state), (InvoiceState::Paid, InvoiceState::Failed), "{backend:?}");
    }
}

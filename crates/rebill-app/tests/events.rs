//! Domain events over the use cases, on both backends: every business change records its event
//! with the right subject, and the subscriptions' reaction to a paid or failed invoice runs
//! through them: a reaction interrupted after its event was recorded is completed by the next
//! drain, once.

use rebill_app::billing::transactions::{self, OneOffCharge};
use rebill_app::collection::settlement::{self, SettleError, Settlement};
use rebill_app::customers::accounts;
use rebill_app::customers::payment_methods;
use std::collections::{BTreeSet, HashMap};

use rebill_app::operations::testing::{DAY, Scripted, T0, TestClock, subscribers};
use rebill_app::operations::{notifications, scheduler};
use rebill_app::subscriptions::lifecycle::{self as subscriptions, CLAIM_SECONDS};
use rebill_app::{Clock, Context};
use rebill_billing::lifecycle::Action;
use rebill_billing::states::{InvoiceState, TransactionStatus};
use rebill_store::accounts::AccountFields;
use rebill_store::events::{Awaiting, Event};
use rebill_store::invoices::{Invoice, InvoiceFilter, TransactionFilter};
use rebill_store::subscriptions::Claimed;
use rebill_store::testing::both_backends;
use rebill_store::{PageRequest, Store};
use serde_json::Value;

/// The uuid of subscriber `i` of [`subscribers`].
fn uuid(i: usize) -> String {
    format!("{i:032x}")
}

async fn events_of(store: &Store, site: i64, subject: &str) -> Vec<Event> {
    store.events(site, subject).await.expect("events")
}

async fn kinds(store: &Store, site: i64, subject: &str) -> Vec<String> {
    events_of(store, site, subject).await.into_iter().map(|e| e.kind).collect()
}

fn payload(event: &Event) -> Value {
    serde_json::from_str(&event.payload).expect("a JSON payload")
}

async fn invoices(store: &Store, site: i64) -> Vec<Invoice> {
    let page = PageRequest { limit: 100, ..PageRequest::default() };
    let mut items = store.list_invoices(site, &InvoiceFilter::default(), &page).await.expect("invoices").items;
    items.sort_by_key(|i| i.invoice_number);
    items
}

/// The invoices of a subscription, oldest first.
async fn invoices_of(store: &Store, site: i64, uuid: &str) -> Vec<Invoice> {
    let mut own = Vec::new();
    for invoice in invoices(store, site).await {
        let lines = store.invoice_lines(invoice.id).await.expect("lines");
        if lines.iter().any(|l| l.line.subscription_uuid.as_deref() == Some(uuid)) {
            own.push(invoice);
        }
    }
    own
}

fn at_time(ctx: &Context, now: i64) -> Context {
    Context { site: ctx.site.clone(), now }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_business_change_records_its_event_with_its_subject() {
    for store in both_backends("app_events").await {
        let backend = store.backend();
        // Purchases 1-2: first payments; 3-4: the first renewals (3 declined); 5: its retry.
        let gateway = Scripted::declining(&[3]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store.clone(), gateway.clone(), clock.clone(), 2).await;
        let site = ctx.site.id;
        let (s0, s1) = (uuid(0), uuid(1));

        // Accounts with billing info, subscriptions, their first invoices and transactions.
        for code in ["a0", "a1"] {
            assert_eq!(kinds(&store, site, code).await, ["account.created", "billing_info.updated"], "{backend:?}");
            let billing = &events_of(&store, site, code).await[1];
            assert_eq!(payload(billing)["account_code"], code, "{backend:?}");
            assert_eq!(payload(billing)["last_four"], "1111", "{backend:?}");
        }
        for s in [&s0, &s1] {
            assert_eq!(kinds(&store, site, s).await, ["subscription.created"], "{backend:?}");
            let first = &invoices_of(&store, site, s).await[0];
            let number = first.invoice_number.to_string();
            assert_eq!(kinds(&store, site, &number).await, ["invoice.created", "invoice.paid"], "{backend:?}");
            let paid = &events_of(&store, site, &number).await[1];
            assert_eq!(payload(paid)["settled_by"], "invoicing", "{backend:?}");
            assert!(!paid.awaiting, "{backend:?}: the invoicing call handles its own outcome");
        }
        let page = PageRequest { limit: 100, ..PageRequest::default() };
        let all = store.list_transactions(site, &TransactionFilter::default(), &page).await.expect("transactions");
        assert_eq!(all.items.len(), 4, "{backend:?}: two verifications, two first payments");
        for t in &all.items {
            let recorded = events_of(&store, site, &t.uuid).await;
            assert_eq!(recorded.len(), 1, "{backend:?}");
            assert_eq!(recorded[0].kind, "transaction.approved", "{backend:?}");
            assert_eq!(payload(&recorded[0])["action"], t.new.action.as_str(), "{backend:?}");
        }

        // The renewals a month later, one declined: renewed, and past due with its invoice.
        clock.set(T0 + 31 * DAY + 3600);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("renewals");
        assert_eq!(gateway.purchases(), 4, "{backend:?}");
        let past_due = store.subscription(site, &s0).await.expect("read").expect("s0").past_due;
        let (late, paying) = if past_due { (&s0, &s1) } else { (&s1, &s0) };
        assert_eq!(
            kinds(&store, site, late).await,
            ["subscription.created", "subscription.renewed", "subscription.past_due"],
            "{backend:?}"
        );
        assert_eq!(kinds(&store, site, paying).await, ["subscription.created", "subscription.renewed"], "{backend:?}");
        let late_invoice = invoices_of(&store, site, late).await[1].invoice_number.to_string();
        assert_eq!(
            kinds(&store, site, &late_invoice).await,
            ["invoice.created", "invoice.past_due", "invoice.dunning"],
            "{backend:?}"
        );
        let paid_invoice = invoices_of(&store, site, paying).await[1].invoice_number.to_string();
        assert_eq!(kinds(&store, site, &paid_invoice).await, ["invoice.created", "invoice.paid"], "{backend:?}");
        let declined = store
            .list_transactions(
                site,
                &TransactionFilter { statuses: vec![TransactionStatus::Declined], ..TransactionFilter::default() },
                &page,
            )
            .await
            .expect("declined")
            .items;
        assert_eq!(kinds(&store, site, &declined[0].uuid).await, ["transaction.declined"], "{backend:?}");
        assert_eq!(payload(&events_of(&store, site, &declined[0].uuid).await[0])["error_code"], "declined");

        // The dunning retry a day later is approved: the invoice is paid by dunning, and the
        // subscriptions' reaction (recovered) ran before the job ended.
        clock.set(T0 + 32 * DAY + 3600);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("retry");
        assert_eq!(gateway.purchases(), 5, "{backend:?}");
        let settled = events_of(&store, site, &late_invoice).await;
        assert_eq!(settled.last().map(|e| e.kind.as_str()), Some("invoice.paid"), "{backend:?}");
        let paid = settled.last().expect("paid");
        assert_eq!(payload(paid)["settled_by"], "dunning", "{backend:?}");
        assert!(!paid.awaiting && paid.handled_at.is_some(), "{backend:?}: its reaction ran: {paid:?}");
        assert_eq!(kinds(&store, site, late).await.last().map(String::as_str), Some("subscription.recovered"));
        assert!(!store.subscription(site, late).await.expect("read").expect("late").past_due, "{backend:?}");

        // Account changes; closing a closed account changes nothing and records nothing.
        let later = at_time(&ctx, T0 + 33 * DAY);
        let company = AccountFields { company_name: Some("Example Co".into()), ..AccountFields::default() };
        accounts::update(&services, &later, "a0", &company, None).await.expect("update");
        accounts::close(&services, &later, "a0").await.expect("close");
        accounts::close(&services, &later, "a0").await.expect("close again");
        accounts::reopen(&services, &later, "a0").await.expect("reopen");
        assert_eq!(
            kinds(&store, site, "a0").await,
            ["account.created", "billing_info.updated", "account.updated", "account.closed", "account.reopened"],
            "{backend:?}"
        );
        let reopened = events_of(&store, site, "a0").await.pop().expect("reopened");
        assert_eq!((reopened.at, reopened.recorded_at), (T0 + 33 * DAY, clock.now()), "{backend:?}");
        payment_methods::remove(&services, &later, "a1").await.expect("remove");
        assert_eq!(kinds(&store, site, "a1").await.last().map(String::as_str), Some("billing_info.removed"));

        // Subscription changes, each recorded with the action it accepted.
        for action in [Action::Cancel, Action::Reactivate, Action::Pause { remaining_pause_cycles: 1 }] {
            subscriptions::change(&services, &later, &s0, |_, _, _| vec![action.clone()]).await.expect("change");
        }
        let changes: Vec<Event> = events_of(&store, site, &s0).await.into_iter().rev().take(3).rev().collect();
        assert_eq!(
            changes.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(),
            ["subscription.canceled", "subscription.reactivated", "subscription.pause_scheduled"],
            "{backend:?}"
        );
        assert_eq!(payload(&changes[0])["action"]["action"], "cancel", "{backend:?}");
        assert_eq!(payload(&changes[2])["state"], "active", "{backend:?}");

        // March 1st: s0's pause starts; s1 renews without billing info (past due).
        clock.set(T0 + 59 * DAY + 3600);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("march");
        assert_eq!(kinds(&store, site, &s0).await.last().map(String::as_str), Some("subscription.paused"));
        let unpaid = invoices_of(&store, site, &s1).await.pop().expect("march invoice");
        assert_eq!(unpaid.state, InvoiceState::PastDue, "{backend:?}");
        assert_eq!(kinds(&store, site, &s1).await.last().map(String::as_str), Some("subscription.past_due"));

        // Marking its invoice failed expires the subscription before the call returns.
        let march = at_time(&ctx, T0 + 59 * DAY + 7200);
        let failed = settlement::settle_invoice(&services, &march, &unpaid, Settlement::Failed).await.expect("failed");
        assert_eq!(failed.state, InvoiceState::Failed, "{backend:?}");
        let s1_now = store.subscription(site, &s1).await.expect("read").expect("s1");
        assert_eq!(s1_now.state, "expired", "{backend:?}");
        assert_eq!(kinds(&store, site, &s1).await.last().map(String::as_str), Some("subscription.expired"));
        let number = unpaid.invoice_number.to_string();
        let failure = events_of(&store, site, &number).await.pop().expect("failed");
        assert_eq!(
            (failure.kind.as_str(), payload(&failure)["settled_by"].as_str()),
            ("invoice.failed", Some("marked"))
        );
        assert!(failure.handled_at.is_some(), "{backend:?}");

        // A one-off charge: its invoice and its transaction.
        let charge = OneOffCharge {
            account_code: "a0".into(),
            amount_in_cents: 500,
            currency: "USD".into(),
            description: "Setup".into(),
            ..OneOffCharge::default()
        };
        let transactions::Charged::Transaction(t) =
            transactions::charge_once(&services, &march, &charge).await.expect("charge")
        else {
            panic!("a charge of an account without credit makes a transaction");
        };
        assert_eq!(kinds(&store, site, &t.uuid).await, ["transaction.approved"], "{backend:?}");
        let one_off = t.invoice_number.expect("invoiced").to_string();
        assert_eq!(kinds(&store, site, &one_off).await, ["invoice.created", "invoice.paid"], "{backend:?}");
        assert_eq!(payload(&events_of(&store, site, &one_off).await[0])["total_in_cents"], 500);

        // Nothing is left awaiting a reaction.
        assert!(store.awaiting_events(Awaiting::All, 0, 10).await.expect("awaiting").is_empty(), "{backend:?}");

        // The notifications of all these events, made from the resources read for the whole
        // batch, are those made with each resource read alone.
        let events: Vec<Event> =
            store.unnotified_events(1_000).await.expect("events").into_iter().filter(|e| e.site_id == site).collect();
        let sites = HashMap::from([(site, ctx.site.clone())]);
        let batch = notifications::Resources::read(&services, &sites, &events).await.expect("the batch's reads");
        let alone = notifications::Resources::default();
        let mut sent = BTreeSet::new();
        for event in &events {
            let made = notifications::of(&services, &batch, &ctx.site, event).await.expect("from the batch");
            assert_eq!(made, notifications::of(&services, &alone, &ctx.site, event).await.expect("alone"), "{event:?}");
            sent.extend(made.iter().map(|(kind, _)| *kind));
        }
        assert_eq!(
            sent.into_iter().collect::<Vec<_>>(),
            [
                "billing_info_updated_notification",
                "canceled_account_notification",
                "canceled_subscription_notification",
                "closed_invoice_notification",
                "expired_subscription_notification",
                "failed_payment_notification",
                "new_account_notification",
                "new_dunning_event_notification",
                "new_invoice_notification",
                "new_subscription_notification",
                "past_due_invoice_notification",
                "reactivated_account_notification",
                "renewed_subscription_notification",
                "scheduled_subscription_pause_notification",
                "subscription_paused_notification",
                "successful_payment_notification",
                "updated_account_notification",
            ],
            "{backend:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reaction_interrupted_after_its_event_is_completed_by_the_next_drain_once() {
    for store in both_backends("app_event_reactions").await {
        let backend = store.backend();
        // Purchase 1: the first payment; 2: the renewal, declined.
        let gateway = Scripted::declining(&[2]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store.clone(), gateway.clone(), clock.clone(), 1).await;
        let site = ctx.site.id;
        let s0 = uuid(0);
        clock.set(T0 + 31 * DAY + 3600);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("renewal");
        assert_eq!(gateway.purchases(), 2, "{backend:?}");
        let invoice = invoices_of(&store, site, &s0).await.pop().expect("renewal invoice");
        assert_eq!(invoice.state, InvoiceState::PastDue, "{backend:?}");
        assert!(store.subscription(site, &s0).await.expect("read").expect("s0").past_due);

        // The subscription is held elsewhere: marking the invoice paid records `invoice.paid`,
        // but its reaction cannot run (the call fails once it gives up waiting).
        let now = services.clock.now();
        let Claimed::Held(claim, _) =
            store.claim_subscription(site, &s0, now, now + CLAIM_SECONDS).await.expect("claim")
        else {
            panic!("{backend:?}: the subscription is free");
        };
        let marked = at_time(&ctx, T0 + 31 * DAY + 7200);
        let interrupted = settlement::settle_invoice(&services, &marked, &invoice, Settlement::Paid).await;
        assert!(matches!(interrupted, Err(SettleError::Failed(_))), "{backend:?}: {interrupted:?}");
        let number = invoice.invoice_number.to_string();
        let paid = events_of(&store, site, &number).await.pop().expect("paid");
        assert_eq!((paid.kind.as_str(), paid.awaiting, paid.handled_at), ("invoice.paid", true, None), "{backend:?}");
        assert_eq!(store.invoice_by_id(invoice.id).await.expect("read").expect("kept").state, InvoiceState::Paid);
        assert!(store.subscription(site, &s0).await.expect("read").expect("s0").past_due, "{backend:?}: not yet");
        store.release_subscription(&claim).await.expect("release");

        // The scheduler's next run completes the reaction and marks the event.
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("sweep");
        assert!(!store.subscription(site, &s0).await.expect("read").expect("s0").past_due, "{backend:?}");
        let recovered = |kinds: Vec<String>| kinds.iter().filter(|k| *k == "subscription.recovered").count();
        assert_eq!(recovered(kinds(&store, site, &s0).await), 1, "{backend:?}");
        let handled = events_of(&store, site, &number).await.pop().expect("paid");
        assert!(!handled.awaiting && handled.handled_at.is_some(), "{backend:?}: {handled:?}");

        // It never runs again: a later drain finds nothing, and a repeated delivery (a crash
        // between the reaction and its mark) changes nothing.
        assert_eq!(
            rebill_app::collection::reactions::sweep(&services, Awaiting::All).await.expect("sweep"),
            0,
            "{backend:?}"
        );
        let before = events_of(&store, site, &s0).await;
        subscriptions::on_invoice_settled(&services, &handled).await.expect("delivered again");
        assert_eq!(events_of(&store, site, &s0).await, before, "{backend:?}: idempotent");
    }
}

//! Offline payments in process, on both backends: partial then full payments pay a manual
//! invoice and its past-due subscription recovers through the `invoice.paid` event; a partial
//! payment leaves the invoice open to fall past due; every refusal writes nothing; payments
//! entered at the same time never pay more than the balance.

use rebill_app::billing::adjustments::{self, NewCharge};
use rebill_app::billing::invoicing;
use rebill_app::collection::offline_payments::{
    self, Entered, MANUAL_GATEWAY_TYPE, MESSAGE, OfflinePayment, OfflinePaymentError, Problem,
};
use rebill_app::customers::accounts;
use rebill_app::operations::scheduler;
use rebill_app::operations::testing::{DAY, Scripted, T0, TestClock, subscribers};
use rebill_app::subscriptions::lifecycle as subscriptions;
use rebill_app::{Context, Services};
use rebill_billing::lifecycle::{Action, SubscriptionTerms, Timeframe};
use rebill_billing::states::{InvoiceState, TransactionStatus};
use rebill_store::accounts::AccountFields;
use rebill_store::billing_info::PaymentKind;
use rebill_store::events::{Awaiting, Event};
use rebill_store::invoices::{CollectionMethod, Invoice, InvoiceFilter, InvoiceKind, InvoiceTerms};
use rebill_store::testing::both_backends;
use rebill_store::{Mode, NewSite, PageRequest, Plan, Store};
use serde_json::Value;

fn at_time(ctx: &Context, now: i64) -> Context {
    Context { site: ctx.site.clone(), now }
}

async fn kinds(store: &Store, site: i64, subject: &str) -> Vec<String> {
    store.events(site, subject).await.expect("events").into_iter().map(|e| e.kind).collect()
}

async fn last_event(store: &Store, site: i64, subject: &str) -> Event {
    store.events(site, subject).await.expect("events").pop().expect("an event")
}

fn payload(event: &Event) -> Value {
    serde_json::from_str(&event.payload).expect("a JSON payload")
}

fn check(amount: Option<i64>) -> OfflinePayment {
    OfflinePayment {
        payment_method: Some("check".into()),
        amount_in_cents: amount,
        description: Some("Check 1234".into()),
        ..OfflinePayment::default()
    }
}

/// A manually collected invoice of one charge of `amount` for a new account `code`, due after
/// `net_terms` days.
async fn manual_invoice(services: &Services, ctx: &Context, code: &str, amount: i64, net_terms: i64) -> Invoice {
    invoice_of(services, ctx, code, amount, CollectionMethod::Manual, net_terms).await
}

async fn invoice_of(
    services: &Services,
    ctx: &Context,
    code: &str,
    amount: i64,
    collection_method: CollectionMethod,
    net_terms: i64,
) -> Invoice {
    let account = accounts::create(services, ctx, code, &AccountFields::default(), None).await.expect("account");
    let charge = NewCharge {
        unit_amount_in_cents: amount,
        currency: "USD".into(),
        description: Some("Consulting".into()),
        ..NewCharge::default()
    };
    adjustments::create(services, ctx, &account, &charge).await.expect("adjustment");
    let terms = InvoiceTerms { collection_method, net_terms, ..InvoiceTerms::default() };
    invoicing::invoice_pending(services, ctx, &account, terms).await.expect("invoice").invoice
}

async fn enter(services: &Services, ctx: &Context, invoice: &Invoice, payment: &OfflinePayment) -> Entered {
    offline_payments::enter(services, ctx, &invoice.invoice_number.to_string(), payment).await.expect("entered")
}

async fn refused(services: &Services, ctx: &Context, number: &str, payment: &OfflinePayment) -> OfflinePaymentError {
    let before = services.store.invoice(ctx.site.id, number.parse().unwrap_or_default()).await.expect("read");
    let transactions = match &before {
        Some(i) => services.store.invoice_transactions(i.id).await.expect("transactions").len(),
        None => 0,
    };
    let error = offline_payments::enter(services, ctx, number, payment).await.expect_err("refused");
    let after = services.store.invoice(ctx.site.id, number.parse().unwrap_or_default()).await.expect("read");
    assert_eq!(before, after, "a refusal changes nothing");
    if let Some(i) = &after {
        assert_eq!(services.store.invoice_transactions(i.id).await.expect("transactions").len(), transactions);
    }
    error
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_then_full_payments_pay_the_invoice_and_its_subscription_recovers() {
    for store in both_backends("offline_recovery").await {
        let backend = store.backend();
        // Purchase 1: the first payment; 2: the renewal, declined (its retries come later).
        let gateway = Scripted::declining(&[2]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store.clone(), gateway.clone(), clock.clone(), 1).await;
        let site = ctx.site.id;
        let s0 = format!("{:032x}", 0);
        clock.set(T0 + 31 * DAY + 3600);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("renewal");
        assert!(store.subscription(site, &s0).await.expect("read").expect("s0").past_due, "{backend:?}");

        // The customer moves to paying by check and doubles the quantity now: the prorated
        // charge is invoiced manually and the subscription stays past due.
        let later = at_time(&ctx, T0 + 31 * DAY + 7200);
        subscriptions::change(&services, &later, &s0, |sub, details, _| {
            details.collection_method = Some("manual".into());
            details.net_terms = Some(30);
            vec![Action::Change {
                terms: SubscriptionTerms { quantity: 2, ..sub.terms.clone() },
                timeframe: Timeframe::Now,
            }]
        })
        .await
        .expect("change");
        assert!(store.subscription(site, &s0).await.expect("read").expect("s0").past_due, "{backend:?}");
        let page = PageRequest { limit: 100, ..PageRequest::default() };
        let filter = InvoiceFilter { states: vec![InvoiceState::Pending], ..InvoiceFilter::default() };
        let pending = store.list_invoices(site, &filter, &page).await.expect("invoices").items;
        assert_eq!(pending.len(), 1, "{backend:?}: {pending:?}");
        let invoice = pending[0].clone();
        assert_eq!(invoice.terms.collection_method, CollectionMethod::Manual, "{backend:?}");
        let total = invoice.amounts.total;
        assert!(total > 100, "{backend:?}: a prorated charge of {total}");
        let number = invoice.invoice_number.to_string();

        // A partial payment by check: the invoice stays pending with the rest due.
        let part = total / 4;
        let when = T0 + 30 * DAY;
        let payment = OfflinePayment { collected_at: Some(when), ..check(Some(part)) };
        let first = enter(&services, &later, &invoice, &payment).await;
        let t = &first.transaction;
        assert_eq!(
            (t.status(), t.new.action.as_str(), t.new.amount, t.new.currency.as_str()),
            (TransactionStatus::Success, "purchase", part, "USD"),
            "{backend:?}"
        );
        assert_eq!(
            (t.new.payment_method.as_str(), t.new.kind, t.new.gateway_type.as_str()),
            ("check", PaymentKind::BankAccount, MANUAL_GATEWAY_TYPE),
            "{backend:?}"
        );
        assert_eq!(
            (t.new.source.as_str(), t.new.origin.as_str(), t.result.message.as_deref(), t.result.collected_at),
            ("transaction", "api", Some(MESSAGE), Some(when)),
            "{backend:?}"
        );
        assert_eq!(
            (t.new.description.as_deref(), t.invoice_number, t.new.test),
            (Some("Check 1234"), Some(invoice.invoice_number), true)
        );
        assert!(offline_payments::is_offline(t), "{backend:?}");
        assert_eq!(
            (first.invoice.state, first.invoice.amounts.paid, first.invoice.amounts.balance),
            (InvoiceState::Pending, part, total - part),
            "{backend:?}"
        );
        assert_eq!(kinds(&store, site, &t.uuid).await, ["transaction.approved"], "{backend:?}");
        let approved = payload(&last_event(&store, site, &t.uuid).await);
        assert_eq!(
            (approved["amount_in_cents"].as_i64(), approved["invoice_number"].as_i64()),
            (Some(part), Some(invoice.invoice_number))
        );
        assert_eq!(kinds(&store, site, &number).await, ["invoice.created"], "{backend:?}");
        assert!(store.subscription(site, &s0).await.expect("read").expect("s0").past_due, "{backend:?}: not paid yet");
        assert_eq!(gateway.purchases(), 2, "{backend:?}: no gateway call");

        // The rest, without an amount: the invoice is paid and the subscription recovers before
        // the call returns.
        let rest = OfflinePayment { payment_method: Some("wire_transfer".into()), ..OfflinePayment::default() };
        let second = enter(&services, &later, &invoice, &rest).await;
        assert_eq!(second.transaction.new.amount, total - part, "{backend:?}");
        assert_eq!(second.transaction.result.collected_at, Some(later.now), "{backend:?}: collected now");
        let paid = &second.invoice;
        assert_eq!(
            (paid.state, paid.amounts.paid, paid.amounts.balance, paid.closed_at),
            (InvoiceState::Paid, total, 0, Some(later.now)),
            "{backend:?}"
        );
        let settled = last_event(&store, site, &number).await;
        assert_eq!(
            (settled.kind.as_str(), payload(&settled)["settled_by"].as_str()),
            ("invoice.paid", Some("offline_payment")),
            "{backend:?}"
        );
        assert!(!settled.awaiting && settled.handled_at.is_some(), "{backend:?}: its reaction ran: {settled:?}");
        assert!(!store.subscription(site, &s0).await.expect("read").expect("s0").past_due, "{backend:?}");
        assert_eq!(kinds(&store, site, &s0).await.last().map(String::as_str), Some("subscription.recovered"));
        let transactions = store.invoice_transactions(invoice.id).await.expect("transactions");
        let amounts: Vec<i64> = transactions.iter().map(|t| t.new.amount).collect();
        assert_eq!(amounts, [part, total - part], "{backend:?}");
        assert!(store.awaiting_events(Awaiting::All, 0, 10).await.expect("awaiting").is_empty(), "{backend:?}");

        // Paid: nothing more is taken.
        let error = refused(&services, &later, &number, &check(Some(1))).await;
        assert!(matches!(error, OfflinePaymentError::NotOpen("paid")), "{backend:?}: {error:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partially_paid_invoice_still_falls_past_due_and_is_paid_by_the_rest() {
    for store in both_backends("offline_past_due").await {
        let backend = store.backend();
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store.clone(), Scripted::declining(&[]), clock.clone(), 0).await;
        let invoice = manual_invoice(&services, &ctx, "m1", 5000, 30).await;
        assert_eq!(invoice.state, InvoiceState::Pending, "{backend:?}");
        let first = enter(&services, &ctx, &invoice, &check(Some(2000))).await;
        assert_eq!(first.invoice.amounts.balance, 3000, "{backend:?}");

        // Its due date passes with 30.00 still due.
        clock.set(T0 + 30 * DAY + 60);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("due");
        let due = store.invoice_by_id(invoice.id).await.expect("read").expect("invoice");
        assert_eq!((due.state, due.amounts.balance), (InvoiceState::PastDue, 3000), "{backend:?}");
        assert_eq!(
            kinds(&store, ctx.site.id, &invoice.invoice_number.to_string()).await.last().map(String::as_str),
            Some("invoice.past_due")
        );

        let late = at_time(&ctx, T0 + 31 * DAY);
        let over = refused(&services, &late, &invoice.invoice_number.to_string(), &check(Some(3001))).await;
        assert!(matches!(over, OfflinePaymentError::AboveBalance(3000)), "{backend:?}: {over:?}");
        let rest = enter(&services, &late, &due, &check(None)).await;
        assert_eq!(
            (rest.transaction.new.amount, rest.invoice.state, rest.invoice.amounts.paid),
            (3000, InvoiceState::Paid, 5000),
            "{backend:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_writes_nothing() {
    for store in both_backends("offline_refusals").await {
        let backend = store.backend();
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store.clone(), Scripted::declining(&[]), clock.clone(), 0).await;
        let open = manual_invoice(&services, &ctx, "r1", 1000, 30).await;
        let number = open.invoice_number.to_string();

        // Unknown invoices.
        for unknown in ["999", "abc", "1001x"] {
            let error = refused(&services, &ctx, unknown, &check(None)).await;
            assert!(matches!(&error, OfflinePaymentError::NotFound(n) if n == unknown), "{backend:?}: {error:?}");
        }

        // Fields.
        let error = refused(&services, &ctx, &number, &OfflinePayment::default()).await;
        assert!(matches!(&error, OfflinePaymentError::Invalid(p) if p == &[Problem::PaymentMethodBlank]), "{error:?}");
        let bad = OfflinePayment {
            payment_method: Some("bitcoin".into()),
            description: Some("d".repeat(51)),
            amount_in_cents: Some(-1),
            ..OfflinePayment::default()
        };
        let error = refused(&services, &ctx, &number, &bad).await;
        assert!(
            matches!(&error, OfflinePaymentError::Invalid(p)
                if p == &[Problem::PaymentMethodUnknown, Problem::DescriptionTooLong, Problem::AmountNotPositive]),
            "{backend:?}: {error:?}"
        );
        let error = refused(&services, &ctx, &number, &check(Some(0))).await;
        assert!(matches!(&error, OfflinePaymentError::Invalid(p) if p == &[Problem::AmountNotPositive]), "{error:?}");
        let error = refused(&services, &ctx, &number, &check(Some(1001))).await;
        assert!(matches!(error, OfflinePaymentError::AboveBalance(1000)), "{backend:?}: {error:?}");
        let euros = OfflinePayment { currency: Some("EUR".into()), ..check(None) };
        let error = refused(&services, &ctx, &number, &euros).await;
        assert!(matches!(&error, OfflinePaymentError::OtherCurrency(c) if c == "USD"), "{backend:?}: {error:?}");

        // An automatically collected invoice (past due: no billing info to charge).
        let automatic = invoice_of(&services, &ctx, "r2", 700, CollectionMethod::Automatic, 0).await;
        assert_eq!(automatic.state, InvoiceState::PastDue, "{backend:?}");
        let error = refused(&services, &ctx, &automatic.invoice_number.to_string(), &check(None)).await;
        assert!(matches!(error, OfflinePaymentError::NotManual), "{backend:?}: {error:?}");

        // Paid and failed invoices.
        let marked = manual_invoice(&services, &ctx, "r3", 800, 30).await;
        rebill_app::collection::settlement::settle_invoice(
            &services,
            &ctx,
            &marked,
            rebill_app::collection::settlement::Settlement::Paid,
        )
        .await
        .expect("paid");
        let error = refused(&services, &ctx, &marked.invoice_number.to_string(), &check(None)).await;
        assert!(matches!(error, OfflinePaymentError::NotOpen("paid")), "{backend:?}: {error:?}");
        let given_up = manual_invoice(&services, &ctx, "r4", 900, 30).await;
        rebill_app::collection::settlement::settle_invoice(
            &services,
            &ctx,
            &given_up,
            rebill_app::collection::settlement::Settlement::Failed,
        )
        .await
        .expect("failed");
        let error = refused(&services, &ctx, &given_up.invoice_number.to_string(), &check(None)).await;
        assert!(matches!(error, OfflinePaymentError::NotOpen("failed")), "{backend:?}: {error:?}");

        // A credit invoice (a site with Credit Memos) and a legacy one (without).
        let new_site =
            NewSite { name: "memos".into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos: true, contact: None };
        let (memos, _) = store.create_site(&new_site, T0).await.expect("site");
        let memos = Context { site: memos, now: T0 };
        for (ctx, code, kind) in [(&memos, "c1", InvoiceKind::Credit), (&ctx, "c2", InvoiceKind::Legacy)] {
            let credit = manual_invoice(&services, ctx, code, -500, 0).await;
            assert_eq!(credit.kind, kind, "{backend:?}");
            let error = refused(&services, ctx, &credit.invoice_number.to_string(), &check(None)).await;
            assert!(matches!(error, OfflinePaymentError::NotOpen(k) if k == kind.as_str()), "{backend:?}: {error:?}");
        }

        // Another site's invoice is not this site's.
        let error = refused(&services, &memos, &given_up.invoice_number.to_string(), &check(None)).await;
        assert!(matches!(error, OfflinePaymentError::NotFound(_)), "{backend:?}: {error:?}");
        assert!(store.invoice_transactions(open.id).await.expect("transactions").is_empty(), "{backend:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payments_entered_at_once_never_pay_more_than_the_balance() {
    for store in both_backends("offline_concurrent").await {
        let backend = store.backend();
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store.clone(), Scripted::declining(&[]), clock.clone(), 0).await;
        for round in 0..4 {
            // Two payments of the whole balance, then two of 60% of it.
            let (amount, code) =
                if round % 2 == 0 { (None, format!("w{round}")) } else { (Some(600), format!("p{round}")) };
            let invoice = manual_invoice(&services, &ctx, &code, 1000, 30).await;
            let number = invoice.invoice_number.to_string();
            let tasks: Vec<_> = (0..2)
                .map(|_| {
                    let (services, ctx, number) = (services.clone(), ctx.clone(), number.clone());
                    tokio::spawn(async move { offline_payments::enter(&services, &ctx, &number, &check(amount)).await })
                })
                .collect();
            let mut outcomes = Vec::new();
            for task in tasks {
                outcomes.push(task.await.expect("task"));
            }
            let entered: Vec<&Entered> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
            assert_eq!(entered.len(), 1, "{backend:?} round {round}: {outcomes:?}");
            let error = outcomes.iter().find_map(|o| o.as_ref().err()).expect("one refused");
            match amount {
                None => assert!(matches!(error, OfflinePaymentError::NotOpen("paid")), "{backend:?}: {error:?}"),
                Some(_) => assert!(matches!(error, OfflinePaymentError::AboveBalance(400)), "{backend:?}: {error:?}"),
            }
            let after = store.invoice_by_id(invoice.id).await.expect("read").expect("invoice");
            let transactions = store.invoice_transactions(invoice.id).await.expect("transactions");
            let paid: i64 = transactions.iter().map(|t| t.new.amount).sum();
            assert_eq!(transactions.len(), 1, "{backend:?}");
            assert_eq!((after.amounts.paid, after.amounts.balance), (paid, 1000 - paid), "{backend:?}");
            let expected = if amount.is_none() { InvoiceState::Paid } else { InvoiceState::Pending };
            assert_eq!(after.state, expected, "{backend:?}");
            let paid_events = kinds(&store, ctx.site.id, &number).await.iter().filter(|k| *k == "invoice.paid").count();
            assert_eq!(paid_events, usize::from(amount.is_none()), "{backend:?}");
        }
    }
}

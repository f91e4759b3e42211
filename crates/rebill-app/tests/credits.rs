//! Credit invoices and credit payments over the use cases, on both backends: a negative
//! adjustment invoiced becomes a credit invoice (Credit Memos) or a legacy one; the account's
//! credit pays its next charge invoices automatically (oldest credit invoice first, one credit
//! payment each; a charge paid in part is charged only the rest, one paid in full is not
//! charged); voiding a credit invoice's balance in full or in part, with its reduction credit
//! payment and event; the reads of credit payments, original and credit invoices and credit
//! adjustments; the account balance netting credit.

use std::sync::Arc;

use rebill_app::billing::adjustments;
use rebill_app::billing::invoicing::{self, Invoiced};
use rebill_app::billing::queries::{self, ReadError};
use rebill_app::customers::accounts;
use rebill_app::customers::payment_methods;
use rebill_app::money_back::credit_invoices::{self, INVOICE_VOIDED, VoidError};
use rebill_app::operations::scheduler;
use rebill_app::operations::testing::{DAY, Scripted, T0, TestClock, card, subscribers};
use rebill_app::platform::error::{AppError, Missing};
use rebill_app::{Context, Services};
use rebill_billing::states::{InvoiceState, TransactionStatus};
use rebill_store::accounts::{Account, AccountFields};
use rebill_store::credits::{CREDIT_INVOICE_VOIDED, CreditPayment, CreditPaymentAction, CreditPaymentFilter};
use rebill_store::invoices::{
    Adjustment, AdjustmentKind, CollectionMethod, Invoice, InvoiceAmounts, InvoiceKind, InvoiceTerms, NewAdjustment,
    NewInvoice,
};
use rebill_store::testing::both_backends;
use rebill_store::{Mode, NewSite, PageRequest, Plan, Store};
use serde_json::Value;

fn page() -> PageRequest {
    PageRequest { limit: 50, ..PageRequest::default() }
}

/// A sandbox site (with Credit Memos or not) over the scripted gateway, at `T0`.
async fn site(store: Store, credit_memos: bool) -> (Services, Context, Arc<Scripted>, Arc<TestClock>) {
    let gateway = Scripted::declining(&[]);
    let clock = TestClock::starting(T0);
    let services = Services::new(store, clock.clone()).with_gateway(gateway.clone());
    let new = NewSite { name: "credits".into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos, contact: None };
    let (site, _) = services.store.create_site(&new, T0).await.expect("site");
    (services, Context { site, now: T0 }, gateway, clock)
}

async fn account(services: &Services, ctx: &Context, code: &str, with_card: bool) -> Account {
    let account = accounts::create(services, ctx, code, &AccountFields::default(), None).await.expect("account");
    if with_card {
        payment_methods::apply(services, ctx, &account, &card()).await.expect("billing info");
    }
    account
}

/// Invoices `cents` (a credit when negative) as the account's one pending adjustment, at `now`.
async fn invoiced(services: &Services, ctx: &Context, account: &Account, cents: i64, now: i64) -> Invoiced {
    let ctx = Context { site: ctx.site.clone(), now };
    let charge = adjustments::NewCharge { unit_amount_in_cents: cents, currency: "USD".into(), ..Default::default() };
    adjustments::create(services, &ctx, account, &charge).await.expect("adjustment");
    invoicing::invoice_pending(services, &ctx, account, InvoiceTerms::default()).await.expect("invoiced")
}

async fn reread(services: &Services, invoice: &Invoice) -> Invoice {
    services.store.invoice_by_id(invoice.id).await.expect("read").expect("the invoice")
}

async fn credit_payments_of(services: &Services, invoice: &Invoice) -> Vec<CreditPayment> {
    services.store.invoice_credit_payments(invoice.id).await.expect("credit payments")
}

fn balance_of(amounts: &InvoiceAmounts) -> (i64, i64, i64) {
    (amounts.total, amounts.paid, amounts.balance)
}

async fn usd_balance(services: &Services, ctx: &Context, code: &str) -> i64 {
    let (_, balance) = accounts::balance(services, ctx, code).await.expect("balance");
    balance.balance_in_cents.iter().find(|(c, _)| c == "USD").map(|(_, v)| *v).expect("USD balance")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credit_invoices_pay_the_next_invoices_oldest_first() {
    for store in both_backends("app_credit_use").await {
        let backend = store.backend();
        let (services, ctx, gateway, _) = site(store, true).await;
        let a = account(&services, &ctx, "a1", true).await;

        // Two credits, invoiced a day apart: two open credit invoices holding their totals.
        let older = invoiced(&services, &ctx, &a, -300, T0).await;
        let newer = invoiced(&services, &ctx, &a, -500, T0 + DAY).await;
        for (made, total) in [(&older, -300), (&newer, -500)] {
            let i = &made.invoice;
            assert_eq!((i.kind, i.state, i.origin.as_str()), (InvoiceKind::Credit, InvoiceState::Open, "credit"));
            assert_eq!(balance_of(&i.amounts), (total, 0, total), "{backend:?}");
            assert_eq!(made.transaction, None, "{backend:?}: nothing is collected for a credit");
            assert_eq!(made.lines[0].line.kind, AdjustmentKind::Credit, "{backend:?}");
        }
        assert_eq!(usd_balance(&services, &ctx, "a1").await, -800, "{backend:?}: the balance is the credit");

        // A charge of 600: paid by 300 of the older credit and 300 of the newer, nothing charged.
        let charge = invoiced(&services, &ctx, &a, 600, T0 + 2 * DAY).await;
        assert_eq!(charge.invoice.kind, InvoiceKind::Charge);
        assert_eq!(charge.invoice.state, InvoiceState::Paid, "{backend:?}");
        assert_eq!(balance_of(&charge.invoice.amounts), (600, 600, 0), "{backend:?}");
        assert_eq!((charge.transaction.as_ref(), gateway.purchases()), (None, 0), "{backend:?}: nothing charged");
        let payments = credit_payments_of(&services, &charge.invoice).await;
        let taken: Vec<(i64, i64, Option<i64>, CreditPaymentAction)> = payments
            .iter()
            .map(|p| (p.original_invoice_number, p.amount, p.applied_to_invoice_number, p.action))
            .collect();
        let (n_old, n_new, n_charge) =
            (older.invoice.invoice_number, newer.invoice.invoice_number, charge.invoice.invoice_number);
        assert_eq!(
            taken,
            [
                (n_old, 300, Some(n_charge), CreditPaymentAction::Payment),
                (n_new, 300, Some(n_charge), CreditPaymentAction::Payment)
            ],
            "{backend:?}: oldest credit invoice first, one credit payment each"
        );
        let older_now = reread(&services, &older.invoice).await;
        assert_eq!((older_now.state, older_now.amounts.balance), (InvoiceState::Closed, 0), "{backend:?}");
        assert!(older_now.closed_at.is_some(), "{backend:?}");
        let newer_now = reread(&services, &newer.invoice).await;
        assert_eq!((newer_now.state, newer_now.amounts.balance), (InvoiceState::Open, -200), "{backend:?}");
        assert_eq!(usd_balance(&services, &ctx, "a1").await, -200, "{backend:?}");
        // Each credit payment recorded its event.
        for p in &payments {
            let recorded = services.store.events(ctx.site.id, &p.uuid).await.expect("events");
            assert_eq!(recorded.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(), ["credit_payment.created"]);
        }

        // A charge of 1000: 200 of credit left, the card is charged the other 800.
        let rest = invoiced(&services, &ctx, &a, 1000, T0 + 3 * DAY).await;
        assert_eq!(rest.invoice.state, InvoiceState::Paid, "{backend:?}");
        assert_eq!(balance_of(&rest.invoice.amounts), (1000, 1000, 0), "{backend:?}");
        let t = rest.transaction.as_ref().expect("the rest is charged");
        assert_eq!((t.status(), t.new.amount), (TransactionStatus::Success, 800), "{backend:?}");
        assert_eq!(gateway.purchases.lock().map(|p| p.clone()).unwrap_or_default(), [800], "{backend:?}");
        let payments = credit_payments_of(&services, &rest.invoice).await;
        assert_eq!(payments.iter().map(|p| (p.original_invoice_number, p.amount)).collect::<Vec<_>>(), [(n_new, 200)]);
        let newer_now = reread(&services, &newer.invoice).await;
        assert_eq!((newer_now.state, newer_now.amounts.balance), (InvoiceState::Closed, 0), "{backend:?}");
        assert_eq!(usd_balance(&services, &ctx, "a1").await, 0, "{backend:?}");

        // No credit left: the next charge is charged whole.
        let whole = invoiced(&services, &ctx, &a, 250, T0 + 4 * DAY).await;
        assert_eq!(whole.transaction.map(|t| t.new.amount), Some(250), "{backend:?}");
        assert!(credit_payments_of(&services, &whole.invoice).await.is_empty(), "{backend:?}");

        // Credit in another currency is not used.
        let eur = adjustments::NewCharge { unit_amount_in_cents: -400, currency: "EUR".into(), ..Default::default() };
        let later = Context { site: ctx.site.clone(), now: T0 + 5 * DAY };
        adjustments::create(&services, &later, &a, &eur).await.expect("credit");
        invoicing::invoice_pending(&services, &later, &a, InvoiceTerms::default()).await.expect("EUR credit");
        let usd = invoiced(&services, &ctx, &a, 100, T0 + 6 * DAY).await;
        assert_eq!(usd.transaction.map(|t| t.new.amount), Some(100), "{backend:?}: EUR credit pays no USD invoice");

        // Credit payments list, per account and by uuid.
        let all =
            queries::credit_payments(&services, &ctx, &CreditPaymentFilter::default(), &page()).await.expect("list");
        assert_eq!(all.total, 3, "{backend:?}");
        let mine = CreditPaymentFilter { account_id: Some(a.id), action: None };
        assert_eq!(queries::credit_payments(&services, &ctx, &mine, &page()).await.expect("list").total, 3);
        let one = queries::credit_payment(&services, &ctx, &all.items[0].uuid).await.expect("one");
        assert_eq!(one, all.items[0], "{backend:?}");
        let missing = queries::credit_payment(&services, &ctx, "nope").await.expect_err("unknown");
        assert!(matches!(AppError::from(missing), AppError::NotFound(m) if m.resource == "CreditPayment"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_charge_paid_in_part_by_credit_without_a_card_owes_the_rest() {
    for store in both_backends("app_credit_part").await {
        let backend = store.backend();
        let (services, ctx, gateway, _) = site(store, true).await;
        let a = account(&services, &ctx, "a1", false).await;
        invoiced(&services, &ctx, &a, -400, T0).await;
        let charge = invoiced(&services, &ctx, &a, 1000, T0 + 60).await;
        assert_eq!(balance_of(&charge.invoice.amounts), (1000, 400, 600), "{backend:?}");
        assert_eq!(charge.invoice.state, InvoiceState::PastDue, "{backend:?}: no payment method for the rest");
        assert_eq!(gateway.purchases(), 0, "{backend:?}");
        // What the account owes: the rest of the charge, its credit used up.
        assert_eq!(usd_balance(&services, &ctx, "a1").await, 600, "{backend:?}");
        let (_, balance) = accounts::balance(&services, &ctx, "a1").await.expect("balance");
        assert!(balance.past_due, "{backend:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voiding_a_credit_invoice_removes_what_is_left_of_its_credit() {
    for store in both_backends("app_credit_void").await {
        let backend = store.backend();
        let (services, ctx, _, _) = site(store, true).await;
        let a = account(&services, &ctx, "a1", true).await;

        // Voided whole: `voided`, a reduction of the whole total, the voided events.
        let full = invoiced(&services, &ctx, &a, -500, T0).await.invoice;
        let number = full.invoice_number.to_string();
        let later = Context { site: ctx.site.clone(), now: T0 + 60 };
        let voided = credit_invoices::void(&services, &later, &number).await.expect("voided");
        assert_eq!((voided.state, voided.amounts.balance), (InvoiceState::Voided, 0), "{backend:?}");
        assert_eq!(voided.closed_at, Some(T0 + 60), "{backend:?}");
        let payments = credit_payments_of(&services, &voided).await;
        assert_eq!(payments.len(), 1, "{backend:?}");
        let p = &payments[0];
        assert_eq!((p.action, p.amount, p.currency.as_str()), (CreditPaymentAction::Reduction, 500, "USD"));
        assert_eq!((p.original_invoice_id, p.applied_to_invoice_id), (voided.id, Some(voided.id)), "{backend:?}");
        assert_eq!(p.created_at, T0 + 60, "{backend:?}");
        let recorded = services.store.events(ctx.site.id, &number).await.expect("events");
        let kinds: Vec<&str> = recorded.iter().map(|e| e.kind.as_str()).collect();
        // The state change (what notifications send), then the void with its amounts.
        assert_eq!(kinds, ["invoice.created", CREDIT_INVOICE_VOIDED, INVOICE_VOIDED], "{backend:?}");
        let payload: Value = serde_json::from_str(&recorded[2].payload).expect("json");
        assert_eq!(
            (payload["voided_in_cents"].as_i64(), payload["state"].as_str(), payload["account_code"].as_str()),
            (Some(500), Some("voided"), Some("a1")),
            "{backend:?}"
        );
        assert_eq!(usd_balance(&services, &ctx, "a1").await, 0, "{backend:?}");
        // Nothing is left to void.
        let again = credit_invoices::void(&services, &later, &number).await;
        assert!(
            matches!(again, Err(VoidError::NotVoidable { state: InvoiceState::Voided, .. })),
            "{backend:?}: {again:?}"
        );

        // Part used, the rest voided: `closed`.
        let part = invoiced(&services, &ctx, &a, -1000, T0 + 120).await.invoice;
        let charge = invoiced(&services, &ctx, &a, 300, T0 + 180).await;
        assert_eq!((charge.invoice.state, charge.transaction.as_ref()), (InvoiceState::Paid, None), "{backend:?}");
        let after = Context { site: ctx.site.clone(), now: T0 + 200 };
        let closed = credit_invoices::void(&services, &after, &part.invoice_number.to_string()).await.expect("void");
        assert_eq!((closed.state, closed.amounts.balance), (InvoiceState::Closed, 0), "{backend:?}");
        let moved: Vec<(CreditPaymentAction, i64)> =
            credit_payments_of(&services, &closed).await.iter().map(|p| (p.action, p.amount)).collect();
        assert_eq!(moved, [(CreditPaymentAction::Payment, 300), (CreditPaymentAction::Reduction, 700)], "{backend:?}");
        // The voided credit pays nothing later.
        let next = invoiced(&services, &ctx, &a, 200, T0 + 240).await;
        assert_eq!(next.transaction.map(|t| t.new.amount), Some(200), "{backend:?}");

        // A charge invoice, a closed credit invoice, an unknown number: refused, nothing written.
        let refused = credit_invoices::void(&services, &later, &charge.invoice.invoice_number.to_string()).await;
        assert!(
            matches!(refused, Err(VoidError::NotVoidable { kind: InvoiceKind::Charge, state: InvoiceState::Paid, .. })),
            "{backend:?}: {refused:?}"
        );
        match AppError::from(refused.expect_err("refused")) {
            AppError::Refused(fields) => {
                assert_eq!((fields[0].field.as_str(), fields[0].symbol), ("base", credit_invoices::NOT_VOIDABLE))
            }
            other => panic!("{backend:?}: {other:?}"),
        }
        let unknown = credit_invoices::void(&services, &later, "999").await;
        assert!(matches!(unknown, Err(VoidError::NotFound(ref n)) if n == "999"), "{backend:?}");
        assert!(matches!(credit_invoices::void(&services, &later, "x").await, Err(VoidError::NotFound(_))));
        let all = queries::credit_payments(&services, &ctx, &CreditPaymentFilter::default(), &page()).await;
        assert_eq!(all.expect("list").total, 3, "{backend:?}: two reductions and one payment");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_credit_memos_a_credit_is_a_legacy_invoice_whose_credit_pays_later_invoices() {
    for store in both_backends("app_credit_legacy").await {
        let backend = store.backend();
        let (services, ctx, gateway, _) = site(store, false).await;
        let a = account(&services, &ctx, "a1", true).await;
        let legacy = invoiced(&services, &ctx, &a, -700, T0).await.invoice;
        assert_eq!((legacy.kind, legacy.state), (InvoiceKind::Legacy, InvoiceState::Paid), "{backend:?}");
        assert_eq!(balance_of(&legacy.amounts), (-700, 0, -700), "{backend:?}");
        assert_eq!(usd_balance(&services, &ctx, "a1").await, -700, "{backend:?}");
        // Not a credit invoice: it cannot be voided.
        let refused = credit_invoices::void(&services, &ctx, &legacy.invoice_number.to_string()).await;
        assert!(matches!(refused, Err(VoidError::NotVoidable { kind: InvoiceKind::Legacy, .. })), "{backend:?}");

        let charge = invoiced(&services, &ctx, &a, 1000, T0 + 60).await;
        assert_eq!(charge.transaction.map(|t| t.new.amount), Some(300), "{backend:?}");
        assert_eq!(gateway.purchases(), 1, "{backend:?}");
        let payments = credit_payments_of(&services, &charge.invoice).await;
        assert_eq!(payments.iter().map(|p| (p.original_invoice_id, p.amount)).collect::<Vec<_>>(), [(legacy.id, 700)]);
        let legacy = reread(&services, &legacy).await;
        assert_eq!((legacy.state, legacy.amounts.balance), (InvoiceState::Paid, 0), "{backend:?}: a legacy stays paid");
        assert_eq!(usd_balance(&services, &ctx, "a1").await, 0, "{backend:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_takes_the_account_s_credit() {
    for store in both_backends("app_credit_renewal").await {
        let backend = store.backend();
        let gateway = Scripted::declining(&[]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 2).await;
        assert_eq!(gateway.purchases(), 2, "{backend:?}: the first payments");
        let a0 = accounts::find(&services, &ctx, "a0").await.expect("a0");
        invoiced(&services, &ctx, &a0, -250, T0 + 60).await;

        clock.set(T0 + 31 * DAY + 3600);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("renewals");
        let amounts = gateway.purchases.lock().map(|p| p.clone()).unwrap_or_default();
        assert_eq!(amounts.len(), 4, "{backend:?}: both renewed");
        let mut renewals = amounts[2..].to_vec();
        renewals.sort_unstable();
        assert_eq!(renewals, [750, 1000], "{backend:?}: a0's renewal took its 250 of credit");
        assert_eq!(usd_balance(&services, &ctx, "a0").await, 0, "{backend:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn original_and_credit_invoices_and_credit_adjustments_are_read_both_ways() {
    for store in both_backends("app_credit_reads").await {
        let backend = store.backend();
        let (services, ctx, _, _) = site(store, true).await;
        let a = account(&services, &ctx, "a1", true).await;
        let charge = invoiced(&services, &ctx, &a, 1200, T0).await;
        assert_eq!(charge.invoice.state, InvoiceState::Paid);
        let charged_line = &charge.lines[0];
        // A credit invoice issued against it (as a refund makes one): one line reversing the charge.
        let credit = NewInvoice {
            account_id: a.id,
            kind: InvoiceKind::Credit,
            original_invoice_id: Some(charge.invoice.id),
            state: InvoiceState::Open,
            origin: "refund".into(),
            currency: "USD".into(),
            amounts: InvoiceAmounts {
                subtotal_before_discount: -400,
                subtotal_after_discount: -400,
                total: -400,
                balance: -400,
                ..InvoiceAmounts::default()
            },
            terms: InvoiceTerms { collection_method: CollectionMethod::Automatic, ..InvoiceTerms::default() },
            due_on: None,
            attempt_next_collection_at: None,
            closed_at: None,
        };
        let line = NewAdjustment {
            kind: AdjustmentKind::Credit,
            origin: "credit".into(),
            unit_amount: -400,
            quantity: 1,
            total: -400,
            original_adjustment_id: Some(charged_line.id),
            reversed_quantity: 1,
            ..charged_line.line.clone()
        };
        let (credit, lines) = services
            .store
            .create_invoice(
                ctx.site.id,
                &credit,
                std::slice::from_ref(&line),
                &[],
                T0 + 60,
                &[],
                None,
                rebill_store::coupons::Discounted::default(),
            )
            .await
            .expect("credit invoice");
        let n_charge = charge.invoice.invoice_number.to_string();
        let n_credit = credit.invoice_number.to_string();

        let originals = credit_invoices::original_invoices(&services, &ctx, &n_credit, &page()).await.expect("read");
        assert_eq!(originals.items.iter().map(|i| i.id).collect::<Vec<_>>(), [charge.invoice.id], "{backend:?}");
        assert_eq!(originals.total, 1);
        let none = credit_invoices::original_invoices(&services, &ctx, &n_charge, &page()).await.expect("read");
        assert_eq!((none.items.len(), none.total), (0, 0), "{backend:?}: a charge invoice has no original");
        let credits = credit_invoices::credit_invoices(&services, &ctx, &n_charge, &page()).await.expect("read");
        assert_eq!(credits.items.iter().map(|i| i.id).collect::<Vec<_>>(), [credit.id], "{backend:?}");
        assert!(
            credit_invoices::credit_invoices(&services, &ctx, &n_credit, &page()).await.expect("r").items.is_empty()
        );
        let unknown = credit_invoices::credit_invoices(&services, &ctx, "999", &page()).await;
        assert!(matches!(unknown, Err(ReadError::NotFound(ref m)) if *m == Missing::invoice("999")), "{backend:?}");

        // The charged line knows what was credited; its credit adjustments list the credit line.
        let charged = reread(&services, &charge.invoice).await;
        assert_eq!(charged.credited, 400, "{backend:?}");
        let stored: Adjustment =
            services.store.adjustment(ctx.site.id, &charged_line.uuid).await.expect("r").expect("a");
        assert_eq!((stored.credited, stored.quantity_credited), (400, 1), "{backend:?}");
        let listed =
            credit_invoices::credit_adjustments(&services, &ctx, &charged_line.uuid, &page()).await.expect("r");
        assert_eq!(listed.items.iter().map(|l| l.id).collect::<Vec<_>>(), [lines[0].id], "{backend:?}");
        assert_eq!(listed.items[0].original_adjustment_uuid.as_deref(), Some(charged_line.uuid.as_str()));
        let none = credit_invoices::credit_adjustments(&services, &ctx, &lines[0].uuid, &page()).await.expect("r");
        assert_eq!(none.total, 0, "{backend:?}");
        let unknown = credit_invoices::credit_adjustments(&services, &ctx, "nope", &page()).await;
        assert!(matches!(unknown, Err(ReadError::NotFound(ref m)) if *m == Missing::adjustment("nope")));

        // Which invoices' charges are refundable: the paid charge invoice's, not the credit's.
        let all_lines = [charged_line.clone(), lines[0].clone()];
        let paid = queries::paid_charge_invoices(&services, &all_lines).await.expect("paid");
        assert_eq!(paid.into_iter().collect::<Vec<_>>(), [charge.invoice.id], "{backend:?}");
    }
}

use super::*;
use crate::accounts::{AccountActivity, AccountFields, AccountFilter};
use crate::billing_info::{BillingFields, PaymentKind};
use crate::testing::both_backends;
use crate::{Mode, NewSite, Order, Plan};

const NOW: i64 = 1_800_000_000;

async fn site(store: &Store, name: &str) -> i64 {
    let new = NewSite { name: name.into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos: false, contact: None };
    store.create_site(&new, NOW).await.expect("site").0.id
}

fn charge(account_id: i64, total: i64) -> NewAdjustment {
    NewAdjustment {
        account_id,
        subscription_uuid: None,
        kind: AdjustmentKind::Charge,
        origin: "debit".into(),
        description: Some("Widget".into()),
        accounting_code: None,
        product_code: None,
        currency: "USD".into(),
        unit_amount: total,
        quantity: 1,
        discount: 0,
        tax: 0,
        total,
        tax_exempt: None,
        tax_code: None,
        credit_reason_code: None,
        start_date: Some(NOW),
        end_date: None,
        engine: None,
        original_adjustment_id: None,
        reversed_quantity: 0,
    }
}

fn invoice(account_id: i64, total: i64) -> NewInvoice {
    NewInvoice {
        account_id,
        kind: InvoiceKind::Charge,
        original_invoice_id: None,
        state: InvoiceState::Pending,
        origin: "purchase".into(),
        currency: "USD".into(),
        amounts: InvoiceAmounts {
            subtotal_before_discount: total,
            subtotal_after_discount: total,
            total,
            balance: total,
            ..InvoiceAmounts::default()
        },
        terms: InvoiceTerms::default(),
        due_on: Some(NOW),
        attempt_next_collection_at: None,
        closed_at: None,
    }
}

#[tokio::test]
async fn invoices_are_numbered_per_site_and_take_pending_adjustments() {
    for store in both_backends("invoicing").await {
        let s = site(&store, "a").await;
        let other = site(&store, "b").await;
        let account = store.create_account(s, "c1", &AccountFields::default(), NOW, &[]).await.expect("account").id;
        let foreign = store.create_account(other, "c1", &AccountFields::default(), NOW, &[]).await.expect("account").id;

        let pending = store.create_adjustment(s, &charge(account, 500), NOW).await.expect("adjustment");
        assert_eq!(
            (pending.state, pending.invoice_id, pending.account_code.as_str()),
            (AdjustmentState::Pending, None, "c1")
        );
        assert_eq!(store.pending_adjustments(account).await.expect("pending"), vec![pending.clone()]);

        let mut engine = charge(account, 1000);
        engine.subscription_uuid = Some("sub1".into());
        engine.origin = "plan".into();
        engine.engine = Some(EngineKey {
            item_kind: "plan".into(),
            item_code: "gold".into(),
            period_start: NOW,
            period_end: NOW + 100,
            line_period_end: NOW + 100,
            proration: Some((50, 100)),
        });
        let (first, lines) = store
            .create_invoice(
                s,
                &invoice(account, 1500),
                &[engine.clone()],
                &[pending.id],
                NOW,
                &[],
                None,
                Discounted::default(),
            )
            .await
            .expect("invoice");
        assert_eq!((first.invoice_number, first.account_code.as_str()), (FIRST_INVOICE_NUMBER, "c1"));
        assert_eq!(lines.len(), 2);
        assert!(
            lines
                .iter()
                .all(|l| l.state == AdjustmentState::Invoiced && l.invoice_number == Some(first.invoice_number))
        );
        assert_eq!(lines[1].line, engine);
        assert_eq!(store.subscription_adjustments("sub1").await.expect("billed"), vec![lines[1].clone()]);
        assert!(store.pending_adjustments(account).await.expect("pending").is_empty());
        assert_eq!(store.delete_adjustment(s, &pending.uuid).await.expect("delete"), AdjustmentDeletion::Invoiced);

        // Taking an adjustment that is no longer pending writes nothing.
        let taken = store
            .create_invoice(s, &invoice(account, 500), &[], &[pending.id], NOW, &[], None, Discounted::default())
            .await;
        assert!(matches!(taken, Err(StoreError::Conflict(_))), "{taken:?}");

        let (second, _) = store
            .create_invoice(
                s,
                &invoice(account, 1),
                &[charge(account, 1)],
                &[],
                NOW + 1,
                &[],
                None,
                Discounted::default(),
            )
            .await
            .expect("invoice");
        assert_eq!(second.invoice_number, FIRST_INVOICE_NUMBER + 1, "the conflict used no number");
        let (elsewhere, _) = store
            .create_invoice(other, &invoice(foreign, 1), &[], &[], NOW, &[], None, Discounted::default())
            .await
            .expect("invoice");
        assert_eq!(elsewhere.invoice_number, FIRST_INVOICE_NUMBER, "numbers are per site");
        assert_eq!(store.invoice(s, FIRST_INVOICE_NUMBER).await.expect("get").map(|i| i.id), Some(first.id));
        assert_eq!(store.invoice(other, FIRST_INVOICE_NUMBER + 1).await.expect("get"), None);
        assert_eq!(store.invoice_by_uuid(&second.uuid).await.expect("get"), Some(second.clone()));

        // Compare-and-set state changes.
        let paid =
            InvoiceChange { state: InvoiceState::Paid, attempt_next_collection_at: None, collection_attempts: None };
        let done = store
            .set_invoice_state(first.id, &[InvoiceState::Pending], paid, NOW + 5, &[])
            .await
            .expect("pay")
            .expect("was pending");
        assert_eq!(
            (done.state, done.amounts.paid, done.amounts.balance, done.closed_at),
            (InvoiceState::Paid, 1500, 0, Some(NOW + 5))
        );
        assert_eq!(
            store.set_invoice_state(first.id, &[InvoiceState::Pending], paid, NOW + 6, &[]).await.expect("again"),
            None
        );
        let past_due = InvoiceChange {
            state: InvoiceState::PastDue,
            attempt_next_collection_at: Some(NOW + 86_400),
            collection_attempts: Some(1),
        };
        let due = store
            .set_invoice_state(second.id, &[InvoiceState::Pending], past_due, NOW + 7, &[])
            .await
            .expect("due")
            .expect("changed");
        assert_eq!(
            (due.attempt_next_collection_at, due.collection_attempts, due.closed_at),
            (Some(NOW + 86_400), 1, None)
        );
        let both = [
            store.account_with_activity(s, "c1").await.expect("read").expect("found"),
            store.account_with_activity(other, "c1").await.expect("read").expect("found"),
        ];
        assert_eq!(
            both.iter().map(|a| a.activity.has_past_due_invoice).collect::<Vec<_>>(),
            [true, false],
            "only the account with the past-due invoice has one (the other site's account of the same code has none)"
        );
        assert_eq!(foreign, both[1].account.id);

        // Lists.
        let all = store.list_invoices(s, &InvoiceFilter::default(), &PageRequest::default()).await.expect("list");
        assert_eq!(
            all.items.iter().map(|i| i.invoice_number).collect::<Vec<_>>(),
            vec![FIRST_INVOICE_NUMBER + 1, FIRST_INVOICE_NUMBER]
        );
        let filter = InvoiceFilter { account_id: Some(account), states: vec![InvoiceState::Paid] };
        let paid_list = store
            .list_invoices(s, &filter, &PageRequest { order: Order::Asc, ..PageRequest::default() })
            .await
            .expect("list");
        assert_eq!((paid_list.total, paid_list.items[0].id), (1, first.id));
        let filter = AdjustmentFilter {
            account_id: Some(account),
            kind: Some(AdjustmentKind::Charge),
            state: Some(AdjustmentState::Invoiced),
        };
        assert_eq!(store.list_adjustments(s, &filter, &PageRequest::default()).await.expect("list").total, 3);
        let pending = AdjustmentFilter { state: Some(AdjustmentState::Pending), ..AdjustmentFilter::default() };
        assert_eq!(store.list_adjustments(s, &pending, &PageRequest::default()).await.expect("list").total, 0);
        let fresh = store.create_adjustment(s, &charge(account, 7), NOW).await.expect("adjustment");
        assert_eq!(store.delete_adjustment(s, &fresh.uuid).await.expect("delete"), AdjustmentDeletion::Deleted);
        assert_eq!(store.delete_adjustment(s, &fresh.uuid).await.expect("delete"), AdjustmentDeletion::NotFound);
    }
}

/// An account's activity is read with it, one at a time and on a page of accounts: each
/// account's flags come from its own subscriptions' states and past-due invoices.
#[tokio::test]
async fn accounts_are_read_with_their_subscriptions_and_past_due_invoices() {
    for store in both_backends("account_activity").await {
        let s = site(&store, "a").await;
        let fields = crate::plans::PlanFields {
            name: Some("Gold".into()),
            unit_amount_in_cents: Some([("USD".to_owned(), 1000)].into_iter().collect()),
            ..crate::plans::PlanFields::default()
        };
        let plan = store.create_plan(s, "gold", &fields, NOW).await.expect("plan").id;
        let mut accounts = Vec::new();
        for code in ["busy", "future", "quiet", "late"] {
            accounts.push(store.create_account(s, code, &AccountFields::default(), NOW, &[]).await.expect("account"));
        }
        let subscriptions = [(0, "active"), (0, "canceled"), (0, "expired"), (1, "future"), (3, "paused")];
        for (n, (owner, state)) in subscriptions.into_iter().enumerate() {
            let record = crate::subscriptions::NewSubscriptionRecord {
                site_id: s,
                account_id: accounts[owner].id,
                plan_id: plan,
                uuid: format!("u{n}"),
                indexed: crate::subscriptions::Indexed { state: state.into(), ..Default::default() },
                value: "{}".into(),
                creation: "{}".into(),
                details: "{}".into(),
            };
            let (claim, _) = store.create_subscription(&record, &[], &[], NOW, NOW + 60).await.expect("subscription");
            store.release_subscription(&claim).await.expect("release");
        }
        // A past-due invoice for "late", a paid one for "busy".
        for (owner, state) in [(3, InvoiceState::PastDue), (0, InvoiceState::Paid)] {
            let new = NewInvoice { state, ..invoice(accounts[owner].id, 100) };
            store.create_invoice(s, &new, &[], &[], NOW, &[], None, Discounted::default()).await.expect("invoice");
        }
        let mut one_at_a_time = Vec::new();
        for code in ["late", "quiet", "busy", "future"] {
            let found = store.account_with_activity(s, code).await.expect("read").expect("found");
            assert_eq!(found.account.account_code, code);
            one_at_a_time.push(found.activity);
        }
        let late = AccountActivity {
            has_live_subscription: true,
            has_paused_subscription: true,
            has_past_due_invoice: true,
            ..AccountActivity::default()
        };
        let busy = AccountActivity {
            has_live_subscription: true,
            has_active_subscription: true,
            has_canceled_subscription: true,
            ..AccountActivity::default()
        };
        let future = AccountActivity { has_future_subscription: true, ..AccountActivity::default() };
        assert_eq!(one_at_a_time, [late, AccountActivity::default(), busy, future]);
        // A page (oldest first: the order of creation) holds the same flags.
        let oldest_first = PageRequest { order: Order::Asc, ..PageRequest::default() };
        let page = store.list_accounts(s, &AccountFilter::default(), &oldest_first).await.expect("page");
        let listed: Vec<(&str, AccountActivity)> =
            page.items.iter().map(|a| (a.account.account_code.as_str(), a.activity)).collect();
        assert_eq!(listed, [("busy", busy), ("future", future), ("quiet", AccountActivity::default()), ("late", late)]);
        assert_eq!(store.account_with_activity(s, "nobody").await.expect("read"), None);
    }
}

#[tokio::test]
async fn invoice_balances_sum_the_open_invoices_per_currency() {
    for store in both_backends("invoice_balances").await {
        let s = site(&store, "a").await;
        let account = store.create_account(s, "c1", &AccountFields::default(), NOW, &[]).await.expect("account").id;
        let other = store.create_account(s, "c2", &AccountFields::default(), NOW, &[]).await.expect("account").id;
        assert_eq!(store.account_invoice_balances(account).await.expect("none"), vec![]);

        let mut eur = invoice(account, 700);
        eur.currency = "EUR".into();
        let states = [
            (invoice(account, 1000), InvoiceState::Pending),
            (invoice(account, 2000), InvoiceState::PastDue),
            (invoice(account, 4000), InvoiceState::Paid),
            (invoice(account, 8000), InvoiceState::Failed),
            (invoice(account, 16000), InvoiceState::Processing),
            (eur, InvoiceState::Paid),
            (invoice(other, 500), InvoiceState::PastDue),
        ];
        for (new, state) in states {
            let (created, _) =
                store.create_invoice(s, &new, &[], &[], NOW, &[], None, Discounted::default()).await.expect("invoice");
            if state != InvoiceState::Pending {
                let change = InvoiceChange { state, attempt_next_collection_at: None, collection_attempts: None };
                store.set_invoice_state(created.id, &[InvoiceState::Pending], change, NOW, &[]).await.expect("state");
            }
        }
        assert_eq!(
            store.account_invoice_balances(account).await.expect("balances"),
            vec![
                CurrencyBalance { currency: "EUR".into(), open: 0, past_due: false },
                CurrencyBalance { currency: "USD".into(), open: 19_000, past_due: true },
            ]
        );
        assert_eq!(
            store.account_invoice_balances(other).await.expect("balances"),
            vec![CurrencyBalance { currency: "USD".into(), open: 500, past_due: true }]
        );
    }
}

#[tokio::test]
async fn concurrent_invoices_get_distinct_sequential_numbers() {
    for store in both_backends("invoice_numbers").await {
        let s = site(&store, "a").await;
        let account = store.create_account(s, "c1", &AccountFields::default(), NOW, &[]).await.expect("account").id;
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    store.create_invoice(s, &invoice(account, i), &[], &[], NOW, &[], None, Discounted::default()).await
                })
            })
            .collect();
        let mut numbers = Vec::new();
        for t in tasks {
            numbers.push(t.await.expect("task").expect("invoice").0.invoice_number);
        }
        numbers.sort_unstable();
        assert_eq!(numbers, (FIRST_INVOICE_NUMBER..FIRST_INVOICE_NUMBER + 8).collect::<Vec<_>>());
    }
}

#[tokio::test]
async fn transactions_are_recorded_before_and_completed_after_the_gateway() {
    for store in both_backends("transactions").await {
        let s = site(&store, "a").await;
        let account = store.create_account(s, "c1", &AccountFields::default(), NOW, &[]).await.expect("account").id;
        let new = NewTransaction {
            idempotency_key: "k1".into(),
            account_id: account,
            invoice_id: None,
            subscription_uuid: None,
            action: "purchase".into(),
            amount: 1000,
            tax: 0,
            currency: "USD".into(),
            kind: PaymentKind::CreditCard,
            payment_method: "credit_card".into(),
            source: "transaction".into(),
            origin: "api".into(),
            recurring: false,
            test: true,
            gateway_type: "test".into(),
            description: None,
            original_transaction_id: None,
            payment_reference: None,
            account: AccountSnapshot { account_code: "c1".into(), ..AccountSnapshot::default() },
            billing: BillingFields {
                first_six: Some("400000".into()),
                last_four: Some("0077".into()),
                ..BillingFields::default()
            },
        };
        let (begun, resumed) = store.begin_transaction(s, &new, NOW).await.expect("begin");
        assert!(!resumed, "a new transaction");
        assert_eq!((begun.status(), &begun.new), (TransactionStatus::Processing, &new));
        assert_eq!(
            store.begin_transaction(s, &new, NOW + 1).await.expect("again"),
            (begun.clone(), true),
            "same key, same row"
        );
        let result = TransactionResult {
            status: TransactionStatus::Declined,
            reference: Some("r".into()),
            approval_code: None,
            message: Some("declined".into()),
            fraud_review: false,
            failure: Some(TransactionFailure {
                error_code: "insufficient_funds".into(),
                error_category: "soft".into(),
                merchant_message: "m".into(),
                customer_message: "c".into(),
                gateway_error_code: Some("51".into()),
            }),
            cvv: Some(Check { code: "M".into(), message: "Match".into() }),
            avs: None,
            collected_at: None,
        };
        let done = store.complete_transaction(begun.id, &result, NOW + 2, &[]).await.expect("complete");
        assert_eq!((&done.result, done.updated_at), (&result, NOW + 2));
        let other = TransactionResult { status: TransactionStatus::Success, failure: None, ..result.clone() };
        assert_eq!(
            store.complete_transaction(begun.id, &other, NOW + 3, &[]).await.expect("again"),
            done,
            "completed once"
        );
        assert_eq!(store.transaction(s, &done.uuid).await.expect("get"), Some(done.clone()));
        let declined =
            TransactionFilter { statuses: vec![TransactionStatus::Declined], ..TransactionFilter::default() };
        assert_eq!(store.list_transactions(s, &declined, &PageRequest::default()).await.expect("list").total, 1);
        let refunds = TransactionFilter { actions: vec!["refund".into()], ..TransactionFilter::default() };
        assert_eq!(store.list_transactions(s, &refunds, &PageRequest::default()).await.expect("list").total, 0);
    }
}
#[tokio::test]
async fn work_creates_collects_and_pays_many_invoices_at_once() {
    for store in both_backends("invoicing_work").await {
        let s = site(&store, "a").await;
        let paying = store.create_account(s, "c1", &AccountFields::default(), NOW, &[]).await.expect("account");
        let other = store.create_account(s, "c2", &AccountFields::default(), NOW, &[]).await.expect("account");
        let fields = BillingFields { last_four: Some("1111".into()), ..BillingFields::default() };
        store
            .save_billing_info(s, paying.id, PaymentKind::CreditCard, &fields, Some("ref-1"), NOW, &[])
            .await
            .expect("billing info");
        // The site already has an invoice: the work's invoices take the next numbers.
        store
            .create_invoice(s, &invoice(other.id, 1), &[], &[], NOW, &[], None, Discounted::default())
            .await
            .expect("invoice");

        let mut work = store.begin_work().await.expect("work");
        let mut payers = work.payers(s, &["c1", "c2", "nope"]).await.expect("payers");
        payers.sort_by_key(|p| p.account_id);
        assert_eq!(payers.len(), 2);
        assert_eq!((payers[0].account_id, payers[0].account.account_code.as_str()), (paying.id, "c1"));
        let payment = payers[0].payment.clone().expect("billing info");
        assert_eq!(
            (payment.kind, payment.fields, payment.gateway_reference.as_deref()),
            (PaymentKind::CreditCard, fields.clone(), Some("ref-1"))
        );
        assert_eq!(payers[1].payment, None);

        let mut line = charge(paying.id, 700);
        line.subscription_uuid = Some("sub9".into());
        let first = [line.clone()];
        let second = [line.clone(), charge(paying.id, 300)];
        let (a, b) = (invoice(paying.id, 700), invoice(paying.id, 1000));
        let event = |kind: &str, at: i64| crate::events::NewEvent {
            kind: kind.into(),
            at,
            recorded_at: NOW,
            payload: format!(r#"{{"at":{at}}}"#),
            awaits_reaction: kind == "invoice.paid",
        };
        let created = [[event("invoice.created", NOW + 1)], [event("invoice.created", NOW + 2)]];
        let drafts = [
            InvoiceDraft { invoice: &a, lines: &first, now: NOW + 1, events: &created[0], credit: None },
            InvoiceDraft { invoice: &b, lines: &second, now: NOW + 2, events: &created[1], credit: None },
        ];
        let made = work.create_invoices(s, &drafts).await.expect("invoices");
        assert_eq!(
            made.iter().map(|(i, l)| (i.invoice_number, i.created_at, l.len())).collect::<Vec<_>>(),
            [(FIRST_INVOICE_NUMBER + 1, NOW + 1, 1), (FIRST_INVOICE_NUMBER + 2, NOW + 2, 2)]
        );
        assert_eq!(work.subscriptions_adjustments(&["sub9"]).await.expect("lines").len(), 2);
        let new: Vec<NewTransaction> = made
            .iter()
            .map(|(i, _)| NewTransaction {
                idempotency_key: format!("invoice:{}:0", i.uuid),
                account_id: paying.id,
                invoice_id: Some(i.id),
                subscription_uuid: None,
                action: "purchase".into(),
                amount: i.amounts.balance,
                tax: 0,
                currency: "USD".into(),
                kind: PaymentKind::CreditCard,
                payment_method: "credit_card".into(),
                source: "subscription".into(),
                origin: "recurring".into(),
                recurring: true,
                test: true,
                gateway_type: "test".into(),
                description: None,
                original_transaction_id: None,
                payment_reference: None,
                account: payers[0].account.clone(),
                billing: fields.clone(),
            })
            .collect();
        let begun = work.begin_transactions(s, &[(&new[0], NOW + 1), (&new[1], NOW + 2)]).await.expect("begin");
        assert_eq!(begun.iter().map(|t| &t.new).collect::<Vec<_>>(), new.iter().collect::<Vec<_>>());
        assert!(begun.iter().all(|t| t.status() == TransactionStatus::Processing));
        let approved = TransactionResult {
            status: TransactionStatus::Success,
            reference: Some("r".into()),
            approval_code: Some("A".into()),
            message: Some("ok".into()),
            fraud_review: false,
            failure: None,
            cvv: None,
            avs: Some(Check { code: "Y".into(), message: "match".into() }),
            collected_at: Some(NOW + 3),
        };
        let approvals = [event("transaction.approved", NOW + 3)];
        let results =
            [(begun[0].id, &approved, NOW + 3, &approvals[..]), (begun[1].id, &approved, NOW + 3, &approvals[..])];
        assert_eq!(work.complete_transactions(&results).await.expect("complete"), 2);
        assert_eq!(work.complete_transactions(&results).await.expect("again"), 0, "completed once");
        let paid_event = [event("invoice.paid", NOW + 4)];
        let pay =
            InvoiceChange { state: InvoiceState::Paid, attempt_next_collection_at: None, collection_attempts: None };
        let paying_first = |now| InvoiceStateChange { id: made[0].0.id, change: pay, now, events: &paid_event[..] };
        let paid = work.set_invoice_states(&InvoiceState::OPEN, &[paying_first(NOW + 4)]).await.expect("paid");
        assert_eq!(paid, [made[0].0.id]);
        let again = work.set_invoice_states(&InvoiceState::OPEN, &[paying_first(NOW + 5)]).await.expect("again");
        assert!(again.is_empty(), "paid once");
        // A batch moves each invoice as its change says: the second falls past due with a
        // retry scheduled and one attempt counted, and stays open.
        let retry = InvoiceChange {
            state: InvoiceState::PastDue,
            attempt_next_collection_at: Some(NOW + 86_400),
            collection_attempts: Some(1),
        };
        let changes =
            [paying_first(NOW + 6), InvoiceStateChange { id: made[1].0.id, change: retry, now: NOW + 6, events: &[] }];
        let moved = work.set_invoice_states(&[InvoiceState::Pending], &changes).await.expect("past due");
        assert_eq!(moved, [made[1].0.id], "the paid one is not pending any more");
        work.commit().await.expect("commit");
        let first = store.invoice_by_id(made[0].0.id).await.expect("read").expect("first");
        assert_eq!((first.state, first.amounts.balance, first.closed_at), (InvoiceState::Paid, 0, Some(NOW + 4)));

        // One account's paying side is the batch read with one code.
        let single = store.payer(s, "c1").await.expect("payer").expect("c1");
        assert_eq!(single.account_id, paying.id);
        assert_eq!(single.payment.map(|p| p.gateway_reference), Some(Some("ref-1".to_owned())));
        assert_eq!(store.payer(s, "nope").await.expect("payer"), None);

        // Each change recorded its events, with its item as the subject, once.
        let kinds = |events: Vec<crate::events::Event>| {
            events.into_iter().map(|e| (e.kind, e.at, e.awaiting)).collect::<Vec<_>>()
        };
        let first_number = made[0].0.invoice_number.to_string();
        assert_eq!(
            kinds(store.events(s, &first_number).await.expect("events")),
            [("invoice.created".to_owned(), NOW + 1, false), ("invoice.paid".to_owned(), NOW + 4, true)]
        );
        assert_eq!(
            kinds(store.events(s, &made[1].0.invoice_number.to_string()).await.expect("events")),
            [("invoice.created".to_owned(), NOW + 2, false)]
        );
        for t in &begun {
            assert_eq!(
                kinds(store.events(s, &t.uuid).await.expect("events")),
                [("transaction.approved".to_owned(), NOW + 3, false)]
            );
        }

        // What the work made reads back as the one-at-a-time methods make it.
        for (invoice, lines) in &made {
            assert_eq!(store.invoice_lines(invoice.id).await.expect("lines"), *lines);
        }
        let settled = store.invoice_by_id(made[0].0.id).await.expect("read").expect("exists");
        assert_eq!(
            (settled.state, settled.amounts.paid, settled.amounts.balance, settled.closed_at),
            (InvoiceState::Paid, 700, 0, Some(NOW + 4))
        );
        let past_due = Invoice {
            state: InvoiceState::PastDue,
            attempt_next_collection_at: Some(NOW + 86_400),
            collection_attempts: 1,
            updated_at: NOW + 6,
            ..made[1].0.clone()
        };
        assert_eq!(store.invoice_by_id(made[1].0.id).await.expect("read"), Some(past_due));
        let stored = store.transaction(s, &begun[1].uuid).await.expect("read").expect("exists");
        assert_eq!((&stored.result, stored.updated_at, &stored.new), (&approved, NOW + 3, &new[1]));
        assert_eq!(store.begin_transaction(s, &new[0], NOW + 9).await.expect("same key").0.id, begun[0].id);
    }
}

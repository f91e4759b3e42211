//! Gift cards in process, on both backends: a purchase makes one paid charge invoice and one
//! card with its events; a declined purchase keeps nothing of the card; a card with a
//! `deliver_at` is delivered by the scheduler at that time, not before; a redemption makes the
//! credit the account's next invoices use (the card's balance falls with it); two redemptions
//! of one card at once never both succeed; a subscription created with a card redeems it only
//! inside the creation (its first invoice takes the credit) and takes the redemption back when
//! the creation is refused.

use rebill_app::billing::adjustments;
use rebill_app::billing::invoicing;
use rebill_app::customers::accounts;
use rebill_app::customers::payment_methods;
use rebill_app::operations::scheduler;
use rebill_app::operations::testing::{DAY, Scripted, T0, TestClock, card};
use rebill_app::selling::gift_cards::{self, Delivery, GiftCardError, GiftSubscribeError, ListFilter, Purchase};
use rebill_app::subscriptions::lifecycle as subscriptions;
use rebill_app::{Context, Services};
use rebill_billing::lifecycle::{NewSubscription, SubscriptionTerms};
use rebill_billing::period::{Interval, IntervalUnit};
use rebill_billing::states::{InvoiceState, TransactionStatus};
use rebill_store::accounts::AccountFields;
use rebill_store::invoices::{InvoiceKind, InvoiceTerms};
use rebill_store::testing::both_backends;
use rebill_store::{Mode, NewSite, PageRequest, Plan, Store};

async fn setup(store: Store, gateway: std::sync::Arc<Scripted>, credit_memos: bool) -> (Services, Context) {
    let clock = TestClock::starting(T0);
    let services = Services::new(store, clock).with_gateway(gateway);
    let new_site = NewSite {
        name: format!("gifts{credit_memos}"),
        mode: Mode::Sandbox,
        plan: Plan::Core,
        credit_memos,
        contact: None,
    };
    let (site, _) = services.store.create_site(&new_site, T0).await.expect("site");
    let ctx = Context { site, now: T0 };
    let added = gift_cards::add_product(&services, &ctx, "gift_card", "usd", &[2000, 5000]).await.expect("products");
    assert_eq!(added.len(), 2);
    (services, ctx)
}

async fn account_with_card(services: &Services, ctx: &Context, code: &str) {
    let account = accounts::create(services, ctx, code, &AccountFields::default(), None).await.expect("account");
    payment_methods::apply(services, ctx, &account, &card()).await.expect("billing info");
}

fn purchase(gifter: &str, amount: i64, deliver_at: Option<i64>) -> Purchase {
    Purchase {
        product_code: "gift_card".into(),
        unit_amount_in_cents: amount,
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

async fn kinds(store: &Store, site: i64, subject: &str) -> Vec<String> {
    store.events(site, subject).await.expect("events").into_iter().map(|e| e.kind).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_card_is_bought_delivered_redeemed_and_spent() {
    for store in both_backends("gift_cards_flow").await {
        for credit_memos in [true, false] {
            let (services, ctx) = setup(store.clone(), Scripted::declining(&[]), credit_memos).await;
            account_with_card(&services, &ctx, "giver").await;
            let bought = gift_cards::purchase(&services, &ctx, &purchase("giver", 2000, None)).await.expect("bought");
            let card = &bought.card;
            assert_eq!((card.unit_amount, card.currency.as_str()), (2000, "USD"));
            assert_eq!(card.redemption_code.len(), 16);
            assert_eq!((card.delivered_at, card.redeemed_at, card.balance), (Some(T0), None, None));
            // One paid charge invoice of one untaxed line, its approved transaction.
            let invoice = &bought.invoice;
            assert_eq!(
                (invoice.kind, invoice.state, invoice.origin.as_str(), invoice.amounts.total, invoice.amounts.tax),
                (InvoiceKind::Charge, InvoiceState::Paid, "purchase", 2000, 0)
            );
            assert_eq!(
                (bought.transaction.status(), bought.transaction.new.amount),
                (TransactionStatus::Success, 2000)
            );
            let lines = services.store.invoice_lines(invoice.id).await.expect("lines");
            assert_eq!(lines.len(), 1);
            assert_eq!(
                (lines[0].line.product_code.as_deref(), lines[0].line.tax_exempt),
                (Some("gift_card"), Some(true))
            );
            let subject = card.id.to_string();
            assert_eq!(
                kinds(&services.store, ctx.site.id, &subject).await,
                ["gift_card.purchased", "gift_card.delivered"]
            );

            // Redeemed with a lower-case code: credit of the whole value.
            account_with_card(&services, &ctx, "taker").await;
            let code = card.redemption_code.to_ascii_lowercase();
            let redeemed = gift_cards::redeem(&services, &ctx, &code, "taker").await.expect("redeemed");
            assert_eq!(redeemed.card.balance, Some(2000));
            assert_eq!(redeemed.card.recipient_account_code.as_deref(), Some("taker"));
            let kind = if credit_memos { InvoiceKind::Credit } else { InvoiceKind::Legacy };
            let state = if credit_memos { InvoiceState::Open } else { InvoiceState::Paid };
            assert_eq!(
                (redeemed.invoice.kind, redeemed.invoice.state, redeemed.invoice.origin.as_str()),
                (kind, state, "gift_card")
            );
            assert_eq!((redeemed.invoice.amounts.total, redeemed.invoice.amounts.balance), (-2000, -2000));
            assert!(matches!(
                gift_cards::redeem(&services, &ctx, &code, "taker").await,
                Err(GiftCardError::AlreadyRedeemed)
            ));
            assert_eq!(
                kinds(&services.store, ctx.site.id, &subject).await.last().map(String::as_str),
                Some("gift_card.redeemed")
            );

            // Spent: 1250 then 1000 (750 from the card, 250 charged).
            let taker = accounts::find(&services, &ctx, "taker").await.expect("taker");
            for (amount, from_card, left) in [(1250, 1250, 750), (1000, 750, 0)] {
                let charge = adjustments::NewCharge {
                    currency: "USD".into(),
                    unit_amount_in_cents: amount,
                    quantity: None,
                    description: Some("Order".into()),
                    ..adjustments::NewCharge::default()
                };
                adjustments::create(&services, &ctx, &taker, &charge).await.expect("charge");
                let invoiced = invoicing::invoice_pending(&services, &ctx, &taker, InvoiceTerms::default())
                    .await
                    .expect("invoice");
                assert_eq!(invoiced.invoice.state, InvoiceState::Paid);
                let charged = invoiced.transaction.as_ref().map_or(0, |t| t.new.amount);
                assert_eq!(charged, amount - from_card);
                let card = gift_cards::get(&services, &ctx, &subject).await.expect("card");
                assert_eq!(card.balance, Some(left));
            }
            let page = gift_cards::list(
                &services,
                &ctx,
                &ListFilter { recipient_account_code: Some("taker".into()), ..ListFilter::default() },
                &PageRequest::default(),
            )
            .await
            .expect("list");
            assert_eq!(page.total, 1);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_declined_purchase_keeps_nothing_of_the_card() {
    for store in both_backends("gift_cards_declined").await {
        let (services, ctx) = setup(store, Scripted::declining(&[1]), true).await;
        account_with_card(&services, &ctx, "giver").await;
        let Err(GiftCardError::Declined(t)) =
            gift_cards::purchase(&services, &ctx, &purchase("giver", 5000, None)).await
        else {
            panic!("declined expected");
        };
        assert_eq!((t.status(), t.new.amount), (TransactionStatus::Declined, 5000));
        let page =
            gift_cards::list(&services, &ctx, &ListFilter::default(), &PageRequest::default()).await.expect("list");
        assert_eq!(page.total, 0);
        let invoice = services.store.invoice(ctx.site.id, 1001).await.expect("read").expect("the failed invoice");
        assert_eq!(invoice.state, InvoiceState::Failed);
        assert!(kinds(&services.store, ctx.site.id, "1").await.is_empty());
        // Refusals before anything is written.
        assert!(matches!(
            gift_cards::purchase(&services, &ctx, &purchase("giver", 3000, None)).await,
            Err(GiftCardError::UnknownAmount { amount: 3000, .. })
        ));
        let mut other = purchase("giver", 2000, None);
        other.product_code = "other".into();
        assert!(matches!(gift_cards::purchase(&services, &ctx, &other).await, Err(GiftCardError::UnknownProduct(_))));
        let Err(GiftCardError::Refused(fields)) =
            gift_cards::purchase(&services, &ctx, &purchase("giver", 2000, Some(T0 + 60))).await
        else {
            panic!("refused expected");
        };
        assert_eq!(fields[0].field, "delivery.deliver_at");
        // A new gifter without a payment method is not kept.
        assert!(matches!(
            gift_cards::purchase(&services, &ctx, &purchase("nobody", 2000, None)).await,
            Err(GiftCardError::BillingInfoRequired)
        ));
        assert!(services.store.account(ctx.site.id, "nobody").await.expect("read").is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_card_is_delivered_at_its_time_by_the_scheduler() {
    for store in both_backends("gift_cards_delivery").await {
        let clock = TestClock::starting(T0);
        let services = Services::new(store, clock.clone()).with_gateway(Scripted::declining(&[]));
        let new_site =
            NewSite { name: "gifts".into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos: false, contact: None };
        let (site, _) = services.store.create_site(&new_site, T0).await.expect("site");
        let ctx = Context { site: site.clone(), now: T0 };
        gift_cards::add_product(&services, &ctx, "gift_card", "USD", &[2000]).await.expect("product");
        account_with_card(&services, &ctx, "giver").await;
        let due = T0 + 3 * DAY;
        let card =
            gift_cards::purchase(&services, &ctx, &purchase("giver", 2000, Some(due))).await.expect("bought").card;
        assert_eq!(card.delivered_at, None);
        clock.set(due - 1);
        scheduler::run_due(&services, Some(&site)).await.expect("run");
        let id = card.id.to_string();
        assert_eq!(gift_cards::get(&services, &ctx, &id).await.expect("card").delivered_at, None);
        clock.set(due + 10);
        scheduler::run_due(&services, Some(&site)).await.expect("run");
        assert_eq!(gift_cards::get(&services, &ctx, &id).await.expect("card").delivered_at, Some(due));
        assert_eq!(kinds(&services.store, site.id, &id).await, ["gift_card.purchased", "gift_card.delivered"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_redemptions_at_once_never_both_succeed() {
    for store in both_backends("gift_cards_race").await {
        let (services, ctx) = setup(store, Scripted::declining(&[]), true).await;
        account_with_card(&services, &ctx, "giver").await;
        for code in ["r1", "r2", "r3", "r4"] {
            accounts::create(&services, &ctx, code, &AccountFields::default(), None).await.expect("account");
        }
        let card = gift_cards::purchase(&services, &ctx, &purchase("giver", 5000, None)).await.expect("bought").card;
        let tasks: Vec<_> = ["r1", "r2", "r3", "r4"]
            .into_iter()
            .map(|recipient| {
                let (services, ctx, code) = (services.clone(), ctx.clone(), card.redemption_code.clone());
                tokio::spawn(async move { gift_cards::redeem(&services, &ctx, &code, recipient).await })
            })
            .collect();
        let mut won = 0;
        for task in tasks {
            match task.await.expect("task") {
                Ok(_) => won += 1,
                Err(GiftCardError::AlreadyRedeemed) => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(won, 1);
        let credit: i64 = futures_sum(&services, &ctx, &["r1", "r2", "r3", "r4"]).await;
        assert_eq!(credit, -5000);
    }
}

/// The USD balances of the accounts, summed.
async fn futures_sum(services: &Services, ctx: &Context, codes: &[&str]) -> i64 {
    let mut sum = 0;
    for code in codes {
        let account = accounts::find(services, ctx, code).await.expect("account");
        let balances = services.store.account_invoice_balances(account.id).await.expect("balances");
        sum += balances.iter().filter(|b| b.currency == "USD").map(|b| b.open).sum::<i64>();
    }
    sum
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_subscription_redeems_its_card_only_when_created() {
    for store in both_backends("gift_cards_subscription").await {
        let (services, ctx) = setup(store, Scripted::declining(&[2]), true).await;
        account_with_card(&services, &ctx, "giver").await;
        let plan_fields = rebill_store::plans::PlanFields {
            name: Some("Gold".into()),
            plan_interval_length: Some(1),
            plan_interval_unit: Some(rebill_store::plans::IntervalUnit::Months),
            unit_amount_in_cents: Some(std::collections::BTreeMap::from([("USD".to_owned(), 7000)])),
            ..rebill_store::plans::PlanFields::default()
        };
        let plan = services.store.create_plan(ctx.site.id, "gold", &plan_fields, T0).await.expect("plan");
        // Purchase 1 approved; the subscription's first payment (purchase 2) declined.
        let card = gift_cards::purchase(&services, &ctx, &purchase("giver", 5000, None)).await.expect("bought").card;
        let subscribe = |uuid: &str, code: &str| {
            let new = NewSubscription {
                uuid: uuid.into(),
                terms: SubscriptionTerms {
                    plan_code: "gold".into(),
                    currency: "USD".into(),
                    interval: Interval::new(1, IntervalUnit::Months).expect("interval"),
                    unit_amount_in_cents: 7000,
                    quantity: 1,
                    add_ons: Vec::new(),
                    setup_fee_in_cents: 0,
                },
                starts_at: None,
                trial: None,
                total_billing_cycles: None,
                imported_trial: false,
            };
            subscriptions::Subscribe {
                existing: None,
                account_code: code.into(),
                account_fields: None,
                billing_info: Some(card_request()),
                plan_id: plan.id,
                drafted: subscriptions::draft(new, rebill_app::operations::testing::at(T0)).expect("drafted"),
                details: subscriptions::Details { account_code: code.into(), ..subscriptions::Details::default() },
                coupon_codes: Vec::new(),
            }
        };
        let declined = gift_cards::create_subscription_with_gift(
            &services,
            &ctx,
            subscribe(&"a".repeat(32), "sub_a"),
            (None, &[]),
            &card.redemption_code,
        )
        .await;
        assert!(matches!(declined, Err(GiftSubscribeError::Create(_))), "{:?}", declined.err());
        // The redemption is taken back: the card is whole again, its credit invoice gone, and the
        // failed first invoice (7000: 5000 from the card, 2000 declined) owes its whole total.
        let id = card.id.to_string();
        let whole = gift_cards::get(&services, &ctx, &id).await.expect("card");
        assert_eq!((whole.redeemed_at, whole.recipient_account_code, whole.balance), (None, None, None));
        let sub_a =
            services.store.account(ctx.site.id, "sub_a").await.expect("read").expect("sub_a keeps its failed invoice");
        let balances = services.store.account_invoice_balances(sub_a.id).await.expect("balances");
        assert!(balances.iter().all(|b| b.open == 0), "{balances:?}");
        let failed = services
            .store
            .list_invoices(
                ctx.site.id,
                &rebill_store::invoices::InvoiceFilter { account_id: Some(sub_a.id), ..Default::default() },
                &PageRequest::default(),
            )
            .await
            .expect("invoices")
            .items;
        assert_eq!(failed.len(), 1);
        assert_eq!(
            (failed[0].state, failed[0].amounts.paid, failed[0].amounts.balance),
            (InvoiceState::Failed, 0, 7000)
        );
        assert!(kinds(&services.store, ctx.site.id, &id).await.iter().all(|k| k != "gift_card.redeemed"));
        let (loaded, redeemed) = gift_cards::create_subscription_with_gift(
            &services,
            &ctx,
            subscribe(&"b".repeat(32), "sub_b"),
            (None, &[]),
            &card.redemption_code,
        )
        .await
        .expect("created");
        assert_eq!(redeemed.card.redeemed_subscription_uuid.as_deref(), Some(loaded.record.uuid.as_str()));
        // The first invoice took the whole card (5000 of 7000; 2000 charged).
        assert_eq!(redeemed.card.balance, Some(0));
        assert!(gift_cards::of_subscription(&services, &ctx, &loaded.record.uuid).await.expect("read").is_some());
        assert!(matches!(
            gift_cards::create_subscription_with_gift(
                &services,
                &ctx,
                subscribe(&"c".repeat(32), "sub_c"),
                (None, &[]),
                &card.redemption_code
            )
            .await,
            Err(GiftSubscribeError::Card(GiftCardError::AlreadyRedeemed))
        ));
    }
}

fn card_request() -> payment_methods::BillingRequest {
    card()
}

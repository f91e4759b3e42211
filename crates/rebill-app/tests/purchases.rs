//! Purchases in process, on both backends: a declined purchase on an existing account with a
//! gift card takes back the subscription, the pending charge and the card's redemption (the
//! failed invoice keeps the declined transaction); the same purchase then approved puts the
//! subscription's lines and the charge on one invoice that the card's credit pays first and the
//! gateway pays the rest of, in one transaction; a refusal found before writing (another
//! currency's card) writes nothing; a preview writes nothing.

use rebill_app::customers::accounts;
use rebill_app::customers::payment_methods;
use rebill_app::operations::testing::{Scripted, T0, TestClock, card};
use rebill_app::selling::gift_cards;
use rebill_app::selling::purchases::{self, Mode, OneOff, Purchase, PurchaseError};
use rebill_app::subscriptions::lifecycle as subscriptions;
use rebill_app::{Context, Services};
use rebill_billing::lifecycle::{NewSubscription, SubscriptionTerms};
use rebill_billing::period::{Interval, IntervalUnit};
use rebill_billing::states::{InvoiceState, TransactionStatus};
use rebill_store::accounts::AccountFields;
use rebill_store::testing::both_backends;
use rebill_store::{Mode as SiteMode, NewSite, Plan, Store};

async fn setup(store: Store, gateway: std::sync::Arc<Scripted>) -> (Services, Context, i64) {
    let services = Services::new(store, TestClock::starting(T0)).with_gateway(gateway);
    let new_site =
        NewSite { name: "buys".into(), mode: SiteMode::Sandbox, plan: Plan::Core, credit_memos: true, contact: None };
    let (site, _) = services.store.create_site(&new_site, T0).await.expect("site");
    let ctx = Context { site, now: T0 };
    gift_cards::add_product(&services, &ctx, "gift_card", "USD", &[2000]).await.expect("product");
    gift_cards::add_product(&services, &ctx, "gift_card", "EUR", &[2000]).await.expect("product");
    let plan_fields = rebill_store::plans::PlanFields {
        name: Some("Gold".into()),
        plan_interval_length: Some(1),
        plan_interval_unit: Some(rebill_store::plans::IntervalUnit::Months),
        unit_amount_in_cents: Some(std::collections::BTreeMap::from([("USD".to_owned(), 7000)])),
        ..rebill_store::plans::PlanFields::default()
    };
    let plan = services.store.create_plan(ctx.site.id, "gold", &plan_fields, T0).await.expect("plan");
    (services, ctx, plan.id)
}

fn gift(gifter: &str, currency: &str) -> gift_cards::Purchase {
    gift_cards::Purchase {
        product_code: "gift_card".into(),
        unit_amount_in_cents: 2000,
        currency: currency.into(),
        delivery: Some(gift_cards::Delivery {
            method: "email".into(),
            email_address: Some("friend@example.com".into()),
            ..gift_cards::Delivery::default()
        }),
        gifter_account_code: gifter.into(),
        ..gift_cards::Purchase::default()
    }
}

fn gold(plan_id: i64) -> purchases::Subscription {
    let new = NewSubscription {
        uuid: subscriptions::new_uuid(),
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
    let drafted = subscriptions::draft(new, rebill_app::operations::testing::at(T0)).expect("drafted");
    purchases::Subscription { plan_id, drafted, shipping: None }
}

fn purchase(services_account: &rebill_store::accounts::Account, plan_id: i64, code: &str) -> Purchase {
    Purchase {
        existing: Some(services_account.clone()),
        account_code: services_account.account_code.clone(),
        currency: "USD".into(),
        subscriptions: vec![gold(plan_id)],
        adjustments: vec![OneOff {
            unit_amount_in_cents: 1250,
            quantity: Some(2),
            description: Some("Box".into()),
            ..OneOff::default()
        }],
        gift_card: Some(code.into()),
        coupon_codes: Vec::new(),
        ..Purchase::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_purchase_is_one_invoice_all_or_nothing() {
    for store in both_backends("purchases_app").await {
        // Gateway purchases: 1 and 2 the gift cards (approved), 3 the first purchase (declined).
        let (services, ctx, plan_id) = setup(store, Scripted::declining(&[3])).await;
        let giver = accounts::create(&services, &ctx, "giver", &AccountFields::default(), None).await.expect("giver");
        payment_methods::apply(&services, &ctx, &giver, &card()).await.expect("billing info");
        let usd = gift_cards::purchase(&services, &ctx, &gift("giver", "USD")).await.expect("usd card").card;
        let eur = gift_cards::purchase(&services, &ctx, &gift("giver", "EUR")).await.expect("eur card").card;
        let buyer = accounts::create(&services, &ctx, "buyer", &AccountFields::default(), None).await.expect("buyer");
        payment_methods::apply(&services, &ctx, &buyer, &card()).await.expect("billing info");

        // A card in another currency: refused before anything is written.
        let refused =
            purchases::purchase(&services, &ctx, purchase(&buyer, plan_id, &eur.redemption_code), Mode::Purchase)
                .await
                .expect_err("another currency");
        assert!(
            matches!(&refused, PurchaseError::Refused(f) if f[0].field == "gift_card.redemption_code"),
            "{refused:?}"
        );

        // The preview: 7000 + 2 x 1250 = 9500, nothing written.
        let preview = purchases::preview(&services, &ctx, &purchase(&buyer, plan_id, &usd.redemption_code))
            .await
            .expect("preview");
        assert_eq!(preview.invoice.amounts.total, 9500);
        assert_eq!(preview.lines.len(), 2);
        let nothing = services.store.pending_adjustments(buyer.id).await.expect("pending");
        assert!(nothing.is_empty());

        // Declined: nothing of the purchase stays but its failed invoice and transaction.
        let declined =
            purchases::purchase(&services, &ctx, purchase(&buyer, plan_id, &usd.redemption_code), Mode::Purchase)
                .await
                .expect_err("declined");
        let PurchaseError::Declined(Some(transaction)) = declined else { panic!("{declined:?}") };
        assert_eq!(transaction.status(), TransactionStatus::Declined);
        // The card paid 2000 of 9500 first; the gateway was asked for the rest.
        assert_eq!(transaction.new.amount, 7500);
        assert!(services.store.pending_adjustments(buyer.id).await.expect("pending").is_empty());
        let card = services.store.gift_card(ctx.site.id, usd.id).await.expect("card").expect("card");
        assert_eq!(card.redeemed_at, None, "the redemption was taken back");
        let subs = services.store.live_subscription_details(buyer.id).await.expect("subscriptions");
        assert!(subs.is_empty(), "{subs:?}");

        // Approved: one invoice paid by the card's credit and one transaction.
        let invoiced =
            purchases::purchase(&services, &ctx, purchase(&buyer, plan_id, &usd.redemption_code), Mode::Purchase)
                .await
                .expect("approved");
        let invoice = &invoiced.invoice;
        assert_eq!(
            (invoice.state, invoice.origin.as_str(), invoice.amounts.total),
            (InvoiceState::Paid, "purchase", 9500)
        );
        assert_eq!(invoiced.lines.len(), 2);
        let paid = invoiced.transaction.as_ref().expect("transaction");
        assert_eq!((paid.status(), paid.new.amount), (TransactionStatus::Success, 7500));
        let subs = services.store.live_subscription_details(buyer.id).await.expect("subscriptions");
        assert_eq!(subs.len(), 1);
        let card = services.store.gift_card(ctx.site.id, usd.id).await.expect("card").expect("card");
        assert!(card.redeemed_at.is_some());
        assert_eq!(card.balance, Some(0));
    }
}

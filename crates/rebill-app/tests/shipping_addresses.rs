//! Shipping addresses and CVV checks in process, on both backends: the account's addresses
//! (duplicates, the limit, required values, events), addresses nested in a new account (all or
//! nothing with its billing info), subscriptions shipping to an address (a declined first payment
//! takes a new address away again; renewals run in one batch ship each subscription's lines to
//! its own address; an address in use cannot be deleted), and `verify_cvv` (counted per card in a
//! rolling day, a `verify` transaction per check, the mismatch declined).

use rebill_app::Context;
use rebill_app::customers::accounts::{self, AccountError};
use rebill_app::customers::cvv::{self, CvvError};
use rebill_app::customers::payment_methods::{self, Refusal};
use rebill_app::customers::shipping_addresses::{self as shipping, MAX_PER_ACCOUNT, ShippingChoice, ShippingError};
use rebill_app::operations::scheduler;
use rebill_app::operations::testing::{Scripted, TestClock, at, card, subscribers};
use rebill_app::platform::error::AppError;
use rebill_app::subscriptions::lifecycle::{self as subscriptions, CreateError, Details, Subscribe};
use rebill_billing::lifecycle::{NewSubscription, SubscriptionTerms};
use rebill_billing::period::{Interval, IntervalUnit};
use rebill_store::PageRequest;
use rebill_store::accounts::AccountFields;
use rebill_store::shipping_addresses::ShippingFields;
use rebill_store::testing::both_backends;

/// 2027-01-01T00:00:00Z (the harness's subscribers start then).
const T0: i64 = 1_798_761_600;
const DAY: i64 = 86_400;

fn address(street: &str) -> ShippingFields {
    ShippingFields {
        first_name: Some("Verena".into()),
        last_name: Some("Example".into()),
        address1: Some(street.into()),
        city: Some("San Francisco".into()),
        state: Some("CA".into()),
        zip: Some("94105".into()),
        country: Some("US".into()),
        ..ShippingFields::default()
    }
}

fn page() -> PageRequest {
    PageRequest { limit: 200, ..PageRequest::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_s_addresses_are_added_once_and_at_most_twenty() {
    for store in both_backends("app_shipping").await {
        let backend = store.backend();
        let (services, ctx) = subscribers(store, Scripted::declining(&[]), TestClock::starting(T0), 0).await;
        accounts::create(&services, &ctx, "a1", &AccountFields::default(), None).await.expect("account");

        let first = shipping::create(&services, &ctx, "a1", &address("1 Main St.")).await.expect("created");
        assert!(first.added, "{backend:?}");
        assert_eq!(first.address.fields.nickname.as_deref(), Some("Verena Example"));
        // The same values (spaces aside) answer the same address.
        let spaced = ShippingFields { city: Some(" San Francisco ".into()), ..address("1 Main St.") };
        let again = shipping::create(&services, &ctx, "a1", &spaced).await.expect("duplicate");
        assert_eq!((again.added, again.address.id), (false, first.address.id), "{backend:?}");

        let blank = ShippingFields { zip: None, ..address("2 Main St.") };
        let refused = shipping::create(&services, &ctx, "a1", &blank).await;
        assert!(matches!(refused, Err(ShippingError::Blank(ref f)) if f == &["zip"]), "{backend:?}: {refused:?}");
        assert!(
            matches!(AppError::from(refused.expect_err("refused")), AppError::Refused(ref f) if f[0].field == "zip")
        );

        for i in 1..MAX_PER_ACCOUNT {
            shipping::create(&services, &ctx, "a1", &address(&format!("{i} Side St."))).await.expect("fits");
        }
        let full = shipping::create(&services, &ctx, "a1", &address("21 Side St.")).await;
        assert!(matches!(full, Err(ShippingError::TooMany)), "{backend:?}: {full:?}");
        let listed = shipping::list(&services, &ctx, "a1", &page()).await.expect("list");
        assert_eq!((listed.items.len(), listed.total), (MAX_PER_ACCOUNT, MAX_PER_ACCOUNT as i64), "{backend:?}");

        let changes = ShippingFields { nickname: Some("Home".into()), ..ShippingFields::default() };
        let updated = shipping::update(&services, &ctx, "a1", first.address.id, &changes).await.expect("updated");
        assert_eq!(updated.fields.nickname.as_deref(), Some("Home"));
        assert_eq!(updated.fields.address1.as_deref(), Some("1 Main St."));

        shipping::delete(&services, &ctx, "a1", first.address.id).await.expect("deleted");
        let gone = shipping::get(&services, &ctx, "a1", first.address.id).await;
        assert!(matches!(gone, Err(ShippingError::NotFound(id)) if id == first.address.id), "{backend:?}");
        let missing = shipping::list(&services, &ctx, "nobody", &page()).await;
        assert!(matches!(missing, Err(ShippingError::AccountNotFound(_))), "{backend:?}");

        let kinds: Vec<String> =
            services.store.events(ctx.site.id, "a1").await.expect("events").into_iter().map(|e| e.kind).collect();
        let count = |k: &str| kinds.iter().filter(|x| x.as_str() == k).count();
        assert_eq!(
            (
                count(shipping::SHIPPING_ADDRESS_CREATED),
                count(shipping::SHIPPING_ADDRESS_UPDATED),
                count(shipping::SHIPPING_ADDRESS_DELETED)
            ),
            (MAX_PER_ACCOUNT, 1, 1),
            "{backend:?}: {kinds:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_addresses_go_with_a_refused_new_account() {
    for store in both_backends("app_shipping_nested").await {
        let backend = store.backend();
        let (services, ctx) = subscribers(store, Scripted::declining(&[]), TestClock::starting(T0), 0).await;
        let both = [address("1 Main St."), address("2 Main St."), address("1 Main St.")];
        let made = accounts::create_with_shipping(&services, &ctx, "n1", &AccountFields::default(), None, &both)
            .await
            .expect("account");
        let held = services.store.shipping_addresses(made.id).await.expect("addresses");
        assert_eq!(held.len(), 2, "{backend:?}: the duplicate is added once");

        // A declined verification removes the new account and its addresses.
        let mut declining = card();
        declining.number = Some("4000000000000002".into());
        let refused =
            accounts::create_with_shipping(&services, &ctx, "n2", &AccountFields::default(), Some(&declining), &both)
                .await;
        assert!(
            matches!(refused, Err(AccountError::BillingInfo(Refusal::Declined { saved: false, .. }))),
            "{backend:?}: {refused:?}"
        );
        assert!(services.store.account(ctx.site.id, "n2").await.expect("read").is_none(), "{backend:?}");
        // A refused address refuses the account before anything is written.
        let blank = [address("1 Main St."), ShippingFields::default()];
        let refused =
            accounts::create_with_shipping(&services, &ctx, "n3", &AccountFields::default(), None, &blank).await;
        assert!(matches!(refused, Err(AccountError::ShippingAddress(ShippingError::Blank(_)))), "{backend:?}");
        match AppError::from(refused.expect_err("refused")) {
            AppError::Refused(fields) => assert_eq!(fields[0].field, "shipping_addresses.first_name"),
            other => panic!("{other:?}"),
        }
        assert!(services.store.account(ctx.site.id, "n3").await.expect("read").is_none(), "{backend:?}");
    }
}

fn subscribe_input(plan_id: i64, account: rebill_store::accounts::Account, uuid: &str) -> Subscribe {
    let code = account.account_code.clone();
    let new = NewSubscription {
        uuid: uuid.into(),
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
    Subscribe {
        existing: Some(account),
        account_code: code.clone(),
        account_fields: None,
        billing_info: None,
        plan_id,
        drafted: subscriptions::draft(new, at(T0)).expect("drafted"),
        details: Details { account_code: code, ..Details::default() },
        coupon_codes: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_ship_their_lines_to_their_own_address() {
    for store in both_backends("app_shipping_subscriptions").await {
        let backend = store.backend();
        // Purchases 1-2: the harness's first payments; 3: a0's second subscription (declined).
        let gateway = Scripted::declining(&[3]);
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store, gateway.clone(), clock.clone(), 2).await;
        let plan = services.store.plan(ctx.site.id, "gold").await.expect("plan").expect("gold");
        let a0 = accounts::find(&services, &ctx, "a0").await.expect("a0");

        // A declined first payment refuses the subscription and takes its new address away.
        let refused = subscriptions::create_shipped(
            &services,
            &ctx,
            subscribe_input(plan.id, a0.clone(), &format!("{:032x}", 99)),
            Some(ShippingChoice::New(Box::new(address("9 Gone St.")))),
            &[address("8 Gone St.")],
        )
        .await;
        assert!(matches!(refused, Err(CreateError::FirstPaymentDeclined(_))), "{backend:?}: {:?}", refused.err());
        assert!(services.store.shipping_addresses(a0.id).await.expect("addresses").is_empty(), "{backend:?}");
        // An id the account does not hold is refused before anything is written.
        let unknown = subscriptions::create_shipped(
            &services,
            &ctx,
            subscribe_input(plan.id, a0.clone(), &format!("{:032x}", 98)),
            Some(ShippingChoice::Existing(424_242)),
            &[],
        )
        .await;
        assert!(
            matches!(unknown, Err(CreateError::ShippingAddress(ShippingError::NotFound(424_242)))),
            "{backend:?}: {:?}",
            unknown.err()
        );
        assert_eq!(gateway.purchases(), 3, "{backend:?}: no charge for the unknown address");

        // a0's subscription ships to an address of a0 from now on; a1's ships nowhere.
        let home = shipping::create(&services, &ctx, "a0", &address("1 Main St.")).await.expect("address");
        let a0_uuid = format!("{:032x}", 0);
        let a1_uuid = format!("{:032x}", 1);
        let id = home.address.id;
        let changed = subscriptions::change(&services, &ctx, &a0_uuid, move |_, details: &mut Details, _| {
            details.shipping_address_id = Some(id);
            Vec::new()
        })
        .await
        .expect("changed");
        assert_eq!(changed.details.shipping_address_id, Some(id));
        let in_use = shipping::delete(&services, &ctx, "a0", id).await;
        assert!(matches!(in_use, Err(ShippingError::InUse(ref u)) if u == &a0_uuid), "{backend:?}: {in_use:?}");

        // Both renewals run as one batch: each line ships to its own subscription's address.
        clock.set(T0 + 31 * DAY + 3600);
        let ctx = Context { now: T0 + 31 * DAY + 3600, ..ctx };
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("renewals ran");
        let a0_lines = services.store.subscription_adjustments(&a0_uuid).await.expect("lines");
        let a1_lines = services.store.subscription_adjustments(&a1_uuid).await.expect("lines");
        assert_eq!((a0_lines.len(), a1_lines.len()), (2, 2), "{backend:?}");
        // The first period was billed before the address was set; the renewal carries it.
        assert_eq!(a0_lines[0].shipping_address_id, None, "{backend:?}");
        assert_eq!(a0_lines[1].shipping_address_id, Some(id), "{backend:?}");
        assert_eq!(a0_lines[1].line.total, 1000, "{backend:?}");
        assert!(a1_lines.iter().all(|l| l.shipping_address_id.is_none()), "{backend:?}");
        // The invoice shows the address with its line.
        let renewal = a0_lines[1].invoice_id.expect("the renewal is invoiced");
        let shown = services.store.invoice_lines(renewal).await.expect("invoice lines");
        let shipped = shown[0].shipping_address.as_ref().expect("the renewal is shipped");
        assert_eq!((shipped.id, shipped.fields.address1.as_deref()), (id, Some("1 Main St.")), "{backend:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_s_security_code_is_checked_three_times_a_day_at_most() {
    for store in both_backends("app_verify_cvv").await {
        let backend = store.backend();
        let (services, ctx) = subscribers(store, Scripted::declining(&[]), TestClock::starting(T0), 1).await;
        let checked = cvv::verify_cvv(&services, &ctx, "a0", "123").await.expect("matched");
        assert_eq!(checked.fields.last_four.as_deref(), Some("1111"), "{backend:?}");
        let mismatch = cvv::verify_cvv(&services, &ctx, "a0", "999").await;
        let transaction = match mismatch {
            Err(CvvError::Mismatch(t)) => t,
            other => panic!("{backend:?}: {other:?}"),
        };
        assert_eq!((transaction.new.action.as_str(), transaction.new.amount), ("verify", 0), "{backend:?}");
        assert_eq!(transaction.new.origin, "api_verify_card");
        assert_eq!(
            transaction.result.failure.as_ref().map(|f| f.error_code.as_str()),
            Some("fraud_security_code"),
            "{backend:?}"
        );
        // Malformed values are refused first and not counted.
        assert!(matches!(cvv::verify_cvv(&services, &ctx, "a0", "12").await, Err(CvvError::Malformed)));
        let later = Context { now: T0 + 3600, ..ctx.clone() };
        cvv::verify_cvv(&services, &later, "a0", "1234").await.expect("third");
        let locked = cvv::verify_cvv(&services, &later, "a0", "123").await;
        assert!(matches!(locked, Err(CvvError::Locked)), "{backend:?}: {locked:?}");
        // A day after the first two, two more checks fit.
        let next_day = Context { now: T0 + DAY, ..ctx.clone() };
        cvv::verify_cvv(&services, &next_day, "a0", "123").await.expect("fourth");
        cvv::verify_cvv(&services, &next_day, "a0", "123").await.expect("fifth");
        assert!(matches!(cvv::verify_cvv(&services, &next_day, "a0", "123").await, Err(CvvError::Locked)));

        payment_methods::remove(&services, &ctx, "a0").await.expect("removed");
        assert!(matches!(cvv::verify_cvv(&services, &ctx, "a0", "123").await, Err(CvvError::NoBillingInfo)));
        assert!(matches!(cvv::verify_cvv(&services, &ctx, "zz", "123").await, Err(CvvError::AccountNotFound(_))));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_additions_stay_within_the_limit() {
    for store in both_backends("app_shipping_race").await {
        let backend = store.backend();
        let (services, ctx) = subscribers(store, Scripted::declining(&[]), TestClock::starting(T0), 0).await;
        accounts::create(&services, &ctx, "r1", &AccountFields::default(), None).await.expect("account");
        for i in 0..MAX_PER_ACCOUNT - 3 {
            shipping::create(&services, &ctx, "r1", &address(&format!("{i} Side St."))).await.expect("fits");
        }
        let tasks: Vec<_> = (0..6)
            .map(|i| {
                let (services, ctx) = (services.clone(), ctx.clone());
                tokio::spawn(async move {
                    shipping::create(&services, &ctx, "r1", &address(&format!("{i} Race St."))).await
                })
            })
            .collect();
        let mut added = 0;
        let mut too_many = 0;
        for task in tasks {
            match task.await.expect("task") {
                Ok(r) if r.added => added += 1,
                Err(ShippingError::TooMany) => too_many += 1,
                other => panic!("{backend:?}: {other:?}"),
            }
        }
        assert_eq!((added, too_many), (3, 3), "{backend:?}");
        let listed = shipping::list(&services, &ctx, "r1", &page()).await.expect("list");
        assert_eq!(listed.total, MAX_PER_ACCOUNT as i64, "{backend:?}");
    }
}

//! Coupons in process, on both backends: a coupon redeemed on an account discounts its renewal
//! (which leaves the batch of plain renewals for the general path) while the other renewals of
//! the batch stay whole, with the redemption's use and the events recorded; concurrent
//! redemptions never pass `max_redemptions`; a refused redemption writes nothing.

use rebill_app::catalog::coupons::{self, CouponError, CouponTerms, RedeemRequest};
use rebill_app::operations::scheduler;
use rebill_app::operations::testing::{DAY, Scripted, T0, TestClock, subscribers};
use rebill_app::platform::error::AppError;
use rebill_store::PageRequest;
use rebill_store::invoices::InvoiceFilter;
use rebill_store::testing::both_backends;

fn percent(p: i64) -> CouponTerms {
    CouponTerms {
        name: format!("{p} percent"),
        discount_type: "percent".into(),
        discount_percent: Some(p),
        duration: "forever".into(),
        applies_to_all_plans: true,
        redemption_resource: "account".into(),
        coupon_type: "single_code".into(),
        ..CouponTerms::default()
    }
}

fn request(account: &str) -> RedeemRequest {
    RedeemRequest { account_code: account.into(), currency: Some("USD".into()), subscription_uuid: None }
}

#[tokio::test]
async fn a_redeemed_coupon_discounts_the_renewal_and_the_batch_keeps_the_others_whole() {
    for store in both_backends("coupons_renewal").await {
        let backend = store.backend();
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store.clone(), Scripted::declining(&[]), clock.clone(), 3).await;
        let site = ctx.site.id;
        coupons::create(&services, &ctx, "ten", percent(10)).await.expect("coupon");
        let redemption = coupons::redeem(&services, &ctx, "ten", &request("a1")).await.expect("redeemed");
        assert!(redemption.active, "{backend:?}");
        let kinds: Vec<String> = store.events(site, "ten").await.expect("events").into_iter().map(|e| e.kind).collect();
        assert_eq!(kinds, ["coupon.created"], "{backend:?}");
        let kinds: Vec<String> = store
            .events(site, &redemption.redemption.uuid)
            .await
            .expect("events")
            .into_iter()
            .map(|e| e.kind)
            .collect();
        assert_eq!(kinds, ["redemption.created"], "{backend:?}");

        // The three renewals come due together.
        clock.set(T0 + 31 * DAY + 3600);
        scheduler::run_due(&services, Some(&ctx.site)).await.expect("renewals");
        let mut renewals = Vec::new();
        for code in ["a0", "a1", "a2"] {
            let account = store.account(site, code).await.expect("read").expect("account");
            let filter = InvoiceFilter { account_id: Some(account.id), states: Vec::new() };
            let page = store.list_invoices(site, &filter, &PageRequest::default()).await.expect("invoices");
            let last = page.items.first().expect("the renewal").clone();
            renewals.push((last.amounts.subtotal_before_discount, last.amounts.discount, last.amounts.total));
            if code == "a1" {
                let lines = store.invoice_lines(last.id).await.expect("lines");
                let line_discounts: Vec<(i64, i64)> = lines.iter().map(|l| (l.line.discount, l.line.total)).collect();
                assert_eq!(line_discounts, [(100, 900)], "{backend:?}");
                let used = store.invoice_redemptions(last.id).await.expect("redemptions");
                assert_eq!(used.len(), 1, "{backend:?}");
                assert_eq!(used[0].total_discounted, 100, "{backend:?}");
                let kinds: Vec<String> = store
                    .events(site, &last.invoice_number.to_string())
                    .await
                    .expect("events")
                    .into_iter()
                    .map(|e| e.kind)
                    .collect();
                assert!(kinds.contains(&"invoice.discounted".to_owned()), "{kinds:?}");
            }
        }
        assert_eq!(renewals, [(1000, 0, 1000), (1000, 100, 900), (1000, 0, 1000)], "{backend:?}");
    }
}

#[tokio::test]
async fn concurrent_redemptions_never_pass_the_cap_and_refusals_write_nothing() {
    for store in both_backends("coupons_cap").await {
        let backend = store.backend();
        let clock = TestClock::starting(T0);
        let (services, ctx) = subscribers(store.clone(), Scripted::declining(&[]), clock, 4).await;
        let capped = CouponTerms { max_redemptions: Some(1), ..percent(20) };
        coupons::create(&services, &ctx, "one", capped).await.expect("coupon");
        let (r0, r1) = (request("a0"), request("a1"));
        let (first, second) =
            tokio::join!(coupons::redeem(&services, &ctx, "one", &r0), coupons::redeem(&services, &ctx, "one", &r1),);
        let made = [first.is_ok(), second.is_ok()].iter().filter(|ok| **ok).count();
        assert_eq!(made, 1, "{backend:?}");
        let refused = if first.is_err() { first } else { second };
        match refused.map_err(AppError::from) {
            Err(AppError::Refused(fields)) => {
                assert_eq!((fields[0].field.as_str(), fields[0].symbol), ("base", "maxed_out"), "{backend:?}");
            }
            other => panic!("{other:?}"),
        }
        let coupon = coupons::find(&services, &ctx, "one").await.expect("coupon");
        assert_eq!(coupon.coupon.redemptions_count, 1, "{backend:?}");
        assert_eq!(coupon.state, coupons::CouponState::MaxedOut, "{backend:?}");
        assert_eq!(store.coupon_redemptions(coupon.coupon.id).await.expect("read").len(), 1, "{backend:?}");

        // Refusals: nothing counted, nothing recorded.
        let e = coupons::redeem(&services, &ctx, "missing", &request("a2")).await.expect_err("unknown");
        assert!(matches!(AppError::from(e), AppError::NotFound(m) if m.resource == "Coupon"), "{backend:?}");
        let free = CouponTerms {
            discount_type: "free_trial".into(),
            discount_percent: None,
            free_trial_amount: Some(1),
            free_trial_unit: Some("month".into()),
            ..percent(0)
        };
        coupons::create(&services, &ctx, "free", free).await.expect("coupon");
        let e = coupons::redeem(&services, &ctx, "free", &request("a2")).await.expect_err("free trial");
        assert!(matches!(&e, CouponError::Refused(f) if f[0].symbol == "invalid"), "{e:?}");
        let free = coupons::find(&services, &ctx, "free").await.expect("coupon");
        assert_eq!(free.coupon.redemptions_count, 0, "{backend:?}");
        let a2 = store.account(ctx.site.id, "a2").await.expect("read").expect("a2");
        assert!(store.account_redemptions(a2.id).await.expect("read").is_empty(), "{backend:?}");
    }
}

#[tokio::test]
async fn a_declined_first_payment_takes_back_the_redemptions_of_its_request() {
    use rebill_app::customers::accounts;
    use rebill_app::customers::payment_methods;
    use rebill_app::operations::testing::{at, card};
    use rebill_app::subscriptions::lifecycle as subscriptions;
    use rebill_app::subscriptions::lifecycle::{CreateError, Details, Subscribe};
    use rebill_billing::lifecycle::{NewSubscription, SubscriptionTerms};
    use rebill_billing::period::{Interval, IntervalUnit};
    use rebill_store::accounts::AccountFields;

    for store in both_backends("coupons_declined").await {
        let backend = store.backend();
        // The first purchase is declined.
        let (services, ctx) = subscribers(store.clone(), Scripted::declining(&[1]), TestClock::starting(T0), 0).await;
        let capped = CouponTerms { max_redemptions: Some(1), ..percent(20) };
        coupons::create(&services, &ctx, "one", capped).await.expect("coupon");
        let account = accounts::create(&services, &ctx, "d1", &AccountFields::default(), None).await.expect("account");
        payment_methods::apply(&services, &ctx, &account, &card()).await.expect("billing info");
        let plan = store.plan(ctx.site.id, "gold").await.expect("read").expect("gold");
        let new = NewSubscription {
            uuid: format!("{:032x}", 7),
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
            existing: Some(account.clone()),
            account_code: "d1".into(),
            account_fields: None,
            billing_info: None,
            plan_id: plan.id,
            drafted: subscriptions::draft(new, at(T0)).expect("drafted"),
            details: Details { account_code: "d1".into(), ..Details::default() },
            coupon_codes: vec!["one".into()],
        };
        let refused = subscriptions::create(&services, &ctx, input).await;
        assert!(matches!(refused, Err(CreateError::FirstPaymentDeclined(_))), "{backend:?}: {:?}", refused.err());
        let coupon = coupons::find(&services, &ctx, "one").await.expect("coupon");
        assert_eq!(coupon.coupon.redemptions_count, 0, "{backend:?}");
        assert_eq!(coupon.state, coupons::CouponState::Redeemable, "{backend:?}");
        assert!(store.account_redemptions(account.id).await.expect("read").is_empty(), "{backend:?}");
        // The declined invoice was discounted (20 % of 1000) but gave nothing to keep.
        let account_invoices = store
            .list_invoices(
                ctx.site.id,
                &InvoiceFilter { account_id: Some(account.id), states: Vec::new() },
                &PageRequest::default(),
            )
            .await
            .expect("invoices");
        let totals: Vec<i64> = account_invoices.items.iter().map(|i| i.amounts.total).collect();
        assert!(totals.iter().all(|t| *t == 800), "{backend:?}: {totals:?}");
    }
}

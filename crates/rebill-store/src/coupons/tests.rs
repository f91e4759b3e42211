use super::*;
use crate::accounts::AccountFields;
use crate::testing::both_backends;
use crate::{Mode, NewSite, Plan};

const NOW: i64 = 1_800_000_000;

fn terms(max: Option<i64>, per_account: Option<i64>) -> CouponTerms {
    CouponTerms {
        name: "Ten".into(),
        discount_type: "percent".into(),
        discount_percent: Some(10),
        duration: "forever".into(),
        applies_to_all_plans: true,
        redemption_resource: "account".into(),
        coupon_type: "single_code".into(),
        max_redemptions: max,
        max_redemptions_per_account: per_account,
        discount_amounts: BTreeMap::from([("EUR".to_owned(), 400), ("USD".to_owned(), 500)]),
        plan_codes: vec!["gold".into(), "silver".into()],
        ..CouponTerms::default()
    }
}

fn redemption(coupon: &Coupon, account_id: i64) -> NewRedemption {
    NewRedemption {
        coupon_id: coupon.id,
        bulk_coupon_id: coupon.bulk_coupon_id,
        account_id,
        subscription_uuid: None,
        currency: "USD".into(),
        expires_at: None,
        replace: true,
        used_up: false,
    }
}

fn codes(page: &Page<Coupon>) -> Vec<&str> {
    page.items.iter().map(|c| c.coupon_code.as_str()).collect()
}

#[tokio::test]
async fn limits_states_and_unique_codes() {
    for store in both_backends("coupons_store").await {
        let backend = store.backend();
        let new =
            NewSite { name: "c".into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos: false, contact: None };
        let site = store.create_site(&new, NOW).await.expect("site").0.id;
        let mut accounts = Vec::new();
        for code in ["a0", "a1", "a2"] {
            accounts.push(store.create_account(site, code, &AccountFields::default(), NOW, &[]).await.expect("a").id);
        }
        let two = store.create_coupon(site, "two", &terms(Some(2), Some(1)), NOW, &[]).await.expect("coupon");
        // Stored as given: amounts and plans read back.
        assert_eq!(two.terms, terms(Some(2), Some(1)), "{backend:?}");

        let first = store.redeem(&redemption(&two, accounts[0]), NOW, &[]).await.expect("redeem");
        assert!(matches!(first, Redeemed::Made(_)), "{backend:?}");
        let again = store.redeem(&redemption(&two, accounts[0]), NOW, &[]).await.expect("redeem");
        assert_eq!(again, Redeemed::MaxedOutForAccount, "{backend:?}");
        assert!(matches!(store.redeem(&redemption(&two, accounts[1]), NOW, &[]).await, Ok(Redeemed::Made(_))));
        let third = store.redeem(&redemption(&two, accounts[2]), NOW, &[]).await.expect("redeem");
        assert_eq!(third, Redeemed::MaxedOut, "{backend:?}");
        // Refused redemptions are not counted.
        let two = store.coupon(site, "two").await.expect("read").expect("two");
        assert_eq!(two.redemptions_count, 2, "{backend:?}");

        // The state filter on the site clock.
        let soon = CouponTerms { redeem_by_date: Some(NOW + 10), ..terms(None, None) };
        store.create_coupon(site, "soon", &soon, NOW, &[]).await.expect("coupon");
        let page = PageRequest::default();
        let at = |now, state| store.list_coupons(site, Some(state), now, &page);
        assert_eq!(codes(&at(NOW, CouponStateFilter::Redeemable).await.expect("list")), ["soon"], "{backend:?}");
        assert_eq!(codes(&at(NOW, CouponStateFilter::MaxedOut).await.expect("list")), ["two"], "{backend:?}");
        assert!(at(NOW, CouponStateFilter::Expired).await.expect("list").items.is_empty(), "{backend:?}");
        assert_eq!(codes(&at(NOW + 10, CouponStateFilter::Expired).await.expect("list")), ["soon"], "{backend:?}");

        // Unique codes: a taken code refuses the whole batch; each code is redeemed once.
        let bulk_terms = CouponTerms {
            coupon_type: "bulk".into(),
            unique_code_template: Some("'bulk'99".into()),
            ..terms(None, Some(1))
        };
        let bulk = store.create_coupon(site, "bulk", &bulk_terms, NOW, &[]).await.expect("bulk");
        let taken = store.add_unique_codes(&bulk, &["bulk01".into(), "two".into()], NOW, &[]).await;
        assert!(matches!(taken, Err(StoreError::Conflict(_))), "{backend:?}: {taken:?}");
        assert!(store.coupon(site, "bulk01").await.expect("read").is_none(), "{backend:?}");
        let made = store.add_unique_codes(&bulk, &["bulk01".into(), "bulk02".into()], NOW, &[]).await.expect("codes");
        assert_eq!(made.iter().map(|c| c.terms.coupon_type.as_str()).collect::<Vec<_>>(), ["unique_code"; 2]);
        assert_eq!(store.coupon(site, "bulk").await.expect("read").expect("bulk").unique_codes_count, 2);
        let r = store.redeem(&redemption(&made[0], accounts[0]), NOW, &[]).await.expect("redeem");
        assert!(matches!(r, Redeemed::Made(_)), "{backend:?}");
        let twice = store.redeem(&redemption(&made[0], accounts[1]), NOW, &[]).await.expect("redeem");
        assert_eq!(twice, Redeemed::MaxedOut, "{backend:?}");
        // One code per account across the bulk coupon's codes.
        let other = store.redeem(&redemption(&made[1], accounts[0]), NOW, &[]).await.expect("redeem");
        assert_eq!(other, Redeemed::MaxedOutForAccount, "{backend:?}");
        let unique = store.list_unique_codes(bulk.id, &page).await.expect("codes");
        assert_eq!(unique.total, 2, "{backend:?}");
        assert_eq!(store.coupon_redemptions(bulk.id).await.expect("read").len(), 1, "{backend:?}");
        // Expiring the bulk coupon expires its codes not redeemed.
        store.expire_coupon(bulk.id, NOW + 1, &[]).await.expect("expire");
        let codes_now: Vec<(String, Option<i64>)> = store
            .list_unique_codes(bulk.id, &page)
            .await
            .expect("codes")
            .items
            .into_iter()
            .map(|c| (c.coupon_code, c.expired_at))
            .collect();
        assert_eq!(codes_now, [("bulk02".to_owned(), Some(NOW + 1)), ("bulk01".to_owned(), None)], "{backend:?}");
    }
}

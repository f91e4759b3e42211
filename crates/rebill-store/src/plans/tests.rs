use super::*;
use crate::testing::both_backends;
use crate::{Mode, NewSite, Plan as SitePlan};

const NOW: i64 = 1_800_000_000;

async fn site(store: &Store, name: &str) -> i64 {
    let new =
        NewSite { name: name.into(), mode: Mode::Sandbox, plan: SitePlan::Core, credit_memos: false, contact: None };
    store.create_site(&new, NOW).await.expect("site").0.id
}

fn amounts(pairs: &[(&str, i64)]) -> Amounts {
    pairs.iter().map(|(c, v)| ((*c).to_owned(), *v)).collect()
}

fn named(name: &str) -> PlanFields {
    PlanFields {
        name: Some(name.into()),
        unit_amount_in_cents: Some(amounts(&[("USD", 1000)])),
        ..PlanFields::default()
    }
}

#[tokio::test]
async fn the_site_currencies_are_those_its_live_plans_are_priced_in() {
    for store in both_backends("site_currencies").await {
        let s = site(&store, "a").await;
        let other = site(&store, "b").await;
        assert!(store.site_currencies(s).await.expect("none").is_empty());
        store.create_plan(s, "basic", &named("Basic"), NOW).await.expect("create");
        let euro = PlanFields {
            unit_amount_in_cents: Some(amounts(&[("EUR", 800), ("USD", 1000)])),
            setup_fee_in_cents: Some(amounts(&[("GBP", 500)])),
            ..named("Euro")
        };
        store.create_plan(s, "euro", &euro, NOW).await.expect("create");
        let yen = PlanFields { unit_amount_in_cents: Some(amounts(&[("JPY", 100)])), ..named("Yen") };
        store.create_plan(s, "yen", &yen, NOW).await.expect("create");
        store.delete_plan(s, "yen", NOW).await.expect("delete");
        store
            .create_plan(
                other,
                "chf",
                &PlanFields { unit_amount_in_cents: Some(amounts(&[("CHF", 1)])), ..named("C") },
                NOW,
            )
            .await
            .expect("create");
        assert_eq!(store.site_currencies(s).await.expect("currencies"), ["EUR", "USD"]);
        assert_eq!(store.site_currencies(other).await.expect("currencies"), ["CHF"]);
    }
}

#[tokio::test]
async fn plans_are_created_read_updated_and_deleted() {
    for store in both_backends("plans").await {
        let s = site(&store, "a").await;
        let other = site(&store, "b").await;

        // Defaults of a minimal plan.
        let p = store.create_plan(s, "basic", &named("Basic"), NOW).await.expect("create");
        assert_eq!((p.plan_code.as_str(), p.name.as_str(), p.site_id), ("basic", "Basic", s));
        assert_eq!(p.interval, Interval { length: 1, unit: IntervalUnit::Months });
        assert_eq!(p.trial, Interval { length: 0, unit: IntervalUnit::Days });
        assert!(!p.has_trial());
        assert_eq!(p.total_billing_cycles, None);
        assert_eq!(
            (p.revenue_schedule_type, p.setup_fee_revenue_schedule_type),
            (RevenueScheduleType::Evenly, RevenueScheduleType::Evenly)
        );
        assert!(p.trial_requires_billing_info && !p.tax_exempt && !p.display_quantity);
        assert_eq!((p.unit_amount("USD"), p.unit_amount("EUR"), p.setup_fee("USD")), (Some(1000), None, 0));
        assert_eq!((p.created_at, p.updated_at, p.deleted_at), (NOW, NOW, None));

        // Every property.
        let full = PlanFields {
            name: Some("Gold".into()),
            description: Some("The gold plan".into()),
            success_url: Some("https://example.com/ok".into()),
            cancel_url: Some("https://example.com/cancel".into()),
            display_donation_amounts: Some(true),
            display_quantity: Some(true),
            display_phone_number: Some(true),
            bypass_hosted_confirmation: Some(true),
            unit_name: Some("seat".into()),
            payment_page_tos_link: Some("https://example.com/tos".into()),
            payment_page_css: Some("body{}".into()),
            plan_interval_length: Some(3),
            plan_interval_unit: Some(IntervalUnit::Days),
            trial_interval_length: Some(2),
            trial_interval_unit: Some(IntervalUnit::Months),
            total_billing_cycles: Some(12),
            accounting_code: Some("acc".into()),
            setup_fee_accounting_code: Some("setup".into()),
            revenue_schedule_type: Some(RevenueScheduleType::AtRangeEnd),
            setup_fee_revenue_schedule_type: Some(RevenueScheduleType::Never),
            trial_requires_billing_info: Some(false),
            tax_exempt: Some(true),
            tax_code: Some("SW052000".into()),
            unit_amount_in_cents: Some(amounts(&[("USD", 1000), ("EUR", 800), ("JPY", 0)])),
            setup_fee_in_cents: Some(amounts(&[("USD", 500)])),
        };
        let g = store.create_plan(s, "gold", &full, NOW + 1).await.expect("create");
        assert_eq!(g.interval, Interval { length: 3, unit: IntervalUnit::Days });
        assert_eq!(g.trial, Interval { length: 2, unit: IntervalUnit::Months });
        assert!(g.has_trial());
        assert_eq!(g.unit_amounts, amounts(&[("EUR", 800), ("JPY", 0), ("USD", 1000)]));
        assert_eq!(g.setup_fees, amounts(&[("USD", 500)]));
        assert_eq!((g.setup_fee("USD"), g.setup_fee("EUR")), (500, 0));
        assert_eq!(
            (g.description.as_deref(), g.tax_code.as_deref(), g.total_billing_cycles),
            (Some("The gold plan"), Some("SW052000"), Some(12))
        );
        assert!(g.display_donation_amounts && g.bypass_hosted_confirmation && g.tax_exempt);
        assert!(!g.trial_requires_billing_info);
        assert_eq!(store.plan(s, "gold").await.expect("get"), Some(g.clone()));
        assert_eq!(store.plan_by_id(g.id).await.expect("get"), Some(g.clone()));
        assert_eq!(store.plan(other, "gold").await.expect("get"), None);
        assert_eq!(store.plan(s, "nope").await.expect("get"), None);

        // Codes are unique per site.
        assert!(matches!(
            store.create_plan(s, "gold", &named("x"), NOW).await,
            Err(StoreError::DuplicatePlan(code)) if code == "gold"
        ));
        store.create_plan(other, "gold", &named("y"), NOW).await.expect("same code, other site");
        assert!(matches!(store.create_plan(s, "x", &PlanFields::default(), NOW).await, Err(StoreError::Invalid(_))));
        let negative = PlanFields { setup_fee_in_cents: Some(amounts(&[("USD", -1)])), ..named("n") };
        assert!(matches!(store.create_plan(s, "n", &negative, NOW).await, Err(StoreError::Invalid(_))));
        assert_eq!(store.plan(s, "n").await.expect("get"), None);

        // Updates change what is given; a given amount set replaces the stored one.
        let changes = PlanFields {
            name: Some("Gold 2".into()),
            plan_interval_unit: Some(IntervalUnit::Months),
            tax_exempt: Some(false),
            unit_amount_in_cents: Some(amounts(&[("GBP", 700)])),
            ..PlanFields::default()
        };
        let u = store.update_plan(s, "gold", &changes, NOW + 5).await.expect("update").expect("found");
        assert_eq!(u.name, "Gold 2");
        assert_eq!(u.interval, Interval { length: 3, unit: IntervalUnit::Months });
        assert!(!u.tax_exempt && u.display_quantity);
        assert_eq!(u.unit_amounts, amounts(&[("GBP", 700)]));
        assert_eq!(u.setup_fees, amounts(&[("USD", 500)]), "not given, not changed");
        assert_eq!((u.created_at, u.updated_at), (NOW + 1, NOW + 5));
        let cleared = PlanFields { setup_fee_in_cents: Some(Amounts::new()), ..PlanFields::default() };
        let u = store.update_plan(s, "gold", &cleared, NOW + 6).await.expect("update").expect("found");
        assert_eq!((u.setup_fees.len(), u.unit_amounts.len()), (0, 1));
        assert_eq!(store.update_plan(s, "nope", &changes, NOW).await.expect("update"), None);

        // Delete keeps the record; it can no longer be changed, and its code stays taken.
        let d = store.delete_plan(s, "gold", NOW + 10).await.expect("delete").expect("found");
        assert!(d.is_deleted());
        assert_eq!(d.deleted_at, Some(NOW + 10));
        let again = store.plan(s, "gold").await.expect("get").expect("still there");
        assert_eq!((again.deleted_at, again.name.as_str()), (Some(NOW + 10), "Gold 2"));
        assert_eq!(store.delete_plan(s, "gold", NOW + 20).await.expect("delete"), None);
        assert_eq!(store.update_plan(s, "gold", &changes, NOW + 20).await.expect("update"), None);
        assert!(matches!(
            store.create_plan(s, "gold", &named("again"), NOW + 30).await,
            Err(StoreError::DuplicatePlan(_))
        ));
        assert_eq!(store.plan_by_id(g.id).await.expect("by id").map(|p| p.is_deleted()), Some(true));
    }
}

#[tokio::test]
async fn concurrent_creates_of_one_code_make_one_plan() {
    for store in both_backends("plan_race").await {
        let s = site(&store, "a").await;
        let tasks: Vec<_> = (0..6)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { store.create_plan(s, "same", &named("x"), NOW).await })
            })
            .collect();
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await.expect("task"));
        }
        let created = results.iter().filter(|r| r.is_ok()).count();
        let taken = results.iter().filter(|r| matches!(r, Err(StoreError::DuplicatePlan(_)))).count();
        assert_eq!((created, taken), (1, 5), "{results:?}");
        let plan = store.plan(s, "same").await.expect("get").expect("created");
        assert_eq!(plan.unit_amounts, amounts(&[("USD", 1000)]), "one set of amounts");
    }
}

#[tokio::test]
async fn plan_pages_leave_deleted_plans_out() {
    for store in both_backends("plan_pages").await {
        let s = site(&store, "a").await;
        let other = site(&store, "b").await;
        for (i, t) in [0, 10, 10, 20, 30].iter().enumerate() {
            let fields = PlanFields {
                unit_amount_in_cents: Some(amounts(&[("EUR", 100 + i as i64), ("USD", i as i64)])),
                setup_fee_in_cents: Some(amounts(&[("USD", 1)])),
                ..named("x")
            };
            store.create_plan(s, &format!("p{i}"), &fields, NOW + t).await.expect("create");
        }
        store.create_plan(other, "p9", &named("x"), NOW).await.expect("create");
        store.delete_plan(s, "p2", NOW + 40).await.expect("delete");
        let codes = |p: &Page<Plan>| p.items.iter().map(|p| p.plan_code.clone()).collect::<Vec<_>>();

        let first = PageRequest { limit: 2, ..PageRequest::default() };
        let p1 = store.list_plans(s, &first).await.expect("page");
        assert_eq!((codes(&p1), p1.total), (vec!["p4".to_owned(), "p3".to_owned()], 4));
        // Each plan of a page has its own amounts.
        assert_eq!(p1.items[0].unit_amounts, amounts(&[("EUR", 104), ("USD", 4)]));
        assert_eq!(p1.items[1].unit_amounts, amounts(&[("EUR", 103), ("USD", 3)]));
        assert_eq!(p1.items[1].setup_fees, amounts(&[("USD", 1)]));
        let p2 = store.list_plans(s, &PageRequest { after: p1.next, ..first }).await.expect("page");
        assert_eq!((codes(&p2), p2.next.is_some()), (vec!["p1".to_owned(), "p0".to_owned()], false));

        let asc = PageRequest { order: Order::Asc, limit: 3, ..PageRequest::default() };
        let p = store.list_plans(s, &asc).await.expect("page");
        assert_eq!(codes(&p), vec!["p0", "p1", "p3"]);
        assert_eq!(p.next, Some(Position { value: NOW + 20, id: p.items[2].id }));

        let range = PageRequest { begin: Some(NOW + 10), end: Some(NOW + 20), ..PageRequest::default() };
        let p = store.list_plans(s, &range).await.expect("page");
        assert_eq!((codes(&p), p.total), (vec!["p3".to_owned(), "p1".to_owned()], 2));

        store.update_plan(s, "p0", &named("touched"), NOW + 50).await.expect("update");
        let by_update = PageRequest { sort: Sort::UpdatedAt, limit: 1, ..PageRequest::default() };
        let p = store.list_plans(s, &by_update).await.expect("page");
        assert_eq!((codes(&p), p.total), (vec!["p0".to_owned()], 4));
    }
}

#[test]
fn percentages_have_at_most_four_decimal_places() {
    assert_eq!(Percentage::from_f64(2.5), Some(Percentage(25_000)));
    assert_eq!(Percentage::from_f64(0.0001), Some(Percentage(1)));
    assert_eq!(Percentage::from_f64(100.0), Some(Percentage(1_000_000)));
    assert_eq!(Percentage::from_f64(33.3333), Some(Percentage(333_333)));
    assert_eq!(Percentage::from_f64(-1.5), Some(Percentage(-15_000)));
    assert_eq!(Percentage::from_f64(0.00001), None);
    assert_eq!(Percentage::from_f64(1.23456), None);
    assert_eq!(Percentage::from_f64(f64::NAN), None);
    assert_eq!(Percentage::from_f64(f64::INFINITY), None);
    assert_eq!(Percentage::from_f64(1e300), None);
    assert_eq!(Percentage(25_000).as_f64(), 2.5);
    assert_eq!(Percentage(333_333).as_f64(), 33.3333);
}

#[tokio::test]
async fn add_ons_belong_to_one_plan() {
    for store in both_backends("add_ons").await {
        let s = site(&store, "a").await;
        let gold = store.create_plan(s, "gold", &named("Gold"), NOW).await.expect("plan");
        let silver = store.create_plan(s, "silver", &named("Silver"), NOW).await.expect("plan");

        let a = store.create_add_on(gold.id, "ip", &AddOnFields::default(), NOW).await.expect("create");
        assert_eq!((a.add_on_code.as_str(), a.name.as_str(), a.plan_id), ("ip", "ip", gold.id));
        assert_eq!((a.default_quantity, a.add_on_type, a.optional), (1, AddOnType::Fixed, true));
        assert_eq!((a.usage_type, a.usage_percentage, a.unit_amounts.len()), (None, None, 0));

        let usage = AddOnFields {
            name: Some("Calls".into()),
            default_quantity: Some(0),
            display_quantity_on_hosted_page: Some(true),
            display_quantity: Some(true),
            add_on_type: Some(AddOnType::Usage),
            measured_unit_id: Some(7),
            usage_type: Some(UsageType::Percentage),
            usage_percentage: Percentage::from_f64(2.5),
            optional: Some(false),
            accounting_code: Some("calls".into()),
            revenue_schedule_type: Some(RevenueScheduleType::AtRangeStart),
            tax_code: Some("T1".into()),
            unit_amount_in_cents: Some(amounts(&[("USD", 3), ("EUR", 2)])),
        };
        let u = store.create_add_on(gold.id, "calls", &usage, NOW + 1).await.expect("create");
        assert_eq!(
            (u.add_on_type, u.usage_type, u.usage_percentage),
            (AddOnType::Usage, Some(UsageType::Percentage), Some(Percentage(25_000)))
        );
        assert_eq!((u.measured_unit_id, u.optional, u.default_quantity), (Some(7), false, 0));
        assert_eq!(u.unit_amounts, amounts(&[("EUR", 2), ("USD", 3)]));
        assert_eq!((u.unit_amount("USD"), u.unit_amount("GBP")), (Some(3), None));
        assert_eq!(store.add_on(gold.id, "calls").await.expect("get"), Some(u.clone()));
        assert_eq!(store.add_on(silver.id, "calls").await.expect("get"), None);

        assert!(matches!(
            store.create_add_on(gold.id, "ip", &AddOnFields::default(), NOW).await,
            Err(StoreError::DuplicateAddOn(code)) if code == "ip"
        ));
        store.create_add_on(silver.id, "ip", &AddOnFields::default(), NOW).await.expect("other plan");

        let changes = AddOnFields {
            usage_percentage: Some(Percentage(32_500)),
            unit_amount_in_cents: Some(amounts(&[("USD", 4)])),
            ..AddOnFields::default()
        };
        let c = store.update_add_on(gold.id, "calls", &changes, NOW + 5).await.expect("update").expect("found");
        assert_eq!((c.usage_percentage, c.name.as_str()), (Some(Percentage(32_500)), "Calls"));
        assert_eq!(c.unit_amounts, amounts(&[("USD", 4)]));
        assert_eq!((c.created_at, c.updated_at), (NOW + 1, NOW + 5));
        assert_eq!(store.update_add_on(silver.id, "calls", &changes, NOW).await.expect("update"), None);

        let codes = |v: &[AddOn]| v.iter().map(|a| a.add_on_code.clone()).collect::<Vec<_>>();
        assert_eq!(codes(&store.add_ons(gold.id).await.expect("add-ons")), vec!["ip", "calls"]);
        let page = store.list_add_ons(gold.id, &PageRequest::default()).await.expect("page");
        assert_eq!((codes(&page.items), page.total), (vec!["calls".to_owned(), "ip".to_owned()], 2));
        assert_eq!(page.items[0].unit_amounts, amounts(&[("USD", 4)]));

        let d = store.delete_add_on(gold.id, "ip", NOW + 9).await.expect("delete").expect("found");
        assert_eq!(d.deleted_at, Some(NOW + 9));
        assert_eq!(store.delete_add_on(gold.id, "ip", NOW + 9).await.expect("delete"), None);
        assert!(store.add_on(gold.id, "ip").await.expect("get").is_some_and(|a| a.is_deleted()));
        assert_eq!(codes(&store.add_ons(gold.id).await.expect("add-ons")), vec!["calls"]);
        let page = store.list_add_ons(gold.id, &PageRequest::default()).await.expect("page");
        assert_eq!((codes(&page.items), page.total), (vec!["calls".to_owned()], 1));
        assert_eq!(store.update_add_on(gold.id, "ip", &changes, NOW + 10).await.expect("update"), None);
        assert!(matches!(
            store.create_add_on(gold.id, "ip", &AddOnFields::default(), NOW).await,
            Err(StoreError::DuplicateAddOn(_))
        ));
    }
}

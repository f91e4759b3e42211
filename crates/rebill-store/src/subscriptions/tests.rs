use super::*;
use crate::accounts::AccountFields;
use crate::plans::PlanFields;
use crate::testing::both_backends;
use crate::{Mode, NewSite, Plan};

const NOW: i64 = 1_800_000_000;

async fn setup(store: &Store) -> (i64, i64, i64) {
    let new = NewSite { name: "s".into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos: false, contact: None };
    let site = store.create_site(&new, NOW).await.expect("site").0.id;
    let account = store.create_account(site, "a1", &AccountFields::default(), NOW, &[]).await.expect("account").id;
    let fields = PlanFields {
        name: Some("Gold".into()),
        unit_amount_in_cents: Some([("USD".to_owned(), 1000)].into_iter().collect()),
        ..PlanFields::default()
    };
    let plan = store.create_plan(site, "gold", &fields, NOW).await.expect("plan").id;
    (site, account, plan)
}

/// An event of a subscription change.
fn event(kind: &str, at: i64, payload: &str) -> NewEvent {
    NewEvent { kind: kind.into(), at, recorded_at: at, payload: payload.into(), awaits_reaction: false }
}

/// The kinds of the events recorded for a subscription.
async fn event_kinds(store: &Store, site: i64, uuid: &str) -> Vec<String> {
    store.events(site, uuid).await.expect("events").into_iter().map(|e| e.kind).collect()
}

fn record(site: i64, account: i64, plan: i64, uuid: &str, state: &str) -> NewSubscriptionRecord {
    NewSubscriptionRecord {
        site_id: site,
        account_id: account,
        plan_id: plan,
        uuid: uuid.into(),
        indexed: Indexed { state: state.into(), ..Indexed::default() },
        value: "{}".into(),
        creation: "{}".into(),
        details: "{}".into(),
    }
}

/// Every JSON column of subscriptions is stored with its layout version and read back as
/// written; rows written before versions existed read as they are.
#[tokio::test]
async fn documents_are_stored_versioned_and_legacy_rows_still_read() {
    for store in both_backends("subscription_documents").await {
        let (site, account, plan) = setup(&store).await;
        let new = NewSubscriptionRecord {
            value: r#"{"uuid":"d1","state":"active"}"#.into(),
            creation: r#"{"plan_code":"gold"}"#.into(),
            details: "{}".into(),
            ..record(site, account, plan, "d1", "active")
        };
        let lines = r#"[{"kind":"plan","total_in_cents":1000}]"#;
        let charge = NewCharge { origin: "purchase".into(), at: NOW, lines: lines.into() };
        let (claim, created) =
            store.create_subscription(&new, std::slice::from_ref(&charge), &[], NOW, NOW + 60).await.expect("create");
        let change = SubscriptionChange {
            indexed: Indexed { state: "active".into(), ..Indexed::default() },
            value: new.value.clone(),
            details: new.details.clone(),
            events: vec![event("subscription.canceled", NOW, r#"{"action":"cancel"}"#)],
            ..SubscriptionChange::default()
        };
        store.save_subscription(&claim, &change, NOW).await.expect("save").expect("held");
        let raw = |sql: &'static str| {
            let store = store.clone();
            async move {
                crate::db::query(sql)
                    .bind(created.id)
                    .fetch_one(&store.pool)
                    .await
                    .expect("row")
                    .try_get::<String, _>(0)
                    .expect("text")
            }
        };
        // Versioned on write: objects end with the version, the line array is wrapped.
        assert_eq!(
            raw("SELECT value FROM subscriptions WHERE id = $1").await,
            r#"{"uuid":"d1","state":"active","document_version":1}"#
        );
        assert_eq!(
            raw("SELECT creation FROM subscriptions WHERE id = $1").await,
            r#"{"plan_code":"gold","document_version":1}"#
        );
        assert_eq!(raw("SELECT details FROM subscriptions WHERE id = $1").await, r#"{"document_version":1}"#);
        assert_eq!(
            raw("SELECT lines FROM subscription_charges WHERE subscription_id = $1").await,
            format!(r#"{{"document_version":1,"document":{lines}}}"#)
        );
        let payload: String = crate::db::query(
            "SELECT payload FROM domain_events WHERE subject = 'd1' AND kind = 'subscription.canceled'",
        )
        .fetch_one(&store.pool)
        .await
        .expect("event")
        .try_get(0)
        .expect("text");
        assert_eq!(payload, r#"{"action":"cancel","document_version":1}"#);
        assert_eq!(store.events(site, "d1").await.expect("events")[0].payload, r#"{"action":"cancel"}"#);
        // Read back as written.
        let read = store.subscription_by_id(created.id).await.expect("read").expect("exists");
        assert_eq!((&read.value, &read.creation, &read.details), (&new.value, &new.creation, &new.details));
        assert_eq!(store.subscription_charges(created.id).await.expect("charges")[0].lines, lines);

        // Legacy rows (no version) read as they are.
        crate::db::query(
            "UPDATE subscriptions SET value = '{\"legacy\":true}', creation = '{\"plan_code\":\"old\"}', \
             details = '{\"notes\":\"n\"}' WHERE id = $1",
        )
        .bind(created.id)
        .execute(&store.pool)
        .await
        .expect("legacy subscription");
        crate::db::query(
            "UPDATE subscription_charges SET lines = '[{\"kind\":\"credit\"}]' WHERE subscription_id = $1",
        )
        .bind(created.id)
        .execute(&store.pool)
        .await
        .expect("legacy charge");
        let legacy = store.subscription_by_id(created.id).await.expect("read").expect("exists");
        assert_eq!(
            (legacy.value.as_str(), legacy.creation.as_str(), legacy.details.as_str()),
            (r#"{"legacy":true}"#, r#"{"plan_code":"old"}"#, r#"{"notes":"n"}"#)
        );
        assert_eq!(store.subscription_charges(created.id).await.expect("charges")[0].lines, r#"[{"kind":"credit"}]"#);
        // A layout newer than this build is refused, not misread.
        crate::db::query("UPDATE subscriptions SET details = '{\"document_version\":2}' WHERE id = $1")
            .bind(created.id)
            .execute(&store.pool)
            .await
            .expect("newer");
        assert!(matches!(store.subscription_by_id(created.id).await, Err(StoreError::Invalid(_))));
    }
}

#[tokio::test]
async fn claims_serialise_changes_and_charges_are_billed_once() {
    for store in both_backends("subscriptions").await {
        let (site, account, plan) = setup(&store).await;
        let charge = NewCharge { origin: "purchase".into(), at: NOW, lines: "[]".into() };
        let (claim, created) = store
            .create_subscription(
                &record(site, account, plan, "u1", "active"),
                &[charge],
                &[event("subscription.created", NOW, "{}")],
                NOW,
                NOW + 60,
            )
            .await
            .expect("create");
        assert_eq!(created.version, 0);
        // Held by the creation: another change is refused until it is released.
        assert_eq!(store.claim_subscription(site, "u1", NOW, NOW + 60).await.expect("claim"), Claimed::Busy);
        assert_eq!(store.claim_subscription(site, "nope", NOW, NOW + 60).await.expect("claim"), Claimed::NotFound);
        let unbilled = store.unbilled_charges(created.id).await.expect("charges");
        assert_eq!(unbilled.len(), 1);
        store.mark_charge_billed(&unbilled[0], Some("1001"), NOW).await.expect("billed");
        assert!(store.unbilled_charges(created.id).await.expect("charges").is_empty());
        store.release_subscription(&claim).await.expect("release");

        let Claimed::Held(claim, _) = store.claim_subscription(site, "u1", NOW, NOW + 60).await.expect("claim") else {
            panic!("free after release");
        };
        let change = SubscriptionChange {
            indexed: Indexed { state: "paused".into(), ..Indexed::default() },
            value: "{\"v\":2}".into(),
            details: "{}".into(),
            events: vec![event("subscription.paused", NOW + 5, "{}")],
            ..SubscriptionChange::default()
        };
        let saved = store.save_subscription(&claim, &change, NOW + 5).await.expect("save").expect("held");
        assert_eq!((saved.version, saved.state.as_str(), saved.last_invoice.as_deref()), (1, "paused", Some("1001")));
        // An expired claim is taken over; the old one can no longer save.
        let Claimed::Held(other, _) = store.claim_subscription(site, "u1", NOW + 61, NOW + 121).await.expect("claim")
        else {
            panic!("lease expired");
        };
        assert_eq!(store.save_subscription(&claim, &change, NOW + 62).await.expect("save"), None);
        store.release_subscription(&other).await.expect("release");
        // The lost claim's save recorded nothing.
        assert_eq!(event_kinds(&store, site, "u1").await, ["subscription.created", "subscription.paused"]);

        let page = store
            .list_subscriptions(
                site,
                &SubscriptionFilter { account_id: Some(account), state: Some(StateFilter::Live) },
                &PageRequest::default(),
            )
            .await
            .expect("list");
        assert_eq!(page.total, 1);
        let read = store.account_with_activity(site, "a1").await.expect("read").expect("found");
        assert!(read.activity.has_paused_subscription);
    }
}
#[tokio::test]
async fn work_claims_saves_bills_and_reschedules_many_subscriptions_at_once() {
    for store in both_backends("subscriptions_work").await {
        let (site, account, plan) = setup(&store).await;
        let mut ids = Vec::new();
        for uuid in ["w1", "w2", "w3"] {
            let (claim, created) = store
                .create_subscription(&record(site, account, plan, uuid, "active"), &[], &[], NOW, NOW + 60)
                .await
                .expect("create");
            store.release_subscription(&claim).await.expect("release");
            store.schedule_job(site, "renewal", uuid, NOW + 100).await.expect("job");
            ids.push(created.id);
        }
        // w3 is busy: only w1 and w2 (and no unknown uuid) are claimed.
        let Claimed::Held(busy, _) = store.claim_subscription(site, "w3", NOW, NOW + 60).await.expect("claim") else {
            panic!("free");
        };
        let mut work = store.begin_work().await.expect("work");
        let claimed =
            work.claim_subscriptions(site, &["w1", "w2", "w3", "nope"], NOW + 1, NOW + 61).await.expect("claim");
        let mut uuids: Vec<&str> = claimed.iter().map(|(_, r)| r.uuid.as_str()).collect();
        uuids.sort_unstable();
        assert_eq!(uuids, ["w1", "w2"]);
        assert!(claimed.iter().all(|(c, r)| c.subscription_id == r.id && r.version == 0));
        let changes: Vec<SubscriptionChange> = (0..2)
            .map(|i| SubscriptionChange {
                indexed: Indexed { state: "active".into(), ..Indexed::default() },
                value: format!("{{\"v\":{i}}}"),
                details: "{}".into(),
                events: vec![event("subscription.renewed", NOW + 100, "{}")],
                charges: vec![NewCharge { origin: "renewal".into(), at: NOW + 100, lines: format!("[{i}]") }],
                ..SubscriptionChange::default()
            })
            .collect();
        let saves: Vec<SubscriptionSave<'_>> = claimed
            .iter()
            .zip(&changes)
            .map(|((claim, _), change)| SubscriptionSave { claim, change, now: NOW + 100 })
            .collect();
        let charges = work.save_subscriptions(&saves).await.expect("save");
        assert_eq!(charges.len(), 2);
        assert!(charges.iter().all(|c| c.billed_at.is_none() && c.origin == "renewal"));
        let numbers = ["1001", "1002"];
        let billed: Vec<(&Charge, Option<&str>, i64)> =
            charges.iter().zip(numbers).map(|(c, n)| (c, Some(n), NOW + 100)).collect();
        work.mark_charges_billed(&billed).await.expect("billed");
        let jobs: Vec<Reschedule<'_>> = claimed
            .iter()
            .map(|(_, r)| Reschedule { uuid: &r.uuid, next: Some(("renewal", NOW + 200)), running: None })
            .collect();
        work.reschedule_subscriptions(site, &jobs).await.expect("reschedule");
        let claims: Vec<SubscriptionClaim> = claimed.iter().map(|(c, _)| c.clone()).collect();
        work.release_subscriptions(&claims).await.expect("release");
        work.commit().await.expect("commit");

        for ((claim, before), change) in claimed.iter().zip(&changes) {
            let after = store.subscription_by_id(claim.subscription_id).await.expect("read").expect("exists");
            assert_eq!((after.version, &after.value, after.updated_at), (1, &change.value, NOW + 100));
            assert!(after.last_invoice.is_some());
            assert_eq!(event_kinds(&store, site, &after.uuid).await, ["subscription.renewed"]);
            assert!(store.unbilled_charges(after.id).await.expect("charges").is_empty());
            let pending = store.pending_jobs(&before.uuid).await.expect("jobs");
            assert_eq!(pending.iter().map(|j| j.due_at).collect::<Vec<_>>(), [NOW + 200]);
            // Released: free for the next change.
            assert!(matches!(
                store.claim_subscription(site, &before.uuid, NOW + 2, NOW + 62).await.expect("claim"),
                Claimed::Held(..)
            ));
        }
        // The busy one was left alone.
        assert!(!store.pending_jobs("w3").await.expect("jobs").is_empty());
        assert!(store.holds_subscription_claim(&busy).await.expect("held"));

        // A claim that no longer holds its subscription writes nothing of the work.
        let mut work = store.begin_work().await.expect("work");
        let lost = SubscriptionClaim { subscription_id: ids[2], token: "not the claim".into() };
        let saves = [SubscriptionSave { claim: &lost, change: &changes[0], now: NOW + 300 }];
        assert!(matches!(work.save_subscriptions(&saves).await, Err(StoreError::Conflict(_))));
        drop(work);
        let w3 = store.subscription_by_id(ids[2]).await.expect("read").expect("exists");
        assert_eq!((w3.version, w3.value.as_str()), (0, "{}"));
    }
}

use super::*;
use crate::testing::both_backends;
use crate::{Mode, NewSite, Plan};

#[tokio::test]
async fn endpoints_are_added_listed_limited_and_removed() {
    for store in both_backends("webhook_endpoints").await {
        let new = acme();
        let (site, _) = store.create_site(&new, 100).await.expect("site");
        let kinds = vec!["new_account_notification".to_owned(), "paid_charge_invoice_notification".to_owned()];
        let first = store
            .add_webhook_endpoint(
                site.id,
                &NewEndpoint {
                    url: "https://example.com/hooks",
                    http_user: Some("u"),
                    http_password_sealed: Some("sealed-p"),
                    kinds: Some(&kinds),
                    secret_sealed: "sealed-s",
                },
                200,
            )
            .await
            .expect("add");
        assert_eq!(first.kinds.as_deref(), Some(kinds.as_slice()));
        assert!(first.takes("new_account_notification") && !first.takes("new_subscription_notification"));
        let plain = plain_endpoint();
        for _ in 1..MAX_ENDPOINTS {
            let e = store.add_webhook_endpoint(site.id, &plain, 300).await.expect("add");
            assert!(e.takes("anything_notification"), "no kinds: every kind");
        }
        assert!(matches!(store.add_webhook_endpoint(site.id, &plain, 400).await, Err(EndpointError::Limit)));
        let other = NewSite { name: "globex".into(), ..new.clone() };
        let (other, _) = store.create_site(&other, 100).await.expect("another site");
        store.add_webhook_endpoint(other.id, &plain, 300).await.expect("another site's endpoints count apart");
        let listed = store.webhook_endpoints(Some(site.id)).await.expect("list");
        assert_eq!(listed.len(), MAX_ENDPOINTS);
        assert_eq!(listed[0], first);
        assert_eq!(store.webhook_endpoints(None).await.expect("all").len(), MAX_ENDPOINTS + 1);
        let removed = store.remove_webhook_endpoint(first.id, 500).await.expect("remove").expect("it was live");
        assert_eq!((removed.id, removed.removed_at), (first.id, Some(500)));
        assert!(store.remove_webhook_endpoint(first.id, 500).await.expect("again").is_none());
        assert_eq!(store.webhook_endpoints(Some(site.id)).await.expect("list").len(), MAX_ENDPOINTS - 1);
        store.add_webhook_endpoint(site.id, &plain, 600).await.expect("room again after a removal");
    }
}

#[tokio::test]
async fn an_endpoints_deliveries_are_claimed_in_order_by_runs() {
    for store in both_backends("webhook_runs").await {
        let new = acme();
        let (acme, _) = store.create_site(&new, 100).await.expect("site");
        let plain = plain_endpoint();
        let e1 = store.add_webhook_endpoint(acme.id, &plain, 100).await.expect("endpoint");
        let event = crate::events::NewEvent {
            kind: "account.created".to_owned(),
            at: 100,
            recorded_at: 100,
            payload: "{}".to_owned(),
            awaits_reaction: false,
        };
        let mut work = store.begin_work().await.expect("work");
        work.append_item_events(acme.id, "a1", &vec![event; 6]).await.expect("events");
        work.commit().await.expect("commit");
        let events = store.unnotified_events(10).await.expect("events");
        let deliveries: Vec<NewDelivery> = events
            .iter()
            .enumerate()
            .map(|(n, e)| NewDelivery {
                site_id: acme.id,
                endpoint_id: e1.id,
                event_id: e.id,
                kind: "new_account_notification".to_owned(),
                message_id: format!("msg_{n}"),
                body: "<new_account_notification/>".to_owned(),
            })
            .collect();
        let ids: Vec<i64> = events.iter().map(|e| e.id).collect();
        store.record_notifications(&ids, &deliveries, 1_000).await.expect("record");
        let ids_of = |runs: Vec<Vec<Delivery>>| -> Vec<Vec<i64>> {
            runs.into_iter().map(|run| run.into_iter().map(|d| d.id).collect()).collect()
        };
        let claim = |now: i64, batch: usize| {
            let store = store.clone();
            async move { ids_of(store.claim_due_deliveries(now, now + 10_000, batch).await.expect("claim")) }
        };
        let runs = claim(1_000, 3).await;
        assert_eq!(runs.len(), 1);
        let [d1, d2, d3] = runs[0][..] else { panic!("a run of three: {runs:?}") };
        assert!(d1 < d2 && d2 < d3);
        // While the oldest is held, nothing of the endpoint is claimed again.
        assert!(claim(1_100, 10).await.is_empty());
        // The first delivered, the second to be retried, the third let go unattempted.
        let done = Attempt { at: 1_200, status_code: Some(200), error: None, duration_ms: 1 };
        let refused = Attempt { at: 1_300, status_code: Some(500), error: None, duration_ms: 1 };
        store
            .record_attempts(&[(d1, done, AfterAttempt::Delivered), (d2, refused, AfterAttempt::Retry(5_000))], &[d3])
            .await
            .expect("record");
        // The retried one is now the oldest: nothing goes before its retry.
        assert!(claim(2_000, 10).await.is_empty());
        // A follower held by another claim ends the run before it.
        let all = store.webhook_deliveries(acme.id, Some(e1.id), None).await.expect("list");
        let d5 = all[4].0.id;
        crate::db::query("UPDATE webhook_deliveries SET claimed_until = 99999 WHERE id = $1")
            .bind(d5)
            .execute(&store.pool)
            .await
            .expect("a claim elsewhere");
        let runs = claim(5_000, 10).await;
        assert_eq!(runs, [vec![d2, d3, all[3].0.id]]);
        let states: Vec<(DeliveryState, i64)> = store
            .webhook_deliveries(acme.id, Some(e1.id), None)
            .await
            .expect("list")
            .iter()
            .take(3)
            .map(|(d, attempts)| (d.state, attempts.len() as i64))
            .collect();
        assert_eq!(states, [(DeliveryState::Delivered, 1), (DeliveryState::Retrying, 1), (DeliveryState::Pending, 0)]);
    }
}

#[tokio::test]
async fn failed_deliveries_are_redelivered() {
    for store in both_backends("webhook_redeliver").await {
        let new = acme();
        let (acme, _) = store.create_site(&new, 100).await.expect("site");
        let (globex, _) = store.create_site(&NewSite { name: "globex".into(), ..new }, 100).await.expect("site");
        let plain = plain_endpoint();
        let e1 = store.add_webhook_endpoint(acme.id, &plain, 100).await.expect("endpoint");
        let e2 = store.add_webhook_endpoint(acme.id, &plain, 100).await.expect("endpoint");
        let g1 = store.add_webhook_endpoint(globex.id, &plain, 100).await.expect("endpoint");
        let event = |kind: &str| crate::events::NewEvent {
            kind: kind.to_owned(),
            at: 100,
            recorded_at: 100,
            payload: "{}".to_owned(),
            awaits_reaction: false,
        };
        let mut work = store.begin_work().await.expect("work");
        work.append_item_events(acme.id, "a1", &[event("account.created"), event("account.updated")])
            .await
            .expect("events");
        work.append_item_events(globex.id, "g1", &[event("account.created")]).await.expect("events");
        work.commit().await.expect("commit");
        let events = store.unnotified_events(10).await.expect("events");
        assert_eq!(events.len(), 3);
        let delivery = |endpoint: &Endpoint, event: i64, n: u32| NewDelivery {
            site_id: endpoint.site_id,
            endpoint_id: endpoint.id,
            event_id: event,
            kind: "new_account_notification".to_owned(),
            message_id: format!("msg_{n}"),
            body: "<new_account_notification/>".to_owned(),
        };
        let new_deliveries = [
            delivery(&e1, events[0].id, 1),
            delivery(&e1, events[1].id, 2),
            delivery(&e2, events[0].id, 3),
            delivery(&g1, events[2].id, 4),
        ];
        let ids: Vec<i64> = events.iter().map(|e| e.id).collect();
        assert_eq!(store.record_notifications(&ids, &new_deliveries, 1_000).await.expect("record"), 3);
        let attempt = |at: i64, code: i64| Attempt { at, status_code: Some(code), error: None, duration_ms: 5 };
        // Each endpoint's first delivery fails for good; then e1's second is delivered.
        let claim = |now: i64, batch: usize| {
            let store = store.clone();
            async move {
                let runs = store.claim_due_deliveries(now, now + 30_000, batch).await.expect("claim");
                runs.into_iter().flatten().collect::<Vec<_>>()
            }
        };
        let record = |id: i64, attempt: Attempt, after: AfterAttempt| {
            let store = store.clone();
            async move { store.record_attempts(&[(id, attempt, after)], &[]).await.expect("attempt") }
        };
        let first = claim(1_000, 1).await;
        assert_eq!(first.len(), 3);
        for d in &first {
            record(d.id, attempt(1_100, 500), AfterAttempt::Failed).await;
        }
        let second = claim(1_200, 1).await;
        assert_eq!(second.len(), 1);
        record(second[0].id, attempt(1_300, 200), AfterAttempt::Delivered).await;
        let (d1, d2, d3, d4) = (first[0].id, second[0].id, first[1].id, first[2].id);
        assert_eq!((first[0].new.endpoint_id, first[1].new.endpoint_id), (e1.id, e2.id));

        // Only failed deliveries of live endpoints are redelivered.
        assert_eq!(
            store.redeliver_webhook_delivery(d2, 2_000).await.expect("redeliver"),
            Redelivery::NotFailed(DeliveryState::Delivered)
        );
        assert_eq!(store.redeliver_webhook_delivery(d4 + 100, 2_000).await.expect("redeliver"), Redelivery::NotFound);
        store.remove_webhook_endpoint(e2.id, 1_500).await.expect("remove").expect("live");
        assert_eq!(store.redeliver_webhook_delivery(d3, 2_000).await.expect("redeliver"), Redelivery::EndpointRemoved);

        // A stale claim does not hold a redelivered delivery back.
        crate::db::query("UPDATE webhook_deliveries SET claimed_until = 999999 WHERE id = $1")
            .bind(d1)
            .execute(&store.pool)
            .await
            .expect("a stale claim");
        let Redelivery::Redelivered(again) = store.redeliver_webhook_delivery(d1, 2_000).await.expect("redeliver")
        else {
            panic!("d1 is failed")
        };
        assert_eq!(
            (again.id, again.state, again.attempts, again.next_attempt_at),
            (d1, DeliveryState::Retrying, 1, 2_000)
        );
        assert_eq!(
            store.redeliver_webhook_delivery(d1, 2_000).await.expect("again"),
            Redelivery::NotFailed(DeliveryState::Retrying)
        );
        let listed = store.webhook_deliveries(acme.id, None, Some(DeliveryState::Retrying)).await.expect("list");
        assert_eq!(listed.len(), 1);
        assert_eq!((listed[0].0.id, listed[0].1.clone()), (d1, vec![attempt(1_100, 500)]), "its attempts stay");
        let claimed = claim(2_000, 1).await;
        assert_eq!(claimed.iter().map(|d| d.id).collect::<Vec<_>>(), [d1], "due now, unclaimed");
        record(d1, attempt(2_100, 503), AfterAttempt::Failed).await;

        // Every failed delivery, of one site or of all; never those of a removed endpoint.
        assert_eq!(store.redeliver_failed_webhook_deliveries(Some(acme.id), 3_000).await.expect("acme"), [d1]);
        assert_eq!(store.redeliver_failed_webhook_deliveries(None, 3_000).await.expect("all"), [d4]);
        assert!(store.redeliver_failed_webhook_deliveries(None, 3_000).await.expect("none left").is_empty());
        let failed = store.webhook_deliveries(acme.id, None, Some(DeliveryState::Failed)).await.expect("list");
        assert_eq!(failed.iter().map(|(d, _)| d.id).collect::<Vec<_>>(), [d3]);
        let retrying = store.webhook_deliveries(acme.id, Some(e1.id), Some(DeliveryState::Retrying)).await;
        let retrying = retrying.expect("list");
        assert_eq!((retrying[0].0.attempts, retrying[0].1.len(), retrying[0].0.next_attempt_at), (2, 2, 3_000));
    }
}

/// A sandbox site named acme.
fn acme() -> NewSite {
    NewSite { name: "acme".into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos: false, contact: None }
}

/// An endpoint taking every kind, without credentials, at a port nothing listens on.
fn plain_endpoint() -> NewEndpoint<'static> {
    NewEndpoint {
        url: "http://127.0.0.1:9/h",
        http_user: None,
        http_password_sealed: None,
        kinds: None,
        secret_sealed: "s",
    }
}

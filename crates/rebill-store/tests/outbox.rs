//! The alert outbox's delivery bookkeeping on SQLite and on PostgreSQL (a fresh database per
//! test run): claims, leases, sent marks, failures with backoff, announcements, and concurrent
//! claimers that never share an alert.

use std::collections::HashSet;

use rebill_store::outbox::{RETRY_BASE_SECONDS, retry_delay};
use rebill_store::testing::{both_backends, fresh_postgres_database, fresh_sqlite_url};
use rebill_store::{Mode, NewSite, Plan, Site, Store};

const NOW: i64 = 1_800_000_000;
const LEASE: i64 = 300;

async fn site(store: &Store, name: &str, contact: Option<&str>) -> Site {
    let new = NewSite {
        name: name.into(),
        mode: Mode::Sandbox,
        plan: Plan::Core,
        credit_memos: false,
        contact: contact.map(Into::into),
    };
    store.create_site(&new, NOW).await.expect("create site").0
}

/// Queues `n` alerts for `site`; returns their ids.
async fn queue(store: &Store, site: &Site, n: usize) -> Vec<i64> {
    let before = store.alerts().await.expect("alerts").len();
    for i in 0..n {
        store.alert(site, "test", &format!("alert {i} of {}", site.name), NOW).await.expect("queue");
    }
    store.alerts().await.expect("alerts")[before..].iter().map(|a| a.id).collect()
}

#[tokio::test]
async fn due_alerts_with_a_recipient_are_claimed_oldest_first_under_a_lease() {
    for store in both_backends("claim").await {
        let acme = site(&store, "acme", Some("tech@acme.example")).await;
        let silent = site(&store, "silent", None).await;
        let blank = site(&store, "blank", Some("")).await;
        let ids = queue(&store, &acme, 3).await;
        let unaddressed = [queue(&store, &silent, 1).await, queue(&store, &blank, 1).await].concat();

        let claimed = store.claim_alerts(NOW, LEASE, 2).await.expect("claim");
        assert_eq!(claimed.iter().map(|c| c.alert.id).collect::<Vec<_>>(), ids[..2]);
        let first = &claimed[0];
        assert_eq!(
            (first.recipient.as_str(), first.attempts, first.lease_until, first.alert.subject.as_str()),
            ("tech@acme.example", 1, NOW + LEASE, "rebill: test on site acme")
        );
        assert_eq!(first.alert.body, "alert 0 of acme");
        let rest = store.claim_alerts(NOW, LEASE, 10).await.expect("claim the rest");
        assert_eq!(rest.iter().map(|c| c.alert.id).collect::<Vec<_>>(), ids[2..]);
        assert_ne!(rest[0].token, first.token);
        // Everything addressed is leased; the alerts without a recipient are never claimed.
        assert!(store.claim_alerts(NOW + LEASE - 1, LEASE, 10).await.expect("claim").is_empty());
        let delivery = store.alert_delivery(ids[0]).await.expect("delivery").expect("exists");
        assert_eq!((delivery.attempts, delivery.claimed_until, delivery.sent_at), (1, Some(NOW + LEASE), None));

        // A mailer that died: its alerts come back when the lease ends, as a second attempt.
        let again = store.claim_alerts(NOW + LEASE, LEASE, 10).await.expect("claim after the lease");
        assert_eq!(again.iter().map(|c| c.alert.id).collect::<Vec<_>>(), ids);
        assert!(again.iter().all(|c| c.attempts == 2));
        for id in unaddressed {
            let delivery = store.alert_delivery(id).await.expect("delivery").expect("exists");
            assert_eq!((delivery.attempts, delivery.sent_at, delivery.claimed_until), (0, None, None));
        }
        assert!(store.alert_delivery(9999).await.expect("lookup").is_none());
        assert!(store.claim_alerts(NOW, 0, 10).await.is_err());
        assert!(store.claim_alerts(NOW, LEASE, 0).await.is_err());
    }
}

#[tokio::test]
async fn sent_alerts_are_marked_and_never_claimed_again() {
    for store in both_backends("sent").await {
        let acme = site(&store, "acme", Some("tech@acme.example")).await;
        let ids = queue(&store, &acme, 2).await;
        let claimed = store.claim_alerts(NOW, LEASE, 10).await.expect("claim");
        store.mark_alert_sent(&claimed[0], NOW + 5).await.expect("sent");
        let alerts = store.alerts().await.expect("alerts");
        assert_eq!(alerts.iter().find(|a| a.id == ids[0]).map(|a| a.sent_at), Some(Some(NOW + 5)));
        assert_eq!(alerts.iter().find(|a| a.id == ids[1]).map(|a| a.sent_at), Some(None));
        let delivery = store.alert_delivery(ids[0]).await.expect("delivery").expect("exists");
        assert_eq!((delivery.claimed_until, delivery.last_error), (None, None));

        // Long after every lease: only the unsent one comes back.
        let again = store.claim_alerts(NOW + 10 * LEASE, LEASE, 10).await.expect("claim");
        assert_eq!(again.iter().map(|c| c.alert.id).collect::<Vec<_>>(), [ids[1]]);
        // Marking twice keeps the first time.
        store.mark_alert_sent(&claimed[0], NOW + 99).await.expect("sent again");
        let delivery = store.alert_delivery(ids[0]).await.expect("delivery").expect("exists");
        assert_eq!(delivery.sent_at, Some(NOW + 5));
    }
}

#[tokio::test]
async fn failures_are_recorded_and_retried_with_backoff() {
    for store in both_backends("failure").await {
        let acme = site(&store, "acme", Some("tech@acme.example")).await;
        let id = queue(&store, &acme, 1).await[0];

        let claimed = store.claim_alerts(NOW, LEASE, 10).await.expect("claim").remove(0);
        let next = store.record_alert_failure(&claimed, "550 mailbox unavailable", NOW).await.expect("failure");
        assert_eq!(next, NOW + RETRY_BASE_SECONDS);
        let delivery = store.alert_delivery(id).await.expect("delivery").expect("exists");
        assert_eq!(
            (delivery.attempts, delivery.last_error.as_deref(), delivery.next_attempt_at, delivery.claimed_until),
            (1, Some("550 mailbox unavailable"), next, None)
        );
        // Not hammered: nothing is due before the backoff ends.
        assert!(store.claim_alerts(next - 1, LEASE, 10).await.expect("claim").is_empty());

        let second = store.claim_alerts(next, LEASE, 10).await.expect("claim").remove(0);
        assert_eq!(second.attempts, 2);
        let next2 = store.record_alert_failure(&second, &"x".repeat(2000), next).await.expect("failure");
        assert_eq!(next2 - next, retry_delay(2));
        assert_eq!(retry_delay(2), 2 * RETRY_BASE_SECONDS);
        let delivery = store.alert_delivery(id).await.expect("delivery").expect("exists");
        assert!(delivery.last_error.is_some_and(|e| e.chars().count() <= 501), "errors are truncated");

        // A claim whose lease ran out and was taken over cannot overwrite the new claim.
        let third = store.claim_alerts(next2, LEASE, 10).await.expect("claim").remove(0);
        let fourth = store.claim_alerts(next2 + LEASE, LEASE, 10).await.expect("claim").remove(0);
        store.record_alert_failure(&third, "late report", next2 + LEASE + 1).await.expect("stale failure");
        let delivery = store.alert_delivery(id).await.expect("delivery").expect("exists");
        assert_eq!(delivery.claimed_until, Some(fourth.lease_until));
        assert_ne!(delivery.last_error.as_deref(), Some("late report"));

        // The alert was never lost: it is sent in the end.
        store.mark_alert_sent(&fourth, next2 + LEASE + 2).await.expect("sent");
        let alert = store.alerts().await.expect("alerts").into_iter().find(|a| a.id == id).expect("alert");
        assert_eq!(alert.sent_at, Some(next2 + LEASE + 2));
    }
}

#[tokio::test]
async fn released_alerts_are_due_at_once_and_not_counted_as_attempts() {
    for store in both_backends("release").await {
        let acme = site(&store, "acme", Some("tech@acme.example")).await;
        let id = queue(&store, &acme, 1).await[0];
        let claimed = store.claim_alerts(NOW, LEASE, 10).await.expect("claim").remove(0);
        store.release_alert(&claimed).await.expect("release");
        let delivery = store.alert_delivery(id).await.expect("delivery").expect("exists");
        assert_eq!((delivery.attempts, delivery.claimed_until), (0, None));
        let again = store.claim_alerts(NOW, LEASE, 10).await.expect("claim");
        assert_eq!((again[0].alert.id, again[0].attempts), (id, 1));
    }
}

#[tokio::test]
async fn each_alert_is_announced_once() {
    for store in both_backends("announce").await {
        let acme = site(&store, "acme", Some("tech@acme.example")).await;
        let silent = site(&store, "silent", None).await;
        let ids = [queue(&store, &acme, 2).await, queue(&store, &silent, 1).await].concat();
        let first = store.announce_alerts(NOW, 2).await.expect("announce");
        assert_eq!(first.iter().map(|a| a.id).collect::<Vec<_>>(), ids[..2]);
        let second = store.announce_alerts(NOW + 1, 10).await.expect("announce");
        assert_eq!(second.iter().map(|a| a.id).collect::<Vec<_>>(), ids[2..]);
        assert_eq!(second[0].recipient, None);
        assert!(store.announce_alerts(NOW + 2, 10).await.expect("announce").is_empty());
        let delivery = store.alert_delivery(ids[2]).await.expect("delivery").expect("exists");
        assert_eq!(delivery.announced_at, Some(NOW + 1));
        // Announcing does not claim: the addressed alerts are still due.
        assert_eq!(store.claim_alerts(NOW, LEASE, 10).await.expect("claim").len(), 2);
    }
}

/// Several processes on one database (one store per process, each with its own pool) claiming
/// at the same time never get the same alert.
#[tokio::test]
async fn concurrent_claimers_never_share_an_alert() {
    let pg = fresh_postgres_database("concurrent").await;
    let sqlite = fresh_sqlite_url("concurrent");
    for url in [pg.url().to_owned(), sqlite] {
        let stores = [
            Store::connect(&url).await.expect("first process"),
            Store::connect(&url).await.expect("second process"),
            Store::connect(&url).await.expect("third process"),
        ];
        let acme = site(&stores[0], "acme", Some("tech@acme.example")).await;
        let ids = queue(&stores[0], &acme, 60).await;

        let mut tasks = Vec::new();
        for (n, store) in stores.iter().cycle().take(12).enumerate() {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let batch = store.claim_alerts(NOW, LEASE, 1 + (n as i64 % 3)).await.expect("claim");
                    if batch.is_empty() {
                        break mine;
                    }
                    mine.extend(batch.into_iter().map(|c| c.alert.id));
                }
            }));
        }
        let mut seen = HashSet::new();
        for task in tasks {
            for id in task.await.expect("claimer") {
                assert!(seen.insert(id), "alert {id} claimed twice on {url}");
            }
        }
        assert_eq!(seen, ids.into_iter().collect::<HashSet<_>>());
    }
}

//! Domain events: the record of every business change, appended by the same database
//! transaction as the change itself (see the `domain_events` migration).
//!
//! The service describes a change as a [`NewEvent`] (kind, times, payload, whether a reaction
//! awaits it) and hands it to the write that makes the change (`create_account`,
//! `set_invoice_state`, `Work::save_subscriptions`, …); the write adds the site and the subject
//! of the item it wrote (account code, subscription uuid, invoice number, transaction uuid) and
//! appends the event only when the change happened (a compare-and-set that found the item in
//! another state appends nothing). Payloads are stored with their layout version
//! (the `document` module) and read back as given.
//!
//! Reactions: an event appended with `awaits_reaction` is listed by [`Store::awaiting_events`]
//! until [`Store::mark_event_handled`] marks it; the reaction runs before the mark, so a crash in
//! between runs it again (reactions are idempotent), and once marked it never runs again.

use crate::db::DbRow;
use crate::document;
use crate::work::Work;
use crate::{Store, StoreError, flag, get_flag};

/// A business change to record with the write that makes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    /// What happened, e.g. `invoice.paid`.
    pub kind: String,
    /// Site-clock time of the change.
    pub at: i64,
    /// Service-clock time of the recording.
    pub recorded_at: i64,
    /// A JSON document.
    pub payload: String,
    /// Whether a reaction inside the service is to run for it.
    pub awaits_reaction: bool,
}

/// A recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The global order of the changes.
    pub id: i64,
    pub site_id: i64,
    pub kind: String,
    /// Account code, subscription uuid, invoice number or transaction uuid.
    pub subject: String,
    pub at: i64,
    pub recorded_at: i64,
    pub payload: String,
    /// A reaction is still to run.
    pub awaiting: bool,
    /// When its reaction ran (service clock).
    pub handled_at: Option<i64>,
}

/// Which awaiting events to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Awaiting<'a> {
    /// Of every site.
    All,
    /// Of one site.
    Site(i64),
    /// Of one subject of a site.
    Subject(i64, &'a str),
}

pub(crate) const COLUMNS: &str = "id, site_id, kind, subject, at, recorded_at, payload, awaiting, handled_at";
/// Statement values per event row.
const VALUES: usize = 7;
/// Events per `INSERT` (well below either backend's limit of bound values).
const CHUNK: usize = 500;

pub(crate) fn event_from_row(row: &DbRow) -> Result<Event, StoreError> {
    Ok(Event {
        id: row.try_get("id")?,
        site_id: row.try_get("site_id")?,
        kind: row.try_get("kind")?,
        subject: row.try_get("subject")?,
        at: row.try_get("at")?,
        recorded_at: row.try_get("recorded_at")?,
        payload: document::read(row.try_get("payload")?)?,
        awaiting: get_flag(row, "awaiting")?,
        handled_at: row.try_get("handled_at")?,
    })
}

impl Work {
    /// Appends events of written items: (site, subject, event), in order.
    pub(crate) async fn append_events(&mut self, events: &[(i64, &str, &NewEvent)]) -> Result<(), StoreError> {
        for chunk in events.chunks(CHUNK) {
            let sql = format!(
                "INSERT INTO domain_events (site_id, kind, subject, at, recorded_at, payload, awaiting) VALUES {}",
                self.backend.rows(chunk.len(), VALUES, 1)
            );
            let mut query = crate::db::counted(&sql, chunk.len());
            for (site_id, subject, e) in chunk {
                query = query
                    .bind(*site_id)
                    .bind(e.kind.clone())
                    .bind(subject.to_string())
                    .bind(e.at)
                    .bind(e.recorded_at)
                    .bind(document::seal(&e.payload))
                    .bind(flag(e.awaits_reaction));
            }
            query.execute(self.tx.exec()).await?;
        }
        Ok(())
    }

    /// [`Work::append_events`] for the events of one written item.
    pub(crate) async fn append_item_events(
        &mut self,
        site_id: i64,
        subject: &str,
        events: &[NewEvent],
    ) -> Result<(), StoreError> {
        let rows: Vec<(i64, &str, &NewEvent)> = events.iter().map(|e| (site_id, subject, e)).collect();
        self.append_events(&rows).await
    }
}

impl Store {
    /// The events of one subject of the site, in order.
    pub async fn events(&self, site_id: i64, subject: &str) -> Result<Vec<Event>, StoreError> {
        let rows = crate::db::query(&format!(
            "SELECT {COLUMNS} FROM domain_events WHERE site_id = $1 AND subject = $2 ORDER BY id"
        ))
        .bind(site_id)
        .bind(subject)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(event_from_row).collect()
    }

    /// Up to `limit` events whose reaction is still to run, after the event `after` (0: from the
    /// first), in order.
    pub async fn awaiting_events(&self, scope: Awaiting<'_>, after: i64, limit: i64) -> Result<Vec<Event>, StoreError> {
        let sql = awaiting_sql(self.backend, &scope);
        let (site, subject) = match scope {
            Awaiting::All => (None, None),
            Awaiting::Site(site) => (Some(site), None),
            Awaiting::Subject(site, subject) => (Some(site), Some(subject)),
        };
        let mut query = crate::db::query(&sql).bind(after).bind(limit);
        if let Some(site) = site {
            query = query.bind(site);
        }
        if let Some(subject) = subject {
            query = query.bind(subject.to_owned());
        }
        query.fetch_all(&self.pool).await?.iter().map(event_from_row).collect()
    }

    /// Records that the reaction to an event ran; `false` when it was marked before.
    pub async fn mark_event_handled(&self, id: i64, service_now: i64) -> Result<bool, StoreError> {
        let done =
            crate::db::query("UPDATE domain_events SET awaiting = 0, handled_at = $1 WHERE id = $2 AND awaiting = 1")
                .bind(service_now)
                .bind(id)
                .execute(&self.pool)
                .await?;
        Ok(done.rows_affected() == 1)
    }
}

/// The statement of [`Store::awaiting_events`] (`$1`: after, `$2`: limit, `$3`: site, `$4`:
/// subject). A site's awaiting events are found through the partial index of awaiting events
/// (few rows): SQLite would otherwise walk every event of the site by its subject index and sort
/// them, a cost that grows with the table, on the writer connection.
fn awaiting_sql(backend: crate::Backend, scope: &Awaiting<'_>) -> String {
    let condition = match scope {
        Awaiting::All => String::new(),
        Awaiting::Site(_) => format!(" AND {} = $3", backend.unindexed("site_id")),
        Awaiting::Subject(..) => " AND site_id = $3 AND subject = $4".to_owned(),
    };
    format!("SELECT {COLUMNS} FROM domain_events WHERE awaiting = 1 AND id > $1{condition} ORDER BY id LIMIT $2")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounts::AccountFields;
    use crate::plans::PlanFields;
    use crate::subscriptions::{Indexed, NewSubscriptionRecord};
    use crate::testing::{fresh_postgres_database, fresh_sqlite_url};
    use crate::{Mode, NewSite, Plan};

    const NOW: i64 = 1_800_000_000;

    /// SQLite finds awaiting events through their partial index in every scope, never by
    /// walking a site's events (which grow without bound) and sorting them.
    #[tokio::test]
    async fn awaiting_events_are_found_through_their_index() {
        let store = Store::connect(&fresh_sqlite_url("awaiting_plan")).await.expect("store");
        for scope in [Awaiting::All, Awaiting::Site(1), Awaiting::Subject(1, "a1")] {
            let sql = format!("EXPLAIN QUERY PLAN {}", awaiting_sql(store.backend, &scope));
            let mut query = crate::db::query(&sql).bind(0i64).bind(100i64);
            if let Awaiting::Site(site) | Awaiting::Subject(site, _) = scope {
                query = query.bind(site);
            }
            if let Awaiting::Subject(_, subject) = scope {
                query = query.bind(subject.to_owned());
            }
            let plan = crate::db::query_plan(&store.pool, query).await;
            assert!(!plan.contains("TEMP B-TREE") && !plan.starts_with("SCAN"), "{scope:?}: {plan}");
            assert!(plan.contains("USING INDEX"), "{scope:?}: {plan}");
            if !matches!(scope, Awaiting::Subject(..)) {
                assert!(plan.contains("domain_events_awaiting"), "{scope:?}: {plan}");
            }
        }
    }

    fn event(kind: &str, awaits_reaction: bool) -> NewEvent {
        NewEvent { kind: kind.into(), at: NOW, recorded_at: NOW + 1, payload: r#"{"n":1}"#.into(), awaits_reaction }
    }

    /// A site with an account `a1`.
    async fn site_and_account(store: &Store, name: &str) -> (i64, i64) {
        let new =
            NewSite { name: name.into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos: false, contact: None };
        let site = store.create_site(&new, NOW).await.expect("site").0.id;
        let account = store.create_account(site, "a1", &AccountFields::default(), NOW, &[]).await.expect("account");
        (site, account.id)
    }

    /// Events appended with a change are listed awaiting their reaction in order, per site or
    /// subject, until marked handled (once); payloads are versioned on write and read back as
    /// given.
    #[tokio::test]
    async fn awaiting_events_are_listed_in_order_until_handled() {
        for store in crate::testing::both_backends("events_awaiting").await {
            let (site, _) = site_and_account(&store, "one").await;
            let (other, _) = site_and_account(&store, "two").await;
            let fields = AccountFields { email: Some("a@example.com".into()), ..AccountFields::default() };
            let updates = [event("account.updated", true), event("account.noted", false)];
            store.update_account(site, "a1", &fields, NOW, &updates).await.expect("update").expect("found");
            store.update_account(other, "a1", &fields, NOW, &updates[..1]).await.expect("update").expect("found");
            // An update of no account records nothing.
            assert_eq!(store.update_account(site, "nope", &fields, NOW, &updates).await.expect("update"), None);

            let recorded = store.events(site, "a1").await.expect("events");
            assert_eq!(
                recorded.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(),
                ["account.updated", "account.noted"]
            );
            assert_eq!(
                (recorded[0].at, recorded[0].recorded_at, recorded[0].payload.as_str()),
                (NOW, NOW + 1, r#"{"n":1}"#)
            );
            let raw: String = crate::db::query("SELECT payload FROM domain_events WHERE id = $1")
                .bind(recorded[0].id)
                .fetch_one(&store.pool)
                .await
                .expect("row")
                .try_get(0)
                .expect("text");
            assert_eq!(raw, r#"{"n":1,"document_version":1}"#);

            let all = store.awaiting_events(Awaiting::All, 0, 10).await.expect("awaiting");
            assert_eq!(all.len(), 2);
            assert!(all[0].id < all[1].id && all.iter().all(|e| e.awaiting && e.handled_at.is_none()));
            assert_eq!(store.awaiting_events(Awaiting::All, all[0].id, 10).await.expect("after"), all[1..]);
            assert_eq!(store.awaiting_events(Awaiting::All, 0, 1).await.expect("limit"), all[..1]);
            assert_eq!(store.awaiting_events(Awaiting::Site(other), 0, 10).await.expect("site"), all[1..]);
            assert_eq!(store.awaiting_events(Awaiting::Subject(site, "a1"), 0, 10).await.expect("subject"), all[..1]);
            assert!(store.awaiting_events(Awaiting::Subject(site, "a2"), 0, 10).await.expect("none").is_empty());

            assert!(store.mark_event_handled(all[0].id, NOW + 9).await.expect("mark"));
            assert!(!store.mark_event_handled(all[0].id, NOW + 10).await.expect("mark again"), "handled once");
            assert_eq!(store.awaiting_events(Awaiting::All, 0, 10).await.expect("awaiting"), all[1..]);
            let handled = store.events(site, "a1").await.expect("events").remove(0);
            assert_eq!((handled.awaiting, handled.handled_at), (false, Some(NOW + 9)));
        }
    }

    /// A refused creation changes nothing: discarding the new account or subscription removes
    /// the events of its creation too (and only those).
    #[tokio::test]
    async fn discarded_creations_leave_no_events() {
        for store in crate::testing::both_backends("events_discarded").await {
            let (site, account) = site_and_account(&store, "one").await;
            store
                .create_account(site, "kept", &AccountFields::default(), NOW, &[event("account.created", false)])
                .await
                .expect("kept");
            let gone = store
                .create_account(site, "gone", &AccountFields::default(), NOW, &[event("account.created", false)])
                .await
                .expect("gone");
            assert!(store.discard_new_account(site, gone.id).await.expect("discard"));
            assert!(store.events(site, "gone").await.expect("events").is_empty());
            assert_eq!(store.events(site, "kept").await.expect("events").len(), 1);

            let fields = PlanFields { name: Some("Gold".into()), ..PlanFields::default() };
            let plan = store.create_plan(site, "gold", &fields, NOW).await.expect("plan").id;
            let record = NewSubscriptionRecord {
                site_id: site,
                account_id: account,
                plan_id: plan,
                uuid: "s1".into(),
                indexed: Indexed { state: "active".into(), ..Indexed::default() },
                value: "{}".into(),
                creation: "{}".into(),
                details: "{}".into(),
            };
            let (claim, _) = store
                .create_subscription(&record, &[], &[event("subscription.created", false)], NOW, NOW + 60)
                .await
                .expect("create");
            assert_eq!(store.events(site, "s1").await.expect("events").len(), 1);
            assert!(store.discard_subscription(&claim).await.expect("discard"));
            assert!(store.events(site, "s1").await.expect("events").is_empty());
            assert_eq!(store.events(site, "kept").await.expect("events").len(), 1);
        }
    }

    /// A database written before events existed: the migration keeps each subscription history
    /// row as a `subscription.history` event of its subscription, in order, with its action as
    /// stored, and drops the history table.
    #[tokio::test]
    async fn the_subscription_history_is_kept_as_events() {
        let database = fresh_postgres_database("events_history").await;
        for url in [fresh_sqlite_url("events_history"), database.url().to_owned()] {
            let store = Store::connect(&url).await.expect("store");
            let (site, account) = site_and_account(&store, "legacy").await;
            let fields = PlanFields { name: Some("Gold".into()), ..PlanFields::default() };
            let plan = store.create_plan(site, "gold", &fields, NOW).await.expect("plan").id;
            let record = NewSubscriptionRecord {
                site_id: site,
                account_id: account,
                plan_id: plan,
                uuid: "s1".into(),
                indexed: Indexed { state: "active".into(), ..Indexed::default() },
                value: "{}".into(),
                creation: "{}".into(),
                details: "{}".into(),
            };
            let (_, subscription) = store.create_subscription(&record, &[], &[], NOW, NOW + 60).await.expect("create");
            // Back to the schema before the events' migration, with two history rows (one
            // versioned, one older), as a database of the previous release holds them.
            let version: i64 = crate::db::query("SELECT MAX(version) AS v FROM _sqlx_migrations")
                .fetch_one(&store.pool)
                .await
                .expect("migrations")
                .try_get("v")
                .expect("v");
            // The events' migration (12) is rewound and run again, with the webhook deliveries'
            // (19), which adds to the events' table and refers to it; the other later
            // migrations touch neither table, so they stay applied.
            assert!(version >= 19, "the events' and the deliveries' migrations are applied");
            for statement in [
                "DROP TABLE webhook_attempts",
                "DROP TABLE webhook_deliveries",
                "DROP TABLE domain_events",
                "CREATE TABLE subscription_history (id BIGINT PRIMARY KEY, subscription_id BIGINT NOT NULL \
                 REFERENCES subscriptions(id), at BIGINT NOT NULL, action TEXT NOT NULL)",
                "CREATE INDEX subscription_history_subscription ON subscription_history(subscription_id, id)",
                "DELETE FROM _sqlx_migrations WHERE version IN (12, 19)",
            ] {
                crate::db::query(statement).execute(&store.pool).await.expect(statement);
            }
            for (id, at, action) in [
                (7, NOW + 5, r#"{"action":"pause","remaining_pause_cycles":1,"document_version":1}"#),
                (3, NOW, r#"{"action":"cancel"}"#),
            ] {
                crate::db::query(
                    "INSERT INTO subscription_history (id, subscription_id, at, action) VALUES ($1, $2, $3, $4)",
                )
                .bind(id)
                .bind(subscription.id)
                .bind(at)
                .bind(action)
                .execute(&store.pool)
                .await
                .expect("history");
            }
            store.pool.close().await;
            store.reads.close().await;

            let store = Store::connect(&url).await.expect("migrated");
            let events = store.events(site, "s1").await.expect("events");
            let seen: Vec<(&str, i64, i64, &str, bool)> =
                events.iter().map(|e| (e.kind.as_str(), e.at, e.recorded_at, e.payload.as_str(), e.awaiting)).collect();
            assert_eq!(
                seen,
                [
                    ("subscription.history", NOW, NOW, r#"{"action":"cancel"}"#, false),
                    (
                        "subscription.history",
                        NOW + 5,
                        NOW + 5,
                        r#"{"action":"pause","remaining_pause_cycles":1}"#,
                        false
                    ),
                ]
            );
            let gone = crate::db::query("SELECT COUNT(*) FROM subscription_history").fetch_one(&store.pool).await;
            assert!(gone.is_err(), "the history table is dropped");
        }
    }
}

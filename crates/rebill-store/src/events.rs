//! Domain events: the record of every business change, appended by the same database
//! transaction as the change itself (see the `domain_events` migration).
//!
//! The service describes a change as a [`NewEvent`] (kind, times, payload, whether a reaction
//! awaits it) and hands it to the write that makes the change (`create_account`,
//! `set_invoice_state`, `Work::save_subscriptions`, …); the write adds the site and the subject
//! of the item it wrote (account code, subscription uuid, invoice number, transaction uuid) and
//! appends the event only when the change happened (a compare-and-set that found the item in
//! another state appends nothing). Payloads are stored with their layout version
//! ([`crate::document`]) and read back as given.
//!
//! Reactions: an event appended with `awaits_reaction` is listed by [`Store::awaiting_events`]
//! until [`Store::mark_event_handled`] marks it; the reaction runs before the mark, so a crash in
//! between runs it again (reactions are idempotent), and once marked it never runs again.

use sqlx::Row;

use crate::db::DbRow;
use crate::document;
use crate::subscriptions::Work;
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

const COLUMNS: &str = "id, site_id, kind, subject, at, recorded_at, payload, awaiting, handled_at";
/// Statement values per event row.
const VALUES: usize = 7;
/// Events per `INSERT` (well below either backend's limit of bound values).
const CHUNK: usize = 500;

fn event_from_row(row: &DbRow) -> Result<Event, StoreError> {
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
            let mut query = sqlx::query(&sql);
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
            query.execute(&mut *self.tx).await?;
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
        let rows = sqlx::query(&format!(
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
        let (condition, site, subject) = match scope {
            Awaiting::All => ("", None, None),
            Awaiting::Site(site) => (" AND site_id = $3", Some(site), None),
            Awaiting::Subject(site, subject) => (" AND site_id = $3 AND subject = $4", Some(site), Some(subject)),
        };
        let sql = format!(
            "SELECT {COLUMNS} FROM domain_events WHERE awaiting = 1 AND id > $1{condition} ORDER BY id LIMIT $2"
        );
        let mut query = sqlx::query(&sql).bind(after).bind(limit);
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
        let done = sqlx::query("UPDATE domain_events SET awaiting = 0, handled_at = $1 WHERE id = $2 AND awaiting = 1")
            .bind(service_now)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}

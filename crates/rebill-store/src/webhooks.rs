//! Webhook endpoints: where a site's push notifications go (`rebill webhooks add`). Secrets and
//! HTTP passwords arrive sealed by the caller (this module never sees them in clear). At most
//! [`MAX_ENDPOINTS`] live endpoints per site, checked under the site's row lock by the write
//! that adds one. A removed endpoint keeps its row (`removed_at`).

use crate::db::DbRow;
use crate::{Store, StoreError};

/// Live endpoints a site may have.
pub const MAX_ENDPOINTS: usize = 10;

/// An endpoint as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub id: i64,
    pub site_id: i64,
    pub url: String,
    pub http_user: Option<String>,
    /// The HTTP Basic password, sealed with the vault key.
    pub http_password_sealed: Option<String>,
    /// The notification kinds it takes; `None`: every kind.
    pub kinds: Option<Vec<String>>,
    /// The signing secret, sealed with the vault key.
    pub secret_sealed: String,
    pub created_at: i64,
    pub removed_at: Option<i64>,
}

impl Endpoint {
    /// Whether the endpoint takes notifications of `kind`.
    pub fn takes(&self, kind: &str) -> bool {
        self.kinds.as_ref().is_none_or(|kinds| kinds.iter().any(|k| k == kind))
    }
}

/// An endpoint to add.
#[derive(Debug, Clone)]
pub struct NewEndpoint<'a> {
    pub url: &'a str,
    pub http_user: Option<&'a str>,
    pub http_password_sealed: Option<&'a str>,
    pub kinds: Option<&'a [String]>,
    pub secret_sealed: &'a str,
}

/// Why an endpoint was not added.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("the site already has {MAX_ENDPOINTS} webhook endpoints")]
    Limit,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for EndpointError {
    fn from(e: sqlx::Error) -> Self {
        EndpointError::Store(StoreError::Database(e))
    }
}

const COLUMNS: &str = "id, site_id, url, http_user, http_password_sealed, kinds, secret_sealed, created_at, removed_at";

fn from_row(row: &DbRow) -> Result<Endpoint, StoreError> {
    let kinds: Option<String> = row.try_get("kinds")?;
    Ok(Endpoint {
        id: row.try_get("id")?,
        site_id: row.try_get("site_id")?,
        url: row.try_get("url")?,
        http_user: row.try_get("http_user")?,
        http_password_sealed: row.try_get("http_password_sealed")?,
        kinds: kinds.map(|k| k.split(',').filter(|k| !k.is_empty()).map(str::to_owned).collect()),
        secret_sealed: row.try_get("secret_sealed")?,
        created_at: row.try_get("created_at")?,
        removed_at: row.try_get("removed_at")?,
    })
}

impl Store {
    /// Adds an endpoint to the site unless it has [`MAX_ENDPOINTS`] live ones already.
    pub async fn add_webhook_endpoint(
        &self,
        site_id: i64,
        new: &NewEndpoint<'_>,
        now: i64,
    ) -> Result<Endpoint, EndpointError> {
        let mut work = self.begin_work().await?;
        // Two adds at once count one after the other: on PostgreSQL under the site's row lock;
        // on SQLite the insert comes first, so the transaction takes the database's write lock
        // at its first statement (a read first could not be upgraded while another process,
        // such as `rebill serve`, writes).
        if work.backend == crate::Backend::Postgres {
            let lock = format!("SELECT id FROM sites WHERE id = $1{}", work.backend.for_update());
            crate::db::query(&lock).bind(site_id).fetch_optional(work.tx.exec()).await?;
        }
        let row = crate::db::query(&format!(
            "INSERT INTO webhook_endpoints (site_id, url, http_user, http_password_sealed, kinds, secret_sealed, \
             created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {COLUMNS}"
        ))
        .bind(site_id)
        .bind(new.url.to_owned())
        .bind(new.http_user.map(str::to_owned))
        .bind(new.http_password_sealed.map(str::to_owned))
        .bind(new.kinds.map(|k| k.join(",")))
        .bind(new.secret_sealed.to_owned())
        .bind(now)
        .fetch_one(work.tx.exec())
        .await?;
        let live: i64 =
            crate::db::query("SELECT COUNT(*) AS n FROM webhook_endpoints WHERE site_id = $1 AND removed_at IS NULL")
                .bind(site_id)
                .fetch_one(work.tx.exec())
                .await?
                .try_get("n")?;
        if usize::try_from(live).unwrap_or(usize::MAX) > MAX_ENDPOINTS {
            // Dropping the work rolls the insert back.
            return Err(EndpointError::Limit);
        }
        let endpoint = from_row(&row)?;
        work.commit().await?;
        Ok(endpoint)
    }

    /// The live endpoints of the site (of every site with `None`), oldest first.
    pub async fn webhook_endpoints(&self, site_id: Option<i64>) -> Result<Vec<Endpoint>, StoreError> {
        let rows = crate::db::query(&format!(
            "SELECT {COLUMNS} FROM webhook_endpoints WHERE ($1 IS NULL OR site_id = $1) AND removed_at IS NULL \
             ORDER BY id"
        ))
        .bind(site_id)
        .fetch_all(&self.reads)
        .await?;
        rows.iter().map(from_row).collect()
    }

    /// The endpoint `id`, live or removed.
    pub async fn webhook_endpoint(&self, id: i64) -> Result<Option<Endpoint>, StoreError> {
        let row = crate::db::query(&format!("SELECT {COLUMNS} FROM webhook_endpoints WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.reads)
            .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// Removes the live endpoint `id` (ids are global); answers it as it was, if there was one.
    pub async fn remove_webhook_endpoint(&self, id: i64, now: i64) -> Result<Option<Endpoint>, StoreError> {
        let row = crate::db::query(&format!(
            "UPDATE webhook_endpoints SET removed_at = $1 WHERE id = $2 AND removed_at IS NULL RETURNING {COLUMNS}"
        ))
        .bind(now)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(from_row).transpose()
    }
}

#[cfg(test)]
mod tests;

// ---- deliveries ----

/// A notification to deliver to one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDelivery {
    pub site_id: i64,
    pub endpoint_id: i64,
    pub event_id: i64,
    pub kind: String,
    /// Its `webhook-id`.
    pub message_id: String,
    pub body: String,
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryState {
    Pending,
    Retrying,
    Delivered,
    Failed,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Retrying => "retrying",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [DeliveryState::Pending, DeliveryState::Retrying, DeliveryState::Delivered, DeliveryState::Failed]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// A delivery as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub id: i64,
    pub new: NewDelivery,
    pub state: DeliveryState,
    pub attempts: i64,
    /// Service time, milliseconds.
    pub next_attempt_at: i64,
    pub created_at: i64,
    pub delivered_at: Option<i64>,
}

/// One attempt of a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// Service time, milliseconds.
    pub at: i64,
    pub status_code: Option<i64>,
    pub error: Option<String>,
    pub duration_ms: i64,
}

/// What an attempt leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterAttempt {
    Delivered,
    /// Tried again at this service time (milliseconds).
    Retry(i64),
    Failed,
}

/// What redelivering one delivery found ([`Store::redeliver_webhook_delivery`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redelivery {
    /// It was `failed`: it is `retrying` now, due at once (as it is now).
    Redelivered(Delivery),
    /// It is not `failed` (its state): nothing changed.
    NotFailed(DeliveryState),
    /// Its endpoint was removed: nothing changed (nothing is sent to a removed endpoint).
    EndpointRemoved,
    /// There is no delivery with this id.
    NotFound,
}

/// Rows written by one statement (deliveries of 10 values, attempts of 5: within every
/// backend's parameter limit).
const ROWS_PER_STATEMENT: usize = 100;

const DELIVERY_COLUMNS: &str = "id, site_id, endpoint_id, event_id, kind, message_id, body, state, attempts, \
                                next_attempt_at, created_at, delivered_at";

fn delivery_from_row(row: &DbRow) -> Result<Delivery, StoreError> {
    let state: String = row.try_get("state")?;
    Ok(Delivery {
        id: row.try_get("id")?,
        new: NewDelivery {
            site_id: row.try_get("site_id")?,
            endpoint_id: row.try_get("endpoint_id")?,
            event_id: row.try_get("event_id")?,
            kind: row.try_get("kind")?,
            message_id: row.try_get("message_id")?,
            body: row.try_get("body")?,
        },
        state: DeliveryState::parse(&state).ok_or_else(|| StoreError::Invalid(format!("delivery state {state}")))?,
        attempts: row.try_get("attempts")?,
        next_attempt_at: row.try_get("next_attempt_at")?,
        created_at: row.try_get("created_at")?,
        delivered_at: row.try_get("delivered_at")?,
    })
}

impl Store {
    /// Up to `limit` events whose notifications are not written yet, in order.
    pub async fn unnotified_events(&self, limit: i64) -> Result<Vec<crate::events::Event>, StoreError> {
        let rows = crate::db::query(&format!(
            "SELECT {} FROM domain_events WHERE notified = 0 ORDER BY id LIMIT $1",
            crate::events::COLUMNS
        ))
        .bind(limit)
        .fetch_all(&self.reads)
        .await?;
        rows.iter().map(crate::events::event_from_row).collect()
    }

    /// Writes the notifications of `events` (their deliveries, `now_ms` service time) and marks
    /// the events notified, in one database transaction and by compare-and-set: the deliveries of
    /// an event another process marked meanwhile are not written. Answers how many events this
    /// call marked.
    pub async fn record_notifications(
        &self,
        events: &[i64],
        deliveries: &[NewDelivery],
        now_ms: i64,
    ) -> Result<usize, StoreError> {
        if events.is_empty() {
            return Ok(0);
        }
        let mut work = self.begin_work().await?;
        let list = events.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
        let marked: std::collections::HashSet<i64> = crate::db::uncached(&format!(
            "UPDATE domain_events SET notified = 1 WHERE notified = 0 AND id IN ({list}) RETURNING id"
        ))
        .fetch_all(work.tx.exec())
        .await?
        .iter()
        .map(|r| r.try_get("id"))
        .collect::<Result<_, _>>()?;
        let kept: Vec<&NewDelivery> = deliveries.iter().filter(|d| marked.contains(&d.event_id)).collect();
        for chunk in kept.chunks(ROWS_PER_STATEMENT) {
            let sql = format!(
                "INSERT INTO webhook_deliveries (site_id, endpoint_id, event_id, kind, message_id, body, state, \
                 attempts, next_attempt_at, created_at) VALUES {}",
                work.backend.rows(chunk.len(), 10, 1)
            );
            let mut query = crate::db::uncached(&sql);
            for d in chunk {
                query = query
                    .bind(d.site_id)
                    .bind(d.endpoint_id)
                    .bind(d.event_id)
                    .bind(d.kind.clone())
                    .bind(d.message_id.clone())
                    .bind(d.body.clone())
                    .bind(DeliveryState::Pending.as_str())
                    .bind(0_i64)
                    .bind(now_ms)
                    .bind(now_ms);
            }
            query.execute(work.tx.exec()).await?;
        }
        work.commit().await?;
        Ok(marked.len())
    }

    /// Claims, until `claimed_until` (ms), each live endpoint's next deliveries in order: its
    /// oldest undelivered one when it is due at `now_ms` and no unexpired claim holds it, then up
    /// to `batch - 1` of those that follow it, without a gap (each due and unclaimed). Answers the
    /// deliveries claimed, endpoint by endpoint, each endpoint's oldest first.
    ///
    /// Only the holder of an endpoint's oldest undelivered delivery claims what follows it, so
    /// two processes never hold deliveries of one endpoint at once while their claims last.
    pub async fn claim_due_deliveries(
        &self,
        now_ms: i64,
        claimed_until: i64,
        batch: usize,
    ) -> Result<Vec<Vec<Delivery>>, StoreError> {
        let rows = crate::db::query(&format!(
            // Each live endpoint's oldest undelivered delivery, found through the partial index
            // on (endpoint_id, id): one index probe per endpoint, however many wait.
            "UPDATE webhook_deliveries SET claimed_until = $1 WHERE id IN (\
               SELECT (SELECT d.id FROM webhook_deliveries d WHERE d.endpoint_id = e.id \
                       AND d.state IN ('pending', 'retrying') ORDER BY d.id LIMIT 1) \
               FROM webhook_endpoints e WHERE e.removed_at IS NULL) \
             AND next_attempt_at <= $2 AND (claimed_until IS NULL OR claimed_until < $2) \
             AND state IN ('pending', 'retrying') RETURNING {DELIVERY_COLUMNS}"
        ))
        .bind(claimed_until)
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await?;
        let mut heads = rows.iter().map(delivery_from_row).collect::<Result<Vec<_>, _>>()?;
        heads.sort_by_key(|d| d.id);
        let follow = i64::try_from(batch.saturating_sub(1)).unwrap_or(i64::MAX);
        let mut claimed = Vec::with_capacity(heads.len());
        for head in heads {
            let mut run = vec![head];
            if follow > 0 {
                run.extend(self.claim_followers(&run[0], follow, now_ms, claimed_until).await?);
            }
            claimed.push(run);
        }
        Ok(claimed)
    }

    /// Claims up to `limit` undelivered deliveries that follow the claimed `head` of their
    /// endpoint without a gap: the run stops at the first one not due or claimed elsewhere.
    async fn claim_followers(
        &self,
        head: &Delivery,
        limit: i64,
        now_ms: i64,
        claimed_until: i64,
    ) -> Result<Vec<Delivery>, StoreError> {
        let next = crate::db::query(
            "SELECT id, next_attempt_at, claimed_until FROM webhook_deliveries WHERE endpoint_id = $1 AND id > $2 \
             AND state IN ('pending', 'retrying') ORDER BY id LIMIT $3",
        )
        .bind(head.new.endpoint_id)
        .bind(head.id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut run = Vec::new();
        for row in &next {
            let due: i64 = row.try_get("next_attempt_at")?;
            let claim: Option<i64> = row.try_get("claimed_until")?;
            if due > now_ms || claim.is_some_and(|c| c >= now_ms) {
                break;
            }
            run.push(row.try_get::<i64, _>("id")?);
        }
        if run.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = run.iter().map(i64::to_string).collect();
        let rows = crate::db::uncached(&format!(
            "UPDATE webhook_deliveries SET claimed_until = $1 WHERE id IN ({}) \
             AND (claimed_until IS NULL OR claimed_until < $2) AND state IN ('pending', 'retrying') \
             RETURNING {DELIVERY_COLUMNS}",
            ids.join(", ")
        ))
        .bind(claimed_until)
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await?;
        let mut got = rows.iter().map(delivery_from_row).collect::<Result<Vec<_>, _>>()?;
        got.sort_by_key(|d| d.id);
        // A follower changed between the read and the claim: the run ends before it, and what
        // was claimed after it is let go at once.
        let kept = run.iter().zip(&got).take_while(|(want, d)| **want == d.id).count();
        let dropped: Vec<i64> = got[kept..].iter().map(|d| d.id).collect();
        got.truncate(kept);
        if !dropped.is_empty() {
            self.release_deliveries(&dropped).await?;
        }
        Ok(got)
    }

    /// Lets go of claimed deliveries that were not attempted.
    async fn release_deliveries(&self, ids: &[i64]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
        crate::db::uncached(&format!(
            "UPDATE webhook_deliveries SET claimed_until = NULL WHERE id IN ({})",
            ids.join(", ")
        ))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records the attempts of claimed deliveries and what each leaves (their claims end), and
    /// lets go of the claimed deliveries `released` that were not attempted; in one transaction.
    pub async fn record_attempts(
        &self,
        attempted: &[(i64, Attempt, AfterAttempt)],
        released: &[i64],
    ) -> Result<(), StoreError> {
        let mut work = self.begin_work().await?;
        for chunk in attempted.chunks(ROWS_PER_STATEMENT) {
            let sql = format!(
                "INSERT INTO webhook_attempts (delivery_id, at, status_code, error, duration_ms) VALUES {}",
                work.backend.rows(chunk.len(), 5, 1)
            );
            let mut query = crate::db::uncached(&sql);
            for (id, attempt, _) in chunk {
                query = query
                    .bind(*id)
                    .bind(attempt.at)
                    .bind(attempt.status_code)
                    .bind(attempt.error.clone())
                    .bind(attempt.duration_ms);
            }
            query.execute(work.tx.exec()).await?;
        }
        for chunk in attempted.chunks(ROWS_PER_STATEMENT) {
            let sql = format!(
                "UPDATE webhook_deliveries SET state = v.column2, attempts = attempts + 1, \
                 next_attempt_at = CAST(v.column3 AS BIGINT), delivered_at = CAST(v.column4 AS BIGINT), \
                 claimed_until = NULL FROM (VALUES {}) AS v WHERE webhook_deliveries.id = v.column1",
                work.backend.rows(chunk.len(), 4, 1)
            );
            let mut query = crate::db::uncached(&sql);
            for (id, attempt, after) in chunk {
                let (state, next, delivered) = match after {
                    AfterAttempt::Delivered => (DeliveryState::Delivered, attempt.at, Some(attempt.at)),
                    AfterAttempt::Retry(at) => (DeliveryState::Retrying, *at, None),
                    AfterAttempt::Failed => (DeliveryState::Failed, attempt.at, None),
                };
                query = query.bind(*id).bind(state.as_str()).bind(next).bind(delivered);
            }
            query.execute(work.tx.exec()).await?;
        }
        if !released.is_empty() {
            let ids: Vec<String> = released.iter().map(i64::to_string).collect();
            crate::db::uncached(&format!(
                "UPDATE webhook_deliveries SET claimed_until = NULL WHERE id IN ({})",
                ids.join(", ")
            ))
            .execute(work.tx.exec())
            .await?;
        }
        work.commit().await?;
        Ok(())
    }

    /// The site's deliveries (of one endpoint, in one state, when given), oldest first, with
    /// their attempts.
    pub async fn webhook_deliveries(
        &self,
        site_id: i64,
        endpoint_id: Option<i64>,
        state: Option<DeliveryState>,
    ) -> Result<Vec<(Delivery, Vec<Attempt>)>, StoreError> {
        let rows = crate::db::query(&format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE site_id = $1 \
             AND ($2 IS NULL OR endpoint_id = $2) AND ($3 IS NULL OR state = $3) ORDER BY id"
        ))
        .bind(site_id)
        .bind(endpoint_id)
        .bind(state.map(|s| s.as_str()))
        .fetch_all(&self.reads)
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let delivery = delivery_from_row(row)?;
            let attempts = crate::db::query(
                "SELECT at, status_code, error, duration_ms FROM webhook_attempts WHERE delivery_id = $1 ORDER BY id",
            )
            .bind(delivery.id)
            .fetch_all(&self.reads)
            .await?
            .iter()
            .map(|r| {
                Ok(Attempt {
                    at: r.try_get("at")?,
                    status_code: r.try_get("status_code")?,
                    error: r.try_get("error")?,
                    duration_ms: r.try_get("duration_ms")?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
            out.push((delivery, attempts));
        }
        Ok(out)
    }

    /// Puts the `failed` delivery `id` back to `retrying`, due at `now_ms` and unclaimed, when
    /// its endpoint is live; its attempts and their count stay. The delivery and its endpoint
    /// are read under their row locks: a delivery in any other state is left as it is and
    /// answered with that state.
    pub async fn redeliver_webhook_delivery(&self, id: i64, now_ms: i64) -> Result<Redelivery, StoreError> {
        // One conditional write (no read first, which SQLite could not upgrade to a write while
        // another process writes); when it changes nothing, a read says why.
        let row = crate::db::query(&format!(
            "UPDATE webhook_deliveries SET state = 'retrying', next_attempt_at = $1, claimed_until = NULL \
             WHERE id = $2 AND state = 'failed' \
             AND endpoint_id IN (SELECT id FROM webhook_endpoints WHERE removed_at IS NULL) \
             RETURNING {DELIVERY_COLUMNS}"
        ))
        .bind(now_ms)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        if let Some(row) = row {
            return Ok(Redelivery::Redelivered(delivery_from_row(&row)?));
        }
        let row = crate::db::query(
            "SELECT d.state, e.removed_at FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id \
             WHERE d.id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(Redelivery::NotFound) };
        let state: String = row.try_get("state")?;
        let state =
            DeliveryState::parse(&state).ok_or_else(|| StoreError::Invalid(format!("delivery state {state}")))?;
        let removed: Option<i64> = row.try_get("removed_at")?;
        Ok(match state {
            DeliveryState::Failed if removed.is_some() => Redelivery::EndpointRemoved,
            // Redelivered by someone else between the two statements: it is on its way again.
            DeliveryState::Failed => Redelivery::NotFailed(DeliveryState::Retrying),
            state => Redelivery::NotFailed(state),
        })
    }

    /// Puts every `failed` delivery of the site (of every site with `None`) whose endpoint is
    /// live back to `retrying`, due at `now_ms` and unclaimed, as
    /// [`Store::redeliver_webhook_delivery`] does one; answers their ids, in order.
    pub async fn redeliver_failed_webhook_deliveries(
        &self,
        site_id: Option<i64>,
        now_ms: i64,
    ) -> Result<Vec<i64>, StoreError> {
        let rows = crate::db::query(
            "UPDATE webhook_deliveries SET state = 'retrying', next_attempt_at = $1, claimed_until = NULL \
             WHERE state = 'failed' AND ($2 IS NULL OR site_id = $2) \
             AND endpoint_id IN (SELECT id FROM webhook_endpoints WHERE removed_at IS NULL) RETURNING id",
        )
        .bind(now_ms)
        .bind(site_id)
        .fetch_all(&self.pool)
        .await?;
        let mut ids = rows.iter().map(|r| r.try_get("id")).collect::<Result<Vec<i64>, _>>()?;
        ids.sort_unstable();
        Ok(ids)
    }
}

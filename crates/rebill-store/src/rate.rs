//! Rate limits: per site, a sliding five-minute window of one-minute buckets kept in the
//! database, so that every service process on one database shares the count. Sandbox sites may
//! make 400 requests a minute (every method counts), production sites 1,000 (GET and HEAD only).
//! A refused request is not counted. Reaching the limit queues an alert e-mail to the site's
//! technical contact at most once every three hours.

use sqlx::Row;

use crate::db::Conn;
use crate::{Mode, Site, Store, StoreError};

/// Minutes in the sliding window.
pub const WINDOW_MINUTES: i64 = 5;
/// Least time between two rate-limit alerts of a site.
pub const ALERT_INTERVAL_SECONDS: i64 = 3 * 3600;

/// Requests per minute the site may make: the operator's setting, else its mode's default.
pub fn per_minute(site: &Site) -> i64 {
    if let Some(n) = site.rate_limit_per_minute {
        return n;
    }
    match site.mode {
        Mode::Sandbox => 400,
        Mode::Production => 1000,
    }
}

/// The outcome of one request against the limit, with the values of the `X-RateLimit-*` headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateDecision {
    pub allowed: bool,
    /// Requests allowed in the window (per minute × 5).
    pub limit: i64,
    /// Requests left before refusal.
    pub remaining: i64,
    /// Epoch seconds when the window is empty again if no more requests come.
    pub reset: i64,
}

impl Store {
    /// Counts a request of `site` at `now` (when `counted`) and decides whether it may go on.
    ///
    /// The increment and the check run in one transaction: the upsert locks the site's bucket
    /// of the current minute, so concurrent requests (from any process) are counted one after
    /// the other, and a refused request is rolled back rather than counted.
    pub async fn rate_limit(&self, site: &Site, counted: bool, now: i64) -> Result<RateDecision, StoreError> {
        let limit = per_minute(site) * WINDOW_MINUTES;
        let minute = now.div_euclid(60);
        let oldest = minute - (WINDOW_MINUTES - 1);
        if !counted {
            let (used, last) = window(&mut *self.pool.acquire().await?, site, oldest).await?;
            let reset = last.map_or(now, |m| (m + WINDOW_MINUTES) * 60);
            return Ok(RateDecision { allowed: true, limit, remaining: (limit - used).max(0), reset });
        }
        let mut tx = self.pool.begin().await?;
        // Counters need no durable commit: a lost last increment after a crash is harmless.
        self.backend.relaxed_commit(&mut tx).await?;
        // One statement counts the request and reads the rest of the window (the subqueries see
        // the earlier minutes, which the statement does not change).
        let row = sqlx::query(
            "INSERT INTO rate_buckets (site_id, minute, count) VALUES ($1, $2, 1) \
             ON CONFLICT (site_id, minute) DO UPDATE SET count = rate_buckets.count + 1 \
             RETURNING count, \
             (SELECT CAST(COALESCE(SUM(b.count), 0) AS BIGINT) FROM rate_buckets b \
              WHERE b.site_id = $1 AND b.minute >= $3 AND b.minute < $2) AS earlier",
        )
        .bind(site.id)
        .bind(minute)
        .bind(oldest)
        .fetch_one(&mut *tx)
        .await?;
        let current: i64 = row.try_get("count")?;
        let used = current + row.try_get::<i64, _>("earlier")?;
        if current == 1 {
            // First request of a minute: buckets that left the window are no longer needed.
            sqlx::query("DELETE FROM rate_buckets WHERE site_id = $1 AND minute < $2")
                .bind(site.id)
                .bind(oldest)
                .execute(&mut *tx)
                .await?;
        }
        if used > limit {
            tx.rollback().await?;
            let (_, last) = window(&mut *self.pool.acquire().await?, site, oldest).await?;
            let reset = last.map_or(now, |m| (m + WINDOW_MINUTES) * 60);
            self.rate_alert(site, limit, now).await?;
            return Ok(RateDecision { allowed: false, limit, remaining: 0, reset });
        }
        tx.commit().await?;
        // The request was counted in the current minute, so the window empties five minutes on.
        Ok(RateDecision { allowed: true, limit, remaining: limit - used, reset: (minute + WINDOW_MINUTES) * 60 })
    }

    /// Queues the rate-limit alert unless one went out in the last three hours (one statement
    /// decides, so concurrent processes send it once).
    async fn rate_alert(&self, site: &Site, limit: i64, now: i64) -> Result<(), StoreError> {
        let claimed = sqlx::query(
            "UPDATE sites SET rate_alert_at = $1 WHERE id = $2 AND (rate_alert_at IS NULL OR rate_alert_at <= $3)",
        )
        .bind(now)
        .bind(site.id)
        .bind(now - ALERT_INTERVAL_SECONDS)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if claimed == 1 {
            let body = format!(
                "Site {} reached its API rate limit of {limit} requests in five minutes; further requests are \
                 refused with 429 until the window has room again. This alert is sent at most once every three hours.",
                site.name
            );
            self.alert(site, "rate_limit", &body, now).await?;
        }
        Ok(())
    }
}

/// Requests of `site` in the window starting at minute `oldest`, and the latest minute with any.
async fn window(conn: &mut Conn, site: &Site, oldest: i64) -> Result<(i64, Option<i64>), StoreError> {
    let row = sqlx::query(
        "SELECT CAST(COALESCE(SUM(count), 0) AS BIGINT) AS used, MAX(minute) AS last \
         FROM rate_buckets WHERE site_id = $1 AND minute >= $2 AND count > 0",
    )
    .bind(site.id)
    .bind(oldest)
    .fetch_one(conn)
    .await?;
    Ok((row.try_get("used")?, row.try_get("last")?))
}

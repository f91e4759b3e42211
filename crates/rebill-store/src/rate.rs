//! Rate limits: per site, a sliding five-minute window of one-minute buckets kept in the
//! database, so that every service process on one database shares the count. Sandbox sites may
//! make 400 requests a minute (every method counts), production sites 1,000 (GET and HEAD only).
//! A refused request is not counted. Reaching the limit queues an alert e-mail to the site's
//! technical contact at most once every three hours.
//!
//! A process does not write the database for every request: it **reserves** a share of the
//! site's window ([`share`] requests, 5 % of the limit, from 1 to 1,000) in one short database
//! transaction that adds the share to the current minute's bucket only while the window has room
//! (the bucket's row is locked, so reservations of several processes follow each other), then
//! counts requests against what it reserved in memory. What it has not used goes back to the
//! bucket after [`LEASE`], when the minute changes or when the site's limit changes.
//!
//! - **One process** admits exactly the limit: it reserves only what the window has room for,
//!   and what it holds unused is not counted as used in its headers.
//! - **N processes** never admit more than the limit together (every admitted request was
//!   reserved in the database first). A request may be refused while other processes hold
//!   unused shares: at most (N − 1) × [`share`] requests, for at most [`LEASE`] (a process that
//!   dies holding a share leaves it counted until it leaves the window, five minutes at most).
//! - `X-RateLimit-Remaining` is what the window had left at this process's last reservation,
//!   less what it has used since; other processes' use shows from its next reservation on.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::settings::real_millis;
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

/// How long a process keeps requests it reserved and has not used.
pub const LEASE: Duration = Duration::from_secs(1);

/// Requests a process reserves at once for a window of `limit`: 5 %, from 1 to 1,000.
pub fn share(limit: i64) -> i64 {
    (limit / 20).clamp(1, 1000)
}

/// The reservations this process holds, by site.
#[derive(Debug, Default)]
pub(crate) struct Budgets {
    sites: std::sync::Mutex<HashMap<i64, Arc<tokio::sync::Mutex<Budget>>>>,
}

impl Budgets {
    fn of(&self, site_id: i64) -> Arc<tokio::sync::Mutex<Budget>> {
        let mut sites = self.sites.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        sites.entry(site_id).or_default().clone()
    }

    fn all(&self) -> Vec<(i64, Arc<tokio::sync::Mutex<Budget>>)> {
        let sites = self.sites.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        sites.iter().map(|(id, b)| (*id, b.clone())).collect()
    }
}

/// One site's reservation in this process.
#[derive(Debug, Default)]
struct Budget {
    /// The minute whose bucket holds the reservation.
    minute: i64,
    /// The window's limit it was made under.
    limit: i64,
    /// Requests reserved and not used yet.
    left: i64,
    /// The window's requests, reservations included, right after the reservation.
    used: i64,
    /// Real time in milliseconds until which the reservation holds.
    until: i64,
}

impl Budget {
    /// Whether the reservation still serves requests of `minute` under `limit`.
    fn holds(&self, minute: i64, limit: i64, real: i64) -> bool {
        self.minute == minute && self.limit == limit && self.until > real
    }
}

impl Store {
    /// Counts a request of `site` at `now` (when `counted`) and decides whether it may go on
    /// (see the module documentation).
    pub async fn rate_limit(&self, site: &Site, counted: bool, now: i64) -> Result<RateDecision, StoreError> {
        let limit = per_minute(site) * WINDOW_MINUTES;
        let minute = now.div_euclid(60);
        let oldest = minute - (WINDOW_MINUTES - 1);
        let reset = (minute + WINDOW_MINUTES) * 60;
        let budget = self.budgets.of(site.id);
        let mut budget = budget.lock().await;
        let real = real_millis();
        if !budget.holds(minute, limit, real) {
            self.give_back(site.id, &mut budget).await?;
        }
        if !counted {
            if budget.holds(minute, limit, real) {
                let remaining = (limit - (budget.used - budget.left)).max(0);
                return Ok(RateDecision { allowed: true, limit, remaining, reset });
            }
            drop(budget);
            let (used, reset) = self.window(site, oldest, now).await?;
            return Ok(RateDecision { allowed: true, limit, remaining: (limit - used).max(0), reset });
        }
        if budget.left == 0 {
            *budget = self.reserve(site.id, limit, minute, oldest).await?;
        }
        if budget.left > 0 {
            budget.left -= 1;
            let used = budget.used - budget.left;
            return Ok(RateDecision { allowed: true, limit, remaining: (limit - used).max(0), reset });
        }
        drop(budget);
        let (_, reset) = self.window(site, oldest, now).await?;
        self.rate_alert(site, limit, now).await?;
        Ok(RateDecision { allowed: false, limit, remaining: 0, reset })
    }

    /// Reserves up to [`share`] requests of the site's window in the bucket of `minute`, as much
    /// as the window has room for (nothing when it is full).
    async fn reserve(&self, site_id: i64, limit: i64, minute: i64, oldest: i64) -> Result<Budget, StoreError> {
        let mut tx = crate::db::begin(&self.pool).await?;
        // Counters need no durable commit: a lost reservation after a crash is harmless.
        self.backend.relaxed_commit(&mut tx).await?;
        // The bucket's row first, locked: reservations of other processes wait for this one.
        let current: i64 = crate::db::query(
            "INSERT INTO rate_buckets (site_id, minute, count) VALUES ($1, $2, 0) \
             ON CONFLICT (site_id, minute) DO UPDATE SET count = rate_buckets.count RETURNING count",
        )
        .bind(site_id)
        .bind(minute)
        .fetch_one(tx.exec())
        .await?
        .try_get("count")?;
        let earlier: i64 = crate::db::query(
            "SELECT CAST(COALESCE(SUM(count), 0) AS BIGINT) AS n FROM rate_buckets \
             WHERE site_id = $1 AND minute >= $2 AND minute < $3",
        )
        .bind(site_id)
        .bind(oldest)
        .bind(minute)
        .fetch_one(tx.exec())
        .await?
        .try_get("n")?;
        let granted = (limit - earlier - current).min(share(limit)).max(0);
        if granted > 0 {
            crate::db::query("UPDATE rate_buckets SET count = count + $1 WHERE site_id = $2 AND minute = $3")
                .bind(granted)
                .bind(site_id)
                .bind(minute)
                .execute(tx.exec())
                .await?;
        }
        if current == 0 {
            // First reservation of a minute: buckets that left the window are no longer needed.
            crate::db::query("DELETE FROM rate_buckets WHERE site_id = $1 AND minute < $2")
                .bind(site_id)
                .bind(oldest)
                .execute(tx.exec())
                .await?;
        }
        tx.commit().await?;
        Ok(Budget {
            minute,
            limit,
            left: granted,
            used: earlier + current + granted,
            until: real_millis() + LEASE.as_millis() as i64,
        })
    }

    /// Gives what the reservation has not used back to its bucket.
    async fn give_back(&self, site_id: i64, budget: &mut Budget) -> Result<(), StoreError> {
        if budget.left > 0 {
            crate::db::query(
                "UPDATE rate_buckets SET count = count - $1 WHERE site_id = $2 AND minute = $3 AND count >= $1",
            )
            .bind(budget.left)
            .bind(site_id)
            .bind(budget.minute)
            .execute(&self.pool)
            .await?;
        }
        *budget = Budget::default();
        Ok(())
    }

    /// Gives back every reservation whose lease ended (the serving process's watcher calls it,
    /// so an idle process holds nothing for long).
    pub(crate) async fn give_back_ended(&self) -> Result<(), StoreError> {
        let real = real_millis();
        for (site_id, budget) in self.budgets.all() {
            let Ok(mut budget) = budget.try_lock() else { continue };
            if budget.left > 0 && budget.until <= real {
                self.give_back(site_id, &mut budget).await?;
            }
        }
        Ok(())
    }

    /// Queues the rate-limit alert unless one went out in the last three hours (one statement
    /// decides, so concurrent processes send it once).
    async fn rate_alert(&self, site: &Site, limit: i64, now: i64) -> Result<(), StoreError> {
        let claimed = crate::db::query(
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

impl Store {
    /// Requests of `site` in the window starting at minute `oldest`, and when the window is
    /// empty again if no more come (`now` when it is empty already).
    async fn window(&self, site: &Site, oldest: i64, now: i64) -> Result<(i64, i64), StoreError> {
        let row = crate::db::query(
            "SELECT CAST(COALESCE(SUM(count), 0) AS BIGINT) AS used, MAX(minute) AS last \
             FROM rate_buckets WHERE site_id = $1 AND minute >= $2 AND count > 0",
        )
        .bind(site.id)
        .bind(oldest)
        .fetch_one(&self.pool)
        .await?;
        let last: Option<i64> = row.try_get("last")?;
        Ok((row.try_get("used")?, last.map_or(now, |m| (m + WINDOW_MINUTES) * 60)))
    }
}

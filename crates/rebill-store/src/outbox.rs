//! The alert outbox: delivery bookkeeping for the mailer.
//!
//! A mailer claims a batch of due alerts, delivers them and then marks each one sent or records
//! the failed attempt. Claims are leases (`claim_token`, `claimed_until`): while one is held no
//! other mailer gets the alert, even when several service processes share one PostgreSQL
//! database (the claim statement takes its rows with `FOR UPDATE SKIP LOCKED`); when a mailer
//! dies, its alerts come back once the lease ends. SQLite has a single writer, so the same
//! statement without the locking clause is enough there.
//!
//! Alerts without a recipient (the site has no technical contact) stay in the outbox unsent and
//! are never claimed. A failed delivery is retried with exponential backoff
//! ([`retry_delay`]) and never dropped.

use crate::dialect::Locking;
use crate::{Alert, Store, StoreError, alert_from_row};

/// First wait after a failed delivery; each further failure doubles it.
pub const RETRY_BASE_SECONDS: i64 = 30;

/// Longest wait between two delivery attempts.
pub const RETRY_MAX_SECONDS: i64 = 3600;

/// Longest `last_error` kept, in characters.
const ERROR_MAX_CHARS: usize = 500;

const ALERT_COLUMNS: &str = "id, site_id, kind, recipient, subject, body, created_at, sent_at";

/// How long to wait before the next attempt after `attempts` deliveries were started:
/// 30 s, 60 s, 120 s, … up to an hour.
pub fn retry_delay(attempts: i64) -> i64 {
    let doublings = attempts.saturating_sub(1).clamp(0, 20);
    RETRY_BASE_SECONDS.saturating_mul(1 << doublings).min(RETRY_MAX_SECONDS)
}

/// An alert claimed for delivery: no other claim returns it until `lease_until`, unless it is
/// given back by [`Store::record_alert_failure`] or [`Store::release_alert`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedAlert {
    pub alert: Alert,
    /// The recipient (never empty: alerts without one are not claimed).
    pub recipient: String,
    /// Deliveries started, this one included.
    pub attempts: i64,
    /// Identifies this claim.
    pub token: String,
    /// End of the lease (epoch seconds).
    pub lease_until: i64,
}

/// Where an alert stands in the outbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub alert_id: i64,
    /// Deliveries started.
    pub attempts: i64,
    /// Why the last attempt failed (cleared when the alert is sent).
    pub last_error: Option<String>,
    /// Not claimed before this time (epoch seconds).
    pub next_attempt_at: i64,
    /// Lease of a mailer delivering it now.
    pub claimed_until: Option<i64>,
    pub sent_at: Option<i64>,
    /// When it was logged as queued.
    pub announced_at: Option<i64>,
}

fn claim_token() -> Result<String, StoreError> {
    let mut buf = [0u8; 16];
    getrandom::fill(&mut buf).map_err(|e| StoreError::Invalid(format!("random source: {e}")))?;
    Ok(hex::encode(buf))
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

impl Store {
    /// Claims up to `limit` unsent alerts that have a recipient and are due at `now`, oldest
    /// first, for `lease_seconds`. Each claim counts as an attempt.
    pub async fn claim_alerts(
        &self,
        now: i64,
        lease_seconds: i64,
        limit: i64,
    ) -> Result<Vec<ClaimedAlert>, StoreError> {
        if lease_seconds <= 0 || limit <= 0 {
            return Err(StoreError::Invalid(format!("claim of {limit} alerts for {lease_seconds} s")));
        }
        let lock = self.backend.lock_clause(Locking::SkipLocked, None);
        let token = claim_token()?;
        let lease_until = now.saturating_add(lease_seconds);
        let rows = crate::db::query(&format!(
            "UPDATE alerts SET claim_token = $1, claimed_until = $2, attempts = attempts + 1 \
             WHERE id IN (SELECT id FROM alerts \
                 WHERE sent_at IS NULL AND recipient IS NOT NULL AND recipient <> '' \
                   AND next_attempt_at <= $3 AND (claimed_until IS NULL OR claimed_until <= $3) \
                 ORDER BY id LIMIT $4{lock}) \
             RETURNING {ALERT_COLUMNS}, attempts"
        ))
        .bind(&token)
        .bind(lease_until)
        .bind(now)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut claimed = rows
            .iter()
            .map(|row| {
                let alert = alert_from_row(row)?;
                Ok(ClaimedAlert {
                    recipient: alert.recipient.clone().unwrap_or_default(),
                    alert,
                    attempts: row.try_get("attempts")?,
                    token: token.clone(),
                    lease_until,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        claimed.sort_by_key(|c| c.alert.id);
        Ok(claimed)
    }

    /// Records that a claimed alert was delivered at `now`.
    pub async fn mark_alert_sent(&self, claimed: &ClaimedAlert, now: i64) -> Result<(), StoreError> {
        // Recorded even if the lease ran out meanwhile: the message did go out.
        crate::db::query(
            "UPDATE alerts SET sent_at = $1, last_error = NULL, claim_token = NULL, claimed_until = NULL \
             WHERE id = $2 AND sent_at IS NULL",
        )
        .bind(now)
        .bind(claimed.alert.id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records a failed delivery of a claimed alert: it stays in the outbox and is due again
    /// after [`retry_delay`]. Returns that time (epoch seconds).
    pub async fn record_alert_failure(&self, claimed: &ClaimedAlert, error: &str, now: i64) -> Result<i64, StoreError> {
        let next = now.saturating_add(retry_delay(claimed.attempts));
        crate::db::query(
            "UPDATE alerts SET last_error = $1, next_attempt_at = $2, claim_token = NULL, claimed_until = NULL \
             WHERE id = $3 AND claim_token = $4 AND sent_at IS NULL",
        )
        .bind(truncate(error, ERROR_MAX_CHARS))
        .bind(next)
        .bind(claimed.alert.id)
        .bind(&claimed.token)
        .execute(&self.pool)
        .await?;
        Ok(next)
    }

    /// Gives a claimed alert back without having tried it (the attempt is not counted).
    pub async fn release_alert(&self, claimed: &ClaimedAlert) -> Result<(), StoreError> {
        crate::db::query(
            "UPDATE alerts SET claim_token = NULL, claimed_until = NULL, attempts = attempts - 1 \
             WHERE id = $1 AND claim_token = $2 AND sent_at IS NULL",
        )
        .bind(claimed.alert.id)
        .bind(&claimed.token)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Takes up to `limit` alerts not yet logged as queued, oldest first, and marks them logged
    /// at `now`: each alert is returned once, even to several processes sharing the database.
    pub async fn announce_alerts(&self, now: i64, limit: i64) -> Result<Vec<Alert>, StoreError> {
        if limit <= 0 {
            return Err(StoreError::Invalid(format!("announcement of {limit} alerts")));
        }
        let lock = self.backend.lock_clause(Locking::SkipLocked, None);
        let rows = crate::db::query(&format!(
            "UPDATE alerts SET announced_at = $1 \
             WHERE id IN (SELECT id FROM alerts WHERE announced_at IS NULL ORDER BY id LIMIT $2{lock}) \
             RETURNING {ALERT_COLUMNS}"
        ))
        .bind(now)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut alerts = rows.iter().map(alert_from_row).collect::<Result<Vec<_>, _>>()?;
        alerts.sort_by_key(|a| a.id);
        Ok(alerts)
    }

    /// The delivery state of one alert (`None`: no such alert).
    pub async fn alert_delivery(&self, alert_id: i64) -> Result<Option<Delivery>, StoreError> {
        let row = crate::db::query(
            "SELECT id, attempts, last_error, next_attempt_at, claimed_until, sent_at, announced_at \
             FROM alerts WHERE id = $1",
        )
        .bind(alert_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(Delivery {
            alert_id: row.try_get("id")?,
            attempts: row.try_get("attempts")?,
            last_error: row.try_get("last_error")?,
            next_attempt_at: row.try_get("next_attempt_at")?,
            claimed_until: row.try_get("claimed_until")?,
            sent_at: row.try_get("sent_at")?,
            announced_at: row.try_get("announced_at")?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_up_to_an_hour() {
        assert_eq!(retry_delay(0), 30);
        assert_eq!(retry_delay(1), 30);
        assert_eq!(retry_delay(2), 60);
        assert_eq!(retry_delay(3), 120);
        assert_eq!(retry_delay(8), 3600);
        assert_eq!(retry_delay(i64::MAX), 3600);
        assert_eq!(retry_delay(-5), 30);
    }

    #[test]
    fn errors_are_truncated_on_a_character_boundary() {
        assert_eq!(truncate("héllo", 2), "hé…");
        assert_eq!(truncate("abc", 3), "abc");
    }
}

//! The schedule of due work: renewals, trial ends, pause starts and ends, expirations, dunning
//! retries. Each job is a row (`kind`, `subject`, `due_at`), inserted idempotently, claimed with
//! a lease by whichever service process gets to it first (`FOR UPDATE SKIP LOCKED` on
//! PostgreSQL; SQLite has a single writer), and marked done or failed with a retry time. A job
//! whose process dies comes back when its lease ends; the work it does must therefore be
//! idempotent (the invoice engine recomputes and bills only differences).
//!
//! A job is due when `due_at` has passed on its site's clock (sandbox sites can move their clock
//! on; see [`crate::Site::clock_offset`]).

use crate::db::DbRow;
use crate::dialect::Locking;
use crate::work::Work;
use crate::{Site, Store, StoreError, keys};

/// One scheduled piece of work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub id: i64,
    pub site_id: i64,
    /// What to do, e.g. `renewal`, `trial_end`, `pause_start`, `expiration`, `dunning`.
    pub kind: String,
    /// What it is about, e.g. a subscription's uuid.
    pub subject: String,
    /// Epoch seconds on the site's clock.
    pub due_at: i64,
    pub attempts: i64,
    pub last_error: Option<String>,
    /// The claim of the process working on it (matches only the latest claim).
    pub claim_token: Option<String>,
}

const JOB_COLUMNS: &str = "id, site_id, kind, subject, due_at, attempts, last_error, claim_token";

fn job_from_row(row: &DbRow) -> Result<Job, StoreError> {
    Ok(Job {
        id: row.try_get("id")?,
        site_id: row.try_get("site_id")?,
        kind: row.try_get("kind")?,
        subject: row.try_get("subject")?,
        due_at: row.try_get("due_at")?,
        attempts: row.try_get("attempts")?,
        last_error: row.try_get("last_error")?,
        claim_token: row.try_get("claim_token")?,
    })
}

impl Store {
    /// Schedules `kind` for `subject` at `due_at` (site clock). Scheduling the same job twice
    /// keeps one row.
    pub async fn schedule_job(&self, site_id: i64, kind: &str, subject: &str, due_at: i64) -> Result<(), StoreError> {
        crate::db::query(
            "INSERT INTO jobs (site_id, kind, subject, due_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (kind, subject, due_at) DO NOTHING",
        )
        .bind(site_id)
        .bind(kind)
        .bind(subject)
        .bind(due_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Drops every pending job of `kind` for `subject` (e.g. a renewal after a cancellation).
    pub async fn cancel_jobs(&self, kind: &str, subject: &str) -> Result<u64, StoreError> {
        Ok(crate::db::query("DELETE FROM jobs WHERE kind = $1 AND subject = $2 AND done_at IS NULL")
            .bind(kind)
            .bind(subject)
            .execute(&self.pool)
            .await?
            .rows_affected())
    }

    /// Pending jobs of a subject, earliest first.
    pub async fn pending_jobs(&self, subject: &str) -> Result<Vec<Job>, StoreError> {
        let rows = crate::db::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE subject = $1 AND done_at IS NULL ORDER BY due_at, id"
        ))
        .bind(subject)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(job_from_row).collect()
    }

    /// Claims up to `limit` due jobs, earliest first, for `lease` seconds. A job is due when its
    /// `due_at` has passed on its site's clock (`service_now` plus the site's clock offset). With
    /// `site`, only that site's jobs are claimed.
    pub async fn claim_due_jobs(
        &self,
        site: Option<&Site>,
        service_now: i64,
        lease: i64,
        limit: i64,
    ) -> Result<Vec<Job>, StoreError> {
        let token = keys::generate_private_key();
        let lock = self.backend.lock_clause(Locking::SkipLocked, Some("j"));
        let site_filter = if site.is_some() { " AND j.site_id = $5" } else { "" };
        let sql = format!(
            "UPDATE jobs SET claim_token = $1, claimed_until = $2, attempts = attempts + 1 \
             WHERE id IN (SELECT j.id FROM jobs j JOIN sites s ON s.id = j.site_id \
               WHERE j.done_at IS NULL AND j.due_at <= $3 + s.clock_offset \
               AND (j.claimed_until IS NULL OR j.claimed_until <= $3){site_filter} \
               ORDER BY j.due_at, j.id LIMIT $4{lock}) \
             RETURNING {JOB_COLUMNS}"
        );
        let mut query = crate::db::query(&sql).bind(token).bind(service_now + lease).bind(service_now).bind(limit);
        if let Some(site) = site {
            query = query.bind(site.id);
        }
        let rows = query.fetch_all(&self.pool).await?;
        let mut jobs = rows.iter().map(job_from_row).collect::<Result<Vec<_>, _>>()?;
        jobs.sort_by_key(|j| (j.due_at, j.id));
        Ok(jobs)
    }

    /// Marks a claimed job done (only while the claim is still the job's latest).
    pub async fn complete_job(&self, job: &Job, service_now: i64) -> Result<bool, StoreError> {
        let mut work = self.begin_work().await?;
        let done = work.complete_jobs(&[job], service_now).await?;
        work.commit().await?;
        Ok(done == 1)
    }

    /// Records a failed attempt; the job becomes claimable again at `retry_at` (service clock).
    pub async fn fail_job(&self, job: &Job, error: &str, retry_at: i64) -> Result<(), StoreError> {
        let error: String = error.chars().take(500).collect();
        crate::db::query(
            "UPDATE jobs SET last_error = $1, claimed_until = $2 WHERE id = $3 AND claim_token = $4 AND done_at IS NULL",
        )
        .bind(error)
        .bind(retry_at)
        .bind(job.id)
        .bind(job.claim_token.clone())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// How many of the site's jobs due at or before `site_now` are not done yet, leaving out
    /// those that failed and wait for their retry: the work still to run (or running in some
    /// process) before the site has caught up with its clock.
    pub async fn unfinished_due_jobs(&self, site_id: i64, site_now: i64) -> Result<i64, StoreError> {
        let row = crate::db::query(
            "SELECT COUNT(*) AS n FROM jobs \
             WHERE site_id = $1 AND done_at IS NULL AND due_at <= $2 AND last_error IS NULL",
        )
        .bind(site_id)
        .bind(site_now)
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get("n")?)
    }

    /// How many of the site's jobs due after `after` and at or before `until` are done, jobs of
    /// kind `except_kind` left out.
    pub async fn done_jobs_between(
        &self,
        site_id: i64,
        after: i64,
        until: i64,
        except_kind: &str,
    ) -> Result<i64, StoreError> {
        let row = crate::db::query(
            "SELECT COUNT(*) AS n FROM jobs \
             WHERE site_id = $1 AND done_at IS NOT NULL AND due_at > $2 AND due_at <= $3 AND kind <> $4",
        )
        .bind(site_id)
        .bind(after)
        .bind(until)
        .bind(except_kind)
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get("n")?)
    }

    /// Sets a sandbox site's clock so that its "now" is `site_now` at service time
    /// `service_now`; a clock never goes back.
    pub async fn set_site_clock(&self, site: &Site, site_now: i64, service_now: i64) -> Result<Site, StoreError> {
        if site.mode != crate::Mode::Sandbox {
            return Err(StoreError::Invalid(format!("site {} is not a sandbox site", site.name)));
        }
        if site_now < site.now(service_now) {
            return Err(StoreError::Invalid("a site's clock only moves forward".into()));
        }
        let mut tx = crate::db::begin(&self.pool).await?;
        let moved = crate::db::query("UPDATE sites SET clock_offset = $1 WHERE id = $2 AND clock_offset <= $1")
            .bind(site_now - service_now)
            .bind(site.id)
            .execute(tx.exec())
            .await?
            .rows_affected();
        if moved == 0 {
            tx.rollback().await?;
        } else {
            let generation = crate::settings::bump(&mut tx).await?;
            tx.commit().await?;
            self.settings_changed(generation).await?;
        }
        self.site(&site.name).await
    }
}

impl Work {
    /// [`Store::complete_job`] for several claimed jobs: marks done those whose claim is still
    /// their latest; answers how many.
    pub async fn complete_jobs(&mut self, jobs: &[&Job], service_now: i64) -> Result<u64, StoreError> {
        let mut tokens: Vec<Option<&str>> = jobs.iter().map(|j| j.claim_token.as_deref()).collect();
        tokens.sort_unstable();
        tokens.dedup();
        let mut done = 0;
        for token in tokens {
            let ids: Vec<i64> = jobs.iter().filter(|j| j.claim_token.as_deref() == token).map(|j| j.id).collect();
            let sql = format!(
                "UPDATE jobs SET done_at = {}, claimed_until = NULL, last_error = NULL \
                 WHERE claim_token = {} AND id IN ({})",
                self.backend.params(1, 1),
                self.backend.params(1, 2),
                self.backend.params(ids.len(), 3)
            );
            let mut query = crate::db::counted(&sql, ids.len()).bind(service_now).bind(token.map(str::to_owned));
            for id in ids {
                query = query.bind(id);
            }
            done += query.execute(self.tx.exec()).await?.rows_affected();
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{both_backends, fresh_postgres_database};
    use crate::{Mode, NewSite, Plan};

    const NOW: i64 = 1_800_000_000;

    async fn site(store: &Store, name: &str) -> Site {
        let new =
            NewSite { name: name.into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos: false, contact: None };
        store.create_site(&new, NOW).await.expect("site").0
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn jobs_are_claimed_once_when_due_on_the_site_clock() {
        for store in both_backends("jobs").await {
            let a = site(&store, "a").await;
            let b = site(&store, "b").await;
            store.schedule_job(a.id, "renewal", "sub-1", NOW + 100).await.expect("schedule");
            store.schedule_job(a.id, "renewal", "sub-1", NOW + 100).await.expect("idempotent");
            store.schedule_job(b.id, "renewal", "sub-2", NOW + 100).await.expect("schedule");
            assert!(store.claim_due_jobs(None, NOW + 99, 60, 10).await.expect("claim").is_empty());
            // Site a moves its clock on: only its job is due.
            let a = store.set_site_clock(&a, NOW + 150, NOW).await.expect("clock");
            assert_eq!(a.now(NOW), NOW + 150);
            let claimed = store.claim_due_jobs(None, NOW, 60, 10).await.expect("claim");
            assert_eq!(claimed.iter().map(|j| j.subject.as_str()).collect::<Vec<_>>(), ["sub-1"]);
            // Claimed: nobody else gets it during the lease; afterwards it comes back.
            assert!(store.claim_due_jobs(None, NOW + 30, 60, 10).await.expect("claim").is_empty());
            let again = store.claim_due_jobs(None, NOW + 61, 60, 10).await.expect("claim");
            assert_eq!(again.len(), 1);
            assert_eq!(again[0].attempts, 2);
            // The old claim can no longer complete it; the new one can.
            assert!(!store.complete_job(&claimed[0], NOW + 62).await.expect("complete"));
            assert!(store.complete_job(&again[0], NOW + 62).await.expect("complete"));
            assert!(
                store
                    .claim_due_jobs(None, NOW + 1000, 60, 10)
                    .await
                    .expect("claim")
                    .iter()
                    .all(|j| j.subject == "sub-2")
            );
            // The clock never goes back; production sites have none to move.
            assert!(store.set_site_clock(&a, NOW, NOW).await.is_err());
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn failed_jobs_retry_later_and_cancelled_jobs_vanish() {
        for store in both_backends("jobs").await {
            let a = site(&store, "a").await;
            store.schedule_job(a.id, "dunning", "inv-1", NOW).await.expect("schedule");
            store.schedule_job(a.id, "renewal", "sub-9", NOW + 10).await.expect("schedule");
            let job = store.claim_due_jobs(Some(&a), NOW, 60, 1).await.expect("claim").remove(0);
            store.fail_job(&job, "gateway timeout", NOW + 3600).await.expect("fail");
            assert!(store.claim_due_jobs(Some(&a), NOW + 5, 60, 10).await.expect("claim").is_empty());
            assert_eq!(store.cancel_jobs("renewal", "sub-9").await.expect("cancel"), 1);
            let retried = store.claim_due_jobs(Some(&a), NOW + 3600, 60, 10).await.expect("claim");
            assert_eq!(retried.len(), 1);
            assert_eq!(retried[0].last_error.as_deref(), Some("gateway timeout"));
            assert!(store.pending_jobs("sub-9").await.expect("pending").is_empty());
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn concurrent_claimers_never_share_a_job() {
        let database = fresh_postgres_database("jobs_race").await;
        let url = database.url().to_owned();
        let store = Store::connect(&url).await.expect("postgres");
        let a = site(&store, "a").await;
        for i in 0..60 {
            store.schedule_job(a.id, "renewal", &format!("sub-{i}"), NOW).await.expect("schedule");
        }
        let mut tasks = Vec::new();
        for _ in 0..6 {
            let other = Store::connect(&url).await.expect("postgres");
            tasks.push(tokio::spawn(async move {
                let mut got = Vec::new();
                loop {
                    let jobs = other.claim_due_jobs(None, NOW, 60, 4).await.expect("claim");
                    if jobs.is_empty() {
                        break got;
                    }
                    got.extend(jobs.into_iter().map(|j| j.id));
                }
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.expect("task"));
        }
        all.sort_unstable();
        let before = all.len();
        all.dedup();
        assert_eq!((before, all.len()), (60, 60));
    }
    #[tokio::test(flavor = "multi_thread")]
    async fn work_completes_claimed_jobs() {
        for store in both_backends("jobs").await {
            let a = site(&store, "a").await;
            for subject in ["s1", "s2", "s3"] {
                store.schedule_job(a.id, "renewal", subject, NOW).await.expect("schedule");
            }
            let claimed = store.claim_due_jobs(Some(&a), NOW, 60, 2).await.expect("claim");
            let stale = Job { claim_token: Some("old".into()), ..claimed[1].clone() };
            let mut work = store.begin_work().await.expect("work");
            assert_eq!(work.complete_jobs(&[&claimed[0], &stale], NOW + 1).await.expect("complete"), 1);
            work.commit().await.expect("commit");
            assert!(store.pending_jobs(&claimed[0].subject).await.expect("pending").is_empty());
            assert_eq!(store.pending_jobs(&claimed[1].subject).await.expect("pending").len(), 1);
        }
    }
}

//! The scheduler: claims due jobs from the store (any number of service processes may run it on
//! one database) and runs them, each at its own due time. Every job is idempotent, because a job
//! whose process dies is claimed again when its lease ends.
//!
//! A renewal has one path: [`crate::subscriptions::renewals::run_renewals`]. Renewals that come due together
//! run there as one batch (a few statements for the whole batch instead of a few dozen per
//! renewal), and a renewal job claimed alone runs there too, as a batch of one. Only what is not
//! a plain renewal (manual collection, nothing to charge, no payment method, an earlier charge
//! not invoiced yet, a subscription held by another change, and every other kind of job) goes
//! to the general path of its kind (`subscriptions::run_job` for subscriptions). The
//! differential test `tests/renewal_paths.rs` checks that claiming one job at a time, claiming
//! them all at once and the general path alone leave the same rows.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rebill_billing::lifecycle::DueKind;
use rebill_store::events::Awaiting;
use rebill_store::jobs::Job;
use rebill_store::{Site, StoreError};

use crate::Services;
use crate::platform::jobs::{JobError, settle};

/// Seconds a claimed job stays with its process.
pub const LEASE_SECONDS: i64 = 300;
/// Jobs claimed at a time by each runner of [`run_due`]: a power of two, so that a full batch of
/// renewals runs its multi-row statements prepared (the store keeps statements built from
/// such counts in its connections' caches).
pub const BATCH: i64 = 64;
/// Runners of [`run_due`] in one process on each backend ([`runners`]).
const RUNNERS_POSTGRES: usize = 4;
const RUNNERS_SQLITE: usize = 2;

/// How many runners [`run_due`] starts: on PostgreSQL four, whose transactions run side by side
/// on the database's cores; on SQLite two, because its one writer takes one transaction at a
/// time: the second runner's claims, gateway calls and reads overlap the first one's writes,
/// and a request's write waits behind at most two batches.
pub fn runners(state: &Services) -> usize {
    match state.store.backend() {
        rebill_store::Backend::Postgres => RUNNERS_POSTGRES,
        rebill_store::Backend::Sqlite => RUNNERS_SQLITE,
    }
}

/// How many scheduler runs are under way in this process. Work that can wait, the webhook
/// worker's, paces itself while one is, so that renewals (money) keep the cores and the
/// database; it catches up once the runs end.
#[derive(Debug, Default)]
pub struct Runs(AtomicUsize);

impl Runs {
    /// Whether a run is under way.
    pub fn under_way(&self) -> bool {
        self.0.load(Ordering::Relaxed) > 0
    }

    /// Counts a run until the answer is dropped.
    pub fn start(self: &Arc<Self>) -> RunUnderWay {
        self.0.fetch_add(1, Ordering::Relaxed);
        RunUnderWay(self.clone())
    }
}

/// One run counted in [`Runs`] while it lives.
#[derive(Debug)]
pub struct RunUnderWay(Arc<Runs>);

impl Drop for RunUnderWay {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Runs one job at its due time (`site`: the job's site, if it still exists).
async fn run_job(state: &Services, site: Option<&Site>, job: &Job) -> Result<(), JobError> {
    match (job.kind.as_str(), site) {
        (crate::billing::invoicing::DUNNING_JOB, _) => crate::collection::settlement::run_dunning(state, job).await,
        (crate::billing::invoicing::INVOICE_DUE_JOB, _) => crate::billing::invoicing::run_invoice_due(state, job).await,
        (crate::money_back::refunds::REFUND_JOB, _) => crate::money_back::refunds::run_refund_job(state, job).await,
        (crate::selling::gift_cards::DELIVERY_JOB, _) => crate::selling::gift_cards::run_delivery(state, job).await,
        (crate::billing::invoicing::SETTLE_JOB, Some(site)) => {
            crate::collection::settlement::run_settle(state, site, job).await
        }
        (crate::platform::gateways::RECONCILE_JOB, Some(site)) => {
            crate::collection::reconciliation::run_job(state, site).await
        }
        (_, Some(site)) => crate::subscriptions::lifecycle::run_job(state, site, job).await,
        (_, None) => Err(JobError::SiteMissing(job.site_id)),
    }
}

/// Runs every job that is due now (for one site, or all) until none is left; returns how many
/// ran. Jobs scheduled by the jobs themselves run too when they are due. First it runs the
/// reactions to events that are still awaiting theirs ([`crate::collection::reactions::sweep`]):
/// what a crash between a change and its reaction left behind.
///
/// Its [`runners`] claim [`BATCH`] jobs at a time side by side, as that many processes would
/// (see [`run_due_with`]).
pub async fn run_due(state: &Services, site: Option<&Site>) -> Result<usize, StoreError> {
    run_due_with(state, site, BATCH, runners(state)).await
}

/// [`run_due`] with `runners` runners (at least one) claiming `batch` jobs at a time (at least
/// one): with one runner and a batch of 1, every renewal runs as a batch of one, in due order.
///
/// Each runner claims the earliest due jobs no one holds and runs them in due order, until no
/// job is due. Runners are what several processes on one database are already (every job is
/// idempotent and a subscription job catches its subscription up to its own time, whichever
/// runs first), so the jobs of two runners' batches finish in either order. A batch's writes
/// then overlap with another's reads, planning and gateway calls, where one runner would
/// leave the database waiting on each of its steps in turn. Every runner ends its batch
/// before the run answers; the first error of any is the answer.
pub async fn run_due_with(
    state: &Services,
    site: Option<&Site>,
    batch: i64,
    runners: usize,
) -> Result<usize, StoreError> {
    let _counted = state.runs.start();
    // Reactions to events that a crash interrupted (their use case records and drains its own).
    let scope = site.map_or(Awaiting::All, |s| Awaiting::Site(s.id));
    if let Err(e) = crate::collection::reactions::sweep(state, scope).await {
        tracing::warn!(error = %e, "sweeping the reactions to events");
    }
    // Payments whose process stopped before it recorded the gateway's answer.
    if let Err(e) = crate::collection::settlement::sweep(state, site).await {
        tracing::warn!(error = %e, "sweeping payments still processing");
    }
    let runs = (0..runners.max(1)).map(|_| run_batches(state, site, batch.max(1)));
    let mut ran = 0;
    let mut failed = None;
    for outcome in futures_util::future::join_all(runs).await {
        match outcome {
            Ok(n) => ran += n,
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    failed.map_or(Ok(ran), Err)
}

/// One runner of [`run_due_with`]: claims `batch` due jobs at a time and runs them, until none
/// is due.
///
/// Consecutive renewal jobs of one site are offered to [`crate::subscriptions::renewals::run_renewals`],
/// which runs the first of them that are plain renewals together (one statement per step for
/// all of them); the job where it stops, and every other job, runs alone. Either way the
/// batch's jobs finish in due order.
async fn run_batches(state: &Services, site: Option<&Site>, batch: i64) -> Result<usize, StoreError> {
    let mut ran = 0;
    loop {
        let now = state.clock.now();
        let jobs = state.store.claim_due_jobs(site, now, LEASE_SECONDS, batch).await?;
        if jobs.is_empty() {
            return Ok(ran);
        }
        let sites = match site {
            Some(site) => vec![site.clone()],
            None => state.store.sites().await?,
        };
        let mut rest = jobs.as_slice();
        let renewal = DueKind::Renewal.name();
        while let Some(job) = rest.first() {
            let site = sites.iter().find(|s| s.id == job.site_id);
            // The renewal path first (a batch, or a batch of one); what it declines goes on alone.
            let together = match site {
                Some(site) if job.kind == renewal => {
                    let run = rest.iter().take_while(|j| j.site_id == site.id && j.kind == renewal).count();
                    crate::subscriptions::renewals::run_renewals(state, site, &rest[..run]).await?
                }
                _ => 0,
            };
            let done = if together > 0 {
                together
            } else {
                let outcome = run_job(state, site, job).await;
                settle(state, job, outcome).await?;
                1
            };
            let renewals = if job.kind == renewal { done } else { 0 };
            metrics::counter!(crate::platform::metrics::RENEWALS_RUN).increment(renewals as u64);
            ran += done;
            rest = &rest[done..];
        }
    }
}

/// Why [`catch_up`] gave up.
#[derive(Debug, thiserror::Error)]
pub enum CatchUpError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0} jobs due before the site's new time were still running elsewhere after {1:?}")]
    StillRunning(i64, Duration),
}

/// Runs the site's due work until the site has caught up with its clock: every job due at or
/// before the site's time is done (or failed and waits for its retry), including jobs that other
/// runners (the background scheduler, other processes) had claimed; they are waited for, up to
/// `patience`. Answers how many jobs due after `from` (the site's time before its clock moved)
/// are done, whoever ran them.
pub async fn catch_up(state: &Services, site: &Site, from: i64, patience: Duration) -> Result<i64, CatchUpError> {
    let started = tokio::time::Instant::now();
    loop {
        run_due(state, Some(site)).await?;
        let until = site.now(state.clock.now());
        let unfinished = state.store.unfinished_due_jobs(site.id, until).await?;
        if unfinished == 0 {
            // Settle jobs are bookkeeping of gateway answers, not work the clock made due: a clock
            // moved far ahead makes the sweep take calls still under way for stale ones.
            let settles = crate::billing::invoicing::SETTLE_JOB;
            return Ok(state.store.done_jobs_between(site.id, from, until, settles).await?);
        }
        if started.elapsed() >= patience {
            return Err(CatchUpError::StillRunning(unfinished, patience));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Looks for due work every second until `stop` turns true (a run under way finishes first)
/// or the task is aborted.
pub async fn run_until(state: Services, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.wait_for(|stopped| *stopped) => return,
        }
        if *stop.borrow() {
            return;
        }
        if let Err(e) = run_due(&state, None).await {
            tracing::warn!(error = %e, "scheduler");
        }
    }
}

impl From<CatchUpError> for crate::platform::error::AppError {
    fn from(e: CatchUpError) -> Self {
        match e {
            CatchUpError::Store(e) => e.into(),
            e @ CatchUpError::StillRunning(..) => Self::Conflict(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::Runs;

    #[test]
    fn runs_are_under_way_while_any_is_counted() {
        let runs = Arc::new(Runs::default());
        assert!(!runs.under_way());
        let first = runs.start();
        let second = runs.start();
        assert!(runs.under_way());
        drop(first);
        assert!(runs.under_way(), "one run is still under way");
        drop(second);
        assert!(!runs.under_way());
    }
}

//! The scheduler: claims due jobs from the store (any number of service processes may run it on
//! one database) and runs them, each at its own due time. Every job is idempotent, because a job
//! whose process dies is claimed again when its lease ends.

use std::time::Duration;

use rebill_store::jobs::Job;
use rebill_store::{Site, StoreError};

use crate::AppState;

/// Seconds a claimed job stays with its process.
pub const LEASE_SECONDS: i64 = 300;
/// Seconds before a failed job is tried again.
pub const RETRY_SECONDS: i64 = 3600;
/// Jobs claimed at a time.
const BATCH: i64 = 50;

/// Why a job failed (it is retried later).
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("no work is defined for jobs of kind `{0}`")]
    UnknownKind(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Failed(String),
}

/// Runs one job at its due time.
async fn run_job(state: &AppState, job: &Job) -> Result<(), JobError> {
    match job.kind.as_str() {
        "dunning" => crate::billing::run_dunning(state, job).await,
        _ => crate::subscriptions::run_job(state, job).await,
    }
}

/// Runs every job that is due now (for one site, or all), in due order, until none is left;
/// returns how many ran. Jobs scheduled by the jobs themselves run too when they are due.
pub async fn run_due(state: &AppState, site: Option<&Site>) -> Result<usize, StoreError> {
    let mut ran = 0;
    loop {
        let now = state.clock.now();
        let jobs = state.store.claim_due_jobs(site, now, LEASE_SECONDS, BATCH).await?;
        if jobs.is_empty() {
            return Ok(ran);
        }
        for job in jobs {
            ran += 1;
            match run_job(state, &job).await {
                Ok(()) => {
                    state.store.complete_job(&job, state.clock.now()).await?;
                }
                Err(e) => {
                    tracing::warn!(job = job.id, kind = %job.kind, subject = %job.subject, error = %e, "job failed");
                    state.store.fail_job(&job, &e.to_string(), state.clock.now() + RETRY_SECONDS).await?;
                }
            }
        }
    }
}

/// Looks for due work every second until the task is aborted.
pub async fn run(state: AppState) {
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if let Err(e) = run_due(&state, None).await {
            tracing::warn!(error = %e, "scheduler");
        }
    }
}

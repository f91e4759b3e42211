//! What running a scheduled job answers ([`JobError`]) and how its outcome is recorded
//! ([`settle`]): shared by the scheduler and the work that runs jobs (subscriptions, dunning).

use rebill_store::StoreError;
use rebill_store::jobs::Job;

use crate::Services;
use crate::platform::error::BillingError;
use crate::platform::error::SubscriptionError;

/// Seconds before a failed job is tried again.
pub const RETRY_SECONDS: i64 = 3600;

/// Why a job failed (it is retried later).
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Billing(#[from] BillingError),
    #[error(transparent)]
    Subscription(#[from] SubscriptionError),
    #[error("site {0} is missing")]
    SiteMissing(i64),
    #[error("the account of invoice {0} is missing")]
    InvoiceAccountMissing(i64),
    /// A batch of renewals failed in its last step; every job of the batch is retried.
    #[error("the batch of renewals failed: {0}")]
    Batch(String),
    /// A refund could not be finished.
    #[error("the refund could not be finished: {0}")]
    Refund(String),
}

/// Records the outcome of a claimed job: done, or failed and retried after [`RETRY_SECONDS`].
pub async fn settle(state: &Services, job: &Job, outcome: Result<(), JobError>) -> Result<(), StoreError> {
    match outcome {
        Ok(()) => {
            state.store.complete_job(job, state.clock.now()).await?;
        }
        Err(e) => {
            tracing::warn!(job = job.id, kind = %job.kind, subject = %job.subject, error = %e, "job failed");
            state.store.fail_job(job, &e.to_string(), state.clock.now() + RETRY_SECONDS).await?;
        }
    }
    Ok(())
}

impl From<JobError> for crate::platform::error::AppError {
    fn from(e: JobError) -> Self {
        match e {
            JobError::Store(e) => e.into(),
            JobError::Billing(e) => e.into(),
            JobError::Subscription(e) => e.into(),
            e => Self::internal(e),
        }
    }
}

//! Invoicing and collection shared by every flow that charges an account (not built yet).

use crate::AppState;
use crate::scheduler::JobError;

/// Runs a dunning retry of an unpaid invoice.
pub(crate) async fn run_dunning(state: &AppState, job: &rebill_store::jobs::Job) -> Result<(), JobError> {
    let _ = state;
    Err(JobError::UnknownKind(job.kind.clone()))
}

//! Settling an open invoice outside the call that made it: a dunning retry, marked paid or
//! failed (`mark_successful`, `mark_failed`), collected now (`collect`). Each write is
//! [`crate::billing::invoicing`]'s; what this module adds is what follows: the invoice's retries are
//! dropped and the reactions to its events run before the call returns
//! ([`crate::collection::reactions::drain`]: its subscriptions recover or expire, a failed charge invoice is
//! written off), so the answer shows the subscriptions as they end up.

use rebill_billing::collection::Attempt;
use rebill_billing::states::{InvoiceState, InvoiceTransition, TransactionStatus};
use rebill_store::Site;
use rebill_store::events::Awaiting;
use rebill_store::invoices::{Invoice, Transaction};

use crate::billing::invoicing::{
    Collect, DUNNING_JOB, PaymentSource, attempt_key, attempted, charge, transition_events, without_retry,
};
use crate::collection::reactions;
use crate::platform::error::AppError;
use crate::platform::jobs::JobError;
use crate::{Context, Services};

/// Collected now (`collect`).
const SETTLED_BY_COLLECTION: &str = "collection";

/// Marked paid or failed (`mark_successful`, `mark_failed`).
const SETTLED_BY_MARK: &str = "marked";

/// A dunning retry settled it.
const SETTLED_BY_DUNNING: &str = "dunning";

/// Runs the reactions to the invoice's events ([`crate::collection::reactions::drain`]): what a use case that
/// settled it does before it returns.
async fn react(state: &Services, invoice: &Invoice) -> Result<(), JobError> {
    let number = invoice.invoice_number.to_string();
    reactions::drain(state, Awaiting::Subject(invoice.site_id, &number)).await?;
    Ok(())
}

/// Runs a dunning retry of a past-due invoice at the job's due time (see the module
/// documentation). Idempotent: a settled invoice, or a job that is not the invoice's next
/// attempt, does nothing; a retry run again finds its recorded transaction.
pub async fn run_dunning(state: &Services, job: &rebill_store::jobs::Job) -> Result<(), JobError> {
    let Some(invoice) = state.store.invoice_by_uuid(&job.subject).await? else { return Ok(()) };
    if invoice.site_id != job.site_id
        || invoice.state != InvoiceState::PastDue
        || invoice.attempt_next_collection_at != Some(job.due_at)
    {
        return Ok(());
    }
    let at = job.due_at;
    let account = state
        .store
        .account(invoice.site_id, &invoice.account_code)
        .await?
        .ok_or(JobError::InvoiceAccountMissing(invoice.invoice_number))?;
    let attempt = invoice.collection_attempts + 1;
    let outcome = match PaymentSource::of_account(state, &account).await? {
        Some(source) => {
            let t =
                charge(state, invoice.site_id, &account, &invoice, &source, attempt_key(&invoice, attempt), true, at)
                    .await?;
            if t.status() == TransactionStatus::Success { Attempt::Approved } else { Attempt::Declined }
        }
        None => Attempt::NoPaymentMethod,
    };
    attempted(state, &invoice, Collect::Automatic, attempt, outcome, SETTLED_BY_DUNNING, at).await?;
    react(state, &invoice).await
}

/// Marks an open invoice paid (`mark_successful`): no more retries; its subscriptions recover.
/// `None` when the invoice is not pending or past due.
pub async fn mark_paid(state: &Services, invoice: &Invoice, at: i64) -> Result<Option<Invoice>, JobError> {
    close(state, invoice, InvoiceTransition::Pay, SETTLED_BY_MARK, at).await
}

/// Marks an open invoice failed (`mark_failed`): no more retries; its subscriptions expire.
/// `None` when the invoice is not pending or past due.
pub async fn mark_failed(state: &Services, invoice: &Invoice, at: i64) -> Result<Option<Invoice>, JobError> {
    close(state, invoice, InvoiceTransition::Fail, SETTLED_BY_MARK, at).await
}

/// Settles an open invoice by `transition` (`by` says how), drops its retries and runs the
/// reactions to it (its subscriptions recover or expire). `None` when the invoice was not in a
/// state the transition starts from.
async fn close(
    state: &Services,
    invoice: &Invoice,
    transition: InvoiceTransition,
    by: &str,
    at: i64,
) -> Result<Option<Invoice>, JobError> {
    let events = transition_events(state, invoice, transition, by, at);
    let change = without_retry(transition);
    let Some(closed) = state.store.set_invoice_state(invoice.id, transition.from_states(), change, at, &events).await?
    else {
        return Ok(None);
    };
    state.store.cancel_jobs(DUNNING_JOB, &invoice.uuid).await?;
    react(state, &closed).await?;
    // As the reactions left it (a write-off pays a failed invoice's balance).
    Ok(Some(state.store.invoice_by_id(closed.id).await?.unwrap_or(closed)))
}

/// Collects a past-due invoice now (`collect`): one attempt with the stored payment method,
/// outside the retry schedule (which goes on when it fails). `None` when the invoice is not
/// past due or pending.
pub async fn collect_now(
    state: &Services,
    site: &Site,
    invoice: &Invoice,
    at: i64,
) -> Result<Option<(Invoice, Option<Transaction>)>, JobError> {
    if !invoice.state.is_collectable() {
        return Ok(None);
    }
    let Some(account) = state.store.account(site.id, &invoice.account_code).await? else { return Ok(None) };
    let Some(source) = PaymentSource::of_account(state, &account).await? else {
        return Ok(Some((invoice.clone(), None)));
    };
    // Each request is its own attempt.
    let key = format!("collect:{}", rebill_store::invoices::new_uuid());
    let t = charge(state, site.id, &account, invoice, &source, key, false, at).await?;
    if t.status() != TransactionStatus::Success {
        return Ok(Some((invoice.clone(), Some(t))));
    }
    let paid = close(state, invoice, InvoiceTransition::Pay, SETTLED_BY_COLLECTION, at)
        .await?
        .unwrap_or_else(|| invoice.clone());
    Ok(Some((paid, Some(t))))
}

/// How an open invoice is settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// Paid otherwise (`mark_successful`): no more retries; its subscriptions recover.
    Paid,
    /// Given up (`mark_failed`): no more retries; its subscriptions expire.
    Failed,
    /// Collected now with the stored payment method, outside the retry schedule.
    Collect,
}

/// Why an invoice was not settled.
#[derive(Debug, thiserror::Error)]
pub enum SettleError {
    /// Only a pending or past-due invoice can be settled or collected.
    #[error("the invoice is not open")]
    NotOpen,
    #[error("the account has no billing info to collect the invoice with")]
    NoBillingInfo,
    /// The collection was declined (the invoice stays past due with its retries).
    #[error("the collection was declined")]
    Declined(Box<Transaction>),
    #[error(transparent)]
    Failed(#[from] JobError),
}

/// Settles an open invoice as `how` says; answers it as it is afterwards.
pub async fn settle_invoice(
    services: &Services,
    ctx: &Context,
    invoice: &Invoice,
    how: Settlement,
) -> Result<Invoice, SettleError> {
    let changed = match how {
        Settlement::Paid => mark_paid(services, invoice, ctx.now).await?,
        Settlement::Failed => mark_failed(services, invoice, ctx.now).await?,
        Settlement::Collect => match collect_now(services, &ctx.site, invoice, ctx.now).await? {
            Some((_, Some(t))) if t.status() == TransactionStatus::Declined => {
                return Err(SettleError::Declined(Box::new(t)));
            }
            Some((_, None)) => return Err(SettleError::NoBillingInfo),
            found => found.map(|(i, _)| i),
        },
    };
    changed.ok_or(SettleError::NotOpen)
}

impl From<SettleError> for AppError {
    fn from(e: SettleError) -> Self {
        match e {
            SettleError::NotOpen => Self::Conflict(e.to_string()),
            SettleError::NoBillingInfo => Self::refused("billing_info", "blank", e.to_string()),
            SettleError::Declined(transaction) => Self::Declined(Some(transaction)),
            SettleError::Failed(e) => e.into(),
        }
    }
}

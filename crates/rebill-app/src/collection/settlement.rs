//! Settling an open invoice outside the call that made it: a dunning retry, marked paid or
//! failed (`mark_successful`, `mark_failed`), collected now (`collect`). Each write is
//! [`crate::billing::invoicing`]'s; what this module adds is what follows: the invoice's retries are
//! dropped and the reactions to its events run before the call returns
//! ([`crate::collection::reactions::drain`]: its subscriptions recover or expire, a failed charge invoice is
//! written off), so the answer shows the subscriptions as they end up.
//!
//! # Payments whose outcome was not known
//!
//! A purchase the gateway gave no definite answer to (a time-out, a lost connection, a 5xx, a
//! request with the same key still running there) stays `processing`, and so does one whose
//! process stopped before it recorded an answer. [`run_settle`] (job [`SETTLE_JOB`], subject:
//! the transaction's uuid) is the one path that settles it: it asks the gateway again with the
//! same parameters and key (`resumed`: the gateway looks up what it did first, and sends the
//! request again only while it still keeps the key's first answer, [`RESEND_SECONDS`]), and
//! until the answer is definite it asks again later ([`crate::billing::invoicing::settle_backoff`]
//! of the attempt's age). A definite answer is recorded, and then what would have followed it
//! at the time follows now: approved, the invoice is paid (its subscriptions recover); declined,
//! an automatic attempt is counted as [`attempted`] counts it (past due with the next retry, or
//! failed: a signup's or one-off charge's invoice fails, and its subscriptions expire), and a
//! merchant's `collect` leaves the invoice as it was. Only the call that records the answer does
//! what follows it ([`rebill_store::Store::settle_transaction`]).
//!
//! [`sweep`] finds what a stopped process left: transactions still `processing` more than
//! [`STALE_SECONDS`] after they were begun get their settle job.

use rebill_billing::collection::Attempt;
use rebill_billing::states::{InvoiceState, InvoiceTransition, TransactionStatus};
use rebill_store::Site;
use rebill_store::events::Awaiting;
use rebill_store::invoices::{Invoice, Transaction};

use crate::billing::invoicing::{
    Collect, DUNNING_JOB, PaymentSource, SETTLE_JOB, attempt_key, attempted, backoff_by_age, charge, gateway_purchase,
    transition_events, without_retry,
};
use crate::collection::reactions;
use crate::platform::error::AppError;
use crate::platform::jobs::JobError;
use crate::platform::transaction_records::{is_settled, result_of, transaction_event};
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
            match t.status() {
                TransactionStatus::Success => Attempt::Approved,
                // Not known yet: the settle job does what follows the attempt.
                TransactionStatus::Processing => return Ok(()),
                _ => Attempt::Declined,
            }
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

/// Seconds after it was begun that a transaction still `processing` is taken for one whose
/// process stopped ([`sweep`]): well past the longest a call waits for the gateway.
pub const STALE_SECONDS: i64 = 600;

/// Seconds after an attempt was begun during which its request may be sent to the gateway again
/// under the same key when nothing is found: Stripe keeps a key's first answer for 24 hours, so
/// a request sent again within them is answered, never executed twice.
pub const RESEND_SECONDS: i64 = 23 * 3600;

/// At most this many stale transactions of a site get their settle job per sweep.
const SWEEP_LIMIT: i64 = 100;

/// Schedules the settle job of every transaction of `site` (or of every site) still `processing`
/// [`STALE_SECONDS`] after it was begun: an attempt whose process stopped before it recorded the
/// gateway's answer. The job's due time is fixed by the transaction (its begin time plus
/// [`STALE_SECONDS`]), so sweeping again schedules nothing twice.
pub async fn sweep(state: &Services, site: Option<&Site>) -> Result<usize, rebill_store::StoreError> {
    let sites = match site {
        Some(site) => vec![site.clone()],
        None => state.store.sites().await?,
    };
    let mut scheduled = 0;
    for site in &sites {
        let now = site.now(state.clock.now());
        for t in state.store.processing_transactions(site.id, now - STALE_SECONDS, SWEEP_LIMIT).await? {
            state.store.schedule_job(site.id, SETTLE_JOB, &t.uuid, t.created_at + STALE_SECONDS).await?;
            scheduled += 1;
        }
    }
    Ok(scheduled)
}

/// Settles a transaction still `processing` (see the module documentation); a transaction that
/// is settled already, or gone, needs nothing.
pub async fn run_settle(state: &Services, site: &Site, job: &rebill_store::jobs::Job) -> Result<(), JobError> {
    let Some(transaction) = state.store.transaction(site.id, &job.subject).await? else { return Ok(()) };
    if transaction.status() != TransactionStatus::Processing {
        return Ok(());
    }
    let now = site.now(state.clock.now()).max(job.due_at);
    match transaction.new.action.as_str() {
        "purchase" => settle_purchase(state, site, &transaction, now).await,
        // A refund's (and a void's) own recovery job settles it with its refund invoice.
        "refund" => Ok(()),
        // A verification or a security-code check moves no money: one whose process stopped is
        // declined as a call that did not answer.
        _ => {
            let outcome =
                rebill_billing::gateway::Outcome::Pending(rebill_billing::gateway::Pending::new("gateway_timeout"))
                    .or_declined();
            let result = result_of(&outcome, now);
            let event = transaction_event(state, &transaction, &result, now);
            state.store.settle_transaction(transaction.id, &result, now, &[event]).await?;
            Ok(())
        }
    }
}

/// [`run_settle`] of a purchase: the gateway's answer for the attempt, then what follows it.
async fn settle_purchase(state: &Services, site: &Site, transaction: &Transaction, now: i64) -> Result<(), JobError> {
    let Some(invoice_id) = transaction.new.invoice_id else { return Ok(()) };
    let Some(invoice) = state.store.invoice_by_id(invoice_id).await? else { return Ok(()) };
    let reference = match &transaction.new.payment_reference {
        Some(reference) => reference.clone(),
        // Recorded before rebill kept the reference: the account's stored method.
        None => {
            let account = state.store.account(site.id, &invoice.account_code).await?;
            let source = match &account {
                Some(account) => PaymentSource::of_account(state, account).await?,
                None => None,
            };
            source.map(|s| s.reference).unwrap_or_default()
        }
    };
    let source = PaymentSource { kind: transaction.new.kind, fields: transaction.new.billing.clone(), reference };
    let age = now - transaction.created_at;
    let gateway = state.gateway(site.id).await?;
    let outcome = gateway_purchase(state, gateway.as_ref(), transaction, &source, true, age < RESEND_SECONDS).await;
    let result = result_of(&outcome, now);
    if !is_settled(&result) {
        tracing::warn!(transaction = %transaction.uuid, age, "a payment's outcome is still not known; asking again later");
        state.store.schedule_job(site.id, SETTLE_JOB, &transaction.uuid, now + backoff_by_age(age)).await?;
        return Ok(());
    }
    let event = transaction_event(state, transaction, &result, now);
    let (settled, recorded) = state.store.settle_transaction(transaction.id, &result, now, &[event]).await?;
    if !recorded {
        return Ok(());
    }
    follow_payment(state, &invoice, &settled, now).await
}

/// What follows a purchase of `invoice` settled late, as its answer would have been followed at
/// the time (see the module documentation).
async fn follow_payment(state: &Services, invoice: &Invoice, settled: &Transaction, at: i64) -> Result<(), JobError> {
    let key = settled.new.idempotency_key.as_str();
    // Automatic attempts are keyed `invoice:<uuid>:<attempt>` (`attempt_key`); others
    // (a merchant's collect) change nothing of the invoice when declined.
    let attempt =
        key.strip_prefix("invoice:").and_then(|rest| rest.rsplit_once(':')).and_then(|(_, n)| n.parse::<i64>().ok());
    let by = match attempt {
        Some(0) => crate::platform::events::SETTLED_BY_INVOICING,
        Some(_) => SETTLED_BY_DUNNING,
        None => SETTLED_BY_COLLECTION,
    };
    if settled.status() == TransactionStatus::Success {
        close(state, invoice, InvoiceTransition::Pay, by, at).await?;
        return Ok(());
    }
    let Some(attempt) = attempt else { return Ok(()) };
    attempted(state, invoice, late_collection(invoice), attempt, Attempt::Declined, by, at).await?;
    react(state, invoice).await
}

/// How an invoice whose attempt is settled late was being collected: manual invoices are not
/// charged; renewals and immediate changes are retried by dunning; a new subscription's,
/// purchase's, one-off charge's or gift card's invoice is charged once.
fn late_collection(invoice: &Invoice) -> Collect {
    use rebill_store::invoices::CollectionMethod;
    if invoice.terms.collection_method == CollectionMethod::Manual {
        Collect::Manual
    } else if matches!(invoice.origin.as_str(), "renewal" | "immediate_change" | "termination") {
        Collect::Automatic
    } else {
        Collect::Once
    }
}

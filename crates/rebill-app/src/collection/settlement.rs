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
//! of the attempt's age). The attempt's age is real time, the service's clock since the attempt
//! was begun ([`rebill_store::invoices::AttemptFacts::begun_service_at`]), not the site's: a
//! sandbox site's clock may be moved ahead, while the gateway keeps a key for a span of real
//! time. A definite answer is recorded, and then what would have followed it at the time
//! follows now:
//! - a payment method the request named is saved as the account's billing info when the charge
//!   is approved (or declined `declined_saveable`), as the one-off charge, gift card or purchase
//!   would have saved it ([`rebill_store::invoices::AttemptFacts::saves_payment_method`]), unless
//!   the account's billing info changed after the attempt began;
//! - approved, the invoice is paid (past-due subscriptions recover when a retry or a collect was
//!   approved), and a gift card waiting for the invoice is purchased and delivered
//!   ([`reactions::gift_card_settled`]);
//! - declined, an automatic attempt is counted as [`attempted`] counts it (past due with the next
//!   retry, or failed); a first collection's subscriptions are left as the invoicing call leaves
//!   them ([`lifecycle::on_first_collection_declined`]: a renewal's fall past due, a signup's
//!   expire), a gift card waiting for the invoice is discarded; a merchant's `collect` leaves the
//!   invoice as it was.
//!
//! Only the call that records the answer does what follows it
//! ([`rebill_store::Store::settle_transaction`]).
//!
//! While a purchase of an invoice is `processing`, the invoice is neither marked paid nor failed
//! ([`SettleError::PaymentProcessing`]): the charge may still pay it.
//!
//! [`sweep`] finds what a stopped process left: transactions still `processing` more than
//! [`STALE_SECONDS`] after they were begun get their settle job.

use rebill_billing::collection::Attempt;
use rebill_billing::states::{InvoiceState, InvoiceTransition, TransactionStatus};
use rebill_store::Site;
use rebill_store::events::Awaiting;
use rebill_store::invoices::{AttemptFacts, Closing, Invoice, Transaction};

use crate::billing::invoicing::{
    Collect, DUNNING_JOB, PaymentSource, SETTLE_JOB, attempt_key, attempted, backoff_by_age, charge, followed,
    gateway_purchase, transition_events, without_retry,
};
use crate::collection::reactions;
use crate::customers::payment_methods::{self, RequestedMethod};
use crate::platform::error::AppError;
use crate::platform::jobs::JobError;
use crate::platform::transaction_records::{is_settled, result_of, transaction_event};
use crate::subscriptions::lifecycle;
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

/// Why an open invoice was not settled by [`mark_paid`], [`mark_failed`] or a late answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsettled {
    /// The invoice is not pending or past due.
    NotOpen,
    /// A purchase of the invoice is still `processing` at the gateway (this one): its outcome is
    /// not known, and it may still pay the invoice.
    Paying(Box<Transaction>),
}

/// Marks an open invoice paid (`mark_successful`): no more retries; its subscriptions recover.
/// Refused while a purchase of the invoice is processing at the gateway.
pub async fn mark_paid(state: &Services, invoice: &Invoice, at: i64) -> Result<Result<Invoice, Unsettled>, JobError> {
    close(state, invoice, InvoiceTransition::Pay, SETTLED_BY_MARK, at, UnlessPaying::Refuse).await
}

/// Marks an open invoice failed (`mark_failed`): no more retries; its subscriptions expire.
/// Refused while a purchase of the invoice is processing at the gateway.
pub async fn mark_failed(state: &Services, invoice: &Invoice, at: i64) -> Result<Result<Invoice, Unsettled>, JobError> {
    close(state, invoice, InvoiceTransition::Fail, SETTLED_BY_MARK, at, UnlessPaying::Refuse).await
}

/// Whether [`close`] is refused while a purchase of the invoice is processing at the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UnlessPaying {
    /// Marking by hand: refused ([`Unsettled::Paying`]).
    Refuse,
    /// Settled by a payment the gateway approved: that money is taken, whatever else runs.
    Close,
}

/// Settles an open invoice by `transition` (`by` says how), drops its retries and runs the
/// reactions to it (its subscriptions recover or expire). Nothing is written when the invoice
/// was not in a state the transition starts from, nor, with [`UnlessPaying::Refuse`], while a
/// purchase of it is processing at the gateway ([`rebill_store::Store::close_invoice`], under
/// the invoice's lock).
async fn close(
    state: &Services,
    invoice: &Invoice,
    transition: InvoiceTransition,
    by: &str,
    at: i64,
    unless_paying: UnlessPaying,
) -> Result<Result<Invoice, Unsettled>, JobError> {
    let events = transition_events(state, invoice, transition, by, at);
    let change = without_retry(transition);
    let from = transition.from_states();
    let closed = match unless_paying {
        UnlessPaying::Refuse => match state.store.close_invoice(invoice.id, from, change, at, &events).await? {
            Closing::Closed(closed) => *closed,
            Closing::NotInState => return Ok(Err(Unsettled::NotOpen)),
            Closing::Paying(t) => return Ok(Err(Unsettled::Paying(t))),
        },
        UnlessPaying::Close => match state.store.set_invoice_state(invoice.id, from, change, at, &events).await? {
            Some(closed) => closed,
            None => return Ok(Err(Unsettled::NotOpen)),
        },
    };
    state.store.cancel_jobs(DUNNING_JOB, &invoice.uuid).await?;
    react(state, &closed).await?;
    // As the reactions left it (a write-off pays a failed invoice's balance).
    Ok(Ok(state.store.invoice_by_id(closed.id).await?.unwrap_or(closed)))
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
        // Declined, nothing follows; processing, the settle job stays.
        followed(state, &t).await?;
        return Ok(Some((invoice.clone(), Some(t))));
    }
    let paid = close(state, invoice, InvoiceTransition::Pay, SETTLED_BY_COLLECTION, at, UnlessPaying::Close)
        .await?
        .unwrap_or_else(|_| invoice.clone());
    followed(state, &t).await?;
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
    /// Marking paid or failed: a purchase of the invoice is processing at the gateway (this
    /// transaction), whose outcome is not known yet. Marked now, the invoice could be paid twice,
    /// or failed under a charge that then succeeds; it can be marked once the outcome is known.
    #[error("a payment of the invoice is processing at the gateway; its outcome is not known yet")]
    PaymentProcessing(Box<Transaction>),
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
    let marked = match how {
        Settlement::Paid => mark_paid(services, invoice, ctx.now).await?,
        Settlement::Failed => mark_failed(services, invoice, ctx.now).await?,
        Settlement::Collect => return collect(services, ctx, invoice).await,
    };
    match marked {
        Ok(invoice) => Ok(invoice),
        Err(Unsettled::NotOpen) => Err(SettleError::NotOpen),
        Err(Unsettled::Paying(t)) => Err(SettleError::PaymentProcessing(t)),
    }
}

/// [`settle_invoice`]'s collect now.
async fn collect(services: &Services, ctx: &Context, invoice: &Invoice) -> Result<Invoice, SettleError> {
    match collect_now(services, &ctx.site, invoice, ctx.now).await? {
        Some((_, Some(t))) if t.status() == TransactionStatus::Declined => Err(SettleError::Declined(Box::new(t))),
        Some((_, None)) => Err(SettleError::NoBillingInfo),
        Some((invoice, _)) => Ok(invoice),
        None => Err(SettleError::NotOpen),
    }
}

impl From<SettleError> for AppError {
    fn from(e: SettleError) -> Self {
        match e {
            SettleError::NotOpen => Self::Conflict(e.to_string()),
            SettleError::NoBillingInfo => Self::refused("billing_info", "blank", e.to_string()),
            SettleError::Declined(transaction) => Self::Declined(Some(transaction)),
            e @ SettleError::PaymentProcessing(_) => Self::Conflict(e.to_string()),
            SettleError::Failed(e) => e.into(),
        }
    }
}

pub use crate::billing::invoicing::STALE_SECONDS;

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
    let now = site.now(state.clock.now()).max(job.due_at);
    if transaction.status() != TransactionStatus::Processing {
        // Settled already. A run of this job that recorded the answer and stopped before what
        // follows it (the job is claimed again when its lease ends) left that owed: it is done
        // now, once the invoice shows it was not.
        return follow_owed(state, site, &transaction, now).await;
    }
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
    let source = PaymentSource {
        kind: transaction.new.kind,
        fields: transaction.new.billing.clone(),
        reference,
        requested: false,
    };
    let facts = state.store.attempt_of(transaction.id).await?.unwrap_or_default();
    // Real time since the attempt began (the gateway keeps its key that long), on the service's
    // clock: a sandbox site's clock may have been moved ahead meanwhile. A transaction recorded
    // without its service time is judged by the site's clock.
    let age = match facts.begun_service_at {
        Some(begun) => state.clock.now() - begun,
        None => now - transaction.created_at,
    };
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
    save_requested_method(state, site, &invoice, facts, &settled, now).await?;
    follow_payment(state, &invoice, &settled, now).await
}

/// Saves the payment method an attempt settled late charged as the account's billing info, when
/// the request named it ([`AttemptFacts::saves_payment_method`]) and the answer calls for it
/// (approved, or declined `declined_saveable`), as the call that charged it saves it when the
/// answer comes at once: the method the gateway stored for the charge (the transaction's
/// `payment_reference`) with the transaction's billing snapshot. A billing info changed after the
/// attempt began stands (it would have replaced this one).
async fn save_requested_method(
    state: &Services,
    site: &Site,
    invoice: &Invoice,
    facts: AttemptFacts,
    settled: &Transaction,
    at: i64,
) -> Result<(), JobError> {
    let approved = settled.status() == TransactionStatus::Success;
    let saveable = settled.result.failure.as_ref().is_some_and(|f| f.error_code == "declined_saveable");
    if !facts.saves_payment_method || !(approved || saveable) {
        return Ok(());
    }
    let Some(reference) = settled.new.payment_reference.clone() else { return Ok(()) };
    let Some(account) = state.store.account(site.id, &invoice.account_code).await? else { return Ok(()) };
    if state.store.billing_info(account.id).await?.is_some_and(|b| b.updated_at > settled.created_at) {
        tracing::info!(transaction = %settled.uuid, "billing info changed after a charge began; the later one stays");
        return Ok(());
    }
    let ctx = Context { site: site.clone(), now: at };
    let method = RequestedMethod { kind: settled.new.kind, fields: settled.new.billing.clone(), reference };
    payment_methods::save_requested(state, &ctx, &account, &method).await?;
    Ok(())
}

/// The number of the automatic collection attempt a purchase was (0: the first charge), from
/// its key `invoice:<uuid>:<attempt>` ([`crate::billing::invoicing::attempt_key`]); `None` for
/// other purchases (a merchant's collect), whose decline changes nothing of the invoice.
fn automatic_attempt(purchase: &Transaction) -> Option<i64> {
    let key = purchase.new.idempotency_key.as_str();
    key.strip_prefix("invoice:").and_then(|rest| rest.rsplit_once(':')).and_then(|(_, n)| n.parse::<i64>().ok())
}

/// Whether what follows a settled purchase is still to be done on `invoice`: approved, the
/// invoice is still open; declined as automatic attempt `n`, the invoice does not count it yet
/// (still `pending` after the first charge; after a retry, fewer retries counted than `n`).
fn follow_up_owed(invoice: &Invoice, settled: &Transaction) -> bool {
    if !invoice.state.is_open() {
        return false;
    }
    match (settled.status(), automatic_attempt(settled)) {
        (TransactionStatus::Success, _) => true,
        (TransactionStatus::Processing, _) | (_, None) => false,
        (_, Some(0)) => invoice.state == InvoiceState::Pending,
        (_, Some(n)) => invoice.collection_attempts < n,
    }
}

/// [`run_settle`] of a transaction settled already: what follows a purchase, when the invoice
/// shows it was not done ([`follow_up_owed`]). The steps are those of [`settle_purchase`], each
/// guarded by the state it changes, so doing one again changes nothing.
async fn follow_owed(state: &Services, site: &Site, settled: &Transaction, now: i64) -> Result<(), JobError> {
    if settled.new.action != "purchase" {
        return Ok(());
    }
    let Some(invoice_id) = settled.new.invoice_id else { return Ok(()) };
    let Some(invoice) = state.store.invoice_by_id(invoice_id).await? else { return Ok(()) };
    if !follow_up_owed(&invoice, settled) {
        return Ok(());
    }
    tracing::warn!(transaction = %settled.uuid, "a settled payment's consequences were not all recorded; recording them");
    let facts = state.store.attempt_of(settled.id).await?.unwrap_or_default();
    save_requested_method(state, site, &invoice, facts, settled, now).await?;
    follow_payment(state, &invoice, settled, now).await
}

/// What follows a purchase of `invoice` settled late, as its answer would have been followed at
/// the time (see the module documentation).
async fn follow_payment(state: &Services, invoice: &Invoice, settled: &Transaction, at: i64) -> Result<(), JobError> {
    let attempt = automatic_attempt(settled);
    let by = match attempt {
        Some(0) => crate::platform::events::SETTLED_BY_INVOICING,
        Some(_) => SETTLED_BY_DUNNING,
        None => SETTLED_BY_COLLECTION,
    };
    if settled.status() == TransactionStatus::Success {
        if close(state, invoice, InvoiceTransition::Pay, by, at, UnlessPaying::Close).await?.is_err() {
            tracing::warn!(transaction = %settled.uuid, "a payment approved late found its invoice settled otherwise");
        }
        // Paid: a gift card bought with the invoice is purchased (and delivered) now.
        reactions::gift_card_settled(state, invoice, true, at).await?;
        return Ok(());
    }
    let Some(attempt) = attempt else { return Ok(()) };
    let collect = late_collection(invoice);
    attempted(state, invoice, collect, attempt, Attempt::Declined, by, at).await?;
    if attempt == 0 && collect != Collect::Manual {
        // The invoicing call, had it learnt the decline, would have left the invoice's
        // subscriptions past due (a renewal) or refused them (a signup, a purchase), and
        // discarded a gift card bought with it.
        lifecycle::on_first_collection_declined(state, invoice, collect == Collect::Once, at).await?;
        reactions::gift_card_settled(state, invoice, false, at).await?;
    }
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

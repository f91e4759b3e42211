//! The work of subscriptions below the endpoints: the stored documents, catching up with what
//! became due, invoicing a subscription's charges (`bill_pending`), scheduled jobs (`run_job`)
//! and the outcomes of their invoices (`on_invoice_paid`, `on_invoice_failed`).
//!
//! Every change (an endpoint or a scheduled job) runs the same way: claim the subscription,
//! catch up with what became due and apply the action, save the new value, its history entry
//! and its charges in one transaction, invoice every charge not invoiced yet (a charge saved
//! but not invoiced, after a crash in between, is invoiced by the next change or job; an
//! invoiced one never again), keep one scheduled job at `next_due` and release the claim. A
//! scheduled job uses its `due_at` as "now", so a late or repeated run changes nothing that was
//! already done.

use chrono::{DateTime, Utc};
use rebill_billing::invoice::{InvoiceOrigin, LineItem};
use rebill_billing::lifecycle::{
    self, Action, LifecycleError, Refund, Subscription as Engine, SubscriptionState as EngineState, Transition,
};
use rebill_store::accounts::Account;
use rebill_store::invoicing::{CollectionMethod as InvoiceCollection, InvoiceTerms, Transaction};
use rebill_store::jobs::Job;
use rebill_store::subscriptions::{
    Charge, Claimed, Indexed, NewCharge, SubscriptionChange, SubscriptionClaim, SubscriptionRecord,
};
use rebill_store::{Site, StoreError};
use serde::{Deserialize, Serialize};

use crate::error::SubscriptionError;
use crate::invoicing::{self, Collect, Draft};
use crate::jobs::JobError;
use crate::{Services, time};

/// Seconds a change holds its claim on a subscription (service clock); a process that dies
/// holding one blocks the subscription this long at most.
pub const CLAIM_SECONDS: i64 = 60;
/// How long a scheduled job waits for a change in progress to finish before it is retried.
const JOB_CLAIM_ATTEMPTS: u32 = 200;
const JOB_CLAIM_PAUSE: std::time::Duration = std::time::Duration::from_millis(25);

// ---------------------------------------------------------------------------------------------
// Stored documents

/// What the service keeps beside the engine's value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Details {
    pub account_code: String,
    #[serde(default)]
    pub po_number: Option<String>,
    #[serde(default)]
    pub net_terms: Option<i64>,
    #[serde(default)]
    pub collection_method: Option<String>,
    #[serde(default)]
    pub terms_and_conditions: Option<String>,
    #[serde(default)]
    pub customer_notes: Option<String>,
    #[serde(default)]
    pub vat_reverse_charge_notes: Option<String>,
}

pub fn to_json<T: Serialize>(value: &T) -> Result<String, SubscriptionError> {
    Ok(serde_json::to_string(value)?)
}

pub fn from_json<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, SubscriptionError> {
    Ok(serde_json::from_str(text)?)
}

/// A loaded subscription: its record and the documents in it.
pub struct Loaded {
    pub record: SubscriptionRecord,
    pub sub: Engine,
    pub details: Details,
}

impl Loaded {
    pub fn of(record: SubscriptionRecord) -> Result<Self, SubscriptionError> {
        let sub = from_json(&record.value)?;
        let details = from_json(&record.details)?;
        Ok(Self { record, sub, details })
    }
}

pub fn epoch(t: DateTime<Utc>) -> i64 {
    t.timestamp()
}

pub fn indexed(sub: &Engine) -> Indexed {
    Indexed {
        state: sub.state.name().to_owned(),
        past_due: sub.past_due,
        trial_started_at: sub.trial_started_at.map(epoch),
        trial_ends_at: sub.trial_ends_at.map(epoch),
    }
}

/// A new subscription uuid: 32 hexadecimal characters (128 random bits).
pub fn new_uuid() -> String {
    let mut bytes = [0u8; 16];
    // Without the operating system's random source no identifier can be made.
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    hex::encode(bytes)
}

// ---------------------------------------------------------------------------------------------
// Catching up and saving

/// One charge to invoice: lines and origin.
pub struct Pending {
    pub origin: InvoiceOrigin,
    pub at: DateTime<Utc>,
    pub lines: Vec<LineItem>,
}

/// Runs every scheduled transition due at or before `now`, one charge per transition with lines.
pub fn catch_up(sub: &Engine, now: DateTime<Utc>, charges: &mut Vec<Pending>) -> Result<Engine, LifecycleError> {
    let mut s = sub.clone();
    while let Some(due) = lifecycle::next_due(&s) {
        if due.at > now {
            break;
        }
        let step = lifecycle::advance(&s)?;
        if let Some(origin) = step.origin {
            charges.push(Pending { origin, at: due.at, lines: step.lines });
        }
        s = step.subscription;
    }
    Ok(s)
}

pub fn push(transition: Transition, at: DateTime<Utc>, charges: &mut Vec<Pending>) -> Engine {
    if let Some(origin) = transition.origin {
        charges.push(Pending { origin, at, lines: transition.lines });
    }
    transition.subscription
}

pub fn new_charges(charges: &[Pending]) -> Result<Vec<NewCharge>, SubscriptionError> {
    charges
        .iter()
        .map(|c| Ok(NewCharge { origin: c.origin.name().to_owned(), at: epoch(c.at), lines: to_json(&c.lines)? }))
        .collect()
}

/// Keeps the one scheduled job of the subscription at its `next_due`.
pub async fn reschedule(state: &Services, site_id: i64, sub: &Engine, running: Option<i64>) -> Result<(), StoreError> {
    let next = lifecycle::next_due(sub).map(|d| (d.kind.name(), epoch(d.at)));
    state.store.reschedule_subscription(site_id, &sub.uuid, next, running).await
}

// ---------------------------------------------------------------------------------------------
// Invoicing

/// A charge of the subscription whose payment was declined: the declined transaction, or none
/// when there was no payment method to charge.
#[derive(Debug)]
pub struct Declined {
    pub transaction: Option<Box<Transaction>>,
}

/// What invoicing a charge did.
pub enum Collected {
    /// Invoiced and paid (or nothing to collect, or collected manually later).
    Paid(Option<String>),
    /// Invoiced, but the payment was declined (the transaction), or there is no payment method
    /// to charge (none).
    Declined(Option<String>, Option<Box<Transaction>>),
}

/// The invoice terms and notes of the subscription's invoices.
pub fn invoice_terms(details: &Details) -> InvoiceTerms {
    InvoiceTerms {
        collection_method: match details.collection_method.as_deref() {
            Some("manual") => InvoiceCollection::Manual,
            _ => InvoiceCollection::Automatic,
        },
        net_terms: details.net_terms.unwrap_or(0),
        po_number: details.po_number.clone(),
        customer_notes: details.customer_notes.clone(),
        terms_and_conditions: details.terms_and_conditions.clone(),
        vat_reverse_charge_notes: details.vat_reverse_charge_notes.clone(),
    }
}

/// Invoices one charge of the subscription's account (one invoice per charge) and collects it:
/// the first payment of a new subscription once (a decline refuses the creation), any later
/// charge automatically (a decline leaves the invoice past due, with dunning retries), or not
/// at all with the manual collection method.
pub async fn invoice_charge(
    state: &Services,
    site: &Site,
    account: &Account,
    details: &Details,
    charge: &Charge,
    lines: Vec<LineItem>,
) -> Result<Collected, SubscriptionError> {
    let origin = match charge.origin.as_str() {
        "purchase" => InvoiceOrigin::Purchase,
        "renewal" => InvoiceOrigin::Renewal,
        "immediate_change" => InvoiceOrigin::ImmediateChange,
        "termination" => InvoiceOrigin::Termination,
        other => return Err(SubscriptionError::UnknownOrigin(other.to_owned())),
    };
    let terms = invoice_terms(details);
    let collect = if terms.collection_method == InvoiceCollection::Manual {
        Collect::Manual
    } else if origin == InvoiceOrigin::Purchase {
        Collect::Once
    } else {
        Collect::Automatic
    };
    let draft = Draft { terms, ..Draft::of_lines(lines, origin) };
    let invoiced = invoicing::invoice(state, site, account, draft, charge.at, collect, None).await?;
    let number = Some(invoiced.invoice.invoice_number.to_string());
    if invoiced.is_paid() || collect == Collect::Manual {
        return Ok(Collected::Paid(number));
    }
    Ok(Collected::Declined(number, invoiced.declined().map(|t| Box::new(t.clone()))))
}

/// Invoices the subscription's charges not invoiced yet, in order. A charge whose lines the
/// invoices already hold (it was invoiced, then the process stopped before recording it) is
/// recorded, not invoiced again. A declined charge other than the first payment makes the
/// subscription past due (saved under the held claim). Answers the first declined charge, if
/// one was.
pub async fn bill_pending(
    state: &Services,
    site: &Site,
    claim: &SubscriptionClaim,
    loaded: &mut Loaded,
    now: i64,
) -> Result<Option<Declined>, SubscriptionError> {
    let all = state.store.subscription_charges(loaded.record.id).await?;
    if all.iter().all(|c| c.billed_at.is_some()) {
        return Ok(None);
    }
    let account =
        state.store.account(site.id, &loaded.details.account_code).await?.ok_or(SubscriptionError::AccountMissing)?;
    let mut recorded: Vec<LineItem> = Vec::new();
    for charge in all.iter().filter(|c| c.billed_at.is_some()) {
        recorded.extend(from_json::<Vec<LineItem>>(&charge.lines)?);
    }
    let mut declined = None;
    for charge in all.iter().filter(|c| c.billed_at.is_none()) {
        let lines: Vec<LineItem> = from_json(&charge.lines)?;
        let invoiced = invoicing::billed_lines(state, &loaded.record.uuid).await?;
        let mut with_charge = recorded.clone();
        with_charge.extend(lines.iter().cloned());
        let already = !lines.is_empty() && rebill_billing::invoice::diff(&with_charge, &invoiced)?.is_empty();
        recorded.extend(lines.iter().cloned());
        if !state.store.holds_subscription_claim(claim).await? {
            return Err(SubscriptionError::ClaimLost);
        }
        if already || lines.is_empty() {
            state.store.mark_charge_billed(charge, None, now).await?;
            continue;
        }
        let outcome = invoice_charge(state, site, &account, &loaded.details, charge, lines).await?;
        let invoice = match &outcome {
            Collected::Paid(invoice) | Collected::Declined(invoice, _) => invoice.clone(),
        };
        state.store.mark_charge_billed(charge, invoice.as_deref(), now).await?;
        if let Collected::Declined(_, transaction) = outcome {
            if !loaded.sub.past_due && charge.origin != "purchase" {
                let failed = lifecycle::fail_renewal(&loaded.sub)?;
                save_plain(state, claim, loaded, failed, Vec::new(), now).await?;
            }
            declined.get_or_insert(Declined { transaction });
        }
    }
    if let Some(record) = state.store.subscription_by_id(loaded.record.id).await? {
        loaded.record = record;
    }
    Ok(declined)
}

/// Saves a new value without charges (past due, recovered, expired for non-payment), with
/// these history entries.
pub async fn save_plain(
    state: &Services,
    claim: &SubscriptionClaim,
    loaded: &mut Loaded,
    sub: Engine,
    history: Vec<(i64, String)>,
    now: i64,
) -> Result<(), SubscriptionError> {
    let change = SubscriptionChange {
        indexed: indexed(&sub),
        value: serde_json::to_string(&sub)?,
        details: serde_json::to_string(&loaded.details)?,
        history,
        ..SubscriptionChange::default()
    };
    match state.store.save_subscription(claim, &change, now).await? {
        Some(record) => {
            loaded.record = record;
            loaded.sub = sub;
            Ok(())
        }
        None => Err(SubscriptionError::ClaimLost),
    }
}

// ---------------------------------------------------------------------------------------------
// Scheduled work and invoice outcomes

/// Claims a subscription for scheduled work, waiting for a change in progress to finish.
pub async fn claim_for_work(
    state: &Services,
    site_id: i64,
    uuid: &str,
) -> Result<Option<(SubscriptionClaim, SubscriptionRecord)>, JobError> {
    for _ in 0..JOB_CLAIM_ATTEMPTS {
        let service_now = state.clock.now();
        match state.store.claim_subscription(site_id, uuid, service_now, service_now + CLAIM_SECONDS).await? {
            Claimed::Held(claim, record) => return Ok(Some((claim, *record))),
            Claimed::NotFound => return Ok(None),
            Claimed::Busy => tokio::time::sleep(JOB_CLAIM_PAUSE).await,
        }
    }
    Err(SubscriptionError::Busy(uuid.to_owned()).into())
}

/// Runs a scheduled subscription job (renewal, trial end, pause start or end, expiration, …)
/// at its due time: what is due then happens (once), its charges are invoiced (one invoice per
/// renewal) and the next job is scheduled.
pub async fn run_job(state: &Services, site: &Site, job: &Job) -> Result<(), JobError> {
    let Some((claim, record)) = claim_for_work(state, job.site_id, &job.subject).await? else {
        // The subscription is gone (a refused creation): nothing to do.
        return Ok(());
    };
    let result = run_job_held(state, site, job, &claim, record).await;
    if let Err(e) = state.store.release_subscription(&claim).await {
        tracing::warn!(error = %e, "releasing a subscription claim");
    }
    result
}

pub async fn run_job_held(
    state: &Services,
    site: &Site,
    job: &Job,
    claim: &SubscriptionClaim,
    record: SubscriptionRecord,
) -> Result<(), JobError> {
    let at = time(job.due_at).ok_or(SubscriptionError::TimeOutOfRange)?;
    let mut loaded = Loaded::of(record)?;
    let mut charges = Vec::new();
    let sub = catch_up(&loaded.sub, at, &mut charges).map_err(SubscriptionError::from)?;
    if sub != loaded.sub {
        let change = SubscriptionChange {
            indexed: indexed(&sub),
            value: serde_json::to_string(&sub).map_err(SubscriptionError::from)?,
            details: loaded.record.details.clone(),
            charges: new_charges(&charges)?,
            ..SubscriptionChange::default()
        };
        match state.store.save_subscription(claim, &change, job.due_at).await? {
            Some(saved) => loaded = Loaded { record: saved, sub, details: loaded.details },
            None => return Err(SubscriptionError::ClaimLost.into()),
        }
    }
    bill_pending(state, site, claim, &mut loaded, job.due_at).await?;
    reschedule(state, site.id, &loaded.sub, Some(job.id)).await?;
    Ok(())
}

/// Applies `f` to each subscription billed on the invoice (renewal lines name their
/// subscription), under a claim.
async fn for_invoice_subscriptions(
    state: &Services,
    site_id: i64,
    uuids: &[String],
    at: i64,
    f: impl Fn(&Engine) -> Option<(Engine, Option<Action>)>,
) -> Result<(), JobError> {
    for uuid in uuids {
        let Some((claim, record)) = claim_for_work(state, site_id, uuid).await? else { continue };
        let result = async {
            let mut loaded = Loaded::of(record)?;
            if let Some((next, action)) = f(&loaded.sub) {
                let rescheduled = next.state != loaded.sub.state;
                let history = match action {
                    Some(a) => vec![(at, serde_json::to_string(&a).map_err(SubscriptionError::from)?)],
                    None => Vec::new(),
                };
                save_plain(state, &claim, &mut loaded, next, history, at).await?;
                if rescheduled {
                    reschedule(state, site_id, &loaded.sub, None).await?;
                }
            }
            Ok::<(), JobError>(())
        }
        .await;
        if let Err(e) = state.store.release_subscription(&claim).await {
            tracing::warn!(error = %e, "releasing a subscription claim");
        }
        result?;
    }
    Ok(())
}

/// An invoice of subscription charges was paid (at last): its subscriptions are no longer past
/// due.
pub async fn on_invoice_paid(
    state: &Services,
    site_id: i64,
    subscription_uuids: &[String],
    at: i64,
) -> Result<(), JobError> {
    for_invoice_subscriptions(state, site_id, subscription_uuids, at, |sub| {
        sub.past_due.then(|| lifecycle::recover(sub).ok().map(|s| (s, None))).flatten()
    })
    .await
}

/// The collection of an invoice of subscription charges failed for good (dunning exhausted):
/// its subscriptions expire now.
pub async fn on_invoice_failed(
    state: &Services,
    site_id: i64,
    subscription_uuids: &[String],
    at: i64,
) -> Result<(), JobError> {
    let Some(now) = time(at) else { return Err(SubscriptionError::TimeOutOfRange.into()) };
    for_invoice_subscriptions(state, site_id, subscription_uuids, at, |sub| {
        // Ended for non-payment: nothing more is billed, so a transition due meanwhile is not
        // run (the history records the termination at the instant of the failure).
        if sub.state == EngineState::Expired || lifecycle::next_due(sub).is_some_and(|d| d.at <= now) {
            return None;
        }
        let action = Action::Terminate { refund: Refund::None };
        lifecycle::apply(sub, &action, now).ok().map(|t| (t.subscription, Some(action)))
    })
    .await
}

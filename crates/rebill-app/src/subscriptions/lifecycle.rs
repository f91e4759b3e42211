//! The work of subscriptions below the endpoints: the stored documents, catching up with what
//! became due, invoicing a subscription's charges (`bill_pending`), scheduled jobs (`run_job`)
//! and the reaction to the outcomes of their invoices (`on_invoice_settled`, the subscriber of
//! `invoice.paid` and `invoice.failed` events, see [`crate::platform::events`]).
//!
//! Every change (an endpoint or a scheduled job) runs the same way: claim the subscription,
//! catch up with what became due and apply the action, save the new value, its events (one per
//! transition: renewed, paused, canceled, …) and its charges in one transaction, invoice every charge not invoiced yet (a charge saved
//! but not invoiced, after a crash in between, is invoiced by the next change or job; an
//! invoiced one never again), keep one scheduled job at `next_due` and release the claim. A
//! scheduled job uses its `due_at` as "now", so a late or repeated run changes nothing that was
//! already done.

use chrono::{DateTime, Utc};
use rebill_billing::invoice::{InvoiceOrigin, LineItem};
use rebill_billing::lifecycle::{
    self, Action, DueKind, LifecycleError, NewSubscription, Refund, Subscription as Engine,
    SubscriptionState as EngineState, Transition,
};
use rebill_store::accounts::{Account, AccountFields};
use rebill_store::events::{Event, NewEvent};
use rebill_store::invoices::{CollectionMethod as InvoiceCollection, Invoice, InvoiceKind, InvoiceTerms, Transaction};
use rebill_store::jobs::Job;
use rebill_store::subscriptions::{
    Charge, Claimed, NewCharge, NewSubscriptionRecord, SubscriptionChange, SubscriptionClaim, SubscriptionRecord,
};
use rebill_store::{Site, StoreError};
use serde_json::{Value, json};

use crate::billing::invoicing::{self, Collect, Draft, Preview};
use crate::catalog::coupons::{self, CouponView};
use crate::customers::payment_methods::{self, BillingRequest, PaymentMethodError, Refusal};
use crate::customers::shipping_addresses::{self, ShippingChoice, ShippingError};
use crate::platform::error::SubscriptionError;
use crate::platform::events;
use crate::platform::jobs::JobError;
use crate::{Context, Services, time};
use rebill_store::shipping_addresses::ShippingFields;

/// Seconds a change holds its claim on a subscription (service clock); a process that dies
/// holding one blocks the subscription this long at most.
pub const CLAIM_SECONDS: i64 = 60;
/// How long a scheduled job waits for a change in progress to finish before it is retried.
const JOB_CLAIM_ATTEMPTS: u32 = 200;
const JOB_CLAIM_PAUSE: std::time::Duration = std::time::Duration::from_millis(25);

pub use crate::platform::subscription_documents::{Details, Loaded, epoch, from_json, indexed, new_uuid, to_json};

// ---------------------------------------------------------------------------------------------
// Catching up and saving

/// One charge to invoice: lines and origin.
#[derive(Debug, Clone)]
pub struct Pending {
    pub origin: InvoiceOrigin,
    pub at: DateTime<Utc>,
    pub lines: Vec<LineItem>,
}

/// One transition of a subscription, as its event records it.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The event's kind (`subscription.renewed`, …).
    pub kind: &'static str,
    /// Site time.
    pub at: i64,
    /// The subscription's state and plan after the transition.
    pub state: &'static str,
    pub plan_code: String,
    /// The action accepted, for a requested change.
    pub action: Option<Value>,
}

impl Step {
    pub fn of(kind: &'static str, at: i64, after: &Engine, action: Option<Value>) -> Self {
        Self { kind, at, state: after.state.name(), plan_code: after.terms.plan_code.clone(), action }
    }
}

/// What a series of transitions made: the charges to invoice and the steps to record.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    pub charges: Vec<Pending>,
    pub steps: Vec<Step>,
}

/// The event kind of a scheduled transition.
pub fn due_kind(kind: DueKind) -> &'static str {
    match kind {
        DueKind::Activation => "subscription.activated",
        DueKind::TrialEnd => "subscription.trial_ended",
        DueKind::Renewal => "subscription.renewed",
        DueKind::PauseStart => "subscription.paused",
        DueKind::PausedRenewal => "subscription.paused_renewal",
        DueKind::PauseEnd => "subscription.resumed",
        DueKind::Expiration => events::SUBSCRIPTION_EXPIRED,
    }
}

/// The event kind of an accepted action taken by `before`: resuming a subscription whose pause
/// is only scheduled cancels the pause (`subscription.pause_canceled`).
pub fn action_kind(before: &Engine, action: &Action) -> &'static str {
    match action {
        Action::Resume if before.state != lifecycle::SubscriptionState::Paused && before.has_scheduled_pause() => {
            "subscription.pause_canceled"
        }
        Action::Activate => "subscription.activated",
        Action::Change { .. } => "subscription.changed",
        Action::Pause { .. } => "subscription.pause_scheduled",
        Action::Resume => "subscription.resumed",
        Action::Cancel => "subscription.canceled",
        Action::Reactivate => "subscription.reactivated",
        Action::Terminate { .. } => events::SUBSCRIPTION_EXPIRED,
        Action::Postpone { .. } => "subscription.postponed",
        Action::SetRemainingBillingCycles { .. } | Action::SetImportedTrial { .. } => "subscription.updated",
    }
}

/// Runs every scheduled transition due at or before `now`, one charge per transition with lines
/// and one step each.
pub fn catch_up(sub: &Engine, now: DateTime<Utc>, progress: &mut Progress) -> Result<Engine, LifecycleError> {
    let mut s = sub.clone();
    while let Some(due) = lifecycle::next_due(&s) {
        if due.at > now {
            break;
        }
        let step = lifecycle::advance(&s)?;
        if let Some(origin) = step.origin {
            progress.charges.push(Pending { origin, at: due.at, lines: step.lines });
        }
        s = step.subscription;
        progress.steps.push(Step::of(due_kind(due.kind), epoch(due.at), &s, None));
    }
    Ok(s)
}

/// Takes the charges of a requested transition (an action, recorded as a step of `kind`).
pub fn push(
    transition: Transition,
    at: DateTime<Utc>,
    kind: &'static str,
    action: Option<Value>,
    progress: &mut Progress,
) -> Engine {
    if let Some(origin) = transition.origin {
        progress.charges.push(Pending { origin, at, lines: transition.lines });
    }
    progress.steps.push(Step::of(kind, epoch(at), &transition.subscription, action));
    transition.subscription
}

/// The event of a subscription's step (subject: its uuid).
pub fn step_event(services: &Services, step: &Step, details: &Details) -> NewEvent {
    let mut payload = json!({
        "account_code": details.account_code,
        "plan_code": step.plan_code,
        "state": step.state,
    });
    if let (Some(action), Some(map)) = (&step.action, payload.as_object_mut()) {
        map.insert("action".to_owned(), action.clone());
    }
    events::new(services, step.kind, step.at, payload)
}

/// The events of a subscription's steps.
pub fn step_events(services: &Services, steps: &[Step], details: &Details) -> Vec<NewEvent> {
    steps.iter().map(|s| step_event(services, s, details)).collect()
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
    /// Invoiced and paid (or nothing to collect, or collected manually later, or its payment's
    /// outcome not known yet: the settle job does what follows it).
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

/// The origin of the invoice of a charge.
fn charge_origin(charge: &Charge) -> Result<InvoiceOrigin, SubscriptionError> {
    Ok(match charge.origin.as_str() {
        "purchase" => InvoiceOrigin::Purchase,
        "renewal" => InvoiceOrigin::Renewal,
        "immediate_change" => InvoiceOrigin::ImmediateChange,
        "termination" => InvoiceOrigin::Termination,
        other => return Err(SubscriptionError::UnknownOrigin(other.to_owned())),
    })
}

/// How the invoice of a charge is collected: not at all with the manual collection method, the
/// first payment of a new subscription once (a decline refuses the creation), any later charge
/// automatically (a decline leaves the invoice past due, with dunning retries).
pub fn collection(terms: &InvoiceTerms, origin: InvoiceOrigin) -> Collect {
    if terms.collection_method == InvoiceCollection::Manual {
        Collect::Manual
    } else if origin == InvoiceOrigin::Purchase {
        Collect::Once
    } else {
        Collect::Automatic
    }
}

/// Whether a charge with `lines` is on the invoices already: `recorded` are the lines of the
/// subscription's earlier charges, `invoiced` the lines its invoices hold (it was invoiced, then
/// the process stopped before recording it). A charge without lines is never invoiced.
pub fn already_invoiced(
    recorded: &[LineItem],
    lines: &[LineItem],
    invoiced: &[LineItem],
) -> Result<bool, SubscriptionError> {
    if lines.is_empty() {
        return Ok(true);
    }
    let mut with_charge = recorded.to_vec();
    with_charge.extend(lines.iter().cloned());
    Ok(rebill_billing::invoice::diff(&with_charge, invoiced)?.is_empty())
}

/// A declined charge other than a first payment: the subscription falls past due (saved under
/// the held claim with its event), unless it is already.
pub async fn fall_past_due(
    state: &Services,
    claim: &SubscriptionClaim,
    loaded: &mut Loaded,
    now: i64,
) -> Result<(), SubscriptionError> {
    if loaded.sub.past_due {
        return Ok(());
    }
    let failed = lifecycle::fail_renewal(&loaded.sub)?;
    let event = Step::of(events::SUBSCRIPTION_PAST_DUE, now, &failed, None);
    let events = vec![step_event(state, &event, &loaded.details)];
    save_plain(state, claim, loaded, failed, events, now).await
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
    let origin = charge_origin(charge)?;
    let draft = charge_draft(details, origin, lines);
    let collect = collection(&draft.terms, origin);
    let invoiced = invoicing::invoice(state, site, account, draft, charge.at, collect, None).await?;
    Ok(collected(&invoiced, collect))
}

/// The draft of the invoice of one charge of the subscription: its lines and origin, with the
/// subscription's invoice terms and notes ([`invoice_charge`] and the previews of its invoices).
pub fn charge_draft(details: &Details, origin: InvoiceOrigin, lines: Vec<LineItem>) -> Draft {
    Draft { terms: invoice_terms(details), ..Draft::of_lines(lines, origin) }
}

/// What invoicing a charge did, from its invoice as collected.
fn collected(invoiced: &invoicing::Invoiced, collect: Collect) -> Collected {
    let number = Some(invoiced.invoice.invoice_number.to_string());
    if invoiced.is_paid() || collect == Collect::Manual || invoiced.pending().is_some() {
        return Collected::Paid(number);
    }
    Collected::Declined(number, invoiced.declined().map(|t| Box::new(t.clone())))
}

/// A charge whose lines an invoice already holds (it was invoiced, then the run stopped before
/// recording it): the first collection of that invoice is finished if it never was (a crash
/// between recording the charge's transaction `processing` and completing it leaves the
/// invoice `pending`), and the charge is recorded with its invoice. `None` when no invoice
/// holds the lines.
async fn resume_charge(
    state: &Services,
    site: &Site,
    account: &Account,
    loaded: &Loaded,
    charge: &Charge,
    lines: &[LineItem],
) -> Result<Option<Collected>, SubscriptionError> {
    let adjustments = state.store.subscription_adjustments(&loaded.record.uuid).await?;
    let number = adjustments
        .iter()
        .filter(|a| invoicing::line_of_adjustment(a).is_some_and(|l| lines.contains(&l)))
        .find_map(|a| a.invoice_number);
    let Some(number) = number else { return Ok(None) };
    let Some(invoice) = state.store.invoice(site.id, number).await? else { return Ok(None) };
    let origin = charge_origin(charge)?;
    let collect = collection(&invoice_terms(&loaded.details), origin);
    let invoiced = invoicing::resume_first_collection(state, site, account, invoice, collect).await?;
    Ok(Some(collected(&invoiced, collect)))
}

/// Invoices the subscription's charges not invoiced yet, in order. A charge whose lines the
/// invoices already hold (it was invoiced, then the process stopped before recording it) is
/// not invoiced again: its invoice's first collection is finished ([`resume_charge`]) and the
/// charge recorded with it. A declined charge other than the first payment makes the
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
        let already = already_invoiced(&recorded, &lines, &invoiced)?;
        recorded.extend(lines.iter().cloned());
        if !state.store.holds_subscription_claim(claim).await? {
            return Err(SubscriptionError::ClaimLost);
        }
        let outcome = if lines.is_empty() {
            None
        } else if already {
            resume_charge(state, site, &account, loaded, charge, &lines).await?
        } else {
            Some(invoice_charge(state, site, &account, &loaded.details, charge, lines).await?)
        };
        let Some(outcome) = outcome else {
            state.store.mark_charge_billed(charge, None, now).await?;
            continue;
        };
        let invoice = match &outcome {
            Collected::Paid(invoice) | Collected::Declined(invoice, _) => invoice.clone(),
        };
        state.store.mark_charge_billed(charge, invoice.as_deref(), now).await?;
        if let Collected::Declined(_, transaction) = outcome {
            if charge.origin != "purchase" {
                fall_past_due(state, claim, loaded, now).await?;
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
/// the events of the change.
pub async fn save_plain(
    state: &Services,
    claim: &SubscriptionClaim,
    loaded: &mut Loaded,
    sub: Engine,
    events: Vec<NewEvent>,
    now: i64,
) -> Result<(), SubscriptionError> {
    let change = SubscriptionChange {
        indexed: indexed(&sub),
        value: serde_json::to_string(&sub)?,
        details: serde_json::to_string(&loaded.details)?,
        events,
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
    let mut progress = Progress::default();
    let sub = catch_up(&loaded.sub, at, &mut progress).map_err(SubscriptionError::from)?;
    if sub != loaded.sub {
        let change = caught_up_change(state, &loaded, &sub, &progress)?;
        match state.store.save_subscription(claim, &change, job.due_at).await? {
            Some(saved) => loaded = Loaded { record: saved, sub, details: loaded.details },
            None => return Err(SubscriptionError::ClaimLost.into()),
        }
    }
    bill_pending(state, site, claim, &mut loaded, job.due_at).await?;
    reschedule(state, site.id, &loaded.sub, Some(job.id)).await?;
    Ok(())
}

/// What a scheduled job saves after catching `loaded` up to `sub`: the new value, the events of
/// the steps and the charges made (the details as they are). The renewal path saves the same.
pub fn caught_up_change(
    state: &Services,
    loaded: &Loaded,
    sub: &Engine,
    progress: &Progress,
) -> Result<SubscriptionChange, SubscriptionError> {
    Ok(SubscriptionChange {
        indexed: indexed(sub),
        value: to_json(sub)?,
        details: loaded.record.details.clone(),
        events: step_events(state, &progress.steps, &loaded.details),
        charges: new_charges(&progress.charges)?,
        ..SubscriptionChange::default()
    })
}

/// Applies `f` to each subscription billed on the invoice (renewal lines name their
/// subscription), under a claim; `f` answers the new value and the event kind of the change.
async fn for_invoice_subscriptions(
    state: &Services,
    site_id: i64,
    uuids: &[String],
    at: i64,
    f: impl Fn(&Engine) -> Option<(Engine, &'static str, Option<Value>)>,
) -> Result<(), JobError> {
    for uuid in uuids {
        let Some((claim, record)) = claim_for_work(state, site_id, uuid).await? else { continue };
        let result = async {
            let mut loaded = Loaded::of(record)?;
            if let Some((next, kind, action)) = f(&loaded.sub) {
                let rescheduled = next.state != loaded.sub.state;
                let events = vec![step_event(state, &Step::of(kind, at, &next, action), &loaded.details)];
                save_plain(state, &claim, &mut loaded, next, events, at).await?;
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

/// The subscriptions an invoice's lines bill.
async fn invoice_subscriptions(state: &Services, invoice: &Invoice) -> Result<Vec<String>, StoreError> {
    let mut uuids: Vec<String> =
        state.store.invoice_lines(invoice.id).await?.into_iter().filter_map(|a| a.line.subscription_uuid).collect();
    uuids.sort();
    uuids.dedup();
    Ok(uuids)
}

/// The subscriber of `invoice.paid` and `invoice.failed` ([`crate::platform::events::reacts_to`]): the invoice's
/// subscriptions recover ([`on_invoice_paid`]) or expire ([`on_invoice_failed`]) at the event's
/// time. Idempotent: a subscription that recovered or expired already is left as it is.
pub async fn on_invoice_settled(state: &Services, event: &Event) -> Result<(), JobError> {
    let unknown = || StoreError::Invalid(format!("event {} names no invoice of its site", event.id));
    let number: i64 = event.subject.parse().map_err(|_| unknown())?;
    let invoice = state.store.invoice(event.site_id, number).await?.ok_or_else(unknown)?;
    let uuids = invoice_subscriptions(state, &invoice).await?;
    if uuids.is_empty() {
        return Ok(());
    }
    match event.kind.as_str() {
        events::INVOICE_PAID => on_invoice_paid(state, event.site_id, &uuids, event.at).await,
        _ => on_invoice_failed(state, event.site_id, &uuids, event.at).await,
    }
}

/// The subscriptions billed on `invoice`, whose first collection the gateway declined after the
/// call that invoiced it had returned (the settle job learnt the answer late), left as that call
/// leaves them when it learns the decline at once, as near as can be: the subscriptions of a
/// later charge (a renewal, a change, a termination) fall past due ([`fall_past_due`], its
/// event at `at`); a new subscription (`first_payment`: a signup's or purchase's invoice), whose
/// creation that call would have refused, expires for non-payment as when its invoice fails
/// ([`on_invoice_failed`]). Idempotent: a subscription past due or expired already is left as
/// it is.
pub async fn on_first_collection_declined(
    state: &Services,
    invoice: &Invoice,
    first_payment: bool,
    at: i64,
) -> Result<(), JobError> {
    let uuids = invoice_subscriptions(state, invoice).await?;
    if uuids.is_empty() {
        return Ok(());
    }
    if first_payment {
        return on_invoice_failed(state, invoice.site_id, &uuids, at).await;
    }
    for_invoice_subscriptions(state, invoice.site_id, &uuids, at, |sub| {
        if sub.past_due {
            return None;
        }
        lifecycle::fail_renewal(sub).ok().map(|failed| (failed, events::SUBSCRIPTION_PAST_DUE, None))
    })
    .await
}

/// An invoice of subscription charges was paid (at last): its subscriptions are no longer past
/// due.
async fn on_invoice_paid(
    state: &Services,
    site_id: i64,
    subscription_uuids: &[String],
    at: i64,
) -> Result<(), JobError> {
    for_invoice_subscriptions(state, site_id, subscription_uuids, at, |sub| {
        sub.past_due.then(|| lifecycle::recover(sub).ok().map(|s| (s, events::SUBSCRIPTION_RECOVERED, None))).flatten()
    })
    .await
}

/// The collection of an invoice of subscription charges failed for good (dunning exhausted, or
/// marked failed): its subscriptions expire now.
async fn on_invoice_failed(
    state: &Services,
    site_id: i64,
    subscription_uuids: &[String],
    at: i64,
) -> Result<(), JobError> {
    let Some(now) = time(at) else { return Err(SubscriptionError::TimeOutOfRange.into()) };
    let action = Action::Terminate { refund: Refund::None };
    let recorded = serde_json::to_value(&action).map_err(SubscriptionError::from)?;
    for_invoice_subscriptions(state, site_id, subscription_uuids, at, |sub| {
        // Ended for non-payment: nothing more is billed, so a transition due meanwhile is not
        // run (the event records the termination at the instant of the failure).
        if sub.state == EngineState::Expired || lifecycle::next_due(sub).is_some_and(|d| d.at <= now) {
            return None;
        }
        lifecycle::apply(sub, &action, now)
            .ok()
            .map(|t| (t.subscription, events::SUBSCRIPTION_EXPIRED, Some(recorded.clone())))
    })
    .await
}

/// Why a change of a stored subscription changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    #[error("no subscription with uuid {0}")]
    NotFound(String),
    /// Another change holds the subscription (in any process on the database).
    #[error("a change for this subscription is already in progress")]
    Busy,
    /// The billing engine refused the change (or catching up).
    #[error(transparent)]
    Refused(#[from] LifecycleError),
    #[error(transparent)]
    Failed(#[from] SubscriptionError),
}

/// One change of a stored subscription: claims it, catches up to `ctx.now`, applies the actions
/// `build` makes from the caught-up value (it may also change the details), saves the value, the
/// events and the charges in one transaction, invoices the charges (a declined one leaves its
/// invoice past due with retries and the subscription past due: the change stands),
/// reschedules and releases the claim. Answers the subscription as saved.
pub async fn change(
    services: &Services,
    ctx: &Context,
    uuid: &str,
    build: impl FnOnce(&Engine, &mut Details, DateTime<Utc>) -> Vec<Action>,
) -> Result<Loaded, ChangeError> {
    let now = time(ctx.now).ok_or(SubscriptionError::TimeOutOfRange)?;
    let service_now = services.clock.now();
    let (claim, record) =
        match services.store.claim_subscription(ctx.site.id, uuid, service_now, service_now + CLAIM_SECONDS).await {
            Ok(Claimed::Held(claim, record)) => (claim, *record),
            Ok(Claimed::Busy) => return Err(ChangeError::Busy),
            Ok(Claimed::NotFound) => return Err(ChangeError::NotFound(uuid.to_owned())),
            Err(e) => return Err(SubscriptionError::from(e).into()),
        };
    let result = change_held(services, ctx, &claim, record, now, build).await;
    if let Err(e) = services.store.release_subscription(&claim).await {
        tracing::warn!(error = %e, "releasing a subscription claim");
    }
    result
}

async fn change_held(
    services: &Services,
    ctx: &Context,
    claim: &SubscriptionClaim,
    record: SubscriptionRecord,
    now: DateTime<Utc>,
    build: impl FnOnce(&Engine, &mut Details, DateTime<Utc>) -> Vec<Action>,
) -> Result<Loaded, ChangeError> {
    let mut loaded = Loaded::of(record)?;
    let mut progress = Progress::default();
    let caught_up = catch_up(&loaded.sub, now, &mut progress)?;
    let mut details = loaded.details.clone();
    let actions = build(&caught_up, &mut details, now);
    let mut sub = caught_up;
    let updated = actions.is_empty() && details != loaded.details;
    for a in actions {
        let transition = lifecycle::apply(&sub, &a, now)?;
        let action = serde_json::to_value(&a).map_err(SubscriptionError::from)?;
        sub = push(transition, now, action_kind(&sub, &a), Some(action), &mut progress);
    }
    if updated {
        // Only the settings beside the engine's value (notes, terms) changed.
        progress.steps.push(Step::of("subscription.updated", ctx.now, &sub, None));
    }
    let plan_id = if sub.terms.plan_code != loaded.sub.terms.plan_code {
        services.store.plan(ctx.site.id, &sub.terms.plan_code).await.map_err(SubscriptionError::from)?.map(|p| p.id)
    } else {
        None
    };
    let change = SubscriptionChange {
        plan_id,
        indexed: indexed(&sub),
        value: to_json(&sub)?,
        details: to_json(&details)?,
        events: step_events(services, &progress.steps, &details),
        charges: new_charges(&progress.charges)?,
    };
    let saved = match services.store.save_subscription(claim, &change, ctx.now).await {
        Ok(Some(record)) => record,
        Ok(None) => return Err(ChangeError::Busy),
        Err(e) => return Err(SubscriptionError::from(e).into()),
    };
    loaded = Loaded { record: saved, sub, details };
    bill_pending(services, &ctx.site, claim, &mut loaded, ctx.now).await?;
    reschedule(services, ctx.site.id, &loaded.sub, None).await.map_err(SubscriptionError::from)?;
    Ok(loaded)
}

// ---------------------------------------------------------------------------------------------
// Previews

/// The invoices a subscription operation would make, nothing written: one per charge with lines,
/// as [`bill_pending`] invoices them ([`preview_invoices`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InvoicePreviews {
    /// The charge invoices (a total of zero or more), in the order the operation makes them.
    pub charges: Vec<Preview>,
    /// The invoices of money owed to the account (a total below zero): credit invoices, or
    /// legacy invoices on a site without Credit Memos.
    pub credits: Vec<Preview>,
}

impl InvoicePreviews {
    /// Files the previewed invoice of a charge (discounted as the invoice would be) as
    /// [`invoicing::invoice`] makes it: a credit invoice when it totals less than zero.
    pub fn add(&mut self, mut preview: Preview, credit_memos: bool) {
        invoicing::as_credit_when_negative(&mut preview.invoice, credit_memos);
        if preview.invoice.kind == InvoiceKind::Charge {
            self.charges.push(preview);
        } else {
            self.credits.push(preview);
        }
    }

    /// The operation's charge invoice: the first one it makes (`None`: it makes none).
    pub fn charge_invoice(&self) -> Option<&Preview> {
        self.charges.first()
    }
}

/// The invoices `charges` of the subscription (`uuid` on `plan_code`) would make for `account`
/// (`None`: an account not created yet), nothing written: each charge with lines drafted as
/// [`invoice_charge`] drafts it, discounted by the account's redemptions and the `coupons` the
/// operation redeems first (the first of them replacing the account's coupon, as a creation or a
/// change redeems them), and a credit invoice when it totals less than zero. The credit the
/// account holds, which the charge invoices made take, is not shown.
pub async fn preview_invoices(
    services: &Services,
    ctx: &Context,
    account: Option<&Account>,
    details: &Details,
    charges: &[Pending],
    coupons: &[CouponView],
    (uuid, plan_code): (&str, &str),
) -> Result<InvoicePreviews, SubscriptionError> {
    let account_id = account.map_or(0, |a| a.id);
    let subscription = [(uuid.to_owned(), plan_code.to_owned())];
    let mut previews = InvoicePreviews::default();
    for charge in charges.iter().filter(|c| !c.lines.is_empty()) {
        let draft = charge_draft(details, charge.origin, charge.lines.clone());
        let mut preview = invoicing::preview_for(account_id, &draft, epoch(charge.at))?;
        crate::billing::invoicing::discounts::discount_purchase_preview(
            services,
            ctx,
            account,
            &mut preview,
            coupons,
            &subscription,
        )
        .await?;
        previews.add(preview, ctx.site.credit_memos);
    }
    Ok(previews)
}

/// A change as [`change`] would make it now, nothing written: the subscription and details
/// after it, the total of the charges the change itself makes (not those of catching up) and the
/// invoices it makes of them.
#[derive(Debug, Clone)]
pub struct Previewed {
    pub sub: Engine,
    pub details: Details,
    pub cost_in_cents: i64,
    pub invoices: InvoicePreviews,
}

/// [`change`] as a dry run over the subscription as loaded, its invoices discounted as if
/// `coupons` were redeemed first, as [`change_with_coupons`] redeems them (checked by
/// the caller; none for a change without coupon codes).
pub async fn preview_change(
    services: &Services,
    ctx: &Context,
    current: &Loaded,
    coupons: &[CouponView],
    build: impl FnOnce(&Engine, &mut Details, DateTime<Utc>) -> Vec<Action>,
) -> Result<Previewed, ChangeError> {
    let now = time(ctx.now).ok_or(SubscriptionError::TimeOutOfRange)?;
    let mut progress = Progress::default();
    let mut sub = catch_up(&current.sub, now, &mut progress)?;
    let before = progress.charges.len();
    let mut details = current.details.clone();
    for a in build(&sub, &mut details, now) {
        sub = push(lifecycle::apply(&sub, &a, now)?, now, action_kind(&sub, &a), None, &mut progress);
    }
    let made = &progress.charges[before..];
    let cost_in_cents = made.iter().flat_map(|c| &c.lines).map(|l| l.total_in_cents).sum();
    let account = services
        .store
        .account(ctx.site.id, &details.account_code)
        .await
        .map_err(SubscriptionError::from)?
        .ok_or(SubscriptionError::AccountMissing)?;
    let subscription = (current.record.uuid.as_str(), current.sub.terms.plan_code.as_str());
    let invoices = preview_invoices(services, ctx, Some(&account), &details, made, coupons, subscription).await?;
    Ok(Previewed { sub, details, cost_in_cents, invoices })
}

/// The invoices the creation `drafted` would make, nothing written: for the account `existing`
/// (`None`: created with the subscription), with the `coupons` the creation redeems
/// ([`coupons::for_new_subscription`]).
pub async fn preview_create(
    services: &Services,
    ctx: &Context,
    existing: Option<&Account>,
    drafted: &Drafted,
    details: &Details,
    coupons: &[CouponView],
) -> Result<InvoicePreviews, SubscriptionError> {
    let subscription = (drafted.new.uuid.as_str(), drafted.new.terms.plan_code.as_str());
    preview_invoices(services, ctx, existing, details, &drafted.progress.charges, coupons, subscription).await
}

/// A new subscription as the engine made it, nothing written ([`draft`]).
#[derive(Debug, Clone)]
pub struct Drafted {
    pub new: NewSubscription,
    pub sub: Engine,
    /// The charges of the creation and its steps: created, then anything already due.
    pub progress: Progress,
}

impl Drafted {
    /// The total of the charges the creation makes (for a preview's `cost_in_cents`).
    pub fn cost_in_cents(&self) -> i64 {
        self.progress.charges.iter().flat_map(|c| &c.lines).map(|l| l.total_in_cents).sum()
    }
}

/// What the engine makes of `new` at `now`: the creation, then anything already due for a
/// backdated start. A preview of a creation is this dry run.
pub fn draft(new: NewSubscription, now: DateTime<Utc>) -> Result<Drafted, LifecycleError> {
    let mut progress = Progress::default();
    let created = lifecycle::create(new.clone(), now)?;
    let sub = push(created, now, events::SUBSCRIPTION_CREATED, None, &mut progress);
    let sub = catch_up(&sub, now, &mut progress)?;
    Ok(Drafted { new, sub, progress })
}

/// A subscription to create for an account.
#[derive(Debug)]
pub struct Subscribe {
    /// The account as found before (`None`: created here with `account_fields`).
    pub existing: Option<Account>,
    pub account_code: String,
    /// The fields of a nested account (an existing account is updated with them).
    pub account_fields: Option<AccountFields>,
    /// A nested billing info, checked before anything is written.
    pub billing_info: Option<BillingRequest>,
    pub plan_id: i64,
    pub drafted: Drafted,
    pub details: Details,
    /// Coupon codes to redeem with it (checked with `coupons::for_new_subscription`).
    pub coupon_codes: Vec<String>,
}

/// Why a subscription was not created (nothing of it is kept).
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// The nested billing info was refused before anything was written.
    #[error(transparent)]
    PaymentMethod(#[from] PaymentMethodError),
    /// The nested billing info was not saved (declined verification, …).
    #[error("the billing info was not saved: {0:?}")]
    BillingInfo(Refusal),
    #[error("no account with code {0}")]
    AccountNotFound(String),
    /// Another request created the account meanwhile.
    #[error("the account was created by another request meanwhile")]
    Busy,
    /// The first payment was declined (the transaction), or there was no payment method to
    /// charge (none).
    #[error("the first payment was declined")]
    FirstPaymentDeclined(Option<Box<Transaction>>),
    /// The shipping address named was refused (nothing was kept).
    #[error(transparent)]
    ShippingAddress(crate::customers::shipping_addresses::ShippingError),
    /// A coupon could not be redeemed (it expired or maxed out meanwhile); nothing is kept.
    #[error("a coupon code is invalid")]
    Coupon,
    #[error(transparent)]
    Failed(#[from] SubscriptionError),
}

impl From<StoreError> for CreateError {
    fn from(e: StoreError) -> Self {
        CreateError::Failed(e.into())
    }
}

/// Creates a subscription: the account (created, or updated with the nested fields) and its
/// billing info (an account created here goes again when its billing info is refused), the
/// subscription with its first charges, their invoice (a declined first payment removes the
/// subscription), and its scheduled job.
pub async fn create(services: &Services, ctx: &Context, input: Subscribe) -> Result<Loaded, CreateError> {
    create_shipped(services, ctx, input, None, &[]).await
}

/// [`create`] shipping to the address `shipping` names (an address of the account, or a new
/// one added to it), with `account_addresses` (the nested account's `shipping_addresses`) added
/// to the account: all checked before anything is written, and the addresses this request added
/// removed again when the subscription is refused after all.
pub async fn create_shipped(
    services: &Services,
    ctx: &Context,
    input: Subscribe,
    shipping: Option<ShippingChoice>,
    account_addresses: &[ShippingFields],
) -> Result<Loaded, CreateError> {
    let Subscribe {
        existing,
        account_code: code,
        account_fields,
        billing_info,
        plan_id,
        drafted,
        mut details,
        coupon_codes,
    } = input;
    let mut new_addresses = account_addresses.to_vec();
    if let Some(ShippingChoice::New(fields)) = &shipping {
        new_addresses.push((**fields).clone());
    }
    if !new_addresses.is_empty() {
        let held = match &existing {
            Some(a) => services.store.shipping_addresses(a.id).await?,
            None => Vec::new(),
        };
        shipping_addresses::check_new(&held, &new_addresses).map_err(CreateError::ShippingAddress)?;
    }
    match (&shipping, &existing) {
        (Some(ShippingChoice::Existing(id)), None) => {
            return Err(CreateError::ShippingAddress(ShippingError::NotFound(*id)));
        }
        (Some(ShippingChoice::Existing(id)), Some(account)) => {
            if services.store.shipping_address(account.id, *id).await?.is_none() {
                return Err(CreateError::ShippingAddress(ShippingError::NotFound(*id)));
            }
        }
        (Some(ShippingChoice::New(_)), _) | (None, _) => {}
    }
    let prepared = match &billing_info {
        Some(info) => Some(payment_methods::prepare(services, ctx, existing.as_ref(), info).await?),
        None => None,
    };
    let created_here = existing.is_none();
    let nested = account_fields.is_some();
    let fields = account_fields.unwrap_or_default();
    let account = match existing {
        Some(_) if nested => services
            .store
            .update_account(
                ctx.site.id,
                &code,
                &fields,
                ctx.now,
                &[events::account(services, events::ACCOUNT_UPDATED, ctx.now, &code)],
            )
            .await?
            .ok_or_else(|| CreateError::AccountNotFound(code.clone()))?,
        Some(account) => account,
        None => match services
            .store
            .create_account(
                ctx.site.id,
                &code,
                &fields,
                ctx.now,
                &[events::account(services, events::ACCOUNT_CREATED, ctx.now, &code)],
            )
            .await
        {
            Ok(a) => a,
            Err(StoreError::DuplicateAccount(_)) => return Err(CreateError::Busy),
            Err(e) => return Err(e.into()),
        },
    };
    if let Some(prepared) = prepared
        && let Err(refusal) = payment_methods::commit(services, ctx, &account, prepared).await
    {
        let keep = matches!(refusal, Refusal::Declined { saved: true, .. });
        if created_here
            && !keep
            && let Err(e) = services.store.discard_new_account(ctx.site.id, account.id).await
        {
            tracing::error!(error = %e, "removing an account whose billing info was refused");
        }
        return Err(CreateError::BillingInfo(refusal));
    }
    let mut added = Vec::new();
    if !account_addresses.is_empty() {
        match shipping_addresses::add(services, ctx, &account, account_addresses).await {
            Ok(resolved) => added = resolved,
            Err(e) => {
                if created_here && let Err(e) = services.store.discard_new_account(ctx.site.id, account.id).await {
                    tracing::error!(error = %e, "removing an account whose shipping addresses were refused");
                }
                return Err(CreateError::ShippingAddress(e));
            }
        }
    }
    let shipped = match &shipping {
        Some(choice) => match shipping_addresses::resolve(services, ctx, &account, choice).await {
            Ok(resolved) => Some(resolved),
            Err(e) => {
                if created_here && let Err(e) = services.store.discard_new_account(ctx.site.id, account.id).await {
                    tracing::error!(error = %e, "removing an account whose shipping address was refused");
                }
                return Err(CreateError::ShippingAddress(e));
            }
        },
        None => None,
    };
    if let Some(resolved) = &shipped {
        details.shipping_address_id = Some(resolved.address.id);
    }
    let Drafted { new, sub, progress } = drafted;
    let record = NewSubscriptionRecord {
        site_id: ctx.site.id,
        account_id: account.id,
        plan_id,
        uuid: new.uuid.clone(),
        indexed: indexed(&sub),
        value: to_json(&sub)?,
        creation: to_json(&new)?,
        details: to_json(&details)?,
    };
    let charges = new_charges(&progress.charges)?;
    let events = step_events(services, &progress.steps, &details);
    let lease = services.clock.now() + CLAIM_SECONDS;
    let (claim, record) = services.store.create_subscription(&record, &charges, &events, ctx.now, lease).await?;
    let mut loaded = Loaded { record, sub, details };
    let result =
        match coupons::redeem_for_subscription(services, ctx, &account, &new.uuid, &coupon_codes, &new.terms.currency)
            .await
        {
            Ok(redeemed) => {
                let result = finish_create(services, ctx, &claim, &mut loaded).await;
                if result.is_err()
                    && let Err(e) = coupons::discard(services, &redeemed).await
                {
                    tracing::error!(error = %e, "taking back the redemptions of a refused subscription");
                }
                result
            }
            Err(e) => {
                services.store.discard_subscription(&claim).await?;
                Err(match e {
                    coupons::CouponError::Store(e) => e.into(),
                    _ => CreateError::Coupon,
                })
            }
        };
    if let Err(e) = services.store.release_subscription(&claim).await {
        tracing::warn!(error = %e, "releasing a subscription claim");
    }
    if result.is_err() {
        for resolved in added.iter().chain(&shipped) {
            shipping_addresses::discard(services, ctx, &account, resolved).await;
        }
    }
    result.map(|()| loaded)
}

/// Invoices the new subscription's first charges and schedules it; a declined first payment
/// removes the subscription.
async fn finish_create(
    services: &Services,
    ctx: &Context,
    claim: &SubscriptionClaim,
    loaded: &mut Loaded,
) -> Result<(), CreateError> {
    if let Some(declined) = bill_pending(services, &ctx.site, claim, loaded, ctx.now).await? {
        services.store.discard_subscription(claim).await?;
        return Err(CreateError::FirstPaymentDeclined(declined.transaction));
    }
    reschedule(services, ctx.site.id, &loaded.sub, None).await?;
    Ok(())
}

impl From<ChangeError> for crate::platform::error::AppError {
    fn from(e: ChangeError) -> Self {
        match e {
            ChangeError::NotFound(uuid) => Self::NotFound(crate::platform::error::Missing::subscription(&uuid)),
            ChangeError::Busy => Self::Conflict(e.to_string()),
            ChangeError::Refused(e) => Self::refused("base", "invalid_transition", e.to_string()),
            ChangeError::Failed(e) => e.into(),
        }
    }
}

impl From<CreateError> for crate::platform::error::AppError {
    fn from(e: CreateError) -> Self {
        match e {
            CreateError::PaymentMethod(e) => e.into(),
            CreateError::BillingInfo(refusal) => refusal.into(),
            CreateError::AccountNotFound(code) => Self::NotFound(crate::platform::error::Missing::account(&code)),
            CreateError::Busy => Self::Conflict(e.to_string()),
            CreateError::FirstPaymentDeclined(transaction) => Self::Declined(transaction),
            CreateError::ShippingAddress(e) => e.into(),
            CreateError::Coupon => Self::refused("coupon_code", "invalid", "is invalid"),
            CreateError::Failed(e) => e.into(),
        }
    }
}

/// Why a change with coupons was not made.
#[derive(Debug, thiserror::Error)]
pub enum CouponChangeError {
    /// A coupon was refused (nothing redeemed).
    #[error(transparent)]
    Coupon(crate::catalog::coupons::CouponError),
    /// The change was refused or failed (its redemptions were taken back).
    #[error(transparent)]
    Change(ChangeError),
}

/// A change of the subscription `uuid` (`timeframe=now`) that redeems `codes` on it first, so the
/// change's invoice is discounted; a change that is then refused takes its redemptions back.
pub async fn change_with_coupons(
    services: &Services,
    ctx: &Context,
    uuid: &str,
    codes: &[String],
    build: impl FnOnce(
        &rebill_billing::lifecycle::Subscription,
        &mut Details,
        chrono::DateTime<chrono::Utc>,
    ) -> Vec<rebill_billing::lifecycle::Action>,
) -> Result<Loaded, CouponChangeError> {
    let redeemed =
        coupons::redeem_on_subscription(services, ctx, uuid, codes).await.map_err(CouponChangeError::Coupon)?;
    match change(services, ctx, uuid, build).await {
        Ok(loaded) => Ok(loaded),
        Err(e) => {
            if let Err(undo) = coupons::discard(services, &redeemed).await {
                tracing::error!(error = %undo, "taking back the redemptions of a refused change");
            }
            Err(CouponChangeError::Change(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use rebill_billing::invoice::{ItemRef, LineKind, OriginKey};
    use rebill_billing::states::InvoiceState;

    fn day(d: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2027, 1, d, 8, 0, 0).single().expect("valid date")
    }

    /// A line of plan `plan` for the rest of January from day 16 (a credit when `total` < 0).
    fn line(plan: &str, total: i64) -> LineItem {
        let credit = total < 0;
        LineItem {
            kind: if credit { LineKind::Credit } else { LineKind::Plan },
            key: OriginKey {
                subscription: "s1".into(),
                item: ItemRef::Plan { plan_code: plan.into() },
                period_start: day(1),
                period_end: day(31),
            },
            period_end: day(31),
            start: day(16),
            end: day(31),
            currency: "USD".into(),
            unit_amount_in_cents: if credit { -2 * total } else { 2 * total },
            quantity: 1,
            total_in_cents: total,
            proration: Some(rebill_billing::proration::Proration { part_seconds: 15, whole_seconds: 30 }),
            description: format!("Plan {plan}"),
        }
    }

    /// The previews of a change's invoice of `lines`, filed as the invoice would be made.
    fn filed(lines: Vec<LineItem>, credit_memos: bool) -> InvoicePreviews {
        let draft = charge_draft(&Details::default(), InvoiceOrigin::ImmediateChange, lines);
        let mut previews = InvoicePreviews::default();
        previews.add(invoicing::preview_for(7, &draft, 1_000).expect("preview"), credit_memos);
        previews
    }

    /// The invoice of a charge takes the subscription's terms and notes.
    #[test]
    fn a_charge_is_drafted_with_the_subscription_terms() {
        let details = Details {
            account_code: "a1".into(),
            net_terms: Some(10),
            collection_method: Some("manual".into()),
            po_number: Some("PO-7".into()),
            customer_notes: Some("thanks".into()),
            ..Details::default()
        };
        let draft = charge_draft(&details, InvoiceOrigin::Renewal, vec![line("pro", 3000)]);
        assert_eq!((draft.origin, draft.lines.len()), (InvoiceOrigin::Renewal, 1));
        assert_eq!(draft.terms, invoice_terms(&details));
        assert_eq!(
            (draft.terms.collection_method, draft.terms.net_terms, draft.terms.po_number.as_deref()),
            (InvoiceCollection::Manual, 10, Some("PO-7"))
        );
        assert_eq!(collection(&draft.terms, InvoiceOrigin::Renewal), Collect::Manual);
    }

    /// A downgrade's invoice totals less than zero: with Credit Memos it is an open credit
    /// invoice holding its total as balance, and the change makes no charge invoice.
    #[test]
    fn a_negative_change_invoice_previews_as_a_credit_invoice() {
        let previews = filed(vec![line("pro", -3000), line("basic", 1500)], true);
        assert!(previews.charges.is_empty());
        assert!(previews.charge_invoice().is_none());
        let [credit] = previews.credits.as_slice() else { panic!("one credit invoice: {previews:?}") };
        let i = &credit.invoice;
        assert_eq!((i.kind, i.state, i.origin.as_str()), (InvoiceKind::Credit, InvoiceState::Open, "immediate_change"));
        assert_eq!((i.amounts.total, i.amounts.balance, i.amounts.paid, i.due_on), (-1500, -1500, 0, None));
        assert_eq!(credit.lines.iter().map(|l| l.total).collect::<Vec<_>>(), [-3000, 1500]);
    }

    /// Without Credit Memos the same invoice is a paid legacy invoice, filed with the credits.
    #[test]
    fn a_negative_change_invoice_is_legacy_without_credit_memos() {
        let previews = filed(vec![line("pro", -3000), line("basic", 1500)], false);
        let [legacy] = previews.credits.as_slice() else { panic!("one invoice: {previews:?}") };
        assert_eq!((legacy.invoice.kind, legacy.invoice.state), (InvoiceKind::Legacy, InvoiceState::Paid));
        assert_eq!(legacy.invoice.amounts.balance, -1500);
        assert!(previews.charges.is_empty());
    }

    /// An upgrade's invoice, and one totalling zero, are pending charge invoices; the first
    /// charge invoice is the operation's.
    #[test]
    fn positive_and_zero_invoices_preview_as_charge_invoices() {
        let mut previews = filed(vec![line("pro", -3000), line("max", 4500)], true);
        let zero = filed(vec![line("pro", -3000), line("pro", 3000)], true);
        previews.charges.extend(zero.charges);
        assert!(previews.credits.is_empty() && zero.credits.is_empty());
        let totals: Vec<(InvoiceKind, InvoiceState, i64)> =
            previews.charges.iter().map(|p| (p.invoice.kind, p.invoice.state, p.invoice.amounts.total)).collect();
        assert_eq!(
            totals,
            [(InvoiceKind::Charge, InvoiceState::Pending, 1500), (InvoiceKind::Charge, InvoiceState::Pending, 0)]
        );
        assert_eq!(previews.charge_invoice().map(|p| p.invoice.amounts.balance), Some(1500));
    }

    /// Only invoices settled after their invoicing call reach the subscriptions.
    #[test]
    fn the_subscriptions_react_to_late_invoice_outcomes_only() {
        for by in ["dunning", "marked", "collection"] {
            let payload = json!({ "account_code": "a1", "settled_by": by });
            assert!(events::reacts_to(events::INVOICE_PAID, &payload), "{by}");
            assert!(events::reacts_to(events::INVOICE_FAILED, &payload), "{by}");
            assert!(!events::reacts_to(events::INVOICE_CREATED, &payload), "{by}");
        }
        let at_invoicing = json!({ "account_code": "a1", "settled_by": "invoicing" });
        assert!(!events::reacts_to(events::INVOICE_PAID, &at_invoicing));
        assert!(!events::reacts_to(events::INVOICE_FAILED, &at_invoicing));
        assert!(!events::reacts_to(events::INVOICE_PAID, &json!({ "account_code": "a1" })));
    }

    /// Every scheduled transition and every action has its own event kind of a subscription;
    /// resuming a subscription whose pause is only scheduled cancels the pause.
    #[test]
    fn transitions_and_actions_name_subscription_events() {
        let now = chrono::DateTime::<chrono::Utc>::from_timestamp(1_800_000_000, 0).expect("time");
        let terms = rebill_billing::lifecycle::SubscriptionTerms::new(
            "gold",
            "USD",
            rebill_billing::period::Interval::months(1),
            1000,
        );
        let new = rebill_billing::lifecycle::NewSubscription {
            uuid: "u".into(),
            terms,
            starts_at: None,
            trial: None,
            total_billing_cycles: None,
            imported_trial: false,
        };
        let sample = lifecycle::create(new, now).expect("created").subscription;
        assert_eq!(action_kind(&sample, &Action::Resume), "subscription.resumed");
        let scheduled =
            lifecycle::apply(&sample, &Action::Pause { remaining_pause_cycles: 1 }, now).expect("pause").subscription;
        assert_eq!(action_kind(&scheduled, &Action::Resume), "subscription.pause_canceled");
        let dues = [
            DueKind::Activation,
            DueKind::TrialEnd,
            DueKind::Renewal,
            DueKind::PauseStart,
            DueKind::PausedRenewal,
            DueKind::PauseEnd,
            DueKind::Expiration,
        ];
        let kinds: Vec<&str> = dues.into_iter().map(due_kind).collect();
        assert_eq!(
            kinds,
            [
                "subscription.activated",
                "subscription.trial_ended",
                "subscription.renewed",
                "subscription.paused",
                "subscription.paused_renewal",
                "subscription.resumed",
                "subscription.expired"
            ]
        );
        assert_eq!(action_kind(&sample, &Action::Cancel), "subscription.canceled");
        assert_eq!(action_kind(&sample, &Action::Terminate { refund: Refund::None }), "subscription.expired");
        assert_eq!(action_kind(&sample, &Action::Pause { remaining_pause_cycles: 2 }), "subscription.pause_scheduled");
        assert!(kinds.iter().chain([&action_kind(&sample, &Action::Resume)]).all(|k| k.starts_with("subscription.")));
    }
}

//! The one path of plain renewals: the renewals that come due together run as one batch (a few
//! statements for the whole batch instead of a few dozen per renewal), and a renewal job run
//! alone is a batch of one (the scheduler offers every renewal job here first, see
//! [`crate::operations::scheduler`]). A job that is not a plain renewal (`plan_renewal`) goes to the
//! general path (`subscriptions::run_job`: catch up, `bill_pending`, reschedule), which makes
//! the same writes for a plain renewal; the decisions both take (how a charge is collected,
//! whether it is invoiced already, the first step of its invoice, falling past due on a
//! decline) are the same functions (`subscriptions::collection`, `already_invoiced`,
//! `rebill_billing::collection::first_step`, `subscriptions::fall_past_due`). The
//! differential test `tests/renewal_paths.rs` runs every branch through a batch, batches of one
//! and the general path on both backends and compares the rows they leave.

use std::collections::HashMap;

use futures_util::StreamExt;

use rebill_billing::collection::{Attempt, Collect, FirstStep, first_step};
use rebill_billing::invoice::{InvoiceOrigin, LineItem};
use rebill_billing::lifecycle;
use rebill_billing::states::InvoiceTransition;
use rebill_billing::states::{InvoiceState, TransactionStatus};
use rebill_store::events::NewEvent;
use rebill_store::invoices::{
    AccountSnapshot, Adjustment, AttemptFacts, Invoice, InvoiceChange, InvoiceDraft, InvoiceStateChange,
    NewTransaction, Payer, Transaction, TransactionResult,
};
use rebill_store::jobs::Job;
use rebill_store::subscriptions::{
    Charge, Reschedule, SubscriptionChange, SubscriptionClaim, SubscriptionRecord, SubscriptionSave,
};
use rebill_store::{Site, StoreError};

use crate::billing::invoicing::{self, Draft, PaymentSource, Preview};
use crate::platform::jobs::JobError;
use crate::platform::transaction_records;
use crate::subscriptions::lifecycle::{
    CLAIM_SECONDS, Details, Loaded, Progress, already_invoiced, catch_up, caught_up_change, collection, epoch,
    fall_past_due, from_json, invoice_terms, reschedule,
};
use crate::{Services, time};

// ---------------------------------------------------------------------------------------------
// Renewals in batches

/// A renewal planned by [`plan_renewal`]: everything `subscriptions::run_job` would write for
/// the job, computed before anything is written.
struct Planned<'a> {
    job: &'a Job,
    claim: SubscriptionClaim,
    /// The subscription as claimed (`sub`: its value caught up to the job's time).
    loaded: Loaded,
    change: SubscriptionChange,
    /// Site time of the renewal (the charge's and the invoice's time).
    at: i64,
    invoice: Preview,
    /// The `invoice.created` event of its invoice.
    created: NewEvent,
    account_id: i64,
    account: AccountSnapshot,
    source: PaymentSource,
    collect: Collect,
}

/// What `subscriptions::run_job` would do for `job`, when that is one plain renewal: the
/// subscription is claimed, every earlier charge is invoiced, catching up to the job's time makes
/// exactly one renewal charge that no invoice holds yet, and its invoice is to be charged now
/// (`first_step`: automatic collection, a positive balance) from a stored payment method. `None`
/// for anything else (the job then runs alone, on the general path): the decisions of
/// `bill_pending`, `invoice_charge` and `invoicing::invoice`, through the same functions, so a
/// planned renewal writes what the general path writes (`tests/renewal_paths.rs` checks it).
fn plan_renewal<'a>(
    state: &Services,
    job: &'a Job,
    claimed: Option<(SubscriptionClaim, SubscriptionRecord)>,
    charges: &[&Charge],
    adjustments: &[&Adjustment],
    payers: &[Payer],
) -> Option<Planned<'a>> {
    let (claim, record) = claimed?;
    let mut loaded = Loaded::of(record).ok()?;
    let due = time(job.due_at)?;
    let mut progress = Progress::default();
    let sub = catch_up(&loaded.sub, due, &mut progress).ok()?;
    let [charge] = progress.charges.as_slice() else { return None };
    if charge.origin != InvoiceOrigin::Renewal || sub == loaded.sub {
        return None;
    }
    // bill_pending: every earlier charge invoiced, and this one not yet.
    if charges.iter().any(|c| c.billed_at.is_none()) {
        return None;
    }
    let mut recorded = Vec::new();
    for c in charges {
        recorded.extend(from_json::<Vec<LineItem>>(&c.lines).ok()?);
    }
    let invoiced: Vec<LineItem> = adjustments.iter().filter_map(|a| invoicing::line_of_adjustment(a)).collect();
    if already_invoiced(&recorded, &charge.lines, &invoiced).ok()? {
        return None;
    }
    // invoice_charge and invoicing::invoice: a charge now, from the stored payment method.
    let terms = invoice_terms(&loaded.details);
    let collect = collection(&terms, charge.origin);
    let payer = payers.iter().find(|p| p.account.account_code == loaded.details.account_code)?;
    let source = payer.payment.clone().and_then(PaymentSource::of_stored)?;
    let at = epoch(charge.at);
    let draft = Draft { terms, ..Draft::of_lines(charge.lines.clone(), charge.origin) };
    let invoice = invoicing::preview_for(payer.account_id, &draft, at).ok()?;
    if first_step(invoice.invoice.amounts.balance, collect, invoice.invoice.due_on) != FirstStep::Charge {
        return None;
    }
    let change = caught_up_change(state, &loaded, &sub, &progress).ok()?;
    let created = invoicing::created_event(state, &payer.account.account_code, &invoice.invoice, at);
    loaded.sub = sub;
    Some(Planned {
        job,
        claim,
        loaded,
        change,
        at,
        invoice,
        created,
        account_id: payer.account_id,
        account: payer.account.clone(),
        source,
        collect,
    })
}

/// Gateway calls a batch has under way at once (step 2 of [`run_renewals`]). A real gateway
/// answers in a few hundred milliseconds: one call at a time, a batch of 64 would take half a
/// minute and a process would renew a few subscriptions a second. Each call carries its own
/// idempotency key and its answer is kept in the batch's order, so nothing else changes; a
/// gateway that refuses the pace (Stripe's 429) is retried under the same key by its client.
pub const GATEWAY_CALLS_AT_ONCE: usize = 8;

/// A planned renewal with what the first database transaction made for it.
struct Begun<'a> {
    planned: Planned<'a>,
    charge: Charge,
    invoice: Invoice,
    transaction: Transaction,
}

/// Runs the leading jobs of `jobs` (consecutive subscription jobs of `site`, in due order) that
/// are plain renewals (`plan_renewal`) together, as `subscriptions::run_job` runs each, and
/// records their outcomes; answers how many of the leading jobs it ran (a single job is a batch
/// of one). Zero means the first job must run alone: nothing was written for it.
///
/// 1. One database transaction claims the subscriptions, reads their charges, line items,
///    accounts and payment methods, plans the renewals up to the first job that is not one,
///    releases the other claims (that job's too), and saves every planned subscription with its charge, its
///    invoice (numbered in job order) and its transaction, recorded `processing`. Failing, it
///    leaves nothing, and the first job runs alone.
/// 2. The gateway is called for each transaction, [`GATEWAY_CALLS_AT_ONCE`] calls at a time.
/// 3. One database transaction completes the transactions and, for every approved one, marks
///    the invoice paid and the charge billed, schedules the subscription's next job, releases it
///    and marks the job done. A declined renewal then goes on alone, exactly as in
///    `bill_pending`: dunning, past due, next job.
pub async fn run_renewals(state: &Services, site: &Site, jobs: &[Job]) -> Result<usize, StoreError> {
    let gateway = state.gateway(site.id).await?;
    let begun = match begin_renewals(state, gateway.as_ref(), site, jobs).await {
        Ok(begun) => begun,
        Err(e) => {
            tracing::warn!(error = %e, "renewals together failed before any effect; the first runs alone");
            return Ok(0);
        }
    };
    let count = begun.len();
    let results = charge_all(state, gateway.as_ref(), &begun).await;
    if let Err(e) = finish_renewals(state, site, &begun, &results).await {
        // As the one-job path after a failed step: the claims go and the jobs are retried.
        for b in &begun {
            if let Err(e) = state.store.release_subscription(&b.planned.claim).await {
                tracing::warn!(error = %e, "releasing a subscription claim");
            }
            crate::platform::jobs::settle(state, b.planned.job, Err(JobError::Batch(e.to_string()))).await?;
        }
        return Ok(count);
    }
    for (b, result) in begun.into_iter().zip(&results) {
        if result.status == TransactionStatus::Success {
            continue;
        }
        let Begun { mut planned, charge, invoice, transaction } = b;
        let outcome = if transaction_records::is_settled(result) {
            renewal_declined(state, site, &mut planned, &charge, &invoice).await
        } else {
            renewal_pending(state, site, &planned, &charge, &invoice, &transaction).await
        };
        if let Err(e) = state.store.release_subscription(&planned.claim).await {
            tracing::warn!(error = %e, "releasing a subscription claim");
        }
        crate::platform::jobs::settle(state, planned.job, outcome).await?;
    }
    Ok(count)
}

/// Step 2 of [`run_renewals`]: the gateway's answers as the transactions' results, in the
/// batch's order, with up to [`GATEWAY_CALLS_AT_ONCE`] calls under way.
async fn charge_all(
    state: &Services,
    gateway: &dyn rebill_billing::gateway::Gateway,
    begun: &[Begun<'_>],
) -> Vec<TransactionResult> {
    let mut calls = futures_util::stream::FuturesOrdered::new();
    let mut results = Vec::with_capacity(begun.len());
    for b in begun {
        if calls.len() == GATEWAY_CALLS_AT_ONCE {
            results.extend(calls.next().await);
        }
        calls.push_back(charge(state, gateway, b));
    }
    while let Some(result) = calls.next().await {
        results.push(result);
    }
    results
}

/// One call of [`charge_all`]: the gateway's answer as the transaction's result.
async fn charge(state: &Services, gateway: &dyn rebill_billing::gateway::Gateway, b: &Begun<'_>) -> TransactionResult {
    let outcome = invoicing::gateway_purchase(state, gateway, &b.transaction, &b.planned.source, false, false).await;
    transaction_records::result_of(&outcome, b.planned.at)
}

/// Step 1 of [`run_renewals`]; answers the renewals begun (none when the first job is not a
/// plain renewal).
async fn begin_renewals<'a>(
    state: &Services,
    gateway: &dyn rebill_billing::gateway::Gateway,
    site: &Site,
    jobs: &'a [Job],
) -> Result<Vec<Begun<'a>>, StoreError> {
    let service_now = state.clock.now();
    let mut work = state.store.begin_work().await?;
    let uuids: Vec<&str> = jobs.iter().map(|j| j.subject.as_str()).collect();
    let mut claimed: HashMap<String, (SubscriptionClaim, SubscriptionRecord)> = work
        .claim_subscriptions(site.id, &uuids, service_now, service_now + CLAIM_SECONDS)
        .await?
        .into_iter()
        .map(|(claim, record)| (record.uuid.clone(), (claim, record)))
        .collect();
    let ids: Vec<i64> = claimed.values().map(|(c, _)| c.subscription_id).collect();
    let charges = work.subscriptions_charges(&ids).await?;
    let claimed_uuids: Vec<&str> = claimed.keys().map(String::as_str).collect();
    let adjustments = work.subscriptions_adjustments(&claimed_uuids).await?;
    let codes: Vec<String> =
        claimed.values().filter_map(|(_, r)| from_json::<Details>(&r.details).ok()).map(|d| d.account_code).collect();
    let payers = work.payers(site.id, &codes.iter().map(String::as_str).collect::<Vec<_>>()).await?;
    let payer_ids: Vec<i64> = payers.iter().map(|p| p.account_id).collect();
    let with_credit = work.accounts_with_credit(&payer_ids).await?;
    // Accounts with active coupon redemptions renew on the general path, which discounts.
    let with_redemptions = work.accounts_with_redemptions(&payer_ids).await?;
    let mut planned = Vec::new();
    for job in jobs {
        let held = claimed.remove(&job.subject);
        let id = held.as_ref().map(|(c, _)| c.subscription_id);
        let own: Vec<&Charge> = charges.iter().filter(|c| Some(c.subscription_id) == id).collect();
        let lines: Vec<_> =
            adjustments.iter().filter(|a| a.line.subscription_uuid.as_deref() == Some(job.subject.as_str())).collect();
        match plan_renewal(state, job, held.clone(), &own, &lines, &payers) {
            // An account with credit to use renews on the general path, which takes the credit.
            Some(p) if !with_credit.contains(&p.account_id) && !with_redemptions.contains(&p.account_id) => {
                planned.push(p)
            }
            _ => {
                // Released with the others below: the job runs alone next.
                if let Some(held) = held {
                    claimed.insert(job.subject.clone(), held);
                }
                break;
            }
        }
    }
    if planned.is_empty() {
        // Dropped: rolled back, nothing claimed.
        return Ok(Vec::new());
    }
    let others: Vec<SubscriptionClaim> = claimed.into_values().map(|(c, _)| c).collect();
    work.release_subscriptions(&others).await?;
    let saves: Vec<SubscriptionSave<'_>> =
        planned.iter().map(|p| SubscriptionSave { claim: &p.claim, change: &p.change, now: p.job.due_at }).collect();
    let mut charges = work.save_subscriptions(&saves).await?;
    let drafts: Vec<InvoiceDraft<'_>> = planned
        .iter()
        .map(|p| InvoiceDraft {
            invoice: &p.invoice.invoice,
            lines: &p.invoice.lines,
            now: p.at,
            events: std::slice::from_ref(&p.created),
            // Accounts with credit to use renew on the general path.
            credit: None,
        })
        .collect();
    let invoices = work.create_invoices(site.id, &drafts).await?;
    let purchases: Vec<NewTransaction> = planned
        .iter()
        .zip(&invoices)
        .map(|(p, (invoice, _))| {
            let key = invoicing::attempt_key(invoice, 0);
            invoicing::purchase(gateway, p.account_id, p.account.clone(), invoice, &p.source, key, true)
        })
        .collect();
    let recorded: Vec<(&NewTransaction, i64)> = purchases.iter().zip(&planned).map(|(t, p)| (t, p.at)).collect();
    let facts = AttemptFacts { begun_service_at: Some(service_now), saves_payment_method: false };
    let transactions = work.begin_attempts(site.id, &recorded, facts).await?;
    work.commit().await?;
    let mut begun = Vec::with_capacity(planned.len());
    for ((planned, (invoice, _)), transaction) in planned.into_iter().zip(invoices).zip(transactions) {
        let at = charges.iter().position(|c| c.subscription_id == planned.claim.subscription_id);
        let charge = at
            .map(|i| charges.swap_remove(i))
            .ok_or_else(|| StoreError::Invalid(format!("no charge saved for subscription {}", planned.job.subject)))?;
        begun.push(Begun { planned, charge, invoice, transaction });
    }
    Ok(begun)
}

/// Step 3 of [`run_renewals`]: records every gateway answer and finishes the approved renewals
/// (the declined ones go on in [`renewal_declined`]).
async fn finish_renewals(
    state: &Services,
    site: &Site,
    begun: &[Begun<'_>],
    results: &[TransactionResult],
) -> Result<(), StoreError> {
    let outcomes: Vec<[NewEvent; 1]> = begun
        .iter()
        .zip(results)
        .map(|(b, r)| [transaction_records::transaction_event(state, &b.transaction, r, b.planned.at)])
        .collect();
    let approved: Vec<&Begun<'_>> =
        begun.iter().zip(results).filter(|(_, r)| r.status == TransactionStatus::Success).map(|(b, _)| b).collect();
    let paid_events: Vec<[NewEvent; 1]> = approved
        .iter()
        .map(|b| {
            let paid = InvoiceState::Paid;
            [invoicing::settled_event(
                state,
                &b.invoice,
                paid,
                crate::platform::events::SETTLED_BY_INVOICING,
                b.planned.at,
            )]
        })
        .collect();
    let mut work = state.store.begin_work().await?;
    // An outcome not known yet stays `processing` for the settle job (`renewal_pending`).
    let completed: Vec<(i64, &TransactionResult, i64, &[NewEvent])> = begun
        .iter()
        .zip(results)
        .zip(&outcomes)
        .filter(|((_, r), _)| transaction_records::is_settled(r))
        .map(|((b, r), events)| (b.transaction.id, r, b.planned.at, &events[..]))
        .collect();
    work.complete_transactions(&completed).await?;
    // invoicing::transition's write of InvoiceTransition::Pay, for every approved renewal.
    let pay = InvoiceTransition::Pay;
    let change = InvoiceChange { state: pay.to(), attempt_next_collection_at: None, collection_attempts: None };
    let paid: Vec<InvoiceStateChange<'_>> = approved
        .iter()
        .zip(&paid_events)
        .map(|(b, events)| InvoiceStateChange { id: b.invoice.id, change, now: b.planned.at, events: &events[..] })
        .collect();
    work.set_invoice_states(pay.from_states(), &paid).await?;
    let numbers: Vec<String> = approved.iter().map(|b| b.invoice.invoice_number.to_string()).collect();
    let billed: Vec<(&Charge, Option<&str>, i64)> =
        approved.iter().zip(&numbers).map(|(b, n)| (&b.charge, Some(n.as_str()), b.planned.job.due_at)).collect();
    work.mark_charges_billed(&billed).await?;
    let next: Vec<Option<(&str, i64)>> = approved
        .iter()
        .map(|b| lifecycle::next_due(&b.planned.loaded.sub).map(|d| (d.kind.name(), epoch(d.at))))
        .collect();
    let jobs: Vec<Reschedule<'_>> = approved
        .iter()
        .zip(&next)
        .map(|(b, next)| Reschedule { uuid: &b.planned.job.subject, next: *next, running: Some(b.planned.job.id) })
        .collect();
    work.reschedule_subscriptions(site.id, &jobs).await?;
    let claims: Vec<SubscriptionClaim> = approved.iter().map(|b| b.planned.claim.clone()).collect();
    work.release_subscriptions(&claims).await?;
    let done: Vec<&Job> = approved.iter().map(|b| b.planned.job).collect();
    work.complete_jobs(&done, state.clock.now()).await?;
    work.commit().await
}

/// A renewal whose payment has no known outcome yet: the renewal stands (its charge billed on
/// its invoice, the subscription's next job scheduled, its claim released), the invoice stays
/// `pending` with the transaction `processing`, and the settle job
/// ([`crate::collection::settlement::run_settle`]) learns the outcome from the gateway and does
/// what a paid or declined renewal invoice does then.
async fn renewal_pending(
    state: &Services,
    site: &Site,
    planned: &Planned<'_>,
    charge: &Charge,
    invoice: &Invoice,
    transaction: &Transaction,
) -> Result<(), JobError> {
    invoicing::schedule_settle(state, transaction, planned.at, 0).await?;
    let number = invoice.invoice_number.to_string();
    let now = planned.job.due_at;
    state.store.mark_charge_billed(charge, Some(&number), now).await?;
    reschedule(state, site.id, &planned.loaded.sub, Some(planned.job.id)).await?;
    Ok(())
}

/// A renewal whose payment was declined, after its transaction is recorded: what
/// `bill_pending` and `subscriptions::run_job` do next (dunning retries, the charge billed, the
/// subscription past due, its next job).
async fn renewal_declined(
    state: &Services,
    site: &Site,
    planned: &mut Planned<'_>,
    charge: &Charge,
    invoice: &Invoice,
) -> Result<(), JobError> {
    invoicing::attempted(
        state,
        invoice,
        planned.collect,
        0,
        Attempt::Declined,
        crate::platform::events::SETTLED_BY_INVOICING,
        planned.at,
    )
    .await?;
    let number = invoice.invoice_number.to_string();
    let now = planned.job.due_at;
    state.store.mark_charge_billed(charge, Some(&number), now).await?;
    fall_past_due(state, &planned.claim, &mut planned.loaded, now).await?;
    reschedule(state, site.id, &planned.loaded.sub, Some(planned.job.id)).await?;
    Ok(())
}

//! Invoicing and collection, shared by every flow that charges an account: the invoice endpoints,
//! one-off transactions and the subscriptions' charges.
//!
//! # Invoicing
//!
//! [`invoice`] (any mix of billing-engine lines, new one-off lines and the account's pending
//! adjustments) creates one invoice with the next number of the site, its line items and its totals
//! ([`rebill_billing::invoice::InvoiceTotals`]; no discounts or tax yet), then collect it as
//! [`Collect`] says. [`preview`] computes the same invoice without writing anything.
//!
//! # Collection
//!
//! Collecting charges the account's stored payment method (the gateway reference kept on its
//! billing info; [`PaymentSource`]) through `state.gateway`. The transaction is recorded
//! (`processing`) before the gateway is called, with an idempotency key made of the invoice's
//! uuid and the attempt number, and completed after; a repeated attempt (a job run again after a
//! crash) finds the recorded transaction and does not charge twice (billing-behaviour §7.4).
//!
//! What follows each step is the collection policy of [`rebill_billing::collection`] (a new
//! invoice's [`first_step`], then [`after_attempt`] for each charge), and every state change is a
//! transition of [`rebill_billing::states`], written by compare-and-set from the states it allows.
//!
//! # Dunning
//!
//! A `past_due` invoice is retried by `dunning` jobs (subject: the invoice's uuid) on the
//! schedule of [`rebill_billing::collection::RETRY_DAYS`] (1, 3, 5 and 7 days after the invoice
//! was created, on the site's clock); only the next retry is scheduled at a time, and `attempt_next_collection_at` shows it. A
//! retry charges the billing info stored *at the retry*, so a customer who updates their card is
//! collected at the next retry. A successful retry marks the invoice `paid`; when the last retry
//! fails the invoice becomes `failed`. A job whose invoice was settled meanwhile, or that is not
//! the invoice's next attempt, does nothing. An account without billing info is retried the same
//! way (each attempt without a payment method counts as a failed attempt, with no transaction).
//!
//! # Events
//!
//! Every change records its event with it ([`crate::platform::events`]): `invoice.created`,
//! `invoice.past_due`, `invoice.paid` and `invoice.failed` (with what settled it:
//! [`events::SETTLED_BY_INVOICING`], `dunning`, `marked` or `collection`), `transaction.approved` and
//! `transaction.declined`. An invoice paid or failed later than the call that invoiced it
//! (dunning, `mark_successful`, `mark_failed`, `collect`) concerns its subscriptions, which react
//! to the event (they recover or expire, [`crate::subscriptions::lifecycle::on_invoice_settled`]); the use
//! case drains its invoice's reactions before it returns. [`invoice`] answers its own outcome
//! to its caller.

pub mod discounts;

use chrono::{DateTime, Utc};
use rebill_billing::collection::{Attempt, FirstStep, after_attempt, due_date, first_step};
use rebill_billing::gateway::{AvsAddress, Gateway, Outcome, PaymentMethod, PaymentRequest};
use rebill_billing::invoice::{InvoiceOrigin, ItemRef, LineItem, LineKind, OriginKey};
use rebill_billing::proration::Proration;
use rebill_billing::states::InvoiceTransition;
use rebill_billing::states::{InvoiceState, TransactionStatus};
use rebill_store::accounts::Account;
use rebill_store::billing_info::{BillingFields, PaymentKind};
use rebill_store::events::NewEvent;
use rebill_store::invoices::CreditUse;
use rebill_store::invoices::{
    AccountSnapshot, Adjustment, AdjustmentKind, AttemptFacts, CollectionMethod, EngineKey, Invoice, InvoiceAmounts,
    InvoiceChange, InvoiceKind, InvoiceTerms, NewAdjustment, NewInvoice, NewTransaction, StoredPayment, Transaction,
};
use rebill_store::{Site, StoreError};
use serde_json::json;

use crate::customers::payment_methods;
use crate::platform::error::BillingError;
use crate::platform::events;
use crate::platform::jobs::JobError;
use crate::platform::transaction_records::{is_settled, result_of, snapshot, transaction_event};
use crate::{Context, Services, time};

pub use rebill_billing::collection::Collect;

/// Kind of the scheduled retry jobs (subject: the invoice's uuid).
pub const DUNNING_JOB: &str = "dunning";
/// Kind of the job that makes a manual invoice past due at its due date.
pub const INVOICE_DUE_JOB: &str = "invoice_due";

/// A payment method to charge: the billing info's type and non-secret fields (the transaction's
/// snapshot) and the gateway's reference of the stored method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentSource {
    pub kind: PaymentKind,
    pub fields: BillingFields,
    pub reference: String,
    /// A payment method the request named ([`payment_methods::RequestedMethod`]: stored with
    /// the gateway for this charge, not the account's billing info yet). It becomes the billing
    /// info once the charge is approved (or declined `declined_saveable`): at once by the caller,
    /// or by the settle job when the answer comes late (the attempt records it,
    /// [`rebill_store::invoices::AttemptFacts::saves_payment_method`]).
    pub requested: bool,
}

impl PaymentSource {
    /// The account's stored payment method (`None` without billing info, or billing info that
    /// has no gateway reference), read as a batch of renewals reads it (`Store::payer`).
    pub async fn of_account(state: &Services, account: &Account) -> Result<Option<Self>, StoreError> {
        let payer = state.store.payer(account.site_id, &account.account_code).await?;
        Ok(payer.and_then(|p| p.payment).and_then(Self::of_stored))
    }

    /// A stored payment method read with its account (`None` without a gateway reference).
    pub fn of_stored(stored: StoredPayment) -> Option<Self> {
        stored.gateway_reference.map(|reference| PaymentSource {
            kind: stored.kind,
            fields: stored.fields,
            reference,
            requested: false,
        })
    }

    /// The payment method a request named, stored with the gateway for the charge.
    pub fn of_requested(method: &payment_methods::RequestedMethod) -> Self {
        PaymentSource {
            kind: method.kind,
            fields: method.fields.clone(),
            reference: method.reference.clone(),
            requested: true,
        }
    }
}

/// What an invoice needs beyond its lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draft {
    /// New lines from the billing engine (subscription charges and credits).
    pub lines: Vec<LineItem>,
    /// New one-off lines (e.g. the charge of a one-off transaction).
    pub extra: Vec<NewAdjustment>,
    /// The account's pending adjustments to put on the invoice.
    pub pending: Vec<Adjustment>,
    pub origin: InvoiceOrigin,
    pub terms: InvoiceTerms,
}

impl Draft {
    /// A draft of engine lines only.
    pub fn of_lines(lines: Vec<LineItem>, origin: InvoiceOrigin) -> Self {
        Self { lines, extra: Vec::new(), pending: Vec::new(), origin, terms: InvoiceTerms::default() }
    }
}

/// An invoice as created (and collected).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invoiced {
    pub invoice: Invoice,
    pub lines: Vec<Adjustment>,
    /// The transaction of the collection attempt, if one was made.
    pub transaction: Option<Transaction>,
}

impl Invoiced {
    /// Whether the invoice is paid.
    pub fn is_paid(&self) -> bool {
        self.invoice.state == InvoiceState::Paid
    }

    /// The declined transaction of the collection attempt, if it was declined.
    pub fn declined(&self) -> Option<&Transaction> {
        self.transaction.as_ref().filter(|t| t.status() == TransactionStatus::Declined)
    }

    /// The transaction of the collection attempt while its outcome is not known (`processing`;
    /// the settle job finishes it).
    pub fn pending(&self) -> Option<&Transaction> {
        self.transaction.as_ref().filter(|t| t.status() == TransactionStatus::Processing)
    }
}

/// An invoice computed but not written ([`preview`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    pub invoice: NewInvoice,
    /// The new lines, then the pending adjustments taken.
    pub lines: Vec<NewAdjustment>,
}

fn secs(t: DateTime<Utc>) -> i64 {
    t.timestamp()
}

/// The adjustment of a billing-engine line.
pub fn adjustment_of_line(account_id: i64, line: &LineItem) -> Result<NewAdjustment, BillingError> {
    let (item_kind, item_code) = match &line.key.item {
        ItemRef::Plan { plan_code } => ("plan", plan_code),
        ItemRef::AddOn { add_on_code } => ("add_on", add_on_code),
        ItemRef::SetupFee { plan_code } => ("setup_fee", plan_code),
    };
    Ok(NewAdjustment {
        account_id,
        subscription_uuid: Some(line.key.subscription.clone()),
        kind: if line.is_credit() { AdjustmentKind::Credit } else { AdjustmentKind::Charge },
        origin: line.kind.origin_name().to_owned(),
        description: Some(line.description.clone()),
        accounting_code: None,
        product_code: None,
        currency: line.currency.clone(),
        unit_amount: line.unit_amount_in_cents,
        quantity: i64::from(line.quantity),
        discount: 0,
        tax: 0,
        total: line.total_in_cents,
        tax_exempt: None,
        tax_code: None,
        credit_reason_code: None,
        start_date: Some(secs(line.start)),
        end_date: (!line.key.item.is_one_time()).then(|| secs(line.end)),
        engine: Some(EngineKey {
            item_kind: item_kind.to_owned(),
            item_code: item_code.clone(),
            period_start: secs(line.key.period_start),
            period_end: secs(line.key.period_end),
            line_period_end: secs(line.period_end),
            proration: line.proration.map(|p| (p.part_seconds, p.whole_seconds)),
        }),
        original_adjustment_id: None,
        reversed_quantity: 0,
    })
}

/// The billing-engine line an adjustment was made from (`None` for one-off adjustments).
pub fn line_of_adjustment(adjustment: &Adjustment) -> Option<LineItem> {
    let line = &adjustment.line;
    let engine = line.engine.as_ref()?;
    let item = match engine.item_kind.as_str() {
        "plan" => ItemRef::Plan { plan_code: engine.item_code.clone() },
        "add_on" => ItemRef::AddOn { add_on_code: engine.item_code.clone() },
        "setup_fee" => ItemRef::SetupFee { plan_code: engine.item_code.clone() },
        _ => return None,
    };
    let kind = if line.kind == AdjustmentKind::Credit { LineKind::Credit } else { item.charge_kind() };
    let start = time(line.start_date?)?;
    Some(LineItem {
        kind,
        key: OriginKey {
            subscription: line.subscription_uuid.clone()?,
            item,
            period_start: time(engine.period_start)?,
            period_end: time(engine.period_end)?,
        },
        period_end: time(engine.line_period_end)?,
        start,
        end: line.end_date.and_then(time).unwrap_or(start),
        currency: line.currency.clone(),
        unit_amount_in_cents: line.unit_amount,
        quantity: u32::try_from(line.quantity).ok()?,
        // The engine's amount is the one before any coupon discount.
        total_in_cents: line.total + line.discount,
        proration: engine.proration.map(|(part_seconds, whole_seconds)| Proration { part_seconds, whole_seconds }),
        description: line.description.clone().unwrap_or_default(),
    })
}

/// Every line item billed for a subscription so far (pending or invoiced), as the billing
/// engine's `diff` takes them.
pub async fn billed_lines(state: &Services, subscription_uuid: &str) -> Result<Vec<LineItem>, StoreError> {
    let adjustments = state.store.subscription_adjustments(subscription_uuid).await?;
    Ok(adjustments.iter().filter_map(line_of_adjustment).collect())
}

/// The invoice `draft` would create for `account` at `at`, without writing anything.
pub fn preview(account: &Account, draft: &Draft, at: i64) -> Result<Preview, BillingError> {
    preview_for(account.id, draft, at)
}

/// [`preview`] for the account with this id.
pub fn preview_for(account_id: i64, draft: &Draft, at: i64) -> Result<Preview, BillingError> {
    let mut lines = draft.lines.iter().map(|l| adjustment_of_line(account_id, l)).collect::<Result<Vec<_>, _>>()?;
    lines.extend(draft.extra.iter().cloned());
    lines.extend(draft.pending.iter().map(|a| a.line.clone()));
    let drafted = rebill_billing::invoice::draft(lines.iter().map(|l| (l.currency.as_str(), l.total)))?;
    let (currency, totals) = (drafted.currency, drafted.totals);
    let net_terms = draft.terms.net_terms.max(0);
    let due_on = due_date(at, net_terms);
    Ok(Preview {
        invoice: NewInvoice {
            account_id,
            kind: InvoiceKind::Charge,
            original_invoice_id: None,
            state: InvoiceState::Pending,
            origin: draft.origin.name().to_owned(),
            currency,
            amounts: InvoiceAmounts {
                subtotal_before_discount: totals.subtotal_before_discount_in_cents,
                discount: totals.discount_in_cents,
                subtotal_after_discount: totals.subtotal_after_discount_in_cents,
                tax: totals.tax_in_cents,
                total: totals.total_in_cents,
                paid: totals.paid_in_cents,
                balance: totals.balance_in_cents,
            },
            terms: InvoiceTerms { net_terms, ..draft.terms.clone() },
            due_on: Some(due_on),
            attempt_next_collection_at: None,
            closed_at: None,
        },
        lines,
    })
}

/// Makes an invoice whose lines total less than zero money owed to the account: a credit
/// invoice (open, its whole total as balance) on a site with Credit Memos, else a legacy invoice
/// (paid, its negative balance still credit for the account's next invoices). A credit invoice of
/// posted credits (origin `purchase`: the account's pending adjustments) has origin `credit`;
/// others keep theirs (a downgrade's stays `immediate_change`).
pub fn as_credit_when_negative(invoice: &mut NewInvoice, credit_memos: bool) {
    if invoice.amounts.total >= 0 {
        return;
    }
    (invoice.kind, invoice.state) = if credit_memos {
        (InvoiceKind::Credit, InvoiceState::Open)
    } else {
        (InvoiceKind::Legacy, InvoiceState::Paid)
    };
    if credit_memos && invoice.origin == InvoiceOrigin::Purchase.name() {
        invoice.origin = InvoiceOrigin::Credit.name().to_owned();
    }
    invoice.amounts.paid = 0;
    invoice.amounts.balance = invoice.amounts.total;
    invoice.due_on = None;
}

/// Creates the invoice of `draft` for `account` at `at` (site time) and collects it as `collect`
/// says, charging `source` (the account's stored payment method when `None`).
pub async fn invoice(
    state: &Services,
    site: &Site,
    account: &Account,
    draft: Draft,
    at: i64,
    collect: Collect,
    source: Option<PaymentSource>,
) -> Result<Invoiced, BillingError> {
    let mut preview = preview(account, &draft, at)?;
    // Coupons discount before tax and before credit.
    let one_off = draft.lines.len()..draft.lines.len() + draft.extra.len();
    let uses = discounts::discount(state, account, &mut preview, one_off, at).await?;
    as_credit_when_negative(&mut preview.invoice, site.credit_memos);
    let new_lines = &preview.lines[..preview.lines.len() - draft.pending.len()];
    let attach: Vec<i64> = draft.pending.iter().map(|a| a.id).collect();
    let created = created_event(state, &account.account_code, &preview.invoice, at);
    let credit = (preview.invoice.kind == InvoiceKind::Charge).then(|| CreditUse { recorded_at: state.clock.now() });
    // The pending adjustments taken are written with their discounts, and the redemptions' use
    // with the invoice (nothing when no coupon discounts it).
    let repriced: Vec<(i64, i64, i64)> = if uses.is_empty() {
        Vec::new()
    } else {
        let taken = &preview.lines[new_lines.len()..];
        attach.iter().zip(taken).map(|(id, l)| (*id, l.discount, l.total)).collect()
    };
    let mut events = vec![created];
    if !uses.is_empty() {
        events.push(discounts::discounted_event(state, &account.account_code, &uses, at));
    }
    let discounted = rebill_store::coupons::Discounted { repriced: &repriced, uses: &uses };
    let (invoice, lines) = state
        .store
        .create_invoice(site.id, &preview.invoice, new_lines, &attach, at, &events, credit, discounted)
        .await?;
    if invoice.kind != InvoiceKind::Charge {
        // Credit to use later, nothing to collect.
        return Ok(Invoiced { invoice, lines, transaction: None });
    }
    let recurring = draft.origin == InvoiceOrigin::Renewal;
    let (invoice, transaction) =
        first_collection(state, site, account, invoice, collect, source, recurring, at).await?;
    Ok(Invoiced { invoice, lines, transaction })
}

/// The first collection of a new invoice, as [`first_step`] and [`after_attempt`] say: paid at
/// once, left for the customer, or charged (attempt 0, under [`attempt_key`]). Run again on an
/// invoice still `pending`, it finishes what a stopped run began and charges nothing twice:
/// the recorded attempt is found by its key, and one still `processing` asks the gateway again
/// under the transaction's own idempotency key.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn first_collection(
    state: &Services,
    site: &Site,
    account: &Account,
    invoice: Invoice,
    collect: Collect,
    source: Option<PaymentSource>,
    recurring: bool,
    at: i64,
) -> Result<(Invoice, Option<Transaction>), BillingError> {
    match first_step(invoice.amounts.balance, collect, invoice.due_on) {
        FirstStep::PayNow => {
            let paid = transition(state, &invoice, InvoiceTransition::Pay, events::SETTLED_BY_INVOICING, at).await?;
            return Ok((paid, None));
        }
        FirstStep::AwaitPayment { due_at } => {
            if let Some(due) = due_at {
                state.store.schedule_job(site.id, INVOICE_DUE_JOB, &invoice.uuid, due).await?;
            }
            return Ok((invoice, None));
        }
        FirstStep::Charge => {}
    }
    let source = match source {
        Some(source) => Some(source),
        None => PaymentSource::of_account(state, account).await?,
    };
    let transaction = match &source {
        Some(source) => {
            Some(charge(state, site.id, account, &invoice, source, attempt_key(&invoice, 0), recurring, at).await?)
        }
        None => None,
    };
    let outcome = match &transaction {
        Some(t) if t.status() == TransactionStatus::Success => Attempt::Approved,
        // Not known yet: the invoice stays as it is until the settle job learns the outcome.
        Some(t) if t.status() == TransactionStatus::Processing => return Ok((invoice, transaction)),
        Some(_) => Attempt::Declined,
        None => Attempt::NoPaymentMethod,
    };
    let invoice = attempted(state, &invoice, collect, 0, outcome, events::SETTLED_BY_INVOICING, at).await?;
    if let Some(t) = &transaction {
        followed(state, t).await?;
    }
    Ok((invoice, transaction))
}

/// What follows a settled charge of a request is recorded: its settle job, which [`charge`]
/// scheduled in case the process stopped before that, has nothing left to do and goes.
pub(crate) async fn followed(state: &Services, transaction: &Transaction) -> Result<(), StoreError> {
    if !transaction.new.recurring && transaction.status() != TransactionStatus::Processing {
        state.store.cancel_jobs(SETTLE_JOB, &transaction.uuid).await?;
    }
    Ok(())
}

/// Finishes the first collection of an invoice created earlier whose run stopped (a crash, a
/// lost claim) before it was settled: an invoice still `pending` is collected as [`invoice`]
/// would have (at its creation time, from the account's stored payment method); any other
/// invoice is answered as it is. Its lines are not read.
pub async fn resume_first_collection(
    state: &Services,
    site: &Site,
    account: &Account,
    invoice: Invoice,
    collect: Collect,
) -> Result<Invoiced, BillingError> {
    if invoice.state != InvoiceState::Pending {
        return Ok(Invoiced { invoice, lines: Vec::new(), transaction: None });
    }
    let recurring = invoice.origin == InvoiceOrigin::Renewal.name();
    let at = invoice.created_at;
    let (invoice, transaction) = first_collection(state, site, account, invoice, collect, None, recurring, at).await?;
    Ok(Invoiced { invoice, lines: Vec::new(), transaction })
}

/// An event of an invoice (subject: its number): its account, currency and total, and for
/// `invoice.paid` and `invoice.failed` what settled it.
fn invoice_event(
    state: &Services,
    kind: &str,
    at: i64,
    account_code: &str,
    currency: &str,
    total: i64,
    settled_by: Option<&str>,
) -> NewEvent {
    let mut payload = json!({ "account_code": account_code, "currency": currency, "total_in_cents": total });
    if let (Some(by), Some(map)) = (settled_by, payload.as_object_mut()) {
        map.insert("settled_by".to_owned(), by.into());
    }
    events::new(state, kind, at, payload)
}

/// The `invoice.created` event of a new invoice of the account `account_code`.
pub(crate) fn created_event(state: &Services, account_code: &str, invoice: &NewInvoice, at: i64) -> NewEvent {
    invoice_event(state, events::INVOICE_CREATED, at, account_code, &invoice.currency, invoice.amounts.total, None)
}

/// The event of an open invoice settled `by` a call: `invoice.paid`, or `invoice.failed` for any
/// other state `to`.
pub(crate) fn settled_event(state: &Services, invoice: &Invoice, to: InvoiceState, by: &str, at: i64) -> NewEvent {
    let kind = if to == InvoiceState::Paid { events::INVOICE_PAID } else { events::INVOICE_FAILED };
    invoice_event(state, kind, at, &invoice.account_code, &invoice.currency, invoice.amounts.total, Some(by))
}

/// The `invoice.past_due` event of an invoice.
fn past_due_event(state: &Services, invoice: &Invoice, at: i64) -> NewEvent {
    let (code, currency, total) = (&invoice.account_code, &invoice.currency, invoice.amounts.total);
    invoice_event(state, events::INVOICE_PAST_DUE, at, code, currency, total, None)
}

/// The events of `transition` of `invoice`, settled `by` a call: `invoice.paid`, `invoice.failed`,
/// or `invoice.past_due` when it becomes past due (a failed retry of a past-due invoice changes
/// its schedule, not its state).
pub(crate) fn transition_events(
    state: &Services,
    invoice: &Invoice,
    transition: InvoiceTransition,
    by: &str,
    at: i64,
) -> Vec<NewEvent> {
    match transition {
        InvoiceTransition::Pay | InvoiceTransition::Fail => {
            vec![settled_event(state, invoice, transition.to(), by, at)]
        }
        InvoiceTransition::Retry | InvoiceTransition::FallDue if invoice.state != InvoiceState::PastDue => {
            vec![past_due_event(state, invoice, at)]
        }
        InvoiceTransition::Retry | InvoiceTransition::FallDue => Vec::new(),
    }
}

/// Makes `transition` of an open invoice (no retry scheduled); answers the invoice as it is
/// afterwards (as it was settled meanwhile, when it was).
async fn transition(
    state: &Services,
    invoice: &Invoice,
    transition: InvoiceTransition,
    by: &str,
    at: i64,
) -> Result<Invoice, BillingError> {
    write_transition(state, invoice, transition, without_retry(transition), by, at).await
}

/// The write of `transition` with no retry scheduled and the attempts counted unchanged.
pub(crate) fn without_retry(transition: InvoiceTransition) -> InvoiceChange {
    InvoiceChange { state: transition.to(), attempt_next_collection_at: None, collection_attempts: None }
}

/// Writes `change` with the transition's events if the invoice is still in a state `transition`
/// starts from.
pub(crate) async fn write_transition(
    state: &Services,
    invoice: &Invoice,
    transition: InvoiceTransition,
    change: InvoiceChange,
    by: &str,
    at: i64,
) -> Result<Invoice, BillingError> {
    let events = transition_events(state, invoice, transition, by, at);
    write_with_events(state, invoice, transition, change, &events, at).await
}

/// Writes `change` with `events` if the invoice is still in a state `transition` starts from.
async fn write_with_events(
    state: &Services,
    invoice: &Invoice,
    transition: InvoiceTransition,
    change: InvoiceChange,
    events: &[NewEvent],
    at: i64,
) -> Result<Invoice, BillingError> {
    match state.store.set_invoice_state(invoice.id, transition.from_states(), change, at, events).await? {
        Some(changed) => Ok(changed),
        // Settled meanwhile: answer it as it is.
        None => state
            .store
            .invoice_by_id(invoice.id)
            .await?
            .ok_or_else(|| BillingError::Invalid(format!("invoice {} vanished", invoice.invoice_number))),
    }
}

/// After collection attempt `attempt` (0: the first charge, then the retry's number) ended with
/// `outcome`: what the collection policy says follows — paid, failed, or past due with the next
/// retry scheduled (the answer's state tells which); a settlement is recorded as made `by` this
/// caller.
pub async fn attempted(
    state: &Services,
    invoice: &Invoice,
    collect: Collect,
    attempt: i64,
    outcome: Attempt,
    by: &str,
    at: i64,
) -> Result<Invoice, BillingError> {
    let next = after_attempt(collect, attempt, outcome, invoice.created_at);
    if let Some(retry_at) = next.next_retry_at {
        // The job first: a crash after it leaves a job that finds the invoice and retries.
        state.store.schedule_job(invoice.site_id, DUNNING_JOB, &invoice.uuid, retry_at).await?;
    }
    let change = InvoiceChange {
        state: next.change.to(),
        attempt_next_collection_at: next.next_retry_at,
        collection_attempts: next.failed_attempts,
    };
    let mut events = transition_events(state, invoice, next.change, by, at);
    if collect == Collect::Automatic && outcome != Attempt::Approved {
        // A dunning event: the invoice enters dunning (the first collection declined) or stays
        // in it; the last one comes before the invoice's failure, the others after its falling
        // past due.
        let last = next.change == InvoiceTransition::Fail;
        let payload = json!({
            "account_code": invoice.account_code,
            "currency": invoice.currency,
            "total_in_cents": invoice.amounts.total,
            "dunning_events_count": attempt + 1,
            "final": last,
        });
        let dunning = events::new(state, events::INVOICE_DUNNING, at, payload);
        if last { events.insert(0, dunning) } else { events.push(dunning) }
    }
    write_with_events(state, invoice, next.change, change, &events, at).await
}

/// `credit_card` or `ach`.
fn payment_method_name(kind: PaymentKind) -> &'static str {
    match kind {
        PaymentKind::CreditCard => "credit_card",
        PaymentKind::BankAccount => "ach",
    }
}

/// The idempotency key of automatic collection attempt `attempt` of an invoice (0: the first
/// charge, then the retry's number).
pub fn attempt_key(invoice: &Invoice, attempt: i64) -> String {
    format!("invoice:{}:{attempt}", invoice.uuid)
}

/// Charges the invoice's balance to `source`: records the transaction under `key` (with the
/// service's time it began at and whether `source` is a requested method to save,
/// [`AttemptFacts`]), calls the gateway, completes the transaction. A charge made before under the same key answers its
/// transaction without charging again. `recurring`: a merchant-initiated charge (renewals,
/// retries), with source `subscription` and origin `recurring`.
///
/// The answer is `processing` when the outcome is not this call's to act on: the gateway gave
/// no definite answer, the attempt was begun by an earlier call whose outcome is not known
/// (also another attempt of the same invoice still processing, which the store answers instead
/// of beginning a new one), or the settle job recorded the answer first. Such an attempt is
/// settled by the settle job alone ([`crate::collection::settlement::run_settle`], scheduled
/// here), which also does what follows it; the caller changes nothing of the invoice meanwhile.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn charge(
    state: &Services,
    site_id: i64,
    account: &Account,
    invoice: &Invoice,
    source: &PaymentSource,
    key: String,
    recurring: bool,
    at: i64,
) -> Result<Transaction, BillingError> {
    let gateway = state.gateway(site_id).await?;
    let new = purchase(gateway.as_ref(), account.id, snapshot(account), invoice, source, key, recurring);
    let facts = AttemptFacts { begun_service_at: Some(state.clock.now()), saves_payment_method: source.requested };
    let (begun, resumed) = state.store.begin_attempt(site_id, &new, at, facts).await?;
    if begun.status() != TransactionStatus::Processing {
        return Ok(begun);
    }
    if resumed {
        // Begun by a call that stopped or got no answer: the settle job asks at once.
        state.store.schedule_job(site_id, SETTLE_JOB, &begun.uuid, at).await?;
        return Ok(begun);
    }
    if !recurring {
        // A charge a request made (no job runs it again if its process stops): its settle job,
        // due once the call is long over, finishes what the call did not — the answer if it was
        // never recorded, what follows it if the process stopped right after recording it. The
        // caller drops it once what follows is recorded ([`followed`]). (The sweep schedules the
        // same row for an attempt still processing then.)
        state.store.schedule_job(site_id, SETTLE_JOB, &begun.uuid, at + STALE_SECONDS).await?;
    }
    let outcome = gateway_purchase(state, gateway.as_ref(), &begun, source, false, false).await;
    let result = result_of(&outcome, at);
    if !is_settled(&result) {
        schedule_settle(state, &begun, at, 0).await?;
        return Ok(begun);
    }
    let event = transaction_event(state, &begun, &result, at);
    match state.store.settle_transaction(begun.id, &result, at, &[event]).await? {
        (transaction, true) => Ok(transaction),
        // The settle job recorded it first: what follows is its to do.
        (_, false) => Ok(begun),
    }
}

/// Kind of the job that settles a transaction whose outcome is not known (subject: its uuid).
pub const SETTLE_JOB: &str = "settle_payment";

/// Seconds after it was begun that a transaction still `processing` is taken for one whose
/// process stopped (`collection::settlement::sweep`), and that the settle job of a charge a
/// request made is due ([`charge`]): well past the longest a call waits for the gateway.
pub const STALE_SECONDS: i64 = 600;

/// Seconds before the settle job asks the gateway again after `tries` unknown outcomes: 30 s,
/// doubling, at most an hour.
pub fn settle_backoff(tries: u32) -> i64 {
    30i64.saturating_mul(1i64 << tries.min(7)).min(3600)
}

/// [`settle_backoff`] for an attempt `age` seconds old: the pause grows with the time the outcome
/// has been unknown (about the age itself, from 30 s to an hour).
pub fn backoff_by_age(age: i64) -> i64 {
    settle_backoff((age / 30).max(1).ilog2())
}

/// Schedules the settle job of a `processing` transaction, [`settle_backoff`]`(tries)` after
/// `at` (site time).
pub(crate) async fn schedule_settle(
    state: &Services,
    transaction: &Transaction,
    at: i64,
    tries: u32,
) -> Result<(), StoreError> {
    state.store.schedule_job(transaction.site_id, SETTLE_JOB, &transaction.uuid, at + settle_backoff(tries)).await
}

/// The transaction charging the invoice's balance to `source` (see [`charge`]).
pub fn purchase(
    gateway: &dyn Gateway,
    account_id: i64,
    account: AccountSnapshot,
    invoice: &Invoice,
    source: &PaymentSource,
    key: String,
    recurring: bool,
) -> NewTransaction {
    NewTransaction {
        idempotency_key: key,
        account_id,
        invoice_id: Some(invoice.id),
        subscription_uuid: None,
        action: "purchase".to_owned(),
        amount: invoice.amounts.balance,
        tax: invoice.amounts.tax,
        currency: invoice.currency.clone(),
        kind: source.kind,
        payment_method: payment_method_name(source.kind).to_owned(),
        source: if recurring { "subscription" } else { "transaction" }.to_owned(),
        origin: if recurring { "recurring" } else { "api" }.to_owned(),
        recurring,
        test: gateway.is_test(),
        gateway_type: gateway.kind().to_owned(),
        description: None,
        original_transaction_id: None,
        payment_reference: Some(source.reference.clone()),
        account,
        billing: source.fields.clone(),
    }
}

/// Calls `gateway` (the site's) for a recorded `processing` transaction. `resumed`: its outcome
/// is not known (an earlier call gave no definite answer, or stopped), so the gateway looks up
/// what it did before anything else, and sends the request again under the same key only with
/// `may_resend` (see [`PaymentRequest::may_resend`]).
pub async fn gateway_purchase(
    state: &Services,
    gateway: &dyn Gateway,
    transaction: &Transaction,
    source: &PaymentSource,
    resumed: bool,
    may_resend: bool,
) -> Outcome {
    let invoice = transaction.invoice_number.map(|n| n.to_string());
    let request = PaymentRequest {
        amount_in_cents: transaction.new.amount,
        currency: &transaction.new.currency,
        method: PaymentMethod::Stored { reference: &source.reference },
        address: AvsAddress { street: source.fields.address1.as_deref(), postal_code: source.fields.zip.as_deref() },
        recurring: transaction.new.recurring,
        idempotency_key: Some(&transaction.uuid),
        resumed,
        may_resend,
        invoice: invoice.as_deref(),
        replacing: None,
    };
    let outcome = state.bounded(gateway.purchase(&request)).await;
    if transaction.new.recurring {
        let paid = match &outcome {
            Outcome::Approved(_) => "paid",
            Outcome::Declined(_) => "declined",
            Outcome::Pending(_) => "pending",
        };
        metrics::counter!(crate::platform::metrics::RENEWAL_PAYMENTS, "outcome" => paid).increment(1);
    }
    outcome
}

/// A manually collected invoice still `pending` at its due date (`due_on`, after `net_terms`
/// days) becomes `past_due`: the account then has a past-due invoice. There are no retries (the
/// customer pays it); `mark_successful` or `mark_failed` settle it. A job whose invoice was
/// settled meanwhile does nothing.
pub async fn run_invoice_due(state: &Services, job: &rebill_store::jobs::Job) -> Result<(), JobError> {
    let Some(invoice) = state.store.invoice_by_uuid(&job.subject).await? else { return Ok(()) };
    if invoice.site_id != job.site_id || invoice.state.apply(InvoiceTransition::FallDue).is_err() {
        return Ok(());
    }
    transition(state, &invoice, InvoiceTransition::FallDue, events::SETTLED_BY_INVOICING, job.due_at).await?;
    Ok(())
}

/// The draft of an invoice of the account's pending adjustments: those in the currency of the
/// oldest one (adjustments in other currencies stay pending for another invoice).
async fn pending_draft(services: &Services, account: &Account, terms: InvoiceTerms) -> Result<Draft, StoreError> {
    let mut pending = services.store.pending_adjustments(account.id).await?;
    if let Some(currency) = pending.first().map(|a| a.line.currency.clone()) {
        pending.retain(|a| a.line.currency == currency);
    }
    Ok(Draft { lines: Vec::new(), extra: Vec::new(), pending, origin: InvoiceOrigin::Purchase, terms })
}

/// Invoices the account's pending adjustments with `terms` and collects the invoice as its
/// collection method says (automatic: charged now, a decline leaves it past due with dunning
/// retries; manual: pending until its due date).
pub async fn invoice_pending(
    services: &Services,
    ctx: &Context,
    account: &Account,
    terms: InvoiceTerms,
) -> Result<Invoiced, BillingError> {
    let collect =
        if terms.collection_method == CollectionMethod::Manual { Collect::Manual } else { Collect::Automatic };
    let draft = pending_draft(services, account, terms).await?;
    invoice(services, &ctx.site, account, draft, ctx.now, collect, None).await
}

/// [`invoice_pending`] as a dry run: the invoice it would create now (a credit or legacy one
/// when its lines total less than zero), nothing written.
pub async fn preview_pending(
    services: &Services,
    ctx: &Context,
    account: &Account,
    terms: InvoiceTerms,
) -> Result<Preview, BillingError> {
    let draft = pending_draft(services, account, terms).await?;
    let mut preview = preview(account, &draft, ctx.now)?;
    // Discounted as the invoice would be (nothing of the redemptions' use is written).
    discounts::discount(services, account, &mut preview, 0..0, ctx.now).await?;
    as_credit_when_negative(&mut preview.invoice, ctx.site.credit_memos);
    Ok(preview)
}

/// The invoice with this number on the site.
pub async fn find(services: &Services, ctx: &Context, number: i64) -> Result<Option<Invoice>, StoreError> {
    services.store.invoice(ctx.site.id, number).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use rebill_billing::invoice::InvoiceError;
    use rebill_store::accounts::{AccountFields, AccountState};

    fn t(d: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2027, 1, d, 0, 0, 0).single().expect("valid date")
    }

    fn account() -> Account {
        Account {
            id: 7,
            site_id: 1,
            account_code: "a1".into(),
            state: AccountState::Active,
            fields: AccountFields::default(),
            hosted_login_token: "x".into(),
            created_at: 0,
            updated_at: 0,
            closed_at: None,
        }
    }

    fn line(kind: LineKind, item: ItemRef, start: u32, end: u32, total: i64) -> LineItem {
        LineItem {
            kind,
            key: OriginKey { subscription: "s1".into(), item, period_start: t(1), period_end: t(31) },
            period_end: t(31),
            start: t(start),
            end: t(end),
            currency: "USD".into(),
            unit_amount_in_cents: if kind == LineKind::Credit { -3000 } else { 3000 },
            quantity: 2,
            total_in_cents: total,
            proration: (start != 1).then_some(Proration { part_seconds: 10, whole_seconds: 30 }),
            description: "Plan gold".into(),
        }
    }

    #[test]
    fn engine_lines_round_trip_through_adjustments() {
        let lines = [
            line(LineKind::Plan, ItemRef::Plan { plan_code: "gold".into() }, 1, 31, 6000),
            line(LineKind::Credit, ItemRef::Plan { plan_code: "gold".into() }, 20, 31, -2000),
            line(LineKind::AddOn, ItemRef::AddOn { add_on_code: "seats".into() }, 20, 31, 2000),
            LineItem {
                end: t(1),
                period_end: t(1),
                ..line(LineKind::SetupFee, ItemRef::SetupFee { plan_code: "gold".into() }, 1, 1, 500)
            },
        ];
        for l in lines {
            let new = adjustment_of_line(7, &l).expect("adjustment");
            assert_eq!(new.origin, l.kind.origin_name());
            assert_eq!(new.kind == AdjustmentKind::Credit, l.is_credit());
            let stored = Adjustment {
                id: 1,
                uuid: "u".into(),
                site_id: 1,
                account_code: "a1".into(),
                state: rebill_store::invoices::AdjustmentState::Invoiced,
                invoice_id: Some(1),
                invoice_number: Some(1001),
                line: new,
                original_adjustment_uuid: None,
                credited: 0,
                quantity_credited: 0,
                created_at: 0,
                updated_at: 0,
                shipping_address_id: None,
                shipping_address: None,
            };
            assert_eq!(line_of_adjustment(&stored), Some(l));
        }
    }

    #[test]
    fn previews_total_the_lines_and_refuse_nothing_or_mixed_currencies() {
        let a = account();
        let lines = vec![
            line(LineKind::Plan, ItemRef::Plan { plan_code: "gold".into() }, 1, 31, 6000),
            line(LineKind::Credit, ItemRef::Plan { plan_code: "gold".into() }, 20, 31, -2000),
        ];
        let mut draft = Draft::of_lines(lines, InvoiceOrigin::Renewal);
        draft.terms.net_terms = 30;
        let p = preview(&a, &draft, 1000).expect("preview");
        let amounts = p.invoice.amounts;
        assert_eq!(
            (amounts.subtotal_before_discount, amounts.total, amounts.balance, amounts.paid),
            (4000, 4000, 4000, 0)
        );
        assert_eq!(
            (p.invoice.origin.as_str(), p.invoice.due_on, p.lines.len()),
            ("renewal", Some(1000 + 30 * 86_400), 2)
        );
        assert!(matches!(
            preview(&a, &Draft::of_lines(Vec::new(), InvoiceOrigin::Purchase), 0),
            Err(BillingError::Invoice(InvoiceError::NothingToInvoice))
        ));
        let mut eur = line(LineKind::Plan, ItemRef::Plan { plan_code: "gold".into() }, 1, 31, 1);
        eur.currency = "EUR".into();
        draft.lines.push(eur);
        assert!(matches!(preview(&a, &draft, 0), Err(BillingError::Invoice(InvoiceError::MixedCurrencies(..)))));
    }
}

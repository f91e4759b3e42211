//! Refunds of invoices: money given back on a paid charge invoice, as account credit, through
//! the gateway to the payments that paid it, or outside the gateway.
//!
//! A refund is an invoice of its own crediting the original: on a site with Credit Memos a
//! credit invoice (origin `refund`) whose negative balance is the part given back as credit;
//! on a site without them a legacy refund invoice (negative total, lines `Refund for …` with
//! negative quantities) whose negative balance is also credit for the account's next invoices.
//! Its lines point at the lines they reverse (`original_adjustment_id`, with the units they take
//! back), so what is left to refund (`credited`) always follows from the stored refunds.
//!
//! The refund is written in two steps around the gateway ([`rebill_store::refunds`]): first the
//! refund invoice (`processing` while a refund transaction awaits the gateway), its lines and its
//! refund transactions, with a recovery job; then, once the gateway answered, its state. A
//! declined refund on a site with Credit Memos keeps the amount as credit on the credit invoice
//! (the account is owed it either way); on a site without them the refund invoice fails, takes
//! nothing back, and the refund is answered as declined.

pub mod credit;

use std::ops::ControlFlow;

use rebill_billing::gateway::RefundRequest as GatewayRefund;
use rebill_billing::lifecycle::{Action, Refund};
use rebill_billing::refund::{self, RefundMethod, Refundable, Split, SplitError};
use rebill_billing::settlement::{self, GiveBackError};
use rebill_billing::states::{InvoiceState, TransactionStatus, credit_state};
use rebill_store::StoreError;
use rebill_store::events::NewEvent;
use rebill_store::invoices::{
    Adjustment, AdjustmentKind, Invoice, InvoiceAmounts, InvoiceDraft, InvoiceKind, NewAdjustment, NewInvoice,
    NewTransaction, Transaction, TransactionResult,
};
use rebill_store::jobs::Job;
use serde_json::json;

use crate::billing::invoicing;
use crate::billing::queries::{self, ReadError};
use crate::platform::error::SubscriptionError;
use crate::platform::error::{AppError, FieldRefusal, Missing};
use crate::platform::events;
use crate::platform::jobs::JobError;
use crate::platform::transaction_records;
use crate::{Context, Services};
use rebill_store::payments::{MANUAL_GATEWAY_TYPE, is_offline};

/// Kind of the job that finishes a refund whose run stopped before the gateway's answers were
/// recorded.
pub const REFUND_JOB: &str = "refund";

/// Site-clock seconds after which an unfinished refund is finished by its recovery job.
pub const RECOVERY_SECONDS: i64 = 300;

/// The invoice's successful purchases made through the gateway (`through_gateway`) or recorded
/// outside it (offline payments), oldest first.
fn purchases(txns: &[Transaction], through_gateway: bool) -> Vec<&Transaction> {
    txns.iter()
        .filter(|t| t.new.action == "purchase" && t.status() == TransactionStatus::Success)
        .filter(|t| is_offline(t) != through_gateway)
        .collect()
}

/// Units of one line to give back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineRefund {
    /// The line item's uuid.
    pub uuid: String,
    /// Every unit still refundable when `None`.
    pub quantity: Option<i64>,
    /// Only the part of the line's period still to come.
    pub prorate: bool,
}

/// A refund made outside the gateway (Credit Memos `external_refund`): recorded as manual
/// transactions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct External {
    /// `other` when `None`.
    pub payment_method: Option<String>,
    pub description: Option<String>,
    /// Now when `None`.
    pub refunded_at: Option<i64>,
}

/// What to refund.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundRequest {
    /// An open amount, or with neither this, `percentage` nor `lines` everything left.
    pub amount: Option<i64>,
    /// A percentage (1 to 100) of what is left to refund, rounded down to the cent.
    pub percentage: Option<i64>,
    pub lines: Vec<LineRefund>,
    pub method: RefundMethod,
    /// Notes of the refund invoice.
    pub credit_customer_notes: Option<String>,
    pub external: Option<External>,
    /// A refund made by terminating a subscription (the refund invoice's origin `termination`).
    pub termination: bool,
    /// Only this payment of the invoice gives the money back (a refund of a transaction).
    pub transaction: Option<TransactionTarget>,
}

impl RefundRequest {
    /// A refund of `amount` (everything left when `None`) by `method`, nothing else asked.
    pub fn of_amount(amount: Option<i64>, method: RefundMethod) -> Self {
        RefundRequest {
            amount,
            percentage: None,
            lines: Vec::new(),
            method,
            credit_customer_notes: None,
            external: None,
            termination: false,
            transaction: None,
        }
    }
}

/// The one payment a refund of a transaction gives back through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionTarget {
    /// The purchase's uuid.
    pub uuid: String,
    /// Given back by voiding the purchase (unsettled, in full) rather than by a refund
    /// transaction.
    pub void: bool,
}

/// Why a refund was not made.
#[derive(Debug, thiserror::Error)]
pub enum RefundError {
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The request cannot be honoured (field errors).
    #[error("{}", .0.iter().map(|r| r.message.as_str()).collect::<Vec<_>>().join("; "))]
    Refused(Vec<FieldRefusal>),
    /// The gateway declined the refund; nothing was given back (sites without Credit Memos).
    #[error("the refund was declined")]
    Declined(Box<Transaction>),
    /// The invoice (or a payment or credit it gives back through) changed between the reads the
    /// refund was decided on and the locks it took to write; nothing was written. The use cases
    /// decide again on what is there now ([`settled`]); answered only when that kept happening.
    #[error("invoice {0} changed while it was refunded; try again")]
    Busy(i64),
    /// The refund invoice was written, but it could not be settled now (the purchase it voids
    /// was voided or refunded by another run before the void was recorded, or the database
    /// rolled the settlement back for a concurrent transaction): the refund invoice is left to
    /// its recovery job.
    #[error("invoice {0}: the refund is recorded and will be finished by its recovery job")]
    LeftToRecovery(i64),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<RefundError> for AppError {
    fn from(e: RefundError) -> Self {
        match e {
            RefundError::Read(e) => e.into(),
            RefundError::Refused(refusals) => AppError::Refused(refusals),
            RefundError::Declined(t) => AppError::Declined(Some(t)),
            RefundError::Busy(_) | RefundError::LeftToRecovery(_) => AppError::Conflict(e.to_string()),
            RefundError::Store(e) => e.into(),
        }
    }
}

pub(crate) fn refused(field: &str, symbol: &'static str, message: impl Into<String>) -> RefundError {
    RefundError::Refused(vec![FieldRefusal::new(field, symbol, message)])
}

/// One part of the refund: what of a line it gives back.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Part<'a> {
    line: &'a Adjustment,
    /// Cents, tax included, > 0.
    amount: i64,
    tax: i64,
    units: i64,
}

/// What the refund moves, decided before anything is written.
#[derive(Debug)]
struct Plan<'a> {
    parts: Vec<Part<'a>>,
    split: Split,
}

/// What an invoice can give back, by how it was paid: its successful purchases through the
/// gateway and outside it, each less what was refunded of it; of the rest of what was paid (and
/// not yet credited), what credit paid (credit payments, credit lines) is credit, anything more
/// was marked paid outside the gateway.
fn refundable(invoice: &Invoice, lines: &[Adjustment], txns: &[Transaction], credit_paid: i64) -> Refundable {
    let left = |through_gateway| {
        purchases(txns, through_gateway).iter().map(|t| (t.new.amount - t.refunded).max(0)).sum::<i64>()
    };
    let total = (invoice.amounts.paid - invoice.credited).max(0);
    // What the payments can still give back, never more than the invoice has left: a refund
    // the gateway declined on a site with Credit Memos was given back as credit all the same.
    let gateway = left(true).min(total);
    let mut r = Refundable { gateway, outside: left(false).min(total - gateway), ..Refundable::default() };
    let credit_lines: i64 = lines.iter().filter(|l| l.line.kind == AdjustmentKind::Credit).map(|l| -l.line.total).sum();
    let rest = (total - r.gateway - r.outside).max(0);
    r.credit = rest.min(credit_paid + credit_lines);
    r.outside += rest - r.credit;
    r
}

/// How many times a money operation decides again when what it decided on changed before it
/// held the rows it writes ([`RefundError::Busy`]): each time another operation on the same
/// invoice committed in between, so this bounds the operations racing one request.
pub(crate) const ATTEMPTS: usize = 32;

/// Whether a money operation's attempt is its answer ([`ControlFlow::Break`]) or is to be
/// decided again: it met [`RefundError::Busy`] or a transient database error (nothing written
/// either way) and has tried fewer than [`ATTEMPTS`] times (`tries` counts them).
pub(crate) fn settled<T>(outcome: Result<T, RefundError>, tries: &mut usize) -> ControlFlow<Result<T, RefundError>> {
    match outcome {
        Err(RefundError::Busy(n)) if *tries < ATTEMPTS => {
            tracing::debug!(
                invoice = n,
                tries = *tries,
                "the invoice changed before the refund was written; deciding again"
            );
            *tries += 1;
            ControlFlow::Continue(())
        }
        // The database rolled the attempt back for a concurrent one (PostgreSQL's deadlock
        // detector or a serialization failure): nothing was written either.
        Err(RefundError::Store(e)) if e.is_transient() && *tries < ATTEMPTS => {
            tracing::info!(error = %e, tries = *tries, "a refund met a concurrent transaction; deciding again");
            *tries += 1;
            ControlFlow::Continue(())
        }
        other => ControlFlow::Break(other),
    }
}

/// Refunds the site's invoice `number` as `request` says; answers the refund invoice. Decided
/// again when a concurrent operation changed the invoice first ([`settled`]).
pub async fn refund_invoice(
    services: &Services,
    ctx: &Context,
    number: &str,
    request: &RefundRequest,
) -> Result<Invoice, RefundError> {
    let mut tries = 1;
    loop {
        if let ControlFlow::Break(answer) =
            settled(refund_invoice_once(services, ctx, number, request).await, &mut tries)
        {
            return answer;
        }
    }
}

/// One attempt of [`refund_invoice`]: decided on the invoice as read now, written only if it is
/// still so once locked ([`RefundError::Busy`] otherwise, nothing written).
async fn refund_invoice_once(
    services: &Services,
    ctx: &Context,
    number: &str,
    request: &RefundRequest,
) -> Result<Invoice, RefundError> {
    let original = queries::invoice(services, ctx, number).await?;
    let cm = ctx.site.credit_memos;
    if request.method.needs_credit_memos() && !cm {
        return Err(refused(
            "refund_method",
            "invalid",
            format!("refund_method {} needs Credit Memos, which the site does not have", request.method.as_str()),
        ));
    }
    if original.kind == InvoiceKind::Credit {
        return credit::pay_out(services, ctx, &original, request).await;
    }
    if original.kind != InvoiceKind::Charge || original.state != InvoiceState::Paid {
        return Err(refused(
            "base",
            "not_refundable",
            format!(
                "Invoice #{} is not a paid charge invoice or an open credit invoice; only those can be refunded",
                original.invoice_number
            ),
        ));
    }
    let lines = services.store.invoice_lines(original.id).await?;
    let txns = services.store.invoice_transactions(original.id).await?;
    let credit_paid = {
        let mut work = services.store.begin_work().await?;
        let paid = work.credit_paid(original.id).await?;
        work.commit().await?;
        paid
    };
    let mut left = refundable(&original, &lines, &txns, credit_paid);
    let txns = match &request.transaction {
        None => txns,
        Some(target) => {
            let Some(t) = txns.iter().find(|t| t.uuid == target.uuid && t.new.action == "purchase") else {
                return Err(refused(
                    "base",
                    "not_refundable",
                    format!("Invoice #{} was not paid by transaction {}", original.invoice_number, target.uuid),
                ));
            };
            let own = (t.new.amount - t.refunded).max(0);
            left = if is_offline(t) {
                Refundable { outside: own.min(left.outside), ..Refundable::default() }
            } else {
                Refundable { gateway: own.min(left.gateway), ..Refundable::default() }
            };
            vec![t.clone()]
        }
    };
    if left.total() == 0 {
        return Err(refused(
            "base",
            "not_refundable",
            format!("Nothing is left to refund on invoice #{}", original.invoice_number),
        ));
    }
    // With all_transaction, what credit paid goes back to the purchases behind that credit.
    let sources = if cm && request.method == RefundMethod::AllTransaction && left.credit > 0 {
        credit::behind_credit_paid(services, &original, left.credit).await?
    } else {
        Vec::new()
    };
    left.traced = sources.iter().map(|s| s.amount).sum();
    let plan = plan(ctx, &original, &lines, request, left)?;
    if cm && plan.split.to_outside > 0 && request.external.is_none() {
        return Err(refused(
            "external_refund",
            "blank",
            "Money paid outside the gateway can only be refunded with external_refund set to true",
        ));
    }
    write(services, ctx, &original, &txns, request, &plan, &sources).await
}

/// The parts and split of a refund, refusing what cannot be refunded.
fn plan<'a>(
    ctx: &Context,
    original: &Invoice,
    lines: &'a [Adjustment],
    request: &RefundRequest,
    left: Refundable,
) -> Result<Plan<'a>, RefundError> {
    let charges: Vec<&Adjustment> =
        lines.iter().filter(|l| l.line.kind == AdjustmentKind::Charge && l.line.total > 0).collect();
    let line_left = |l: &Adjustment| (l.line.total - l.credited).max(0);
    let parts: Vec<Part<'a>> = if request.lines.is_empty() {
        let open_amount = request.amount.is_some() || request.percentage.is_some();
        // (A refund of a transaction spreads over what each line has left.)
        if open_amount && request.transaction.is_none() && charges.iter().any(|l| l.quantity_credited > 0) {
            return Err(refused(
                "amount_in_cents",
                "invalid",
                "An invoice with a processed line item refund cannot accept refunds of an open amount",
            ));
        }
        let lefts: Vec<i64> = charges.iter().map(|l| line_left(l)).collect();
        // An open amount is spread over what the lines have left: no more than that, nor than
        // the payments have left, is refundable (more is refused, never cut down to it).
        let amount = asked_amount(request, left.total().min(lefts.iter().sum()))?;
        charges
            .iter()
            .zip(refund::spread(amount, &lefts))
            .filter(|(_, part)| *part > 0)
            .map(|(line, part)| Part {
                line,
                amount: part,
                tax: refund::tax_share(line.line.total, line.line.tax, part),
                units: 0,
            })
            .collect()
    } else {
        if request.amount.is_some() || request.percentage.is_some() {
            return Err(refused(
                "amount_in_cents",
                "invalid",
                "An open amount cannot be refunded together with line items",
            ));
        }
        let mut parts = Vec::new();
        for wanted in &request.lines {
            let Some(line) = charges.iter().find(|l| l.uuid == wanted.uuid) else {
                return Err(refused(
                    "line_items.adjustment.uuid",
                    "not_found",
                    format!("Invoice #{} has no refundable line item {}", original.invoice_number, wanted.uuid),
                ));
            };
            if parts.iter().any(|p: &Part<'_>| p.line.id == line.id) {
                return Err(refused(
                    "line_items.adjustment.uuid",
                    "taken",
                    format!("Line item {} is given twice", wanted.uuid),
                ));
            }
            let remaining = line.line.quantity - line.quantity_credited;
            let units = wanted.quantity.unwrap_or(remaining);
            if units <= 0 {
                return Err(refused(
                    "line_items.adjustment.quantity",
                    "greater_than",
                    "Quantity must be greater than 0",
                ));
            }
            if units > remaining {
                return Err(refused(
                    "line_items.adjustment.quantity",
                    "less_than_or_equal_to",
                    format!("Quantity must be less than or equal to {remaining}, the quantity remaining"),
                ));
            }
            let mut amount = refund::units_amount(line.line.total, line.line.quantity, line.quantity_credited, units);
            if wanted.prorate {
                let (start, end) = match (line.line.engine.as_ref(), line.line.start_date, line.line.end_date) {
                    (Some(_), Some(start), Some(end)) if start <= ctx.now && ctx.now < end => (start, end),
                    _ => {
                        return Err(refused(
                            "line_items.adjustment.prorate",
                            "invalid",
                            format!("Line item {} is not a subscription charge of the current period", wanted.uuid),
                        ));
                    }
                };
                amount = refund::prorated(amount, end - ctx.now, end - start);
            }
            let amount = amount.min(line_left(line));
            parts.push(Part { line, amount, tax: refund::tax_share(line.line.total, line.line.tax, amount), units });
        }
        parts
    };
    let amount: i64 = parts.iter().map(|p| p.amount).sum();
    let split = refund::split(amount, request.method, left).map_err(|e| match e {
        SplitError::NotPositive => refused(
            "base",
            "not_refundable",
            format!("Nothing is left to refund on the line items of invoice #{}", original.invoice_number),
        ),
        SplitError::MoreThanRefundable(n) => refused(
            "amount_in_cents",
            "less_than_or_equal_to",
            format!("The refund of {amount} cents is more than the {n} cents left to refund"),
        ),
        SplitError::MoreThanPayments(n) => refused(
            "refund_method",
            "invalid",
            format!(
                "all_transaction can give back only the {n} cents paid by the invoice's transactions and by the \
                 transactions behind the credit that paid it"
            ),
        ),
    })?;
    Ok(Plan { parts, split })
}

/// The amount a refund of an amount asks, of the `left` cents that can be given back: its
/// `amount_in_cents`, a percentage of `left` (rounded down to the cent) or, with neither, all of
/// it; more than nothing and no more than `left`.
pub(crate) fn asked_amount(request: &RefundRequest, left: i64) -> Result<i64, RefundError> {
    let amount = match (request.amount, request.percentage) {
        (Some(_), Some(_)) => {
            return Err(refused("percentage", "invalid", "An amount and a percentage cannot be refunded together"));
        }
        (None, Some(p)) if !(1..=100).contains(&p) => {
            return Err(refused("percentage", "invalid", "The percentage must be from 1 to 100"));
        }
        (None, Some(p)) => left * p / 100,
        (amount, None) => amount.unwrap_or(left),
    };
    if amount <= 0 {
        return Err(refused("amount_in_cents", "greater_than", "Amount in cents must be greater than 0"));
    }
    if amount > left {
        return Err(refused(
            "amount_in_cents",
            "less_than_or_equal_to",
            format!("Amount in cents must be less than or equal to {left}"),
        ));
    }
    Ok(amount)
}

/// The refund invoice's line reversing `part`.
fn credit_line(part: &Part<'_>, cm: bool) -> NewAdjustment {
    reversal_line(&part.line.line, Some(part.line.id), part.amount, part.tax, part.units, cm, "refund")
}

/// A line giving back `amount` cents (`tax` of them tax) of the line `original` (its id
/// `original_id`, `units` of its units when a number of units is given back): a credit line
/// with `credit_reason_code` `reason` on a credit invoice (`credit_memos`), else a legacy
/// `Refund for …` charge of negative quantity.
pub(crate) fn reversal_line(
    original: &NewAdjustment,
    original_id: Option<i64>,
    amount: i64,
    tax: i64,
    units: i64,
    credit_memos: bool,
    reason: &str,
) -> NewAdjustment {
    let cm = credit_memos;
    let subtotal = amount - tax;
    let whole = if units > 0 && subtotal % units == 0 { units } else { 1 };
    let description = original.description.clone().unwrap_or_default();
    NewAdjustment {
        account_id: original.account_id,
        subscription_uuid: None,
        // Legacy refund lines are charges of negative quantity; credit invoices hold credits.
        kind: if cm { AdjustmentKind::Credit } else { AdjustmentKind::Charge },
        origin: original.origin.clone(),
        description: Some(if cm { description } else { format!("Refund for {description}") }),
        accounting_code: original.accounting_code.clone(),
        product_code: original.product_code.clone(),
        currency: original.currency.clone(),
        unit_amount: if cm { -subtotal / whole } else { subtotal / whole },
        quantity: if cm { whole } else { -whole },
        discount: 0,
        tax: -tax,
        total: -amount,
        tax_exempt: original.tax_exempt,
        tax_code: original.tax_code.clone(),
        credit_reason_code: cm.then(|| reason.to_owned()),
        start_date: original.start_date,
        end_date: original.end_date,
        engine: None,
        original_adjustment_id: original_id,
        reversed_quantity: units,
    }
}

/// An invoice giving back `amount` cents (`tax` of them tax) of `original`, `balance` (≤ 0) of
/// it left as credit: its kind (credit or legacy), state, origin and customer notes as given,
/// the original's collection method and PO number, closed at `closed_at`.
pub(crate) fn reversal_invoice(
    original: &Invoice,
    (kind, state, origin): (InvoiceKind, InvoiceState, &str),
    (amount, tax, balance): (i64, i64, i64),
    customer_notes: Option<String>,
    closed_at: Option<i64>,
) -> NewInvoice {
    NewInvoice {
        account_id: original.account_id,
        kind,
        original_invoice_id: Some(original.id),
        state,
        origin: origin.to_owned(),
        currency: original.currency.clone(),
        amounts: InvoiceAmounts {
            subtotal_before_discount: -(amount - tax),
            discount: 0,
            subtotal_after_discount: -(amount - tax),
            tax: -tax,
            total: -amount,
            paid: -amount - balance,
            balance,
        },
        terms: rebill_store::invoices::InvoiceTerms {
            collection_method: original.terms.collection_method,
            net_terms: 0,
            po_number: original.terms.po_number.clone(),
            customer_notes,
            terms_and_conditions: None,
            vat_reverse_charge_notes: None,
        },
        due_on: None,
        attempt_next_collection_at: None,
        closed_at,
    }
}

/// A refund transaction of `amount` from `original` (a purchase), or a manual one without an
/// original (money paid outside any transaction).
pub(crate) fn refund_transaction(
    invoice: &Invoice,
    original: Option<&Transaction>,
    template: &Transaction,
    amount: i64,
    outside: Option<&External>,
    key: String,
) -> NewTransaction {
    let source = original.unwrap_or(template);
    let mut new = NewTransaction {
        idempotency_key: key,
        account_id: invoice.account_id,
        invoice_id: Some(invoice.id),
        subscription_uuid: None,
        action: "refund".to_owned(),
        amount,
        tax: 0,
        currency: invoice.currency.clone(),
        kind: source.new.kind,
        payment_method: source.new.payment_method.clone(),
        source: "transaction".to_owned(),
        origin: "api".to_owned(),
        recurring: false,
        // Given back through the gateway that took the money.
        test: source.new.test,
        gateway_type: source.new.gateway_type.clone(),
        description: None,
        original_transaction_id: original.map(|t| t.id),
        payment_reference: None,
        account: source.new.account.clone(),
        billing: source.new.billing.clone(),
    };
    if let Some(outside) = outside {
        new.gateway_type = MANUAL_GATEWAY_TYPE.to_owned();
        if let Some(method) = &outside.payment_method {
            new.payment_method = method.clone();
        }
        new.description = outside.description.clone();
    }
    new
}

/// Completes the manual refund transactions `refunds` (begun in `work`) as done outside the
/// gateway at `collected_at`, each with its event recorded at `now`.
pub(crate) async fn complete_outside(
    services: &Services,
    work: &mut rebill_store::work::Work,
    refunds: &[&Transaction],
    collected_at: i64,
    now: i64,
) -> Result<(), StoreError> {
    let done = recorded_outside(collected_at);
    let events: Vec<[NewEvent; 1]> =
        refunds.iter().map(|t| [transaction_records::transaction_event(services, t, &done, now)]).collect();
    let completions: Vec<(i64, &TransactionResult, i64, &[NewEvent])> =
        refunds.iter().zip(&events).map(|(t, e)| (t.id, &done, now, &e[..])).collect();
    work.complete_transactions(&completions).await?;
    Ok(())
}

/// A manual refund's result: done when recorded.
fn recorded_outside(at: i64) -> TransactionResult {
    TransactionResult {
        status: TransactionStatus::Success,
        reference: None,
        approval_code: None,
        message: Some("Manually entered transaction".to_owned()),
        fraud_review: false,
        failure: None,
        cvv: None,
        avs: None,
        collected_at: Some(at),
    }
}

/// Allocates `amount` over `from` (items with what each has left), in order, each up to what
/// it has left.
pub(crate) fn allocate<T>(amount: i64, from: impl IntoIterator<Item = (T, i64)>) -> Vec<(T, i64)> {
    let mut rest = amount;
    let mut out = Vec::new();
    for (item, left) in from {
        if rest == 0 {
            break;
        }
        let part = rest.min(left);
        if part > 0 {
            out.push((item, part));
            rest -= part;
        }
    }
    out
}

/// Locks the purchases that `parts` (purchase id, amount) refund, in the order of their ids (so
/// two operations locking some of the same purchases never wait for each other in a circle),
/// and answers whether each still has what its parts take refundable, as read after its lock.
pub(crate) async fn purchases_hold(
    work: &mut rebill_store::work::Work,
    parts: impl IntoIterator<Item = (i64, i64)>,
) -> Result<bool, StoreError> {
    let mut wanted: std::collections::BTreeMap<i64, i64> = std::collections::BTreeMap::new();
    for (id, amount) in parts {
        *wanted.entry(id).or_default() += amount;
    }
    for (id, amount) in wanted {
        if work.refundable_left(id).await? < amount {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What of each of `purchases` is still refundable, for [`allocate`].
fn refundable_rest(purchases: Vec<&Transaction>) -> impl Iterator<Item = (&Transaction, i64)> {
    purchases.into_iter().map(|t| (t, t.new.amount - t.refunded))
}

pub(crate) fn refund_event(services: &Services, kind: &str, refund: &Invoice, original: i64, at: i64) -> NewEvent {
    events::new(
        services,
        kind,
        at,
        json!({
            "account_code": refund.account_code,
            "invoice_number": refund.invoice_number,
            "original_invoice_number": original,
            "currency": refund.currency,
            "total_in_cents": refund.amounts.total,
        }),
    )
}

async fn write(
    services: &Services,
    ctx: &Context,
    original: &Invoice,
    txns: &[Transaction],
    request: &RefundRequest,
    plan: &Plan<'_>,
    sources: &[credit::CardSource],
) -> Result<Invoice, RefundError> {
    let cm = ctx.site.credit_memos;
    let now = ctx.now;
    let amount: i64 = plan.parts.iter().map(|p| p.amount).sum();
    let tax: i64 = plan.parts.iter().map(|p| p.tax).sum();
    let lines: Vec<NewAdjustment> = plan.parts.iter().map(|p| credit_line(p, cm)).collect();
    let external = request.external.as_ref().filter(|_| cm);
    let void = request.transaction.as_ref().filter(|t| t.void);
    let mut gateway_parts = allocate(plan.split.to_gateway, refundable_rest(purchases(txns, true)));
    let outside_parts = allocate(plan.split.to_outside, refundable_rest(purchases(txns, false)));
    let unmatched_outside = plan.split.to_outside - outside_parts.iter().map(|(_, a)| a).sum::<i64>();
    let credit_parts = allocate(plan.split.credit_to_gateway, sources.iter().map(|s| (s, s.amount)));
    let pending = external.is_none() && (!gateway_parts.is_empty() || !credit_parts.is_empty());
    // A void moves the money by cancelling the purchase: no refund transaction is recorded.
    let voided = match void {
        Some(target) if pending && gateway_parts.len() == 1 && gateway_parts[0].0.uuid == target.uuid => {
            gateway_parts.pop().map(|(t, _)| t)
        }
        _ => None,
    };
    let balance = -plan.split.to_credit;
    let state = if pending {
        InvoiceState::Processing
    } else if cm {
        credit_state(-amount, balance, 0)
    } else {
        InvoiceState::Paid
    };
    let new = reversal_invoice(
        original,
        (
            if cm { InvoiceKind::Credit } else { InvoiceKind::Legacy },
            state,
            if request.termination { "termination" } else { "refund" },
        ),
        (amount, tax, balance),
        request.credit_customer_notes.clone(),
        (balance == 0 && !pending).then_some(now),
    );
    let created = [invoicing::created_event(services, &original.account_code, &new, now)];
    let mut work = services.store.begin_work().await?;
    let locked = work
        .invoice(original.id)
        .await?
        .ok_or_else(|| ReadError::NotFound(Missing::invoice(&original.invoice_number.to_string())))?;
    if locked.credited != original.credited
        || locked.amounts.paid != original.amounts.paid
        || locked.state != original.state
    {
        return Err(RefundError::Busy(original.invoice_number));
    }
    // Each purchase refunded is locked and read again: refunds of it through other invoices
    // (credit paid out) are made one after the other.
    let refunded = gateway_parts.iter().map(|(t, part)| (t.id, *part));
    if !purchases_hold(&mut work, refunded.chain(credit_parts.iter().map(|(s, part)| (s.purchase.id, *part)))).await? {
        return Err(RefundError::Busy(original.invoice_number));
    }
    let draft = InvoiceDraft { invoice: &new, lines: &lines, now, events: &created, credit: None };
    let (refund, _) = work
        .create_invoices(ctx.site.id, &[draft])
        .await?
        .pop()
        .ok_or_else(|| StoreError::Invalid("the refund invoice was not made".into()))?;
    let template = txns.iter().find(|t| t.new.action == "purchase").or(txns.first());
    let mut recorded: Vec<NewTransaction> = Vec::new();
    let mut manual: Vec<usize> = Vec::new();
    if let Some(template) = template {
        for (t, part) in &gateway_parts {
            let key = format!("refund:{}:{}", refund.uuid, t.uuid);
            if external.is_some() {
                manual.push(recorded.len());
            }
            recorded.push(refund_transaction(&refund, Some(t), template, *part, external, key));
        }
        for (t, part) in &outside_parts {
            let key = format!("refund:{}:{}", refund.uuid, t.uuid);
            manual.push(recorded.len());
            let outside = external.cloned().unwrap_or_default();
            recorded.push(refund_transaction(&refund, Some(t), template, *part, Some(&outside), key));
        }
        if unmatched_outside > 0 && external.is_some() {
            let key = format!("refund:{}:outside", refund.uuid);
            manual.push(recorded.len());
            recorded.push(refund_transaction(&refund, None, template, unmatched_outside, external, key));
        }
    }
    // Credit paid back to the purchases behind it: each with its `refund` credit payment.
    let mut paid_out: Vec<(usize, Option<i64>)> = Vec::new();
    for (s, part) in &credit_parts {
        let key = format!("refund:{}:{}:{}", refund.uuid, s.purchase.uuid, s.via.unwrap_or_default());
        if external.is_some() {
            manual.push(recorded.len());
        }
        paid_out.push((recorded.len(), s.via));
        recorded.push(refund_transaction(&refund, Some(&s.purchase), &s.purchase, *part, external, key));
    }
    let begun = {
        let at: Vec<(&NewTransaction, i64)> = recorded.iter().map(|t| (t, now)).collect();
        work.begin_transactions(ctx.site.id, &at).await?
    };
    let recorded_at = services.clock.now();
    for (i, via) in &paid_out {
        let payment = credit::refund_payment(&refund, &begun[*i], *via);
        work.record_credit_payment(ctx.site.id, &payment, now, recorded_at).await?;
    }
    let collected = external.and_then(|e| e.refunded_at).unwrap_or(now);
    let manual: Vec<&Transaction> = manual.iter().map(|i| &begun[*i]).collect();
    complete_outside(services, &mut work, &manual, collected, now).await?;
    if pending {
        let subject = match voided {
            Some(t) => format!("{}{VOID_SEPARATOR}{}", refund.uuid, t.uuid),
            None => refund.uuid.clone(),
        };
        work.schedule_job(ctx.site.id, REFUND_JOB, &subject, now + RECOVERY_SECONDS).await?;
    }
    work.commit().await?;
    if !pending {
        return Ok(refund);
    }
    let finished = match voided {
        Some(purchase) => finish_void(services, &refund, original.invoice_number, purchase, now).await,
        None => {
            let waiting: Vec<Transaction> =
                begun.into_iter().filter(|t| t.status() == TransactionStatus::Processing).collect();
            finish(services, &refund, original.invoice_number, &waiting, now, false).await
        }
    };
    finished.map_err(|e| once_written(e, original.invoice_number))
}

/// An error met after the refund was recorded `processing` with its recovery job: never decided
/// again (that would refund twice); a transient database error leaves the refund to its job.
pub(crate) fn once_written(e: RefundError, number: i64) -> RefundError {
    match e {
        RefundError::Store(s) if s.is_transient() => {
            tracing::warn!(invoice = number, error = %s, "a recorded refund is left to its recovery job");
            RefundError::LeftToRecovery(number)
        }
        e => e,
    }
}

/// Asks the gateway for the refund transactions still `processing` and settles the refund
/// invoice with the answers; answers the invoice as it is afterwards, or the declined refund on
/// a site without Credit Memos (and, `declines_refuse`, on every site). A declined refund keeps
/// its amount as credit on the (credit) invoice: the `refund` credit payment of a declined
/// refund paying credit out is voided.
pub(crate) async fn finish(
    services: &Services,
    refund: &Invoice,
    original_number: i64,
    waiting: &[Transaction],
    at: i64,
    declines_refuse: bool,
) -> Result<Invoice, RefundError> {
    let mut results = Vec::with_capacity(waiting.len());
    let gateway = services.gateway(refund.site_id).await?;
    for t in waiting {
        let original = match t.new.original_transaction_id {
            Some(id) => services.store.transaction_by_id(id).await?,
            None => None,
        };
        let reference = original.as_ref().and_then(|o| o.result.reference.clone()).unwrap_or_default();
        let request = GatewayRefund {
            amount_in_cents: t.new.amount,
            currency: &t.new.currency,
            reference: &reference,
            idempotency_key: Some(&t.uuid),
        };
        let outcome = services.bounded(gateway.refund(&request)).await;
        results.push(transaction_records::result_of(&outcome, at));
    }
    if !results.iter().all(transaction_records::is_settled) {
        // A refund whose outcome is not known may still be made at the gateway: nothing is
        // decided (no amount kept as credit, none refunded again); the refund's recovery job
        // asks again under the same keys until every answer is definite.
        let age = at.saturating_sub(refund.created_at);
        let due = at.max(refund.updated_at) + crate::billing::invoicing::backoff_by_age(age);
        tracing::warn!(invoice = refund.invoice_number, "a refund's outcome is not known yet; asking again later");
        services.store.schedule_job(refund.site_id, REFUND_JOB, &refund.uuid, due).await?;
        return Ok(services.store.invoice_by_id(refund.id).await?.unwrap_or_else(|| refund.clone()));
    }
    let declined: i64 = waiting
        .iter()
        .zip(&results)
        .filter(|(_, r)| r.status != TransactionStatus::Success)
        .map(|(t, _)| t.new.amount)
        .sum();
    let cm = refund.kind == InvoiceKind::Credit;
    let outcome_events: Vec<[NewEvent; 1]> = waiting
        .iter()
        .zip(&results)
        .map(|(t, r)| [transaction_records::transaction_event(services, t, r, at)])
        .collect();
    let mut work = services.store.begin_work().await?;
    let completions: Vec<(i64, &TransactionResult, i64, &[NewEvent])> =
        waiting.iter().zip(&results).zip(&outcome_events).map(|((t, r), e)| (t.id, r, at, &e[..])).collect();
    work.complete_transactions(&completions).await?;
    for (t, r) in waiting.iter().zip(&results) {
        if r.status != TransactionStatus::Success {
            work.void_refund_credit_payment(t.id, at, services.clock.now()).await?;
        }
    }
    let current =
        work.invoice(refund.id).await?.ok_or_else(|| StoreError::Invalid("the refund invoice is gone".into()))?;
    let (state, balance, kind) = if declined == 0 {
        let state =
            if cm { credit_state(current.amounts.total, current.amounts.balance, 0) } else { InvoiceState::Paid };
        (state, current.amounts.balance, events::INVOICE_REFUNDED)
    } else if cm {
        // Kept as credit on the credit invoice.
        let balance = current.amounts.balance - declined;
        (credit_state(current.amounts.total, balance, 0), balance, events::INVOICE_REFUNDED)
    } else {
        (InvoiceState::Failed, 0, events::INVOICE_REFUND_FAILED)
    };
    let event = [refund_event(services, kind, &current, original_number, at)];
    work.settle_refund_invoice(refund.id, state, balance, at, services.clock.now(), &event).await?;
    work.commit().await?;
    let first_declined = waiting.iter().zip(&results).find(|(_, r)| r.status != TransactionStatus::Success);
    if let (true, Some((t, _))) = (!cm || declines_refuse, first_declined) {
        let declined = services.store.transaction_by_id(t.id).await?.unwrap_or_else(|| t.clone());
        return Err(RefundError::Declined(Box::new(declined)));
    }
    Ok(services.store.invoice_by_id(refund.id).await?.unwrap_or(current))
}

/// What giving back (part of) a transaction did.
#[derive(Debug, Clone)]
pub enum GivenBack {
    /// The purchase was voided (it is answered as it is now).
    Voided(Box<Transaction>),
    /// A refund transaction gave the money back.
    Refunded { original: Box<Transaction>, refund: Box<Transaction> },
}

/// Whether a transaction can be voided and whether (part of) it can be given back at `now`
/// (site clock), as [`give_back_transaction`] decides: only successful purchases; one paid
/// outside the gateway (an offline payment) is never voided, only refunded.
pub fn give_back_flags(t: &Transaction, now: i64) -> (bool, bool) {
    let Some(GivingBack { settled, voided }) = giving_back(t, now) else { return (false, false) };
    (
        settlement::voidable(t.new.amount, t.refunded, settled, voided),
        settlement::refundable(t.new.amount, t.refunded, voided),
    )
}

/// What the settlement rule needs of a transaction that can be given back at all.
struct GivingBack {
    settled: bool,
    voided: bool,
}

/// `None` unless `t` is a successful (or voided) purchase; an offline payment counts as settled.
fn giving_back(t: &Transaction, now: i64) -> Option<GivingBack> {
    if t.new.action != "purchase" || !matches!(t.status(), TransactionStatus::Success | TransactionStatus::Void) {
        return None;
    }
    Some(GivingBack {
        settled: is_offline(t) || settlement::is_settled(t.created_at, now),
        voided: t.status() == TransactionStatus::Void,
    })
}

/// Gives back `amount` cents (everything left when `None`) of the site's transaction `uuid`, a
/// successful purchase: voided when unsettled and given back whole, refunded otherwise. Either
/// way the invoice it paid is refunded through that payment alone ([`refund_invoice`]), so the
/// refund invoice (a credit invoice with Credit Memos, a legacy one without) records it; an offline
/// payment is refunded outside the gateway. A declined refund is answered as declined on every
/// site (with Credit Memos the amount stays as credit on the credit invoice all the same).
pub async fn give_back_transaction(
    services: &Services,
    ctx: &Context,
    uuid: &str,
    amount: Option<i64>,
) -> Result<GivenBack, RefundError> {
    let mut tries = 1;
    loop {
        if let ControlFlow::Break(answer) = settled(give_back_once(services, ctx, uuid, amount).await, &mut tries) {
            return answer;
        }
    }
}

/// One attempt of [`give_back_transaction`]: void or refund decided on the purchase as read now.
async fn give_back_once(
    services: &Services,
    ctx: &Context,
    uuid: &str,
    amount: Option<i64>,
) -> Result<GivenBack, RefundError> {
    let t = queries::transaction(services, ctx, uuid).await?;
    let Some(GivingBack { settled, voided }) = giving_back(&t, ctx.now) else {
        return Err(refused(
            "base",
            "not_refundable",
            format!("Transaction {uuid} is not a successful purchase; only those can be given back"),
        ));
    };
    let offline = is_offline(&t);
    let how = settlement::give_back(t.new.amount, t.refunded, amount, settled, voided).map_err(|e| {
        let field = if matches!(e, GiveBackError::ExceedsRemaining { .. } | GiveBackError::InvalidAmount { .. }) {
            "amount_in_cents"
        } else {
            "base"
        };
        refused(field, e.code(), format!("{} ({e})", e.error().merchant_message))
    })?;
    let Some(number) = t.invoice_number else {
        return Err(refused("base", "not_refundable", format!("Transaction {uuid} paid no invoice")));
    };
    let request = RefundRequest {
        external: offline.then(External::default),
        transaction: Some(TransactionTarget { uuid: t.uuid.clone(), void: how.is_void() }),
        ..RefundRequest::of_amount(Some(how.amount()), RefundMethod::TransactionFirst)
    };
    let refund = refund_invoice_once(services, ctx, &number.to_string(), &request).await?;
    let original = services.store.transaction_by_id(t.id).await?.unwrap_or(t);
    if original.status() == TransactionStatus::Void {
        return Ok(GivenBack::Voided(Box::new(original)));
    }
    let given = services
        .store
        .invoice_transactions(refund.id)
        .await?
        .into_iter()
        .filter(|r| r.new.original_transaction_id == Some(original.id))
        .max_by_key(|r| r.id)
        .ok_or_else(|| StoreError::Invalid("the refund of the transaction was not recorded".into()))?;
    if given.status() == TransactionStatus::Declined {
        return Err(RefundError::Declined(Box::new(given)));
    }
    Ok(GivenBack::Refunded { original: Box::new(original), refund: Box::new(given) })
}

/// Separates the refund invoice's uuid from the voided purchase's in the subject of the
/// recovery job of a void.
const VOID_SEPARATOR: char = '/';

/// Gives a refund invoice's money back by voiding `purchase` (unsettled, given back whole): the
/// purchase becomes `void` and the refund invoice is settled. A void the gateway refuses is
/// done as a refund of the whole purchase instead, as gateways do.
async fn finish_void(
    services: &Services,
    refund: &Invoice,
    original_number: i64,
    purchase: &Transaction,
    at: i64,
) -> Result<Invoice, RefundError> {
    let reference = purchase.result.reference.clone().unwrap_or_default();
    let key = rebill_billing::reconcile::void_key(&purchase.uuid);
    let request = rebill_billing::gateway::VoidRequest {
        reference: &reference,
        amount_in_cents: purchase.new.amount,
        currency: &purchase.new.currency,
        idempotency_key: Some(&key),
    };
    let gateway = services.gateway(refund.site_id).await?;
    let outcome = services.bounded(gateway.void(&request)).await;
    let result = transaction_records::result_of(&outcome, at);
    if !transaction_records::is_settled(&result) {
        // Not known whether the purchase was voided: nothing is decided; the recovery job of the
        // void asks again (a purchase found voided is settled, one still captured is voided).
        let subject = format!("{}{VOID_SEPARATOR}{}", refund.uuid, purchase.uuid);
        let due = at.max(refund.updated_at) + crate::billing::invoicing::settle_backoff(0);
        services.store.schedule_job(refund.site_id, REFUND_JOB, &subject, due).await?;
        return Ok(services.store.invoice_by_id(refund.id).await?.unwrap_or_else(|| refund.clone()));
    }
    if result.status == TransactionStatus::Success {
        let state = given_back_state(refund);
        let voided = [events::new(
            services,
            events::TRANSACTION_VOIDED,
            at,
            json!({
                "account_code": purchase.new.account.account_code,
                "transaction_uuid": purchase.uuid,
                "amount_in_cents": purchase.new.amount,
                "currency": purchase.new.currency,
                "invoice_number": purchase.invoice_number,
                "refund_invoice_number": refund.invoice_number,
            }),
        )];
        let refunded = [refund_event(services, events::INVOICE_REFUNDED, refund, original_number, at)];
        let mut work = services.store.begin_work().await?;
        if work.void_transaction(purchase.id, at, &voided).await? {
            work.settle_refund_invoice(refund.id, state, 0, at, services.clock.now(), &refunded).await?;
            work.commit().await?;
        } else {
            // Refunded or voided meanwhile by another request: its refund invoice is left to
            // its recovery job, which finds the purchase no longer voidable and refunds.
            return Err(RefundError::LeftToRecovery(original_number));
        }
        return Ok(services.store.invoice_by_id(refund.id).await?.unwrap_or_else(|| refund.clone()));
    }
    tracing::info!(transaction = %purchase.uuid, "the gateway refused the void; refunding instead");
    refund_instead_of_void(services, refund, original_number, purchase, at).await
}

/// The state of a refund invoice that gave everything back: closed (credit invoice) or paid
/// (legacy).
fn given_back_state(refund: &Invoice) -> InvoiceState {
    if refund.kind == InvoiceKind::Credit { credit_state(refund.amounts.total, 0, 0) } else { InvoiceState::Paid }
}

/// Records a refund transaction of the whole `purchase` on the refund invoice and finishes the
/// refund through the gateway.
async fn refund_instead_of_void(
    services: &Services,
    refund: &Invoice,
    original_number: i64,
    purchase: &Transaction,
    at: i64,
) -> Result<Invoice, RefundError> {
    let key = format!("refund:{}:{}", refund.uuid, purchase.uuid);
    let new = refund_transaction(refund, Some(purchase), purchase, purchase.new.amount, None, key);
    let mut work = services.store.begin_work().await?;
    let begun = work.begin_transactions(refund.site_id, &[(&new, at)]).await?;
    work.commit().await?;
    let waiting: Vec<Transaction> = begun.into_iter().filter(|t| t.status() == TransactionStatus::Processing).collect();
    finish(services, refund, original_number, &waiting, at, false).await
}

/// The recovery job of a refund: finishes a refund invoice still `processing` (its run stopped
/// before the gateway's answers were recorded), asking the gateway again under the same keys
/// (a void again, when the refund was a void whose outcome was not recorded).
pub async fn run_refund_job(services: &Services, job: &Job) -> Result<(), JobError> {
    let (uuid, voided) = match job.subject.split_once(VOID_SEPARATOR) {
        Some((refund, purchase)) => (refund, Some(purchase)),
        None => (job.subject.as_str(), None),
    };
    let Some(refund) = services.store.invoice_by_uuid(uuid).await? else { return Ok(()) };
    if refund.state != InvoiceState::Processing {
        return Ok(());
    }
    let original = refund.original_invoice_number.unwrap_or_default();
    let recorded = services.store.invoice_transactions(refund.id).await?;
    if let (Some(purchase), true) = (voided, recorded.is_empty()) {
        let purchase = services.store.transaction(refund.site_id, purchase).await?;
        let outcome = match purchase {
            Some(p) if p.status() == TransactionStatus::Success => {
                finish_void(services, &refund, original, &p, job.due_at).await
            }
            // Voided by the first run, its refund invoice not yet settled.
            Some(p) if p.status() == TransactionStatus::Void => {
                let state = given_back_state(&refund);
                let event = [refund_event(services, events::INVOICE_REFUNDED, &refund, original, job.due_at)];
                let mut work = services.store.begin_work().await?;
                work.settle_refund_invoice(refund.id, state, 0, job.due_at, services.clock.now(), &event).await?;
                work.commit().await?;
                Ok(refund.clone())
            }
            _ => Err(RefundError::LeftToRecovery(original)),
        };
        return match outcome {
            Ok(_) | Err(RefundError::Declined(_)) => Ok(()),
            Err(RefundError::Store(e)) => Err(e.into()),
            Err(e) => Err(JobError::Refund(e.to_string())),
        };
    }
    let waiting: Vec<Transaction> =
        recorded.into_iter().filter(|t| t.status() == TransactionStatus::Processing).collect();
    match finish(services, &refund, original, &waiting, job.due_at, false).await {
        Ok(_) | Err(RefundError::Declined(_)) => Ok(()),
        Err(RefundError::Store(e)) => Err(e.into()),
        Err(e) => Err(JobError::Refund(e.to_string())),
    }
}

/// Terminates the subscription `uuid` now and gives back its last billed period: all of it
/// (`Refund::Full`) or the part still to come (`Refund::Partial`, prorated by time), refunded on
/// the paid invoice that billed the period, money from credit back as credit and the rest to the
/// payment that paid it (`credit_first`), the refund invoice's origin `termination`. When that
/// invoice cannot be refunded (unpaid, a credit-only invoice, nothing left) the refund is
/// disregarded and the subscription is terminated all the same.
pub async fn terminate(
    services: &Services,
    ctx: &Context,
    uuid: &str,
    refund: Refund,
) -> Result<crate::subscriptions::lifecycle::Loaded, crate::subscriptions::lifecycle::ChangeError> {
    let loaded = crate::subscriptions::lifecycle::change(services, ctx, uuid, |_, _, _| {
        vec![Action::Terminate { refund: Refund::None }]
    })
    .await?;
    if refund == Refund::None {
        return Ok(loaded);
    }
    let billed = services.store.subscription_adjustments(uuid).await.map_err(SubscriptionError::from)?;
    // The lines of the period running now, on the last invoice that billed one.
    let current: Vec<&Adjustment> = billed
        .iter()
        .filter(|a| a.line.kind == AdjustmentKind::Charge && a.invoice_id.is_some())
        .filter(|a| matches!((a.line.start_date, a.line.end_date), (Some(s), Some(e)) if s <= ctx.now && ctx.now < e))
        .collect();
    let Some(last) = current.iter().filter_map(|a| a.invoice_number).max() else { return Ok(loaded) };
    let request = RefundRequest {
        lines: current
            .iter()
            .filter(|a| a.invoice_number == Some(last))
            .map(|a| LineRefund { uuid: a.uuid.clone(), quantity: None, prorate: refund == Refund::Partial })
            .collect(),
        termination: true,
        ..RefundRequest::of_amount(None, RefundMethod::CreditFirst)
    };
    match refund_invoice(services, ctx, &last.to_string(), &request).await {
        Ok(_) | Err(RefundError::Refused(_) | RefundError::Declined(_) | RefundError::Read(_)) => Ok(loaded),
        Err(RefundError::Busy(n) | RefundError::LeftToRecovery(n)) => {
            tracing::warn!(invoice = n, "the termination refund met another refund of the invoice; disregarded");
            Ok(loaded)
        }
        Err(RefundError::Store(e)) => Err(SubscriptionError::from(e).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_allocated_in_order_each_up_to_what_it_has_left() {
        assert_eq!(allocate(500, [("a", 300), ("b", 400)]), vec![("a", 300), ("b", 200)]);
        assert_eq!(allocate(500, [("a", 0), ("b", 400), ("c", 900)]), vec![("b", 400), ("c", 100)]);
        assert!(allocate(0, [("a", 300)]).is_empty());
    }

    #[test]
    fn an_amount_asked_is_within_what_is_left() {
        let ask = |amount, percentage| RefundRequest {
            percentage,
            ..RefundRequest::of_amount(amount, RefundMethod::CreditFirst)
        };
        let symbol = |r: Result<i64, RefundError>| match r {
            Err(RefundError::Refused(f)) => f[0].symbol,
            other => panic!("refused expected: {other:?}"),
        };
        assert_eq!(asked_amount(&ask(None, None), 700).ok(), Some(700), "everything left");
        assert_eq!(asked_amount(&ask(Some(300), None), 700).ok(), Some(300));
        assert_eq!(asked_amount(&ask(None, Some(33)), 700).ok(), Some(231), "33 % rounded down");
        assert_eq!(symbol(asked_amount(&ask(Some(701), None), 700)), "less_than_or_equal_to");
        assert_eq!(symbol(asked_amount(&ask(Some(0), None), 700)), "greater_than");
        assert_eq!(symbol(asked_amount(&ask(None, Some(101)), 700)), "invalid");
        assert_eq!(symbol(asked_amount(&ask(Some(1), Some(1)), 700)), "invalid");
    }
}

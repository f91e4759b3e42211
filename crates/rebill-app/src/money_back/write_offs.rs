//! Write-offs of failed charge invoices on sites with Credit Memos.
//!
//! When a charge invoice is given up — marked failed, or failed at the end of its dunning
//! retries — what it still owes is written off, in one database transaction:
//!
//! 1. the `payment` credit payments that paid part of it are voided (`voided_at`): their credit
//!    goes back to the credit invoices it came from (an emptied one opens again), so credit is
//!    never spent on an invoice nobody pays;
//! 2. a credit invoice of origin `write_off` (state `closed`) credits what is then left unpaid,
//!    spread over the failed invoice's charge lines (each line `credit_reason_code`
//!    `write_off`, pointing at the line it reverses, with its share of the tax);
//! 3. a `write_off` credit payment from that credit invoice pays the failed invoice's balance,
//!    which falls to zero.
//!
//! It is the reaction to `invoice.failed` (an event awaiting its reaction when a call or the
//! dunning settled the invoice), so it runs before `mark_failed` answers and again after a crash
//! until done; it does nothing twice (an invoice already written off is left alone). A charge
//! declined at its first collection fails without a reaction and is not written off (nothing
//! was ever owed by a customer who never got the goods: the purchase simply did not happen).
//! Sites without Credit Memos get no write-off (their failed invoices keep their balance).

use rebill_billing::refund;
use rebill_billing::states::InvoiceState;
use rebill_store::StoreError;
use rebill_store::credits::{CreditPaymentAction, NewCreditPayment, WRITE_OFF_ORIGIN};
use rebill_store::events::Event;
use rebill_store::invoices::{AdjustmentKind, InvoiceDraft, InvoiceKind, NewAdjustment};
use serde_json::json;

use crate::money_back::refunds::{reversal_invoice, reversal_line};
use crate::platform::jobs::JobError;

/// The origin of a write-off credit invoice.
pub const ORIGIN: &str = WRITE_OFF_ORIGIN;
use crate::Services;
use crate::billing::invoicing;
use crate::platform::events;

/// The reaction to `invoice.failed`: writes the invoice off (see the module documentation).
pub async fn on_invoice_failed(services: &Services, event: &Event) -> Result<(), JobError> {
    if services.store.site_has_credit_memos(event.site_id).await? != Some(true) {
        return Ok(());
    }
    let unknown = || StoreError::Invalid(format!("event {} names no invoice of its site", event.id));
    let number: i64 = event.subject.parse().map_err(|_| unknown())?;
    let invoice = services.store.invoice(event.site_id, number).await?.ok_or_else(unknown)?;
    if invoice.kind != InvoiceKind::Charge || invoice.state != InvoiceState::Failed {
        return Ok(());
    }
    let lines = services.store.invoice_lines(invoice.id).await?;
    let at = event.at;
    let mut work = services.store.begin_work().await?;
    // The invoice is held first, so that reactions to the same event running at once (each
    // request drains what awaits a reaction) write it off one after the other: the second
    // finds it written off.
    if !work.lock_invoice(invoice.id).await? || work.written_off(invoice.id).await? {
        return Ok(());
    }
    let voided = work.void_credit_payments_to(invoice.id, at, services.clock.now()).await?;
    let current = work.invoice(invoice.id).await?.ok_or_else(unknown)?;
    let amount = current.amounts.balance;
    if amount <= 0 {
        work.commit().await?;
        return Ok(());
    }
    let charges: Vec<_> = lines.iter().filter(|l| l.line.kind == AdjustmentKind::Charge && l.line.total > 0).collect();
    let lefts: Vec<i64> = charges.iter().map(|l| (l.line.total - l.credited).max(0)).collect();
    let parts =
        if lefts.iter().sum::<i64>() >= amount { refund::spread(amount, &lefts) } else { vec![0; charges.len()] };
    let mut new_lines: Vec<NewAdjustment> = charges
        .iter()
        .zip(&parts)
        .filter(|(_, part)| **part > 0)
        .map(|(line, part)| {
            let tax = refund::tax_share(line.line.total, line.line.tax, *part);
            reversal_line(&line.line, Some(line.id), *part, tax, 0, true, WRITE_OFF_ORIGIN)
        })
        .collect();
    if new_lines.is_empty() {
        // Nothing left to reverse line by line: one line for the whole amount.
        let template = lines.first().map(|l| l.line.clone()).ok_or_else(unknown)?;
        let mut line = reversal_line(&template, None, amount, 0, 0, true, WRITE_OFF_ORIGIN);
        line.description = Some(format!("Write-off of invoice #{}", invoice.invoice_number));
        new_lines.push(line);
    }
    let tax: i64 = new_lines.iter().map(|l| -l.tax).sum();
    let new = reversal_invoice(
        &invoice,
        (InvoiceKind::Credit, InvoiceState::Closed, WRITE_OFF_ORIGIN),
        (amount, tax, 0),
        None,
        Some(at),
    );
    let created = [invoicing::created_event(services, &invoice.account_code, &new, at)];
    let draft = InvoiceDraft { invoice: &new, lines: &new_lines, now: at, events: &created, credit: None };
    let (write_off, _) = work
        .create_invoices(invoice.site_id, &[draft])
        .await?
        .pop()
        .ok_or_else(|| StoreError::Invalid("the write-off invoice was not made".into()))?;
    let payment = NewCreditPayment {
        account_id: invoice.account_id,
        action: CreditPaymentAction::WriteOff,
        currency: invoice.currency.clone(),
        amount,
        original_invoice_id: write_off.id,
        applied_to_invoice_id: Some(invoice.id),
        original_credit_payment_id: None,
        refund_transaction_id: None,
    };
    work.record_credit_payment(invoice.site_id, &payment, at, services.clock.now()).await?;
    if !work.pay_by_credit(&current, amount, at).await? {
        return Err(StoreError::Invalid(format!("invoice {} changed while it was written off", number)).into());
    }
    let written_off = events::new(
        services,
        events::INVOICE_WRITTEN_OFF,
        at,
        json!({
            "account_code": invoice.account_code,
            "invoice_number": invoice.invoice_number,
            "write_off_invoice_number": write_off.invoice_number,
            "currency": invoice.currency,
            "amount_in_cents": amount,
            "voided_credit_payments": voided.iter().map(|p| p.uuid.as_str()).collect::<Vec<_>>(),
        }),
    );
    work.record_invoice_events(&current, &[written_off]).await?;
    work.commit().await?;
    Ok(())
}

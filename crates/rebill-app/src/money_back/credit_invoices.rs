//! Credit invoices (money owed to an account, on sites with Credit Memos): voiding what is left
//! of one, and reading the invoices and lines that credit or are credited.
//!
//! - **Void** ([`void`]): only a credit invoice in a voidable state (open: credit left, no
//!   refund of its processing) can be voided. In one database transaction the invoice is locked,
//!   its whole remaining balance is taken as voided (`Work::take_credit`: the state follows
//!   `rebill_billing::states::credit_state`, `voided` when the whole total was still unused,
//!   `closed` when part of it had been used), a `reduction` credit payment records the amount
//!   (original invoice = applied-to invoice = the credit invoice) and an [`INVOICE_VOIDED`] event
//!   the change. Anything else is refused with [`VoidError::NotVoidable`] and nothing is written.
//! - **Reads**: the original invoice of a credit or refund invoice ([`original_invoices`]), the
//!   invoices issued against a charge invoice ([`credit_invoices`]) and the credit lines
//!   reversing an adjustment ([`credit_adjustments`]), a page at a time.
//!
//! Credit is used automatically as a charge invoice is made (`rebill_store::credits`): oldest
//! credit invoice first in the invoice's currency, one `payment` credit payment per credit
//! invoice used.

use rebill_billing::states::InvoiceState;
use rebill_store::credits::{CreditPaymentAction, NewCreditPayment};
use rebill_store::invoices::{Adjustment, Invoice, InvoiceKind};
use rebill_store::{Page, PageRequest, StoreError};
use serde_json::json;

use crate::billing::queries::{self, ReadError};
use crate::platform::error::{AppError, FieldRefusal, Missing};
use crate::platform::events;
use crate::{Context, Services};

/// Kind of the event of a credit invoice whose balance was voided (subject: its number).
pub const INVOICE_VOIDED: &str = "invoice.voided";

/// Symbol of the field error (on the request's `base`) refusing a void.
pub const NOT_VOIDABLE: &str = "not_voidable";

/// Why a credit invoice was not voided.
#[derive(Debug, thiserror::Error)]
pub enum VoidError {
    /// The site has no invoice with this number.
    #[error("no invoice with number {0}")]
    NotFound(String),
    /// A charge or legacy invoice, or a credit invoice that is not open (closed, voided, or a
    /// refund of its processing).
    #[error("invoice {number} is a {} invoice in state {}; only an open credit invoice can be voided", kind.as_str(), state.as_str())]
    NotVoidable { number: i64, kind: InvoiceKind, state: InvoiceState },
    /// Its balance changed while the void ran (credit used or refunded at the same time).
    #[error("the balance of invoice {0} changed meanwhile; retry")]
    Changed(i64),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<VoidError> for AppError {
    fn from(e: VoidError) -> Self {
        match e {
            VoidError::NotFound(number) => Self::NotFound(Missing::invoice(&number)),
            e @ VoidError::NotVoidable { .. } => {
                Self::Refused(vec![FieldRefusal::new("base", NOT_VOIDABLE, format!("can't be voided: {e}"))])
            }
            e @ VoidError::Changed(_) => Self::Conflict(e.to_string()),
            VoidError::Store(e) => e.into(),
        }
    }
}

/// Whether `invoice` can be voided now: a credit invoice in a voidable state.
pub fn is_voidable(invoice: &Invoice) -> bool {
    invoice.kind == InvoiceKind::Credit && invoice.state.is_voidable() && invoice.amounts.balance < 0
}

/// Voids what is left of the balance of the credit invoice `number` (`PUT …/void`); answers the
/// invoice as it is afterwards: `voided` when none of its credit had been used, else `closed`.
pub async fn void(services: &Services, ctx: &Context, number: &str) -> Result<Invoice, VoidError> {
    let missing = || VoidError::NotFound(number.to_owned());
    let n = number.parse::<i64>().map_err(|_| missing())?;
    let found = services.store.invoice(ctx.site.id, n).await?.ok_or_else(missing)?;
    let mut work = services.store.begin_work().await?;
    // Read again in the work (locked there on PostgreSQL), so the balance voided is current.
    let invoice = work.invoice(found.id).await?.ok_or_else(missing)?;
    if !is_voidable(&invoice) {
        return Err(VoidError::NotVoidable { number: n, kind: invoice.kind, state: invoice.state });
    }
    let amount = -invoice.amounts.balance;
    let recorded_at = services.clock.now();
    let reduction = NewCreditPayment {
        account_id: invoice.account_id,
        action: CreditPaymentAction::Reduction,
        currency: invoice.currency.clone(),
        amount,
        original_invoice_id: invoice.id,
        applied_to_invoice_id: Some(invoice.id),
        original_credit_payment_id: None,
        refund_transaction_id: None,
    };
    // The payment first, so that its event comes before the invoice's change of state.
    let payment = work.record_credit_payment(ctx.site.id, &reduction, ctx.now, recorded_at).await?;
    if !work.take_credit(&invoice, amount, amount, ctx.now, recorded_at).await? {
        return Err(VoidError::Changed(n));
    }
    let voided = work.invoice(invoice.id).await?.ok_or_else(missing)?;
    let event = events::new(
        services,
        INVOICE_VOIDED,
        ctx.now,
        json!({
            "account_code": voided.account_code,
            "currency": voided.currency,
            "total_in_cents": voided.amounts.total,
            "voided_in_cents": amount,
            "state": voided.state.as_str(),
            "credit_payment": payment.uuid,
        }),
    );
    work.record_invoice_events(&voided, &[event]).await?;
    work.commit().await?;
    Ok(voided)
}

/// A page of the invoices the invoice `number` was issued against: the original invoice of a
/// credit or refund invoice (none for a charge invoice, or a credit with no original).
pub async fn original_invoices(
    services: &Services,
    ctx: &Context,
    number: &str,
    page: &PageRequest,
) -> Result<Page<Invoice>, ReadError> {
    let invoice = queries::invoice(services, ctx, number).await?;
    Ok(services.store.list_original_invoices(ctx.site.id, &invoice, page).await?)
}

/// A page of the invoices issued against the invoice `number` (its refund and other credit
/// invoices).
pub async fn credit_invoices(
    services: &Services,
    ctx: &Context,
    number: &str,
    page: &PageRequest,
) -> Result<Page<Invoice>, ReadError> {
    let invoice = queries::invoice(services, ctx, number).await?;
    Ok(services.store.list_crediting_invoices(ctx.site.id, invoice.id, page).await?)
}

/// A page of the credit lines reversing the adjustment `uuid`.
pub async fn credit_adjustments(
    services: &Services,
    ctx: &Context,
    uuid: &str,
    page: &PageRequest,
) -> Result<Page<Adjustment>, ReadError> {
    let adjustment = services
        .store
        .adjustment(ctx.site.id, uuid)
        .await?
        .ok_or_else(|| ReadError::NotFound(Missing::adjustment(uuid)))?;
    Ok(services.store.list_credit_adjustments(ctx.site.id, adjustment.id, page).await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rebill_store::invoices::{InvoiceAmounts, InvoiceTerms};

    fn invoice(kind: InvoiceKind, state: InvoiceState, total: i64, balance: i64) -> Invoice {
        Invoice {
            id: 1,
            uuid: "u".into(),
            site_id: 1,
            account_id: 1,
            account_code: "a1".into(),
            invoice_number: 1001,
            kind,
            original_invoice_id: None,
            original_invoice_number: None,
            credited: 0,
            state,
            origin: "credit".into(),
            currency: "USD".into(),
            amounts: InvoiceAmounts { total, balance, paid: total - balance, ..InvoiceAmounts::default() },
            terms: InvoiceTerms::default(),
            due_on: None,
            collection_attempts: 0,
            attempt_next_collection_at: None,
            closed_at: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn only_an_open_credit_invoice_with_credit_left_is_voidable() {
        assert!(is_voidable(&invoice(InvoiceKind::Credit, InvoiceState::Open, -500, -500)));
        assert!(is_voidable(&invoice(InvoiceKind::Credit, InvoiceState::Open, -500, -20)));
        for (kind, state, balance) in [
            (InvoiceKind::Credit, InvoiceState::Closed, 0),
            (InvoiceKind::Credit, InvoiceState::Voided, 0),
            (InvoiceKind::Credit, InvoiceState::Processing, -500),
            (InvoiceKind::Legacy, InvoiceState::Paid, -500),
            (InvoiceKind::Charge, InvoiceState::Pending, 500),
            (InvoiceKind::Charge, InvoiceState::Paid, 0),
        ] {
            assert!(!is_voidable(&invoice(kind, state, -500, balance)), "{kind:?} {state:?}");
        }
    }

    #[test]
    fn a_refused_void_is_a_field_error_on_the_base() {
        let e = VoidError::NotVoidable { number: 1001, kind: InvoiceKind::Charge, state: InvoiceState::Paid };
        match AppError::from(e) {
            AppError::Refused(fields) => {
                assert_eq!(fields.len(), 1);
                assert_eq!((fields[0].field.as_str(), fields[0].symbol), ("base", NOT_VOIDABLE));
                assert!(fields[0].message.contains("a charge invoice in state paid"), "{}", fields[0].message);
            }
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(AppError::from(VoidError::NotFound("9".into())), AppError::NotFound(m) if m == Missing::invoice("9"))
        );
        assert!(matches!(AppError::from(VoidError::Changed(1001)), AppError::Conflict(_)));
    }
}

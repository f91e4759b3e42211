//! Credit paid back to the cards that paid for it (Credit Memos): `refund` credit payments.
//!
//! Credit is traced back to money: a credit invoice that refunds (or terminates) a charge
//! invoice came from what that invoice was paid — its purchases through the gateway, and the
//! credit that paid the rest, traced the same way — through at most [`TRACE_DEPTH`] credit
//! invoices. Credit with nothing behind it in the gateway (posted credits, gift cards,
//! write-offs, the prorated credit of a downgrade) can only be paid out outside the gateway
//! (`external_refund`). What each purchase can still give back (its amount less its refunds) and
//! what each credit payment can still give back (its amount less its `refund` credit payments)
//! bound every trace, so no card is ever given back more than it paid.
//!
//! Two operations pay credit out:
//!
//! - **`all_transaction` refunds of a charge invoice paid partly by credit**
//!   ([`super::refund_invoice`]): the part credit paid goes back to the purchases behind
//!   that credit. Each is a refund transaction recorded on the refund credit invoice and a
//!   `refund` credit payment from it, naming the `payment` credit payment it gives back
//!   (`original_credit_payment`) and the refund transaction (`refund_transaction`).
//! - **Refunds of an open credit invoice** ([`pay_out`]): its remaining balance goes back to the
//!   purchases behind it — only the whole balance, as the real service requires; a part, or
//!   credit with no purchase behind it, only with `external_refund` (a manual refund
//!   transaction). The credit leaves the balance at once (the invoice is `processing` until the
//!   gateway answers); a declined refund puts it back (its credit payment voided, the invoice
//!   open again) and is answered as declined. The answer is the credit invoice itself.

use std::future::Future;
use std::pin::Pin;

use rebill_billing::refund::RefundMethod;
use rebill_billing::states::{InvoiceState, TransactionStatus};
use rebill_store::StoreError;
use rebill_store::credits::{CreditPaymentAction, NewCreditPayment};
use rebill_store::invoices::{Invoice, InvoiceKind, NewTransaction, Transaction};

use super::{
    External, RECOVERY_SECONDS, REFUND_JOB, RefundError, RefundRequest, asked_amount, complete_outside, finish,
    refund_event, refund_transaction, refused,
};
use crate::platform::events;
use crate::platform::transaction_records;
use crate::{Context, Services};
use rebill_store::payments::{MANUAL_GATEWAY_TYPE, is_offline, payment_kind};

/// How many credit invoices deep credit is traced back to the purchases behind it.
pub const TRACE_DEPTH: u8 = 4;

/// A purchase through the gateway that paid for credit, and how much of that credit can go
/// back to it.
#[derive(Debug, Clone)]
pub(crate) struct CardSource {
    pub purchase: Transaction,
    pub amount: i64,
    /// The `payment` credit payment (its id) whose credit goes back, when the credit paid an
    /// invoice.
    pub via: Option<i64>,
}

/// Whether `invoice` is a credit invoice whose balance can be refunded now: open, with credit
/// left.
pub fn is_refundable(invoice: &Invoice) -> bool {
    invoice.kind == InvoiceKind::Credit && invoice.state == InvoiceState::Open && invoice.amounts.balance < 0
}

type Traced<'a> = Pin<Box<dyn Future<Output = Result<Vec<CardSource>, StoreError>> + Send + 'a>>;

/// The purchases behind up to `want` cents of the credit of the credit invoice `credit_id`: those
/// of the charge invoice it credits, if any.
fn behind_credit(services: &Services, credit_id: i64, want: i64, depth: u8, via: Option<i64>) -> Traced<'_> {
    Box::pin(async move {
        if want <= 0 || depth == 0 {
            return Ok(Vec::new());
        }
        let Some(credit) = services.store.invoice_by_id(credit_id).await? else { return Ok(Vec::new()) };
        let Some(original_id) = credit.original_invoice_id else { return Ok(Vec::new()) };
        let Some(original) = services.store.invoice_by_id(original_id).await? else { return Ok(Vec::new()) };
        if original.kind != InvoiceKind::Charge {
            return Ok(Vec::new());
        }
        behind_invoice(services, &original, want, depth, via, true).await
    })
}

/// The purchases behind up to `want` cents of what the charge invoice `invoice` was paid: its own
/// purchases through the gateway (`own`), oldest first, then the purchases behind the credit
/// that paid it.
async fn behind_invoice(
    services: &Services,
    invoice: &Invoice,
    want: i64,
    depth: u8,
    via: Option<i64>,
    own: bool,
) -> Result<Vec<CardSource>, StoreError> {
    let mut out = Vec::new();
    let mut need = want;
    if own {
        for t in services.store.invoice_transactions(invoice.id).await? {
            let left = t.new.amount - t.refunded;
            if need == 0 || t.new.action != "purchase" || t.status() != TransactionStatus::Success || is_offline(&t) {
                continue;
            }
            let amount = left.min(need);
            if amount > 0 {
                need -= amount;
                out.push(CardSource { purchase: t, amount, via });
            }
        }
    }
    if need == 0 {
        return Ok(out);
    }
    let payments: Vec<_> = services
        .store
        .invoice_credit_payments(invoice.id)
        .await?
        .into_iter()
        .filter(|p| {
            p.action == CreditPaymentAction::Payment
                && p.voided_at.is_none()
                && p.applied_to_invoice_id == Some(invoice.id)
                && p.original_invoice_id != invoice.id
        })
        .collect();
    let ids: Vec<i64> = payments.iter().map(|p| p.id).collect();
    let refunded = services.store.credit_payments_refunded(&ids).await?;
    for p in payments {
        if need == 0 {
            break;
        }
        let given = refunded.iter().find(|(id, _)| *id == p.id).map_or(0, |(_, n)| *n);
        let cap = (p.amount - given).min(need);
        let found = behind_credit(services, p.original_invoice_id, cap, depth - 1, via.or(Some(p.id))).await?;
        need -= found.iter().map(|s| s.amount).sum::<i64>();
        out.extend(found);
    }
    Ok(out)
}

/// Keeps no purchase given more than it has left when several traces reach it.
fn within_purchases(sources: Vec<CardSource>) -> Vec<CardSource> {
    let mut used: Vec<(i64, i64)> = Vec::new();
    let mut out = Vec::new();
    for mut s in sources {
        let left = s.purchase.new.amount - s.purchase.refunded;
        let slot = match used.iter().position(|(id, _)| *id == s.purchase.id) {
            Some(i) => i,
            None => {
                used.push((s.purchase.id, 0));
                used.len() - 1
            }
        };
        s.amount = s.amount.min(left - used[slot].1);
        if s.amount > 0 {
            used[slot].1 += s.amount;
            out.push(s);
        }
    }
    out
}

/// The purchases behind up to `want` cents of what credit paid of the charge invoice `invoice`.
pub(crate) async fn behind_credit_paid(
    services: &Services,
    invoice: &Invoice,
    want: i64,
) -> Result<Vec<CardSource>, StoreError> {
    Ok(within_purchases(behind_invoice(services, invoice, want, TRACE_DEPTH, None, false).await?))
}

/// The `refund` credit payment of `refund` (a refund transaction begun), paying credit of the
/// credit invoice `credit` out, giving back the credit payment `via`.
pub(crate) fn refund_payment(credit: &Invoice, refund: &Transaction, via: Option<i64>) -> NewCreditPayment {
    NewCreditPayment {
        account_id: credit.account_id,
        action: CreditPaymentAction::Refund,
        currency: credit.currency.clone(),
        amount: refund.new.amount,
        original_invoice_id: credit.id,
        applied_to_invoice_id: None,
        original_credit_payment_id: via,
        refund_transaction_id: Some(refund.id),
    }
}

/// Refunds (part of) the remaining balance of the open credit invoice `credit` as `request` says
/// (see the module documentation); answers the credit invoice as it is afterwards.
pub(crate) async fn pay_out(
    services: &Services,
    ctx: &Context,
    credit: &Invoice,
    request: &RefundRequest,
) -> Result<Invoice, RefundError> {
    let number = credit.invoice_number;
    if !is_refundable(credit) {
        return Err(refused("base", "not_refundable", format!("Invoice #{number} has no open credit to refund")));
    }
    if !request.lines.is_empty() {
        return Err(refused(
            "line_items",
            "invalid",
            "The balance of a credit invoice is refunded as an amount, not by line items",
        ));
    }
    if request.method == RefundMethod::AllCredit {
        return Err(refused(
            "refund_method",
            "invalid",
            "all_credit cannot give the balance of a credit invoice back as credit",
        ));
    }
    let left = -credit.amounts.balance;
    let amount = asked_amount(request, left)?;
    let external = request.external.as_ref();
    if external.is_none() && amount != left {
        return Err(refused(
            "external_refund",
            "blank",
            "Only the whole balance of a credit invoice is refunded through the gateway; refund a part with \
             external_refund set to true",
        ));
    }
    let sources = match external {
        Some(_) => Vec::new(),
        None => within_purchases(behind_credit(services, credit.id, amount, TRACE_DEPTH, None).await?),
    };
    let traced: i64 = sources.iter().map(|s| s.amount).sum();
    if external.is_none() && traced < amount {
        return Err(refused(
            "external_refund",
            "blank",
            format!(
                "Only {traced} cents of the credit of invoice #{number} can go back to the payments that paid for it; \
                 refund it with external_refund set to true"
            ),
        ));
    }
    let account = services
        .store
        .account(ctx.site.id, &credit.account_code)
        .await?
        .ok_or_else(|| StoreError::Invalid(format!("invoice {number} names no account")))?;
    let now = ctx.now;
    let recorded: Vec<(NewTransaction, Option<i64>)> = match external {
        Some(outside) => {
            let key = format!("refund:{}:outside:{}", credit.uuid, rebill_store::invoices::new_uuid());
            vec![(
                outside_refund(ctx.site.mode == rebill_store::Mode::Sandbox, credit, &account, outside, amount, key),
                None,
            )]
        }
        None => sources
            .iter()
            .map(|s| {
                let key = format!("refund:{}:{}:{}", credit.uuid, s.purchase.uuid, s.via.unwrap_or_default());
                (refund_transaction(credit, Some(&s.purchase), &s.purchase, s.amount, None, key), s.via)
            })
            .collect(),
    };
    let mut work = services.store.begin_work().await?;
    let current =
        work.invoice(credit.id).await?.ok_or_else(|| StoreError::Invalid(format!("invoice {number} is gone")))?;
    if current.amounts.balance != credit.amounts.balance || current.state != credit.state {
        return Err(RefundError::Busy(number));
    }
    if !super::purchases_hold(&mut work, sources.iter().map(|s| (s.purchase.id, s.amount))).await? {
        return Err(RefundError::Busy(number));
    }
    let recorded_at = services.clock.now();
    let taken = match external {
        Some(_) => work.take_credit(&current, amount, 0, now, recorded_at).await?,
        None => work.begin_payout(&current, amount, now, recorded_at).await?,
    };
    if !taken {
        return Err(RefundError::Busy(number));
    }
    let begun = {
        let at: Vec<(&NewTransaction, i64)> = recorded.iter().map(|(t, _)| (t, now)).collect();
        work.begin_transactions(ctx.site.id, &at).await?
    };
    for (t, (_, via)) in begun.iter().zip(&recorded) {
        work.record_credit_payment(ctx.site.id, &refund_payment(credit, t, *via), now, recorded_at).await?;
    }
    if let Some(outside) = external {
        let manual: Vec<&Transaction> = begun.iter().collect();
        complete_outside(services, &mut work, &manual, outside.refunded_at.unwrap_or(now), now).await?;
        let paid_out = work.invoice(credit.id).await?.unwrap_or_else(|| current.clone());
        let event = refund_event(services, events::INVOICE_REFUNDED, &paid_out, number, now);
        work.record_invoice_events(&paid_out, &[event]).await?;
        work.commit().await?;
        return Ok(paid_out);
    }
    work.schedule_job(ctx.site.id, REFUND_JOB, &credit.uuid, now + RECOVERY_SECONDS).await?;
    work.commit().await?;
    let waiting: Vec<Transaction> = begun.into_iter().filter(|t| t.status() == TransactionStatus::Processing).collect();
    finish(services, credit, number, &waiting, now, true).await.map_err(|e| super::once_written(e, number))
}

/// A manual refund transaction of `amount` paying out credit of `credit` outside the gateway
/// (`test` on sandbox sites).
fn outside_refund(
    test: bool,
    credit: &Invoice,
    account: &rebill_store::accounts::Account,
    outside: &External,
    amount: i64,
    key: String,
) -> NewTransaction {
    let method = outside.payment_method.clone().unwrap_or_else(|| "other".to_owned());
    NewTransaction {
        idempotency_key: key,
        account_id: credit.account_id,
        invoice_id: Some(credit.id),
        subscription_uuid: None,
        action: "refund".to_owned(),
        amount,
        tax: 0,
        currency: credit.currency.clone(),
        kind: payment_kind(&method),
        payment_method: method,
        source: "transaction".to_owned(),
        origin: "api".to_owned(),
        recurring: false,
        test,
        gateway_type: MANUAL_GATEWAY_TYPE.to_owned(),
        description: outside.description.clone(),
        original_transaction_id: None,
        payment_reference: None,
        account: transaction_records::snapshot(account),
        billing: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(id: i64, amount: i64, refunded: i64, part: i64) -> CardSource {
        let mut purchase = *crate::platform::error::tests::declined();
        purchase.id = id;
        purchase.new.amount = amount;
        purchase.refunded = refunded;
        CardSource { purchase, amount: part, via: None }
    }

    #[test]
    fn no_purchase_is_given_more_than_it_has_left() {
        let kept = within_purchases(vec![source(1, 1000, 300, 500), source(1, 1000, 300, 500), source(2, 50, 0, 80)]);
        let parts: Vec<(i64, i64)> = kept.iter().map(|s| (s.purchase.id, s.amount)).collect();
        assert_eq!(parts, vec![(1, 500), (1, 200), (2, 50)]);
    }
}

//! Offline payments: money a customer paid outside rebill (a check, a wire, …) entered on a
//! manually collected charge invoice.
//!
//! [`Work::record_offline_payment`] makes the whole change in one database transaction: it
//! locks the invoice ([`Work::invoice`]; `FOR UPDATE` on PostgreSQL, SQLite has one writer),
//! writes only while the invoice is still as the payment was decided on (same state and
//! balance), records the transaction (begun and completed at once, never sent to a gateway) with
//! its events, adds the amount to the invoice's `paid` and takes it from its `balance`, and, when
//! nothing is left, pays the invoice through the one write path of invoice states
//! ([`Work::set_invoice_states`] with the transition `Pay`: state paid, no retry, closed now)
//! with its events. A payment decided on an invoice that changed meanwhile (another payment came
//! first) writes nothing and answers the invoice as it is now, for the caller to decide again.
//!
//! Offline payments are `purchase` transactions whose `gateway_type` is
//! [`MANUAL_GATEWAY_TYPE`] ([`is_offline`]): money that did not go through a gateway.

use rebill_billing::states::{InvoiceState, InvoiceTransition, TransactionStatus};

use crate::billing_info::PaymentKind;
use crate::events::NewEvent;
use crate::invoices::{
    CollectionMethod, Invoice, InvoiceChange, InvoiceKind, InvoiceStateChange, NewTransaction, Transaction,
    TransactionResult,
};
use crate::work::Work;
use crate::{Store, StoreError};

/// The `gateway_type` of a transaction entered by hand: money paid outside any gateway.
pub const MANUAL_GATEWAY_TYPE: &str = "manual";

/// Whether a transaction records money paid outside rebill (an offline payment): its
/// `gateway_type` is [`MANUAL_GATEWAY_TYPE`].
pub fn is_offline(transaction: &Transaction) -> bool {
    transaction.new.gateway_type == MANUAL_GATEWAY_TYPE
}

/// The billing info type an offline payment's transaction is stored with: a card payment taken
/// outside rebill is a card's, every other method (check, wire transfer, money order, EFT,
/// PayPal, other) a bank account's. The method itself is the transaction's `payment_method`.
pub fn payment_kind(payment_method: &str) -> PaymentKind {
    if payment_method == "credit_card" { PaymentKind::CreditCard } else { PaymentKind::BankAccount }
}

/// An offline payment for [`Work::record_offline_payment`].
#[derive(Debug, Clone, Copy)]
pub struct OfflinePayment<'a> {
    pub invoice_id: i64,
    /// The invoice's state when the payment was decided on.
    pub state: InvoiceState,
    /// The invoice's balance when the payment was decided on.
    pub balance: i64,
    /// The transaction (`amount`: what is paid, at most `balance`; `invoice_id`: the invoice).
    pub transaction: &'a NewTransaction,
    /// Its result (successful, with the time the money was collected).
    pub result: &'a TransactionResult,
    /// Site time of the entry.
    pub now: i64,
    /// Recorded with the transaction (subject: its uuid).
    pub transaction_events: &'a [NewEvent],
    /// Recorded when the payment pays the invoice off (subject: its number).
    pub paid_events: &'a [NewEvent],
}

/// What [`Work::record_offline_payment`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaymentRecord {
    /// Recorded: the transaction and the invoice as they are afterwards.
    Recorded { transaction: Box<Transaction>, invoice: Box<Invoice> },
    /// Nothing written: the invoice is no longer in the state or balance the payment was decided
    /// on (as it is now), or it is gone (`None`).
    Changed(Option<Box<Invoice>>),
    /// Nothing written: a purchase of the invoice is processing at the gateway (its outcome not
    /// known yet), and the invoice could be paid twice.
    Paying(Box<Transaction>),
}

impl Work {
    /// Records an offline payment on a charge invoice of the site as the module documentation
    /// says. A payment that does not fit the invoice (not the invoice's currency or transaction,
    /// an amount not from 1 to the balance, not an open, manually collected charge invoice) is
    /// an [`StoreError::Invalid`] and nothing is written: the caller checks these first.
    pub async fn record_offline_payment(
        &mut self,
        site_id: i64,
        payment: &OfflinePayment<'_>,
    ) -> Result<PaymentRecord, StoreError> {
        let Some(invoice) = self.invoice(payment.invoice_id).await?.filter(|i| i.site_id == site_id) else {
            return Ok(PaymentRecord::Changed(None));
        };
        self.lock_invoice(invoice.id).await?;
        if let Some(paying) = self.processing_purchase(invoice.id).await? {
            return Ok(PaymentRecord::Paying(Box::new(paying)));
        }
        if invoice.state != payment.state || invoice.amounts.balance != payment.balance {
            return Ok(PaymentRecord::Changed(Some(Box::new(invoice))));
        }
        let new = payment.transaction;
        let fits = invoice.kind == InvoiceKind::Charge
            && invoice.state.is_open()
            && invoice.terms.collection_method == CollectionMethod::Manual
            && new.invoice_id == Some(invoice.id)
            && new.account_id == invoice.account_id
            && new.currency == invoice.currency
            && new.gateway_type == MANUAL_GATEWAY_TYPE
            && (1..=invoice.amounts.balance).contains(&new.amount)
            && payment.result.status == TransactionStatus::Success;
        if !fits {
            return Err(StoreError::Invalid(format!(
                "an offline payment of {} {} does not fit invoice {} ({}, {} {} due)",
                new.amount,
                new.currency,
                invoice.invoice_number,
                invoice.state.as_str(),
                invoice.amounts.balance,
                invoice.currency
            )));
        }
        let begun = self
            .begin_transactions(site_id, &[(new, payment.now)])
            .await?
            .pop()
            .ok_or_else(|| StoreError::Invalid("the offline payment's transaction was not recorded".into()))?;
        let completed =
            self.complete_transactions(&[(begun.id, payment.result, payment.now, payment.transaction_events)]).await?;
        if completed != 1 {
            return Err(StoreError::Invalid(format!("transaction {} was not completed", begun.uuid)));
        }
        let moved = crate::db::query(
            "UPDATE invoices SET paid = paid + $1, balance = balance - $1, updated_at = $2 WHERE id = $3 AND balance = $4",
        )
        .bind(new.amount)
        .bind(payment.now)
        .bind(invoice.id)
        .bind(invoice.amounts.balance)
        .execute(self.tx.exec())
        .await?;
        if moved.rows_affected() != 1 {
            return Err(StoreError::Conflict(format!("the balance of invoice {} changed", invoice.invoice_number)));
        }
        if new.amount == invoice.amounts.balance {
            let pay = InvoiceTransition::Pay;
            let change = InvoiceChange { state: pay.to(), attempt_next_collection_at: None, collection_attempts: None };
            let paid = InvoiceStateChange { id: invoice.id, change, now: payment.now, events: payment.paid_events };
            if self.set_invoice_states(pay.from_states(), &[paid]).await?.is_empty() {
                return Err(StoreError::Conflict(format!("invoice {} could not be paid", invoice.invoice_number)));
            }
        }
        let invoice = self
            .invoice(invoice.id)
            .await?
            .ok_or_else(|| StoreError::Invalid(format!("invoice {} vanished", invoice.invoice_number)))?;
        // The row as completed: the result just written, at this time.
        let transaction = Transaction { result: payment.result.clone(), updated_at: payment.now, ..begun };
        Ok(PaymentRecord::Recorded { transaction: Box::new(transaction), invoice: Box::new(invoice) })
    }
}

impl Store {
    /// [`Work::record_offline_payment`] in a database transaction of its own (committed only
    /// when the payment is recorded).
    pub async fn record_offline_payment(
        &self,
        site_id: i64,
        payment: &OfflinePayment<'_>,
    ) -> Result<PaymentRecord, StoreError> {
        let mut work = self.begin_work().await?;
        let record = work.record_offline_payment(site_id, payment).await?;
        if matches!(record, PaymentRecord::Recorded { .. }) {
            work.commit().await?;
        }
        // Otherwise dropped: rolled back, nothing written.
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounts::AccountFields;
    use crate::billing_info::{BillingFields, PaymentKind};
    use crate::invoices::{AccountSnapshot, InvoiceAmounts, InvoiceTerms, NewInvoice};
    use crate::testing::both_backends;
    use crate::{Mode, NewSite, Plan};

    const NOW: i64 = 1_800_000_000;

    fn event(kind: &str) -> NewEvent {
        NewEvent { kind: kind.into(), at: NOW, recorded_at: NOW, payload: "{}".into(), awaits_reaction: false }
    }

    fn manual_invoice(account_id: i64, total: i64, collection_method: CollectionMethod) -> NewInvoice {
        NewInvoice {
            account_id,
            kind: InvoiceKind::Charge,
            original_invoice_id: None,
            state: InvoiceState::Pending,
            origin: "purchase".into(),
            currency: "USD".into(),
            amounts: InvoiceAmounts { subtotal_before_discount: total, total, balance: total, ..Default::default() },
            terms: InvoiceTerms { collection_method, net_terms: 30, ..InvoiceTerms::default() },
            due_on: Some(NOW + 30 * 86_400),
            attempt_next_collection_at: None,
            closed_at: None,
        }
    }

    fn check(invoice: &Invoice, amount: i64) -> NewTransaction {
        NewTransaction {
            idempotency_key: format!("offline:{}", crate::invoices::new_uuid()),
            account_id: invoice.account_id,
            invoice_id: Some(invoice.id),
            subscription_uuid: None,
            action: "purchase".into(),
            amount,
            tax: 0,
            currency: invoice.currency.clone(),
            kind: PaymentKind::BankAccount,
            payment_method: "check".into(),
            source: "transaction".into(),
            origin: "api".into(),
            recurring: false,
            test: true,
            gateway_type: MANUAL_GATEWAY_TYPE.into(),
            description: Some("Check 1234".into()),
            original_transaction_id: None,
            payment_reference: None,
            account: AccountSnapshot { account_code: invoice.account_code.clone(), ..AccountSnapshot::default() },
            billing: BillingFields::default(),
        }
    }

    fn approved(collected_at: i64) -> TransactionResult {
        TransactionResult {
            status: TransactionStatus::Success,
            reference: None,
            approval_code: None,
            message: Some("Manually entered transaction".into()),
            fraud_review: false,
            failure: None,
            cvv: None,
            avs: None,
            collected_at: Some(collected_at),
        }
    }

    fn payment<'a>(
        invoice: &Invoice,
        transaction: &'a NewTransaction,
        result: &'a TransactionResult,
        now: i64,
        events: &'a [NewEvent],
    ) -> OfflinePayment<'a> {
        OfflinePayment {
            invoice_id: invoice.id,
            state: invoice.state,
            balance: invoice.amounts.balance,
            transaction,
            result,
            now,
            transaction_events: &events[..1],
            paid_events: &events[1..],
        }
    }

    fn recorded(record: PaymentRecord) -> (Transaction, Invoice) {
        match record {
            PaymentRecord::Recorded { transaction, invoice } => (*transaction, *invoice),
            other => panic!("not recorded: {other:?}"),
        }
    }

    #[tokio::test]
    async fn offline_payments_move_the_balance_and_pay_the_invoice_off_once() {
        for store in both_backends("offline_payments").await {
            let backend = store.backend();
            let new_site =
                NewSite { name: "s".into(), mode: Mode::Sandbox, plan: Plan::Core, credit_memos: false, contact: None };
            let site = store.create_site(&new_site, NOW).await.expect("site").0.id;
            let account = store.create_account(site, "c1", &AccountFields::default(), NOW, &[]).await.expect("account");
            let new = manual_invoice(account.id, 1000, CollectionMethod::Manual);
            let (invoice, _) = store
                .create_invoice(site, &new, &[], &[], NOW, &[], None, crate::coupons::Discounted::default())
                .await
                .expect("invoice");
            let events = [event("transaction.approved"), event("invoice.paid")];
            let number = invoice.invoice_number.to_string();

            // A partial payment: the invoice stays pending with the rest due.
            let first = check(&invoice, 400);
            let result = approved(NOW - 86_400);
            let (t1, after) = recorded(
                store
                    .record_offline_payment(site, &payment(&invoice, &first, &result, NOW + 10, &events))
                    .await
                    .expect("record"),
            );
            assert_eq!(
                (t1.status(), t1.new.amount, t1.result.collected_at, t1.updated_at),
                (TransactionStatus::Success, 400, Some(NOW - 86_400), NOW + 10),
                "{backend:?}"
            );
            assert!(is_offline(&t1), "{backend:?}");
            assert_eq!(store.transaction(site, &t1.uuid).await.expect("read").as_ref(), Some(&t1), "{backend:?}");
            assert_eq!(
                (after.state, after.amounts.paid, after.amounts.balance, after.closed_at),
                (InvoiceState::Pending, 400, 600, None),
                "{backend:?}"
            );
            let kinds = |events: Vec<crate::events::Event>| events.into_iter().map(|e| e.kind).collect::<Vec<_>>();
            assert_eq!(kinds(store.events(site, &t1.uuid).await.expect("events")), ["transaction.approved"]);
            assert!(store.events(site, &number).await.expect("events").is_empty(), "{backend:?}: not paid yet");

            // Decided on the invoice as it was before: nothing is written, the invoice as it is now.
            let stale = check(&invoice, 1000);
            let record = store
                .record_offline_payment(site, &payment(&invoice, &stale, &result, NOW + 20, &events))
                .await
                .expect("stale");
            assert_eq!(record, PaymentRecord::Changed(Some(Box::new(after.clone()))), "{backend:?}");
            assert_eq!(store.invoice_transactions(invoice.id).await.expect("transactions").len(), 1, "{backend:?}");

            // More than the balance does not fit (the caller refuses it first).
            let over = check(&after, 601);
            let refused = store.record_offline_payment(site, &payment(&after, &over, &result, NOW + 20, &events)).await;
            assert!(matches!(refused, Err(StoreError::Invalid(_))), "{backend:?}: {refused:?}");

            // The rest pays the invoice off: paid as `Pay` makes it, with its events.
            let rest = check(&after, 600);
            let (t2, paid) = recorded(
                store
                    .record_offline_payment(site, &payment(&after, &rest, &result, NOW + 30, &events))
                    .await
                    .expect("rest"),
            );
            assert_eq!(
                (paid.state, paid.amounts.paid, paid.amounts.balance, paid.closed_at),
                (InvoiceState::Paid, 1000, 0, Some(NOW + 30)),
                "{backend:?}"
            );
            assert_eq!(paid.attempt_next_collection_at, None, "{backend:?}");
            assert_eq!(kinds(store.events(site, &number).await.expect("events")), ["invoice.paid"], "{backend:?}");
            let stored: Vec<String> = store
                .invoice_transactions(invoice.id)
                .await
                .expect("transactions")
                .into_iter()
                .map(|t| t.uuid)
                .collect();
            assert_eq!(stored, [t1.uuid.clone(), t2.uuid.clone()], "{backend:?}");

            // A paid invoice takes nothing more; nor does an automatically collected one.
            let more = check(&paid, 1);
            let refused = store.record_offline_payment(site, &payment(&paid, &more, &result, NOW + 40, &events)).await;
            assert!(matches!(refused, Err(StoreError::Invalid(_))), "{backend:?}: {refused:?}");
            let automatic = manual_invoice(account.id, 500, CollectionMethod::Automatic);
            let (automatic, _) = store
                .create_invoice(site, &automatic, &[], &[], NOW, &[], None, crate::coupons::Discounted::default())
                .await
                .expect("invoice");
            let on_automatic = check(&automatic, 500);
            let refused = store
                .record_offline_payment(site, &payment(&automatic, &on_automatic, &result, NOW + 40, &events))
                .await;
            assert!(matches!(refused, Err(StoreError::Invalid(_))), "{backend:?}: {refused:?}");
            assert!(store.invoice_transactions(automatic.id).await.expect("transactions").is_empty(), "{backend:?}");

            // Another site's invoice is not found.
            let other_site = NewSite { name: "t".into(), ..new_site };
            let other = store.create_site(&other_site, NOW).await.expect("site").0.id;
            let record = store
                .record_offline_payment(other, &payment(&automatic, &on_automatic, &result, NOW + 40, &events))
                .await
                .expect("other site");
            assert_eq!(record, PaymentRecord::Changed(None), "{backend:?}");
        }
    }
}

//! Offline payments: a payment the customer made outside rebill (a check, a wire transfer, …)
//! entered on a manually collected invoice (`POST /v2/invoices/{n}/transactions`).
//!
//! [`enter`] records a successful `purchase` transaction for it — no gateway is called; its
//! `gateway_type` is [`MANUAL_GATEWAY_TYPE`], which marks money paid outside the gateway (a
//! refund of it gives nothing back through a gateway) — and takes the amount from the invoice's
//! balance, in one database transaction ([`rebill_store::payments`]). A payment that leaves
//! nothing due pays the invoice (as `mark_successful` would: state paid, closed now) and records
//! `invoice.paid` settled by [`SETTLED_BY_OFFLINE_PAYMENT`], to which the invoice's
//! subscriptions react like to any invoice paid after its invoicing (a past-due subscription
//! recovers); a partial payment leaves the invoice open (it may still fall past due at its due
//! date). The transaction records `transaction.approved`.
//!
//! The rules (docs/offline-payments.md):
//! - `payment_method` is required, one of [`PAYMENT_METHODS`]; `description` at most
//!   [`MAX_DESCRIPTION`] characters; `collected_at` defaults to now.
//! - `amount_in_cents` defaults to the invoice's balance; it must be more than 0 and at most the
//!   balance (no over-payment). A `currency`, when sent, must be the invoice's.
//! - Only an open (pending or past due) charge invoice collected manually takes a payment.
//!
//! The decision is made on the invoice as read and written only while the invoice is still so;
//! when another payment came first the decision is made again on the invoice as it is now (so two
//! payments of the whole balance at once pay it once: the second finds it paid).

use rebill_billing::states::{InvoiceState, TransactionStatus};
use rebill_store::accounts::Account;
use rebill_store::billing_info::BillingFields;
use rebill_store::events::Awaiting;
use rebill_store::invoices::{
    CollectionMethod, Invoice, InvoiceKind, NewTransaction, Transaction, TransactionResult, new_uuid,
};
use rebill_store::payments::{OfflinePayment as Recording, PaymentRecord};
use rebill_store::{Mode, StoreError};

use crate::billing::invoicing;
use crate::billing::queries::{self, ReadError};
use crate::platform::error::{AppError, FieldRefusal, Missing};
use crate::platform::transaction_records;
use crate::{Context, Services};

pub use rebill_store::payments::{MANUAL_GATEWAY_TYPE, is_offline, payment_kind};

/// The payment methods an offline payment may name (V10 reference).
pub const PAYMENT_METHODS: [&str; 7] =
    ["credit_card", "paypal", "eft", "wire_transfer", "money_order", "check", "other"];

/// Most characters of an offline payment's description.
pub const MAX_DESCRIPTION: usize = 50;

/// The message of every offline payment's transaction.
pub const MESSAGE: &str = "Manually entered transaction";

/// What settled an invoice an offline payment paid off (its `invoice.paid` event's `settled_by`).
pub const SETTLED_BY_OFFLINE_PAYMENT: &str = "offline_payment";

/// How many times a payment is decided on the invoice again when other payments keep coming
/// first.
const DECISIONS: usize = 5;

/// An offline payment as entered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OfflinePayment {
    /// Required: one of [`PAYMENT_METHODS`].
    pub payment_method: Option<String>,
    /// When the money was collected (epoch seconds); now when `None`.
    pub collected_at: Option<i64>,
    /// What was paid; the invoice's balance when `None`.
    pub amount_in_cents: Option<i64>,
    pub description: Option<String>,
    /// When sent, the invoice's currency (any case).
    pub currency: Option<String>,
}

/// An offline payment entered: its transaction and the invoice afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entered {
    pub transaction: Transaction,
    pub invoice: Invoice,
}

/// A refused field of an offline payment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    PaymentMethodBlank,
    PaymentMethodUnknown,
    DescriptionTooLong,
    AmountNotPositive,
}

impl Problem {
    /// The refused element.
    pub fn field(self) -> &'static str {
        match self {
            Problem::PaymentMethodBlank | Problem::PaymentMethodUnknown => "payment_method",
            Problem::DescriptionTooLong => "description",
            Problem::AmountNotPositive => "amount_in_cents",
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            Problem::PaymentMethodBlank => "blank",
            Problem::PaymentMethodUnknown => "invalid",
            Problem::DescriptionTooLong => "too_long",
            Problem::AmountNotPositive => "greater_than",
        }
    }

    pub fn message(self) -> String {
        match self {
            Problem::PaymentMethodBlank => "can't be blank".to_owned(),
            Problem::PaymentMethodUnknown => format!("is not one of {}", PAYMENT_METHODS.join(", ")),
            Problem::DescriptionTooLong => format!("is too long (maximum is {MAX_DESCRIPTION} characters)"),
            Problem::AmountNotPositive => "must be greater than 0".to_owned(),
        }
    }
}

/// Why an offline payment was not entered.
#[derive(Debug, thiserror::Error)]
pub enum OfflinePaymentError {
    #[error("no invoice with number {0}")]
    NotFound(String),
    #[error("refused: {}", .0.iter().map(|p| format!("{} {}", p.field(), p.message())).collect::<Vec<_>>().join(", "))]
    Invalid(Vec<Problem>),
    /// Not an open charge invoice: paid, failed, or a credit or legacy invoice (the state or
    /// kind named).
    #[error("the invoice is {0}: only a pending or past due charge invoice takes a payment")]
    NotOpen(&'static str),
    /// Automatic invoices are collected from the stored payment method.
    #[error("the invoice is collected automatically: only a manual invoice takes an offline payment")]
    NotManual,
    #[error("the invoice is in {0}")]
    OtherCurrency(String),
    #[error("the amount is more than the invoice's balance of {0} cents")]
    AboveBalance(i64),
    /// Other payments kept changing the invoice; nothing was entered.
    #[error("the invoice kept changing while the payment was entered; try again")]
    Busy,
    /// A charge of the invoice is processing at the payment gateway (the transaction's uuid):
    /// entered now, the invoice could be paid twice.
    #[error("a payment of the invoice (transaction {0}) is processing at the payment gateway")]
    PaymentProcessing(String),
    #[error("the invoice's account is missing")]
    AccountMissing,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<OfflinePaymentError> for AppError {
    fn from(e: OfflinePaymentError) -> Self {
        let refused = |field: &str, symbol: &'static str, message: String| {
            AppError::Refused(vec![FieldRefusal::new(field, symbol, message)])
        };
        match e {
            OfflinePaymentError::NotFound(number) => AppError::NotFound(Missing::invoice(&number)),
            OfflinePaymentError::Invalid(problems) => AppError::Refused(
                problems.iter().map(|p| FieldRefusal::new(p.field(), p.symbol(), p.message())).collect(),
            ),
            OfflinePaymentError::NotOpen(_) => {
                refused("base", "invalid_transition", "can only be entered on a pending or past due invoice".into())
            }
            OfflinePaymentError::PaymentProcessing(_) => refused(
                "base",
                "invalid_transition",
                "can be entered once the payment processing at the gateway for this invoice has an outcome".into(),
            ),
            OfflinePaymentError::NotManual => refused(
                "base",
                "invalid_collection_method",
                "can only be entered on a manually collected invoice".into(),
            ),
            OfflinePaymentError::OtherCurrency(currency) => {
                refused("currency", "invalid", format!("is not the invoice's currency ({currency})"))
            }
            OfflinePaymentError::AboveBalance(balance) => refused(
                "amount_in_cents",
                "less_than_or_equal_to",
                format!("must be less than or equal to the invoice's balance ({balance})"),
            ),
            OfflinePaymentError::Busy => AppError::Conflict(e.to_string()),
            OfflinePaymentError::Store(e) => e.into(),
            e @ OfflinePaymentError::AccountMissing => AppError::Internal(Box::new(e)),
        }
    }
}

/// The refused fields of `payment` that no invoice is needed to see.
pub fn problems(payment: &OfflinePayment) -> Vec<Problem> {
    let mut problems = Vec::new();
    match payment.payment_method.as_deref().map(str::trim) {
        None | Some("") => problems.push(Problem::PaymentMethodBlank),
        Some(method) if !PAYMENT_METHODS.contains(&method) => problems.push(Problem::PaymentMethodUnknown),
        Some(_) => {}
    }
    if payment.description.as_deref().is_some_and(|d| d.chars().count() > MAX_DESCRIPTION) {
        problems.push(Problem::DescriptionTooLong);
    }
    if payment.amount_in_cents.is_some_and(|a| a <= 0) {
        problems.push(Problem::AmountNotPositive);
    }
    problems
}

/// What `payment` pays of `invoice` as it is, or why the invoice takes no such payment.
pub fn amount_for(invoice: &Invoice, payment: &OfflinePayment) -> Result<i64, OfflinePaymentError> {
    if invoice.kind != InvoiceKind::Charge {
        return Err(OfflinePaymentError::NotOpen(invoice.kind.as_str()));
    }
    if !invoice.state.is_open() || invoice.amounts.balance <= 0 {
        return Err(OfflinePaymentError::NotOpen(invoice.state.as_str()));
    }
    if invoice.terms.collection_method != CollectionMethod::Manual {
        return Err(OfflinePaymentError::NotManual);
    }
    if payment.currency.as_deref().is_some_and(|c| !c.trim().eq_ignore_ascii_case(&invoice.currency)) {
        return Err(OfflinePaymentError::OtherCurrency(invoice.currency.clone()));
    }
    let balance = invoice.amounts.balance;
    match payment.amount_in_cents {
        None => Ok(balance),
        Some(amount) if amount <= 0 => Err(OfflinePaymentError::Invalid(vec![Problem::AmountNotPositive])),
        Some(amount) if amount > balance => Err(OfflinePaymentError::AboveBalance(balance)),
        Some(amount) => Ok(amount),
    }
}

/// The transaction of an offline payment of `amount` on `invoice`.
fn transaction(
    ctx: &Context,
    account: &Account,
    invoice: &Invoice,
    method: &str,
    payment: &OfflinePayment,
    amount: i64,
) -> NewTransaction {
    NewTransaction {
        // Each entry is its own payment.
        idempotency_key: format!("offline:{}", new_uuid()),
        account_id: invoice.account_id,
        invoice_id: Some(invoice.id),
        subscription_uuid: None,
        action: "purchase".to_owned(),
        amount,
        tax: 0,
        currency: invoice.currency.clone(),
        kind: payment_kind(method),
        payment_method: method.to_owned(),
        source: "transaction".to_owned(),
        origin: "api".to_owned(),
        recurring: false,
        test: ctx.site.mode == Mode::Sandbox,
        gateway_type: MANUAL_GATEWAY_TYPE.to_owned(),
        description: payment.description.clone(),
        original_transaction_id: None,
        payment_reference: None,
        account: transaction_records::snapshot(account),
        billing: BillingFields::default(),
    }
}

/// The successful result of an offline payment collected at `collected_at`.
fn result(collected_at: i64) -> TransactionResult {
    TransactionResult {
        status: TransactionStatus::Success,
        reference: None,
        approval_code: None,
        message: Some(MESSAGE.to_owned()),
        fraud_review: false,
        failure: None,
        cvv: None,
        avs: None,
        collected_at: Some(collected_at),
    }
}

/// Enters an offline payment on the site's invoice `invoice_number` (see the module
/// documentation); answers its transaction and the invoice afterwards.
pub async fn enter(
    services: &Services,
    ctx: &Context,
    invoice_number: &str,
    payment: &OfflinePayment,
) -> Result<Entered, OfflinePaymentError> {
    let mut invoice = match queries::invoice(services, ctx, invoice_number).await {
        Ok(invoice) => invoice,
        Err(ReadError::NotFound(_)) => return Err(OfflinePaymentError::NotFound(invoice_number.to_owned())),
        Err(ReadError::Store(e)) => return Err(e.into()),
    };
    let problems = problems(payment);
    if !problems.is_empty() {
        return Err(OfflinePaymentError::Invalid(problems));
    }
    let method = payment.payment_method.as_deref().map(str::trim).unwrap_or_default();
    let account =
        services.store.account(ctx.site.id, &invoice.account_code).await?.ok_or(OfflinePaymentError::AccountMissing)?;
    let result = result(payment.collected_at.unwrap_or(ctx.now));
    for _ in 0..DECISIONS {
        let amount = amount_for(&invoice, payment)?;
        let new = transaction(ctx, &account, &invoice, method, payment, amount);
        // The transaction as it will be recorded, for its event.
        let as_recorded = Transaction {
            id: 0,
            uuid: String::new(),
            site_id: ctx.site.id,
            invoice_number: Some(invoice.invoice_number),
            new: new.clone(),
            result: result.clone(),
            original_transaction_uuid: None,
            refunded: 0,
            created_at: ctx.now,
            updated_at: ctx.now,
        };
        let approved = [transaction_records::transaction_event(services, &as_recorded, &result, ctx.now)];
        let paid =
            [invoicing::settled_event(services, &invoice, InvoiceState::Paid, SETTLED_BY_OFFLINE_PAYMENT, ctx.now)];
        let recording = Recording {
            invoice_id: invoice.id,
            state: invoice.state,
            balance: invoice.amounts.balance,
            transaction: &new,
            result: &result,
            now: ctx.now,
            transaction_events: &approved,
            paid_events: &paid,
        };
        match services.store.record_offline_payment(ctx.site.id, &recording).await? {
            PaymentRecord::Recorded { transaction, invoice } => {
                react(services, &invoice).await;
                return Ok(Entered { transaction: *transaction, invoice: *invoice });
            }
            // Another payment came first: decide again on the invoice as it is now.
            PaymentRecord::Changed(Some(now)) => invoice = *now,
            PaymentRecord::Changed(None) => return Err(OfflinePaymentError::NotFound(invoice_number.to_owned())),
            PaymentRecord::Paying(paying) => return Err(OfflinePaymentError::PaymentProcessing(paying.uuid)),
        }
    }
    Err(OfflinePaymentError::Busy)
}

/// Runs the reactions to the invoice's events (its subscriptions recover when it was paid off).
/// The payment stands whatever they do: a reaction that cannot run now (a subscription held by
/// another change) stays awaiting and the scheduler's sweep runs it, so the call is not failed —
/// a client retrying a failed call would enter the payment twice.
async fn react(services: &Services, invoice: &Invoice) {
    let number = invoice.invoice_number.to_string();
    if let Err(e) = crate::collection::reactions::drain(services, Awaiting::Subject(invoice.site_id, &number)).await {
        tracing::warn!(invoice = %number, error = %e,
            "the reaction to an offline payment did not run; the scheduler's sweep runs it");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rebill_store::billing_info::PaymentKind;
    use rebill_store::invoices::{InvoiceAmounts, InvoiceTerms};

    fn invoice(state: InvoiceState, kind: InvoiceKind, collection_method: CollectionMethod, balance: i64) -> Invoice {
        Invoice {
            id: 1,
            uuid: "u".into(),
            site_id: 1,
            account_id: 7,
            account_code: "a1".into(),
            invoice_number: 1001,
            kind,
            original_invoice_id: None,
            original_invoice_number: None,
            credited: 0,
            state,
            origin: "purchase".into(),
            currency: "USD".into(),
            amounts: InvoiceAmounts { total: 1000, paid: 1000 - balance, balance, ..InvoiceAmounts::default() },
            terms: InvoiceTerms { collection_method, ..InvoiceTerms::default() },
            due_on: None,
            collection_attempts: 0,
            attempt_next_collection_at: None,
            closed_at: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    fn manual(state: InvoiceState, balance: i64) -> Invoice {
        invoice(state, InvoiceKind::Charge, CollectionMethod::Manual, balance)
    }

    fn paying(amount: Option<i64>) -> OfflinePayment {
        OfflinePayment { payment_method: Some("check".into()), amount_in_cents: amount, ..OfflinePayment::default() }
    }

    #[test]
    fn the_fields_are_checked_before_any_invoice() {
        assert!(problems(&paying(Some(1))).is_empty());
        assert_eq!(problems(&OfflinePayment::default()), [Problem::PaymentMethodBlank]);
        let every = OfflinePayment {
            payment_method: Some("bitcoin".into()),
            description: Some("x".repeat(MAX_DESCRIPTION + 1)),
            amount_in_cents: Some(0),
            ..OfflinePayment::default()
        };
        assert_eq!(
            problems(&every),
            [Problem::PaymentMethodUnknown, Problem::DescriptionTooLong, Problem::AmountNotPositive]
        );
        let at_most = OfflinePayment { description: Some("é".repeat(MAX_DESCRIPTION)), ..paying(None) };
        assert!(problems(&at_most).is_empty(), "characters are counted, not bytes");
        for method in PAYMENT_METHODS {
            let payment = OfflinePayment { payment_method: Some(method.into()), ..OfflinePayment::default() };
            assert!(problems(&payment).is_empty(), "{method}");
        }
        assert_eq!(
            problems(&OfflinePayment { payment_method: Some(" ".into()), ..OfflinePayment::default() }),
            [Problem::PaymentMethodBlank]
        );
    }

    #[test]
    fn the_amount_defaults_to_the_balance_and_never_pays_more() {
        let open = manual(InvoiceState::Pending, 600);
        assert_eq!(amount_for(&open, &paying(None)).ok(), Some(600));
        assert_eq!(amount_for(&open, &paying(Some(250))).ok(), Some(250));
        assert_eq!(amount_for(&open, &paying(Some(600))).ok(), Some(600));
        assert!(matches!(amount_for(&open, &paying(Some(601))), Err(OfflinePaymentError::AboveBalance(600))));
        assert!(matches!(amount_for(&open, &paying(Some(-5))), Err(OfflinePaymentError::Invalid(_))));
        let past_due = manual(InvoiceState::PastDue, 1000);
        assert_eq!(amount_for(&past_due, &paying(None)).ok(), Some(1000));
        let euros = OfflinePayment { currency: Some("eur".into()), ..paying(None) };
        assert!(matches!(amount_for(&open, &euros), Err(OfflinePaymentError::OtherCurrency(c)) if c == "USD"));
        let dollars = OfflinePayment { currency: Some("usd".into()), ..paying(None) };
        assert_eq!(amount_for(&open, &dollars).ok(), Some(600));
    }

    #[test]
    fn only_open_manual_charge_invoices_take_a_payment() {
        for state in [InvoiceState::Paid, InvoiceState::Failed, InvoiceState::Open, InvoiceState::Closed] {
            let refused = amount_for(&manual(state, 0), &paying(None));
            assert!(matches!(refused, Err(OfflinePaymentError::NotOpen(s)) if s == state.as_str()), "{state:?}");
        }
        for kind in [InvoiceKind::Credit, InvoiceKind::Legacy] {
            let credit = invoice(InvoiceState::Open, kind, CollectionMethod::Manual, -500);
            assert!(matches!(amount_for(&credit, &paying(None)), Err(OfflinePaymentError::NotOpen(_))), "{kind:?}");
        }
        let automatic = invoice(InvoiceState::PastDue, InvoiceKind::Charge, CollectionMethod::Automatic, 1000);
        assert!(matches!(amount_for(&automatic, &paying(None)), Err(OfflinePaymentError::NotManual)));
    }

    #[test]
    fn checks_and_wires_are_bank_payments_and_keep_their_method() {
        assert_eq!(payment_kind("credit_card"), PaymentKind::CreditCard);
        for method in ["check", "wire_transfer", "money_order", "eft", "paypal", "other"] {
            assert_eq!(payment_kind(method), PaymentKind::BankAccount, "{method}");
        }
    }

    #[test]
    fn refusals_name_their_fields() {
        let refused = |e: OfflinePaymentError| match AppError::from(e) {
            AppError::Refused(fields) => fields.into_iter().map(|f| (f.field, f.symbol)).collect::<Vec<_>>(),
            other => panic!("not a refusal: {other:?}"),
        };
        assert_eq!(refused(OfflinePaymentError::NotManual), [("base".to_owned(), "invalid_collection_method")]);
        assert_eq!(refused(OfflinePaymentError::NotOpen("paid")), [("base".to_owned(), "invalid_transition")]);
        assert_eq!(
            refused(OfflinePaymentError::AboveBalance(5)),
            [("amount_in_cents".to_owned(), "less_than_or_equal_to")]
        );
        assert_eq!(
            refused(OfflinePaymentError::Invalid(vec![Problem::PaymentMethodBlank, Problem::DescriptionTooLong])),
            [("payment_method".to_owned(), "blank"), ("description".to_owned(), "too_long")]
        );
        assert_eq!(refused(OfflinePaymentError::OtherCurrency("USD".into())), [("currency".to_owned(), "invalid")]);
        assert!(matches!(
            AppError::from(OfflinePaymentError::NotFound("1001".into())),
            AppError::NotFound(m) if m == Missing::invoice("1001")
        ));
        assert!(matches!(AppError::from(OfflinePaymentError::Busy), AppError::Conflict(_)));
        assert!(matches!(AppError::from(OfflinePaymentError::AccountMissing), AppError::Internal(_)));
    }

    #[test]
    fn the_paid_event_reaches_the_subscriptions() {
        let payload = serde_json::json!({ "account_code": "a1", "settled_by": SETTLED_BY_OFFLINE_PAYMENT });
        assert!(crate::platform::events::reacts_to(crate::platform::events::INVOICE_PAID, &payload));
    }
}

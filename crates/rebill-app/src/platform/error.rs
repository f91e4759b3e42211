//! Typed errors: what went wrong while invoicing ([`BillingError`]) or while a subscription's
//! work ran (catching up, saving, invoicing its charges), and [`AppError`], the umbrella every
//! use case's error converts into, which classifies it for an adapter (not found, refused with
//! field errors, declined by the gateway, conflict, internal). Each use case's own error
//! converts into it beside its definition (`impl From<…> for AppError` in that module), so this
//! module names no use case.

use rebill_billing::invoice::InvoiceError;
use rebill_billing::lifecycle::LifecycleError;
use rebill_store::StoreError;
use rebill_store::invoices::Transaction;

/// Why a subscription's work (a change's invoicing, a scheduled job, an invoice outcome) failed.
#[derive(Debug, thiserror::Error)]
pub enum SubscriptionError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Billing(#[from] BillingError),
    #[error(transparent)]
    Lifecycle(#[from] LifecycleError),
    #[error(transparent)]
    Invoice(#[from] rebill_billing::invoice::InvoiceError),
    /// A stored subscription document (value, details, charge lines) that does not read or write.
    #[error("stored subscription document: {0}")]
    Document(#[from] serde_json::Error),
    #[error("the claim on the subscription was lost")]
    ClaimLost,
    #[error("the subscription's account is missing")]
    AccountMissing,
    #[error("unknown invoice origin {0}")]
    UnknownOrigin(String),
    #[error("time out of range")]
    TimeOutOfRange,
    #[error("subscription {0} stayed busy")]
    Busy(String),
}

/// Why invoicing or collecting failed.
#[derive(Debug, thiserror::Error)]
pub enum BillingError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The invoice computation refused: among others nothing to invoice (the API's 422
    /// `will_not_invoice`) or lines in several currencies.
    #[error(transparent)]
    Invoice(#[from] InvoiceError),
    #[error("{0}")]
    Invalid(String),
}

/// What an adapter needs to know of any use case's error to choose its answer. Every use-case
/// error converts into it (`From`); the use cases keep their own error types, which carry the
/// precise refusal, and an adapter that needs no more than the kind maps through this one.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// What the operation names does not exist for the site.
    #[error("{0}")]
    NotFound(Missing),
    /// The input was refused; nothing was written.
    #[error("refused: {}", describe(.0))]
    Refused(Vec<FieldRefusal>),
    /// The payment gateway declined (the transaction recorded, when one was made).
    #[error("declined by the payment gateway")]
    Declined(Option<Box<Transaction>>),
    /// The state of what the operation names does not allow it now (another change holds it,
    /// it is no longer open, …); a retry may succeed.
    #[error("conflict: {0}")]
    Conflict(String),
    /// Anything else: storage, documents, invariants. The source is kept for the log.
    #[error(transparent)]
    Internal(Box<dyn std::error::Error + Send + Sync>),
}

/// A thing that does not exist: its kind (`Account`), the key it was looked up by
/// (`account_code`) and the key's value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no {resource} with {key} {value}")]
pub struct Missing {
    pub resource: &'static str,
    pub key: &'static str,
    pub value: String,
}

impl Missing {
    pub fn account(code: &str) -> Self {
        Self { resource: "Account", key: "account_code", value: code.to_owned() }
    }

    pub fn plan(code: &str) -> Self {
        Self { resource: "Plan", key: "plan_code", value: code.to_owned() }
    }

    pub fn add_on(code: &str) -> Self {
        Self { resource: "AddOn", key: "add_on_code", value: code.to_owned() }
    }

    pub fn invoice(number: &str) -> Self {
        Self { resource: "Invoice", key: "invoice_number", value: number.to_owned() }
    }

    pub fn subscription(uuid: &str) -> Self {
        Self { resource: "Subscription", key: "uuid", value: uuid.to_owned() }
    }

    pub fn transaction(uuid: &str) -> Self {
        Self { resource: "Transaction", key: "uuid", value: uuid.to_owned() }
    }

    pub fn adjustment(uuid: &str) -> Self {
        Self { resource: "Adjustment", key: "uuid", value: uuid.to_owned() }
    }

    pub fn billing_info(code: &str) -> Self {
        Self { resource: "BillingInfo", key: "account_code", value: code.to_owned() }
    }
}

/// One refused input field: the field (as the use case names it, relative to its input), a
/// symbol (`taken`, `invalid`, `blank`, …) and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRefusal {
    pub field: String,
    pub symbol: &'static str,
    pub message: String,
}

impl FieldRefusal {
    pub fn new(field: &str, symbol: &'static str, message: impl Into<String>) -> Self {
        Self { field: field.to_owned(), symbol, message: message.into() }
    }
}

fn describe(refusals: &[FieldRefusal]) -> String {
    refusals.iter().map(|r| format!("{} {}", r.field, r.message)).collect::<Vec<_>>().join(", ")
}

impl AppError {
    pub(crate) fn internal(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Internal(Box::new(e))
    }

    pub(crate) fn refused(field: &str, symbol: &'static str, message: impl Into<String>) -> Self {
        Self::Refused(vec![FieldRefusal::new(field, symbol, message)])
    }
}

/// Whether `error`, or an error it was caused by, is the database being unavailable (a lost
/// connection, a failover under way: `rebill_store::unavailable_in`): the adapters answer it as
/// "retry", not as a failure of the operation.
pub fn database_unavailable(error: &(dyn std::error::Error + 'static)) -> bool {
    rebill_store::unavailable_in(error)
}

impl From<StoreError> for AppError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::DuplicateAccount(_) => Self::refused("account_code", "taken", "has already been taken"),
            StoreError::DuplicatePlan(_) => Self::refused("plan_code", "taken", "has already been taken"),
            StoreError::DuplicateAddOn(_) => Self::refused("add_on_code", "taken", "has already been taken"),
            e @ StoreError::Conflict(_) => Self::Conflict(e.to_string()),
            e => Self::internal(e),
        }
    }
}

impl From<SubscriptionError> for AppError {
    fn from(e: SubscriptionError) -> Self {
        match e {
            SubscriptionError::Store(e) => e.into(),
            SubscriptionError::Busy(_) | SubscriptionError::ClaimLost => Self::Conflict(e.to_string()),
            e => Self::internal(e),
        }
    }
}

impl From<BillingError> for AppError {
    fn from(e: BillingError) -> Self {
        match e {
            BillingError::Store(e) => e.into(),
            BillingError::Invoice(InvoiceError::NothingToInvoice) => {
                Self::refused("base", "will_not_invoice", e.to_string())
            }
            BillingError::Invoice(InvoiceError::MixedCurrencies(..)) | BillingError::Invalid(_) => {
                Self::refused("base", "invalid", e.to_string())
            }
            e @ BillingError::Invoice(_) => Self::internal(e),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::billing::adjustments::AdjustmentError;
    use crate::billing::queries::ReadError;
    use crate::billing::transactions::ChargeError;
    use crate::catalog::plans::CatalogError;
    use crate::collection::settlement::SettleError;
    use crate::customers::accounts::AccountError;
    use crate::customers::payment_methods::{BillingInfoError, PaymentMethodError, Refusal};
    use crate::operations::clock::ClockError;
    use crate::operations::scheduler::CatchUpError;
    use crate::platform::tokens::TokenError;
    use crate::subscriptions::lifecycle::{ChangeError, CreateError};
    use rebill_billing::card::{Field, FieldError, Problem};
    use rebill_billing::states::TransactionStatus;
    use rebill_store::billing_info::{BillingFields, PaymentKind};
    use rebill_store::invoices::{AccountSnapshot, NewTransaction, TransactionResult};

    use super::*;

    fn kind(e: &AppError) -> &'static str {
        match e {
            AppError::NotFound(_) => "not found",
            AppError::Refused(_) => "refused",
            AppError::Declined(_) => "declined",
            AppError::Conflict(_) => "conflict",
            AppError::Internal(_) => "internal",
        }
    }

    /// A declined transaction, for tests of what is made of transactions.
    pub(crate) fn declined() -> Box<Transaction> {
        Box::new(Transaction {
            id: 7,
            uuid: "t7".into(),
            site_id: 1,
            invoice_number: None,
            new: NewTransaction {
                idempotency_key: "k".into(),
                account_id: 1,
                invoice_id: None,
                subscription_uuid: None,
                action: "verify".into(),
                amount: 0,
                tax: 0,
                currency: "USD".into(),
                kind: PaymentKind::CreditCard,
                payment_method: "credit_card".into(),
                source: "billing_info".into(),
                origin: "api_verify_card".into(),
                recurring: false,
                test: true,
                gateway_type: "test".into(),
                description: None,
                original_transaction_id: None,
                payment_reference: None,
                account: AccountSnapshot::default(),
                billing: BillingFields::default(),
            },
            result: TransactionResult {
                status: TransactionStatus::Declined,
                reference: None,
                approval_code: None,
                message: None,
                fraud_review: false,
                failure: None,
                cvv: None,
                avs: None,
                collected_at: None,
            },
            original_transaction_uuid: None,
            refunded: 0,
            created_at: 0,
            updated_at: 0,
        })
    }

    #[test]
    fn missing_things_are_not_found_with_their_key() {
        let e = AppError::from(AccountError::NotFound("a1".to_owned()));
        assert!(matches!(&e, AppError::NotFound(m) if *m == Missing::account("a1")));
        let e = AppError::from(ReadError::NotFound(Missing::invoice("1001")));
        assert!(matches!(&e, AppError::NotFound(m) if m.resource == "Invoice" && m.key == "invoice_number"));
        let e = AppError::from(CatalogError::AddOnNotFound("extra".to_owned()));
        assert!(matches!(&e, AppError::NotFound(m) if *m == Missing::add_on("extra")));
        let e = AppError::from(AdjustmentError::NotFound("u1".to_owned()));
        assert!(matches!(&e, AppError::NotFound(m) if m.to_string() == "no Adjustment with uuid u1"));
        assert_eq!(kind(&ChangeError::NotFound("s1".to_owned()).into()), "not found");
        assert_eq!(kind(&BillingInfoError::AccountNotFound("a1".to_owned()).into()), "not found");
        assert_eq!(kind(&CreateError::AccountNotFound("a1".to_owned()).into()), "not found");
    }

    #[test]
    fn refusals_name_their_fields() {
        let refused = |e: AppError| match e {
            AppError::Refused(fields) => fields,
            other => panic!("not a refusal: {other:?}"),
        };
        assert_eq!(
            refused(CatalogError::PlanTaken("gold".to_owned()).into()),
            vec![FieldRefusal::new("plan_code", "taken", "has already been taken")]
        );
        assert_eq!(refused(StoreError::DuplicateAccount("a1".to_owned()).into())[0].field, "account_code");
        assert_eq!(refused(AccountError::Taken.into())[0].symbol, "taken");
        assert_eq!(refused(AdjustmentError::InvalidQuantity.into())[0].field, "quantity");
        let fields = refused(
            TokenError::Invalid {
                errors: vec![FieldError { field: Field::Cvv, problem: Problem::Blank }],
                country: true,
            }
            .into(),
        );
        let names: Vec<&str> = fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(names, ["cvv", "country"]);
        assert_eq!(refused(TokenError::InvalidRoutingNumber.into())[0].field, "routing_number");
        let fields = refused(
            PaymentMethodError::Fields(vec![FieldError { field: Field::Number, problem: Problem::Invalid }]).into(),
        );
        assert_eq!((fields[0].field.as_str(), fields[0].symbol), ("number", "invalid"));
        assert_eq!(kind(&ClockError::Backwards(chrono::DateTime::UNIX_EPOCH).into()), "refused");
        assert_eq!(kind(&BillingError::Invoice(InvoiceError::NothingToInvoice).into()), "refused");
    }

    #[test]
    fn declines_keep_their_transaction() {
        let e = AppError::from(AccountError::BillingInfo(Refusal::Declined { transaction: declined(), saved: false }));
        assert!(matches!(&e, AppError::Declined(Some(t)) if t.uuid == "t7"));
        let e = AppError::from(SettleError::Declined(declined()));
        assert!(matches!(&e, AppError::Declined(Some(_))));
        assert!(matches!(AppError::from(CreateError::FirstPaymentDeclined(None)), AppError::Declined(None)));
    }

    #[test]
    fn busy_and_closed_states_are_conflicts() {
        assert_eq!(kind(&ChangeError::Busy.into()), "conflict");
        assert_eq!(kind(&CreateError::Busy.into()), "conflict");
        assert_eq!(kind(&SettleError::NotOpen.into()), "conflict");
        assert_eq!(kind(&AdjustmentError::Invoiced.into()), "conflict");
        assert_eq!(kind(&SubscriptionError::Busy("s1".to_owned()).into()), "conflict");
        assert_eq!(kind(&CatchUpError::StillRunning(3, std::time::Duration::from_secs(1)).into()), "conflict");
        assert_eq!(kind(&StoreError::Conflict("taken by another invoice".to_owned()).into()), "conflict");
    }

    #[test]
    fn everything_else_is_internal_with_its_source() {
        let e = AppError::from(CatalogError::Store(StoreError::Invalid("broken row".to_owned())));
        let AppError::Internal(source) = &e else { panic!("not internal: {e:?}") };
        assert_eq!(source.to_string(), "invalid value: broken row");
        assert!(source.downcast_ref::<StoreError>().is_some(), "the source is kept as it was");
        assert_eq!(e.to_string(), "invalid value: broken row");
        assert_eq!(kind(&SubscriptionError::AccountMissing.into()), "internal");
        assert_eq!(kind(&ChargeError::NoTransaction.into()), "internal");
        assert_eq!(kind(&ReadError::Store(StoreError::Invalid("x".to_owned())).into()), "internal");
    }
}

//! Typed errors of the business modules that are not an endpoint's refusal: what went wrong
//! while a subscription's work ran (catching up, saving, invoicing its charges).

use rebill_billing::lifecycle::LifecycleError;
use rebill_store::StoreError;

use crate::invoicing::BillingError;

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

//! Checking the security code (CVV) of an account's stored card (`verify_cvv`, 2.10; decisions
//! in `docs/shipping-addresses.md`, "verify_cvv"):
//!
//! - the value must be 3 or 4 digits (else `Malformed`, and nothing is counted or recorded);
//! - only a stored card can be checked: no billing info is `NoBillingInfo`, a bank account
//!   `NotACard`; a site whose gateway cannot re-check a stored card's code (Stripe) is
//!   `Unsupported`, naming the gateway (nothing counted or recorded);
//! - a card is checked at most [`CHECKS_PER_WINDOW`] times in a rolling [`WINDOW_SECONDS`] on
//!   the site clock, matched or not; one more is `Locked` (nothing recorded);
//! - each check is a `verify` transaction of 0 (origin `api_verify_card`), recorded before the
//!   gateway's [`Gateway::check_cvv`](rebill_billing::gateway::Gateway::check_cvv) is called and
//!   completed with its answer; a mismatch is `Mismatch` with that transaction.
//!
//! The value is passed to the gateway and dropped: it is never stored or logged.

use rebill_billing::gateway::{CvvRequest, Outcome};
use rebill_store::StoreError;
use rebill_store::billing_info::{BillingInfo, PaymentKind};
use rebill_store::invoices::{NewTransaction, Transaction};

use crate::platform::transaction_records::{result_of, snapshot, transaction_event};
use crate::{Context, Services};

/// Checks of one card in [`WINDOW_SECONDS`].
pub const CHECKS_PER_WINDOW: i64 = 3;
/// The rolling window of the limit: 24 hours.
pub const WINDOW_SECONDS: i64 = 24 * 60 * 60;

/// Why a security code was not confirmed.
#[derive(Debug, thiserror::Error)]
pub enum CvvError {
    #[error("no account with code {0}")]
    AccountNotFound(String),
    #[error("the account has no billing info")]
    NoBillingInfo,
    #[error("only a credit card's security code can be checked")]
    NotACard,
    #[error("verification_value must be three or four digits")]
    Malformed,
    #[error("This credit card has too many cvv check attempts.")]
    Locked,
    /// The site's gateway cannot check the security code of a card it stored (named).
    #[error("the {0} gateway cannot check the security code of a stored card")]
    Unsupported(&'static str),
    /// The code did not match (or the gateway declined the check): the recorded transaction.
    #[error("the security code did not match")]
    Mismatch(Box<Transaction>),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What names a stored card for the limit: its gateway reference, else its visible parts.
fn card_key(info: &BillingInfo) -> String {
    match &info.gateway_reference {
        Some(reference) => format!("ref:{reference}"),
        None => {
            let f = &info.fields;
            format!(
                "card:{}:{}:{}:{}",
                f.first_six.as_deref().unwrap_or_default(),
                f.last_four.as_deref().unwrap_or_default(),
                f.month.unwrap_or_default(),
                f.year.unwrap_or_default()
            )
        }
    }
}

/// Checks `value` against the stored card of the account `code`; answers the billing info.
pub async fn verify_cvv(services: &Services, ctx: &Context, code: &str, value: &str) -> Result<BillingInfo, CvvError> {
    let account =
        services.store.account(ctx.site.id, code).await?.ok_or_else(|| CvvError::AccountNotFound(code.to_owned()))?;
    let info = services.store.billing_info(account.id).await?.ok_or(CvvError::NoBillingInfo)?;
    if info.kind != PaymentKind::CreditCard {
        return Err(CvvError::NotACard);
    }
    let value = value.trim();
    if !rebill_billing::card::is_cvv_shaped(value) {
        return Err(CvvError::Malformed);
    }
    let gateway = services.gateway(ctx.site.id).await?;
    if !gateway.checks_stored_cvv() {
        return Err(CvvError::Unsupported(gateway.kind()));
    }
    let key = card_key(&info);
    if !services
        .store
        .count_cvv_check(ctx.site.id, account.id, &key, ctx.now, WINDOW_SECONDS, CHECKS_PER_WINDOW)
        .await?
    {
        return Err(CvvError::Locked);
    }
    let check = NewTransaction {
        idempotency_key: format!("verify_cvv:{}", crate::platform::subscription_documents::new_uuid()),
        account_id: account.id,
        invoice_id: None,
        subscription_uuid: None,
        action: "verify".into(),
        amount: 0,
        tax: 0,
        currency: crate::customers::payment_methods::VERIFY_CURRENCY.to_owned(),
        kind: info.kind,
        payment_method: "credit_card".into(),
        source: "billing_info".into(),
        origin: "api_verify_card".into(),
        recurring: false,
        test: gateway.is_test(),
        gateway_type: gateway.kind().to_owned(),
        description: None,
        original_transaction_id: None,
        payment_reference: None,
        account: snapshot(&account),
        billing: info.fields.clone(),
    };
    let (begun, _) = services.store.begin_transaction(ctx.site.id, &check, ctx.now).await?;
    let request = CvvRequest {
        reference: info.gateway_reference.as_deref().unwrap_or_default(),
        verification_value: value,
        idempotency_key: Some(&begun.uuid),
    };
    // A check moves no money: an answer that does not come is a decline.
    let outcome = services.bounded(gateway.check_cvv(&request)).await.or_declined();
    let result = result_of(&outcome, ctx.now);
    let event = transaction_event(services, &begun, &result, ctx.now);
    let recorded = services.store.complete_transaction(begun.id, &result, ctx.now, &[event]).await?;
    match outcome {
        Outcome::Approved(_) => Ok(info),
        Outcome::Declined(_) | Outcome::Pending(_) => Err(CvvError::Mismatch(Box::new(recorded))),
    }
}

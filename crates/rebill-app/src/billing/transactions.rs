//! One-off transactions: an amount charged to an account (created when the site has none with
//! the code) at once. The amount is invoiced as a one-time charge and collected once
//! ([`Collect::Once`]): approved, the invoice is paid; declined, it fails (the declined
//! transaction and its `failed` invoice are kept). A requested billing info (token or card
//! fields) is charged and, when approved (or declined with `declined_saveable`), becomes the
//! account's billing info — when the outcome is not known at once, when the settle job learns
//! it; without one the stored billing info is charged.
//!
//! The account's open credit pays the invoice first, as it pays every new charge invoice; what
//! it leaves is charged. A charge the credit pays wholly makes no transaction
//! ([`Charged::ByCredit`]): the real service answered such a request `204 No Content` (the
//! released clients then hold a transaction without a uuid), and so does rebill's adapter.

use rebill_billing::invoice::InvoiceOrigin;
use rebill_billing::states::TransactionStatus;
use rebill_store::StoreError;
use rebill_store::accounts::{Account, AccountFields};
use rebill_store::invoices::{Invoice, InvoiceTerms, Transaction};

use crate::billing::adjustments::{self, LineOrigin, NewCharge};
use crate::billing::invoicing::{self, Collect, Draft, PaymentSource};
use crate::customers::payment_methods::{self, BillingRequest, PaymentMethodError};
use crate::platform::error::BillingError;
use crate::platform::events;
use crate::{Context, Services};

/// A one-off charge, checked by the caller (amount 1 cent to 10^12, ISO currency, a code).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OneOffCharge {
    pub account_code: String,
    /// The fields of the account when it is created here.
    pub account_fields: AccountFields,
    pub amount_in_cents: i64,
    pub currency: String,
    pub description: String,
    pub accounting_code: Option<String>,
    pub product_code: Option<String>,
    pub tax_exempt: Option<bool>,
    pub tax_code: Option<String>,
    /// The payment method to charge (the account's stored one when `None`).
    pub billing_info: Option<BillingRequest>,
}

/// Why no transaction was made.
#[derive(Debug, thiserror::Error)]
pub enum ChargeError {
    /// Neither a requested nor a stored payment method.
    #[error("the account has no billing info")]
    BillingInfoRequired,
    #[error(transparent)]
    PaymentMethod(#[from] PaymentMethodError),
    #[error(transparent)]
    Billing(#[from] BillingError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("an account vanished while it was created")]
    AccountVanished,
    #[error("a one-off charge made no transaction and its invoice is not paid")]
    NoTransaction,
}

/// What a one-off charge did.
#[derive(Debug, Clone)]
pub enum Charged {
    /// The transaction, approved or declined ([`Transaction::status`]).
    Transaction(Box<Transaction>),
    /// The account's credit paid the whole charge: its invoice (paid); no transaction was made.
    ByCredit(Box<Invoice>),
}

/// Charges `charge` now, after the account's credit paid what it can of it.
pub async fn charge_once(services: &Services, ctx: &Context, charge: &OneOffCharge) -> Result<Charged, ChargeError> {
    let account = account_for(services, ctx, charge).await?;
    let requested = match &charge.billing_info {
        Some(info) => payment_methods::requested_method(services, ctx, &account, info).await?,
        None => None,
    };
    let source = match &requested {
        Some(m) => Some(PaymentSource::of_requested(m)),
        None => PaymentSource::of_account(services, &account).await?,
    };
    let source = source.ok_or(ChargeError::BillingInfoRequired)?;
    let one_off = NewCharge {
        unit_amount_in_cents: charge.amount_in_cents,
        quantity: None,
        currency: charge.currency.clone(),
        description: Some(charge.description.clone()),
        accounting_code: charge.accounting_code.clone(),
        product_code: charge.product_code.clone(),
        tax_exempt: charge.tax_exempt,
        tax_code: charge.tax_code.clone(),
        credit_reason_code: None,
        start_date: None,
        end_date: None,
    };
    let line = adjustments::line(account.id, &one_off, LineOrigin::ChargedAtOnce, ctx.now);
    let draft = Draft {
        lines: Vec::new(),
        extra: vec![line],
        pending: Vec::new(),
        origin: InvoiceOrigin::Purchase,
        terms: InvoiceTerms::default(),
    };
    let invoiced =
        invoicing::invoice(services, &ctx.site, &account, draft, ctx.now, Collect::Once, Some(source)).await?;
    let transaction = match invoiced.transaction {
        Some(t) => t,
        None if invoiced.is_paid() => return Ok(Charged::ByCredit(Box::new(invoiced.invoice))),
        None => return Err(ChargeError::NoTransaction),
    };
    // A charge whose outcome is not known yet saves nothing now: the settle job saves the
    // requested method when the late answer calls for it.
    let approved = transaction.status() == TransactionStatus::Success;
    let keep = approved || transaction.result.failure.as_ref().is_some_and(|f| f.error_code == "declined_saveable");
    if let Some(method) = requested.as_ref().filter(|_| keep) {
        payment_methods::save_requested(services, ctx, &account, method).await?;
    }
    Ok(Charged::Transaction(Box::new(transaction)))
}

/// The account of the charge, created when the site has none with the code (a concurrent
/// request that created it first wins: its account is used).
async fn account_for(services: &Services, ctx: &Context, charge: &OneOffCharge) -> Result<Account, ChargeError> {
    let code = &charge.account_code;
    if let Some(account) = services.store.account(ctx.site.id, code).await? {
        return Ok(account);
    }
    let event = events::account(services, events::ACCOUNT_CREATED, ctx.now, code);
    match services.store.create_account(ctx.site.id, code, &charge.account_fields, ctx.now, &[event]).await {
        Ok(account) => Ok(account),
        Err(StoreError::DuplicateAccount(_)) => {
            services.store.account(ctx.site.id, code).await?.ok_or(ChargeError::AccountVanished)
        }
        Err(e) => Err(e.into()),
    }
}

impl From<ChargeError> for crate::platform::error::AppError {
    fn from(e: ChargeError) -> Self {
        match e {
            ChargeError::BillingInfoRequired => Self::refused("billing_info", "blank", e.to_string()),
            ChargeError::PaymentMethod(e) => e.into(),
            ChargeError::Billing(e) => e.into(),
            ChargeError::Store(e) => e.into(),
            e @ (ChargeError::AccountVanished | ChargeError::NoTransaction) => Self::internal(e),
        }
    }
}

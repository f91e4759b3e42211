//! Accounts: create (with a nested billing info, all or nothing), update (the billing info
//! first, the account's own fields only once it was accepted), close, reopen and the balance.

use rebill_billing::balance::{AccountBalance, CurrencyInvoices, account_balance};
use rebill_store::StoreError;
use rebill_store::accounts::{Account, AccountFields, AccountWithActivity};

use rebill_store::shipping_addresses::ShippingFields;

use crate::customers::payment_methods::{self, BillingRequest, Refusal};
use crate::customers::shipping_addresses::{self, ShippingError};
use crate::platform::events;
use crate::{Context, Services};

/// Why an account operation changed nothing (or, for [`AccountError::BillingInfo`] with a
/// saved decline, kept the account but not its payment method).
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    /// The site has no account with this code.
    #[error("no account with code {0}")]
    NotFound(String),
    /// The site already has an account with this code.
    #[error("the account code is taken")]
    Taken,
    /// The nested billing info was refused (or its verification declined).
    #[error("the billing info was refused: {0:?}")]
    BillingInfo(Refusal),
    /// A nested shipping address was refused (nothing was kept).
    #[error(transparent)]
    ShippingAddress(ShippingError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Creates an account with `fields` and, when given, its billing info. The billing info is
/// checked before anything is written; when its verification is declined the account is removed
/// again (so a retry of the same create works), except with `declined_saveable`, whose billing
/// info needs the account.
pub async fn create(
    services: &Services,
    ctx: &Context,
    code: &str,
    fields: &AccountFields,
    billing_info: Option<&BillingRequest>,
) -> Result<Account, AccountError> {
    create_with_shipping(services, ctx, code, fields, billing_info, &[]).await
}

/// [`create`] with the account's first shipping addresses, all or nothing with the account:
/// they are checked before anything is written, and a refused billing info removes them with
/// the account.
pub async fn create_with_shipping(
    services: &Services,
    ctx: &Context,
    code: &str,
    fields: &AccountFields,
    billing_info: Option<&BillingRequest>,
    shipping: &[ShippingFields],
) -> Result<Account, AccountError> {
    shipping_addresses::check_new(&[], shipping).map_err(AccountError::ShippingAddress)?;
    let prepared = match billing_info {
        Some(info) => {
            if services.store.account(ctx.site.id, code).await?.is_some() {
                return Err(AccountError::Taken);
            }
            let prepared = payment_methods::prepare(services, ctx, None, info)
                .await
                .map_err(|e| AccountError::BillingInfo(Refusal::Failed(e)))?;
            Some(prepared)
        }
        None => None,
    };
    let event = events::account(services, events::ACCOUNT_CREATED, ctx.now, code);
    let created = match services.store.create_account(ctx.site.id, code, fields, ctx.now, &[event]).await {
        Ok(created) => created,
        Err(StoreError::DuplicateAccount(_)) => return Err(AccountError::Taken),
        Err(e) => return Err(e.into()),
    };
    if !shipping.is_empty()
        && let Err(e) = shipping_addresses::add(services, ctx, &created, shipping).await
    {
        if let Err(e) = services.store.discard_new_account(ctx.site.id, created.id).await {
            tracing::error!(error = %e, "removing an account whose shipping addresses were refused");
        }
        return Err(AccountError::ShippingAddress(e));
    }
    if let Some(prepared) = prepared {
        match payment_methods::commit(services, ctx, &created, prepared).await {
            Ok(_) => {}
            Err(refusal @ Refusal::Declined { saved: true, .. }) => return Err(AccountError::BillingInfo(refusal)),
            Err(refusal) => {
                if let Err(e) = services.store.discard_new_account(ctx.site.id, created.id).await {
                    tracing::error!(error = %e, "removing an account whose billing info was refused");
                }
                return Err(AccountError::BillingInfo(refusal));
            }
        }
    }
    Ok(created)
}

/// Updates the account `code`: its billing info first when given (verified and saved, or the
/// whole update refused), then the fields sent.
pub async fn update(
    services: &Services,
    ctx: &Context,
    code: &str,
    fields: &AccountFields,
    billing_info: Option<&BillingRequest>,
) -> Result<Account, AccountError> {
    if let Some(info) = billing_info {
        let existing = find(services, ctx, code).await?;
        payment_methods::apply(services, ctx, &existing, info).await.map_err(AccountError::BillingInfo)?;
    }
    let event = events::account(services, events::ACCOUNT_UPDATED, ctx.now, code);
    services
        .store
        .update_account(ctx.site.id, code, fields, ctx.now, &[event])
        .await?
        .ok_or_else(|| AccountError::NotFound(code.to_owned()))
}

/// The account `code` of the site.
pub async fn find(services: &Services, ctx: &Context, code: &str) -> Result<Account, AccountError> {
    services.store.account(ctx.site.id, code).await?.ok_or_else(|| AccountError::NotFound(code.to_owned()))
}

/// The account `code` of the site with its activity (what its subscriptions and invoices say
/// about it), read together.
pub async fn find_with_activity(
    services: &Services,
    ctx: &Context,
    code: &str,
) -> Result<AccountWithActivity, AccountError> {
    services
        .store
        .account_with_activity(ctx.site.id, code)
        .await?
        .ok_or_else(|| AccountError::NotFound(code.to_owned()))
}

/// Closes the account `code` (closing a closed account changes nothing).
pub async fn close(services: &Services, ctx: &Context, code: &str) -> Result<Account, AccountError> {
    let event = events::account(services, events::ACCOUNT_CLOSED, ctx.now, code);
    services
        .store
        .close_account(ctx.site.id, code, ctx.now, &[event])
        .await?
        .ok_or_else(|| AccountError::NotFound(code.to_owned()))
}

/// Reopens the account `code` (reopening an active account changes nothing).
pub async fn reopen(services: &Services, ctx: &Context, code: &str) -> Result<Account, AccountError> {
    let event = events::account(services, events::ACCOUNT_REOPENED, ctx.now, code);
    services
        .store
        .reopen_account(ctx.site.id, code, ctx.now, &[event])
        .await?
        .ok_or_else(|| AccountError::NotFound(code.to_owned()))
}

/// What the account's open invoices still owe in each of the site's currencies and whether one
/// is past due (`rebill_billing::balance`); a closed account has a balance too.
pub async fn balance(
    services: &Services,
    ctx: &Context,
    code: &str,
) -> Result<(Account, AccountBalance), AccountError> {
    let account = find(services, ctx, code).await?;
    let currencies = services.store.site_currencies(ctx.site.id).await?;
    let invoices: Vec<CurrencyInvoices> = services
        .store
        .account_invoice_balances(account.id)
        .await?
        .into_iter()
        .map(|i| CurrencyInvoices { currency: i.currency, open_in_cents: i.open, past_due: i.past_due })
        .collect();
    let balance = account_balance(currencies.iter().map(String::as_str), &invoices);
    Ok((account, balance))
}

impl From<AccountError> for crate::platform::error::AppError {
    fn from(e: AccountError) -> Self {
        match e {
            AccountError::NotFound(code) => Self::NotFound(crate::platform::error::Missing::account(&code)),
            AccountError::Taken => Self::refused("account_code", "taken", "has already been taken"),
            AccountError::BillingInfo(refusal) => refusal.into(),
            AccountError::ShippingAddress(e) => match Self::from(e) {
                Self::Refused(fields) => Self::Refused(
                    fields
                        .into_iter()
                        .map(|f| crate::platform::error::FieldRefusal {
                            field: format!("shipping_addresses.{}", f.field),
                            ..f
                        })
                        .collect(),
                ),
                other => other,
            },
            AccountError::Store(e) => e.into(),
        }
    }
}

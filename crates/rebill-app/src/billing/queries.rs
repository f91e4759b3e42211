//! Reading what the site has (one account is `accounts::find`): accounts with their activity,
//! invoices with their lines, transactions and credit payments, subscriptions, transactions and
//! credit payments, one at a time or a page at a time. List pages take the store's filters and
//! page requests (plain domain values) and answer its pages.

use std::collections::HashSet;

use rebill_store::accounts::{AccountFilter, AccountWithActivity};
use rebill_store::credits::{CreditPayment, CreditPaymentFilter};
use rebill_store::invoices::{Adjustment, Invoice, InvoiceFilter, Transaction, TransactionFilter};
use rebill_store::subscriptions::{SubscriptionFilter, SubscriptionRecord};
use rebill_store::{Page, PageRequest, StoreError};

use crate::platform::error::Missing;
use crate::{Context, Services};

/// Why a read answered nothing.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The site has nothing with this key.
    #[error(transparent)]
    NotFound(#[from] Missing),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A page of the site's accounts, each with its activity (subscriptions past due, paused, …).
pub async fn accounts(
    services: &Services,
    ctx: &Context,
    filter: &AccountFilter,
    page: &PageRequest,
) -> Result<Page<AccountWithActivity>, ReadError> {
    Ok(services.store.list_accounts(ctx.site.id, filter, page).await?)
}

/// A page of the site's invoices.
pub async fn invoices(
    services: &Services,
    ctx: &Context,
    filter: &InvoiceFilter,
    page: &PageRequest,
) -> Result<Page<Invoice>, ReadError> {
    Ok(services.store.list_invoices(ctx.site.id, filter, page).await?)
}

/// The invoice with the number `number` (as given: a number that does not parse names no
/// invoice).
pub async fn invoice(services: &Services, ctx: &Context, number: &str) -> Result<Invoice, ReadError> {
    let missing = || ReadError::NotFound(Missing::invoice(number));
    let n = number.parse::<i64>().map_err(|_| missing())?;
    crate::billing::invoicing::find(services, ctx, n).await?.ok_or_else(missing)
}

/// An invoice's line items, transactions and credit payments.
#[derive(Debug, Clone)]
pub struct InvoiceDetails {
    pub lines: Vec<Adjustment>,
    pub transactions: Vec<Transaction>,
    /// The credit payments applied to it or taken from it, oldest first.
    pub credit_payments: Vec<CreditPayment>,
}

/// The line items, transactions and credit payments of `invoice`.
pub async fn invoice_details(services: &Services, invoice: &Invoice) -> Result<InvoiceDetails, ReadError> {
    let lines = services.store.invoice_lines(invoice.id).await?;
    let transactions = services.store.invoice_transactions(invoice.id).await?;
    let credit_payments = services.store.invoice_credit_payments(invoice.id).await?;
    Ok(InvoiceDetails { lines, transactions, credit_payments })
}

/// Which of the invoices holding `lines` are paid charge invoices (whose charges can be
/// refunded), by invoice id.
pub async fn paid_charge_invoices(services: &Services, lines: &[Adjustment]) -> Result<HashSet<i64>, ReadError> {
    let mut ids: Vec<i64> = lines.iter().filter_map(|a| a.invoice_id).collect();
    ids.sort_unstable();
    ids.dedup();
    Ok(services.store.paid_charge_invoices(&ids).await?.into_iter().collect())
}

/// A page of the site's subscriptions.
pub async fn subscriptions(
    services: &Services,
    ctx: &Context,
    filter: &SubscriptionFilter,
    page: &PageRequest,
) -> Result<Page<SubscriptionRecord>, ReadError> {
    Ok(services.store.list_subscriptions(ctx.site.id, filter, page).await?)
}

/// The subscription `uuid` of the site.
pub async fn subscription(services: &Services, ctx: &Context, uuid: &str) -> Result<SubscriptionRecord, ReadError> {
    services.store.subscription(ctx.site.id, uuid).await?.ok_or_else(|| Missing::subscription(uuid).into())
}

/// A page of the site's transactions.
pub async fn transactions(
    services: &Services,
    ctx: &Context,
    filter: &TransactionFilter,
    page: &PageRequest,
) -> Result<Page<Transaction>, ReadError> {
    Ok(services.store.list_transactions(ctx.site.id, filter, page).await?)
}

/// The transaction `uuid` of the site.
pub async fn transaction(services: &Services, ctx: &Context, uuid: &str) -> Result<Transaction, ReadError> {
    services.store.transaction(ctx.site.id, uuid).await?.ok_or_else(|| Missing::transaction(uuid).into())
}

/// A page of the site's credit payments (an account's with `filter.account_id`).
pub async fn credit_payments(
    services: &Services,
    ctx: &Context,
    filter: &CreditPaymentFilter,
    page: &PageRequest,
) -> Result<Page<CreditPayment>, ReadError> {
    Ok(services.store.list_credit_payments(ctx.site.id, filter, page).await?)
}

/// The credit payment `uuid` of the site.
pub async fn credit_payment(services: &Services, ctx: &Context, uuid: &str) -> Result<CreditPayment, ReadError> {
    let missing = || Missing { resource: "CreditPayment", key: "uuid", value: uuid.to_owned() };
    services.store.credit_payment(ctx.site.id, uuid).await?.ok_or_else(|| missing().into())
}

impl From<ReadError> for crate::platform::error::AppError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::NotFound(missing) => Self::NotFound(missing),
            ReadError::Store(e) => e.into(),
        }
    }
}

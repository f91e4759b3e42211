//! One-off charges and credits of an account (adjustments): created pending, invoiced with the
//! account's next invoice of pending adjustments; a pending one can be deleted, an invoiced one
//! stays. Also reading them, one at a time or a page at a time.

use rebill_store::accounts::Account;
use rebill_store::invoices::{Adjustment, AdjustmentDeletion, AdjustmentFilter, AdjustmentKind, NewAdjustment};
use rebill_store::{Page, PageRequest, StoreError};

use crate::customers::payment_methods::valid_currency;
use crate::customers::shipping_addresses::{self, ShippingChoice, ShippingError};
use crate::{Context, Services};

/// Most units of one adjustment.
pub const MAX_QUANTITY: i64 = 1_000_000;

/// Largest amount of one adjustment, in cents either way.
pub const MAX_TOTAL_IN_CENTS: u64 = 1_000_000_000_000;

/// A one-off charge (a positive unit amount) or credit (a negative one) of an account.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewCharge {
    pub unit_amount_in_cents: i64,
    /// 1 when `None`.
    pub quantity: Option<i64>,
    /// An ISO 4217 code, any case.
    pub currency: String,
    pub description: Option<String>,
    pub accounting_code: Option<String>,
    pub product_code: Option<String>,
    pub tax_exempt: Option<bool>,
    pub tax_code: Option<String>,
    pub credit_reason_code: Option<String>,
    /// Epoch seconds; "now" when `None`.
    pub start_date: Option<i64>,
    pub end_date: Option<i64>,
}

/// What a one-off line stands for, which names its origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineOrigin {
    /// Added to the account for its next invoice, or made with a purchase's: a charge (`debit`)
    /// or, below zero, a `credit` (a gift card's redemption is one).
    Adjustment,
    /// Charged at once on its own invoice (`one_time`): a one-off transaction, a gift card bought.
    ChargedAtOnce,
}

/// The one shape of a one-off line, whoever makes it ([`create`], a purchase's one-off charges,
/// a one-off transaction, a gift card bought or redeemed): a charge or, below zero, a credit of
/// `charge`'s unit amount times its quantity (1 when `None`), undiscounted and untaxed until an
/// invoice takes it, starting at its start date or `now`. The amounts are the caller's to check.
pub fn line(account_id: i64, charge: &NewCharge, origin: LineOrigin, now: i64) -> NewAdjustment {
    let quantity = charge.quantity.unwrap_or(1);
    let credit = charge.unit_amount_in_cents < 0;
    let origin = match origin {
        LineOrigin::ChargedAtOnce => "one_time",
        LineOrigin::Adjustment if credit => "credit",
        LineOrigin::Adjustment => "debit",
    };
    NewAdjustment {
        account_id,
        subscription_uuid: None,
        kind: if credit { AdjustmentKind::Credit } else { AdjustmentKind::Charge },
        origin: origin.to_owned(),
        description: charge.description.clone(),
        accounting_code: charge.accounting_code.clone(),
        product_code: charge.product_code.clone(),
        currency: charge.currency.clone(),
        unit_amount: charge.unit_amount_in_cents,
        quantity,
        discount: 0,
        tax: 0,
        total: charge.unit_amount_in_cents.saturating_mul(quantity),
        tax_exempt: charge.tax_exempt,
        tax_code: charge.tax_code.clone(),
        credit_reason_code: charge.credit_reason_code.clone(),
        start_date: Some(charge.start_date.unwrap_or(now)),
        end_date: charge.end_date,
        engine: None,
        original_adjustment_id: None,
        reversed_quantity: 0,
    }
}

/// Why an adjustment was not created, found or deleted.
#[derive(Debug, thiserror::Error)]
pub enum AdjustmentError {
    #[error("no adjustment with uuid {0}")]
    NotFound(String),
    /// Only a pending adjustment can be deleted.
    #[error("the adjustment is invoiced")]
    Invoiced,
    #[error("the currency is not a 3-letter ISO 4217 currency code")]
    InvalidCurrency,
    /// The quantity is not from 1 to [`MAX_QUANTITY`].
    #[error("the quantity must be from 1 to {MAX_QUANTITY}")]
    InvalidQuantity,
    /// The total is beyond [`MAX_TOTAL_IN_CENTS`] either way.
    #[error("the amount is too large")]
    TooLarge,
    /// The shipping address named was refused.
    #[error(transparent)]
    ShippingAddress(ShippingError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Adds a pending charge or credit to `account`.
pub async fn create(
    services: &Services,
    ctx: &Context,
    account: &Account,
    charge: &NewCharge,
) -> Result<Adjustment, AdjustmentError> {
    create_shipped(services, ctx, account, charge, None).await
}

/// [`create`] shipped to the address `shipping` names (2.11: an address of the account, or a
/// new one added to it; the amounts are checked first, and a new address goes again when the
/// adjustment is not written).
pub async fn create_shipped(
    services: &Services,
    ctx: &Context,
    account: &Account,
    charge: &NewCharge,
    shipping: Option<&ShippingChoice>,
) -> Result<Adjustment, AdjustmentError> {
    let currency = charge.currency.to_ascii_uppercase();
    if !valid_currency(&currency) {
        return Err(AdjustmentError::InvalidCurrency);
    }
    let quantity = charge.quantity.unwrap_or(1);
    if !(1..=MAX_QUANTITY).contains(&quantity) {
        return Err(AdjustmentError::InvalidQuantity);
    }
    // Checked here, so the line's own product cannot saturate.
    charge
        .unit_amount_in_cents
        .checked_mul(quantity)
        .filter(|t| t.unsigned_abs() <= MAX_TOTAL_IN_CENTS)
        .ok_or(AdjustmentError::TooLarge)?;
    let new = line(
        account.id,
        &NewCharge { currency, quantity: Some(quantity), ..charge.clone() },
        LineOrigin::Adjustment,
        ctx.now,
    );
    let Some(choice) = shipping else { return Ok(services.store.create_adjustment(ctx.site.id, &new, ctx.now).await?) };
    let resolved =
        shipping_addresses::resolve(services, ctx, account, choice).await.map_err(AdjustmentError::ShippingAddress)?;
    match services.store.create_shipped_adjustment(ctx.site.id, &new, resolved.address.id, ctx.now).await {
        Ok(made) => Ok(made),
        Err(e) => {
            shipping_addresses::discard(services, ctx, account, &resolved).await;
            Err(e.into())
        }
    }
}

/// The adjustment `uuid` of the site.
pub async fn find(services: &Services, ctx: &Context, uuid: &str) -> Result<Adjustment, AdjustmentError> {
    services.store.adjustment(ctx.site.id, uuid).await?.ok_or_else(|| AdjustmentError::NotFound(uuid.to_owned()))
}

/// Deletes the pending adjustment `uuid`.
pub async fn delete(services: &Services, ctx: &Context, uuid: &str) -> Result<(), AdjustmentError> {
    match services.store.delete_adjustment(ctx.site.id, uuid).await? {
        AdjustmentDeletion::Deleted => Ok(()),
        AdjustmentDeletion::Invoiced => Err(AdjustmentError::Invoiced),
        AdjustmentDeletion::NotFound => Err(AdjustmentError::NotFound(uuid.to_owned())),
    }
}

/// A page of the site's adjustments.
pub async fn list(
    services: &Services,
    ctx: &Context,
    filter: &AdjustmentFilter,
    page: &PageRequest,
) -> Result<Page<Adjustment>, AdjustmentError> {
    Ok(services.store.list_adjustments(ctx.site.id, filter, page).await?)
}

impl From<AdjustmentError> for crate::platform::error::AppError {
    fn from(e: AdjustmentError) -> Self {
        match e {
            AdjustmentError::NotFound(uuid) => Self::NotFound(crate::platform::error::Missing::adjustment(&uuid)),
            AdjustmentError::Invoiced => Self::Conflict(e.to_string()),
            AdjustmentError::InvalidCurrency => Self::refused("currency", "invalid", e.to_string()),
            AdjustmentError::InvalidQuantity => Self::refused("quantity", "greater_than", e.to_string()),
            AdjustmentError::TooLarge => Self::refused("unit_amount_in_cents", "less_than", e.to_string()),
            AdjustmentError::ShippingAddress(e) => e.into(),
            AdjustmentError::Store(e) => e.into(),
        }
    }
}

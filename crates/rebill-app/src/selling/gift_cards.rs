//! Gift cards (decisions: docs/gift-cards.md).
//!
//! - **Products** ([`add_product`], [`remove_product`], [`products`]): the face values a site
//!   sells, per product code and currency (the `rebill gift-cards products` command).
//! - **Purchase** ([`purchase`]; [`preview`] is the same checks with nothing written): the
//!   gifter account (created when the site has none with the code) pays a charge invoice (origin
//!   `purchase`) with one gift-card line, not taxed, not discounted and paid through the gateway
//!   only (never with credit). Approved, the card exists with a 16-character redemption code
//!   (CSPRNG); declined, nothing of the card is kept and the decline is answered with its
//!   transaction. A payment whose outcome is not known yet (its transaction `processing`) is
//!   answered like an approved one, with the card waiting for it: neither purchased nor
//!   delivered, not redeemable, shown without its code; the settle job confirms and delivers it
//!   when the gateway approved, or discards it when the gateway declined
//!   ([`crate::collection::reactions::gift_card_settled`]), exactly as an answer at once would.
//! - **Delivery**: at purchase when no `deliver_at` was asked, else by the [`DELIVERY_JOB`] job
//!   at `deliver_at` (site clock), which sets `delivered_at`.
//! - **Redemption** ([`redeem`]): the recipient account gets the whole face value as credit — a
//!   credit invoice with origin `gift_card` on a site with Credit Memos, a legacy invoice without
//!   them — which the account's next charge invoices in that currency use up through the credit
//!   path (`rebill_store::credits`). What is left of that invoice's credit is the card's
//!   balance. [`create_subscription_with_gift`] redeems a card inside a subscription's creation
//!   (its first invoice takes the credit) and takes the redemption back when the creation is
//!   refused.
//!
//! Events (subject: the card's id): `gift_card.purchased`, `gift_card.delivered`,
//! `gift_card.redeemed`; products (subject: the product code): `gift_card_product.added`,
//! `gift_card_product.removed`; plus the invoice, transaction and credit events of the
//! invoicing they use.

use rebill_billing::collection::Collect;
use rebill_billing::invoice::InvoiceOrigin;
use rebill_billing::states::TransactionStatus;
use rebill_store::StoreError;
use rebill_store::accounts::{Account, AccountFields};
use rebill_store::invoices::{Invoice, InvoiceTerms, NewAdjustment, NewInvoice, Transaction};
use rebill_store::jobs::Job;
use rebill_store::shipping_addresses::ShippingFields;
use serde_json::json;

pub use rebill_store::gift_cards::{Delivery, GiftCard, GiftCardFilter, GiftCardProduct};

use crate::billing::adjustments::{self, LineOrigin, NewCharge};
use crate::billing::invoicing::{self, Draft, PaymentSource};
use crate::collection::reactions;
use crate::customers::payment_methods::{self, BillingRequest, PaymentMethodError, valid_currency};
use crate::customers::shipping_addresses::ShippingChoice;
use crate::platform::error::BillingError;
use crate::platform::error::{AppError, FieldRefusal, Missing};
use crate::platform::events;
use crate::platform::jobs::JobError;
use crate::subscriptions::lifecycle::{CreateError, Loaded, Subscribe};
use crate::{Context, Services};

/// Kind of the job delivering a card at its `deliver_at` (subject: the card's id).
pub use crate::collection::reactions::GIFT_CARD_DELIVERY_JOB as DELIVERY_JOB;

pub use crate::platform::events::{GIFT_CARD_DELIVERED, GIFT_CARD_PURCHASED, GIFT_CARD_REDEEMED};
pub const GIFT_CARD_PRODUCT_ADDED: &str = "gift_card_product.added";
pub const GIFT_CARD_PRODUCT_REMOVED: &str = "gift_card_product.removed";

/// Length of a redemption code.
pub const CODE_LENGTH: usize = 16;
/// Characters of a redemption code.
const CODE_ALPHABET: &[u8; 36] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
/// Earliest `deliver_at`: this many seconds after the purchase.
pub const MIN_DELIVERY_DELAY: i64 = 3600;
/// `deliver_at` must be less than this many seconds after the purchase (365 days).
pub const MAX_DELIVERY_DELAY: i64 = 365 * 86_400;
/// Largest face value (as for one-off charges).
const MAX_AMOUNT: i64 = 1_000_000_000_000;

/// A new random redemption code: 16 uppercase letters and digits from the operating system's
/// CSPRNG (bytes rejected above the largest multiple of 36, so every character is equally likely).
pub fn new_code() -> Result<String, getrandom::Error> {
    let mut code = String::with_capacity(CODE_LENGTH);
    let mut buf = [0u8; 32];
    while code.len() < CODE_LENGTH {
        getrandom::fill(&mut buf)?;
        for b in buf {
            if code.len() == CODE_LENGTH {
                break;
            }
            if usize::from(b) < 252 {
                code.push(char::from(CODE_ALPHABET[usize::from(b) % 36]));
            }
        }
    }
    Ok(code)
}

// ---------------------------------------------------------------------------------------------
// Products

/// Why a product was not configured.
#[derive(Debug, thiserror::Error)]
pub enum ProductError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn check_product(product_code: &str, currency: &str, amount: i64) -> Result<(), ProductError> {
    if product_code.is_empty() || product_code.len() > 50 || !product_code.bytes().all(code_byte) {
        return Err(ProductError::Invalid(format!("product code `{product_code}`: 1 to 50 letters, digits or -_.+@")));
    }
    if !valid_currency(currency) {
        return Err(ProductError::Invalid(format!("currency `{currency}`: a 3-letter ISO 4217 code")));
    }
    if !(1..=MAX_AMOUNT).contains(&amount) {
        return Err(ProductError::Invalid(format!("amount {amount}: 1 to {MAX_AMOUNT} cents")));
    }
    Ok(())
}

fn code_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-_.+@".contains(&b)
}

fn product_event(services: &Services, kind: &str, at: i64, p: &GiftCardProduct) -> rebill_store::events::NewEvent {
    let payload =
        json!({ "product_code": p.product_code, "currency": p.currency, "unit_amount_in_cents": p.unit_amount });
    events::new(services, kind, at, payload)
}

/// Adds the face values `amounts` in `currency` to the product `product_code` of the site;
/// answers those that were new.
pub async fn add_product(
    services: &Services,
    ctx: &Context,
    product_code: &str,
    currency: &str,
    amounts: &[i64],
) -> Result<Vec<GiftCardProduct>, ProductError> {
    let currency = currency.to_ascii_uppercase();
    for &amount in amounts {
        check_product(product_code, &currency, amount)?;
    }
    let mut added = Vec::new();
    for &unit_amount in amounts {
        let product = GiftCardProduct {
            product_code: product_code.to_owned(),
            currency: currency.clone(),
            unit_amount,
            created_at: ctx.now,
        };
        let event = product_event(services, GIFT_CARD_PRODUCT_ADDED, ctx.now, &product);
        if services.store.add_gift_card_product(ctx.site.id, &product, &[event]).await? {
            added.push(product);
        }
    }
    Ok(added)
}

/// Removes the face values `amounts` in `currency` of the product; answers how many the site
/// sold. Cards bought keep their value.
pub async fn remove_product(
    services: &Services,
    ctx: &Context,
    product_code: &str,
    currency: &str,
    amounts: &[i64],
) -> Result<usize, ProductError> {
    let currency = currency.to_ascii_uppercase();
    let mut removed = 0;
    for &unit_amount in amounts {
        let product = GiftCardProduct {
            product_code: product_code.to_owned(),
            currency: currency.clone(),
            unit_amount,
            created_at: ctx.now,
        };
        let event = product_event(services, GIFT_CARD_PRODUCT_REMOVED, ctx.now, &product);
        if services.store.remove_gift_card_product(ctx.site.id, product_code, &currency, unit_amount, &[event]).await? {
            removed += 1;
        }
    }
    Ok(removed)
}

/// The site's gift card products.
pub async fn products(services: &Services, ctx: &Context) -> Result<Vec<GiftCardProduct>, StoreError> {
    services.store.gift_card_products(ctx.site.id).await
}

// ---------------------------------------------------------------------------------------------
// Purchase

/// A gift card to buy, as the adapter read it.
#[derive(Debug, Clone, Default)]
pub struct Purchase {
    pub product_code: String,
    pub unit_amount_in_cents: i64,
    pub currency: String,
    pub delivery: Option<Delivery>,
    pub gifter_account_code: String,
    /// The fields of the gifter account when it is created here (an existing account keeps its own).
    pub gifter_fields: AccountFields,
    /// The payment method to charge (the account's stored one when `None`).
    pub billing_info: Option<BillingRequest>,
}

/// Why a gift card was not bought, or a card not redeemed.
#[derive(Debug, thiserror::Error)]
pub enum GiftCardError {
    /// No product with this code at all.
    #[error("Gift card product with product code '{0}' not found")]
    UnknownProduct(String),
    /// The product is not sold at this amount in this currency.
    #[error("Gift card product with unit amount in cents of '{amount}' and '{currency}' currency not found")]
    UnknownAmount { amount: i64, currency: String },
    /// Request fields refused (relative to the gift card: `delivery.email_address`, …).
    #[error("refused")]
    Refused(Vec<FieldRefusal>),
    #[error("the gifter account has no billing info")]
    BillingInfoRequired,
    #[error(transparent)]
    PaymentMethod(#[from] PaymentMethodError),
    /// The payment was declined: nothing of the card is kept.
    #[error("the payment was declined")]
    Declined(Box<Transaction>),
    /// Redeem: no purchased card with this code.
    #[error("Gift Card with redemption code '{0}' not found")]
    CodeNotFound(String),
    #[error("This gift card has already been redeemed.")]
    AlreadyRedeemed,
    /// Redeem: no account with this code.
    #[error("Account with account code '{0}' not found")]
    AccountNotFound(String),
    /// No card with this id (reads).
    #[error("no gift card with id {0}")]
    NotFound(String),
    #[error(transparent)]
    Billing(#[from] BillingError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Internal(String),
}

impl From<GiftCardError> for AppError {
    fn from(e: GiftCardError) -> Self {
        match e {
            GiftCardError::Refused(fields) => AppError::Refused(fields),
            GiftCardError::Declined(t) => AppError::Declined(Some(t)),
            GiftCardError::NotFound(id) => AppError::NotFound(Missing { resource: "GiftCard", key: "id", value: id }),
            GiftCardError::AccountNotFound(code) => AppError::NotFound(Missing::account(&code)),
            GiftCardError::UnknownProduct(code) => {
                AppError::NotFound(Missing { resource: "GiftCardProduct", key: "product_code", value: code })
            }
            GiftCardError::UnknownAmount { amount, .. } => AppError::NotFound(Missing {
                resource: "GiftCardProduct",
                key: "unit_amount_in_cents",
                value: amount.to_string(),
            }),
            GiftCardError::CodeNotFound(code) => {
                AppError::NotFound(Missing { resource: "GiftCard", key: "redemption_code", value: code })
            }
            GiftCardError::AlreadyRedeemed => AppError::Conflict(GiftCardError::AlreadyRedeemed.to_string()),
            GiftCardError::PaymentMethod(e) => e.into(),
            other => AppError::Internal(Box::new(other)),
        }
    }
}

/// A purchase checked: what [`preview`] shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Previewed {
    pub product_code: String,
    pub currency: String,
    pub unit_amount: i64,
    pub delivery: Delivery,
    pub gifter_account_code: String,
}

/// The checks of a purchase that need no writing: the product sold at that amount and
/// currency, the delivery (method, e-mail or address, `deliver_at` at least an hour and less
/// than a year ahead on the site clock).
async fn check(services: &Services, ctx: &Context, p: &Purchase) -> Result<Previewed, GiftCardError> {
    let mut refused = Vec::new();
    if p.gifter_account_code.trim().is_empty() {
        refused.push(FieldRefusal::new("gifter_account.account_code", "blank", "can't be blank"));
    }
    if p.product_code.trim().is_empty() {
        refused.push(FieldRefusal::new("product_code", "blank", "can't be blank"));
    }
    let currency = p.currency.to_ascii_uppercase();
    if !valid_currency(&currency) {
        refused.push(FieldRefusal::new("currency", "invalid", "is not a 3-letter ISO 4217 currency code"));
    }
    if p.unit_amount_in_cents <= 0 {
        refused.push(FieldRefusal::new("unit_amount_in_cents", "greater_than", "must be greater than 0"));
    }
    let delivery = match &p.delivery {
        None => {
            refused.push(FieldRefusal::new("delivery", "blank", "can't be blank"));
            Delivery::default()
        }
        Some(d) => {
            refused.extend(check_delivery(d, ctx.now));
            d.clone()
        }
    };
    if !refused.is_empty() {
        return Err(GiftCardError::Refused(refused));
    }
    let sold = services.store.gift_card_products(ctx.site.id).await?;
    if !sold.iter().any(|s| s.product_code == p.product_code) {
        return Err(GiftCardError::UnknownProduct(p.product_code.clone()));
    }
    if !sold
        .iter()
        .any(|s| s.product_code == p.product_code && s.currency == currency && s.unit_amount == p.unit_amount_in_cents)
    {
        return Err(GiftCardError::UnknownAmount { amount: p.unit_amount_in_cents, currency });
    }
    Ok(Previewed {
        product_code: p.product_code.clone(),
        currency,
        unit_amount: p.unit_amount_in_cents,
        delivery,
        gifter_account_code: p.gifter_account_code.clone(),
    })
}

/// The refusals of a delivery requested at `now` (site clock).
pub fn check_delivery(d: &Delivery, now: i64) -> Vec<FieldRefusal> {
    let mut refused = Vec::new();
    let blank = |v: &Option<String>| v.as_deref().is_none_or(|s| s.trim().is_empty());
    match d.method.as_str() {
        "email" => {
            if blank(&d.email_address) {
                refused.push(FieldRefusal::new("delivery.email_address", "blank", "can't be blank"));
            }
        }
        "post" => {
            let a = &d.address;
            for (field, value) in
                [("address1", &a.address1), ("city", &a.city), ("zip", &a.zip), ("country", &a.country)]
            {
                if blank(value) {
                    refused.push(FieldRefusal::new(&format!("delivery.address.{field}"), "blank", "can't be blank"));
                }
            }
        }
        "" => refused.push(FieldRefusal::new("delivery.method", "blank", "can't be blank")),
        _ => refused.push(FieldRefusal::new("delivery.method", "inclusion", "is not included in the list")),
    }
    if let Some(at) = d.deliver_at {
        if at < now + MIN_DELIVERY_DELAY {
            refused.push(FieldRefusal::new(
                "delivery.deliver_at",
                "greater_than_or_equal_to",
                "must be at least one hour in the future",
            ));
        } else if at >= now + MAX_DELIVERY_DELAY {
            refused.push(FieldRefusal::new(
                "delivery.deliver_at",
                "less_than",
                "must be less than one year in the future",
            ));
        }
    }
    refused
}

/// [`purchase`] as a dry run: the checks, nothing written, nothing charged.
pub async fn preview(services: &Services, ctx: &Context, p: &Purchase) -> Result<Previewed, GiftCardError> {
    check(services, ctx, p).await
}

/// A card bought: the card, its purchase invoice and its transaction — approved (the invoice
/// paid, the card purchased), or still `processing` at the gateway (the invoice pending, the card
/// waiting for the outcome: `purchased_at` and `delivered_at` unset; the settle job confirms or
/// discards it).
#[derive(Debug, Clone)]
pub struct Bought {
    pub card: GiftCard,
    pub invoice: Invoice,
    pub transaction: Transaction,
}

/// Buys a gift card (see the module documentation).
pub async fn purchase(services: &Services, ctx: &Context, p: &Purchase) -> Result<Bought, GiftCardError> {
    let checked = check(services, ctx, p).await?;
    let (account, created_here) = gifter(services, ctx, p).await?;
    let requested = match &p.billing_info {
        Some(info) => match payment_methods::requested_method(services, ctx, &account, info).await {
            Ok(m) => m,
            Err(e) => {
                discard_if_new(services, ctx, &account, created_here).await;
                return Err(e.into());
            }
        },
        None => None,
    };
    let source = match &requested {
        Some(m) => Some(PaymentSource::of_requested(m)),
        None => PaymentSource::of_account(services, &account).await?,
    };
    let Some(source) = source else {
        discard_if_new(services, ctx, &account, created_here).await;
        return Err(GiftCardError::BillingInfoRequired);
    };
    let (invoice, card) = write_purchase(services, ctx, &account, &checked).await?;
    // Collected once, as every new invoice is: the card's face value is above zero, so the
    // first collection charges `source`.
    let (invoice, transaction) = invoicing::first_collection(
        services,
        &ctx.site,
        &account,
        invoice,
        Collect::Once,
        Some(source),
        false,
        ctx.now,
    )
    .await?;
    let Some(transaction) = transaction else {
        return Err(GiftCardError::Internal(format!("gift card purchase invoice {} was not charged", invoice.uuid)));
    };
    let approved = transaction.status() == TransactionStatus::Success;
    let keep = approved || transaction.result.failure.as_ref().is_some_and(|f| f.error_code == "declined_saveable");
    if let Some(method) = requested.as_ref().filter(|_| keep) {
        payment_methods::save_requested(services, ctx, &account, method).await?;
    }
    if transaction.status() == TransactionStatus::Processing {
        // The payment's outcome is not known: the card waits for it, neither purchased nor
        // discarded; the settle job does either, and saves the requested payment method when
        // the charge is approved (see docs/gateways.md).
        return Ok(Bought { card, invoice, transaction });
    }
    if !approved {
        services.store.discard_gift_card(card.id).await?;
        return Err(GiftCardError::Declined(Box::new(transaction)));
    }
    let card = reactions::gift_card_purchased(services, &card, ctx.now)
        .await?
        .ok_or_else(|| GiftCardError::Internal(format!("gift card {} was not waiting for its purchase", card.id)))?;
    Ok(Bought { card, invoice, transaction })
}

/// The gifter account and whether this purchase created it (a concurrent request that created
/// it first wins: its account is used).
async fn gifter(services: &Services, ctx: &Context, p: &Purchase) -> Result<(Account, bool), GiftCardError> {
    let code = &p.gifter_account_code;
    if let Some(account) = services.store.account(ctx.site.id, code).await? {
        return Ok((account, false));
    }
    let event = events::account(services, events::ACCOUNT_CREATED, ctx.now, code);
    match services.store.create_account(ctx.site.id, code, &p.gifter_fields, ctx.now, &[event]).await {
        Ok(account) => Ok((account, true)),
        Err(StoreError::DuplicateAccount(_)) => {
            let account = services.store.account(ctx.site.id, code).await?;
            account.map(|a| (a, false)).ok_or_else(|| GiftCardError::Internal("an account vanished".into()))
        }
        Err(e) => Err(e.into()),
    }
}

/// Removes a gifter account this purchase created when the purchase stopped before charging.
async fn discard_if_new(services: &Services, ctx: &Context, account: &Account, created_here: bool) {
    if created_here && let Err(e) = services.store.discard_new_account(ctx.site.id, account.id).await {
        tracing::error!(error = %e, "removing a gifter account of a refused purchase");
    }
}

/// The gift-card line of a purchase: a one-time charge of the face value, tax exempt.
fn purchase_line(account_id: i64, c: &Previewed, now: i64) -> NewAdjustment {
    let charge = NewCharge {
        unit_amount_in_cents: c.unit_amount,
        currency: c.currency.clone(),
        description: Some("Gift card".to_owned()),
        product_code: Some(c.product_code.clone()),
        tax_exempt: Some(true),
        ..NewCharge::default()
    };
    adjustments::line(account_id, &charge, LineOrigin::ChargedAtOnce, now)
}

/// Writes the purchase invoice and the card waiting for it (another code when the site has the
/// one drawn).
async fn write_purchase(
    services: &Services,
    ctx: &Context,
    account: &Account,
    c: &Previewed,
) -> Result<(Invoice, GiftCard), GiftCardError> {
    let line = purchase_line(account.id, c, ctx.now);
    let draft = Draft {
        lines: Vec::new(),
        extra: vec![line],
        pending: Vec::new(),
        origin: InvoiceOrigin::Purchase,
        terms: InvoiceTerms::default(),
    };
    let preview = invoicing::preview(account, &draft, ctx.now)?;
    let created = invoicing::created_event(services, &account.account_code, &preview.invoice, ctx.now);
    for _ in 0..5 {
        let code = new_code().map_err(|e| GiftCardError::Internal(format!("random source: {e}")))?;
        let card = rebill_store::gift_cards::NewGiftCard {
            redemption_code: code,
            product_code: c.product_code.clone(),
            currency: c.currency.clone(),
            unit_amount: c.unit_amount,
            gifter_account_id: account.id,
            delivery: c.delivery.clone(),
        };
        match services
            .store
            .create_gift_card_purchase(
                ctx.site.id,
                &preview.invoice,
                &preview.lines,
                std::slice::from_ref(&created),
                &card,
                ctx.now,
            )
            .await
        {
            Ok((invoice, _, card)) => return Ok((invoice, card)),
            Err(StoreError::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(GiftCardError::Internal("no free redemption code after 5 draws".into()))
}

// ---------------------------------------------------------------------------------------------
// Delivery

/// Runs a delivery job: the card becomes delivered at the job's due time (a card delivered
/// already, or gone, does nothing).
pub async fn run_delivery(services: &Services, job: &Job) -> Result<(), JobError> {
    let Ok(id) = job.subject.parse::<i64>() else { return Ok(()) };
    let Some(card) = services.store.gift_card(job.site_id, id).await? else { return Ok(()) };
    if card.delivered_at.is_some() {
        return Ok(());
    }
    let event = events::gift_card(services, GIFT_CARD_DELIVERED, job.due_at, &card, json!({}));
    services.store.deliver_gift_card(id, job.due_at, &[event]).await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Reads

/// The site's card with this id (as written in the path).
pub async fn get(services: &Services, ctx: &Context, id: &str) -> Result<GiftCard, GiftCardError> {
    let Ok(number) = id.parse::<i64>() else { return Err(GiftCardError::NotFound(id.to_owned())) };
    services.store.gift_card(ctx.site.id, number).await?.ok_or_else(|| GiftCardError::NotFound(id.to_owned()))
}

/// Which accounts a list is narrowed to, by code.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    pub gifter_account_code: Option<String>,
    pub recipient_account_code: Option<String>,
}

/// A page of the site's cards; a filter naming an account the site does not have matches none.
pub async fn list(
    services: &Services,
    ctx: &Context,
    filter: &ListFilter,
    page: &rebill_store::PageRequest,
) -> Result<rebill_store::Page<GiftCard>, GiftCardError> {
    let mut ids = GiftCardFilter::default();
    for (code, slot) in [
        (&filter.gifter_account_code, &mut ids.gifter_account_id),
        (&filter.recipient_account_code, &mut ids.recipient_account_id),
    ] {
        if let Some(code) = code {
            match services.store.account(ctx.site.id, code).await? {
                Some(a) => *slot = Some(a.id),
                None => return Ok(rebill_store::Page { items: Vec::new(), next: None, total: 0 }),
            }
        }
    }
    Ok(services.store.list_gift_cards(ctx.site.id, &ids, page).await?)
}

/// The card redeemed when the subscription `uuid` was created, if one was.
pub async fn of_subscription(services: &Services, ctx: &Context, uuid: &str) -> Result<Option<GiftCard>, StoreError> {
    services.store.subscription_gift_card(ctx.site.id, uuid).await
}

// ---------------------------------------------------------------------------------------------
// Redemption

/// The purchased card with this redemption code (any case).
async fn by_code(services: &Services, ctx: &Context, code: &str) -> Result<GiftCard, GiftCardError> {
    let upper = code.trim().to_ascii_uppercase();
    services
        .store
        .gift_card_by_code(ctx.site.id, &upper)
        .await?
        .ok_or_else(|| GiftCardError::CodeNotFound(code.to_owned()))
}

/// A redeemed card and the invoice holding its credit.
#[derive(Debug, Clone)]
pub struct Redeemed {
    pub card: GiftCard,
    pub invoice: Invoice,
}

/// Redeems the card with `code` (any case) onto the account `account_code`: the account gets the
/// whole face value as credit (see the module documentation).
pub async fn redeem(
    services: &Services,
    ctx: &Context,
    code: &str,
    account_code: &str,
) -> Result<Redeemed, GiftCardError> {
    let card = by_code(services, ctx, code).await?;
    if card.redeemed_at.is_some() {
        return Err(GiftCardError::AlreadyRedeemed);
    }
    let account = services
        .store
        .account(ctx.site.id, account_code)
        .await?
        .ok_or_else(|| GiftCardError::AccountNotFound(account_code.to_owned()))?;
    redeem_card(services, ctx, &card, &account, None).await
}

/// The credit line of a redemption.
fn credit_line(account_id: i64, card: &GiftCard, now: i64) -> NewAdjustment {
    let credit = NewCharge {
        unit_amount_in_cents: -card.unit_amount,
        currency: card.currency.clone(),
        description: Some(format!("Gift card {}", card.redemption_code)),
        product_code: Some(card.product_code.clone()),
        tax_exempt: Some(true),
        credit_reason_code: Some("gift_card".to_owned()),
        ..NewCharge::default()
    };
    adjustments::line(account_id, &credit, LineOrigin::Adjustment, now)
}

/// The invoice holding a card's credit for `account`: credit (Credit Memos) or legacy, origin
/// `gift_card`.
fn credit_invoice(
    ctx: &Context,
    account: &Account,
    card: &GiftCard,
) -> Result<(NewInvoice, NewAdjustment), GiftCardError> {
    let line = credit_line(account.id, card, ctx.now);
    let draft = Draft {
        lines: Vec::new(),
        extra: vec![line.clone()],
        pending: Vec::new(),
        origin: InvoiceOrigin::GiftCard,
        terms: InvoiceTerms::default(),
    };
    let mut preview = invoicing::preview(account, &draft, ctx.now)?;
    invoicing::as_credit_when_negative(&mut preview.invoice, ctx.site.credit_memos);
    Ok((preview.invoice, line))
}

async fn redeem_card(
    services: &Services,
    ctx: &Context,
    card: &GiftCard,
    account: &Account,
    subscription_uuid: Option<&str>,
) -> Result<Redeemed, GiftCardError> {
    let (invoice, line) = credit_invoice(ctx, account, card)?;
    let created = invoicing::created_event(services, &account.account_code, &invoice, ctx.now);
    let mut extra = json!({ "recipient_account_code": account.account_code });
    if let (Some(map), Some(uuid)) = (extra.as_object_mut(), subscription_uuid) {
        map.insert("subscription_uuid".to_owned(), uuid.into());
    }
    let redeemed = events::gift_card(services, GIFT_CARD_REDEEMED, ctx.now, card, extra);
    let redemption = rebill_store::gift_cards::Redemption {
        card_id: card.id,
        recipient_account_id: account.id,
        invoice: &invoice,
        lines: std::slice::from_ref(&line),
        invoice_events: std::slice::from_ref(&created),
        card_events: std::slice::from_ref(&redeemed),
        subscription_uuid,
        now: ctx.now,
    };
    match services.store.redeem_gift_card(ctx.site.id, &redemption).await? {
        Some((card, invoice)) => Ok(Redeemed { card, invoice }),
        None => Err(GiftCardError::AlreadyRedeemed),
    }
}

// ---------------------------------------------------------------------------------------------
// Subscriptions started with a gift

/// Why a subscription with a gift card was not created.
#[derive(Debug, thiserror::Error)]
pub enum GiftSubscribeError {
    /// The card refused it (unknown, redeemed, another currency); nothing was written.
    #[error(transparent)]
    Card(GiftCardError),
    /// The card's currency is not the subscription's.
    #[error("the gift card is in {card}, the subscription in {subscription}")]
    Currency { card: String, subscription: String },
    /// The creation refused it; the card's redemption was taken back.
    #[error(transparent)]
    Create(#[from] CreateError),
}

/// Creates a subscription with the gift card `code` redeemed inside the creation, kept only if
/// the creation succeeds. The card is checked first (nothing is written when it is unknown,
/// redeemed or in another currency than the subscription); the account is found or created, the
/// card redeemed onto it, and the subscription created, so its first invoice takes the card's
/// credit like any credit. A refused creation takes the redemption back (the credit a failed
/// first invoice took returns, the redemption invoice goes) and removes an account created here
/// that holds nothing else.
pub async fn create_subscription_with_gift(
    services: &Services,
    ctx: &Context,
    mut input: Subscribe,
    (shipping, account_addresses): (Option<ShippingChoice>, &[ShippingFields]),
    code: &str,
) -> Result<(Loaded, Redeemed), GiftSubscribeError> {
    let card = by_code(services, ctx, code).await.map_err(GiftSubscribeError::Card)?;
    if card.redeemed_at.is_some() {
        return Err(GiftSubscribeError::Card(GiftCardError::AlreadyRedeemed));
    }
    let currency = input.drafted.new.terms.currency.clone();
    if card.currency != currency {
        return Err(GiftSubscribeError::Currency { card: card.currency, subscription: currency });
    }
    let (account, created_here) = match input.existing.clone() {
        Some(account) => (account, false),
        None => {
            let fields = input.account_fields.take().unwrap_or_default();
            let purchase = Purchase {
                gifter_account_code: input.account_code.clone(),
                gifter_fields: fields,
                ..Purchase::default()
            };
            gifter(services, ctx, &purchase).await.map_err(GiftSubscribeError::Card)?
        }
    };
    input.existing = Some(account.clone());
    let uuid = input.drafted.new.uuid.clone();
    let redeemed = redeem_card(services, ctx, &card, &account, Some(&uuid)).await.map_err(GiftSubscribeError::Card)?;
    match crate::subscriptions::lifecycle::create_shipped(services, ctx, input, shipping, account_addresses).await {
        Ok(loaded) => {
            // The card as it is now: the first invoice may have taken some of its credit.
            let card =
                services.store.gift_card(ctx.site.id, card.id).await.map_err(|e| GiftSubscribeError::Card(e.into()))?;
            let card = card.unwrap_or(redeemed.card);
            Ok((loaded, Redeemed { card, invoice: redeemed.invoice }))
        }
        Err(refused) => {
            match services.store.undo_gift_card_redemption(card.id).await {
                Ok(true) => {
                    let keep = matches!(
                        &refused,
                        CreateError::BillingInfo(crate::customers::payment_methods::Refusal::Declined {
                            saved: true,
                            ..
                        })
                    );
                    if created_here && !keep {
                        discard_if_new(services, ctx, &account, true).await;
                    }
                }
                Ok(false) => {
                    tracing::warn!(card = card.id, "a refused creation's gift card stays redeemed: its credit was used")
                }
                Err(e) => tracing::error!(card = card.id, error = %e, "taking back a gift card's redemption"),
            }
            Err(GiftSubscribeError::Create(refused))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_sixteen_uppercase_letters_or_digits_and_differ() {
        let codes: Vec<String> = (0..200).map(|_| new_code().expect("random source")).collect();
        for code in &codes {
            assert_eq!(code.len(), CODE_LENGTH);
            assert!(code.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()), "{code}");
        }
        let distinct: std::collections::HashSet<&String> = codes.iter().collect();
        assert_eq!(distinct.len(), codes.len());
    }

    fn email(deliver_at: Option<i64>) -> Delivery {
        Delivery {
            method: "email".into(),
            email_address: Some("r@example.com".into()),
            deliver_at,
            ..Delivery::default()
        }
    }

    #[test]
    fn delivery_needs_its_contact_and_a_time_an_hour_to_a_year_ahead() {
        let now = 1_000_000;
        assert!(check_delivery(&email(None), now).is_empty());
        assert!(check_delivery(&email(Some(now + 3600)), now).is_empty());
        assert!(check_delivery(&email(Some(now + MAX_DELIVERY_DELAY - 1)), now).is_empty());
        let fields = |d: &Delivery| -> Vec<(String, &'static str)> {
            check_delivery(d, now).into_iter().map(|r| (r.field, r.symbol)).collect()
        };
        assert_eq!(fields(&email(Some(now + 3599))), [("delivery.deliver_at".to_owned(), "greater_than_or_equal_to")]);
        assert_eq!(fields(&email(Some(now + MAX_DELIVERY_DELAY))), [("delivery.deliver_at".to_owned(), "less_than")]);
        let no_email = Delivery { email_address: None, ..email(None) };
        assert_eq!(fields(&no_email), [("delivery.email_address".to_owned(), "blank")]);
        let post = Delivery { method: "post".into(), ..Delivery::default() };
        assert_eq!(fields(&post).len(), 4);
        let unknown = Delivery { method: "pigeon".into(), ..Delivery::default() };
        assert_eq!(fields(&unknown), [("delivery.method".to_owned(), "inclusion")]);
    }

    #[test]
    fn products_need_a_code_a_currency_and_a_positive_amount() {
        assert!(check_product("gift_card", "USD", 2000).is_ok());
        assert!(check_product("", "USD", 2000).is_err());
        assert!(check_product("a b", "USD", 2000).is_err());
        assert!(check_product("gift_card", "US", 2000).is_err());
        assert!(check_product("gift_card", "USD", 0).is_err());
    }
}

//! Purchases (`POST /v2/purchases`, `…/preview`, `…/authorize`; decisions: docs/purchases.md).
//!
//! A purchase composes the existing use cases: the account (found, created or updated with the
//! nested fields), its billing info (checked before anything is written, then saved), its new
//! shipping addresses, a gift card redeemed onto it, several subscriptions (written with their
//! first charges, as [`crate::subscriptions::lifecycle::create`] writes one) and one-off charges or credits
//! (written pending, shipped where the purchase says), all on **one** invoice (origin
//! `purchase`) made by the store's one-transaction invoice write and collected once through
//! [`invoicing::invoice`]: the gift card's credit pays first (the credit path), the gateway the
//! rest.
//!
//! All or nothing: a refusal before the invoice removes what this purchase wrote (subscriptions,
//! pending charges, addresses added, the card's redemption, an account created here). A declined
//! payment keeps the declined transaction and the failed invoice that holds it (with its lines,
//! invoiced: none stays pending), and the account that holds them; the subscriptions go, the card's
//! redemption is taken back (its credit returns), the addresses this purchase added are deleted.
//!
//! [`preview`] is the same checks and the invoice the purchase would make, nothing written.
//! [`Mode::Authorize`] makes the invoice and leaves it `pending` without a transaction, as a
//! manual invoice waits (paid later by an offline payment or marked paid).

use rebill_billing::collection::Collect;
use rebill_billing::invoice::{InvoiceOrigin, LineItem};
use rebill_store::StoreError;
use rebill_store::accounts::{Account, AccountFields};
use rebill_store::invoices::{Adjustment, CollectionMethod, InvoiceKind, InvoiceTerms, NewAdjustment, Transaction};
use rebill_store::shipping_addresses::ShippingFields;
use rebill_store::subscriptions::{NewSubscriptionRecord, SubscriptionClaim};

use crate::billing::adjustments::{self, LineOrigin, MAX_QUANTITY, MAX_TOTAL_IN_CENTS, NewCharge};
use crate::billing::invoicing::{self, Draft, Invoiced, PaymentSource, Preview};
use crate::catalog::coupons::{self, CouponError, CouponView};
use crate::customers::payment_methods::{self, BillingRequest, PaymentMethodError, valid_currency};
use crate::customers::shipping_addresses::{self, Resolved, ShippingChoice, ShippingError};
use crate::platform::error::BillingError;
use crate::platform::error::{AppError, FieldRefusal, SubscriptionError};
use crate::platform::events;
use crate::selling::gift_cards::{self, GiftCardError};
use crate::subscriptions::lifecycle::{self as subscriptions, CLAIM_SECONDS, Details, Drafted};
use crate::{Context, Services};

/// One subscription of a purchase, drafted by the engine (`subscriptions::draft`).
#[derive(Debug)]
pub struct Subscription {
    pub plan_id: i64,
    pub drafted: Drafted,
    /// Its own address (2.11), over the purchase's.
    pub shipping: Option<ShippingChoice>,
}

/// One one-off charge (or, negative, credit) of a purchase, in the purchase's currency.
#[derive(Debug, Clone, Default)]
pub struct OneOff {
    pub unit_amount_in_cents: i64,
    /// 1 when not sent.
    pub quantity: Option<i64>,
    pub description: Option<String>,
    pub product_code: Option<String>,
    pub accounting_code: Option<String>,
    pub tax_code: Option<String>,
    pub tax_exempt: Option<bool>,
    pub credit_reason_code: Option<String>,
    /// Its own address (2.11), over the purchase's.
    pub shipping: Option<ShippingChoice>,
}

/// A purchase as the adapter read it.
#[derive(Debug, Default)]
pub struct Purchase {
    /// The account as found before (`None`: created here with `account_fields`).
    pub existing: Option<Account>,
    pub account_code: String,
    /// The nested account's fields (an existing account is updated with them).
    pub account_fields: Option<AccountFields>,
    pub billing_info: Option<BillingRequest>,
    /// The nested account's `shipping_addresses`: added to the account; the last one ships the
    /// items without an address of their own when the purchase names none.
    pub account_addresses: Vec<ShippingFields>,
    pub currency: String,
    /// Collection method, net terms, PO number and notes of the invoice.
    pub terms: InvoiceTerms,
    /// The purchase's address for every item without its own (2.11).
    pub shipping: Option<ShippingChoice>,
    pub subscriptions: Vec<Subscription>,
    pub adjustments: Vec<OneOff>,
    /// A gift card's redemption code.
    pub gift_card: Option<String>,
    /// Coupon codes redeemed with the purchase (on the account, or on a subscription of the
    /// purchase for a coupon redeemed on subscriptions).
    pub coupon_codes: Vec<String>,
    /// The customer notes of the invoice when the purchase makes a credit invoice (2.10, Credit
    /// Memos: only credits).
    pub credit_customer_notes: Option<String>,
}

/// What a purchase does with its invoice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Collect it now (automatic collection) or leave it to the customer (manual).
    Purchase,
    /// Leave it `pending` without a transaction (2.9 `authorize`).
    Authorize,
}

/// Why a purchase was not made.
#[derive(Debug, thiserror::Error)]
pub enum PurchaseError {
    /// Fields refused (relative to `purchase`), before anything was written.
    #[error("refused")]
    Refused(Vec<FieldRefusal>),
    /// The nested billing info was refused before anything was written.
    #[error(transparent)]
    PaymentMethod(#[from] PaymentMethodError),
    /// Another request created the account meanwhile.
    #[error("the account was created by another request meanwhile")]
    Busy,
    /// The payment was declined (the transaction), or there was no payment method (none).
    #[error("the payment was declined")]
    Declined(Option<Box<Transaction>>),
    /// The gift card refused it (unknown or already redeemed).
    #[error(transparent)]
    GiftCard(GiftCardError),
    /// A shipping address was refused (`field`: the item's path below `purchase`).
    #[error("{field}: {error}")]
    ShippingAddress { field: String, error: ShippingError },
    #[error(transparent)]
    Billing(#[from] BillingError),
    #[error(transparent)]
    Subscription(#[from] SubscriptionError),
}

impl From<StoreError> for PurchaseError {
    fn from(e: StoreError) -> Self {
        PurchaseError::Billing(e.into())
    }
}

impl From<PurchaseError> for AppError {
    fn from(e: PurchaseError) -> Self {
        match e {
            PurchaseError::Refused(fields) => AppError::Refused(fields),
            PurchaseError::PaymentMethod(e) => e.into(),
            PurchaseError::Declined(t) => AppError::Declined(t),
            PurchaseError::GiftCard(e) => e.into(),
            PurchaseError::Busy => AppError::Conflict(PurchaseError::Busy.to_string()),
            other => AppError::Internal(Box::new(other)),
        }
    }
}

/// The refusals of a purchase that need nothing read: something to buy, the currency, the
/// one-off amounts and quantities, the gift card's code, and the shipping rules (a purchase
/// address and new account addresses together).
pub fn check(p: &Purchase) -> Vec<FieldRefusal> {
    let mut refused = Vec::new();
    if p.account_code.trim().is_empty() {
        refused.push(FieldRefusal::new("account.account_code", "blank", "can't be blank"));
    }
    if !valid_currency(&p.currency) {
        refused.push(FieldRefusal::new("currency", "invalid", "is not a 3-letter ISO 4217 currency code"));
    }
    if p.subscriptions.is_empty() && p.adjustments.is_empty() {
        refused.push(FieldRefusal::new("base", "blank", "a purchase needs subscriptions or adjustments"));
    } else if p.adjustments.is_empty() && subscription_lines(p).is_empty() {
        refused.push(FieldRefusal::new(
            "base",
            "invalid",
            "the purchase charges nothing now (subscriptions in a trial or starting later): create them alone",
        ));
    }
    for (i, a) in p.adjustments.iter().enumerate() {
        let quantity = a.quantity.unwrap_or(1);
        if !(1..=MAX_QUANTITY).contains(&quantity) {
            refused.push(FieldRefusal::new(
                &format!("adjustments[{i}].quantity"),
                "invalid",
                format!("must be from 1 to {MAX_QUANTITY}"),
            ));
        } else if a.unit_amount_in_cents.checked_mul(quantity).is_none_or(|t| t.unsigned_abs() > MAX_TOTAL_IN_CENTS) {
            refused.push(FieldRefusal::new(
                &format!("adjustments[{i}].unit_amount_in_cents"),
                "invalid",
                "makes a total too large",
            ));
        }
        if a.unit_amount_in_cents == 0 {
            refused.push(FieldRefusal::new(
                &format!("adjustments[{i}].unit_amount_in_cents"),
                "invalid",
                "must not be zero",
            ));
        }
    }
    if let Some(code) = &p.gift_card
        && code.trim().is_empty()
    {
        refused.push(FieldRefusal::new("gift_card.redemption_code", "blank", "can't be blank"));
    }
    if matches!(p.shipping, Some(ShippingChoice::Existing(_))) && !p.account_addresses.is_empty() {
        refused.push(FieldRefusal::new(
            "shipping_address_id",
            "invalid",
            "can't be used when the account creates new shipping addresses",
        ));
    }
    if p.terms.collection_method == CollectionMethod::Manual && !(0..=3650).contains(&p.terms.net_terms) {
        refused.push(FieldRefusal::new("net_terms", "invalid", "must be a number of days from 0 to 3650"));
    }
    refused
}

/// The one-off line of `a` for `account_id` at `now`.
fn one_off_line(account_id: i64, currency: &str, a: &OneOff, now: i64) -> NewAdjustment {
    let charge = NewCharge {
        unit_amount_in_cents: a.unit_amount_in_cents,
        quantity: a.quantity,
        currency: currency.to_owned(),
        description: a.description.clone(),
        accounting_code: a.accounting_code.clone(),
        product_code: a.product_code.clone(),
        tax_exempt: a.tax_exempt,
        tax_code: a.tax_code.clone(),
        credit_reason_code: a.credit_reason_code.clone(),
        start_date: None,
        end_date: None,
    };
    adjustments::line(account_id, &charge, LineOrigin::Adjustment, now)
}

/// The engine lines of every subscription's first charges, in the order of the purchase.
fn subscription_lines(p: &Purchase) -> Vec<LineItem> {
    p.subscriptions
        .iter()
        .flat_map(|s| s.drafted.progress.charges.iter().flat_map(|c| c.lines.iter().cloned()))
        .collect()
}

/// The invoice terms of the purchase: a purchase of credits only on a site with Credit Memos
/// makes a credit invoice, whose customer notes are `credit_customer_notes` when sent.
fn invoice_terms(ctx: &Context, p: &Purchase) -> InvoiceTerms {
    let mut terms = p.terms.clone();
    let lines: i64 = subscription_lines(p).iter().map(|l| l.total_in_cents).sum::<i64>()
        + p.adjustments.iter().map(|a| a.unit_amount_in_cents.saturating_mul(a.quantity.unwrap_or(1))).sum::<i64>();
    if lines < 0 && ctx.site.credit_memos && p.credit_customer_notes.is_some() {
        terms.customer_notes.clone_from(&p.credit_customer_notes);
    }
    terms
}

/// Checks the gift card named (nothing written): it exists, is not redeemed and is in the
/// purchase's currency.
async fn check_card(services: &Services, ctx: &Context, p: &Purchase) -> Result<(), PurchaseError> {
    let Some(code) = &p.gift_card else { return Ok(()) };
    let upper = code.trim().to_ascii_uppercase();
    let card = services
        .store
        .gift_card_by_code(ctx.site.id, &upper)
        .await?
        .ok_or_else(|| PurchaseError::GiftCard(GiftCardError::CodeNotFound(code.clone())))?;
    if card.redeemed_at.is_some() {
        return Err(PurchaseError::GiftCard(GiftCardError::AlreadyRedeemed));
    }
    if card.currency != p.currency {
        return Err(PurchaseError::Refused(vec![FieldRefusal::new(
            "gift_card.redemption_code",
            "invalid",
            format!("the gift card is in {}, the purchase in {}", card.currency, p.currency),
        )]));
    }
    Ok(())
}

/// The purchase's subscriptions as (uuid, plan code).
fn subscription_plans(p: &Purchase) -> Vec<(String, String)> {
    p.subscriptions.iter().map(|s| (s.drafted.new.uuid.clone(), s.drafted.new.terms.plan_code.clone())).collect()
}

/// The coupons named, checked (nothing written). Free-trial coupons are refused: a purchase's
/// subscriptions carry their own trials.
async fn purchase_coupons(services: &Services, ctx: &Context, p: &Purchase) -> Result<Vec<CouponView>, PurchaseError> {
    if p.coupon_codes.is_empty() {
        return Ok(Vec::new());
    }
    let plans: Vec<String> = subscription_plans(p).into_iter().map(|(_, plan)| plan).collect();
    let found = coupons::for_purchase(services, ctx, &p.coupon_codes, &plans, !p.adjustments.is_empty(), &p.currency)
        .await
        .map_err(coupon_error)?;
    if let Some(c) = found.iter().find(|c| c.terms().discount_type == "free_trial") {
        return Err(PurchaseError::Refused(vec![FieldRefusal::new(
            "coupon_codes",
            "invalid",
            format!("{} is a free trial coupon: give the subscription its trial instead", c.coupon.coupon_code),
        )]));
    }
    Ok(found)
}

fn coupon_error(e: CouponError) -> PurchaseError {
    match e {
        CouponError::Refused(fields) => PurchaseError::Refused(fields),
        CouponError::Store(e) => e.into(),
        other => PurchaseError::Refused(vec![FieldRefusal::new("coupon_codes", "invalid", other.to_string())]),
    }
}

/// The checks that read: the gift card, the coupons, the existing addresses named, new
/// addresses and the limit of the account's addresses.
async fn check_reads(services: &Services, ctx: &Context, p: &Purchase) -> Result<Vec<CouponView>, PurchaseError> {
    let refused = check(p);
    if !refused.is_empty() {
        return Err(PurchaseError::Refused(refused));
    }
    check_card(services, ctx, p).await?;
    let coupons = purchase_coupons(services, ctx, p).await?;
    let held = match &p.existing {
        Some(a) => services.store.shipping_addresses(a.id).await?,
        None => Vec::new(),
    };
    let mut new = p.account_addresses.clone();
    let items = p
        .subscriptions
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("subscriptions[{i}].shipping_address_id"), &s.shipping))
        .chain(
            p.adjustments
                .iter()
                .enumerate()
                .map(|(i, a)| (format!("adjustments[{i}].shipping_address_id"), &a.shipping)),
        )
        .chain(std::iter::once(("shipping_address_id".to_owned(), &p.shipping)));
    for (field, choice) in items {
        match choice {
            Some(ShippingChoice::Existing(id)) if !held.iter().any(|h| h.id == *id) => {
                return Err(PurchaseError::Refused(vec![FieldRefusal::new(
                    &field,
                    "invalid",
                    "is not a shipping address of the account",
                )]));
            }
            Some(ShippingChoice::New(fields)) => new.push((**fields).clone()),
            _ => {}
        }
    }
    if !new.is_empty() {
        shipping_addresses::check_new(&held, &new)
            .map_err(|error| PurchaseError::ShippingAddress { field: "shipping_address".into(), error })?;
    }
    Ok(coupons)
}

/// The invoice a purchase would make, nothing written (the account's id is 0 for a new account).
pub async fn preview(services: &Services, ctx: &Context, p: &Purchase) -> Result<Preview, PurchaseError> {
    let coupons = check_reads(services, ctx, p).await?;
    let account_id = p.existing.as_ref().map_or(0, |a| a.id);
    let extra = p.adjustments.iter().map(|a| one_off_line(account_id, &p.currency, a, ctx.now)).collect();
    let draft = Draft {
        lines: subscription_lines(p),
        extra,
        pending: Vec::new(),
        origin: InvoiceOrigin::Purchase,
        terms: invoice_terms(ctx, p),
    };
    let mut preview = invoicing::preview_for(account_id, &draft, ctx.now)?;
    crate::billing::invoicing::discounts::discount_purchase_preview(
        services,
        ctx,
        p.existing.as_ref(),
        &mut preview,
        &coupons,
        &subscription_plans(p),
    )
    .await?;
    invoicing::as_credit_when_negative(&mut preview.invoice, ctx.site.credit_memos);
    Ok(preview)
}

/// What this purchase wrote so far, taken back on a refusal.
#[derive(Default)]
struct Written {
    account_created: bool,
    addresses: Vec<Resolved>,
    adjustments: Vec<Adjustment>,
    card_id: Option<i64>,
    claims: Vec<SubscriptionClaim>,
    redemptions: Vec<i64>,
}

impl Written {
    /// Takes back what was written (best effort, logged), the account last; `keep_account`
    /// keeps an account created here (it holds a declined transaction, or a saved card).
    async fn undo(&self, services: &Services, ctx: &Context, account: &Account, keep_account: bool) {
        for claim in &self.claims {
            if let Err(e) = services.store.discard_subscription(claim).await {
                tracing::error!(error = %e, "removing a subscription of a refused purchase");
            }
        }
        if let Err(e) = coupons::discard(services, &self.redemptions).await {
            tracing::error!(error = %e, "taking back the redemptions of a refused purchase");
        }
        if let Some(id) = self.card_id {
            match services.store.undo_gift_card_redemption(id).await {
                Ok(true) => {}
                Ok(false) => tracing::warn!(card = id, "a refused purchase's gift card stays redeemed"),
                Err(e) => tracing::error!(card = id, error = %e, "taking back a gift card's redemption"),
            }
        }
        for a in &self.adjustments {
            if a.invoice_number.is_none()
                && let Err(e) = services.store.delete_adjustment(ctx.site.id, &a.uuid).await
            {
                tracing::error!(error = %e, "removing a pending charge of a refused purchase");
            }
        }
        for resolved in &self.addresses {
            shipping_addresses::discard(services, ctx, account, resolved).await;
        }
        if self.account_created
            && !keep_account
            && let Err(e) = services.store.discard_new_account(ctx.site.id, account.id).await
        {
            tracing::error!(error = %e, "removing the account of a refused purchase");
        }
    }
}

/// Makes a purchase (see the module documentation): answers its invoice as collected.
pub async fn purchase(services: &Services, ctx: &Context, p: Purchase, mode: Mode) -> Result<Invoiced, PurchaseError> {
    check_reads(services, ctx, &p).await?;
    let code = p.account_code.clone();
    let mut written = Written { account_created: p.existing.is_none(), ..Written::default() };
    let account = match (&p.existing, &p.account_fields) {
        (Some(_), Some(fields)) => {
            let event = events::account(services, events::ACCOUNT_UPDATED, ctx.now, &code);
            services
                .store
                .update_account(ctx.site.id, &code, fields, ctx.now, &[event])
                .await?
                .ok_or(PurchaseError::Busy)?
        }
        (Some(account), None) => account.clone(),
        (None, fields) => {
            let event = events::account(services, events::ACCOUNT_CREATED, ctx.now, &code);
            let fields = fields.clone().unwrap_or_default();
            match services.store.create_account(ctx.site.id, &code, &fields, ctx.now, &[event]).await {
                Ok(a) => a,
                Err(StoreError::DuplicateAccount(_)) => return Err(PurchaseError::Busy),
                Err(e) => return Err(e.into()),
            }
        }
    };
    // The nested billing info is the purchase's payment method: checked and stored with the
    // gateway, verified by the purchase's own charge, saved when that is approved (or declined
    // `declined_saveable`), or at once when nothing is charged now.
    let requested = match &p.billing_info {
        Some(info) => match payment_methods::requested_method(services, ctx, &account, info).await {
            Ok(m) => m,
            Err(e) => {
                written.undo(services, ctx, &account, false).await;
                return Err(e.into());
            }
        },
        None => None,
    };
    let source = requested.as_ref().map(PaymentSource::of_requested);
    let outcome = write_and_invoice(services, ctx, &p, &account, &mut written, mode, source).await;
    let save = match &outcome {
        // A payment whose outcome is not known yet: the settle job saves the method when the
        // answer calls for it, as the purchase's call would have.
        Ok(invoiced) => invoiced.pending().is_none(),
        Err(PurchaseError::Declined(Some(t))) => {
            t.result.failure.as_ref().is_some_and(|f| f.error_code == "declined_saveable")
        }
        Err(_) => false,
    };
    if let Some(method) = requested.as_ref().filter(|_| save) {
        payment_methods::save_requested(services, ctx, &account, method).await?;
    }
    match outcome {
        Ok(invoiced) => Ok(invoiced),
        Err(e) => {
            // A declined payment leaves its transaction (and the failed invoice holding it) on
            // the account, which therefore stays.
            let keep = matches!(e, PurchaseError::Declined(Some(_)));
            written.undo(services, ctx, &account, keep).await;
            Err(e)
        }
    }
}

/// The address an item ships to: its own, else the purchase's, else the last new account
/// address (§1.5).
fn shipped_to<'a>(
    own: &'a Option<ShippingChoice>,
    purchase: &'a Option<ShippingChoice>,
    last_account: Option<&'a Resolved>,
) -> Option<either::Choice<'a>> {
    match (own, purchase, last_account) {
        (Some(c), _, _) | (None, Some(c), _) => Some(either::Choice::Named(c)),
        (None, None, Some(r)) => Some(either::Choice::Added(r)),
        (None, None, None) => None,
    }
}

mod either {
    use super::{Resolved, ShippingChoice};

    /// An address an item names, or one the purchase added already.
    pub(super) enum Choice<'a> {
        Named(&'a ShippingChoice),
        Added(&'a Resolved),
    }
}

async fn resolve_for(
    services: &Services,
    ctx: &Context,
    account: &Account,
    choice: either::Choice<'_>,
    written: &mut Written,
    field: &str,
) -> Result<i64, PurchaseError> {
    match choice {
        either::Choice::Added(r) => Ok(r.address.id),
        either::Choice::Named(c) => {
            let resolved = shipping_addresses::resolve(services, ctx, account, c)
                .await
                .map_err(|error| PurchaseError::ShippingAddress { field: field.to_owned(), error })?;
            let id = resolved.address.id;
            if resolved.added {
                written.addresses.push(resolved);
            }
            Ok(id)
        }
    }
}

async fn write_and_invoice(
    services: &Services,
    ctx: &Context,
    p: &Purchase,
    account: &Account,
    written: &mut Written,
    mode: Mode,
    source: Option<PaymentSource>,
) -> Result<Invoiced, PurchaseError> {
    if !p.account_addresses.is_empty() {
        let added = shipping_addresses::add(services, ctx, account, &p.account_addresses)
            .await
            .map_err(|error| PurchaseError::ShippingAddress { field: "account.shipping_addresses".into(), error })?;
        written.addresses.extend(added);
    }
    let last_account = written.addresses.last().cloned();
    // One-off charges, pending and shipped, until the invoice takes them.
    for (i, a) in p.adjustments.iter().enumerate() {
        let line = one_off_line(account.id, &p.currency, a, ctx.now);
        let made = match shipped_to(&a.shipping, &p.shipping, last_account.as_ref()) {
            Some(choice) => {
                let field = format!("adjustments[{i}].shipping_address");
                let id = resolve_for(services, ctx, account, choice, written, &field).await?;
                services.store.create_shipped_adjustment(ctx.site.id, &line, id, ctx.now).await?
            }
            None => services.store.create_adjustment(ctx.site.id, &line, ctx.now).await?,
        };
        written.adjustments.push(made);
    }
    // The gift card's credit, for the invoice to take.
    if let Some(code) = &p.gift_card {
        let redeemed =
            gift_cards::redeem(services, ctx, code, &account.account_code).await.map_err(PurchaseError::GiftCard)?;
        written.card_id = Some(redeemed.card.id);
    }
    // The subscriptions with their first charges, held until their invoice is made.
    let mut made = Vec::new();
    for (i, s) in p.subscriptions.iter().enumerate() {
        let mut details = Details {
            account_code: account.account_code.clone(),
            po_number: p.terms.po_number.clone(),
            net_terms: (p.terms.collection_method == CollectionMethod::Manual).then_some(p.terms.net_terms),
            collection_method: (p.terms.collection_method == CollectionMethod::Manual).then(|| "manual".to_owned()),
            terms_and_conditions: p.terms.terms_and_conditions.clone(),
            customer_notes: p.terms.customer_notes.clone(),
            vat_reverse_charge_notes: p.terms.vat_reverse_charge_notes.clone(),
            shipping_address_id: None,
        };
        if let Some(choice) = shipped_to(&s.shipping, &p.shipping, last_account.as_ref()) {
            let field = format!("subscriptions[{i}].shipping_address");
            details.shipping_address_id = Some(resolve_for(services, ctx, account, choice, written, &field).await?);
        }
        let Drafted { new, sub, progress } = &s.drafted;
        let record = NewSubscriptionRecord {
            site_id: ctx.site.id,
            account_id: account.id,
            plan_id: s.plan_id,
            uuid: new.uuid.clone(),
            indexed: subscriptions::indexed(sub),
            value: subscriptions::to_json(sub)?,
            creation: subscriptions::to_json(new)?,
            details: subscriptions::to_json(&details)?,
        };
        let charges = subscriptions::new_charges(&progress.charges)?;
        let step_events = subscriptions::step_events(services, &progress.steps, &details);
        let lease = services.clock.now() + CLAIM_SECONDS;
        let (claim, record) =
            services.store.create_subscription(&record, &charges, &step_events, ctx.now, lease).await?;
        written.claims.push(claim.clone());
        made.push((claim, record, sub.clone()));
    }
    // The coupons, redeemed for the invoice to discount.
    if !p.coupon_codes.is_empty() {
        let plans = subscription_plans(p);
        written.redemptions =
            coupons::redeem_for_purchase(services, ctx, account, &p.coupon_codes, &plans, &p.currency)
                .await
                .map_err(coupon_error)?;
    }
    // One invoice for everything, collected once.
    let collect = match (mode, p.terms.collection_method) {
        (Mode::Authorize, _) | (_, CollectionMethod::Manual) => Collect::Manual,
        (Mode::Purchase, _) => Collect::Once,
    };
    let draft = Draft {
        lines: subscription_lines(p),
        extra: Vec::new(),
        pending: written.adjustments.clone(),
        origin: InvoiceOrigin::Purchase,
        terms: InvoiceTerms {
            // Nothing collects an authorized purchase's invoice: it waits like a manual one.
            collection_method: if mode == Mode::Authorize {
                CollectionMethod::Manual
            } else {
                p.terms.collection_method
            },
            ..invoice_terms(ctx, p)
        },
    };
    let invoiced = invoicing::invoice(services, &ctx.site, account, draft, ctx.now, collect, source).await?;
    written.adjustments.clear();
    // A payment whose outcome is not known yet stands: the settle job finishes it.
    let settled = invoiced.is_paid()
        || collect == Collect::Manual
        || invoiced.invoice.kind != InvoiceKind::Charge
        || invoiced.pending().is_some();
    if !settled {
        return Err(PurchaseError::Declined(invoiced.declined().map(|t| Box::new(t.clone()))));
    }
    // The purchase is made: what follows is bookkeeping that must not take it back. A charge
    // left unmarked after a failure here is found on its invoice by the subscription's next run
    // (`subscriptions::bill_pending`), never billed twice.
    written.claims.clear();
    let number = invoiced.invoice.invoice_number.to_string();
    for (claim, record, sub) in &made {
        if let Err(e) = settle_subscription(services, ctx, record.id, sub, &number).await {
            tracing::error!(error = %e, subscription = %record.uuid, "recording a purchase's subscription charges");
        }
        if let Err(e) = services.store.release_subscription(claim).await {
            tracing::warn!(error = %e, "releasing a subscription claim");
        }
    }
    Ok(invoiced)
}

/// Marks a purchased subscription's charges billed with the purchase's invoice and schedules
/// the subscription's next job.
async fn settle_subscription(
    services: &Services,
    ctx: &Context,
    record_id: i64,
    sub: &rebill_billing::lifecycle::Subscription,
    number: &str,
) -> Result<(), StoreError> {
    for charge in services.store.subscription_charges(record_id).await? {
        if charge.billed_at.is_none() {
            services.store.mark_charge_billed(&charge, Some(number), ctx.now).await?;
        }
    }
    subscriptions::reschedule(services, ctx.site.id, sub, None).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(p: &Purchase) -> Vec<(String, &'static str)> {
        check(p).into_iter().map(|r| (r.field, r.symbol)).collect()
    }

    fn one_off(unit: i64, quantity: Option<i64>) -> OneOff {
        OneOff { unit_amount_in_cents: unit, quantity, ..OneOff::default() }
    }

    #[test]
    fn a_purchase_needs_an_account_a_currency_and_something_to_charge() {
        let ok = Purchase {
            account_code: "a1".into(),
            currency: "USD".into(),
            adjustments: vec![one_off(100, None)],
            ..Purchase::default()
        };
        assert!(check(&ok).is_empty());
        let empty = Purchase { account_code: " ".into(), currency: "US".into(), ..Purchase::default() };
        assert_eq!(
            fields(&empty),
            [
                ("account.account_code".to_owned(), "blank"),
                ("currency".to_owned(), "invalid"),
                ("base".to_owned(), "blank")
            ]
        );
        let bad =
            Purchase { adjustments: vec![one_off(100, Some(0)), one_off(0, None), one_off(i64::MAX, Some(2))], ..ok };
        assert_eq!(
            fields(&bad),
            [
                ("adjustments[0].quantity".to_owned(), "invalid"),
                ("adjustments[1].unit_amount_in_cents".to_owned(), "invalid"),
                ("adjustments[2].unit_amount_in_cents".to_owned(), "invalid")
            ]
        );
    }

    #[test]
    fn a_purchase_address_cannot_go_with_new_account_addresses() {
        let p = Purchase {
            account_code: "a1".into(),
            currency: "USD".into(),
            adjustments: vec![one_off(100, None)],
            shipping: Some(ShippingChoice::Existing(7)),
            account_addresses: vec![ShippingFields::default()],
            ..Purchase::default()
        };
        assert_eq!(fields(&p), [("shipping_address_id".to_owned(), "invalid")]);
        let without = Purchase { account_addresses: Vec::new(), ..p };
        assert!(check(&without).is_empty());
    }
}

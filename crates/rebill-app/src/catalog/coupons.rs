//! Coupons and redemptions: the coupon catalogue (create, read, list by state, edit, expire,
//! restore, generate the unique codes of a bulk coupon), redeeming a coupon on an account or a
//! subscription, removing a redemption, the redemption reads, and the discount a new invoice
//! gets from the account's active redemptions ([`discount`], called by
//! [`crate::billing::invoicing::invoice`]).
//!
//! A coupon's state is computed on the site clock ([`CouponView::state`]): `expired` once
//! deleted or past its `redeem_by_date`, `maxed_out` once redeemed `max_redemptions` times (a
//! unique code: once redeemed), else `redeemable`. A unique code follows its bulk coupon's terms.
//! A redemption's state is `inactive` once used up (a single-use one after the first invoice it
//! discounted), lapsed (a temporal one, one hour before the anniversary of its window), replaced
//! (an account has one account-level coupon at a time: a new one replaces the old), removed, or
//! for a free-trial coupon at once (its effect is the trial). The decisions where the API
//! reference is silent are in `docs/coupons.md`.
//!
//! Events (subject: the coupon code): `coupon.created`, `coupon.updated`, `coupon.expired`,
//! `coupon.restored`, `coupon.codes_generated`; (subject: the redemption uuid)
//! `redemption.created`, `redemption.removed`; (subject: the invoice number)
//! `invoice.discounted`, recorded with the invoice the discount went to.

use std::collections::HashMap;

use rebill_billing::discount::{self, CodeTemplate, TemporalUnit};
use rebill_billing::period::{Interval, IntervalUnit};
use rebill_store::accounts::Account;
use rebill_store::events::NewEvent;
use rebill_store::{Page, PageRequest, StoreError};
use serde_json::json;

pub use rebill_store::coupons::{
    Coupon, CouponEdit, CouponStateFilter, CouponTerms, NewRedemption, Redeemed, Redemption, RedemptionUse,
};

use crate::platform::error::{AppError, FieldRefusal, Missing};
use crate::platform::events;
use crate::platform::subscription_documents::Loaded;
use crate::{Context, Services, time};

pub const COUPON_CREATED: &str = "coupon.created";
pub const COUPON_UPDATED: &str = "coupon.updated";
pub const COUPON_EXPIRED: &str = "coupon.expired";
pub const COUPON_RESTORED: &str = "coupon.restored";
pub const COUPON_CODES_GENERATED: &str = "coupon.codes_generated";
pub const REDEMPTION_CREATED: &str = "redemption.created";
pub const REDEMPTION_REMOVED: &str = "redemption.removed";
pub const INVOICE_DISCOUNTED: &str = "invoice.discounted";

/// Most unique codes one generate call makes.
pub const MAX_GENERATE: i64 = 200;
/// Most unique codes a bulk coupon can have.
pub const MAX_UNIQUE_CODES: i64 = 100_000;

/// A coupon's state on the site clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CouponState {
    Redeemable,
    Expired,
    MaxedOut,
}

impl CouponState {
    pub fn name(self) -> &'static str {
        match self {
            CouponState::Redeemable => "redeemable",
            CouponState::Expired => "expired",
            CouponState::MaxedOut => "maxed_out",
        }
    }
}

/// A coupon as the API shows it: the row, the bulk coupon of a unique code (whose terms it
/// follows) and its state at the time it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CouponView {
    pub coupon: Coupon,
    pub bulk: Option<Coupon>,
    pub state: CouponState,
}

impl CouponView {
    fn of(coupon: Coupon, bulk: Option<Coupon>, now: i64) -> Self {
        let state = state_of(&coupon, bulk.as_ref(), now);
        Self { coupon, bulk, state }
    }

    /// The terms in force: a unique code's are its bulk coupon's.
    pub fn terms(&self) -> &CouponTerms {
        self.bulk.as_ref().map_or(&self.coupon.terms, |b| &b.terms)
    }

    pub fn is_bulk(&self) -> bool {
        self.coupon.terms.coupon_type == "bulk"
    }

    pub fn is_unique_code(&self) -> bool {
        self.coupon.bulk_coupon_id.is_some()
    }
}

fn state_of(coupon: &Coupon, bulk: Option<&Coupon>, now: i64) -> CouponState {
    let terms = bulk.map_or(&coupon.terms, |b| &b.terms);
    if coupon.expired_at.is_some() || terms.redeem_by_date.is_some_and(|d| d <= now) {
        return CouponState::Expired;
    }
    let maxed = if coupon.bulk_coupon_id.is_some() {
        coupon.redeemed_at.is_some()
    } else {
        terms.max_redemptions.is_some_and(|m| coupon.redemptions_count >= m)
    };
    if maxed { CouponState::MaxedOut } else { CouponState::Redeemable }
}

/// A redemption as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedemptionView {
    pub redemption: Redemption,
    /// Whether its coupon is single-use.
    pub single_use: bool,
    /// `active` or `inactive` at the time it was read (a lapsed temporal one is inactive).
    pub active: bool,
    /// The first invoice it discounted.
    pub invoice_number: Option<i64>,
}

/// Why a coupon or redemption operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum CouponError {
    #[error("Couldn't find Coupon with coupon_code = {0}")]
    NotFound(String),
    #[error("no account with code {0}")]
    AccountNotFound(String),
    #[error("no redemption with uuid {0}")]
    RedemptionNotFound(String),
    #[error("no subscription with uuid {0}")]
    SubscriptionNotFound(String),
    /// Field refusals (relative to the `coupon` document).
    #[error("refused: {0:?}")]
    Refused(Vec<FieldRefusal>),
    /// `PUT /coupons/:code` with attributes that cannot change (400 `attributes_not_allowed`).
    #[error("You are not allowed to edit attributes {}.", .0.join(", "))]
    AttributesNotAllowed(Vec<&'static str>),
    /// Restoring a coupon that is redeemable (400 `active_coupon`).
    #[error("Restoring an active coupon is not allowed")]
    ActiveCoupon,
    /// A generate call that cannot be done (400 `number_of_unique_codes`).
    #[error("{0}")]
    Generate(&'static str),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl CouponError {
    fn refused(field: &str, symbol: &'static str, message: impl Into<String>) -> Self {
        Self::Refused(vec![FieldRefusal::new(field, symbol, message)])
    }
}

impl From<CouponError> for AppError {
    fn from(e: CouponError) -> Self {
        match e {
            CouponError::NotFound(code) => {
                AppError::NotFound(Missing { resource: "Coupon", key: "coupon_code", value: code })
            }
            CouponError::AccountNotFound(code) => AppError::NotFound(Missing::account(&code)),
            CouponError::RedemptionNotFound(uuid) => {
                AppError::NotFound(Missing { resource: "Redemption", key: "uuid", value: uuid })
            }
            CouponError::SubscriptionNotFound(uuid) => AppError::NotFound(Missing::subscription(&uuid)),
            CouponError::Refused(fields) => AppError::Refused(fields),
            e @ (CouponError::AttributesNotAllowed(_) | CouponError::ActiveCoupon | CouponError::Generate(_)) => {
                AppError::Refused(vec![FieldRefusal::new("base", "invalid", e.to_string())])
            }
            CouponError::Store(e) => e.into(),
        }
    }
}

fn coupon_event(services: &Services, kind: &str, at: i64, coupon: &str) -> NewEvent {
    events::new(services, kind, at, json!({ "coupon_code": coupon }))
}

/// The coupon (or unique code) `code` with its bulk coupon.
pub async fn find(services: &Services, ctx: &Context, code: &str) -> Result<CouponView, CouponError> {
    let coupon =
        services.store.coupon(ctx.site.id, code).await?.ok_or_else(|| CouponError::NotFound(code.to_owned()))?;
    view(services, ctx, coupon).await
}

async fn view(services: &Services, ctx: &Context, coupon: Coupon) -> Result<CouponView, CouponError> {
    let bulk = match coupon.bulk_coupon_id {
        Some(id) => services.store.coupon_by_id(id).await?,
        None => None,
    };
    Ok(CouponView::of(coupon, bulk, ctx.now))
}

/// The rules of a new coupon beside the wire format's (field names relative to `coupon`).
pub fn check_terms(terms: &CouponTerms, known_plans: &[String], now: i64) -> Vec<FieldRefusal> {
    let mut out = Vec::new();
    let mut refuse =
        |field: &str, symbol: &'static str, message: &str| out.push(FieldRefusal::new(field, symbol, message));
    if terms.name.trim().is_empty() {
        refuse("name", "blank", "can't be blank");
    }
    match terms.discount_type.as_str() {
        "percent" => match terms.discount_percent {
            None => refuse("discount_percent", "blank", "can't be blank"),
            Some(p) if !(0..=100).contains(&p) => refuse("discount_percent", "invalid", "must be between 0 and 100"),
            Some(_) => {}
        },
        "dollars" => {
            if terms.discount_amounts.is_empty() {
                refuse("discount_in_cents", "blank", "can't be blank");
            }
            if terms.discount_amounts.values().any(|a| *a <= 0 || *a > 100_000_000) {
                refuse("discount_in_cents", "invalid", "must be greater than 0 and at most 100000000");
            }
        }
        "free_trial" => {
            if terms.free_trial_amount.is_none_or(|a| a < 1) {
                refuse("free_trial_amount", "invalid", "must be at least 1");
            }
            if terms.free_trial_unit.is_none() {
                refuse("free_trial_unit", "blank", "can't be blank");
            }
        }
        _ => refuse("discount_type", "blank", "can't be blank"),
    }
    if terms.duration == "temporal" {
        if terms.temporal_amount.is_none_or(|a| a < 1) {
            refuse("temporal_amount", "invalid", "must be at least 1");
        }
        if terms.temporal_unit.is_none() {
            refuse("temporal_unit", "blank", "can't be blank");
        }
    }
    if !terms.applies_to_all_plans && terms.plan_codes.is_empty() && !terms.applies_to_non_plan_charges {
        refuse("base", "must_apply_to_plans_or_non_plan_charges", "must apply to plans or non-plan charges");
    }
    if !terms.applies_to_all_plans && terms.plan_codes.iter().any(|c| !known_plans.contains(c)) {
        refuse("plan_codes", "invalid", "names a plan that does not exist");
    }
    for (field, value) in
        [("max_redemptions", terms.max_redemptions), ("max_redemptions_per_account", terms.max_redemptions_per_account)]
    {
        if value.is_some_and(|v| v < 1) {
            refuse(field, "invalid", "must be at least 1");
        }
    }
    if terms.redeem_by_date.is_some_and(|d| d <= now) {
        refuse("redeem_by_date", "in_past", "must be in the future");
    }
    if terms.coupon_type == "bulk" && terms.unique_code_template.is_none() {
        refuse("unique_code_template", "blank", "can't be blank");
    }
    out
}

/// Creates a coupon. A code may be taken again only once its earlier coupon is expired or
/// maxed out.
pub async fn create(
    services: &Services,
    ctx: &Context,
    code: &str,
    mut terms: CouponTerms,
) -> Result<CouponView, CouponError> {
    let mut plans = Vec::new();
    for plan in &terms.plan_codes {
        if services.store.plan(ctx.site.id, plan).await?.is_some_and(|p| !p.is_deleted()) {
            plans.push(plan.clone());
        }
    }
    let mut refusals = check_terms(&terms, &plans, ctx.now);
    if terms.coupon_type == "bulk"
        && let Some(template) = &terms.unique_code_template
        && let Err(e) = CodeTemplate::parse(template, code)
    {
        refusals.push(FieldRefusal::new("unique_code_template", "invalid", e.to_string()));
    }
    if let Some(current) = services.store.coupon(ctx.site.id, code).await? {
        let current = view(services, ctx, current).await?;
        if current.state == CouponState::Redeemable {
            refusals.push(FieldRefusal::new("coupon_code", "taken", "has already been taken"));
        }
    }
    if !refusals.is_empty() {
        return Err(CouponError::Refused(refusals));
    }
    if terms.coupon_type == "bulk" && terms.max_redemptions_per_account.is_none() {
        terms.max_redemptions_per_account = Some(1);
    }
    if terms.applies_to_all_plans {
        terms.plan_codes.clear();
    }
    let event = coupon_event(services, COUPON_CREATED, ctx.now, code);
    let coupon = services.store.create_coupon(ctx.site.id, code, &terms, ctx.now, &[event]).await?;
    Ok(CouponView::of(coupon, None, ctx.now))
}

/// A page of the site's coupons (not unique codes), in one state when asked.
pub async fn list(
    services: &Services,
    ctx: &Context,
    state: Option<CouponStateFilter>,
    page: &PageRequest,
) -> Result<Page<CouponView>, CouponError> {
    let page = services.store.list_coupons(ctx.site.id, state, ctx.now, page).await?;
    Ok(Page {
        items: page.items.into_iter().map(|c| CouponView::of(c, None, ctx.now)).collect(),
        next: page.next,
        total: page.total,
    })
}

/// Edits a redeemable coupon's editable terms; `not_allowed` names the attributes the request
/// tried to change that cannot change.
pub async fn update(
    services: &Services,
    ctx: &Context,
    code: &str,
    edit: &CouponEdit,
    not_allowed: Vec<&'static str>,
) -> Result<CouponView, CouponError> {
    let current = find(services, ctx, code).await?;
    if !not_allowed.is_empty() {
        return Err(CouponError::AttributesNotAllowed(not_allowed));
    }
    if current.is_unique_code() {
        return Err(CouponError::refused("coupon_code", "invalid", "is a unique code: edit its bulk coupon"));
    }
    if current.state != CouponState::Redeemable {
        return Err(CouponError::refused("state", "invalid", "only redeemable coupons can be edited"));
    }
    check_edit(&current, edit, ctx.now)?;
    let event = coupon_event(services, COUPON_UPDATED, ctx.now, code);
    let coupon = services.store.edit_coupon(current.coupon.id, edit, false, ctx.now, &[event]).await?;
    Ok(CouponView::of(coupon, None, ctx.now))
}

fn check_edit(current: &CouponView, edit: &CouponEdit, now: i64) -> Result<(), CouponError> {
    let mut refusals = Vec::new();
    if edit.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
        refusals.push(FieldRefusal::new("name", "blank", "can't be blank"));
    }
    let terms = current.terms();
    let redeem_by = edit.redeem_by_date.unwrap_or(terms.redeem_by_date);
    if redeem_by.is_some_and(|d| d <= now) {
        refusals.push(FieldRefusal::new("redeem_by_date", "in_past", "must be in the future"));
    }
    let max = edit.max_redemptions.unwrap_or(terms.max_redemptions);
    if max.is_some_and(|m| m < 1 || m <= current.coupon.redemptions_count && !current.is_unique_code()) {
        refusals.push(FieldRefusal::new("max_redemptions", "too_low", "must be greater than the redemptions made"));
    }
    if edit.max_redemptions_per_account.flatten().is_some_and(|m| m < 1) {
        refusals.push(FieldRefusal::new("max_redemptions_per_account", "invalid", "must be at least 1"));
    }
    if refusals.is_empty() { Ok(()) } else { Err(CouponError::Refused(refusals)) }
}

/// Expires a coupon (DELETE): a bulk coupon's unique codes not redeemed expire with it.
pub async fn expire(services: &Services, ctx: &Context, code: &str) -> Result<(), CouponError> {
    let current = find(services, ctx, code).await?;
    let event = coupon_event(services, COUPON_EXPIRED, ctx.now, code);
    services.store.expire_coupon(current.coupon.id, ctx.now, &[event]).await?;
    Ok(())
}

/// Restores an expired or maxed-out coupon with the editable terms of `edit` (a past
/// `redeem_by_date` must be moved, a reached `max_redemptions` raised; a unique code redeemed
/// becomes redeemable again). A redeemable coupon is not restored.
pub async fn restore(
    services: &Services,
    ctx: &Context,
    code: &str,
    edit: &CouponEdit,
) -> Result<CouponView, CouponError> {
    let current = find(services, ctx, code).await?;
    if current.state == CouponState::Redeemable {
        return Err(CouponError::ActiveCoupon);
    }
    if current.is_unique_code() {
        if edit != &CouponEdit::default() {
            return Err(CouponError::refused("base", "invalid", "a unique code takes its terms from its bulk coupon"));
        }
        if current.bulk.as_ref().is_some_and(|b| state_of(b, None, ctx.now) == CouponState::Expired) {
            return Err(CouponError::refused("base", "invalid", "its bulk coupon is expired: restore the bulk coupon"));
        }
    } else {
        check_edit(&current, edit, ctx.now)?;
    }
    let event = coupon_event(services, COUPON_RESTORED, ctx.now, code);
    let coupon = services.store.edit_coupon(current.coupon.id, edit, true, ctx.now, &[event]).await?;
    Ok(CouponView::of(coupon, current.bulk, ctx.now))
}

/// Generates `count` unique codes of bulk coupon `code` (synchronously); answers the bulk coupon
/// and the new codes in the order made.
pub async fn generate(
    services: &Services,
    ctx: &Context,
    code: &str,
    count: i64,
) -> Result<(CouponView, Vec<Coupon>), CouponError> {
    let bulk = find(services, ctx, code).await?;
    if !bulk.is_bulk() {
        return Err(CouponError::Generate("Coupon must be of type bulk to generate unique codes"));
    }
    if !(1..=MAX_GENERATE).contains(&count) {
        return Err(CouponError::Generate("You are limited to generating 200 at a time"));
    }
    if bulk.coupon.unique_codes_count + count > MAX_UNIQUE_CODES {
        return Err(CouponError::Generate("You can only generate a total of 100000 codes"));
    }
    let template = bulk
        .coupon
        .terms
        .unique_code_template
        .as_deref()
        .and_then(|t| CodeTemplate::parse(t, &bulk.coupon.coupon_code).ok())
        .ok_or(CouponError::Generate("Coupon must be of type bulk to generate unique codes"))?;
    let wanted = usize::try_from(count).unwrap_or(0);
    if template.capacity() < (bulk.coupon.unique_codes_count + count).unsigned_abs().saturating_mul(4) {
        return Err(CouponError::Generate("The unique code template cannot make that many more codes"));
    }
    for _attempt in 0..5 {
        let mut codes: Vec<String> = Vec::with_capacity(wanted);
        let mut guard = 0;
        while codes.len() < wanted && guard < wanted * 20 {
            guard += 1;
            let mut random = vec![0u8; template.slots()];
            getrandom::fill(&mut random).map_err(|e| StoreError::Invalid(format!("random source: {e}")))?;
            let candidate = template.make(&random);
            if !codes.contains(&candidate) {
                codes.push(candidate);
            }
        }
        let taken = services.store.taken_codes(ctx.site.id, &codes).await?;
        codes.retain(|c| !taken.contains(c));
        if codes.len() < wanted {
            continue;
        }
        let event =
            events::new(services, COUPON_CODES_GENERATED, ctx.now, json!({ "coupon_code": code, "count": count }));
        match services.store.add_unique_codes(&bulk.coupon, &codes, ctx.now, &[event]).await {
            Ok(made) => {
                let bulk = find(services, ctx, code).await?;
                return Ok((bulk, made));
            }
            Err(StoreError::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(CouponError::Generate("unique code creation is in progress, please wait and try again"))
}

/// A page of a bulk coupon's unique codes.
pub async fn unique_codes(
    services: &Services,
    ctx: &Context,
    code: &str,
    page: &PageRequest,
) -> Result<(CouponView, Page<CouponView>), CouponError> {
    let bulk = find(services, ctx, code).await?;
    let found = services.store.list_unique_codes(bulk.coupon.id, page).await?;
    let items =
        found.items.into_iter().map(|c| CouponView::of(c, Some(bulk.coupon.clone()), ctx.now)).collect::<Vec<_>>();
    Ok((bulk, Page { items, next: found.next, total: found.total }))
}

fn temporal_unit(name: &str) -> Option<TemporalUnit> {
    match name {
        "day" => Some(TemporalUnit::Day),
        "week" => Some(TemporalUnit::Week),
        "month" => Some(TemporalUnit::Month),
        "year" => Some(TemporalUnit::Year),
        _ => None,
    }
}

/// When a redemption of `terms` made at `at` lapses (temporal coupons).
fn expires_at(terms: &CouponTerms, at: i64) -> Option<i64> {
    if terms.duration != "temporal" {
        return None;
    }
    let unit = temporal_unit(terms.temporal_unit.as_deref()?)?;
    let amount = u32::try_from(terms.temporal_amount?).ok()?;
    discount::temporal_end(time(at)?, unit, amount).map(|t| t.timestamp())
}

/// Whether `terms` apply to plan `plan_code`.
pub(crate) fn applies_to_plan(terms: &CouponTerms, plan_code: &str) -> bool {
    terms.applies_to_all_plans || terms.plan_codes.iter().any(|c| c == plan_code)
}

/// What a redeem request asks.
#[derive(Debug, Clone, Default)]
pub struct RedeemRequest {
    pub account_code: String,
    pub currency: Option<String>,
    pub subscription_uuid: Option<String>,
}

/// Checks that `coupon` can be redeemed now (field names relative to `coupon`).
fn check_redeemable(coupon: &CouponView) -> Result<(), CouponError> {
    if coupon.is_bulk() {
        return Err(CouponError::refused("coupon_code", "invalid", "is a bulk coupon: redeem one of its unique codes"));
    }
    match coupon.state {
        CouponState::Redeemable => Ok(()),
        CouponState::Expired => Err(CouponError::refused("base", "expired", "Coupon is expired")),
        CouponState::MaxedOut => Err(CouponError::refused("base", "maxed_out", "Coupon has reached max redemptions")),
    }
}

/// The currency of a redemption: the one asked, else the only one of a fixed coupon, else the
/// site's first currency; a fixed coupon must have an amount in it.
fn currency_of(terms: &CouponTerms, asked: Option<&str>) -> Result<String, CouponError> {
    let currency = match asked {
        Some(c) if !c.trim().is_empty() => c.trim().to_ascii_uppercase(),
        _ => terms.discount_amounts.keys().next().cloned().unwrap_or_else(|| "USD".to_owned()),
    };
    if terms.discount_type == "dollars" && !terms.discount_amounts.contains_key(&currency) {
        return Err(CouponError::refused("currency", "invalid", "is not a currency of the coupon"));
    }
    Ok(currency)
}

async fn make_redemption(
    services: &Services,
    ctx: &Context,
    coupon: &CouponView,
    account: &Account,
    subscription_uuid: Option<String>,
    currency: String,
    replace: bool,
) -> Result<Redemption, CouponError> {
    let terms = coupon.terms();
    let new = NewRedemption {
        coupon_id: coupon.coupon.id,
        bulk_coupon_id: coupon.coupon.bulk_coupon_id,
        account_id: account.id,
        subscription_uuid,
        currency,
        expires_at: expires_at(terms, ctx.now),
        replace: replace && terms.redemption_resource == "account",
        used_up: terms.discount_type == "free_trial",
    };
    let event = events::new(
        services,
        REDEMPTION_CREATED,
        ctx.now,
        json!({ "account_code": account.account_code, "coupon_code": coupon.coupon.coupon_code }),
    );
    match services.store.redeem(&new, ctx.now, &[event]).await? {
        Redeemed::Made(r) => Ok(*r),
        Redeemed::MaxedOut => Err(CouponError::refused("base", "maxed_out", "Coupon has reached max redemptions")),
        Redeemed::MaxedOutForAccount => Err(CouponError::refused(
            "base",
            "maxed_out_for_account",
            "Coupon has reached max redemptions for this account",
        )),
    }
}

/// Redeems coupon `code` on an account (or one of its subscriptions).
pub async fn redeem(
    services: &Services,
    ctx: &Context,
    code: &str,
    request: &RedeemRequest,
) -> Result<RedemptionView, CouponError> {
    let coupon = find(services, ctx, code).await?;
    let account = services
        .store
        .account(ctx.site.id, &request.account_code)
        .await?
        .ok_or_else(|| CouponError::AccountNotFound(request.account_code.clone()))?;
    check_redeemable(&coupon)?;
    let terms = coupon.terms().clone();
    if terms.discount_type == "free_trial" {
        return Err(CouponError::refused(
            "base",
            "invalid",
            "Free trial coupons can only be redeemed when a subscription is created",
        ));
    }
    let subscription = match (&request.subscription_uuid, terms.redemption_resource.as_str()) {
        (None, "subscription") => {
            return Err(CouponError::refused("subscription", "must_be_present", "must be redeemed on a subscription"));
        }
        (Some(uuid), "subscription") => {
            let record = services
                .store
                .subscription(ctx.site.id, uuid)
                .await?
                .filter(|r| r.account_id == account.id)
                .ok_or_else(|| {
                CouponError::refused("subscription_uuid", "not_valid_for_redemption", "not valid for this coupon")
            })?;
            let loaded = Loaded::of(record).map_err(|e| StoreError::Invalid(e.to_string()))?;
            if !applies_to_plan(&terms, &loaded.sub.terms.plan_code)
                || !matches!(loaded.record.state.as_str(), "active" | "future" | "canceled" | "paused")
            {
                return Err(CouponError::refused(
                    "subscription_uuid",
                    "not_valid_for_redemption",
                    "not valid for this coupon",
                ));
            }
            Some(uuid.clone())
        }
        (_, _) => None,
    };
    let currency = currency_of(&terms, request.currency.as_deref())?;
    let redemption = make_redemption(services, ctx, &coupon, &account, subscription, currency, true).await?;
    Ok(redemption_view(services, &terms, redemption, ctx.now, None))
}

/// The coupons of a new subscription on `plan_code` in `currency` (checked, nothing written):
/// each must exist, be redeemable and apply to the plan (a fixed one in the currency). Field
/// names are the subscription's (`coupon_code`).
pub async fn for_new_subscription(
    services: &Services,
    ctx: &Context,
    codes: &[String],
    plan_code: &str,
    currency: &str,
) -> Result<Vec<CouponView>, CouponError> {
    let invalid = || CouponError::refused("coupon_code", "invalid", "is invalid");
    let mut out = Vec::new();
    for code in codes {
        let coupon = match find(services, ctx, code).await {
            Ok(c) => c,
            Err(CouponError::NotFound(_)) => return Err(invalid()),
            Err(e) => return Err(e),
        };
        let terms = coupon.terms();
        if check_redeemable(&coupon).is_err()
            || !applies_to_plan(terms, plan_code)
            || terms.discount_type == "dollars" && !terms.discount_amounts.contains_key(currency)
        {
            return Err(invalid());
        }
        out.push(coupon);
    }
    Ok(out)
}

/// The trial the first free-trial coupon among `coupons` gives (a week is seven days).
pub fn free_trial(coupons: &[CouponView]) -> Option<Interval> {
    let terms = coupons.iter().map(CouponView::terms).find(|t| t.discount_type == "free_trial")?;
    let amount = u32::try_from(terms.free_trial_amount?).ok()?;
    let (length, unit) = match terms.free_trial_unit.as_deref()? {
        "day" => (amount, IntervalUnit::Days),
        "week" => (amount.checked_mul(7)?, IntervalUnit::Days),
        "month" => (amount, IntervalUnit::Months),
        _ => return None,
    };
    Interval::new(length, unit).ok()
}

/// The coupon codes of a subscription request: `coupon_code`, then `coupon_codes`, each once.
pub fn requested(code: Option<&String>, codes: Option<&Vec<String>>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in code.into_iter().chain(codes.into_iter().flatten()) {
        let c = c.trim();
        if !c.is_empty() && !out.iter().any(|o| o == c) {
            out.push(c.to_owned());
        }
    }
    out
}

/// Redeems `codes` for a subscription being created (`uuid`) or changed, as
/// [`for_new_subscription`] checked them; answers the redemptions made (to take back when the
/// creation is refused). Field names are the subscription's.
pub async fn redeem_for_subscription(
    services: &Services,
    ctx: &Context,
    account: &Account,
    uuid: &str,
    codes: &[String],
    currency: &str,
) -> Result<Vec<i64>, CouponError> {
    let invalid = |_: &str| CouponError::refused("coupon_code", "invalid", "is invalid");
    redeem_all(services, ctx, account, codes, currency, |_| Some(uuid.to_owned()), invalid).await
}

/// Redeems `codes` for `account` in order (the first replacing the account's coupon, the others
/// stacking), a coupon redeemed on subscriptions tied to the subscription `subscription_of` names
/// for its terms; answers the redemptions made. When one is refused (`invalid` of its code) or
/// cannot be written, the redemptions made before it are taken back and nothing stays redeemed.
async fn redeem_all(
    services: &Services,
    ctx: &Context,
    account: &Account,
    codes: &[String],
    currency: &str,
    subscription_of: impl Fn(&CouponTerms) -> Option<String>,
    invalid: impl Fn(&str) -> CouponError,
) -> Result<Vec<i64>, CouponError> {
    let mut made = Vec::new();
    for (i, code) in codes.iter().enumerate() {
        let result = async {
            let coupon = find(services, ctx, code).await?;
            check_redeemable(&coupon)?;
            let terms = coupon.terms();
            let subscription = (terms.redemption_resource == "subscription").then(|| subscription_of(terms)).flatten();
            make_redemption(services, ctx, &coupon, account, subscription, currency.to_owned(), i == 0).await
        }
        .await;
        match result {
            Ok(r) => made.push(r.id),
            Err(e) => {
                services.store.discard_redemptions(&made).await?;
                return Err(match e {
                    CouponError::Store(e) => e.into(),
                    _ => invalid(code),
                });
            }
        }
    }
    Ok(made)
}

/// The coupons of a purchase (checked, nothing written): each must exist, be redeemable, apply
/// to one of the purchase's plans (`plan_codes`) or to its one-off charges, and hold an amount
/// in `currency` when fixed; a free-trial coupon needs a subscription it applies to. Field
/// names are the purchase's (`coupon_codes`).
pub async fn for_purchase(
    services: &Services,
    ctx: &Context,
    codes: &[String],
    plan_codes: &[String],
    has_one_off_charges: bool,
    currency: &str,
) -> Result<Vec<CouponView>, CouponError> {
    let invalid = |code: &str| CouponError::refused("coupon_codes", "invalid", format!("{code} is invalid"));
    let mut out = Vec::new();
    for code in codes {
        let coupon = match find(services, ctx, code).await {
            Ok(c) => c,
            Err(CouponError::NotFound(_)) => return Err(invalid(code)),
            Err(e) => return Err(e),
        };
        let terms = coupon.terms();
        let on_plans = plan_codes.iter().any(|p| applies_to_plan(terms, p));
        let applies = on_plans || (has_one_off_charges && terms.applies_to_non_plan_charges);
        if check_redeemable(&coupon).is_err()
            || !applies
            || (terms.discount_type == "free_trial" && !on_plans)
            || terms.discount_type == "dollars" && !terms.discount_amounts.contains_key(currency)
        {
            return Err(invalid(code));
        }
        out.push(coupon);
    }
    Ok(out)
}

/// Redeems the purchase's `codes` (checked by [`for_purchase`]) for `account`: a coupon redeemed
/// on subscriptions is tied to the first of `subscriptions` (uuid, plan code) it applies to, any
/// other to the account (the first code replacing the account's coupon, the others stacking).
/// Answers the redemptions made, to take back when the purchase is refused.
pub async fn redeem_for_purchase(
    services: &Services,
    ctx: &Context,
    account: &Account,
    codes: &[String],
    subscriptions: &[(String, String)],
    currency: &str,
) -> Result<Vec<i64>, CouponError> {
    let first_on = |terms: &CouponTerms| {
        subscriptions.iter().find(|(_, plan)| applies_to_plan(terms, plan)).map(|(uuid, _)| uuid.clone())
    };
    let invalid = |code: &str| CouponError::refused("coupon_codes", "invalid", format!("{code} is invalid"));
    redeem_all(services, ctx, account, codes, currency, first_on, invalid).await
}

/// Checks and redeems `codes` on an existing subscription before a change with
/// `timeframe=now` (field names are the subscription's).
pub async fn redeem_on_subscription(
    services: &Services,
    ctx: &Context,
    uuid: &str,
    codes: &[String],
) -> Result<Vec<i64>, CouponError> {
    let record = services
        .store
        .subscription(ctx.site.id, uuid)
        .await?
        .ok_or_else(|| CouponError::SubscriptionNotFound(uuid.to_owned()))?;
    let account_id = record.account_id;
    let loaded = Loaded::of(record).map_err(|e| StoreError::Invalid(e.to_string()))?;
    let account = services
        .store
        .account(ctx.site.id, &loaded.details.account_code)
        .await?
        .filter(|a| a.id == account_id)
        .ok_or_else(|| CouponError::AccountNotFound(loaded.details.account_code.clone()))?;
    for_change(services, ctx, codes, &loaded.sub.terms.plan_code, &loaded.sub.terms.currency).await?;
    redeem_for_subscription(services, ctx, &account, uuid, codes, &loaded.sub.terms.currency).await
}

/// The coupons of a change of a subscription on `plan_code` in `currency` (checked, nothing
/// written): as for a new subscription ([`for_new_subscription`]), except that a free-trial
/// coupon is refused (a running subscription's trial is not started again). A change and its
/// preview check them alike.
pub async fn for_change(
    services: &Services,
    ctx: &Context,
    codes: &[String],
    plan_code: &str,
    currency: &str,
) -> Result<Vec<CouponView>, CouponError> {
    let coupons = for_new_subscription(services, ctx, codes, plan_code, currency).await?;
    if coupons.iter().any(|c| c.terms().discount_type == "free_trial") {
        return Err(CouponError::refused("coupon_code", "invalid", "is invalid"));
    }
    Ok(coupons)
}

/// Takes back the redemptions of a refused creation.
pub async fn discard(services: &Services, ids: &[i64]) -> Result<(), StoreError> {
    if ids.is_empty() {
        return Ok(());
    }
    services.store.discard_redemptions(ids).await
}

fn redemption_view(
    _services: &Services,
    terms: &CouponTerms,
    redemption: Redemption,
    now: i64,
    invoice_number: Option<i64>,
) -> RedemptionView {
    let active = redemption.state == "active" && redemption.expires_at.is_none_or(|e| e > now);
    RedemptionView { single_use: terms.duration == "single_use", active, invoice_number, redemption }
}

/// Views of `redemptions`, with their coupons' terms and first invoices.
async fn views(
    services: &Services,
    ctx: &Context,
    redemptions: Vec<Redemption>,
) -> Result<Vec<RedemptionView>, CouponError> {
    let mut terms: HashMap<i64, CouponTerms> = HashMap::new();
    let mut out = Vec::with_capacity(redemptions.len());
    for r in redemptions {
        if let std::collections::hash_map::Entry::Vacant(slot) = terms.entry(r.coupon_id) {
            let coupon = services
                .store
                .coupon_by_id(r.coupon_id)
                .await?
                .ok_or_else(|| CouponError::NotFound(r.coupon_code.clone()))?;
            let v = view(services, ctx, coupon).await?;
            slot.insert(v.terms().clone());
        }
        let invoice = match services.store.redemption_invoice_ids(r.id).await?.first() {
            Some(id) => services.store.invoice_by_id(*id).await?.map(|i| i.invoice_number),
            None => None,
        };
        let t = &terms[&r.coupon_id];
        out.push(redemption_view(services, t, r, ctx.now, invoice));
    }
    Ok(out)
}

async fn account_of(services: &Services, ctx: &Context, code: &str) -> Result<Account, CouponError> {
    services.store.account(ctx.site.id, code).await?.ok_or_else(|| CouponError::AccountNotFound(code.to_owned()))
}

/// The account's redemptions as its list shows them: active ones and lapsed temporal ones, not
/// removed ones nor used single-use ones (nor replaced ones), newest first.
pub async fn account_redemptions(
    services: &Services,
    ctx: &Context,
    code: &str,
) -> Result<Vec<RedemptionView>, CouponError> {
    let account = account_of(services, ctx, code).await?;
    let all = services.store.account_redemptions(account.id).await?;
    let mut shown = views(services, ctx, all).await?;
    shown.retain(|v| v.active || v.redemption.expires_at.is_some_and(|e| e <= ctx.now));
    shown.reverse();
    Ok(shown)
}

/// The account's most recent redemption (the legacy single `redemption`).
pub async fn latest_account_redemption(
    services: &Services,
    ctx: &Context,
    code: &str,
) -> Result<RedemptionView, CouponError> {
    let account = account_of(services, ctx, code).await?;
    let all = services.store.account_redemptions(account.id).await?;
    let last = all.into_iter().next_back().ok_or_else(|| CouponError::RedemptionNotFound(String::new()))?;
    Ok(views(services, ctx, vec![last]).await?.remove(0))
}

/// Removes the account's redemption `uuid` (it still counts towards the coupon's limits).
pub async fn remove_redemption(services: &Services, ctx: &Context, code: &str, uuid: &str) -> Result<(), CouponError> {
    let account = account_of(services, ctx, code).await?;
    let redemption = services
        .store
        .redemption(ctx.site.id, uuid)
        .await?
        .filter(|r| r.account_id == account.id && r.removed_at.is_none())
        .ok_or_else(|| CouponError::RedemptionNotFound(uuid.to_owned()))?;
    let event = events::new(services, REDEMPTION_REMOVED, ctx.now, json!({ "account_code": code }));
    services.store.remove_redemption(redemption.id, ctx.now, &[event]).await?;
    Ok(())
}

/// The redemptions that discounted invoice `number`.
pub async fn invoice_redemptions(
    services: &Services,
    ctx: &Context,
    number: i64,
) -> Result<Vec<RedemptionView>, AppError> {
    let invoice = services
        .store
        .invoice(ctx.site.id, number)
        .await?
        .ok_or_else(|| AppError::NotFound(Missing::invoice(&number.to_string())))?;
    let found = services.store.invoice_redemptions(invoice.id).await?;
    Ok(views(services, ctx, found).await?)
}

/// The active redemptions tied to subscription `uuid`.
pub async fn subscription_redemptions(
    services: &Services,
    ctx: &Context,
    uuid: &str,
) -> Result<Vec<RedemptionView>, AppError> {
    services
        .store
        .subscription(ctx.site.id, uuid)
        .await?
        .ok_or_else(|| AppError::NotFound(Missing::subscription(uuid)))?;
    let found = services.store.subscription_redemptions(uuid).await?;
    let mut shown = views(services, ctx, found).await?;
    shown.retain(|v| v.active);
    Ok(shown)
}

/// Every redemption of coupon `code` (a bulk coupon: of its unique codes).
pub async fn coupon_redemptions(
    services: &Services,
    ctx: &Context,
    code: &str,
) -> Result<Vec<RedemptionView>, CouponError> {
    let coupon = find(services, ctx, code).await?;
    let found = services.store.coupon_redemptions(coupon.coupon.id).await?;
    views(services, ctx, found).await
}

// ---------------------------------------------------------------------------------------------
// Discounts on invoices

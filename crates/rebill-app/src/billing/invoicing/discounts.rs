//! Discounts: the account's active redemptions applied to a previewed charge invoice as it is
//! made (and to the previews of subscriptions and purchases), with what each redemption gave.
//! The coupons and redemptions themselves are [`crate::catalog::coupons`]; the arithmetic is
//! `rebill_billing::discount`.

use std::collections::{BTreeMap, HashMap};

use rebill_billing::discount::{self, ChargeKind, Discount, Scope};
use rebill_store::StoreError;
use rebill_store::accounts::Account;
use rebill_store::coupons::{CouponTerms, Redemption, RedemptionUse};
use rebill_store::events::NewEvent;
use rebill_store::invoices::{AdjustmentKind, InvoiceKind};
use serde_json::json;

use super::Preview;
use crate::catalog::coupons::{CouponView, INVOICE_DISCOUNTED, applies_to_plan};
use crate::platform::events;
use crate::platform::subscription_documents::Loaded;
use crate::{Context, Services};

/// The redemptions of an account an invoice made at `at` uses, with their terms, oldest first;
/// answers also those that lapsed (temporal ones past their window).
async fn usable(
    services: &Services,
    account_id: i64,
    at: i64,
) -> Result<(Vec<(Redemption, CouponTerms)>, Vec<i64>), StoreError> {
    let mut usable = Vec::new();
    let mut lapsed = Vec::new();
    let mut terms: HashMap<i64, CouponTerms> = HashMap::new();
    for r in services.store.active_redemptions(account_id).await? {
        if r.expires_at.is_some_and(|e| e <= at) {
            lapsed.push(r.id);
            continue;
        }
        if let std::collections::hash_map::Entry::Vacant(slot) = terms.entry(r.coupon_id) {
            let Some(coupon) = services.store.coupon_by_id(r.coupon_id).await? else { continue };
            let t = match coupon.bulk_coupon_id {
                Some(id) => services.store.coupon_by_id(id).await?.map_or(coupon.terms, |b| b.terms),
                None => coupon.terms,
            };
            slot.insert(t);
        }
        let t = terms[&r.coupon_id].clone();
        usable.push((r, t));
    }
    Ok((usable, lapsed))
}

/// Applies the account's active redemptions to a previewed charge invoice (its lines: the
/// engine's, the new one-off lines at `one_off`, then the `pending` adjustments taken): each
/// line's `discount` and `total`, and the invoice's discount, subtotal after discount, total and
/// balance. The new one-off lines (a one-off transaction's charge, charged as asked) are not
/// discounted. Answers the redemptions' use to record with the invoice (empty: nothing to
/// record).
pub async fn discount(
    services: &Services,
    account: &Account,
    preview: &mut Preview,
    one_off: std::ops::Range<usize>,
    at: i64,
) -> Result<Vec<RedemptionUse>, StoreError> {
    if preview.invoice.kind != InvoiceKind::Charge {
        return Ok(Vec::new());
    }
    let (usable, lapsed) = usable(services, account.id, at).await?;
    let mut uses: Vec<RedemptionUse> =
        lapsed.into_iter().map(|id| RedemptionUse { redemption_id: id, discount: 0, inactive: true }).collect();
    uses.extend(apply(services, account.site_id, preview, one_off, &usable).await?);
    Ok(uses)
}

/// A purchase preview discounted as the purchase would be (nothing written): the account's
/// usable redemptions (an existing account's; without its account-level ones when the purchase
/// names coupons, as the first of them replaces them) and the purchase's `coupons`, redeemed as
/// [`redeem_for_purchase`](crate::catalog::coupons::redeem_for_purchase) would redeem them on `subscriptions` (uuid, plan code).
pub async fn discount_purchase_preview(
    services: &Services,
    ctx: &Context,
    account: Option<&Account>,
    preview: &mut Preview,
    coupons: &[CouponView],
    subscriptions: &[(String, String)],
) -> Result<(), StoreError> {
    if preview.invoice.kind != InvoiceKind::Charge {
        return Ok(());
    }
    let mut usable = match account {
        Some(a) => usable(services, a.id, ctx.now).await?.0,
        None => Vec::new(),
    };
    // As the redemption does: a first code redeemed on the account replaces the account's coupon
    // (its account-level redemptions); codes redeemed on subscriptions stack.
    if coupons.first().is_some_and(|c| c.terms().redemption_resource == "account") {
        usable.retain(|(r, _)| r.subscription_uuid.is_some());
    }
    for coupon in coupons {
        let terms = coupon.terms().clone();
        let subscription_uuid = (terms.redemption_resource == "subscription")
            .then(|| subscriptions.iter().find(|(_, plan)| applies_to_plan(&terms, plan)).map(|(u, _)| u.clone()))
            .flatten();
        let unsaved = Redemption {
            id: 0,
            uuid: String::new(),
            site_id: ctx.site.id,
            coupon_id: coupon.coupon.id,
            coupon_code: coupon.coupon.coupon_code.clone(),
            account_id: account.map_or(0, |a| a.id),
            account_code: String::new(),
            subscription_uuid,
            currency: preview.invoice.currency.clone(),
            state: "active".to_owned(),
            total_discounted: 0,
            expires_at: None,
            removed_at: None,
            created_at: ctx.now,
            updated_at: ctx.now,
        };
        usable.push((unsaved, terms));
    }
    apply(services, ctx.site.id, preview, 0..0, &usable).await?;
    Ok(())
}

/// Discounts `preview` by the `usable` redemptions; answers what each gave.
async fn apply(
    services: &Services,
    site_id: i64,
    preview: &mut Preview,
    one_off: std::ops::Range<usize>,
    usable: &[(Redemption, CouponTerms)],
) -> Result<Vec<RedemptionUse>, StoreError> {
    let mut uses = Vec::new();
    if usable.is_empty() {
        return Ok(uses);
    }
    // The plan of each subscription on the invoice.
    let mut plans: BTreeMap<String, String> = BTreeMap::new();
    for line in &preview.lines {
        if let (Some(uuid), Some(engine)) = (&line.subscription_uuid, &line.engine)
            && matches!(engine.item_kind.as_str(), "plan" | "setup_fee")
        {
            plans.insert(uuid.clone(), engine.item_code.clone());
        }
    }
    for line in &preview.lines {
        if let Some(uuid) = &line.subscription_uuid
            && !plans.contains_key(uuid)
            && let Some(record) = services.store.subscription(site_id, uuid).await?
            && let Ok(loaded) = Loaded::of(record)
        {
            plans.insert(uuid.clone(), loaded.sub.terms.plan_code.clone());
        }
    }
    let charges: Vec<discount::Charge> = preview
        .lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let amount = if line.kind == AdjustmentKind::Credit || one_off.contains(&i) {
                -line.total.abs()
            } else {
                line.total
            };
            match (&line.subscription_uuid, &line.engine) {
                (Some(uuid), Some(engine)) => discount::Charge {
                    kind: if engine.item_kind == "setup_fee" { ChargeKind::SetupFee } else { ChargeKind::Recurring },
                    amount,
                    subscription: Some(uuid.clone()),
                    plan_code: plans.get(uuid).cloned(),
                },
                _ => discount::Charge::one_time(amount),
            }
        })
        .collect();
    let currency = preview.invoice.currency.clone();
    let redeemed: Vec<discount::Redeemed> = usable
        .iter()
        .map(|(r, t)| discount::Redeemed {
            discount: match t.discount_type.as_str() {
                "percent" => Discount::Percent(u32::try_from(t.discount_percent.unwrap_or(0)).unwrap_or(0)),
                "dollars" => Discount::Fixed(t.discount_amounts.get(&currency).copied().unwrap_or(0)),
                _ => Discount::FreeTrial,
            },
            scope: match &r.subscription_uuid {
                Some(uuid) => Scope::Subscription(uuid.clone()),
                None => Scope::Account,
            },
            plans: (!t.applies_to_all_plans).then(|| t.plan_codes.clone()),
            non_plan_charges: t.applies_to_non_plan_charges,
        })
        .collect();
    let spread = discount::spread(&charges, &redeemed);
    for (line, d) in preview.lines.iter_mut().zip(&spread.per_charge) {
        line.discount = *d;
        line.total -= d;
    }
    let total_discount = spread.total();
    let amounts = &mut preview.invoice.amounts;
    amounts.discount = total_discount;
    amounts.subtotal_after_discount = amounts.subtotal_before_discount - total_discount;
    amounts.total = amounts.subtotal_after_discount + amounts.tax;
    amounts.balance = amounts.total - amounts.paid;
    for ((r, t), given) in usable.iter().zip(&spread.per_redemption) {
        if *given > 0 {
            uses.push(RedemptionUse { redemption_id: r.id, discount: *given, inactive: t.duration == "single_use" });
        }
    }
    Ok(uses)
}

/// The `invoice.discounted` event of an invoice's redemption use.
pub fn discounted_event(services: &Services, account_code: &str, uses: &[RedemptionUse], at: i64) -> NewEvent {
    let used: Vec<_> = uses
        .iter()
        .map(|u| json!({ "redemption_id": u.redemption_id, "discount_in_cents": u.discount, "inactive": u.inactive }))
        .collect();
    events::new(services, INVOICE_DISCOUNTED, at, json!({ "account_code": account_code, "redemptions": used }))
}

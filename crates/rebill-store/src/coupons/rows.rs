//! How coupons and redemptions are read from a row: the column lists, the row readers, the
//! stored form of per-currency amounts and the coupon list's state condition.

use std::collections::BTreeMap;

use crate::db::DbRow;
use crate::list::{Arg, Conditions};
use crate::{StoreError, get_flag};

use super::{Coupon, CouponStateFilter, CouponTerms, Redemption};

pub(super) const COUPON_COLUMNS: &str = "id, site_id, coupon_code, bulk_coupon_id, name, description, invoice_description, \
     discount_type, discount_percent, discount_amounts, free_trial_amount, free_trial_unit, duration, temporal_unit, \
     temporal_amount, applies_to_all_plans, plan_codes, applies_to_non_plan_charges, redemption_resource, \
     max_redemptions, max_redemptions_per_account, redeem_by_date, coupon_type, unique_code_template, \
     redemptions_count, unique_codes_count, redeemed_at, expired_at, created_at, updated_at";

pub(super) const REDEMPTION_COLUMNS: &str = "id, uuid, site_id, coupon_id, \
     (SELECT coupon_code FROM coupons c WHERE c.id = redemptions.coupon_id) AS coupon_code, account_id, \
     (SELECT account_code FROM accounts a WHERE a.id = redemptions.account_id) AS account_code, subscription_uuid, \
     currency, state, total_discounted, expires_at, removed_at, created_at, updated_at";

pub(super) fn encode_amounts(amounts: &BTreeMap<String, i64>) -> String {
    amounts.iter().map(|(c, a)| format!("{c}:{a}")).collect::<Vec<_>>().join(",")
}

pub(super) fn decode_amounts(text: &str) -> Result<BTreeMap<String, i64>, StoreError> {
    text.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (c, a) = p.split_once(':').ok_or_else(|| StoreError::Invalid(format!("stored amount `{p}`")))?;
            let a = a.parse().map_err(|_| StoreError::Invalid(format!("stored amount `{p}`")))?;
            Ok((c.to_owned(), a))
        })
        .collect()
}

pub(super) fn coupon_from_row(row: &DbRow) -> Result<Coupon, StoreError> {
    let plan_codes: String = row.try_get("plan_codes")?;
    Ok(Coupon {
        id: row.try_get("id")?,
        site_id: row.try_get("site_id")?,
        coupon_code: row.try_get("coupon_code")?,
        bulk_coupon_id: row.try_get("bulk_coupon_id")?,
        terms: CouponTerms {
            name: row.try_get("name")?,
            description: row.try_get("description")?,
            invoice_description: row.try_get("invoice_description")?,
            discount_type: row.try_get("discount_type")?,
            discount_percent: row.try_get("discount_percent")?,
            discount_amounts: decode_amounts(&row.try_get::<String, _>("discount_amounts")?)?,
            free_trial_amount: row.try_get("free_trial_amount")?,
            free_trial_unit: row.try_get("free_trial_unit")?,
            duration: row.try_get("duration")?,
            temporal_unit: row.try_get("temporal_unit")?,
            temporal_amount: row.try_get("temporal_amount")?,
            applies_to_all_plans: get_flag(row, "applies_to_all_plans")?,
            plan_codes: plan_codes.split(',').filter(|c| !c.is_empty()).map(str::to_owned).collect(),
            applies_to_non_plan_charges: get_flag(row, "applies_to_non_plan_charges")?,
            redemption_resource: row.try_get("redemption_resource")?,
            max_redemptions: row.try_get("max_redemptions")?,
            max_redemptions_per_account: row.try_get("max_redemptions_per_account")?,
            redeem_by_date: row.try_get("redeem_by_date")?,
            coupon_type: row.try_get("coupon_type")?,
            unique_code_template: row.try_get("unique_code_template")?,
        },
        redemptions_count: row.try_get("redemptions_count")?,
        unique_codes_count: row.try_get("unique_codes_count")?,
        redeemed_at: row.try_get("redeemed_at")?,
        expired_at: row.try_get("expired_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

pub(super) fn redemption_from_row(row: &DbRow) -> Result<Redemption, StoreError> {
    Ok(Redemption {
        id: row.try_get("id")?,
        uuid: row.try_get("uuid")?,
        site_id: row.try_get("site_id")?,
        coupon_id: row.try_get("coupon_id")?,
        coupon_code: row.try_get("coupon_code")?,
        account_id: row.try_get("account_id")?,
        account_code: row.try_get("account_code")?,
        subscription_uuid: row.try_get("subscription_uuid")?,
        currency: row.try_get("currency")?,
        state: row.try_get("state")?,
        total_discounted: row.try_get("total_discounted")?,
        expires_at: row.try_get("expires_at")?,
        removed_at: row.try_get("removed_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// The `state` condition of the coupon list at `now` (site clock).
pub(super) fn state_condition(conditions: &mut Conditions, state: CouponStateFilter, now: i64) {
    let n = conditions.arg(Arg::Int(now));
    let expired = format!("(expired_at IS NOT NULL OR (redeem_by_date IS NOT NULL AND redeem_by_date <= {n}))");
    let maxed = "(max_redemptions IS NOT NULL AND redemptions_count >= max_redemptions)";
    conditions.push(match state {
        CouponStateFilter::Expired => expired,
        CouponStateFilter::MaxedOut => format!("NOT {expired} AND {maxed}"),
        CouponStateFilter::Redeemable => format!("NOT {expired} AND NOT {maxed}"),
    });
}

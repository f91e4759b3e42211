//! Coupon and redemption endpoints: `/v2/coupons` (list with `state`, create, get, update,
//! expire, restore, generate and list unique codes, redeem, the coupon's redemptions) and the
//! redemptions of accounts, invoices and subscriptions.
//!
//! Choices where the spec is silent (see `docs/coupons.md`):
//! - `description` and `hosted_description` are both read (`description` wins); responses carry
//!   `description` only.
//! - Anchors: `redeem` on a redeemable single-code coupon or unique code, `generate` on a bulk
//!   coupon that is not expired, `restore` on any coupon that is not redeemable.
//! - An unknown coupon is 404 everywhere (also on redeem).
//! - Redemption lists are answered in one page.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use rebill_app::catalog::coupons::{
    self, CouponEdit, CouponError, CouponState as AppState_, CouponStateFilter, CouponTerms, CouponView, RedeemRequest,
    RedemptionView,
};
use rebill_app::platform::model::Position;
use rebill_models::api::{self, EndpointId};
use rebill_models::validate::{Operation, Rejection, Validate, Validation};
use rebill_models::{
    Coupon, CouponDiscountType, CouponDuration, CouponFreeTrialUnit, CouponRedemptionResource, CouponState,
    CouponTemporalUnit, CouponType, Redemption, RedemptionState,
};
use rebill_xml::{Money, WireContext, XmlResource};

use crate::lists::{ListQuery, encode_cursor, invalid_choice};
use crate::request::{Routed, href, validated};
use crate::respond;
use crate::respond::{time, with_location};
use crate::state::AppState;

/// Values of the coupon list's `state` filter.
const STATE_FILTER: [&str; 3] = ["redeemable", "expired", "maxed_out"];

/// The answer to a refused coupon operation: 400 for the refusals with a symbol of their own,
/// else by kind (422 fields under `coupon`, 404 naming what is missing).
fn coupon_error(ctx: &WireContext, e: CouponError) -> Response {
    match e {
        e @ CouponError::AttributesNotAllowed(_) => {
            respond::error(StatusCode::BAD_REQUEST, "attributes_not_allowed", &e.to_string())
        }
        e @ CouponError::ActiveCoupon => respond::error(StatusCode::BAD_REQUEST, "active_coupon", &e.to_string()),
        CouponError::Generate(message) => respond::error(StatusCode::BAD_REQUEST, "number_of_unique_codes", message),
        e => respond::app_error(ctx, "coupon", e.into()),
    }
}

/// The coupon as the API shows it.
fn view(v: &CouponView) -> Coupon {
    let code = v.coupon.coupon_code.as_str();
    let t = v.terms();
    let bulk = v.is_bulk();
    let unique = v.is_unique_code();
    let percent = t.discount_type == "percent";
    let dollars = t.discount_type == "dollars";
    let free_trial = t.discount_type == "free_trial";
    let temporal = t.duration == "temporal";
    Coupon {
        redemptions: Some(href(EndpointId::ListCouponRedemptions, &[code])),
        unique_coupon_codes: bulk.then(|| href(EndpointId::ListUniqueCouponCodes, &[code])),
        bulk_coupon: v.bulk.as_ref().map(|b| href(EndpointId::GetCoupon, &[&b.coupon_code])),
        redemption: None,
        id: Some(v.coupon.id),
        coupon_code: Some(code.to_owned()),
        name: Some(t.name.clone()),
        state: Some(match v.state {
            AppState_::Redeemable => CouponState::Redeemable,
            AppState_::Expired => CouponState::Expired,
            AppState_::MaxedOut => CouponState::MaxedOut,
        }),
        description: t.description.clone(),
        invoice_description: t.invoice_description.clone(),
        hosted_description: None,
        discount_type: CouponDiscountType::from_name(&t.discount_type),
        discount_percent: if percent { t.discount_percent } else { None },
        discount_in_cents: dollars.then(|| Money(t.discount_amounts.iter().map(|(c, a)| (c.clone(), *a)).collect())),
        free_trial_amount: if free_trial { t.free_trial_amount } else { None },
        free_trial_unit: if free_trial {
            t.free_trial_unit.as_deref().and_then(CouponFreeTrialUnit::from_name)
        } else {
            None
        },
        redeem_by_date: t.redeem_by_date.and_then(time),
        single_use: Some(t.duration == "single_use"),
        applies_for_months: None,
        duration: CouponDuration::from_name(&t.duration),
        temporal_unit: if temporal { t.temporal_unit.as_deref().and_then(CouponTemporalUnit::from_name) } else { None },
        temporal_amount: if temporal { t.temporal_amount } else { None },
        max_redemptions: if unique { Some(1) } else { t.max_redemptions },
        max_redemptions_per_account: t.max_redemptions_per_account,
        applies_to_all_plans: Some(t.applies_to_all_plans),
        applies_to_non_plan_charges: Some(t.applies_to_non_plan_charges),
        redemption_resource: CouponRedemptionResource::from_name(&t.redemption_resource),
        coupon_type: CouponType::from_name(if unique { "unique_code" } else { &v.coupon.terms.coupon_type }),
        unique_code_template: if bulk { t.unique_code_template.clone() } else { None },
        unique_coupon_codes_count: bulk.then_some(v.coupon.unique_codes_count),
        redeemed_at: if unique { v.coupon.redeemed_at.and_then(time) } else { None },
        created_at: time(v.coupon.created_at),
        updated_at: time(v.coupon.updated_at),
        deleted_at: v.coupon.expired_at.and_then(time),
        number_of_unique_codes: None,
        plan_codes: (!t.applies_to_all_plans).then(|| t.plan_codes.clone()),
        redeem_action: (v.state == AppState_::Redeemable && !bulk).then(|| href(EndpointId::RedeemCoupon, &[code])),
        restore_action: (v.state != AppState_::Redeemable).then(|| href(EndpointId::RestoreCoupon, &[code])),
        generate_action: (bulk && v.state != AppState_::Expired)
            .then(|| href(EndpointId::GenerateCouponCodes, &[code])),
    }
}

/// The redemption as the API shows it.
fn redemption_view(v: &RedemptionView) -> Redemption {
    let r = &v.redemption;
    Redemption {
        coupon: Some(href(EndpointId::GetCoupon, &[&r.coupon_code])),
        account: Some(href(EndpointId::GetAccount, &[&r.account_code])),
        subscription: r.subscription_uuid.as_deref().map(|u| href(EndpointId::GetSubscription, &[u])),
        invoice: v.invoice_number.map(|n| href(EndpointId::GetInvoice, &[&n.to_string()])),
        redeemed_by: Some(r.account_code.clone()),
        uuid: Some(r.uuid.clone()),
        single_use: Some(v.single_use),
        total_discounted_in_cents: Some(r.total_discounted),
        currency: Some(r.currency.clone()),
        state: Some(if v.active { RedemptionState::Active } else { RedemptionState::Inactive }),
        coupon_code: Some(r.coupon_code.clone()),
        subscription_uuid: r.subscription_uuid.clone(),
        created_at: time(r.created_at),
        updated_at: time(r.updated_at),
        account_code: None,
    }
}

/// The terms of a create request.
fn terms_of(c: &Coupon) -> CouponTerms {
    let duration = match (&c.duration, c.single_use) {
        (Some(d), _) => d.name().to_owned(),
        (None, Some(true)) => "single_use".to_owned(),
        (None, _) if c.applies_for_months.is_some() => "temporal".to_owned(),
        (None, _) => "forever".to_owned(),
    };
    let legacy_months = c.duration.is_none() && c.temporal_unit.is_none() && c.applies_for_months.is_some();
    CouponTerms {
        name: c.name.clone().unwrap_or_default(),
        description: c.description.clone().or_else(|| c.hosted_description.clone()),
        invoice_description: c.invoice_description.clone(),
        discount_type: c.discount_type.as_ref().map(|d| d.name().to_owned()).unwrap_or_default(),
        discount_percent: c.discount_percent,
        discount_amounts: c.discount_in_cents.as_ref().map(|m| m.0.iter().cloned().collect()).unwrap_or_default(),
        free_trial_amount: c.free_trial_amount,
        free_trial_unit: c.free_trial_unit.as_ref().map(|u| u.name().to_owned()),
        duration,
        temporal_unit: if legacy_months {
            Some("month".to_owned())
        } else {
            c.temporal_unit.as_ref().map(|u| u.name().to_owned())
        },
        temporal_amount: if legacy_months { c.applies_for_months } else { c.temporal_amount },
        applies_to_all_plans: c.applies_to_all_plans.unwrap_or(true),
        plan_codes: c.plan_codes.clone().unwrap_or_default(),
        applies_to_non_plan_charges: c.applies_to_non_plan_charges.unwrap_or(false),
        redemption_resource: c.redemption_resource.as_ref().map_or("account", |r| r.name()).to_owned(),
        max_redemptions: c.max_redemptions,
        max_redemptions_per_account: c.max_redemptions_per_account,
        redeem_by_date: c.redeem_by_date.map(|d| d.timestamp()),
        coupon_type: c.coupon_type.as_ref().map_or("single_code", |t| t.name()).to_owned(),
        unique_code_template: c.unique_code_template.clone(),
    }
}

/// The editable terms a request sends.
fn edit_of(c: &Coupon) -> CouponEdit {
    CouponEdit {
        name: c.name.clone(),
        description: c.description.clone().or_else(|| c.hosted_description.clone()).map(Some),
        invoice_description: c.invoice_description.clone().map(Some),
        redeem_by_date: c.redeem_by_date.map(|d| Some(d.timestamp())),
        max_redemptions: c.max_redemptions.map(Some),
        max_redemptions_per_account: c.max_redemptions_per_account.map(Some),
    }
}

/// The attributes an edit request sends that cannot change after create.
fn not_editable(c: &Coupon, code: &str) -> Vec<&'static str> {
    let sent = [
        ("coupon_code", c.coupon_code.as_deref().is_some_and(|c| c != code)),
        ("discount_type", c.discount_type.is_some()),
        ("discount_percent", c.discount_percent.is_some()),
        ("discount_in_cents", c.discount_in_cents.is_some()),
        ("free_trial_amount", c.free_trial_amount.is_some()),
        ("free_trial_unit", c.free_trial_unit.is_some()),
        ("single_use", c.single_use.is_some()),
        ("applies_for_months", c.applies_for_months.is_some()),
        ("duration", c.duration.is_some()),
        ("temporal_unit", c.temporal_unit.is_some()),
        ("temporal_amount", c.temporal_amount.is_some()),
        ("applies_to_all_plans", c.applies_to_all_plans.is_some()),
        ("applies_to_non_plan_charges", c.applies_to_non_plan_charges.is_some()),
        ("redemption_resource", c.redemption_resource.is_some()),
        ("coupon_type", c.coupon_type.is_some()),
        ("unique_code_template", c.unique_code_template.is_some()),
        ("plan_codes", c.plan_codes.is_some()),
        ("number_of_unique_codes", c.number_of_unique_codes.is_some()),
    ];
    sent.into_iter().filter(|(_, s)| *s).map(|(n, _)| n).collect()
}

/// `GET /v2/coupons` (and HEAD: the count), with the `state` filter.
pub(crate) async fn list(state: &AppState, call: &Routed<'_, api::ListCoupons>, query: Option<&str>) -> Response {
    let query = match ListQuery::parse(query, call.endpoint.filters) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    let filter = match query.filter("state") {
        None => None,
        Some("redeemable") => Some(CouponStateFilter::Redeemable),
        Some("expired") => Some(CouponStateFilter::Expired),
        Some("maxed_out") => Some(CouponStateFilter::MaxedOut),
        Some(other) => return invalid_choice("state", &STATE_FILTER, other).response(),
    };
    let page = match coupons::list(state, &call.context(), filter, &query.page()).await {
        Ok(page) => page,
        Err(e) => return coupon_error(&call.ctx.wire, e),
    };
    let items: Vec<Coupon> = if call.head { Vec::new() } else { page.items.iter().map(view).collect() };
    call.answer_page(&call.endpoint.render(&[]), &query, &items, page.next, page.total)
}

/// `POST /v2/coupons`: 201 with `Location`.
pub(crate) async fn create(state: &AppState, call: &Routed<'_, api::CreateCoupon>, request: Request) -> Response {
    let ctx = &call.ctx.wire;
    let doc = match call.decode(state, request).await {
        Ok(doc) => doc,
        Err(response) => return response,
    };
    let mut v = Validation::new(ctx, Operation::Create);
    doc.validate(&mut v, Coupon::ROOT);
    // (An absent code is refused by the schema's `required_on`; a blank one here.)
    if doc.coupon_code.as_ref().is_some_and(|c| c.trim().is_empty()) {
        v.add(Coupon::ROOT, "coupon_code", "blank", "can't be blank");
    }
    if doc.coupon_type.as_ref().is_some_and(|t| t.name() == "unique_code") {
        v.add(Coupon::ROOT, "coupon_type", "invalid", "unique codes are generated from bulk coupons");
    }
    if let Err(errors) = v.finish() {
        return respond::rejection(&Rejection::Invalid(errors), ctx);
    }
    let code = doc.coupon_code.clone().unwrap_or_default();
    match coupons::create(state, &call.context(), &code, terms_of(&doc)).await {
        Ok(c) => with_location(call.answer(&view(&c)), ctx, &EndpointId::GetCoupon.endpoint().render(&[&code])),
        Err(e) => coupon_error(ctx, e),
    }
}

/// `GET /v2/coupons/{coupon_code}` (a coupon or a unique code).
pub(crate) async fn get(state: &AppState, call: &Routed<'_, api::GetCoupon>) -> Response {
    match coupons::find(state, &call.context(), &call.params[0]).await {
        Ok(c) => call.answer(&view(&c)),
        Err(e) => coupon_error(&call.ctx.wire, e),
    }
}

/// `PUT /v2/coupons/{coupon_code}`: the editable terms of a redeemable coupon.
pub(crate) async fn update(state: &AppState, call: &Routed<'_, api::UpdateCoupon>, request: Request) -> Response {
    let ctx = &call.ctx.wire;
    let code = &call.params[0];
    let doc = match call.decode(state, request).await {
        Ok(doc) => doc,
        Err(response) => return response,
    };
    if let Err(response) = validated(call, &doc, Operation::Update) {
        return response;
    }
    match coupons::update(state, &call.context(), code, &edit_of(&doc), not_editable(&doc, code)).await {
        Ok(c) => call.answer(&view(&c)),
        Err(e) => coupon_error(ctx, e),
    }
}

/// `DELETE /v2/coupons/{coupon_code}`: expires it (204).
pub(crate) async fn delete(state: &AppState, call: &Routed<'_, api::DeleteCoupon>) -> Response {
    match coupons::expire(state, &call.context(), &call.params[0]).await {
        Ok(()) => call.answer_empty(),
        Err(e) => coupon_error(&call.ctx.wire, e),
    }
}

/// `PUT /v2/coupons/{coupon_code}/restore`: body of editable terms, `<coupon/>` or none.
pub(crate) async fn restore(state: &AppState, call: &Routed<'_, api::RestoreCoupon>, request: Request) -> Response {
    let ctx = &call.ctx.wire;
    let code = &call.params[0];
    let doc = match call.decode_optional(state, request).await {
        Ok(doc) => doc.unwrap_or_default(),
        Err(response) => return response,
    };
    if let Err(response) = validated(call, &doc, Operation::Update) {
        return response;
    }
    let not_allowed = not_editable(&doc, code);
    if !not_allowed.is_empty() {
        return coupon_error(ctx, CouponError::AttributesNotAllowed(not_allowed));
    }
    match coupons::restore(state, &call.context(), code, &edit_of(&doc)).await {
        Ok(c) => call.answer(&view(&c)),
        Err(e) => coupon_error(ctx, e),
    }
}

/// `POST /v2/coupons/{coupon_code}/generate`: 201 without a body, `Location` the unique-codes list
/// starting with the new codes.
pub(crate) async fn generate(
    state: &AppState,
    call: &Routed<'_, api::GenerateCouponCodes>,
    request: Request,
) -> Response {
    let ctx = &call.ctx.wire;
    let code = &call.params[0];
    let doc = match call.decode(state, request).await {
        Ok(doc) => doc,
        Err(response) => return response,
    };
    let Some(count) = doc.number_of_unique_codes else {
        return respond::field_error(ctx, "coupon.number_of_unique_codes", "blank", "can't be blank");
    };
    match coupons::generate(state, &call.context(), code, count).await {
        Ok((_, made)) => {
            let Some(last) = made.iter().max_by_key(|c| (c.created_at, c.id)) else {
                return respond::invariant(&"no unique code made");
            };
            let cursor = encode_cursor(Position { value: last.created_at, id: last.id + 1 });
            let path = format!(
                "{}?cursor={cursor}&per_page={}",
                EndpointId::ListUniqueCouponCodes.endpoint().render(&[code]),
                made.len()
            );
            with_location(call.answer_empty(), ctx, &path)
        }
        Err(e) => coupon_error(ctx, e),
    }
}

/// `GET /v2/coupons/{coupon_code}/unique_coupon_codes`: newest first.
pub(crate) async fn list_unique_codes(
    state: &AppState,
    call: &Routed<'_, api::ListUniqueCouponCodes>,
    query: Option<&str>,
) -> Response {
    let query = match ListQuery::parse(query, call.endpoint.filters) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    let code = &call.params[0];
    let (_, page) = match coupons::unique_codes(state, &call.context(), code, &query.page()).await {
        Ok(found) => found,
        Err(e) => return coupon_error(&call.ctx.wire, e),
    };
    let items: Vec<Coupon> = if call.head { Vec::new() } else { page.items.iter().map(view).collect() };
    call.answer_page(&call.endpoint.render(&[code]), &query, &items, page.next, page.total)
}

/// `POST /v2/coupons/{coupon_code}/redeem`: 201, `Location` the account's (singular) redemption.
pub(crate) async fn redeem(state: &AppState, call: &Routed<'_, api::RedeemCoupon>, request: Request) -> Response {
    let ctx = &call.ctx.wire;
    let doc = match call.decode(state, request).await {
        Ok(doc) => doc,
        Err(response) => return response,
    };
    if let Err(response) = validated(call, &doc, Operation::Create) {
        return response;
    }
    let Some(account_code) = doc.account_code.clone().filter(|c| !c.trim().is_empty()) else {
        return respond::field_error(ctx, "redemption.account_code", "blank", "can't be blank");
    };
    let request = RedeemRequest {
        account_code: account_code.clone(),
        currency: doc.currency.clone(),
        subscription_uuid: doc.subscription_uuid.clone(),
    };
    match coupons::redeem(state, &call.context(), &call.params[0], &request).await {
        Ok(r) => with_location(
            call.answer(&redemption_view(&r)),
            ctx,
            &EndpointId::GetAccountRedemption.endpoint().render(&[&account_code]),
        ),
        Err(e) => coupon_error(ctx, e),
    }
}

/// Answers a list of redemptions in one page.
fn redemption_page<E>(call: &Routed<'_, E>, query: Option<&str>, found: Vec<RedemptionView>) -> Response
where
    E: rebill_models::ApiEndpoint,
    E::Response: crate::lists::ListBody<Item = Redemption>,
{
    let query = match ListQuery::parse(query, call.endpoint.filters) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    let params: Vec<&str> = call.params.iter().map(String::as_str).collect();
    let total = i64::try_from(found.len()).unwrap_or(i64::MAX);
    let items: Vec<Redemption> = if call.head { Vec::new() } else { found.iter().map(redemption_view).collect() };
    call.answer_page(&call.endpoint.render(&params), &query, &items, None, total)
}

/// `GET /v2/coupons/{coupon_code}/redemptions`.
pub(crate) async fn list_coupon_redemptions(
    state: &AppState,
    call: &Routed<'_, api::ListCouponRedemptions>,
    query: Option<&str>,
) -> Response {
    match coupons::coupon_redemptions(state, &call.context(), &call.params[0]).await {
        Ok(found) => redemption_page(call, query, found),
        Err(e) => coupon_error(&call.ctx.wire, e),
    }
}

/// `GET /v2/accounts/{account_code}/redemptions`.
pub(crate) async fn list_account_redemptions(
    state: &AppState,
    call: &Routed<'_, api::ListAccountRedemptions>,
    query: Option<&str>,
) -> Response {
    match coupons::account_redemptions(state, &call.context(), &call.params[0]).await {
        Ok(found) => redemption_page(call, query, found),
        Err(e) => coupon_error(&call.ctx.wire, e),
    }
}

/// `GET /v2/accounts/{account_code}/redemption`: the most recent one.
pub(crate) async fn get_account_redemption(state: &AppState, call: &Routed<'_, api::GetAccountRedemption>) -> Response {
    match coupons::latest_account_redemption(state, &call.context(), &call.params[0]).await {
        Ok(r) => call.answer(&redemption_view(&r)),
        Err(e) => coupon_error(&call.ctx.wire, e),
    }
}

/// `DELETE /v2/accounts/{account_code}/redemptions/{uuid}` (204).
pub(crate) async fn delete_account_redemption(
    state: &AppState,
    call: &Routed<'_, api::DeleteAccountRedemption>,
) -> Response {
    match coupons::remove_redemption(state, &call.context(), &call.params[0], &call.params[1]).await {
        Ok(()) => call.answer_empty(),
        Err(e) => coupon_error(&call.ctx.wire, e),
    }
}

/// `GET /v2/invoices/{invoice_number}/redemptions`.
pub(crate) async fn list_invoice_redemptions(
    state: &AppState,
    call: &Routed<'_, api::ListInvoiceRedemptions>,
    query: Option<&str>,
) -> Response {
    let Ok(number) = call.params[0].parse::<i64>() else {
        return respond::missing(&rebill_app::platform::error::Missing::invoice(&call.params[0]));
    };
    match coupons::invoice_redemptions(state, &call.context(), number).await {
        Ok(found) => redemption_page(call, query, found),
        Err(e) => respond::app_error(&call.ctx.wire, "invoice", e),
    }
}

/// `GET /v2/subscriptions/{uuid}/redemptions`: the active subscription-level ones.
pub(crate) async fn list_subscription_redemptions(
    state: &AppState,
    call: &Routed<'_, api::ListSubscriptionRedemptions>,
    query: Option<&str>,
) -> Response {
    match coupons::subscription_redemptions(state, &call.context(), &call.params[0]).await {
        Ok(found) => redemption_page(call, query, found),
        Err(e) => respond::app_error(&call.ctx.wire, "subscription", e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_editable_attributes_may_be_sent_on_update() {
        let doc = Coupon {
            coupon_code: Some("save".into()),
            name: Some("n".into()),
            max_redemptions: Some(3),
            ..Coupon::default()
        };
        assert!(not_editable(&doc, "save").is_empty());
        let doc = Coupon { discount_type: Some(CouponDiscountType::Dollars), ..doc };
        assert_eq!(not_editable(&doc, "save"), vec!["discount_type"]);
        assert_eq!(not_editable(&doc, "other"), vec!["coupon_code", "discount_type"]);
    }

    #[test]
    fn hosted_description_is_read_as_the_description() {
        let doc = Coupon { hosted_description: Some("hosted".into()), ..Coupon::default() };
        assert_eq!(terms_of(&doc).description.as_deref(), Some("hosted"));
        let doc = Coupon { description: Some("own".into()), ..doc };
        assert_eq!(terms_of(&doc).description.as_deref(), Some("own"));
        let legacy = Coupon { applies_for_months: Some(3), ..Coupon::default() };
        let t = terms_of(&legacy);
        assert_eq!(
            (t.duration.as_str(), t.temporal_unit.as_deref(), t.temporal_amount),
            ("temporal", Some("month"), Some(3))
        );
    }
}

//! Plan and add-on endpoints: list, create, get, update and delete under `/v2/plans` and
//! `/v2/plans/{plan_code}/add_ons`.
//!
//! Choices where the spec is silent:
//! - Deleting keeps the record (`deleted_at`) for the subscriptions that refer to it; a deleted
//!   plan or add-on answers 404 everywhere on the API (get, update, delete again, its add-ons)
//!   and is left out of lists. Its code stays taken: creating it again is 422 `taken`.
//! - `plan_code` and `add_on_code` cannot change: a PUT may repeat the code, a different one is
//!   a 422. An add-on's `add_on_type` and `usage_type` are set on create and cannot change.
//! - A money element replaces the whole set of currencies when sent on update (a currency left
//!   out is dropped). Amounts are integer cents from 0 to 100,000,000 (one million in the
//!   currency's major unit). `unit_amount_in_cents` needs at least one currency; a plan without
//!   a setup fee in a currency has none there (an empty `setup_fee_in_cents` is allowed).
//!   Currencies are written in code order.
//! - Defaults of a new plan: billed every 1 month, trial of 0 days (none), renews until
//!   canceled, `trial_requires_billing_info` true, the other flags false, revenue schedules
//!   `evenly`. Of a new add-on: type `fixed`, name = its code, default quantity 1, optional,
//!   display flags false, revenue schedule `evenly`.
//! - Add-on rules: a fixed add-on and a usage add-on priced per unit (`usage_type` `price`)
//!   need `unit_amount_in_cents`, in currencies the plan is sold in; a usage add-on needs
//!   `usage_type`; a `percentage` one needs `usage_percentage` (0–100, at most four decimal
//!   places, stored exactly) and takes no amounts. `usage_type`, `usage_percentage` and
//!   `measured_unit_id` are refused on fixed add-ons.
//! - An empty request body is not a `<plan>` or `<add_on>` document: 400 `invalid_xml`.

use axum::extract::Request;
use axum::response::Response;
use rebill_app::catalog::plans::{self as catalog, CatalogError};
use rebill_app::platform::model::plans::{
    AddOn as StoredAddOn, AddOnFields, AddOnType as StoredAddOnType, Amounts, IntervalUnit as StoredUnit, Percentage,
    Plan as StoredPlan, PlanFields, RevenueScheduleType as StoredSchedule, UsageType as StoredUsageType,
};
use rebill_models::ApiEndpoint;
use rebill_models::api::{self, EndpointId};
use rebill_models::validate::{Operation, Rejection, Validate, Validation};
use rebill_models::{AddOn, AddOnType, IntervalUnit, Plan, RevenueScheduleType, UsageType};
use rebill_xml::{Href, Money, WireContext, XmlResource};

use crate::lists::ListQuery;
use crate::request::{Call, Routed};
use crate::respond;
use crate::respond::{field_error, time, with_location};
use crate::state::AppState;

/// Largest amount in cents (one million in the currency's major unit).
const MAX_CENTS: i64 = 100_000_000;

fn money(amounts: &Amounts) -> Money {
    Money(amounts.iter().map(|(currency, cents)| (currency.clone(), *cents)).collect())
}

fn amounts(money: &Money) -> Amounts {
    money.0.iter().cloned().collect()
}

fn interval_unit(unit: StoredUnit) -> IntervalUnit {
    match unit {
        StoredUnit::Days => IntervalUnit::Days,
        StoredUnit::Months => IntervalUnit::Months,
    }
}

fn schedule(s: StoredSchedule) -> RevenueScheduleType {
    match s {
        StoredSchedule::Never => RevenueScheduleType::Never,
        StoredSchedule::Evenly => RevenueScheduleType::Evenly,
        StoredSchedule::AtRangeStart => RevenueScheduleType::AtRangeStart,
        StoredSchedule::AtRangeEnd => RevenueScheduleType::AtRangeEnd,
    }
}

// Requests are decoded strictly, so `Unknown` values never reach these (they map to `None`).

fn stored_unit(unit: &Option<IntervalUnit>) -> Option<StoredUnit> {
    match unit {
        Some(IntervalUnit::Days) => Some(StoredUnit::Days),
        Some(IntervalUnit::Months) => Some(StoredUnit::Months),
        Some(IntervalUnit::Unknown(_)) | None => None,
    }
}

fn stored_schedule(s: &Option<RevenueScheduleType>) -> Option<StoredSchedule> {
    match s {
        Some(RevenueScheduleType::Never) => Some(StoredSchedule::Never),
        Some(RevenueScheduleType::Evenly) => Some(StoredSchedule::Evenly),
        Some(RevenueScheduleType::AtRangeStart) => Some(StoredSchedule::AtRangeStart),
        Some(RevenueScheduleType::AtRangeEnd) => Some(StoredSchedule::AtRangeEnd),
        Some(RevenueScheduleType::Unknown(_)) | None => None,
    }
}

fn stored_add_on_type(t: &Option<AddOnType>) -> Option<StoredAddOnType> {
    match t {
        Some(AddOnType::Fixed) => Some(StoredAddOnType::Fixed),
        Some(AddOnType::Usage) => Some(StoredAddOnType::Usage),
        Some(AddOnType::Unknown(_)) | None => None,
    }
}

fn stored_usage_type(t: &Option<UsageType>) -> Option<StoredUsageType> {
    match t {
        Some(UsageType::Price) => Some(StoredUsageType::Price),
        Some(UsageType::Percentage) => Some(StoredUsageType::Percentage),
        Some(UsageType::Unknown(_)) | None => None,
    }
}

/// The path of a plan's endpoint (`/v2/plans/{code}…`).
fn plan_path(id: EndpointId, code: &str) -> Href {
    Href::path(id.endpoint().render(&[code]))
}

/// The plan as the API shows it.
fn view(plan: &StoredPlan) -> Plan {
    Plan {
        add_ons: Some(plan_path(EndpointId::ListAddOns, &plan.plan_code)),
        plan_code: Some(plan.plan_code.clone()),
        name: Some(plan.name.clone()),
        description: plan.description.clone(),
        success_url: plan.success_url.clone(),
        cancel_url: plan.cancel_url.clone(),
        display_donation_amounts: Some(plan.display_donation_amounts),
        display_quantity: Some(plan.display_quantity),
        display_phone_number: Some(plan.display_phone_number),
        bypass_hosted_confirmation: Some(plan.bypass_hosted_confirmation),
        unit_name: plan.unit_name.clone(),
        payment_page_tos_link: plan.payment_page_tos_link.clone(),
        payment_page_css: plan.payment_page_css.clone(),
        plan_interval_length: Some(plan.interval.length),
        plan_interval_unit: Some(interval_unit(plan.interval.unit)),
        trial_interval_length: Some(plan.trial.length),
        trial_interval_unit: Some(interval_unit(plan.trial.unit)),
        total_billing_cycles: plan.total_billing_cycles,
        accounting_code: plan.accounting_code.clone(),
        setup_fee_accounting_code: plan.setup_fee_accounting_code.clone(),
        revenue_schedule_type: Some(schedule(plan.revenue_schedule_type)),
        setup_fee_revenue_schedule_type: Some(schedule(plan.setup_fee_revenue_schedule_type)),
        trial_requires_billing_info: Some(plan.trial_requires_billing_info),
        tax_exempt: Some(plan.tax_exempt),
        tax_code: plan.tax_code.clone(),
        created_at: time(plan.created_at),
        updated_at: time(plan.updated_at),
        unit_amount_in_cents: Some(money(&plan.unit_amounts)),
        setup_fee_in_cents: Some(money(&plan.setup_fees)),
    }
}

/// The add-on of `plan_code` as the API shows it.
fn add_on_view(plan_code: &str, add_on: &StoredAddOn) -> AddOn {
    AddOn {
        plan_code: Some(plan_code.to_owned()),
        plan: Some(plan_path(EndpointId::GetPlan, plan_code)),
        add_on_code: Some(add_on.add_on_code.clone()),
        name: Some(add_on.name.clone()),
        default_quantity: Some(add_on.default_quantity),
        display_quantity_on_hosted_page: Some(add_on.display_quantity_on_hosted_page),
        display_quantity: Some(add_on.display_quantity),
        add_on_type: Some(match add_on.add_on_type {
            StoredAddOnType::Fixed => AddOnType::Fixed,
            StoredAddOnType::Usage => AddOnType::Usage,
        }),
        measured_unit_id: add_on.measured_unit_id,
        usage_type: add_on.usage_type.map(|t| match t {
            StoredUsageType::Price => UsageType::Price,
            StoredUsageType::Percentage => UsageType::Percentage,
        }),
        usage_percentage: add_on.usage_percentage.map(Percentage::as_f64),
        optional: Some(add_on.optional),
        accounting_code: add_on.accounting_code.clone(),
        revenue_schedule_type: Some(schedule(add_on.revenue_schedule_type)),
        tax_code: add_on.tax_code.clone(),
        unit_amount_in_cents: Some(money(&add_on.unit_amounts)),
        created_at: time(add_on.created_at),
        updated_at: time(add_on.updated_at),
    }
}

/// The properties a plan request sets.
fn plan_fields(plan: &Plan) -> PlanFields {
    PlanFields {
        name: plan.name.clone(),
        description: plan.description.clone(),
        success_url: plan.success_url.clone(),
        cancel_url: plan.cancel_url.clone(),
        display_donation_amounts: plan.display_donation_amounts,
        display_quantity: plan.display_quantity,
        display_phone_number: plan.display_phone_number,
        bypass_hosted_confirmation: plan.bypass_hosted_confirmation,
        unit_name: plan.unit_name.clone(),
        payment_page_tos_link: plan.payment_page_tos_link.clone(),
        payment_page_css: plan.payment_page_css.clone(),
        plan_interval_length: plan.plan_interval_length,
        plan_interval_unit: stored_unit(&plan.plan_interval_unit),
        trial_interval_length: plan.trial_interval_length,
        trial_interval_unit: stored_unit(&plan.trial_interval_unit),
        total_billing_cycles: plan.total_billing_cycles,
        accounting_code: plan.accounting_code.clone(),
        setup_fee_accounting_code: plan.setup_fee_accounting_code.clone(),
        revenue_schedule_type: stored_schedule(&plan.revenue_schedule_type),
        setup_fee_revenue_schedule_type: stored_schedule(&plan.setup_fee_revenue_schedule_type),
        trial_requires_billing_info: plan.trial_requires_billing_info,
        tax_exempt: plan.tax_exempt,
        tax_code: plan.tax_code.clone(),
        unit_amount_in_cents: plan.unit_amount_in_cents.as_ref().map(amounts),
        setup_fee_in_cents: plan.setup_fee_in_cents.as_ref().map(amounts),
    }
}

/// The properties an add-on request sets.
fn add_on_fields(add_on: &AddOn) -> AddOnFields {
    AddOnFields {
        name: add_on.name.clone(),
        default_quantity: add_on.default_quantity,
        display_quantity_on_hosted_page: add_on.display_quantity_on_hosted_page,
        display_quantity: add_on.display_quantity,
        add_on_type: stored_add_on_type(&add_on.add_on_type),
        measured_unit_id: add_on.measured_unit_id,
        usage_type: stored_usage_type(&add_on.usage_type),
        // Checked by the add-on rules (at most four decimal places).
        usage_percentage: add_on.usage_percentage.and_then(Percentage::from_f64),
        optional: add_on.optional,
        accounting_code: add_on.accounting_code.clone(),
        revenue_schedule_type: stored_schedule(&add_on.revenue_schedule_type),
        tax_code: add_on.tax_code.clone(),
        unit_amount_in_cents: add_on.unit_amount_in_cents.as_ref().map(amounts),
    }
}

/// The endpoint's answer (201) with `Location` (the absolute URL of `path`).
fn created<E: ApiEndpoint>(call: &Routed<'_, E>, value: &E::Response, path: &str) -> Response
where
    E::Response: XmlResource,
{
    with_location(call.answer(value), &call.ctx.wire, path)
}

/// A string that is sent but holds nothing.
fn blank(value: &Option<String>) -> bool {
    value.as_ref().is_some_and(|v| v.trim().is_empty())
}

/// Checks the amounts of a money element at `path.element`: each from 0 to [`MAX_CENTS`].
fn check_amounts(v: &mut Validation<'_>, path: &str, element: &str, money: &Money) {
    let at = format!("{path}.{element}");
    for (currency, cents) in &money.0 {
        if *cents < 0 {
            v.add(&at, currency, "greater_than_or_equal_to", "must be greater than or equal to 0");
        } else if *cents > MAX_CENTS {
            v.add(&at, currency, "less_than_or_equal_to", format!("must be less than or equal to {MAX_CENTS}"));
        }
    }
}

/// A money element that must name at least one currency.
fn check_not_empty(v: &mut Validation<'_>, path: &str, element: &str, money: &Option<Money>) {
    if money.as_ref().is_some_and(|m| m.0.is_empty()) {
        v.add(path, element, "empty", "can't be empty");
    }
}

/// The plan rules beside the generated ones.
fn plan_rules(plan: &Plan, v: &mut Validation<'_>) {
    let path = Plan::ROOT;
    for (element, value) in [("plan_code", &plan.plan_code), ("name", &plan.name)] {
        if blank(value) {
            v.add(path, element, "blank", "can't be blank");
        }
    }
    v.required(path, "unit_amount_in_cents", &plan.unit_amount_in_cents, &[Operation::Create]);
    check_not_empty(v, path, "unit_amount_in_cents", &plan.unit_amount_in_cents);
    for (element, money) in
        [("unit_amount_in_cents", &plan.unit_amount_in_cents), ("setup_fee_in_cents", &plan.setup_fee_in_cents)]
    {
        if let Some(money) = money {
            check_amounts(v, path, element, money);
        }
    }
    if plan.plan_interval_length.is_some_and(|n| n < 1) {
        v.add(path, "plan_interval_length", "greater_than", "must be greater than 0");
    }
    if plan.trial_interval_length.is_some_and(|n| n < 0) {
        v.add(path, "trial_interval_length", "greater_than_or_equal_to", "must be greater than or equal to 0");
    }
    if plan.total_billing_cycles.is_some_and(|n| n < 1) {
        v.add(path, "total_billing_cycles", "greater_than", "must be greater than 0");
    }
}

/// What an add-on request is checked against: the plan's currencies and, on update, the add-on
/// as stored.
struct AddOnContext<'a> {
    plan: &'a StoredPlan,
    stored: Option<&'a StoredAddOn>,
}

/// The add-on rules beside the generated ones.
fn add_on_rules(add_on: &AddOn, on: &AddOnContext<'_>, v: &mut Validation<'_>) {
    let path = AddOn::ROOT;
    let create = on.stored.is_none();
    for (element, value) in [("add_on_code", &add_on.add_on_code), ("name", &add_on.name)] {
        if blank(value) {
            v.add(path, element, "blank", "can't be blank");
        }
    }
    // Type and usage type: set on create, fixed afterwards.
    let requested_type = stored_add_on_type(&add_on.add_on_type);
    let requested_usage = stored_usage_type(&add_on.usage_type);
    if let Some(stored) = on.stored {
        if requested_type.is_some_and(|t| t != stored.add_on_type) {
            v.add(path, "add_on_type", "invalid", "can't be changed");
        }
        if requested_usage.is_some_and(|t| Some(t) != stored.usage_type) {
            v.add(path, "usage_type", "invalid", "can't be changed");
        }
    }
    let add_on_type = on.stored.map_or(requested_type.unwrap_or(StoredAddOnType::Fixed), |s| s.add_on_type);
    let usage_type = on.stored.map_or(requested_usage, |s| s.usage_type);
    let priced = match add_on_type {
        StoredAddOnType::Fixed => {
            let usage_only = [
                ("usage_type", add_on.usage_type.is_some()),
                ("usage_percentage", add_on.usage_percentage.is_some()),
                ("measured_unit_id", add_on.measured_unit_id.is_some()),
            ];
            for (element, _) in usage_only.iter().filter(|(_, given)| *given) {
                v.add(path, element, "invalid", "is only for usage add-ons");
            }
            true
        }
        StoredAddOnType::Usage => {
            if create {
                v.required(path, "usage_type", &add_on.usage_type, &[Operation::Create]);
            }
            usage_type != Some(StoredUsageType::Percentage)
        }
    };
    if priced {
        if add_on.usage_percentage.is_some() && add_on_type == StoredAddOnType::Usage {
            v.add(path, "usage_percentage", "invalid", "is only for percentage usage add-ons");
        }
        if create {
            v.required(path, "unit_amount_in_cents", &add_on.unit_amount_in_cents, &[Operation::Create]);
        }
        check_not_empty(v, path, "unit_amount_in_cents", &add_on.unit_amount_in_cents);
        if let Some(money) = &add_on.unit_amount_in_cents {
            check_amounts(v, path, "unit_amount_in_cents", money);
            let at = format!("{path}.unit_amount_in_cents");
            for (currency, _) in money.0.iter().filter(|(c, _)| !on.plan.unit_amounts.contains_key(c)) {
                v.add(&at, currency, "inclusion", "is not a currency of the plan");
            }
        }
    } else if usage_type == Some(StoredUsageType::Percentage) {
        if add_on.unit_amount_in_cents.is_some() {
            v.add(path, "unit_amount_in_cents", "invalid", "is not used by percentage usage add-ons");
        }
        if create {
            v.required(path, "usage_percentage", &add_on.usage_percentage, &[Operation::Create]);
        }
        match add_on.usage_percentage {
            Some(p) if p.is_nan() || p < 0.0 => {
                v.add(path, "usage_percentage", "greater_than_or_equal_to", "must be greater than or equal to 0");
            }
            Some(p) if p > 100.0 => {
                v.add(path, "usage_percentage", "less_than_or_equal_to", "must be less than or equal to 100");
            }
            Some(p) if Percentage::from_f64(p).is_none() => {
                v.add(path, "usage_percentage", "invalid", "can have at most 4 decimal places");
            }
            _ => {}
        }
    }
    if add_on.default_quantity.is_some_and(|n| n < 0) {
        v.add(path, "default_quantity", "greater_than_or_equal_to", "must be greater than or equal to 0");
    }
}

/// Reads, decodes and validates a `<plan>` request body.
async fn plan_request<E: ApiEndpoint<Request = Plan>>(
    state: &AppState,
    call: &Routed<'_, E>,
    request: Request,
    op: Operation,
) -> Result<Plan, Response> {
    let ctx = &call.ctx.wire;
    let plan = call.decode(state, request).await?;
    let mut v = Validation::new(ctx, op);
    plan.validate(&mut v, Plan::ROOT);
    plan_rules(&plan, &mut v);
    v.finish().map_err(|errors| respond::rejection(&Rejection::Invalid(errors), ctx))?;
    Ok(plan)
}

/// Reads, decodes and validates an `<add_on>` request body.
async fn add_on_request<E: ApiEndpoint<Request = AddOn>>(
    state: &AppState,
    call: &Routed<'_, E>,
    request: Request,
    on: &AddOnContext<'_>,
) -> Result<AddOn, Response> {
    let ctx = &call.ctx.wire;
    let add_on = call.decode(state, request).await?;
    let op = if on.stored.is_some() { Operation::Update } else { Operation::Create };
    let mut v = Validation::new(ctx, op);
    add_on.validate(&mut v, AddOn::ROOT);
    add_on_rules(&add_on, on, &mut v);
    v.finish().map_err(|errors| respond::rejection(&Rejection::Invalid(errors), ctx))?;
    Ok(add_on)
}

/// The site's live plan of the path's first parameter, or the response to give instead.
async fn live_plan(state: &AppState, call: &Call) -> Result<StoredPlan, Response> {
    catalog::plan(state, &call.context(), &call.params[0]).await.map_err(|e| catalog_error(&call.ctx.wire, e))
}

/// The live add-on of the path's second parameter on `plan`, or the response to give instead.
async fn live_add_on(state: &AppState, call: &Call, plan: &StoredPlan) -> Result<StoredAddOn, Response> {
    catalog::add_on(state, plan, &call.params[1]).await.map_err(|e| catalog_error(&call.ctx.wire, e))
}

/// The answer to a refused catalogue operation: 404 naming the plan or add-on, 422 on the
/// `plan_code` or `add_on_code` of the request document for a code that is taken.
fn catalog_error(ctx: &WireContext, error: CatalogError) -> Response {
    let root = if matches!(error, CatalogError::AddOnTaken(_)) { "add_on" } else { "plan" };
    respond::app_error(ctx, root, error.into())
}

/// `GET /v2/plans` (and HEAD: the count): the site's plans, deleted ones left out.
pub(crate) async fn list(state: &AppState, call: &Routed<'_, api::ListPlans>, query: Option<&str>) -> Response {
    let query = match ListQuery::parse(query, call.endpoint.filters) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    let page = match catalog::plans(state, &call.context(), &query.page()).await {
        Ok(page) => page,
        Err(e) => return respond::internal(&e),
    };
    // HEAD only counts.
    let items: Vec<Plan> = if call.head { Vec::new() } else { page.items.iter().map(view).collect() };
    let path = call.endpoint.render(&[]);
    call.answer_page(&path, &query, &items, page.next, page.total)
}

/// `POST /v2/plans`: 201 with `Location`.
pub(crate) async fn create(state: &AppState, call: &Routed<'_, api::CreatePlan>, request: Request) -> Response {
    let ctx = &call.ctx.wire;
    let plan = match plan_request(state, call, request, Operation::Create).await {
        Ok(p) => p,
        Err(response) => return response,
    };
    let code = plan.plan_code.clone().unwrap_or_default();
    match catalog::create_plan(state, &call.context(), &code, &plan_fields(&plan)).await {
        Ok(p) => created(call, &view(&p), &EndpointId::GetPlan.endpoint().render(&[&code])),
        Err(e) => catalog_error(ctx, e),
    }
}

/// `GET /v2/plans/{plan_code}`.
pub(crate) async fn get(state: &AppState, call: &Routed<'_, api::GetPlan>) -> Response {
    match live_plan(state, call).await {
        Ok(plan) => call.answer(&view(&plan)),
        Err(response) => response,
    }
}

/// `PUT /v2/plans/{plan_code}`: only the elements sent change.
pub(crate) async fn update(state: &AppState, call: &Routed<'_, api::UpdatePlan>, request: Request) -> Response {
    let ctx = &call.ctx.wire;
    let code = &call.params[0];
    let plan = match plan_request(state, call, request, Operation::Update).await {
        Ok(p) => p,
        Err(response) => return response,
    };
    if plan.plan_code.as_ref().is_some_and(|c| c != code) {
        return field_error(ctx, "plan.plan_code", "invalid", "can't be changed");
    }
    match catalog::update_plan(state, &call.context(), code, &plan_fields(&plan)).await {
        Ok(p) => call.answer(&view(&p)),
        Err(e) => catalog_error(ctx, e),
    }
}

/// `DELETE /v2/plans/{plan_code}`: 204.
pub(crate) async fn delete(state: &AppState, call: &Routed<'_, api::DeletePlan>) -> Response {
    match catalog::delete_plan(state, &call.context(), &call.params[0]).await {
        Ok(_) => call.answer_empty(),
        Err(e) => catalog_error(&call.ctx.wire, e),
    }
}

/// `GET /v2/plans/{plan_code}/add_ons` (and HEAD: the count).
pub(crate) async fn list_add_ons(
    state: &AppState,
    call: &Routed<'_, api::ListAddOns>,
    query: Option<&str>,
) -> Response {
    let query = match ListQuery::parse(query, call.endpoint.filters) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    let plan = match live_plan(state, call).await {
        Ok(plan) => plan,
        Err(response) => return response,
    };
    let page = match catalog::add_ons(state, &plan, &query.page()).await {
        Ok(page) => page,
        Err(e) => return respond::internal(&e),
    };
    let items: Vec<AddOn> =
        if call.head { Vec::new() } else { page.items.iter().map(|a| add_on_view(&plan.plan_code, a)).collect() };
    let path = call.endpoint.render(&[&plan.plan_code]);
    call.answer_page(&path, &query, &items, page.next, page.total)
}

/// `POST /v2/plans/{plan_code}/add_ons`: 201 with `Location`.
pub(crate) async fn create_add_on(state: &AppState, call: &Routed<'_, api::CreateAddOn>, request: Request) -> Response {
    let ctx = &call.ctx.wire;
    let plan = match live_plan(state, call).await {
        Ok(plan) => plan,
        Err(response) => return response,
    };
    let add_on = match add_on_request(state, call, request, &AddOnContext { plan: &plan, stored: None }).await {
        Ok(a) => a,
        Err(response) => return response,
    };
    let code = add_on.add_on_code.clone().unwrap_or_default();
    match catalog::create_add_on(state, &call.context(), &plan, &code, &add_on_fields(&add_on)).await {
        Ok(a) => {
            let path = EndpointId::GetAddOn.endpoint().render(&[&plan.plan_code, &code]);
            created(call, &add_on_view(&plan.plan_code, &a), &path)
        }
        Err(e) => catalog_error(ctx, e),
    }
}

/// `GET /v2/plans/{plan_code}/add_ons/{add_on_code}`.
pub(crate) async fn get_add_on(state: &AppState, call: &Routed<'_, api::GetAddOn>) -> Response {
    let plan = match live_plan(state, call).await {
        Ok(plan) => plan,
        Err(response) => return response,
    };
    match live_add_on(state, call, &plan).await {
        Ok(a) => call.answer(&add_on_view(&plan.plan_code, &a)),
        Err(response) => response,
    }
}

/// `PUT /v2/plans/{plan_code}/add_ons/{add_on_code}`: only the elements sent change.
pub(crate) async fn update_add_on(state: &AppState, call: &Routed<'_, api::UpdateAddOn>, request: Request) -> Response {
    let ctx = &call.ctx.wire;
    let plan = match live_plan(state, call).await {
        Ok(plan) => plan,
        Err(response) => return response,
    };
    let stored = match live_add_on(state, call, &plan).await {
        Ok(a) => a,
        Err(response) => return response,
    };
    let code = &call.params[1];
    let on = AddOnContext { plan: &plan, stored: Some(&stored) };
    let add_on = match add_on_request(state, call, request, &on).await {
        Ok(a) => a,
        Err(response) => return response,
    };
    if add_on.add_on_code.as_ref().is_some_and(|c| c != code) {
        return field_error(ctx, "add_on.add_on_code", "invalid", "can't be changed");
    }
    match catalog::update_add_on(state, &call.context(), &plan, code, &add_on_fields(&add_on)).await {
        Ok(a) => call.answer(&add_on_view(&plan.plan_code, &a)),
        Err(e) => catalog_error(ctx, e),
    }
}

/// `DELETE /v2/plans/{plan_code}/add_ons/{add_on_code}`: 204.
pub(crate) async fn delete_add_on(state: &AppState, call: &Routed<'_, api::DeleteAddOn>) -> Response {
    let plan = match live_plan(state, call).await {
        Ok(plan) => plan,
        Err(response) => return response,
    };
    match catalog::delete_add_on(state, &call.context(), &plan, &call.params[1]).await {
        Ok(_) => call.answer_empty(),
        Err(e) => catalog_error(&call.ctx.wire, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rebill_app::platform::model::plans::Interval;
    use rebill_xml::{ApiVersion, Features};

    fn stored_plan() -> StoredPlan {
        StoredPlan {
            id: 1,
            site_id: 1,
            plan_code: "a b".into(),
            name: "A".into(),
            description: None,
            success_url: None,
            cancel_url: None,
            display_donation_amounts: false,
            display_quantity: true,
            display_phone_number: false,
            bypass_hosted_confirmation: false,
            unit_name: None,
            payment_page_tos_link: None,
            payment_page_css: None,
            interval: Interval { length: 1, unit: StoredUnit::Months },
            trial: Interval { length: 0, unit: StoredUnit::Days },
            total_billing_cycles: None,
            accounting_code: None,
            setup_fee_accounting_code: None,
            revenue_schedule_type: StoredSchedule::Evenly,
            setup_fee_revenue_schedule_type: StoredSchedule::AtRangeStart,
            trial_requires_billing_info: true,
            tax_exempt: false,
            tax_code: None,
            unit_amounts: [("EUR".to_owned(), 800), ("USD".to_owned(), 1000)].into_iter().collect(),
            setup_fees: Amounts::new(),
            created_at: 0,
            updated_at: 5,
            deleted_at: None,
        }
    }

    fn violations(f: impl FnOnce(&mut Validation<'_>), op: Operation) -> Vec<(String, &'static str)> {
        let ctx = WireContext::new(ApiVersion::default(), Features::none(), "");
        let mut v = Validation::new(&ctx, op);
        f(&mut v);
        v.violations().iter().map(|x| (x.field.clone(), x.symbol)).collect()
    }

    #[test]
    fn a_stored_plan_is_shown_with_its_links_and_amounts() {
        let v = view(&stored_plan());
        assert_eq!(v.add_ons.as_ref().map(Href::as_str), Some("/v2/plans/a%20b/add_ons"));
        assert_eq!(v.unit_amount_in_cents, Some(Money(vec![("EUR".into(), 800), ("USD".into(), 1000)])));
        assert_eq!(v.setup_fee_in_cents, Some(Money(Vec::new())));
        assert_eq!(v.setup_fee_revenue_schedule_type, Some(RevenueScheduleType::AtRangeStart));
        assert_eq!((v.plan_interval_unit.clone(), v.trial_interval_length), (Some(IntervalUnit::Months), Some(0)));
        assert_eq!(v.updated_at, time(5));
        let fields = plan_fields(&v);
        assert_eq!(fields.unit_amount_in_cents, Some(stored_plan().unit_amounts));
        assert_eq!(fields.plan_interval_unit, Some(StoredUnit::Months));
    }

    #[test]
    fn plan_rules_check_amounts_and_intervals() {
        let plan = Plan {
            plan_code: Some(" ".into()),
            unit_amount_in_cents: Some(Money(vec![("USD".into(), -1), ("EUR".into(), MAX_CENTS + 1)])),
            setup_fee_in_cents: Some(Money(vec![("USD".into(), MAX_CENTS)])),
            plan_interval_length: Some(0),
            trial_interval_length: Some(-1),
            total_billing_cycles: Some(0),
            ..Plan::default()
        };
        assert_eq!(
            violations(|v| plan_rules(&plan, v), Operation::Create),
            vec![
                ("plan.plan_code".to_owned(), "blank"),
                ("plan.unit_amount_in_cents.USD".to_owned(), "greater_than_or_equal_to"),
                ("plan.unit_amount_in_cents.EUR".to_owned(), "less_than_or_equal_to"),
                ("plan.plan_interval_length".to_owned(), "greater_than"),
                ("plan.trial_interval_length".to_owned(), "greater_than_or_equal_to"),
                ("plan.total_billing_cycles".to_owned(), "greater_than"),
            ]
        );
        let empty = Plan { unit_amount_in_cents: Some(Money(Vec::new())), ..Plan::default() };
        assert_eq!(
            violations(|v| plan_rules(&empty, v), Operation::Update),
            vec![("plan.unit_amount_in_cents".to_owned(), "empty")]
        );
        assert_eq!(
            violations(|v| plan_rules(&Plan::default(), v), Operation::Create),
            vec![("plan.unit_amount_in_cents".to_owned(), "blank")]
        );
        assert_eq!(violations(|v| plan_rules(&Plan::default(), v), Operation::Update), vec![]);
    }

    #[test]
    fn add_on_rules_follow_the_type() {
        let plan = stored_plan();
        let new = AddOnContext { plan: &plan, stored: None };
        let fixed = AddOn {
            add_on_code: Some("a".into()),
            usage_percentage: Some(5.0),
            unit_amount_in_cents: Some(Money(vec![("USD".into(), 5), ("GBP".into(), 5)])),
            ..AddOn::default()
        };
        assert_eq!(
            violations(|v| add_on_rules(&fixed, &new, v), Operation::Create),
            vec![
                ("add_on.usage_percentage".to_owned(), "invalid"),
                ("add_on.unit_amount_in_cents.GBP".to_owned(), "inclusion"),
            ]
        );
        let usage = AddOn { add_on_type: Some(AddOnType::Usage), ..AddOn::default() };
        assert_eq!(
            violations(|v| add_on_rules(&usage, &new, v), Operation::Create),
            vec![("add_on.usage_type".to_owned(), "blank"), ("add_on.unit_amount_in_cents".to_owned(), "blank")]
        );
        let percentage = AddOn {
            add_on_type: Some(AddOnType::Usage),
            usage_type: Some(UsageType::Percentage),
            usage_percentage: Some(100.5),
            unit_amount_in_cents: Some(Money(vec![("USD".into(), 5)])),
            ..AddOn::default()
        };
        assert_eq!(
            violations(|v| add_on_rules(&percentage, &new, v), Operation::Create),
            vec![
                ("add_on.unit_amount_in_cents".to_owned(), "invalid"),
                ("add_on.usage_percentage".to_owned(), "less_than_or_equal_to"),
            ]
        );
    }
}

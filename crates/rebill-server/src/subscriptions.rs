//! Subscription endpoints and the scheduled work of subscriptions, over the billing engine
//! (`rebill_billing::lifecycle`) and the use cases of `rebill_app::subscriptions::lifecycle`.
//!
//! Every change (an endpoint or a scheduled job) runs the same way:
//! 1. claim the subscription in the store (a second change while one is in progress, in any
//!    process on the database, answers 422 `simultaneous_request`);
//! 2. catch up with what became due up to "now" (`next_due` / `advance`, one charge per
//!    renewal), then apply the action;
//! 3. save the new value, its events and the charges in one transaction;
//! 4. invoice every charge not invoiced yet (`billing::invoice`, one invoice per charge)
//!    and record its invoice: a charge saved but not invoiced (a crash in between) is invoiced by
//!    the next change or job, and an invoiced one is never invoiced again;
//! 5. keep one scheduled job at the subscription's `next_due`, and release the claim.
//!
//! A scheduled job uses its `due_at` as "now" and does only what is due at that instant, so a
//! late or repeated run changes nothing that was already done. Renewals due together go through
//! the same steps for many subscriptions at once ([`run_renewals`]: one database transaction
//! before the gateway is called, one after), with the same decisions and the same writes.
//!
//! Choices where the spec is silent:
//! - Lists default to `state=live` (active, canceled or paused); `in_trial`, `live` and
//!   `past_due` are filters, never states.
//! - A declined first payment refuses the creation with the transaction error (nothing of the
//!   subscription is kept); a declined renewal makes the subscription past due (its state stays)
//!   until the invoice is paid, and when the invoice's collection finally fails the subscription
//!   expires.
//! - `terminate` takes `refund=none` (the default), `partial` or `full` (the last billed period, all
//!   of it or what is still to come, refunded on the invoice that billed it; see `rebill_app::money_back::refunds`).
//! - `postpone` takes `next_renewal_date` or, as later clients name it, `next_bill_date` (both
//!   at once only when they name the same instant, else 400 `invalid_parameter`); a date-time
//!   without an offset is UTC. `bulk` (skip a wait between postpones) is accepted and changes
//!   nothing: rebill makes no such wait.
//! - `PUT /v2/subscriptions/{uuid}` without `timeframe` changes now. Add-ons sent replace the set;
//!   without them a plan change keeps the add-ons the new plan also has, at its prices.
//! - `imported_trial` can only be set (on create) with a trial and changed while a trial is ahead
//!   or running: otherwise 422 `imported_trial_not_in_trial`.
//! - Previews (of a creation or a change) show the invoices the operation would make in
//!   `invoice_collection` (2.10, Credit Memos), computed by the app's invoicing of its charges;
//!   a change making no charge invoice shows a nil `charge_invoice` (docs/money-back.md).

// Early returns carry the finished HTTP response; it is built once per request, so its size
// does not matter.
#![allow(clippy::result_large_err)]

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use rebill_app::Context;
use rebill_app::billing::queries;
use rebill_app::catalog::coupons;
use rebill_app::catalog::plans::{self as catalog, CatalogError};
use rebill_app::customers::accounts::AccountError;
use rebill_app::platform::error::Missing;
use rebill_app::platform::model::accounts::{Account, AccountFields, AddressFields};
use rebill_app::platform::model::plans::{IntervalUnit as PlanUnit, Plan};
use rebill_app::platform::model::subscriptions::{StateFilter as StoreFilter, SubscriptionFilter, SubscriptionRecord};
use rebill_app::subscriptions::lifecycle::CouponChangeError;
use rebill_billing::lifecycle::{
    Action, AddOnTerms, LifecycleError, NewSubscription, Refund, StateFilter, Subscription as Engine,
    SubscriptionState as EngineState, SubscriptionTerms, Timeframe as EngineTimeframe, Trial,
};
use rebill_billing::period::{Interval, IntervalUnit};
use rebill_models::ApiEndpoint;
use rebill_models::api::{self, EndpointId};
use rebill_models::validate::{Operation, Rejection, Violation, errors_document};
use rebill_models::{
    Account as AccountDoc, CollectionMethod, InvoiceCollection, Subscription, SubscriptionAddOn, SubscriptionPlan,
    SubscriptionState, Timeframe,
};
use rebill_xml::WireContext;

use crate::invoices::preview_view;
use crate::lists::{ListQuery, invalid_choice};
use crate::request::{Call, Routed, account_not_found, billing_request, href, query_param, validated};
use crate::respond;
use crate::respond::{time, with_location};
use crate::state::AppState;
use crate::views::{self, DeclineFields, payment_method_error, refusal_response};
use rebill_app::customers::shipping_addresses::{ShippingChoice, ShippingError};
use rebill_app::selling::gift_cards::{self, GiftCardError, GiftSubscribeError};
use rebill_app::subscriptions::lifecycle::{
    self as subscriptions, ChangeError, CreateError, Details, InvoicePreviews, Loaded, Subscribe, new_uuid,
};

/// An endpoint answering a subscription.
pub(crate) trait AnswersSubscription: ApiEndpoint<Response = Subscription> {}
impl<E: ApiEndpoint<Response = Subscription>> AnswersSubscription for E {}

/// An endpoint reading and answering a subscription.
pub(crate) trait TakesSubscription: AnswersSubscription + ApiEndpoint<Request = Subscription> {}
impl<E: AnswersSubscription + ApiEndpoint<Request = Subscription>> TakesSubscription for E {}

// ---------------------------------------------------------------------------------------------
// Requests

/// The notes and settings a request sends, over `details` (others are kept).
fn apply_details(details: &mut Details, doc: &Subscription) {
    let set = |target: &mut Option<String>, value: &Option<String>| {
        if value.is_some() {
            target.clone_from(value);
        }
    };
    set(&mut details.po_number, &doc.po_number);
    set(&mut details.terms_and_conditions, &doc.terms_and_conditions);
    set(&mut details.customer_notes, &doc.customer_notes);
    set(&mut details.vat_reverse_charge_notes, &doc.vat_reverse_charge_notes);
    if doc.net_terms.is_some() {
        details.net_terms = doc.net_terms;
    }
    if let Some(method) = &doc.collection_method {
        details.collection_method = Some(
            match method {
                CollectionMethod::Automatic => "automatic",
                CollectionMethod::Manual => "manual",
                CollectionMethod::Unknown(other) => other.as_str(),
            }
            .to_owned(),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Responses

fn not_found(uuid: &str) -> Response {
    respond::missing(&Missing::subscription(uuid))
}

fn simultaneous_request() -> Response {
    respond::error(
        StatusCode::UNPROCESSABLE_ENTITY,
        "simultaneous_request",
        "A change for this subscription is already in progress; please try again.",
    )
}

fn field_errors(ctx: &WireContext, violations: &[Violation]) -> Response {
    respond::rejection(&Rejection::Invalid(errors_document(violations)), ctx)
}

/// A field error of the `<subscription>` document (`field` below `subscription.`).
fn field_error(ctx: &WireContext, field: &str, symbol: &'static str, message: &str) -> Response {
    field_errors(ctx, &[Violation { field: format!("subscription.{field}"), symbol, message: message.to_owned() }])
}

/// A refused transition: a field error for invalid terms, otherwise a single `<error>`.
fn lifecycle_error(ctx: &WireContext, error: &LifecycleError) -> Response {
    match error {
        LifecycleError::InvalidTerms { field, message } => field_error(ctx, field, "invalid", message),
        LifecycleError::NotAdvanced { .. } | LifecycleError::OutOfOrder { .. } | LifecycleError::NothingDue => {
            respond::internal(error)
        }
        other => respond::error(StatusCode::UNPROCESSABLE_ENTITY, other.symbol(), &capitalized(&other.to_string())),
    }
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), chars.as_str()),
        None => String::new(),
    }
}

fn state_doc(state: EngineState) -> SubscriptionState {
    match state {
        EngineState::Active => SubscriptionState::Active,
        EngineState::Canceled => SubscriptionState::Canceled,
        EngineState::Expired => SubscriptionState::Expired,
        EngineState::Future => SubscriptionState::Future,
        EngineState::Pending => SubscriptionState::Pending,
        EngineState::Paused => SubscriptionState::Paused,
    }
}

/// Names of a plan and its add-ons, for views.
#[derive(Default)]
struct Names {
    plan: Option<String>,
    add_ons: Vec<(String, String)>,
}

async fn names(state: &AppState, ctx: &Context, plan_code: &str) -> Result<Names, CatalogError> {
    let Some((plan, add_ons)) = catalog::plan_with_add_ons(state, ctx, plan_code).await? else {
        return Ok(Names::default());
    };
    let add_ons = add_ons.into_iter().map(|a| (a.add_on_code, a.name)).collect();
    Ok(Names { plan: Some(plan.name), add_ons })
}

fn plan_doc(code: &str, names: &Names) -> SubscriptionPlan {
    SubscriptionPlan { plan_code: Some(code.to_owned()), name: names.plan.clone() }
}

fn add_on_docs(terms: &SubscriptionTerms, names: &Names) -> Vec<SubscriptionAddOn> {
    terms
        .add_ons
        .iter()
        .map(|a| SubscriptionAddOn {
            add_on_type: Some(rebill_models::AddOnType::Fixed),
            add_on_code: Some(a.add_on_code.clone()),
            name: names.add_ons.iter().find(|(code, _)| *code == a.add_on_code).map(|(_, n)| n.clone()),
            unit_amount_in_cents: Some(a.unit_amount_in_cents),
            quantity: Some(i64::from(a.quantity)),
            ..SubscriptionAddOn::default()
        })
        .collect()
}

/// The subscription as the API shows it.
async fn view(
    state: &AppState,
    ctx: &Context,
    sub: &Engine,
    details: &Details,
    record: Option<&SubscriptionRecord>,
) -> Result<Subscription, CatalogError> {
    let terms = &sub.terms;
    let current = names(state, ctx, &terms.plan_code).await?;
    let pending = match &sub.pending_change {
        Some(next) => {
            let next_names = if next.plan_code == terms.plan_code {
                Names { plan: current.plan.clone(), add_ons: current.add_ons.clone() }
            } else {
                names(state, ctx, &next.plan_code).await?
            };
            Some(Box::new(Subscription {
                plan: Some(Box::new(plan_doc(&next.plan_code, &next_names))),
                unit_amount_in_cents: Some(next.unit_amount_in_cents),
                currency: Some(next.currency.clone()),
                quantity: Some(i64::from(next.quantity)),
                subscription_add_ons: Some(add_on_docs(next, &next_names)),
                ..Subscription::default()
            }))
        }
        None => None,
    };
    let uuid = record.map(|r| r.uuid.clone());
    let u = record.map(|r| r.uuid.as_str()).unwrap_or_default();
    let stored = record.is_some();
    let anchor = |id: EndpointId, when: bool| (stored && when).then(|| href(id, &[u]));
    let (active, canceled, paused) =
        (sub.state == EngineState::Active, sub.state == EngineState::Canceled, sub.state == EngineState::Paused);
    let live = !matches!(sub.state, EngineState::Expired);
    Ok(Subscription {
        account_href: Some(href(EndpointId::GetAccount, &[&details.account_code])),
        shipping_address_href: details
            .shipping_address_id
            .map(|id| href(EndpointId::GetShippingAddress, &[&details.account_code, &id.to_string()])),
        invoice: record.and_then(|r| r.last_invoice.as_deref()).map(|n| href(EndpointId::GetInvoice, &[n])),
        plan: Some(Box::new(plan_doc(&terms.plan_code, &current))),
        redemptions: stored.then(|| href(EndpointId::ListSubscriptionRedemptions, &[u])),
        uuid,
        state: Some(state_doc(sub.state)),
        unit_amount_in_cents: Some(terms.unit_amount_in_cents),
        currency: Some(terms.currency.clone()),
        quantity: Some(i64::from(terms.quantity)),
        activated_at: sub.activated_at,
        canceled_at: sub.canceled_at,
        expires_at: sub.expires_at,
        updated_at: record.and_then(|r| time(r.updated_at)),
        total_billing_cycles: sub.total_billing_cycles.map(i64::from),
        remaining_billing_cycles: sub.remaining_billing_cycles.map(i64::from),
        current_period_started_at: sub.current_period_started_at,
        current_period_ends_at: sub.current_period_ends_at,
        trial_started_at: sub.trial_started_at,
        trial_ends_at: sub.trial_ends_at,
        tax_in_cents: Some(0),
        po_number: details.po_number.clone(),
        net_terms: Some(details.net_terms.unwrap_or(0)),
        collection_method: Some(match details.collection_method.as_deref() {
            Some("manual") => CollectionMethod::Manual,
            _ => CollectionMethod::Automatic,
        }),
        terms_and_conditions: details.terms_and_conditions.clone(),
        customer_notes: details.customer_notes.clone(),
        vat_reverse_charge_notes: details.vat_reverse_charge_notes.clone(),
        started_with_gift: Some(match record {
            Some(r) => rebill_app::selling::gift_cards::of_subscription(state, ctx, &r.uuid).await?.is_some(),
            None => false,
        }),
        imported_trial: Some(sub.imported_trial),
        paused_at: sub.paused_at,
        remaining_pause_cycles: sub.remaining_pause_cycles.map(i64::from),
        subscription_add_ons: Some(add_on_docs(terms, &current)),
        pending_subscription: pending,
        cancel_action: anchor(EndpointId::CancelSubscription, active || paused),
        terminate_action: anchor(EndpointId::TerminateSubscription, live),
        postpone_action: anchor(EndpointId::PostponeSubscription, active || paused),
        // The notes of a subscription can be changed in every state, an expired one's too.
        notes_action: anchor(EndpointId::UpdateSubscriptionNotes, true),
        reactivate_action: anchor(EndpointId::ReactivateSubscription, canceled),
        pause_action: anchor(EndpointId::PauseSubscription, active || paused),
        // Resume ends a pause, or drops one that is only scheduled.
        resume_action: anchor(EndpointId::ResumeSubscription, paused || sub.has_scheduled_pause()),
        ..Subscription::default()
    })
}

async fn respond_view<E: AnswersSubscription>(state: &AppState, call: &Routed<'_, E>, loaded: &Loaded) -> Response {
    match view(state, &call.context(), &loaded.sub, &loaded.details, Some(&loaded.record)).await {
        Ok(doc) => call.answer(&doc),
        Err(e) => respond::internal(&e),
    }
}

// ---------------------------------------------------------------------------------------------
// Reading requests

/// Reads and decodes a `<subscription>` body and validates it for `op`.
async fn read_request<E: ApiEndpoint<Request = Subscription>>(
    state: &AppState,
    call: &Routed<'_, E>,
    request: Request,
    op: Operation,
) -> Result<Subscription, Response> {
    let doc = call.decode(state, request).await?;
    validated(call, &doc, op)?;
    Ok(doc)
}

pub(crate) fn interval_of(plan: &Plan) -> Result<Interval, Response> {
    let unit = match plan.interval.unit {
        PlanUnit::Days => IntervalUnit::Days,
        PlanUnit::Months => IntervalUnit::Months,
    };
    u32::try_from(plan.interval.length)
        .ok()
        .and_then(|length| Interval::new(length, unit).ok())
        .ok_or_else(|| respond::invariant(&format!("plan {} has an invalid interval", plan.plan_code)))
}

pub(crate) fn trial_of(plan: &Plan) -> Option<Interval> {
    let unit = match plan.trial.unit {
        PlanUnit::Days => IntervalUnit::Days,
        PlanUnit::Months => IntervalUnit::Months,
    };
    u32::try_from(plan.trial.length).ok().filter(|n| *n > 0).map(|n| Interval { length: n, unit })
}

/// The plan named by a request (422 on `subscription.plan_code` when there is none).
async fn plan_named(state: &AppState, call: &Call, code: &str) -> Result<Plan, Response> {
    match catalog::plan(state, &call.context(), code).await {
        Ok(plan) => Ok(plan),
        Err(CatalogError::PlanNotFound(_)) => {
            Err(field_error(&call.ctx.wire, "plan_code", "not_found", "is not a plan of the site"))
        }
        Err(e) => Err(respond::internal(&e)),
    }
}

fn quantity(ctx: &WireContext, field: &str, value: i64) -> Result<u32, Response> {
    u32::try_from(value).map_err(|_| field_error(ctx, field, "invalid", "must be a whole number from 0"))
}

/// The terms of a subscription to `plan` in `currency` from a request. `base` is the current
/// terms (for a change): what the request does not send is kept from it when the plan stays.
async fn terms_of(
    state: &AppState,
    call: &Call,
    plan: &Plan,
    currency: &str,
    doc: &Subscription,
    base: Option<&SubscriptionTerms>,
) -> Result<SubscriptionTerms, Response> {
    let ctx = &call.ctx.wire;
    let same_plan = base.filter(|b| b.plan_code == plan.plan_code);
    let unit_amount = match (doc.unit_amount_in_cents, same_plan) {
        (Some(amount), _) => amount,
        (None, Some(b)) => b.unit_amount_in_cents,
        (None, None) => plan
            .unit_amount(currency)
            .ok_or_else(|| field_error(ctx, "currency", "invalid", "is not a currency the plan is priced in"))?,
    };
    let qty = match (doc.quantity, base) {
        (Some(q), _) => quantity(ctx, "quantity", q)?,
        (None, Some(b)) => b.quantity,
        (None, None) => 1,
    };
    let plan_add_ons = catalog::all_add_ons(state, plan).await.map_err(|e| respond::internal(&e))?;
    let add_ons = match &doc.subscription_add_ons {
        Some(requested) => {
            let mut out = Vec::new();
            for (i, a) in requested.iter().enumerate() {
                let field = |name: &str| format!("subscription_add_ons[{i}].{name}");
                let code = a.add_on_code.clone().unwrap_or_default();
                let Some(known) = plan_add_ons.iter().find(|p| p.add_on_code == code && !p.is_deleted()) else {
                    return Err(field_error(ctx, &field("add_on_code"), "not_found", "is not an add-on of the plan"));
                };
                let unit = match a.unit_amount_in_cents.or_else(|| known.unit_amount(currency)) {
                    Some(unit) => unit,
                    None => {
                        return Err(field_error(
                            ctx,
                            &field("unit_amount_in_cents"),
                            "blank",
                            "can't be blank: the add-on has no price in the subscription's currency",
                        ));
                    }
                };
                let qty = quantity(ctx, &field("quantity"), a.quantity.unwrap_or(known.default_quantity))?;
                out.push(AddOnTerms { add_on_code: code, unit_amount_in_cents: unit, quantity: qty });
            }
            out
        }
        None => match (base, same_plan) {
            (_, Some(b)) => b.add_ons.clone(),
            (Some(b), None) => b
                .add_ons
                .iter()
                .filter_map(|a| {
                    let known = plan_add_ons.iter().find(|p| p.add_on_code == a.add_on_code && !p.is_deleted())?;
                    Some(AddOnTerms { unit_amount_in_cents: known.unit_amount(currency)?, ..a.clone() })
                })
                .collect(),
            (None, None) => Vec::new(),
        },
    };
    Ok(SubscriptionTerms {
        plan_code: plan.plan_code.clone(),
        currency: currency.to_owned(),
        interval: interval_of(plan)?,
        unit_amount_in_cents: unit_amount,
        quantity: qty,
        add_ons,
        setup_fee_in_cents: plan.setup_fee(currency),
    })
}

/// The account fields a nested `<account>` sets.
pub(crate) fn account_fields(account: &AccountDoc) -> AccountFields {
    let a = account.address.as_deref().cloned().unwrap_or_default();
    AccountFields {
        username: account.username.clone(),
        email: account.email.clone(),
        cc_emails: account.cc_emails.clone(),
        first_name: account.first_name.clone(),
        last_name: account.last_name.clone(),
        company_name: account.company_name.clone(),
        vat_number: account.vat_number.clone(),
        tax_exempt: account.tax_exempt,
        entity_use_code: account.entity_use_code.clone(),
        address: AddressFields {
            address1: a.address1,
            address2: a.address2,
            city: a.city,
            state: a.state,
            zip: a.zip,
            country: a.country,
            phone: a.phone,
        },
        accept_language: account.accept_language.clone(),
        preferred_locale: account.preferred_locale.clone(),
    }
}

/// The answer to a refused shipping address of a subscription: an id the account does not hold
/// is a field error on `shipping_address_id`; a refused new address names its fields.
fn shipping_refusal(ctx: &WireContext, error: ShippingError) -> Response {
    match error {
        ShippingError::NotFound(_) => {
            field_error(ctx, "shipping_address_id", "invalid", "is not a shipping address of the account")
        }
        ShippingError::AccountNotFound(code) => account_not_found(&code),
        other => respond::app_error(ctx, "subscription.shipping_address", other.into()),
    }
}

// ---------------------------------------------------------------------------------------------
// Endpoints

/// `GET /v2/subscriptions` and `GET /v2/accounts/{account_code}/subscriptions` (and HEAD).
/// `GET /v2/accounts/{account_code}/subscriptions`.
pub(crate) async fn list_account_subscriptions(
    state: &AppState,
    call: &Routed<'_, api::ListAccountSubscriptions>,
    query: Option<&str>,
) -> Response {
    match rebill_app::customers::accounts::find(state, &call.context(), &call.params[0]).await {
        Ok(account) => list(state, call, query, Some(&account)).await,
        Err(e) => respond::app_error(&call.ctx.wire, "account", e.into()),
    }
}

/// `GET /v2/subscriptions` and an account's subscriptions.
pub(crate) async fn list<E: ApiEndpoint<Response = Vec<Subscription>>>(
    state: &AppState,
    call: &Routed<'_, E>,
    query: Option<&str>,
    account: Option<&Account>,
) -> Response {
    let query = match ListQuery::parse(query, call.endpoint.filters) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    let value = query.filter("state").unwrap_or("live");
    let filter = match StateFilter::from_name(value) {
        Some(StateFilter::Live) => StoreFilter::Live,
        Some(StateFilter::InTrial) => StoreFilter::InTrial(call.ctx.now),
        Some(StateFilter::PastDue) => StoreFilter::PastDue,
        Some(other) => StoreFilter::State(other.name().to_owned()),
        None => {
            let allowed: Vec<&str> = StateFilter::ALL.iter().map(|f| f.name()).collect();
            return invalid_choice("state", &allowed, value).response();
        }
    };
    let filter = SubscriptionFilter { account_id: account.map(|a| a.id), state: Some(filter) };
    let page = match queries::subscriptions(state, &call.context(), &filter, &query.page()).await {
        Ok(page) => page,
        Err(e) => return respond::internal(&e),
    };
    let mut items = Vec::new();
    if !call.head {
        for record in page.items {
            let loaded = match Loaded::of(record) {
                Ok(l) => l,
                Err(e) => return respond::internal(&e),
            };
            match view(state, &call.context(), &loaded.sub, &loaded.details, Some(&loaded.record)).await {
                Ok(doc) => items.push(doc),
                Err(e) => return respond::internal(&e),
            }
        }
    }
    let params: Vec<&str> = call.params.iter().map(String::as_str).collect();
    let path = call.endpoint.render(&params);
    call.answer_page(&path, &query, &items, page.next, page.total)
}

/// `GET /v2/subscriptions/{uuid}`.
pub(crate) async fn get(state: &AppState, call: &Routed<'_, api::GetSubscription>) -> Response {
    match queries::subscription(state, &call.context(), &call.params[0]).await {
        Ok(record) => match Loaded::of(record) {
            Ok(loaded) => respond_view(state, call, &loaded).await,
            Err(e) => respond::internal(&e),
        },
        Err(e) => respond::app_error(&call.ctx.wire, "subscription", e.into()),
    }
}

/// `POST /v2/subscriptions`, `POST /v2/accounts/{account_code}/subscriptions` (201 with
/// `Location`) and `POST /v2/subscriptions/preview` (200, nothing written).
pub(crate) async fn create<E: TakesSubscription>(
    state: &AppState,
    call: &Routed<'_, E>,
    request: Request,
    preview: bool,
) -> Response {
    let ctx = &call.ctx.wire;
    let doc = match read_request(state, call, request, Operation::Create).await {
        Ok(doc) => doc,
        Err(response) => return response,
    };
    let now = match time(call.ctx.now) {
        Some(t) => t,
        None => return respond::invariant(&"site clock out of range"),
    };
    // The account: the path's, or the nested one (created or updated).
    let nested = doc.account.as_deref();
    let path_code = (call.id == EndpointId::CreateAccountSubscription).then(|| call.params[0].clone());
    let code = match (&path_code, nested.and_then(|a| a.account_code.clone())) {
        (Some(code), _) => code.clone(),
        (None, Some(code)) if !code.trim().is_empty() => code,
        _ => return field_error(ctx, "account.account_code", "blank", "can't be blank"),
    };
    let existing = match rebill_app::customers::accounts::find(state, &call.context(), &code).await {
        Ok(a) => Some(a),
        Err(AccountError::NotFound(_)) => None,
        Err(e) => return respond::internal(&e),
    };
    if path_code.is_some() && existing.is_none() {
        return account_not_found(&code);
    }
    let plan = match plan_named(state, call, doc.plan_code.as_deref().unwrap_or_default()).await {
        Ok(plan) => plan,
        Err(response) => return response,
    };
    let currency = doc.currency.clone().unwrap_or_default().to_ascii_uppercase();
    let terms = match terms_of(state, call, &plan, &currency, &doc, None).await {
        Ok(terms) => terms,
        Err(response) => return response,
    };
    let total_billing_cycles = match doc.total_billing_cycles.or(plan.total_billing_cycles) {
        None => None,
        Some(n) => match u32::try_from(n) {
            Ok(n) => Some(n),
            Err(_) => return field_error(ctx, "total_billing_cycles", "invalid", "must be at least 1"),
        },
    };
    let coupon_codes = coupons::requested(doc.coupon_code.as_ref(), doc.coupon_codes.as_ref());
    let coupons =
        match coupons::for_new_subscription(state, &call.context(), &coupon_codes, &plan.plan_code, &currency).await {
            Ok(coupons) => coupons,
            Err(e) => return respond::app_error(ctx, "subscription", e.into()),
        };
    // An explicit trial_ends_at wins over a free-trial coupon, which wins over the plan's trial.
    let trial = match doc.trial_ends_at {
        Some(end) => Some(Trial::Until(end)),
        None => coupons::free_trial(&coupons).or_else(|| trial_of(&plan)).map(Trial::For),
    };
    let uuid = new_uuid();
    let new = NewSubscription {
        uuid: uuid.clone(),
        terms,
        starts_at: doc.starts_at,
        trial,
        total_billing_cycles,
        imported_trial: doc.imported_trial.unwrap_or(false),
    };
    // The engine decides (creation, then anything already due for a backdated start).
    let drafted = match subscriptions::draft(new, now) {
        Ok(drafted) => drafted,
        Err(e) => return lifecycle_error(ctx, &e),
    };
    let mut details = Details { account_code: code.clone(), ..Details::default() };
    apply_details(&mut details, &doc);
    if preview {
        let app = call.context();
        let invoices =
            match subscriptions::preview_create(state, &app, existing.as_ref(), &drafted, &details, &coupons).await {
                Ok(invoices) => invoices,
                Err(e) => return respond::internal(&e),
            };
        return match view(state, &app, &drafted.sub, &details, None).await {
            Ok(mut view) => {
                view.cost_in_cents = Some(drafted.cost_in_cents());
                view.invoice_collection = Some(Box::new(preview_collection(&code, &invoices, call.ctx.now)));
                call.answer(&view)
            }
            Err(e) => respond::internal(&e),
        };
    }
    let billing_info = nested.and_then(|a| a.billing_info.as_deref()).map(|info| {
        let mut info = billing_request(info);
        if info.currency.is_none() {
            info.currency = Some(currency.clone());
        }
        info
    });
    let shipping =
        match views::shipping_choice(ctx, "subscription.", doc.shipping_address_id, doc.shipping_address.as_deref()) {
            Ok(choice) => choice,
            Err(response) => return response,
        };
    let input = Subscribe {
        existing,
        account_code: code,
        account_fields: nested.map(account_fields),
        billing_info,
        plan_id: plan.id,
        drafted,
        details,
        coupon_codes,
    };
    let account_addresses: Vec<_> =
        nested.and_then(|a| a.shipping_addresses.as_ref()).into_iter().flatten().map(views::shipping_fields).collect();
    // A gift card to redeem makes the creation the gift card's use case (redeemed only if it succeeds).
    let created = match doc.gift_card.as_deref().and_then(|g| g.redemption_code.as_deref()) {
        None => subscriptions::create_shipped(state, &call.context(), input, shipping, &account_addresses).await,
        Some(code) => {
            let shipped = (shipping, account_addresses.as_slice());
            match gift_cards::create_subscription_with_gift(state, &call.context(), input, shipped, code).await {
                Ok((loaded, _)) => Ok(loaded),
                Err(GiftSubscribeError::Create(e)) => Err(e),
                Err(refused) => return gift_card_refusal(ctx, refused),
            }
        }
    };
    let loaded = match created {
        Ok(loaded) => loaded,
        Err(CreateError::ShippingAddress(e)) => return shipping_refusal(ctx, e),
        Err(CreateError::PaymentMethod(e)) => return payment_method_error(ctx, &e),
        Err(CreateError::BillingInfo(refusal)) => return refusal_response(ctx, &refusal),
        Err(CreateError::AccountNotFound(code)) => return account_not_found(&code),
        Err(CreateError::Busy) => return simultaneous_request(),
        Err(CreateError::FirstPaymentDeclined(Some(transaction))) => {
            let fields = DeclineFields {
                verification_value: "subscription.account.billing_info.verification_value",
                base: "subscription.base",
            };
            return views::decline_response(ctx, &transaction, fields);
        }
        Err(CreateError::FirstPaymentDeclined(None)) => {
            return field_errors(
                ctx,
                &[Violation {
                    field: "subscription.account.billing_info".into(),
                    symbol: "blank",
                    message: "can't be blank: the first payment needs a payment method".into(),
                }],
            );
        }
        Err(CreateError::Coupon) => return field_error(ctx, "coupon_code", "invalid", "is invalid"),
        Err(CreateError::Failed(e)) => return respond::internal(&e),
    };
    let response = respond_view(state, call, &loaded).await;
    if !response.status().is_success() {
        return response;
    }
    with_location(response, ctx, &EndpointId::GetSubscription.endpoint().render(&[&uuid]))
}

/// The answer to a gift card that refused a subscription's creation (nothing was written): 404
/// `not_found` for an unknown code, 400 `gift_card_already_redeemed`, 422 on
/// `subscription.gift_card.redemption_code` for a card in another currency.
fn gift_card_refusal(ctx: &WireContext, refused: GiftSubscribeError) -> Response {
    match refused {
        GiftSubscribeError::Card(GiftCardError::CodeNotFound(code)) => {
            respond::not_found(&format!("Gift Card with redemption code {code} not found"))
        }
        GiftSubscribeError::Card(GiftCardError::AlreadyRedeemed) => respond::error(
            StatusCode::BAD_REQUEST,
            "gift_card_already_redeemed",
            "This gift card has already been redeemed.",
        ),
        e @ GiftSubscribeError::Currency { .. } => {
            field_error(ctx, "gift_card.redemption_code", "invalid", &e.to_string())
        }
        other => respond::internal(&other),
    }
}

/// One action on a stored subscription (`rebill_app::subscriptions::lifecycle::change`), answered with the
/// subscription.
async fn change<E: AnswersSubscription>(
    state: &AppState,
    call: &Routed<'_, E>,
    build: impl FnOnce(&Engine, &mut Details, DateTime<Utc>) -> Vec<Action>,
) -> Response {
    match subscriptions::change(state, &call.context(), &call.params[0], build).await {
        Ok(loaded) => respond_view(state, call, &loaded).await,
        Err(e) => change_refusal(call, e),
    }
}

/// The answer to a change that was not made.
fn change_refusal<E>(call: &Routed<'_, E>, e: ChangeError) -> Response {
    match e {
        ChangeError::NotFound(uuid) => not_found(&uuid),
        ChangeError::Busy => simultaneous_request(),
        ChangeError::Refused(e) => lifecycle_error(&call.ctx.wire, &e),
        ChangeError::Failed(e) => respond::internal(&e),
    }
}

/// An action without a body.
pub(crate) async fn simple_action<E: AnswersSubscription>(
    state: &AppState,
    call: &Routed<'_, E>,
    action: Action,
) -> Response {
    change(state, call, move |_, _, _| vec![action]).await
}

/// `PUT /v2/subscriptions/{uuid}/terminate?refund=none|partial|full`.
pub(crate) async fn terminate(
    state: &AppState,
    call: &Routed<'_, api::TerminateSubscription>,
    query: Option<&str>,
) -> Response {
    match query_param(query, "refund").as_deref() {
        None | Some("none") => simple_action(state, call, Action::Terminate { refund: Refund::None }).await,
        Some(how @ ("partial" | "full")) => {
            let refund = if how == "full" { Refund::Full } else { Refund::Partial };
            match rebill_app::money_back::refunds::terminate(state, &call.context(), &call.params[0], refund).await {
                Ok(loaded) => respond_view(state, call, &loaded).await,
                Err(ChangeError::NotFound(uuid)) => not_found(&uuid),
                Err(ChangeError::Busy) => simultaneous_request(),
                Err(ChangeError::Refused(e)) => lifecycle_error(&call.ctx.wire, &e),
                Err(ChangeError::Failed(e)) => respond::internal(&e),
            }
        }
        Some(other) => invalid_choice("refund", &["none", "partial", "full"], other).response(),
    }
}

/// `PUT /v2/subscriptions/{uuid}/postpone?next_renewal_date=…` (or `next_bill_date=…`; `bulk`
/// is accepted and changes nothing).
pub(crate) async fn postpone(
    state: &AppState,
    call: &Routed<'_, api::PostponeSubscription>,
    query: Option<&str>,
) -> Response {
    match postpone_date(query) {
        Ok(next_renewal) => simple_action(state, call, Action::Postpone { next_renewal }).await,
        Err(e) => e.response(),
    }
}

/// The new renewal date of a postpone: `next_renewal_date`, or `next_bill_date` as later clients
/// name it; both may be given when they name the same instant.
fn postpone_date(query: Option<&str>) -> Result<DateTime<Utc>, crate::lists::InvalidParameter> {
    let read = |name: &str| {
        query_param(query, name)
            .map(|text| {
                // Whole seconds, as every stored time (docs/times.md for the accepted forms).
                rebill_xml::value::parse_query_datetime(&text).and_then(|t| time(t.timestamp())).ok_or_else(|| {
                    crate::lists::InvalidParameter {
                        name: name.into(),
                        description: format!("{name} must be an ISO 8601 date or date-time (got `{text}`)."),
                    }
                })
            })
            .transpose()
    };
    match (read("next_renewal_date")?, read("next_bill_date")?) {
        (Some(a), Some(b)) if a != b => Err(crate::lists::InvalidParameter {
            name: "next_renewal_date".into(),
            description: "next_renewal_date and next_bill_date name different dates; send one of them.".into(),
        }),
        (Some(at), _) | (None, Some(at)) => Ok(at),
        (None, None) => Err(crate::lists::InvalidParameter {
            name: "next_renewal_date".into(),
            description: "next_renewal_date (or next_bill_date) is required: an ISO 8601 date or date-time.".into(),
        }),
    }
}

/// `PUT /v2/subscriptions/{uuid}/notes`.
pub(crate) async fn notes(
    state: &AppState,
    call: &Routed<'_, api::UpdateSubscriptionNotes>,
    request: Request,
) -> Response {
    let doc = match read_request(state, call, request, Operation::Update).await {
        Ok(doc) => doc,
        Err(response) => return response,
    };
    let notes = Subscription {
        terms_and_conditions: doc.terms_and_conditions.clone(),
        customer_notes: doc.customer_notes.clone(),
        vat_reverse_charge_notes: doc.vat_reverse_charge_notes.clone(),
        po_number: doc.po_number.clone(),
        ..Subscription::default()
    };
    change(state, call, move |_, details, _| {
        apply_details(details, &notes);
        Vec::new()
    })
    .await
}

/// `PUT /v2/subscriptions/{uuid}/pause` with `remaining_pause_cycles`.
pub(crate) async fn pause(state: &AppState, call: &Routed<'_, api::PauseSubscription>, request: Request) -> Response {
    let doc = match read_request(state, call, request, Operation::Update).await {
        Ok(doc) => doc,
        Err(response) => return response,
    };
    let Some(cycles) = doc.remaining_pause_cycles else {
        return field_error(&call.ctx.wire, "remaining_pause_cycles", "blank", "can't be blank");
    };
    simple_action(state, call, Action::Pause { remaining_pause_cycles: cycles }).await
}

/// `PUT /v2/subscriptions/{uuid}` (a change now or at renewal, `imported_trial`, notes) and
/// `POST /v2/subscriptions/{uuid}/preview` (the same, nothing written).
pub(crate) async fn update<E: TakesSubscription>(
    state: &AppState,
    call: &Routed<'_, E>,
    request: Request,
    preview: bool,
) -> Response {
    let ctx = &call.ctx.wire;
    let uuid = &call.params[0];
    let doc = match read_request(state, call, request, Operation::Update).await {
        Ok(doc) => doc,
        Err(response) => return response,
    };
    let record = match queries::subscription(state, &call.context(), uuid).await {
        Ok(record) => record,
        Err(e) => return respond::app_error(ctx, "subscription", e.into()),
    };
    let current = match Loaded::of(record) {
        Ok(l) => l,
        Err(e) => return respond::internal(&e),
    };
    if let Some(currency) = &doc.currency
        && !currency.eq_ignore_ascii_case(&current.sub.terms.currency)
    {
        return field_error(ctx, "currency", "invalid", "a subscription's currency cannot change");
    }
    let terms_given = doc.plan_code.is_some()
        || doc.quantity.is_some()
        || doc.unit_amount_in_cents.is_some()
        || doc.subscription_add_ons.is_some();
    let timeframe = match &doc.timeframe {
        None | Some(Timeframe::Now) => EngineTimeframe::Now,
        Some(Timeframe::Renewal) => EngineTimeframe::Renewal,
        Some(Timeframe::Unknown(other)) => {
            return field_error(ctx, "timeframe", "invalid", &format!("`{other}` is not now or renewal"));
        }
    };
    // The new terms are built on the current terms (the plan is read before the claim).
    let terms = if terms_given {
        let code = doc.plan_code.clone().unwrap_or_else(|| current.sub.terms.plan_code.clone());
        let plan = match plan_named(state, call, &code).await {
            Ok(plan) => plan,
            Err(response) => return response,
        };
        let currency = current.sub.terms.currency.clone();
        match terms_of(state, call, &plan, &currency, &doc, Some(&current.sub.terms)).await {
            Ok(terms) => Some(terms),
            Err(response) => return response,
        }
    } else {
        None
    };
    let remaining = match doc.remaining_billing_cycles {
        None => None,
        Some(n) => match u32::try_from(n) {
            Ok(n) => Some(n),
            Err(_) => return field_error(ctx, "remaining_billing_cycles", "invalid", "must be 0 or more"),
        },
    };
    let shipping =
        match views::shipping_choice(ctx, "subscription.", doc.shipping_address_id, doc.shipping_address.as_deref()) {
            Ok(choice) => choice,
            Err(response) => return response,
        };
    // The address is added to the account before the change (a preview adds nothing).
    let shipping_address_id = match shipping {
        Some(ShippingChoice::Existing(id)) if preview => Some(id),
        Some(ShippingChoice::New(_)) if preview => current.details.shipping_address_id,
        Some(choice) => {
            match rebill_app::customers::shipping_addresses::for_account(
                state,
                &call.context(),
                &current.details.account_code,
                &choice,
            )
            .await
            {
                Ok(resolved) => Some(resolved.address.id),
                Err(e) => return shipping_refusal(ctx, e),
            }
        }
        None => None,
    };
    // Coupons only with a change now (the reference: never with renewal-timeframe changes).
    let coupon_codes = coupons::requested(doc.coupon_code.as_ref(), doc.coupon_codes.as_ref());
    if !coupon_codes.is_empty() && (!terms_given || timeframe != EngineTimeframe::Now) {
        return field_error(ctx, "coupon_code", "invalid", "needs a change with timeframe now");
    }
    let imported_trial = doc.imported_trial;
    let build = move |sub: &Engine, details: &mut Details, _now: DateTime<Utc>| {
        apply_details(details, &doc);
        if shipping_address_id.is_some() {
            details.shipping_address_id = shipping_address_id;
        }
        let mut actions = Vec::new();
        if let Some(flag) = imported_trial {
            actions.push(Action::SetImportedTrial { imported_trial: flag });
        }
        if let Some(mut terms) = terms {
            // Values the request did not send follow the subscription as it is now.
            if terms.plan_code == sub.terms.plan_code && doc.subscription_add_ons.is_none() {
                terms.add_ons.clone_from(&sub.terms.add_ons);
            }
            actions.push(Action::Change { terms, timeframe });
        }
        if let Some(n) = remaining {
            actions.push(Action::SetRemainingBillingCycles { remaining_billing_cycles: Some(n) });
        }
        actions
    };
    if preview {
        return preview_change(state, call, current, &coupon_codes, build).await;
    }
    if coupon_codes.is_empty() {
        return change(state, call, build).await;
    }
    match rebill_app::subscriptions::lifecycle::change_with_coupons(state, &call.context(), uuid, &coupon_codes, build)
        .await
    {
        Ok(loaded) => respond_view(state, call, &loaded).await,
        Err(CouponChangeError::Coupon(e)) => respond::app_error(ctx, "subscription", e.into()),
        Err(CouponChangeError::Change(e)) => change_refusal(call, e),
    }
}

/// The subscription as a change would leave it, with `cost_in_cents` and the invoices the change
/// makes (`invoice_collection`); nothing is written. Coupon codes are checked as the change
/// checks them before it redeems them.
async fn preview_change<E: AnswersSubscription>(
    state: &AppState,
    call: &Routed<'_, E>,
    current: Loaded,
    coupon_codes: &[String],
    build: impl FnOnce(&Engine, &mut Details, DateTime<Utc>) -> Vec<Action>,
) -> Response {
    let ctx = &call.ctx.wire;
    let app = call.context();
    let coupons = if coupon_codes.is_empty() {
        Vec::new()
    } else {
        let terms = &current.sub.terms;
        match coupons::for_change(state, &app, coupon_codes, &terms.plan_code, &terms.currency).await {
            Ok(coupons) => coupons,
            Err(e) => return respond::app_error(ctx, "subscription", e.into()),
        }
    };
    let previewed = match subscriptions::preview_change(state, &app, &current, &coupons, build).await {
        Ok(p) => p,
        Err(e) => return change_refusal(call, e),
    };
    match view(state, &app, &previewed.sub, &previewed.details, Some(&current.record)).await {
        Ok(mut doc) => {
            doc.cost_in_cents = Some(previewed.cost_in_cents);
            let code = &previewed.details.account_code;
            doc.invoice_collection = Some(Box::new(preview_collection(code, &previewed.invoices, call.ctx.now)));
            call.answer(&doc)
        }
        Err(e) => respond::internal(&e),
    }
}

/// The invoices a subscription preview shows (`invoice_collection`, from 2.10 on a site with
/// Credit Memos): the operation's charge invoice, `nil` when it makes none (a downgrade), and its
/// credit invoices, each as a preview shows an invoice (no href, no number, lines `pending`).
fn preview_collection(account_code: &str, invoices: &InvoicePreviews, now: i64) -> InvoiceCollection {
    InvoiceCollection {
        charge_invoice: invoices.charge_invoice().map(|p| Box::new(preview_view(account_code, p, now))),
        credit_invoices: Some(invoices.credits.iter().map(|p| preview_view(account_code, p, now)).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(query: &str) -> Result<String, String> {
        postpone_date(Some(query)).map(|t| t.to_rfc3339()).map_err(|e| format!("{}: {}", e.name, e.description))
    }

    #[test]
    fn postpone_reads_either_name_and_any_iso_8601_form() {
        let midnight = Ok("2027-01-10T00:00:00+00:00".to_owned());
        assert_eq!(at("next_renewal_date=2027-01-10T00:00:00Z"), midnight);
        assert_eq!(at("next_bill_date=2027-01-10T00:00:00&bulk=false"), midnight);
        assert_eq!(at("next_bill_date=2027-01-10T00:00:00.000"), midnight);
        assert_eq!(at("next_bill_date=2027-01-10"), midnight);
        // `+` unescaped in a query decodes to a space.
        assert_eq!(at("next_bill_date=2027-01-10T00:00:00+00:00"), midnight);
        assert_eq!(at("next_bill_date=2027-01-10T02:00:00+02:00&bulk=true"), midnight);
        assert_eq!(at("next_bill_date=2027-01-10T02:00:00%2B02:00"), midnight);
        assert_eq!(at("next_renewal_date=2027-01-10&next_bill_date=2027-01-10T00:00:00"), midnight);
    }

    #[test]
    fn postpone_refuses_a_missing_bad_or_ambiguous_date() {
        let missing = at("bulk=false").expect_err("refused");
        assert!(
            missing.starts_with("next_renewal_date: next_renewal_date (or next_bill_date) is required"),
            "{missing}"
        );
        let bad = at("next_bill_date=soon").expect_err("refused");
        assert_eq!(bad, "next_bill_date: next_bill_date must be an ISO 8601 date or date-time (got `soon`).");
        let both = at("next_renewal_date=2027-01-10&next_bill_date=2027-01-11").expect_err("refused");
        assert!(both.contains("next_renewal_date and next_bill_date name different dates"), "{both}");
        // A space that is not an offset's sign is not read as one.
        assert!(at("next_bill_date=2027-01-10 00:00").is_err());
    }
}

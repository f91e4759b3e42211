//! Subscription endpoints and the scheduled work of subscriptions, over the billing engine
//! (`rebill_billing::lifecycle`) and the store (`rebill_store::subscriptions`).
//!
//! Every change (an endpoint or a scheduled job) runs the same way:
//! 1. claim the subscription in the store (a second change while one is in progress, in any
//!    process on the database, answers 422 `simultaneous_request`);
//! 2. catch up with what became due up to "now" (`next_due` / `advance`, one charge per
//!    renewal), then apply the action;
//! 3. save the new value, the history entry and the charges in one transaction;
//! 4. invoice every charge not invoiced yet (`billing::invoice_charges`, one invoice per charge)
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
//! - `terminate` takes `refund=none` (the default); `partial` and `full` answer 501 until refunds
//!   of transactions exist.
//! - `postpone` takes `next_renewal_date` or, as later clients name it, `next_bill_date` (both
//!   at once only when they name the same instant, else 400 `invalid_parameter`); a date-time
//!   without an offset is UTC. `bulk` (skip a wait between postpones) is accepted and changes
//!   nothing: rebill makes no such wait.
//! - `PUT /v2/subscriptions/{uuid}` without `timeframe` changes now. Add-ons sent replace the set;
//!   without them a plan change keeps the add-ons the new plan also has, at its prices.
//! - `imported_trial` can only be set (on create) with a trial and changed while a trial is ahead
//!   or running: otherwise 422 `imported_trial_not_in_trial`.

// Early returns carry the finished HTTP response; it is built once per request, so its size
// does not matter.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use rebill_billing::invoice::{InvoiceOrigin, LineItem};
use rebill_billing::lifecycle::{
    self, Action, AddOnTerms, LifecycleError, NewSubscription, Refund, StateFilter, Subscription as Engine,
    SubscriptionState as EngineState, SubscriptionTerms, Timeframe as EngineTimeframe, Transition, Trial,
};
use rebill_billing::period::{Interval, IntervalUnit};
use rebill_models::api::EndpointId;
use rebill_models::validate::{Operation, Rejection, Violation, errors_document, reject_decode, validate};
use rebill_models::{
    Account as AccountDoc, CollectionMethod, Subscription, SubscriptionAddOn, SubscriptionPlan, SubscriptionState,
    Timeframe,
};
use rebill_store::accounts::{Account, AccountFields, AddressFields};
use rebill_store::invoicing::{
    AccountSnapshot, Adjustment, CollectionMethod as InvoiceCollection, Invoice, InvoiceDraft, InvoiceTerms,
    NewTransaction, Payer, Transaction, TransactionResult, TransactionStatus,
};
use rebill_store::jobs::Job;
use rebill_store::plans::Plan;
use rebill_store::subscriptions::{
    Charge, Claimed, Indexed, NewCharge, NewSubscriptionRecord, Reschedule, StateFilter as StoreFilter,
    SubscriptionChange, SubscriptionClaim, SubscriptionFilter, SubscriptionRecord, SubscriptionSave,
};
use rebill_store::{Site, StoreError};
use rebill_xml::{Href, Mode, WireContext};
use serde::{Deserialize, Serialize};

use crate::billing::{self, Collect, DeclineFields, Draft, PaymentSource, Preview};
use crate::handlers::Call;
use crate::lists::{ListQuery, invalid_choice};
use crate::respond::{time, with_location};
use crate::scheduler::JobError;
use crate::{AppState, respond};

/// Seconds a change holds its claim on a subscription (service clock); a process that dies
/// holding one blocks the subscription this long at most.
const CLAIM_SECONDS: i64 = 60;
/// How long a scheduled job waits for a change in progress to finish before it is retried.
const JOB_CLAIM_ATTEMPTS: u32 = 200;
const JOB_CLAIM_PAUSE: std::time::Duration = std::time::Duration::from_millis(25);

/// Whether this module serves the endpoint.
pub(crate) fn handles(id: EndpointId) -> bool {
    matches!(
        id,
        EndpointId::ListSubscriptions
            | EndpointId::ListAccountSubscriptions
            | EndpointId::CreateSubscription
            | EndpointId::CreateAccountSubscription
            | EndpointId::PreviewSubscription
            | EndpointId::GetSubscription
            | EndpointId::UpdateSubscription
            | EndpointId::PreviewSubscriptionChange
            | EndpointId::CancelSubscription
            | EndpointId::TerminateSubscription
            | EndpointId::ReactivateSubscription
            | EndpointId::PostponeSubscription
            | EndpointId::UpdateSubscriptionNotes
            | EndpointId::PauseSubscription
            | EndpointId::ResumeSubscription
    )
}

pub(crate) async fn handle(state: &AppState, call: &Call, request: Request) -> Response {
    let query = request.uri().query().map(str::to_owned);
    match call.id {
        EndpointId::ListSubscriptions => list(state, call, query.as_deref(), None).await,
        EndpointId::ListAccountSubscriptions => {
            let code = &call.params[0];
            match state.store.account(call.ctx.site.id, code).await {
                Ok(Some(account)) => list(state, call, query.as_deref(), Some(&account)).await,
                Ok(None) => account_not_found(code),
                Err(e) => respond::internal(&e),
            }
        }
        EndpointId::CreateSubscription | EndpointId::CreateAccountSubscription => {
            create(state, call, request, false).await
        }
        EndpointId::PreviewSubscription => create(state, call, request, true).await,
        EndpointId::GetSubscription => get(state, call).await,
        EndpointId::UpdateSubscription => update(state, call, request, false).await,
        EndpointId::PreviewSubscriptionChange => update(state, call, request, true).await,
        EndpointId::CancelSubscription => simple_action(state, call, Action::Cancel).await,
        EndpointId::ReactivateSubscription => simple_action(state, call, Action::Reactivate).await,
        EndpointId::ResumeSubscription => simple_action(state, call, Action::Resume).await,
        EndpointId::TerminateSubscription => terminate(state, call, query.as_deref()).await,
        EndpointId::PostponeSubscription => postpone(state, call, query.as_deref()).await,
        EndpointId::UpdateSubscriptionNotes => notes(state, call, request).await,
        EndpointId::PauseSubscription => pause(state, call, request).await,
        _ => respond::internal(&format!("{} routed to a module that does not serve it", call.endpoint.name)),
    }
}

// ---------------------------------------------------------------------------------------------
// Stored documents

/// What the service keeps beside the engine's value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Details {
    account_code: String,
    #[serde(default)]
    po_number: Option<String>,
    #[serde(default)]
    net_terms: Option<i64>,
    #[serde(default)]
    collection_method: Option<String>,
    #[serde(default)]
    terms_and_conditions: Option<String>,
    #[serde(default)]
    customer_notes: Option<String>,
    #[serde(default)]
    vat_reverse_charge_notes: Option<String>,
}

impl Details {
    /// The notes and settings a request sends (others are kept).
    fn apply(&mut self, doc: &Subscription) {
        let set = |target: &mut Option<String>, value: &Option<String>| {
            if value.is_some() {
                target.clone_from(value);
            }
        };
        set(&mut self.po_number, &doc.po_number);
        set(&mut self.terms_and_conditions, &doc.terms_and_conditions);
        set(&mut self.customer_notes, &doc.customer_notes);
        set(&mut self.vat_reverse_charge_notes, &doc.vat_reverse_charge_notes);
        if doc.net_terms.is_some() {
            self.net_terms = doc.net_terms;
        }
        if let Some(method) = &doc.collection_method {
            self.collection_method = Some(
                match method {
                    CollectionMethod::Automatic => "automatic",
                    CollectionMethod::Manual => "manual",
                    CollectionMethod::Unknown(other) => other.as_str(),
                }
                .to_owned(),
            );
        }
    }
}

fn to_json<T: Serialize>(value: &T) -> Result<String, Response> {
    serde_json::to_string(value).map_err(|e| respond::internal(&e))
}

fn from_json<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, String> {
    serde_json::from_str(text).map_err(|e| format!("stored subscription document: {e}"))
}

/// A loaded subscription: its record and the documents in it.
struct Loaded {
    record: SubscriptionRecord,
    sub: Engine,
    details: Details,
}

impl Loaded {
    fn of(record: SubscriptionRecord) -> Result<Self, String> {
        let sub = from_json(&record.value)?;
        let details = from_json(&record.details)?;
        Ok(Self { record, sub, details })
    }
}

fn epoch(t: DateTime<Utc>) -> i64 {
    t.timestamp()
}

fn indexed(sub: &Engine) -> Indexed {
    Indexed {
        state: sub.state.name().to_owned(),
        past_due: sub.past_due,
        trial_started_at: sub.trial_started_at.map(epoch),
        trial_ends_at: sub.trial_ends_at.map(epoch),
    }
}

/// A new subscription uuid: 32 hexadecimal characters (128 random bits).
fn new_uuid() -> String {
    let mut bytes = [0u8; 16];
    // Without the operating system's random source no identifier can be made.
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    hex::encode(bytes)
}

// ---------------------------------------------------------------------------------------------
// Responses

fn not_found(uuid: &str) -> Response {
    respond::not_found(&format!("Couldn't find Subscription with uuid = {uuid}"))
}

fn account_not_found(code: &str) -> Response {
    respond::not_found(&format!("Couldn't find Account with account_code = {code}"))
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

fn path(id: EndpointId, params: &[&str]) -> Href {
    Href::path(id.endpoint().render(params))
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

async fn names(state: &AppState, site_id: i64, plan_code: &str) -> Result<Names, StoreError> {
    let Some(plan) = state.store.plan(site_id, plan_code).await? else { return Ok(Names::default()) };
    let add_ons = state.store.add_ons(plan.id).await?.into_iter().map(|a| (a.add_on_code, a.name)).collect();
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
    site_id: i64,
    sub: &Engine,
    details: &Details,
    record: Option<&SubscriptionRecord>,
) -> Result<Subscription, StoreError> {
    let terms = &sub.terms;
    let current = names(state, site_id, &terms.plan_code).await?;
    let pending = match &sub.pending_change {
        Some(next) => {
            let next_names = if next.plan_code == terms.plan_code {
                Names { plan: current.plan.clone(), add_ons: current.add_ons.clone() }
            } else {
                names(state, site_id, &next.plan_code).await?
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
    let anchor = |id: EndpointId, when: bool| (stored && when).then(|| path(id, &[u]));
    let (active, canceled, paused) =
        (sub.state == EngineState::Active, sub.state == EngineState::Canceled, sub.state == EngineState::Paused);
    let live = !matches!(sub.state, EngineState::Expired);
    Ok(Subscription {
        account_href: Some(path(EndpointId::GetAccount, &[&details.account_code])),
        invoice: record.and_then(|r| r.last_invoice.as_deref()).map(|n| path(EndpointId::GetInvoice, &[n])),
        plan: Some(Box::new(plan_doc(&terms.plan_code, &current))),
        redemptions: stored.then(|| path(EndpointId::ListSubscriptionRedemptions, &[u])),
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
        started_with_gift: Some(false),
        imported_trial: Some(sub.imported_trial),
        paused_at: sub.paused_at,
        remaining_pause_cycles: sub.remaining_pause_cycles.map(i64::from),
        subscription_add_ons: Some(add_on_docs(terms, &current)),
        pending_subscription: pending,
        cancel_action: anchor(EndpointId::CancelSubscription, active || paused),
        terminate_action: anchor(EndpointId::TerminateSubscription, live),
        postpone_action: anchor(EndpointId::PostponeSubscription, active || paused),
        notes_action: anchor(EndpointId::UpdateSubscriptionNotes, live),
        reactivate_action: anchor(EndpointId::ReactivateSubscription, canceled),
        pause_action: anchor(EndpointId::PauseSubscription, active || paused),
        resume_action: anchor(EndpointId::ResumeSubscription, paused),
        ..Subscription::default()
    })
}

async fn respond_view(state: &AppState, call: &Call, loaded: &Loaded, status: StatusCode) -> Response {
    match view(state, call.ctx.site.id, &loaded.sub, &loaded.details, Some(&loaded.record)).await {
        Ok(doc) => respond::resource(status, &doc, &call.ctx.wire),
        Err(e) => respond::internal(&e),
    }
}

// ---------------------------------------------------------------------------------------------
// Reading requests

/// Reads and decodes a `<subscription>` body and validates it for `op`.
async fn read_request(
    state: &AppState,
    call: &Call,
    request: Request,
    op: Operation,
) -> Result<Subscription, Response> {
    let ctx = &call.ctx.wire;
    let body = crate::accounts::read_body(request, state.config.body_limit).await?;
    let doc = rebill_xml::from_xml::<Subscription>(&body, ctx, Mode::Request)
        .map_err(|e| respond::rejection(&reject_decode(&e), ctx))?;
    validate(&doc, ctx, op).map_err(|errors| respond::rejection(&Rejection::Invalid(errors), ctx))?;
    Ok(doc)
}

/// The query parameter `name`, if sent (the last one counts).
fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v.into_owned())
        .last()
}

fn interval_of(plan: &Plan) -> Result<Interval, Response> {
    let unit = match plan.interval.unit {
        rebill_store::plans::IntervalUnit::Days => IntervalUnit::Days,
        rebill_store::plans::IntervalUnit::Months => IntervalUnit::Months,
    };
    u32::try_from(plan.interval.length)
        .ok()
        .and_then(|length| Interval::new(length, unit).ok())
        .ok_or_else(|| respond::internal(&format!("plan {} has an invalid interval", plan.plan_code)))
}

fn trial_of(plan: &Plan) -> Option<Interval> {
    let unit = match plan.trial.unit {
        rebill_store::plans::IntervalUnit::Days => IntervalUnit::Days,
        rebill_store::plans::IntervalUnit::Months => IntervalUnit::Months,
    };
    u32::try_from(plan.trial.length).ok().filter(|n| *n > 0).map(|n| Interval { length: n, unit })
}

/// The plan named by a request (422 on `subscription.plan_code` when there is none).
async fn plan_named(state: &AppState, call: &Call, code: &str) -> Result<Plan, Response> {
    match state.store.plan(call.ctx.site.id, code).await {
        Ok(Some(plan)) if !plan.is_deleted() => Ok(plan),
        Ok(_) => Err(field_error(&call.ctx.wire, "plan_code", "not_found", "is not a plan of the site")),
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
    let plan_add_ons = state.store.add_ons(plan.id).await.map_err(|e| respond::internal(&e))?;
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
fn account_fields(account: &AccountDoc) -> AccountFields {
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

// ---------------------------------------------------------------------------------------------
// Catching up and saving

/// One charge to invoice: lines and origin.
struct Pending {
    origin: InvoiceOrigin,
    at: DateTime<Utc>,
    lines: Vec<LineItem>,
}

/// Runs every scheduled transition due at or before `now`, one charge per transition with lines.
fn catch_up(sub: &Engine, now: DateTime<Utc>, charges: &mut Vec<Pending>) -> Result<Engine, LifecycleError> {
    let mut s = sub.clone();
    while let Some(due) = lifecycle::next_due(&s) {
        if due.at > now {
            break;
        }
        let step = lifecycle::advance(&s)?;
        if let Some(origin) = step.origin {
            charges.push(Pending { origin, at: due.at, lines: step.lines });
        }
        s = step.subscription;
    }
    Ok(s)
}

fn push(transition: Transition, at: DateTime<Utc>, charges: &mut Vec<Pending>) -> Engine {
    if let Some(origin) = transition.origin {
        charges.push(Pending { origin, at, lines: transition.lines });
    }
    transition.subscription
}

fn new_charges(charges: &[Pending]) -> Result<Vec<NewCharge>, Response> {
    charges
        .iter()
        .map(|c| Ok(NewCharge { origin: c.origin.name().to_owned(), at: epoch(c.at), lines: to_json(&c.lines)? }))
        .collect()
}

/// Keeps the one scheduled job of the subscription at its `next_due`.
async fn reschedule(state: &AppState, site_id: i64, sub: &Engine, running: Option<i64>) -> Result<(), StoreError> {
    let next = lifecycle::next_due(sub).map(|d| (d.kind.name(), epoch(d.at)));
    state.store.reschedule_subscription(site_id, &sub.uuid, next, running).await
}

// ---------------------------------------------------------------------------------------------
// Invoicing

/// What invoicing a charge did.
enum Collected {
    /// Invoiced and paid (or nothing to collect, or collected manually later).
    Paid(Option<String>),
    /// Invoiced, but the payment was declined (or there is no payment method to charge).
    Declined(Option<String>, Option<Box<Response>>),
}

/// The invoice terms and notes of the subscription's invoices.
fn invoice_terms(details: &Details) -> InvoiceTerms {
    InvoiceTerms {
        collection_method: match details.collection_method.as_deref() {
            Some("manual") => InvoiceCollection::Manual,
            _ => InvoiceCollection::Automatic,
        },
        net_terms: details.net_terms.unwrap_or(0),
        po_number: details.po_number.clone(),
        customer_notes: details.customer_notes.clone(),
        terms_and_conditions: details.terms_and_conditions.clone(),
        vat_reverse_charge_notes: details.vat_reverse_charge_notes.clone(),
    }
}

/// Invoices one charge of the subscription's account (one invoice per charge) and collects it:
/// the first payment of a new subscription once (a decline refuses the creation), any later
/// charge automatically (a decline leaves the invoice past due, with dunning retries), or not
/// at all with the manual collection method.
async fn invoice_charge(
    state: &AppState,
    site: &Site,
    account: &Account,
    details: &Details,
    charge: &Charge,
    lines: Vec<LineItem>,
    ctx: &WireContext,
) -> Result<Collected, String> {
    let origin = match charge.origin.as_str() {
        "purchase" => InvoiceOrigin::Purchase,
        "renewal" => InvoiceOrigin::Renewal,
        "immediate_change" => InvoiceOrigin::ImmediateChange,
        "termination" => InvoiceOrigin::Termination,
        other => return Err(format!("unknown invoice origin {other}")),
    };
    let terms = invoice_terms(details);
    let collect = if terms.collection_method == InvoiceCollection::Manual {
        Collect::Manual
    } else if origin == InvoiceOrigin::Purchase {
        Collect::Once
    } else {
        Collect::Automatic
    };
    let draft = Draft { terms, ..Draft::of_lines(lines, origin) };
    let invoiced =
        billing::invoice(state, site, account, draft, charge.at, collect, None).await.map_err(|e| e.to_string())?;
    let number = Some(invoiced.invoice.invoice_number.to_string());
    if invoiced.is_paid() || collect == Collect::Manual {
        return Ok(Collected::Paid(number));
    }
    let response = invoiced.declined().map(|t| {
        let fields = DeclineFields {
            verification_value: "subscription.account.billing_info.verification_value",
            base: "subscription.base",
        };
        Box::new(billing::decline_response(ctx, t, fields))
    });
    Ok(Collected::Declined(number, response))
}

/// Invoices the subscription's charges not invoiced yet, in order. A charge whose lines the
/// invoices already hold (it was invoiced, then the process stopped before recording it) is
/// recorded, not invoiced again. A declined charge other than the first payment makes the
/// subscription past due (saved under the held claim). Answers whether a charge was declined,
/// with the decline's response when there was a transaction.
async fn bill_pending(
    state: &AppState,
    site: &Site,
    claim: &SubscriptionClaim,
    loaded: &mut Loaded,
    ctx: &WireContext,
    now: i64,
) -> Result<Option<Option<Response>>, String> {
    let all = state.store.subscription_charges(loaded.record.id).await.map_err(|e| e.to_string())?;
    if all.iter().all(|c| c.billed_at.is_some()) {
        return Ok(None);
    }
    let account = state
        .store
        .account(site.id, &loaded.details.account_code)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the subscription's account is missing")?;
    let mut recorded: Vec<LineItem> = Vec::new();
    for charge in all.iter().filter(|c| c.billed_at.is_some()) {
        recorded.extend(from_json::<Vec<LineItem>>(&charge.lines)?);
    }
    let mut declined = None;
    for charge in all.iter().filter(|c| c.billed_at.is_none()) {
        let lines: Vec<LineItem> = from_json(&charge.lines)?;
        let invoiced = billing::billed_lines(state, &loaded.record.uuid).await.map_err(|e| e.to_string())?;
        let mut with_charge = recorded.clone();
        with_charge.extend(lines.iter().cloned());
        let already = !lines.is_empty()
            && rebill_billing::invoice::diff(&with_charge, &invoiced).map_err(|e| e.to_string())?.is_empty();
        recorded.extend(lines.iter().cloned());
        if !state.store.holds_subscription_claim(claim).await.map_err(|e| e.to_string())? {
            return Err("the claim on the subscription was lost".into());
        }
        if already || lines.is_empty() {
            state.store.mark_charge_billed(charge, None, now).await.map_err(|e| e.to_string())?;
            continue;
        }
        let outcome = invoice_charge(state, site, &account, &loaded.details, charge, lines, ctx).await?;
        let invoice = match &outcome {
            Collected::Paid(invoice) | Collected::Declined(invoice, _) => invoice.clone(),
        };
        state.store.mark_charge_billed(charge, invoice.as_deref(), now).await.map_err(|e| e.to_string())?;
        if let Collected::Declined(_, response) = outcome {
            if !loaded.sub.past_due && charge.origin != "purchase" {
                let failed = lifecycle::fail_renewal(&loaded.sub).map_err(|e| e.to_string())?;
                save_plain(state, claim, loaded, failed, Vec::new(), now).await?;
            }
            declined.get_or_insert(response.map(|r| *r));
        }
    }
    if let Some(record) = state.store.subscription_by_id(loaded.record.id).await.map_err(|e| e.to_string())? {
        loaded.record = record;
    }
    Ok(declined)
}

/// Saves a new value without charges (past due, recovered, expired for non-payment), with
/// these history entries.
async fn save_plain(
    state: &AppState,
    claim: &SubscriptionClaim,
    loaded: &mut Loaded,
    sub: Engine,
    history: Vec<(i64, String)>,
    now: i64,
) -> Result<(), String> {
    let change = SubscriptionChange {
        indexed: indexed(&sub),
        value: serde_json::to_string(&sub).map_err(|e| e.to_string())?,
        details: serde_json::to_string(&loaded.details).map_err(|e| e.to_string())?,
        history,
        ..SubscriptionChange::default()
    };
    match state.store.save_subscription(claim, &change, now).await.map_err(|e| e.to_string())? {
        Some(record) => {
            loaded.record = record;
            loaded.sub = sub;
            Ok(())
        }
        None => Err("the claim on the subscription was lost".into()),
    }
}

// ---------------------------------------------------------------------------------------------
// Endpoints

/// `GET /v2/subscriptions` and `GET /v2/accounts/{account_code}/subscriptions` (and HEAD).
async fn list(state: &AppState, call: &Call, query: Option<&str>, account: Option<&Account>) -> Response {
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
    let page = match state.store.list_subscriptions(call.ctx.site.id, &filter, &query.page()).await {
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
            match view(state, call.ctx.site.id, &loaded.sub, &loaded.details, Some(&loaded.record)).await {
                Ok(doc) => items.push(doc),
                Err(e) => return respond::internal(&e),
            }
        }
    }
    let params: Vec<&str> = call.params.iter().map(String::as_str).collect();
    let path = call.endpoint.render(&params);
    crate::lists::page_response(&call.ctx.wire, &path, &query, &items, page.next, page.total, call.head)
}

/// `GET /v2/subscriptions/{uuid}`.
async fn get(state: &AppState, call: &Call) -> Response {
    let uuid = &call.params[0];
    match state.store.subscription(call.ctx.site.id, uuid).await {
        Ok(Some(record)) => match Loaded::of(record) {
            Ok(loaded) => respond_view(state, call, &loaded, StatusCode::OK).await,
            Err(e) => respond::internal(&e),
        },
        Ok(None) => not_found(uuid),
        Err(e) => respond::internal(&e),
    }
}

/// `POST /v2/subscriptions`, `POST /v2/accounts/{account_code}/subscriptions` (201 with
/// `Location`) and `POST /v2/subscriptions/preview` (200, nothing written).
async fn create(state: &AppState, call: &Call, request: Request, preview: bool) -> Response {
    let ctx = &call.ctx.wire;
    let doc = match read_request(state, call, request, Operation::Create).await {
        Ok(doc) => doc,
        Err(response) => return response,
    };
    let now = match time(call.ctx.now) {
        Some(t) => t,
        None => return respond::internal(&"site clock out of range"),
    };
    // The account: the path's, or the nested one (created or updated).
    let nested = doc.account.as_deref();
    let path_code = (call.id == EndpointId::CreateAccountSubscription).then(|| call.params[0].clone());
    let code = match (&path_code, nested.and_then(|a| a.account_code.clone())) {
        (Some(code), _) => code.clone(),
        (None, Some(code)) if !code.trim().is_empty() => code,
        _ => return field_error(ctx, "account.account_code", "blank", "can't be blank"),
    };
    let existing = match state.store.account(call.ctx.site.id, &code).await {
        Ok(a) => a,
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
    let trial = match doc.trial_ends_at {
        Some(end) => Some(Trial::Until(end)),
        None => trial_of(&plan).map(Trial::For),
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
    let mut charges = Vec::new();
    let sub = match lifecycle::create(new.clone(), now).and_then(|created| {
        let sub = push(created, now, &mut charges);
        catch_up(&sub, now, &mut charges)
    }) {
        Ok(sub) => sub,
        Err(e) => return lifecycle_error(ctx, &e),
    };
    let mut details = Details { account_code: code.clone(), ..Details::default() };
    details.apply(&doc);
    if preview {
        return match view(state, call.ctx.site.id, &sub, &details, None).await {
            Ok(mut view) => {
                view.cost_in_cents = Some(charges.iter().flat_map(|c| &c.lines).map(|l| l.total_in_cents).sum());
                respond::resource(StatusCode::OK, &view, ctx)
            }
            Err(e) => respond::internal(&e),
        };
    }
    // The nested billing info is checked before anything is written.
    let prepared = match nested.and_then(|a| a.billing_info.as_deref()) {
        Some(info) => {
            let mut info = info.clone();
            if info.currency.is_none() {
                info.currency = Some(currency.clone());
            }
            match crate::billing_info::prepare(state, call, existing.as_ref(), &info).await {
                Ok(prepared) => Some(prepared),
                Err(response) => return response,
            }
        }
        None => None,
    };
    let created_here = existing.is_none();
    // The account, created or updated with what the request nests, and its billing info.
    let fields = nested.map(account_fields).unwrap_or_default();
    let account = match existing {
        Some(_) if nested.is_some() => {
            match state.store.update_account(call.ctx.site.id, &code, &fields, call.ctx.now).await {
                Ok(Some(a)) => a,
                Ok(None) => return account_not_found(&code),
                Err(e) => return respond::internal(&e),
            }
        }
        Some(account) => account,
        None => match state.store.create_account(call.ctx.site.id, &code, &fields, call.ctx.now).await {
            Ok(a) => a,
            Err(StoreError::DuplicateAccount(_)) => return simultaneous_request(),
            Err(e) => return respond::internal(&e),
        },
    };
    if let Some(prepared) = prepared {
        match crate::billing_info::commit(state, call, &account, prepared).await {
            Ok(_) => {}
            Err(refusal) => {
                // An account this request created goes again with the refused billing info.
                let keep = matches!(refusal, crate::billing_info::Refusal::Declined { saved: true, .. });
                if created_here
                    && !keep
                    && let Err(e) = state.store.discard_new_account(call.ctx.site.id, account.id).await
                {
                    tracing::error!(error = %e, "removing an account whose billing info was refused");
                }
                return refusal.response(ctx);
            }
        }
    }
    let new_charges = match new_charges(&charges) {
        Ok(c) => c,
        Err(response) => return response,
    };
    let (value, creation, details_json) = match (to_json(&sub), to_json(&new), to_json(&details)) {
        (Ok(a), Ok(b), Ok(c)) => (a, b, c),
        (Err(r), _, _) | (_, Err(r), _) | (_, _, Err(r)) => return r,
    };
    let record = NewSubscriptionRecord {
        site_id: call.ctx.site.id,
        account_id: account.id,
        plan_id: plan.id,
        uuid: uuid.clone(),
        indexed: indexed(&sub),
        value,
        creation,
        details: details_json,
    };
    let lease = state.clock.now() + CLAIM_SECONDS;
    let (claim, record) = match state.store.create_subscription(&record, &new_charges, call.ctx.now, lease).await {
        Ok(created) => created,
        Err(e) => return respond::internal(&e),
    };
    let mut loaded = Loaded { record, sub, details };
    let result = finish_create(state, call, &claim, &mut loaded).await;
    if let Err(e) = state.store.release_subscription(&claim).await {
        tracing::warn!(error = %e, "releasing a subscription claim");
    }
    match result {
        Ok(()) => {}
        Err(response) => return response,
    }
    let response = respond_view(state, call, &loaded, StatusCode::CREATED).await;
    if response.status() != StatusCode::CREATED {
        return response;
    }
    with_location(response, ctx, &EndpointId::GetSubscription.endpoint().render(&[&uuid]))
}

/// Invoices the new subscription's first charges and schedules it; a declined first payment
/// removes the subscription and answers the decline.
async fn finish_create(
    state: &AppState,
    call: &Call,
    claim: &SubscriptionClaim,
    loaded: &mut Loaded,
) -> Result<(), Response> {
    match bill_pending(state, &call.ctx.site, claim, loaded, &call.ctx.wire, call.ctx.now).await {
        Ok(None) => {}
        Ok(Some(declined)) => {
            if let Err(e) = state.store.discard_subscription(claim).await {
                return Err(respond::internal(&e));
            }
            return Err(declined.unwrap_or_else(|| {
                field_errors(
                    &call.ctx.wire,
                    &[Violation {
                        field: "subscription.account.billing_info".into(),
                        symbol: "blank",
                        message: "can't be blank: the first payment needs a payment method".into(),
                    }],
                )
            }));
        }
        Err(e) => return Err(respond::internal(&e)),
    }
    reschedule(state, call.ctx.site.id, &loaded.sub, None).await.map_err(|e| respond::internal(&e))
}

/// One action on a stored subscription: claims it, catches up to now, applies `action` (built
/// from the caught-up value), saves, invoices, reschedules and answers the subscription.
async fn change(
    state: &AppState,
    call: &Call,
    action: impl FnOnce(&Engine, &mut Details, DateTime<Utc>) -> Result<Vec<Action>, Response>,
) -> Response {
    let uuid = &call.params[0];
    let Some(now) = time(call.ctx.now) else { return respond::internal(&"site clock out of range") };
    let service_now = state.clock.now();
    let (claim, record) =
        match state.store.claim_subscription(call.ctx.site.id, uuid, service_now, service_now + CLAIM_SECONDS).await {
            Ok(Claimed::Held(claim, record)) => (claim, *record),
            Ok(Claimed::Busy) => return simultaneous_request(),
            Ok(Claimed::NotFound) => return not_found(uuid),
            Err(e) => return respond::internal(&e),
        };
    let result = change_held(state, call, &claim, record, now, action).await;
    if let Err(e) = state.store.release_subscription(&claim).await {
        tracing::warn!(error = %e, "releasing a subscription claim");
    }
    match result {
        Ok(loaded) => respond_view(state, call, &loaded, StatusCode::OK).await,
        Err(response) => response,
    }
}

async fn change_held(
    state: &AppState,
    call: &Call,
    claim: &SubscriptionClaim,
    record: SubscriptionRecord,
    now: DateTime<Utc>,
    action: impl FnOnce(&Engine, &mut Details, DateTime<Utc>) -> Result<Vec<Action>, Response>,
) -> Result<Loaded, Response> {
    let ctx = &call.ctx.wire;
    let mut loaded = Loaded::of(record).map_err(|e| respond::internal(&e))?;
    let mut charges = Vec::new();
    let caught_up = catch_up(&loaded.sub, now, &mut charges).map_err(|e| lifecycle_error(ctx, &e))?;
    let mut details = loaded.details.clone();
    let actions = action(&caught_up, &mut details, now)?;
    let mut sub = caught_up;
    let mut history = Vec::new();
    for a in actions {
        let transition = lifecycle::apply(&sub, &a, now).map_err(|e| lifecycle_error(ctx, &e))?;
        sub = push(transition, now, &mut charges);
        history.push((call.ctx.now, to_json(&a)?));
    }
    let plan_id = if sub.terms.plan_code != loaded.sub.terms.plan_code {
        match state.store.plan(call.ctx.site.id, &sub.terms.plan_code).await {
            Ok(plan) => plan.map(|p| p.id),
            Err(e) => return Err(respond::internal(&e)),
        }
    } else {
        None
    };
    let change = SubscriptionChange {
        plan_id,
        indexed: indexed(&sub),
        value: to_json(&sub)?,
        details: to_json(&details)?,
        history,
        charges: new_charges(&charges)?,
    };
    let saved = match state.store.save_subscription(claim, &change, call.ctx.now).await {
        Ok(Some(record)) => record,
        Ok(None) => return Err(simultaneous_request()),
        Err(e) => return Err(respond::internal(&e)),
    };
    loaded = Loaded { record: saved, sub, details };
    // A declined charge leaves its invoice past due (with retries) and the subscription past
    // due; the change itself stands.
    bill_pending(state, &call.ctx.site, claim, &mut loaded, ctx, call.ctx.now)
        .await
        .map_err(|e| respond::internal(&e))?;
    reschedule(state, call.ctx.site.id, &loaded.sub, None).await.map_err(|e| respond::internal(&e))?;
    Ok(loaded)
}

/// An action without a body.
async fn simple_action(state: &AppState, call: &Call, action: Action) -> Response {
    change(state, call, move |_, _, _| Ok(vec![action])).await
}

/// `PUT /v2/subscriptions/{uuid}/terminate?refund=none|partial|full`.
async fn terminate(state: &AppState, call: &Call, query: Option<&str>) -> Response {
    match query_param(query, "refund").as_deref() {
        None | Some("none") => simple_action(state, call, Action::Terminate { refund: Refund::None }).await,
        Some("partial" | "full") => respond::error(
            StatusCode::NOT_IMPLEMENTED,
            "not_implemented",
            "Terminating with refund=partial or refund=full is not implemented yet (refunds of transactions come \
             later); use refund=none. Nothing was changed.",
        ),
        Some(other) => invalid_choice("refund", &["none", "partial", "full"], other).response(),
    }
}

/// `PUT /v2/subscriptions/{uuid}/postpone?next_renewal_date=…` (or `next_bill_date=…`; `bulk`
/// is accepted and changes nothing).
async fn postpone(state: &AppState, call: &Call, query: Option<&str>) -> Response {
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
                crate::parse_instant(&text).and_then(time).ok_or_else(|| crate::lists::InvalidParameter {
                    name: name.into(),
                    description: format!("{name} must be an ISO 8601 date or date-time (got `{text}`)."),
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
async fn notes(state: &AppState, call: &Call, request: Request) -> Response {
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
        details.apply(&notes);
        Ok(Vec::new())
    })
    .await
}

/// `PUT /v2/subscriptions/{uuid}/pause` with `remaining_pause_cycles`.
async fn pause(state: &AppState, call: &Call, request: Request) -> Response {
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
async fn update(state: &AppState, call: &Call, request: Request, preview: bool) -> Response {
    let ctx = &call.ctx.wire;
    let uuid = &call.params[0];
    let doc = match read_request(state, call, request, Operation::Update).await {
        Ok(doc) => doc,
        Err(response) => return response,
    };
    let record = match state.store.subscription(call.ctx.site.id, uuid).await {
        Ok(Some(record)) => record,
        Ok(None) => return not_found(uuid),
        Err(e) => return respond::internal(&e),
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
    let imported_trial = doc.imported_trial;
    let build = move |sub: &Engine, details: &mut Details, _now: DateTime<Utc>| {
        details.apply(&doc);
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
        Ok(actions)
    };
    if preview {
        return preview_change(state, call, current, build).await;
    }
    change(state, call, build).await
}

/// The subscription as a change would leave it, with `cost_in_cents`; nothing is written.
async fn preview_change(
    state: &AppState,
    call: &Call,
    current: Loaded,
    build: impl FnOnce(&Engine, &mut Details, DateTime<Utc>) -> Result<Vec<Action>, Response>,
) -> Response {
    let ctx = &call.ctx.wire;
    let Some(now) = time(call.ctx.now) else { return respond::internal(&"site clock out of range") };
    let mut charges = Vec::new();
    let mut sub = match catch_up(&current.sub, now, &mut charges) {
        Ok(sub) => sub,
        Err(e) => return lifecycle_error(ctx, &e),
    };
    let before = charges.len();
    let mut details = current.details.clone();
    let actions = match build(&sub, &mut details, now) {
        Ok(a) => a,
        Err(response) => return response,
    };
    for a in actions {
        match lifecycle::apply(&sub, &a, now) {
            Ok(t) => sub = push(t, now, &mut charges),
            Err(e) => return lifecycle_error(ctx, &e),
        }
    }
    match view(state, call.ctx.site.id, &sub, &details, Some(&current.record)).await {
        Ok(mut doc) => {
            doc.cost_in_cents = Some(charges[before..].iter().flat_map(|c| &c.lines).map(|l| l.total_in_cents).sum());
            respond::resource(StatusCode::OK, &doc, ctx)
        }
        Err(e) => respond::internal(&e),
    }
}

// ---------------------------------------------------------------------------------------------
// Scheduled work and invoice outcomes

/// Claims a subscription for scheduled work, waiting for a change in progress to finish.
async fn claim_for_work(
    state: &AppState,
    site_id: i64,
    uuid: &str,
) -> Result<Option<(SubscriptionClaim, SubscriptionRecord)>, JobError> {
    for _ in 0..JOB_CLAIM_ATTEMPTS {
        let service_now = state.clock.now();
        match state.store.claim_subscription(site_id, uuid, service_now, service_now + CLAIM_SECONDS).await? {
            Claimed::Held(claim, record) => return Ok(Some((claim, *record))),
            Claimed::NotFound => return Ok(None),
            Claimed::Busy => tokio::time::sleep(JOB_CLAIM_PAUSE).await,
        }
    }
    Err(JobError::Failed(format!("subscription {uuid} stayed busy")))
}

/// Runs a scheduled subscription job (renewal, trial end, pause start or end, expiration, …)
/// at its due time: what is due then happens (once), its charges are invoiced (one invoice per
/// renewal) and the next job is scheduled.
pub(crate) async fn run_job(state: &AppState, site: &Site, job: &Job) -> Result<(), JobError> {
    let Some((claim, record)) = claim_for_work(state, job.site_id, &job.subject).await? else {
        // The subscription is gone (a refused creation): nothing to do.
        return Ok(());
    };
    let result = run_job_held(state, site, job, &claim, record).await;
    if let Err(e) = state.store.release_subscription(&claim).await {
        tracing::warn!(error = %e, "releasing a subscription claim");
    }
    result
}

async fn run_job_held(
    state: &AppState,
    site: &Site,
    job: &Job,
    claim: &SubscriptionClaim,
    record: SubscriptionRecord,
) -> Result<(), JobError> {
    let at = time(job.due_at).ok_or_else(|| JobError::Failed("job time out of range".into()))?;
    let mut loaded = Loaded::of(record).map_err(JobError::Failed)?;
    let mut charges = Vec::new();
    let sub = catch_up(&loaded.sub, at, &mut charges).map_err(|e| JobError::Failed(e.to_string()))?;
    if sub != loaded.sub {
        let change = SubscriptionChange {
            indexed: indexed(&sub),
            value: serde_json::to_string(&sub).map_err(|e| JobError::Failed(e.to_string()))?,
            details: loaded.record.details.clone(),
            charges: new_charges(&charges).map_err(|_| JobError::Failed("charges could not be written".into()))?,
            ..SubscriptionChange::default()
        };
        match state.store.save_subscription(claim, &change, job.due_at).await? {
            Some(saved) => loaded = Loaded { record: saved, sub, details: loaded.details },
            None => return Err(JobError::Failed("the claim on the subscription was lost".into())),
        }
    }
    let ctx = WireContext::new(rebill_xml::version::LATEST_VERSION, rebill_xml::Features::none(), "");
    bill_pending(state, site, claim, &mut loaded, &ctx, job.due_at).await.map_err(JobError::Failed)?;
    reschedule(state, site.id, &loaded.sub, Some(job.id)).await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Renewals in batches

/// A renewal planned by [`plan_renewal`]: everything [`run_job`] would write for the job, computed
/// before anything is written.
struct Planned<'a> {
    job: &'a Job,
    claim: SubscriptionClaim,
    /// The subscription as claimed (`sub`: its value caught up to the job's time).
    loaded: Loaded,
    change: SubscriptionChange,
    /// Site time of the renewal (the charge's and the invoice's time).
    at: i64,
    invoice: Preview,
    account_id: i64,
    account: AccountSnapshot,
    source: PaymentSource,
}

/// What [`run_job`] would do for `job`, when that is one plain renewal: the subscription is
/// claimed, every earlier charge is invoiced, catching up to the job's time makes exactly one
/// renewal charge that no invoice holds yet, and that charge is collected automatically from a
/// stored payment method with a positive balance. `None` for anything else (the job then runs
/// alone): the same decisions in the same order as the one-job path, so a planned renewal writes
/// what the one-job path writes.
fn plan_renewal<'a>(
    job: &'a Job,
    claimed: Option<(SubscriptionClaim, SubscriptionRecord)>,
    charges: &[&Charge],
    adjustments: &[&Adjustment],
    payers: &[Payer],
) -> Option<Planned<'a>> {
    let (claim, record) = claimed?;
    let mut loaded = Loaded::of(record).ok()?;
    let due = time(job.due_at)?;
    let mut pending = Vec::new();
    let sub = catch_up(&loaded.sub, due, &mut pending).ok()?;
    let [charge] = pending.as_slice() else { return None };
    if charge.origin != InvoiceOrigin::Renewal || charge.lines.is_empty() || sub == loaded.sub {
        return None;
    }
    // Earlier charges all invoiced, and this one not yet (bill_pending's check).
    if charges.iter().any(|c| c.billed_at.is_none()) {
        return None;
    }
    let mut with_charge = Vec::new();
    for c in charges {
        with_charge.extend(from_json::<Vec<LineItem>>(&c.lines).ok()?);
    }
    with_charge.extend(charge.lines.iter().cloned());
    let invoiced: Vec<LineItem> = adjustments.iter().filter_map(|a| billing::line_of_adjustment(a)).collect();
    if rebill_billing::invoice::diff(&with_charge, &invoiced).ok()?.is_empty() {
        return None;
    }
    // invoice_charge and billing::invoice: automatic collection from the stored method.
    let terms = invoice_terms(&loaded.details);
    if terms.collection_method == InvoiceCollection::Manual {
        return None;
    }
    let payer = payers.iter().find(|p| p.account.account_code == loaded.details.account_code)?;
    let source = payer.payment.clone().and_then(PaymentSource::of_stored)?;
    let new_charge = NewCharge {
        origin: charge.origin.name().to_owned(),
        at: epoch(charge.at),
        lines: to_json(&charge.lines).ok()?,
    };
    let draft = Draft { terms, ..Draft::of_lines(charge.lines.clone(), charge.origin) };
    let invoice = billing::preview_for(payer.account_id, &draft, new_charge.at).ok()?;
    if invoice.invoice.amounts.balance <= 0 {
        return None;
    }
    let change = SubscriptionChange {
        indexed: indexed(&sub),
        value: serde_json::to_string(&sub).ok()?,
        details: loaded.record.details.clone(),
        charges: vec![new_charge],
        ..SubscriptionChange::default()
    };
    let at = change.charges[0].at;
    loaded.sub = sub;
    Some(Planned {
        job,
        claim,
        loaded,
        change,
        at,
        invoice,
        account_id: payer.account_id,
        account: payer.account.clone(),
        source,
    })
}

/// A planned renewal with what the first database transaction made for it.
struct Begun<'a> {
    planned: Planned<'a>,
    charge: Charge,
    invoice: Invoice,
    transaction: Transaction,
}

/// Runs the leading jobs of `jobs` (consecutive subscription jobs of `site`, in due order) that
/// are plain renewals ([`plan_renewal`]) together, as [`run_job`] runs each, and records their
/// outcomes; answers how many of the leading jobs it ran. Zero means the first job must run
/// alone: nothing was written for it.
///
/// 1. One database transaction claims the subscriptions, reads their charges, line items,
///    accounts and payment methods, plans the renewals up to the first job that is not one,
///    releases the other claims, and saves every planned subscription with its charge, its
///    invoice (numbered in job order) and its transaction, recorded `processing`. Failing, it
///    leaves nothing, and the first job runs alone.
/// 2. The gateway is called for each transaction.
/// 3. One database transaction completes the transactions and, for every approved one, marks
///    the invoice paid and the charge billed, schedules the subscription's next job, releases it
///    and marks the job done. A declined renewal then goes on alone, exactly as in
///    `bill_pending`: dunning, past due, next job.
pub(crate) async fn run_renewals(state: &AppState, site: &Site, jobs: &[Job]) -> Result<usize, StoreError> {
    let begun = match begin_renewals(state, site, jobs).await {
        Ok(begun) => begun,
        Err(e) => {
            tracing::warn!(error = %e, "renewals together failed before any effect; the first runs alone");
            return Ok(0);
        }
    };
    let count = begun.len();
    let mut results = Vec::with_capacity(count);
    for b in &begun {
        let outcome = billing::gateway_purchase(state, &b.transaction, &b.planned.source).await;
        results.push(billing::result_of(&outcome, b.planned.at));
    }
    if let Err(e) = finish_renewals(state, site, &begun, &results).await {
        // As the one-job path after a failed step: the claims go and the jobs are retried.
        for b in &begun {
            if let Err(e) = state.store.release_subscription(&b.planned.claim).await {
                tracing::warn!(error = %e, "releasing a subscription claim");
            }
            crate::scheduler::settle(state, b.planned.job, Err(JobError::Failed(e.to_string()))).await?;
        }
        return Ok(count);
    }
    for (b, result) in begun.into_iter().zip(&results) {
        if result.status == TransactionStatus::Success {
            continue;
        }
        let Begun { mut planned, charge, invoice, .. } = b;
        let outcome = renewal_declined(state, site, &mut planned, &charge, &invoice).await;
        if let Err(e) = state.store.release_subscription(&planned.claim).await {
            tracing::warn!(error = %e, "releasing a subscription claim");
        }
        crate::scheduler::settle(state, planned.job, outcome).await?;
    }
    Ok(count)
}

/// Step 1 of [`run_renewals`]; answers the renewals begun (none when the first job is not a
/// plain renewal).
async fn begin_renewals<'a>(state: &AppState, site: &Site, jobs: &'a [Job]) -> Result<Vec<Begun<'a>>, StoreError> {
    let service_now = state.clock.now();
    let mut work = state.store.begin_work().await?;
    let uuids: Vec<&str> = jobs.iter().map(|j| j.subject.as_str()).collect();
    let mut claimed: HashMap<String, (SubscriptionClaim, SubscriptionRecord)> = work
        .claim_subscriptions(site.id, &uuids, service_now, service_now + CLAIM_SECONDS)
        .await?
        .into_iter()
        .map(|(claim, record)| (record.uuid.clone(), (claim, record)))
        .collect();
    let ids: Vec<i64> = claimed.values().map(|(c, _)| c.subscription_id).collect();
    let charges = work.subscriptions_charges(&ids).await?;
    let claimed_uuids: Vec<&str> = claimed.keys().map(String::as_str).collect();
    let adjustments = work.subscriptions_adjustments(&claimed_uuids).await?;
    let codes: Vec<String> =
        claimed.values().filter_map(|(_, r)| from_json::<Details>(&r.details).ok()).map(|d| d.account_code).collect();
    let payers = work.payers(site.id, &codes.iter().map(String::as_str).collect::<Vec<_>>()).await?;
    let mut planned = Vec::new();
    for job in jobs {
        let held = claimed.remove(&job.subject);
        let id = held.as_ref().map(|(c, _)| c.subscription_id);
        let own: Vec<&Charge> = charges.iter().filter(|c| Some(c.subscription_id) == id).collect();
        let lines: Vec<_> =
            adjustments.iter().filter(|a| a.line.subscription_uuid.as_deref() == Some(job.subject.as_str())).collect();
        match plan_renewal(job, held, &own, &lines, &payers) {
            Some(p) => planned.push(p),
            None => break,
        }
    }
    if planned.is_empty() {
        // Dropped: rolled back, nothing claimed.
        return Ok(Vec::new());
    }
    let others: Vec<SubscriptionClaim> = claimed.into_values().map(|(c, _)| c).collect();
    work.release_subscriptions(&others).await?;
    let saves: Vec<SubscriptionSave<'_>> =
        planned.iter().map(|p| SubscriptionSave { claim: &p.claim, change: &p.change, now: p.job.due_at }).collect();
    let mut charges = work.save_subscriptions(&saves).await?;
    let drafts: Vec<InvoiceDraft<'_>> = planned
        .iter()
        .map(|p| InvoiceDraft { invoice: &p.invoice.invoice, lines: &p.invoice.lines, now: p.at })
        .collect();
    let invoices = work.create_invoices(site.id, &drafts).await?;
    let purchases: Vec<NewTransaction> = planned
        .iter()
        .zip(&invoices)
        .map(|(p, (invoice, _))| {
            let key = billing::attempt_key(invoice, 0);
            billing::purchase(state, p.account_id, p.account.clone(), invoice, &p.source, key, true)
        })
        .collect();
    let recorded: Vec<(&NewTransaction, i64)> = purchases.iter().zip(&planned).map(|(t, p)| (t, p.at)).collect();
    let transactions = work.begin_transactions(site.id, &recorded).await?;
    work.commit().await?;
    let mut begun = Vec::with_capacity(planned.len());
    for ((planned, (invoice, _)), transaction) in planned.into_iter().zip(invoices).zip(transactions) {
        let at = charges.iter().position(|c| c.subscription_id == planned.claim.subscription_id);
        let charge = at
            .map(|i| charges.swap_remove(i))
            .ok_or_else(|| StoreError::Invalid(format!("no charge saved for subscription {}", planned.job.subject)))?;
        begun.push(Begun { planned, charge, invoice, transaction });
    }
    Ok(begun)
}

/// Step 3 of [`run_renewals`]: records every gateway answer and finishes the approved renewals
/// (the declined ones go on in [`renewal_declined`]).
async fn finish_renewals(
    state: &AppState,
    site: &Site,
    begun: &[Begun<'_>],
    results: &[TransactionResult],
) -> Result<(), StoreError> {
    let mut work = state.store.begin_work().await?;
    let completed: Vec<(i64, &TransactionResult, i64)> =
        begun.iter().zip(results).map(|(b, r)| (b.transaction.id, r, b.planned.at)).collect();
    work.complete_transactions(&completed).await?;
    let approved: Vec<&Begun<'_>> =
        begun.iter().zip(results).filter(|(_, r)| r.status == TransactionStatus::Success).map(|(b, _)| b).collect();
    let paid: Vec<(i64, i64)> = approved.iter().map(|b| (b.invoice.id, b.planned.at)).collect();
    work.mark_invoices_paid(&paid).await?;
    let numbers: Vec<String> = approved.iter().map(|b| b.invoice.invoice_number.to_string()).collect();
    let billed: Vec<(&Charge, Option<&str>, i64)> =
        approved.iter().zip(&numbers).map(|(b, n)| (&b.charge, Some(n.as_str()), b.planned.job.due_at)).collect();
    work.mark_charges_billed(&billed).await?;
    let next: Vec<Option<(&str, i64)>> = approved
        .iter()
        .map(|b| lifecycle::next_due(&b.planned.loaded.sub).map(|d| (d.kind.name(), epoch(d.at))))
        .collect();
    let jobs: Vec<Reschedule<'_>> = approved
        .iter()
        .zip(&next)
        .map(|(b, next)| Reschedule { uuid: &b.planned.job.subject, next: *next, running: Some(b.planned.job.id) })
        .collect();
    work.reschedule_subscriptions(site.id, &jobs).await?;
    let claims: Vec<SubscriptionClaim> = approved.iter().map(|b| b.planned.claim.clone()).collect();
    work.release_subscriptions(&claims).await?;
    let done: Vec<&Job> = approved.iter().map(|b| b.planned.job).collect();
    work.complete_jobs(&done, state.clock.now()).await?;
    work.commit().await
}

/// A renewal whose payment was declined, after its transaction is recorded: what
/// `bill_pending` and [`run_job`] do next (dunning retries, the charge billed, the
/// subscription past due, its next job).
async fn renewal_declined(
    state: &AppState,
    site: &Site,
    planned: &mut Planned<'_>,
    charge: &Charge,
    invoice: &Invoice,
) -> Result<(), JobError> {
    billing::schedule_retry(state, invoice, 0, planned.at).await?;
    let number = invoice.invoice_number.to_string();
    let now = planned.job.due_at;
    state.store.mark_charge_billed(charge, Some(&number), now).await?;
    if !planned.loaded.sub.past_due {
        let failed = lifecycle::fail_renewal(&planned.loaded.sub).map_err(|e| JobError::Failed(e.to_string()))?;
        save_plain(state, &planned.claim, &mut planned.loaded, failed, Vec::new(), now)
            .await
            .map_err(JobError::Failed)?;
    }
    reschedule(state, site.id, &planned.loaded.sub, Some(planned.job.id)).await?;
    Ok(())
}

/// Applies `f` to each subscription billed on the invoice (renewal lines name their
/// subscription), under a claim.
async fn for_invoice_subscriptions(
    state: &AppState,
    site_id: i64,
    uuids: &[String],
    at: i64,
    f: impl Fn(&Engine) -> Option<(Engine, Option<Action>)>,
) -> Result<(), JobError> {
    for uuid in uuids {
        let Some((claim, record)) = claim_for_work(state, site_id, uuid).await? else { continue };
        let result = async {
            let mut loaded = Loaded::of(record).map_err(JobError::Failed)?;
            if let Some((next, action)) = f(&loaded.sub) {
                let rescheduled = next.state != loaded.sub.state;
                let history = match action {
                    Some(a) => vec![(at, serde_json::to_string(&a).map_err(|e| JobError::Failed(e.to_string()))?)],
                    None => Vec::new(),
                };
                save_plain(state, &claim, &mut loaded, next, history, at).await.map_err(JobError::Failed)?;
                if rescheduled {
                    reschedule(state, site_id, &loaded.sub, None).await?;
                }
            }
            Ok::<(), JobError>(())
        }
        .await;
        if let Err(e) = state.store.release_subscription(&claim).await {
            tracing::warn!(error = %e, "releasing a subscription claim");
        }
        result?;
    }
    Ok(())
}

/// An invoice of subscription charges was paid (at last): its subscriptions are no longer past
/// due.
pub(crate) async fn on_invoice_paid(
    state: &AppState,
    site_id: i64,
    subscription_uuids: &[String],
    at: i64,
) -> Result<(), JobError> {
    for_invoice_subscriptions(state, site_id, subscription_uuids, at, |sub| {
        sub.past_due.then(|| lifecycle::recover(sub).ok().map(|s| (s, None))).flatten()
    })
    .await
}

/// The collection of an invoice of subscription charges failed for good (dunning exhausted):
/// its subscriptions expire now.
pub(crate) async fn on_invoice_failed(
    state: &AppState,
    site_id: i64,
    subscription_uuids: &[String],
    at: i64,
) -> Result<(), JobError> {
    let Some(now) = time(at) else { return Err(JobError::Failed("time out of range".into())) };
    for_invoice_subscriptions(state, site_id, subscription_uuids, at, |sub| {
        // Ended for non-payment: nothing more is billed, so a transition due meanwhile is not
        // run (the history records the termination at the instant of the failure).
        if sub.state == EngineState::Expired || lifecycle::next_due(sub).is_some_and(|d| d.at <= now) {
            return None;
        }
        let action = Action::Terminate { refund: Refund::None };
        lifecycle::apply(sub, &action, now).ok().map(|t| (t.subscription, Some(action)))
    })
    .await
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

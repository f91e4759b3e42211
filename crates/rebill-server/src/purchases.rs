//! `POST /v2/purchases`, `/v2/purchases/preview` and (2.9) `/v2/purchases/authorize`: reads the
//! `<purchase>` into `rebill_app::selling::purchases::Purchase`, calls the one use case and answers its
//! invoice (`invoice_collection` from 2.10). Decisions: docs/purchases.md.

// Early returns carry the finished HTTP response.
#![allow(clippy::result_large_err)]

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use rebill_app::catalog::plans::{self as catalog, CatalogError};
use rebill_app::customers::accounts::AccountError;
use rebill_app::platform::model::invoicing::{CollectionMethod, InvoiceTerms};
use rebill_app::selling::gift_cards::GiftCardError;
use rebill_app::selling::purchases::{self, Mode, OneOff, PurchaseError};
use rebill_app::subscriptions::lifecycle::{self as subscriptions, new_uuid};
use rebill_billing::lifecycle::{AddOnTerms, LifecycleError, NewSubscription, SubscriptionTerms, Trial};
use rebill_models::api::EndpointId;
use rebill_models::validate::{Operation, Rejection, Violation, errors_document};
use rebill_models::{
    CollectionMethod as ViewCollectionMethod, Invoice as InvoiceView, InvoiceCollection, LaterResponse, Purchase,
    PurchaseSubscription,
};
use rebill_xml::WireContext;

use crate::invoices::{collection, full_view, preview_view};
use crate::request::{Routed, billing_request, validated};
use crate::respond::{self, time, with_location};
use crate::state::AppState;
use crate::subscriptions::{account_fields, interval_of, trial_of};
use crate::views::{self, DeclineFields};

/// What the endpoint does with the purchase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Purchase,
    Preview,
    Authorize,
}

/// A 422 with one field error below `purchase.`.
fn field_error(ctx: &WireContext, field: &str, symbol: &'static str, message: &str) -> Response {
    let violation = Violation { field: format!("purchase.{field}"), symbol, message: message.to_owned() };
    respond::rejection(&Rejection::Invalid(errors_document(&[violation])), ctx)
}

fn quantity(ctx: &WireContext, field: &str, value: i64) -> Result<u32, Response> {
    u32::try_from(value).map_err(|_| field_error(ctx, field, "invalid", "must be a whole number from 0"))
}

/// One subscription of the purchase, drafted by the engine.
async fn subscription(
    state: &AppState,
    call: &crate::request::Call,
    i: usize,
    doc: &PurchaseSubscription,
    currency: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<purchases::Subscription, Response> {
    let ctx = &call.ctx.wire;
    let at = |name: &str| format!("subscriptions[{i}].{name}");
    if doc.coupon_codes.as_ref().is_some_and(|c| !c.is_empty()) {
        return Err(field_error(
            ctx,
            &at("coupon_codes"),
            "invalid",
            "name a purchase's coupons in purchase.coupon_codes (a coupon redeemed on subscriptions goes to the first subscription it applies to)",
        ));
    }
    let code = doc.plan_code.clone().unwrap_or_default();
    let plan = match catalog::plan(state, &call.context(), &code).await {
        Ok(plan) => plan,
        Err(CatalogError::PlanNotFound(_)) => {
            return Err(field_error(ctx, &at("plan_code"), "not_found", "is not a plan of the site"));
        }
        Err(e) => return Err(respond::internal(&e)),
    };
    let unit_amount = match doc.unit_amount_in_cents.or_else(|| plan.unit_amount(currency)) {
        Some(amount) => amount,
        None => return Err(field_error(ctx, &at("plan_code"), "invalid", "is not priced in the purchase's currency")),
    };
    let qty = quantity(ctx, &at("quantity"), doc.quantity.unwrap_or(1))?;
    let plan_add_ons = catalog::all_add_ons(state, &plan).await.map_err(|e| respond::internal(&e))?;
    let mut add_ons = Vec::new();
    for (j, a) in doc.subscription_add_ons.iter().flatten().enumerate() {
        let field = |name: &str| at(&format!("subscription_add_ons[{j}].{name}"));
        let add_on_code = a.add_on_code.clone().unwrap_or_default();
        let Some(known) = plan_add_ons.iter().find(|p| p.add_on_code == add_on_code && !p.is_deleted()) else {
            return Err(field_error(ctx, &field("add_on_code"), "not_found", "is not an add-on of the plan"));
        };
        let Some(unit) = a.unit_amount_in_cents.or_else(|| known.unit_amount(currency)) else {
            return Err(field_error(ctx, &field("unit_amount_in_cents"), "blank", "can't be blank"));
        };
        let qty = quantity(ctx, &field("quantity"), a.quantity.unwrap_or(known.default_quantity))?;
        add_ons.push(AddOnTerms { add_on_code, unit_amount_in_cents: unit, quantity: qty });
    }
    let terms = SubscriptionTerms {
        plan_code: plan.plan_code.clone(),
        currency: currency.to_owned(),
        interval: interval_of(&plan)?,
        unit_amount_in_cents: unit_amount,
        quantity: qty,
        add_ons,
        setup_fee_in_cents: plan.setup_fee(currency),
    };
    let total_billing_cycles = match doc.total_billing_cycles.or(plan.total_billing_cycles) {
        None => None,
        Some(n) => match u32::try_from(n) {
            Ok(n) if n >= 1 => Some(n),
            _ => return Err(field_error(ctx, &at("total_billing_cycles"), "invalid", "must be at least 1")),
        },
    };
    let trial = match doc.trial_ends_at {
        Some(end) => Some(Trial::Until(end)),
        None => trial_of(&plan).map(Trial::For),
    };
    let new = NewSubscription {
        uuid: new_uuid(),
        terms,
        starts_at: doc.starts_at,
        trial,
        total_billing_cycles,
        imported_trial: false,
    };
    let drafted = match subscriptions::draft(new, now) {
        Ok(drafted) => drafted,
        Err(LifecycleError::InvalidTerms { field, message }) => {
            return Err(field_error(ctx, &at(field), "invalid", message));
        }
        Err(e) => return Err(respond::error(StatusCode::UNPROCESSABLE_ENTITY, e.symbol(), &e.to_string())),
    };
    let shipping = views::shipping_choice(
        ctx,
        &format!("purchase.{}", at("")),
        doc.shipping_address_id,
        doc.shipping_address.as_deref(),
    )?;
    Ok(purchases::Subscription { plan_id: plan.id, drafted, shipping })
}

/// The purchase use case's input from the request.
async fn read(state: &AppState, call: &crate::request::Call, doc: &Purchase) -> Result<purchases::Purchase, Response> {
    let ctx = &call.ctx.wire;
    let Some(account) = doc.account.as_deref() else {
        return Err(field_error(ctx, "account", "blank", "can't be blank"));
    };
    let code = match account.account_code.as_deref().map(str::trim) {
        Some(code) if !code.is_empty() => code.to_owned(),
        _ => return Err(field_error(ctx, "account.account_code", "blank", "can't be blank")),
    };
    let existing = match rebill_app::customers::accounts::find(state, &call.context(), &code).await {
        Ok(a) => Some(a),
        Err(AccountError::NotFound(_)) => None,
        Err(e) => return Err(respond::internal(&e)),
    };
    let currency = doc.currency.clone().unwrap_or_default().to_ascii_uppercase();
    let Some(now) = time(call.ctx.now) else { return Err(respond::invariant(&"site clock out of range")) };
    let mut subs = Vec::new();
    for (i, s) in doc.subscriptions.iter().flatten().enumerate() {
        subs.push(subscription(state, call, i, s, &currency, now).await?);
    }
    let mut adjustments = Vec::new();
    for (i, a) in doc.adjustments.iter().flatten().enumerate() {
        let at = |name: &str| format!("adjustments[{i}].{name}");
        // (An adjustment's own currency is refused by the purchase's rules: `rules::purchase`.)
        let Some(unit_amount_in_cents) = a.unit_amount_in_cents else {
            return Err(field_error(ctx, &at("unit_amount_in_cents"), "not_a_number", "is not a number"));
        };
        let shipping = views::shipping_choice(
            ctx,
            &format!("purchase.{}", at("")),
            a.shipping_address_id,
            a.shipping_address.as_deref(),
        )?;
        adjustments.push(OneOff {
            unit_amount_in_cents,
            quantity: a.quantity,
            description: a.description.clone(),
            product_code: a.product_code.clone(),
            accounting_code: a.accounting_code.clone(),
            tax_code: a.tax_code.clone(),
            tax_exempt: a.tax_exempt,
            credit_reason_code: a.credit_reason_code.clone(),
            shipping,
        });
    }
    let collection_method = match &doc.collection_method {
        None | Some(ViewCollectionMethod::Automatic) => CollectionMethod::Automatic,
        Some(ViewCollectionMethod::Manual) => CollectionMethod::Manual,
        Some(_) => return Err(field_error(ctx, "collection_method", "inclusion", "is not included in the list")),
    };
    let terms = InvoiceTerms {
        collection_method,
        net_terms: doc.net_terms.unwrap_or(0),
        po_number: doc.po_number.clone(),
        customer_notes: doc.customer_notes.clone(),
        terms_and_conditions: doc.terms_and_conditions.clone(),
        vat_reverse_charge_notes: doc.vat_reverse_charge_notes.clone(),
    };
    let billing_info = account.billing_info.as_deref().map(|info| {
        let mut info = billing_request(info);
        if info.currency.is_none() {
            info.currency = Some(currency.clone());
        }
        info
    });
    let shipping = views::shipping_choice(ctx, "purchase.", doc.shipping_address_id, doc.shipping_address.as_deref())?;
    Ok(purchases::Purchase {
        existing,
        account_code: code,
        account_fields: Some(account_fields(account)),
        billing_info,
        account_addresses: account.shipping_addresses.iter().flatten().map(views::shipping_fields).collect(),
        currency,
        terms,
        shipping,
        subscriptions: subs,
        adjustments,
        gift_card: doc.gift_card.as_deref().and_then(|g| g.redemption_code.clone()),
        coupon_codes: rebill_app::catalog::coupons::requested(None, doc.coupon_codes.as_ref()),
        credit_customer_notes: doc.credit_customer_notes.clone(),
    })
}

/// The answer to a refused purchase.
fn refusal(ctx: &WireContext, error: PurchaseError) -> Response {
    match error {
        PurchaseError::Declined(Some(transaction)) => {
            let fields = DeclineFields {
                verification_value: "purchase.account.billing_info.verification_value",
                base: "purchase.base",
            };
            views::decline_response(ctx, &transaction, fields)
        }
        PurchaseError::Declined(None) => {
            field_error(ctx, "account.billing_info", "blank", "can't be blank: the purchase needs a payment method")
        }
        PurchaseError::PaymentMethod(e) => views::payment_method_error(ctx, &e),
        PurchaseError::GiftCard(GiftCardError::CodeNotFound(code)) => {
            respond::not_found(&format!("Gift Card with redemption code {code} not found"))
        }
        PurchaseError::GiftCard(GiftCardError::AlreadyRedeemed) => respond::error(
            StatusCode::BAD_REQUEST,
            "gift_card_already_redeemed",
            "This gift card has already been redeemed.",
        ),
        PurchaseError::ShippingAddress { field, error } => {
            respond::app_error(ctx, &format!("purchase.{field}"), error.into())
        }
        PurchaseError::Busy => respond::error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "simultaneous_request",
            "The account was created by another request meanwhile; please try again.",
        ),
        PurchaseError::Billing(rebill_app::platform::error::BillingError::Invoice(_)) => {
            field_error(ctx, "base", "invalid", "the purchase makes no invoice")
        }
        other => respond::app_error(ctx, "purchase", other.into()),
    }
}

/// `POST /v2/purchases`, `…/preview` and `…/authorize`.
pub(crate) async fn create<E>(state: &AppState, call: &Routed<'_, E>, request: Request, kind: Kind) -> Response
where
    E: LaterResponse<Request = Purchase, Response = InvoiceView, Later = InvoiceCollection>,
{
    let ctx = &call.ctx.wire;
    let doc = match call.decode(state, request).await {
        Ok(doc) => doc,
        Err(response) => return response,
    };
    if let Err(response) = validated(call, &doc, Operation::Create) {
        return response;
    }
    let input = match read(state, call, &doc).await {
        Ok(input) => input,
        Err(response) => return response,
    };
    let app = call.context();
    if kind == Kind::Preview {
        return match purchases::preview(state, &app, &input).await {
            Ok(p) => call.answer_by_version(preview_view(&input.account_code, &p, call.ctx.now), collection),
            Err(e) => refusal(ctx, e),
        };
    }
    let mode = if kind == Kind::Authorize { Mode::Authorize } else { Mode::Purchase };
    match purchases::purchase(state, &app, input, mode).await {
        Ok(invoiced) => {
            let view = match full_view(state, &invoiced.invoice, call.ctx.now).await {
                Ok(view) => view,
                Err(e) => return respond::internal(&e),
            };
            let location = EndpointId::GetInvoice.endpoint().render(&[&invoiced.invoice.invoice_number.to_string()]);
            with_location(call.answer_by_version(view, collection), ctx, &location)
        }
        Err(e) => refusal(ctx, e),
    }
}

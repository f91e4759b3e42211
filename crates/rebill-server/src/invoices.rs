//! Invoice, adjustment and transaction endpoints, calling [`rebill_app::billing`].
//!
//! | Endpoint | Behaviour |
//! |---|---|
//! | `GET /v2/invoices`, `GET /v2/accounts/{code}/invoices` | lists (HEAD counts); `state` filter |
//! | `GET /v2/invoices/{number}` | one invoice with its line items and transactions; with `Accept: application/pdf` its PDF in the `Accept-Language` language (en-US, de-DE, fr-FR, es-ES; else en-US) |
//! | `POST /v2/accounts/{code}/invoices` | invoices the pending adjustments (201; `invoice_collection` from 2.10) |
//! | `POST /v2/accounts/{code}/invoices/preview` | the same, nothing written (200) |
//! | `PUT /v2/invoices/{number}/mark_successful`, `…/mark_failed`, `…/collect` | settle or collect an open invoice (`mark_failed` and `collect`: `invoice_collection` from 2.10) |
//! | `GET/POST /v2/accounts/{code}/adjustments`, `GET/DELETE /v2/adjustments/{uuid}` | one-off charges and credits |
//! | `GET /v2/transactions`, `GET /v2/accounts/{code}/transactions`, `GET /v2/transactions/{uuid}` | lists and one |
//! | `POST /v2/transactions` | a one-off charge of an account (created when missing) |
//! | `PUT /v2/invoices/{number}/void` | voids what is left of an open credit invoice's balance (2.10, Credit Memos) |
//! | `GET /v2/invoices/{number}/original_invoices`, `…/credit_invoices` | the invoice a credit invoice was issued against; the invoices issued against a charge invoice (2.10) |
//! | `GET /v2/adjustments/{uuid}/credit_adjustments` | the credit lines reversing a charge (2.10) |
//! | `GET /v2/credit_payments`, `GET /v2/accounts/{code}/credit_payments`, `GET /v2/credit_payments/{uuid}` | lists and one (2.10) |
//!
//! Choices where the spec is silent:
//! - The invoice `state` filter takes both spellings at every version (`open`/`pending`,
//!   `collected`/`paid`, `failed`, `past_due`, `processing`); transactions filter `state` by
//!   `successful`, `failed` (declined) or `voided` and `type` by `purchase`, `verify`, `refund`
//!   or `authorization`; adjustments `state` by `pending` or `invoiced` and `type` by `charge` or
//!   `credit`.
//! - Invoice create takes the account's pending adjustments of the currency of the oldest one
//!   (adjustments in other currencies stay pending for another invoice). Collection follows the
//!   request's `collection_method` (default `automatic`): automatic charges the stored billing
//!   info and a decline (or no billing info) answers 201 with the invoice `past_due` and dunning
//!   retries scheduled (see [`crate::billing`]); manual leaves it `pending`, due after
//!   `net_terms` days.
//! - An adjustment with a negative `unit_amount_in_cents` is a credit (origin `credit`), any other
//!   a charge (origin `debit`); `currency` and `unit_amount_in_cents` are required, `quantity`
//!   defaults to 1. Only pending adjustments can be deleted (an invoiced one is 422
//!   `invalid_transition`).
//! - `POST /v2/transactions` creates the account when the site has none with the code, invoices
//!   the amount as a one-time charge and collects it at once: approved → 201 with the
//!   transaction; declined → 422 transaction error document (the declined transaction and its
//!   `failed` invoice are kept). A nested billing info (token or card fields) is charged and, when
//!   approved, becomes the account's billing info; without one the stored billing info is
//!   charged, and an account without any answers 400 `billing_info_required`.
//! - `collect` answers the 422 transaction error document when the attempt is declined (the
//!   invoice stays past due with its retries).
//! - Line items and transactions are listed in full inside an invoice (no `all_line_items`).
//! - An invoice shows its kind (`type`: charge, credit, legacy), `balance_in_cents` (negative:
//!   the credit a credit invoice still holds), `refundable_total_in_cents` (what a paid charge
//!   invoice paid less what was credited back; 0 on any other invoice), its credit payments
//!   (applied to it or taken from it), the `credit_invoices` link on charge invoices and
//!   `original_invoices` on credit and legacy invoices, `original_invoice` on an invoice issued
//!   against another, the `refund` anchor only when something is refundable and `void` only on a
//!   voidable credit invoice. Credit invoices shown below 2.10 or on a site without Credit Memos
//!   take the schema's fallbacks (open → pending/`open`, closed → paid/`collected`, voided →
//!   failed).
//! - A credit invoice an operation made is the collection's one `credit_invoice` (with a nil
//!   `charge_invoice`); a legacy invoice (a site without Credit Memos) is its charge invoice.
//! - A void that is refused (a charge or legacy invoice, a credit invoice closed, voided or with
//!   a refund processing) is 422 `<errors>` with `invoice.base` `not_voidable`.
//! - Adjustments show `original_adjustment_uuid` (and the `original_adjustment` link) on credit
//!   lines, `quantity_remaining` (quantity less the units credits took back) and
//!   `refundable_total_in_cents` (total less credited, on invoiced charges of paid charge
//!   invoices; 0 otherwise).

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use std::collections::HashSet;

use rebill_app::billing::adjustments::{self, AdjustmentError, NewCharge};
use rebill_app::billing::documents::Locale;
use rebill_app::billing::queries;
use rebill_app::customers::shipping_addresses::ShippingError;
use rebill_app::money_back::credit_invoices;
use rebill_app::money_back::refunds::credit as credit_refunds;
use rebill_app::money_back::refunds::{self, External, GivenBack, LineRefund, RefundError, RefundRequest};
use rebill_app::platform::error::AppError;
use rebill_app::platform::model::Page;
use rebill_app::platform::model::accounts::{Account, AccountFields};
use rebill_app::platform::model::credits::{CreditPayment, CreditPaymentAction, CreditPaymentFilter, InvoiceKind};
use rebill_app::platform::model::invoicing::{
    Adjustment, AdjustmentFilter, AdjustmentKind, AdjustmentState, CollectionMethod, Invoice, InvoiceAmounts,
    InvoiceFilter, InvoiceState, InvoiceTerms, NewAdjustment, Transaction, TransactionFilter, TransactionStatus,
};
use rebill_billing::invoice::InvoiceError;
use rebill_billing::refund::RefundMethod;
use rebill_models::api::{self, EndpointId};
use rebill_models::validate::{Operation, Rejection, refusals, validate};
use rebill_models::{
    Adjustment as AdjustmentView, AdjustmentOrigin, AdjustmentState as ViewAdjustmentState, AdjustmentType,
    CollectionMethod as ViewCollectionMethod, CreditPayment as CreditPaymentView, Invoice as InvoiceView,
    InvoiceCollection, InvoiceOrigin as ViewInvoiceOrigin, InvoiceState as ViewInvoiceState, InvoiceType,
    RefundMethod as ViewRefundMethod, Transaction as TransactionView,
};
use rebill_models::{ApiEndpoint, LaterResponse};

use crate::lists::{ListQuery, invalid_choice};
use crate::request::{Call, Routed, billing_request, href};
use crate::respond;
use crate::respond::{field_error, time, with_location};
use crate::state::AppState;
use crate::views::{self, DeclineFields};
use rebill_app::billing::invoicing::{self, Preview};
use rebill_app::billing::transactions::{ChargeError, Charged, OneOffCharge, charge_once};
use rebill_app::collection::settlement::{self, SettleError, Settlement};
use rebill_app::customers::payment_methods::valid_currency;
use rebill_app::platform::error::BillingError;

// ---------------------------------------------------------------------------------------------
// Helpers

fn invalid_transition(description: &str) -> Response {
    respond::error(StatusCode::UNPROCESSABLE_ENTITY, "invalid_transition", description)
}

/// The account of the path's `{account_code}` (404 when the site has none).
async fn account(state: &AppState, call: &Call) -> Result<Account, Response> {
    rebill_app::customers::accounts::find(state, &call.context(), &call.params[0])
        .await
        .map_err(|e| respond::app_error(&call.ctx.wire, "account", e.into()))
}

// ---------------------------------------------------------------------------------------------
// Views

fn view_invoice_state(state: InvoiceState) -> ViewInvoiceState {
    match state {
        InvoiceState::Pending => ViewInvoiceState::Pending,
        InvoiceState::Processing => ViewInvoiceState::Processing,
        InvoiceState::PastDue => ViewInvoiceState::PastDue,
        InvoiceState::Paid => ViewInvoiceState::Paid,
        InvoiceState::Failed => ViewInvoiceState::Failed,
        InvoiceState::Open => ViewInvoiceState::Open,
        InvoiceState::Closed => ViewInvoiceState::Closed,
        InvoiceState::Voided => ViewInvoiceState::Voided,
    }
}

fn view_collection_method(method: CollectionMethod) -> ViewCollectionMethod {
    match method {
        CollectionMethod::Automatic => ViewCollectionMethod::Automatic,
        CollectionMethod::Manual => ViewCollectionMethod::Manual,
    }
}

/// An adjustment as the API shows it (`stored`: with its identity; `None` on previews).
/// `on_paid_invoice`: it is on a paid charge invoice, so what its credits have not taken back
/// yet can be refunded.
pub(crate) fn adjustment_view(
    line: &NewAdjustment,
    stored: Option<&Adjustment>,
    account_code: &str,
    on_paid_invoice: bool,
) -> AdjustmentView {
    let charge = line.kind == AdjustmentKind::Charge;
    let invoiced = stored.is_some_and(|a| a.state == AdjustmentState::Invoiced);
    let (credited, quantity_credited) = stored.map_or((0, 0), |a| (a.credited, a.quantity_credited));
    let refundable = if invoiced && charge && on_paid_invoice { (line.total - credited).max(0) } else { 0 };
    let original = stored.and_then(|a| a.original_adjustment_uuid.as_ref());
    AdjustmentView {
        kind: Some(if charge { AdjustmentType::Charge } else { AdjustmentType::Credit }),
        account: Some(href(EndpointId::GetAccount, &[account_code])),
        invoice: stored.and_then(|a| a.invoice_number).map(|n| href(EndpointId::GetInvoice, &[&n.to_string()])),
        subscription: line.subscription_uuid.as_ref().map(|u| href(EndpointId::GetSubscription, &[u])),
        original_adjustment: original.map(|u| href(EndpointId::GetAdjustment, &[u])),
        original_adjustment_uuid: original.cloned(),
        credit_adjustments: stored.filter(|_| charge).map(|a| href(EndpointId::ListCreditAdjustments, &[&a.uuid])),
        uuid: stored.map(|a| a.uuid.clone()),
        state: Some(if invoiced { ViewAdjustmentState::Invoiced } else { ViewAdjustmentState::Pending }),
        description: line.description.clone(),
        accounting_code: line.accounting_code.clone(),
        product_code: line.product_code.clone(),
        origin: Some(
            AdjustmentOrigin::from_name(&line.origin).unwrap_or_else(|| AdjustmentOrigin::Unknown(line.origin.clone())),
        ),
        unit_amount_in_cents: Some(line.unit_amount),
        quantity: Some(line.quantity),
        discount_in_cents: Some(line.discount),
        tax_in_cents: Some(line.tax),
        total_in_cents: Some(line.total),
        currency: Some(line.currency.clone()),
        // Display only: amounts are never computed from the rate.
        proration_rate: line
            .engine
            .as_ref()
            .and_then(|e| e.proration)
            .map(|(part, whole)| if whole == 0 { 0.0 } else { part as f64 / whole as f64 }),
        taxable: Some(false),
        tax_exempt: Some(line.tax_exempt.unwrap_or(false)),
        tax_code: line.tax_code.clone(),
        start_date: line.start_date.and_then(time),
        end_date: line.end_date.and_then(time),
        created_at: stored.and_then(|a| time(a.created_at)),
        updated_at: stored.and_then(|a| time(a.updated_at)),
        credit_reason_code: line.credit_reason_code.clone(),
        quantity_remaining: Some((line.quantity - quantity_credited).max(0)),
        refundable_total_in_cents: Some(refundable),
        shipping_address: stored
            .and_then(|a| a.shipping_address.as_ref())
            .map(|address| Box::new(views::shipping_address_view(account_code, address))),
        ..AdjustmentView::default()
    }
}

/// Stored adjustments as the API shows them (what is refundable of each read from its invoice).
async fn stored_adjustment_views(state: &AppState, lines: &[Adjustment]) -> Result<Vec<AdjustmentView>, AppError> {
    let paid = queries::paid_charge_invoices(state, lines).await?;
    Ok(adjustment_views(lines, &paid))
}

/// Stored adjustments as the API shows them, knowing which invoices are paid charge invoices.
fn adjustment_views(lines: &[Adjustment], paid_invoices: &HashSet<i64>) -> Vec<AdjustmentView> {
    lines
        .iter()
        .map(|a| {
            let on_paid = a.invoice_id.is_some_and(|id| paid_invoices.contains(&id));
            adjustment_view(&a.line, Some(a), &a.account_code, on_paid)
        })
        .collect()
}

fn view_invoice_kind(kind: InvoiceKind) -> InvoiceType {
    match kind {
        InvoiceKind::Charge => InvoiceType::Charge,
        InvoiceKind::Credit => InvoiceType::Credit,
        InvoiceKind::Legacy => InvoiceType::Legacy,
    }
}

/// Whether `invoice` is a paid charge invoice: the only kind whose charges can be refunded.
fn is_paid_charge(invoice: &Invoice) -> bool {
    invoice.kind == InvoiceKind::Charge && invoice.state == InvoiceState::Paid
}

/// What a refund of the invoice can still give back: of a paid charge invoice, what was paid (by
/// transactions and credit) less what its credit and refund invoices took back; of an open credit
/// invoice, the credit left on it; nothing on any other invoice.
fn refundable_total(invoice: &Invoice) -> i64 {
    if is_paid_charge(invoice) {
        (invoice.amounts.paid - invoice.credited).max(0)
    } else if credit_refunds::is_refundable(invoice) {
        -invoice.amounts.balance
    } else {
        0
    }
}

/// A stored invoice with its lines, transactions and credit payments as the API shows it.
fn invoice_view(
    invoice: &Invoice,
    lines: &[Adjustment],
    transactions: &[Transaction],
    credit_payments: &[CreditPayment],
    now: i64,
) -> InvoiceView {
    let number = invoice.invoice_number.to_string();
    let open = invoice.state.is_open();
    let charge = invoice.kind == InvoiceKind::Charge;
    let mut subscriptions: Vec<&String> = lines.iter().filter_map(|l| l.line.subscription_uuid.as_ref()).collect();
    subscriptions.sort();
    subscriptions.dedup();
    let mut view = base_view(
        &invoice.account_code,
        &invoice.currency,
        invoice.kind,
        invoice.state,
        &invoice.origin,
        &invoice.amounts,
        &invoice.terms,
        invoice.due_on,
    );
    view.subscription = match subscriptions.as_slice() {
        [one] => Some(href(EndpointId::GetSubscription, &[one])),
        _ => None,
    };
    view.original_invoice = invoice.original_invoice_number.map(|n| href(EndpointId::GetInvoice, &[&n.to_string()]));
    view.credit_invoices = charge.then(|| href(EndpointId::ListCreditInvoices, &[&number]));
    view.original_invoices = (!charge).then(|| href(EndpointId::ListOriginalInvoices, &[&number]));
    view.uuid = Some(invoice.uuid.clone());
    view.invoice_number = Some(invoice.invoice_number);
    view.created_at = time(invoice.created_at);
    view.updated_at = time(invoice.updated_at);
    view.attempt_next_collection_at = invoice.attempt_next_collection_at.and_then(time);
    view.closed_at = invoice.closed_at.and_then(time);
    let refundable = refundable_total(invoice);
    view.refundable_total_in_cents = Some(refundable);
    let paid_invoice = if is_paid_charge(invoice) { HashSet::from([invoice.id]) } else { HashSet::new() };
    view.line_items = Some(adjustment_views(lines, &paid_invoice));
    view.transactions = Some(transactions.iter().map(|t| views::transaction_view(t, now)).collect());
    view.credit_payments = Some(credit_payments.iter().map(views::credit_payment_view).collect());
    view.refund_action = (refundable > 0).then(|| href(EndpointId::RefundInvoice, &[&number]));
    view.mark_successful_action = open.then(|| href(EndpointId::MarkInvoiceSuccessful, &[&number]));
    view.mark_failed_action = open.then(|| href(EndpointId::MarkInvoiceFailed, &[&number]));
    view.void_action = credit_invoices::is_voidable(invoice).then(|| href(EndpointId::VoidInvoice, &[&number]));
    view
}

/// What a stored invoice and a preview share.
#[allow(clippy::too_many_arguments)]
pub(crate) fn base_view(
    account_code: &str,
    currency: &str,
    kind: InvoiceKind,
    state: InvoiceState,
    origin: &str,
    a: &InvoiceAmounts,
    terms: &InvoiceTerms,
    due_on: Option<i64>,
) -> InvoiceView {
    InvoiceView {
        account: Some(href(EndpointId::GetAccount, &[account_code])),
        state: Some(view_invoice_state(state)),
        invoice_number_prefix: Some(String::new()),
        po_number: terms.po_number.clone(),
        subtotal_before_discount: Some(a.subtotal_before_discount),
        discount_in_cents: Some(a.discount),
        subtotal_after_discount: Some(a.subtotal_after_discount),
        tax_in_cents: Some(a.tax),
        total_in_cents: Some(a.total),
        balance_in_cents: Some(a.balance),
        refundable_total_in_cents: Some(0),
        currency: Some(currency.to_owned()),
        due_on: due_on.and_then(time),
        terms_and_conditions: terms.terms_and_conditions.clone(),
        customer_notes: terms.customer_notes.clone(),
        vat_reverse_charge_notes: terms.vat_reverse_charge_notes.clone(),
        net_terms: Some(terms.net_terms),
        collection_method: Some(view_collection_method(terms.collection_method)),
        kind: Some(view_invoice_kind(kind)),
        origin: Some(
            ViewInvoiceOrigin::from_name(origin).unwrap_or_else(|| ViewInvoiceOrigin::Unknown(origin.to_owned())),
        ),
        credit_payments: Some(Vec::new()),
        ..InvoiceView::default()
    }
}

/// The invoice with its lines, transactions and credit payments loaded.
pub(crate) async fn full_view(state: &AppState, invoice: &Invoice, now: i64) -> Result<InvoiceView, AppError> {
    let details = queries::invoice_details(state, invoice).await?;
    Ok(invoice_view(invoice, &details.lines, &details.transactions, &details.credit_payments, now))
}

/// An invoice computed but not written as a preview shows it: no number, no href, its lines
/// `pending`, no transactions (purchase, invoice and subscription previews).
pub(crate) fn preview_view(account_code: &str, p: &Preview, now: i64) -> InvoiceView {
    let i = &p.invoice;
    let mut view = base_view(account_code, &i.currency, i.kind, i.state, &i.origin, &i.amounts, &i.terms, i.due_on);
    view.line_items = Some(p.lines.iter().map(|l| adjustment_view(l, None, account_code, false)).collect());
    view.transactions = Some(Vec::new());
    view.created_at = time(now);
    view
}

/// The answer from the version where an endpoint answers an `invoice_collection`: the invoice
/// as the collection's charge invoice, or as its one credit invoice (with a nil charge invoice)
/// when it is a credit invoice. A legacy invoice (a site without Credit Memos) is the charge
/// invoice.
pub(crate) fn collection(view: InvoiceView) -> InvoiceCollection {
    if view.kind == Some(InvoiceType::Credit) {
        InvoiceCollection { charge_invoice: None, credit_invoices: Some(vec![view]) }
    } else {
        InvoiceCollection { charge_invoice: Some(Box::new(view)), credit_invoices: Some(Vec::new()) }
    }
}

// ---------------------------------------------------------------------------------------------
// Invoices

/// Values of the invoice list's `state` filter (both spellings).
const INVOICE_STATES: [&str; 7] = ["pending", "open", "paid", "collected", "failed", "past_due", "processing"];

fn invoice_state_filter(value: &str) -> Option<InvoiceState> {
    match value {
        "pending" | "open" => Some(InvoiceState::Pending),
        "paid" | "collected" => Some(InvoiceState::Paid),
        "failed" => Some(InvoiceState::Failed),
        "past_due" => Some(InvoiceState::PastDue),
        "processing" => Some(InvoiceState::Processing),
        _ => None,
    }
}

/// `GET /v2/accounts/{account_code}/invoices`.
pub(crate) async fn list_account_invoices(
    state: &AppState,
    call: &Routed<'_, api::ListAccountInvoices>,
    query: Option<&str>,
) -> Response {
    match account(state, call).await {
        Ok(a) => list_invoices(state, call, query, Some(&a)).await,
        Err(r) => r,
    }
}

/// `GET /v2/invoices` and an account's invoices.
pub(crate) async fn list_invoices<E: ApiEndpoint<Response = Vec<InvoiceView>>>(
    state: &AppState,
    call: &Routed<'_, E>,
    query: Option<&str>,
    account: Option<&Account>,
) -> Response {
    let query = match ListQuery::parse(query, call.endpoint.filters) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    let mut filter = InvoiceFilter { account_id: account.map(|a| a.id), states: Vec::new() };
    if let Some(value) = query.filter("state") {
        match invoice_state_filter(value) {
            Some(s) => filter.states.push(s),
            None => return invalid_choice("state", &INVOICE_STATES, value).response(),
        }
    }
    match queries::invoices(state, &call.context(), &filter, &query.page()).await {
        Ok(page) => invoice_page(state, call, &query, &page).await,
        Err(e) => respond::internal(&e),
    }
}

/// A page of invoices as a list endpoint answers it.
async fn invoice_page<E: ApiEndpoint<Response = Vec<InvoiceView>>>(
    state: &AppState,
    call: &Routed<'_, E>,
    query: &ListQuery,
    page: &Page<Invoice>,
) -> Response {
    let mut items = Vec::new();
    if !call.head {
        for invoice in &page.items {
            match full_view(state, invoice, call.ctx.now).await {
                Ok(v) => items.push(v),
                Err(e) => return respond::internal(&e),
            }
        }
    }
    let params: Vec<&str> = call.params.iter().map(String::as_str).collect();
    let list_path = call.endpoint.render(&params);
    call.answer_page(&list_path, query, &items, page.next, page.total)
}

/// The invoice of the path's `{invoice_number}`.
async fn path_invoice(state: &AppState, call: &Call) -> Result<Invoice, Response> {
    queries::invoice(state, &call.context(), &call.params[0])
        .await
        .map_err(|e| respond::app_error(&call.ctx.wire, "invoice", e.into()))
}

/// The language of the invoice PDF a request asks for: `None` unless it asks for the PDF
/// (`Accept: application/pdf`, see [`crate::layers::accept`]), else its `Accept-Language`
/// negotiated by [`Locale::from_accept_language`] (absent or unreadable: en-US).
pub(crate) fn pdf_locale(request: &Request) -> Option<Locale> {
    request.extensions().get::<crate::state::WantsPdf>()?;
    let value = request.headers().get(axum::http::header::ACCEPT_LANGUAGE);
    Some(
        value
            .and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
            .map(Locale::from_accept_language)
            .unwrap_or_default(),
    )
}

/// `GET /v2/invoices/{invoice_number}`: the invoice, or its PDF document in `pdf`'s language
/// (named by `Content-Language`) when the client asked for `application/pdf`.
pub(crate) async fn get_invoice(state: &AppState, call: &Routed<'_, api::GetInvoice>, pdf: Option<Locale>) -> Response {
    if let Some(locale) = pdf {
        return match rebill_app::billing::documents::invoice_pdf(state, &call.context(), &call.params[0], locale).await
        {
            Ok(bytes) => {
                let mut response = respond::pdf(bytes);
                let language = axum::http::HeaderValue::from_static(locale.tag());
                response.headers_mut().insert(axum::http::header::CONTENT_LANGUAGE, language);
                response
            }
            Err(e) => respond::app_error(&call.ctx.wire, "invoice", e.into()),
        };
    }
    let invoice = match path_invoice(state, call).await {
        Ok(i) => i,
        Err(r) => return r,
    };
    match full_view(state, &invoice, call.ctx.now).await {
        Ok(view) => call.answer(&view),
        Err(e) => respond::internal(&e),
    }
}

/// `POST /v2/accounts/{code}/invoices` and its preview.
pub(crate) async fn create_invoice<E>(
    state: &AppState,
    call: &Routed<'_, E>,
    request: Request,
    preview: bool,
) -> Response
where
    E: LaterResponse<Request = InvoiceView, Response = InvoiceView, Later = InvoiceCollection>,
{
    let ctx = &call.ctx.wire;
    let account = match account(state, call).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    let body = match call.decode_optional(state, request).await {
        Ok(b) => b.unwrap_or_default(),
        Err(r) => return r,
    };
    if let Err(errors) = validate(&body, ctx, Operation::Create) {
        return respond::rejection(&Rejection::Invalid(errors), ctx);
    }
    let net_terms = body.net_terms.unwrap_or(0);
    if !(0..=3650).contains(&net_terms) {
        return field_error(ctx, "invoice.net_terms", "invalid", "must be a number of days from 0 to 3650");
    }
    let collection_method = match &body.collection_method {
        None | Some(ViewCollectionMethod::Automatic) => CollectionMethod::Automatic,
        Some(ViewCollectionMethod::Manual) => CollectionMethod::Manual,
        Some(_) => return field_error(ctx, "invoice.collection_method", "inclusion", "is not included in the list"),
    };
    let terms = InvoiceTerms {
        collection_method,
        net_terms,
        po_number: body.po_number.clone(),
        customer_notes: body.customer_notes.clone(),
        terms_and_conditions: body.terms_and_conditions.clone(),
        vat_reverse_charge_notes: body.vat_reverse_charge_notes.clone(),
    };
    let now = call.ctx.now;
    if preview {
        return match invoicing::preview_pending(state, &call.context(), &account, terms).await {
            Ok(p) => call.answer_by_version(preview_view(&account.account_code, &p, now), collection),
            Err(e) => billing_error(e),
        };
    }
    match invoicing::invoice_pending(state, &call.context(), &account, terms).await {
        Ok(invoiced) => {
            let view = match full_view(state, &invoiced.invoice, call.ctx.now).await {
                Ok(view) => view,
                Err(e) => return respond::internal(&e),
            };
            let location = EndpointId::GetInvoice.endpoint().render(&[&invoiced.invoice.invoice_number.to_string()]);
            with_location(call.answer_by_version(view, collection), ctx, &location)
        }
        Err(e) => billing_error(e),
    }
}

fn billing_error(e: BillingError) -> Response {
    if let BillingError::Invoice(InvoiceError::NothingToInvoice) = e {
        return respond::api_error(StatusCode::UNPROCESSABLE_ENTITY, &refusals::will_not_invoice());
    }
    match AppError::from(e) {
        // Another request took the pending adjustments meanwhile.
        AppError::Conflict(_) => respond::api_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            &rebill_models::validate::single_error(
                "simultaneous_request",
                "The pending charges are being invoiced by another request; retry shortly.",
            ),
        ),
        other => respond::internal(&other),
    }
}

/// `PUT /v2/invoices/{number}/mark_successful`.
pub(crate) async fn mark_successful(state: &AppState, call: &Routed<'_, api::MarkInvoiceSuccessful>) -> Response {
    match settle(state, call, Settlement::Paid).await {
        Ok((view, _)) => call.answer(&view),
        Err(response) => response,
    }
}

/// `PUT /v2/invoices/{number}/mark_failed` and `…/collect` (an `invoice_collection` from 2.10).
pub(crate) async fn settle_invoice<E>(state: &AppState, call: &Routed<'_, E>, how: Settlement) -> Response
where
    E: LaterResponse<Response = InvoiceView, Later = InvoiceCollection>,
{
    match settle(state, call, how).await {
        Ok((view, written_off)) => call.answer_by_version(view, |view| InvoiceCollection {
            credit_invoices: Some(written_off),
            ..collection(view)
        }),
        Err(response) => response,
    }
}

/// Settles or collects the path's invoice: the invoice after it with the credit invoice that
/// wrote it off when it failed (Credit Memos), or the refusal.
async fn settle(state: &AppState, call: &Call, how: Settlement) -> Result<(InvoiceView, Vec<InvoiceView>), Response> {
    let invoice = path_invoice(state, call).await?;
    let invoice = match settlement::settle_invoice(state, &call.context(), &invoice, how).await {
        Ok(i) => i,
        Err(SettleError::Declined(t)) => {
            let fields = DeclineFields { verification_value: "billing_info.verification_value", base: "invoice.base" };
            return Err(views::decline_response(&call.ctx.wire, &t, fields));
        }
        Err(SettleError::NoBillingInfo) => {
            return Err(respond::error(
                StatusCode::BAD_REQUEST,
                "billing_info_required",
                "The account has no billing info to collect the invoice with.",
            ));
        }
        Err(SettleError::NotOpen) => {
            return Err(invalid_transition("Only a pending or past due invoice can be settled or collected."));
        }
        Err(SettleError::PaymentProcessing(_)) => {
            return Err(invalid_transition(
                "A payment of this invoice is processing at the payment gateway; the invoice can be marked paid or \
                 failed once its outcome is known.",
            ));
        }
        Err(SettleError::Failed(e)) => return Err(respond::internal(&e)),
    };
    let mut written_off = Vec::new();
    if invoice.state == InvoiceState::Failed {
        let page = rebill_app::platform::model::PageRequest { limit: 200, ..Default::default() };
        let number = invoice.invoice_number.to_string();
        let credits = credit_invoices::credit_invoices(state, &call.context(), &number, &page)
            .await
            .map_err(|e| respond::internal(&e))?;
        for credit in credits.items.iter().filter(|i| i.origin == rebill_app::money_back::write_offs::ORIGIN) {
            written_off.push(full_view(state, credit, call.ctx.now).await.map_err(|e| respond::internal(&e))?);
        }
    }
    let view = full_view(state, &invoice, call.ctx.now).await.map_err(|e| respond::internal(&e))?;
    Ok((view, written_off))
}

// ---------------------------------------------------------------------------------------------
// Credit invoices and credit payments

/// `PUT /v2/invoices/{number}/void`: the credit invoice with its balance voided (200); 422
/// `<errors>` with `invoice.base` `not_voidable` when it is not an open credit invoice.
pub(crate) async fn void_invoice(state: &AppState, call: &Routed<'_, api::VoidInvoice>) -> Response {
    match credit_invoices::void(state, &call.context(), &call.params[0]).await {
        Ok(invoice) => match full_view(state, &invoice, call.ctx.now).await {
            Ok(view) => call.answer(&view),
            Err(e) => respond::internal(&e),
        },
        Err(e) => respond::app_error(&call.ctx.wire, "invoice", e.into()),
    }
}

/// `GET /v2/invoices/{number}/original_invoices`: the invoice a credit or refund invoice was
/// issued against.
pub(crate) async fn list_original_invoices(
    state: &AppState,
    call: &Routed<'_, api::ListOriginalInvoices>,
    query: Option<&str>,
) -> Response {
    let query = match ListQuery::parse(query, call.endpoint.filters) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    match credit_invoices::original_invoices(state, &call.context(), &call.params[0], &query.page()).await {
        Ok(page) => invoice_page(state, call, &query, &page).await,
        Err(e) => respond::app_error(&call.ctx.wire, "invoice", e.into()),
    }
}

/// `GET /v2/invoices/{number}/credit_invoices`: the invoices issued against a charge invoice.
pub(crate) async fn list_credit_invoices(
    state: &AppState,
    call: &Routed<'_, api::ListCreditInvoices>,
    query: Option<&str>,
) -> Response {
    let query = match ListQuery::parse(query, call.endpoint.filters) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    match credit_invoices::credit_invoices(state, &call.context(), &call.params[0], &query.page()).await {
        Ok(page) => invoice_page(state, call, &query, &page).await,
        Err(e) => respond::app_error(&call.ctx.wire, "invoice", e.into()),
    }
}

/// `GET /v2/adjustments/{uuid}/credit_adjustments`: the credit lines reversing a charge.
pub(crate) async fn list_credit_adjustments(
    state: &AppState,
    call: &Routed<'_, api::ListCreditAdjustments>,
    query: Option<&str>,
) -> Response {
    let query = match ListQuery::parse(query, call.endpoint.filters) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    let page = match credit_invoices::credit_adjustments(state, &call.context(), &call.params[0], &query.page()).await {
        Ok(page) => page,
        Err(e) => return respond::app_error(&call.ctx.wire, "adjustment", e.into()),
    };
    let items = if call.head {
        Vec::new()
    } else {
        match stored_adjustment_views(state, &page.items).await {
            Ok(items) => items,
            Err(e) => return respond::internal(&e),
        }
    };
    let list_path = call.endpoint.render(&[&call.params[0]]);
    call.answer_page(&list_path, &query, &items, page.next, page.total)
}

/// `GET /v2/accounts/{account_code}/credit_payments`.
pub(crate) async fn list_account_credit_payments(
    state: &AppState,
    call: &Routed<'_, api::ListAccountCreditPayments>,
    query: Option<&str>,
) -> Response {
    match account(state, call).await {
        Ok(a) => list_credit_payments(state, call, query, Some(&a)).await,
        Err(r) => r,
    }
}

/// `GET /v2/credit_payments` and an account's credit payments.
pub(crate) async fn list_credit_payments<E: ApiEndpoint<Response = Vec<CreditPaymentView>>>(
    state: &AppState,
    call: &Routed<'_, E>,
    query: Option<&str>,
    account: Option<&Account>,
) -> Response {
    let query = match ListQuery::parse(query, call.endpoint.filters) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    let mut filter = CreditPaymentFilter { account_id: account.map(|a| a.id), action: None };
    if let Some(value) = query.filter("action") {
        match CreditPaymentAction::parse(value) {
            Some(action) => filter.action = Some(action),
            None => return invalid_choice("action", &CREDIT_PAYMENT_ACTIONS, value).response(),
        }
    }
    let page = match queries::credit_payments(state, &call.context(), &filter, &query.page()).await {
        Ok(page) => page,
        Err(e) => return respond::internal(&e),
    };
    let items: Vec<CreditPaymentView> =
        if call.head { Vec::new() } else { page.items.iter().map(views::credit_payment_view).collect() };
    let params: Vec<&str> = call.params.iter().map(String::as_str).collect();
    let list_path = call.endpoint.render(&params);
    call.answer_page(&list_path, &query, &items, page.next, page.total)
}

/// The values of the credit payment lists' `action` filter.
const CREDIT_PAYMENT_ACTIONS: [&str; 4] = ["payment", "refund", "reduction", "write_off"];

/// `GET /v2/credit_payments/{uuid}`.
pub(crate) async fn get_credit_payment(state: &AppState, call: &Routed<'_, api::GetCreditPayment>) -> Response {
    match queries::credit_payment(state, &call.context(), &call.params[0]).await {
        Ok(p) => call.answer(&views::credit_payment_view(&p)),
        Err(e) => respond::app_error(&call.ctx.wire, "credit_payment", e.into()),
    }
}

// ---------------------------------------------------------------------------------------------
// Adjustments

const ADJUSTMENT_STATES: [&str; 2] = ["pending", "invoiced"];
const ADJUSTMENT_TYPES: [&str; 2] = ["charge", "credit"];

pub(crate) async fn list_adjustments(
    state: &AppState,
    call: &Routed<'_, api::ListAccountAdjustments>,
    query: Option<&str>,
) -> Response {
    let account = match account(state, call).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    let query = match ListQuery::parse(query, call.endpoint.filters) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    let mut filter = AdjustmentFilter { account_id: Some(account.id), ..AdjustmentFilter::default() };
    if let Some(value) = query.filter("state") {
        match AdjustmentState::parse(value) {
            Some(s) => filter.state = Some(s),
            None => return invalid_choice("state", &ADJUSTMENT_STATES, value).response(),
        }
    }
    if let Some(value) = query.filter("type") {
        match AdjustmentKind::parse(value) {
            Some(k) => filter.kind = Some(k),
            None => return invalid_choice("type", &ADJUSTMENT_TYPES, value).response(),
        }
    }
    let page = match adjustments::list(state, &call.context(), &filter, &query.page()).await {
        Ok(page) => page,
        Err(e) => return respond::internal(&e),
    };
    let items = if call.head {
        Vec::new()
    } else {
        match stored_adjustment_views(state, &page.items).await {
            Ok(items) => items,
            Err(e) => return respond::internal(&e),
        }
    };
    let list_path = call.endpoint.render(&[&account.account_code]);
    call.answer_page(&list_path, &query, &items, page.next, page.total)
}

pub(crate) async fn create_adjustment(
    state: &AppState,
    call: &Routed<'_, api::CreateAdjustment>,
    request: Request,
) -> Response {
    let ctx = &call.ctx.wire;
    let account = match account(state, call).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    let Some(body) = (match call.decode_optional(state, request).await {
        Ok(b) => b,
        Err(r) => return r,
    }) else {
        return field_error(ctx, "adjustment.unit_amount_in_cents", "blank", "can't be blank");
    };
    if let Err(errors) = validate(&body, ctx, Operation::Create) {
        return respond::rejection(&Rejection::Invalid(errors), ctx);
    }
    let shipping =
        match views::shipping_choice(ctx, "adjustment.", body.shipping_address_id, body.shipping_address.as_deref()) {
            Ok(shipping) => shipping,
            Err(refused) => return refused,
        };
    let Some(unit) = body.unit_amount_in_cents else {
        return field_error(ctx, "adjustment.unit_amount_in_cents", "blank", "can't be blank");
    };
    let Some(currency) = body.currency.clone() else {
        return field_error(ctx, "adjustment.currency", "blank", "can't be blank");
    };
    let charge = NewCharge {
        unit_amount_in_cents: unit,
        quantity: body.quantity,
        currency,
        description: body.description.clone(),
        accounting_code: body.accounting_code.clone(),
        product_code: body.product_code.clone(),
        tax_exempt: body.tax_exempt,
        tax_code: body.tax_code.clone(),
        credit_reason_code: body.credit_reason_code.clone(),
        start_date: body.start_date.map(|t| t.timestamp()),
        end_date: body.end_date.map(|t| t.timestamp()),
    };
    match adjustments::create_shipped(state, &call.context(), &account, &charge, shipping.as_ref()).await {
        Err(AdjustmentError::ShippingAddress(ShippingError::NotFound(_))) => {
            field_error(ctx, "adjustment.shipping_address_id", "invalid", "is not a shipping address of the account")
        }
        Ok(created) => {
            let view = adjustment_view(&created.line, Some(&created), &created.account_code, false);
            let location = EndpointId::GetAdjustment.endpoint().render(&[&created.uuid]);
            with_location(call.answer(&view), ctx, &location)
        }
        Err(e) => adjustment_error(ctx, e),
    }
}

/// The answer to a refused adjustment operation.
fn adjustment_error(ctx: &rebill_xml::WireContext, error: AdjustmentError) -> Response {
    match error {
        AdjustmentError::InvalidCurrency => {
            field_error(ctx, "adjustment.currency", "invalid", "is not a 3-letter ISO 4217 currency code")
        }
        AdjustmentError::InvalidQuantity => {
            field_error(ctx, "adjustment.quantity", "greater_than", "must be greater than 0")
        }
        AdjustmentError::TooLarge => field_error(ctx, "adjustment.unit_amount_in_cents", "less_than", "is too large"),
        AdjustmentError::Invoiced => {
            invalid_transition("Only a pending adjustment can be deleted; this one is invoiced.")
        }
        other => respond::app_error(ctx, "adjustment", other.into()),
    }
}

pub(crate) async fn get_adjustment(state: &AppState, call: &Routed<'_, api::GetAdjustment>) -> Response {
    match adjustments::find(state, &call.context(), &call.params[0]).await {
        Ok(a) => match stored_adjustment_views(state, std::slice::from_ref(&a)).await {
            Ok(mut views) => match views.pop() {
                Some(view) => call.answer(&view),
                None => respond::invariant(&"the adjustment's view is missing"),
            },
            Err(e) => respond::internal(&e),
        },
        Err(e) => adjustment_error(&call.ctx.wire, e),
    }
}

pub(crate) async fn delete_adjustment(state: &AppState, call: &Routed<'_, api::DeleteAdjustment>) -> Response {
    match adjustments::delete(state, &call.context(), &call.params[0]).await {
        Ok(()) => call.answer_empty(),
        Err(e) => adjustment_error(&call.ctx.wire, e),
    }
}

// ---------------------------------------------------------------------------------------------
// Transactions

const TRANSACTION_STATES: [&str; 3] = ["successful", "failed", "voided"];
const TRANSACTION_TYPES: [&str; 4] = ["authorization", "refund", "purchase", "verify"];

/// `GET /v2/accounts/{account_code}/transactions`.
pub(crate) async fn list_account_transactions(
    state: &AppState,
    call: &Routed<'_, api::ListAccountTransactions>,
    query: Option<&str>,
) -> Response {
    match account(state, call).await {
        Ok(a) => list_transactions(state, call, query, Some(&a)).await,
        Err(r) => r,
    }
}

/// `GET /v2/transactions` and an account's transactions.
pub(crate) async fn list_transactions<E: ApiEndpoint<Response = Vec<TransactionView>>>(
    state: &AppState,
    call: &Routed<'_, E>,
    query: Option<&str>,
    account: Option<&Account>,
) -> Response {
    let query = match ListQuery::parse(query, call.endpoint.filters) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    let mut filter = TransactionFilter { account_id: account.map(|a| a.id), ..TransactionFilter::default() };
    if let Some(value) = query.filter("state") {
        filter.statuses = match value {
            "successful" => vec![TransactionStatus::Success],
            "failed" => vec![TransactionStatus::Declined],
            "voided" => vec![TransactionStatus::Void],
            other => return invalid_choice("state", &TRANSACTION_STATES, other).response(),
        };
    }
    if let Some(value) = query.filter("type") {
        if !TRANSACTION_TYPES.contains(&value) {
            return invalid_choice("type", &TRANSACTION_TYPES, value).response();
        }
        filter.actions = vec![value.to_owned()];
    }
    let page = match queries::transactions(state, &call.context(), &filter, &query.page()).await {
        Ok(page) => page,
        Err(e) => return respond::internal(&e),
    };
    let items: Vec<TransactionView> = if call.head {
        Vec::new()
    } else {
        page.items.iter().map(|t| views::transaction_view(t, call.ctx.now)).collect()
    };
    let params: Vec<&str> = call.params.iter().map(String::as_str).collect();
    let list_path = call.endpoint.render(&params);
    call.answer_page(&list_path, &query, &items, page.next, page.total)
}

pub(crate) async fn get_transaction(state: &AppState, call: &Routed<'_, api::GetTransaction>) -> Response {
    match queries::transaction(state, &call.context(), &call.params[0]).await {
        Ok(t) => call.answer(&views::transaction_view(&t, call.ctx.now)),
        Err(e) => respond::app_error(&call.ctx.wire, "transaction", e.into()),
    }
}

/// `DELETE /v2/transactions/{uuid}[?amount_in_cents=N]`: 202 with the original transaction as it
/// is now; voided (unsettled and given back whole) without `Location`, refunded with `Location`
/// naming the refund transaction. Refusals are 422 field errors, a declined refund the 422
/// transaction error document.
pub(crate) async fn refund_transaction(
    state: &AppState,
    call: &Routed<'_, api::RefundTransaction>,
    query: Option<&str>,
) -> Response {
    let ctx = &call.ctx.wire;
    let amount = match crate::request::query_param(query, "amount_in_cents") {
        None => None,
        Some(text) => match text.trim().parse::<i64>() {
            Ok(n) => Some(n),
            Err(_) => return field_error(ctx, "transaction.amount_in_cents", "not_a_number", "is not a number"),
        },
    };
    let now = call.ctx.now;
    match refunds::give_back_transaction(state, &call.context(), &call.params[0], amount).await {
        Ok(GivenBack::Voided(original)) => call.answer(&views::transaction_view(&original, now)),
        Ok(GivenBack::Refunded { original, refund }) => {
            let location = EndpointId::GetTransaction.endpoint().render(&[&refund.uuid]);
            with_location(call.answer(&views::transaction_view(&original, now)), ctx, &location)
        }
        Err(RefundError::Declined(transaction)) => views::decline_response(
            ctx,
            &transaction,
            DeclineFields { verification_value: "transaction.base", base: "transaction.base" },
        ),
        Err(e) => respond::app_error(ctx, "transaction", e.into()),
    }
}

/// Where the fields of a one-off transaction's decline point.
const TRANSACTION_DECLINE: DeclineFields<'static> = DeclineFields {
    verification_value: "transaction.account.billing_info.verification_value",
    base: "transaction.base",
};

/// `POST /v2/transactions`.
pub(crate) async fn create_transaction(
    state: &AppState,
    call: &Routed<'_, api::CreateTransaction>,
    request: Request,
) -> Response {
    let ctx = &call.ctx.wire;
    let Some(body) = (match call.decode_optional(state, request).await {
        Ok(b) => b,
        Err(r) => return r,
    }) else {
        return field_error(ctx, "transaction.amount_in_cents", "blank", "can't be blank");
    };
    if let Err(errors) = validate(&body, ctx, Operation::Create) {
        return respond::rejection(&Rejection::Invalid(errors), ctx);
    }
    let amount = body.amount_in_cents.unwrap_or_default();
    if !(1..=1_000_000_000_000).contains(&amount) {
        return field_error(ctx, "transaction.amount_in_cents", "greater_than", "must be greater than 0");
    }
    let currency = body.currency.as_deref().unwrap_or_default().to_ascii_uppercase();
    if !valid_currency(&currency) {
        return field_error(ctx, "transaction.currency", "invalid", "is not a 3-letter ISO 4217 currency code");
    }
    let nested = body.account.as_deref().cloned().unwrap_or_default();
    let code = nested.account_code.clone().unwrap_or_default();
    if code.trim().is_empty() {
        return field_error(ctx, "transaction.account.account_code", "blank", "can't be blank");
    }
    let charge = OneOffCharge {
        account_code: code,
        account_fields: AccountFields {
            username: nested.username.clone(),
            email: nested.email.clone(),
            first_name: nested.first_name.clone(),
            last_name: nested.last_name.clone(),
            company_name: nested.company_name.clone(),
            ..AccountFields::default()
        },
        amount_in_cents: amount,
        currency,
        description: body.request_description.clone().unwrap_or_else(|| "One-time charge".to_owned()),
        accounting_code: body.accounting_code.clone(),
        product_code: body.product_code.clone(),
        tax_exempt: body.tax_exempt,
        tax_code: body.tax_code.clone(),
        billing_info: nested.billing_info.as_deref().map(billing_request),
    };
    let transaction = match charge_once(state, &call.context(), &charge).await {
        Ok(Charged::Transaction(t)) => t,
        // Paid wholly by the account's credit: no transaction to answer (the real service's 204).
        Ok(Charged::ByCredit(_)) => return axum::response::IntoResponse::into_response(StatusCode::NO_CONTENT),
        Err(ChargeError::BillingInfoRequired) => {
            return respond::error(
                StatusCode::BAD_REQUEST,
                "billing_info_required",
                "The account has no billing info; send one with the transaction (billing_info.token_id).",
            );
        }
        Err(ChargeError::PaymentMethod(e)) => return views::payment_method_error(ctx, &e),
        Err(ChargeError::Billing(e)) => return billing_error(e),
        Err(e) => return respond::internal(&e),
    };
    // Approved, or still processing at the gateway (its outcome not known yet: docs/gateways.md):
    // 201 with the transaction as it is. Only a decline is the transaction error document.
    if !matches!(transaction.status(), TransactionStatus::Success | TransactionStatus::Processing) {
        return views::decline_response(ctx, &transaction, TRANSACTION_DECLINE);
    }
    let location = EndpointId::GetTransaction.endpoint().render(&[&transaction.uuid]);
    with_location(call.answer(&views::transaction_view(&transaction, call.ctx.now)), ctx, &location)
}

// ---------------------------------------------------------------------------------------------
// Refunds

/// `POST /v2/invoices/{invoice_number}/refund`: 201, `Location` and the refund invoice (a credit
/// invoice with Credit Memos, a legacy refund invoice without); refusals are 422 field errors, a
/// refund the gateway declined on a site without Credit Memos the 422 transaction error document.
pub(crate) async fn refund_invoice(
    state: &AppState,
    call: &Routed<'_, api::RefundInvoice>,
    request: Request,
) -> Response {
    let ctx = &call.ctx.wire;
    let body = match call.decode_optional(state, request).await {
        Ok(b) => b.unwrap_or_default(),
        Err(r) => return r,
    };
    if let Err(errors) = validate(&body, ctx, Operation::Create) {
        return respond::rejection(&Rejection::Invalid(errors), ctx);
    }
    let method = match &body.refund_method {
        None | Some(ViewRefundMethod::CreditFirst) => RefundMethod::CreditFirst,
        Some(ViewRefundMethod::TransactionFirst) => RefundMethod::TransactionFirst,
        Some(ViewRefundMethod::AllCredit) => RefundMethod::AllCredit,
        Some(ViewRefundMethod::AllTransaction) => RefundMethod::AllTransaction,
        // Strict decoding refuses unknown values; kept for completeness.
        Some(ViewRefundMethod::Unknown(_)) => {
            return field_error(ctx, "invoice.refund_method", "inclusion", "is not included in the list");
        }
    };
    let lines = body
        .line_items
        .iter()
        .flatten()
        .map(|l| LineRefund {
            uuid: l.uuid.clone().unwrap_or_default(),
            quantity: l.quantity,
            prorate: l.prorate == Some(true),
        })
        .collect();
    let external = (body.external_refund == Some(true)).then(|| External {
        payment_method: body.payment_method.clone(),
        description: body.description.clone(),
        refunded_at: body.refunded_at.map(|t| t.timestamp()),
    });
    let wanted = RefundRequest {
        amount: body.amount_in_cents,
        percentage: body.percentage,
        lines,
        method,
        credit_customer_notes: body.credit_customer_notes.clone(),
        external,
        termination: false,
        transaction: None,
    };
    match refunds::refund_invoice(state, &call.context(), &call.params[0], &wanted).await {
        Ok(refund) => match full_view(state, &refund, call.ctx.now).await {
            Ok(view) => {
                let location = EndpointId::GetInvoice.endpoint().render(&[&refund.invoice_number.to_string()]);
                with_location(call.answer(&view), ctx, &location)
            }
            Err(e) => respond::internal(&e),
        },
        Err(RefundError::Declined(transaction)) => views::decline_response(
            ctx,
            &transaction,
            DeclineFields { verification_value: "invoice.base", base: "invoice.base" },
        ),
        Err(e) => respond::app_error(ctx, "invoice", e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_of_invoice_states_filter() {
        assert_eq!(invoice_state_filter("open"), Some(InvoiceState::Pending));
        assert_eq!(invoice_state_filter("pending"), Some(InvoiceState::Pending));
        assert_eq!(invoice_state_filter("collected"), Some(InvoiceState::Paid));
        assert_eq!(invoice_state_filter("paid"), Some(InvoiceState::Paid));
        assert_eq!(invoice_state_filter("past_due"), Some(InvoiceState::PastDue));
        assert_eq!(invoice_state_filter("voided"), None);
        assert!(INVOICE_STATES.iter().all(|s| invoice_state_filter(s).is_some()));
    }

    use rebill_models::CreditPaymentAction as ViewAction;
    use rebill_xml::{ApiVersion, Features, Mode, Project, WireContext, XmlEnum};

    fn wire(version: ApiVersion, credit_memos: bool) -> WireContext {
        let features =
            if credit_memos { Features::none().with("credit_memos").expect("feature") } else { Features::none() };
        WireContext::new(version, features, "http://rebill.test")
    }

    /// The view as a client of `version` sees it (what does not exist there left out).
    fn seen<T: Project>(view: &T, version: ApiVersion, credit_memos: bool) -> T {
        view.project(&wire(version, credit_memos), Mode::Response)
    }

    /// How a client of `version` reads the invoice's state.
    fn state_word(view: &InvoiceView, version: ApiVersion, credit_memos: bool) -> String {
        view.state.as_ref().map(|s| s.wire_value(&wire(version, credit_memos)).to_owned()).unwrap_or_default()
    }

    fn stored(kind: InvoiceKind, state: InvoiceState, total: i64, paid: i64) -> Invoice {
        Invoice {
            id: 7,
            uuid: "inv7".into(),
            site_id: 1,
            account_id: 3,
            account_code: "a1".into(),
            invoice_number: 1002,
            kind,
            original_invoice_id: None,
            original_invoice_number: None,
            credited: 0,
            state,
            origin: "purchase".into(),
            currency: "USD".into(),
            amounts: InvoiceAmounts {
                subtotal_before_discount: total,
                subtotal_after_discount: total,
                total,
                paid,
                balance: total - paid,
                ..InvoiceAmounts::default()
            },
            terms: InvoiceTerms::default(),
            due_on: None,
            collection_attempts: 0,
            attempt_next_collection_at: None,
            closed_at: None,
            created_at: 1_800_000_000,
            updated_at: 1_800_000_000,
        }
    }

    fn line(kind: AdjustmentKind, total: i64, quantity: i64) -> Adjustment {
        Adjustment {
            id: 11,
            uuid: "adj11".into(),
            site_id: 1,
            account_code: "a1".into(),
            state: AdjustmentState::Invoiced,
            invoice_id: Some(7),
            invoice_number: Some(1002),
            line: NewAdjustment {
                account_id: 3,
                subscription_uuid: None,
                kind,
                origin: if kind == AdjustmentKind::Charge { "debit".into() } else { "credit".into() },
                description: None,
                accounting_code: None,
                product_code: None,
                currency: "USD".into(),
                unit_amount: total / quantity,
                quantity,
                discount: 0,
                tax: 0,
                total,
                tax_exempt: None,
                tax_code: None,
                credit_reason_code: None,
                start_date: None,
                end_date: None,
                engine: None,
                original_adjustment_id: None,
                reversed_quantity: 0,
            },
            original_adjustment_uuid: None,
            credited: 0,
            quantity_credited: 0,
            created_at: 1_800_000_000,
            updated_at: 1_800_000_000,
            shipping_address_id: None,
            shipping_address: None,
        }
    }

    fn payment(action: CreditPaymentAction, amount: i64) -> CreditPayment {
        CreditPayment {
            id: 1,
            uuid: "cp1".into(),
            site_id: 1,
            account_id: 3,
            account_code: "a1".into(),
            action,
            currency: "USD".into(),
            amount,
            original_invoice_id: 7,
            original_invoice_number: 1002,
            applied_to_invoice_id: Some(7),
            applied_to_invoice_number: Some(1002),
            original_credit_payment_uuid: None,
            refund_transaction_uuid: None,
            created_at: 1_800_000_000,
            updated_at: 1_800_000_000,
            voided_at: None,
        }
    }

    #[test]
    fn an_open_credit_invoice_shows_its_credit_and_the_void_anchor_with_credit_memos() {
        let invoice = stored(InvoiceKind::Credit, InvoiceState::Open, -500, 0);
        let view = seen(
            &invoice_view(&invoice, &[line(AdjustmentKind::Credit, -500, 1)], &[], &[], 0),
            ApiVersion::V2_11,
            true,
        );
        assert_eq!(view.kind, Some(InvoiceType::Credit));
        assert_eq!(state_word(&view, ApiVersion::V2_11, true), "open");
        assert_eq!((view.balance_in_cents, view.refundable_total_in_cents), (Some(-500), Some(500)));
        assert_eq!(view.void_action, Some(href(EndpointId::VoidInvoice, &["1002"])));
        assert_eq!(view.refund_action, Some(href(EndpointId::RefundInvoice, &["1002"])));
        assert_eq!(view.original_invoices, Some(href(EndpointId::ListOriginalInvoices, &["1002"])));
        assert_eq!(view.credit_payments, Some(Vec::new()));
        assert_eq!((view.credit_invoices, view.mark_successful_action), (None, None));
        // Closed, voided or with a refund processing: nothing to void.
        for state in [InvoiceState::Closed, InvoiceState::Voided, InvoiceState::Processing] {
            let done = stored(InvoiceKind::Credit, state, -500, -500);
            assert_eq!(invoice_view(&done, &[], &[], &[], 0).void_action, None, "{state:?}");
        }
    }

    #[test]
    fn credit_invoices_take_the_schema_fallbacks_below_2_10_and_without_credit_memos() {
        for (state, before, without) in [
            (InvoiceState::Open, "open", "pending"),
            (InvoiceState::Closed, "collected", "paid"),
            (InvoiceState::Voided, "failed", "failed"),
        ] {
            let view = invoice_view(&stored(InvoiceKind::Credit, state, -500, 0), &[], &[], &[], 0);
            assert_eq!(state_word(&view, ApiVersion::V2_9, true), before, "{state:?} at 2.9");
            assert_eq!(state_word(&view, ApiVersion::V2_11, false), without, "{state:?} without Credit Memos");
            assert_eq!(state_word(&view, ApiVersion::V2_10, true), state.as_str(), "{state:?} at 2.10");
            let old = seen(&view, ApiVersion::V2_9, true);
            assert_eq!((old.kind, old.balance_in_cents, old.original_invoices), (None, None, None));
            assert_eq!((old.void_action, old.credit_payments), (None, None));
            let plain = seen(&view, ApiVersion::V2_11, false);
            assert_eq!((plain.kind, plain.balance_in_cents, plain.original_invoices), (None, None, None));
            assert_eq!(plain.void_action, None);
            // Credit payments are a 2.10 element of every site.
            assert_eq!(plain.credit_payments, Some(Vec::new()));
        }
    }

    #[test]
    fn a_paid_charge_invoice_refunds_what_was_not_credited_back() {
        let mut invoice = stored(InvoiceKind::Charge, InvoiceState::Paid, 3000, 3000);
        let mut charge = line(AdjustmentKind::Charge, 3000, 3);
        let credit = payment(CreditPaymentAction::Payment, 1200);
        let view = invoice_view(&invoice, std::slice::from_ref(&charge), &[], std::slice::from_ref(&credit), 0);
        let view = seen(&view, ApiVersion::V2_11, true);
        assert_eq!(view.kind, Some(InvoiceType::Charge));
        assert_eq!(view.refundable_total_in_cents, Some(3000));
        assert_eq!(view.refund_action, Some(href(EndpointId::RefundInvoice, &["1002"])));
        assert_eq!(view.credit_invoices, Some(href(EndpointId::ListCreditInvoices, &["1002"])));
        assert_eq!((view.original_invoices, view.void_action), (None, None));
        let payments = view.credit_payments.unwrap_or_default();
        assert_eq!(payments.len(), 1);
        assert_eq!((payments[0].action.clone(), payments[0].amount_in_cents), (Some(ViewAction::Payment), Some(1200)));
        let lines = view.line_items.unwrap_or_default();
        assert_eq!((lines[0].quantity_remaining, lines[0].refundable_total_in_cents), (Some(3), Some(3000)));

        // Credited in part: the rest stays refundable; credited whole: no refund anchor.
        invoice.credited = 1000;
        charge.credited = 1000;
        charge.quantity_credited = 1;
        let view = invoice_view(&invoice, std::slice::from_ref(&charge), &[], &[], 0);
        assert_eq!(view.refundable_total_in_cents, Some(2000));
        let lines = view.line_items.unwrap_or_default();
        assert_eq!((lines[0].quantity_remaining, lines[0].refundable_total_in_cents), (Some(2), Some(2000)));
        invoice.credited = 3000;
        let view = invoice_view(&invoice, &[], &[], &[], 0);
        assert_eq!((view.refundable_total_in_cents, view.refund_action), (Some(0), None));
        // Nothing of an unpaid invoice is refundable.
        let pending = stored(InvoiceKind::Charge, InvoiceState::Pending, 3000, 0);
        let view = invoice_view(&pending, std::slice::from_ref(&charge), &[], &[], 0);
        assert_eq!((view.refundable_total_in_cents, view.refund_action), (Some(0), None));
        assert_eq!(view.line_items.unwrap_or_default()[0].refundable_total_in_cents, Some(0));
    }

    #[test]
    fn an_open_credit_invoice_refunds_the_credit_left() {
        // 500 of credit, 200 of it used: 300 can be paid out.
        let open = stored(InvoiceKind::Credit, InvoiceState::Open, -500, -200);
        let view = invoice_view(&open, &[], &[], &[], 0);
        assert_eq!(view.refundable_total_in_cents, Some(300));
        assert_eq!(view.refund_action, Some(href(EndpointId::RefundInvoice, &["1002"])));
        for (state, paid) in
            [(InvoiceState::Closed, -500), (InvoiceState::Voided, -500), (InvoiceState::Processing, -200)]
        {
            let view = invoice_view(&stored(InvoiceKind::Credit, state, -500, paid), &[], &[], &[], 0);
            assert_eq!((view.refundable_total_in_cents, view.refund_action), (Some(0), None), "{state:?}");
        }
    }

    #[test]
    fn a_refund_invoice_links_its_original() {
        let mut refund = stored(InvoiceKind::Legacy, InvoiceState::Paid, -900, 0);
        refund.original_invoice_id = Some(5);
        refund.original_invoice_number = Some(1001);
        let view = invoice_view(&refund, &[], &[], &[], 0);
        assert_eq!(state_word(&view, ApiVersion::V2_9, false), "collected");
        let old = seen(&view, ApiVersion::V2_9, false);
        assert_eq!(old.original_invoice, Some(href(EndpointId::GetInvoice, &["1001"])));
        assert_eq!((old.refund_action, old.refundable_total_in_cents), (None, Some(0)));
    }

    #[test]
    fn a_credit_line_names_the_charge_it_reverses() {
        let mut credit = line(AdjustmentKind::Credit, -1000, 1);
        credit.original_adjustment_uuid = Some("adj9".into());
        let view = seen(&adjustment_views(&[credit], &HashSet::from([7]))[0], ApiVersion::V2_11, true);
        assert_eq!(view.kind, Some(AdjustmentType::Credit));
        assert_eq!(view.original_adjustment_uuid.as_deref(), Some("adj9"));
        assert_eq!(view.original_adjustment, Some(href(EndpointId::GetAdjustment, &["adj9"])));
        assert_eq!((view.refundable_total_in_cents, view.credit_adjustments), (Some(0), None));

        let charge = line(AdjustmentKind::Charge, 500, 1);
        let old = seen(&adjustment_views(std::slice::from_ref(&charge), &HashSet::new())[0], ApiVersion::V2_9, true);
        assert_eq!((old.original_adjustment_uuid, old.credit_adjustments), (None, None));
        assert_eq!(old.refundable_total_in_cents, Some(0), "not on a paid invoice");
        let new = seen(&adjustment_views(&[charge], &HashSet::from([7]))[0], ApiVersion::V2_10, true);
        assert_eq!(new.credit_adjustments, Some(href(EndpointId::ListCreditAdjustments, &["adj11"])));
        assert_eq!(new.refundable_total_in_cents, Some(500));
    }

    #[test]
    fn a_credit_invoice_is_the_collection_s_credit_invoice() {
        let credit = invoice_view(&stored(InvoiceKind::Credit, InvoiceState::Open, -500, 0), &[], &[], &[], 0);
        let made = collection(credit.clone());
        assert_eq!((made.charge_invoice, made.credit_invoices), (None, Some(vec![credit])));
        let legacy = invoice_view(&stored(InvoiceKind::Legacy, InvoiceState::Paid, -500, 0), &[], &[], &[], 0);
        let made = collection(legacy.clone());
        assert_eq!((made.charge_invoice, made.credit_invoices), (Some(Box::new(legacy)), Some(Vec::new())));
    }
}

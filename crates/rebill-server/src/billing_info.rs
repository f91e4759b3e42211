//! Billing info of an account: get, update (with a token or with card or bank-account fields,
//! verified through the gateway) and delete.
//!
//! An update with `token_id` uses the token once (it is deleted even when the verification then
//! declines); no payment data (card, bank account, names, address) may accompany it
//! (`rebill_models::rules`), only `currency`, which is not payment data: with or without a token
//! it names the verification's currency (released clients send `USD` on every billing info).
//! Card and bank-account fields, sent directly or held by the token, are checked by
//! `rebill_billing::card`, the same code the token endpoint uses. The payment method is then verified with a one-unit
//! authorization (100 cents, in `currency` or USD) through the site's gateway: a decline answers
//! the 422 transaction error document and stores nothing, an approval stores the payment method
//! with the gateway and the billing info (never the number, CVV or account number, but the
//! gateway's opaque reference for later charges) and answers it. Every verification is recorded
//! as a `verify` transaction before the gateway is called.
//!
//! Choices where the spec is silent:
//! - A token that is unknown, already used or expired answers 422 `token_invalid`.
//! - An update with neither a token nor card or bank fields changes the names and address of the
//!   existing billing info without a verification; without an existing one it is a 422 on
//!   `billing_info.number`. Names and address not sent are kept from the existing billing info;
//!   the payment method is replaced whole.
//! - `declined_saveable` stores the billing info and still answers the 422 decline.
//! - The decline's field error is `billing_info.verification_value` (`declined_bad`, "did not
//!   match") for a security-code mismatch and `billing_info.base` (`declined`, the customer
//!   message) otherwise. The declined verification is stored, so its href resolves.
//! - Card expiry is checked on the site's clock; a token's lifetime on the service's clock.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rebill_billing::card::{BankAccount, BankInput, Card};
use rebill_billing::card::{
    Brand, CardInput, Field, FieldError, Problem, is_valid_routing_number, validate_bank_account, validate_card,
};
use rebill_billing::gateway::{AvsAddress, Outcome, PaymentMethod, PaymentRequest};
use rebill_billing::vault::Secret;
use rebill_models::api::EndpointId;
use rebill_models::validate::{Operation, Rejection, Violation, errors_document, reject_decode, validate};
use rebill_models::{BankAccountType, BillingInfo, BillingInfoType};
use rebill_store::accounts::Account;
use rebill_store::billing_info::{BillingFields, BillingInfo as Stored, PaymentKind};
use rebill_store::invoicing::{NewTransaction, Transaction, new_uuid};
use rebill_store::tokens::TokenUse;
use rebill_xml::{Href, Mode, WireContext};

use crate::billing::DeclineFields;
use crate::handlers::Call;
use crate::respond::time;
use crate::{AppState, respond};

/// Amount of the verification authorization (one unit of the currency).
const VERIFY_AMOUNT_IN_CENTS: i64 = 100;
/// Currency of the verification when the request names none.
const VERIFY_CURRENCY: &str = "USD";

/// Whether this module serves the endpoint.
pub(crate) fn handles(id: EndpointId) -> bool {
    matches!(id, EndpointId::GetBillingInfo | EndpointId::UpdateBillingInfo | EndpointId::DeleteBillingInfo)
}

pub(crate) async fn handle(state: &AppState, call: &Call, request: Request) -> Response {
    match call.id {
        EndpointId::GetBillingInfo => get(state, call).await,
        EndpointId::UpdateBillingInfo => update(state, call, request).await,
        EndpointId::DeleteBillingInfo => delete(state, call).await,
        _ => respond::internal(&format!("{} routed to a module that does not serve it", call.endpoint.name)),
    }
}

fn account_href(code: &str) -> Href {
    Href::path(EndpointId::GetAccount.endpoint().render(&[code]))
}

fn account_not_found(code: &str) -> Response {
    respond::not_found(&format!("Couldn't find Account with account_code = {code}"))
}

fn billing_info_not_found(code: &str) -> Response {
    respond::not_found(&format!("Couldn't find BillingInfo with account_code = {code}"))
}

/// The stored billing info as the API shows it.
fn view(code: &str, stored: &Stored) -> BillingInfo {
    let f = &stored.fields;
    let card = stored.kind == PaymentKind::CreditCard;
    let bank = stored.kind == PaymentKind::BankAccount;
    BillingInfo {
        kind: Some(match stored.kind {
            PaymentKind::CreditCard => BillingInfoType::CreditCard,
            PaymentKind::BankAccount => BillingInfoType::BankAccount,
        }),
        account_code: Some(code.to_owned()),
        account: Some(account_href(code)),
        first_name: f.first_name.clone(),
        last_name: f.last_name.clone(),
        company: f.company.clone(),
        address1: f.address1.clone(),
        address2: f.address2.clone(),
        city: f.city.clone(),
        state: f.state.clone(),
        zip: f.zip.clone(),
        country: f.country.clone(),
        phone: f.phone.clone(),
        vat_number: f.vat_number.clone(),
        ip_address: f.ip_address.clone(),
        ip_address_country: f.ip_address_country.clone(),
        geo_code: f.geo_code.clone(),
        card_type: card.then(|| card_type(f)).flatten(),
        year: f.year.filter(|_| card),
        month: f.month.filter(|_| card),
        first_six: f.first_six.clone().filter(|_| card),
        last_four: f.last_four.clone(),
        name_on_account: f.name_on_account.clone().filter(|_| bank),
        routing_number: f.routing_number.clone().filter(|_| bank),
        account_type: f.account_type.as_deref().filter(|_| bank).and_then(|t| match t {
            "checking" => Some(BankAccountType::Checking),
            "savings" => Some(BankAccountType::Savings),
            _ => None,
        }),
        updated_at: time(stored.updated_at),
        ..BillingInfo::default()
    }
}

/// The `card_type` shown for a stored brand code (`Visa`, `MasterCard`, …).
fn card_type(f: &BillingFields) -> Option<String> {
    f.card_type.as_deref().map(|code| Brand::from_code(code).unwrap_or(Brand::Unknown).display_name().to_owned())
}

/// `GET /v2/accounts/{account_code}/billing_info`.
async fn get(state: &AppState, call: &Call) -> Response {
    let code = &call.params[0];
    let account = match state.store.account(call.ctx.site.id, code).await {
        Ok(Some(a)) => a,
        Ok(None) => return account_not_found(code),
        Err(e) => return respond::internal(&e),
    };
    match state.store.billing_info(account.id).await {
        Ok(Some(stored)) => respond::resource(StatusCode::OK, &view(code, &stored), &call.ctx.wire),
        Ok(None) => billing_info_not_found(code),
        Err(e) => respond::internal(&e),
    }
}

/// `DELETE /v2/accounts/{account_code}/billing_info`: 204.
async fn delete(state: &AppState, call: &Call) -> Response {
    let code = &call.params[0];
    let account = match state.store.account(call.ctx.site.id, code).await {
        Ok(Some(a)) => a,
        Ok(None) => return account_not_found(code),
        Err(e) => return respond::internal(&e),
    };
    match state.store.delete_billing_info(account.id).await {
        Ok(true) => StatusCode::NO_CONTENT.into_response(),
        Ok(false) => billing_info_not_found(code),
        Err(e) => respond::internal(&e),
    }
}

/// A 422 `<errors>` document of field problems.
fn field_errors(ctx: &WireContext, errors: &[FieldError]) -> Response {
    let violations: Vec<Violation> = errors
        .iter()
        .map(|e| Violation {
            field: format!("billing_info.{}", e.field.billing_info_element()),
            symbol: e.problem.symbol(),
            message: e.problem.message(),
        })
        .collect();
    respond::rejection(&Rejection::Invalid(errors_document(&violations)), ctx)
}

fn token_invalid() -> Response {
    respond::error(
        StatusCode::UNPROCESSABLE_ENTITY,
        "token_invalid",
        "The token is invalid, has expired or has already been used (tokens live 20 minutes and work once).",
    )
}

/// The payment method of an update, checked.
enum Method {
    Card(Card),
    Bank(BankAccount),
}

impl Method {
    fn payment(&self) -> PaymentMethod<'_> {
        match self {
            Method::Card(card) => PaymentMethod::Card(card),
            Method::Bank(account) => PaymentMethod::BankAccount(account),
        }
    }

    fn kind(&self) -> PaymentKind {
        match self {
            Method::Card(_) => PaymentKind::CreditCard,
            Method::Bank(_) => PaymentKind::BankAccount,
        }
    }

    /// The non-secret payment fields of the method.
    fn apply(&self, fields: &mut BillingFields) {
        fields.card_type = None;
        fields.first_six = None;
        fields.month = None;
        fields.year = None;
        fields.name_on_account = None;
        fields.account_type = None;
        fields.routing_number = None;
        match self {
            Method::Card(card) => {
                fields.card_type = Some(card.brand.code().to_owned());
                fields.first_six = Some(card.first_six().to_owned());
                fields.last_four = Some(card.last_four().to_owned());
                fields.month = Some(i64::from(card.expiry.month));
                fields.year = Some(i64::from(card.expiry.year));
            }
            Method::Bank(account) => {
                fields.name_on_account = Some(account.name_on_account.clone());
                fields.account_type = Some(account.account_type.as_str().to_owned());
                fields.routing_number = Some(account.routing_number.clone());
                fields.last_four = Some(account.last_four().to_owned());
            }
        }
    }
}

/// The names and address a request sets.
fn request_fields(info: &BillingInfo) -> BillingFields {
    BillingFields {
        first_name: info.first_name.clone(),
        last_name: info.last_name.clone(),
        company: info.company.clone(),
        address1: info.address1.clone(),
        address2: info.address2.clone(),
        city: info.city.clone(),
        state: info.state.clone(),
        zip: info.zip.clone(),
        country: info.country.clone(),
        phone: info.phone.clone(),
        vat_number: info.vat_number.clone(),
        ip_address: info.ip_address.clone(),
        geo_code: info.geo_code.clone(),
        ..BillingFields::default()
    }
}

/// `update`'s names and address over `base`'s (the payment fields stay `base`'s).
fn merge(base: Option<&BillingFields>, update: BillingFields) -> BillingFields {
    let base = base.cloned().unwrap_or_default();
    BillingFields {
        first_name: update.first_name.or(base.first_name),
        last_name: update.last_name.or(base.last_name),
        company: update.company.or(base.company),
        address1: update.address1.or(base.address1),
        address2: update.address2.or(base.address2),
        city: update.city.or(base.city),
        state: update.state.or(base.state),
        zip: update.zip.or(base.zip),
        country: update.country.or(base.country),
        phone: update.phone.or(base.phone),
        vat_number: update.vat_number.or(base.vat_number),
        ip_address_country: if update.ip_address.is_some() { None } else { base.ip_address_country },
        ip_address: update.ip_address.or(base.ip_address),
        geo_code: update.geo_code.or(base.geo_code),
        ..base
    }
}

/// Checks a card with the shared card code (names fall back to those already stored).
fn check_card(
    number: Option<&str>,
    month: Option<i64>,
    year: Option<i64>,
    cvv: Option<&str>,
    names: &BillingFields,
    now: i64,
) -> Result<Card, Vec<FieldError>> {
    let (month, year) = (month.map(|m| m.to_string()), year.map(|y| y.to_string()));
    let input = CardInput {
        number,
        month: month.as_deref(),
        year: year.as_deref(),
        cvv,
        first_name: names.first_name.as_deref(),
        last_name: names.last_name.as_deref(),
    };
    validate_card(&input, now)
}

/// Checks a bank account with the shared code, and that the gateway knows its bank.
fn check_bank(state: &AppState, input: &BankInput<'_>) -> Result<BankAccount, Vec<FieldError>> {
    let account = validate_bank_account(input)?;
    if is_valid_routing_number(&account.routing_number) && state.gateway.bank_name(&account.routing_number).is_none() {
        return Err(vec![FieldError { field: Field::RoutingNumber, problem: Problem::Invalid }]);
    }
    Ok(account)
}

/// What an update asks for.
enum Change {
    /// A new payment method, with the names and address to store beside it.
    Method(Method, BillingFields),
    /// Names and address only.
    Details(BillingFields),
}

/// The change a token holds (the token is used up here).
async fn token_change(
    state: &AppState,
    call: &Call,
    token_id: &str,
    existing: Option<&Stored>,
) -> Result<Change, Response> {
    let token = match state.store.consume_token(call.ctx.site.id, token_id, state.clock.now()).await {
        Ok(TokenUse::Consumed(token)) => token,
        Ok(TokenUse::Expired | TokenUse::Unknown) => return Err(token_invalid()),
        Err(e) => return Err(respond::internal(&e)),
    };
    let secret = match state.vault.open(&token.secret, token_id.as_bytes()) {
        Ok(secret) => secret,
        // A token sealed under another vault key (e.g. before a key change) cannot be used.
        Err(_) => return Err(token_invalid()),
    };
    let fields = merge(existing.map(|e| &e.fields), token.fields.clone());
    let f = &token.fields;
    let method = match (token.kind, secret) {
        (PaymentKind::CreditCard, Secret::Card { number, cvv }) => {
            check_card(Some(&number), f.month, f.year, cvv.as_deref(), &fields, call.ctx.now).map(Method::Card)
        }
        (PaymentKind::BankAccount, Secret::BankAccount { account_number }) => {
            let input = BankInput {
                routing_number: f.routing_number.as_deref(),
                account_number: Some(&account_number),
                account_number_confirmation: None,
                confirm: false,
                account_type: f.account_type.as_deref(),
                name_on_account: f.name_on_account.as_deref(),
            };
            check_bank(state, &input).map(Method::Bank)
        }
        _ => return Err(token_invalid()),
    };
    method.map(|m| Change::Method(m, fields)).map_err(|errors| field_errors(&call.ctx.wire, &errors))
}

/// The change of a request with card or bank fields, or names and address only.
fn direct_change(
    state: &AppState,
    call: &Call,
    info: &BillingInfo,
    existing: Option<&Stored>,
) -> Result<Change, Vec<FieldError>> {
    let fields = merge(existing.map(|e| &e.fields), request_fields(info));
    let card_given = info.number.is_some() || info.verification_value.is_some();
    let bank_given = info.account_number.is_some()
        || info.routing_number.is_some()
        || info.account_type.is_some()
        || info.name_on_account.is_some();
    if card_given || (!bank_given && (info.month.is_some() || info.year.is_some())) {
        let card = check_card(
            info.number.as_deref(),
            info.month,
            info.year,
            info.verification_value.as_deref(),
            &fields,
            call.ctx.now,
        )?;
        return Ok(Change::Method(Method::Card(card), fields));
    }
    if bank_given {
        let account_type = info.account_type.as_ref().map(|t| match t {
            BankAccountType::Checking => "checking",
            BankAccountType::Savings => "savings",
            BankAccountType::Unknown(other) => other.as_str(),
        });
        let input = BankInput {
            routing_number: info.routing_number.as_deref(),
            account_number: info.account_number.as_deref(),
            account_number_confirmation: None,
            confirm: false,
            account_type,
            name_on_account: info.name_on_account.as_deref(),
        };
        let account = check_bank(state, &input)?;
        return Ok(Change::Method(Method::Bank(account), fields));
    }
    if existing.is_none() {
        return Err(vec![FieldError { field: Field::Number, problem: Problem::Blank }]);
    }
    Ok(Change::Details(fields))
}

/// `PUT /v2/accounts/{account_code}/billing_info`.
async fn update(state: &AppState, call: &Call, request: Request) -> Response {
    let ctx = &call.ctx.wire;
    let code = &call.params[0];
    let account = match state.store.account(call.ctx.site.id, code).await {
        Ok(Some(a)) => a,
        Ok(None) => return account_not_found(code),
        Err(e) => return respond::internal(&e),
    };
    let body = match crate::accounts::read_body(request, state.config.body_limit).await {
        Ok(body) => body,
        Err(response) => return response,
    };
    let info = match rebill_xml::from_xml::<BillingInfo>(&body, ctx, Mode::Request) {
        Ok(info) => info,
        Err(e) => return respond::rejection(&reject_decode(&e), ctx),
    };
    if let Err(errors) = validate(&info, ctx, Operation::Update) {
        return respond::rejection(&Rejection::Invalid(errors), ctx);
    }
    match apply(state, call, &account, &info).await {
        Ok(stored) => respond::resource(StatusCode::OK, &view(code, &stored), ctx),
        Err(response) => response,
    }
}

/// Sets the account's billing info from a decoded and validated `<billing_info>` request (with a
/// token, or card or bank-account fields verified through the gateway, or names and address
/// only): the stored billing info, or the refusal to answer (422 field errors, `token_invalid`,
/// the declined verification's transaction error document). [`prepare`] then [`commit`].
pub(crate) async fn apply(
    state: &AppState,
    call: &Call,
    account: &Account,
    info: &BillingInfo,
) -> Result<Stored, Response> {
    let prepared = prepare(state, call, Some(account), info).await?;
    commit(state, call, account, prepared).await.map_err(|refusal| refusal.response(&call.ctx.wire))
}

/// A `<billing_info>` request checked by [`prepare`]: neither verified nor saved yet.
pub(crate) struct Prepared {
    kind: PaymentKind,
    fields: BillingFields,
    method: Option<Method>,
    currency: String,
}

/// Checks a decoded and validated `<billing_info>` request for `account` (`None`: an account
/// the same request is about to create) before anything is written: currency, unsupported
/// payment types, the token (used up here) and the card or bank-account fields. Refusals are
/// the 422 field errors and `token_invalid`.
pub(crate) async fn prepare(
    state: &AppState,
    call: &Call,
    account: Option<&Account>,
    info: &BillingInfo,
) -> Result<Prepared, Response> {
    let (kind, fields, method, currency) = read_change(state, call, account, info).await?;
    Ok(Prepared { kind, fields, method, currency })
}

/// Why [`commit`] stored no payment method.
pub(crate) enum Refusal {
    /// The gateway declined the verification (recorded as `transaction`); with `saved`, the
    /// billing info was stored anyway (`declined_saveable`).
    Declined { transaction: Box<Transaction>, saved: bool },
    /// Anything else, as its response.
    Failed(Response),
}

impl Refusal {
    /// The answer: the declined verification's 422 transaction error document, or the failure.
    pub(crate) fn response(self, ctx: &WireContext) -> Response {
        match self {
            Refusal::Declined { transaction, .. } => {
                let fields =
                    DeclineFields { verification_value: "billing_info.verification_value", base: "billing_info.base" };
                crate::billing::decline_response(ctx, &transaction, fields)
            }
            Refusal::Failed(response) => response,
        }
    }
}

/// Saves a [`Prepared`] billing info on `account`. A new payment method is verified first (the
/// verification is recorded as a `verify` transaction before the gateway is called) and then
/// stored with the gateway; the billing info keeps the gateway's reference for later charges
/// (renewals, retries, one-off charges). Names and address alone keep the stored reference.
pub(crate) async fn commit(
    state: &AppState,
    call: &Call,
    account: &Account,
    prepared: Prepared,
) -> Result<Stored, Refusal> {
    let Prepared { kind, fields, method, currency } = prepared;
    let internal = |e: rebill_store::StoreError| Refusal::Failed(respond::internal(&e));
    let Some(method) = &method else {
        return state
            .store
            .set_billing_info(call.ctx.site.id, account.id, kind, &fields, call.ctx.now)
            .await
            .map_err(internal);
    };
    let payment = method.payment();
    let verification = NewTransaction {
        idempotency_key: format!("verify:{}", new_uuid()),
        account_id: account.id,
        invoice_id: None,
        subscription_uuid: None,
        action: "verify".into(),
        amount: VERIFY_AMOUNT_IN_CENTS,
        tax: 0,
        currency: currency.clone(),
        kind,
        payment_method: if kind == PaymentKind::CreditCard { "credit_card" } else { "ach" }.into(),
        source: "billing_info".into(),
        origin: "api_verify_card".into(),
        recurring: false,
        test: state.gateway.is_test(),
        gateway_type: state.gateway.kind().to_owned(),
        description: None,
        account: crate::billing::snapshot(account),
        billing: fields.clone(),
    };
    let begun = state.store.begin_transaction(call.ctx.site.id, &verification, call.ctx.now).await.map_err(internal)?;
    let request = PaymentRequest {
        amount_in_cents: VERIFY_AMOUNT_IN_CENTS,
        currency: &currency,
        method: payment,
        address: AvsAddress { street: fields.address1.as_deref(), postal_code: fields.zip.as_deref() },
        recurring: false,
        idempotency_key: Some(&begun.uuid),
    };
    let outcome = state.gateway.verify(&request).await;
    let recorded = state
        .store
        .complete_transaction(begun.id, &crate::billing::result_of(&outcome, call.ctx.now), call.ctx.now)
        .await
        .map_err(internal)?;
    if let Outcome::Declined(decline) = &outcome {
        let saved = decline.saveable();
        if saved {
            save(state, call, account, kind, &fields, payment).await.map_err(Refusal::Failed)?;
        }
        return Err(Refusal::Declined { transaction: Box::new(recorded), saved });
    }
    save(state, call, account, kind, &fields, payment).await.map_err(Refusal::Failed)
}

/// Stores the payment method with the gateway and saves the billing info with its reference.
async fn save(
    state: &AppState,
    call: &Call,
    account: &Account,
    kind: PaymentKind,
    fields: &BillingFields,
    payment: PaymentMethod<'_>,
) -> Result<Stored, Response> {
    let reference = match state.gateway.store_payment_method(payment).await {
        Ok(reference) => Some(reference),
        Err(decline) => {
            tracing::warn!(code = decline.code, "the gateway did not store a verified payment method");
            None
        }
    };
    state
        .store
        .save_billing_info(call.ctx.site.id, account.id, kind, fields, reference.as_deref(), call.ctx.now)
        .await
        .map_err(|e| respond::internal(&e))
}

/// A payment method read from a request's `<billing_info>`, checked but neither verified nor
/// saved: the billing info's type and non-secret fields (names and address merged over the
/// stored billing info's) and the gateway's reference of the method, stored for the charge.
#[derive(Debug, Clone)]
pub(crate) struct RequestedMethod {
    pub kind: PaymentKind,
    pub fields: BillingFields,
    pub reference: String,
}

/// Reads the payment method of a request's `<billing_info>` (a token, used up here, or card or
/// bank fields) and stores it with the gateway, for a charge that verifies it (one-off
/// transactions). `None` when the billing info holds names and address only. Refusals are the
/// same as [`apply`]'s.
pub(crate) async fn requested_method(
    state: &AppState,
    call: &Call,
    account: &Account,
    info: &BillingInfo,
) -> Result<Option<RequestedMethod>, Response> {
    let (kind, fields, method, _) = read_change(state, call, Some(account), info).await?;
    let Some(method) = method else { return Ok(None) };
    match state.gateway.store_payment_method(method.payment()).await {
        Ok(reference) => Ok(Some(RequestedMethod { kind, fields, reference })),
        Err(decline) => {
            Err(respond::internal(&format!("the gateway refused to store a payment method: {}", decline.code)))
        }
    }
}

/// Saves billing info of a [`RequestedMethod`] once its charge was approved (or declined with
/// `declined_saveable`).
pub(crate) async fn save_requested(
    state: &AppState,
    call: &Call,
    account: &Account,
    method: &RequestedMethod,
) -> Result<Stored, rebill_store::StoreError> {
    state
        .store
        .save_billing_info(
            call.ctx.site.id,
            account.id,
            method.kind,
            &method.fields,
            Some(&method.reference),
            call.ctx.now,
        )
        .await
}

/// The checked change of a `<billing_info>` request: type, fields (payment fields set when a
/// new method is given), the new method, and the verification's currency.
async fn read_change(
    state: &AppState,
    call: &Call,
    account: Option<&Account>,
    info: &BillingInfo,
) -> Result<(PaymentKind, BillingFields, Option<Method>, String), Response> {
    let ctx = &call.ctx.wire;
    let currency = info.currency.as_deref().unwrap_or(VERIFY_CURRENCY).to_ascii_uppercase();
    if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_alphabetic()) {
        let violation = Violation {
            field: "billing_info.currency".into(),
            symbol: "invalid",
            message: "is not a 3-letter ISO 4217 currency code".into(),
        };
        return Err(respond::rejection(&Rejection::Invalid(errors_document(&[violation])), ctx));
    }
    if let Some(element) = [
        ("paypal_billing_agreement_id", info.paypal_billing_agreement_id.is_some()),
        ("amazon_billing_agreement_id", info.amazon_billing_agreement_id.is_some()),
        ("external_hpp_type", info.external_hpp_type.is_some()),
    ]
    .iter()
    .find_map(|(element, given)| given.then_some(*element))
    {
        let violation = Violation {
            field: format!("billing_info.{element}"),
            symbol: "invalid",
            message: "is not supported: billing info holds a card or a bank account".into(),
        };
        return Err(respond::rejection(&Rejection::Invalid(errors_document(&[violation])), ctx));
    }
    let existing = match account {
        Some(account) => state.store.billing_info(account.id).await.map_err(|e| respond::internal(&e))?,
        None => None,
    };
    let change = match &info.token_id {
        Some(token_id) => token_change(state, call, token_id, existing.as_ref()).await,
        None => direct_change(state, call, info, existing.as_ref()).map_err(|errors| field_errors(ctx, &errors)),
    };
    match change {
        Ok(Change::Details(fields)) => {
            let kind = existing.as_ref().map_or(PaymentKind::CreditCard, |e| e.kind);
            Ok((kind, fields, None, currency))
        }
        Ok(Change::Method(method, mut fields)) => {
            method.apply(&mut fields);
            Ok((method.kind(), fields, Some(method), currency))
        }
        Err(response) => Err(response),
    }
}

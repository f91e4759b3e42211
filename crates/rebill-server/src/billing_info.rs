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
use axum::response::Response;
use rebill_app::platform::model::billing_info::{BillingFields, BillingInfo as Stored, PaymentKind};
use rebill_billing::card::Brand;
use rebill_models::api::{self, EndpointId};
use rebill_models::validate::Operation;
use rebill_models::{BankAccountType, BillingInfo, BillingInfoType};

use crate::request::{Routed, account_not_found, billing_request, href, validated};
use crate::respond;
use crate::respond::time;
use crate::state::AppState;
use crate::views::refusal_response;
use rebill_app::customers::accounts::AccountError;
use rebill_app::customers::payment_methods::{self, BillingInfoError, apply};

fn billing_info_not_found(code: &str) -> Response {
    respond::missing(&rebill_app::platform::error::Missing::billing_info(code))
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
        account: Some(href(EndpointId::GetAccount, &[code])),
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
pub(crate) async fn get(state: &AppState, call: &Routed<'_, api::GetBillingInfo>) -> Response {
    let code = &call.params[0];
    match payment_methods::billing_info(state, &call.context(), code).await {
        Ok(stored) => call.answer(&view(code, &stored)),
        Err(e) => billing_info_error(code, &e),
    }
}

/// The answer to a billing info that could not be read or removed.
fn billing_info_error(code: &str, error: &BillingInfoError) -> Response {
    match error {
        BillingInfoError::AccountNotFound(code) => account_not_found(code),
        BillingInfoError::NotFound => billing_info_not_found(code),
        BillingInfoError::Store(e) => respond::internal(e),
    }
}

/// `DELETE /v2/accounts/{account_code}/billing_info`: 204.
pub(crate) async fn delete(state: &AppState, call: &Routed<'_, api::DeleteBillingInfo>) -> Response {
    let code = &call.params[0];
    match payment_methods::remove(state, &call.context(), code).await {
        Ok(()) => call.answer_empty(),
        Err(e) => billing_info_error(code, &e),
    }
}

/// `PUT /v2/accounts/{account_code}/billing_info`.
pub(crate) async fn update(state: &AppState, call: &Routed<'_, api::UpdateBillingInfo>, request: Request) -> Response {
    let ctx = &call.ctx.wire;
    let code = &call.params[0];
    let account = match rebill_app::customers::accounts::find(state, &call.context(), code).await {
        Ok(a) => a,
        Err(AccountError::NotFound(code)) => return account_not_found(&code),
        Err(e) => return respond::internal(&e),
    };
    let info = match call.decode(state, request).await {
        Ok(info) => info,
        Err(response) => return response,
    };
    if let Err(response) = validated(call, &info, Operation::Update) {
        return response;
    }
    match apply(state, &call.context(), &account, &billing_request(&info)).await {
        Ok(stored) => call.answer(&view(code, &stored)),
        Err(refusal) => refusal_response(ctx, &refusal),
    }
}

/// `POST /v2/accounts/{account_code}/billing_info/verify_cvv` (2.10): checks the security code
/// of the stored card over [`rebill_app::customers::cvv`] and answers the billing info (decisions in
/// docs/shipping-addresses.md). The body is `<billing_info>` with `verification_value` alone.
/// No billing info is a 404, a bank account 400 `billing_info_type_invalid`, a malformed value
/// a 422 field error, the fourth check of a card within 24 hours 400 `cvv_verify_locked`, and a
/// mismatch the 422 transaction error document.
pub(crate) async fn verify_cvv(state: &AppState, call: &Routed<'_, api::VerifyCvv>, request: Request) -> Response {
    use axum::http::StatusCode;
    use rebill_app::customers::cvv::{self, CvvError};
    use rebill_models::validate::Validate;

    let ctx = &call.ctx.wire;
    let code = &call.params[0];
    let info = match call.decode(state, request).await {
        Ok(info) => info,
        Err(response) => return response,
    };
    if let Err(response) = validated(call, &info, Operation::Update) {
        return response;
    }
    if let Some(element) = info.given().into_iter().find(|e| *e != "verification_value") {
        let field = format!("billing_info.{element}");
        return respond::field_error(ctx, &field, "not_supported", "is not accepted when verifying a security code");
    }
    let Some(value) = info.verification_value.as_deref() else {
        return respond::field_error(ctx, "billing_info.verification_value", "blank", "can't be blank");
    };
    match cvv::verify_cvv(state, &call.context(), code, value).await {
        Ok(stored) => call.answer(&view(code, &stored)),
        Err(CvvError::AccountNotFound(code)) => account_not_found(&code),
        Err(CvvError::NoBillingInfo) => billing_info_not_found(code),
        Err(CvvError::NotACard) => respond::error(
            StatusCode::BAD_REQUEST,
            "billing_info_type_invalid",
            "Only a credit card's security code can be verified.",
        ),
        Err(e @ CvvError::Malformed) => {
            respond::field_error(ctx, "billing_info.verification_value", "invalid", &e.to_string())
        }
        Err(e @ CvvError::Locked) => respond::error(StatusCode::BAD_REQUEST, "cvv_verify_locked", &e.to_string()),
        Err(e @ CvvError::Unsupported(_)) => {
            respond::error(StatusCode::UNPROCESSABLE_ENTITY, "verify_cvv_not_supported", &format!("{e}."))
        }
        Err(CvvError::Mismatch(transaction)) => crate::views::decline_response(
            ctx,
            &transaction,
            crate::views::DeclineFields {
                verification_value: "billing_info.billing_info.credit_card_verification_value",
                base: "billing_info.base",
            },
        ),
        Err(CvvError::Store(e)) => respond::internal(&e),
    }
}

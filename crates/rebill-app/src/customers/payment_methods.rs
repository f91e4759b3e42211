//! Payment methods of accounts: reading a requested `<billing_info>` (a token, used up here, or
//! card or bank-account fields, checked by `rebill_billing::card`), verifying a new payment
//! method through the site's gateway (a `verify` transaction recorded before the gateway is
//! called), storing it with the gateway and saving the billing info with the gateway's
//! reference. Used by the billing info, account, subscription and transaction endpoints (see
//! `billing_info.rs` for the choices where the spec is silent).

use rebill_billing::card::{
    BankAccount, BankInput, Card, CardInput, Field, FieldError, Problem, is_valid_routing_number,
    validate_bank_account, validate_card,
};
use std::sync::Arc;

use rebill_billing::gateway::{AvsAddress, Gateway, Outcome, PaymentMethod, PaymentRequest};
use rebill_billing::vault::Secret;
use rebill_store::StoreError;
use rebill_store::accounts::Account;
use rebill_store::billing_info::{BillingFields, BillingInfo as Stored, PaymentKind};
use rebill_store::events::NewEvent;
use rebill_store::invoices::{NewTransaction, Transaction, new_uuid};
use rebill_store::tokens::TokenUse;
use serde_json::json;

use crate::Services;
use crate::platform::context::Context;
use crate::platform::events;
use crate::platform::transaction_records;

/// Amount of the verification authorization (one unit of the currency).
const VERIFY_AMOUNT_IN_CENTS: i64 = 100;
/// Currency of the verification when the request names none.
pub(crate) const VERIFY_CURRENCY: &str = "USD";

/// A requested `<billing_info>` as plain values: the names and address it sets, and the payment
/// method it names (a token, card fields or bank-account fields).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BillingRequest {
    /// Names, address, VAT number, IP address and geo code as sent.
    pub details: BillingFields,
    pub token_id: Option<String>,
    pub number: Option<String>,
    pub month: Option<i64>,
    pub year: Option<i64>,
    pub verification_value: Option<String>,
    pub routing_number: Option<String>,
    pub account_number: Option<String>,
    /// `checking`, `savings` or what was sent.
    pub account_type: Option<String>,
    pub name_on_account: Option<String>,
    /// The verification's currency (USD when `None`).
    pub currency: Option<String>,
    /// The first payment type rebill does not hold that the request names (its element).
    pub unsupported: Option<&'static str>,
}

/// Why a requested payment method was refused before (or instead of) a verification.
#[derive(Debug, thiserror::Error)]
pub enum PaymentMethodError {
    #[error("the currency is not a 3-letter ISO 4217 currency code")]
    InvalidCurrency,
    /// The request names a payment type billing info cannot hold (the element).
    #[error("{0} is not supported: billing info holds a card or a bank account")]
    Unsupported(&'static str),
    /// Card or bank-account fields that are missing or wrong.
    #[error("invalid payment fields")]
    Fields(Vec<FieldError>),
    /// The token is unknown, expired, used or unreadable.
    #[error("the token is invalid, has expired or has already been used")]
    TokenInvalid,
    /// The gateway did not store a payment method it is to charge.
    #[error("the gateway refused to store a payment method: {0}")]
    NotStored(String),
    #[error(transparent)]
    Store(#[from] StoreError),
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

/// Checks a bank account with the shared code, and that the gateway knows its bank (a gateway
/// that takes no bank accounts refuses them by name when they are stored).
fn check_bank(gateway: &dyn Gateway, input: &BankInput<'_>) -> Result<BankAccount, Vec<FieldError>> {
    let account = validate_bank_account(input)?;
    if gateway.accepts_bank_accounts()
        && is_valid_routing_number(&account.routing_number)
        && gateway.bank_name(&account.routing_number).is_none()
    {
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
    state: &Services,
    gateway: &dyn Gateway,
    ctx: &Context,
    token_id: &str,
    existing: Option<&Stored>,
) -> Result<Change, PaymentMethodError> {
    let token = match state.store.consume_token(ctx.site.id, token_id, state.clock.now()).await? {
        TokenUse::Consumed(token) => token,
        TokenUse::Expired | TokenUse::Unknown => return Err(PaymentMethodError::TokenInvalid),
    };
    let secret = match state.vault.open(&token.secret, token_id.as_bytes()) {
        Ok(secret) => secret,
        // A token sealed under another vault key (e.g. before a key change) cannot be used.
        Err(_) => return Err(PaymentMethodError::TokenInvalid),
    };
    let fields = merge(existing.map(|e| &e.fields), token.fields.clone());
    let f = &token.fields;
    let method = match (token.kind, secret) {
        (PaymentKind::CreditCard, Secret::Card { number, cvv }) => {
            check_card(Some(&number), f.month, f.year, cvv.as_deref(), &fields, ctx.now).map(Method::Card)
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
            check_bank(gateway, &input).map(Method::Bank)
        }
        _ => return Err(PaymentMethodError::TokenInvalid),
    };
    method.map(|m| Change::Method(m, fields)).map_err(PaymentMethodError::Fields)
}

/// The change of a request with card or bank fields, or names and address only.
fn direct_change(
    gateway: &dyn Gateway,
    ctx: &Context,
    info: &BillingRequest,
    existing: Option<&Stored>,
) -> Result<Change, Vec<FieldError>> {
    let fields = merge(existing.map(|e| &e.fields), info.details.clone());
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
            ctx.now,
        )?;
        return Ok(Change::Method(Method::Card(card), fields));
    }
    if bank_given {
        let input = BankInput {
            routing_number: info.routing_number.as_deref(),
            account_number: info.account_number.as_deref(),
            account_number_confirmation: None,
            confirm: false,
            account_type: info.account_type.as_deref(),
            name_on_account: info.name_on_account.as_deref(),
        };
        let account = check_bank(gateway, &input)?;
        return Ok(Change::Method(Method::Bank(account), fields));
    }
    if existing.is_none() {
        return Err(vec![FieldError { field: Field::Number, problem: Problem::Blank }]);
    }
    Ok(Change::Details(fields))
}

/// Sets the account's billing info from a requested `<billing_info>` (with a token, or card or
/// bank-account fields verified through the gateway, or names and address only): the stored
/// billing info, or the refusal (field errors, an invalid token, the declined verification).
/// [`prepare`] then [`commit`].
pub async fn apply(
    state: &Services,
    ctx: &Context,
    account: &Account,
    info: &BillingRequest,
) -> Result<Stored, Refusal> {
    let prepared = prepare(state, ctx, Some(account), info).await.map_err(Refusal::Failed)?;
    commit(state, ctx, account, prepared).await
}

/// A `<billing_info>` request checked by [`prepare`]: neither verified nor saved yet.
pub struct Prepared {
    kind: PaymentKind,
    fields: BillingFields,
    method: Option<Method>,
    currency: String,
    /// The site's gateway, which verifies and stores the method.
    gateway: Arc<dyn Gateway>,
}

/// Checks a requested `<billing_info>` for `account` (`None`: an account the same request is
/// about to create) before anything is written: currency, unsupported payment types, the token
/// (used up here) and the card or bank-account fields.
pub async fn prepare(
    state: &Services,
    ctx: &Context,
    account: Option<&Account>,
    info: &BillingRequest,
) -> Result<Prepared, PaymentMethodError> {
    let gateway = state.gateway(ctx.site.id).await?;
    let (kind, fields, method, currency) = read_change(state, gateway.as_ref(), ctx, account, info).await?;
    Ok(Prepared { kind, fields, method, currency, gateway })
}

/// Why [`commit`] stored no payment method.
#[derive(Debug)]
pub enum Refusal {
    /// The gateway declined the verification (recorded as `transaction`); with `saved`, the
    /// billing info was stored anyway (`declined_saveable`).
    Declined { transaction: Box<Transaction>, saved: bool },
    /// Refused before a verification, or failed.
    Failed(PaymentMethodError),
}

/// Saves a [`Prepared`] billing info on `account`. A new payment method is verified first (the
/// verification is recorded as a `verify` transaction before the gateway is called) and then
/// stored with the gateway; the billing info keeps the gateway's reference for later charges
/// (renewals, retries, one-off charges). Names and address alone keep the stored reference.
pub async fn commit(state: &Services, ctx: &Context, account: &Account, prepared: Prepared) -> Result<Stored, Refusal> {
    let Prepared { kind, fields, method, currency, gateway } = prepared;
    let failed = |e: StoreError| Refusal::Failed(PaymentMethodError::Store(e));
    let Some(method) = &method else {
        let event = updated(state, ctx, account, kind, &fields);
        return state
            .store
            .set_billing_info(ctx.site.id, account.id, kind, &fields, ctx.now, &[event])
            .await
            .map_err(failed);
    };
    let payment = method.payment();
    let replacing = state.store.billing_info(account.id).await.map_err(failed)?.and_then(|b| b.gateway_reference);
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
        test: gateway.is_test(),
        gateway_type: gateway.kind().to_owned(),
        description: None,
        original_transaction_id: None,
        payment_reference: None,
        account: transaction_records::snapshot(account),
        billing: fields.clone(),
    };
    let (begun, _) = state.store.begin_transaction(ctx.site.id, &verification, ctx.now).await.map_err(failed)?;
    let request = PaymentRequest {
        amount_in_cents: VERIFY_AMOUNT_IN_CENTS,
        currency: &currency,
        method: payment,
        address: AvsAddress { street: fields.address1.as_deref(), postal_code: fields.zip.as_deref() },
        recurring: false,
        idempotency_key: Some(&begun.uuid),
        resumed: false,
        may_resend: false,
        invoice: None,
        replacing: replacing.as_deref(),
    };
    // A verification moves no money: an answer that does not come is a decline.
    let outcome = state.bounded(gateway.verify(&request)).await.or_declined();
    let result = transaction_records::result_of(&outcome, ctx.now);
    let event = transaction_records::transaction_event(state, &begun, &result, ctx.now);
    let recorded = state.store.complete_transaction(begun.id, &result, ctx.now, &[event]).await.map_err(failed)?;
    let save = Save { gateway: gateway.as_ref(), kind, fields: &fields, payment, replacing: replacing.as_deref() };
    match &outcome {
        Outcome::Declined(decline) => {
            let saved = decline.saveable();
            if saved {
                save.run(state, ctx, account, None).await.map_err(failed)?;
            }
            Err(Refusal::Declined { transaction: Box::new(recorded), saved })
        }
        // A gateway that stored the method while it verified it answers its reference.
        Outcome::Approved(approval) => save.run(state, ctx, account, approval.stored.clone()).await.map_err(failed),
        // `or_declined` above answers every unknown outcome as a decline.
        Outcome::Pending(_) => Err(Refusal::Declined { transaction: Box::new(recorded), saved: false }),
    }
}

/// A verified payment method to store with the gateway and save as the billing info.
struct Save<'a> {
    gateway: &'a dyn Gateway,
    kind: PaymentKind,
    fields: &'a BillingFields,
    payment: PaymentMethod<'a>,
    replacing: Option<&'a str>,
}

impl Save<'_> {
    /// Stores the payment method with the gateway (unless the verification stored it already:
    /// `stored`) and saves the billing info with its reference.
    async fn run(
        &self,
        state: &Services,
        ctx: &Context,
        account: &Account,
        stored: Option<String>,
    ) -> Result<Stored, StoreError> {
        let reference = match stored {
            Some(reference) => Some(reference),
            None => {
                let call = self.gateway.store_payment_method(self.payment, self.replacing);
                match tokio::time::timeout(state.gateway_timeout, call)
                    .await
                    .unwrap_or_else(|_| Err(Box::new(crate::timed_out())))
                {
                    Ok(reference) => Some(reference),
                    Err(decline) => {
                        tracing::warn!(code = decline.code, "the gateway did not store a verified payment method");
                        None
                    }
                }
            }
        };
        let event = updated(state, ctx, account, self.kind, self.fields);
        state
            .store
            .save_billing_info(ctx.site.id, account.id, self.kind, self.fields, reference.as_deref(), ctx.now, &[event])
            .await
    }
}

/// The `billing_info.updated` event of the account: the payment method's type and what
/// identifies it (never a number).
fn updated(state: &Services, ctx: &Context, account: &Account, kind: PaymentKind, fields: &BillingFields) -> NewEvent {
    let payload = json!({
        "account_code": account.account_code,
        "type": kind.as_str(),
        "card_type": fields.card_type,
        "last_four": fields.last_four,
    });
    events::new(state, events::BILLING_INFO_UPDATED, ctx.now, payload)
}

/// A payment method read from a requested `<billing_info>`, checked but neither verified nor
/// saved: the billing info's type and non-secret fields (names and address merged over the
/// stored billing info's) and the gateway's reference of the method, stored for the charge.
#[derive(Debug, Clone)]
pub struct RequestedMethod {
    pub kind: PaymentKind,
    pub fields: BillingFields,
    pub reference: String,
}

/// Reads the payment method of a requested `<billing_info>` (a token, used up here, or card or
/// bank fields) and stores it with the gateway, for a charge that verifies it (one-off
/// transactions). `None` when the billing info holds names and address only. Refusals are the
/// same as [`prepare`]'s.
pub async fn requested_method(
    state: &Services,
    ctx: &Context,
    account: &Account,
    info: &BillingRequest,
) -> Result<Option<RequestedMethod>, PaymentMethodError> {
    let gateway = state.gateway(ctx.site.id).await?;
    let (kind, fields, method, _) = read_change(state, gateway.as_ref(), ctx, Some(account), info).await?;
    let Some(method) = method else { return Ok(None) };
    // Not `replacing` the stored method: it stays in force until the charge is approved.
    match gateway.store_payment_method(method.payment(), None).await {
        Ok(reference) => Ok(Some(RequestedMethod { kind, fields, reference })),
        Err(decline) => Err(PaymentMethodError::NotStored(decline.code.to_string())),
    }
}

/// Saves billing info of a [`RequestedMethod`] once its charge was approved (or declined with
/// `declined_saveable`).
pub async fn save_requested(
    state: &Services,
    ctx: &Context,
    account: &Account,
    method: &RequestedMethod,
) -> Result<Stored, StoreError> {
    let event = updated(state, ctx, account, method.kind, &method.fields);
    state
        .store
        .save_billing_info(
            ctx.site.id,
            account.id,
            method.kind,
            &method.fields,
            Some(&method.reference),
            ctx.now,
            &[event],
        )
        .await
}

/// Whether `currency` looks like an ISO 4217 code (three ASCII letters).
pub fn valid_currency(currency: &str) -> bool {
    currency.len() == 3 && currency.bytes().all(|b| b.is_ascii_alphabetic())
}

/// The checked change of a requested `<billing_info>`: type, fields (payment fields set when a
/// new method is given), the new method, and the verification's currency.
async fn read_change(
    state: &Services,
    gateway: &dyn Gateway,
    ctx: &Context,
    account: Option<&Account>,
    info: &BillingRequest,
) -> Result<(PaymentKind, BillingFields, Option<Method>, String), PaymentMethodError> {
    let currency = info.currency.as_deref().unwrap_or(VERIFY_CURRENCY).to_ascii_uppercase();
    if !valid_currency(&currency) {
        return Err(PaymentMethodError::InvalidCurrency);
    }
    if let Some(element) = info.unsupported {
        return Err(PaymentMethodError::Unsupported(element));
    }
    let existing = match account {
        Some(account) => state.store.billing_info(account.id).await?,
        None => None,
    };
    let change = match &info.token_id {
        Some(token_id) => token_change(state, gateway, ctx, token_id, existing.as_ref()).await?,
        None => direct_change(gateway, ctx, info, existing.as_ref()).map_err(PaymentMethodError::Fields)?,
    };
    Ok(match change {
        Change::Details(fields) => {
            let kind = existing.as_ref().map_or(PaymentKind::CreditCard, |e| e.kind);
            (kind, fields, None, currency)
        }
        Change::Method(method, mut fields) => {
            method.apply(&mut fields);
            (method.kind(), fields, Some(method), currency)
        }
    })
}

/// Why an account's billing info could not be read or removed.
#[derive(Debug, thiserror::Error)]
pub enum BillingInfoError {
    #[error("no account with code {0}")]
    AccountNotFound(String),
    /// The account has no billing info.
    #[error("the account has no billing info")]
    NotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The stored billing info of the account `code`.
pub async fn billing_info(services: &Services, ctx: &Context, code: &str) -> Result<Stored, BillingInfoError> {
    let account = services
        .store
        .account(ctx.site.id, code)
        .await?
        .ok_or_else(|| BillingInfoError::AccountNotFound(code.to_owned()))?;
    services.store.billing_info(account.id).await?.ok_or(BillingInfoError::NotFound)
}

/// Removes the billing info of the account `code`.
pub async fn remove(services: &Services, ctx: &Context, code: &str) -> Result<(), BillingInfoError> {
    let account = services
        .store
        .account(ctx.site.id, code)
        .await?
        .ok_or_else(|| BillingInfoError::AccountNotFound(code.to_owned()))?;
    let event = events::account(services, events::BILLING_INFO_REMOVED, ctx.now, code);
    if services.store.delete_billing_info(account.id, &[event]).await? {
        Ok(())
    } else {
        Err(BillingInfoError::NotFound)
    }
}

impl From<BillingInfoError> for crate::platform::error::AppError {
    fn from(e: BillingInfoError) -> Self {
        match e {
            BillingInfoError::AccountNotFound(code) => Self::NotFound(crate::platform::error::Missing::account(&code)),
            // The account exists; its billing info does not (the API names it by the account).
            BillingInfoError::NotFound => Self::NotFound(crate::platform::error::Missing {
                resource: "BillingInfo",
                key: "account_code",
                value: String::new(),
            }),
            BillingInfoError::Store(e) => e.into(),
        }
    }
}

impl From<PaymentMethodError> for crate::platform::error::AppError {
    fn from(e: PaymentMethodError) -> Self {
        match e {
            PaymentMethodError::InvalidCurrency => Self::refused("currency", "invalid", e.to_string()),
            PaymentMethodError::Unsupported(element) => Self::refused(element, "not_supported", e.to_string()),
            PaymentMethodError::Fields(errors) => Self::Refused(
                errors
                    .iter()
                    .map(|f| {
                        crate::platform::error::FieldRefusal::new(
                            f.field.billing_info_element(),
                            f.problem.symbol(),
                            f.problem.message(),
                        )
                    })
                    .collect(),
            ),
            PaymentMethodError::TokenInvalid => Self::refused("token_id", "invalid", e.to_string()),
            PaymentMethodError::NotStored(_) => Self::Declined(None),
            PaymentMethodError::Store(e) => e.into(),
        }
    }
}

impl From<Refusal> for crate::platform::error::AppError {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Declined { transaction, .. } => Self::Declined(Some(transaction)),
            Refusal::Failed(e) => e.into(),
        }
    }
}

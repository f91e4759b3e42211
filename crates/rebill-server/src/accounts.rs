//! Account endpoints: list (with the `state` filter), create, get, update, close, reopen and the
//! account's balance.
//!
//! Choices where the spec is silent:
//! - Closing a closed account and reopening an active one succeed and change nothing (204 and
//!   200 with the account as it is), so that retries are safe.
//! - `account_code` cannot change: a PUT may repeat the account's code, a different one is a 422.
//! - An empty request body is not an `<account>` document: 400 `invalid_xml`.
//! - A nested `billing_info` is all or nothing with its account. It is checked (fields, token)
//!   before anything is written, so such a refusal stores nothing. On create, a declined
//!   verification removes the account again (with the verification, which the 422 document
//!   reports): a retry of the same create then works. Only `declined_saveable` keeps the new
//!   account, since the billing info it keeps needs it. On update, the billing info is verified
//!   and saved first and the account's own fields change only after it was accepted.
//! - Nested `shipping_addresses` are all or nothing with a new account (checked before anything
//!   is written, removed with the account when its billing info is refused; see
//!   docs/shipping-addresses.md). On update they are a 400 `invalid_xml`, and a bare
//!   `<shipping_address>` (a purchase's element) is a 422 `not_supported`.
//! - A closed account can still be read and updated.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use rebill_app::billing::queries;
use rebill_app::platform::model::accounts::{
    Account as Stored, AccountActivity, AccountFields, AccountFilter, AccountState as StoredState, AddressFields,
};
use rebill_models::ApiEndpoint;
use rebill_models::api::{self, EndpointId};
use rebill_models::validate::Operation;
use rebill_models::{Account, AccountBalance, AccountState, Address};
use rebill_xml::{Money, WireContext};

use crate::lists::{ListQuery, invalid_choice};
use crate::request::{Routed, billing_request, href, validated};
use crate::respond;
use crate::respond::{field_error, time, with_location};
use crate::state::AppState;
use crate::views::{refusal_response, shipping_fields};
use rebill_app::customers::accounts::{self, AccountError};

/// Values of the list's `state` filter.
const STATE_FILTER: [&str; 2] = ["active", "closed"];

/// The account as the API shows it.
fn view(account: &Stored, activity: AccountActivity) -> Account {
    let code = account.account_code.as_str();
    let f = &account.fields;
    let a = &f.address;
    Account {
        adjustments: Some(href(EndpointId::ListAccountAdjustments, &[code])),
        account_balance: Some(href(EndpointId::GetAccountBalance, &[code])),
        billing_info_href: Some(href(EndpointId::GetBillingInfo, &[code])),
        invoices: Some(href(EndpointId::ListAccountInvoices, &[code])),
        redemption: Some(href(EndpointId::GetAccountRedemption, &[code])),
        redemptions: Some(href(EndpointId::ListAccountRedemptions, &[code])),
        subscriptions: Some(href(EndpointId::ListAccountSubscriptions, &[code])),
        transactions: Some(href(EndpointId::ListAccountTransactions, &[code])),
        shipping_addresses_href: Some(href(EndpointId::ListShippingAddresses, &[code])),
        account_acquisition: None,
        credit_payments: Some(href(EndpointId::ListAccountCreditPayments, &[code])),
        account_code: Some(account.account_code.clone()),
        state: Some(match account.state {
            StoredState::Active => AccountState::Active,
            StoredState::Closed => AccountState::Closed,
        }),
        username: f.username.clone(),
        email: f.email.clone(),
        cc_emails: f.cc_emails.clone(),
        first_name: f.first_name.clone(),
        last_name: f.last_name.clone(),
        company_name: f.company_name.clone(),
        vat_number: f.vat_number.clone(),
        tax_exempt: Some(f.tax_exempt.unwrap_or(false)),
        entity_use_code: f.entity_use_code.clone(),
        address: Some(Box::new(Address {
            address1: a.address1.clone(),
            address2: a.address2.clone(),
            city: a.city.clone(),
            state: a.state.clone(),
            zip: a.zip.clone(),
            country: a.country.clone(),
            phone: a.phone.clone(),
        })),
        accept_language: f.accept_language.clone(),
        preferred_locale: f.preferred_locale.clone(),
        hosted_login_token: Some(account.hosted_login_token.clone()),
        vat_location_valid: None,
        created_at: time(account.created_at),
        updated_at: time(account.updated_at),
        closed_at: account.closed_at.and_then(time),
        has_live_subscription: Some(activity.has_live_subscription),
        has_active_subscription: Some(activity.has_active_subscription),
        has_future_subscription: Some(activity.has_future_subscription),
        has_canceled_subscription: Some(activity.has_canceled_subscription),
        has_paused_subscription: Some(activity.has_paused_subscription),
        has_past_due_invoice: Some(activity.has_past_due_invoice),
        billing_info: None,
        shipping_addresses: None,
        shipping_address: None,
        // Reopening an open account changes nothing, so only a closed one offers the action.
        reopen_action: (account.state == StoredState::Closed).then(|| href(EndpointId::ReopenAccount, &[code])),
    }
}

/// The properties a request sets (`has_paused_subscription` is derived, so it is ignored).
fn fields(account: &Account) -> AccountFields {
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

/// The endpoint's answer with the account document, read again with its activity (after a
/// write: as committed).
async fn respond_account<E: ApiEndpoint<Response = Account>>(
    state: &AppState,
    call: &Routed<'_, E>,
    account: &Stored,
) -> Response {
    match accounts::find_with_activity(state, &call.context(), &account.account_code).await {
        Ok(found) => call.answer(&view(&found.account, found.activity)),
        Err(e) => account_error(&call.ctx.wire, e),
    }
}

/// Reads, decodes and validates an `<account>` request body.
async fn account_request<E: ApiEndpoint<Request = Account>>(
    state: &AppState,
    call: &Routed<'_, E>,
    request: Request,
    op: Operation,
) -> Result<Account, Response> {
    let account = call.decode(state, request).await?;
    // Addresses nest only in a new account (rebill answers as the reference service does).
    if op == Operation::Update && (account.shipping_addresses.is_some() || account.shipping_address.is_some()) {
        return Err(respond::error(
            StatusCode::BAD_REQUEST,
            "invalid_xml",
            "You can only nest shipping_addresses in your XML when creating a new record, not when updating.",
        ));
    }
    // `<shipping_address>` directly in an account belongs to purchases.
    if account.shipping_address.is_some() {
        return Err(field_error(
            &call.ctx.wire,
            "account.shipping_address",
            "not_supported",
            "is accepted in a purchase only; nest shipping_addresses in a new account",
        ));
    }
    validated(call, &account, op)?;
    Ok(account)
}

/// `GET /v2/accounts` (and HEAD: the count).
pub(crate) async fn list(state: &AppState, call: &Routed<'_, api::ListAccounts>, query: Option<&str>) -> Response {
    let query = match ListQuery::parse(query, call.endpoint.filters) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    let filter = match query.filter("state") {
        None => AccountFilter::default(),
        Some(value) => match StoredState::parse(value) {
            Some(s) => AccountFilter { state: Some(s) },
            None => return invalid_choice("state", &STATE_FILTER, value).response(),
        },
    };
    let page = match queries::accounts(state, &call.context(), &filter, &query.page()).await {
        Ok(page) => page,
        Err(e) => return respond::internal(&e),
    };
    // HEAD only counts.
    let items = if call.head { Vec::new() } else { page.items.iter().map(|a| view(&a.account, a.activity)).collect() };
    let path = call.endpoint.render(&[]);
    call.answer_page(&path, &query, &items, page.next, page.total)
}

/// The answer to a refused account operation.
fn account_error(ctx: &WireContext, error: AccountError) -> Response {
    match error {
        // A decline has its document, with the declined verification.
        AccountError::BillingInfo(refusal) => refusal_response(ctx, &refusal),
        other => respond::app_error(ctx, "account", other.into()),
    }
}

/// `POST /v2/accounts`: 201 with `Location`.
pub(crate) async fn create(state: &AppState, call: &Routed<'_, api::CreateAccount>, request: Request) -> Response {
    let ctx = &call.ctx.wire;
    let account = match account_request(state, call, request, Operation::Create).await {
        Ok(a) => a,
        Err(response) => return response,
    };
    let code = account.account_code.clone().unwrap_or_default();
    if code.trim().is_empty() {
        return field_error(ctx, "account.account_code", "blank", "can't be blank");
    }
    let billing_info = account.billing_info.as_deref().map(billing_request);
    let shipping: Vec<_> = account.shipping_addresses.iter().flatten().map(shipping_fields).collect();
    let created = match accounts::create_with_shipping(
        state,
        &call.context(),
        &code,
        &fields(&account),
        billing_info.as_ref(),
        &shipping,
    )
    .await
    {
        Ok(created) => created,
        Err(e) => return account_error(ctx, e),
    };
    let response = respond_account(state, call, &created).await;
    if !response.status().is_success() {
        return response;
    }
    with_location(response, ctx, &EndpointId::GetAccount.endpoint().render(&[&code]))
}

/// `GET /v2/accounts/{account_code}`.
pub(crate) async fn get(state: &AppState, call: &Routed<'_, api::GetAccount>) -> Response {
    match accounts::find_with_activity(state, &call.context(), &call.params[0]).await {
        Ok(found) => call.answer(&view(&found.account, found.activity)),
        Err(e) => account_error(&call.ctx.wire, e),
    }
}

/// `PUT /v2/accounts/{account_code}`: only the elements sent change.
pub(crate) async fn update(state: &AppState, call: &Routed<'_, api::UpdateAccount>, request: Request) -> Response {
    let ctx = &call.ctx.wire;
    let code = &call.params[0];
    let account = match account_request(state, call, request, Operation::Update).await {
        Ok(a) => a,
        Err(response) => return response,
    };
    if account.account_code.as_ref().is_some_and(|c| c != code) {
        return field_error(ctx, "account.account_code", "invalid", "can't be changed");
    }
    let billing_info = account.billing_info.as_deref().map(billing_request);
    match accounts::update(state, &call.context(), code, &fields(&account), billing_info.as_ref()).await {
        Ok(a) => respond_account(state, call, &a).await,
        Err(e) => account_error(ctx, e),
    }
}

/// `GET /v2/accounts/{account_code}/balance`: in each of the site's currencies, what the
/// account's open charge invoices still owe less the credit its credit and legacy invoices still
/// hold (negative when the credit is larger), and whether an invoice is past due. A closed
/// account has a balance too.
pub(crate) async fn balance(state: &AppState, call: &Routed<'_, api::GetAccountBalance>) -> Response {
    let (account, balance) = match accounts::balance(state, &call.context(), &call.params[0]).await {
        Ok(found) => found,
        Err(e) => return account_error(&call.ctx.wire, e),
    };
    let view = AccountBalance {
        account_code: Some(account.account_code.clone()),
        account: Some(href(EndpointId::GetAccount, &[&account.account_code])),
        past_due: Some(balance.past_due),
        balance_in_cents: Some(Money(balance.balance_in_cents)),
    };
    call.answer(&view)
}

/// `DELETE /v2/accounts/{account_code}`: 204.
pub(crate) async fn close(state: &AppState, call: &Routed<'_, api::CloseAccount>) -> Response {
    match accounts::close(state, &call.context(), &call.params[0]).await {
        Ok(_) => call.answer_empty(),
        Err(e) => account_error(&call.ctx.wire, e),
    }
}

/// `PUT /v2/accounts/{account_code}/reopen`.
pub(crate) async fn reopen(state: &AppState, call: &Routed<'_, api::ReopenAccount>) -> Response {
    match accounts::reopen(state, &call.context(), &call.params[0]).await {
        Ok(a) => respond_account(state, call, &a).await,
        Err(e) => account_error(&call.ctx.wire, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rebill_xml::Href;

    #[test]
    fn a_stored_account_is_shown_with_its_links() {
        let stored = Stored {
            id: 1,
            site_id: 1,
            account_code: "a b".into(),
            state: StoredState::Closed,
            fields: AccountFields::default(),
            hosted_login_token: "t".into(),
            created_at: 0,
            updated_at: 5,
            closed_at: Some(5),
        };
        let v = view(&stored, AccountActivity::default());
        assert_eq!(v.account_balance.as_ref().map(Href::as_str), Some("/v2/accounts/a%20b/balance"));
        assert_eq!(v.redemption.as_ref().map(Href::as_str), Some("/v2/accounts/a%20b/redemption"));
        assert_eq!(v.billing_info_href.as_ref().map(Href::as_str), Some("/v2/accounts/a%20b/billing_info"));
        assert_eq!(v.state, Some(AccountState::Closed));
        assert_eq!(v.tax_exempt, Some(false));
        assert_eq!(v.closed_at, time(5));
        assert_eq!(fields(&v), AccountFields { tax_exempt: Some(false), ..AccountFields::default() });
    }
}

//! Gift card endpoints over [`rebill_app::selling::gift_cards`] (decisions: docs/gift-cards.md).
//!
//! | Endpoint | Behaviour |
//! |---|---|
//! | `POST /v2/gift_cards` | buys a card for the gifter account: 201, `Location: …/v2/gift_cards/{id}`; a decline is the 422 transaction error document; a payment still processing at the gateway is 201 with the card waiting for it (no redemption code, no `redeem` anchor, not delivered) |
//! | `POST /v2/gift_cards/preview` | the same checks, nothing written: 200 with the card as it would be (no id, empty redemption code, nil dates) |
//! | `GET /v2/gift_cards` | list (HEAD counts); filters `gifter_account_code`, `recipient_account_code` |
//! | `GET /v2/gift_cards/{id}` | one card |
//! | `POST /v2/gift_cards/{redemption_code}/redeem` | credit for the recipient account: 200 with `Location` (the card) |
//!
//! Refusals: a product or amount the site does not sell is 404 `not_found` ("Gift card product
//! with product code 'x' not found", "Gift card product with unit amount in cents of '2000' and
//! 'USD' currency not found"); on redeem a redeemed card, an unknown code and an unknown account
//! are 400 `bad_request` with the reference's descriptions; request fields are 422 `<errors>`
//! under `gift_card.`.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use rebill_app::platform::model::accounts::AddressFields;
use rebill_app::selling::gift_cards::{self, Delivery, GiftCard, GiftCardError, ListFilter, Previewed, Purchase};
use rebill_models::api::{self, EndpointId};
use rebill_models::validate::Operation;
use rebill_models::{Address, GiftCard as View, GiftCardDelivery as DeliveryView, GiftCardDeliveryMethod as Method};
use rebill_xml::{Href, WireContext};

use crate::lists::ListQuery;
use crate::request::{Routed, billing_request, href, validated};
use crate::respond::{self, time, with_location};
use crate::state::AppState;
use crate::views::{self, DeclineFields};

/// Where the fields of a gift card purchase's decline point.
const DECLINE: DeclineFields<'static> = DeclineFields {
    verification_value: "gift_card.gifter_account.billing_info.verification_value",
    base: "gift_card.base",
};

fn delivery_view(d: &Delivery) -> DeliveryView {
    let a = &d.address;
    let address = [&a.address1, &a.address2, &a.city, &a.state, &a.zip, &a.country, &a.phone]
        .iter()
        .any(|v| v.is_some())
        .then(|| {
            Box::new(Address {
                address1: a.address1.clone(),
                address2: a.address2.clone(),
                city: a.city.clone(),
                state: a.state.clone(),
                zip: a.zip.clone(),
                country: a.country.clone(),
                phone: a.phone.clone(),
            })
        });
    DeliveryView {
        method: Some(match d.method.as_str() {
            "email" => Method::Email,
            "post" => Method::Post,
            other => Method::Unknown(other.to_owned()),
        }),
        deliver_at: d.deliver_at.and_then(time),
        email_address: d.email_address.clone(),
        first_name: d.first_name.clone(),
        last_name: d.last_name.clone(),
        address,
        gifter_name: d.gifter_name.clone(),
        personal_message: d.personal_message.clone(),
    }
}

/// The card as the API shows it. A card whose payment is still processing at the gateway (not
/// purchased yet) shows no redemption code and no `redeem` anchor: it cannot be redeemed, and
/// goes again if the payment is declined.
fn view(card: &GiftCard) -> View {
    let purchase = card.purchase_invoice_number.to_string();
    let redeemed = card.redeemed_at.is_some();
    let purchased = card.purchased_at.is_some();
    View {
        gifter_account_href: Some(href(EndpointId::GetAccount, &[&card.gifter_account_code])),
        invoice: Some(href(EndpointId::GetInvoice, &[&purchase])),
        purchase_invoice: Some(href(EndpointId::GetInvoice, &[&purchase])),
        redemption_invoice: card.redemption_invoice_number.map(|n| href(EndpointId::GetInvoice, &[&n.to_string()])),
        recipient_account: card.recipient_account_code.as_deref().map(|c| href(EndpointId::GetAccount, &[c])),
        id: Some(card.id),
        redemption_code: Some(if purchased { card.redemption_code.clone() } else { String::new() }),
        balance_in_cents: if redeemed { Some(card.balance.unwrap_or_default()) } else { None },
        product_code: Some(card.product_code.clone()),
        unit_amount_in_cents: Some(card.unit_amount),
        currency: Some(card.currency.clone()),
        delivery: Some(Box::new(delivery_view(&card.delivery))),
        created_at: time(card.purchased_at.unwrap_or(card.created_at)),
        updated_at: time(card.updated_at),
        delivered_at: card.delivered_at.and_then(time),
        redeemed_at: card.redeemed_at.and_then(time),
        canceled_at: card.canceled_at.and_then(time),
        gifter_account: None,
        redeem_action: (purchased && !redeemed).then(|| href(EndpointId::RedeemGiftCard, &[&card.redemption_code])),
    }
}

/// A previewed card: no id, an empty redemption code, nil dates, no anchor.
fn preview_view(p: &Previewed) -> View {
    View {
        gifter_account_href: Some(Href::path("")),
        id: None,
        redemption_code: Some(String::new()),
        product_code: Some(p.product_code.clone()),
        unit_amount_in_cents: Some(p.unit_amount),
        currency: Some(p.currency.clone()),
        delivery: Some(Box::new(delivery_view(&p.delivery))),
        ..View::default()
    }
}

fn address_fields(a: Option<&Address>) -> AddressFields {
    let a = a.cloned().unwrap_or_default();
    AddressFields {
        address1: a.address1,
        address2: a.address2,
        city: a.city,
        state: a.state,
        zip: a.zip,
        country: a.country,
        phone: a.phone,
    }
}

/// The purchase a request document asks for.
fn purchase_of(body: &View) -> Purchase {
    let gifter = body.gifter_account.as_deref().cloned().unwrap_or_default();
    Purchase {
        product_code: body.product_code.clone().unwrap_or_default(),
        unit_amount_in_cents: body.unit_amount_in_cents.unwrap_or_default(),
        currency: body.currency.clone().unwrap_or_default(),
        delivery: body.delivery.as_deref().map(|d| Delivery {
            method: match &d.method {
                Some(Method::Email) => "email".to_owned(),
                Some(Method::Post) => "post".to_owned(),
                Some(Method::Unknown(v)) => v.clone(),
                None => String::new(),
            },
            email_address: d.email_address.clone(),
            first_name: d.first_name.clone(),
            last_name: d.last_name.clone(),
            gifter_name: d.gifter_name.clone(),
            personal_message: d.personal_message.clone(),
            address: address_fields(d.address.as_deref()),
            deliver_at: d.deliver_at.map(|t| t.timestamp()),
        }),
        gifter_account_code: gifter.account_code.clone().unwrap_or_default(),
        gifter_fields: crate::subscriptions::account_fields(&gifter),
        billing_info: gifter.billing_info.as_deref().map(billing_request),
    }
}

/// The answer to a refused purchase.
fn purchase_error(ctx: &WireContext, error: GiftCardError) -> Response {
    match error {
        e @ (GiftCardError::UnknownProduct(_) | GiftCardError::UnknownAmount { .. }) => {
            respond::not_found(&e.to_string())
        }
        GiftCardError::Declined(t) => views::decline_response(ctx, &t, DECLINE),
        GiftCardError::PaymentMethod(e) => views::payment_method_error(ctx, &e),
        GiftCardError::BillingInfoRequired => respond::error(
            StatusCode::BAD_REQUEST,
            "billing_info_required",
            "The gifter account has no billing info; send one with the gift card (gifter_account.billing_info).",
        ),
        other => respond::app_error(ctx, "gift_card", other.into()),
    }
}

/// `POST /v2/gift_cards` and `POST /v2/gift_cards/preview` share their checks.
async fn read_purchase<E>(state: &AppState, call: &Routed<'_, E>, request: Request) -> Result<Purchase, Response>
where
    E: rebill_models::ApiEndpoint<Request = View>,
{
    let body = call.decode(state, request).await?;
    validated(call, &body, Operation::Create)?;
    Ok(purchase_of(&body))
}

/// `POST /v2/gift_cards`: 201 with `Location`.
pub(crate) async fn create(state: &AppState, call: &Routed<'_, api::CreateGiftCard>, request: Request) -> Response {
    let ctx = &call.ctx.wire;
    let purchase = match read_purchase(state, call, request).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    match gift_cards::purchase(state, &call.context(), &purchase).await {
        Ok(bought) => {
            let location = EndpointId::GetGiftCard.endpoint().render(&[&bought.card.id.to_string()]);
            with_location(call.answer(&view(&bought.card)), ctx, &location)
        }
        Err(e) => purchase_error(ctx, e),
    }
}

/// `POST /v2/gift_cards/preview`: 200, nothing written.
pub(crate) async fn preview(state: &AppState, call: &Routed<'_, api::PreviewGiftCard>, request: Request) -> Response {
    let ctx = &call.ctx.wire;
    let purchase = match read_purchase(state, call, request).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    match gift_cards::preview(state, &call.context(), &purchase).await {
        Ok(p) => call.answer(&preview_view(&p)),
        Err(e) => purchase_error(ctx, e),
    }
}

/// `GET /v2/gift_cards`.
pub(crate) async fn list(state: &AppState, call: &Routed<'_, api::ListGiftCards>, query: Option<&str>) -> Response {
    let query = match ListQuery::parse(query, call.endpoint.filters) {
        Ok(q) => q,
        Err(e) => return e.response(),
    };
    let filter = ListFilter {
        gifter_account_code: query.filter("gifter_account_code").map(str::to_owned),
        recipient_account_code: query.filter("recipient_account_code").map(str::to_owned),
    };
    let page = match gift_cards::list(state, &call.context(), &filter, &query.page()).await {
        Ok(page) => page,
        Err(e) => return respond::internal(&e),
    };
    let items: Vec<View> = if call.head { Vec::new() } else { page.items.iter().map(view).collect() };
    let path = call.endpoint.render(&[]);
    call.answer_page(&path, &query, &items, page.next, page.total)
}

/// `GET /v2/gift_cards/{id}`.
pub(crate) async fn get(state: &AppState, call: &Routed<'_, api::GetGiftCard>) -> Response {
    match gift_cards::get(state, &call.context(), &call.params[0]).await {
        Ok(card) => call.answer(&view(&card)),
        Err(e) => respond::app_error(&call.ctx.wire, "gift_card", e.into()),
    }
}

/// `POST /v2/gift_cards/{redemption_code}/redeem`: 200 with `Location` (the card).
pub(crate) async fn redeem(state: &AppState, call: &Routed<'_, api::RedeemGiftCard>, request: Request) -> Response {
    let ctx = &call.ctx.wire;
    let body = match call.decode(state, request).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    if let Err(r) = validated(call, &body, Operation::Create) {
        return r;
    }
    let account_code = body.account_code.clone().unwrap_or_default();
    match gift_cards::redeem(state, &call.context(), &call.params[0], &account_code).await {
        Ok(redeemed) => {
            let location = EndpointId::GetGiftCard.endpoint().render(&[&redeemed.card.id.to_string()]);
            with_location(call.answer(&view(&redeemed.card)), ctx, &location)
        }
        Err(
            e @ (GiftCardError::AlreadyRedeemed | GiftCardError::CodeNotFound(_) | GiftCardError::AccountNotFound(_)),
        ) => respond::error(StatusCode::BAD_REQUEST, "bad_request", &e.to_string()),
        Err(e) => respond::app_error(ctx, "gift_card", e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card() -> GiftCard {
        GiftCard {
            id: 7,
            site_id: 1,
            redemption_code: "ABCDEFGHJKLMNPQR".into(),
            product_code: "gift_card".into(),
            currency: "USD".into(),
            unit_amount: 2000,
            gifter_account_code: "giver".into(),
            purchase_invoice_id: 3,
            purchase_invoice_number: 1003,
            recipient_account_code: None,
            redemption_invoice_id: None,
            redemption_invoice_number: None,
            balance: None,
            redeemed_subscription_uuid: None,
            delivery: Delivery {
                method: "email".into(),
                email_address: Some("r@example.com".into()),
                ..Delivery::default()
            },
            purchased_at: Some(1_800_000_000),
            delivered_at: Some(1_800_000_000),
            redeemed_at: None,
            canceled_at: None,
            created_at: 1_800_000_000,
            updated_at: 1_800_000_000,
        }
    }

    /// Before redemption: no balance, no recipient, the redeem anchor; after it the balance,
    /// the recipient and the redemption invoice, and no anchor.
    #[test]
    fn a_card_shows_its_redemption_once_redeemed() {
        let before = view(&card());
        assert_eq!(before.balance_in_cents, None);
        assert_eq!(before.recipient_account, None);
        assert_eq!(before.redemption_invoice, None);
        assert_eq!(before.purchase_invoice.as_ref().map(Href::as_str), Some("/v2/invoices/1003"));
        assert_eq!(before.redeem_action.as_ref().map(Href::as_str), Some("/v2/gift_cards/ABCDEFGHJKLMNPQR/redeem"));
        let redeemed = GiftCard {
            recipient_account_code: Some("taker".into()),
            redemption_invoice_number: Some(1004),
            balance: Some(1500),
            redeemed_at: Some(1_800_000_100),
            ..card()
        };
        let after = view(&redeemed);
        assert_eq!(after.balance_in_cents, Some(1500));
        assert_eq!(after.recipient_account.as_ref().map(Href::as_str), Some("/v2/accounts/taker"));
        assert_eq!(after.redemption_invoice.as_ref().map(Href::as_str), Some("/v2/invoices/1004"));
        assert_eq!(after.redeem_action, None);
    }

    /// While its payment is processing at the gateway the card shows neither its code nor the
    /// redeem anchor, and is not delivered; its purchase invoice is linked.
    #[test]
    fn a_card_waiting_for_its_payment_shows_no_code() {
        let waiting = view(&GiftCard { purchased_at: None, delivered_at: None, ..card() });
        assert_eq!(waiting.redemption_code.as_deref(), Some(""));
        assert_eq!(waiting.redeem_action, None);
        assert_eq!(waiting.delivered_at, None);
        assert_eq!(waiting.id, Some(7));
        assert_eq!(waiting.purchase_invoice.as_ref().map(Href::as_str), Some("/v2/invoices/1003"));
    }
}

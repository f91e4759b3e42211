//! The push notifications of a domain event: which kinds it sends and their bodies (the
//! resources in their notification shapes, [`rebill_webhooks::payload`]), read as they are when
//! the notification is made. The kinds table with the operations that send each is in
//! `docs/webhooks.md`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rebill_billing::states::InvoiceState;
use rebill_store::accounts::Account;
use rebill_store::events::Event;
use rebill_store::invoices::{Adjustment, Invoice, InvoiceKind, Transaction};
use rebill_store::plans::{AddOn, Plan};
use rebill_store::{Site, StoreError};
use rebill_webhooks::payload;

use crate::Services;
use crate::platform::subscription_documents::Loaded;

/// Every kind this module sends (the kinds table of `docs/webhooks.md` lists the same).
pub const EMITTED: &[&str] = &[
    "new_account_notification",
    "updated_account_notification",
    "canceled_account_notification",
    "billing_info_updated_notification",
    "new_subscription_notification",
    "updated_subscription_notification",
    "canceled_subscription_notification",
    "expired_subscription_notification",
    "renewed_subscription_notification",
    "reactivated_account_notification",
    "scheduled_subscription_pause_notification",
    "subscription_paused_notification",
    "paused_subscription_renewal_notification",
    "subscription_pause_canceled_notification",
    "subscription_resumed_notification",
    "new_charge_invoice_notification",
    "paid_charge_invoice_notification",
    "past_due_charge_invoice_notification",
    "failed_charge_invoice_notification",
    "new_credit_invoice_notification",
    "new_invoice_notification",
    "closed_invoice_notification",
    "past_due_invoice_notification",
    "successful_payment_notification",
    "failed_payment_notification",
    "successful_refund_notification",
    "void_payment_notification",
    "new_credit_payment_notification",
    "voided_credit_payment_notification",
    "closed_credit_invoice_notification",
    "voided_credit_invoice_notification",
    "reopened_credit_invoice_notification",
    "processing_credit_invoice_notification",
    "new_dunning_event_notification",
    "new_shipping_address_notification",
    "updated_shipping_address_notification",
    "deleted_shipping_address_notification",
    "purchased_gift_card_notification",
    "redeemed_gift_card_notification",
    "updated_balance_gift_card_notification",
];

/// A notification: its kind and body.
pub type Notification = (&'static str, String);

/// The notifications of `event`: (kind, body). The resources are read as they are when the
/// notification is made (within a moment of the event).
pub async fn of(
    services: &Services,
    reads: &Resources,
    site: &Site,
    event: &Event,
) -> Result<Vec<Notification>, StoreError> {
    let kind = event.kind.as_str();
    if let Some(kind) = account_kind(kind) {
        let Some(account) = reads.account(services, event.site_id, &event.subject).await? else {
            return Ok(Vec::new());
        };
        let body = payload::render(kind, &[payload::account(&account_fields(&account), false)]);
        return Ok(vec![(kind, body)]);
    }
    if let Some((kind, pause)) = subscription_kind(kind) {
        return subscription_notification(services, reads, site, event, kind, pause).await;
    }
    if let Some(kind) = shipping_kind(kind) {
        return shipping_notification(services, reads, event, kind).await;
    }
    if let Some(kind) = gift_card_kind(kind) {
        let Ok(id) = event.subject.parse::<i64>() else { return Ok(Vec::new()) };
        let Some(card) = services.store.gift_card(event.site_id, id).await? else { return Ok(Vec::new()) };
        return Ok(vec![gift_card_notification(kind, &card, None)]);
    }
    if kind == crate::platform::events::INVOICE_DUNNING {
        return dunning_notification(services, reads, site, event).await;
    }
    if kind.starts_with("invoice.") || kind.starts_with("credit_invoice.") {
        return invoice_notification(services, reads, site, event).await;
    }
    if kind.starts_with("transaction.") {
        return transaction_notification(services, reads, site, event).await;
    }
    if let Some(kind) = credit_payment_kind(kind) {
        return credit_payment_notification(services, reads, event, kind).await;
    }
    Ok(Vec::new())
}

/// The notification of a shipping address event.
fn shipping_kind(event: &str) -> Option<&'static str> {
    use crate::customers::shipping_addresses::{
        SHIPPING_ADDRESS_CREATED, SHIPPING_ADDRESS_DELETED, SHIPPING_ADDRESS_UPDATED,
    };
    Some(match event {
        SHIPPING_ADDRESS_CREATED => "new_shipping_address_notification",
        SHIPPING_ADDRESS_UPDATED => "updated_shipping_address_notification",
        SHIPPING_ADDRESS_DELETED => "deleted_shipping_address_notification",
        _ => return None,
    })
}

/// The notification of a gift card event (a delivery sends none: the original has no such kind).
fn gift_card_kind(event: &str) -> Option<&'static str> {
    use crate::selling::gift_cards::{GIFT_CARD_PURCHASED, GIFT_CARD_REDEEMED};
    Some(match event {
        GIFT_CARD_PURCHASED => "purchased_gift_card_notification",
        GIFT_CARD_REDEEMED => "redeemed_gift_card_notification",
        _ => return None,
    })
}

/// The notification of a credit payment event.
fn credit_payment_kind(event: &str) -> Option<&'static str> {
    use rebill_store::credits::{CREDIT_PAYMENT_CREATED, CREDIT_PAYMENT_VOIDED};
    Some(match event {
        CREDIT_PAYMENT_CREATED => "new_credit_payment_notification",
        CREDIT_PAYMENT_VOIDED => "voided_credit_payment_notification",
        _ => return None,
    })
}

/// `<account>` (A1) and `<shipping_address>` of a shipping address event (a deleted address as
/// it was).
async fn shipping_notification(
    services: &Services,
    reads: &Resources,
    event: &Event,
    kind: &'static str,
) -> Result<Vec<Notification>, StoreError> {
    let payload: serde_json::Value = serde_json::from_str(&event.payload).unwrap_or_default();
    let Some(id) = payload.get("shipping_address_id").and_then(serde_json::Value::as_i64) else {
        return Ok(Vec::new());
    };
    let Some(account) = reads.account(services, event.site_id, &event.subject).await? else { return Ok(Vec::new()) };
    let Some(address) = services.store.shipping_address_ever(account.id, id).await? else { return Ok(Vec::new()) };
    let f = &address.fields;
    let fields = payload::ShippingAddressFields {
        id: address.id,
        nickname: f.nickname.as_deref(),
        first_name: f.first_name.as_deref(),
        last_name: f.last_name.as_deref(),
        company_name: f.company.as_deref(),
        vat_number: f.vat_number.as_deref(),
        street1: f.address1.as_deref(),
        street2: f.address2.as_deref(),
        city: f.city.as_deref(),
        state: f.state.as_deref(),
        zip: f.zip.as_deref(),
        country: f.country.as_deref(),
        email: f.email.as_deref(),
        phone: f.phone.as_deref(),
    };
    let body =
        payload::render(kind, &[payload::account(&account_fields(&account), true), payload::shipping_address(&fields)]);
    Ok(vec![(kind, body)])
}

/// A postal address as a notification writes it.
fn address_fields(a: &rebill_store::accounts::AddressFields) -> payload::AddressFields<'_> {
    payload::AddressFields {
        address1: a.address1.as_deref(),
        address2: a.address2.as_deref(),
        city: a.city.as_deref(),
        state: a.state.as_deref(),
        zip: a.zip.as_deref(),
        country: a.country.as_deref(),
        phone: a.phone.as_deref(),
    }
}

/// `<gift_card>` (alone, as the original) of a gift card notification; `balance` for the
/// updated-balance kind.
fn gift_card_notification(
    kind: &'static str,
    card: &rebill_store::gift_cards::GiftCard,
    balance: Option<i64>,
) -> Notification {
    let d = &card.delivery;
    let fields = payload::GiftCardFields {
        redemption_code: &card.redemption_code,
        id: card.id,
        product_code: &card.product_code,
        unit_amount_in_cents: card.unit_amount,
        currency: &card.currency,
        gifter_account_code: &card.gifter_account_code,
        recipient_account_code: card.recipient_account_code.as_deref(),
        invoice_number: card.purchase_invoice_number,
        delivery: payload::GiftCardDeliveryFields {
            method: &d.method,
            email_address: d.email_address.as_deref(),
            deliver_at: d.deliver_at,
            first_name: d.first_name.as_deref(),
            last_name: d.last_name.as_deref(),
            address: address_fields(&d.address),
            gifter_name: d.gifter_name.as_deref(),
            personal_message: d.personal_message.as_deref(),
        },
        created_at: card.created_at,
        updated_at: card.updated_at,
        delivered_at: card.delivered_at,
        redeemed_at: card.redeemed_at,
        canceled_at: card.canceled_at,
    };
    (kind, payload::render(kind, &[payload::gift_card(&fields, balance)]))
}

/// `<account>` (A1) and `<credit_payment>` of a credit payment made (credit applied, paid out,
/// voided from an invoice's balance, written off) or voided; and when it drew on (or gave back
/// to) a redeemed gift card's credit, the card's updated balance.
async fn credit_payment_notification(
    services: &Services,
    reads: &Resources,
    event: &Event,
    kind: &'static str,
) -> Result<Vec<Notification>, StoreError> {
    let Some(p) = services.store.credit_payment(event.site_id, &event.subject).await? else { return Ok(Vec::new()) };
    let Some(account) = reads.account(services, event.site_id, &p.account_code).await? else { return Ok(Vec::new()) };
    let fields = payload::CreditPaymentFields {
        uuid: &p.uuid,
        action: p.action.as_str(),
        currency: &p.currency,
        amount_in_cents: p.amount,
        original_invoice_number: p.original_invoice_number,
        applied_to_invoice_number: p.applied_to_invoice_number,
        original_credit_payment_uuid: p.original_credit_payment_uuid.as_deref(),
        refund_transaction_uuid: p.refund_transaction_uuid.as_deref(),
        created_at: p.created_at,
        updated_at: p.updated_at,
        voided_at: p.voided_at,
    };
    let body =
        payload::render(kind, &[payload::account(&account_fields(&account), true), payload::credit_payment(&fields)]);
    let mut sent = vec![(kind, body)];
    if let Some(card) = services.store.gift_card_redeemed_into(event.site_id, p.original_invoice_id).await? {
        let balance = card.balance.unwrap_or_default();
        sent.push(gift_card_notification("updated_balance_gift_card_notification", &card, Some(balance)));
    }
    Ok(sent)
}

/// The notification of an invoice event on a site with Credit Memos (`credit_memos`) or
/// without, for a charge, credit or legacy invoice; `None`: the event sends none.
fn invoice_kind(event: &str, kind: InvoiceKind, credit_memos: bool) -> Option<&'static str> {
    use crate::platform::events::{INVOICE_CREATED, INVOICE_FAILED, INVOICE_PAID, INVOICE_PAST_DUE};
    use rebill_store::credits::{
        CREDIT_INVOICE_CLOSED, CREDIT_INVOICE_PROCESSING, CREDIT_INVOICE_REOPENED, CREDIT_INVOICE_VOIDED,
    };
    Some(match (event, kind, credit_memos) {
        (CREDIT_INVOICE_CLOSED, InvoiceKind::Credit, _) => "closed_credit_invoice_notification",
        (CREDIT_INVOICE_VOIDED, InvoiceKind::Credit, _) => "voided_credit_invoice_notification",
        (CREDIT_INVOICE_REOPENED, InvoiceKind::Credit, _) => "reopened_credit_invoice_notification",
        (CREDIT_INVOICE_PROCESSING, InvoiceKind::Credit, _) => "processing_credit_invoice_notification",
        (INVOICE_CREATED, InvoiceKind::Credit, _) => "new_credit_invoice_notification",
        (INVOICE_CREATED, _, true) => "new_charge_invoice_notification",
        (INVOICE_CREATED, _, false) => "new_invoice_notification",
        (INVOICE_PAID, InvoiceKind::Credit, _) => return None,
        (INVOICE_PAID, _, true) => "paid_charge_invoice_notification",
        // Closed: fully paid or failed to collect (the state says which).
        (INVOICE_PAID | INVOICE_FAILED, _, false) => "closed_invoice_notification",
        (INVOICE_PAST_DUE, _, true) => "past_due_charge_invoice_notification",
        (INVOICE_PAST_DUE, _, false) => "past_due_invoice_notification",
        (INVOICE_FAILED, _, true) => "failed_charge_invoice_notification",
        _ => return None,
    })
}

/// `<account>` and `<invoice>` of an invoice event.
async fn invoice_notification(
    services: &Services,
    reads: &Resources,
    site: &Site,
    event: &Event,
) -> Result<Vec<Notification>, StoreError> {
    let Ok(number) = event.subject.parse::<i64>() else { return Ok(Vec::new()) };
    let Some(invoice) = reads.invoice(services, event.site_id, number).await? else { return Ok(Vec::new()) };
    let Some(kind) = invoice_kind(&event.kind, invoice.kind, site.credit_memos) else { return Ok(Vec::new()) };
    let Some(account) = reads.account(services, event.site_id, &invoice.account_code).await? else {
        return Ok(Vec::new());
    };
    let subscription_ids = invoice_subscriptions(services, reads, &invoice).await?;
    let shape = invoice_shape(&invoice, site.credit_memos);
    // A credit invoice's state change shows the state it entered, also when it has moved on
    // since (a payout processing, then closed a moment later).
    let mut invoice = invoice;
    if event.kind.starts_with("credit_invoice.") {
        let change: serde_json::Value = serde_json::from_str(&event.payload).unwrap_or_default();
        if let Some(state) = change.get("state").and_then(serde_json::Value::as_str).and_then(InvoiceState::parse) {
            invoice.state = state;
        }
    }
    let element = invoice_element(&invoice, &account, &subscription_ids, shape, None);
    let with_phone = shape != payload::InvoiceShape::Legacy;
    let body = payload::render(kind, &[payload::account(&account_fields(&account), with_phone), element]);
    Ok(vec![(kind, body)])
}

/// The dunning notification of an invoice's dunning event: on Credit Memos sites `<account>`
/// (A1), `<invoice>` (ID) and the invoice's `<subscription>`; elsewhere `<account>` (A0),
/// `<invoice>` (IDL), `<subscription>` and the declined `<transaction>` (reference §2.9). An
/// invoice billing no subscription (a one-off charge) carries none.
async fn dunning_notification(
    services: &Services,
    reads: &Resources,
    site: &Site,
    event: &Event,
) -> Result<Vec<Notification>, StoreError> {
    let kind = "new_dunning_event_notification";
    let Ok(number) = event.subject.parse::<i64>() else { return Ok(Vec::new()) };
    let Some(invoice) = reads.invoice(services, event.site_id, number).await? else { return Ok(Vec::new()) };
    let Some(account) = reads.account(services, event.site_id, &invoice.account_code).await? else {
        return Ok(Vec::new());
    };
    let step: serde_json::Value = serde_json::from_str(&event.payload).unwrap_or_default();
    let dunning = payload::Dunning {
        due_at: Some(invoice.due_on.unwrap_or(invoice.created_at)),
        events_count: step.get("dunning_events_count").and_then(serde_json::Value::as_i64).unwrap_or(1),
        last: step.get("final").and_then(serde_json::Value::as_bool).unwrap_or(false),
    };
    let subscription_ids = invoice_subscriptions(services, reads, &invoice).await?;
    let shape = invoice_shape(&invoice, site.credit_memos);
    let mut children = vec![
        payload::account(&account_fields(&account), site.credit_memos),
        invoice_element(&invoice, &account, &subscription_ids, shape, Some(dunning)),
    ];
    if let Some(uuid) = subscription_ids.first() {
        children.extend(subscription_element(services, reads, site, uuid, false).await?.map(|(s, _)| s));
    }
    if !site.credit_memos {
        let transactions = services.store.invoice_transactions(invoice.id).await?;
        if let Some(t) = transactions.iter().rev().find(|t| t.new.action == "purchase") {
            children.push(transaction_element(services, t, Some(&invoice), site).await?);
        }
    }
    Ok(vec![(kind, payload::render(kind, &children))])
}

/// The subscriptions an invoice's lines bill, in line order, each once.
async fn invoice_subscriptions(
    services: &Services,
    reads: &Resources,
    invoice: &Invoice,
) -> Result<Vec<String>, StoreError> {
    let lines = reads.invoice_lines(services, invoice.id).await?;
    let mut ids: Vec<String> = Vec::new();
    for uuid in lines.iter().filter_map(|l| l.line.subscription_uuid.as_ref()) {
        if !ids.contains(uuid) {
            ids.push(uuid.clone());
        }
    }
    Ok(ids)
}

/// The shape an invoice takes: credit invoices ICR, charge invoices IC on Credit Memos sites, IL
/// elsewhere.
fn invoice_shape(invoice: &Invoice, credit_memos: bool) -> payload::InvoiceShape {
    match (invoice.kind, credit_memos) {
        (InvoiceKind::Credit, _) => payload::InvoiceShape::Credit,
        (_, true) => payload::InvoiceShape::Charge,
        (_, false) => payload::InvoiceShape::Legacy,
    }
}

/// The `<invoice>` of `invoice` in `shape`, with the dunning counters when `dunning` is given.
fn invoice_element(
    invoice: &Invoice,
    account: &rebill_store::accounts::Account,
    subscription_ids: &[String],
    shape: payload::InvoiceShape,
    dunning: Option<payload::Dunning>,
) -> payload::Element {
    let state = match (shape, invoice.state) {
        // Legacy invoices name their states as before 2.10.
        (payload::InvoiceShape::Legacy, InvoiceState::Pending) => "open",
        (payload::InvoiceShape::Legacy, InvoiceState::Paid) => "collected",
        (_, state) => state.as_str(),
    };
    let amounts = &invoice.amounts;
    let fields = payload::InvoiceFields {
        uuid: &invoice.uuid,
        state,
        origin: &invoice.origin,
        invoice_number: invoice.invoice_number,
        currency: &invoice.currency,
        balance_in_cents: amounts.balance,
        total_in_cents: amounts.total,
        tax_in_cents: amounts.tax,
        subtotal_in_cents: amounts.subtotal_after_discount,
        subtotal_before_discount_in_cents: amounts.subtotal_before_discount,
        discount_in_cents: amounts.discount,
        subscription_ids: subscription_ids.iter().map(String::as_str).collect(),
        customer_notes: invoice.terms.customer_notes.as_deref(),
        created_at: invoice.created_at,
        updated_at: invoice.updated_at,
        closed_at: invoice.closed_at,
        po_number: invoice.terms.po_number.as_deref(),
        terms_and_conditions: invoice.terms.terms_and_conditions.as_deref(),
        due_on: invoice.due_on,
        net_terms: invoice.terms.net_terms,
        collection_method: invoice.terms.collection_method.as_str(),
        // The account's address, as the invoice's own address shows it in the API.
        address: address_fields(&account.fields.address),
    };
    match dunning {
        Some(dunning) => payload::dunning_invoice(&fields, shape, dunning),
        None => payload::invoice(&fields, shape),
    }
}

/// The notification of a transaction event: a payment approved or declined, a refund made
/// (a declined refund sends none, as with the original), a payment voided; verifications send
/// none (reference §8 8).
fn transaction_kind(event: &str, action: &str) -> Option<&'static str> {
    use crate::platform::events::{TRANSACTION_APPROVED, TRANSACTION_DECLINED, TRANSACTION_VOIDED};
    Some(match (event, action) {
        (TRANSACTION_APPROVED, "purchase") => "successful_payment_notification",
        (TRANSACTION_DECLINED, "purchase") => "failed_payment_notification",
        (TRANSACTION_APPROVED, "refund") => "successful_refund_notification",
        (TRANSACTION_VOIDED, _) => "void_payment_notification",
        _ => return None,
    })
}

/// `<account>` and `<transaction>` of a transaction event.
async fn transaction_notification(
    services: &Services,
    reads: &Resources,
    site: &Site,
    event: &Event,
) -> Result<Vec<Notification>, StoreError> {
    let Some(t) = reads.transaction(services, event.site_id, &event.subject).await? else { return Ok(Vec::new()) };
    let Some(kind) = transaction_kind(&event.kind, &t.new.action) else { return Ok(Vec::new()) };
    let Some(account) = reads.account(services, event.site_id, &t.new.account.account_code).await? else {
        return Ok(Vec::new());
    };
    let invoice = match t.new.invoice_id {
        Some(id) => reads.invoice_by_id(services, id).await?,
        None => None,
    };
    let element = transaction_element(services, &t, invoice.as_ref(), site).await?;
    let body = payload::render(kind, &[payload::account(&account_fields(&account), false), element]);
    Ok(vec![(kind, body)])
}

/// The `<transaction>` (T0) of `t`, of the invoice `invoice`.
async fn transaction_element(
    services: &Services,
    t: &rebill_store::invoices::Transaction,
    invoice: Option<&Invoice>,
    site: &Site,
) -> Result<payload::Element, StoreError> {
    let (voidable, refundable) = crate::money_back::refunds::give_back_flags(t, site.now(services.clock.now()));
    let r = &t.result;
    let cvv = r.cvv.as_ref().map(|c| (c.code.as_str(), c.message.as_str()));
    let avs = r.avs.as_ref().map(|c| (c.code.as_str(), c.message.as_str()));
    let fields = payload::TransactionFields {
        id: &t.uuid,
        invoice_id: invoice.map(|i| i.uuid.as_str()),
        invoice_number: t.invoice_number,
        subscription_id: t.new.subscription_uuid.as_deref(),
        // A refund is a `credit` in notifications.
        action: if t.new.action == "refund" { "credit" } else { &t.new.action },
        date: t.created_at,
        amount_in_cents: t.new.amount,
        status: r.status.as_str(),
        message: r.message.as_deref(),
        reference: r.reference.as_deref(),
        source: &t.new.source,
        cvv_result: cvv,
        avs_result: avs,
        test: t.new.test,
        voidable,
        refundable,
    };
    Ok(payload::transaction(&fields))
}

/// The notification of an account event.
fn account_kind(event: &str) -> Option<&'static str> {
    Some(match event {
        // A reopened account is announced as a new one, as the original did (reference §8 6).
        crate::platform::events::ACCOUNT_CREATED | crate::platform::events::ACCOUNT_REOPENED => {
            "new_account_notification"
        }
        crate::platform::events::ACCOUNT_UPDATED => "updated_account_notification",
        crate::platform::events::ACCOUNT_CLOSED => "canceled_account_notification",
        crate::platform::events::BILLING_INFO_UPDATED => "billing_info_updated_notification",
        _ => return None,
    })
}

/// The notification of a subscription event, and whether it carries the pause shape.
fn subscription_kind(event: &str) -> Option<(&'static str, bool)> {
    Some(match event {
        crate::platform::events::SUBSCRIPTION_CREATED => ("new_subscription_notification", false),
        // A change applied now or at renewal, or a new renewal date.
        "subscription.changed" | "subscription.postponed" => ("updated_subscription_notification", false),
        "subscription.canceled" => ("canceled_subscription_notification", false),
        // Expired at the end of a canceled term, or terminated.
        crate::platform::events::SUBSCRIPTION_EXPIRED => ("expired_subscription_notification", false),
        "subscription.renewed" => ("renewed_subscription_notification", false),
        "subscription.reactivated" => ("reactivated_account_notification", false),
        "subscription.pause_scheduled" => ("scheduled_subscription_pause_notification", true),
        "subscription.paused" => ("subscription_paused_notification", true),
        "subscription.paused_renewal" => ("paused_subscription_renewal_notification", true),
        "subscription.resumed" => ("subscription_resumed_notification", true),
        "subscription.pause_canceled" => ("subscription_pause_canceled_notification", true),
        _ => return None,
    })
}

fn account_fields(account: &rebill_store::accounts::Account) -> payload::AccountFields<'_> {
    let f = &account.fields;
    payload::AccountFields {
        account_code: &account.account_code,
        username: f.username.as_deref(),
        email: f.email.as_deref(),
        first_name: f.first_name.as_deref(),
        last_name: f.last_name.as_deref(),
        company_name: f.company_name.as_deref(),
        phone: f.address.phone.as_deref(),
    }
}

/// `<account>` (A0, or A1 for the pause family) and `<subscription>` of a subscription event.
async fn subscription_notification(
    services: &Services,
    reads: &Resources,
    site: &Site,
    event: &Event,
    kind: &'static str,
    pause: bool,
) -> Result<Vec<Notification>, StoreError> {
    let Some((element, account_code)) = subscription_element(services, reads, site, &event.subject, pause).await?
    else {
        return Ok(Vec::new());
    };
    let Some(account) = reads.account(services, event.site_id, &account_code).await? else { return Ok(Vec::new()) };
    let body = payload::render(kind, &[payload::account(&account_fields(&account), pause), element]);
    Ok(vec![(kind, body)])
}

/// The `<subscription>` (S, or S-pause) of the subscription `uuid`, and its account's code.
async fn subscription_element(
    services: &Services,
    reads: &Resources,
    site: &Site,
    uuid: &str,
    pause: bool,
) -> Result<Option<(payload::Element, String)>, StoreError> {
    let Some(loaded) = reads.subscription(services, site.id, uuid).await? else { return Ok(None) };
    let terms = &loaded.sub.terms;
    let names = reads.plan(services, site, &terms.plan_code).await;
    let plan_name = names.as_deref().map(|(plan, _)| plan.name.as_str());
    let add_on_name = |code: &str| {
        names
            .as_deref()
            .and_then(|(_, add_ons)| add_ons.iter().find(|a| a.add_on_code == code))
            .map(|a| a.name.as_str())
    };
    let add_ons: Vec<payload::AddOnFields<'_>> = terms
        .add_ons
        .iter()
        .map(|a| payload::AddOnFields {
            add_on_code: &a.add_on_code,
            name: add_on_name(&a.add_on_code),
            quantity: i64::from(a.quantity),
            unit_amount_in_cents: a.unit_amount_in_cents,
        })
        .collect();
    let total = terms.unit_amount_in_cents * i64::from(terms.quantity)
        + add_ons.iter().map(|a| a.unit_amount_in_cents * a.quantity).sum::<i64>();
    let sub = &loaded.sub;
    let at = |t: Option<chrono::DateTime<chrono::Utc>>| t.map(|t| t.timestamp());
    let fields = payload::SubscriptionFields {
        plan_code: &terms.plan_code,
        plan_name,
        uuid: &loaded.record.uuid,
        state: sub.state.name(),
        quantity: i64::from(terms.quantity),
        total_amount_in_cents: total,
        add_ons,
        activated_at: at(sub.activated_at),
        canceled_at: at(sub.canceled_at),
        expires_at: at(sub.expires_at),
        current_period_started_at: at(sub.current_period_started_at),
        current_period_ends_at: at(sub.current_period_ends_at),
        trial_started_at: at(sub.trial_started_at),
        trial_ends_at: at(sub.trial_ends_at),
        collection_method: match loaded.details.collection_method.as_deref() {
            Some("manual") => "manual",
            _ => "automatic",
        },
        paused_at: at(sub.paused_at),
        // rebill keeps no resume time apart from the pause's cycles.
        resume_at: None,
        remaining_pause_cycles: sub.remaining_pause_cycles.map(i64::from),
    };
    Ok(Some((payload::subscription(&fields, pause), loaded.details.account_code.clone())))
}

/// The resources the notifications of a batch of events carry, read together before any of
/// them is made: one statement per kind of resource (per 500 keys) instead of several reads per
/// event. An event's own resource (its subscription, invoice, transaction or account) is read
/// first, then what those name (their accounts, the invoices' lines, the transactions'
/// invoices, the subscriptions' plans). A resource the batch did not foresee (a dunning
/// event's transactions, a credit payment) is read alone when its notification is made. All
/// are read within a moment of the events, as a notification made one at a time would be.
#[derive(Default)]
pub struct Resources {
    /// Every key looked for is present; `None`: no such resource.
    accounts: HashMap<(i64, String), Option<Account>>,
    invoices: HashMap<(i64, i64), Option<Invoice>>,
    /// Invoice id → (site, number) of the invoices read.
    invoice_numbers: HashMap<i64, (i64, i64)>,
    lines: HashMap<i64, Vec<Adjustment>>,
    transactions: HashMap<(i64, String), Option<Transaction>>,
    subscriptions: HashMap<(i64, String), Option<Arc<Loaded>>>,
    plans: HashMap<(i64, String), Option<Arc<PlanNames>>>,
}

impl Resources {
    /// Reads what the notifications of `events` carry; `sites` are the sites whose events send
    /// notifications (the others' events are passed over).
    pub async fn read(services: &Services, sites: &HashMap<i64, Site>, events: &[Event]) -> Result<Self, StoreError> {
        let mut wanted = Wanted::default();
        for event in events.iter().filter(|e| sites.contains_key(&e.site_id)) {
            let kind = event.kind.as_str();
            let key = (event.site_id, event.subject.clone());
            if account_kind(kind).is_some() || shipping_kind(kind).is_some() {
                wanted.accounts.insert(key);
            } else if subscription_kind(kind).is_some() {
                wanted.subscriptions.insert(key);
            } else if kind.starts_with("invoice.") || kind.starts_with("credit_invoice.") {
                if let Ok(number) = event.subject.parse::<i64>() {
                    wanted.invoices.insert((event.site_id, number));
                }
            } else if kind.starts_with("transaction.") {
                wanted.transactions.insert(key);
            }
        }
        let mut reads = Resources::default();
        // The events' own resources.
        for (site_id, uuids) in by_site(&wanted.subscriptions) {
            let found = services.store.subscriptions_by_uuids(site_id, &uuids).await?;
            for uuid in uuids {
                reads.subscriptions.insert((site_id, uuid.to_owned()), None);
            }
            for record in found {
                let key = (site_id, record.uuid.clone());
                // One that cannot be read is read again (and reported) when its notification is made.
                match Loaded::of(record) {
                    Ok(loaded) => reads.subscriptions.insert(key, Some(Arc::new(loaded))),
                    Err(_) => reads.subscriptions.remove(&key),
                };
            }
        }
        for (site_id, numbers) in by_site(&wanted.invoices) {
            let found = services.store.invoices_by_numbers(site_id, &numbers).await?;
            reads.keep_invoices(numbers.iter().map(|n| (site_id, *n)), found);
        }
        for (site_id, uuids) in by_site(&wanted.transactions) {
            let found = services.store.transactions_by_uuids(site_id, &uuids).await?;
            for uuid in uuids {
                reads.transactions.insert((site_id, uuid.to_owned()), None);
            }
            for t in found {
                reads.transactions.insert((site_id, t.uuid.clone()), Some(t));
            }
        }
        // The invoices of the transactions, when not read already.
        let more: Vec<i64> = reads
            .transactions
            .values()
            .flatten()
            .filter_map(|t| t.new.invoice_id)
            .filter(|id| !reads.invoice_numbers.contains_key(id))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        if !more.is_empty() {
            let found = services.store.invoices_by_ids(&more).await?;
            reads.keep_invoices(std::iter::empty(), found);
        }
        // What those name: accounts, lines, plans.
        let mut accounts = wanted.accounts;
        accounts.extend(reads.invoices.values().flatten().map(|i| (i.site_id, i.account_code.clone())));
        accounts.extend(
            reads
                .transactions
                .iter()
                .filter_map(|((site_id, _), t)| t.as_ref().map(|t| (*site_id, t.new.account.account_code.clone()))),
        );
        let mut plans = HashSet::new();
        for ((site_id, _), loaded) in &reads.subscriptions {
            if let Some(loaded) = loaded {
                accounts.insert((*site_id, loaded.details.account_code.clone()));
                plans.insert((*site_id, loaded.sub.terms.plan_code.clone()));
            }
        }
        for (site_id, codes) in by_site(&accounts) {
            let found = services.store.accounts_by_codes(site_id, &codes).await?;
            for code in codes {
                reads.accounts.insert((site_id, code.to_owned()), None);
            }
            for account in found {
                reads.accounts.insert((site_id, account.account_code.clone()), Some(account));
            }
        }
        let invoice_ids: Vec<i64> = reads.invoice_numbers.keys().copied().collect();
        for line in services.store.lines_of_invoices(&invoice_ids).await? {
            if let Some(id) = line.invoice_id {
                reads.lines.entry(id).or_default().push(line);
            }
        }
        for id in invoice_ids {
            reads.lines.entry(id).or_default();
        }
        for (site_id, code) in plans {
            let Some(site) = sites.get(&site_id) else { continue };
            let plan = read_plan(services, site, &code).await;
            reads.plans.insert((site_id, code), plan);
        }
        Ok(reads)
    }

    /// Keeps `found` and records the keys `looked_for` that have no invoice.
    fn keep_invoices(&mut self, looked_for: impl Iterator<Item = (i64, i64)>, found: Vec<Invoice>) {
        for key in looked_for {
            self.invoices.insert(key, None);
        }
        for invoice in found {
            let key = (invoice.site_id, invoice.invoice_number);
            self.invoice_numbers.insert(invoice.id, key);
            self.invoices.insert(key, Some(invoice));
        }
    }

    async fn account(&self, services: &Services, site_id: i64, code: &str) -> Result<Option<Account>, StoreError> {
        match self.accounts.get(&(site_id, code.to_owned())) {
            Some(found) => Ok(found.clone()),
            None => services.store.account(site_id, code).await,
        }
    }

    async fn invoice(&self, services: &Services, site_id: i64, number: i64) -> Result<Option<Invoice>, StoreError> {
        match self.invoices.get(&(site_id, number)) {
            Some(found) => Ok(found.clone()),
            None => services.store.invoice(site_id, number).await,
        }
    }

    async fn invoice_by_id(&self, services: &Services, id: i64) -> Result<Option<Invoice>, StoreError> {
        match self.invoice_numbers.get(&id).and_then(|key| self.invoices.get(key)) {
            Some(found) => Ok(found.clone()),
            None => services.store.invoice_by_id(id).await,
        }
    }

    async fn invoice_lines(&self, services: &Services, invoice_id: i64) -> Result<Vec<Adjustment>, StoreError> {
        match self.lines.get(&invoice_id) {
            Some(found) => Ok(found.clone()),
            None => services.store.invoice_lines(invoice_id).await,
        }
    }

    async fn transaction(
        &self,
        services: &Services,
        site_id: i64,
        uuid: &str,
    ) -> Result<Option<Transaction>, StoreError> {
        match self.transactions.get(&(site_id, uuid.to_owned())) {
            Some(found) => Ok(found.clone()),
            None => services.store.transaction(site_id, uuid).await,
        }
    }

    /// The subscription `uuid`, loaded; `None` also for one whose documents cannot be read
    /// (reported).
    async fn subscription(
        &self,
        services: &Services,
        site_id: i64,
        uuid: &str,
    ) -> Result<Option<Arc<Loaded>>, StoreError> {
        if let Some(found) = self.subscriptions.get(&(site_id, uuid.to_owned())) {
            return Ok(found.clone());
        }
        let Some(record) = services.store.subscription(site_id, uuid).await? else { return Ok(None) };
        match Loaded::of(record) {
            Ok(loaded) => Ok(Some(Arc::new(loaded))),
            Err(_) => {
                tracing::warn!(subscription = %uuid, "a stored subscription cannot be read for its notification");
                Ok(None)
            }
        }
    }

    /// The plan `code` of the site with its add-ons (for their names); `None` when it cannot be
    /// read.
    async fn plan(&self, services: &Services, site: &Site, code: &str) -> Option<Arc<PlanNames>> {
        match self.plans.get(&(site.id, code.to_owned())) {
            Some(found) => found.clone(),
            None => read_plan(services, site, code).await,
        }
    }
}

/// A plan with its add-ons (their names go into a subscription's notification).
type PlanNames = (Plan, Vec<AddOn>);

/// The keys of the events' own resources.
#[derive(Default)]
struct Wanted {
    accounts: HashSet<(i64, String)>,
    subscriptions: HashSet<(i64, String)>,
    invoices: HashSet<(i64, i64)>,
    transactions: HashSet<(i64, String)>,
}

/// Keys grouped by site.
fn by_site<K: Clone + Eq + std::hash::Hash>(keys: &HashSet<(i64, K)>) -> HashMap<i64, Vec<K>> {
    let mut sites: HashMap<i64, Vec<K>> = HashMap::new();
    for (site_id, key) in keys {
        sites.entry(*site_id).or_default().push(key.clone());
    }
    sites
}

/// The plan `code` of `site` with its add-ons; `None` when there is none or it cannot be read.
async fn read_plan(services: &Services, site: &Site, code: &str) -> Option<Arc<PlanNames>> {
    let ctx = crate::Context { now: site.now(services.clock.now()), site: site.clone() };
    crate::catalog::plans::plan_with_add_ons(services, &ctx, code).await.ok().flatten().map(Arc::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind the mappings can answer is in [`EMITTED`] and in the catalogue, and every
    /// emitted kind comes out of some mapping.
    #[test]
    fn the_emitted_kinds_are_the_mappings_answers() {
        let events = [
            "account.created",
            "account.updated",
            "account.closed",
            "account.reopened",
            "billing_info.updated",
            "billing_info.removed",
            "subscription.created",
            "subscription.activated",
            "subscription.changed",
            "subscription.updated",
            "subscription.renewed",
            "subscription.trial_ended",
            "subscription.pause_scheduled",
            "subscription.pause_canceled",
            "subscription.paused",
            "subscription.paused_renewal",
            "subscription.resumed",
            "subscription.canceled",
            "subscription.reactivated",
            "subscription.postponed",
            "subscription.past_due",
            "subscription.recovered",
            "subscription.expired",
            "invoice.created",
            "invoice.past_due",
            "invoice.paid",
            "invoice.failed",
            "transaction.approved",
            "transaction.declined",
            "transaction.voided",
            "invoice.dunning",
            "credit_invoice.closed",
            "credit_invoice.voided",
            "credit_invoice.reopened",
            "credit_invoice.processing",
            "credit_payment.created",
            "credit_payment.voided",
            "shipping_address.created",
            "shipping_address.updated",
            "shipping_address.deleted",
            "gift_card.purchased",
            "gift_card.delivered",
            "gift_card.redeemed",
        ];
        let mut answered = std::collections::BTreeSet::new();
        for event in events {
            answered.extend(account_kind(event));
            answered.extend(subscription_kind(event).map(|(k, _)| k));
            for kind in [InvoiceKind::Charge, InvoiceKind::Credit, InvoiceKind::Legacy] {
                for memos in [true, false] {
                    answered.extend(invoice_kind(event, kind, memos));
                }
            }
            for action in ["purchase", "refund", "verify"] {
                answered.extend(transaction_kind(event, action));
            }
            answered.extend(shipping_kind(event));
            answered.extend(gift_card_kind(event));
            answered.extend(credit_payment_kind(event));
        }
        // Dunning events have one kind; a credit payment drawing on a gift card's credit also
        // sends the card's balance.
        answered.insert("new_dunning_event_notification");
        answered.insert("updated_balance_gift_card_notification");
        let emitted: std::collections::BTreeSet<&str> = EMITTED.iter().copied().collect();
        assert_eq!(answered, emitted);
        for kind in EMITTED {
            assert!(rebill_webhooks::kinds::kind(kind).is_some(), "{kind} is in the catalogue");
        }
        assert_eq!(transaction_kind("transaction.declined", "refund"), None, "a declined refund sends none");
        assert_eq!(transaction_kind("transaction.approved", "verify"), None, "verifications send none");
    }
}

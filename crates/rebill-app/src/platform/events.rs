//! Domain events: every business change records one (or a few) in the same database transaction
//! as the change ([`rebill_store::events`]); the webhook worker makes push notifications from the same rows.
//!
//! | Subject | Kinds |
//! |---|---|
//! | account code | `account.created`, `account.updated`, `account.closed`, `account.reopened`, `billing_info.updated`, `billing_info.removed` |
//! | subscription uuid | `subscription.created`, `.activated`, `.changed`, `.updated`, `.renewed`, `.trial_ended`, `.pause_scheduled`, `.pause_canceled` (a scheduled pause dropped by a resume), `.paused`, `.paused_renewal`, `.resumed`, `.canceled`, `.reactivated`, `.postponed`, `.past_due`, `.recovered`, `.expired` |
//! | invoice number | `invoice.created`, `invoice.past_due`, `invoice.dunning`, `invoice.paid`, `invoice.failed`; credit invoices `credit_invoice.closed`, `.voided`, `.reopened`, `.processing` ([`rebill_store::credits`]) |
//! | credit payment uuid | `credit_payment.created`, `credit_payment.voided` |
//! | transaction uuid | `transaction.approved`, `transaction.declined` |
//! | account code | `shipping_address.created`, `.updated`, `.deleted` ([`crate::customers::shipping_addresses`]) |
//! | gift card id | `gift_card.purchased`, `gift_card.delivered`, `gift_card.redeemed` (see [`crate::selling::gift_cards`]) |
//! | gift card product code | `gift_card_product.added`, `gift_card_product.removed` |
//! | coupon code | `coupon.created`, `coupon.updated`, `coupon.expired`, `coupon.restored`, `coupon.codes_generated` (see [`crate::catalog::coupons`]) |
//! | redemption uuid | `redemption.created`, `redemption.removed`; an invoice's use of redemptions is `invoice.discounted` (subject: the invoice number) |
//!
//! Databases older than the events hold `subscription.history` events too: the subscription
//! history they had, kept by the migration (one per accepted action, the action as payload).
//!
//! The payload is a small JSON object: the account code and what the change was (states,
//! amounts, the action a subscription accepted, what settled an invoice).
//!
//!
//! Which events await a reaction is [`reacts_to`]; the reactions themselves run in
//! [`crate::collection::reactions`].

use rebill_store::events::NewEvent;
use serde_json::{Value, json};

use crate::Services;

pub const ACCOUNT_CREATED: &str = "account.created";
pub const ACCOUNT_UPDATED: &str = "account.updated";
pub const ACCOUNT_CLOSED: &str = "account.closed";
pub const ACCOUNT_REOPENED: &str = "account.reopened";
pub const BILLING_INFO_UPDATED: &str = "billing_info.updated";
pub const BILLING_INFO_REMOVED: &str = "billing_info.removed";
pub const SUBSCRIPTION_CREATED: &str = "subscription.created";
pub const SUBSCRIPTION_PAST_DUE: &str = "subscription.past_due";
pub const SUBSCRIPTION_RECOVERED: &str = "subscription.recovered";
pub const SUBSCRIPTION_EXPIRED: &str = "subscription.expired";
pub const INVOICE_CREATED: &str = "invoice.created";
pub const INVOICE_PAST_DUE: &str = "invoice.past_due";
pub const INVOICE_PAID: &str = "invoice.paid";
pub const INVOICE_FAILED: &str = "invoice.failed";
/// A dunning event of an automatically collected invoice: a collection declined, the invoice
/// entering or staying in dunning (payload: `dunning_events_count`, `final`).
pub const INVOICE_DUNNING: &str = "invoice.dunning";
pub const TRANSACTION_APPROVED: &str = "transaction.approved";
pub const TRANSACTION_DECLINED: &str = "transaction.declined";
/// A failed charge invoice written off with Credit Memos (subject: its number).
pub const INVOICE_WRITTEN_OFF: &str = "invoice.written_off";
/// A successful purchase voided before it settled (subject: its uuid).
pub const TRANSACTION_VOIDED: &str = "transaction.voided";
/// A refund invoice settled: what it gives back is given (or, with Credit Memos, kept as credit).
pub const INVOICE_REFUNDED: &str = "invoice.refunded";
/// A refund invoice of a site without Credit Memos failed: the gateway declined the refund.
pub const INVOICE_REFUND_FAILED: &str = "invoice.refund_failed";
/// A credit payment made (see `rebill_store::credits`).
pub const CREDIT_PAYMENT_CREATED: &str = rebill_store::credits::CREDIT_PAYMENT_CREATED;
/// A gift card bought: its payment approved (subject: the card's id).
pub const GIFT_CARD_PURCHASED: &str = "gift_card.purchased";
/// A gift card delivered (subject: the card's id).
pub const GIFT_CARD_DELIVERED: &str = "gift_card.delivered";
/// A gift card redeemed onto a recipient account (subject: the card's id).
pub const GIFT_CARD_REDEEMED: &str = "gift_card.redeemed";

/// An event of `kind` at `at` (site clock) with `payload`, recorded now (service clock); it
/// awaits a reaction when a subscriber reacts to it.
pub fn new(services: &Services, kind: &str, at: i64, payload: Value) -> NewEvent {
    NewEvent {
        kind: kind.to_owned(),
        at,
        recorded_at: services.clock.now(),
        awaits_reaction: reacts_to(kind, &payload),
        payload: payload.to_string(),
    }
}

/// An event of a gift card (`gift_card.*`): the payload names its gifter account, product,
/// currency and face value, and whatever `extra` adds.
pub fn gift_card(
    services: &Services,
    kind: &str,
    at: i64,
    card: &rebill_store::gift_cards::GiftCard,
    extra: Value,
) -> NewEvent {
    let mut payload = json!({
        "gifter_account_code": card.gifter_account_code,
        "product_code": card.product_code,
        "currency": card.currency,
        "unit_amount_in_cents": card.unit_amount,
    });
    if let (Some(map), Some(more)) = (payload.as_object_mut(), extra.as_object()) {
        map.extend(more.clone());
    }
    new(services, kind, at, payload)
}

/// An event of an account (`account.*`, `billing_info.*`): the payload names the account.
pub fn account(services: &Services, kind: &str, at: i64, account_code: &str) -> NewEvent {
    new(services, kind, at, json!({ "account_code": account_code }))
}

/// What settled an invoice in the call that invoiced it (the invoicing caller handles the
/// outcome; nothing reacts to its event).
pub const SETTLED_BY_INVOICING: &str = "invoicing";

/// Whether the subscriptions react to an event: an invoice paid or failed by a later call than
/// the one that invoiced it (a dunning retry, marking it paid or failed, collecting it now). The
/// outcome of the invoicing call itself is its caller's to handle (a declined first payment
/// refuses the creation, a declined renewal makes the subscription past due).
pub fn reacts_to(kind: &str, payload: &Value) -> bool {
    matches!(kind, INVOICE_PAID | INVOICE_FAILED)
        && payload.get("settled_by").and_then(Value::as_str).is_some_and(|by| by != SETTLED_BY_INVOICING)
}

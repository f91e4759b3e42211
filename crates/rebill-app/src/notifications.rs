//! The push notifications of a domain event: which kinds it sends and their bodies (the
//! resources in their notification shapes, [`rebill_webhooks::payload`]), read as they are when
//! the notification is made. The kinds table with the operations that send each is in
//! `docs/webhooks.md`.

use rebill_billing::states::InvoiceState;
use rebill_store::StoreError;
use rebill_store::events::Event;
use rebill_store::invoicing::InvoiceKind;
use rebill_webhooks::payload;

use crate::Services;

/// The notifications an event sends: (kind, body). The resources are read as they are when the
/// notification is made (within a moment of the event). Events that send nothing yet: none.
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
];

/// The notifications of `event`: (kind, body).
pub async fn of(services: &Services, event: &Event) -> Result<Vec<(&'static str, String)>, StoreError> {
    let kind = event.kind.as_str();
    if let Some(kind) = account_kind(kind) {
        let Some(account) = services.store.account(event.site_id, &event.subject).await? else { return Ok(Vec::new()) };
        let body = payload::render(kind, &[payload::account(&account_fields(&account), false)]);
        return Ok(vec![(kind, body)]);
    }
    if let Some((kind, pause)) = subscription_kind(kind) {
        return subscription_notification(services, event, kind, pause).await;
    }
    if kind.starts_with("invoice.") {
        return invoice_notification(services, event).await;
    }
    if kind.starts_with("transaction.") {
        return transaction_notification(services, event).await;
    }
    if kind == rebill_store::credits::CREDIT_PAYMENT_CREATED {
        return credit_payment_notification(services, event).await;
    }
    Ok(Vec::new())
}

/// `<account>` (A1) and `<credit_payment>` of a new credit payment (credit applied, paid out,
/// voided from an invoice's balance, written off).
async fn credit_payment_notification(
    services: &Services,
    event: &Event,
) -> Result<Vec<(&'static str, String)>, StoreError> {
    let Some(p) = services.store.credit_payment(event.site_id, &event.subject).await? else { return Ok(Vec::new()) };
    let Some(account) = services.store.account(event.site_id, &p.account_code).await? else { return Ok(Vec::new()) };
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
    let kind = "new_credit_payment_notification";
    let body =
        payload::render(kind, &[payload::account(&account_fields(&account), true), payload::credit_payment(&fields)]);
    Ok(vec![(kind, body)])
}

/// The notification of an invoice event on a site with Credit Memos (`credit_memos`) or
/// without, for a charge, credit or legacy invoice; `None`: the event sends none.
fn invoice_kind(event: &str, kind: InvoiceKind, credit_memos: bool) -> Option<&'static str> {
    use crate::events::{INVOICE_CREATED, INVOICE_FAILED, INVOICE_PAID, INVOICE_PAST_DUE};
    Some(match (event, kind, credit_memos) {
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
async fn invoice_notification(services: &Services, event: &Event) -> Result<Vec<(&'static str, String)>, StoreError> {
    let Ok(number) = event.subject.parse::<i64>() else { return Ok(Vec::new()) };
    let Some(invoice) = services.store.invoice(event.site_id, number).await? else { return Ok(Vec::new()) };
    let site = services.store.site(&event.site_id.to_string()).await?;
    let Some(kind) = invoice_kind(&event.kind, invoice.kind, site.credit_memos) else { return Ok(Vec::new()) };
    let Some(account) = services.store.account(event.site_id, &invoice.account_code).await? else {
        return Ok(Vec::new());
    };
    let lines = services.store.invoice_lines(invoice.id).await?;
    let mut subscription_ids: Vec<&str> = lines.iter().filter_map(|l| l.line.subscription_uuid.as_deref()).collect();
    subscription_ids.dedup();
    let shape = match (invoice.kind, site.credit_memos) {
        (InvoiceKind::Credit, _) => payload::InvoiceShape::Credit,
        (_, true) => payload::InvoiceShape::Charge,
        (_, false) => payload::InvoiceShape::Legacy,
    };
    let state = match (shape, invoice.state) {
        // Legacy invoices name their states as before 2.10.
        (payload::InvoiceShape::Legacy, InvoiceState::Pending) => "open",
        (payload::InvoiceShape::Legacy, InvoiceState::Paid) => "collected",
        (_, state) => state.as_str(),
    };
    let a = &invoice.amounts;
    let fields = payload::InvoiceFields {
        uuid: &invoice.uuid,
        state,
        origin: &invoice.origin,
        invoice_number: invoice.invoice_number,
        currency: &invoice.currency,
        balance_in_cents: a.balance,
        total_in_cents: a.total,
        tax_in_cents: a.tax,
        subtotal_in_cents: a.subtotal_after_discount,
        subtotal_before_discount_in_cents: a.subtotal_before_discount,
        discount_in_cents: a.discount,
        subscription_ids,
        customer_notes: invoice.terms.customer_notes.as_deref(),
        created_at: invoice.created_at,
        updated_at: invoice.updated_at,
        closed_at: invoice.closed_at,
        po_number: invoice.terms.po_number.as_deref(),
        terms_and_conditions: invoice.terms.terms_and_conditions.as_deref(),
        due_on: invoice.due_on,
        net_terms: invoice.terms.net_terms,
        collection_method: invoice.terms.collection_method.as_str(),
    };
    let with_phone = shape != payload::InvoiceShape::Legacy;
    let body = payload::render(
        kind,
        &[payload::account(&account_fields(&account), with_phone), payload::invoice(&fields, shape)],
    );
    Ok(vec![(kind, body)])
}

/// The notification of a transaction event: a payment approved or declined, a refund made
/// (a declined refund sends none, as with the original), a payment voided; verifications send
/// none (reference §8 8).
fn transaction_kind(event: &str, action: &str) -> Option<&'static str> {
    use crate::events::{TRANSACTION_APPROVED, TRANSACTION_DECLINED, TRANSACTION_VOIDED};
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
    event: &Event,
) -> Result<Vec<(&'static str, String)>, StoreError> {
    let Some(t) = services.store.transaction(event.site_id, &event.subject).await? else { return Ok(Vec::new()) };
    let Some(kind) = transaction_kind(&event.kind, &t.new.action) else { return Ok(Vec::new()) };
    let Some(account) = services.store.account(event.site_id, &t.new.account.account_code).await? else {
        return Ok(Vec::new());
    };
    let invoice = match t.new.invoice_id {
        Some(id) => services.store.invoice_by_id(id).await?,
        None => None,
    };
    let site = services.store.site(&event.site_id.to_string()).await?;
    let (voidable, refundable) = crate::refunds::give_back_flags(&t, site.now(services.clock.now()));
    let r = &t.result;
    let cvv = r.cvv.as_ref().map(|c| (c.code.as_str(), c.message.as_str()));
    let avs = r.avs.as_ref().map(|c| (c.code.as_str(), c.message.as_str()));
    let fields = payload::TransactionFields {
        id: &t.uuid,
        invoice_id: invoice.as_ref().map(|i| i.uuid.as_str()),
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
    let body =
        payload::render(kind, &[payload::account(&account_fields(&account), false), payload::transaction(&fields)]);
    Ok(vec![(kind, body)])
}

/// The notification of an account event.
fn account_kind(event: &str) -> Option<&'static str> {
    Some(match event {
        // A reopened account is announced as a new one, as the original did (reference §8 6).
        crate::events::ACCOUNT_CREATED | crate::events::ACCOUNT_REOPENED => "new_account_notification",
        crate::events::ACCOUNT_UPDATED => "updated_account_notification",
        crate::events::ACCOUNT_CLOSED => "canceled_account_notification",
        crate::events::BILLING_INFO_UPDATED => "billing_info_updated_notification",
        _ => return None,
    })
}

/// The notification of a subscription event, and whether it carries the pause shape.
fn subscription_kind(event: &str) -> Option<(&'static str, bool)> {
    Some(match event {
        crate::events::SUBSCRIPTION_CREATED => ("new_subscription_notification", false),
        // A change applied now or at renewal, or a new renewal date.
        "subscription.changed" | "subscription.postponed" => ("updated_subscription_notification", false),
        "subscription.canceled" => ("canceled_subscription_notification", false),
        // Expired at the end of a canceled term, or terminated.
        crate::events::SUBSCRIPTION_EXPIRED => ("expired_subscription_notification", false),
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
    event: &Event,
    kind: &'static str,
    pause: bool,
) -> Result<Vec<(&'static str, String)>, StoreError> {
    let Some(record) = services.store.subscription(event.site_id, &event.subject).await? else { return Ok(Vec::new()) };
    let Ok(loaded) = crate::subscriptions::Loaded::of(record) else {
        tracing::warn!(subscription = %event.subject, "a stored subscription cannot be read for its notification");
        return Ok(Vec::new());
    };
    let Some(account) = services.store.account(event.site_id, &loaded.details.account_code).await? else {
        return Ok(Vec::new());
    };
    let site = services.store.site(&event.site_id.to_string()).await?;
    let ctx = crate::Context { now: site.now(services.clock.now()), site };
    let terms = &loaded.sub.terms;
    let names = crate::catalog::plan_with_add_ons(services, &ctx, &terms.plan_code).await.ok().flatten();
    let plan_name = names.as_ref().map(|(plan, _)| plan.name.as_str());
    let add_on_name = |code: &str| {
        names.as_ref().and_then(|(_, add_ons)| add_ons.iter().find(|a| a.add_on_code == code)).map(|a| a.name.as_str())
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
    let body = payload::render(
        kind,
        &[payload::account(&account_fields(&account), pause), payload::subscription(&fields, pause)],
    );
    Ok(vec![(kind, body)])
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
        }
        // Credit payments have one kind, whatever their action.
        answered.insert("new_credit_payment_notification");
        let emitted: std::collections::BTreeSet<&str> = EMITTED.iter().copied().collect();
        assert_eq!(answered, emitted);
        for kind in EMITTED {
            assert!(rebill_webhooks::kinds::kind(kind).is_some(), "{kind} is in the catalogue");
        }
        assert_eq!(transaction_kind("transaction.declined", "refund"), None, "a declined refund sends none");
        assert_eq!(transaction_kind("transaction.approved", "verify"), None, "verifications send none");
    }
}

//! The notification kinds rebill sends: the roots of the v2 XML push notifications for the
//! operations rebill has (the webhooks reference, §2). An endpoint may be limited to some of them
//! (`rebill webhooks add --kinds`).

/// Every kind, grouped as the reference groups them.
pub const KINDS: &[&str] = &[
    // Accounts, billing info, shipping addresses.
    "new_account_notification",
    "updated_account_notification",
    "canceled_account_notification",
    "billing_info_updated_notification",
    "new_shipping_address_notification",
    "updated_shipping_address_notification",
    "deleted_shipping_address_notification",
    // Subscriptions.
    "new_subscription_notification",
    "updated_subscription_notification",
    "canceled_subscription_notification",
    "expired_subscription_notification",
    "renewed_subscription_notification",
    "reactivated_account_notification",
    "scheduled_subscription_pause_notification",
    "subscription_pause_modified_notification",
    "subscription_paused_notification",
    "paused_subscription_renewal_notification",
    "subscription_pause_canceled_notification",
    "subscription_resumed_notification",
    // Invoices on sites with Credit Memos: charge and credit invoices.
    "new_charge_invoice_notification",
    "processing_charge_invoice_notification",
    "past_due_charge_invoice_notification",
    "paid_charge_invoice_notification",
    "failed_charge_invoice_notification",
    "new_credit_invoice_notification",
    "processing_credit_invoice_notification",
    "closed_credit_invoice_notification",
    "voided_credit_invoice_notification",
    "reopened_credit_invoice_notification",
    // Invoices on sites without Credit Memos.
    "new_invoice_notification",
    "processing_invoice_notification",
    "closed_invoice_notification",
    "past_due_invoice_notification",
    // Payments.
    "successful_payment_notification",
    "failed_payment_notification",
    "successful_refund_notification",
    "void_payment_notification",
    // Credit payments (Credit Memos).
    "new_credit_payment_notification",
    "voided_credit_payment_notification",
    // Dunning.
    "new_dunning_event_notification",
    // Gift cards.
    "purchased_gift_card_notification",
    "redeemed_gift_card_notification",
    "updated_balance_gift_card_notification",
];

/// The kind named `name`, with or without its `_notification` suffix.
pub fn kind(name: &str) -> Option<&'static str> {
    let name = name.trim();
    let full = if name.ends_with("_notification") { name.to_owned() } else { format!("{name}_notification") };
    KINDS.iter().copied().find(|k| *k == full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_named_with_or_without_their_suffix() {
        assert_eq!(kind("new_account"), Some("new_account_notification"));
        assert_eq!(kind(" paid_charge_invoice_notification "), Some("paid_charge_invoice_notification"));
        assert_eq!(kind("unknown"), None);
        assert_eq!(kind("new_item_notification"), None, "items are not a rebill feature");
        let mut sorted = KINDS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), KINDS.len(), "each kind once");
    }
}

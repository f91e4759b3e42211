//! The transaction error table: every `error_code` with its `error_category`, the message for
//! the customer and the one for the merchant. Shipped as data (`data/transaction_errors.toml`),
//! parsed once on first use.

use std::sync::OnceLock;

use serde::Deserialize;

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TransactionErrorInfo {
    pub code: String,
    pub category: String,
    pub customer_message: String,
    pub merchant_message: String,
}

#[derive(Deserialize)]
struct Table {
    categories: Vec<String>,
    errors: Vec<TransactionErrorInfo>,
}

const DATA: &str = include_str!("../data/transaction_errors.toml");

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    // The file ships inside the binary and is parsed by this crate's tests.
    TABLE.get_or_init(|| toml::from_str(DATA).expect("data/transaction_errors.toml is a valid error table"))
}

/// Every row, in the file's order.
pub fn all() -> &'static [TransactionErrorInfo] {
    &table().errors
}

/// Every `error_category` value.
pub fn categories() -> &'static [String] {
    &table().categories
}

/// The row of `code`.
pub fn lookup(code: &str) -> Option<&'static TransactionErrorInfo> {
    all().iter().find(|e| e.code == code)
}

/// The row of `code`, or the `unknown` row for a code the table does not hold.
pub fn lookup_or_unknown(code: &str) -> &'static TransactionErrorInfo {
    lookup(code).or_else(|| lookup("unknown")).unwrap_or_else(|| &all()[0])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Every code of billing-behaviour.md §3.3 with its category.
    const CODES: &[(&str, &[&str])] = &[
        ("approved", &["approved", "approved_fraud_review"]),
        (
            "soft",
            &[
                "declined",
                "declined_saveable",
                "insufficient_funds",
                "temporary_hold",
                "try_again",
                "too_many_attempts",
                "simultaneous",
                "partial_approval",
                "call_issuer",
                "call_issuer_update_cardholder_data",
                "processor_not_available",
                "cancelled",
                "paypal_primary_declined",
                "paypal_declined_use_alternate",
                "unmapped_partner_error",
                "declined_security_code",
                "roku_zip_code_mismatch",
                "roku_invalid_card_number",
                "exceeds_daily_limit",
                "exceeds_max_amount",
                "issuer_unavailable",
                "payer_authentication_rejected",
                "three_d_secure_connection_error",
                "ach_return",
                "ach_cancel",
                "ach_chargeback",
                "ach_credit_return",
                "ach_validation_exception",
                "ach_exception",
                "no_gateway_found_for_transaction_amount",
                "merch_max_transaction_limit_exceeded",
                "batch_processing_error",
                "transaction_stale_at_gateway",
                "invalid_payment_method",
                "amazon_declined_review",
                "billing_agreement_replaced",
            ],
        ),
        (
            "configuration",
            &[
                "reference_transactions_not_enabled",
                "invalid_gateway_configuration",
                "invalid_login",
                "contact_gateway",
                "cvv_required",
                "currency_not_supported",
                "ssl_error",
                "zero_dollar_auth_not_supported",
                "no_gateway",
                "gateway_account_setup_incomplete",
                "ach_transactions_not_supported",
                "three_d_secure_not_supported",
                "three_d_secure_credential_error",
                "invalid_gateway_access_token",
            ],
        ),
        (
            "hard",
            &[
                "paypal_cannot_pay_self",
                "billing_agreement_not_accepted",
                "billing_agreement_already_accepted",
                "roku_invalid_cib",
                "recurring_mandate_cancelled",
                "declined_exception",
                "declined_missing_data",
                "invalid_data",
                "invalid_amount",
                "invalid_email",
                "declined_card_number",
                "invalid_card_number",
                "invalid_account_number",
                "gateway_token_not_found",
                "expired_card",
                "declined_expiration_date",
                "invalid_merchant_type",
                "invalid_transaction",
                "invalid_issuer",
                "card_type_not_accepted",
                "payment_not_accepted",
                "restricted_card",
                "restricted_card_chargeback",
                "card_not_activated",
                "deposit_referenced_chargeback",
                "customer_canceled_transaction",
                "cardholder_requested_stop",
                "roku_invalid_payment_method",
                "rjs_token_expired",
                "card_blocked",
                "lifecycle_decline",
                "no_billing_information",
                "paypal_invalid_billing_agreement",
                "paypal_hard_decline",
                "paypal_account_issue",
                "paypal_expired_reference_id",
                "contract_not_found",
                "gateway_validation_exception",
                "invalid_name",
                "direct_debit_type_not_accepted",
                "three_d_secure_action_result_token_mismatch",
                "transaction_not_found",
                "transaction_settled",
                "transaction_already_voided",
                "transaction_failed_to_settle",
                "payment_cannot_void_authorization",
                "partial_credits_not_supported",
                "cannot_refund_unsettled_transactions",
                "transaction_cannot_be_refunded",
                "transaction_cannot_be_voided",
                "total_credit_exceeds_capture",
                "transaction_already_refunded",
                "authorization_expired",
                "authorization_already_captured",
                "authorization_amount_depleted",
                "transaction_cannot_be_authorized",
                "transaction_cannot_be_refunded_currently",
                "invalid_billing_agreement_status",
                "billing_agreement_not_found",
                "invalid_payment_method_hard",
            ],
        ),
        (
            "fraud",
            &[
                "fraud_address",
                "fraud_security_code",
                "fraud_stolen_card",
                "fraud_ip_address",
                "fraud_gateway",
                "fraud_too_many_attempts",
                "fraud_advanced_verification",
                "fraud_velocity",
                "fraud_generic",
                "fraud_address_service",
                "fraud_risk_check",
                "fraud_manual_decision",
            ],
        ),
        (
            "communication",
            &[
                "gateway_unavailable",
                "processor_unavailable",
                "gateway_timeout",
                "gateway_error",
                "too_busy",
                "gateway_rate_limited",
                "moneybot_unavailable",
                "moneybot_disconnect",
                "transaction_service_v2_unavailable",
                "transaction_service_v2_disconnect",
            ],
        ),
        ("three_d_secure_required", &["three_d_secure_authentication"]),
        ("three_d_secure_action_required", &["three_d_secure_action_required"]),
        (
            "amazon",
            &[
                "amazon_amount_exceeded",
                "amazon_invalid_authorization_status",
                "amazon_invalid_close_attempt",
                "amazon_invalid_create_order_reference",
                "amazon_invalid_order_status",
                "amazon_not_authorized",
                "amazon_order_not_modifiable",
                "amazon_transaction_count_exceeded",
            ],
        ),
        ("unknown", &["service_error", "unknown"]),
        ("api_error", &["api_error"]),
        ("duplicate", &["duplicate_transaction"]),
        (
            "skles",
            &[
                "vaultly_service_unavailable",
                "service_failed_to_get_token",
                "service_token_not_found",
                "service_credentials_not_found",
                "service_token_mismatch",
            ],
        ),
    ];

    #[test]
    fn every_code_has_a_known_category_and_both_messages() {
        let categories: HashSet<&str> = categories().iter().map(String::as_str).collect();
        assert_eq!(categories.len(), 18);
        for name in ["service", "referral", "invalid", "not_enabled", "not_supported", "skles"] {
            assert!(categories.contains(name), "{name}");
        }
        let mut seen = HashSet::new();
        for e in all() {
            assert!(seen.insert(e.code.as_str()), "{} twice", e.code);
            assert!(categories.contains(e.category.as_str()), "{}: category {}", e.code, e.category);
            for message in [&e.customer_message, &e.merchant_message] {
                assert!(message.ends_with('.') && !message.contains('…'), "{}: {message}", e.code);
            }
        }
    }

    #[test]
    fn the_table_holds_every_documented_code_in_its_category() {
        let mut expected = 0;
        for (category, codes) in CODES {
            for code in *codes {
                let row = lookup(code).unwrap_or_else(|| panic!("{code} missing"));
                assert_eq!(row.category, *category, "{code}");
                expected += 1;
            }
        }
        assert_eq!(all().len(), expected, "the table holds only documented codes");
    }

    #[test]
    fn messages_of_the_codes_the_test_gateway_produces() {
        let cases = [
            (
                "declined",
                "Your transaction was declined. Please use a different card or contact your bank.",
                "The customer's bank has declined their card. The customer will need to contact their bank to learn the cause.",
            ),
            (
                "declined_saveable",
                "The transaction was declined. Please use a different card or contact your bank.",
                "The transaction was declined without specific information.  Please contact your payment gateway for more details or ask the customer to contact their bank.",
            ),
            (
                "insufficient_funds",
                "Your transaction was declined due to insufficient funds in your account. Please use a different card or contact your bank.",
                "The card has insufficient funds to cover the cost of the transaction.",
            ),
            (
                "call_issuer",
                "Your transaction was declined. Please contact your bank for further details or try another card.",
                "The transaction was declined by the payment gateway. Contact the card issuer for more details.",
            ),
            (
                "fraud_address",
                "Your billing address does not match the address on your account. Please update your address or contact your bank.",
                "The payment gateway declined the transaction because the billing address did not match.",
            ),
            (
                "fraud_security_code",
                "The security code you entered does not match. Please update the CVV and try again.",
                "The payment gateway declined the transaction because the security code (CVV) or expiration date did not match.",
            ),
            (
                "fraud_gateway",
                "The transaction was declined. Please use a different card, contact your bank, or contact support.",
                "The payment gateway declined the transaction due to fraud filters enabled in your gateway.",
            ),
            (
                "fraud_ip_address",
                "The transaction was declined. Please contact support.",
                "The payment gateway declined the transaction because it originated from an IP address known for fraudulent transactions.",
            ),
            (
                "expired_card",
                "Your credit card is expired, please update your card.",
                "The payment gateway declined the transaction because the expiration date is expired or does not match.",
            ),
            (
                "invalid_card_number",
                "Your card number is not valid. Please update your card number.",
                "The credit card number is not valid. The customer needs to try a different number.",
            ),
            (
                "declined_card_number",
                "Your card number is not valid. Please update your card number.",
                "The credit card number is not valid. The customer needs to try a different number.",
            ),
            (
                "card_type_not_accepted",
                "Your card type is not accepted. Please try another card.",
                "Your merchant account does not accept this card type or specific transaction.",
            ),
        ];
        for (code, customer, merchant) in cases {
            let row = lookup(code).expect(code);
            assert_eq!((row.customer_message.as_str(), row.merchant_message.as_str()), (customer, merchant), "{code}");
        }
        for code in ["gateway_timeout", "duplicate_transaction"] {
            let row = lookup(code).expect(code);
            assert!(row.merchant_message.len() > 80, "{code}: complete sentence");
        }
        assert_eq!(lookup_or_unknown("no_such_code").code, "unknown");
        assert_eq!(lookup("no_such_code"), None);
    }
}

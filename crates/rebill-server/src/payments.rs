//! Offline payments: `POST /v2/invoices/{invoice_number}/transactions` enters a payment made
//! outside rebill (check, wire transfer, …) on a manual invoice, over
//! [`rebill_app::collection::offline_payments`] (rules: docs/offline-payments.md).
//!
//! The request `<transaction>` takes `payment_method` (required), `amount_in_cents` (default:
//! the invoice's balance), `collected_at`, `description` (at most 50 characters) and
//! `currency` (the invoice's, when sent); any other element is refused (422 `not_supported`).
//! The answer is 201 with `Location: …/v2/transactions/{uuid}` and the transaction (root `type`:
//! its payment method); refusals are 404 for an unknown invoice and 422 field errors under
//! `transaction.` otherwise.

use axum::extract::Request;
use axum::response::Response;
use rebill_app::collection::offline_payments::{self, OfflinePayment};
use rebill_models::api::{self, EndpointId};
use rebill_models::validate::{Operation, Validate};

use crate::request::{Routed, validated};
use crate::respond::{self, field_error, with_location};
use crate::state::AppState;
use crate::views;

/// The elements an offline payment takes.
const ACCEPTED: [&str; 5] = ["payment_method", "amount_in_cents", "collected_at", "description", "currency"];

/// `POST /v2/invoices/{invoice_number}/transactions`.
pub(crate) async fn create_offline_payment(
    state: &AppState,
    call: &Routed<'_, api::CreateOfflinePayment>,
    request: Request,
) -> Response {
    let ctx = &call.ctx.wire;
    let body = match call.decode_optional(state, request).await {
        Ok(body) => body.unwrap_or_default(),
        Err(refusal) => return refusal,
    };
    // Nothing is required by the schema here: the use case names what is missing.
    if let Err(refusal) = validated(call, &body, Operation::Update) {
        return refusal;
    }
    if let Some(element) = body.given().into_iter().find(|e| !ACCEPTED.contains(e)) {
        let field = format!("transaction.{element}");
        return field_error(ctx, &field, "not_supported", "is not accepted on an offline payment");
    }
    let payment = OfflinePayment {
        payment_method: body.payment_method,
        collected_at: body.collected_at.map(|t| t.timestamp()),
        amount_in_cents: body.amount_in_cents,
        description: body.request_description,
        currency: body.currency,
    };
    match offline_payments::enter(state, &call.context(), &call.params[0], &payment).await {
        Ok(entered) => {
            let location = EndpointId::GetTransaction.endpoint().render(&[&entered.transaction.uuid]);
            with_location(call.answer(&views::transaction_view(&entered.transaction, call.ctx.now)), ctx, &location)
        }
        Err(e) => respond::app_error(ctx, "transaction", e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rebill_app::platform::model::billing_info::{BillingFields, PaymentKind};
    use rebill_app::platform::model::invoicing::{
        AccountSnapshot, NewTransaction, Transaction, TransactionResult, TransactionStatus,
    };

    fn offline(payment_method: &str, kind: PaymentKind) -> Transaction {
        Transaction {
            id: 1,
            uuid: "u1".into(),
            site_id: 1,
            invoice_number: Some(1001),
            new: NewTransaction {
                idempotency_key: "offline:1".into(),
                payment_reference: None,
                account_id: 7,
                invoice_id: Some(3),
                subscription_uuid: None,
                action: "purchase".into(),
                amount: 500,
                tax: 0,
                currency: "USD".into(),
                kind,
                payment_method: payment_method.into(),
                source: "transaction".into(),
                origin: "api".into(),
                recurring: false,
                test: true,
                gateway_type: offline_payments::MANUAL_GATEWAY_TYPE.into(),
                description: Some("Check 1234".into()),
                original_transaction_id: None,
                account: AccountSnapshot { account_code: "a1".into(), ..AccountSnapshot::default() },
                billing: BillingFields::default(),
            },
            result: TransactionResult {
                status: TransactionStatus::Success,
                reference: None,
                approval_code: None,
                message: Some(offline_payments::MESSAGE.into()),
                fraud_review: false,
                failure: None,
                cvv: None,
                avs: None,
                collected_at: Some(1_800_000_000),
            },
            original_transaction_uuid: None,
            refunded: 0,
            created_at: 1_800_000_000,
            updated_at: 1_800_000_000,
        }
    }

    /// An offline payment shows its payment method as its type, no gateway, and can be
    /// refunded; other transactions keep their billing info type and gateway.
    #[test]
    fn offline_payments_show_their_method_as_their_type() {
        let view = views::transaction_view(&offline("check", PaymentKind::BankAccount), 1_800_000_000);
        assert_eq!(view.kind.as_deref(), Some("check"));
        assert_eq!(view.payment_method.as_deref(), Some("check"));
        assert_eq!(view.gateway_type, None);
        assert_eq!((view.refundable, view.voidable), (Some(true), Some(false)));
        assert_eq!(view.message.as_deref(), Some(offline_payments::MESSAGE));
        let mut card = offline("credit_card", PaymentKind::CreditCard);
        card.new.gateway_type = "test".into();
        let view = views::transaction_view(&card, 1_800_000_000);
        assert_eq!((view.kind.as_deref(), view.gateway_type.as_deref()), (Some("credit_card"), Some("test")));
    }

    #[test]
    fn only_the_offline_payment_elements_are_accepted() {
        let body = rebill_models::Transaction {
            payment_method: Some("check".into()),
            amount_in_cents: Some(1),
            collected_at: Some(chrono::DateTime::UNIX_EPOCH),
            request_description: Some("d".into()),
            currency: Some("USD".into()),
            ..rebill_models::Transaction::default()
        };
        assert!(body.given().iter().all(|e| ACCEPTED.contains(e)), "{:?}", body.given());
        let other = rebill_models::Transaction { accounting_code: Some("x".into()), ..body };
        assert_eq!(other.given().into_iter().find(|e| !ACCEPTED.contains(e)), Some("accounting_code"));
    }
}

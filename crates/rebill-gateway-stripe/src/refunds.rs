//! Refunds and voids: Stripe Refunds of a PaymentIntent, and the cancel of one not captured.

use rebill_billing::gateway::{Decline, Outcome, RefundRequest, VoidRequest};
use serde_json::Value;

use crate::StripeGateway;
use crate::errors::{decline, text};
use crate::http::{Answer, Form, MAX_RETRIES, Method, Sent, backoff, form, pending_after};
use crate::payments::{Found, approval, invalid_amount};
use crate::reference::id_with_prefix;

/// What a refund is for: a refund proper, or the full refund that voids a purchase.
#[derive(Clone, Copy)]
enum Purpose {
    Refund,
    Void,
}

impl Purpose {
    /// The decline code of Stripe refusing it.
    fn refused(self) -> &'static str {
        match self {
            Purpose::Refund => "transaction_cannot_be_refunded",
            Purpose::Void => "transaction_cannot_be_voided",
        }
    }

    fn key_prefix(self) -> &'static str {
        match self {
            Purpose::Refund => "rebill-refund-",
            Purpose::Void => "rebill-void-",
        }
    }
}

/// The decline of Stripe refusing a refund, a void or a read for them: the refusal's code
/// for a 4xx with Stripe's code kept, but a bad key, a rate limit or Stripe's own failure as
/// such (they say nothing of the purchase).
fn refused(answer: &Answer, purpose: Purpose) -> Decline {
    let mapped = answer.decline();
    match answer.status {
        401 | 429 | 500..=599 => mapped,
        _ => Decline { code: purpose.refused(), reference: None, cvv_result: None, avs_result: None, ..mapped },
    }
}

/// The outcome of a Refund object: approved with its id unless it `failed` or was `canceled`.
fn refund_outcome(refund: &Value, purpose: Purpose) -> Result<String, Box<Decline>> {
    let Some(id) = text(refund, "id").and_then(|id| id_with_prefix(id, "re_")) else {
        return Err(Box::new(decline("gateway_error", "unexpected_answer:refund")));
    };
    match text(refund, "status") {
        Some(status @ ("failed" | "canceled")) => {
            let reason = text(refund, "failure_reason").unwrap_or(status);
            Err(Box::new(Decline { reference: Some(id.to_owned()), ..decline(purpose.refused(), reason) }))
        }
        _ => Ok(id.to_owned()),
    }
}

impl StripeGateway {
    /// [`Gateway::refund`](rebill_billing::gateway::Gateway::refund).
    pub(crate) async fn refund_payment(&self, request: &RefundRequest<'_>) -> Outcome {
        if request.amount_in_cents <= 0 {
            return Outcome::Declined(invalid_amount());
        }
        let Some(intent) = id_with_prefix(request.reference, "pi_") else {
            return Outcome::Declined(decline("transaction_cannot_be_refunded", "invalid_reference"));
        };
        match self.give_back(intent, Some(request.amount_in_cents), request.idempotency_key, Purpose::Refund).await {
            Ok(refund_id) => Outcome::Approved(approval(refund_id)),
            Err(outcome) => *outcome,
        }
    }

    /// [`Gateway::void`](rebill_billing::gateway::Gateway::void).
    pub(crate) async fn void_payment(&self, request: &VoidRequest<'_>) -> Outcome {
        if request.amount_in_cents <= 0 {
            return Outcome::Declined(invalid_amount());
        }
        let Some(intent) = id_with_prefix(request.reference, "pi_") else {
            return Outcome::Declined(decline("transaction_cannot_be_voided", "invalid_reference"));
        };
        let path = format!("/v1/payment_intents/{intent}");
        let current = match self.http.call(Method::Get, &path, &Form::new(), None).await {
            Sent::Answered(a) if a.is_success() => a.body,
            Sent::Answered(a) if a.retry_safe() => {
                return Outcome::Pending(pending_after(&refused(&a, Purpose::Void), None));
            }
            Sent::Answered(a) => return Outcome::Declined(refused(&a, Purpose::Void)),
            Sent::Lost(lost) => return Outcome::Pending(lost.pending(None)),
        };
        let voided = || Outcome::Approved(approval(intent.to_owned()));
        match text(&current, "status") {
            Some("canceled") => voided(),
            Some("succeeded") => match self.give_back(intent, None, request.idempotency_key, Purpose::Void).await {
                Ok(_) => voided(),
                Err(outcome) => *outcome,
            },
            // Nothing captured: the intent is canceled and no money moves.
            Some("requires_capture" | "requires_confirmation" | "requires_action" | "requires_payment_method") => {
                let path = format!("/v1/payment_intents/{intent}/cancel");
                let header = request.idempotency_key.map(|k| format!("{}{k}", Purpose::Void.key_prefix()));
                match self.http.call(Method::Post, &path, &Form::new(), header.as_deref()).await {
                    Sent::Answered(a) if a.is_success() => voided(),
                    Sent::Answered(a) if a.retry_safe() => {
                        Outcome::Pending(pending_after(&refused(&a, Purpose::Void), Some(intent.to_owned())))
                    }
                    Sent::Answered(a) => Outcome::Declined(refused(&a, Purpose::Void)),
                    Sent::Lost(lost) => Outcome::Pending(lost.pending(Some(intent.to_owned()))),
                }
            }
            status => Outcome::Declined(decline("transaction_cannot_be_voided", status.unwrap_or("unknown_status"))),
        }
    }

    /// Refunds (`amount`, or all that is left) of a PaymentIntent, once per idempotency key:
    /// with a key, a refund of the intent made under it earlier is answered instead (looked up
    /// before the first try and whenever an answer is lost); a lost answer is tried again at
    /// most [`MAX_RETRIES`] times. Answers the refund's id, or the outcome otherwise: a decline
    /// when Stripe refused it, [`Outcome::Pending`] when no definite answer came (the refund
    /// may have been made, or may still be).
    async fn give_back(
        &self,
        intent: &str,
        amount: Option<i64>,
        key: Option<&str>,
        purpose: Purpose,
    ) -> Result<String, Box<Outcome>> {
        let settled = |found: Result<String, Box<Decline>>| found.map_err(|d| Box::new(Outcome::Declined(*d)));
        if let Some(key) = key {
            match self.find_refund(intent, key).await {
                Ok(Found::Object(refund)) => return settled(refund_outcome(&refund, purpose)),
                Ok(Found::Nothing) => {}
                Err(lost) => return Err(Box::new(Outcome::Pending(lost.pending(None)))),
            }
        }
        let mut params = form([("payment_intent", intent)]);
        if let Some(amount) = amount {
            params.push(("amount".to_owned(), amount.to_string()));
        }
        if let Some(key) = key {
            params.push(("metadata[rebill_attempt]".to_owned(), key.to_owned()));
        }
        let header = key.map(|k| format!("{}{k}", purpose.key_prefix()));
        let mut tries = 0;
        loop {
            let failure = match self.http.once(Method::Post, "/v1/refunds", &params, header.as_deref()).await {
                Sent::Answered(a) if a.is_success() => return settled(refund_outcome(&a.body, purpose)),
                Sent::Answered(a) if !a.retry_safe() => return Err(Box::new(Outcome::Declined(refused(&a, purpose)))),
                Sent::Answered(a) => refused(&a, purpose),
                Sent::Lost(lost) => lost.decline(),
            };
            let Some(key) = key else {
                return Err(Box::new(Outcome::Pending(pending_after(&failure, None))));
            };
            tracing::warn!(
                code = failure.code,
                tries = tries + 1,
                "stripe: a refund without a usable answer; looking it up"
            );
            match self.find_refund(intent, key).await {
                Ok(Found::Object(refund)) => return settled(refund_outcome(&refund, purpose)),
                Ok(Found::Nothing) if tries < MAX_RETRIES => {
                    tokio::time::sleep(backoff(tries)).await;
                    tries += 1;
                }
                // The refund may have been made, or may still be: not known.
                Ok(Found::Nothing) | Err(_) => return Err(Box::new(Outcome::Pending(pending_after(&failure, None)))),
            }
        }
    }

    /// The refund of `intent` made under `key`, if any.
    async fn find_refund(&self, intent: &str, key: &str) -> Result<Found, crate::http::Lost> {
        let filters = form([("payment_intent", intent)]);
        self.scan("/v1/refunds", &filters, |refund| text(&refund["metadata"], "rebill_attempt") == Some(key)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn refund_objects_answer_by_status() {
        assert_eq!(
            refund_outcome(&json!({"id": "re_1", "status": "succeeded"}), Purpose::Refund).ok().as_deref(),
            Some("re_1")
        );
        assert!(refund_outcome(&json!({"id": "re_1", "status": "pending"}), Purpose::Refund).is_ok());
        let d = refund_outcome(
            &json!({"id": "re_2", "status": "failed", "failure_reason": "expired_or_canceled_card"}),
            Purpose::Refund,
        )
        .expect_err("failed");
        assert_eq!(d.code, "transaction_cannot_be_refunded");
        assert_eq!(d.gateway_error_code.as_deref(), Some("expired_or_canceled_card"));
        assert_eq!(d.reference.as_deref(), Some("re_2"));
        let d = refund_outcome(&json!({"id": "re_3", "status": "canceled"}), Purpose::Void).expect_err("canceled");
        assert_eq!(d.code, "transaction_cannot_be_voided");
    }

    #[test]
    fn refusals_keep_stripes_code() {
        let answer = |status, body| Answer { status, body, should_retry: None };
        let d = refused(
            &answer(400, json!({"error": {"type": "invalid_request_error", "code": "charge_already_refunded"}})),
            Purpose::Refund,
        );
        assert_eq!(
            (d.code, d.gateway_error_code.as_deref()),
            ("transaction_cannot_be_refunded", Some("charge_already_refunded"))
        );
        assert_eq!(refused(&answer(401, json!({})), Purpose::Refund).code, "invalid_login");
        assert_eq!(refused(&answer(429, json!({})), Purpose::Void).code, "gateway_rate_limited");
        assert_eq!(refused(&answer(502, serde_json::Value::Null), Purpose::Void).code, "gateway_error");
    }
}

//! The account's own records for reconciliation: PaymentIntents and Refunds made since a time.

use rebill_billing::gateway::{GatewayRecord, RecordKind, RecordState, Records, RecordsError};
use serde_json::Value;

use crate::StripeGateway;
use crate::errors::text;
use crate::http::{Form, Method, Sent, form};
use crate::reference::is_id;

/// Pages of 100 objects read per list, at most (100,000 intents and as many refunds): a window
/// holding more is reported incomplete.
pub(crate) const RECORD_PAGES: usize = 1000;

/// What a PaymentIntent stands for as a record: `succeeded` moved `amount_received`;
/// `requires_capture` holds the amount; `processing` is moving; anything else moved nothing.
fn intent_record(intent: &Value) -> Option<GatewayRecord> {
    let id = text(intent, "id").filter(|id| id.starts_with("pi_"))?;
    let amount = intent["amount"].as_i64().unwrap_or(0);
    let (state, amount) = match text(intent, "status") {
        Some("succeeded") => (RecordState::Moved, intent["amount_received"].as_i64().unwrap_or(0)),
        Some("requires_capture") => (RecordState::Held, intent["amount_capturable"].as_i64().unwrap_or(amount)),
        Some("processing") => (RecordState::Moving, amount),
        _ => (RecordState::Nothing, amount),
    };
    Some(GatewayRecord {
        kind: RecordKind::Payment,
        reference: id.to_owned(),
        attempt: text(&intent["metadata"], "rebill_attempt").map(str::to_owned),
        payment: None,
        state,
        amount,
        currency: text(intent, "currency").unwrap_or_default().to_ascii_uppercase(),
        created_at: intent["created"].as_i64().unwrap_or(0),
    })
}

/// What a Refund stands for as a record: `succeeded` and `pending` (on its way) moved its
/// amount; `requires_action` is moving; `failed` and `canceled` moved nothing.
fn refund_record(refund: &Value) -> Option<GatewayRecord> {
    let id = text(refund, "id").filter(|id| id.starts_with("re_"))?;
    let state = match text(refund, "status") {
        Some("failed" | "canceled") => RecordState::Nothing,
        Some("requires_action") => RecordState::Moving,
        _ => RecordState::Moved,
    };
    let intent = &refund["payment_intent"];
    Some(GatewayRecord {
        kind: RecordKind::Refund,
        reference: id.to_owned(),
        attempt: text(&refund["metadata"], "rebill_attempt").map(str::to_owned),
        payment: intent.as_str().or_else(|| intent["id"].as_str()).map(str::to_owned),
        state,
        amount: refund["amount"].as_i64().unwrap_or(0),
        currency: text(refund, "currency").unwrap_or_default().to_ascii_uppercase(),
        created_at: refund["created"].as_i64().unwrap_or(0),
    })
}

impl StripeGateway {
    /// [`Gateway::records`](rebill_billing::gateway::Gateway::records): the PaymentIntents
    /// (`GET /v1/payment_intents?created[gte]=…`) and Refunds (`GET /v1/refunds?created[gte]=…`)
    /// made since `since`, every page (100 a page, newest first, at most [`RECORD_PAGES`]).
    pub(crate) async fn list_records(&self, since: i64) -> Result<Records, RecordsError> {
        let (intents, all_intents) = self.list_since("/v1/payment_intents", since).await?;
        let (refunds, all_refunds) = self.list_since("/v1/refunds", since).await?;
        let mut records: Vec<GatewayRecord> = intents.iter().filter_map(intent_record).collect();
        records.extend(refunds.iter().filter_map(refund_record));
        Ok(Records { records, complete: all_intents && all_refunds })
    }

    /// Every object of a list made since `since`, and whether the list was read to its end.
    async fn list_since(&self, path: &str, since: i64) -> Result<(Vec<Value>, bool), RecordsError> {
        let filters: Form = form([("created[gte]", since.to_string().as_str()), ("limit", "100")]);
        let mut after: Option<String> = None;
        let mut objects = Vec::new();
        for _ in 0..RECORD_PAGES {
            let mut params = filters.clone();
            if let Some(after) = &after {
                params.push(("starting_after".to_owned(), after.clone()));
            }
            let page = match self.http.call(Method::Get, path, &params, None).await {
                Sent::Answered(a) if a.is_success() => a.body,
                Sent::Answered(a) => {
                    return Err(RecordsError::Unavailable(format!("{path} answered {}", a.status)));
                }
                Sent::Lost(lost) => {
                    return Err(RecordsError::Unavailable(format!("{path}: {}", lost.decline().code)));
                }
            };
            let data = page["data"].as_array().cloned().unwrap_or_default();
            let last = data.last().and_then(|o| text(o, "id")).filter(|id| is_id(id)).map(str::to_owned);
            objects.extend(data);
            match last {
                Some(id) if page["has_more"].as_bool() == Some(true) => after = Some(id),
                _ => return Ok((objects, true)),
            }
        }
        Ok((objects, false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn intents_and_refunds_become_records() {
        let r = intent_record(&json!({"id": "pi_1", "status": "succeeded", "amount": 900, "amount_received": 900,
            "currency": "usd", "created": 7, "metadata": {"rebill_attempt": "k1"}}))
        .expect("a record");
        assert_eq!(
            (r.kind, r.state, r.amount, r.attempt.as_deref(), r.currency.as_str(), r.created_at),
            (RecordKind::Payment, RecordState::Moved, 900, Some("k1"), "USD", 7)
        );
        let held = intent_record(&json!({"id": "pi_2", "status": "requires_capture", "amount": 500,
            "amount_capturable": 500, "metadata": {}}))
        .expect("a record");
        assert_eq!((held.state, held.amount, held.attempt), (RecordState::Held, 500, None));
        let failed = intent_record(&json!({"id": "pi_3", "status": "requires_payment_method", "amount": 500}))
            .expect("a record");
        assert_eq!(failed.state, RecordState::Nothing);
        assert_eq!(
            intent_record(&json!({"id": "pi_4", "status": "processing", "amount": 5})).map(|r| r.state),
            Some(RecordState::Moving)
        );
        assert!(intent_record(&json!({"id": "ch_1", "status": "succeeded"})).is_none());

        let refund = refund_record(&json!({"id": "re_1", "status": "pending", "amount": 300,
            "payment_intent": "pi_1", "metadata": {"rebill_attempt": "void:k1"}}))
        .expect("a record");
        assert_eq!(
            (refund.kind, refund.state, refund.amount, refund.payment.as_deref(), refund.attempt.as_deref()),
            (RecordKind::Refund, RecordState::Moved, 300, Some("pi_1"), Some("void:k1"))
        );
        let failed = refund_record(&json!({"id": "re_2", "status": "failed", "amount": 300})).expect("a record");
        assert_eq!(failed.state, RecordState::Nothing);
    }
}

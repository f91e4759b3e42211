//! Storing cards (customers and PaymentMethods), verifications (SetupIntents) and purchases
//! (PaymentIntents), with the look-up that keeps a purchase from charging twice.

use rebill_billing::card::Card;
use rebill_billing::gateway::{Approval, AvsAddress, Decline, Outcome, PaymentMethod, PaymentRequest, Pending};
use serde_json::Value;

use crate::StripeGateway;
use crate::errors::{card_checks, charge_checks, decline, decline_from_error, text};
use crate::http::{Answer, Form, Lost, MAX_RETRIES, Method, Sent, backoff, form, pending_after};
use crate::reference::{StoredMethod, id_with_prefix, is_id};

/// Pages of 100 PaymentIntents scanned by a look-up, at most.
pub(crate) const LOOKUP_PAGES: usize = 20;

pub(crate) fn token_not_found() -> Decline {
    decline("gateway_token_not_found", "invalid_reference")
}

pub(crate) fn no_bank_accounts() -> Decline {
    decline("ach_transactions_not_supported", "bank_accounts_not_supported")
}

/// A resumed attempt found nothing made under its key, and its key may be forgotten: nothing
/// reached Stripe that will still act, so nothing was charged.
pub(crate) fn not_found() -> Decline {
    decline("gateway_timeout", "attempt_not_found")
}

pub(crate) fn invalid_amount() -> Decline {
    decline("invalid_amount", "amount_not_positive")
}

/// An approval with no check results.
pub(crate) fn approval(reference: String) -> Approval {
    Approval {
        reference,
        code: "approved",
        cvv_result: None,
        avs_result: None,
        chargeback_expected: false,
        stored: None,
    }
}

/// A Stripe object's id, when it is one of the expected prefix.
fn object_id(object: &Value, prefix: &str) -> Option<String> {
    text(object, "id").and_then(|id| id_with_prefix(id, prefix)).map(str::to_owned)
}

/// An answer that is not the object asked for.
fn unexpected(what: &str) -> Decline {
    decline("gateway_error", format!("unexpected_answer:{what}"))
}

/// What a look-up found.
pub(crate) enum Found {
    Object(Value),
    Nothing,
}

impl StripeGateway {
    /// `POST /v1/customers`: a new customer, its id.
    async fn create_customer(&self, key: Option<&str>) -> Result<String, Box<Decline>> {
        let header = key.map(|k| format!("{k}-customer"));
        let customer =
            self.http.call(Method::Post, "/v1/customers", &Form::new(), header.as_deref()).await.into_result()?;
        object_id(&customer, "cus_").ok_or_else(|| Box::new(unexpected("customer")))
    }

    /// Stores a card: the customer of `replacing` when it is a Stripe reference (else a new
    /// customer), a new PaymentMethod attached to it (the attach is where Stripe checks the
    /// card). With `retire`, the replaced method of the same customer is detached afterwards
    /// (a failed detach is only logged). Answers the stored method and the attached
    /// PaymentMethod object. `key`: the prefix of the calls' idempotency keys (from the
    /// attempt's key), when there is one.
    pub(crate) async fn store_card(
        &self,
        card: &Card,
        address: &AvsAddress<'_>,
        replacing: Option<&str>,
        retire: bool,
        key: Option<&str>,
    ) -> Result<(StoredMethod, Value), Box<Decline>> {
        let old = replacing.and_then(StoredMethod::parse);
        let customer = match &old {
            Some(old) => old.customer.clone(),
            None => self.create_customer(key).await?,
        };
        let mut params = form([
            ("type", "card"),
            ("card[number]", &card.number),
            ("card[exp_month]", &card.expiry.month.to_string()),
            ("card[exp_year]", &card.expiry.year.to_string()),
        ]);
        if let Some(cvv) = &card.cvv {
            params.push(("card[cvc]".to_owned(), cvv.clone()));
        }
        if let Some(street) = address.street {
            params.push(("billing_details[address][line1]".to_owned(), street.to_owned()));
        }
        if let Some(postal) = address.postal_code {
            params.push(("billing_details[address][postal_code]".to_owned(), postal.to_owned()));
        }
        let header = key.map(|k| format!("{k}-method"));
        let method =
            self.http.call(Method::Post, "/v1/payment_methods", &params, header.as_deref()).await.into_result()?;
        let method_id = object_id(&method, "pm_").ok_or_else(|| Box::new(unexpected("payment_method")))?;
        let (customer, attached) = match self.attach(&method_id, &customer, key).await {
            Sent::Answered(a) if a.is_success() => (customer, a.body),
            // The replaced method's customer is gone: a new customer takes the card.
            Sent::Answered(a) if old.is_some() && customer_missing(&a) => {
                tracing::warn!("stripe: the customer of the replaced payment method is gone; storing under a new one");
                let key = key.map(|k| format!("{k}-again"));
                let customer = self.create_customer(key.as_deref()).await?;
                let attached = self.attach(&method_id, &customer, key.as_deref()).await.into_result()?;
                (customer, attached)
            }
            other => return Err(other.into_result().err().unwrap_or_else(|| Box::new(unexpected("attach")))),
        };
        if retire && let Some(old) = old.filter(|o| o.customer == customer && o.payment_method != method_id) {
            let path = format!("/v1/payment_methods/{}/detach", old.payment_method);
            let header = key.map(|k| format!("{k}-detach"));
            if let Err(d) = self.http.call(Method::Post, &path, &Form::new(), header.as_deref()).await.into_result() {
                tracing::warn!(
                    code = d.code,
                    gateway_code = d.gateway_error_code.as_deref().unwrap_or(""),
                    "stripe: the replaced payment method could not be detached"
                );
            }
        }
        Ok((StoredMethod { customer, payment_method: method_id }, attached))
    }

    async fn attach(&self, method_id: &str, customer: &str, key: Option<&str>) -> Sent {
        let path = format!("/v1/payment_methods/{method_id}/attach");
        let header = key.map(|k| format!("{k}-attach"));
        self.http.call(Method::Post, &path, &form([("customer", customer)]), header.as_deref()).await
    }

    /// [`Gateway::store_payment_method`](rebill_billing::gateway::Gateway::store_payment_method).
    pub(crate) async fn store(
        &self,
        method: PaymentMethod<'_>,
        replacing: Option<&str>,
    ) -> Result<String, Box<Decline>> {
        match method {
            PaymentMethod::Card(card) => {
                // No attempt key reaches a bare store: its calls go without one (no money moves;
                // a repeat leaves at most an unused customer).
                let (stored, _) = self.store_card(card, &AvsAddress::default(), replacing, true, None).await?;
                Ok(stored.reference())
            }
            PaymentMethod::BankAccount(_) => Err(Box::new(no_bank_accounts())),
            PaymentMethod::Stored { reference } => match StoredMethod::parse(reference) {
                Some(_) => Ok(reference.to_owned()),
                None => Err(Box::new(token_not_found())),
            },
        }
    }

    /// [`Gateway::verify`](rebill_billing::gateway::Gateway::verify).
    pub(crate) async fn verify_payment(&self, request: &PaymentRequest<'_>) -> Outcome {
        match request.method {
            PaymentMethod::Card(card) => {
                let key = request.idempotency_key.map(|k| format!("rebill-verify-{k}"));
                match self.store_card(card, &request.address, request.replacing, true, key.as_deref()).await {
                    Ok((stored, attached)) => {
                        let (cvv_result, avs_result) = card_checks(&attached["card"]["checks"]);
                        Outcome::Approved(Approval {
                            cvv_result,
                            avs_result,
                            stored: Some(stored.reference()),
                            ..approval(stored.payment_method)
                        })
                    }
                    Err(d) => Outcome::Declined(*d),
                }
            }
            PaymentMethod::BankAccount(_) => Outcome::Declined(no_bank_accounts()),
            PaymentMethod::Stored { reference } => match StoredMethod::parse(reference) {
                Some(stored) => self.verify_stored(&stored, request.idempotency_key).await,
                None => Outcome::Declined(token_not_found()),
            },
        }
    }

    /// A SetupIntent of the stored method, confirmed at once.
    async fn verify_stored(&self, stored: &StoredMethod, key: Option<&str>) -> Outcome {
        let params = form([
            ("customer", stored.customer.as_str()),
            ("usage", "off_session"),
            ("payment_method_types[]", "card"),
        ]);
        let create_key = key.map(|k| format!("rebill-verify-{k}"));
        let sent = self.http.call(Method::Post, "/v1/setup_intents", &params, create_key.as_deref()).await;
        let intent = match sent.into_result() {
            Ok(intent) => intent,
            Err(d) => return Outcome::Declined(*d),
        };
        let Some(intent_id) = object_id(&intent, "seti_") else {
            return Outcome::Declined(unexpected("setup_intent"));
        };
        let path = format!("/v1/setup_intents/{intent_id}/confirm");
        let confirm_key = key.map(|k| format!("rebill-verify-{k}-confirm"));
        let params = form([("payment_method", stored.payment_method.as_str())]);
        let confirmed = match self.http.call(Method::Post, &path, &params, confirm_key.as_deref()).await {
            Sent::Answered(a) if a.is_success() => a.body,
            Sent::Answered(a) => {
                let mut d = a.decline();
                d.reference = d.reference.or(Some(intent_id));
                return Outcome::Declined(d);
            }
            Sent::Lost(lost) => return Outcome::Declined(lost.decline()),
        };
        match text(&confirmed, "status") {
            Some("succeeded") => Outcome::Approved(approval(intent_id)),
            Some("requires_action") => Outcome::Declined(Decline {
                reference: Some(intent_id),
                ..decline("three_d_secure_action_required", "requires_action")
            }),
            status => {
                let mut d = match confirmed.get("last_setup_error").filter(|e| e.is_object()) {
                    Some(error) => decline_from_error(402, &serde_json::json!({ "error": error })),
                    None => decline("declined", status.unwrap_or("unknown_status")),
                };
                d.reference = Some(intent_id);
                Outcome::Declined(d)
            }
        }
    }

    /// [`Gateway::purchase`](rebill_billing::gateway::Gateway::purchase).
    pub(crate) async fn purchase_payment(&self, request: &PaymentRequest<'_>) -> Outcome {
        if request.amount_in_cents <= 0 {
            return Outcome::Declined(invalid_amount());
        }
        match request.method {
            PaymentMethod::BankAccount(_) => Outcome::Declined(no_bank_accounts()),
            PaymentMethod::Stored { reference } => match StoredMethod::parse(reference) {
                Some(stored) => self.charge(&stored, request).await,
                None => Outcome::Declined(token_not_found()),
            },
            PaymentMethod::Card(card) => {
                // A resumed attempt may have stored the card and charged it already. Its
                // customer is learnt by storing the card again under the same keys: while
                // Stripe keeps them, each call answers what the first one made (the same
                // customer and payment method), and the charge is then looked up by that
                // customer. Once the keys may be forgotten, the customer cannot be learnt
                // from a look-up Stripe offers (no paging through the account's intents): the
                // outcome is not known. (rebill itself charges stored methods only.)
                if request.resumed && request.idempotency_key.is_some() && !request.may_resend {
                    return Outcome::Pending(Pending { code: "gateway_error", reference: None });
                }
                // The card is stored under the replaced method's customer when there is one,
                // but the replaced method is kept: the purchase does not replace it.
                let key = request.idempotency_key.map(|k| format!("rebill-store-{k}"));
                let stored =
                    match self.store_card(card, &request.address, request.replacing, false, key.as_deref()).await {
                        Ok((stored, _)) => stored,
                        Err(d) => return Outcome::Declined(*d),
                    };
                match self.charge(&stored, request).await {
                    Outcome::Approved(a) => Outcome::Approved(Approval { stored: Some(stored.reference()), ..a }),
                    declined => declined,
                }
            }
        }
    }

    /// Charges a stored method with a PaymentIntent, confirmed at once and captured right after,
    /// never twice for one idempotency key (see the crate documentation).
    async fn charge(&self, stored: &StoredMethod, request: &PaymentRequest<'_>) -> Outcome {
        let key = request.idempotency_key;
        if request.resumed
            && let Some(key) = key
        {
            match self.find_intent(key, &stored.customer).await {
                Ok(Found::Object(intent)) => return self.answer_intent(intent, request).await,
                // Sent again under the same key: Stripe answers the first request's result (or
                // 409 while it still runs) instead of charging again.
                Ok(Found::Nothing) if request.may_resend => {}
                // The key may be forgotten by now, and nothing was made under it.
                Ok(Found::Nothing) => return Outcome::Declined(not_found()),
                // What the earlier call did cannot be learnt yet.
                Err(lost) => return Outcome::Pending(lost.pending(None)),
            }
        }
        match self.create_intent(stored, request).await {
            Ok(intent) => self.answer_intent(intent, request).await,
            Err(outcome) => outcome,
        }
    }

    /// Creates the attempt's PaymentIntent, confirmed and captured in the one call
    /// (`confirm=true`, `capture_method=automatic`): the charge is one request, and Stripe's
    /// `Idempotency-Key` keeps a second request of the attempt from charging again. A lost
    /// answer is looked up before the create is sent again. `Err`: the outcome to answer as it
    /// is.
    async fn create_intent(&self, stored: &StoredMethod, request: &PaymentRequest<'_>) -> Result<Value, Outcome> {
        let key = request.idempotency_key;
        let currency = request.currency.to_ascii_lowercase();
        let amount = request.amount_in_cents.to_string();
        let mut params = form([
            ("amount", amount.as_str()),
            ("currency", currency.as_str()),
            ("customer", stored.customer.as_str()),
            ("payment_method", stored.payment_method.as_str()),
            ("payment_method_types[]", "card"),
            ("capture_method", "automatic"),
            ("confirm", "true"),
            ("expand[]", "latest_charge"),
        ]);
        if request.recurring {
            params.push(("off_session".to_owned(), "true".to_owned()));
        }
        if let Some(key) = key {
            params.push(("metadata[rebill_attempt]".to_owned(), key.to_owned()));
        }
        if let Some(invoice) = request.invoice {
            params.push(("metadata[rebill_invoice]".to_owned(), invoice.to_owned()));
        }
        let header = key.map(|k| format!("rebill-purchase-{k}"));
        let mut tries = 0;
        loop {
            let sent = self.http.once(Method::Post, "/v1/payment_intents", &params, header.as_deref()).await;
            let failure = match sent {
                Sent::Answered(a) if a.is_success() => return Ok(a.body),
                Sent::Answered(a) if !a.retry_safe() => return Err(Outcome::Declined(a.decline())),
                Sent::Answered(a) => a.decline(),
                Sent::Lost(lost) => lost.decline(),
            };
            // The PaymentIntent may exist: without a key there is nothing to look it up by, so
            // nothing more is tried, and the outcome is not known.
            let Some(key) = key else {
                return Err(Outcome::Pending(pending_after(&failure, None)));
            };
            tracing::warn!(
                code = failure.code,
                tries = tries + 1,
                "stripe: a purchase without a usable answer; looking it up"
            );
            match self.find_intent(key, &stored.customer).await {
                Ok(Found::Object(intent)) => return Ok(intent),
                Ok(Found::Nothing) if tries < MAX_RETRIES => {
                    tokio::time::sleep(backoff(tries)).await;
                    tries += 1;
                }
                // The create may still be running at Stripe, or have been made: not known.
                Ok(Found::Nothing) | Err(_) => return Err(Outcome::Pending(pending_after(&failure, None))),
            }
        }
    }

    /// The outcome a PaymentIntent stands for. rebill's own charges are captured in the call
    /// that makes them; an authorization (`requires_capture`) found by a look-up was made by a
    /// rebill that still authorized and captured in two steps (an attempt pending across an
    /// upgrade), and is captured now, under the key those versions used. A capture whose
    /// answer is lost is read back (`GET /v1/payment_intents/{id}`) and sent again only while
    /// the intent is still uncaptured.
    async fn answer_intent(&self, intent: Value, request: &PaymentRequest<'_>) -> Outcome {
        let Some(id) = object_id(&intent, "pi_") else {
            return Outcome::Declined(unexpected("payment_intent"));
        };
        let mut intent = intent;
        let mut tries = 0;
        while text(&intent, "status") == Some("requires_capture") {
            let path = format!("/v1/payment_intents/{id}/capture");
            let params = form([("expand[]", "latest_charge")]);
            let header = request.idempotency_key.map(|k| format!("rebill-purchase-{k}-capture"));
            let failure = match self.http.once(Method::Post, &path, &params, header.as_deref()).await {
                Sent::Answered(a) if a.is_success() => {
                    intent = a.body;
                    continue;
                }
                // A refusal of the capture itself (a 402): the intent's outcome is that decline.
                Sent::Answered(a) if a.status == 402 => {
                    let mut d = a.decline();
                    d.reference = d.reference.or(Some(id));
                    return Outcome::Declined(d);
                }
                Sent::Answered(a) => a.decline(),
                Sent::Lost(lost) => lost.decline(),
            };
            // Lost, or refused because the intent moved on (another run captured it): read it
            // back and go on from what it is now.
            tracing::warn!(code = failure.code, "stripe: a capture without a usable answer; reading it back");
            let read = self
                .http
                .call(Method::Get, &format!("/v1/payment_intents/{id}"), &form([("expand[]", "latest_charge")]), None)
                .await;
            match read {
                Sent::Answered(a) if a.is_success() && tries < MAX_RETRIES => {
                    intent = a.body;
                    tries += 1;
                    if text(&intent, "status") == Some("requires_capture") {
                        tokio::time::sleep(backoff(tries - 1)).await;
                    }
                }
                // The capture may have been made, or may still be: not known.
                _ => return Outcome::Pending(pending_after(&failure, Some(id))),
            }
        }
        intent_outcome(&intent)
    }

    /// Looks up the PaymentIntent of an attempt: the customer's intents (`GET
    /// /v1/payment_intents?customer=…`, newest first, read-after-write consistent), 100 a page
    /// and at most [`LOOKUP_PAGES`] pages, whose `metadata.rebill_attempt` is `key`; a canceled
    /// one does not count. `Err` when the list could not be read.
    pub(crate) async fn find_intent(&self, key: &str, customer: &str) -> Result<Found, Lost> {
        let filters = form([("customer", customer)]);
        self.scan("/v1/payment_intents", &filters, |intent| {
            text(&intent["metadata"], "rebill_attempt") == Some(key)
                && text(intent, "customer") == Some(customer)
                && text(intent, "status") != Some("canceled")
        })
        .await
    }

    /// Scans a list endpoint page by page (100 a page, at most [`LOOKUP_PAGES`] pages) for the
    /// first object matching.
    pub(crate) async fn scan(
        &self,
        path: &str,
        filters: &Form,
        matches: impl Fn(&Value) -> bool,
    ) -> Result<Found, Lost> {
        let mut after: Option<String> = None;
        for _ in 0..LOOKUP_PAGES {
            let mut params = filters.clone();
            params.push(("limit".to_owned(), "100".to_owned()));
            if let Some(after) = &after {
                params.push(("starting_after".to_owned(), after.clone()));
            }
            let page = match self.http.call(Method::Get, path, &params, None).await {
                Sent::Answered(a) if a.is_success() => a.body,
                Sent::Answered(a) => {
                    tracing::warn!(path, status = a.status, "stripe: a look-up was refused");
                    return Err(Lost::Unavailable);
                }
                Sent::Lost(lost) => return Err(lost),
            };
            let data = page["data"].as_array().map(Vec::as_slice).unwrap_or_default();
            if let Some(found) = data.iter().find(|o| matches(o)) {
                return Ok(Found::Object(found.clone()));
            }
            let last = data.last().and_then(|o| text(o, "id")).filter(|id| is_id(id));
            match last {
                Some(id) if page["has_more"].as_bool() == Some(true) => after = Some(id.to_owned()),
                _ => return Ok(Found::Nothing),
            }
        }
        Ok(Found::Nothing)
    }
}

/// Whether an attach failed because the customer does not exist.
fn customer_missing(answer: &Answer) -> bool {
    let error = &answer.body["error"];
    answer.status == 404
        || (text(error, "code") == Some("resource_missing") && text(error, "param").is_none_or(|p| p == "customer"))
}

/// The outcome a PaymentIntent stands for (see the crate documentation).
pub(crate) fn intent_outcome(intent: &Value) -> Outcome {
    let Some(id) = object_id(intent, "pi_") else {
        return Outcome::Declined(unexpected("payment_intent"));
    };
    let (cvv_result, avs_result) = match intent.get("latest_charge") {
        Some(charge) if charge.is_object() => charge_checks(charge),
        _ => (None, None),
    };
    match text(intent, "status") {
        // `requires_capture`: authorized for an intent captured by hand (never made here).
        Some("succeeded" | "requires_capture") => {
            Outcome::Approved(Approval { cvv_result, avs_result, ..approval(id) })
        }
        // Still moving at Stripe: settled when it has moved on.
        Some("processing") => Outcome::Pending(Pending { code: "gateway_timeout", reference: Some(id) }),
        Some("requires_action") => Outcome::Declined(Decline {
            cvv_result,
            avs_result,
            reference: Some(id),
            ..decline("three_d_secure_action_required", "requires_action")
        }),
        status => {
            let mut d = match intent.get("last_payment_error").filter(|e| e.is_object()) {
                Some(error) => decline_from_error(402, &serde_json::json!({ "error": error })),
                None => decline("declined", status.unwrap_or("unknown_status")),
            };
            d.reference = Some(id);
            if cvv_result.is_some() || avs_result.is_some() {
                (d.cvv_result, d.avs_result) = (cvv_result.or(d.cvv_result), avs_result);
            }
            Outcome::Declined(d)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn declined(outcome: Outcome) -> Decline {
        match outcome {
            Outcome::Declined(d) => d,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn intents_answer_by_status() {
        let ok = json!({"id": "pi_1", "status": "succeeded", "latest_charge": {
            "id": "ch_1",
            "payment_method_details": {"card": {"checks": {
                "cvc_check": "pass", "address_line1_check": "pass", "address_postal_code_check": "pass"
            }}}
        }});
        match intent_outcome(&ok) {
            Outcome::Approved(a) => {
                assert_eq!((a.reference.as_str(), a.code), ("pi_1", "approved"));
                assert_eq!(a.cvv_result.map(|r| r.code).as_deref(), Some("M"));
                assert_eq!(a.avs_result.map(|r| r.code).as_deref(), Some("Y"));
            }
            other => panic!("{other:?}"),
        }
        match intent_outcome(&json!({"id": "pi_1", "status": "processing", "latest_charge": "ch_1"})) {
            Outcome::Pending(p) => assert_eq!(p.reference.as_deref(), Some("pi_1")),
            other => panic!("a processing intent is not settled: {other:?}"),
        }
        let d = declined(intent_outcome(&json!({"id": "pi_2", "status": "requires_action", "latest_charge": null})));
        assert_eq!((d.code, d.reference.as_deref()), ("three_d_secure_action_required", Some("pi_2")));
        let d = declined(intent_outcome(&json!({"id": "pi_3", "status": "requires_payment_method",
            "last_payment_error": {"type": "card_error", "code": "card_declined", "decline_code": "insufficient_funds",
                "message": "Your card has insufficient funds.", "charge": "ch_3"}})));
        assert_eq!((d.code, d.reference.as_deref()), ("insufficient_funds", Some("pi_3")));
        let d = declined(intent_outcome(&json!({"id": "pi_4", "status": "requires_payment_method"})));
        assert_eq!((d.code, d.gateway_error_code.as_deref()), ("declined", Some("requires_payment_method")));
        assert_eq!(declined(intent_outcome(&json!({"status": "succeeded"}))).code, "gateway_error");
    }

    #[test]
    fn a_missing_customer_is_recognised() {
        let answer = |status, body| Answer { status, body, should_retry: None };
        assert!(customer_missing(&answer(404, json!({"error": {"type": "invalid_request_error"}}))));
        assert!(customer_missing(&answer(
            400,
            json!({"error": {"type": "invalid_request_error", "code": "resource_missing", "param": "customer"}})
        )));
        assert!(!customer_missing(&answer(402, json!({"error": {"code": "card_declined"}}))));
    }
}

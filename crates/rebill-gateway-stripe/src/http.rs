//! The transport: form-encoded requests with the secret key as a bearer token, JSON answers,
//! and the retries Stripe declares safe.

use std::time::Duration;

use rebill_billing::gateway::{Decline, Pending};
use serde_json::Value;

use crate::errors::{decline, decline_from_error, text};

/// The Stripe API version every request is made at (the account's default is not used, so the
/// shapes read here do not change with the account's settings).
pub const API_VERSION: &str = "2024-06-20";

/// Retries after the first try, at most.
pub(crate) const MAX_RETRIES: u32 = 2;

/// The pause before retry `n` (0-based): 200 ms · 2ⁿ.
pub(crate) fn backoff(n: u32) -> Duration {
    Duration::from_millis(200u64.saturating_mul(1u64 << n.min(10)))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Get,
    Post,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
        }
    }
}

/// Why no answer was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lost {
    /// The call (or reading its answer) took longer than the configured timeout.
    Timeout,
    /// No connection, or the connection was closed or reset before the whole answer was read
    /// (or a success answer could not be read as JSON).
    Unavailable,
}

impl Lost {
    /// The decline answered when nothing more can be learnt, for a call that moves no money.
    pub(crate) fn decline(self) -> Decline {
        match self {
            Lost::Timeout => decline("gateway_timeout", "timeout"),
            Lost::Unavailable => decline("gateway_unavailable", "connection"),
        }
    }

    /// The unknown outcome of a call that may have moved money (`reference`: the object it
    /// concerns, when known).
    pub(crate) fn pending(self, reference: Option<String>) -> Pending {
        Pending { code: self.decline().code, reference }
    }
}

/// The unknown outcome of a money call that got `failure` (a lost answer, or one Stripe says to
/// retry: a 409 `idempotency_key_in_use`, a 429, a 5xx) and could not learn more.
pub(crate) fn pending_after(failure: &Decline, reference: Option<String>) -> Pending {
    Pending { code: failure.code, reference: reference.or_else(|| failure.reference.clone()) }
}

/// An answer Stripe gave.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub status: u16,
    /// The parsed JSON answer (`Null` for an error answer that is not JSON).
    pub body: Value,
    /// The `Stripe-Should-Retry` header, when present.
    pub should_retry: Option<bool>,
}

impl Answer {
    pub(crate) fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// Whether Stripe says the request may be sent again: its `Stripe-Should-Retry` header when
    /// given, else a 429, a 409 `idempotency_key_in_use` or a 5xx.
    pub(crate) fn retry_safe(&self) -> bool {
        match self.should_retry {
            Some(answer) => answer,
            None => {
                self.status == 429
                    || self.status >= 500
                    || (self.status == 409 && text(&self.body["error"], "code") == Some("idempotency_key_in_use"))
            }
        }
    }

    /// The decline of an error answer.
    pub(crate) fn decline(&self) -> Decline {
        decline_from_error(self.status, &self.body)
    }
}

/// What came of sending a request once.
#[derive(Debug, Clone)]
pub(crate) enum Sent {
    Answered(Answer),
    Lost(Lost),
}

impl Sent {
    /// The success answer's body, or the decline of anything else.
    pub(crate) fn into_result(self) -> Result<Value, Box<Decline>> {
        match self {
            Sent::Answered(a) if a.is_success() => Ok(a.body),
            Sent::Answered(a) => Err(Box::new(a.decline())),
            Sent::Lost(lost) => Err(Box::new(lost.decline())),
        }
    }
}

/// Form parameters, in order (Stripe's bracket notation in the names).
pub(crate) type Form = Vec<(String, String)>;

/// Builds form parameters.
pub(crate) fn form<const N: usize>(pairs: [(&str, &str); N]) -> Form {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

pub(crate) struct Http {
    client: reqwest::Client,
    base: String,
    secret_key: String,
}

impl Http {
    pub(crate) fn new(client: reqwest::Client, base: String, secret_key: String) -> Self {
        Self { client, base, secret_key }
    }

    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    /// Sends the request once. `idempotency_key` is sent as the `Idempotency-Key` header.
    pub(crate) async fn once(&self, method: Method, path: &str, params: &Form, idempotency_key: Option<&str>) -> Sent {
        let url = format!("{}{}", self.base, path);
        let request = match method {
            Method::Get => self.client.get(url).query(params),
            Method::Post => self.client.post(url).form(params),
        };
        let mut request = request.bearer_auth(&self.secret_key).header("Stripe-Version", API_VERSION);
        if let Some(key) = idempotency_key {
            request = request.header("Idempotency-Key", key);
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => return Sent::Lost(lost(method, path, &e)),
        };
        let status = response.status().as_u16();
        let should_retry = response
            .headers()
            .get("stripe-should-retry")
            .and_then(|v| v.to_str().ok())
            .map(|v| v.eq_ignore_ascii_case("true"));
        let bytes = match response.bytes().await {
            Ok(bytes) => bytes,
            Err(e) => return Sent::Lost(lost(method, path, &e)),
        };
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(body) => Sent::Answered(Answer { status, body, should_retry }),
            // A success that cannot be read is as good as no answer: what happened is unknown.
            Err(_) if (200..300).contains(&status) => {
                tracing::warn!(method = method.name(), path, status, "stripe: a success answer that is not JSON");
                Sent::Lost(Lost::Unavailable)
            }
            Err(_) => Sent::Answered(Answer { status, body: Value::Null, should_retry }),
        }
    }

    /// Sends the request, retrying (at most [`MAX_RETRIES`] times, after [`backoff`]) what is
    /// safe to send again: a GET whose answer was lost or that Stripe says to retry, and a POST
    /// carrying an idempotency key that Stripe says to retry ([`Answer::retry_safe`]). A POST
    /// whose answer was lost is never sent again here: the caller decides (by looking up what
    /// it did).
    pub(crate) async fn call(&self, method: Method, path: &str, params: &Form, idempotency_key: Option<&str>) -> Sent {
        let mut retry = 0;
        loop {
            let sent = self.once(method, path, params, idempotency_key).await;
            let again = match &sent {
                Sent::Answered(a) => {
                    !a.is_success() && a.retry_safe() && (method == Method::Get || idempotency_key.is_some())
                }
                Sent::Lost(_) => method == Method::Get,
            };
            if !again || retry >= MAX_RETRIES {
                return sent;
            }
            tracing::warn!(
                method = method.name(),
                path,
                retry = retry + 1,
                "stripe: retrying a request Stripe allows to retry"
            );
            tokio::time::sleep(backoff(retry)).await;
            retry += 1;
        }
    }
}

/// Why a request failed, logged without the request (its form holds card data) or the key.
fn lost(method: Method, path: &str, e: &reqwest::Error) -> Lost {
    let kind = if e.is_timeout() { Lost::Timeout } else { Lost::Unavailable };
    let connect = e.is_connect();
    tracing::warn!(method = method.name(), path, timeout = e.is_timeout(), connect, "stripe: no answer");
    kind
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(status: u16, body: Value, should_retry: Option<bool>) -> Answer {
        Answer { status, body, should_retry }
    }

    #[test]
    fn retries_follow_stripe() {
        assert!(answer(429, Value::Null, None).retry_safe());
        assert!(answer(500, Value::Null, None).retry_safe());
        assert!(answer(503, Value::Null, None).retry_safe());
        assert!(answer(409, json!({"error": {"code": "idempotency_key_in_use"}}), None).retry_safe());
        assert!(!answer(409, json!({"error": {"code": "lock_timeout"}}), None).retry_safe());
        assert!(!answer(402, Value::Null, None).retry_safe());
        assert!(!answer(400, Value::Null, None).retry_safe());
        // The header wins either way.
        assert!(answer(400, Value::Null, Some(true)).retry_safe());
        assert!(!answer(500, Value::Null, Some(false)).retry_safe());
    }

    #[test]
    fn backoff_doubles() {
        assert_eq!(backoff(0), Duration::from_millis(200));
        assert_eq!(backoff(1), Duration::from_millis(400));
        assert_eq!(backoff(2), Duration::from_millis(800));
    }

    #[test]
    fn lost_answers_are_communication_declines() {
        assert_eq!(Lost::Timeout.decline().code, "gateway_timeout");
        assert_eq!(Lost::Unavailable.decline().code, "gateway_unavailable");
        for lost in [Lost::Timeout, Lost::Unavailable] {
            assert_eq!(rebill_billing::errors::lookup_or_unknown(lost.decline().code).category, "communication");
        }
    }
}

//! Stripe's idempotency keys as a table: which request holds a key, what answer was saved for
//! it, and what a later request with the same key is answered.

use std::collections::HashMap;

use super::http::Answer;

/// The longest idempotency key Stripe takes.
pub(crate) const MAX_KEY: usize = 255;

/// Whether Stripe saves an answer of this status for the request's key. Stripe saves the
/// result once the endpoint has begun executing, whatever it is (a 500 and a 402 included);
/// answers that say the request was refused before it executed are not saved, so a retry can
/// still go through: 400 (the parameters), 401 (the key), 404 (an object named in the path),
/// 409 (another request with the same key in flight) and 429 (a rate limit).
pub(crate) fn saves(status: u16) -> bool {
    !matches!(status, 400 | 401 | 404 | 409 | 429)
}

/// What makes two requests with one key the same request: method, target (path and query) and
/// body, compared byte for byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    pub(crate) method: String,
    pub(crate) target: String,
    pub(crate) body: Vec<u8>,
}

/// A key as Stripe scopes it: the request's `Authorization` header (the account's key) and the
/// `Idempotency-Key` header.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Scope {
    pub(crate) authorization: String,
    pub(crate) key: String,
}

enum Entry {
    /// The first request with the key is being handled.
    InFlight(Fingerprint),
    /// The first request's answer, to be replayed.
    Saved(Fingerprint, Answer),
}

/// What a request with a key that is in the table, or not, gets.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// The first request with the key: it is now in flight, to be ended by [`Keys::finish`].
    First,
    /// The first request with the key is still in flight: refused (409), nothing recorded.
    InUse,
    /// The same request as the first: its saved answer.
    Replay(Answer),
    /// Another request than the first (method, target or body): refused (400).
    Mismatch,
}

/// The idempotency keys seen, in flight or saved.
#[derive(Default)]
pub(crate) struct Keys {
    entries: HashMap<Scope, Entry>,
}

impl Keys {
    /// Admits a request with `scope`'s key: the first one with the key goes in flight.
    pub(crate) fn admit(&mut self, scope: &Scope, request: Fingerprint) -> Admission {
        match self.entries.get(scope) {
            None => {
                self.entries.insert(scope.clone(), Entry::InFlight(request));
                Admission::First
            }
            Some(Entry::InFlight(_)) => Admission::InUse,
            Some(Entry::Saved(first, answer)) if *first == request => Admission::Replay(answer.clone()),
            Some(Entry::Saved(..)) => Admission::Mismatch,
        }
    }

    /// Ends the first request with `scope`'s key: its `answer` is saved when Stripe would save
    /// it ([`saves`]); otherwise (no answer at all, or one that is not saved) the key is
    /// forgotten, and the next request with it is a first one again. The saved answer keeps
    /// the status, the reason, the `Content-Type` and the body.
    pub(crate) fn finish(&mut self, scope: &Scope, answer: Option<&Answer>) {
        let Some(Entry::InFlight(first)) = self.entries.remove(scope) else {
            return;
        };
        if let Some(answer) = answer.filter(|answer| saves(answer.status)) {
            let kept = Answer {
                status: answer.status,
                reason: answer.reason.clone(),
                headers: answer
                    .headers
                    .iter()
                    .filter(|(name, _)| name.eq_ignore_ascii_case("content-type"))
                    .cloned()
                    .collect(),
                body: answer.body.clone(),
            };
            self.entries.insert(scope.clone(), Entry::Saved(first, kept));
        }
    }

    /// Forgets every saved answer (as Stripe prunes keys after 24 hours); keys in flight stay.
    pub(crate) fn expire(&mut self) {
        self.entries.retain(|_, entry| matches!(entry, Entry::InFlight(_)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(authorization: &str, key: &str) -> Scope {
        Scope { authorization: authorization.to_owned(), key: key.to_owned() }
    }

    fn post(target: &str, body: &str) -> Fingerprint {
        Fingerprint { method: "POST".to_owned(), target: target.to_owned(), body: body.as_bytes().to_vec() }
    }

    fn answer(status: u16, body: &str) -> Answer {
        Answer {
            status,
            reason: "R".to_owned(),
            headers: vec![
                ("Content-Type".to_owned(), "application/json".to_owned()),
                ("Date".to_owned(), "now".to_owned()),
            ],
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn what_is_saved() {
        for status in [200, 201, 402, 500, 502, 503] {
            assert!(saves(status), "{status}");
        }
        for status in [400, 401, 404, 409, 429] {
            assert!(!saves(status), "{status}");
        }
    }

    #[test]
    fn the_first_answer_is_replayed_to_the_same_request_only() {
        let mut keys = Keys::default();
        let k = scope("Bearer sk_test_a", "k1");
        assert_eq!(keys.admit(&k, post("/v1/customers", "email=a")), Admission::First);
        assert_eq!(keys.admit(&k, post("/v1/customers", "email=a")), Admission::InUse);
        assert_eq!(keys.admit(&k, post("/v1/customers", "email=b")), Admission::InUse, "in flight, whatever it is");
        keys.finish(&k, Some(&answer(200, "{\"id\":\"cus_1\"}")));
        let Admission::Replay(replayed) = keys.admit(&k, post("/v1/customers", "email=a")) else {
            panic!("a replay");
        };
        assert_eq!((replayed.status, replayed.body.as_slice()), (200, b"{\"id\":\"cus_1\"}".as_slice()));
        assert_eq!(replayed.headers, [("Content-Type".to_owned(), "application/json".to_owned())]);
        assert_eq!(keys.admit(&k, post("/v1/customers", "email=b")), Admission::Mismatch);
        assert_eq!(keys.admit(&k, post("/v1/customers?x=1", "email=a")), Admission::Mismatch);
        assert_eq!(keys.admit(&k, post("/v1/charges", "email=a")), Admission::Mismatch);
        let put = Fingerprint { method: "PUT".to_owned(), ..post("/v1/customers", "email=a") };
        assert_eq!(keys.admit(&k, put), Admission::Mismatch);

        // Keys are the account's: another Authorization has its own.
        let other = scope("Bearer sk_test_b", "k1");
        assert_eq!(keys.admit(&other, post("/v1/customers", "email=b")), Admission::First);
    }

    #[test]
    fn answers_refused_before_execution_are_not_saved() {
        let mut keys = Keys::default();
        let k = scope("", "k");
        for status in [400, 401, 404, 409, 429] {
            assert_eq!(keys.admit(&k, post("/v1/refunds", "a=1")), Admission::First);
            keys.finish(&k, Some(&answer(status, "{}")));
        }
        assert_eq!(keys.admit(&k, post("/v1/refunds", "a=2")), Admission::First, "still free for any request");
        keys.finish(&k, None);
        assert_eq!(keys.admit(&k, post("/v1/refunds", "a=3")), Admission::First, "no answer saves nothing");
        keys.finish(&k, Some(&answer(500, "{\"error\":{}}")));
        let Admission::Replay(replayed) = keys.admit(&k, post("/v1/refunds", "a=3")) else {
            panic!("a replay of the 500");
        };
        assert_eq!(replayed.status, 500);
    }

    #[test]
    fn expiring_forgets_saved_keys_not_those_in_flight() {
        let mut keys = Keys::default();
        let (saved, flying) = (scope("", "saved"), scope("", "flying"));
        assert_eq!(keys.admit(&saved, post("/v1/customers", "")), Admission::First);
        keys.finish(&saved, Some(&answer(200, "{}")));
        assert_eq!(keys.admit(&flying, post("/v1/customers", "")), Admission::First);
        keys.expire();
        assert_eq!(keys.admit(&saved, post("/v1/customers", "other")), Admission::First);
        assert_eq!(keys.admit(&flying, post("/v1/customers", "")), Admission::InUse);
        // Finishing a key that is not in flight changes nothing.
        keys.finish(&scope("", "never"), Some(&answer(200, "{}")));
        assert_eq!(keys.admit(&scope("", "never"), post("/v1/customers", "")), Admission::First);
    }
}

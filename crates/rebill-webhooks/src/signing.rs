//! The Standard Webhooks signature (<https://www.standardwebhooks.com>): a receiver's existing
//! library (Svix, the standard-webhooks reference libraries) verifies what rebill sends.
//!
//! - An endpoint's secret is `whsec_` followed by the base64 of 32 random bytes; the HMAC key is
//!   those bytes.
//! - `webhook-id` is the notification's id (`msg_…`), the same on every attempt;
//!   `webhook-timestamp` the attempt's time in seconds; `webhook-signature` is `v1,` and the
//!   base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The prefix of a signing secret.
pub const SECRET_PREFIX: &str = "whsec_";
/// Random bytes in a new secret.
pub const SECRET_BYTES: usize = 32;
/// How far a receiver lets a timestamp be from its clock (the reference libraries' tolerance).
pub const TOLERANCE_SECONDS: i64 = 5 * 60;

/// Why a secret or a signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SigningError {
    #[error("a signing secret is `whsec_` followed by base64")]
    MalformedSecret,
    #[error("the timestamp is more than five minutes from now")]
    Stale,
    #[error("no signature matches")]
    NoMatch,
}

/// A signing secret (its key bytes).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl Secret {
    /// A new secret from `bytes` (the caller's random source: [`SECRET_BYTES`] of them).
    pub fn from_bytes(bytes: &[u8]) -> Secret {
        Secret(bytes.to_vec())
    }

    /// Reads `whsec_<base64>` (the prefix may be left out, as the reference libraries allow).
    pub fn parse(text: &str) -> Result<Secret, SigningError> {
        let body = text.trim();
        let body = body.strip_prefix(SECRET_PREFIX).unwrap_or(body);
        let key = STANDARD.decode(body).map_err(|_| SigningError::MalformedSecret)?;
        if key.is_empty() {
            return Err(SigningError::MalformedSecret);
        }
        Ok(Secret(key))
    }

    /// The secret as it is shown once to the operator: `whsec_<base64>`.
    pub fn reveal(&self) -> String {
        format!("{SECRET_PREFIX}{}", STANDARD.encode(&self.0))
    }

    fn mac(&self, id: &str, timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
        // HMAC takes a key of any length.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!());
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }

    /// The `webhook-signature` header of a notification: `v1,<base64>`.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        format!("v1,{}", STANDARD.encode(self.mac(id, timestamp, body).finalize().into_bytes()))
    }

    /// Verifies the headers of a notification as a receiver does: the timestamp within
    /// [`TOLERANCE_SECONDS`] of `now`, and one of the space-separated `v1,` signatures
    /// matching (compared in constant time).
    pub fn verify(
        &self,
        id: &str,
        timestamp: i64,
        signatures: &str,
        body: &[u8],
        now: i64,
    ) -> Result<(), SigningError> {
        if (now - timestamp).abs() > TOLERANCE_SECONDS {
            return Err(SigningError::Stale);
        }
        for candidate in signatures.split(' ') {
            let Some(encoded) = candidate.strip_prefix("v1,") else { continue };
            let Ok(given) = STANDARD.decode(encoded) else { continue };
            if self.mac(id, timestamp, body).verify_slice(&given).is_ok() {
                return Ok(());
            }
        }
        Err(SigningError::NoMatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Standard Webhooks specification's published test vector.
    const VECTOR_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const VECTOR_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const VECTOR_TIMESTAMP: i64 = 1_614_265_330;
    const VECTOR_BODY: &[u8] = br#"{"test": 2432232314}"#;
    const VECTOR_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    #[test]
    fn the_specification_test_vector_is_reproduced() {
        let secret = Secret::parse(VECTOR_SECRET).expect("secret");
        assert_eq!(secret.sign(VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY), VECTOR_SIGNATURE);
        assert_eq!(secret.reveal(), VECTOR_SECRET);
        let bare = Secret::parse(VECTOR_SECRET.trim_start_matches(SECRET_PREFIX)).expect("without the prefix");
        assert_eq!(bare, secret);
    }

    #[test]
    fn verification_checks_time_body_and_any_of_several_signatures() {
        let secret = Secret::parse(VECTOR_SECRET).expect("secret");
        let now = VECTOR_TIMESTAMP + 10;
        let several = format!("v1,bm9wZQ== {VECTOR_SIGNATURE}");
        assert_eq!(secret.verify(VECTOR_ID, VECTOR_TIMESTAMP, &several, VECTOR_BODY, now), Ok(()));
        assert_eq!(
            secret.verify(VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_SIGNATURE, b"{\"test\": 1}", now),
            Err(SigningError::NoMatch)
        );
        assert_eq!(
            secret.verify("msg_other", VECTOR_TIMESTAMP, VECTOR_SIGNATURE, VECTOR_BODY, now),
            Err(SigningError::NoMatch)
        );
        let late = VECTOR_TIMESTAMP + TOLERANCE_SECONDS + 1;
        assert_eq!(
            secret.verify(VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_SIGNATURE, VECTOR_BODY, late),
            Err(SigningError::Stale)
        );
        let other = Secret::from_bytes(&[7; SECRET_BYTES]);
        assert_eq!(
            other.verify(VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_SIGNATURE, VECTOR_BODY, now),
            Err(SigningError::NoMatch)
        );
    }

    #[test]
    fn malformed_secrets_are_refused_and_never_shown() {
        assert_eq!(Secret::parse("whsec_not base64!"), Err(SigningError::MalformedSecret));
        assert_eq!(Secret::parse("whsec_"), Err(SigningError::MalformedSecret));
        let secret = Secret::from_bytes(&[1; SECRET_BYTES]);
        assert_eq!(format!("{secret:?}"), "Secret([redacted])");
        assert!(secret.reveal().starts_with(SECRET_PREFIX));
        assert_eq!(Secret::parse(&secret.reveal()), Ok(secret));
    }
}

//! Encryption at rest of the payment data a token holds until it is used: AES-256-GCM with a
//! 32-byte key and a fresh random 96-bit nonce per encryption. A caller-given context (the
//! token's identity) is authenticated with the ciphertext, so a sealed value moved to another
//! row does not open.
//!
//! [`Vault::seal`] turns a [`Secret`] (card number and CVV, or bank account number) into text
//! for a database column: `v1.` and the URL-safe base64 of nonce and ciphertext.

use std::fmt;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Key, Nonce};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Length of a vault key in bytes.
pub const KEY_LEN: usize = 32;
const NONCE_LEN: usize = 12;
const PREFIX: &str = "v1.";

/// A vault failure.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VaultError {
    #[error("a vault key is {KEY_LEN} bytes written as 64 hexadecimal characters")]
    BadKey,
    #[error("the sealed value is malformed")]
    Malformed,
    #[error("the sealed value does not open with this key and context")]
    Rejected,
}

/// The payment data of a token.
#[derive(Clone, PartialEq, Eq)]
pub enum Secret {
    Card { number: String, cvv: Option<String> },
    BankAccount { account_number: String },
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Secret::Card { .. } => f.write_str("Secret::Card([redacted])"),
            Secret::BankAccount { .. } => f.write_str("Secret::BankAccount([redacted])"),
        }
    }
}

impl Secret {
    fn encode(&self) -> Vec<u8> {
        match self {
            Secret::Card { number, cvv } => format!("card\n{number}\n{}", cvv.as_deref().unwrap_or_default()),
            Secret::BankAccount { account_number } => format!("bank\n{account_number}"),
        }
        .into_bytes()
    }

    fn decode(bytes: &[u8]) -> Result<Secret, VaultError> {
        let text = std::str::from_utf8(bytes).map_err(|_| VaultError::Malformed)?;
        let mut parts = text.split('\n');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some("card"), Some(number), Some(cvv), None) => {
                Ok(Secret::Card { number: number.to_owned(), cvv: (!cvv.is_empty()).then(|| cvv.to_owned()) })
            }
            (Some("bank"), Some(account), None, None) => Ok(Secret::BankAccount { account_number: account.to_owned() }),
            _ => Err(VaultError::Malformed),
        }
    }
}

/// The cipher over one key.
#[derive(Clone)]
pub struct Vault {
    cipher: Aes256Gcm,
}

impl fmt::Debug for Vault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Vault([key redacted])")
    }
}

fn random<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    // Without the operating system's random source no key or nonce can be made safely.
    getrandom::fill(&mut buf).expect("the operating system's random source");
    buf
}

impl Vault {
    /// A new random key.
    pub fn generate_key() -> [u8; KEY_LEN] {
        random()
    }

    /// A new random key as 64 hexadecimal characters (the key file's format).
    pub fn generate_key_hex() -> String {
        hex::encode(Self::generate_key())
    }

    pub fn new(key: &[u8; KEY_LEN]) -> Vault {
        Vault { cipher: Aes256Gcm::new(Key::<Aes256Gcm>::from_slice(key)) }
    }

    /// A vault over a key written as 64 hexadecimal characters (surrounding whitespace ignored).
    pub fn from_hex(text: &str) -> Result<Vault, VaultError> {
        let bytes = hex::decode(text.trim()).map_err(|_| VaultError::BadKey)?;
        let key: [u8; KEY_LEN] = bytes.try_into().map_err(|_| VaultError::BadKey)?;
        Ok(Vault::new(&key))
    }

    /// A vault over a fresh random key (data sealed with it is lost with the process).
    pub fn ephemeral() -> Vault {
        Vault::new(&Self::generate_key())
    }

    /// Nonce followed by the ciphertext and tag of `plaintext`, with `context` authenticated.
    pub fn encrypt(&self, plaintext: &[u8], context: &[u8]) -> Vec<u8> {
        let nonce: [u8; NONCE_LEN] = random();
        let sealed = self
            .cipher
            .encrypt(Nonce::from_slice(&nonce), Payload { msg: plaintext, aad: context })
            // AES-GCM encryption fails only for inputs beyond 64 GiB.
            .expect("AES-256-GCM encryption of a small payload");
        let mut out = Vec::with_capacity(NONCE_LEN + sealed.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        out
    }

    /// The plaintext of [`Vault::encrypt`]'s output, if key and context match.
    pub fn decrypt(&self, sealed: &[u8], context: &[u8]) -> Result<Vec<u8>, VaultError> {
        if sealed.len() < NONCE_LEN + 16 {
            return Err(VaultError::Malformed);
        }
        let (nonce, ciphertext) = sealed.split_at(NONCE_LEN);
        self.cipher
            .decrypt(Nonce::from_slice(nonce), Payload { msg: ciphertext, aad: context })
            .map_err(|_| VaultError::Rejected)
    }

    /// A secret sealed as text for storage.
    pub fn seal(&self, secret: &Secret, context: &[u8]) -> String {
        self.seal_bytes(&secret.encode(), context)
    }

    /// The secret of [`Vault::seal`]'s output.
    pub fn open(&self, sealed: &str, context: &[u8]) -> Result<Secret, VaultError> {
        Secret::decode(&self.open_bytes(sealed, context)?)
    }

    /// Any other secret text (a gateway's API key) sealed as text for storage.
    pub fn seal_text(&self, text: &str, context: &[u8]) -> String {
        self.seal_bytes(text.as_bytes(), context)
    }

    /// The text of [`Vault::seal_text`]'s output.
    pub fn open_text(&self, sealed: &str, context: &[u8]) -> Result<String, VaultError> {
        String::from_utf8(self.open_bytes(sealed, context)?).map_err(|_| VaultError::Malformed)
    }

    fn seal_bytes(&self, bytes: &[u8], context: &[u8]) -> String {
        format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(self.encrypt(bytes, context)))
    }

    fn open_bytes(&self, sealed: &str, context: &[u8]) -> Result<Vec<u8>, VaultError> {
        let body = sealed.strip_prefix(PREFIX).ok_or(VaultError::Malformed)?;
        let bytes = URL_SAFE_NO_PAD.decode(body).map_err(|_| VaultError::Malformed)?;
        self.decrypt(&bytes, context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card() -> Secret {
        Secret::Card { number: "4111111111111111".into(), cvv: Some("123".into()) }
    }

    #[test]
    fn text_is_sealed_with_its_context() {
        let vault = Vault::ephemeral();
        let sealed = vault.seal_text("sk_live_secret", b"site-gateway:1");
        assert!(!sealed.contains("sk_live_secret"));
        assert_eq!(vault.open_text(&sealed, b"site-gateway:1").expect("open"), "sk_live_secret");
        assert!(vault.open_text(&sealed, b"site-gateway:2").is_err(), "another site's context does not open it");
    }

    #[test]
    fn secrets_round_trip_with_random_nonces() {
        let vault = Vault::new(&Vault::generate_key());
        let a = vault.seal(&card(), b"token-1");
        let b = vault.seal(&card(), b"token-1");
        assert_ne!(a, b, "fresh nonce each time");
        assert!(a.starts_with("v1.") && !a.contains("4111") && !a.contains("123"));
        assert_eq!(vault.open(&a, b"token-1"), Ok(card()));
        let no_cvv = Secret::Card { number: "4111111111111111".into(), cvv: None };
        assert_eq!(vault.open(&vault.seal(&no_cvv, b""), b""), Ok(no_cvv));
        let bank = Secret::BankAccount { account_number: "111111111".into() };
        assert_eq!(vault.open(&vault.seal(&bank, b"x"), b"x"), Ok(bank));
    }

    #[test]
    fn wrong_key_context_or_bytes_do_not_open() {
        let vault = Vault::ephemeral();
        let sealed = vault.seal(&card(), b"token-1");
        assert_eq!(vault.open(&sealed, b"token-2"), Err(VaultError::Rejected));
        assert_eq!(Vault::ephemeral().open(&sealed, b"token-1"), Err(VaultError::Rejected));
        assert_eq!(vault.open("v1.AAAA", b"token-1"), Err(VaultError::Malformed));
        assert_eq!(vault.open(&sealed.replacen("v1.", "v2.", 1), b"token-1"), Err(VaultError::Malformed));
        // A character inside the text (the last one may carry unused bits, so changing it can
        // make the text malformed rather than change the ciphertext).
        let mut tampered = sealed.into_bytes();
        let inner = tampered.len() - 8;
        tampered[inner] = if tampered[inner] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).expect("ascii");
        assert_eq!(vault.open(&tampered, b"token-1"), Err(VaultError::Rejected));
    }

    #[test]
    fn keys_load_from_hex() {
        let hex_key = Vault::generate_key_hex();
        assert_eq!(hex_key.len(), 64);
        let a = Vault::from_hex(&format!(" {hex_key}\n")).expect("key");
        let b = Vault::from_hex(&hex_key).expect("key");
        assert_eq!(b.open(&a.seal(&card(), b"c"), b"c"), Ok(card()));
        assert_eq!(Vault::from_hex("abcd").err(), Some(VaultError::BadKey));
        assert_eq!(Vault::from_hex(&"zz".repeat(32)).err(), Some(VaultError::BadKey));
        assert_eq!(format!("{a:?} {:?}", card()), "Vault([key redacted]) Secret::Card([redacted])");
    }
}

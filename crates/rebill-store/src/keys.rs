//! Secrets: private and public keys from the operating system's CSPRNG (128 bits), stored only
//! as SHA-256 hashes and compared in constant time.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    // The OS random source failing is not recoverable for a key generator.
    getrandom::fill(&mut buf).expect("the operating system's random source");
    hex::encode(buf)
}

/// A new private API key: 32 hexadecimal characters (128 bits).
pub fn generate_private_key() -> String {
    random_hex(16)
}

/// A new public key: `pk-` and 32 hexadecimal characters (128 bits).
pub fn generate_public_key() -> String {
    format!("pk-{}", random_hex(16))
}

/// The stored form of a private key.
pub fn hash_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// Constant-time equality of two stored hashes.
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_random_and_hashed() {
        let a = generate_private_key();
        let b = generate_private_key();
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
        assert!(generate_public_key().starts_with("pk-"));
        assert_eq!(hash_key(&a).len(), 64);
        assert_ne!(hash_key(&a), a);
        assert!(same(&hash_key(&a), &hash_key(&a)));
        assert!(!same(&hash_key(&a), &hash_key(&b)));
    }
}

//! [`Secret`]: the per-router key that signs CSRF tokens and session cookies.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// A random key made when the router is built: tokens it signed stop working when the process
/// restarts, which costs an operator a reload, never an action done twice.
#[derive(Clone)]
pub(crate) struct Secret([u8; 32]);

impl Secret {
    /// A fresh key from the operating system's random source.
    pub(crate) fn random() -> Self {
        Self(random_bytes())
    }

    /// `HMAC-SHA256(key, purpose ‖ 0 ‖ value)`, as lowercase hex.
    pub(crate) fn sign(&self, purpose: &str, value: &str) -> String {
        hex(&self.mac(purpose, value).finalize().into_bytes())
    }

    /// Whether `signature` is [`sign`](Self::sign)'s for `value`, compared in constant time.
    pub(crate) fn verify(&self, purpose: &str, value: &str, signature: &str) -> bool {
        match unhex(signature) {
            Some(bytes) => self.mac(purpose, value).verify_slice(&bytes).is_ok(),
            None => false,
        }
    }

    fn mac(&self, purpose: &str, value: &str) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0).expect("any key length");
        mac.update(purpose.as_bytes());
        mac.update(&[0]);
        mac.update(value.as_bytes());
        mac
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// 32 bytes from the operating system's random source.
pub(crate) fn random_bytes() -> [u8; 32] {
    let mut bytes = [0; 32];
    getrandom::fill(&mut bytes).expect("the operating system provides random bytes");
    bytes
}

/// Lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::Secret;

    #[test]
    fn a_signature_verifies_only_for_its_key_purpose_and_value() {
        let secret = Secret::random();
        let signature = secret.sign("csrf", "nonce");
        assert!(secret.verify("csrf", "nonce", &signature));
        assert!(!secret.verify("csrf", "other", &signature));
        assert!(!secret.verify("session", "nonce", &signature));
        assert!(!Secret::random().verify("csrf", "nonce", &signature));
        assert!(!secret.verify("csrf", "nonce", "zz"));
        assert!(!secret.verify("csrf", "nonce", ""));
    }
}

//! Keyed digests and constant-time comparison: what [`Hidden`](crate::Hidden) offers instead of
//! `Hash` and `==`, and what keys the audit record's digest of arguments that carry a hidden
//! value.
//!
//! An unkeyed digest (SHA-256) of a low-entropy secret is an offline oracle: anyone holding the
//! digest tries every candidate until one hashes the same. An HMAC under a key the holder does
//! not have is not: without the key, no candidate can be checked.

use std::fmt;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The fewest bytes a [`DigestKey`] holds: 256 bits, the size of HMAC-SHA-256's output.
pub const MIN_KEY_LEN: usize = 32;

/// A secret key for HMAC-SHA-256 digests. Its `Debug` shows no byte of it.
///
/// ```
/// use fusion_runtime::keyed::DigestKey;
///
/// // From configuration (the same bytes on every replica that must compare digests).
/// let key = DigestKey::new([7u8; 32]).unwrap();
/// assert_eq!(key.digest_hex(b"k_1"), key.digest_hex(b"k_1"));
/// assert_ne!(key.digest_hex(b"k_1"), DigestKey::random().digest_hex(b"k_1"));
/// assert!(DigestKey::new(b"short").is_err());
/// ```
#[derive(Clone)]
pub struct DigestKey {
    secret: Box<[u8]>,
}

impl fmt::Debug for DigestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DigestKey([hidden])")
    }
}

impl DigestKey {
    /// A key of `secret`; refused when it is shorter than [`MIN_KEY_LEN`] bytes.
    pub fn new(secret: impl AsRef<[u8]>) -> Result<DigestKey, String> {
        let secret = secret.as_ref();
        if secret.len() < MIN_KEY_LEN {
            return Err(format!(
                "a digest key has at least {MIN_KEY_LEN} bytes, this one {}",
                secret.len()
            ));
        }
        Ok(DigestKey {
            secret: secret.into(),
        })
    }

    /// A key of 32 random bytes (two UUID v4s: 244 random bits), known to this process only.
    pub fn random() -> DigestKey {
        let mut secret = Vec::with_capacity(32);
        secret.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
        secret.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
        DigestKey {
            secret: secret.into(),
        }
    }

    /// HMAC-SHA-256 of `message` under this key.
    pub fn digest(&self, message: &[u8]) -> [u8; 32] {
        hmac_sha256(&self.secret, message)
    }

    /// [`digest`](Self::digest) as 64 lowercase hex digits.
    pub fn digest_hex(&self, message: &[u8]) -> String {
        hex(&self.digest(message))
    }
}

/// HMAC-SHA-256 (RFC 2104).
pub(crate) fn hmac_sha256(secret: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut key = [0u8; BLOCK];
    if secret.len() > BLOCK {
        key[..32].copy_from_slice(&Sha256::digest(secret));
    } else {
        key[..secret.len()].copy_from_slice(secret);
    }
    let pad = |byte: u8| key.map(|k| k ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// Whether `a` and `b` are the same bytes, in a time that does not depend on where they
/// differ: `subtle` keeps the compiler from turning the comparison into an early exit. It does
/// return early when the lengths differ: use it where the length is no secret (MACs, digests).
pub(crate) fn bytes_match(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// Whether `secret` and `candidate` are the same bytes, in a time that depends on neither
/// where they differ nor whether their lengths do: both are hashed (SHA-256 runs in a time set
/// by the length alone, in 64-byte blocks) and the two digests compared in constant time.
pub(crate) fn secret_matches(secret: &[u8], candidate: &[u8]) -> bool {
    let (secret, candidate) = (Sha256::digest(secret), Sha256::digest(candidate));
    // Equal digests of unequal inputs would be a SHA-256 collision.
    bytes_match(&secret, &candidate)
}

/// Lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    // By table: `write!("{byte:02x}")` costs a formatter per byte, on every audited call.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_match_only_themselves() {
        assert!(secret_matches(b"tok_1", b"tok_1"));
        assert!(!secret_matches(b"tok_1", b"tok_2"));
        assert!(!secret_matches(b"tok_1", b"tok_10"));
        assert!(!secret_matches(b"", b"x"));
        assert!(bytes_match(b"", b""));
        assert!(!bytes_match(b"ab", b"abc"));
    }

    #[test]
    fn a_key_is_long_enough_and_never_printed() {
        let err = DigestKey::new([1u8; 31]).unwrap_err();
        assert_eq!(err, "a digest key has at least 32 bytes, this one 31");
        let key = DigestKey::new([0xabu8; 32]).unwrap();
        assert_eq!(format!("{key:?}"), "DigestKey([hidden])");
        assert_eq!(key.digest(b"m"), hmac_sha256(&[0xab; 32], b"m"));
    }

    #[test]
    fn hex_is_lowercase_two_digits_per_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa0, 0xff, 0x5c]), "000fa0ff5c");
        assert_eq!(hex(&[]), "");
        let every: Vec<u8> = (0..=255).collect();
        let expected: String = every.iter().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!(hex(&every), expected);
    }
}

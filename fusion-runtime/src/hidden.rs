//! Hidden values: a hidden field's value carries its hidden-ness with it (SPEC M2).
//!
//! A `#[hidden]` model field holds its value in a [`Hidden<T>`]. The wrapper has no
//! `Serialize`, no `Display`, no `Deref` and no `AsRef`, and its `Debug` prints `[hidden]`, so the
//! value cannot reach the wire, an error message or a log line by accident: not through a
//! presenter, a copy into a DTO, a `format!`, a `json!`, a conversion or a `#[derive(Debug)]`.
//! Reading it is one explicit call, [`Hidden::expose`], that a reviewer can grep for.
//!
//! Nor is it an oracle: it has no `PartialEq`, `Eq`, `PartialOrd`, `Ord` or `Hash`, which would
//! answer guesses (`stored == Hidden::new(guess)`), find the value by bisection (`probe <=
//! secret`) or hand every byte to a `Hasher`. Checking input against a secret is
//! [`Hidden::matches`], in constant time; a digest to store or look up is
//! [`Hidden::keyed_digest`], under a key of the author's.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer};

/// A value that never leaves the process unless the code says so with [`expose`](Hidden::expose).
///
/// ```
/// use fusion_runtime::Hidden;
///
/// let secret = Hidden::new(String::from("whsec_42"));
/// assert_eq!(format!("{secret:?}"), "[hidden]");
/// // The one way to read it: explicit, and easy to find in review.
/// assert_eq!(secret.expose(), "whsec_42");
/// ```
///
/// It cannot be serialized or displayed:
///
/// ```compile_fail
/// let secret = fusion_runtime::Hidden::new(String::from("whsec_42"));
/// let _ = serde_json::to_string(&secret);
/// ```
///
/// ```compile_fail
/// let secret = fusion_runtime::Hidden::new(String::from("whsec_42"));
/// let _ = format!("token {secret}");
/// ```
///
/// It is compared only explicitly, in constant time, and never ordered or hashed implicitly:
///
/// ```
/// use fusion_runtime::Hidden;
///
/// let stored = Hidden::new(String::from("whsec_42"));
/// assert!(stored.matches("whsec_42"));
/// assert!(!stored.matches("whsec_4"));
/// assert!(stored.matches_hidden(&Hidden::new(String::from("whsec_42"))));
/// ```
///
/// ```compile_fail
/// let stored = fusion_runtime::Hidden::new(String::from("whsec_42"));
/// let _ = stored == fusion_runtime::Hidden::new(String::from("whsec_42"));
/// ```
///
/// ```compile_fail
/// let stored = fusion_runtime::Hidden::new(String::from("whsec_42"));
/// let mut set = std::collections::HashSet::new();
/// set.insert(stored);
/// ```
///
/// It can come *in* (a `create` profile may set a hidden field, such as a new API key): it
/// implements `Deserialize`, and its schema is `T`'s, marked `writeOnly`.
#[derive(Clone, Copy, Default)]
pub struct Hidden<T>(T);

impl<T: AsRef<[u8]>> Hidden<T> {
    /// Whether `candidate` is the hidden value, byte for byte: how input (an API key, a webhook
    /// signature secret, a one-time code) is checked against a secret.
    ///
    /// It takes a time that depends on neither where the two differ nor whether their lengths
    /// do (both are hashed with SHA-256, whose time is set by the length alone in 64-byte
    /// blocks, and the digests are compared in constant time), so neither the answer's timing
    /// nor a series of guesses narrows the secret down faster than guessing it whole. Guesses
    /// are still answered: rate-limit whatever lets a caller submit them.
    ///
    /// For a secret that is not bytes (a number), compare `.expose()` deliberately.
    pub fn matches(&self, candidate: impl AsRef<[u8]>) -> bool {
        crate::keyed::secret_matches(self.0.as_ref(), candidate.as_ref())
    }

    /// Whether two hidden values are the same bytes, as [`matches`](Self::matches) does it.
    /// A type holding a `Hidden` field that needs `PartialEq` writes it by hand with this.
    pub fn matches_hidden<U: AsRef<[u8]>>(&self, other: &Hidden<U>) -> bool {
        self.matches(other.0.as_ref())
    }

    /// HMAC-SHA-256 of the hidden value under `key`, as 64 lowercase hex digits: what to store
    /// to find a secret again later (an API key's row looked up by the key a caller presents:
    /// store `keyed_digest` at creation, look up `Hidden::new(presented).keyed_digest(&key)`).
    ///
    /// Keyed, because a plain SHA-256 of a low-entropy secret is an offline oracle: whoever
    /// reads the stored digests tries candidates until one hashes the same. Without `key`
    /// (kept apart from the digests, the same on every replica) no candidate can be tried.
    /// The same value under the same key always gives the same digest, so it can be an index.
    /// For passwords, which a user chooses and which may be guessed, use a slow password hash
    /// (Argon2, scrypt) on `.expose()` instead.
    pub fn keyed_digest(&self, key: &crate::keyed::DigestKey) -> String {
        key.digest_hex(self.0.as_ref())
    }
}

impl<T> Hidden<T> {
    /// Hides `value`.
    pub const fn new(value: T) -> Self {
        Hidden(value)
    }

    /// Reads the hidden value. Every call is a deliberate act of the author: what the code
    /// then does with the value (log it, send it) is no longer guarded by Fusion.
    pub const fn expose(&self) -> &T {
        &self.0
    }

    /// Changes the hidden value in place.
    pub fn expose_mut(&mut self) -> &mut T {
        &mut self.0
    }

    /// Gives the value up, unhidden.
    pub fn into_exposed(self) -> T {
        self.0
    }
}

impl<T> From<T> for Hidden<T> {
    fn from(value: T) -> Self {
        Hidden(value)
    }
}

impl From<&str> for Hidden<String> {
    fn from(value: &str) -> Self {
        Hidden(value.to_owned())
    }
}

impl<T> fmt::Debug for Hidden<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// What a hidden value looks like in `Debug` output.
pub const REDACTED: &str = "[hidden]";

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Hidden<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(Hidden)
    }
}

impl<T: JsonSchema> JsonSchema for Hidden<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut schema = generator.subschema_for::<T>();
        schema.insert("writeOnly".into(), true.into());
        schema
    }
}

// `Serialize` in name only, as for models: the bound never holds, so any use is reported with
// the message below rather than with advice to derive or implement the trait. `Display` is left
// out on purpose: a `Display` in name only made the compiler add that `Display` *is* implemented
// for `Hidden<T>` under its headline; without one, formatting a hidden value is refused with the
// standard library's own message, which says nothing else (and no other crate may add one).
impl<'a, T> serde::Serialize for Hidden<T>
where
    crate::wire::TheWire: crate::wire::CarriesHiddenValue<'a, T>,
{
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        crate::wire::unreachable_impl()
    }
}

// `PartialEq`, `Eq`, `PartialOrd`, `Ord` and `Hash` in name only too: `==`, `<`, a `HashMap` key
// or a derive on a struct holding a `Hidden` is refused with a message that names `matches` and
// `keyed_digest`, rather than with advice to derive the trait.
impl<'a, T, U: ?Sized> PartialEq<U> for Hidden<T>
where
    crate::wire::TheWire: crate::wire::ComparedOnlyWithMatches<'a, T>,
{
    fn eq(&self, _: &U) -> bool {
        crate::wire::unreachable_impl()
    }
}

impl<'a, T> Eq for Hidden<T> where crate::wire::TheWire: crate::wire::ComparedOnlyWithMatches<'a, T> {}

impl<'a, T, U: ?Sized> PartialOrd<U> for Hidden<T>
where
    crate::wire::TheWire: crate::wire::NeverOrderedUseMatches<'a, T>,
{
    fn partial_cmp(&self, _: &U) -> Option<std::cmp::Ordering> {
        crate::wire::unreachable_impl()
    }
}

impl<'a, T> Ord for Hidden<T>
where
    crate::wire::TheWire: crate::wire::NeverOrderedUseMatches<'a, T>,
{
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        crate::wire::unreachable_impl()
    }
}

impl<'a, T> std::hash::Hash for Hidden<T>
where
    crate::wire::TheWire: crate::wire::HashedOnlyWithKeyedDigest<'a, T>,
{
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {
        crate::wire::unreachable_impl()
    }
}

/// Implemented only by [`Hidden<T>`]: how generated code tells a hidden value's type (used by
/// generated code).
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a `#[hidden]` field holds its value in `fusion::Hidden`, not in `{Self}`",
    label = "write `Hidden<{Self}>`",
    note = "`Hidden<T>` has no `Serialize`, no `Display` and a redacting `Debug`: the value cannot leave by accident; `.expose()` reads it"
)]
pub trait HiddenValue {}

impl<T> HiddenValue for Hidden<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_and_expose_reads() {
        let secret = Hidden::new(String::from("whsec_1"));
        assert_eq!(format!("{secret:?}"), "[hidden]");
        assert_eq!(format!("{:#?}", Some(&secret)), "Some(\n    [hidden],\n)");
        assert_eq!(secret.expose(), "whsec_1");
        assert_eq!(secret.into_exposed(), "whsec_1");
    }

    #[test]
    fn matches_compares_bytes_and_nothing_else() {
        let secret = Hidden::new(String::from("tok_SECRET"));
        assert!(secret.matches("tok_SECRET"));
        assert!(secret.matches(String::from("tok_SECRET")));
        assert!(secret.matches(b"tok_SECRET"));
        for guess in [
            "",
            "t",
            "tok_SECRE",
            "tok_SECRET ",
            "tok_secret",
            "tok_SECRETS",
        ] {
            assert!(!secret.matches(guess), "{guess:?}");
        }
        assert!(secret.matches_hidden(&Hidden::new(b"tok_SECRET".to_vec())));
        assert!(!secret.matches_hidden(&Hidden::new("tok_OTHER")));
    }

    #[test]
    fn keyed_digest_is_stable_under_a_key_and_unguessable_without_it() {
        use crate::keyed::DigestKey;
        use sha2::{Digest, Sha256};

        let key = DigestKey::new([9u8; 32]).unwrap();
        let secret = Hidden::new(String::from("1234"));
        let digest = secret.keyed_digest(&key);
        assert_eq!(digest.len(), 64);
        assert_eq!(digest, Hidden::new("1234").keyed_digest(&key));
        assert_ne!(digest, Hidden::new("1235").keyed_digest(&key));
        assert_ne!(
            digest,
            secret.keyed_digest(&DigestKey::new([8u8; 32]).unwrap())
        );
        // Not the plain SHA-256 that anyone can compute for every four-digit candidate.
        assert_ne!(digest, crate::keyed::hex(&Sha256::digest(b"1234")));
    }

    #[test]
    fn comes_in_as_its_inner_type_with_a_write_only_schema() {
        let secret: Hidden<String> = serde_json::from_str("\"k_1\"").unwrap();
        assert_eq!(secret.expose(), "k_1");
        let schema = schemars::SchemaGenerator::default().into_root_schema_for::<Hidden<String>>();
        assert_eq!(schema.get("type"), Some(&"string".into()));
        assert_eq!(schema.get("writeOnly"), Some(&true.into()));
    }
}

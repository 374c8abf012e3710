//! Hidden values: a hidden field's value carries its hidden-ness with it (SPEC M2).
//!
//! A `#[hidden]` model field holds its value in a [`Hidden<T>`]. The wrapper has no
//! `Serialize`, no `Display`, no `Deref` and no `AsRef`, and its `Debug` prints `[hidden]`, so the
//! value cannot reach the wire, an error message or a log line by accident: not through a
//! presenter, a copy into a DTO, a `format!`, a `json!`, a conversion or a `#[derive(Debug)]`.
//! Reading it is one explicit call, [`Hidden::expose`], that a reviewer can grep for.

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
/// It can come *in* (a `create` profile may set a hidden field, such as a new API key): it
/// implements `Deserialize`, and its schema is `T`'s, marked `writeOnly`.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hidden<T>(T);

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

// `Serialize` and `Display` in name only, as for models: the bounds never hold, so any use is
// reported with the messages below rather than with advice to derive or implement the trait.
impl<'a, T> serde::Serialize for Hidden<T>
where
    crate::wire::TheWire: crate::wire::CarriesHiddenValue<'a, T>,
{
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        crate::wire::unreachable_impl()
    }
}

impl<'a, T> fmt::Display for Hidden<T>
where
    crate::wire::TheWire: crate::wire::FormatsHiddenValue<'a, T>,
{
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
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
    fn comes_in_as_its_inner_type_with_a_write_only_schema() {
        let secret: Hidden<String> = serde_json::from_str("\"k_1\"").unwrap();
        assert_eq!(secret.expose(), "k_1");
        let schema = schemars::SchemaGenerator::default().into_root_schema_for::<Hidden<String>>();
        assert_eq!(schema.get("type"), Some(&"string".into()));
        assert_eq!(schema.get("writeOnly"), Some(&true.into()));
    }
}

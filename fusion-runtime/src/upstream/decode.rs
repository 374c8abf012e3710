//! Models from an upstream's JSON, without opening an input route.
//!
//! A model is never `Deserialize` (SPEC M3): nothing an agent sends can become one. What an
//! upstream answers is different: it is the store the model lives in. `#[model(upstream)]`
//! implements [`FromUpstream`], a conversion from a JSON value that is not `Deserialize`, so a
//! model still cannot be a tool parameter, and the value it builds still reaches the wire only
//! through a presenter.

use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// A value built from an upstream's JSON answer: a model declared `#[model(upstream)]`, a
/// list or an option of one, `serde_json::Value`, or `()` (the body is ignored).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be read from an upstream's answer",
    label = "an HTTP proxy tool returns a model declared `#[model(upstream, …)]`, a `Vec` or `Option` of one, `serde_json::Value` or `()`",
    note = "add `upstream` to the model's attribute: `#[model(upstream, fillable(…))]`"
)]
pub trait FromUpstream: Sized + Send + 'static {
    /// The names (Rust and upstream) of the guarded fields of the model read: no argument of
    /// a proxy tool may carry one, or an agent could set the field upstream. `#[model(upstream)]`
    /// lists them; a list or option of a model has its model's.
    const GUARDED_NAMES: &'static [&'static str] = &[];

    /// Builds the value; the error is logged, never shown to an agent.
    fn from_upstream(value: Value) -> Result<Self, DecodeError>;
}

impl FromUpstream for Value {
    fn from_upstream(value: Value) -> Result<Self, DecodeError> {
        Ok(value)
    }
}

impl FromUpstream for () {
    fn from_upstream(_: Value) -> Result<Self, DecodeError> {
        Ok(())
    }
}

impl<T: FromUpstream> FromUpstream for Vec<T> {
    const GUARDED_NAMES: &'static [&'static str] = T::GUARDED_NAMES;

    fn from_upstream(value: Value) -> Result<Self, DecodeError> {
        match value {
            Value::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(index, item)| T::from_upstream(item).map_err(|e| e.at(index.to_string())))
                .collect(),
            other => Err(DecodeError::new(format!(
                "expected a list, found {}",
                kind(&other)
            ))),
        }
    }
}

impl<T: FromUpstream> FromUpstream for Option<T> {
    const GUARDED_NAMES: &'static [&'static str] = T::GUARDED_NAMES;

    fn from_upstream(value: Value) -> Result<Self, DecodeError> {
        match value {
            Value::Null => Ok(None),
            other => T::from_upstream(other).map(Some),
        }
    }
}

/// Why an upstream's answer does not fit the type it should become: where (`items.3.total`)
/// and what. Logged, never shown to an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    path: Vec<String>,
    message: String,
}

impl DecodeError {
    /// An error at the top of the value.
    pub fn new(message: impl Into<String>) -> Self {
        DecodeError {
            path: Vec::new(),
            message: message.into(),
        }
    }

    /// The same error, one level down at `key`.
    #[must_use]
    pub fn at(mut self, key: impl Into<String>) -> Self {
        self.path.insert(0, key.into());
        self
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "the upstream's answer does not fit: {}", self.message)
        } else {
            write!(
                f,
                "the upstream's answer does not fit at `{}`: {}",
                self.path.join("."),
                self.message
            )
        }
    }
}

impl std::error::Error for DecodeError {}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The object a model is read from (used by generated code).
#[doc(hidden)]
pub fn object(value: Value, model: &str) -> Result<Map<String, Value>, DecodeError> {
    match value {
        Value::Object(object) => Ok(object),
        other => Err(DecodeError::new(format!(
            "expected an object for {model}, found {}",
            kind(&other)
        ))),
    }
}

/// Type-directed decoding of one field, for generated code: a type that is itself read from
/// an upstream (a nested model, a list of them) first, then any `Deserialize` type.
#[doc(hidden)]
#[allow(missing_debug_implementations)]
pub mod kinds {
    use std::marker::PhantomData;

    use super::*;

    /// Implemented when the `http-client` feature is on: a proxy tool compiled without it
    /// reports the missing feature, once, on its route.
    #[diagnostic::on_unimplemented(
        message = "HTTP proxy tools need Fusion's `http-client` feature",
        label = "this tool calls an upstream",
        note = "enable the feature (on by default): `fusion = {{ version = \"…\", features = [\"http-client\"] }}`"
    )]
    pub trait HttpClientEnabled {}

    #[cfg(feature = "http-client")]
    impl HttpClientEnabled for () {}

    /// Called by every generated proxy tool.
    pub fn require_http_client<T: HttpClientEnabled>() {}

    pub struct DecodeProbe<T>(PhantomData<fn() -> T>);

    impl<T> DecodeProbe<T> {
        pub const NEW: Self = DecodeProbe(PhantomData);
    }

    pub trait ViaUpstream<T> {
        fn __fusion_decode(&self, value: Option<Value>, key: &str) -> Result<T, DecodeError>;
    }
    impl<T: FromUpstream> ViaUpstream<T> for &DecodeProbe<T> {
        fn __fusion_decode(&self, value: Option<Value>, key: &str) -> Result<T, DecodeError> {
            T::from_upstream(value.unwrap_or(Value::Null)).map_err(|e| e.at(key))
        }
    }

    pub trait ViaSerde<T> {
        fn __fusion_decode(&self, value: Option<Value>, key: &str) -> Result<T, DecodeError>;
    }
    impl<T: DeserializeOwned> ViaSerde<T> for DecodeProbe<T> {
        fn __fusion_decode(&self, value: Option<Value>, key: &str) -> Result<T, DecodeError> {
            let missing = value.is_none();
            serde_json::from_value(value.unwrap_or(Value::Null)).map_err(|error| {
                if missing {
                    DecodeError::new("missing").at(key)
                } else {
                    DecodeError::new(error.to_string()).at(key)
                }
            })
        }
    }

    pub struct EncodeProbe<T>(PhantomData<fn() -> T>);

    impl<T> EncodeProbe<T> {
        pub const NEW: Self = EncodeProbe(PhantomData);
    }

    /// A hidden value a profile filled goes to the upstream it belongs to; it never comes back
    /// to an agent (the model's presenters cannot list it).
    pub trait ViaHidden<T> {
        fn __fusion_encode(&self, value: &T) -> Result<Value, serde_json::Error>;
    }
    impl<T: serde::Serialize> ViaHidden<crate::Hidden<T>> for &EncodeProbe<crate::Hidden<T>> {
        fn __fusion_encode(&self, value: &crate::Hidden<T>) -> Result<Value, serde_json::Error> {
            serde_json::to_value(value.expose())
        }
    }

    pub trait ViaSerialize<T> {
        fn __fusion_encode(&self, value: &T) -> Result<Value, serde_json::Error>;
    }
    impl<T: serde::Serialize> ViaSerialize<T> for EncodeProbe<T> {
        fn __fusion_encode(&self, value: &T) -> Result<Value, serde_json::Error> {
            serde_json::to_value(value)
        }
    }

    /// Where a proxy tool's argument goes (generated code): a profile's fields, nothing (a
    /// context parameter), or the argument itself.
    pub struct PartProbe<T>(PhantomData<fn() -> T>);

    impl<T> PartProbe<T> {
        pub const NEW: Self = PartProbe(PhantomData);
    }

    pub struct GroupPart;
    pub struct ContextPart;
    pub struct FieldPart;

    pub trait ViaPartGroup {
        fn __fusion_part(&self) -> GroupPart;
    }
    impl<T: crate::upstream::UpstreamFields> ViaPartGroup for &&PartProbe<T> {
        fn __fusion_part(&self) -> GroupPart {
            GroupPart
        }
    }
    pub trait ViaPartContext {
        fn __fusion_part(&self) -> ContextPart;
    }
    impl<T: crate::FromContext> ViaPartContext for &PartProbe<T> {
        fn __fusion_part(&self) -> ContextPart {
            ContextPart
        }
    }
    pub trait ViaPartField {
        fn __fusion_part(&self) -> FieldPart;
    }
    impl<T: serde::Serialize> ViaPartField for PartProbe<T> {
        fn __fusion_part(&self) -> FieldPart {
            FieldPart
        }
    }

    impl GroupPart {
        pub fn add<G: crate::upstream::UpstreamFields>(
            self,
            request: &mut crate::upstream::UpstreamRequest,
            placement: crate::upstream::Placement,
            _name: &str,
            group: &G,
        ) -> Result<(), crate::ToolError> {
            request.group(placement, group)
        }
    }
    impl ContextPart {
        pub fn add<T>(
            self,
            _request: &mut crate::upstream::UpstreamRequest,
            _placement: crate::upstream::Placement,
            _name: &str,
            _value: &T,
        ) -> Result<(), crate::ToolError> {
            Ok(())
        }
    }
    impl FieldPart {
        pub fn add<T: serde::Serialize>(
            self,
            request: &mut crate::upstream::UpstreamRequest,
            placement: crate::upstream::Placement,
            name: &str,
            value: &T,
        ) -> Result<(), crate::ToolError> {
            request.arg(placement, name, value)
        }
    }

    /// Implemented only by [`Free`](crate::args::kinds::Free): the marker of a guarded field
    /// (`{Model}_{field}`) in an error is how an argument of an HTTP proxy tool that would
    /// send it upstream is reported.
    #[diagnostic::on_unimplemented(
        message = "this argument would send a guarded field to the upstream: `{Self}`",
        label = "an agent never sets this field",
        note = "the tool returns a model whose field of this name is guarded: an argument of an HTTP proxy tool with that name would let an agent set it upstream; take it from the server's context instead (middleware, `Provided`)"
    )]
    pub trait ArgumentIsNotGuarded {}
    // Not recommended: it would only name an internal type under the headline.
    #[diagnostic::do_not_recommend]
    impl ArgumentIsNotGuarded for crate::args::kinds::Free {}

    use crate::args::kinds::{
        ContextParam, FieldParam, GroupParam, ModelParam, Taken, UnusableParam,
    };

    impl<T> FieldParam<T> {
        pub fn must_not_send<F: ArgumentIsNotGuarded>(&self, _taken: Taken<F>) {}
    }
    impl<T> ContextParam<T> {
        pub fn must_not_send<F>(&self, _taken: Taken<F>) {}
    }
    impl<T> GroupParam<T> {
        pub fn must_not_send<F>(&self, _taken: Taken<F>) {}
    }
    impl<T> ModelParam<T> {
        pub fn must_not_send<F>(&self, _taken: Taken<F>) {}
    }
    impl<T> UnusableParam<T> {
        pub fn must_not_send<F>(&self, _taken: Taken<F>) {}
    }
}

//! Type-directed choice of a parameter's kind, for generated code. The generated code calls
//! `(&&&&&Probe::<T>::NEW).__fusion_param()`; method resolution tries a model first (refused),
//! then the context kind, then an argument group, then a plain argument, and finally a kind
//! whose use is a compile error pointing at the parameter.
//!
//! Each kind reads in two steps, as the request path does: `read` takes what the agent sent
//! (before middleware and guards), `take` produces the parameter with the call's context
//! (after them).
// Probes of generated code, never values a user holds.
#![allow(missing_docs, missing_debug_implementations)]

use std::marker::PhantomData;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;

use super::{ArgReader, Params};
use crate::context::{CallContext, FromContext};
use crate::error::{ErrorCatalog, ToolError};
use crate::model::{ArgumentGroup, Model};

pub struct Probe<T>(PhantomData<fn() -> T>);

impl<T> Probe<T> {
    pub const NEW: Self = Probe(PhantomData);
}

/// What a context parameter reads from the arguments: nothing.
pub struct FromTheContext;

pub struct ModelParam<T>(PhantomData<fn() -> T>);
pub struct ContextParam<T>(PhantomData<fn() -> T>);
pub struct GroupParam<T>(PhantomData<fn() -> T>);
pub struct FieldParam<T>(PhantomData<fn() -> T>);
pub struct UnusableParam<T>(PhantomData<fn() -> T>);

pub trait ViaModel<T> {
    fn __fusion_param(&self) -> ModelParam<T>;
}
impl<T: Model> ViaModel<T> for &&&&Probe<T> {
    fn __fusion_param(&self) -> ModelParam<T> {
        ModelParam(PhantomData)
    }
}

pub trait ViaContext<T> {
    fn __fusion_param(&self) -> ContextParam<T>;
}
impl<T: FromContext> ViaContext<T> for &&&Probe<T> {
    fn __fusion_param(&self) -> ContextParam<T> {
        ContextParam(PhantomData)
    }
}

pub trait ViaGroup<T> {
    fn __fusion_param(&self) -> GroupParam<T>;
}
impl<T: ArgumentGroup> ViaGroup<T> for &&Probe<T> {
    fn __fusion_param(&self) -> GroupParam<T> {
        GroupParam(PhantomData)
    }
}

pub trait ViaField<T> {
    fn __fusion_param(&self) -> FieldParam<T>;
}
impl<T: DeserializeOwned + JsonSchema + Send + 'static> ViaField<T> for &Probe<T> {
    fn __fusion_param(&self) -> FieldParam<T> {
        FieldParam(PhantomData)
    }
}

pub trait ViaNothing<T> {
    fn __fusion_param(&self) -> UnusableParam<T>;
}
impl<T> ViaNothing<T> for Probe<T> {
    fn __fusion_param(&self) -> UnusableParam<T> {
        UnusableParam(PhantomData)
    }
}

impl<T: FromContext> ContextParam<T> {
    pub fn declare(self, params: &mut Params, _name: &'static str, _doc: Option<&'static str>) {
        params.context::<T>();
    }
    /// Nothing to read: the value comes from the context.
    pub fn read(self, _args: &mut ArgReader<'_>, _name: &'static str) -> FromTheContext {
        FromTheContext
    }
    pub fn take(self, context: &CallContext, _read: FromTheContext) -> Result<T, ToolError> {
        T::from_context(context)
    }
}

/// Never implemented: naming it in an error is how `#[schemars(…)]` on a parameter that is not a
/// plain argument is reported.
#[diagnostic::on_unimplemented(
    message = "`#[schemars(…)]` constrains a plain argument; `{Self}` is not one",
    label = "a context parameter or an argument group",
    note = "put the constraints on the fields of the group's type (for a model's profile: on the model's field)"
)]
pub trait SchemaAttributesAreForPlainArguments {}

impl<T: FromContext> ContextParam<T> {
    pub fn declare_with_schema(
        self,
        _params: &mut Params,
        _name: &'static str,
        _doc: Option<&'static str>,
        _schema: fn(&mut SchemaGenerator) -> Schema,
    ) where
        T: SchemaAttributesAreForPlainArguments,
    {
    }
}

impl<T: ArgumentGroup> GroupParam<T> {
    pub fn declare_with_schema(
        self,
        _params: &mut Params,
        _name: &'static str,
        _doc: Option<&'static str>,
        _schema: fn(&mut SchemaGenerator) -> Schema,
    ) where
        T: SchemaAttributesAreForPlainArguments,
    {
    }
}

impl<T: ArgumentGroup> GroupParam<T> {
    pub fn declare(self, params: &mut Params, _name: &'static str, _doc: Option<&'static str>) {
        params.group::<T>();
    }
    pub fn read(self, args: &mut ArgReader<'_>, _name: &'static str) -> Option<T> {
        args.group::<T>()
    }
    pub fn take(self, _context: &CallContext, read: Option<T>) -> Result<T, ToolError> {
        read.ok_or_else(missing_argument)
    }
}

impl<T: DeserializeOwned + JsonSchema + Send + 'static> FieldParam<T> {
    pub fn declare(self, params: &mut Params, name: &'static str, doc: Option<&'static str>) {
        params.field::<T>(name, doc);
    }
    pub fn read(self, args: &mut ArgReader<'_>, name: &'static str) -> Option<T> {
        args.field::<T>(name)
    }
    pub fn declare_constrained(
        self,
        params: &mut Params,
        name: &'static str,
        doc: Option<&'static str>,
        constrain: fn(schemars::Schema) -> schemars::Schema,
    ) {
        params.field_constrained::<T>(name, doc, constrain);
    }
    pub fn take(self, _context: &CallContext, read: Option<T>) -> Result<T, ToolError> {
        read.ok_or_else(missing_argument)
    }
}

/// Never implemented: naming it in an error is how a model parameter is reported.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is a model: it cannot be a tool parameter",
    label = "an agent would set every field, guarded ones included",
    note = "take one of its fillable profiles (`fusion::Create<{Self}>`, `Update<{Self}>` or `Filter<{Self}>`) or plain arguments"
)]
pub trait ModelsAreNeverParameters {}

impl<T> ModelParam<T> {
    pub fn declare(self, _params: &mut Params, _name: &'static str, _doc: Option<&'static str>)
    where
        T: ModelsAreNeverParameters,
    {
    }
    pub fn declare_with_schema(
        self,
        _params: &mut Params,
        _name: &'static str,
        _doc: Option<&'static str>,
        _schema: fn(&mut SchemaGenerator) -> Schema,
    ) where
        T: ModelsAreNeverParameters,
    {
    }
    pub fn read(self, _args: &mut ArgReader<'_>, _name: &'static str) -> Option<T> {
        None
    }
    pub fn take(self, _context: &CallContext, _read: Option<T>) -> Result<T, ToolError> {
        Err(missing_argument())
    }
}

/// A group that reserves the argument name whose hash is `H`: a guarded or hidden field of
/// its model that it leaves out (generated by `#[model]` for each profile). `Field` names
/// the field in errors.
pub trait ReservesName<const H: u64> {
    type Field;
}

pub struct ReservedProbe<Q, const H: u64>(PhantomData<fn() -> Q>);

impl<Q, const H: u64> ReservedProbe<Q, H> {
    pub const NEW: Self = ReservedProbe(PhantomData);
}

/// What a name check found: the marker of the field whose name an argument took, or [`Free`].
/// A plain type parameter rather than an associated type: a bound on a projection made rustc
/// add a note naming the probe's generated type.
pub struct Taken<F>(PhantomData<fn() -> F>);

pub trait ViaReserved<F> {
    fn __fusion_reserved(&self) -> Taken<F>;
}
impl<Q: ReservesName<H>, const H: u64> ViaReserved<Q::Field> for &ReservedProbe<Q, H> {
    fn __fusion_reserved(&self) -> Taken<Q::Field> {
        Taken(PhantomData)
    }
}

pub trait ViaUnreserved {
    fn __fusion_reserved(&self) -> Taken<Free>;
}
impl<Q, const H: u64> ViaUnreserved for ReservedProbe<Q, H> {
    fn __fusion_reserved(&self) -> Taken<Free> {
        Taken(PhantomData)
    }
}

/// No field's name was taken.
pub struct Free;

/// Implemented only by [`Free`]: a guarded or hidden field's marker (named after
/// the field) in an error is how a plain argument that takes its name is reported.
#[diagnostic::on_unimplemented(
    message = "this argument has the name of a field that an agent never sets: `{Self}`",
    label = "rename this argument",
    note = "the tool takes a profile of a model whose field of this name is guarded or hidden: the profile leaves that field out on purpose, so no other argument may bring it in"
)]
pub trait ArgumentNameIsFree {}
// Not recommended: under the headline, "the trait is implemented for `Free`" would only
// name an internal type.
#[diagnostic::do_not_recommend]
impl ArgumentNameIsFree for Free {}

// Only a plain argument has a name an agent sends; other kinds take any name.
impl<T> FieldParam<T> {
    pub fn must_not_take<F: ArgumentNameIsFree>(&self, _taken: Taken<F>) {}
}
impl<T> ContextParam<T> {
    pub fn must_not_take<F>(&self, _taken: Taken<F>) {}
}
impl<T> GroupParam<T> {
    pub fn must_not_take<F>(&self, _taken: Taken<F>) {}
}
impl<T> ModelParam<T> {
    pub fn must_not_take<F>(&self, _taken: Taken<F>) {}
}
impl<T> UnusableParam<T> {
    pub fn must_not_take<F>(&self, _taken: Taken<F>) {}
}

/// A value formatted into an agent-facing error message (by `derive(ToolError)`): neither a
/// model nor a hidden value may be.
pub struct MessageArg<T>(PhantomData<fn() -> T>);

impl<T> MessageArg<T> {
    pub const NEW: Self = MessageArg(PhantomData);
}

pub struct ModelInMessage<T>(PhantomData<fn() -> T>);
pub struct HiddenInMessage<T>(PhantomData<fn() -> T>);
pub struct PlainInMessage;

pub trait ViaModelInMessage<T> {
    fn __fusion_message_arg(&self) -> ModelInMessage<T>;
}
impl<T: Model> ViaModelInMessage<T> for &&MessageArg<T> {
    fn __fusion_message_arg(&self) -> ModelInMessage<T> {
        ModelInMessage(PhantomData)
    }
}
pub trait ViaHiddenInMessage<T> {
    fn __fusion_message_arg(&self) -> HiddenInMessage<T>;
}
impl<T: crate::hidden::HiddenValue> ViaHiddenInMessage<T> for &MessageArg<T> {
    fn __fusion_message_arg(&self) -> HiddenInMessage<T> {
        HiddenInMessage(PhantomData)
    }
}
pub trait ViaPlainInMessage {
    fn __fusion_message_arg(&self) -> PlainInMessage;
}
impl<T> ViaPlainInMessage for MessageArg<T> {
    fn __fusion_message_arg(&self) -> PlainInMessage {
        PlainInMessage
    }
}

/// Never implemented: how a model formatted into an error message is reported.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is a model: it cannot be formatted into a message an agent reads",
    label = "this message formats a model",
    note = "format the presentable fields you mean (`{{id}}`), never the whole model"
)]
pub trait ModelsStayOutOfMessages {}

/// Never implemented: how a hidden value formatted into an error message is reported.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is a hidden value: it cannot be formatted into a message an agent reads",
    label = "this message formats a hidden value",
    note = "a hidden value never reaches an agent; say what is wrong without it"
)]
pub trait HiddenValuesStayOutOfMessages {}

impl<T> ModelInMessage<T> {
    pub fn check(self)
    where
        T: ModelsStayOutOfMessages,
    {
    }
}
impl<T> HiddenInMessage<T> {
    pub fn check(self)
    where
        T: HiddenValuesStayOutOfMessages,
    {
    }
}
impl PlainInMessage {
    pub fn check(self) {}
}

/// A value as `derive(ToolError)` formats it into a message: the value itself, or, for a model
/// or a hidden value (refused by [`MessageArg`]'s check), a stand-in, so that the one mistake
/// is reported once, by that check, and not again by `format!`.
pub struct MessageValue<'v, T: ?Sized>(pub &'v T);

/// What a message shows in place of a value it may not format; only in code that does not
/// compile (the check refuses it), so never shown.
#[derive(Debug)]
pub struct Withheld;

impl std::fmt::Display for Withheld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[withheld]")
    }
}

pub trait ViaModelValue {
    fn __fusion_message_value(&self) -> Withheld;
}
impl<T: Model> ViaModelValue for &&MessageValue<'_, T> {
    fn __fusion_message_value(&self) -> Withheld {
        Withheld
    }
}
pub trait ViaHiddenValue {
    fn __fusion_message_value(&self) -> Withheld;
}
impl<T: crate::hidden::HiddenValue> ViaHiddenValue for &MessageValue<'_, T> {
    fn __fusion_message_value(&self) -> Withheld {
        Withheld
    }
}
pub trait ViaPlainValue<'v, T: ?Sized> {
    fn __fusion_message_value(&self) -> &'v T;
}
impl<'v, T: ?Sized> ViaPlainValue<'v, T> for MessageValue<'v, T> {
    fn __fusion_message_value(&self) -> &'v T {
        self.0
    }
}

/// The actions a handler's error type may offer, when it is an [`ErrorCatalog`]; none
/// otherwise (a plain `ToolError` or a standard error).
pub struct CatalogProbe<E>(PhantomData<fn() -> E>);

impl<E> CatalogProbe<E> {
    pub const NEW: Self = CatalogProbe(PhantomData);
}

/// What an error catalog names: the actions it offers, and the tools its recovery lines name
/// `(type, variant, key)`.
pub type Catalog = (
    &'static [&'static str],
    &'static [(&'static str, &'static str, &'static str)],
);

pub trait ViaCatalog {
    fn __fusion_catalog(&self) -> Catalog;
}
impl<E: ErrorCatalog> ViaCatalog for &CatalogProbe<E> {
    fn __fusion_catalog(&self) -> Catalog {
        (E::ACTIONS, E::RECOVERY_TOOLS)
    }
}

pub trait ViaNoCatalog {
    fn __fusion_catalog(&self) -> Catalog;
}
impl<E> ViaNoCatalog for CatalogProbe<E> {
    fn __fusion_catalog(&self) -> Catalog {
        (&[], &[])
    }
}

/// A parameter that reading reported as present but did not produce: unreachable unless a
/// custom extractor breaks its contract.
#[cold]
pub fn missing_argument() -> ToolError {
    ToolError::internal_message("a parameter was accepted but not produced")
}

/// Never implemented: naming it in an error is how an unusable parameter is reported.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a tool parameter",
    label = "neither an argument nor extractable from the call",
    note = "an argument implements `Deserialize + JsonSchema` (derive both)",
    note = "a group of arguments is a model's fillable profile (`ArgumentGroup`)",
    note = "a value from the call context implements `fusion::FromContext`"
)]
pub trait ToolParameter {}

// The bound sits on the method, not the impl: the call then resolves and the unmet bound
// is reported once, with `ToolParameter`'s message, on the parameter's type.
impl<T> UnusableParam<T> {
    pub fn declare(self, _params: &mut Params, _name: &'static str, _doc: Option<&'static str>)
    where
        T: ToolParameter,
    {
    }
    pub fn declare_with_schema(
        self,
        _params: &mut Params,
        _name: &'static str,
        _doc: Option<&'static str>,
        _schema: fn(&mut SchemaGenerator) -> Schema,
    ) where
        T: ToolParameter,
    {
    }
    pub fn read(self, _args: &mut ArgReader<'_>, _name: &'static str) -> Option<T> {
        None
    }
    pub fn take(self, _context: &CallContext, _read: Option<T>) -> Result<T, ToolError> {
        Err(missing_argument())
    }
}

//! A tool's parameters: how they are declared, how their schema is built once, and how each
//! call's arguments are read and validated (SPEC T3, E2).
//!
//! A parameter is one of three kinds, decided by trait resolution, never by the type's name:
//! - taken from the call context ([`FromContext`]): shared state, a verified tenant, …;
//! - a group of arguments flattened into the tool's arguments ([`ArgumentGroup`]): a model's
//!   fillable profile;
//! - a plain argument (`Deserialize + JsonSchema`), named after the parameter.

use std::marker::PhantomData;
use std::sync::Arc;

use rmcp::model::JsonObject;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::context::{CallContext, FromContext, ServerParts};
use crate::error::{ToolError, codes};
use crate::explain::{Issue, describe, explain};
use crate::model::{ArgumentGroup, Model, ModelFields};

/// The most issues a `VALIDATION_ERROR` lists.
const MAX_ISSUES: usize = 20;

/// The parameters of one tool, as declared. Turned into an input schema and an
/// [`ArgLayout`] when the server is built.
#[derive(Default)]
pub struct Params {
    pub(crate) fields: Vec<FieldParamSpec>,
    pub(crate) groups: Vec<GroupParamSpec>,
    pub(crate) context: Vec<ContextParamSpec>,
}

pub(crate) struct FieldParamSpec {
    pub(crate) name: &'static str,
    pub(crate) description: Option<&'static str>,
    pub(crate) schema: fn(&mut SchemaGenerator) -> Schema,
    pub(crate) optional: bool,
}

pub(crate) struct GroupParamSpec {
    pub(crate) type_name: &'static str,
    pub(crate) schema: fn(&mut SchemaGenerator) -> Schema,
    pub(crate) model: Option<ModelFields>,
}

pub(crate) struct ContextParamSpec {
    pub(crate) type_name: &'static str,
    pub(crate) check: fn(&ServerParts) -> Result<(), String>,
}

impl Params {
    /// No parameters.
    pub fn new() -> Self {
        Params::default()
    }

    /// Declares a plain argument `name` of type `T`.
    pub fn field<T>(&mut self, name: &'static str, description: Option<&'static str>)
    where
        T: DeserializeOwned + JsonSchema,
    {
        self.fields.push(FieldParamSpec {
            name,
            description,
            schema: SchemaGenerator::subschema_for::<T>,
            optional: !crate::present::is_required::<T>(),
        });
    }

    /// Declares a group of arguments flattened into the tool's arguments.
    pub fn group<G: ArgumentGroup>(&mut self) {
        self.groups.push(GroupParamSpec {
            type_name: std::any::type_name::<G>(),
            schema: G::json_schema,
            model: G::MODEL,
        });
    }

    /// Declares a type that receives the arguments as a whole (its fields are the arguments).
    pub fn whole<A: DeserializeOwned + JsonSchema>(&mut self) {
        self.groups.push(GroupParamSpec {
            type_name: std::any::type_name::<A>(),
            schema: A::json_schema,
            model: None,
        });
    }

    /// Declares a parameter taken from the call context.
    pub fn context<T: FromContext>(&mut self) {
        self.context.push(ContextParamSpec {
            type_name: std::any::type_name::<T>(),
            check: T::check,
        });
    }

    /// Builds the input schema, reporting conflicts between parameters.
    pub(crate) fn input_schema(&self, problems: &mut Vec<String>) -> JsonObject {
        let mut generator = crate::schema::input_generator();
        let mut properties = Map::new();
        let mut required: Vec<Value> = Vec::new();
        for group in &self.groups {
            let schema = (group.schema)(&mut generator).to_value();
            let empty = Map::new();
            // A struct without fields has an object schema without properties.
            let group_properties = match schema.get("properties") {
                Some(properties) => properties.as_object(),
                None => (schema.get("type") == Some(&Value::from("object"))).then_some(&empty),
            };
            let Some(group_properties) = group_properties else {
                problems.push(format!(
                    "argument group `{}` must be a struct with named fields",
                    group.type_name
                ));
                continue;
            };
            for (name, property) in group_properties {
                if properties.insert(name.clone(), property.clone()).is_some() {
                    problems.push(format!("argument `{name}` is declared twice"));
                }
            }
            if let Some(Value::Array(names)) = schema.get("required") {
                required.extend(names.iter().cloned());
            }
        }
        for field in &self.fields {
            // A guarded or hidden field left out of a profile on purpose must not come in under
            // a plain argument of the same name.
            for group in &self.groups {
                if let Some(model) = group.model
                    && let Some(reserved) = model.reserved(field.name)
                {
                    problems.push(format!(
                        "argument `{}` has the name of `{}.{}`, a {} field of the model behind `{}`: an agent never sets it; rename the argument",
                        field.name,
                        model.name,
                        reserved.name,
                        if reserved.guarded { "guarded" } else { "hidden" },
                        group.type_name,
                    ));
                }
            }
            let mut schema = (field.schema)(&mut generator);
            if let Some(description) = field.description {
                schema.insert("description".into(), description.into());
            }
            if properties
                .insert(field.name.to_owned(), schema.to_value())
                .is_some()
            {
                problems.push(format!("argument `{}` is declared twice", field.name));
            }
            if !field.optional {
                required.push(field.name.into());
            }
        }
        crate::schema::object_schema(properties, required, &mut generator)
    }

    pub(crate) fn check_context(
        &self,
        server: &ServerParts,
        problems: &mut Vec<String>,
        tool: &str,
    ) {
        for context in &self.context {
            if let Err(problem) = (context.check)(server) {
                problems.push(format!(
                    "tool `{tool}` cannot be served: its parameter of type `{}` cannot be provided: {problem}",
                    context.type_name
                ));
            }
        }
    }

    /// How arguments are read: the accepted names are the input schema's properties.
    pub(crate) fn layout(&self, schema: Arc<Value>) -> ArgLayout {
        let accepted = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| properties.keys().cloned().collect())
            .unwrap_or_default();
        ArgLayout {
            accepted,
            sole_group: self.groups.len() == 1 && self.fields.is_empty(),
            schema,
        }
    }
}

/// A parameter list compiled on its own, reading arguments exactly as the pipeline does (for
/// benchmarks and tests of argument handling).
#[doc(hidden)]
pub struct CompiledParams {
    layout: ArgLayout,
    tool: String,
}

impl Params {
    /// Compiles the parameters outside a server.
    #[doc(hidden)]
    pub fn compile(&self, tool: &str) -> Result<CompiledParams, crate::error::BuildError> {
        let mut problems = Vec::new();
        let schema = self.input_schema(&mut problems);
        if !problems.is_empty() {
            return Err(crate::error::BuildError::new(problems));
        }
        Ok(CompiledParams {
            layout: self.layout(Arc::new(Value::Object(schema))),
            tool: tool.to_owned(),
        })
    }
}

impl CompiledParams {
    /// Reads `args` as one group of arguments, validating like a tool call.
    pub fn read_group<G: ArgumentGroup>(&self, args: JsonObject) -> Result<G, ToolError> {
        let mut reader = ArgReader::new(args, &self.layout, &self.tool);
        let group = reader.group::<G>();
        reader.finish()?;
        group.ok_or_else(kinds::missing_argument)
    }
}

/// How a tool's arguments are read, computed once when the server is built.
#[derive(Debug)]
pub struct ArgLayout {
    accepted: Vec<String>,
    sole_group: bool,
    schema: Arc<Value>,
}

/// Reads one call's arguments. Every value is deserialized by reference from the arguments
/// the agent sent, so that when anything is wrong the whole object can be explained against
/// the input schema, every issue at once.
pub struct ArgReader<'l> {
    args: Value,
    layout: &'l ArgLayout,
    tool: &'l str,
    /// The first deserialization error, kept in case the schema explains nothing.
    failed: Option<String>,
}

impl<'l> ArgReader<'l> {
    pub(crate) fn new(args: JsonObject, layout: &'l ArgLayout, tool: &'l str) -> Self {
        ArgReader {
            args: Value::Object(args),
            layout,
            tool,
            failed: None,
        }
    }

    fn object(&self) -> &Map<String, Value> {
        match &self.args {
            Value::Object(object) => object,
            // The reader is only ever built from an object.
            _ => unreachable_object(),
        }
    }

    /// Reads plain argument `name`.
    pub fn field<T: DeserializeOwned>(&mut self, name: &str) -> Option<T> {
        let value = self.object().get(name).unwrap_or(&Value::Null);
        match T::deserialize(value) {
            Ok(value) => Some(value),
            Err(error) => {
                self.fail(error);
                None
            }
        }
    }

    /// Reads a group of arguments.
    pub fn group<G: ArgumentGroup>(&mut self) -> Option<G> {
        let result = if self.layout.sole_group {
            G::deserialize(&self.args)
        } else {
            // Only this group's own fields: the others belong to other parameters.
            let object = self.object();
            let own: Map<String, Value> = G::FIELDS
                .iter()
                .filter_map(|name| {
                    object
                        .get(*name)
                        .map(|value| ((*name).to_owned(), value.clone()))
                })
                .collect();
            G::deserialize(&Value::Object(own))
        };
        match result {
            Ok(group) => Some(group),
            Err(error) => {
                self.fail(error);
                None
            }
        }
    }

    /// Reads all arguments into one type (the tool's only parameter).
    pub fn whole<A: DeserializeOwned>(&mut self) -> Option<A> {
        match A::deserialize(&self.args) {
            Ok(args) => Some(args),
            Err(error) => {
                self.fail(error);
                None
            }
        }
    }

    /// Ends reading: any unknown argument or any value that did not fit is a
    /// `VALIDATION_ERROR` listing every issue.
    pub fn finish(self) -> Result<(), ToolError> {
        let unknown = self
            .object()
            .keys()
            .any(|key| !self.layout.accepted.iter().any(|accepted| accepted == key));
        if self.failed.is_none() && !unknown {
            return Ok(());
        }
        let mut issues = explain(&self.layout.schema, &self.args, MAX_ISSUES);
        if issues.is_empty() {
            // serde refused what the schema allows: report serde's own words.
            issues.push(Issue {
                path: String::new(),
                problem: self
                    .failed
                    .unwrap_or_else(|| "invalid arguments".to_owned()),
                expected: describe(&self.layout.schema),
                sent: None,
            });
        }
        Err(validation_error(self.tool, &issues))
    }

    #[cold]
    fn fail(&mut self, error: serde_json::Error) {
        if self.failed.is_none() {
            self.failed = Some(error.to_string());
        }
    }
}

#[cold]
fn unreachable_object() -> ! {
    unreachable!("ArgReader is always built from a JSON object")
}

/// A `VALIDATION_ERROR` naming each field, what was sent and what was expected.
pub(crate) fn validation_error(tool: &str, issues: &[Issue]) -> ToolError {
    let message = match issues {
        [] => format!("The arguments for `{tool}` are invalid."),
        [one] => format!(
            "The arguments for `{tool}` are invalid: {}.",
            describe_issue(one)
        ),
        many => format!(
            "The arguments for `{tool}` are invalid ({} problems): {}.",
            many.len(),
            many.iter()
                .map(describe_issue)
                .collect::<Vec<_>>()
                .join("; ")
        ),
    };
    let details: Vec<Value> = issues
        .iter()
        .map(|issue| {
            serde_json::json!({
                "field": issue.path,
                "problem": issue.problem,
                "expected": issue.expected,
                "sent": issue.sent,
            })
        })
        .collect();
    ToolError::new(codes::VALIDATION_ERROR, message)
        .with_recovery(
            "Correct the listed fields and call again; the tool's input schema describes every argument.",
        )
        .with_details(serde_json::json!({ "issues": details }))
}

fn describe_issue(issue: &Issue) -> String {
    let field = if issue.path.is_empty() {
        "arguments".to_owned()
    } else {
        format!("`{}`", issue.path)
    };
    let mut text = format!("{field}: {}", issue.problem);
    if issue.problem == "unknown field" {
        text.push_str(&format!(" ({})", issue.expected));
    } else {
        text.push_str(&format!(" (expected {}", issue.expected));
        if let Some(sent) = &issue.sent {
            text.push_str(&format!(", sent {sent}"));
        }
        text.push(')');
    }
    text
}

/// Type-directed choice of a parameter's kind, for generated code. The generated code calls
/// `(&&&&Probe::<T>::NEW).__fusion_param()`; method resolution tries the context kind first,
/// then an argument group, then a plain argument, and finally a kind whose use is a compile
/// error pointing at the parameter.
#[doc(hidden)]
pub mod kinds {
    use super::*;
    use crate::tool::ErrorCatalog;

    pub struct Probe<T>(PhantomData<fn() -> T>);

    impl<T> Probe<T> {
        pub const NEW: Self = Probe(PhantomData);
    }

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
        pub fn take(
            self,
            context: &CallContext,
            _args: &mut ArgReader<'_>,
            _name: &'static str,
        ) -> Result<Option<T>, ToolError> {
            T::from_context(context).map(Some)
        }
    }

    impl<T: ArgumentGroup> GroupParam<T> {
        pub fn declare(self, params: &mut Params, _name: &'static str, _doc: Option<&'static str>) {
            params.group::<T>();
        }
        pub fn take(
            self,
            _context: &CallContext,
            args: &mut ArgReader<'_>,
            _name: &'static str,
        ) -> Result<Option<T>, ToolError> {
            Ok(args.group::<T>())
        }
    }

    impl<T: DeserializeOwned + JsonSchema + Send + 'static> FieldParam<T> {
        pub fn declare(self, params: &mut Params, name: &'static str, doc: Option<&'static str>) {
            params.field::<T>(name, doc);
        }
        pub fn take(
            self,
            _context: &CallContext,
            args: &mut ArgReader<'_>,
            name: &'static str,
        ) -> Result<Option<T>, ToolError> {
            Ok(args.field::<T>(name))
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
        pub fn take(
            self,
            _context: &CallContext,
            _args: &mut ArgReader<'_>,
            _name: &'static str,
        ) -> Result<Option<T>, ToolError> {
            Ok(None)
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

    pub struct NameClash<F>(PhantomData<fn() -> F>);
    pub struct NoClash;

    pub trait ViaReserved {
        type Clash;
        fn __fusion_reserved(&self) -> Self::Clash;
    }
    impl<Q: ReservesName<H>, const H: u64> ViaReserved for &ReservedProbe<Q, H> {
        type Clash = NameClash<Q::Field>;
        fn __fusion_reserved(&self) -> Self::Clash {
            NameClash(PhantomData)
        }
    }

    pub trait ViaUnreserved {
        type Clash;
        fn __fusion_reserved(&self) -> Self::Clash;
    }
    impl<Q, const H: u64> ViaUnreserved for ReservedProbe<Q, H> {
        type Clash = NoClash;
        fn __fusion_reserved(&self) -> NoClash {
            NoClash
        }
    }

    /// What a name check found: the field whose name an argument took, or [`Free`].
    pub trait Clash {
        type Field;
    }
    impl Clash for NoClash {
        type Field = Free;
    }
    impl<F> Clash for NameClash<F> {
        type Field = F;
    }

    /// No field's name was taken.
    pub struct Free;

    /// Implemented only by [`Free`]: a guarded or hidden field's marker (named
    /// `{Model}_{field}`) in an error is how a plain argument that takes its name is reported.
    #[diagnostic::on_unimplemented(
        message = "this argument has the name of a field that an agent never sets: `{Self}`",
        label = "rename this argument",
        note = "the tool takes a profile of a model whose field of this name is guarded or hidden: the profile leaves that field out on purpose, so no other argument may bring it in"
    )]
    pub trait ArgumentNameIsFree {}
    impl ArgumentNameIsFree for Free {}

    // Only a plain argument has a name an agent sends; other kinds take any name.
    impl<T> FieldParam<T> {
        pub fn must_not_take<C: Clash>(&self, _clash: C)
        where
            C::Field: ArgumentNameIsFree,
        {
        }
    }
    impl<T> ContextParam<T> {
        pub fn must_not_take<C>(&self, _clash: C) {}
    }
    impl<T> GroupParam<T> {
        pub fn must_not_take<C>(&self, _clash: C) {}
    }
    impl<T> ModelParam<T> {
        pub fn must_not_take<C>(&self, _clash: C) {}
    }
    impl<T> UnusableParam<T> {
        pub fn must_not_take<C>(&self, _clash: C) {}
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

    /// The actions a handler's error type may offer, when it is an [`ErrorCatalog`]; none
    /// otherwise (a plain `ToolError` or a standard error).
    pub struct CatalogProbe<E>(PhantomData<fn() -> E>);

    impl<E> CatalogProbe<E> {
        pub const NEW: Self = CatalogProbe(PhantomData);
    }

    pub trait ViaCatalog {
        fn __fusion_catalog(&self) -> &'static [&'static str];
    }
    impl<E: ErrorCatalog> ViaCatalog for &CatalogProbe<E> {
        fn __fusion_catalog(&self) -> &'static [&'static str] {
            E::ACTIONS
        }
    }

    pub trait ViaNoCatalog {
        fn __fusion_catalog(&self) -> &'static [&'static str];
    }
    impl<E> ViaNoCatalog for CatalogProbe<E> {
        fn __fusion_catalog(&self) -> &'static [&'static str] {
            &[]
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
        pub fn take(
            self,
            _context: &CallContext,
            _args: &mut ArgReader<'_>,
            _name: &'static str,
        ) -> Result<Option<T>, ToolError> {
            Ok(None)
        }
    }
}

//! A tool's parameters: how they are declared, how their schema is built once, and how each
//! call's arguments are read and validated (SPEC T3, E2).
//!
//! A parameter is one of three kinds, decided by trait resolution, never by the type's name:
//! - taken from the call context ([`FromContext`]): shared state, a verified tenant, …;
//! - a group of arguments flattened into the tool's arguments ([`ArgumentGroup`]): a model's
//!   fillable profile;
//! - a plain argument (`Deserialize + JsonSchema`), named after the parameter.

mod bounds;
pub mod constrain;
mod constraints;
mod explain;
pub mod kinds;
mod reader;
mod withheld;

pub use reader::ArgReader;

use std::sync::Arc;

use rmcp::model::JsonObject;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::context::{FromContext, ServerParts};
use crate::model::{ArgumentGroup, ModelFields};

/// The keywords of an argument type's schema that constrain its fields together, kept in the
/// input schema when the type is a tool's only source of arguments.
pub(crate) const WHOLE_KEYWORDS: &[&str] = &[
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "minProperties",
    "maxProperties",
];

/// The parameters of one tool, as declared. Turned into an input schema and an
/// [`ArgLayout`] when the server is built.
#[derive(Debug, Default)]
pub struct Params {
    pub(crate) fields: Vec<FieldParamSpec>,
    pub(crate) groups: Vec<GroupParamSpec>,
    pub(crate) context: Vec<ContextParamSpec>,
    /// The arguments stated not to be the guarded field they are named like, with the reason.
    pub(crate) not_guarded: Vec<(&'static str, &'static str)>,
    /// The handler is given the whole [`CallContext`](crate::CallContext) (a
    /// [`ToolSpec::handler`](crate::ToolSpec::handler)): it can take anything from it,
    /// including what asks the client.
    pub(crate) whole_context: bool,
}

#[derive(Debug)]
pub(crate) struct FieldParamSpec {
    pub(crate) name: &'static str,
    pub(crate) description: Option<&'static str>,
    pub(crate) schema: fn(&mut SchemaGenerator) -> Schema,
    /// Constraints written on the parameter (`#[schemars(length(max = 64))]`).
    pub(crate) constrain: Option<fn(Schema) -> Schema>,
    pub(crate) optional: bool,
}

#[derive(Debug)]
pub(crate) struct GroupParamSpec {
    pub(crate) type_name: &'static str,
    pub(crate) schema: fn(&mut SchemaGenerator) -> Schema,
    pub(crate) model: Option<ModelFields>,
}

#[derive(Debug)]
pub(crate) struct ContextParamSpec {
    pub(crate) type_name: &'static str,
    pub(crate) type_id: std::any::TypeId,
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
            constrain: None,
            optional: !crate::present::is_required::<T>(),
        });
    }

    /// Declares a plain argument `name` of type `T` whose schema `constrain` narrows (lengths,
    /// ranges, patterns, formats); every constraint is enforced before the handler runs.
    pub fn field_constrained<T>(
        &mut self,
        name: &'static str,
        description: Option<&'static str>,
        constrain: fn(Schema) -> Schema,
    ) where
        T: DeserializeOwned + JsonSchema,
    {
        self.field::<T>(name, description);
        if let Some(field) = self.fields.last_mut() {
            field.constrain = Some(constrain);
        }
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

    /// States that the plain argument `name` is not the guarded field of a model that it is
    /// named like (`#[not_guarded("why")]` on a parameter), so that the server is built with
    /// it; `reason` is recorded in the lockfile for the reviewer. Without it, an argument named
    /// like a guarded field of any model the server knows fails the build.
    pub fn not_guarded(&mut self, name: &'static str, reason: &'static str) {
        self.not_guarded.push((name, reason));
    }

    /// The models behind the parameters' argument groups (fillable profiles).
    pub(crate) fn models(&self) -> impl Iterator<Item = ModelFields> + '_ {
        self.groups.iter().filter_map(|group| group.model)
    }

    /// Whether the plain argument `name` takes the name of a guarded or hidden field that a
    /// profile among the parameters leaves out: reported by [`Params::input_schema`] already.
    pub(crate) fn reserved_by_a_group(&self, name: &str) -> bool {
        self.fields.iter().any(|field| field.name == name)
            && self.models().any(|model| model.reserved(name).is_some())
    }

    /// Declares a parameter taken from the call context.
    pub fn context<T: FromContext>(&mut self) {
        self.context.push(ContextParamSpec {
            type_name: std::any::type_name::<T>(),
            type_id: std::any::TypeId::of::<T>(),
            check: T::check,
        });
    }

    /// Builds the input schema, reporting conflicts between parameters.
    pub(crate) fn input_schema(&self, problems: &mut Vec<String>) -> JsonObject {
        let mut generator = crate::schema::input_generator();
        let mut properties = Map::new();
        let mut required: Vec<Value> = Vec::new();
        // What a type taken whole says about its fields together (`allOf`, `if`…): kept, and
        // enforced (see `constraints`), when it is the only source of arguments.
        let mut whole_keywords = Map::new();
        let sole_group = self.groups.len() == 1 && self.fields.is_empty();
        for group in &self.groups {
            let schema = (group.schema)(&mut generator).to_value();
            if sole_group && let Value::Object(keywords) = &schema {
                whole_keywords.extend(
                    keywords
                        .iter()
                        .filter(|(keyword, _)| WHOLE_KEYWORDS.contains(&keyword.as_str()))
                        .map(|(keyword, value)| (keyword.clone(), value.clone())),
                );
            }
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
        for (name, _) in &self.not_guarded {
            if !self.fields.iter().any(|field| field.name == *name) {
                problems.push(format!(
                    "`{name}` is stated not guarded, but it is not a plain argument: state it on \
                     the field of the parameter struct that carries it"
                ));
            }
        }
        for field in &self.fields {
            let not_guarded = self
                .not_guarded
                .iter()
                .find(|(name, _)| *name == field.name)
                .map(|(_, reason)| *reason);
            // A guarded or hidden field left out of a profile on purpose must not come in under
            // a plain argument of the same name (unless, for a guarded one, the author states
            // that the argument is not that field).
            for group in &self.groups {
                if let Some(model) = group.model
                    && let Some(reserved) = model.reserved(field.name)
                    && (reserved.hidden || not_guarded.is_none())
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
            if let Some(constrain) = field.constrain {
                schema = constrain(schema);
            }
            if let Some(description) = field.description {
                schema.insert("description".into(), description.into());
            }
            if let Some(reason) = not_guarded {
                // Read, then taken out, when the server is built (see `guarded`).
                schema.insert(crate::guarded::NOT_GUARDED.into(), reason.into());
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
        let mut schema = crate::schema::object_schema(properties, required, &mut generator);
        schema.extend(whole_keywords);
        schema
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

    /// Whether a parameter is taken from the context as a `T`.
    pub(crate) fn takes_context<T: 'static>(&self) -> bool {
        let wanted = std::any::TypeId::of::<T>();
        self.context.iter().any(|context| context.type_id == wanted)
    }

    /// How arguments are read: the accepted names are the input schema's properties, and the
    /// constraints serde does not enforce are compiled here, once (a constraint that cannot be
    /// compiled is a problem: the schema would promise what the server does not check).
    pub(crate) fn layout(&self, schema: Arc<Value>) -> Result<ArgLayout, String> {
        let accepted = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| properties.keys().cloned().collect())
            .unwrap_or_default();
        Ok(ArgLayout {
            accepted,
            sole_group: self.groups.len() == 1 && self.fields.is_empty(),
            constraints: constraints::Constraints::of(&schema)?,
            withheld: withheld::Withheld::of(
                &schema,
                self.groups.iter().filter_map(|group| group.model.as_ref()),
            ),
            schema,
            undeclared_guarded: None,
        })
    }
}

/// A parameter list compiled on its own, reading arguments exactly as the pipeline does (for
/// benchmarks and tests of argument handling).
#[cfg(feature = "bench-hooks")]
#[doc(hidden)]
#[derive(Debug)]
pub struct CompiledParams {
    layout: ArgLayout,
    tool: String,
}

#[cfg(feature = "bench-hooks")]
impl Params {
    /// Compiles the parameters outside a server.
    #[doc(hidden)]
    pub fn compile(&self, tool: &str) -> Result<CompiledParams, crate::error::BuildError> {
        let mut problems = Vec::new();
        let mut schema = self.input_schema(&mut problems);
        if !problems.is_empty() {
            return Err(crate::error::BuildError::new(problems));
        }
        crate::guarded::strip(&mut schema);
        let layout = self
            .layout(Arc::new(Value::Object(schema)))
            .map_err(|problem| crate::error::BuildError::new(vec![problem]))?;
        Ok(CompiledParams {
            layout,
            tool: tool.to_owned(),
        })
    }
}

#[cfg(feature = "bench-hooks")]
impl CompiledParams {
    /// Reads `args` as one group of arguments, validating like a tool call.
    pub fn read_group<G: ArgumentGroup>(
        &self,
        args: JsonObject,
    ) -> Result<G, crate::error::ToolError> {
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
    /// The constraints serde does not enforce, when the schema has any.
    constraints: Option<constraints::Constraints>,
    /// The arguments whose values are never echoed: hidden values, and what holds them.
    withheld: withheld::Withheld,
    /// Keys the schema does not declare that name a guarded field (serde aliases, flattened
    /// maps, untyped values), when the server knows any guarded field.
    pub(crate) undeclared_guarded: Option<crate::guarded::UndeclaredKeys>,
}

impl ArgLayout {
    /// Whether `arguments` carry a value that is, or may hold, a hidden one.
    pub(crate) fn carries_hidden(&self, arguments: &JsonObject) -> bool {
        self.withheld.carried_by(arguments)
    }

    /// Refuses, in every call, an argument key at any depth that the schema does not declare
    /// and that names a guarded field of `names`.
    pub(crate) fn refuse_undeclared_guarded(&mut self, names: &Arc<crate::guarded::GuardedNames>) {
        self.undeclared_guarded = crate::guarded::UndeclaredKeys::new(&self.schema, names);
    }
}

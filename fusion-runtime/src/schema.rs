//! JSON schemas of inputs and of the response envelope, built once when the server is built.

use rmcp::model::JsonObject;
use schemars::generate::{Contract, SchemaSettings};
use schemars::{Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

/// Draft 2020-12, the dialect MCP assumes when a schema names none.
const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// A generator describing what is accepted (arguments).
pub(crate) fn input_generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.meta_schema = None;
            settings.contract = Contract::Deserialize;
        })
        .into_generator()
}

/// A generator describing what is produced (results).
pub(crate) fn output_generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.meta_schema = None;
            settings.contract = Contract::Serialize;
        })
        .into_generator()
}

/// A closed object schema with the generator's definitions attached as `$defs`.
pub(crate) fn object_schema(
    properties: Map<String, Value>,
    required: Vec<Value>,
    generator: &mut SchemaGenerator,
) -> JsonObject {
    let mut schema = Map::new();
    schema.insert("$schema".into(), DIALECT.into());
    schema.insert("type".into(), "object".into());
    schema.insert("properties".into(), Value::Object(properties));
    if !required.is_empty() {
        schema.insert("required".into(), Value::Array(required));
    }
    schema.insert("additionalProperties".into(), false.into());
    attach_definitions(&mut schema, generator);
    schema
}

pub(crate) fn attach_definitions(schema: &mut JsonObject, generator: &mut SchemaGenerator) {
    let definitions = generator.take_definitions(true);
    if !definitions.is_empty() {
        schema.insert("$defs".into(), Value::Object(definitions));
    }
}

/// The schema of the success envelope `{"ok": true, "data": …, "meta": {…}}`.
pub(crate) fn success_envelope(data: Schema, generator: &mut SchemaGenerator) -> JsonObject {
    let mut properties = Map::new();
    properties.insert("ok".into(), json!({"const": true}));
    properties.insert("data".into(), data.to_value());
    properties.insert("meta".into(), meta_schema());
    let mut schema = object_schema(
        properties,
        vec!["ok".into(), "data".into(), "meta".into()],
        generator,
    );
    // The envelope may grow fields in later versions; clients must not break on them.
    schema.remove("additionalProperties");
    schema
}

/// The schema of the success envelope when the data may be one of several shapes (a grouped
/// tool whose actions return different things).
pub(crate) fn any_of(schemas: Vec<Value>) -> Schema {
    let mut schema = Schema::default();
    schema.insert("anyOf".into(), Value::Array(schemas));
    schema
}

fn meta_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "tool": {"type": "string", "description": "The tool that answered."},
            "action": {"type": "string", "description": "The action of a grouped tool."},
            "version": {"type": "string", "description": "The version of the tool."},
            "invalidates": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Domains (globs over tool keys) whose earlier results are now stale."
            },
            "truncated": {
                "type": "object",
                "properties": {
                    "shown": {"type": "integer", "minimum": 0},
                    "total": {"type": "integer", "minimum": 0}
                },
                "required": ["shown", "total"],
                "description": "The collection was cut to the agent limit."
            },
            "cache": {"enum": ["immutable", "volatile"]}
        },
        "required": ["tool", "version"]
    })
}

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

/// The output schema: the success envelope `{"ok": true, "data": …, "meta": {…}}` with `data`
/// described by the tool, or the error envelope `{"ok": false, "error": {…}, "meta": {…}}`.
///
/// The error branch is there because some clients (the TypeScript SDK 1.x) validate
/// `structuredContent` against the output schema even on `isError` results; `ok` tells the two
/// apart. The root keeps `"type": "object"`, which MCP requires.
pub(crate) fn envelope(data: Schema, generator: &mut SchemaGenerator) -> JsonObject {
    let success = json!({
        "type": "object",
        "properties": {
            "ok": {"const": true},
            "data": data.to_value(),
            "meta": meta_schema(),
        },
        "required": ["ok", "data", "meta"],
    });
    let failure = json!({
        "type": "object",
        "properties": {
            "ok": {"const": false},
            "error": error_schema(),
            "meta": meta_schema(),
        },
        "required": ["ok", "error", "meta"],
    });
    let mut schema = Map::new();
    schema.insert("$schema".into(), DIALECT.into());
    schema.insert("type".into(), "object".into());
    schema.insert("oneOf".into(), json!([success, failure]));
    attach_definitions(&mut schema, generator);
    schema
}

fn error_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "code": {"type": "string", "description": "What went wrong, e.g. VALIDATION_ERROR or a domain code."},
            "message": {"type": "string"},
            "retryable": {"type": "boolean", "description": "Whether the same call may succeed later."},
            "recovery": {"type": "string", "description": "What to do next."},
            "availableActions": {"type": "array", "items": {"type": "string"}, "description": "Tools to call instead."},
            "details": {},
            "retryAfterMs": {"type": "integer", "minimum": 0},
            "errorId": {"type": "string", "description": "The id under which the server logged an internal error."}
        },
        "required": ["code", "message", "retryable"]
    })
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
                    "total": {"type": "integer", "minimum": 0},
                    "hidden": {"type": "integer", "minimum": 0},
                    "reason": {"enum": ["limit", "budget"]},
                    "nextOffset": {"type": "integer", "minimum": 0, "description": "The `offset` argument that shows the next items."}
                },
                "required": ["shown", "total"],
                "description": "The collection was cut to the agent limit or the egress budget."
            },
            "cache": {"enum": ["immutable", "volatile"]}
        },
        "required": ["tool", "version"]
    })
}

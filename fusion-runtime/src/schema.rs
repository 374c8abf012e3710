//! JSON schemas of inputs and of the response envelope, built once when the server is built.

use rmcp::model::JsonObject;
use schemars::generate::{Contract, SchemaSettings};
use schemars::{JsonSchema, Schema, SchemaGenerator};

use crate::envelope::{Failure, Success};
use serde_json::{Map, Value};

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
/// described by the tool, or the error envelope `{"ok": false, "error": {…}, "meta": {…}}`,
/// both generated from the envelope's types.
///
/// The error branch is there because some clients (the TypeScript SDK 1.x) validate
/// `structuredContent` against the output schema even on `isError` results; `ok` tells the two
/// apart. The root keeps `"type": "object"`, which MCP requires.
pub(crate) fn envelope(data: Schema, generator: &mut SchemaGenerator) -> JsonObject {
    let mut success = Success::json_schema(generator);
    if let Some(Value::Object(properties)) = success.get_mut("properties") {
        properties.insert("data".into(), data.to_value());
    }
    let failure = Failure::json_schema(generator);
    let mut schema = Map::new();
    schema.insert("$schema".into(), DIALECT.into());
    schema.insert("type".into(), "object".into());
    schema.insert(
        "oneOf".into(),
        Value::Array(vec![success.to_value(), failure.to_value()]),
    );
    attach_definitions(&mut schema, generator);
    schema
}

/// The schema of the success envelope when the data may be one of several shapes (a grouped
/// tool whose actions return different things).
pub(crate) fn any_of(schemas: Vec<Value>) -> Schema {
    let mut schema = Schema::default();
    schema.insert("anyOf".into(), Value::Array(schemas));
    schema
}

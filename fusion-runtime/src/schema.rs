//! JSON schemas of inputs and of the response envelope, built once when the server is built.

use rmcp::model::JsonObject;
use schemars::generate::{Contract, SchemaSettings};
use schemars::{JsonSchema, Schema, SchemaGenerator};

use crate::envelope::{Failure, Success};
use serde_json::{Map, Value};

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

/// Draft 2020-12, the dialect MCP assumes when a schema names none. Input schemas name it all
/// the same: the conformance suite checks that a server keeps `$schema` (SEP-1613).
const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

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

/// A tool's output schema: what varies by tool, and no more. `{"ok": …, "data": …}` with
/// `data` described by the tool: a success `{"ok": true, "data": …, "meta"?: {…}}`, or a
/// failure `{"ok": false, "error": {…}, "meta"?: {…}}`, which has no `data`. What is the same
/// for every tool (the fields of `meta` and `error`) is stated once, in the server's
/// instructions ([`envelope_note`]), instead of in every tool of the listing: it was nine
/// tenths of it.
///
/// Failures validate too, because some clients (the TypeScript SDK 1.x) validate
/// `structuredContent` against the output schema even on `isError` results: `ok` is any
/// boolean and only `ok` is required (a `oneOf` of a success and a failure branch said the
/// same at about 25 more tokens a tool). The root keeps `"type": "object"`, which MCP
/// requires, and names no dialect: MCP assumes draft 2020-12.
pub(crate) fn envelope(data: Schema, generator: &mut SchemaGenerator) -> JsonObject {
    let mut properties = Map::new();
    properties.insert("ok".into(), serde_json::json!({ "type": "boolean" }));
    properties.insert("data".into(), object_form(data.to_value()));
    let mut schema = Map::new();
    schema.insert("type".into(), "object".into());
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert("required".into(), serde_json::json!(["ok"]));
    attach_definitions(&mut schema, generator);
    schema
}

/// What every tool's `structuredContent` is, in one paragraph of the server's instructions:
/// the envelope's fields, written from the schema of its types (so that the two cannot drift),
/// as a compact TypeScript-like shape (`?` marks a field that may be absent).
pub(crate) fn envelope_note() -> &'static str {
    static NOTE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        let mut generator = output_generator();
        let success = Success::json_schema(&mut generator).to_value();
        let failure = Failure::json_schema(&mut generator).to_value();
        let definitions = Value::Object(generator.take_definitions(true));
        let shape = |schema: &Value, field: &str| shape(&schema["properties"][field], &definitions);
        format!(
            "Every tool answers with structuredContent {{ok: true, data, meta?}} or, with \
             isError, {{ok: false, error, meta?}}; its outputSchema describes its data. \
             meta: {}. error: {}.",
            shape(&success, "meta"),
            shape(&failure, "error"),
        )
    });
    &NOTE
}

/// A schema as a compact shape: `{a, b?: "x"|"y", c?: [{d}]}`.
fn shape(schema: &Value, definitions: &Value) -> String {
    if let Some(name) = schema["$ref"]
        .as_str()
        .and_then(|reference| reference.strip_prefix("#/$defs/"))
    {
        return shape(&definitions[name], definitions);
    }
    for alternatives in ["oneOf", "anyOf"] {
        if let Some(branches) = schema[alternatives].as_array() {
            let shapes: Vec<String> = branches
                .iter()
                .filter(|branch| branch["type"] != "null")
                .map(|branch| shape(branch, definitions))
                .collect();
            return shapes.join("|");
        }
    }
    if let Some(constant) = schema.get("const") {
        return constant.to_string();
    }
    if let Some(properties) = schema["properties"].as_object() {
        let required = schema["required"].as_array();
        let mut fields: Vec<(bool, &String, &Value)> = properties
            .iter()
            .map(|(name, field)| {
                let optional =
                    !required.is_some_and(|required| required.contains(&name.as_str().into()));
                (optional, name, field)
            })
            .collect();
        // Required fields first.
        fields.sort_by_key(|(optional, _, _)| *optional);
        let fields: Vec<String> = fields
            .into_iter()
            .map(|(optional, name, field)| {
                let inner = shape(field, definitions);
                let mark = if optional { "?" } else { "" };
                if inner.is_empty() {
                    format!("{name}{mark}")
                } else {
                    format!("{name}{mark}: {inner}")
                }
            })
            .collect();
        return format!("{{{}}}", fields.join(", "));
    }
    if let Some(items) = schema.get("items") {
        let inner = shape(items, definitions);
        let inner = if inner.is_empty() {
            items["type"].as_str().unwrap_or("…")
        } else {
            &inner
        };
        return format!("[{inner}]");
    }
    String::new()
}

/// The schema of the success envelope when the data may be one of several shapes (a grouped
/// tool whose actions return different things).
pub(crate) fn any_of(schemas: Vec<Value>) -> Schema {
    let mut schema = Schema::default();
    let schemas = schemas.into_iter().map(object_form).collect();
    schema.insert("anyOf".into(), Value::Array(schemas));
    schema
}

/// A data schema said as an object. A boolean schema (`true` for any JSON value) is valid
/// JSON Schema, but clients that parse property schemas as objects (the TypeScript SDK 1.x)
/// refuse it, wherever it sits in `data`.
fn object_form(schema: Value) -> Value {
    match schema {
        Value::Bool(true) => serde_json::json!({}),
        Value::Bool(false) => serde_json::json!({ "not": {} }),
        schema => schema,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_note_names_every_field_of_meta_and_error() {
        let note = envelope_note();
        let mut generator = output_generator();
        for schema in [
            Success::json_schema(&mut generator).to_value(),
            Failure::json_schema(&mut generator).to_value(),
        ] {
            for part in ["meta", "error"] {
                let Some(fields) = schema["properties"][part]["properties"].as_object() else {
                    continue;
                };
                for field in fields.keys() {
                    assert!(note.contains(field.as_str()), "{field} missing: {note}");
                }
            }
        }
        for nested in [
            "nextCursor",
            "\"budget\"",
            "\"volatile\"",
            "retryAfterMs",
            "retryable",
        ] {
            assert!(note.contains(nested), "{nested} missing: {note}");
        }
        // Optional fields are marked, required ones are not.
        assert!(
            note.contains("error: {code, ") && note.contains("cache?:"),
            "{note}"
        );
    }

    #[test]
    fn a_tool_schema_takes_a_success_and_a_failure_and_describes_only_data() {
        let mut generator = output_generator();
        let data = schemars::json_schema!({"type": "string"});
        let schema = Value::Object(envelope(data, &mut generator));
        let valid = |instance: Value| jsonschema::is_valid(&schema, &instance);
        assert!(valid(
            serde_json::json!({"ok": true, "data": "x", "meta": {}})
        ));
        assert!(valid(
            serde_json::json!({"ok": false, "error": {}, "meta": {}})
        ));
        assert!(!valid(
            serde_json::json!({"ok": true, "data": 1, "meta": {}})
        ));
        assert!(!valid(serde_json::json!({"data": "x", "meta": {}})));
        assert!(!valid(
            serde_json::json!({"ok": "yes", "data": "x", "meta": {}})
        ));
        assert!(!schema.to_string().contains("retryable"), "{schema}");
    }
}

//! Schema constraints that serde does not enforce (SPEC E2): `#[schemars(length(..))]`,
//! `range(..)`, `regex(..)`, `email`, `url`… appear in an input schema as `maxLength`,
//! `minimum`, `pattern`, `format`… A schema keyword is a promise to the agent, so every one
//! that serde would not check is checked before the handler runs, by a checker built once
//! when the server is built. Actions whose schemas carry no such keyword pay nothing.
//!
//! Lengths, ranges and counts are checked without a validator, by the same walk of the schema
//! that explains invalid arguments ([`Bounds`]). Patterns, string formats and rules that combine fields
//! need a JSON Schema validator, the `jsonschema` crate, which is most of a small connector's
//! binary: it comes with the `schema-validation` feature, and then checks every constraint.
//! Without it, a schema that uses them is refused when the server is built.

use serde_json::{Map, Value};

use super::bounds::Bounds;
use super::explain::Issue;
#[cfg(feature = "schema-validation")]
use super::explain::render;
use super::withheld::Withheld;

/// The checker of the constraints of one input schema.
pub(crate) enum Constraints {
    /// A compiled JSON Schema validator (feature `schema-validation`).
    #[cfg(feature = "schema-validation")]
    Validator(jsonschema::Validator),
    /// Lengths, ranges and counts, checked by Fusion.
    #[cfg_attr(feature = "schema-validation", allow(dead_code))]
    Bounds(Bounds),
}

impl std::fmt::Debug for Constraints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Constraints")
    }
}

impl Constraints {
    /// The checker of `schema`, when it constrains more than serde enforces; an error when a
    /// constraint cannot be checked (an invalid `pattern`, or one that needs the
    /// `schema-validation` feature): the server must not promise what it cannot check.
    pub(crate) fn of(schema: &Value) -> Result<Option<Constraints>, String> {
        if !constrains(schema) && !composes(schema) {
            return Ok(None);
        }
        #[cfg(feature = "schema-validation")]
        {
            jsonschema::options()
                .should_validate_formats(true)
                .build(schema)
                .map(|validator| Some(Constraints::Validator(validator)))
                .map_err(|error| format!("its input schema cannot be enforced: {}", error.masked()))
        }
        #[cfg(not(feature = "schema-validation"))]
        {
            Bounds::of(schema).map(|bounds| Some(Constraints::Bounds(bounds)))
        }
    }

    pub(crate) fn is_valid(&self, args: &Value) -> bool {
        match self {
            #[cfg(feature = "schema-validation")]
            Constraints::Validator(validator) => validator.is_valid(args),
            Constraints::Bounds(bounds) => bounds.is_valid(args),
        }
    }

    /// Every violated constraint, as issues naming the field, what was sent and what is
    /// expected.
    /// No value under a top-level argument that `withheld` hides is rendered.
    pub(crate) fn issues(&self, args: &Value, max: usize, withheld: &Withheld) -> Vec<Issue> {
        match self {
            #[cfg(feature = "schema-validation")]
            Constraints::Validator(validator) => validator
                .iter_errors(args)
                .take(max)
                .map(|error| {
                    let pointer = error.instance_path().to_string();
                    Issue {
                        path: field_path(&pointer, args),
                        problem: "not allowed by the schema".to_owned(),
                        expected: error.masked().to_string(),
                        sent: args.pointer(&pointer).map(|sent| {
                            withheld.sent(top_of(&pointer).as_deref(), || render(sent))
                        }),
                    }
                })
                .collect(),
            Constraints::Bounds(bounds) => bounds.issues(args, max, withheld),
        }
    }
}

/// `/items/2/qty` as `items[2].qty`, the way other issues name fields.
/// The top-level argument a JSON pointer is in, `None` for the root.
#[cfg(feature = "schema-validation")]
fn top_of(pointer: &str) -> Option<String> {
    let first = pointer.split('/').nth(1)?;
    Some(first.replace("~1", "/").replace("~0", "~"))
}

#[cfg(feature = "schema-validation")]
fn field_path(pointer: &str, root: &Value) -> String {
    let mut path = String::new();
    let mut at = root;
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        match at {
            Value::Array(items) => {
                path.push_str(&format!("[{segment}]"));
                at = segment
                    .parse::<usize>()
                    .ok()
                    .and_then(|index| items.get(index))
                    .unwrap_or(&Value::Null);
            }
            _ => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&segment);
                at = at.get(&segment).unwrap_or(&Value::Null);
            }
        }
    }
    path
}

/// Keywords that only constrain a value: serde never checks them.
const CONSTRAINTS: &[&str] = &[
    "minLength",
    "maxLength",
    "pattern",
    "multipleOf",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "contains",
    "minContains",
    "maxContains",
    "propertyNames",
    "patternProperties",
    "dependentRequired",
    "dependentSchemas",
    "if",
    "not",
];

/// Whether an input schema combines its fields at its root (`allOf`, `anyOf`, `oneOf`): serde
/// checks fields one by one, never such a rule. Below the root, these keywords are how schemas
/// of types write unions (an `Option`, an enum), which serde does check.
fn composes(schema: &Value) -> bool {
    ["allOf", "anyOf", "oneOf"]
        .iter()
        .any(|keyword| schema.get(keyword).is_some())
}

/// Whether `schema` constrains values beyond what serde enforces when it deserializes the
/// parameter types. Bounds that only restate a numeric format's range (`uint8`: 0 to 255) and
/// the item counts of tuples are serde's; any other bound, length, pattern or string format is
/// a constraint.
pub(crate) fn constrains(schema: &Value) -> bool {
    match schema {
        Value::Object(object) => {
            object_constrains(object)
                || object.iter().any(|(key, value)| match key.as_str() {
                    // Annotations and values, not schemas: nothing below them constrains.
                    "description" | "title" | "default" | "examples" | "const" | "enum" => false,
                    _ => constrains(value),
                })
        }
        Value::Array(items) => items.iter().any(constrains),
        _ => false,
    }
}

fn object_constrains(object: &Map<String, Value>) -> bool {
    if CONSTRAINTS
        .iter()
        .any(|keyword| object.contains_key(*keyword))
    {
        return true;
    }
    let format = object.get("format").and_then(Value::as_str);
    if let Some(format) = format
        && numeric_range(format).is_none()
        && !matches!(format, "float" | "double")
    {
        // A string format (`email`, `uri`, `uuid`…): checked, whether or not the type's
        // deserializer would also refuse it.
        return true;
    }
    let implied = format.and_then(numeric_range);
    let bound =
        |keyword: &str, implied: Option<f64>| match object.get(keyword).and_then(Value::as_f64) {
            None => false,
            Some(bound) => implied != Some(bound),
        };
    if bound("minimum", implied.map(|(min, _)| min))
        || bound("maximum", implied.map(|(_, max)| max))
        || object.contains_key("exclusiveMinimum")
        || object.contains_key("exclusiveMaximum")
    {
        return true;
    }
    // A tuple's item count is its type's; any other count is a constraint.
    !object.contains_key("prefixItems")
        && (object.contains_key("minItems") || object.contains_key("maxItems"))
}

/// The range a numeric format implies (schemars writes it as `minimum`/`maximum` too).
fn numeric_range(format: &str) -> Option<(f64, f64)> {
    Some(match format {
        "int8" => (i8::MIN as f64, i8::MAX as f64),
        "int16" => (i16::MIN as f64, i16::MAX as f64),
        "int32" => (i32::MIN as f64, i32::MAX as f64),
        "int64" => (i64::MIN as f64, i64::MAX as f64),
        "uint8" => (0.0, u8::MAX as f64),
        "uint16" => (0.0, u16::MAX as f64),
        "uint32" => (0.0, u32::MAX as f64),
        "uint64" => (0.0, u64::MAX as f64),
        "uint" => (0.0, u64::MAX as f64),
        "int" => (i64::MIN as f64, i64::MAX as f64),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_serde_enforces_is_not_a_constraint() {
        for schema in [
            json!({"type": "integer", "format": "uint32", "minimum": 0}),
            json!({"type": "integer", "format": "uint8", "minimum": 0, "maximum": 255}),
            json!({"type": "number", "format": "double"}),
            json!({"type": "array", "prefixItems": [{"type": "string"}], "minItems": 1, "maxItems": 1}),
            json!({"type": "string", "description": "maxLength is only a word here", "enum": ["a"]}),
            json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}),
        ] {
            assert!(!constrains(&schema), "{schema}");
        }
    }

    #[test]
    fn lengths_ranges_patterns_and_string_formats_are_constraints() {
        for schema in [
            json!({"type": "string", "maxLength": 64}),
            json!({"type": "integer", "format": "uint32", "minimum": 1}),
            json!({"type": "integer", "format": "int64", "maximum": 100}),
            json!({"type": "string", "pattern": "^[A-Z]+$"}),
            json!({"type": "string", "format": "email"}),
            json!({"type": "array", "items": {"type": "string"}, "maxItems": 5}),
            json!({"type": "object", "properties": {"n": {"type": "number", "exclusiveMinimum": 0}}}),
            json!({"$defs": {"Tag": {"type": "string", "minLength": 1}}, "$ref": "#/$defs/Tag"}),
        ] {
            assert!(constrains(&schema), "{schema}");
        }
    }

    #[cfg(feature = "schema-validation")]
    #[test]
    fn pointers_become_field_paths() {
        let args = json!({"items": [{"qty": 1}, {"qty": 2}], "a/b": 1});
        assert_eq!(field_path("/items/1/qty", &args), "items[1].qty");
        assert_eq!(field_path("/a~1b", &args), "a/b");
        assert_eq!(field_path("", &args), "");
    }

    #[test]
    fn lengths_are_checked_with_or_without_a_validator() {
        let schema =
            json!({"type": "object", "properties": {"id": {"type": "string", "maxLength": 3}}});
        let constraints = Constraints::of(&schema).unwrap().expect("a constraint");
        assert!(constraints.is_valid(&json!({"id": "abc"})));
        assert!(!constraints.is_valid(&json!({"id": "abcd"})));
        let issues = constraints.issues(&json!({"id": "abcd"}), 5, &Withheld::of(&schema, []));
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].path, "id");
        assert_eq!(issues[0].sent.as_deref(), Some("\"abcd\""));
    }

    #[test]
    fn an_invalid_pattern_cannot_be_promised() {
        let schema =
            json!({"type": "object", "properties": {"x": {"type": "string", "pattern": "("}}});
        assert!(Constraints::of(&schema).is_err());
    }
}

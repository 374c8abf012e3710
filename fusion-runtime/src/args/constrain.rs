//! Constraints written on model fields (`#[schemars(length(max = 64))]`), added to the schemas
//! of the profiles that fill them (used by generated code). Enforced like every constraint of
//! an input schema.
#![allow(missing_docs)]

use schemars::Schema;
use serde_json::Value;

/// The JSON types a schema admits, as far as its `type` says.
fn admits(schema: &Schema, kind: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(name)) => name == kind,
        Some(Value::Array(names)) => names.iter().any(|name| name == kind),
        _ => false,
    }
}

/// A length: of an array's items, an object's properties, or (by default) a string's chars.
pub fn length(schema: &mut Schema, min: Option<Value>, max: Option<Value>) {
    let (min_key, max_key) = if admits(schema, "array") {
        ("minItems", "maxItems")
    } else if admits(schema, "object") {
        ("minProperties", "maxProperties")
    } else {
        ("minLength", "maxLength")
    };
    if let Some(min) = min {
        schema.insert(min_key.into(), min);
    }
    if let Some(max) = max {
        schema.insert(max_key.into(), max);
    }
}

/// A numeric range, bounds included.
pub fn range(schema: &mut Schema, min: Option<Value>, max: Option<Value>) {
    if let Some(min) = min {
        schema.insert("minimum".into(), min);
    }
    if let Some(max) = max {
        schema.insert("maximum".into(), max);
    }
}

/// A regular expression the string must match.
pub fn pattern(schema: &mut Schema, pattern: &str) {
    schema.insert("pattern".into(), pattern.into());
}

/// A string format (`email`, `uri`).
pub fn format(schema: &mut Schema, format: &str) {
    schema.insert("format".into(), format.into());
}

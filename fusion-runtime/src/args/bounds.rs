//! The constraints Fusion checks without a JSON Schema validator: lengths, numeric ranges, item
//! counts and unique items, wherever they sit in an input schema (fields, items, `$ref`s, the
//! branches of a union). They are what `#[schemars(length(..))]` and `range(..)` write, and
//! what the explanation of invalid arguments ([`explain`]) already checks, so checking them
//! costs no code of its own.
//!
//! Keywords it does not check (`pattern`, string `format`s, `multipleOf`, `not`, `if`,
//! `contains`, property counts, rules that combine fields at the root…) make the server's build
//! fail with the feature to enable: a schema keyword is a promise to the agent, never advertised
//! unchecked.
// With the validator in the build it checks everything, and this module only runs its tests.
#![cfg_attr(feature = "schema-validation", allow(dead_code))]

use serde_json::{Map, Value};

use super::explain::{Issue, explain};
use super::withheld::Withheld;

/// Keywords that only the full validator (feature `schema-validation`) checks.
const NEEDS_VALIDATOR: &[&str] = &[
    "pattern",
    "patternProperties",
    "propertyNames",
    "multipleOf",
    "minProperties",
    "maxProperties",
    "contains",
    "minContains",
    "maxContains",
    "dependentRequired",
    "dependentSchemas",
    "if",
    "not",
    "unevaluatedItems",
    "unevaluatedProperties",
];

/// Members whose value is a map from names to schemas, not a schema.
const SCHEMA_MAPS: &[&str] = &["properties", "$defs", "definitions"];

/// Members that hold values, not schemas.
const VALUES: &[&str] = &[
    "description",
    "title",
    "default",
    "examples",
    "const",
    "enum",
];

/// An input schema whose constraints are all of the kinds checked here.
#[derive(Debug)]
pub(crate) struct Bounds {
    schema: Value,
}

impl Bounds {
    /// The checker of `schema`; an error naming the first keyword it does not check.
    pub(crate) fn of(schema: &Value) -> Result<Bounds, String> {
        if let Some(keyword) = ["allOf", "anyOf", "oneOf"]
            .into_iter()
            .find(|keyword| schema.get(keyword).is_some())
            .or_else(|| unchecked(schema))
        {
            return Err(format!(
                "its input schema uses `{keyword}`, which Fusion enforces only with its \
                 `schema-validation` feature: enable it (`fusion = {{ features = \
                 [\"schema-validation\"] }}`) or drop the constraint"
            ));
        }
        Ok(Bounds {
            schema: schema.clone(),
        })
    }

    pub(crate) fn is_valid(&self, args: &Value) -> bool {
        explain(&self.schema, args, 1, &Withheld::default()).is_empty()
    }

    /// At most `max` violated constraints of `args`.
    pub(crate) fn issues(&self, args: &Value, max: usize, withheld: &Withheld) -> Vec<Issue> {
        explain(&self.schema, args, max, withheld)
    }
}

/// The first keyword under `schema` that only the full validator checks.
fn unchecked(schema: &Value) -> Option<&'static str> {
    match schema {
        Value::Object(object) => unchecked_in(object),
        Value::Array(items) => items.iter().find_map(unchecked),
        _ => None,
    }
}

fn unchecked_in(object: &Map<String, Value>) -> Option<&'static str> {
    if let Some(keyword) = NEEDS_VALIDATOR
        .iter()
        .find(|keyword| object.contains_key(**keyword))
    {
        return Some(keyword);
    }
    if object
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|format| !is_numeric_format(format))
    {
        return Some("format");
    }
    object.iter().find_map(|(key, value)| {
        if VALUES.contains(&key.as_str()) {
            None
        } else if SCHEMA_MAPS.contains(&key.as_str()) {
            value
                .as_object()
                .and_then(|schemas| schemas.values().find_map(unchecked))
        } else {
            unchecked(value)
        }
    })
}

/// The formats schemars writes for numbers: their range is the type's, which serde enforces.
fn is_numeric_format(format: &str) -> bool {
    matches!(
        format,
        "int8"
            | "int16"
            | "int32"
            | "int64"
            | "uint8"
            | "uint16"
            | "uint32"
            | "uint64"
            | "uint"
            | "int"
            | "float"
            | "double"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lengths_ranges_and_counts_are_checked_where_they_sit() {
        let schema = json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "maxLength": 4},
                "qty": {"type": "integer", "format": "uint32", "minimum": 1, "maximum": 9},
                "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}, "maxItems": 2, "uniqueItems": true},
                "note": {"anyOf": [{"$ref": "#/$defs/Tag"}, {"type": "null"}]},
                "pattern": {"type": "string", "minLength": 1}
            },
            "$defs": {"Tag": {"type": "string", "minLength": 2}}
        });
        let bounds = Bounds::of(&schema).expect("checkable without a validator");
        assert!(bounds.is_valid(
            &json!({"id": "N-12", "qty": 3, "tags": ["ab", "cd"], "note": null, "pattern": "x"})
        ));
        for bad in [
            json!({"id": "N-123"}),
            json!({"qty": 0}),
            json!({"qty": 10}),
            json!({"tags": ["ab", "cd", "ef"]}),
            json!({"tags": ["ab", "ab"]}),
            json!({"tags": ["a"]}),
            json!({"note": "z"}),
            json!({"pattern": ""}),
        ] {
            assert!(!bounds.is_valid(&bad), "{bad}");
            let field = bad.as_object().unwrap().keys().next().unwrap().clone();
            let issues = bounds.issues(&bad, 5, &Withheld::default());
            assert!(
                issues.iter().any(|issue| issue.path.starts_with(&field)),
                "{bad}: {issues:?}"
            );
        }
    }

    #[test]
    fn what_only_a_validator_checks_is_refused_with_the_feature_to_enable() {
        for (schema, keyword) in [
            (
                json!({"properties": {"code": {"type": "string", "pattern": "^[A-Z]+$"}}}),
                "pattern",
            ),
            (
                json!({"properties": {"to": {"type": "string", "format": "email"}}}),
                "format",
            ),
            (
                json!({"properties": {"n": {"type": "number", "multipleOf": 0.5}}}),
                "multipleOf",
            ),
            (
                json!({"anyOf": [{"required": ["a"]}, {"required": ["b"]}]}),
                "anyOf",
            ),
            (json!({"$defs": {"X": {"not": {"type": "null"}}}}), "not"),
        ] {
            let error = Bounds::of(&schema).expect_err("refused");
            assert!(error.contains(&format!("`{keyword}`")), "{error}");
            assert!(error.contains("`schema-validation` feature"), "{error}");
        }
        // A field named like a keyword, a description that mentions one, and a numeric format
        // are not constraints it leaves unchecked.
        let schema = json!({"properties": {"pattern": {"type": "integer", "format": "int64",
            "description": "not a pattern"}}});
        assert!(Bounds::of(&schema).is_ok());
    }
}

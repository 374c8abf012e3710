//! A value of a JSON schema at nominal sizes, to count what an answer costs before any data
//! exists: the lockfile's worst-case answer tokens are those of a full page of such items.
//!
//! What is nominal: every property of an object (optional ones too: the worst case), the
//! longest `enum` value and the largest `oneOf`/`anyOf` variant, a string of
//! [`NOMINAL_STRING`] characters (fewer when its `maxLength` says, more when its `minLength`
//! does, up to [`LONGEST_STRING`]; a known `format` takes its usual form), a seven-digit
//! integer (or its `maximum`), and
//! [`NOMINAL_ITEMS`] items in a nested array (or its `maxItems`, if fewer). The numbers are
//! estimates of typical values, not bounds: what a budget tracks is how the cost of a page moves
//! when the surface changes (a field, a rule, a limit), and these keep it comparable.

use serde_json::{Map, Value, json};

/// The characters of a string whose schema does not bound it.
pub const NOMINAL_STRING: usize = 16;
/// The longest string sampled, whatever its `maxLength`.
pub const LONGEST_STRING: usize = 256;
/// The items of a nested array whose schema does not bound it to fewer.
pub const NOMINAL_ITEMS: usize = 3;
/// How deep `$ref`s and nesting are followed; deeper is `null` (a schema may be recursive).
const DEPTH: usize = 8;

/// A value of `schema` at nominal sizes; `root` holds the `$defs` its `$ref`s name.
pub fn sample(schema: &Value, root: &Value) -> Value {
    Sampler { root }.value(schema, 0)
}

struct Sampler<'a> {
    root: &'a Value,
}

impl Sampler<'_> {
    fn value(&self, schema: &Value, depth: usize) -> Value {
        let Some(schema) = schema.as_object() else {
            return Value::Null;
        };
        if depth > DEPTH {
            return Value::Null;
        }
        if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
            return self
                .resolve(target)
                .map_or(Value::Null, |target| self.value(target, depth + 1));
        }
        if let Some(value) = schema.get("const") {
            return value.clone();
        }
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            return largest(values.iter().cloned());
        }
        for keyword in ["oneOf", "anyOf"] {
            if let Some(variants) = schema.get(keyword).and_then(Value::as_array) {
                return largest(
                    variants
                        .iter()
                        .map(|variant| self.value(variant, depth + 1)),
                );
            }
        }
        if let Some(first) = schema
            .get("allOf")
            .and_then(Value::as_array)
            .and_then(|all| all.first())
        {
            return self.value(first, depth + 1);
        }
        let kind = match schema.get("type") {
            Some(Value::String(kind)) => kind.as_str(),
            // `["string", "null"]`: the value, not its absence.
            Some(Value::Array(kinds)) => kinds
                .iter()
                .filter_map(Value::as_str)
                .find(|kind| *kind != "null")
                .unwrap_or("null"),
            _ if schema.contains_key("properties") => "object",
            _ => "null",
        };
        match kind {
            "object" => {
                let mut object = Map::new();
                if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                    for (name, property) in properties {
                        object.insert(name.clone(), self.value(property, depth + 1));
                    }
                }
                Value::Object(object)
            }
            "array" => {
                let items = schema.get("items").unwrap_or(&Value::Null);
                let count = bound(schema, "maxItems").map_or(NOMINAL_ITEMS, |most| {
                    most.min(NOMINAL_ITEMS as u64) as usize
                });
                let count = count.max(bound(schema, "minItems").unwrap_or(0).min(16) as usize);
                Value::Array((0..count).map(|_| self.value(items, depth + 1)).collect())
            }
            "string" => string(schema),
            "integer" => match schema.get("maximum").and_then(Value::as_i64) {
                Some(maximum) if maximum.unsigned_abs() < 10_000_000 => json!(maximum),
                _ => json!(1_234_567),
            },
            "number" => json!(12_345.67),
            "boolean" => json!(false),
            _ => Value::Null,
        }
    }

    /// The schema `#/$defs/Name` (or `#/definitions/Name`) names in the root.
    fn resolve(&self, target: &str) -> Option<&Value> {
        let path = target.strip_prefix('#')?;
        self.root.pointer(path)
    }
}

/// A string of the schema's format, or of its length.
fn string(schema: &Map<String, Value>) -> Value {
    let formatted = match schema.get("format").and_then(Value::as_str) {
        Some("date-time") => Some("2026-01-31T23:59:59Z"),
        Some("date") => Some("2026-01-31"),
        Some("time") => Some("23:59:59"),
        Some("email") => Some("someone@example.com"),
        Some("uri" | "url") => Some("https://example.com/items/1"),
        Some("uuid") => Some("123e4567-e89b-42d3-a456-426614174000"),
        _ => None,
    };
    if let Some(formatted) = formatted {
        return json!(formatted);
    }
    let most = bound(schema, "maxLength")
        .map_or(NOMINAL_STRING, |most| (most as usize).min(NOMINAL_STRING));
    let least = bound(schema, "minLength").map_or(0, |least| least as usize);
    let length = most.max(least).min(LONGEST_STRING);
    // Words, as text is: a run of one letter would tokenize unlike any real value.
    let text: String = "sample text of a value "
        .chars()
        .cycle()
        .take(length)
        .collect();
    json!(text)
}

fn bound(schema: &Map<String, Value>, keyword: &str) -> Option<u64> {
    schema.get(keyword).and_then(Value::as_u64)
}

/// The value whose JSON is longest (the first of equals); `null` when there is none.
fn largest(values: impl Iterator<Item = Value>) -> Value {
    values
        .fold(None::<(usize, Value)>, |best, value| {
            let size = value.to_string().len();
            match best {
                Some((best_size, _)) if best_size >= size => best,
                _ => Some((size, value)),
            }
        })
        .map_or(Value::Null, |(_, value)| value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_property_at_nominal_size_the_largest_variant_and_refs_followed() {
        let root = json!({
            "$defs": {
                "Status": {"oneOf": [
                    {"const": "open", "type": "string"},
                    {"const": "voided", "type": "string"}
                ]},
                "Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}
            }
        });
        let item = json!({
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "code": {"type": "string", "maxLength": 4},
                "when": {"type": "string", "format": "date-time"},
                "total": {"type": "integer", "format": "int64"},
                "status": {"$ref": "#/$defs/Status"},
                "memo": {"type": ["string", "null"]},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "kind": {"enum": ["a", "bbb"]},
                "chain": {"$ref": "#/$defs/Node"}
            },
            "required": ["id"]
        });
        let value = sample(&item, &root);
        assert_eq!(value["id"].as_str().unwrap().len(), NOMINAL_STRING);
        assert_eq!(value["code"], "samp");
        assert_eq!(value["when"], "2026-01-31T23:59:59Z");
        assert_eq!(value["total"], 1_234_567);
        assert_eq!(value["status"], "voided");
        assert_eq!(value["memo"].as_str().unwrap().len(), NOMINAL_STRING);
        assert_eq!(value["tags"].as_array().unwrap().len(), 2);
        assert_eq!(value["kind"], "bbb");
        // A recursive schema ends.
        let mut depth = 0;
        let mut node = &value["chain"];
        while let Some(next) = node.get("next") {
            node = next;
            depth += 1;
        }
        assert!(depth <= DEPTH, "{depth}");
    }
}

//! Which arguments' values a `VALIDATION_ERROR` never echoes: those that are, or hold, a hidden
//! value. Computed once per action, when the server is built, failing closed.

use serde_json::{Map, Value};

use super::explain::resolve;
use crate::hidden::REDACTED;
use crate::model::ModelFields;

/// Schema nodes visited when looking for a hidden value; past it, everything is withheld.
const MAX_NODES: u32 = 100_000;

/// The top-level arguments whose values are never echoed back, in an issue's `sent` or in
/// serde's own words: an argument whose schema reaches `writeOnly` (the mark of
/// [`Hidden<T>`](crate::Hidden)'s schema) anywhere, through nested objects, items, `$ref`s and
/// alternatives, and any argument named like a hidden field of a model whose profile the tool
/// takes (so that one sent where it is not fillable is not echoed either). When a hidden value
/// could sit where no top-level name says (`additionalProperties`, an alternative of the whole
/// object) or the schema is too large to search, every value is withheld.
#[derive(Debug, Default)]
pub(crate) struct Withheld {
    names: Vec<String>,
    all: bool,
}

impl Withheld {
    pub(crate) fn of<'m>(
        schema: &Value,
        models: impl IntoIterator<Item = &'m ModelFields>,
    ) -> Withheld {
        let mut budget = MAX_NODES;
        let mut names: Vec<String> = schema
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(_, property)| reaches_write_only(schema, property, &mut budget))
            .map(|(name, _)| name.clone())
            .collect();
        for model in models {
            names.extend(
                model
                    .fields
                    .iter()
                    .filter(|field| field.hidden)
                    .map(|field| field.name.to_owned()),
            );
        }
        names.sort_unstable();
        names.dedup();
        // The rest of the root: what constrains the arguments beyond their own properties.
        // Definitions count only where something refers to them.
        let rest: Map<String, Value> = schema
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(key, _)| !matches!(key.as_str(), "properties" | "$defs" | "definitions"))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        let all = reaches_write_only(schema, &Value::Object(rest), &mut budget);
        Withheld { names, all }
    }

    /// Whether a value found under top-level argument `top` (`None`: the arguments as a
    /// whole) may be echoed.
    pub(crate) fn hides(&self, top: Option<&str>) -> bool {
        match top {
            _ if self.all => true,
            None => !self.names.is_empty(),
            Some(name) => self.names.iter().any(|hidden| hidden == name),
        }
    }

    /// Whether `arguments` carry a value that may be hidden: serde's words about them, which
    /// may quote it, are then withheld too.
    pub(crate) fn carried_by(&self, arguments: &Map<String, Value>) -> bool {
        self.all || arguments.keys().any(|key| self.hides(Some(key)))
    }

    /// What an issue at `top` says was sent: `rendered`, or [`REDACTED`] when it is withheld.
    pub(crate) fn sent(&self, top: Option<&str>, rendered: impl FnOnce() -> String) -> String {
        if self.hides(top) {
            REDACTED.to_owned()
        } else {
            rendered()
        }
    }
}

/// Whether `schema` is, or holds anywhere within, a `writeOnly` schema. Every `$ref` is
/// followed once; an unresolvable one hides nothing, an exhausted budget hides everything.
fn reaches_write_only(root: &Value, schema: &Value, budget: &mut u32) -> bool {
    let mut followed: Vec<&str> = Vec::new();
    let mut stack = vec![schema];
    while let Some(node) = stack.pop() {
        let Some(left) = budget.checked_sub(1) else {
            return true;
        };
        *budget = left;
        match node {
            Value::Object(object) => {
                if object.get("writeOnly") == Some(&Value::Bool(true)) {
                    return true;
                }
                if let Some(reference) = object.get("$ref").and_then(Value::as_str)
                    && !followed.contains(&reference)
                {
                    followed.push(reference);
                    stack.extend(resolve(root, reference));
                }
                stack.extend(object.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hidden_values_are_found_at_any_depth_and_through_references() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "token": {"type": "string", "writeOnly": true},
                "nested": {"type": "object", "properties": {"deep": {"items": {"writeOnly": true}}}},
                "linked": {"$ref": "#/$defs/Holder"},
                "either": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/Holder"}]},
                "plain": {"$ref": "#/$defs/Plain"},
                "cycle": {"$ref": "#/$defs/Cycle"}
            },
            "$defs": {
                "Holder": {"type": "object", "properties": {"secret": {"type": "string", "writeOnly": true}}},
                "Plain": {"type": "object", "properties": {"n": {"type": "integer"}}},
                "Cycle": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Cycle"}}}
            }
        });
        let withheld = Withheld::of(&schema, []);
        assert_eq!(withheld.names, ["either", "linked", "nested", "token"]);
        assert!(!withheld.all);
        assert!(withheld.hides(None));
        assert!(!withheld.hides(Some("name")) && !withheld.hides(Some("plain")));
        let object = |value: Value| value.as_object().cloned().unwrap();
        assert!(withheld.carried_by(&object(json!({"name": "a", "token": "t"}))));
        assert!(!withheld.carried_by(&object(json!({"name": "a"}))));
        assert_eq!(withheld.sent(Some("token"), || "\"t\"".into()), "[hidden]");
        assert_eq!(withheld.sent(Some("name"), || "\"a\"".into()), "\"a\"");
    }

    #[test]
    fn a_hidden_value_outside_the_properties_withholds_everything() {
        let schema = json!({
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "additionalProperties": {"$ref": "#/$defs/Secret"},
            "$defs": {"Secret": {"type": "string", "writeOnly": true}}
        });
        let withheld = Withheld::of(&schema, []);
        assert!(withheld.all && withheld.hides(Some("name")));
        let plain = json!({"type": "object", "properties": {"name": {"type": "string"}}});
        let withheld = Withheld::of(&plain, []);
        assert!(!withheld.hides(None) && !withheld.hides(Some("name")));
    }
}

//! Guarded fields are refused on every input surface (SPEC M3): a value an agent, a client or
//! a client's user sends never lands in a field that only the server sets.
//!
//! The macro of one tool sees its own parameters, not the models of other crates, so the net is
//! here: when the server is built, every input schema (tool arguments, resource template
//! variables, prompt arguments, completion arguments) is walked, through its properties,
//! `$ref`s, items and combinators, against the guarded fields of every model the server knows
//! (those behind its profiles and presenters, and those registered with
//! [`ServerBuilder::model`](crate::ServerBuilder::model)). A property whose name is a guarded
//! field's, compared normalized (lowercase, without `_` and `-`: `owner_id`, `ownerId`,
//! `OwnerId`, `owner-id` and `OWNER_ID` are one name), fails the build with a
//! [`GuardedInput`] naming where it is. An elicitation's type is only known when the question
//! is asked: [`Elicit::ask`](crate::elicit::Elicit::ask) refuses it then, before anything is
//! sent.
//!
//! Where a property named like a guarded field is not that field, the author says so at the
//! site with a reason: `#[not_guarded("…")]` on the parameter, or the schema keyword
//! [`NOT_GUARDED`] on a field of a parameter struct
//! (`#[schemars(extend("x-fusion-not-guarded" = "…"))]`). The statement is taken out of the
//! schema that is served and recorded in the lockfile (`not_guarded`, by property path), where
//! a reviewer sees it and its diff.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;

// A name as compared: lowercase, without `_` and `-` (the macros reserve names the same way).
use fusion_names::field_name_key as normalize;
use rmcp::model::JsonObject;
use serde_json::{Map, Value};

use crate::model::ModelFields;

/// The schema keyword that states a property is not the guarded field it is named like; its
/// value is the reason, for the reviewer.
pub const NOT_GUARDED: &str = "x-fusion-not-guarded";

/// Bounds that keep the walk finite on any schema: nesting, and `$ref`s followed per path.
const MAX_DEPTH: usize = 64;

/// Where a value comes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InputSurface {
    /// A tool's arguments, at any depth of its input schema.
    ToolArgument,
    /// A resource's URI template variable.
    ResourceVariable,
    /// A prompt's argument.
    PromptArgument,
    /// An argument or variable a completion function completes.
    CompletionArgument,
    /// A field of what an elicitation asks the user for.
    Elicitation,
}

impl InputSurface {
    /// How a problem names it: `tool argument`, `resource template variable`, …
    pub fn as_str(self) -> &'static str {
        match self {
            InputSurface::ToolArgument => "tool argument",
            InputSurface::ResourceVariable => "resource template variable",
            InputSurface::PromptArgument => "prompt argument",
            InputSurface::CompletionArgument => "completion argument",
            InputSurface::Elicitation => "elicitation field",
        }
    }

    /// What the owner is: the tool, resource or prompt declaring it, or the type asked for.
    fn owner(self) -> &'static str {
        match self {
            InputSurface::ToolArgument => "tool",
            InputSurface::ResourceVariable => "resource",
            InputSurface::PromptArgument => "prompt",
            InputSurface::CompletionArgument => "completion of",
            InputSurface::Elicitation => "the type asked,",
        }
    }

    /// How the author states the exception here.
    fn how_to_state(self) -> &'static str {
        match self {
            InputSurface::Elicitation => {
                "if it is not that field, state it on the struct field with \
                 `#[schemars(extend(\"x-fusion-not-guarded\" = \"why\"))]`"
            }
            _ => {
                "if it is not that field, state it at the site: `#[not_guarded(\"why\")]` on the \
                 parameter, or `#[schemars(extend(\"x-fusion-not-guarded\" = \"why\"))]` on the \
                 field of a parameter struct; the reason is recorded in the lockfile"
            }
        }
    }
}

impl fmt::Display for InputSurface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A property through which a guarded field's value would come in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardedInput {
    /// The surface.
    pub surface: InputSurface,
    /// The tool, resource or prompt key, or the type asked for by an elicitation.
    pub owner: String,
    /// The property's path in the input: `owner_id`, `opts.owner_id`, `lines[].ownerId`.
    pub path: String,
    /// The model whose guarded field it names.
    pub model: &'static str,
    /// The guarded field.
    pub field: &'static str,
}

impl fmt::Display for GuardedInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} `{}` of {} `{}` has the name of `{}.{}`, a guarded field: its value never comes \
             in from an agent, a client or its user; rename it, or {}",
            self.surface,
            self.path,
            self.surface.owner(),
            self.owner,
            self.model,
            self.field,
            self.surface.how_to_state(),
        )
    }
}

/// The guarded fields of every model a server knows, by normalized name.
#[derive(Debug, Default, Clone)]
pub(crate) struct GuardedNames {
    by_name: BTreeMap<String, (&'static str, &'static str)>,
}

impl GuardedNames {
    /// Adds the guarded fields of `model`.
    pub(crate) fn add(&mut self, model: ModelFields) {
        for field in model.fields.iter().filter(|field| field.guarded) {
            self.by_name
                .entry(normalize(field.name))
                .or_insert((model.name, field.name));
        }
    }

    /// The model and guarded field `name` stands for, if any.
    pub(crate) fn find(&self, name: &str) -> Option<(&'static str, &'static str)> {
        self.by_name.get(&normalize(name)).copied()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

/// What walking one input schema found.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// Properties named like a guarded field, not stated otherwise.
    pub(crate) found: Vec<GuardedInput>,
    /// The statements, by property path: the reason given.
    pub(crate) stated: BTreeMap<String, String>,
    /// Statements that cannot be read (not a string, or empty).
    pub(crate) malformed: Vec<String>,
}

impl Scan {
    /// Pushes every problem found, one sentence each.
    pub(crate) fn report(&self, problems: &mut Vec<String>) {
        problems.extend(self.found.iter().map(ToString::to_string));
        problems.extend(self.malformed.iter().cloned());
    }
}

/// Walks `schema` (an input schema, `$defs` at its root) against `names`, then takes the
/// statements out of it. `skip` tells a top-level property that was already reported otherwise.
pub(crate) fn scan(
    schema: &mut JsonObject,
    names: &GuardedNames,
    surface: InputSurface,
    owner: &str,
    skip: &dyn Fn(&str) -> bool,
) -> Scan {
    let root = Value::Object(schema.clone());
    let mut walker = Walker {
        root: &root,
        names,
        surface,
        owner,
        skip,
        following: HashSet::new(),
        scan: Scan::default(),
    };
    walker.schema("", &root, 0);
    let scan = walker.scan;
    strip(schema);
    scan
}

struct Walker<'a> {
    root: &'a Value,
    names: &'a GuardedNames,
    surface: InputSurface,
    owner: &'a str,
    skip: &'a dyn Fn(&str) -> bool,
    /// The `$ref`s being followed on the current path: a recursive type ends here.
    following: HashSet<String>,
    scan: Scan,
}

impl Walker<'_> {
    fn schema(&mut self, path: &str, schema: &Value, depth: usize) {
        let Value::Object(keywords) = schema else {
            return;
        };
        if depth > MAX_DEPTH {
            return;
        }
        if let Some(Value::String(target)) = keywords.get("$ref")
            && let Some(resolved) = target
                .strip_prefix('#')
                .and_then(|pointer| self.root.pointer(pointer))
            && self.following.insert(target.clone())
        {
            self.schema(path, resolved, depth + 1);
            self.following.remove(target);
        }
        if let Some(Value::Object(properties)) = keywords.get("properties") {
            for (name, property) in properties {
                let here = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                self.property(&here, name, property, path.is_empty());
                self.schema(&here, property, depth + 1);
            }
        }
        let items = format!("{path}[]");
        for keyword in [
            "items",
            "additionalProperties",
            "unevaluatedProperties",
            "contains",
        ] {
            if let Some(inner) = keywords.get(keyword) {
                self.schema(&items, inner, depth + 1);
            }
        }
        if let Some(Value::Array(prefix)) = keywords.get("prefixItems") {
            for inner in prefix {
                self.schema(&items, inner, depth + 1);
            }
        }
        for keyword in ["anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(variants)) = keywords.get(keyword) {
                for variant in variants {
                    self.schema(path, variant, depth + 1);
                }
            }
        }
        for keyword in ["if", "then", "else", "not"] {
            if let Some(inner) = keywords.get(keyword) {
                self.schema(path, inner, depth + 1);
            }
        }
        for keyword in ["dependentSchemas", "patternProperties"] {
            if let Some(Value::Object(inner)) = keywords.get(keyword) {
                for inner in inner.values() {
                    self.schema(path, inner, depth + 1);
                }
            }
        }
    }

    fn property(&mut self, path: &str, name: &str, property: &Value, top: bool) {
        match property.get(NOT_GUARDED) {
            Some(Value::String(reason)) if !reason.trim().is_empty() => {
                self.scan
                    .stated
                    .insert(path.to_owned(), reason.trim().to_owned());
                return;
            }
            Some(_) => {
                self.scan.malformed.push(format!(
                    "{} `{path}` of {} `{}`: `{NOT_GUARDED}` states why the property is not a \
                     guarded field; give the reason as a non-empty string",
                    self.surface,
                    self.surface.owner(),
                    self.owner
                ));
                return;
            }
            None => {}
        }
        if top && (self.skip)(name) {
            return;
        }
        if let Some((model, field)) = self.names.find(name)
            && !self.scan.found.iter().any(|found| found.path == path)
        {
            self.scan.found.push(GuardedInput {
                surface: self.surface,
                owner: self.owner.to_owned(),
                path: path.to_owned(),
                model,
                field,
            });
        }
    }
}

/// The keys of a value that its schema does not declare and that name a guarded field: what
/// serde would still read through an alias (`#[serde(alias = "owner_id")]`, which no schema
/// shows), a flattened map or an untyped `Value`. Every declared property was judged when the
/// server was built; these are refused when they come.
#[derive(Debug)]
pub(crate) struct UndeclaredKeys {
    names: Arc<GuardedNames>,
    declared: HashSet<String>,
}

/// Values nest at most this deep before `serde_json` refuses them; the walk stops there too.
const MAX_VALUE_DEPTH: usize = 256;

impl UndeclaredKeys {
    /// For values described by `schema`; `None` when no model guards anything.
    pub(crate) fn new(schema: &Value, names: &Arc<GuardedNames>) -> Option<Self> {
        if names.is_empty() {
            return None;
        }
        let mut declared = HashSet::new();
        declared_properties(schema, &mut declared, 0);
        Some(UndeclaredKeys {
            names: Arc::clone(names),
            declared,
        })
    }

    /// The path of the first such key in `value` (`opts.owner_id`, `lines[2].ownerId`).
    pub(crate) fn find(&self, value: &Value) -> Option<String> {
        self.find_from(value, 0)
    }

    /// The same below the top level, whose keys a tool's arguments check on their own (an
    /// undeclared argument is an unknown field, with the known ones listed).
    pub(crate) fn find_nested(&self, value: &Value) -> Option<String> {
        self.find_from(value, 1)
    }

    fn find_from(&self, value: &Value, from: usize) -> Option<String> {
        let mut segments = self.find_at(value, 0, from)?;
        segments.reverse();
        Some(segments.concat().trim_start_matches('.').to_owned())
    }

    /// The segments of the path, innermost first; allocates only when a key is found. Keys are
    /// checked from depth `from` on.
    fn find_at(&self, value: &Value, depth: usize, from: usize) -> Option<Vec<String>> {
        if depth > MAX_VALUE_DEPTH {
            return None;
        }
        match value {
            Value::Object(object) => object.iter().find_map(|(key, inner)| {
                let mut found = if depth >= from
                    && !self.declared.contains(key)
                    && self.names.find(key).is_some()
                {
                    Some(Vec::new())
                } else {
                    self.find_at(inner, depth + 1, from)
                }?;
                found.push(format!(".{key}"));
                Some(found)
            }),
            Value::Array(items) => items.iter().enumerate().find_map(|(index, item)| {
                let mut found = self.find_at(item, depth + 1, from)?;
                found.push(format!("[{index}]"));
                Some(found)
            }),
            _ => None,
        }
    }
}

/// Every property name a schema declares, anywhere (its definitions included).
fn declared_properties(schema: &Value, declared: &mut HashSet<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match schema {
        Value::Object(keywords) => {
            for (keyword, value) in keywords {
                if keyword == "properties"
                    && let Value::Object(properties) = value
                {
                    declared.extend(properties.keys().cloned());
                }
                declared_properties(value, declared, depth + 1);
            }
        }
        Value::Array(items) => {
            for item in items {
                declared_properties(item, declared, depth + 1);
            }
        }
        _ => {}
    }
}

/// Takes every statement out of a schema: what is served says nothing about it (the lockfile
/// does). Only schema positions are visited, never a value (`default`, `enum`, …) nor a
/// property's name.
pub(crate) fn strip(schema: &mut Map<String, Value>) {
    schema.remove(NOT_GUARDED);
    for (keyword, value) in schema.iter_mut() {
        match keyword.as_str() {
            "default" | "examples" | "const" | "enum" => {}
            "properties" | "$defs" | "definitions" | "patternProperties" | "dependentSchemas" => {
                if let Value::Object(named) = value {
                    for inner in named.values_mut() {
                        strip_value(inner);
                    }
                }
            }
            _ => strip_value(value),
        }
    }
}

fn strip_value(value: &mut Value) {
    match value {
        Value::Object(schema) => strip(schema),
        Value::Array(schemas) => schemas.iter_mut().for_each(strip_value),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FieldInfo;
    use serde_json::json;

    const FIELDS: &[FieldInfo] = &[
        FieldInfo {
            name: "name",
            label: Some("Name"),
            hidden: false,
            guarded: false,
        },
        FieldInfo {
            name: "owner_id",
            label: Some("Owner"),
            hidden: false,
            guarded: true,
        },
    ];

    fn names() -> GuardedNames {
        let mut names = GuardedNames::default();
        names.add(ModelFields {
            name: "Contact",
            fields: FIELDS,
        });
        names
    }

    fn paths(schema: Value) -> (Vec<String>, BTreeMap<String, String>, Value) {
        let Value::Object(mut schema) = schema else {
            unreachable!()
        };
        let scan = scan(
            &mut schema,
            &names(),
            InputSurface::ToolArgument,
            "crm.transfer",
            &|_| false,
        );
        let found = scan.found.into_iter().map(|found| found.path).collect();
        (found, scan.stated, Value::Object(schema))
    }

    #[test]
    fn every_spelling_of_a_guarded_name_is_one_name() {
        for spelling in [
            "owner_id", "ownerId", "OwnerId", "owner-id", "OWNER_ID", "ownerid",
        ] {
            assert_eq!(
                names().find(spelling),
                Some(("Contact", "owner_id")),
                "{spelling}"
            );
        }
        assert_eq!(names().find("owner"), None);
        assert_eq!(names().find("name"), None, "not guarded");
    }

    #[test]
    fn names_are_found_at_any_depth_through_refs_items_and_combinators() {
        let (found, stated, _) = paths(json!({
            "type": "object",
            "properties": {
                "ownerId": {"type": "string"},
                "opts": {"$ref": "#/$defs/Opts"},
                "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}},
                "either": {"anyOf": [{"type": "null"}, {"properties": {"OWNER-ID": {}}}]},
                "name": {"type": "string"}
            },
            "$defs": {
                "Opts": {"properties": {"owner_id": {}, "again": {"$ref": "#/$defs/Opts"}}},
                "Line": {"properties": {"Owner_Id": {}}}
            }
        }));
        let mut sorted = found;
        sorted.sort();
        // A recursive type is read once per path: `opts.again` is `Opts` again, reported at
        // `opts.owner_id`.
        assert_eq!(
            sorted,
            [
                "either.OWNER-ID",
                "lines[].Owner_Id",
                "opts.owner_id",
                "ownerId"
            ]
        );
        assert!(stated.is_empty());
    }

    #[test]
    fn a_statement_is_recorded_by_path_and_taken_out_of_the_schema() {
        let (found, stated, schema) = paths(json!({
            "type": "object",
            "properties": {
                "owner_id": {"type": "string", "x-fusion-not-guarded": " the new owner, checked "},
                "opts": {"$ref": "#/$defs/Opts"}
            },
            "$defs": {"Opts": {"properties": {"ownerId": {"x-fusion-not-guarded": "a filter"}}}}
        }));
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(
            stated,
            BTreeMap::from([
                ("owner_id".to_owned(), "the new owner, checked".to_owned()),
                ("opts.ownerId".to_owned(), "a filter".to_owned()),
            ])
        );
        assert!(!schema.to_string().contains(NOT_GUARDED), "{schema}");
    }

    #[test]
    fn an_undeclared_key_naming_a_guarded_field_is_found_at_any_depth() {
        let schema = json!({
            "properties": {"opts": {"$ref": "#/$defs/Opts"}, "data": {}},
            "$defs": {"Opts": {"properties": {"note": {}, "ownerId": {}}}}
        });
        let keys = UndeclaredKeys::new(&schema, &Arc::new(names())).expect("names");
        // Declared (and so judged when the server was built): not refused here.
        assert_eq!(
            keys.find(&json!({"opts": {"ownerId": "u", "note": "n"}})),
            None
        );
        // An alias of `note`, or a key inside an untyped value: refused, with its path.
        assert_eq!(
            keys.find(&json!({"opts": {"note": "n", "owner_id": "u"}})),
            Some("opts.owner_id".to_owned())
        );
        assert_eq!(
            keys.find(&json!({"data": [{"a": 1}, {"x": {"OWNER-ID": 1}}]})),
            Some("data[1].x.OWNER-ID".to_owned())
        );
        // Below the top level only, for a tool's arguments.
        assert_eq!(keys.find_nested(&json!({"owner_id": 1})), None);
        assert_eq!(
            keys.find_nested(&json!({"opts": {"owner_id": 1}})),
            Some("opts.owner_id".to_owned())
        );
        assert!(UndeclaredKeys::new(&schema, &Arc::new(GuardedNames::default())).is_none());
    }

    #[test]
    fn a_statement_without_a_reason_is_a_problem() {
        let Value::Object(mut schema) = json!({
            "properties": {"owner_id": {"x-fusion-not-guarded": ""}}
        }) else {
            unreachable!()
        };
        let scan = scan(
            &mut schema,
            &names(),
            InputSurface::PromptArgument,
            "crm.review",
            &|_| false,
        );
        assert_eq!(scan.malformed.len(), 1);
        assert!(
            scan.malformed[0].contains("non-empty"),
            "{:?}",
            scan.malformed
        );
    }
}

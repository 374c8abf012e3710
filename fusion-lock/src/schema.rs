//! Comparing two JSON schemas, as schemars writes them, by what they accept (arguments) or
//! promise (results): a schema is read through its `$ref`s, its nullable wrapper (`anyOf` with
//! `{"type": "null"}`) and its enum forms (`enum`, `const`, a `oneOf` of `const`s), and lists
//! that are sets (`required`, enum values) are compared as sets.
//!
//! Arguments are contravariant: accepting less is breaking, more is safe. Results are
//! covariant: promising less (never `null`, a value gone) is safe, and anything else the agent
//! did not see before is breaking or risky.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::diff::{Changes, quote};
use crate::rules::Rule;

/// Which side of a call a schema describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// The arguments: what the server accepts.
    Input,
    /// The `data` of a result: what the agent receives.
    Output,
}

/// What a presenter's changes already reported about the output schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Aspect {
    Added,
    Removed,
    Description,
    MaxItems,
}

/// Output changes already reported, by aspect and path (`data.customer.name`, without `[]`).
#[derive(Debug, Default)]
pub(crate) struct Covered(BTreeSet<(Aspect, String)>);

impl Covered {
    pub(crate) fn insert(&mut self, aspect: Aspect, path: &str) {
        self.0.insert((aspect, path.to_owned()));
    }

    fn contains(&self, aspect: Aspect, path: &str) -> bool {
        // Items of arrays are where their array is, for a presenter.
        let path = path.replace("[]", "");
        self.0.contains(&(aspect, path))
    }
}

/// Reports every difference between `old` and `new`.
pub(crate) fn compare(
    side: Side,
    old: &Value,
    new: &Value,
    covered: &Covered,
    out: &mut Changes<'_>,
) {
    let mut schemas = Schemas {
        side,
        old_root: old,
        new_root: new,
        covered,
        comparing: Vec::new(),
        out,
    };
    let root = match side {
        Side::Input => "",
        Side::Output => "data",
    };
    schemas.compare(root, old, new);
}

/// Bounds to keep the comparison finite on any input: `$ref` chains followed, and nesting.
const MAX_REFS: usize = 16;
const MAX_DEPTH: usize = 64;

/// Keywords that only document.
const DOCS: &[&str] = &[
    "description",
    "title",
    "examples",
    "deprecated",
    "$comment",
    "readOnly",
    "writeOnly",
];
/// Bounds that refuse more as they rise.
const LOWER_BOUNDS: &[&str] = &[
    "minimum",
    "exclusiveMinimum",
    "minLength",
    "minItems",
    "minProperties",
    "minContains",
];
/// Bounds that refuse more as they fall.
const UPPER_BOUNDS: &[&str] = &[
    "maximum",
    "exclusiveMaximum",
    "maxLength",
    "maxItems",
    "maxProperties",
    "maxContains",
];
/// Other constraints: added or changed, they may refuse what was accepted.
const CONSTRAINTS: &[&str] = &[
    "pattern",
    "format",
    "multipleOf",
    "uniqueItems",
    "contentEncoding",
    "contentMediaType",
    "propertyNames",
    "patternProperties",
    "dependentRequired",
    "dependentSchemas",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "allOf",
    "unevaluatedItems",
    "unevaluatedProperties",
];
/// Keywords compared by the structural rules (or not part of the meaning).
const STRUCTURE: &[&str] = &[
    "$schema",
    "$defs",
    "definitions",
    "$id",
    "$ref",
    "$anchor",
    "type",
    "enum",
    "const",
    "oneOf",
    "anyOf",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
];

struct Schemas<'a, 'o, 'c> {
    side: Side,
    old_root: &'a Value,
    new_root: &'a Value,
    covered: &'a Covered,
    /// The pairs of definitions being compared, outermost first: a recursive type ends here.
    comparing: Vec<(String, String)>,
    out: &'c mut Changes<'o>,
}

/// A schema read through its `$ref`s and its nullable wrapper.
struct Node {
    keywords: Map<String, Value>,
    nullable: bool,
    reference: Option<String>,
}

fn node(root: &Value, schema: &Value) -> Node {
    node_bounded(root, schema, MAX_REFS)
}

fn node_bounded(root: &Value, schema: &Value, refs: usize) -> Node {
    let mut keywords = keywords(schema);
    let mut reference = None;
    for _ in 0..refs {
        let Some(Value::String(target)) = keywords.remove("$ref") else {
            break;
        };
        let Some(resolved) = target.strip_prefix('#').and_then(|path| root.pointer(path)) else {
            // Not a definition of this schema: kept as it is, compared as a keyword.
            keywords.insert("$ref".into(), Value::String(target));
            break;
        };
        // The keywords beside a `$ref` (its description, say) win over the definition's.
        let mut merged = self::keywords(resolved);
        merged.extend(keywords);
        keywords = merged;
        reference = Some(target);
    }
    let mut nullable = false;
    for combinator in ["anyOf", "oneOf"] {
        let Some(Value::Array(variants)) = keywords.get(combinator) else {
            continue;
        };
        if variants.len() != 2 {
            continue;
        }
        let Some(null_at) = variants.iter().position(is_null) else {
            continue;
        };
        let other = variants[1 - null_at].clone();
        keywords.remove(combinator);
        let inner = node_bounded(root, &other, refs.saturating_sub(1));
        let mut merged = inner.keywords;
        merged.extend(keywords);
        keywords = merged;
        nullable = true;
        reference = inner.reference.or(reference);
        break;
    }
    Node {
        keywords,
        nullable,
        reference,
    }
}

fn keywords(schema: &Value) -> Map<String, Value> {
    match schema {
        Value::Object(keywords) => keywords.clone(),
        // `false` accepts nothing; `true` (and anything else) accepts everything.
        Value::Bool(false) => Map::from_iter([("not".to_owned(), Value::Object(Map::new()))]),
        _ => Map::new(),
    }
}

fn is_null(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null") && schema.get("properties").is_none()
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if number.is_i64() || number.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The values of an enum, by their canonical JSON, with each one's description.
type EnumValues = BTreeMap<String, Option<String>>;

/// The enum of a node: `enum`, `const`, or a `oneOf`/`anyOf` whose every variant is one.
fn enum_values(root: &Value, node: &Node) -> Option<EnumValues> {
    let keywords = &node.keywords;
    if let Some(Value::Array(values)) = keywords.get("enum") {
        return Some(
            values
                .iter()
                .map(|value| (value.to_string(), None))
                .collect(),
        );
    }
    if let Some(value) = keywords.get("const") {
        return Some(EnumValues::from([(value.to_string(), None)]));
    }
    let variants = ["oneOf", "anyOf"]
        .iter()
        .find_map(|combinator| keywords.get(*combinator)?.as_array())?;
    let mut values = EnumValues::new();
    for variant in variants {
        let variant = self::node(root, variant);
        let description = variant
            .keywords
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned);
        match (variant.keywords.get("const"), variant.keywords.get("enum")) {
            (Some(value), _) => {
                values.insert(value.to_string(), description);
            }
            (None, Some(Value::Array(many))) => {
                values.extend(many.iter().map(|value| (value.to_string(), None)));
            }
            _ => return None,
        }
    }
    (!variants.is_empty()).then_some(values)
}

/// The JSON types a node admits; `None` when it does not say.
fn types(root: &Value, node: &Node) -> Option<BTreeSet<String>> {
    let mut types: BTreeSet<String> = match node.keywords.get("type") {
        Some(Value::String(kind)) => BTreeSet::from([kind.clone()]),
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => {
            let values = enum_values(root, node)?;
            values
                .keys()
                .filter_map(|value| serde_json::from_str::<Value>(value).ok())
                .map(|value| json_type(&value).to_owned())
                .collect()
        }
    };
    if node.nullable {
        types.insert("null".into());
    }
    Some(types)
}

/// The variants of a `oneOf`/`anyOf` that is neither an enum nor a nullable wrapper.
fn variants<'n>(root: &Value, node: &'n Node) -> Option<&'n Vec<Value>> {
    if enum_values(root, node).is_some() {
        return None;
    }
    ["oneOf", "anyOf"]
        .iter()
        .find_map(|combinator| node.keywords.get(*combinator)?.as_array())
}

/// Whether a set of types admits `kind` (an integer is a number).
fn admits(types: &BTreeSet<String>, kind: &str) -> bool {
    types.contains(kind) || (kind == "integer" && types.contains("number"))
}

fn list(types: impl IntoIterator<Item = impl AsRef<str>>) -> String {
    types
        .into_iter()
        .map(|kind| format!("`{}`", kind.as_ref()))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// The range of an integer `format` that schemars writes.
fn integer_range(format: &str) -> Option<(i128, i128)> {
    Some(match format {
        "int8" => (i8::MIN.into(), i8::MAX.into()),
        "int16" => (i16::MIN.into(), i16::MAX.into()),
        "int32" => (i32::MIN.into(), i32::MAX.into()),
        "int64" | "int" => (i64::MIN.into(), i64::MAX.into()),
        "uint8" => (0, u8::MAX.into()),
        "uint16" => (0, u16::MAX.into()),
        "uint32" => (0, u32::MAX.into()),
        "uint64" | "uint" => (0, u64::MAX.into()),
        "int128" => (i128::MIN, i128::MAX),
        _ => return None,
    })
}

impl Schemas<'_, '_, '_> {
    fn push(&mut self, rule: Rule, reason: String) {
        self.out.push(rule, reason);
    }

    /// How a reason names the schema at `path`.
    fn name(&self, path: &str) -> String {
        match (self.side, path) {
            (Side::Input, "") => "the arguments".into(),
            (Side::Input, path) => format!("argument `{path}`"),
            (Side::Output, path) => format!("output `{path}`"),
        }
    }

    fn compare(&mut self, path: &str, old: &Value, new: &Value) {
        if self.comparing.len() >= MAX_DEPTH || path.len() > 4096 {
            return;
        }
        let old = node(self.old_root, old);
        let new = node(self.new_root, new);
        match (&old.reference, &new.reference) {
            (Some(was), Some(now)) => {
                let pair = (was.clone(), now.clone());
                if self.comparing.contains(&pair) {
                    return;
                }
                self.comparing.push(pair);
                self.nodes(path, &old, &new);
                self.comparing.pop();
            }
            _ => {
                // Nesting without definitions is finite; the depth bound counts it all the same.
                self.comparing.push((String::new(), String::new()));
                self.nodes(path, &old, &new);
                self.comparing.pop();
            }
        }
    }

    fn nodes(&mut self, path: &str, old: &Node, new: &Node) {
        self.types(path, old, new);
        self.enums(path, old, new);
        self.objects(path, &old.keywords, &new.keywords);
        self.arrays(path, &old.keywords, &new.keywords);
        self.variants(path, old, new);
        self.docs(path, &old.keywords, &new.keywords);
        self.constraints(path, &old.keywords, &new.keywords);
        self.others(path, &old.keywords, &new.keywords);
    }

    fn types(&mut self, path: &str, old: &Node, new: &Node) {
        let was = types(self.old_root, old);
        let now = types(self.new_root, new);
        if was == now {
            return;
        }
        let name = self.name(path);
        match (self.side, was, now) {
            (Side::Input, Some(was), Some(now)) => {
                let refused: Vec<&String> = was.iter().filter(|kind| !admits(&now, kind)).collect();
                let accepted: Vec<&String> =
                    now.iter().filter(|kind| !admits(&was, kind)).collect();
                if !refused.is_empty() {
                    self.push(
                        Rule::InputTypeNarrowed,
                        format!("{name} no longer accepts {}", list(refused)),
                    );
                }
                if !accepted.is_empty() {
                    self.push(
                        Rule::InputTypeWidened,
                        format!("{name} also accepts {}", list(accepted)),
                    );
                }
            }
            (Side::Input, None, Some(now)) => self.push(
                Rule::InputTypeNarrowed,
                format!("{name} now accepts only {}", list(&now)),
            ),
            (Side::Input, Some(was), None) => self.push(
                Rule::InputTypeWidened,
                format!("{name} accepts any type (was {})", list(&was)),
            ),
            (Side::Output, Some(was), Some(now)) if now.iter().all(|kind| admits(&was, kind)) => {
                let gone: Vec<&String> = was.iter().filter(|kind| !now.contains(*kind)).collect();
                self.push(
                    Rule::OutputNarrowed,
                    format!("{name} is never {} now", list(gone)),
                );
            }
            (Side::Output, Some(was), Some(now)) => self.push(
                Rule::OutputTypeChanged,
                format!("{name} is {} now (was {})", list(&now), list(&was)),
            ),
            (Side::Output, None, Some(now)) => self.push(
                Rule::OutputNarrowed,
                format!("{name} is only {} now", list(&now)),
            ),
            (Side::Output, Some(was), None) => self.push(
                Rule::OutputTypeChanged,
                format!("{name} may be of any type now (was {})", list(&was)),
            ),
            (_, None, None) => {}
        }
    }

    fn enums(&mut self, path: &str, old: &Node, new: &Node) {
        let was = enum_values(self.old_root, old);
        let now = enum_values(self.new_root, new);
        let name = self.name(path);
        match (was, now) {
            (Some(was), Some(now)) => {
                for value in now.keys().filter(|value| !was.contains_key(*value)) {
                    match self.side {
                        Side::Input => {
                            self.push(Rule::InputEnumValueAdded, format!("{name} accepts {value}"))
                        }
                        Side::Output => self.push(
                            Rule::OutputEnumValueAdded,
                            format!("{name} may be {value}: the agent was never told of it"),
                        ),
                    }
                }
                for value in was.keys().filter(|value| !now.contains_key(*value)) {
                    match self.side {
                        Side::Input => self.push(
                            Rule::InputEnumValueRemoved,
                            format!("{name} no longer accepts {value}"),
                        ),
                        Side::Output => {
                            self.push(Rule::OutputNarrowed, format!("{name} is never {value} now"))
                        }
                    }
                }
                for (value, description) in &now {
                    if let Some(before) = was.get(value)
                        && before != description
                    {
                        self.push(
                            Rule::DescriptionChanged,
                            format!("description of {name} value {value} reworded"),
                        );
                    }
                }
            }
            (None, Some(now)) => {
                let values = now.keys().cloned().collect::<Vec<_>>().join(", ");
                match self.side {
                    Side::Input => self.push(
                        Rule::InputTypeNarrowed,
                        format!("{name} accepts only {values} now"),
                    ),
                    Side::Output => {
                        self.push(Rule::OutputNarrowed, format!("{name} is only {values} now"))
                    }
                }
            }
            (Some(was), None) => {
                let values = was.keys().cloned().collect::<Vec<_>>().join(", ");
                match self.side {
                    Side::Input => self.push(
                        Rule::InputTypeWidened,
                        format!("{name} is no longer restricted to {values}"),
                    ),
                    Side::Output => self.push(
                        Rule::OutputTypeChanged,
                        format!("{name} is no longer restricted to {values}"),
                    ),
                }
            }
            (None, None) => {}
        }
    }

    fn objects(&mut self, path: &str, old: &Map<String, Value>, new: &Map<String, Value>) {
        let empty = Map::new();
        let properties = |keywords: &'_ Map<String, Value>| -> Map<String, Value> {
            keywords
                .get("properties")
                .and_then(Value::as_object)
                .unwrap_or(&empty)
                .clone()
        };
        let required = |keywords: &Map<String, Value>| -> BTreeSet<String> {
            keywords
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        };
        let (was, now) = (properties(old), properties(new));
        let (was_required, now_required) = (required(old), required(new));
        let child = |name: &str| {
            if path.is_empty() {
                name.to_owned()
            } else {
                format!("{path}.{name}")
            }
        };
        for name in now.keys().filter(|name| !was.contains_key(*name)) {
            let path = child(name);
            match self.side {
                Side::Input if now_required.contains(name) => self.push(
                    Rule::RequiredArgumentAdded,
                    format!("new required argument `{path}`"),
                ),
                Side::Input => self.push(
                    Rule::OptionalArgumentAdded,
                    format!("new optional argument `{path}`"),
                ),
                Side::Output if self.covered.contains(Aspect::Added, &path) => {}
                Side::Output => self.push(
                    Rule::OutputFieldAdded,
                    format!("egress widened: output field `{path}` added"),
                ),
            }
        }
        for name in was.keys().filter(|name| !now.contains_key(*name)) {
            let path = child(name);
            match self.side {
                Side::Input => self.push(
                    Rule::ArgumentRemoved,
                    format!("argument `{path}` removed: calls that send it are refused"),
                ),
                Side::Output if self.covered.contains(Aspect::Removed, &path) => {}
                Side::Output => self.push(
                    Rule::OutputFieldRemoved,
                    format!("output field `{path}` removed"),
                ),
            }
        }
        for (name, before) in &was {
            let Some(after) = now.get(name) else {
                continue;
            };
            let path = child(name);
            self.compare(&path, before, after);
            match (
                self.side,
                was_required.contains(name),
                now_required.contains(name),
            ) {
                (Side::Input, false, true) => self.push(
                    Rule::ArgumentNowRequired,
                    format!("argument `{path}` is now required"),
                ),
                (Side::Input, true, false) => self.push(
                    Rule::ArgumentNowOptional,
                    format!("argument `{path}` may now be left out"),
                ),
                (Side::Output, true, false) => self.push(
                    Rule::OutputFieldOptional,
                    format!("output field `{path}` may now be absent"),
                ),
                (Side::Output, false, true) => self.push(
                    Rule::OutputNarrowed,
                    format!("output field `{path}` is always present now"),
                ),
                _ => {}
            }
        }
        let closed = |keywords: &Map<String, Value>| {
            keywords.get("additionalProperties") == Some(&Value::Bool(false))
        };
        let name = self.name(path);
        match (self.side, closed(old), closed(new)) {
            (Side::Input, false, true) => self.push(
                Rule::InputClosed,
                format!("{name} no longer accepts properties it does not list"),
            ),
            (Side::Input, true, false) => self.push(
                Rule::InputOpened,
                format!("{name} accepts properties it does not list"),
            ),
            (Side::Output, false, true) => self.push(
                Rule::OutputNarrowed,
                format!("{name} carries only the properties it lists now"),
            ),
            (Side::Output, true, false) => self.push(
                Rule::OutputOpened,
                format!("egress widened: {name} may carry properties it does not list"),
            ),
            _ => {}
        }
        // Maps: the schema of their values.
        if let (Some(Value::Object(_)), Some(Value::Object(_))) = (
            old.get("additionalProperties"),
            new.get("additionalProperties"),
        ) {
            self.compare(
                &format!("{path}.*"),
                &old["additionalProperties"],
                &new["additionalProperties"],
            );
        }
    }

    fn arrays(&mut self, path: &str, old: &Map<String, Value>, new: &Map<String, Value>) {
        match (old.get("items"), new.get("items")) {
            (Some(was), Some(now)) => self.compare(&format!("{path}[]"), was, now),
            (None, None) => {}
            _ => self.push(
                Rule::SchemaKeywordChanged,
                format!("`items` of {} changed", self.name(path)),
            ),
        }
        let tuple = |keywords: &Map<String, Value>| {
            keywords
                .get("prefixItems")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let (was, now) = (tuple(old), tuple(new));
        for (index, (before, after)) in was.iter().zip(&now).enumerate() {
            self.compare(&format!("{path}[{index}]"), before, after);
        }
        if was.len() != now.len() {
            let name = self.name(path);
            let rule = match self.side {
                Side::Input => Rule::InputTypeNarrowed,
                Side::Output => Rule::OutputTypeChanged,
            };
            self.push(
                rule,
                format!(
                    "{name} is a tuple of {} items now (was {})",
                    now.len(),
                    was.len()
                ),
            );
        }
    }

    fn variants(&mut self, path: &str, old: &Node, new: &Node) {
        let was = variants(self.old_root, old).cloned();
        let now = variants(self.new_root, new).cloned();
        let name = self.name(path);
        match (was, now) {
            (Some(was), Some(now)) => {
                let gone: Vec<&Value> = was
                    .iter()
                    .filter(|variant| !now.contains(variant))
                    .collect();
                let new_ones: Vec<&Value> = now
                    .iter()
                    .filter(|variant| !was.contains(variant))
                    .collect();
                if gone.len() == new_ones.len() {
                    // Changed in place: compared one to one, in order.
                    for (before, after) in gone.into_iter().zip(new_ones) {
                        self.compare(path, before, after);
                    }
                    return;
                }
                for _ in gone {
                    match self.side {
                        Side::Input => self.push(
                            Rule::InputTypeNarrowed,
                            format!("{name} no longer accepts one of its shapes"),
                        ),
                        Side::Output => self.push(
                            Rule::OutputNarrowed,
                            format!("{name} no longer takes one of its shapes"),
                        ),
                    }
                }
                for _ in new_ones {
                    match self.side {
                        Side::Input => self.push(
                            Rule::InputTypeWidened,
                            format!("{name} accepts one more shape"),
                        ),
                        Side::Output => self.push(
                            Rule::OutputTypeChanged,
                            format!("{name} may take a shape it did not"),
                        ),
                    }
                }
            }
            (None, None) => {}
            _ => self.push(
                Rule::SchemaKeywordChanged,
                format!("the alternatives of {name} changed"),
            ),
        }
    }

    fn docs(&mut self, path: &str, old: &Map<String, Value>, new: &Map<String, Value>) {
        for keyword in DOCS {
            let (was, now) = (old.get(*keyword), new.get(*keyword));
            if was == now {
                continue;
            }
            if *keyword == "description"
                && self.side == Side::Output
                && self.covered.contains(Aspect::Description, path)
            {
                continue;
            }
            let name = self.name(path);
            let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_owned);
            let reason = match (*keyword, text(was), text(now)) {
                ("description" | "title", Some(was), Some(now)) => {
                    format!(
                        "{keyword} of {name} reworded: {} → {}",
                        quote(&was),
                        quote(&now)
                    )
                }
                _ => format!("`{keyword}` of {name} changed"),
            };
            self.push(Rule::DescriptionChanged, reason);
        }
    }

    fn constraints(&mut self, path: &str, old: &Map<String, Value>, new: &Map<String, Value>) {
        let name = self.name(path);
        let shown = |value: Option<&Value>| value.map_or_else(|| "none".into(), Value::to_string);
        for keyword in LOWER_BOUNDS.iter().chain(UPPER_BOUNDS).chain(CONSTRAINTS) {
            let was = old
                .get(*keyword)
                .filter(|value| **value != Value::Bool(false));
            let now = new
                .get(*keyword)
                .filter(|value| **value != Value::Bool(false));
            if was == now {
                continue;
            }
            let reason = format!(
                "`{keyword}` of {name} is {} (was {})",
                shown(now),
                shown(was)
            );
            if self.side == Side::Output {
                if *keyword == "maxItems" && self.covered.contains(Aspect::MaxItems, path) {
                    continue;
                }
                self.push(Rule::SchemaKeywordChanged, reason);
                continue;
            }
            let number = |value: Option<&Value>| value.and_then(Value::as_f64);
            let tighter = match (was, now) {
                (None, Some(_)) => true,
                (Some(_), None) => false,
                _ if LOWER_BOUNDS.contains(keyword) => number(now) > number(was),
                _ if UPPER_BOUNDS.contains(keyword) => number(now) < number(was),
                _ if *keyword == "format" => {
                    let range = |value: Option<&Value>| {
                        value.and_then(Value::as_str).and_then(integer_range)
                    };
                    match (range(was), range(now)) {
                        (Some((was_min, was_max)), Some((now_min, now_max))) => {
                            now_min > was_min || now_max < was_max
                        }
                        _ => true,
                    }
                }
                // Another pattern, say: what it refuses cannot be told.
                _ => true,
            };
            let rule = if tighter {
                Rule::InputConstraintTightened
            } else {
                Rule::InputConstraintLoosened
            };
            self.push(rule, reason);
        }
    }

    fn others(&mut self, path: &str, old: &Map<String, Value>, new: &Map<String, Value>) {
        let known = |keyword: &str| {
            STRUCTURE.contains(&keyword)
                || DOCS.contains(&keyword)
                || LOWER_BOUNDS.contains(&keyword)
                || UPPER_BOUNDS.contains(&keyword)
                || CONSTRAINTS.contains(&keyword)
        };
        let keywords: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
        for keyword in keywords {
            if known(keyword) || old.get(keyword) == new.get(keyword) {
                continue;
            }
            let name = self.name(path);
            self.push(
                Rule::SchemaKeywordChanged,
                format!("`{keyword}` of {name} changed"),
            );
        }
    }
}

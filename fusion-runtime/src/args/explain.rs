//! Explain why a JSON value does not satisfy a JSON Schema, in terms an AI agent can act on.
//!
//! Scope: the draft 2020-12 subset that `schemars` 1.x emits for ordinary Rust types: `type`
//! (a name or a list; `integer` is any number without a fractional part, so `3.0` passes
//! although serde_json rejects it for integer fields), `properties`, `required`,
//! `additionalProperties`, `enum`, `const`, `items`, `prefixItems`, `minItems`/`maxItems`,
//! `uniqueItems`, `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum`, the ranges of the
//! `int*`/`uint*` formats where no bound is stated, `minLength`/`maxLength` (in chars),
//! `anyOf`/`oneOf`/`allOf`, `$ref` to pointers into the root schema (`#`, `#/$defs/..`,
//! `#/definitions/..`) and boolean schemas.
//!
//! Limits: `pattern`, `patternProperties` (whose presence turns off the unknown-field check),
//! `propertyNames`, `dependent*`, `if`/`then`/`else`, `not`, `multipleOf`, `unevaluated*`,
//! `contains`, `min`/`maxProperties`, string formats, `$id`/`$anchor`, remote and
//! percent-encoded references are ignored: problems there go unreported, none is invented.
//! Malformed schema parts are ignored too. Reference cycles, deep nesting and `anyOf`
//! blow-ups are cut off by fixed budgets, past which values are accepted. Properties come in
//! the schema map's order: alphabetical, unless serde_json's `preserve_order` is on. Checking
//! a valid instance allocates nothing (except to sort keys under `preserve_order`).

use std::cmp::Ordering;
use std::fmt::Write as _;
use std::io;

use serde_json::{Map, Number, Value};

use super::withheld::Withheld;

/// One way in which an argument value differs from what the schema asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Issue {
    /// Where: "" for the root, "customer_id", "items[2].qty", "meta.tags[0]".
    pub path: String,
    /// What is wrong, as a short lowercase sentence: "missing required field",
    /// "unknown field", "wrong type", "not one of the allowed values", "too small", ...
    pub problem: String,
    /// What the schema expects, for an AI agent: "string", "integer >= 0",
    /// "one of \"open\", \"paid\", \"voided\"", "array of string", "object with fields id, total", ...
    pub expected: String,
    /// What was sent, rendered as compact JSON and cut to at most 80 chars with "…";
    /// None when the field was absent.
    pub sent: Option<String>,
}

type Obj = Map<String, Value>;
const MAX_DEPTH: usize = 256; // nested checks, through the instance and through references
const MAX_HOPS: u8 = 8; // `$ref`/`*Of` indirections at one place in the instance
const MAX_STEPS: u32 = 1_000_000; // schema nodes visited in one call
const DESC_DEPTH: u8 = 8; // nesting of a description
const LIST_MAX: usize = 12; // fields or values listed in a description
const SENT_CHARS: usize = 80;
const TYPES: [&str; 7] = [
    "null", "boolean", "string", "array", "object", "number", "integer",
];
const MISSING: &str = "missing required field";

/// Every issue found (not just the first), in a stable order (document-order of the
/// schema's properties, then unknown fields sorted by name), at most `max_issues`.
/// No value under a top-level argument that `withheld` hides is rendered.
pub(crate) fn explain(
    schema: &Value,
    instance: &Value,
    max_issues: usize,
    withheld: &Withheld,
) -> Vec<Issue> {
    let mut out = Vec::new();
    if max_issues > 0 {
        let (max, probing, steps) = (max_issues, false, MAX_STEPS);
        let mut cx = Cx {
            root: schema,
            out: &mut out,
            max,
            probing,
            steps,
            withheld,
        };
        let _ = cx.check(schema, instance, &ROOT);
    }
    out
}

/// The human/agent description of what a (sub)schema expects, the same text used in
/// `Issue::expected` (e.g. for documenting a field): "integer >= 0", "string or null", ...
pub(crate) fn describe(schema: &Value) -> String {
    describe_in(schema, schema)
}

/// `Invalid` ends a probe at its first issue; `Done` ends the whole run.
enum Stop {
    Invalid,
    Done,
}
type Flow = Result<(), Stop>;

/// A place in the instance (as a chain up to the root) and the budgets left there.
#[derive(Clone, Copy)]
struct At<'p> {
    up: Option<(&'p At<'p>, Step<'p>)>,
    depth: usize,
    hops: u8,
}

#[derive(Clone, Copy)]
enum Step<'p> {
    Key(&'p str),
    Index(usize),
}

const ROOT: At<'static> = At {
    up: None,
    depth: 0,
    hops: MAX_HOPS,
};

impl<'p> At<'p> {
    fn down(&'p self, step: Step<'p>) -> At<'p> {
        At {
            up: Some((self, step)),
            depth: self.depth + 1,
            hops: MAX_HOPS,
        }
    }

    fn hop(&self) -> At<'p> {
        At {
            depth: self.depth + 1,
            hops: self.hops.saturating_sub(1),
            ..*self
        }
    }

    /// The top-level argument this place is in, `None` at the root.
    fn top(&self) -> Option<&'p str> {
        let mut here = self;
        let mut top = None;
        while let Some((up, step)) = here.up {
            top = Some(step);
            here = up;
        }
        match top? {
            Step::Key(key) => Some(key),
            Step::Index(_) => None,
        }
    }

    fn render(&self, out: &mut String) {
        let Some((up, step)) = self.up else { return };
        up.render(out);
        let plain = |k: &str| !k.is_empty() && k.chars().all(|c| c.is_alphanumeric() || c == '_');
        let _ = match step {
            Step::Index(i) => write!(out, "[{i}]"),
            Step::Key(k) if plain(k) && up.up.is_none() => write!(out, "{k}"),
            Step::Key(k) if plain(k) => write!(out, ".{k}"),
            Step::Key(k) => write!(out, "[{}]", Value::from(k)),
        };
    }
}

struct Cx<'a> {
    root: &'a Value,
    out: &'a mut Vec<Issue>,
    max: usize,
    probing: bool,
    steps: u32,
    withheld: &'a Withheld,
}

impl Cx<'_> {
    fn report<F>(&mut self, at: &At<'_>, problem: &str, sent: Option<&Value>, expected: F) -> Flow
    where
        F: FnOnce(&Value) -> String,
    {
        if self.probing {
            return Err(Stop::Invalid);
        }
        let mut path = String::new();
        at.render(&mut path);
        let sent = sent.map(|sent| self.withheld.sent(at.top(), || render(sent)));
        let (problem, expected) = (problem.to_owned(), expected(self.root));
        self.out.push(Issue {
            path,
            problem,
            expected,
            sent,
        });
        if self.out.len() < self.max {
            Ok(())
        } else {
            Err(Stop::Done)
        }
    }

    /// Whether `inst` satisfies `schema`, recording nothing.
    fn probe(&mut self, schema: &Value, inst: &Value, at: &At<'_>) -> Result<bool, Stop> {
        let was = std::mem::replace(&mut self.probing, true);
        let result = self.check(schema, inst, at);
        self.probing = was;
        match result {
            Ok(()) => Ok(true),
            Err(Stop::Invalid) => Ok(false),
            Err(Stop::Done) => Err(Stop::Done),
        }
    }

    fn check(&mut self, schema: &Value, inst: &Value, at: &At<'_>) -> Flow {
        self.steps = self.steps.checked_sub(1).ok_or(Stop::Done)?;
        let s = match schema {
            Value::Object(s) if at.depth <= MAX_DEPTH && at.hops > 0 => s,
            Value::Bool(false) => return self.report(at, "not allowed here", Some(inst), nothing),
            _ => return Ok(()),
        };
        // After one of these problems, the other keywords here would only add noise.
        let not_in = |e: &Vec<Value>| !e.iter().any(|a| json_eq(a, inst));
        let problem = type_problem(s.get("type"), inst, false)
            .or_else(|| {
                s.get("const")
                    .filter(|c| !json_eq(c, inst))
                    .map(|_| "not the allowed value")
            })
            .or_else(|| {
                s.get("enum")?
                    .as_array()
                    .filter(|e| not_in(e))
                    .map(|_| "not one of the allowed values")
            })
            .or_else(|| match inst {
                Value::Number(n) => number_problem(s, n),
                Value::String(text) => length_problem(s, text),
                _ => None,
            });
        if let Some(problem) = problem {
            return self.report(at, problem, Some(inst), |root| describe_in(root, schema));
        }
        match inst {
            Value::Array(items) => self.check_array(schema, s, inst, items, at)?,
            Value::Object(obj) => self.check_object(s, obj, at)?,
            _ => {}
        }
        let next = at.hop();
        if let Some(target) = s
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| resolve(self.root, r))
        {
            self.check(target, inst, &next)?;
        }
        for branch in list(s, "allOf") {
            self.check(branch, inst, &next)?;
        }
        self.check_choice(list(s, "anyOf"), false, inst, &next)?;
        self.check_choice(list(s, "oneOf"), true, inst, &next)
    }

    fn check_array(
        &mut self,
        schema: &Value,
        s: &Obj,
        inst: &Value,
        items: &[Value],
        at: &At<'_>,
    ) -> Flow {
        let len = items.len() as u64;
        let count = if uint(s, "minItems").is_some_and(|m| len < m) {
            Some("too few items")
        } else {
            uint(s, "maxItems")
                .filter(|m| len > *m)
                .map(|_| "too many items")
        };
        if let Some(problem) = count {
            self.report(at, problem, Some(inst), |root| describe_in(root, schema))?;
        }
        let (prefix, rest) = (list(s, "prefixItems"), s.get("items"));
        for (i, item) in items.iter().enumerate() {
            if let Some(sub) = prefix.get(i).or(rest) {
                self.check(sub, item, &at.down(Step::Index(i)))?;
            }
        }
        if s.get("uniqueItems") == Some(&Value::Bool(true)) {
            for (j, item) in items.iter().enumerate() {
                if let Some(i) = items.iter().take(j).position(|x| json_eq(x, item)) {
                    let expected = move |_: &Value| format!("unique items (this repeats item {i})");
                    self.report(
                        &at.down(Step::Index(j)),
                        "duplicate item",
                        Some(item),
                        expected,
                    )?;
                }
            }
        }
        Ok(())
    }

    fn check_object(&mut self, s: &Obj, obj: &Obj, at: &At<'_>) -> Flow {
        let (props, required) = (
            s.get("properties").and_then(Value::as_object),
            list(s, "required"),
        );
        for (key, sub) in props.into_iter().flatten() {
            let here = at.down(Step::Key(key));
            match obj.get(key) {
                Some(v) => self.check(sub, v, &here)?,
                None if listed(required, key) => {
                    self.report(&here, MISSING, None, |r| describe_in(r, sub))?
                }
                None => {}
            }
        }
        let extra = s.get("additionalProperties");
        let declared = |k: &str| props.is_some_and(|p| p.contains_key(k));
        for key in required.iter().filter_map(Value::as_str) {
            if !obj.contains_key(key) && !declared(key) {
                let expected =
                    |r: &Value| extra.map_or_else(|| "any value".into(), |a| describe_in(r, a));
                self.report(&at.down(Step::Key(key)), MISSING, None, expected)?;
            }
        }
        let Some(extra) = extra.filter(|a| **a != Value::Bool(true)) else {
            return Ok(());
        };
        if s.get("patternProperties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty())
        {
            return Ok(());
        }
        // Extra fields go by name; sort only when the map does not already iterate sorted.
        let (mut direct, mut by_name);
        let entries: &mut dyn Iterator<Item = (&String, &Value)> =
            if self.probing || obj.keys().zip(obj.keys().skip(1)).all(|(a, b)| a <= b) {
                direct = obj.iter();
                &mut direct
            } else {
                let mut sorted: Vec<_> = obj.iter().collect();
                sorted.sort_by(|a, b| a.0.cmp(b.0));
                by_name = sorted.into_iter();
                &mut by_name
            };
        for (key, v) in entries.filter(|(k, _)| !declared(k)) {
            let here = at.down(Step::Key(key));
            match extra {
                Value::Bool(false) => {
                    self.report(&here, "unknown field", Some(v), |_| known(props))?
                }
                _ => self.check(extra, v, &here)?,
            }
        }
        Ok(())
    }

    fn check_choice(
        &mut self,
        branches: &[Value],
        one_of: bool,
        inst: &Value,
        at: &At<'_>,
    ) -> Flow {
        if branches.is_empty() {
            return Ok(());
        }
        let mut matched = 0;
        for branch in branches {
            if self.probe(branch, inst, at)? {
                matched += 1;
                if !one_of || matched > 1 {
                    break;
                }
            }
        }
        let joined = |root: &Value| alternatives(root, branches, 0, " or ");
        match matched {
            0 if self.probing => return Err(Stop::Invalid),
            0 => {}
            1 => return Ok(()),
            _ if one_of => {
                return self.report(at, "matches more than one alternative", Some(inst), joined);
            }
            _ => return Ok(()),
        }
        let root = self.root;
        if let Some(branch) = close_branch(root, branches, inst) {
            return self.check(branch, inst, at);
        }
        if let Some((key, v)) = tag_mismatch(root, branches, inst) {
            let expected = |root: &Value| {
                let tags = branches
                    .iter()
                    .filter_map(|b| tag_of(root, props_of(root, b)?.get(key)?));
                let mut e = String::from("one of ");
                write_list(&mut e, tags, write_json);
                e
            };
            let problem = "not one of the allowed values";
            return self.report(&at.down(Step::Key(key)), problem, Some(v), expected);
        }
        let fitting = || {
            branches
                .iter()
                .map(|b| shallow(root, b))
                .filter(|b| fits(*b, inst))
        };
        let pinned =
            |b: Option<&Obj>| b.is_some_and(|b| b.contains_key("const") || b.contains_key("enum"));
        let problem = match fitting().next() {
            None => "wrong type",
            Some(_) if fitting().all(pinned) => "not one of the allowed values",
            Some(_) => "matches none of the alternatives",
        };
        self.report(at, problem, Some(inst), joined)
    }
}

fn nothing(_: &Value) -> String {
    "nothing".into()
}

fn known(props: Option<&Obj>) -> String {
    match props.filter(|p| !p.is_empty()) {
        Some(p) => {
            let mut e = String::from("no such field; known fields: ");
            write_list(&mut e, p.keys(), |o, k| o.push_str(k));
            e
        }
        None => "no such field; this object takes no fields".into(),
    }
}

fn list<'v>(s: &'v Obj, key: &str) -> &'v [Value] {
    s.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn uint(s: &Obj, key: &str) -> Option<u64> {
    s.get(key).and_then(Value::as_u64)
}

fn listed(required: &[Value], key: &str) -> bool {
    required.iter().any(|r| r.as_str() == Some(key))
}

pub(super) fn resolve<'v>(root: &'v Value, reference: &str) -> Option<&'v Value> {
    match reference.strip_prefix('#')? {
        "" => Some(root),
        pointer => root.pointer(pointer),
    }
}

/// The object schema that `schema` is, or refers to (through a short chain of `$ref`s).
fn shallow<'v>(root: &'v Value, mut schema: &'v Value) -> Option<&'v Obj> {
    for _ in 0..MAX_HOPS {
        match schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| resolve(root, r))
        {
            Some(target) => schema = target,
            None => break,
        }
    }
    schema.as_object()
}

fn props_of<'v>(root: &'v Value, schema: &'v Value) -> Option<&'v Obj> {
    shallow(root, schema)?.get("properties")?.as_object()
}

/// The one value a property schema pins (`{"const": "circle"}` or `{"enum": ["circle"]}`).
fn tag_of<'v>(root: &'v Value, prop: &'v Value) -> Option<&'v Value> {
    let p = shallow(root, prop)?;
    p.get("const")
        .or_else(|| match p.get("enum")?.as_array()?.as_slice() {
            [one] => Some(one),
            _ => None,
        })
}

fn fits(branch: Option<&Obj>, inst: &Value) -> bool {
    branch.is_some_and(|b| type_problem(b.get("type"), inst, true).is_none())
}

/// The branch worth explaining in detail: the only one of the instance's type, else the only
/// one whose tag properties match and that shares the most property names with the instance.
fn close_branch<'v>(root: &'v Value, branches: &'v [Value], inst: &Value) -> Option<&'v Value> {
    let mut fitting = branches.iter().filter(|b| fits(shallow(root, b), inst));
    let (first, second) = (fitting.next()?, fitting.next());
    let Some(second) = second else {
        return Some(first);
    };
    let Value::Object(obj) = inst else {
        return None;
    };
    let (mut best, mut tie) = (None, false);
    for branch in [first, second].into_iter().chain(fitting) {
        let (mut tagged, mut overlap) = (false, 0);
        for (k, v) in obj {
            let Some(p) = props_of(root, branch).and_then(|p| p.get(k)) else {
                continue;
            };
            overlap += 1;
            match tag_of(root, p) {
                Some(tag) if json_eq(tag, v) => tagged = true,
                Some(_) => overlap = -1,
                None => {}
            }
            if overlap < 0 {
                break;
            }
        }
        match best {
            _ if overlap < 0 => {}
            Some((score, _)) if score > (tagged, overlap) => {}
            Some((score, _)) if score == (tagged, overlap) => tie = true,
            _ => (best, tie) = (Some(((tagged, overlap), branch)), false),
        }
    }
    best.filter(|_| !tie).map(|(_, b)| b)
}

/// A field that every branch pins to a value, set by the instance to none of them.
fn tag_mismatch<'v>(
    root: &Value,
    branches: &[Value],
    inst: &'v Value,
) -> Option<(&'v str, &'v Value)> {
    let pinned_elsewhere = |k: &str, v: &Value| {
        let tag = |b| props_of(root, b).and_then(|p| tag_of(root, p.get(k)?));
        branches
            .iter()
            .all(|b| tag(b).is_some_and(|t| !json_eq(t, v)))
    };
    let (k, v) = inst
        .as_object()?
        .iter()
        .find(|(k, v)| pinned_elsewhere(k, v))?;
    Some((k, v))
}

fn type_names(types: Option<&Value>) -> impl Iterator<Item = &str> {
    let names = match types {
        Some(Value::Array(a)) => a.as_slice(),
        Some(t) => std::slice::from_ref(t),
        None => &[],
    };
    names
        .iter()
        .filter_map(Value::as_str)
        .filter(|n| TYPES.contains(n))
}

/// What is wrong with the type of `inst`, if anything; `loose` lets any number be an integer.
fn type_problem(types: Option<&Value>, inst: &Value, loose: bool) -> Option<&'static str> {
    let (mut any, mut integer) = (false, false);
    for name in type_names(types) {
        any = true;
        integer |= name == "integer";
        let ok = match name {
            "null" => inst.is_null(),
            "boolean" => inst.is_boolean(),
            "string" => inst.is_string(),
            "array" => inst.is_array(),
            "object" => inst.is_object(),
            "number" => inst.is_number(),
            _ => inst.is_number() && (loose || is_integer(inst)),
        };
        if ok {
            return None;
        }
    }
    match (any, integer && inst.is_number()) {
        (false, _) => None,
        (true, true) => Some("not a whole number"),
        (true, false) => Some("wrong type"),
    }
}

fn is_integer(v: &Value) -> bool {
    let whole = |f: f64| f.is_finite() && f.fract() == 0.0;
    v.as_number()
        .is_some_and(|n| n.is_i64() || n.is_u64() || n.as_f64().is_some_and(whole))
}

/// Integers compare exactly; anything with a fraction goes through f64.
fn cmp_num(a: &Number, b: &Number) -> Option<Ordering> {
    let int = |n: &Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    match (int(a), int(b)) {
        (Some(x), Some(y)) => Some(x.cmp(&y)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

fn format_range(s: &Obj) -> Option<(Number, Number)> {
    let (lo, hi): (i64, u64) = match s.get("format")?.as_str()? {
        "int8" => (i8::MIN.into(), i8::MAX as u64),
        "int16" => (i16::MIN.into(), i16::MAX as u64),
        "int32" => (i32::MIN.into(), i32::MAX as u64),
        "int64" | "int" => (i64::MIN, i64::MAX as u64),
        "uint8" => (0, u8::MAX.into()),
        "uint16" => (0, u16::MAX.into()),
        "uint32" => (0, u32::MAX.into()),
        "uint64" | "uint" => (0, u64::MAX),
        _ => return None,
    };
    Some((lo.into(), hi.into()))
}

/// The stated lower (upper) bound, exclusive first, else the one implied by an integer
/// format: (value, inclusive, implied).
fn bound(s: &Obj, lower: bool) -> Option<(Number, bool, bool)> {
    let (excl, incl) = if lower {
        ("exclusiveMinimum", "minimum")
    } else {
        ("exclusiveMaximum", "maximum")
    };
    let stated = |key: &str| s.get(key)?.as_number().cloned();
    let implied = || format_range(s).map(|(lo, hi)| (if lower { lo } else { hi }, true, true));
    (stated(excl).map(|n| (n, false, false)))
        .or_else(|| stated(incl).map(|n| (n, true, false)))
        .or_else(implied)
}

fn number_problem(s: &Obj, n: &Number) -> Option<&'static str> {
    let beyond = |lower: bool, wrong: Ordering| {
        bound(s, lower).is_some_and(|(b, inclusive, _)| {
            cmp_num(n, &b).is_some_and(|o| o == wrong || (o == Ordering::Equal && !inclusive))
        })
    };
    match (
        beyond(true, Ordering::Less),
        beyond(false, Ordering::Greater),
    ) {
        (true, _) => Some("too small"),
        (_, true) => Some("too large"),
        _ => None,
    }
}

fn length_problem(s: &Obj, text: &str) -> Option<&'static str> {
    let (min, max) = (uint(s, "minLength"), uint(s, "maxLength"));
    if min.is_none() && max.is_none() {
        return None;
    }
    let n = text.chars().count() as u64;
    match (min.is_some_and(|m| n < m), max.is_some_and(|m| n > m)) {
        (true, _) => Some("too short"),
        (_, true) => Some("too long"),
        _ => None,
    }
}

/// JSON equality, with numbers compared by value (`1 == 1.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => cmp_num(x, y) == Some(Ordering::Equal),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Compact JSON cut to `SENT_CHARS` chars, without serializing more than that.
pub(crate) fn render(v: &Value) -> String {
    struct Capped(Vec<u8>);
    impl io::Write for Capped {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            let n = ((SENT_CHARS + 1) * 4)
                .saturating_sub(self.0.len())
                .min(b.len());
            if n == 0 && !b.is_empty() {
                return Err(io::ErrorKind::WriteZero.into());
            }
            self.0.extend_from_slice(b.get(..n).unwrap_or_default());
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut w = Capped(Vec::new());
    let _ = serde_json::to_writer(&mut w, v);
    let valid = std::str::from_utf8(&w.0).map_or_else(|e| e.valid_up_to(), str::len);
    let text = std::str::from_utf8(w.0.get(..valid).unwrap_or_default()).unwrap_or_default();
    if text.chars().nth(SENT_CHARS).is_none() {
        return text.to_owned();
    }
    text.chars().take(SENT_CHARS - 1).chain(['…']).collect()
}

fn write_json(out: &mut String, v: &Value) {
    out.push_str(&render(v));
}

fn write_list<T>(
    out: &mut String,
    items: impl Iterator<Item = T>,
    mut each: impl FnMut(&mut String, T),
) {
    for (i, item) in items.enumerate() {
        if i == LIST_MAX {
            return out.push_str(", …");
        }
        if i > 0 {
            out.push_str(", ");
        }
        each(out, item);
    }
}

fn describe_in(root: &Value, schema: &Value) -> String {
    let mut out = String::new();
    desc(root, schema, 0, &mut out);
    out
}

fn alternatives(root: &Value, branches: &[Value], depth: u8, join: &str) -> String {
    let mut seen: Vec<String> = Vec::new();
    for branch in branches {
        let mut d = String::new();
        desc(root, branch, depth, &mut d);
        if !seen.contains(&d) {
            seen.push(d);
        }
    }
    seen.join(join)
}

/// Describes a part of a bigger description, in parentheses if it is a choice.
fn desc_part(root: &Value, schema: &Value, depth: u8, out: &mut String) {
    let mut d = String::new();
    desc(root, schema, depth + 1, &mut d);
    let _ = if d.contains(" or ") {
        write!(out, "({d})")
    } else {
        write!(out, "{d}")
    };
}

fn desc(root: &Value, schema: &Value, depth: u8, out: &mut String) {
    let s = match schema {
        Value::Object(s) if depth <= DESC_DEPTH => s,
        Value::Object(_) => return out.push('…'),
        Value::Bool(false) => return out.push_str("nothing"),
        _ => return out.push_str("any value"),
    };
    if let Some(c) = s.get("const") {
        return write_json(out, c);
    }
    if let Some(values) = s.get("enum").and_then(Value::as_array) {
        if let [one] = values.as_slice() {
            return write_json(out, one);
        }
        out.push_str("one of ");
        return write_list(out, values.iter(), write_json);
    }
    for (i, name) in type_names(s.get("type")).enumerate() {
        out.push_str(if i > 0 { " or " } else { "" });
        desc_type(root, s, name, depth, out);
    }
    if type_names(s.get("type")).next().is_some() {
        return;
    }
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        return match resolve(root, r) {
            Some(target) => desc(root, target, depth + 1, out),
            None => out.push_str(r.rsplit('/').next().unwrap_or(r)),
        };
    }
    for (key, join) in [("anyOf", " or "), ("oneOf", " or "), ("allOf", " and ")] {
        if !list(s, key).is_empty() {
            return out.push_str(&alternatives(root, list(s, key), depth + 1, join));
        }
    }
    match () {
        _ if s.contains_key("properties") => desc_type(root, s, "object", depth, out),
        _ if s.contains_key("items") || s.contains_key("prefixItems") => {
            desc_type(root, s, "array", depth, out)
        }
        _ => out.push_str("any value"),
    }
}

fn count_phrase(out: &mut String, min: Option<u64>, max: Option<u64>, unit: &str) {
    let s = |n: u64| if n == 1 { "" } else { "s" };
    let _ = match (min, max) {
        (Some(a), Some(b)) if a == b => write!(out, " exactly {a} {unit}{}", s(a)),
        (Some(a), Some(b)) => write!(out, " {a} to {b} {unit}s"),
        (Some(a), None) => write!(out, " at least {a} {unit}{}", s(a)),
        (None, Some(b)) => write!(out, " at most {b} {unit}{}", s(b)),
        (None, None) => Ok(()),
    };
}

fn desc_type(root: &Value, s: &Obj, name: &str, depth: u8, out: &mut String) {
    out.push_str(name);
    match name {
        "string" => {
            let (min, max) = (uint(s, "minLength"), uint(s, "maxLength"));
            if min.is_some() || max.is_some() {
                out.push_str(" of");
                count_phrase(out, min, max, "character");
            }
            if let Some(format) = s.get("format").and_then(Value::as_str) {
                let _ = write!(out, " ({format})");
            }
        }
        "integer" | "number" => {
            let op = |lower: bool, (n, inclusive, _)| match (lower, inclusive) {
                (true, true) => (">=", n),
                (true, false) => (">", n),
                (false, true) => ("<=", n),
                (false, false) => ("<", n),
            };
            // Stated bounds in numbers; a format's implied ones by its name ("uint32").
            let (lo, hi) = (bound(s, true), bound(s, false));
            let implied = lo.as_ref().is_some_and(|b| b.2) || hi.as_ref().is_some_and(|b| b.2);
            let lo = lo.filter(|b| !b.2).map(|b| op(true, b));
            let hi = hi.filter(|b| !b.2).map(|b| op(false, b));
            let _ = match (lo, hi) {
                (Some((">=", l)), Some(("<=", h))) => write!(out, " from {l} to {h}"),
                (Some((a, l)), Some((b, h))) => write!(out, " {a} {l} and {b} {h}"),
                (Some((a, n)), None) | (None, Some((a, n))) => write!(out, " {a} {n}"),
                (None, None) => Ok(()),
            };
            if let Some(format) = s.get("format").and_then(Value::as_str).filter(|_| implied) {
                let _ = write!(out, " ({format})");
            }
        }
        "array" => {
            let (prefix, rest) = (list(s, "prefixItems"), s.get("items"));
            if !prefix.is_empty() {
                out.push_str(" [");
                write_list(out, prefix.iter(), |o, p| desc_part(root, p, depth, o));
                out.push(']');
            } else if let Some(items) = rest.filter(|i| **i != Value::Bool(true)) {
                out.push_str(" of ");
                desc_part(root, items, depth, out);
            }
            let (min, max, len) = (
                uint(s, "minItems"),
                uint(s, "maxItems"),
                prefix.len() as u64,
            );
            if (min.is_some() || max.is_some()) && (min != Some(len) || max != Some(len)) {
                out.push_str(" with");
                count_phrase(out, min, max, "item");
            }
            if s.get("uniqueItems") == Some(&Value::Bool(true)) {
                out.push_str(", no duplicates");
            }
        }
        "object" => match (
            s.get("properties").and_then(Value::as_object),
            s.get("additionalProperties"),
        ) {
            (Some(props), _) if !props.is_empty() => {
                out.push_str(" with fields ");
                write_list(out, props.iter(), |o, (k, p)| {
                    o.push_str(k);
                    if !listed(list(s, "required"), k) {
                        o.push('?');
                    }
                    if let Some(tag) = tag_of(root, p) {
                        o.push('=');
                        write_json(o, tag);
                    }
                });
            }
            (_, Some(Value::Bool(false))) => out.push_str(" with no fields"),
            (_, Some(extra @ Value::Object(_))) => {
                out.push_str(" whose values are ");
                desc_part(root, extra, depth, out);
            }
            _ => {}
        },
        _ => {}
    }
}

#[cfg(test)]
#[allow(dead_code)] // the test types are only read through their schemas and serde
mod tests {
    use super::*;
    use schemars::{JsonSchema, schema_for};
    use serde::Deserialize;
    use serde_json::json;
    use std::collections::{BTreeSet, HashMap};

    /// Explains with nothing withheld (the schemas below hold no hidden value).
    fn explain(schema: &Value, instance: &Value, max_issues: usize) -> Vec<Issue> {
        super::explain(schema, instance, max_issues, &Withheld::default())
    }

    #[test]
    fn withheld_values_are_never_rendered() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 3},
                "key": {"type": "string", "maxLength": 3, "writeOnly": true},
                "holder": {"type": "object", "properties": {"pin": {"enum": ["1"], "writeOnly": true}}}
            },
            "additionalProperties": false
        });
        let withheld = Withheld::of(&schema, []);
        let sent = json!({"name": "long", "key": "SECRET", "holder": {"pin": "SECRET2"}});
        let got = super::explain(&schema, &sent, 10, &withheld);
        let rows: Vec<_> = got
            .iter()
            .map(|i| (&*i.path, &*i.problem, i.sent.as_deref()))
            .collect();
        assert_eq!(
            rows,
            [
                (
                    "holder.pin",
                    "not one of the allowed values",
                    Some("[hidden]")
                ),
                ("key", "too long", Some("[hidden]")),
                ("name", "too long", Some(r#""long""#)),
            ]
        );
    }

    #[derive(JsonSchema, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Status {
        Open,
        Paid,
        Voided,
    }

    #[derive(JsonSchema, Deserialize)]
    struct LineItem {
        sku: String,
        qty: u32,
        price: f64,
    }

    #[derive(JsonSchema, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Address {
        street: String,
        zip: String,
    }

    #[derive(JsonSchema, Deserialize)]
    struct Invoice {
        customer_id: String,
        status: Status,
        items: Vec<LineItem>,
        note: Option<String>,
        ship_to: Option<Address>,
        discount: Option<u8>,
        tags: BTreeSet<String>,
        meta: HashMap<String, i64>,
        pair: (u8, char),
    }

    #[derive(JsonSchema, Deserialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Shape {
        Circle { radius: f64 },
        Rect { w: u32, h: u32 },
        Empty,
    }

    #[derive(JsonSchema, Deserialize)]
    struct Node {
        name: String,
        children: Vec<Node>,
    }

    type Row<'a> = (&'a str, &'a str, &'a str, Option<&'a str>);

    /// Checks the issues for `inst` against `T`'s schema, and that serde agrees on validity.
    #[track_caller]
    fn case<T: JsonSchema + for<'de> Deserialize<'de>>(inst: Value, want: &[Row<'_>]) {
        let got = explain(&schema_for!(T).to_value(), &inst, 50);
        let as_rows: Vec<Row<'_>> = got
            .iter()
            .map(|i| (&*i.path, &*i.problem, &*i.expected, i.sent.as_deref()))
            .collect();
        assert_eq!(as_rows, want);
        assert_eq!(got.is_empty(), serde_json::from_value::<T>(inst).is_ok());
    }

    /// A valid invoice with the value at `pointer` replaced.
    fn invoice(pointer: &str, v: Value) -> Value {
        let mut base = json!({"customer_id": "c1", "status": "open", "note": null, "ship_to": null,
            "items": [{"sku": "a", "qty": 1, "price": 2.5}], "tags": ["x"], "meta": {"k": -3},
            "pair": [7, "é"], "discount": 10});
        if let Some(slot) = base.pointer_mut(pointer) {
            *slot = v;
        }
        base
    }

    const U32: &str = "integer >= 0 (uint32)";
    const STATUS: &str = r#"one of "open", "paid", "voided""#;
    const PAIR: &str = "array [integer from 0 to 255, string of exactly 1 character]";

    #[test]
    fn valid_instances_have_no_issues() {
        case::<Invoice>(invoice("/note", json!(null)), &[]);
        case::<Shape>(json!({"kind": "rect", "w": 1, "h": 2}), &[]);
        case::<Node>(
            json!({"name": "a", "children": [{"name": "b", "children": []}]}),
            &[],
        );
    }

    #[test]
    fn all_missing_required_fields_together() {
        case::<Invoice>(
            json!({"note": "hi"}),
            &[
                ("customer_id", MISSING, "string", None),
                (
                    "items",
                    MISSING,
                    "array of object with fields price, qty, sku",
                    None,
                ),
                (
                    "meta",
                    MISSING,
                    "object whose values are integer (int64)",
                    None,
                ),
                ("pair", MISSING, PAIR, None),
                ("status", MISSING, STATUS, None),
                ("tags", MISSING, "array of string, no duplicates", None),
            ],
        );
    }

    #[test]
    fn unknown_fields_by_name() {
        let known = "no such field; known fields: street, zip";
        let ship = json!({"street": "s", "zip": "1", "zipcode": "2", "apt": 3});
        case::<Invoice>(
            invoice("/ship_to", ship),
            &[
                ("ship_to.apt", "unknown field", known, Some("3")),
                ("ship_to.zipcode", "unknown field", known, Some(r#""2""#)),
            ],
        );
        let either = "object with fields street, zip or null";
        case::<Invoice>(
            invoice("/ship_to", json!(7)),
            &[("ship_to", "wrong type", either, Some("7"))],
        );
    }

    #[test]
    fn bad_values_deep_inside() {
        let items = json!([{"sku": "a", "qty": 1, "price": 1}, {"sku": "b", "qty": -1, "price": 1},
            {"sku": "c", "qty": "three", "price": 1}, {"sku": 4, "qty": 1.5}]);
        case::<Invoice>(
            invoice("/items", items),
            &[
                ("items[1].qty", "too small", U32, Some("-1")),
                ("items[2].qty", "wrong type", U32, Some(r#""three""#)),
                ("items[3].price", MISSING, "number", None),
                ("items[3].qty", "not a whole number", U32, Some("1.5")),
                ("items[3].sku", "wrong type", "string", Some("4")),
            ],
        );
        let big = invoice("/items/0/qty", json!(4_294_967_296_u64));
        case::<Invoice>(
            big,
            &[("items[0].qty", "too large", U32, Some("4294967296"))],
        );
        let byte = "integer from 0 to 255 or null";
        case::<Invoice>(
            invoice("/discount", json!(300)),
            &[("discount", "too large", byte, Some("300"))],
        );
        case::<Invoice>(
            invoice("/meta", json!({"a": 1, "b": 1e30, "c": "x"})),
            &[
                ("meta.b", "too large", "integer (int64)", Some("1e+30")),
                ("meta.c", "wrong type", "integer (int64)", Some(r#""x""#)),
            ],
        );
    }

    #[test]
    fn enums_tuples_and_strings() {
        let closed = invoice("/status", json!("closed"));
        case::<Invoice>(
            closed,
            &[(
                "status",
                "not one of the allowed values",
                STATUS,
                Some(r#""closed""#),
            )],
        );
        case::<Invoice>(
            invoice("/pair", json!([1])),
            &[("pair", "too few items", PAIR, Some("[1]"))],
        );
        let one = "string of exactly 1 character";
        case::<Invoice>(
            invoice("/pair", json!([1, "ab"])),
            &[("pair[1]", "too long", one, Some(r#""ab""#))],
        );
        // serde is laxer than the schema here: a set drops duplicates, and 3.0 is no integer
        // to serde_json but is one to JSON Schema.
        let schema = schema_for!(Invoice).to_value();
        let dup = explain(&schema, &invoice("/tags", json!(["a", "b", "a"])), 9);
        let expected = "unique items (this repeats item 0)";
        let want = Issue {
            path: "tags[2]".into(),
            problem: "duplicate item".into(),
            expected: expected.into(),
            sent: Some(r#""a""#.into()),
        };
        assert_eq!(dup, [want]);
        assert_eq!(
            explain(&schema, &invoice("/items/0/qty", json!(3.0)), 9),
            []
        );
    }

    #[test]
    fn tagged_enum_explains_the_close_branch() {
        let rect = [
            ("h", MISSING, U32, None),
            ("w", "too small", U32, Some("-2")),
        ];
        case::<Shape>(json!({"kind": "rect", "w": -2}), &rect);
        let circle = [
            ("kind", MISSING, r#""circle""#, None),
            ("radius", "wrong type", "number", Some(r#""big""#)),
        ];
        case::<Shape>(json!({"radius": "big"}), &circle);
        let kinds = r#"one of "circle", "rect", "empty""#;
        case::<Shape>(
            json!({"kind": "hexagon"}),
            &[(
                "kind",
                "not one of the allowed values",
                kinds,
                Some(r#""hexagon""#),
            )],
        );
        let all = r#"object with fields kind="circle", radius or object with fields h, kind="rect", w or object with fields kind="empty""#;
        case::<Shape>(
            json!({}),
            &[("", "matches none of the alternatives", all, Some("{}"))],
        );
        case::<Shape>(json!([1]), &[("", "wrong type", all, Some("[1]"))]);
    }

    #[test]
    fn recursive_type() {
        let tree = json!({"name": "a", "children": [{"name": "b", "children": [{"children": []}, {"name": 1, "children": []}]}]});
        let want = [
            ("children[0].children[0].name", MISSING, "string", None),
            (
                "children[0].children[1].name",
                "wrong type",
                "string",
                Some("1"),
            ),
        ];
        case::<Node>(tree, &want);
        case::<Node>(
            json!({"name": "a"}),
            &[(
                "children",
                MISSING,
                "array of object with fields children, name",
                None,
            )],
        );
    }

    #[test]
    fn max_issues_is_respected() {
        let schema = schema_for!(Invoice).to_value();
        assert_eq!(explain(&schema, &json!({}), 2).len(), 2);
        assert_eq!(explain(&schema, &json!({}), 0), []);
        assert_eq!(explain(&schema, &json!({}), 100).len(), 6);
    }

    #[test]
    fn descriptions_read_naturally() {
        let d = |s: schemars::Schema| describe(&s.to_value());
        assert_eq!(d(schema_for!(Option<String>)), "string or null");
        assert_eq!(d(schema_for!(Option<Status>)), format!("{STATUS} or null"));
        assert_eq!(
            d(schema_for!(Option<Address>)),
            "object with fields street, zip or null"
        );
        assert_eq!(
            d(schema_for!(Vec<Option<i8>>)),
            "array of (integer from -128 to 127 or null)"
        );
        assert_eq!(d(schema_for!(u64)), "integer >= 0 (uint64)");
        assert_eq!(d(schema_for!(i32)), "integer (int32)");
        let fields = "customer_id, discount?, items, meta, note?, pair, ship_to?, status, tags";
        assert_eq!(
            d(schema_for!(Invoice)),
            format!("object with fields {fields}")
        );
        assert_eq!(
            describe(&json!({"items": {"$ref": "#/$defs/Item"}})),
            "array of Item"
        );
        let unit = json!({"type": "number", "exclusiveMinimum": 0, "maximum": 1.5});
        assert_eq!(describe(&unit), "number > 0 and <= 1.5");
        let email = json!({"type": "string", "minLength": 2, "format": "email"});
        assert_eq!(describe(&email), "string of at least 2 characters (email)");
        assert_eq!(
            describe(&json!({"type": "object", "additionalProperties": false})),
            "object with no fields"
        );
        assert_eq!(describe(&json!(true)), "any value");
    }

    #[test]
    fn sent_is_cut_to_80_chars_and_odd_keys_are_quoted() {
        let got = explain(&json!({"type": "integer"}), &json!("é".repeat(200)), 5);
        let sent = got.first().and_then(|i| i.sent.clone()).unwrap_or_default();
        assert_eq!(sent.chars().count(), 80);
        assert!(sent.starts_with("\"éé") && sent.ends_with('…'));
        let got = explain(
            &json!({"properties": {"a.b": false}}),
            &json!({"a.b": 1}),
            5,
        );
        let path: Vec<_> = got.iter().map(|i| (&*i.path, &*i.problem)).collect();
        assert_eq!(path, [(r#"["a.b"]"#, "not allowed here")]);
    }

    #[test]
    fn malformed_schemas_never_panic() {
        let deep = (0..1000).fold(json!(1), |v, _| json!([v]));
        let schemas = [
            json!({"type": 5}),
            json!({"$ref": "#/nope"}),
            json!({"$ref": "#"}),
            json!({"$ref": "nope", "required": "x", "enum": 3, "items": 7, "minimum": "a"}),
            json!({"anyOf": [{"$ref": "#"}, {"$ref": "#"}], "oneOf": [], "type": ["x", 1]}),
            json!({"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"}),
            json!({"required": ["a", 5], "additionalProperties": {"$ref": "#"}, "maxLength": 1.5}),
            json!({"items": {"$ref": "#"}, "oneOf": [{"$ref": "#"}, true], "allOf": [{"$ref": "#"}]}),
            json!({"prefixItems": [false], "items": false, "uniqueItems": true, "properties": 5}),
            json!(null),
            json!(false),
            json!("string"),
        ];
        let instances = [
            json!(null),
            json!({"a": {"b": []}}),
            json!([1, 1, [2]]),
            json!("x"),
            json!(-1.5),
            deep,
        ];
        for schema in &schemas {
            let _ = describe(schema);
            for inst in &instances {
                let _ = explain(schema, inst, 10);
            }
        }
        assert_eq!(explain(&json!({"type": 5}), &json!(1), 10), []);
        assert_eq!(explain(&json!({"$ref": "#"}), &json!(1), 10), []);
        assert_eq!(describe(&json!({"$ref": "#"})), "…");
    }
}

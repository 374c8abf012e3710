//! The document read into what the crate needs: models (with their fields and profiles) and
//! tools (with their routes, arguments, body and result). Everything unsupported is reported
//! with the operation it skips.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use crate::Error;
use crate::names::{self, Scope, camel, format_words, one_line, secret_looking, sentence, snake};
use crate::overlay::{OperationRef, Overlay};

/// What the generation did: how many operations became tools, which were skipped and why,
/// and notes on what was simplified.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Operations in the document.
    pub operations: usize,
    /// Tools generated.
    pub tools: usize,
    /// Models generated.
    pub models: usize,
    /// Operations the overlay left out.
    pub excluded: usize,
    /// `(operation, reason)` for each operation left out.
    pub skipped: Vec<(String, String)>,
    /// What was simplified (an optional header parameter dropped, a nested object kept as
    /// JSON, a field left unpresented…).
    pub notes: Vec<String>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural =
            |n: usize, one: &'static str, many: &'static str| if n == 1 { one } else { many };
        writeln!(
            f,
            "{} of {} {} became tools, with {} {}",
            self.tools,
            self.operations,
            plural(self.operations, "operation", "operations"),
            self.models,
            plural(self.models, "model", "models")
        )?;
        if self.excluded > 0 {
            writeln!(f, "the overlay left out {} operations", self.excluded)?;
        }
        for (operation, reason) in &self.skipped {
            writeln!(f, "skipped {operation}: {reason}")?;
        }
        for note in &self.notes {
            writeln!(f, "note: {note}")?;
        }
        Ok(())
    }
}

/// A field's Rust type.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Type {
    String,
    I64,
    F64,
    Bool,
    Json,
    List(Box<Type>),
}

impl Type {
    pub(crate) fn rust(&self) -> String {
        match self {
            Type::String => "String".into(),
            Type::I64 => "i64".into(),
            Type::F64 => "f64".into(),
            Type::Bool => "bool".into(),
            Type::Json => "fusion::serde_json::Value".into(),
            Type::List(item) => format!("Vec<{}>", item.rust()),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Field {
    pub(crate) ident: String,
    pub(crate) wire: String,
    pub(crate) ty: Type,
    pub(crate) optional: bool,
    pub(crate) label: String,
    pub(crate) hidden: bool,
    pub(crate) read_only: bool,
    /// A field without a label is never presented nor filled (nested data holding secrets).
    pub(crate) cast: bool,
    /// A field the author named guarded: never an argument, never shown.
    pub(crate) guarded: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct Model {
    pub(crate) ident: String,
    pub(crate) description: Option<String>,
    pub(crate) fields: Vec<Field>,
    pub(crate) create: bool,
    pub(crate) update: bool,
    /// A tool returns it: it has a presenter.
    pub(crate) presented: bool,
}

impl Model {
    pub(crate) fn fillable(&self) -> impl Iterator<Item = &Field> {
        self.fields
            .iter()
            .filter(|field| field.cast && !field.read_only && !field.guarded)
    }

    pub(crate) fn presentable(&self) -> impl Iterator<Item = &Field> {
        self.fields
            .iter()
            .filter(|field| field.cast && !field.hidden)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Location {
    Path,
    Query,
}

#[derive(Debug, Clone)]
pub(crate) struct Param {
    pub(crate) ident: String,
    pub(crate) wire: String,
    pub(crate) ty: Type,
    pub(crate) optional: bool,
    pub(crate) location: Location,
    pub(crate) doc: Option<String>,
}

/// A piece of a path segment: literal text or a parameter (by its argument's name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    Text(String),
    Param(String),
}

/// How a body's fields are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Encoding {
    Json,
    Form,
    /// Multipart, with the upstream names of the fields that are files (base64 arguments).
    Multipart(Vec<String>),
}

/// What a tool sends as its body.
#[derive(Debug, Clone)]
pub(crate) enum Body {
    /// `Create<M>` (`create`) or `Update<M>` of model `model`, as the argument `argument`.
    Profile {
        argument: String,
        model: usize,
        create: bool,
        encoding: Encoding,
    },
    /// A free-form object (no declared properties, or `oneOf` alternatives), sent as it is:
    /// its description says what it may hold.
    Object {
        argument: String,
        doc: String,
        encoding: Encoding,
    },
    /// A JSON array or scalar, sent whole.
    Whole {
        argument: String,
        ty: Type,
        optional: bool,
        doc: String,
    },
    /// A body of another media type: text as it is, or bytes the agent gives as base64.
    Raw {
        argument: String,
        content_type: String,
        base64: bool,
        optional: bool,
        doc: String,
    },
}

#[derive(Debug, Clone)]
pub(crate) enum Returns {
    Model(usize),
    List(usize),
    Unit,
    Json,
    /// A text answer of this media type (`text/csv`), returned as a string.
    Text(String),
    /// An image or a sound of this media type, returned as a media block.
    Media(String),
}

#[derive(Debug, Clone)]
pub(crate) struct Tool {
    pub(crate) ident: String,
    /// `namespace.tool`: what the agent calls.
    pub(crate) name: String,
    pub(crate) method: &'static str,
    pub(crate) template: String,
    /// The path's segments, parameters named by their arguments.
    pub(crate) segments: Vec<Vec<Piece>>,
    pub(crate) description: String,
    pub(crate) params: Vec<Param>,
    pub(crate) body: Option<Body>,
    pub(crate) returns: Returns,
    /// Headers the document fixes for this operation (`X-Amz-Target`), sent with each call.
    pub(crate) headers: Vec<(String, String)>,
    /// Names of the tools that read what this mutation changes.
    pub(crate) invalidates: Vec<String>,
    /// The tool to call to find valid identifiers when this one answers `NOT_FOUND`.
    pub(crate) lookup: Option<String>,
}

impl Tool {
    /// Whether the `#[tool(http = …)]` proxy cannot express it, so that it is written as a
    /// handler building its request: constant headers, a body other than a JSON profile, an
    /// answer other than JSON, or a path segment holding several parameters.
    pub(crate) fn direct(&self) -> bool {
        !self.headers.is_empty()
            || matches!(self.returns, Returns::Text(_) | Returns::Media(_))
            || !matches!(
                self.body,
                None | Some(Body::Profile {
                    encoding: Encoding::Json,
                    ..
                })
            )
            || self.segments.iter().any(|segment| {
                segment
                    .iter()
                    .filter(|piece| matches!(piece, Piece::Param(_)))
                    .count()
                    > 1
            })
    }

    /// The first literal segment: the resource a tool reads or changes (`/pets/{id}` → `pets`).
    pub(crate) fn resource(&self) -> Option<&str> {
        self.segments
            .iter()
            .find_map(|segment| match segment.as_slice() {
                [Piece::Text(text)] if !text.is_empty() && !looks_like_version(text) => {
                    Some(text.as_str())
                }
                _ => None,
            })
    }
}

/// `v1`, `2010-04-01`, `api`: a prefix every route shares, not a resource.
fn looks_like_version(segment: &str) -> bool {
    segment == "api"
        || segment.starts_with('v') && segment[1..].chars().all(|c| c.is_ascii_digit() || c == '.')
        || segment
            .chars()
            .all(|c| c.is_ascii_digit() || c == '-' || c == '.')
}

#[derive(Debug)]
pub(crate) struct Api {
    pub(crate) title: String,
    pub(crate) version: String,
    pub(crate) description: Option<String>,
    pub(crate) namespace: String,
    pub(crate) base_url: Option<String>,
    /// The first server's URL as written when it has variables or is relative
    /// (`{scheme}://developer.uspto.gov/ds-api`, `/v1`), and its variables' defaults.
    pub(crate) base_url_template: Option<(String, Vec<(String, String)>)>,
    pub(crate) auth: Vec<Auth>,
    pub(crate) rules: Vec<String>,
    /// Constant headers every tool sends alike (Box's `box-version`): sent on every call by
    /// the one upstream, instead of one upstream per tool.
    pub(crate) common_headers: Vec<(String, String)>,
    pub(crate) models: Vec<Model>,
    pub(crate) tools: Vec<Tool>,
    pub(crate) report: Report,
}

const METHODS: &[(&str, &str)] = &[
    ("get", "GET"),
    ("head", "HEAD"),
    ("post", "POST"),
    ("put", "PUT"),
    ("patch", "PATCH"),
    ("delete", "DELETE"),
];

/// How the upstream authenticates callers, from `securitySchemes`: what `main.rs` reads from
/// the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Auth {
    Bearer,
    /// An API key in this header.
    Header(String),
    /// An API key in this query parameter, sent on every call.
    Query(String),
    /// OAuth 2 client credentials at this token URL.
    ClientCredentials(String),
}

struct Reader<'a> {
    root: &'a Value,
    overlay: &'a Overlay,
    models: Vec<Model>,
    /// `$ref` or inline key → model index.
    by_source: BTreeMap<String, usize>,
    type_names: Scope,
    notes: Vec<String>,
}

impl Api {
    pub(crate) fn read(root: &Value, overlay: &Overlay) -> Result<Api, Error> {
        let info = root.get("info").cloned().unwrap_or(Value::Null);
        let title = info
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or("API")
            .to_owned();
        let version = info
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or("0")
            .to_owned();
        let description = info
            .get("description")
            .and_then(Value::as_str)
            .map(|text| one_line(text, overlay.description_tokens * 4));
        let server = root
            .get("servers")
            .and_then(Value::as_array)
            .and_then(|servers| servers.first());
        let url = server
            .and_then(|server| server.get("url"))
            .and_then(Value::as_str);
        let absolute = |url: &str| url.starts_with("https://") || url.starts_with("http://");
        let base_url = url
            .filter(|url| absolute(url) && !url.contains('{'))
            .map(str::to_owned);
        let base_url_template =
            url.filter(|url| base_url.is_none() && !url.is_empty())
                .map(|url| {
                    let variables = server
                        .and_then(|server| server.get("variables"))
                        .and_then(Value::as_object)
                        .map(|variables| {
                            variables
                                .iter()
                                .filter_map(|(name, variable)| {
                                    let default =
                                        variable.get("default").and_then(Value::as_str)?;
                                    Some((name.clone(), default.to_owned()))
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    (url.to_owned(), variables)
                });
        let auth = read_auth(root);
        let mut reader = Reader {
            root,
            overlay,
            models: Vec::new(),
            by_source: BTreeMap::new(),
            type_names: Scope::default(),
            notes: Vec::new(),
        };
        // Names the generated code itself uses in the crate's root.
        for taken in ["Server", "DEFAULT_BASE_URL", "server", "BASE_URL_TEMPLATE"] {
            reader.type_names.reserve(taken);
        }
        let mut report = Report::default();
        let mut tools = Vec::new();
        let mut tool_names = Scope::default();
        tool_names.reserve("server");
        tool_names.reserve("main");
        let paths = root
            .get("paths")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for (path, item) in &paths {
            let item = match reader.resolve(item) {
                Ok(item) => item.clone(),
                Err(reason) => {
                    report.skipped.push((path.clone(), reason));
                    continue;
                }
            };
            let shared = item
                .get("parameters")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for (key, value) in item.as_object().into_iter().flatten() {
                let Some((_, method)) = METHODS.iter().find(|(name, _)| name == key) else {
                    if matches!(key.as_str(), "options" | "trace") {
                        report.operations += 1;
                        report.skipped.push((
                            format!("{} {path}", key.to_uppercase()),
                            "an OPTIONS or TRACE operation is not a tool".into(),
                        ));
                    }
                    continue;
                };
                report.operations += 1;
                let operation = format!("{method} {path}");
                let id = value.get("operationId").and_then(Value::as_str);
                let label = match id {
                    Some(id) => format!("{operation} ({id})"),
                    None => operation.clone(),
                };
                let reference = OperationRef {
                    method,
                    path,
                    id,
                    tags: value
                        .get("tags")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect(),
                };
                if !overlay.selects(&reference) {
                    report.excluded += 1;
                    continue;
                }
                let renamed = overlay.renamed(&reference).map(str::to_owned);
                match reader.tool(path, method, value, &shared, &mut tool_names, renamed) {
                    Ok(tool) => tools.push(tool),
                    Err(reason) => report.skipped.push((label, reason)),
                }
            }
        }
        let namespace = overlay
            .namespace
            .clone()
            .unwrap_or_else(|| names::namespace(&title));
        link_tools(&mut tools, &namespace);
        let common_headers: Vec<(String, String)> = match tools.first() {
            Some(first) => first
                .headers
                .iter()
                .filter(|header| tools.iter().all(|tool| tool.headers.contains(header)))
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        for tool in &mut tools {
            tool.headers
                .retain(|header| !common_headers.contains(header));
        }
        for tool in &mut tools {
            // Profiles are marked once the tool is made: a skipped operation leaves none.
            if let Some(Body::Profile { model, create, .. }) = tool.body {
                if create {
                    reader.models[model].create = true;
                } else {
                    reader.models[model].update = true;
                }
            }
            if let Returns::Model(index) | Returns::List(index) = tool.returns {
                // A presenter needs a field to show: an answer holding only hidden fields
                // reports success and nothing else.
                if reader.models[index].presentable().next().is_none() {
                    reader.notes.push(format!(
                        "{}: every field of its answer ({}) is hidden: the tool reports success only",
                        tool.name, reader.models[index].ident
                    ));
                    tool.returns = Returns::Unit;
                } else {
                    reader.models[index].presented = true;
                }
            }
        }
        reader.notes.extend(auth_notes(root));
        report.tools = tools.len();
        report.models = reader
            .models
            .iter()
            .filter(|model| model.presented || model.create || model.update)
            .count();
        report.notes = reader.notes;
        Ok(Api {
            title,
            version,
            description,
            namespace,
            base_url_template,
            auth,
            rules: overlay.rules.clone(),
            common_headers,
            base_url,
            models: reader.models,
            tools,
            report,
        })
    }
}

impl<'a> Reader<'a> {
    /// Follows local `$ref`s (`#/components/…`) to the value they name.
    fn resolve(&self, mut value: &'a Value) -> Result<&'a Value, String> {
        for _ in 0..32 {
            let Some(reference) = value.get("$ref").and_then(Value::as_str) else {
                return Ok(value);
            };
            let Some(pointer) = reference.strip_prefix('#') else {
                return Err(format!("`{reference}` is not a local reference"));
            };
            value = self
                .root
                .pointer(pointer)
                .ok_or_else(|| format!("`{reference}` names nothing in the document"))?;
        }
        Err("a chain of more than 32 references".into())
    }

    /// A schema with `allOf` merged (properties, required), 3.1 type lists and `nullable`
    /// read: `(properties, required, nullable)` of an object schema.
    fn object_parts(&self, schema: &'a Value, depth: usize) -> Result<ObjectParts, String> {
        let schema = self.resolve(schema)?;
        let mut parts = ObjectParts::default();
        if depth > 16 {
            return Err("schemas nested more than 16 deep".into());
        }
        if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
            for part in all {
                let inner = self.object_parts(part, depth + 1)?;
                for (name, property) in inner.properties {
                    parts.properties.insert(name, property);
                }
                parts.required.extend(inner.required);
            }
        }
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                parts.properties.insert(name.clone(), property.clone());
            }
        }
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            parts
                .required
                .extend(required.iter().filter_map(Value::as_str).map(str::to_owned));
        }
        Ok(parts)
    }

    fn is_object(&self, schema: &Value) -> bool {
        let Ok(schema) = self.resolve(schema) else {
            return false;
        };
        type_names(schema).contains(&"object")
            || schema.get("properties").is_some()
            || schema.get("allOf").is_some_and(|all| {
                all.as_array()
                    .is_some_and(|all| all.iter().any(|part| self.is_object(part)))
            })
    }

    /// Whether a field is itself a secret: `writeOnly`, `format: password`, named like a
    /// secret, or named so by the overlay. What its items or properties hold does not count
    /// (a list of data sets whose items have an `apiKey` name is not a secret).
    fn is_secret(&self, name: &str, property: &Value) -> bool {
        let resolved = self.resolve(property).unwrap_or(property);
        let flag = |key: &str| {
            resolved.get(key).and_then(Value::as_bool) == Some(true)
                || property.get(key).and_then(Value::as_bool) == Some(true)
        };
        flag("writeOnly")
            || resolved.get("format").and_then(Value::as_str) == Some("password")
            || secret_looking(name)
            || self
                .overlay
                .hides(name, names::unraw(&snake(name, "field")))
    }

    /// Whether nested data (followed into its properties, items and alternatives) declares a
    /// field the document itself marks secret (`writeOnly`, `format: password`): such data is
    /// kept from the agent whole, since a presenter shows nested JSON as it is. Names alone do
    /// not count here: they are a guess, good for a field, too coarse for what it contains.
    fn holds_secrets(&self, schema: &Value, depth: usize) -> bool {
        if depth > 12 {
            return false;
        }
        let Ok(schema) = self.resolve(schema) else {
            return true;
        };
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for property in properties.values() {
                let resolved = self.resolve(property).unwrap_or(property);
                if resolved.get("writeOnly").and_then(Value::as_bool) == Some(true)
                    || resolved.get("format").and_then(Value::as_str) == Some("password")
                    || self.holds_secrets(property, depth + 1)
                {
                    return true;
                }
            }
        }
        for key in ["items", "additionalProperties"] {
            if let Some(inner) = schema.get(key).filter(|inner| inner.is_object())
                && self.holds_secrets(inner, depth + 1)
            {
                return true;
            }
        }
        for key in ["allOf", "oneOf", "anyOf"] {
            if let Some(parts) = schema.get(key).and_then(Value::as_array)
                && parts.iter().any(|part| self.holds_secrets(part, depth + 1))
            {
                return true;
            }
        }
        false
    }

    /// A property's Rust type and whether it admits null.
    fn field_type(&self, schema: &Value, depth: usize) -> (Type, bool) {
        let Ok(schema) = self.resolve(schema) else {
            return (Type::Json, true);
        };
        let types = type_names(schema);
        let nullable = types.contains(&"null")
            || schema.get("nullable").and_then(Value::as_bool) == Some(true);
        if depth > 8 {
            return (Type::Json, nullable);
        }
        if let Some(all) = schema.get("allOf").and_then(Value::as_array)
            && all.len() == 1
            && !self.is_object(&all[0])
        {
            let (ty, inner_nullable) = self.field_type(&all[0], depth + 1);
            return (ty, nullable || inner_nullable);
        }
        let ty = match types.iter().find(|name| **name != "null") {
            Some(&"string") => Type::String,
            Some(&"integer") => Type::I64,
            Some(&"number") => Type::F64,
            Some(&"boolean") => Type::Bool,
            Some(&"array") => match schema.get("items") {
                Some(items) => {
                    let (item, item_nullable) = self.field_type(items, depth + 1);
                    if item_nullable {
                        Type::List(Box::new(Type::Json))
                    } else {
                        Type::List(Box::new(item))
                    }
                }
                None => Type::List(Box::new(Type::Json)),
            },
            // Objects, alternatives and untyped schemas are kept as JSON.
            _ => Type::Json,
        };
        (ty, nullable)
    }

    fn label(&self, name: &str, schema: &Value) -> String {
        let resolved = self.resolve(schema).unwrap_or(schema);
        let budget = self.overlay.label_tokens * 4;
        let described = schema
            .get("description")
            .or_else(|| resolved.get("description"))
            .or_else(|| resolved.get("title"))
            .and_then(Value::as_str)
            .map(|text| one_line(&strip_markup(text), budget))
            .filter(|text| !text.is_empty());
        let format = resolved.get("format").and_then(Value::as_str);
        let has_description = described.is_some();
        let mut label = match described {
            Some(text) => text,
            // No description: the name in words, and what its format means.
            None => {
                let words = sentence(&names::words(name).join(" "));
                let words = if words.is_empty() {
                    "A value".to_owned()
                } else {
                    words
                };
                match format.and_then(format_words) {
                    Some(meaning) => format!("{words}: {meaning}"),
                    None => words,
                }
            }
        };
        if let Some(values) = resolved.get("enum").and_then(Value::as_array) {
            let values: Vec<String> = values
                .iter()
                .take(12)
                .map(|value| match value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                })
                .collect();
            label = one_line(&format!("{label} (one of: {})", values.join(", ")), 400);
        }
        if let Some(meaning) = format.and_then(format_words)
            && has_description
            && !label.contains(meaning)
        {
            label = format!("{label} ({meaning})");
        }
        label
    }

    /// The model for an object schema reached by `source` (a `$ref` or an inline key),
    /// created on first use.
    fn model(&mut self, schema: &Value, source: &str, suggested: &str) -> Result<usize, String> {
        if let Some(&index) = self.by_source.get(source) {
            return Ok(index);
        }
        let resolved = self.resolve(schema)?;
        if resolved.get("oneOf").is_some() || resolved.get("anyOf").is_some() {
            return Err(format!(
                "`{suggested}` is a oneOf/anyOf: an exotic alternative has no single model"
            ));
        }
        let parts = self.object_parts(schema, 0)?;
        if parts.properties.is_empty() {
            return Err(format!(
                "`{suggested}` is an object without declared properties"
            ));
        }
        let ident = self.type_names.unique(camel(suggested, "Model"), "");
        let mut field_names = Scope::default();
        let mut fields = Vec::new();
        for (name, property) in &parts.properties {
            let (ty, nullable) = self.field_type(property, 0);
            let resolved = self.resolve(property).unwrap_or(property);
            let flag = |key: &str| {
                resolved.get(key).and_then(Value::as_bool) == Some(true)
                    || property.get(key).and_then(Value::as_bool) == Some(true)
            };
            let ident_name = field_names.unique(snake(name, "field"), "_");
            let guarded = self.overlay.guards(name, names::unraw(&ident_name));
            let hidden = guarded || self.is_secret(name, property);
            // Nested data is kept as JSON, which a presenter shows as it is: when it holds a
            // field an agent must not see, it is not cast (never presented, never filled).
            let cast = !(ty_is_json(&ty) && !hidden && self.holds_secrets(property, 0));
            if !cast {
                self.notes.push(match self.resolve(property) {
                    Err(reason) => format!(
                        "{ident}.{ident_name} cannot be read ({reason}): kept from the agent"
                    ),
                    Ok(_) => format!(
                        "{ident}.{ident_name} is nested data holding secret-looking or writeOnly fields: kept from the agent"
                    ),
                });
            }
            fields.push(Field {
                wire: name.clone(),
                ty,
                optional: nullable || !parts.required.contains(name),
                label: self.label(name, property),
                hidden,
                read_only: flag("readOnly"),
                cast,
                guarded,
                ident: ident_name,
            });
        }
        let description = resolved
            .get("description")
            .and_then(Value::as_str)
            .map(|text| one_line(&strip_markup(text), self.overlay.description_tokens * 4));
        self.models.push(Model {
            ident,
            description,
            fields,
            create: false,
            update: false,
            presented: false,
        });
        let index = self.models.len() - 1;
        self.by_source.insert(source.to_owned(), index);
        Ok(index)
    }

    /// The model of a schema: named after its component when it is a `$ref`.
    fn model_of(&mut self, schema: &Value, inline_name: &str) -> Result<usize, String> {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(reference) => {
                let name = reference
                    .rsplit('/')
                    .next()
                    .unwrap_or(inline_name)
                    .to_owned();
                self.model(schema, reference, &name)
            }
            None => self.model(schema, &format!("inline:{inline_name}"), inline_name),
        }
    }

    fn tool(
        &mut self,
        path: &str,
        method: &'static str,
        operation: &Value,
        shared: &[Value],
        tool_names: &mut Scope,
        renamed: Option<String>,
    ) -> Result<Tool, String> {
        if operation.get("callbacks").is_some() {
            self.notes.push(format!(
                "{method} {path}: callbacks are not generated (the operation itself is)"
            ));
        }
        let base_name = match (
            &renamed,
            operation.get("operationId").and_then(Value::as_str),
        ) {
            (Some(name), _) => snake(name, "operation"),
            (None, Some(id)) => snake(id, "operation"),
            (None, None) => snake(&format!("{method} {path}"), "operation"),
        };
        // A fragment or query in a path key (`/#X-Amz-Target=…`, AWS's JSON protocol) only
        // tells operations apart: the request goes to the path before it.
        let route_path = path.split(['#', '?']).next().unwrap_or(path);
        let route_path = if route_path.is_empty() {
            "/"
        } else {
            route_path
        };
        let mut argument_names = Scope::default();
        for taken in ["__fusion_upstream", "upstream", "request", "upstreams"] {
            argument_names.reserve(taken);
        }
        // Parameters: the operation's own override the path item's of the same name and place.
        let mut parameters: Vec<Value> = Vec::new();
        for parameter in operation
            .get("parameters")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .chain(shared)
        {
            let parameter = self.resolve(parameter)?.clone();
            let key = |p: &Value| {
                (
                    p.get("name").and_then(Value::as_str).map(str::to_owned),
                    p.get("in").and_then(Value::as_str).map(str::to_owned),
                )
            };
            if !parameters.iter().any(|seen| key(seen) == key(&parameter)) {
                parameters.push(parameter);
            }
        }
        // The body first: its profile's fields are arguments whose names parameters must not
        // take.
        let body = match operation.get("requestBody") {
            Some(request_body) => {
                let request_body = self.resolve(request_body)?.clone();
                self.body(&request_body, method, path, &base_name, &mut argument_names)?
            }
            None => None,
        };
        let mut params = Vec::new();
        let mut headers = Vec::new();
        let mut template = route_path.to_owned();
        for parameter in &parameters {
            let name = parameter
                .get("name")
                .and_then(Value::as_str)
                .ok_or("a parameter without a name")?;
            let place = parameter.get("in").and_then(Value::as_str).unwrap_or("");
            let required =
                parameter.get("required").and_then(Value::as_bool) == Some(true) || place == "path";
            let schema = parameter.get("schema").cloned().unwrap_or(Value::Null);
            let (ty, _) = if schema.is_null() {
                (Type::String, false)
            } else {
                self.field_type(&schema, 0)
            };
            let location = match place {
                "path" => Location::Path,
                "query" => Location::Query,
                "header" if required => {
                    // A header the document fixes (an enum of one value, a `const`) is sent
                    // by the tool; agents never choose headers.
                    match constant_of(self.resolve(&schema).unwrap_or(&schema)) {
                        Some(value) => {
                            headers.push((name.to_owned(), value));
                            continue;
                        }
                        None => {
                            return Err(format!(
                                "the required header `{name}` takes a value the caller chooses (agents never set headers)"
                            ));
                        }
                    }
                }
                other => {
                    if required {
                        return Err(format!(
                            "the required {other} parameter `{name}` is not supported (agents never set headers or cookies)"
                        ));
                    }
                    self.notes.push(format!(
                        "{method} {path}: the optional {other} parameter `{name}` is not sent"
                    ));
                    continue;
                }
            };
            let ty = match (location, ty) {
                (Location::Path, Type::String | Type::I64 | Type::Bool) | (Location::Query, _) => {
                    self.field_type(&schema, 0).0
                }
                (Location::Path, Type::F64) => Type::String,
                (Location::Path, other) => {
                    return Err(format!(
                        "the path parameter `{name}` is {} (a path segment is a string, integer or boolean)",
                        other.rust()
                    ));
                }
            };
            if location == Location::Query && ty_is_json(&ty) {
                if required {
                    return Err(format!(
                        "the required query parameter `{name}` is an object (deepObject and similar styles are not supported)"
                    ));
                }
                self.notes.push(format!(
                    "{method} {path}: the optional object query parameter `{name}` is not sent"
                ));
                continue;
            }
            let mut ident = argument_names.unique(snake(name, "param"), "_");
            if ident == "body" {
                ident = argument_names.unique("body_param".into(), "_");
            }
            if location == Location::Path {
                let placeholder = format!("{{{name}}}");
                if !template.contains(&placeholder) {
                    return Err(format!("the path parameter `{name}` is not in the path"));
                }
                template = template.replace(&placeholder, &format!("{{{}}}", names::unraw(&ident)));
            }
            let doc = parameter
                .get("description")
                .and_then(Value::as_str)
                .map(|text| one_line(&strip_markup(text), self.overlay.label_tokens * 4))
                .filter(|text| !text.is_empty());
            params.push(Param {
                wire: name.to_owned(),
                ident,
                ty,
                optional: !required,
                location,
                doc,
            });
        }
        if template.len() > 1 && template.ends_with('/') {
            // A trailing slash: dropped.
            template.pop();
        }
        let mut segments = Vec::new();
        if template != "/" {
            let mut seen: Vec<String> = Vec::new();
            for segment in template.split('/').skip(1) {
                let cannot =
                    || format!("the path segment `{segment}` cannot be written in a route");
                let pieces = split_pieces(segment).ok_or_else(cannot)?;
                for piece in &pieces {
                    match piece {
                        Piece::Param(name) => {
                            if !params.iter().any(|param| {
                                param.location == Location::Path
                                    && names::unraw(&param.ident) == name
                            }) {
                                return Err(format!(
                                    "the path parameter `{{{name}}}` is not declared"
                                ));
                            }
                            if seen.contains(name) {
                                return Err(format!(
                                    "the path parameter `{{{name}}}` appears twice in the path"
                                ));
                            }
                            seen.push(name.clone());
                        }
                        Piece::Text(text) => {
                            if !is_literal(text) {
                                return Err(cannot());
                            }
                        }
                    }
                }
                if matches!(pieces.as_slice(), [Piece::Text(text)] if text.is_empty() || text == "." || text == "..")
                {
                    return Err(cannot());
                }
                segments.push(pieces);
            }
        }
        let returns = self.returns(operation, &base_name)?;
        let budget = self.overlay.description_tokens * 4;
        let summary = [operation.get("summary"), operation.get("description")]
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|text| one_line(&strip_markup(text), budget))
            .find(|text| !text.is_empty());
        let description = match summary {
            Some(text) => text,
            None => format!("{method} {route_path}"),
        };
        let ident = tool_names.unique(base_name, "_");
        Ok(Tool {
            name: names::unraw(&ident).to_owned(),
            ident,
            method,
            template,
            segments,
            description,
            params,
            body,
            returns,
            headers,
            invalidates: Vec::new(),
            lookup: None,
        })
    }

    /// What an operation's request body becomes: JSON is preferred, then a form, then
    /// multipart, then the first media type the document lists (sent as raw bytes).
    fn body(
        &mut self,
        request_body: &Value,
        method: &'static str,
        path: &str,
        base_name: &str,
        argument_names: &mut Scope,
    ) -> Result<Option<Body>, String> {
        let content = request_body.get("content").and_then(Value::as_object);
        let required = request_body.get("required").and_then(Value::as_bool) == Some(true);
        let doc = request_body
            .get("description")
            .and_then(Value::as_str)
            .map(|text| one_line(&strip_markup(text), self.overlay.label_tokens * 4));
        let media_of = |wanted: &dyn Fn(&str) -> bool| {
            content.and_then(|content| {
                content
                    .iter()
                    .find(|(kind, _)| wanted(kind))
                    .map(|(kind, media)| (kind.clone(), media.clone()))
            })
        };
        let chosen = media_of(&is_json)
            .map(|media| (Encoding::Json, media))
            .or_else(|| {
                media_of(&|kind| media_is(kind, "application/x-www-form-urlencoded"))
                    .map(|media| (Encoding::Form, media))
            })
            .or_else(|| {
                media_of(&|kind| media_is(kind, "multipart/form-data"))
                    .map(|media| (Encoding::Multipart(Vec::new()), media))
            });
        let Some((mut encoding, (kind, media))) = chosen else {
            return match media_of(&|_| true) {
                Some((kind, media)) => {
                    argument_names.reserve("body");
                    let schema = media.get("schema").cloned().unwrap_or(Value::Null);
                    let resolved = self.resolve(&schema).unwrap_or(&schema);
                    let base64 = is_binary_media(&kind, resolved);
                    let what = if base64 {
                        format!("The `{kind}` body's bytes, as base64 text")
                    } else {
                        format!("The `{kind}` body, as text")
                    };
                    let doc = match doc.or_else(|| self.described(resolved)) {
                        Some(text) => format!("{what}: {text}"),
                        None => what,
                    };
                    Ok(Some(Body::Raw {
                        argument: "body".to_owned(),
                        content_type: kind,
                        base64,
                        optional: !required,
                        doc: one_line(&doc, self.overlay.label_tokens * 8),
                    }))
                }
                None if required => Err("the required request body declares no content".into()),
                None => Ok(None),
            };
        };
        let Some(schema) = media.get("schema") else {
            return Err(format!("the `{kind}` request body has no schema"));
        };
        if self.has_properties(schema) {
            let index = self.model_of(schema, &format!("{base_name}_body"))?;
            if let Encoding::Multipart(files) = &mut encoding {
                *files = self.file_fields(schema, index);
            }
            let create = method != "PATCH";
            if self.models[index].fillable().next().is_none() {
                self.notes.push(format!(
                    "{method} {path}: the body has no writable fields; none is sent"
                ));
                return Ok(None);
            }
            for field in self.models[index].fillable() {
                argument_names.reserve(&field.ident);
            }
            return Ok(Some(Body::Profile {
                argument: "body".to_owned(),
                model: index,
                create,
                encoding,
            }));
        }
        // Free-form objects and alternatives (`oneOf`/`anyOf` of objects): the agent writes the
        // JSON object, which the description explains.
        if self.is_object(schema) || self.alternatives_of_objects(schema) {
            argument_names.reserve("body");
            return Ok(Some(Body::Object {
                argument: "body".to_owned(),
                doc: self.object_doc(schema, doc),
                encoding,
            }));
        }
        if encoding != Encoding::Json {
            return Err(format!(
                "the `{kind}` request body is not an object: a form has named fields"
            ));
        }
        // A JSON array or scalar, sent whole.
        argument_names.reserve("body");
        let (ty, _) = self.field_type(schema, 0);
        let resolved = self.resolve(schema).unwrap_or(schema);
        let doc = doc
            .or_else(|| self.described(resolved))
            .unwrap_or_else(|| "The request's JSON body".to_owned());
        let doc = match self.items_doc(resolved) {
            Some(items) => one_line(&format!("{doc}. {items}"), self.overlay.label_tokens * 8),
            None => doc,
        };
        Ok(Some(Body::Whole {
            argument: "body".to_owned(),
            ty,
            optional: !required,
            doc,
        }))
    }

    /// What the items of a JSON array body hold when they are objects: their schema's name and
    /// fields, which the argument's type (a list of JSON values) does not say.
    fn items_doc(&self, schema: &Value) -> Option<String> {
        let items = schema.get("items")?;
        if !self.is_object(items) {
            return None;
        }
        let parts = self.object_parts(items, 0).ok()?;
        let name = items
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|reference| reference.rsplit('/').next())
            .unwrap_or("object");
        let fields: Vec<String> = parts
            .properties
            .keys()
            .map(|field| {
                if parts.required.contains(field) {
                    format!("{field} (required)")
                } else {
                    field.clone()
                }
            })
            .collect();
        Some(if fields.is_empty() {
            format!("Each item is a JSON object ({name}).")
        } else {
            format!(
                "Each item is a {name} JSON object with: {}.",
                fields.join(", ")
            )
        })
    }

    /// A schema's own description, one line within the label budget.
    fn described(&self, schema: &Value) -> Option<String> {
        schema
            .get("description")
            .and_then(Value::as_str)
            .map(|text| one_line(&strip_markup(text), self.overlay.label_tokens * 4))
            .filter(|text| !text.is_empty())
    }

    /// The upstream names of a multipart body's file fields (`format: binary`, or a
    /// `contentMediaType`, or a list of those), whose labels now say they take base64 text.
    fn file_fields(&mut self, schema: &Value, model: usize) -> Vec<String> {
        let Ok(parts) = self.object_parts(schema, 0) else {
            return Vec::new();
        };
        let is_file = |reader: &Self, property: &Value| {
            let resolved = reader.resolve(property).unwrap_or(property);
            resolved.get("format").and_then(Value::as_str) == Some("binary")
                || resolved.get("contentMediaType").is_some()
        };
        let files: Vec<String> = parts
            .properties
            .iter()
            .filter(|(_, property)| {
                let resolved = self.resolve(property).unwrap_or(property);
                is_file(self, property)
                    || resolved
                        .get("items")
                        .is_some_and(|items| is_file(self, items))
            })
            .map(|(name, _)| name.clone())
            .collect();
        for field in &mut self.models[model].fields {
            if files.contains(&field.wire) && !field.label.contains("base64") {
                field.label = format!(
                    "{}: a file, as base64 text",
                    field.label.trim_end_matches('.')
                );
            }
        }
        files
    }

    /// An object schema with declared properties (its own or through `allOf`).
    fn has_properties(&self, schema: &Value) -> bool {
        self.is_object(schema)
            && self
                .object_parts(schema, 0)
                .is_ok_and(|parts| !parts.properties.is_empty())
    }

    /// `oneOf`/`anyOf` whose every alternative is an object.
    fn alternatives_of_objects(&self, schema: &Value) -> bool {
        let Ok(resolved) = self.resolve(schema) else {
            return false;
        };
        ["oneOf", "anyOf"].iter().any(|key| {
            resolved
                .get(*key)
                .and_then(Value::as_array)
                .is_some_and(|parts| {
                    !parts.is_empty() && parts.iter().all(|part| self.is_object(part))
                })
        })
    }

    /// What a free-form body may hold, for its argument's description: the document's words,
    /// then the alternatives' names or the properties it names.
    fn object_doc(&self, schema: &Value, described: Option<String>) -> String {
        let resolved = self.resolve(schema).unwrap_or(schema);
        let mut doc = described
            .or_else(|| {
                resolved
                    .get("description")
                    .and_then(Value::as_str)
                    .map(|text| one_line(&strip_markup(text), self.overlay.label_tokens * 4))
            })
            .unwrap_or_else(|| "The request's JSON object".to_owned());
        let alternatives: Vec<String> = ["oneOf", "anyOf"]
            .iter()
            .filter_map(|key| resolved.get(*key).and_then(Value::as_array))
            .flatten()
            .map(|part| {
                part.get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|reference| reference.rsplit('/').next())
                    .map(str::to_owned)
                    .or_else(|| part.get("title").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_else(|| "an object".to_owned())
            })
            .collect();
        if !alternatives.is_empty() {
            doc = format!("{doc}. One of: {}", alternatives.join(", "));
        }
        one_line(&doc, self.overlay.label_tokens * 8)
    }

    /// What the first successful response holds.
    fn returns(&mut self, operation: &Value, base_name: &str) -> Result<Returns, String> {
        let responses = operation
            .get("responses")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let success = responses
            .iter()
            .filter(|(status, _)| status.starts_with('2'))
            .min_by(|a, b| a.0.cmp(b.0))
            .or_else(|| responses.iter().find(|(status, _)| *status == "default"));
        let Some((_, response)) = success else {
            return Ok(Returns::Unit);
        };
        let response = self.resolve(response)?.clone();
        let Some(content) = response.get("content").and_then(Value::as_object) else {
            return Ok(Returns::Unit);
        };
        let Some((_, media)) = content.iter().find(|(kind, _)| is_json(kind)) else {
            let Some((kind, media)) = content.iter().next() else {
                return Ok(Returns::Unit);
            };
            let schema = media.get("schema").cloned().unwrap_or(Value::Null);
            let schema = self.resolve(&schema).unwrap_or(&schema);
            let base = kind
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            if !is_binary_media(kind, schema) {
                return Ok(Returns::Text(base));
            }
            let plain = base
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "/+.-".contains(c));
            if plain && (base.starts_with("image/") || base.starts_with("audio/")) {
                return Ok(Returns::Media(base));
            }
            return Err(format!(
                "the response is `{kind}`, binary data that is neither JSON, text, an image nor a sound"
            ));
        };
        let Some(schema) = media.get("schema") else {
            return Ok(Returns::Json);
        };
        let resolved = self.resolve(schema)?.clone();
        if resolved.get("oneOf").is_some() || resolved.get("anyOf").is_some() {
            // Alternatives have no single model: shown as the upstream sends them, unless one
            // declares a secret.
            if self.holds_secrets(schema, 0) {
                return Err(
                    "the response is a oneOf/anyOf with a writeOnly or password field: no single model can hide it".into(),
                );
            }
            return Ok(Returns::Json);
        }
        if self.is_object(schema) {
            if !self.has_properties(schema) && !self.holds_secrets(schema, 0) {
                // A map (`additionalProperties`) of plain values, shown as it is.
                return Ok(Returns::Json);
            }
            return self
                .model_of(schema, &format!("{base_name}_response"))
                .map(Returns::Model);
        }
        if type_names(&resolved).contains(&"array")
            && let Some(items) = resolved.get("items")
            && self.is_object(items)
        {
            if !self.has_properties(items) && !self.holds_secrets(items, 0) {
                // A list of maps of plain values, shown as it is.
                return Ok(Returns::Json);
            }
            return self
                .model_of(items, &format!("{base_name}_item"))
                .map(Returns::List);
        }
        if self.holds_secrets(schema, 0) {
            return Err(
                "the response holds secret-looking fields in a shape no model takes".into(),
            );
        }
        // Scalars and lists of scalars are shown as they are.
        Ok(Returns::Json)
    }
}

#[derive(Default)]
struct ObjectParts {
    properties: BTreeMap<String, Value>,
    required: Vec<String>,
}

fn ty_is_json(ty: &Type) -> bool {
    match ty {
        Type::Json => true,
        Type::List(item) => ty_is_json(item),
        _ => false,
    }
}

/// A segment's pieces: `{sid}.json` is a parameter then `.json`; `{a}-{b}` two parameters
/// around `-`. `None` when its braces do not pair up.
fn split_pieces(segment: &str) -> Option<Vec<Piece>> {
    let mut pieces = Vec::new();
    let mut rest = segment;
    while let Some(open) = rest.find('{') {
        let close = rest[open..].find('}')? + open;
        if open > 0 {
            pieces.push(Piece::Text(rest[..open].to_owned()));
        }
        let name = &rest[open + 1..close];
        if name.is_empty() || name.contains('{') {
            return None;
        }
        pieces.push(Piece::Param(name.to_owned()));
        rest = &rest[close + 1..];
    }
    if rest.contains('}') {
        return None;
    }
    if !rest.is_empty() || pieces.is_empty() {
        pieces.push(Piece::Text(rest.to_owned()));
    }
    Some(pieces)
}

/// The one value a schema allows: `const`, or an `enum` of one.
fn constant_of(schema: &Value) -> Option<String> {
    let value = schema.get("const").or_else(|| {
        schema
            .get("enum")
            .and_then(Value::as_array)
            .filter(|values| values.len() == 1)
            .and_then(|values| values.first())
    })?;
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(_) | Value::Bool(_) => Some(value.to_string()),
        _ => None,
    }
}

/// Text without HTML tags (`<p>…</p>`, as AWS's documents write descriptions).
pub(crate) fn strip_markup(text: &str) -> String {
    if !text.contains('<') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                out.push(' ');
            }
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// The upstream's own authentication, from `components.securitySchemes` (every scheme the
/// document declares, in its order).
fn read_auth(root: &Value) -> Vec<Auth> {
    let mut auth = Vec::new();
    for scheme in security_schemes(root) {
        let kind = scheme.get("type").and_then(Value::as_str).unwrap_or("");
        let found = match kind {
            "http"
                if scheme
                    .get("scheme")
                    .and_then(Value::as_str)
                    .is_some_and(|s| s.eq_ignore_ascii_case("bearer")) =>
            {
                Some(Auth::Bearer)
            }
            "apiKey" => {
                let name = scheme.get("name").and_then(Value::as_str).unwrap_or("");
                match scheme.get("in").and_then(Value::as_str) {
                    // An `Authorization` "API key" (a raw token; AWS's SigV4, which is reported
                    // by `auth_notes`) is sent as it is.
                    Some("header") if !name.is_empty() => Some(Auth::Header(name.to_owned())),
                    Some("query") if !name.is_empty() => Some(Auth::Query(name.to_owned())),
                    _ => None,
                }
            }
            "oauth2" => scheme
                .pointer("/flows/clientCredentials/tokenUrl")
                .and_then(Value::as_str)
                .map(|url| Auth::ClientCredentials(url.to_owned()))
                .or(Some(Auth::Bearer)),
            "openIdConnect" => Some(Auth::Bearer),
            _ => None,
        };
        if let Some(found) = found
            && !auth.contains(&found)
        {
            auth.push(found);
        }
    }
    auth
}

/// The document's `components.securitySchemes`, in its order.
fn security_schemes(root: &Value) -> impl Iterator<Item = &Value> {
    root.pointer("/components/securitySchemes")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|schemes| schemes.values())
}

/// What the generated connector cannot do for the document's authentication: AWS Signature
/// Version 4 (a signature computed per request from the request itself and a secret key) and
/// HTTP basic (a user and password), which `API_TOKEN` does not express by itself.
fn auth_notes(root: &Value) -> Vec<String> {
    let mut notes = Vec::new();
    for scheme in security_schemes(root) {
        let sigv4 = scheme
            .get("x-amazon-apigateway-authtype")
            .and_then(Value::as_str)
            .is_some_and(|kind| kind.eq_ignore_ascii_case("awsSigv4"));
        let basic = scheme.get("type").and_then(Value::as_str) == Some("http")
            && scheme
                .get("scheme")
                .and_then(Value::as_str)
                .is_some_and(|kind| kind.eq_ignore_ascii_case("basic"));
        let note = if sigv4 {
            "the API signs every request with AWS Signature Version 4, which the upstream client does not compute (it would need the request's body, time and a secret key per call): put a signing proxy in front of the API and give its URL as the base URL"
        } else if basic {
            "the API takes HTTP basic authentication: set API_KEY_HEADER=Authorization and API_TOKEN to `Basic ` followed by the base64 of `user:password`"
        } else {
            continue;
        };
        if !notes.iter().any(|seen| seen == note) {
            notes.push(note.to_owned());
        }
    }
    notes
}

/// Names the tools in `namespace`, and links them: a mutation invalidates the tools that read
/// its resource; a tool taking a path parameter names, as the way to find valid identifiers, a
/// tool of its resource that lists items (of its own model if one does), and no tool when none
/// lists any: a reader that answers counts or a session (`get_inventory`, `login_user`) gives
/// an agent no identifier to call again with.
fn link_tools(tools: &mut [Tool], namespace: &str) {
    for tool in tools.iter_mut() {
        tool.name = format!("{namespace}.{}", names::unraw(&tool.ident));
    }
    struct Reader {
        name: String,
        resource: Option<String>,
        takes_id: bool,
        /// The model whose items it lists, if it answers a list.
        lists: Option<usize>,
    }
    let readers: Vec<Reader> = tools
        .iter()
        .filter(|tool| matches!(tool.method, "GET" | "HEAD"))
        .map(|tool| Reader {
            name: tool.name.clone(),
            resource: tool.resource().map(str::to_owned),
            takes_id: tool.params.iter().any(|p| p.location == Location::Path),
            lists: match tool.returns {
                Returns::List(model) => Some(model),
                _ => None,
            },
        })
        .collect();
    for tool in tools.iter_mut() {
        let resource = tool.resource().map(str::to_owned);
        let Some(resource) = resource else {
            continue;
        };
        let same = |r: &Option<String>| r.as_deref() == Some(resource.as_str());
        if !matches!(tool.method, "GET" | "HEAD") {
            tool.invalidates = readers
                .iter()
                .filter(|reader| same(&reader.resource))
                .map(|reader| reader.name.clone())
                .collect();
        }
        if tool.params.iter().any(|p| p.location == Location::Path) {
            let own_model = match tool.returns {
                Returns::Model(model) | Returns::List(model) => Some(model),
                _ => None,
            };
            let listers = || {
                readers.iter().filter(|reader| {
                    same(&reader.resource)
                        && !reader.takes_id
                        && reader.name != tool.name
                        && reader.lists.is_some()
                })
            };
            tool.lookup = listers()
                .find(|reader| own_model.is_some() && reader.lists == own_model)
                .or_else(|| listers().next())
                .map(|reader| reader.name.clone());
        }
    }
}

/// Text a route may hold as it is: characters a path segment needs no encoding for.
fn is_literal(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@".contains(c))
}

/// Whether `media` (parameters aside) is `expected`.
fn media_is(media: &str, expected: &str) -> bool {
    media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .eq_ignore_ascii_case(expected)
}

/// Whether a raw body is bytes (given as base64) rather than text: binary schemas and media
/// types that are not text.
fn is_binary_media(media: &str, schema: &Value) -> bool {
    let media = media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let format = schema.get("format").and_then(Value::as_str);
    if matches!(format, Some("binary" | "byte")) || schema.get("contentMediaType").is_some() {
        return true;
    }
    let texty = media.starts_with("text/")
        || media.ends_with("+xml")
        || matches!(
            media.as_str(),
            "application/xml" | "application/sdp" | "application/x-yaml" | "application/yaml"
        );
    !texty
}

fn is_json(media: &str) -> bool {
    let media = media.split(';').next().unwrap_or("").trim();
    media == "application/json" || media.ends_with("+json") || media == "*/*"
}

/// `type` as a list (3.1 allows `["string", "null"]`).
fn type_names(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(name)) => vec![name.as_str()],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

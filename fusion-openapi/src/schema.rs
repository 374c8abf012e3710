//! The document read into what the crate needs: models (with their fields and profiles) and
//! tools (with their routes, arguments, body and result). Everything unsupported is reported
//! with the operation it skips.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use crate::Error;
use crate::names::{self, Scope, camel, one_line, secret_looking, snake};

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
}

#[derive(Debug, Clone)]
pub(crate) struct Model {
    pub(crate) ident: String,
    pub(crate) description: Option<String>,
    pub(crate) fields: Vec<Field>,
    pub(crate) create: bool,
    pub(crate) update: bool,
}

impl Model {
    pub(crate) fn fillable(&self) -> impl Iterator<Item = &Field> {
        self.fields
            .iter()
            .filter(|field| field.cast && !field.read_only)
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

#[derive(Debug, Clone)]
pub(crate) enum Returns {
    Model(usize),
    List(usize),
    Unit,
    Json,
}

#[derive(Debug, Clone)]
pub(crate) struct Tool {
    pub(crate) ident: String,
    pub(crate) method: &'static str,
    pub(crate) template: String,
    pub(crate) description: String,
    pub(crate) params: Vec<Param>,
    /// `(argument, model, create?)`: `Create<M>` or `Update<M>`.
    pub(crate) body: Option<(String, usize, bool)>,
    pub(crate) returns: Returns,
}

#[derive(Debug)]
pub(crate) struct Api {
    pub(crate) title: String,
    pub(crate) version: String,
    pub(crate) description: Option<String>,
    pub(crate) base_url: Option<String>,
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

struct Reader<'a> {
    root: &'a Value,
    models: Vec<Model>,
    /// `$ref` or inline key → model index.
    by_source: BTreeMap<String, usize>,
    type_names: Scope,
    notes: Vec<String>,
}

impl Api {
    pub(crate) fn read(root: &Value) -> Result<Api, Error> {
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
            .map(|text| one_line(text, 400));
        let base_url = root
            .get("servers")
            .and_then(Value::as_array)
            .and_then(|servers| servers.first())
            .and_then(|server| server.get("url"))
            .and_then(Value::as_str)
            .filter(|url| {
                (url.starts_with("https://") || url.starts_with("http://")) && !url.contains('{')
            })
            .map(str::to_owned);
        let mut reader = Reader {
            root,
            models: Vec::new(),
            by_source: BTreeMap::new(),
            type_names: Scope::default(),
            notes: Vec::new(),
        };
        // Names the generated code itself uses in the crate's root.
        for taken in ["Server", "DEFAULT_BASE_URL", "server"] {
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
                let label = match value.get("operationId").and_then(Value::as_str) {
                    Some(id) => format!("{operation} ({id})"),
                    None => operation.clone(),
                };
                match reader.tool(path, method, value, &shared, &mut tool_names) {
                    Ok(tool) => tools.push(tool),
                    Err(reason) => report.skipped.push((label, reason)),
                }
            }
        }
        report.tools = tools.len();
        report.models = reader.models.len();
        report.notes = reader.notes;
        Ok(Api {
            title,
            version,
            description,
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

    /// Whether a schema (followed into its properties, items and alternatives) has a field an
    /// agent must not see: `writeOnly` or secret-looking.
    fn holds_secrets(&self, schema: &Value, depth: usize) -> bool {
        if depth > 12 {
            return false;
        }
        let Ok(schema) = self.resolve(schema) else {
            return true;
        };
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                let resolved = self.resolve(property).unwrap_or(property);
                if secret_looking(name)
                    || resolved.get("writeOnly").and_then(Value::as_bool) == Some(true)
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
        let mut label = resolved
            .get("description")
            .or_else(|| schema.get("description"))
            .or_else(|| resolved.get("title"))
            .and_then(Value::as_str)
            .map(|text| one_line(text, 240))
            .filter(|text| !text.is_empty())
            .unwrap_or_else(|| names::words(name).join(" "));
        if label.is_empty() {
            label = "A value".into();
        }
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
        if let Some(format) = resolved.get("format").and_then(Value::as_str) {
            label = format!("{label} [{format}]");
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
            let hidden = flag("writeOnly") || secret_looking(name);
            let ident_name = field_names.unique(snake(name, "field"), "_");
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
                ident: ident_name,
            });
        }
        let description = resolved
            .get("description")
            .and_then(Value::as_str)
            .map(|text| one_line(text, 300));
        self.models.push(Model {
            ident,
            description,
            fields,
            create: false,
            update: false,
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
    ) -> Result<Tool, String> {
        if operation.get("callbacks").is_some() {
            self.notes.push(format!(
                "{method} {path}: callbacks are not generated (the operation itself is)"
            ));
        }
        let base_name = match operation.get("operationId").and_then(Value::as_str) {
            Some(id) => snake(id, "operation"),
            None => snake(&format!("{method} {path}"), "operation"),
        };
        let mut argument_names = Scope::default();
        argument_names.reserve("__fusion_upstream");
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
        let mut body = None;
        if let Some(request_body) = operation.get("requestBody") {
            let request_body = self.resolve(request_body)?;
            let content = request_body.get("content").and_then(Value::as_object);
            let json = content.and_then(|content| {
                content
                    .iter()
                    .find(|(kind, _)| is_json(kind))
                    .map(|(_, media)| media.clone())
            });
            let required = request_body.get("required").and_then(Value::as_bool) == Some(true);
            match json.as_ref().and_then(|media| media.get("schema")) {
                Some(schema) if self.is_object(schema) => {
                    let index = self.model_of(schema, &format!("{base_name}_body"))?;
                    let create = method != "PATCH";
                    if self.models[index].fillable().next().is_none() {
                        self.notes.push(format!(
                            "{method} {path}: the body has no writable fields; none is sent"
                        ));
                    } else {
                        if create {
                            self.models[index].create = true;
                        } else {
                            self.models[index].update = true;
                        }
                        for field in self.models[index].fillable() {
                            argument_names.reserve(&field.ident);
                        }
                        body = Some(("body".to_owned(), index, create));
                    }
                }
                // A tool that silently leaves out what it is meant to send (even an optional
                // body) would mislead: a body no profile can fill skips the operation.
                Some(_) => {
                    return Err(
                        "the request body is a JSON array or scalar, which no profile fills".into(),
                    );
                }
                None => {
                    match json.as_ref() {
                        Some(_) => {
                            return Err("the JSON request body has no schema".into());
                        }
                        None => {
                            if let Some(media) = content.and_then(|content| content.keys().next()) {
                                return Err(format!(
                                    "the request body is `{media}`, not JSON (only JSON bodies are sent)"
                                ));
                            }
                        }
                    }
                    if required {
                        return Err("the required request body declares no content".into());
                    }
                }
            }
        }
        let mut params = Vec::new();
        let mut template = path.to_owned();
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
                .map(|text| one_line(text, 240))
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
        if template != "/" {
            let mut seen: Vec<&str> = Vec::new();
            for segment in template.split('/').skip(1) {
                let cannot =
                    || format!("the path segment `{segment}` cannot be written in a route");
                match split_param(segment) {
                    Some((prefix, name, suffix)) => {
                        if !params.iter().any(|param| {
                            param.location == Location::Path && names::unraw(&param.ident) == name
                        }) {
                            return Err(format!("the path parameter `{{{name}}}` is not declared"));
                        }
                        if seen.contains(&name) {
                            return Err(format!(
                                "the path parameter `{{{name}}}` appears twice in the path"
                            ));
                        }
                        seen.push(name);
                        if !is_literal(prefix) || !is_literal(suffix) {
                            return Err(cannot());
                        }
                    }
                    None if segment.contains(['{', '}']) => {
                        return Err(format!(
                            "the path segment `{segment}` holds more than one parameter (one per segment is supported)"
                        ));
                    }
                    None => {
                        if segment.is_empty()
                            || segment == "."
                            || segment == ".."
                            || !is_literal(segment)
                        {
                            return Err(cannot());
                        }
                    }
                }
            }
        }
        let returns = self.returns(operation, &base_name)?;
        let description = [operation.get("summary"), operation.get("description")]
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|text| one_line(text, 400))
            .find(|text| !text.is_empty())
            .unwrap_or_else(|| format!("{method} {path}"));
        let ident = tool_names.unique(base_name, "_");
        Ok(Tool {
            ident,
            method,
            template,
            description,
            params,
            body,
            returns,
        })
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
            if content.is_empty() {
                return Ok(Returns::Unit);
            }
            return Err("the response is not JSON".into());
        };
        let Some(schema) = media.get("schema") else {
            return Ok(Returns::Json);
        };
        let resolved = self.resolve(schema)?.clone();
        if self.is_object(schema) {
            if resolved.get("properties").is_none()
                && resolved.get("allOf").is_none()
                && !self.holds_secrets(schema, 0)
            {
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
            let item = self.resolve(items)?;
            if item.get("properties").is_none()
                && item.get("allOf").is_none()
                && !self.holds_secrets(items, 0)
            {
                // A list of maps of plain values, shown as it is.
                return Ok(Returns::Json);
            }
            return self
                .model_of(items, &format!("{base_name}_item"))
                .map(Returns::List);
        }
        if resolved.get("oneOf").is_some() || resolved.get("anyOf").is_some() {
            return Err(
                "the response is a oneOf/anyOf: an exotic alternative has no single model".into(),
            );
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

/// `(prefix, name, suffix)` of a segment holding one parameter: `{sid}.json` is
/// `("", "sid", ".json")`.
fn split_param(segment: &str) -> Option<(&str, &str, &str)> {
    if segment.matches('{').count() != 1 || segment.matches('}').count() != 1 {
        return None;
    }
    let open = segment.find('{')?;
    let close = segment.find('}')?;
    (open < close).then(|| {
        (
            &segment[..open],
            &segment[open + 1..close],
            &segment[close + 1..],
        )
    })
}

/// Text a route may hold as it is: characters a path segment needs no encoding for.
fn is_literal(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@".contains(c))
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

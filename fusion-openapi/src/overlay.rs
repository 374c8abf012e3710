//! The author's overlay: which operations become tools, under which names, which fields are
//! guarded or hidden, how long descriptions may be, and rules for the agent. A JSON or YAML
//! file next to the document, so that a 600-operation API becomes the 20 tools an agent needs
//! without editing the document.
//!
//! ```yaml
//! namespace: petstore            # tool names are `petstore.<tool>` (default: from the title)
//! include:                       # only these operations (default: all)
//!   - tag: pets
//!   - path: /pets/*              # `*` ends a prefix: /pets and everything under it
//!   - operation: findPets        # an operationId, or `GET /pets`
//! exclude:
//!   - operation: deletePet
//! rename:
//!   findPets: list_pets          # operationId (or `GET /pets`) to a tool name
//! guarded: [tenant_id, ownerId]  # fields an agent never sets nor sees (#[guarded] #[hidden])
//! hidden: [internal_notes]       # more fields an agent never sees
//! description_tokens: 80         # tool descriptions are cut to about this many tokens
//! label_tokens: 40               # and field labels to this many
//! rules:                         # added to the server's instructions
//!   - Always look a pet up before deleting it.
//! ```

use serde_json::Value;

use crate::Error;

/// One operation selector of `include` / `exclude`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// Operations tagged so.
    Tag(String),
    /// Operations at this path (`/pets/{id}`), or under it with a trailing `*` (`/pets/*`).
    Path(String),
    /// The operation with this operationId, or this `METHOD /path`.
    Operation(String),
}

/// What an operation is, for matching selectors and renames.
pub(crate) struct OperationRef<'a> {
    pub(crate) method: &'a str,
    pub(crate) path: &'a str,
    pub(crate) id: Option<&'a str>,
    pub(crate) tags: Vec<&'a str>,
}

impl Selector {
    fn matches(&self, operation: &OperationRef<'_>) -> bool {
        match self {
            Selector::Tag(tag) => operation.tags.iter().any(|t| t.eq_ignore_ascii_case(tag)),
            Selector::Path(pattern) => match pattern.strip_suffix('*') {
                Some(prefix) => {
                    let prefix = prefix.trim_end_matches('/');
                    operation.path == prefix
                        || operation
                            .path
                            .strip_prefix(prefix)
                            .is_some_and(|rest| rest.starts_with('/'))
                }
                None => operation.path == pattern,
            },
            Selector::Operation(name) => operation_names(operation).any(|n| n == *name),
        }
    }
}

fn operation_names<'a>(operation: &'a OperationRef<'a>) -> impl Iterator<Item = String> + 'a {
    operation
        .id
        .map(str::to_owned)
        .into_iter()
        .chain(std::iter::once(format!(
            "{} {}",
            operation.method, operation.path
        )))
}

/// An overlay file read (see the module's documentation for its fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlay {
    /// Tool names are `<namespace>.<tool>`; by default from the document's title.
    pub namespace: Option<String>,
    /// When not empty, only operations one of these selects become tools.
    pub include: Vec<Selector>,
    /// Operations these select never become tools.
    pub exclude: Vec<Selector>,
    /// `(operationId or METHOD /path, tool name)`.
    pub rename: Vec<(String, String)>,
    /// Field names (as the document writes them, or in snake_case) made `#[guarded]`.
    pub guarded: Vec<String>,
    /// Field names made `#[hidden]` besides those the document marks or names like secrets.
    pub hidden: Vec<String>,
    /// About how many tokens a tool description keeps (4 characters a token).
    pub description_tokens: usize,
    /// About how many tokens a field label keeps.
    pub label_tokens: usize,
    /// Rules added to the server's instructions.
    pub rules: Vec<String>,
}

impl Default for Overlay {
    fn default() -> Self {
        Overlay {
            namespace: None,
            include: Vec::new(),
            exclude: Vec::new(),
            rename: Vec::new(),
            guarded: Vec::new(),
            hidden: Vec::new(),
            description_tokens: 100,
            label_tokens: 60,
            rules: Vec::new(),
        }
    }
}

impl Overlay {
    /// Reads an overlay (JSON or YAML). Unknown keys are refused, so that a misspelt
    /// `exclude` does not silently keep every operation.
    pub fn parse(text: &str) -> Result<Overlay, Error> {
        let value: Value = match serde_json::from_str(text) {
            Ok(value) => value,
            Err(_) => serde_yaml_ng::from_str(text).map_err(|error| {
                Error::new(format!("the overlay is not JSON nor YAML: {error}"))
            })?,
        };
        let Value::Object(map) = value else {
            return Err(Error::new("the overlay is not a mapping of settings"));
        };
        let mut overlay = Overlay::default();
        for (key, value) in &map {
            match key.as_str() {
                "namespace" => overlay.namespace = Some(string(key, value)?),
                "include" => overlay.include = selectors(key, value)?,
                "exclude" => overlay.exclude = selectors(key, value)?,
                "rename" => {
                    let Value::Object(pairs) = value else {
                        return Err(Error::new(
                            "overlay `rename`: expected a mapping of operation to tool name",
                        ));
                    };
                    for (from, to) in pairs {
                        overlay.rename.push((from.clone(), string("rename", to)?));
                    }
                }
                "guarded" => overlay.guarded = strings(key, value)?,
                "hidden" => overlay.hidden = strings(key, value)?,
                "rules" => overlay.rules = strings(key, value)?,
                "description_tokens" => overlay.description_tokens = count(key, value)?,
                "label_tokens" => overlay.label_tokens = count(key, value)?,
                other => {
                    return Err(Error::new(format!(
                        "overlay: unknown setting `{other}` (known: namespace, include, exclude, rename, guarded, hidden, description_tokens, label_tokens, rules)"
                    )));
                }
            }
        }
        if let Some(namespace) = &overlay.namespace
            && (namespace.is_empty()
                || !namespace
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                || namespace.starts_with(|c: char| c.is_ascii_digit()))
        {
            return Err(Error::new(format!(
                "overlay `namespace`: `{namespace}` must be lower-case letters, digits and `_`, starting with a letter"
            )));
        }
        Ok(overlay)
    }

    /// Whether the operation becomes a tool: selected by `include` (or no `include`), and by
    /// no `exclude`.
    pub(crate) fn selects(&self, operation: &OperationRef<'_>) -> bool {
        (self.include.is_empty() || self.include.iter().any(|s| s.matches(operation)))
            && !self.exclude.iter().any(|s| s.matches(operation))
    }

    /// The tool name the author chose for the operation.
    pub(crate) fn renamed(&self, operation: &OperationRef<'_>) -> Option<&str> {
        let names: Vec<String> = operation_names(operation).collect();
        self.rename
            .iter()
            .find(|(from, _)| names.contains(from))
            .map(|(_, to)| to.as_str())
    }

    fn names(list: &[String], wire: &str, ident: &str) -> bool {
        list.iter().any(|name| name == wire || name == ident)
    }

    pub(crate) fn guards(&self, wire: &str, ident: &str) -> bool {
        Self::names(&self.guarded, wire, ident)
    }

    pub(crate) fn hides(&self, wire: &str, ident: &str) -> bool {
        Self::names(&self.hidden, wire, ident)
    }
}

fn string(key: &str, value: &Value) -> Result<String, Error> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| Error::new(format!("overlay `{key}`: expected text, found {value}")))
}

fn strings(key: &str, value: &Value) -> Result<Vec<String>, Error> {
    match value {
        Value::Array(items) => items.iter().map(|item| string(key, item)).collect(),
        other => Err(Error::new(format!(
            "overlay `{key}`: expected a list, found {other}"
        ))),
    }
}

fn count(key: &str, value: &Value) -> Result<usize, Error> {
    value
        .as_u64()
        .filter(|n| *n >= 5)
        .map(|n| n as usize)
        .ok_or_else(|| Error::new(format!("overlay `{key}`: expected a number of at least 5")))
}

fn selectors(key: &str, value: &Value) -> Result<Vec<Selector>, Error> {
    let Value::Array(items) = value else {
        return Err(Error::new(format!(
            "overlay `{key}`: expected a list of {{tag|path|operation: …}}"
        )));
    };
    items
        .iter()
        .map(|item| {
            let pair = item.as_object().filter(|map| map.len() == 1);
            match pair.and_then(|map| map.iter().next()) {
                Some((kind, text)) => {
                    let text = string(key, text)?;
                    match kind.as_str() {
                        "tag" => Ok(Selector::Tag(text)),
                        "path" => Ok(Selector::Path(text)),
                        "operation" => Ok(Selector::Operation(text)),
                        other => Err(Error::new(format!(
                            "overlay `{key}`: `{other}` is not a selector (tag, path or operation)"
                        ))),
                    }
                }
                None => Err(Error::new(format!(
                    "overlay `{key}`: each entry is one of `tag: …`, `path: …`, `operation: …`, found {item}"
                ))),
            }
        })
        .collect()
}

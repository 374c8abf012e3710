//! The lockfile's content: a [`Surface`] (the server and each action, as an agent meets them)
//! and the digests over it. Every list that is a set (globs, tags, targets, kinds) is written
//! sorted;
//! lists whose order the agent sees (rules) keep it.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical;

/// The version of the lockfile format this crate reads and writes.
pub const FORMAT: u32 = 1;

/// The behavioural surface of a server: what an agent can see of it and do with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Surface {
    /// Server-level facts.
    pub server: ServerEntry,
    /// Every action the server serves, by canonical key (`billing.get_invoice`).
    pub actions: BTreeMap<String, ActionEntry>,
    /// Every resource, by canonical key (`billing.invoice`); left out when there is none, so
    /// that the lockfile of a server without resources is what it was.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, ResourceEntry>,
    /// Every prompt, by canonical key; left out when there is none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prompts: BTreeMap<String, PromptEntry>,
    /// What each tool's definition costs in tokens, when the lockfile keeps a budget (see
    /// [`TokenBudget`](crate::TokenBudget)); left out otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<crate::TokenBudget>,
}

/// A resource, as a client meets it (SPEC P1, S2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceEntry {
    /// The fixed URI or the URI template.
    pub uri: String,
    /// The title, if any.
    pub title: Option<String>,
    /// The description.
    pub description: String,
    /// The MIME type of the contents.
    pub mime_type: String,
    /// How long a read stays true.
    pub cache: Option<Cache>,
    /// The toolset, if any.
    pub toolset: Option<String>,
    /// The template's variables, as arguments.
    pub input_schema: Value,
    /// The schema of the contents' data.
    pub output_schema: Value,
    /// What of the contents the agent perceives.
    pub egress: Egress,
    /// The OAuth scopes it declares (`#[resource(scopes = [...])]`); absent when it leaves them
    /// to the read scope of its namespace, so that older lockfiles read and digest the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// The inputs named like a guarded field of a model that the author stated are not that
    /// field, by property path (`owner_id`, `opts.owner_id`), with the reason given: each one is
    /// a place where a value a client sends lands in something named like a field only the
    /// server sets, for a reviewer to read.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub not_guarded: BTreeMap<String, String>,
}

/// A prompt, as a client meets it (SPEC P6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptEntry {
    /// The name clients ask for.
    pub name: String,
    /// The title, if any.
    pub title: Option<String>,
    /// The description.
    pub description: String,
    /// The toolset, if any.
    pub toolset: Option<String>,
    /// The arguments, by name.
    pub arguments: BTreeMap<String, PromptArgumentEntry>,
    /// The presenters whose data the prompt carries, with the presenters nested in them.
    pub presenters: BTreeMap<String, PresenterEntry>,
    /// The OAuth scopes it declares (`#[prompt(scopes = [...])]`); absent when it leaves them
    /// to the read scope of its namespace, so that older lockfiles read and digest the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// The inputs named like a guarded field of a model that the author stated are not that
    /// field, by property path (`owner_id`, `opts.owner_id`), with the reason given: each one is
    /// a place where a value a client sends lands in something named like a field only the
    /// server sets, for a reviewer to read.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub not_guarded: BTreeMap<String, String>,
}

/// A prompt's argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptArgumentEntry {
    /// Whether it must be given.
    pub required: bool,
    /// Its description.
    pub description: Option<String>,
}

/// Server-level facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerEntry {
    /// The name reported to clients.
    pub name: String,
    /// The version reported to clients and in every response.
    pub version: String,
    /// Instructions for the agent about the whole server.
    pub instructions: Option<String>,
    /// How actions are exposed as MCP tools.
    pub exposition: Exposition,
    /// Whether an access policy decides, per request, what is listed and callable.
    pub access_policy: bool,
    /// Whether calls that are not read-only are audited, and how.
    pub audit: Option<Audit>,
    /// The rate limit of each caller across the server.
    pub rate_limit: Option<RateLimit>,
}

/// How a server exposes its actions (SPEC T2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exposition {
    /// One tool per action.
    Flat,
    /// One tool per namespace, with an `action` discriminator.
    Grouped,
}

/// How an audit sink's record counts (SPEC R6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Audit {
    /// A call succeeds only once its record is written.
    Required,
    /// A failed record goes to the log; the call still succeeds.
    BestEffort,
}

/// A rate limit: at most `max` calls per `per_ms` milliseconds, for each caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Calls allowed in a window (the bucket's size).
    pub max: u64,
    /// The window, in milliseconds.
    pub per_ms: u64,
}

/// One action: how it is called, what it takes and returns, what the agent perceives of its
/// result, and what runs around it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionEntry {
    /// `query`, `mutation` or `action`.
    pub verb: Verb,
    /// The title, if any.
    pub title: Option<String>,
    /// The description the agent reads.
    pub description: String,
    /// The version reported in responses, when it is not the server's.
    pub version: Option<String>,
    /// The MCP tool, and discriminator, an agent calls it by.
    pub exposure: Exposure,
    /// The MCP annotations.
    pub annotations: Annotations,
    /// The JSON schema of its arguments.
    pub input_schema: Value,
    /// The JSON schema of the envelope's `data` on success, with the definitions it uses (the
    /// envelope around it is Fusion's, the same for every tool).
    pub output_schema: Value,
    /// What of the result the agent perceives.
    pub egress: Egress,
    /// State sync (SPEC S1).
    pub state: StateSync,
    /// The guards around the handler (SPEC G1–G3).
    pub guards: Guards,
    /// What access policies and toolsets read.
    pub access: Access,
    /// The tools its errors may offer as available actions, by canonical key.
    pub error_actions: Vec<String>,
    /// The inputs named like a guarded field of a model that the author stated are not that
    /// field, by property path (`owner_id`, `opts.owner_id`), with the reason given: each one is
    /// a place where a value an agent sends lands in something named like a field only the
    /// server sets, for a reviewer to read.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub not_guarded: BTreeMap<String, String>,
    /// Whether the handler may ask the user a question while it runs (it takes `Elicit`): a
    /// client that cannot show one gets `ELICITATION_UNSUPPORTED` instead. Left out when false,
    /// so that the lockfiles of tools that ask nothing read (and digest) as before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub asks_user: bool,
    /// Whether it runs as a task (the MCP tasks extension) for a client that declared it, or
    /// only as one. Left out when it never does, so that other tools' entries read (and
    /// digest) as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskSupport>,
}

/// How a tool runs as a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskSupport {
    /// As a task for a client that declared the tasks extension, answered at once otherwise.
    Optional,
    /// Only as a task: a client without the extension is refused.
    Required,
}

impl Egress {
    /// The agent limit where it cuts something: when the data (`data_schema`) is a list. A
    /// presenter's limit is recorded wherever the presenter is, but cuts nothing from a single
    /// item.
    pub fn applied_limit(&self, data_schema: &Value) -> Option<u64> {
        let list = data_schema.get("type").and_then(Value::as_str) == Some("array")
            || data_schema.get("items").is_some();
        self.limit.filter(|_| list)
    }
}

/// The verb of an action (SPEC T1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verb {
    /// Reads.
    Query,
    /// Changes state.
    Mutation,
    /// Neither.
    Action,
}

impl Verb {
    /// `query`, `mutation` or `action`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Query => "query",
            Verb::Mutation => "mutation",
            Verb::Action => "action",
        }
    }
}

/// The name an agent calls an action by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exposure {
    /// The MCP tool.
    pub tool: String,
    /// The value of the `action` discriminator, for an action of a grouped tool.
    pub action: Option<String>,
}

impl fmt::Display for Exposure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.action {
            None => f.write_str(&self.tool),
            Some(action) => write!(f, "{} {{\"action\":\"{action}\"}}", self.tool),
        }
    }
}

/// The MCP annotations of an action; absent hints take MCP's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Annotations {
    /// `readOnlyHint` (MCP default `false`).
    pub read_only: Option<bool>,
    /// `destructiveHint` (MCP default `true`).
    pub destructive: Option<bool>,
    /// `idempotentHint` (MCP default `false`).
    pub idempotent: Option<bool>,
    /// `openWorldHint` (MCP default `true`).
    pub open_world: Option<bool>,
}

impl Annotations {
    /// `readOnlyHint`, or MCP's default.
    pub fn is_read_only(&self) -> bool {
        self.read_only.unwrap_or(false)
    }

    /// `destructiveHint`, or MCP's default.
    pub fn is_destructive(&self) -> bool {
        self.destructive.unwrap_or(true)
    }

    /// `idempotentHint`, or MCP's default.
    pub fn is_idempotent(&self) -> bool {
        self.idempotent.unwrap_or(false)
    }

    /// `openWorldHint`, or MCP's default.
    pub fn is_open_world(&self) -> bool {
        self.open_world.unwrap_or(true)
    }
}

/// What of an action's result the agent perceives (SPEC P1–P5).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Egress {
    /// The presenter of the result; `None` for a plain result, serialized as it is.
    pub presenter: Option<String>,
    /// That presenter and every presenter nested in it, by name.
    pub presenters: BTreeMap<String, PresenterEntry>,
    /// The agent limit of a collection result (the presenter's).
    pub limit: Option<u64>,
    /// The tools the presenter may suggest, by canonical key.
    pub suggests: Vec<String>,
    /// The kinds of UI block the presenter may render (`markdown`, `table`, …); empty when
    /// it renders none.
    pub ui_kinds: Vec<String>,
}

/// A presenter: its fields with their labels, and its own rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresenterEntry {
    /// The model it presents.
    pub model: String,
    /// The fields the agent sees.
    pub fields: BTreeMap<String, PresentedField>,
    /// The presenter's own rules, in the order the agent reads them (after the labels).
    pub rules: Vec<String>,
}

/// A field a presenter lets out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresentedField {
    /// Its label: what the agent is told the field means.
    pub label: String,
    /// The presenter of its value, when it is a nested model.
    pub presenter: Option<String>,
}

/// State sync (SPEC S1).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateSync {
    /// The globs a successful call invalidates.
    pub invalidates: Vec<String>,
    /// How long a query's result stays true.
    pub cache: Option<Cache>,
}

/// A query's cache hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cache {
    /// Never changes.
    Immutable,
    /// May change at any time.
    Volatile,
}

/// The guards around an action's handler, as they apply (defaults resolved).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Guards {
    /// How its calls are serialized.
    pub serialization: Serialization,
    /// Its concurrency limit.
    pub concurrency: Option<Concurrency>,
    /// Its egress budget, in bytes.
    pub max_bytes: Option<u64>,
    /// Its egress budget, in tokens (absent from lockfiles written before token budgets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// How long a call may take, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// The rate limit of each caller.
    pub rate_limit: Option<RateLimit>,
}

/// How an action's calls are serialized, as it applies.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Serialization {
    /// Calls run side by side.
    #[default]
    None,
    /// One call at a time per value of this argument.
    PerArgument(String),
    /// One call at a time.
    PerAction,
}

/// A concurrency limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Concurrency {
    /// Calls running at once.
    pub max_active: u64,
    /// Calls waiting for a slot.
    pub max_queued: u64,
    /// The retry hint given with `SERVER_BUSY`, in milliseconds.
    pub retry_after_ms: u64,
}

/// What access policies and toolsets read of an action.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Access {
    /// The toolset it belongs to.
    pub toolset: Option<String>,
    /// Its tags.
    pub tags: Vec<String>,
    /// The OAuth scopes it declares (`#[tool(scopes = [...])]`); absent when it leaves them
    /// to the defaults of its verb, so that older lockfiles read and digest the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

/// The SHA-256 digests of a surface's canonical JSON: of each entry, and of the whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Digests {
    /// Of each action's entry.
    pub actions: BTreeMap<String, String>,
    /// Of the server's entry.
    pub server: String,
    /// Of the whole surface (format, server and actions).
    pub surface: String,
}

impl Surface {
    /// The surface with every set-like list sorted and deduplicated: the form that is written
    /// and digested, whoever built the value.
    pub fn normalized(&self) -> Surface {
        let mut surface = self.clone();
        for action in surface.actions.values_mut() {
            for list in [
                &mut action.state.invalidates,
                &mut action.access.tags,
                &mut action.access.scopes,
                &mut action.error_actions,
                &mut action.egress.suggests,
                &mut action.egress.ui_kinds,
            ] {
                list.sort_unstable();
                list.dedup();
            }
        }
        for resource in surface.resources.values_mut() {
            for list in [
                &mut resource.egress.suggests,
                &mut resource.egress.ui_kinds,
                &mut resource.scopes,
            ] {
                list.sort_unstable();
                list.dedup();
            }
        }
        for prompt in surface.prompts.values_mut() {
            prompt.scopes.sort_unstable();
            prompt.scopes.dedup();
        }
        surface
    }

    /// The digests of the surface.
    pub fn digests(&self) -> Digests {
        let surface = self.normalized();
        Digests {
            actions: surface
                .actions
                .iter()
                .map(|(key, action)| (key.clone(), canonical::digest(&to_value(action))))
                .collect(),
            server: canonical::digest(&to_value(&surface.server)),
            surface: canonical::digest(&surface.content()),
        }
    }

    /// The digest of the whole surface.
    pub fn digest(&self) -> String {
        canonical::digest(&self.normalized().content())
    }

    /// The lockfile: canonical JSON, keys sorted, one member per line, digests included. The
    /// same surface always gives the same bytes.
    pub fn to_lockfile(&self) -> String {
        let mut file = self.normalized().content();
        if let Value::Object(members) = &mut file {
            members.insert("digests".into(), to_value(&self.digests()));
        }
        canonical::pretty(&file)
    }

    /// What the surface digest is computed over.
    fn content(&self) -> Value {
        let mut content = to_value(self);
        if let Value::Object(members) = &mut content {
            members.insert("format".into(), FORMAT.into());
        }
        content
    }
}

/// Only plain data (strings, maps, numbers) is serialized: this cannot fail.
fn to_value(value: &impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// A lockfile as read: the surface it describes and the digests it states.
#[derive(Debug, Clone, PartialEq)]
pub struct Lockfile {
    /// The surface described.
    pub surface: Surface,
    /// The digests written in the file.
    pub digests: Digests,
}

/// The whole file, as serde reads it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[allow(dead_code)]
    format: u32,
    server: ServerEntry,
    actions: BTreeMap<String, ActionEntry>,
    #[serde(default)]
    resources: BTreeMap<String, ResourceEntry>,
    #[serde(default)]
    prompts: BTreeMap<String, PromptEntry>,
    #[serde(default)]
    tokens: Option<crate::TokenBudget>,
    digests: Digests,
}

/// Why a lockfile cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockfileError {
    /// Not JSON (a merge conflict left in it, say).
    Json(String),
    /// Written in another version of the format.
    Format(Option<u64>),
    /// JSON, but not a lockfile: a member is missing, unknown or of the wrong type.
    Shape(String),
}

impl fmt::Display for LockfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockfileError::Json(error) => write!(f, "not valid JSON: {error}"),
            LockfileError::Format(Some(found)) => write!(
                f,
                "written in lockfile format {found}; this version of Fusion reads format {FORMAT}"
            ),
            LockfileError::Format(None) => {
                write!(f, "no `format` number: not a Fusion lockfile")
            }
            LockfileError::Shape(error) => write!(f, "not a Fusion lockfile: {error}"),
        }
    }
}

impl std::error::Error for LockfileError {}

/// An entry whose stated digest is not the digest of its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestMismatch {
    /// `server`, `surface`, or the action's key.
    pub entry: String,
    /// The digest written in the file (`None` when the file has none for it).
    pub stated: Option<String>,
    /// The digest of the entry as it is in the file.
    pub computed: Option<String>,
}

impl fmt::Display for DigestMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.stated, &self.computed) {
            (Some(stated), Some(computed)) => write!(
                f,
                "`{}`: the file states {stated}, its content digests to {computed}",
                self.entry
            ),
            (None, _) => write!(f, "`{}`: no digest is stated for it", self.entry),
            (Some(stated), None) => write!(
                f,
                "`{}`: a digest ({stated}) is stated for an entry that does not exist",
                self.entry
            ),
        }
    }
}

impl Lockfile {
    /// Reads a lockfile.
    pub fn parse(text: &str) -> Result<Lockfile, LockfileError> {
        let value: Value =
            serde_json::from_str(text).map_err(|error| LockfileError::Json(error.to_string()))?;
        let format = value.get("format").and_then(Value::as_u64);
        if format != Some(u64::from(FORMAT)) {
            return Err(LockfileError::Format(format));
        }
        let file: File = serde_json::from_value(value)
            .map_err(|error| LockfileError::Shape(error.to_string()))?;
        Ok(Lockfile {
            surface: Surface {
                server: file.server,
                actions: file.actions,
                resources: file.resources,
                prompts: file.prompts,
                tokens: file.tokens,
            },
            digests: file.digests,
        })
    }

    /// Every entry whose stated digest does not match its content; empty when the file is
    /// consistent.
    pub fn verify(&self) -> Vec<DigestMismatch> {
        let computed = self.surface.digests();
        let mut mismatches = Vec::new();
        let mut compare = |entry: &str, stated: Option<&String>, computed: Option<&String>| {
            if stated != computed {
                mismatches.push(DigestMismatch {
                    entry: entry.to_owned(),
                    stated: stated.cloned(),
                    computed: computed.cloned(),
                });
            }
        };
        compare("server", Some(&self.digests.server), Some(&computed.server));
        let keys: std::collections::BTreeSet<&String> = computed
            .actions
            .keys()
            .chain(self.digests.actions.keys())
            .collect();
        for key in keys {
            compare(
                key,
                self.digests.actions.get(key),
                computed.actions.get(key),
            );
        }
        compare(
            "surface",
            Some(&self.digests.surface),
            Some(&computed.surface),
        );
        mismatches
    }
}

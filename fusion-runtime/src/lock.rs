//! The capability lockfile (SPEC L1): the surface of a built [`Server`] as a reviewed artifact.
//!
//! [`surface`] reads a server through its introspection API into a [`Surface`]; the
//! [`fusion_lock`] crate writes it as `fusion.lock` (canonical JSON with SHA-256 digests) and
//! classifies every change between two surfaces. [`check`] is the test-time gate (rewritten
//! with `FUSION_LOCK=update`), and [`ServerBuilder::lock`](crate::ServerBuilder::lock) the
//! start-up check.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

pub use fusion_lock::Diff;
pub use fusion_lock::{
    Access, ActionEntry, Annotations, Audit, Cache, Change, Class, Concurrency, DigestMismatch,
    Digests, Egress, Exposition, Exposure, FORMAT, Guards, Lockfile, LockfileError, PresentedField,
    PresenterEntry, PromptArgumentEntry, PromptEntry, RateLimit, ResourceEntry, Rule, SERVER,
    Serialization, ServerEntry, StateSync, Surface, Verb, diff,
};
pub use fusion_lock::{DEFAULT_THRESHOLD_PERCENT, TokenBudget};

use crate::action::ActionFacts;
use crate::error::BuildError;
use crate::present::PresenterInfo;
use crate::server::{CompiledAction, Server};

/// The environment variable that makes [`check`] write lockfiles: `FUSION_LOCK=update cargo
/// test`.
pub const ENV: &str = "FUSION_LOCK";

/// The surface of `server`: what its lockfile describes. Read from the built server, so it is
/// exactly what is served (toolsets left out are not in it; defaults are resolved).
pub fn surface(server: &Server) -> Surface {
    let inner = &server.inner;
    Surface {
        server: ServerEntry {
            name: server.name().to_owned(),
            version: server.version().to_owned(),
            instructions: server.instructions().map(str::to_owned),
            exposition: match server.exposition() {
                crate::Exposition::Flat => Exposition::Flat,
                crate::Exposition::Grouped => Exposition::Grouped,
            },
            access_policy: server.has_access_policy(),
            audit: server.has_audit_sink().then(|| {
                if server.audit_is_required() {
                    Audit::Required
                } else {
                    Audit::BestEffort
                }
            }),
            rate_limit: server.rate_limit().map(rate_limit),
        },
        actions: inner
            .actions
            .iter()
            .map(|action| {
                (
                    action.facts.key.as_str().to_owned(),
                    action_entry(server, action),
                )
            })
            .collect(),
        resources: server
            .resources()
            .map(|resource| (resource.key().as_str().to_owned(), resource_entry(resource)))
            .collect(),
        prompts: server
            .prompts()
            .map(|prompt| (prompt.key().as_str().to_owned(), prompt_entry(prompt)))
            .collect(),
        // Measured by a `Check` that keeps a budget (feature `tokens`).
        tokens: None,
    }
}

fn cache(hint: crate::CacheHint) -> Cache {
    match hint {
        crate::CacheHint::Immutable => Cache::Immutable,
        crate::CacheHint::Volatile => Cache::Volatile,
    }
}

fn resource_entry(resource: crate::ResourceInfo<'_>) -> ResourceEntry {
    ResourceEntry {
        uri: resource.uri().to_owned(),
        title: resource.title().map(str::to_owned),
        description: resource.description().to_owned(),
        mime_type: resource.mime_type().to_owned(),
        cache: resource.cache().map(cache),
        toolset: resource.toolset().map(str::to_owned),
        input_schema: Value::Object(resource.input_schema().clone()),
        output_schema: resource.data_schema().clone(),
        egress: resource.presenter().map(egress).unwrap_or_default(),
        not_guarded: resource.0.not_guarded.clone(),
        scopes: resource.scopes().to_vec(),
    }
}

fn prompt_entry(prompt: crate::PromptInfo<'_>) -> PromptEntry {
    let mut presenters = Presenters::default();
    for presenter in prompt.presenters() {
        presenters.collect(presenter.clone());
    }
    PromptEntry {
        name: prompt.name().to_owned(),
        title: prompt.title().map(str::to_owned),
        description: prompt.description().to_owned(),
        toolset: prompt.toolset().map(str::to_owned),
        arguments: prompt
            .arguments()
            .iter()
            .map(|argument| {
                (
                    argument.name.clone(),
                    PromptArgumentEntry {
                        required: argument.required.unwrap_or(false),
                        description: argument.description.clone(),
                    },
                )
            })
            .collect(),
        presenters: presenters.entries,
        not_guarded: prompt.0.not_guarded.clone(),
        scopes: prompt.scopes().to_vec(),
    }
}

fn action_entry(server: &Server, action: &CompiledAction) -> ActionEntry {
    let facts = &action.facts;
    let annotations = &facts.annotations;
    ActionEntry {
        verb: match facts.verb {
            crate::Verb::Query => Verb::Query,
            crate::Verb::Mutation => Verb::Mutation,
            crate::Verb::Action => Verb::Action,
        },
        title: facts.title.clone(),
        description: facts.description.clone(),
        version: (facts.version != server.version()).then(|| facts.version.clone()),
        exposure: Exposure {
            tool: facts.exposure.tool().to_owned(),
            action: facts.exposure.action().map(str::to_owned),
        },
        annotations: Annotations {
            read_only: annotations.read_only_hint,
            destructive: annotations.destructive_hint,
            idempotent: annotations.idempotent_hint,
            open_world: annotations.open_world_hint,
        },
        input_schema: Value::Object((*facts.input_schema).clone()),
        output_schema: data_schema(facts),
        egress: facts.presenter.as_ref().map(egress).unwrap_or_default(),
        state: StateSync {
            invalidates: facts
                .invalidates
                .iter()
                .map(|glob| glob.as_str().to_owned())
                .collect(),
            cache: facts.cache.map(|cache| match cache {
                crate::CacheHint::Immutable => Cache::Immutable,
                crate::CacheHint::Volatile => Cache::Volatile,
            }),
        },
        guards: Guards {
            // The guard in force, defaults resolved (a destructive write is serialized).
            serialization: match &action.serial {
                None => Serialization::None,
                Some(serial) => match serial.argument() {
                    None => Serialization::PerAction,
                    Some(name) => Serialization::PerArgument(name.to_owned()),
                },
            },
            concurrency: facts.concurrency.map(|concurrency| Concurrency {
                max_active: concurrency.max_active as u64,
                max_queued: concurrency.max_queued as u64,
                retry_after_ms: millis(concurrency.retry_after),
            }),
            max_bytes: facts.max_bytes.map(|bytes| bytes as u64),
            max_tokens: facts.max_tokens.map(|tokens| tokens as u64),
            timeout_ms: facts.timeout.map(millis),
            rate_limit: facts.rate_limit.map(rate_limit),
        },
        access: Access {
            toolset: facts.toolset.clone(),
            tags: facts.tags.clone(),
            scopes: facts.scopes.clone(),
        },
        error_actions: facts
            .error_actions
            .iter()
            .map(|&key| key.to_owned())
            .collect(),
        not_guarded: facts.not_guarded.clone(),
        asks_user: action.asks_user,
        task: match facts.task {
            crate::task::TaskSupport::Forbidden => None,
            crate::task::TaskSupport::Optional => Some(fusion_lock::TaskSupport::Optional),
            crate::task::TaskSupport::Required => Some(fusion_lock::TaskSupport::Required),
        },
    }
}

/// Counts each tool's definition as `tools/list` shows it (every tool the server built; an
/// access policy may show a caller fewer), and the worst answer of each action with a
/// presenter.
#[cfg(feature = "tokens")]
fn measure_tokens(server: &Server, threshold_percent: u64) -> fusion_lock::TokenBudget {
    use fusion_lock::tokens::{O200k, Tokenizer as _};
    fusion_lock::TokenBudget {
        tokenizer: O200k.name().to_owned(),
        threshold_percent,
        definitions: server
            .tools()
            .map(|tool| {
                let listed = serde_json::to_value(tool.definition()).unwrap_or(Value::Null);
                let tokens = fusion_lock::tokens::definition(&listed, &O200k);
                (tool.name().to_owned(), tokens as u64)
            })
            .collect(),
        answers: server
            .inner
            .actions
            .iter()
            .filter(|action| action.facts.presenter.is_some())
            .map(|action| {
                let tokens = worst_answer(server, action)
                    .map(|answer| fusion_lock::tokens::answer(&answer, &O200k).total() as u64);
                (action.facts.key.to_string(), tokens)
            })
            .collect(),
    }
}

/// The answer of `action` at its worst, as a client on the current protocol that draws no UI
/// reads it: a full page at its presenter's limit (one item when it returns one) of values at
/// nominal sizes, sealed like a handler's, so with its rules, the truncation notice of a page
/// that has more, its invalidations, and cut to its egress budget. Suggestions and UI blocks
/// are computed from real data by the presenter's code and are not in it. `None` when nothing
/// bounds it: a collection with no agent limit and no egress budget.
#[cfg(feature = "tokens")]
fn worst_answer(server: &Server, action: &crate::server::CompiledAction) -> Option<Value> {
    use crate::present::{Presentation, Truncation};
    /// The items sampled for a collection that only an egress budget bounds: past any
    /// budget's cut for items of a few tokens each.
    const UNLIMITED_PAGE: usize = 1_000;
    let facts = &action.facts;
    let presenter = facts.presenter.as_ref()?;
    let root = Value::Object((*facts.output_schema).clone());
    let data = &facts.data_schema;
    let (data, truncation) = if data.get("type").and_then(Value::as_str) == Some("array") {
        let items = match presenter.limit {
            Some(limit) => limit,
            None if facts.max_bytes.is_some() || facts.max_tokens.is_some() => UNLIMITED_PAGE,
            None => return None,
        };
        let item = fusion_lock::sample::sample(&data["items"], &root);
        let page = vec![item; items];
        // A page with more after it: the notice is part of the worst case.
        let cut = presenter
            .limit
            .map(|limit| Truncation::of_list(limit + 1, limit));
        (Value::Array(page), cut)
    } else {
        (fusion_lock::sample::sample(data, &root), None)
    };
    let presentation = Presentation {
        truncation,
        declared_actions: presenter.actions,
        declared_ui: presenter.ui_kinds,
        ..Presentation::plain(data)
    };
    let offset = action.pages_by_offset.then_some(0);
    let sealed = crate::envelope::seal_success(
        &server.inner.names,
        facts,
        &action.sealed,
        presentation,
        offset,
    );
    let result: rmcp::model::CallToolResult = crate::server::ToolResult::new(sealed)
        .for_client(crate::envelope::ClientForm::default())
        .into();
    serde_json::to_value(result).ok()
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn rate_limit(limit: crate::RateLimit) -> RateLimit {
    RateLimit {
        max: u64::from(limit.max),
        per_ms: millis(limit.per),
    }
}

/// The schema of the envelope's `data`, with the definitions it uses (the output schema keeps
/// them at its root, shared with the envelope's own).
fn data_schema(facts: &ActionFacts) -> Value {
    let mut schema = facts.data_schema.clone();
    let definitions = facts.output_schema.get("$defs").and_then(Value::as_object);
    let mut used = Map::new();
    let mut pending = Vec::new();
    references(&schema, &mut pending);
    while let Some(name) = pending.pop() {
        if used.contains_key(&name) {
            continue;
        }
        if let Some(definition) = definitions.and_then(|definitions| definitions.get(&name)) {
            references(definition, &mut pending);
            used.insert(name, definition.clone());
        }
    }
    if let Value::Object(keywords) = &mut schema
        && !used.is_empty()
    {
        keywords.insert("$defs".into(), Value::Object(used));
    }
    schema
}

/// The names of the definitions `schema` refers to (`#/$defs/Name`).
fn references(schema: &Value, names: &mut Vec<String>) {
    match schema {
        Value::Object(keywords) => {
            for (keyword, value) in keywords {
                match (keyword.as_str(), value) {
                    ("$ref", Value::String(target)) => {
                        if let Some(name) = target.strip_prefix("#/$defs/") {
                            names.push(name.replace("~1", "/").replace("~0", "~"));
                        }
                    }
                    _ => references(value, names),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| references(item, names)),
        _ => {}
    }
}

/// What of a result an agent perceives through `presenter` and the presenters nested in it.
fn egress(presenter: &PresenterInfo) -> Egress {
    let mut presenters = Presenters::default();
    let root = presenters.collect(presenter.clone());
    Egress {
        presenter: Some(root),
        presenters: presenters.entries,
        limit: presenter.limit.map(|limit| limit as u64),
        suggests: presenter
            .actions
            .iter()
            .map(|&key| key.to_owned())
            .collect(),
        ui_kinds: presenter
            .ui_kinds
            .iter()
            .map(|&kind| kind.to_owned())
            .collect(),
    }
}

/// Presenters by name; two different presenters of the same name (in two modules) get
/// distinct keys, `Name`, then `Name#2`.
#[derive(Default)]
struct Presenters {
    entries: BTreeMap<String, PresenterEntry>,
    seen: Vec<(PresenterInfo, String)>,
}

impl Presenters {
    /// Adds `info` and the presenters nested in it; returns its key.
    fn collect(&mut self, info: PresenterInfo) -> String {
        if let Some((_, key)) = self.seen.iter().find(|(seen, _)| *seen == info) {
            return key.clone();
        }
        let same_name = self
            .seen
            .iter()
            .filter(|(seen, _)| seen.name == info.name)
            .count();
        let key = match same_name {
            0 => info.name.to_owned(),
            n => format!("{}#{}", info.name, n + 1),
        };
        // Registered before its nested presenters, so that a presenter nesting itself ends.
        self.seen.push((info.clone(), key.clone()));
        let mut fields = BTreeMap::new();
        for field in info.fields {
            let nested = info
                .nested
                .iter()
                .find(|nested| nested.field == *field)
                .map(|nested| self.collect((nested.presenter)()));
            fields.insert(
                (*field).to_owned(),
                PresentedField {
                    label: info.label(field).unwrap_or_default().to_owned(),
                    presenter: nested,
                },
            );
        }
        self.entries.insert(
            key.clone(),
            PresenterEntry {
                model: info.model.to_owned(),
                fields,
                rules: info
                    .own_rules()
                    .iter()
                    .map(|&rule| rule.to_owned())
                    .collect(),
            },
        );
        key
    }
}

/// Whether [`check`] compares the code with the lockfile or rewrites the lockfile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Compare, and fail on changes the policy does not accept.
    Check,
    /// Write the code's surface (create the file if it is missing).
    Update,
}

impl Mode {
    /// From [`FUSION_LOCK`](ENV): `update` (or `overwrite`) rewrites, unset, empty or `check`
    /// compares; anything else is a mistake, reported rather than guessed.
    pub fn from_env() -> Result<Mode, LockError> {
        match std::env::var(ENV) {
            Err(std::env::VarError::NotPresent) => Ok(Mode::Check),
            Ok(value) => match value.as_str() {
                "" | "check" => Ok(Mode::Check),
                "update" | "overwrite" => Ok(Mode::Update),
                _ => Err(LockError::Mode { value }),
            },
            Err(std::env::VarError::NotUnicode(value)) => Err(LockError::Mode {
                value: value.to_string_lossy().into_owned(),
            }),
        }
    }
}

/// The test-time gate: compares a server's surface with a lockfile, or writes it.
///
/// By default every change fails (cosmetic ones too): a change is accepted by updating the
/// lockfile, so that it shows in the pull request's diff. [`Check::fail_on`] relaxes that.
#[derive(Debug, Clone)]
pub struct Check {
    path: PathBuf,
    fail_on: Class,
    mode: Option<Mode>,
    token_threshold: Option<u64>,
}

/// What a check did, when it passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The lockfile describes the surface, byte for byte.
    Unchanged,
    /// The lockfile did not exist and was written.
    Created,
    /// The lockfile was rewritten; the changes it took in.
    Updated(Diff),
    /// The surface changed, by changes less serious than the policy's class only.
    Tolerated(Diff),
}

impl Check {
    /// A check of the lockfile at `path` (relative paths are from the current directory,
    /// which `cargo test` sets to the package's root).
    pub fn new(path: impl AsRef<Path>) -> Self {
        Check {
            path: path.as_ref().to_owned(),
            fail_on: Class::Cosmetic,
            mode: None,
            token_threshold: None,
        }
    }

    /// Keeps a token budget in the lockfile: the tokens of each tool's definition as listed,
    /// counted with the o200k tokenizer (feature `tokens`). Growth of a definition past
    /// `threshold_percent` of its recorded tokens is a risky change, growth within it or
    /// shrinking a cosmetic one; recording the budget, or changing the threshold, a safe one.
    /// Once a lockfile has a budget it is kept (and measured) by every check of it, with its
    /// own threshold unless this sets another. Without the `tokens` feature a recorded budget
    /// is carried as it is, not measured.
    #[must_use]
    pub fn token_budget(mut self, threshold_percent: u64) -> Self {
        self.token_threshold = Some(threshold_percent);
        self
    }

    /// The budget the lockfile records: measured when this check keeps one or the reviewed
    /// lockfile does.
    fn budget(&self, server: &Server, reviewed: Option<&str>) -> Option<fusion_lock::TokenBudget> {
        let recorded = reviewed
            .and_then(|text| Lockfile::parse(text).ok())
            .and_then(|lockfile| lockfile.surface.tokens);
        let threshold = self
            .token_threshold
            .or(recorded.as_ref().map(|budget| budget.threshold_percent))?;
        #[cfg(feature = "tokens")]
        {
            let _ = recorded;
            Some(measure_tokens(server, threshold))
        }
        #[cfg(not(feature = "tokens"))]
        {
            let _ = (server, threshold);
            recorded
        }
    }

    /// Fails only on changes of class `class` or more serious (every change by default).
    #[must_use]
    pub fn fail_on(mut self, class: Class) -> Self {
        self.fail_on = class;
        self
    }

    /// Sets the mode instead of reading it from [`FUSION_LOCK`](ENV).
    #[must_use]
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// Compares or writes; an error says why the check fails.
    pub fn run(&self, server: &Server) -> Result<Outcome, LockError> {
        let mode = match self.mode {
            Some(mode) => mode,
            None => Mode::from_env()?,
        };
        let existing = match std::fs::read_to_string(&self.path) {
            // A checkout that turned line ends into CRLF holds the same lockfile.
            Ok(existing) => Some(existing.replace("\r\n", "\n")),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(LockError::Read {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let mut current = surface(server);
        current.tokens = self.budget(server, existing.as_deref());
        let text = current.to_lockfile();
        match (mode, existing) {
            (_, Some(existing)) if existing == text => Ok(Outcome::Unchanged),
            (Mode::Update, existing) => {
                let reviewed = existing
                    .as_deref()
                    .and_then(|existing| Lockfile::parse(existing).ok());
                self.write(&text)?;
                Ok(match (existing, reviewed) {
                    (None, _) => Outcome::Created,
                    (Some(_), Some(reviewed)) => {
                        Outcome::Updated(diff(&reviewed.surface, &current))
                    }
                    // Not a lockfile (a merge conflict, say): replaced whole.
                    (Some(_), None) => Outcome::Updated(Diff::default()),
                })
            }
            (Mode::Check, None) => Err(LockError::Missing {
                path: self.path.clone(),
            }),
            (Mode::Check, Some(existing)) => {
                let reviewed = Lockfile::parse(&existing).map_err(|error| LockError::Invalid {
                    path: self.path.clone(),
                    error,
                })?;
                let changes = diff(&reviewed.surface, &current);
                if changes.is_empty() {
                    Err(LockError::NotCanonical {
                        path: self.path.clone(),
                    })
                } else if changes.fails(self.fail_on) {
                    Err(LockError::Changed {
                        path: self.path.clone(),
                        diff: changes,
                        fail_on: self.fail_on,
                    })
                } else {
                    Ok(Outcome::Tolerated(changes))
                }
            }
        }
    }

    /// Like [`Check::run`], but panics with the reason when the check fails: for a `#[test]`.
    /// What it changed or tolerated is printed on stderr.
    #[track_caller]
    pub fn assert(&self, server: &Server) -> Outcome {
        let outcome = match self.run(server) {
            Ok(outcome) => outcome,
            Err(error) => panic!("{error}"),
        };
        let path = self.path.display();
        match &outcome {
            Outcome::Unchanged => {}
            Outcome::Created => eprintln!("{path}: written; review it and commit it"),
            Outcome::Updated(changes) => {
                eprintln!("{path}: updated; review its diff and commit it\n{changes}")
            }
            Outcome::Tolerated(changes) => eprintln!(
                "{path}: changes tolerated (this check fails on {} changes and worse)\n{changes}",
                self.fail_on
            ),
        }
        outcome
    }

    fn write(&self, text: &str) -> Result<(), LockError> {
        let write = || -> std::io::Result<()> {
            if let Some(parent) = self
                .path
                .parent()
                .filter(|parent| !parent.as_os_str().is_empty())
            {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&self.path, text)
        };
        write().map_err(|source| LockError::Write {
            path: self.path.clone(),
            source,
        })
    }
}

/// Checks `server` against the lockfile at `path` in a `#[test]`, failing on any change; with
/// `FUSION_LOCK=update`, writes the lockfile instead. See [`Check`] for a policy.
///
/// ```no_run
/// # fn server() -> fusion_runtime::Server { unimplemented!() }
/// #[test]
/// fn the_surface_is_the_reviewed_one() {
///     fusion_runtime::lock::check(&server(), "fusion.lock");
/// }
/// # fn main() {}
/// ```
#[track_caller]
pub fn check(server: &Server, path: impl AsRef<Path>) {
    Check::new(path).assert(server);
}

/// Why a lockfile check failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum LockError {
    /// There is no lockfile yet.
    Missing {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The lockfile could not be read.
    Read {
        /// The lockfile.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a lockfile (a merge conflict, another format version).
    Invalid {
        /// The lockfile.
        path: PathBuf,
        /// Why.
        error: LockfileError,
    },
    /// The surface is not the reviewed one.
    Changed {
        /// The lockfile.
        path: PathBuf,
        /// Every change from the lockfile to the code.
        diff: Diff,
        /// The policy: the least serious class that fails.
        fail_on: Class,
    },
    /// The lockfile describes the surface but is not written as Fusion writes it (edited by
    /// hand, its digests stale).
    NotCanonical {
        /// The lockfile.
        path: PathBuf,
    },
    /// The lockfile could not be written.
    Write {
        /// The lockfile.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `FUSION_LOCK` has a value that means nothing.
    Mode {
        /// The value.
        value: String,
    },
}

impl LockError {
    /// The changes, when the surface is not the reviewed one.
    pub fn diff(&self) -> Option<&Diff> {
        match self {
            LockError::Changed { diff, .. } => Some(diff),
            _ => None,
        }
    }
}

const ACCEPT: &str =
    "run `FUSION_LOCK=update cargo test`, review the lockfile's diff and commit it with the change";

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Missing { path } => write!(
                f,
                "{} does not exist: this server's surface has not been reviewed yet. To create it, {ACCEPT}.",
                path.display()
            ),
            LockError::Read { path, source } => {
                write!(f, "{} cannot be read: {source}", path.display())
            }
            LockError::Invalid { path, error } => write!(
                f,
                "{} is not a lockfile this version of Fusion reads ({error}). To write it again from the code, {ACCEPT}.",
                path.display()
            ),
            LockError::Changed {
                path,
                diff,
                fail_on,
            } => {
                let policy = match fail_on {
                    Class::Cosmetic => "any change".to_owned(),
                    class => format!("{class} changes and worse"),
                };
                write!(
                    f,
                    "{}: the server's surface is not the reviewed one (this check fails on {policy}).\n{diff}If these changes are intended, {ACCEPT}.",
                    path.display()
                )
            }
            LockError::NotCanonical { path } => write!(
                f,
                "{} describes this surface but is not written as Fusion writes it (edited by hand? stale digests?). To write it again, {ACCEPT}.",
                path.display()
            ),
            LockError::Write { path, source } => {
                write!(f, "{} cannot be written: {source}", path.display())
            }
            LockError::Mode { value } => write!(
                f,
                "{ENV}={value} is not understood: set it to `update` to write lockfiles, or leave it unset to check them"
            ),
        }
    }
}

impl std::error::Error for LockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LockError::Read { source, .. } | LockError::Write { source, .. } => Some(source),
            LockError::Invalid { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// The start-up check: the built server's surface must be the one `reviewed` describes.
pub(crate) fn enforce(server: &Server, reviewed: &str) -> Result<(), BuildError> {
    let reviewed = Lockfile::parse(reviewed).map_err(|error| {
        BuildError::new(vec![format!(
            "the lockfile given to `ServerBuilder::lock` cannot be read: {error}"
        )])
    })?;
    // A file whose digests do not match its content was not written by Fusion as it stands
    // (edited by hand, say): it is not a reviewed surface.
    let mismatches = reviewed.verify();
    if !mismatches.is_empty() {
        let mismatches: Vec<String> = mismatches.iter().map(ToString::to_string).collect();
        return Err(BuildError::new(vec![format!(
            "the lockfile given to `ServerBuilder::lock` is inconsistent, its digests do not match its content (edited by hand?): {}",
            mismatches.join("; ")
        )]));
    }
    let changes = diff(&reviewed.surface, &surface(server));
    if changes.is_empty() {
        Ok(())
    } else {
        Err(BuildError::lock(changes))
    }
}

//! Building a server (SPEC T4): tools and shared state are collected by a [`ServerBuilder`],
//! every one is checked against its verb and the rest of the server, and everything that can be
//! computed before the first request is: schemas, exposed names, the `tools/list` payload, the
//! dispatch tables and the parts of each response that never change. Any problem fails the
//! build (fail closed), all of them listed.

use std::collections::HashMap;
use std::sync::Arc;

use crate::access::AccessPolicy;
use crate::action::{Exposition, Names};
use crate::audit::AuditSink;
use crate::context::{ServerParts, StateMap};
use crate::error::BuildError;
use crate::expose::expose;
use crate::guard::{
    Concurrency, ConcurrencyGuard, DEFAULT_SERVER_CONCURRENCY, RateLimit, RateLimiter,
};
use crate::guarded::{GuardedInput, GuardedNames};
use crate::key::ToolKey;
use crate::key::check_exposed_name;
use crate::keyed::DigestKey;
use crate::middleware::Middleware;
use crate::model::{Model, ModelFields};
use crate::observe::Metrics;
use crate::present::PresenterInfo;
use crate::prompt::{Prompt, PromptSpec};
use crate::resource::{Resource, ResourceSpec};
use crate::router::Router;
use crate::server::{Audit, Server, ServerInner};
use crate::spec::{Tool, ToolSpec};

mod compile;
use compile::{
    CompileContext, compile_action, exposure_of, name_stale, unknown_recoveries,
    unknown_suggestions,
};

/// Checks a built server against its reviewed lockfile ([`crate::lock::enforce`]).
type LockCheck = fn(&Server, &str) -> Result<(), BuildError>;

/// Compiles resources and prompts ([`crate::catalog::compile`]).
type ContentCompile = fn(
    Vec<ResourceSpec>,
    Vec<PromptSpec>,
    &crate::catalog::ContentContext<'_>,
    &[ToolKey],
    &mut Vec<String>,
    &mut Vec<GuardedInput>,
) -> crate::catalog::Content;

impl Server {
    /// Starts a server description.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> ServerBuilder {
        ServerBuilder::new(name, version)
    }
}

/// Collects tools and shared state, then builds a [`Server`].
///
/// ```
/// use fusion_runtime::{CallContext, Exposition, ServerBuilder, ToolError, ToolSpec};
/// # use schemars::JsonSchema; use serde::{Deserialize, Serialize};
/// # #[derive(Deserialize, JsonSchema)] struct Args {}
/// # #[derive(Serialize, JsonSchema)] struct Pong { ok: bool }
/// let server = ServerBuilder::new("demo", "1.0.0")
///     .instructions("A demo server.")
///     .exposition(Exposition::Flat)
///     .tool_spec(ToolSpec::query("health.ping", "Answers if alive.").handler(
///         |_: CallContext, _: Args| async { Ok::<_, ToolError>(Pong { ok: true }) },
///     ))
///     .build()
///     .expect("a valid server");
/// assert_eq!(server.tools().next().unwrap().name(), "health_ping");
/// ```
pub struct ServerBuilder {
    name: String,
    version: String,
    instructions: Option<String>,
    exposition: Exposition,
    specs: Vec<ToolSpec>,
    resources: Vec<ResourceSpec>,
    prompts: Vec<PromptSpec>,
    /// Models registered with [`ServerBuilder::model`]: their guarded fields are refused on
    /// every input surface, as are those of the models behind profiles and presenters.
    models: Vec<ModelFields>,
    state: StateMap,
    middleware: Vec<Arc<dyn Middleware>>,
    access: Option<Arc<dyn AccessPolicy>>,
    audit: Option<Audit>,
    audit_reads: bool,
    audit_digest_key: Option<DigestKey>,
    metrics: Option<Arc<dyn Metrics>>,
    enabled_toolsets: Option<Vec<String>>,
    disabled_toolsets: Vec<String>,
    max_bytes: Option<usize>,
    max_tokens: Option<usize>,
    data_text: crate::action::DataText,
    default_timeout: Option<std::time::Duration>,
    rate_limit: Option<RateLimit>,
    /// The concurrency limit of the server as a whole; none when turned off.
    server_concurrency: Option<Concurrency>,
    span_level: tracing::Level,
    /// The reviewed lockfile the built surface must match, and the check: a function pointer
    /// set by [`lock`](ServerBuilder::lock), so that a connector without a lockfile does not
    /// link the lockfile's parser, digests and diff (0.14 MB).
    lock: Option<(String, LockCheck)>,
    /// Taken by serialized calls after their in-process turn.
    serialization_lock: Option<Arc<dyn crate::guard::SerializationLock>>,
    /// Keys sealing the state of elicitation rounds (random per process by default).
    state_keys: Option<crate::request_state::StateKeys>,
    state_ttl: std::time::Duration,
    /// How long a question to the client waits, unless its tool says.
    ask_timeout: Option<std::time::Duration>,
    /// Upstream servers to mount, by prefix (SPEC R7).
    #[cfg(feature = "gateway")]
    pub(crate) mounts: Vec<(String, crate::gateway::Upstream)>,
    /// What compiles resources and prompts: set by the first one added, so that a connector
    /// with neither does not link their compilation.
    content_compile: Option<ContentCompile>,
    /// Their request paths, set with it.
    content_paths: Option<crate::catalog::ContentHook>,
    /// What serves tasks, given by [`mount`](ServerBuilder::mount) (an upstream's tools may run
    /// as tasks); tools give it themselves ([`ToolSpec::with_task`]).
    task_service: Option<crate::task::TaskHook>,
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("exposition", &self.exposition)
            .field("tools", &self.specs)
            .finish_non_exhaustive()
    }
}

impl ServerBuilder {
    /// A server with a name and a version (reported to clients and in every response's meta).
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        ServerBuilder {
            name: name.into(),
            version: version.into(),
            instructions: None,
            exposition: Exposition::Flat,
            specs: Vec::new(),
            resources: Vec::new(),
            prompts: Vec::new(),
            models: Vec::new(),
            state: StateMap::default(),
            middleware: Vec::new(),
            access: None,
            audit: None,
            audit_reads: false,
            audit_digest_key: None,
            state_keys: None,
            state_ttl: std::time::Duration::from_secs(600),
            ask_timeout: None,
            metrics: None,
            enabled_toolsets: None,
            disabled_toolsets: Vec::new(),
            max_bytes: None,
            max_tokens: None,
            data_text: crate::action::DataText::default(),
            default_timeout: None,
            rate_limit: None,
            server_concurrency: Some(DEFAULT_SERVER_CONCURRENCY),
            span_level: tracing::Level::DEBUG,
            lock: None,
            serialization_lock: None,
            #[cfg(feature = "gateway")]
            mounts: Vec::new(),
            content_compile: None,
            content_paths: None,
            task_service: None,
        }
    }

    /// Instructions for the agent about the whole server.
    #[must_use]
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// How tools are exposed (flat by default).
    #[must_use]
    pub fn exposition(mut self, exposition: Exposition) -> Self {
        self.exposition = exposition;
        self
    }

    /// Adds a tool generated by `#[tool]`: `builder.tool::<get_invoice>()`.
    #[must_use]
    pub fn tool<T: Tool>(self) -> Self {
        self.tool_spec(T::spec())
    }

    /// Adds a tool declared without macros.
    #[must_use]
    pub fn tool_spec(mut self, spec: ToolSpec) -> Self {
        self.specs.push(spec);
        self
    }

    /// Adds a resource generated by `#[resource]`: `builder.resource::<invoice>()`.
    #[must_use]
    pub fn resource<R: Resource>(self) -> Self {
        self.resource_spec(R::spec())
    }

    /// Adds a resource declared without macros.
    #[must_use]
    pub fn resource_spec(mut self, spec: ResourceSpec) -> Self {
        self.resources.push(spec);
        self.content_compile = Some(crate::catalog::compile);
        self.content_paths = Some(crate::content::hook());
        self
    }

    /// Adds a prompt generated by `#[prompt]`: `builder.prompt::<invoice_review>()`.
    #[must_use]
    pub fn prompt<P: Prompt>(self) -> Self {
        self.prompt_spec(P::spec())
    }

    /// Adds a prompt declared without macros.
    #[must_use]
    pub fn prompt_spec(mut self, spec: PromptSpec) -> Self {
        self.prompts.push(spec);
        self.content_compile = Some(crate::catalog::compile);
        self.content_paths = Some(crate::content::hook());
        self
    }

    /// Makes model `M` known to the server, so that its guarded fields are refused on every
    /// input surface (tool arguments at any depth, resource template variables, prompt and
    /// completion arguments, elicitation answers) under any spelling of their names.
    ///
    /// The models behind the fillable profiles and the presenters of the server's tools,
    /// resources and prompts are known without it. Register the others whose guarded fields a
    /// handler sets: a model that no profile or presenter of this server names is otherwise
    /// unknown when the server is built, and an argument named like its guarded field would go
    /// unnoticed.
    #[must_use]
    pub fn model<M: Model>(mut self) -> Self {
        self.models.push(ModelFields::of::<M>());
        self
    }

    /// Registers shared state, taken by handlers as [`State<T>`](crate::State).
    #[must_use]
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.insert(Arc::new(value));
        self
    }

    /// Sets the upstream that HTTP proxy tools call (`#[tool(http = …)]`,
    /// [`ToolSpec::http`]): base URL, credentials, timeouts and limits, one pooled client.
    #[cfg(feature = "http-client")]
    #[must_use]
    pub fn upstream(self, upstream: crate::upstream::HttpUpstream) -> Self {
        self.state(upstream)
    }

    /// Registers shared state already behind an `Arc`.
    #[must_use]
    pub fn state_arc<T: Send + Sync + 'static>(mut self, value: Arc<T>) -> Self {
        self.state.insert(value);
        self
    }

    /// Adds a router: its tools, under its namespace, with its middleware, tags and toolset.
    #[must_use]
    pub fn router(mut self, router: Router) -> Self {
        self.specs.extend(router.into_specs());
        self
    }

    /// Adds middleware that runs for every tool, before the routers' and the tools' own.
    #[must_use]
    pub fn middleware(mut self, middleware: impl Middleware) -> Self {
        self.middleware.push(Arc::new(middleware));
        self
    }

    /// Puts a `T` in the context of every call, computed by `provider` (see
    /// [`Router::provide`]); it runs where it is added among the server's middleware.
    #[must_use]
    pub fn provide<T, F>(self, provider: F) -> Self
    where
        T: Send + Sync + Clone + 'static,
        F: Fn(&crate::context::CallContext) -> Result<T, crate::error::ToolError>
            + Send
            + Sync
            + 'static,
    {
        self.middleware(crate::middleware::Provide::new(provider))
    }

    /// Sets the access policy, evaluated per request for `tools/list` and every call.
    #[must_use]
    pub fn access(mut self, policy: impl AccessPolicy) -> Self {
        self.access = Some(Arc::new(policy));
        self
    }

    /// Sets the audit sink that records every successful call that is not read-only. The
    /// record is required: when the sink fails, the agent is told
    /// [`AUDIT_FAILED`](crate::codes::AUDIT_FAILED) (the change was made, do not retry) instead
    /// of plain success, and the record goes to the log (see [`audit`](crate::audit)).
    #[must_use]
    pub fn audit(mut self, sink: impl AuditSink) -> Self {
        self.audit = Some(Audit {
            sink: Arc::new(sink),
            required: true,
            reads: self.audit_reads,
        });
        self
    }

    /// Like [`ServerBuilder::audit`], but a sink's failure does not change what the agent is
    /// told: the record goes to the log and the metrics only. For trails that are advice, not
    /// evidence.
    #[must_use]
    pub fn audit_best_effort(mut self, sink: impl AuditSink) -> Self {
        self.audit = Some(Audit {
            sink: Arc::new(sink),
            required: false,
            reads: self.audit_reads,
        });
        self
    }

    /// Makes the audit sink record successful reads too: query tools, `resources/read` (the
    /// record's `tool` is `resources/read`, its `action` the resource's key, its digest that of
    /// the template's variables) and `prompts/get` (`tool` `prompts/get`). By default reads,
    /// like failed calls, are not recorded. A required record that is lost fails the read with
    /// `AUDIT_FAILED` (nothing was changed, so it may be retried).
    #[must_use]
    pub fn audit_reads(mut self) -> Self {
        self.audit_reads = true;
        if let Some(audit) = &mut self.audit {
            audit.reads = true;
        }
        self
    }

    /// The key of the audit record's digest of arguments that carry a hidden value (a
    /// [`Hidden`](crate::Hidden) field of a profile, or anything holding one): such a record's
    /// `arguments_digest` is an HMAC-SHA-256 under it, written `hmac-sha256:…` (see
    /// [`AuditRecord::arguments_digest`](crate::AuditRecord::arguments_digest)), so that the
    /// trail is no offline oracle for a low-entropy secret. Arguments without a hidden value
    /// keep their plain SHA-256.
    ///
    /// Without this, the server makes one random key when it is built: keyed digests can then
    /// be compared only within one process's lifetime. Give every replica the same key (from
    /// your secret store, never from the trail's own database) to compare them across replicas
    /// and restarts; whoever holds the key can test guesses against the trail.
    #[must_use]
    pub fn audit_digest_key(mut self, key: DigestKey) -> Self {
        self.audit_digest_key = Some(key);
        self
    }

    /// The keys that seal the `requestState` of elicitation rounds on protocol 2026-07-28
    /// (see [`elicit`](crate::elicit)), newest first: the first signs, all verify, so a key
    /// rotates by adding the new one first and removing the old one once its states expired.
    ///
    /// Without this, the server makes one random key when it is built: fine for one process,
    /// **unsuitable for replicas** (a retry reaching another replica is refused with
    /// `REQUEST_STATE_UNKNOWN_KEY`) and for restarts (rounds in flight are refused). Give every
    /// replica the same keys.
    #[must_use]
    pub fn request_state_keys(mut self, keys: crate::request_state::StateKeys) -> Self {
        self.state_keys = Some(keys);
        self
    }

    /// How long a sealed request state stays valid (10 minutes by default): the time a user has
    /// to answer a question.
    #[must_use]
    pub fn request_state_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.state_ttl = ttl;
        self
    }

    /// How long each question a handler asks its client (elicitation, sampling, roots) waits
    /// for the answer, for tools that do not say ([`DEFAULT_ASK_TIMEOUT`] otherwise). Past it
    /// the call fails with a retryable `NO_ANSWER`; on 2026-07-28 the sealed state of the
    /// question expires with it. See [`waiting`](crate::waiting).
    ///
    /// [`DEFAULT_ASK_TIMEOUT`]: crate::DEFAULT_ASK_TIMEOUT
    #[must_use]
    pub fn ask_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.ask_timeout = Some(timeout);
        self
    }

    /// The concurrency limit of the server as a whole, over every tool (built in or proxied),
    /// read and prompt: [`DEFAULT_SERVER_CONCURRENCY`] unless set. A call takes one of its
    /// slots after its tool's own guards; past `max_active` running and `max_queued` waiting,
    /// or past its tenant's share of either (`tenant_share_percent`, half by default), it gets
    /// a retryable `SERVER_BUSY` with the retry hint at once, so that one tenant flooding many
    /// tools never denies another. A call waiting on a person lends its slot back, as it does
    /// its tool's (see [`waiting`](crate::waiting)). `None` turns the limit off.
    ///
    /// [`DEFAULT_SERVER_CONCURRENCY`]: crate::DEFAULT_SERVER_CONCURRENCY
    #[must_use]
    pub fn server_concurrency(mut self, limits: Option<Concurrency>) -> Self {
        self.server_concurrency = limits;
        self
    }

    /// Sets the metrics hooks.
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<dyn Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Serves only the tools of these toolsets (and the tools in no toolset).
    #[must_use]
    pub fn enable_toolsets<I, S>(mut self, toolsets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.enabled_toolsets = Some(toolsets.into_iter().map(Into::into).collect());
        self
    }

    /// Does not serve the tools of these toolsets.
    #[must_use]
    pub fn disable_toolsets<I, S>(mut self, toolsets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.disabled_toolsets
            .extend(toolsets.into_iter().map(Into::into));
        self
    }

    /// The level of the span of every call, read and prompt (`tools/call`, `resources/read`,
    /// `prompts/get`): `DEBUG` by default, like tower-http's request spans (enable
    /// `fusion::call=debug`, or raise it to `INFO` here).
    #[must_use]
    pub fn call_span_level(mut self, level: tracing::Level) -> Self {
        self.span_level = level;
        self
    }

    /// A lock shared by the server's replicas: every serialized call (a destructive write, or
    /// `serialize = "…"`) takes it after its in-process FIFO turn and holds it until it ends,
    /// so that the serialization holds across processes (PostgreSQL advisory locks, say). The
    /// other guards (concurrency limits, rate limits, egress budgets) stay per process.
    #[must_use]
    pub fn serialization_lock(mut self, lock: impl crate::guard::SerializationLock) -> Self {
        self.serialization_lock = Some(Arc::new(lock));
        self
    }

    /// The timeout of every tool that does not set its own: a call that takes longer is
    /// stopped and answered `TIMEOUT`, retryable.
    #[must_use]
    pub fn default_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.default_timeout = Some(timeout);
        self
    }

    /// Limits how often each caller (by verified subject; all anonymous callers share one
    /// bucket) may call any tool of the server; beyond it a call gets `RATE_LIMITED` with the
    /// time to wait. A tool's own limit applies too.
    #[must_use]
    pub fn rate_limit(mut self, limit: RateLimit) -> Self {
        self.rate_limit = Some(limit);
        self
    }

    /// Mounts an upstream MCP server: its tools are served as `{prefix}_{tool}`, through this
    /// server's access policy, toolsets, middleware, spans, metrics and audit (see
    /// [`gateway`](crate::gateway)). Building the server starts the upstream, so it must be
    /// built inside a Tokio runtime.
    #[cfg(feature = "gateway")]
    #[must_use]
    pub fn mount(mut self, prefix: impl Into<String>, upstream: crate::gateway::Upstream) -> Self {
        self.mounts.push((prefix.into(), upstream));
        self.task_service = Some(crate::serve::tasks::hook());
        self
    }

    /// The egress budget of every tool that does not set its own.
    #[must_use]
    pub fn max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = Some(max_bytes);
        self
    }

    /// The token budget of every tool that sets none and whose presenter sets none (see
    /// [`ToolSpec::with_max_tokens`](crate::ToolSpec::with_max_tokens); feature `tokens`).
    #[must_use]
    pub fn max_tokens(mut self, max_tokens: usize) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// The form of the data block of every tool that does not set its own
    /// ([`ToolSpec::with_data_text`](crate::spec::ToolSpec::with_data_text)), for clients that
    /// read `structuredContent`: [`DataText::Compact`](crate::action::DataText::Compact) by
    /// default (a uniform list as a table), [`DataText::Json`](crate::action::DataText::Json)
    /// for a server whose clients' programs parse the text copy. Clients before
    /// `structuredContent` get JSON whatever this says.
    #[must_use]
    pub fn data_text(mut self, form: crate::action::DataText) -> Self {
        self.data_text = form;
        self
    }

    /// Makes [`build`](ServerBuilder::build) fail closed unless the server's surface is the
    /// one this lockfile describes (SPEC L1): a connector never serves tools, schemas,
    /// annotations or egress that were not reviewed. Any change fails, cosmetic ones too, and
    /// [`BuildError::lock_diff`] lists them, classified. A lockfile that cannot be read, or
    /// whose digests do not match its content (edited by hand), fails the build too.
    ///
    /// ```no_run
    /// # // The lockfile of this example is not on disk: read as empty text.
    /// # macro_rules! include_str { ($path:literal) => { "" } }
    /// # fn main() -> Result<(), fusion_runtime::BuildError> {
    /// use fusion_runtime::ServerBuilder;
    ///
    /// let server = ServerBuilder::new("billing", "1.0.0")
    ///     // .tool::<…>() …
    ///     .lock(include_str!("../fusion.lock"))
    ///     .build()?;
    /// # let _ = server;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// The lockfile is written by [`lock::check`](crate::lock::check) with
    /// `FUSION_LOCK=update`; see [`lock`](crate::lock).
    #[must_use]
    pub fn lock(mut self, reviewed: impl Into<String>) -> Self {
        self.lock = Some((reviewed.into(), crate::lock::enforce));
        self
    }

    /// The guarded fields of every model the server knows: registered, behind a profile, or
    /// presented (nested presenters included).
    fn guarded_names(&self) -> GuardedNames {
        let mut names = GuardedNames::default();
        let mut presenters: Vec<PresenterInfo> = Vec::new();
        for model in &self.models {
            names.add(*model);
        }
        for spec in &self.specs {
            spec.params.models().for_each(|model| names.add(model));
            presenters.extend(spec.presenter.clone());
        }
        for spec in &self.resources {
            spec.params.models().for_each(|model| names.add(model));
            presenters.extend(spec.presenter.clone());
        }
        for spec in &self.prompts {
            spec.params.models().for_each(|model| names.add(model));
            presenters.extend(spec.presenters.iter().cloned());
        }
        // Nested presenters may nest themselves: each presenter is read once.
        let mut seen = std::collections::HashSet::new();
        while let Some(presenter) = presenters.pop() {
            if !seen.insert(presenter.name) {
                continue;
            }
            names.add(ModelFields {
                name: presenter.model,
                fields: presenter.model_fields,
            });
            presenters.extend(presenter.nested.iter().map(|nested| (nested.presenter)()));
        }
        names
    }

    /// Keeps the tools whose toolset is served; a toolset named in the lists that no tool
    /// declares is a mistake (a typo would silently serve everything or nothing).
    fn served_specs(&mut self, problems: &mut Vec<String>) -> Vec<ToolSpec> {
        #[cfg_attr(not(feature = "gateway"), allow(unused_mut))]
        let mut declared: Vec<String> = self
            .specs
            .iter()
            .filter_map(|spec| spec.toolset.as_deref().map(str::to_owned))
            .chain(
                self.resources
                    .iter()
                    .filter_map(|spec| spec.toolset.as_deref().map(str::to_owned)),
            )
            .chain(
                self.prompts
                    .iter()
                    .filter_map(|spec| spec.toolset.as_deref().map(str::to_owned)),
            )
            .collect();
        // A mounted upstream's tools are one toolset, named after its prefix by default.
        #[cfg(feature = "gateway")]
        {
            declared.extend(self.mounts.iter().map(|(prefix, upstream)| {
                upstream.toolset.clone().unwrap_or_else(|| prefix.clone())
            }));
            let (enabled, disabled) = (&self.enabled_toolsets, &self.disabled_toolsets);
            self.mounts.retain(|(prefix, upstream)| {
                let toolset = upstream.toolset.as_deref().unwrap_or(prefix);
                enabled
                    .as_ref()
                    .is_none_or(|enabled| enabled.iter().any(|name| name == toolset))
                    && !disabled.iter().any(|name| name == toolset)
            });
        }
        for named in self
            .enabled_toolsets
            .iter()
            .flatten()
            .chain(&self.disabled_toolsets)
        {
            if !declared.contains(named) {
                problems.push(format!("toolset `{named}` has no tools"));
            }
        }
        let served = |toolset: Option<&str>| match toolset {
            None => true,
            Some(toolset) => {
                self.enabled_toolsets
                    .as_ref()
                    .is_none_or(|enabled| enabled.iter().any(|name| name == toolset))
                    && !self.disabled_toolsets.iter().any(|name| name == toolset)
            }
        };
        self.resources
            .retain(|spec| served(spec.toolset.as_deref()));
        self.prompts.retain(|spec| served(spec.toolset.as_deref()));
        std::mem::take(&mut self.specs)
            .into_iter()
            .filter(|spec| served(spec.toolset.as_deref()))
            .collect()
    }

    /// Checks every tool and compiles the server. Fails, listing every problem, when a name is
    /// taken twice, a glob matches no tool, a suggestion or error action names a tool that does
    /// not exist, a parameter cannot be provided, or a setting does not fit its verb; and, with
    /// [`lock`](ServerBuilder::lock), when the surface is not the reviewed one.
    pub fn build(mut self) -> Result<Server, BuildError> {
        let lock = self.lock.take();
        let mut problems = Vec::new();
        let mut guarded_inputs: Vec<GuardedInput> = Vec::new();
        // Every model known, from every tool, resource and prompt declared (served or not).
        let guarded = Arc::new(self.guarded_names());
        let specs: Vec<(ToolKey, ToolSpec)> = self
            .served_specs(&mut problems)
            .into_iter()
            .filter_map(|spec| match spec.key.clone() {
                Ok(key) => Some((key, spec)),
                Err(problem) => {
                    problems.push(format!("invalid tool name {problem}"));
                    None
                }
            })
            .collect();
        let task_service = self
            .task_service
            .or_else(|| specs.iter().find_map(|(_, spec)| spec.task_service));
        let all_keys: Vec<ToolKey> = specs.iter().map(|(key, _)| key.clone()).collect();
        unknown_suggestions(&specs, &all_keys, &mut problems);
        unknown_recoveries(&specs, &all_keys, &mut problems);
        // What a mutation may invalidate: tools, and the resources and prompts that show data.
        let content_keys = crate::catalog::keys_of(&self.resources, &self.prompts);

        let mut by_key = HashMap::new();
        let mut actions = Vec::with_capacity(specs.len());
        let mut names = Names::default();
        for (key, spec) in specs {
            if by_key
                .insert(key.as_str().to_owned(), actions.len())
                .is_some()
            {
                problems.push(format!("two tools are named `{key}`"));
                continue;
            }
            let exposure = exposure_of(&key, self.exposition);
            names.insert(&key, &exposure);
            let context = CompileContext {
                all_keys: &all_keys,
                content_keys: &content_keys,
                state: &self.state,
                server_middleware: &self.middleware,
                server_version: &self.version,
                max_bytes: self.max_bytes,
                max_tokens: self.max_tokens,
                data_text: self.data_text,
                default_timeout: self.default_timeout,
                serialization_lock: self.serialization_lock.as_ref(),
                guarded: &guarded,
            };
            if let Some(action) = compile_action(
                key,
                exposure,
                spec,
                &context,
                &mut problems,
                &mut guarded_inputs,
            ) {
                actions.push(action);
            }
        }
        if !problems.is_empty() {
            return Err(BuildError::new(problems).with_guarded_inputs(guarded_inputs));
        }
        name_stale(&mut actions);
        #[cfg(feature = "tokens")]
        if actions
            .iter()
            .any(|action| action.facts.max_tokens.is_some())
        {
            crate::envelope::load_tokenizer();
        }

        let tools = expose(&actions, &names, &mut problems);
        let mut by_name = HashMap::new();
        for (index, tool) in tools.iter().enumerate() {
            if by_name.insert(tool.name.to_string(), index).is_some() {
                problems.push(format!(
                    "two tools are exposed under the name `{}`",
                    tool.name
                ));
            }
            check_exposed_name(&tool.name, &mut problems);
        }
        let content =
            self.content_compile
                .map_or_else(crate::catalog::Content::default, |compile| {
                    compile(
                        std::mem::take(&mut self.resources),
                        std::mem::take(&mut self.prompts),
                        &crate::catalog::ContentContext {
                            parts: ServerParts {
                                state: self.state.clone(),
                                provided: self
                                    .middleware
                                    .iter()
                                    .flat_map(|middleware| middleware.provides())
                                    .collect(),
                            },
                            middleware: &self.middleware,
                            version: &self.version,
                            timeout: self.default_timeout,
                            guarded: &guarded,
                        },
                        &all_keys,
                        &mut problems,
                        &mut guarded_inputs,
                    )
                });
        // Started last, once nothing else can fail.
        #[cfg(feature = "gateway")]
        let gateway = if problems.is_empty() {
            crate::gateway::Gateway::start(
                std::mem::take(&mut self.mounts),
                tools.iter().map(|tool| tool.definition.clone()).collect(),
                by_key.keys().cloned().collect(),
                &self.middleware,
                &self.version,
                &mut problems,
            )
        } else {
            None
        };
        if !problems.is_empty() {
            return Err(BuildError::new(problems).with_guarded_inputs(guarded_inputs));
        }
        // An elicitation's type is known only when the question is asked: `Elicit` reads the
        // guarded names from the state, under a type no handler can name.
        if !guarded.is_empty() {
            self.state.insert(guarded);
        }
        let server = Server {
            inner: Arc::new(ServerInner {
                name: self.name,
                version: self.version,
                // Tool keys between backticks, as the agent calls those tools.
                instructions: self
                    .instructions
                    .map(|instructions| names.rewrite(&instructions).into_owned()),
                exposition: self.exposition,
                tools,
                by_name,
                actions,
                by_key,
                names,
                state: Arc::new(self.state),
                access: self.access,
                audit: self.audit,
                audit_digest_key: self.audit_digest_key.unwrap_or_else(DigestKey::random),
                metrics: self.metrics,
                rate_limiter: self.rate_limit.map(RateLimiter::new),
                server_slots: self.server_concurrency.map(ConcurrencyGuard::for_server),
                span_level: self.span_level,
                #[cfg(feature = "gateway")]
                gateway,
                task_service,
                content_paths: self.content_paths,
                grouped_views: Default::default(),
                content,
                state_keys: self
                    .state_keys
                    .unwrap_or_else(crate::request_state::StateKeys::random),
                state_ttl: self.state_ttl,
                ask_timeout: self.ask_timeout,
                #[cfg(feature = "bench-hooks")]
                measured_calls: Default::default(),
            }),
        };
        if let Some((reviewed, enforce)) = lock {
            enforce(&server, &reviewed)?;
        }
        Ok(server)
    }
}

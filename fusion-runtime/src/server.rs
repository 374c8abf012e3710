//! A compiled server (SPEC T4): immutable, shared by `Arc`, read back through [`ToolInfo`] and
//! [`ActionInfo`]. [`ServerBuilder`](crate::ServerBuilder) makes one; the request path
//! ([`Server::call_tool`]) runs its actions.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use rmcp::model::Tool as ToolDefinition;

use crate::access::AccessPolicy;
use crate::action::{ActionFacts, ActionInfo, Exposition, Names};
use crate::args::ArgLayout;
use crate::audit::AuditSink;
use crate::context::{CallContext, StateMap};
use crate::envelope::SealedParts;
use crate::guard::{ConcurrencyGuard, RateLimiter, SerialGuard};
use crate::middleware::Middleware;
use crate::observe::Metrics;
use crate::spec::Handler;

/// A compiled, immutable server. Cloning is an `Arc` clone.
#[derive(Clone)]
pub struct Server {
    pub(crate) inner: Arc<ServerInner>,
}

pub(crate) struct ServerInner {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) instructions: Option<String>,
    pub(crate) exposition: Exposition,
    pub(crate) tools: Vec<ExposedTool>,
    pub(crate) by_name: HashMap<String, usize>,
    pub(crate) actions: Vec<CompiledAction>,
    pub(crate) by_key: HashMap<String, usize>,
    pub(crate) names: Names,
    pub(crate) state: Arc<StateMap>,
    pub(crate) access: Option<Arc<dyn AccessPolicy>>,
    pub(crate) audit: Option<Audit>,
    /// Keys the audit digest of arguments that carry a hidden value (see
    /// [`ServerBuilder::audit_digest_key`](crate::ServerBuilder::audit_digest_key)).
    pub(crate) audit_digest_key: crate::keyed::DigestKey,
    pub(crate) metrics: Option<Arc<dyn Metrics>>,
    /// The rate limit of each caller across the server.
    pub(crate) rate_limiter: Option<RateLimiter>,
    /// The concurrency limit of the server as a whole, each tenant within its share.
    pub(crate) server_slots: Option<crate::guard::ConcurrencyGuard>,
    pub(crate) span_level: tracing::Level,
    /// Mounted upstream servers (SPEC R7).
    #[cfg(feature = "gateway")]
    pub(crate) gateway: Option<Arc<crate::gateway::Gateway>>,
    /// What serves its tools that may run as tasks (see
    /// [`ToolSpec::with_task`](crate::ToolSpec::with_task)).
    pub(crate) task_service: Option<crate::task::TaskHook>,
    /// The request paths of its resources and prompts, when it has any.
    pub(crate) content_paths: Option<crate::catalog::ContentHook>,
    /// Grouped definitions per set of visible actions (access policy only).
    pub(crate) grouped_views: GroupedViews,
    /// Resources and prompts.
    pub(crate) content: crate::catalog::Content,
    /// Keys sealing the state of elicitation rounds, and how long a state lives.
    pub(crate) state_keys: crate::request_state::StateKeys,
    pub(crate) state_ttl: std::time::Duration,
    /// How long a question to the client waits, unless its tool says.
    pub(crate) ask_timeout: Option<std::time::Duration>,
    /// Calls that measured anything (a clock read, an audit digest): a probe for tests of the
    /// path that measures nothing when nobody listens.
    #[cfg(feature = "bench-hooks")]
    pub(crate) measured_calls: std::sync::atomic::AtomicU64,
}

/// The definitions of grouped tools restricted to the actions one caller may call, keyed by
/// those actions (indices into the server's actions, which also tell the tool): callers with
/// the same rights share one definition, built once instead of on every `tools/list`.
#[derive(Debug, Default)]
pub(crate) struct GroupedViews {
    views: RwLock<HashMap<Box<[usize]>, ToolDefinition>>,
}

/// Distinct subsets kept at most. Rights come in few shapes (roles, scopes); a policy that
/// yields more only rebuilds more often.
const MAX_VIEWS: usize = 256;

impl GroupedViews {
    /// The definition for the actions `visible`, built by `build` the first time.
    pub(crate) fn get_or_build(
        &self,
        visible: &[usize],
        build: impl FnOnce() -> ToolDefinition,
    ) -> ToolDefinition {
        if let Some(definition) = self
            .views
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(visible)
        {
            return definition.clone();
        }
        let definition = build();
        let mut views = self.views.write().unwrap_or_else(PoisonError::into_inner);
        if views.len() >= MAX_VIEWS {
            views.clear();
        }
        views.insert(visible.into(), definition.clone());
        definition
    }
}

/// The audit sink, and whether its record is required for a call to report success.
pub(crate) struct Audit {
    pub(crate) sink: Arc<dyn AuditSink>,
    pub(crate) required: bool,
    /// Successful reads (query tools, resource reads, prompts) are recorded too.
    pub(crate) reads: bool,
}

impl Server {
    /// The data of a request state sealed by this server (or a replica sharing its keys) for
    /// `binding`, when it verifies and has not expired.
    pub(crate) fn open_request_state(
        &self,
        token: &str,
        binding: &crate::request_state::Binding,
    ) -> Result<serde_json::Value, crate::request_state::StateError> {
        self.inner.state_keys.open(token, binding)
    }

    /// `data` sealed for `binding`, to live as long as this server's states do, or until
    /// `deadline` (its questions' deadline) when that is sooner.
    pub(crate) fn seal_request_state(
        &self,
        binding: &crate::request_state::Binding,
        data: &serde_json::Value,
        deadline: Option<std::time::Duration>,
    ) -> String {
        let ttl = deadline.map_or(self.inner.state_ttl, |deadline| {
            deadline.min(self.inner.state_ttl)
        });
        self.inner.state_keys.seal(binding, data, ttl)
    }

    /// A request for `name` (a tool, prompt or resource) refused before its handler ran,
    /// sealed as the failure envelope a handler's error would be.
    pub(crate) fn seal_refusal(
        &self,
        name: &str,
        error: crate::error::ToolError,
    ) -> crate::envelope::Sealed {
        let parts = SealedParts::for_tool(name);
        crate::envelope::seal_error(&self.inner.names, &parts, error)
    }
}

/// The answer of a `tools/call` ([`Server::call_tool`]): the sealed result the agent receives,
/// and what the transport does with it besides (a successful write's invalidations tell the
/// sessions subscribed to the resources they match). Typed until the transport turns it into
/// the protocol's result with [`ToolResult::into_protocol`].
#[derive(Debug)]
pub struct ToolResult {
    sealed: crate::envelope::Sealed,
    form: crate::envelope::ClientForm,
}

impl ToolResult {
    pub(crate) fn new(sealed: crate::envelope::Sealed) -> Self {
        ToolResult {
            sealed,
            form: crate::envelope::ClientForm::default(),
        }
    }

    /// The result as it is written for a client that reads it in `form` (see
    /// [`ClientForm::of`](crate::envelope::ClientForm::of)).
    #[must_use]
    pub fn for_client(mut self, form: crate::envelope::ClientForm) -> Self {
        self.form = form;
        self
    }

    /// Whether the agent receives a failure (`isError: true`).
    pub fn is_error(&self) -> bool {
        self.sealed.is_error()
    }

    /// `ok`, or the failure's error code (as spans, metrics and the audit trail record it).
    pub fn outcome(&self) -> &str {
        self.sealed.outcome.label()
    }

    /// The globs of the tool keys whose results a success invalidates (none for a failure or
    /// a read).
    pub fn invalidates(&self) -> &[crate::key::Glob] {
        self.sealed.invalidated()
    }

    /// What sealing made of the call, for the transport to write.
    pub(crate) fn into_sealed(self) -> crate::envelope::Sealed {
        self.sealed
    }

    /// The form this result is written in (see [`ToolResult::for_client`]).
    pub(crate) fn form(&self) -> crate::envelope::ClientForm {
        self.form
    }
}

impl From<ToolResult> for rmcp::model::CallToolResult {
    fn from(result: ToolResult) -> Self {
        result.into_protocol()
    }
}

/// One MCP tool: a single action, or the actions of a namespace (grouped exposition).
pub(crate) struct ExposedTool {
    pub(crate) name: Arc<str>,
    pub(crate) definition: ToolDefinition,
    pub(crate) dispatch: Dispatch,
}

/// How an exposed tool finds its action.
pub(crate) enum Dispatch {
    Single(usize),
    Grouped {
        actions: HashMap<String, usize>,
        names: Vec<String>,
        /// The actions' indices, in the order of `names`.
        members: Vec<usize>,
    },
}

/// One action, compiled: its facts, and the parts the request path runs.
pub(crate) struct CompiledAction {
    pub(crate) facts: ActionFacts,
    pub(crate) handler: Arc<dyn Handler>,
    pub(crate) layout: ArgLayout,
    /// Server middleware, then the router's, then the action's own.
    pub(crate) middleware: Box<[Arc<dyn Middleware>]>,
    pub(crate) concurrency: Option<ConcurrencyGuard>,
    pub(crate) serial: Option<SerialGuard>,
    /// How long the handler's questions wait, when the tool says.
    pub(crate) ask_timeout: Option<std::time::Duration>,
    /// The lock shared by replicas, taken after `serial`'s turn (only when `serial` is set).
    pub(crate) shared_lock: Option<Arc<dyn crate::guard::SerializationLock>>,
    /// The rate limit of each caller of this action.
    pub(crate) rate_limiter: Option<RateLimiter>,
    /// Takes an integer `offset` and can be cut: the truncation notice names the next offset.
    pub(crate) pages_by_offset: bool,
    /// No middleware and no guard: nothing runs around the handler.
    pub(crate) bare: bool,
    /// The handler takes an [`AuditEntry`](crate::audit::AuditEntry): each call gets one.
    pub(crate) audit_entry: bool,
    /// The handler takes an [`Elicit`](crate::elicit::Elicit): it may ask the user (recorded in
    /// the lockfile).
    pub(crate) asks_user: bool,
    /// The handler takes something that can talk to the client while it runs (elicitation,
    /// sampling, roots, log messages, an upstream that forwards its questions): its calls need
    /// the session's own request stream.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) talks_to_client: bool,
    pub(crate) sealed: SealedParts,
}

impl CompiledAction {
    pub(crate) fn info(&self) -> ActionInfo<'_> {
        ActionInfo(&self.facts)
    }

    /// The name of the MCP tool that carries the action.
    pub(crate) fn tool(&self) -> &str {
        self.facts.exposure.tool()
    }
}

/// A protocol-level failure of `tools/call`: the request names no tool. It stays a JSON-RPC
/// error (SPEC E3); every other failure is a tool result with `isError`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownTool(pub String);

impl std::fmt::Display for UnknownTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown tool: {}", self.0)
    }
}

impl std::error::Error for UnknownTool {}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("name", &self.inner.name)
            .field("version", &self.inner.version)
            .field("exposition", &self.inner.exposition)
            .field("tools", &self.inner.tools.len())
            .field("actions", &self.inner.actions.len())
            .finish_non_exhaustive()
    }
}

impl Server {
    /// The server's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The server's version.
    pub fn version(&self) -> &str {
        &self.inner.version
    }

    /// Instructions for the agent, as the author wrote them.
    pub fn instructions(&self) -> Option<&str> {
        self.inner.instructions.as_deref()
    }

    /// The instructions a client receives at the handshake: the author's, then, when the
    /// server has tools, one paragraph on the envelope every tool answers with. Said once
    /// here, so that no tool's output schema repeats it.
    pub fn served_instructions(&self) -> Option<String> {
        let note = (!self.inner.actions.is_empty()).then(crate::schema::envelope_note);
        match (self.instructions(), note) {
            (Some(own), Some(note)) => Some(format!("{own}\n\n{note}")),
            (Some(own), None) => Some(own.to_owned()),
            (None, note) => note.map(str::to_owned),
        }
    }

    /// The exposition mode.
    pub fn exposition(&self) -> Exposition {
        self.inner.exposition
    }

    /// The exposed tools, in registration order.
    pub fn tools(&self) -> impl ExactSizeIterator<Item = ToolInfo<'_>> {
        self.inner.tools.iter().map(|tool| ToolInfo {
            server: &self.inner,
            tool,
        })
    }

    /// The exposed tool called `name`.
    pub fn tool(&self, name: &str) -> Option<ToolInfo<'_>> {
        let index = *self.inner.by_name.get(name)?;
        Some(ToolInfo {
            server: &self.inner,
            tool: &self.inner.tools[index],
        })
    }

    /// Every action, by canonical key, in registration order.
    pub fn actions(&self) -> impl ExactSizeIterator<Item = ActionInfo<'_>> {
        self.inner.actions.iter().map(CompiledAction::info)
    }

    /// The action with this canonical key.
    pub fn action(&self, key: &str) -> Option<ActionInfo<'_>> {
        let index = *self.inner.by_key.get(key)?;
        Some(self.inner.actions[index].info())
    }

    /// Whether an access policy decides, per request, what is listed and callable.
    pub fn has_access_policy(&self) -> bool {
        self.inner.access.is_some()
    }

    /// Whether an audit sink records the calls that are not read-only.
    pub fn has_audit_sink(&self) -> bool {
        self.inner.audit.is_some()
    }

    /// Whether a call succeeds only once its audit record is written (see
    /// [`ServerBuilder::audit`](crate::ServerBuilder::audit)); `false` without a sink.
    pub fn audit_is_required(&self) -> bool {
        self.inner
            .audit
            .as_ref()
            .is_some_and(|audit| audit.required)
    }

    /// The rate limit of each caller across the server, if any.
    pub fn rate_limit(&self) -> Option<crate::guard::RateLimit> {
        self.inner
            .rate_limiter
            .as_ref()
            .map(|limiter| limiter.limit())
    }

    /// A new context for one call, with nothing attached yet.
    pub fn new_context(&self) -> CallContext {
        let mut context = CallContext::new(Arc::clone(&self.inner.state));
        context.request.waiting.ask_timeout = self.inner.ask_timeout;
        context
    }

    /// How many calls measured anything (see the `bench-hooks` feature).
    #[cfg(feature = "bench-hooks")]
    #[doc(hidden)]
    pub fn measured_calls(&self) -> u64 {
        self.inner
            .measured_calls
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The exposed name and arguments that call `key` with `arguments` (adds the
    /// discriminator in grouped exposition).
    pub fn exposed_call(
        &self,
        key: &str,
        arguments: Option<rmcp::model::JsonObject>,
    ) -> Option<(String, rmcp::model::JsonObject)> {
        let exposure = self.inner.names.exposure(key)?;
        Some((
            exposure.tool().to_owned(),
            exposure.arguments(arguments.unwrap_or_default()),
        ))
    }
}

/// An exposed tool, read back.
#[derive(Clone, Copy)]
pub struct ToolInfo<'s> {
    server: &'s ServerInner,
    tool: &'s ExposedTool,
}

impl std::fmt::Debug for ToolInfo<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolInfo")
            .field("name", &self.tool.name)
            .finish_non_exhaustive()
    }
}

impl<'s> ToolInfo<'s> {
    /// The name agents call.
    pub fn name(&self) -> &'s str {
        &self.tool.name
    }

    /// The MCP definition served in `tools/list`.
    pub fn definition(&self) -> &'s ToolDefinition {
        &self.tool.definition
    }

    /// The actions behind this tool (one in flat exposition).
    pub fn actions(&self) -> Vec<ActionInfo<'s>> {
        match &self.tool.dispatch {
            Dispatch::Single(index) => vec![self.server.actions[*index].info()],
            Dispatch::Grouped { members, .. } => members
                .iter()
                .map(|&index| self.server.actions[index].info())
                .collect(),
        }
    }
}

/// Mounted upstreams (SPEC R7): what a server with [`ServerBuilder::mount`] can say of them.
///
/// [`ServerBuilder::mount`]: crate::ServerBuilder::mount
#[cfg(feature = "gateway")]
impl Server {
    pub(crate) fn gateway(&self) -> Option<&Arc<crate::gateway::Gateway>> {
        self.inner.gateway.as_ref()
    }

    /// Waits until every mounted upstream has tried its first start (and, when it started,
    /// fetched its catalog): from then on `tools/list` shows what the upstreams offer. Returns
    /// at once without mounts.
    pub async fn upstreams_ready(&self) {
        if let Some(gateway) = self.gateway() {
            gateway.ready().await;
        }
    }

    /// What each mounted upstream is doing, in mount order.
    pub fn upstreams(&self) -> Vec<crate::gateway::UpstreamStatus> {
        self.gateway()
            .map_or_else(Vec::new, |gateway| gateway.statuses())
    }

    /// The definitions of the proxied tools, as `tools/list` shows them (without an access
    /// policy).
    pub fn proxied_tools(&self) -> Vec<ToolDefinition> {
        self.gateway().map_or_else(Vec::new, |gateway| {
            gateway
                .catalog()
                .proxied()
                .iter()
                .map(|tool| tool.definition.clone())
                .collect()
        })
    }

    /// The definition of the proxied tool `name`, if an upstream offers it now.
    pub fn proxied_tool(&self, name: &str) -> Option<ToolDefinition> {
        let gateway = self.gateway()?;
        let catalog = gateway.catalog();
        catalog.get(name).map(|tool| tool.definition.clone())
    }

    /// The definitions the caller of `context` may see, built-in and proxied (what
    /// `tools/list` serves).
    pub fn listed_tools(&self, context: &CallContext) -> Vec<ToolDefinition> {
        let mut tools = self.visible_tools(context);
        if let Some(gateway) = self.gateway() {
            let catalog = gateway.catalog();
            tools.extend(
                catalog
                    .proxied()
                    .iter()
                    .filter(|tool| self.may_call(tool.info(), context))
                    .map(|tool| tool.definition.clone()),
            );
        }
        tools
    }

    /// Stops every mounted upstream (children get their stdin closed, then are killed if they
    /// linger) and waits for them. Calls to proxied tools then fail `UPSTREAM_UNAVAILABLE`.
    pub async fn shutdown_upstreams(&self) {
        if let Some(gateway) = self.gateway() {
            gateway.stop().await;
        }
    }
}

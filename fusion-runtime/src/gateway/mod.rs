//! The gateway (SPEC R7): upstream MCP servers mounted beside built-in tools, under one access
//! policy, one audit trail and one set of spans and metrics.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use fusion_runtime::ServerBuilder;
//! use fusion_runtime::gateway::Upstream;
//! use std::time::Duration;
//!
//! let server = ServerBuilder::new("gateway", "1.0.0")
//!     // A child process, started now, restarted with backoff when it dies.
//!     .mount("billing", Upstream::stdio("billing").arg("--in-memory"))
//!     // Streamable HTTP, either protocol era.
//!     .mount(
//!         "crm",
//!         Upstream::http("http://127.0.0.1:9000/mcp")
//!             .bearer_token(std::env::var("CRM_TOKEN")?)
//!             .timeout(Duration::from_secs(10)),
//!     )
//!     // Its tools under their own names (`search`, not `docs_search`).
//!     .mount("docs", Upstream::http("http://127.0.0.1:9100/mcp").unprefixed())
//!     .build()?;
//! server.upstreams_ready().await; // first catalogs fetched (or failed)
//! // `billing_get_invoice`, `crm_find_contact`, … beside the built-in tools.
//! # Ok(()) }
//! ```
//!
//! **Listing.** An upstream's tools appear as `{prefix}_{tool}`, or under their own names when
//! mounted [`Upstream::unprefixed`] (policy and audit in front of an existing server, its tools
//! not renamed), their definitions otherwise as the upstream gives them (schemas, annotations,
//! title, `_meta`). Either way the prefix names the mount everywhere else: access policies and
//! audit records see the canonical key `prefix.tool`. A name two tools would have fails
//! closed: a built-in tool keeps it, and a name two upstreams offer is served by neither
//! (whatever the mount order, and after any refresh, so an upstream that gains a tool never
//! takes over calls meant for another's); each collision is logged at error level, naming
//! both, and so is a tool whose key is a built-in tool's. Each upstream's catalog
//! is fetched when it connects and again when it says its tools changed
//! (`notifications/tools/list_changed`: sent unasked by stdio and 2025-11-25 session
//! upstreams, on a `subscriptions/listen` stream the gateway opens to a 2026-07-28 upstream
//! that advertises `tools.listChanged`), and every [`Upstream::refresh_every`] for upstreams
//! that cannot notify; `tools/list` serves a list computed once per change, never a fan-out per
//! request.
//!
//! **Telling clients.** A server with mounts advertises `tools.listChanged`. When the list it
//! serves changes, it sends `notifications/tools/list_changed` to its stdio and 2025-11-25
//! session clients, and on the `subscriptions/listen` streams of 2026-07-28 clients that
//! listen; for those that do not, the `ttlMs` of `tools/list` is never longer than the shortest
//! refresh interval of an upstream.
//!
//! **Calling.** A proxied call takes the path of a built-in one, minus what the upstream does
//! itself (argument validation, presenting): the access policy and rate limit first (a denied
//! call never reaches the upstream), then the server's middleware (with the call's principal),
//! the upstream's concurrency guard, and its timeout. The call is forwarded with the caller's
//! W3C trace context in `_meta`; the upstream's progress notifications reach the caller, and a
//! cancelled call is cancelled upstream. Its result passes intact (`content`,
//! `structuredContent`, `isError`), never re-enveloped, but for the names a Fusion upstream
//! gives its own tools (recovery lines, `availableActions`, suggestions, notices, rules, UI,
//! descriptions), told as this server serves them (module `names`). Every successful proxied call is
//! audited as a write, whatever the upstream's annotations say.
//!
//! **Asking in rounds.** A 2026-07-28 caller's rounds with a proxied tool are the upstream's:
//! the call's `requestState` and `inputResponses` go to the upstream untouched (the gateway's
//! own state keys never see them), with the caller's capabilities in place of the gateway's in
//! a stateless upstream's request; the upstream's `input_required` answer comes back untouched,
//! and so do the JSON-RPC errors that belong to the caller's request: `-32021` for a
//! capability it did not declare, and the refusal of a state or answers it sent back. Such a
//! round is not audited (the call is not done). A caller on a session (2025-11-25, stdio) of a
//! stateless upstream is asked the upstream's questions over its session by the gateway
//! (sampling, elicitation, roots, as its capabilities allow), which then calls the upstream
//! again with the answers under its state. Requests an upstream on a session (stdio,
//! 2025-11-25) sends during a call are answered by the gateway's own client, which declares
//! none of those capabilities.
//!
//! **Tasks.** A server with mounts declares the tasks extension. A caller that declared it and
//! calls a tool of an upstream that speaks 2026-07-28 and declares it has the upstream asked
//! for a task (the call's whole path runs, audit included, with the gateway's credentials); the
//! caller gets an unguessable id of the gateway's, mapped to the upstream's task and owned by
//! the caller as a local task is (module `tasks`). `tasks/get`, `tasks/update` and
//! `tasks/cancel` with it are forwarded for the owner only; a result is renamed and bounded as
//! a proxied call's. An upstream without the extension, or a session one (whose client never
//! declared it), answers every call when it is done.
//!
//! **Logging.** A caller that asked for a log level (`logging/setLevel`, or `_meta` at
//! 2026-07-28) has the upstream asked for the same in the call's `_meta`, and receives the log
//! messages the upstream sends on the call's own HTTP stream; messages a stdio or session
//! upstream sends outside a call's stream belong to no call and are not forwarded.
//!
//! **Credentials (the confused-deputy rule).** A caller's token is the gateway's business only:
//! it is never sent to an upstream, which could replay it elsewhere or act with more than the
//! caller meant to grant. An HTTP upstream gets the credential configured for it: headers
//! ([`Upstream::header`], [`Upstream::bearer_token`]), the gateway's own OAuth client
//! ([`Upstream::client_credentials`]), or with [`ClientCredentials::token_exchange`] a token
//! the authorization server issues per caller for that upstream alone (RFC 8693: the caller as
//! `sub`, the gateway as actor), in exchange for the caller's verified token. Exchanged tokens
//! go in each call's own request on the shared connection and are cached per caller; a
//! caller whose token is not exchanged gets `FORBIDDEN`, and nothing reaches the upstream.
//!
//! **Failing.** An upstream that cannot be reached, died or did not answer in time gives a
//! retryable error with an `errorId` (the cause is logged under it, never shown); a JSON-RPC
//! error of the upstream is mapped to a code (`VALIDATION_ERROR`, `UNKNOWN_TOOL`,
//! `UPSTREAM_ERROR`), not passed on raw. Calls to different upstreams, and to built-in tools,
//! never wait for each other.
//!
//! The gateway stays a module of `fusion-runtime` (behind its `gateway` feature) rather than a
//! crate of its own: a proxied call runs the server's own stages (access, rate limits,
//! middleware, report, audit) and is sealed like a built-in call, through crate-private parts
//! of the request path. It can move out once a call target is a public trait that a crate
//! outside the runtime can implement.

mod bounds;
pub(crate) mod call;
mod child;
pub(crate) use bounds::{fit_result, fit_task_result};
mod config;
mod credentials;
mod events;
mod failure;
mod http;
mod names;
mod passthrough;
mod progress;
mod read;
mod session;
pub(crate) mod tasks;
mod upstream;

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use rmcp::model::{Tool as ToolDefinition, ToolAnnotations};
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::action::{ActionFacts, ActionInfo, Exposure, Verb};
use crate::envelope::SealedParts;
use crate::guard::Serialization;
use crate::key::ToolKey;
use crate::middleware::Middleware;

pub(crate) use config::UpstreamTransport;
pub use config::{Upstream, UpstreamProtocol};
pub use credentials::ClientCredentials;
pub(crate) use credentials::TokenSource;
use names::Renames;
pub(crate) use passthrough::{Answer, Passthrough};
pub(crate) use upstream::UpstreamState;

/// Error codes of proxied calls, besides the framework's own.
pub mod codes {
    /// The upstream server cannot be reached, died during the call or is restarting:
    /// retryable.
    pub const UPSTREAM_UNAVAILABLE: &str = "UPSTREAM_UNAVAILABLE";
    /// The upstream server answered with a protocol error, or with something that is not a
    /// tool result.
    pub const UPSTREAM_ERROR: &str = "UPSTREAM_ERROR";
    /// The upstream server no longer has the tool (its catalog is being refreshed).
    pub const UNKNOWN_TOOL: &str = "UNKNOWN_TOOL";
    /// The outcome recorded (spans, metrics) for an upstream result with `isError: true`
    /// that carries no Fusion envelope to read a code from.
    pub const UPSTREAM_TOOL_ERROR: &str = "UPSTREAM_TOOL_ERROR";
}

/// The mounted upstreams of a server and the tools they offer now.
pub(crate) struct Gateway {
    upstreams: Vec<Arc<UpstreamState>>,
    /// The server's own middleware, run before every proxied call.
    middleware: Box<[Arc<dyn Middleware>]>,
    /// The definitions of the built-in tools, listed first.
    builtin: Vec<ToolDefinition>,
    builtin_names: HashSet<String>,
    /// The canonical keys of the built-in tools, which access policies and audit see.
    builtin_keys: HashSet<String>,
    catalog: RwLock<Arc<Catalog>>,
    rebuilding: std::sync::Mutex<()>,
    /// Bumped whenever the listed tools change, for `subscriptions/listen` streams.
    changes: watch::Sender<u64>,
    /// Session and stdio clients (2025-11-25), told with `notifications/tools/list_changed`.
    clients: std::sync::Mutex<Vec<Peer<RoleServer>>>,
    /// The shortest interval at which an upstream's catalog is fetched again, if any.
    shortest_refresh: Option<Duration>,
    version: String,
    shutdown: CancellationToken,
    tasks: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The gateway's ids of its callers' upstream tasks (module `tasks`).
    pub(crate) upstream_tasks: tasks::ProxiedTasks,
}

/// Every proxied tool, as listed and called now: replaced whole when an upstream's tools
/// change.
#[derive(Default)]
pub(crate) struct Catalog {
    by_name: HashMap<String, Arc<ProxiedTool>>,
    order: Vec<Arc<ProxiedTool>>,
    /// Built-in definitions, then every proxied one: what `tools/list` pages through.
    listed: Arc<[ToolDefinition]>,
}

/// One tool of an upstream, as this server exposes it.
pub(crate) struct ProxiedTool {
    pub(crate) upstream: usize,
    /// The name the upstream knows it by.
    pub(crate) upstream_name: String,
    /// No argument of it travels in an `Mcp-Param-*` header (SEP-2243): it can be called on the
    /// gateway's own HTTP path, which does not write them.
    pub(crate) plain_headers: bool,
    pub(crate) definition: ToolDefinition,
    /// What the access policy and middleware see.
    pub(crate) facts: ActionFacts,
    /// For the errors the gateway itself answers.
    pub(crate) sealed: SealedParts,
}

impl ProxiedTool {
    pub(crate) fn info(&self) -> ActionInfo<'_> {
        ActionInfo(&self.facts)
    }

    pub(crate) fn name(&self) -> &str {
        self.facts.exposure.tool()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        // Stops the supervisors, which stop their children.
        self.shutdown.cancel();
    }
}

impl Gateway {
    /// Checks the mounts and starts their upstreams (`None` when nothing is mounted).
    pub(crate) fn start(
        mounts: Vec<(String, Upstream)>,
        builtin: Vec<ToolDefinition>,
        builtin_keys: HashSet<String>,
        middleware: &[Arc<dyn Middleware>],
        version: &str,
        problems: &mut Vec<String>,
    ) -> Option<Arc<Gateway>> {
        if mounts.is_empty() {
            return None;
        }
        let before = problems.len();
        let mut prefixes = HashSet::new();
        for (prefix, upstream) in &mounts {
            if ToolKey::parse(prefix.clone()).is_err() || prefix.contains('.') {
                problems.push(format!(
                    "mount prefix `{prefix}` must be ASCII letters, digits, `_` and `-`, starting \
                     with a letter or `_`"
                ));
            }
            if !prefixes.insert(prefix.as_str()) {
                problems.push(format!("two upstreams are mounted under `{prefix}`"));
            }
            upstream::check(prefix, upstream, problems);
            if upstream.max_tokens.is_some() && !crate::envelope::COUNTS_TOKENS {
                problems.push(format!(
                    "upstream `{prefix}` has a token budget, but this server was built without a tokenizer: enable fusion's `tokens` feature"
                ));
            }
        }
        let runtime = tokio::runtime::Handle::try_current();
        if runtime.is_err() {
            problems.push(
                "mounting upstreams starts them: build the server inside a Tokio runtime".into(),
            );
        }
        if problems.len() > before {
            return None;
        }
        let runtime = runtime.ok()?;
        let builtin_names = builtin.iter().map(|tool| tool.name.to_string()).collect();
        let shortest_refresh = mounts
            .iter()
            .filter_map(|(_, upstream)| upstream.refresh_every)
            .min();
        let gateway = Arc::new(Gateway {
            upstreams: mounts
                .into_iter()
                .map(|(prefix, upstream)| Arc::new(UpstreamState::new(prefix, upstream)))
                .collect(),
            middleware: middleware.into(),
            catalog: RwLock::new(Arc::new(Catalog {
                listed: builtin.clone().into(),
                ..Catalog::default()
            })),
            rebuilding: Default::default(),
            changes: watch::channel(0).0,
            clients: Default::default(),
            shortest_refresh,
            builtin,
            builtin_names,
            builtin_keys,
            version: version.to_owned(),
            shutdown: CancellationToken::new(),
            tasks: Default::default(),
            upstream_tasks: Default::default(),
        });
        let tasks = gateway
            .upstreams
            .iter()
            .map(|state| {
                runtime.spawn(upstream::supervise(
                    Arc::clone(state),
                    Arc::downgrade(&gateway),
                    gateway.shutdown.child_token(),
                ))
            })
            .collect();
        *gateway.tasks.lock().unwrap_or_else(PoisonError::into_inner) = tasks;
        Some(gateway)
    }

    /// The catalog now.
    pub(crate) fn catalog(&self) -> Arc<Catalog> {
        Arc::clone(&self.catalog.read().unwrap_or_else(PoisonError::into_inner))
    }

    pub(crate) fn upstream(&self, index: usize) -> &Arc<UpstreamState> {
        &self.upstreams[index]
    }

    pub(crate) fn middleware(&self) -> &[Arc<dyn Middleware>] {
        &self.middleware
    }

    /// Rebuilds the catalog from every upstream's last tool list (one upstream's changed).
    fn rebuild(&self) {
        // One at a time: a rebuild from older tool lists must not replace a newer one.
        let _one = self
            .rebuilding
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // One snapshot of each upstream's tools, for the names served and what it says of them.
        let catalogs: Vec<_> = self.upstreams.iter().map(|state| state.tools()).collect();
        let mut candidates = Vec::new();
        for (index, state) in self.upstreams.iter().enumerate() {
            for tool in catalogs[index].iter() {
                let Some(proxied) = proxy(index, state, tool, &self.version) else {
                    continue;
                };
                // A built-in tool keeps its name and its key: a policy or an audit record must
                // never mistake an upstream's tool for it (an unprefixed mount `health` with a
                // tool `ping` is `health.ping` too).
                if self.builtin_names.contains(proxied.name()) {
                    tracing::error!(
                        upstream = %state.prefix,
                        tool = %tool.name,
                        exposed = %proxied.name(),
                        "an upstream tool is not served: its name `{}` is a built-in tool's",
                        proxied.name()
                    );
                    continue;
                }
                if self.builtin_keys.contains(proxied.facts.key.as_str()) {
                    tracing::error!(
                        upstream = %state.prefix,
                        tool = %tool.name,
                        key = %proxied.facts.key.as_str(),
                        "an upstream tool is not served: its key `{}` is a built-in tool's",
                        proxied.facts.key.as_str()
                    );
                    continue;
                }
                candidates.push(proxied);
            }
        }
        // Fail closed: a name two upstreams offer is served by neither, at start-up and after
        // any refresh. Neither mount order nor who came first decides, so an upstream that
        // gains a tool can never take over the calls (and arguments) meant for another's.
        let mut owners: HashMap<&str, Vec<String>> = HashMap::new();
        for proxied in &candidates {
            owners.entry(proxied.name()).or_default().push(format!(
                "tool `{}` of upstream `{}`",
                proxied.upstream_name, self.upstreams[proxied.upstream].prefix
            ));
        }
        let contested: HashMap<String, Vec<String>> = owners
            .into_iter()
            .filter(|(_, owners)| owners.len() > 1)
            .map(|(name, owners)| (name.to_owned(), owners))
            .collect();
        let mut served = Vec::with_capacity(candidates.len());
        let mut keys = HashSet::new();
        for proxied in candidates {
            let prefix = &self.upstreams[proxied.upstream].prefix;
            if let Some(owners) = contested.get(proxied.name()) {
                tracing::error!(
                    upstream = %prefix,
                    tool = %proxied.upstream_name,
                    exposed = %proxied.name(),
                    "an upstream tool is not served: its name `{}` is offered by {}",
                    proxied.name(),
                    owners.join(" and ")
                );
                continue;
            }
            if !keys.insert(proxied.facts.key.clone()) {
                tracing::error!(
                    upstream = %prefix,
                    tool = %proxied.upstream_name,
                    key = %proxied.facts.key.as_str(),
                    "an upstream tool is not served: another tool of it already has its key"
                );
                continue;
            }
            served.push(proxied);
        }
        // What an upstream says of its tools names them as it serves them: told as they are
        // served here (see `names`), starting with their descriptions.
        let renames: Vec<Renames> = catalogs
            .iter()
            .enumerate()
            .map(|(index, tools)| {
                let mut here: HashMap<String, Option<String>> = tools
                    .iter()
                    .map(|tool| (tool.name.to_string(), None))
                    .collect();
                for proxied in served.iter().filter(|proxied| proxied.upstream == index) {
                    here.insert(
                        proxied.upstream_name.clone(),
                        Some(proxied.name().to_owned()),
                    );
                }
                Renames::new(here)
            })
            .collect();
        let mut by_name: HashMap<String, Arc<ProxiedTool>> = HashMap::new();
        let mut order = Vec::with_capacity(served.len());
        for mut proxied in served {
            let renames = &renames[proxied.upstream];
            if let Some(description) = &proxied.definition.description
                && let Cow::Owned(description) = renames.text(description)
            {
                proxied.facts.description.clone_from(&description);
                proxied.definition.description = Some(description.into());
            }
            let proxied = Arc::new(proxied);
            by_name.insert(proxied.name().to_owned(), Arc::clone(&proxied));
            order.push(proxied);
        }
        for (state, renames) in self.upstreams.iter().zip(renames) {
            state.set_renames(renames);
        }
        let listed: Vec<ToolDefinition> = self
            .builtin
            .iter()
            .cloned()
            .chain(order.iter().map(|tool| tool.definition.clone()))
            .collect();
        let listed: Arc<[ToolDefinition]> = listed.into();
        let catalog = Arc::new(Catalog {
            by_name,
            order,
            listed: Arc::clone(&listed),
        });
        let previous = std::mem::replace(
            &mut *self.catalog.write().unwrap_or_else(PoisonError::into_inner),
            catalog,
        );
        if *previous.listed != *listed {
            self.changes.send_modify(|version| *version += 1);
            self.notify_clients();
        }
    }

    /// A session or stdio client finished its handshake: it is told when the list changes,
    /// while it is connected.
    pub(crate) fn register_client(&self, peer: Peer<RoleServer>) {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.retain(|client| !client.is_transport_closed());
        clients.push(peer);
    }

    /// Sends `notifications/tools/list_changed` to every connected session and stdio client.
    fn notify_clients(&self) {
        let clients = {
            let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
            clients.retain(|client| !client.is_transport_closed());
            clients.clone()
        };
        if clients.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            for client in clients {
                if let Err(error) = client.notify_tool_list_changed().await {
                    tracing::debug!(%error, "a client was not told that the tool list changed");
                }
            }
        });
    }

    /// Follows the changes of the listed tools (a `subscriptions/listen` stream).
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// How long a client may keep a `tools/list` result: `configured`, but never longer than
    /// the shortest refresh interval of an upstream (the list may have changed by then).
    pub(crate) fn list_ttl(&self, configured: Duration) -> Duration {
        self.shortest_refresh
            .map_or(configured, |refresh| refresh.min(configured))
    }
}

impl Catalog {
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<ProxiedTool>> {
        self.by_name.get(name)
    }

    /// Built-in definitions, then proxied ones.
    pub(crate) fn listed(&self) -> &Arc<[ToolDefinition]> {
        &self.listed
    }

    /// The proxied tools, in mount order.
    pub(crate) fn proxied(&self) -> &[Arc<ProxiedTool>] {
        &self.order
    }
}

/// An upstream tool as this server exposes it, or `None` (logged) when its name cannot be
/// exposed.
fn proxy(
    index: usize,
    state: &UpstreamState,
    tool: &ToolDefinition,
    version: &str,
) -> Option<ProxiedTool> {
    let prefix = &state.prefix;
    let exposed = if state.config.unprefixed {
        tool.name.to_string()
    } else {
        format!("{prefix}_{}", tool.name)
    };
    let mut problems = Vec::new();
    crate::key::check_exposed_name(&exposed, &mut problems);
    if !problems.is_empty() {
        tracing::error!(upstream = %prefix, tool = %tool.name, problem = %problems[0],
            "an upstream tool is not served");
        return None;
    }
    // The canonical key access policies and audit records see: `prefix.tool`, with what a key
    // cannot hold replaced by `_`.
    let mut action: String = tool
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !action.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        action.insert(0, '_');
    }
    let key = ToolKey::parse(format!("{prefix}.{action}")).ok()?;
    let annotations = tool.annotations.clone().unwrap_or_default();
    // MCP's defaults: not read-only, destructive.
    let verb = if annotations.read_only_hint == Some(true) {
        Verb::Query
    } else if annotations.destructive_hint != Some(false) {
        Verb::Mutation
    } else {
        Verb::Action
    };
    let mut definition = tool.clone();
    definition.name = exposed.clone().into();
    let facts = ActionFacts {
        key,
        surface: crate::action::Surface::Tool,
        // An upstream's arguments are its own: its server guards its own fields.
        not_guarded: Default::default(),
        // The upstream decides which calls become tasks (SEP-2663): one that declares the
        // extension is asked for a task whenever the caller declared it.
        task: if state.runs_tasks() {
            crate::task::TaskSupport::Optional
        } else {
            crate::task::TaskSupport::Forbidden
        },
        verb,
        description: tool.description.as_deref().unwrap_or_default().to_owned(),
        title: tool.title.clone(),
        tags: Vec::new(),
        scopes: Vec::new(),
        invalidates: Vec::new(),
        stale: Vec::new(),
        cache: None,
        annotations: annotations_or_default(tool.annotations.as_ref()),
        version: state.server_version().unwrap_or_else(|| version.to_owned()),
        input_schema: Arc::clone(&tool.input_schema),
        output_schema: tool.output_schema.clone().unwrap_or_default(),
        data_schema: Value::Null,
        presenter: None,
        error_actions: &[],
        concurrency: state.config.concurrency,
        serialization: Serialization::Off,
        max_bytes: None,
        max_tokens: None,
        data_text: crate::action::DataText::default(),
        timeout: Some(state.config.timeout),
        rate_limit: None,
        toolset: Some(
            state
                .config
                .toolset
                .clone()
                .unwrap_or_else(|| prefix.clone()),
        ),
        exposure: Exposure::Tool(Arc::from(exposed.as_str())),
        takes_cursor: false,
    };
    Some(ProxiedTool {
        upstream: index,
        upstream_name: tool.name.to_string(),
        plain_headers: !tool.input_schema.values().any(names_header_params)
            && !tool.input_schema.contains_key("x-mcp-header"),
        definition,
        sealed: SealedParts::new(&facts),
        facts,
    })
}

/// Whether a schema has an `x-mcp-header` annotation anywhere (rmcp's client then sends some
/// arguments as headers too).
fn names_header_params(schema: &Value) -> bool {
    match schema {
        Value::Object(object) => object
            .iter()
            .any(|(key, value)| key == "x-mcp-header" || names_header_params(value)),
        Value::Array(items) => items.iter().any(names_header_params),
        _ => false,
    }
}

fn annotations_or_default(annotations: Option<&ToolAnnotations>) -> ToolAnnotations {
    annotations.cloned().unwrap_or_default()
}

/// What one upstream is doing, for health checks and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UpstreamStatus {
    /// The mount's prefix.
    pub prefix: String,
    /// Connected now.
    pub connected: bool,
    /// Tools in its last catalog.
    pub tools: usize,
    /// Times it was (re)started successfully.
    pub starts: u64,
    /// The process id of a stdio upstream's running child.
    pub pid: Option<u32>,
    /// The protocol version spoken with it now (`2025-11-25`: a session; `2026-07-28`:
    /// stateless).
    pub protocol: Option<String>,
}

impl Gateway {
    /// Waits until every upstream has tried its first start.
    pub(crate) async fn ready(&self) {
        for state in &self.upstreams {
            state.first_attempt().await;
        }
    }

    /// What each upstream is doing, in mount order.
    pub(crate) fn statuses(&self) -> Vec<UpstreamStatus> {
        self.upstreams.iter().map(|state| state.status()).collect()
    }

    /// Stops every upstream and waits for their supervisors.
    pub(crate) async fn stop(&self) {
        self.shutdown.cancel();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        for task in tasks {
            let _ = task.await;
        }
    }
}

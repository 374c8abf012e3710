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
//! `structuredContent`, `isError`), never re-enveloped. Every successful proxied call is
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
//! **Logging.** A caller that asked for a log level (`logging/setLevel`, or `_meta` at
//! 2026-07-28) has the upstream asked for the same in the call's `_meta`, and receives the log
//! messages the upstream sends on the call's own HTTP stream; messages a stdio or session
//! upstream sends outside a call's stream belong to no call and are not forwarded.
//!
//! **Failing.** An upstream that cannot be reached, died or did not answer in time gives a
//! retryable error with an `errorId` (the cause is logged under it, never shown); a JSON-RPC
//! error of the upstream is mapped to a code (`VALIDATION_ERROR`, `UNKNOWN_TOOL`,
//! `UPSTREAM_ERROR`), not passed on raw. Calls to different upstreams, and to built-in tools,
//! never wait for each other.

pub(crate) mod call;
mod child;
mod http;
mod progress;
mod read;
mod upstream;

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
use crate::guard::{Concurrency, Serialization};
use crate::key::ToolKey;
use crate::middleware::Middleware;

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

/// The protocol an upstream is spoken to in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum UpstreamProtocol {
    /// Over HTTP, stateless 2026-07-28 when the server speaks it (asked with `server/discover`),
    /// else a 2025-11-25 session. Over stdio, a 2025-11-25 session.
    #[default]
    Auto,
    /// A 2025-11-25 session: `initialize`, then the session's id on every HTTP request; the
    /// server may send notifications (list changes) at any time.
    Session,
    /// Stateless 2026-07-28: `server/discover`, then every request on its own, with its
    /// protocol version and client facts. A server that does not speak it cannot be reached.
    Stateless,
}

/// An upstream MCP server to mount with [`ServerBuilder::mount`](crate::ServerBuilder::mount).
#[derive(Clone)]
pub struct Upstream {
    pub(crate) transport: UpstreamTransport,
    pub(crate) timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) concurrency: Option<Concurrency>,
    pub(crate) refresh_every: Option<Duration>,
    pub(crate) toolset: Option<String>,
    pub(crate) backoff: (Duration, Duration),
    pub(crate) protocol: UpstreamProtocol,
    pub(crate) unprefixed: bool,
}

#[derive(Clone)]
pub(crate) enum UpstreamTransport {
    Stdio {
        program: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        current_dir: Option<std::path::PathBuf>,
    },
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

impl std::fmt::Debug for Upstream {
    // Header values (tokens) and environment values are secrets: only their names show.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut debug = f.debug_struct("Upstream");
        match &self.transport {
            UpstreamTransport::Stdio {
                program, args, env, ..
            } => debug
                .field("program", program)
                .field("args", args)
                .field("env", &env.iter().map(|(name, _)| name).collect::<Vec<_>>()),
            UpstreamTransport::Http { url, headers } => debug.field("url", url).field(
                "headers",
                &headers.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            ),
        };
        debug
            .field("timeout", &self.timeout)
            .field("concurrency", &self.concurrency)
            .field("refresh_every", &self.refresh_every)
            .field("protocol", &self.protocol)
            .field("unprefixed", &self.unprefixed)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    fn new(transport: UpstreamTransport) -> Self {
        Upstream {
            transport,
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(30),
            concurrency: None,
            refresh_every: None,
            toolset: None,
            backoff: (Duration::from_millis(100), Duration::from_secs(30)),
            protocol: UpstreamProtocol::Auto,
            unprefixed: false,
        }
    }

    /// A server the gateway starts as a child process and talks to over its stdin and stdout
    /// (its stderr is the gateway's). It is restarted, with backoff, whenever it dies, and
    /// stopped when the server is dropped or [`Server::shutdown_upstreams`](crate::Server::shutdown_upstreams) runs.
    pub fn stdio(program: impl Into<String>) -> Self {
        Upstream::new(UpstreamTransport::Stdio {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            current_dir: None,
        })
    }

    /// A server reached over Streamable HTTP at `url` (2025-11-25 sessions or stateless
    /// 2026-07-28, whichever it speaks).
    pub fn http(url: impl Into<String>) -> Self {
        Upstream::new(UpstreamTransport::Http {
            url: url.into(),
            headers: Vec::new(),
        })
    }

    /// Adds an argument to a stdio upstream's command (ignored for HTTP).
    #[must_use]
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        if let UpstreamTransport::Stdio { args, .. } = &mut self.transport {
            args.push(arg.into());
        }
        self
    }

    /// Adds arguments to a stdio upstream's command (ignored for HTTP).
    #[must_use]
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, more: I) -> Self {
        if let UpstreamTransport::Stdio { args, .. } = &mut self.transport {
            args.extend(more.into_iter().map(Into::into));
        }
        self
    }

    /// Sets an environment variable of a stdio upstream (ignored for HTTP).
    #[must_use]
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let UpstreamTransport::Stdio { env, .. } = &mut self.transport {
            env.push((name.into(), value.into()));
        }
        self
    }

    /// The working directory of a stdio upstream (ignored for HTTP).
    #[must_use]
    pub fn current_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        if let UpstreamTransport::Stdio { current_dir, .. } = &mut self.transport {
            *current_dir = Some(dir.into());
        }
        self
    }

    /// Sets an HTTP header sent with every request to an HTTP upstream (ignored for stdio),
    /// replacing one of the same name: an API key (`X-Api-Key`), `Authorization` with any
    /// scheme. Values are secrets: they are never logged, nor shown by `Debug` or in build
    /// errors. The transport's own headers (`Accept`, `Mcp-Session-Id`,
    /// `MCP-Protocol-Version`, `Last-Event-Id`) cannot be set.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let UpstreamTransport::Http { headers, .. } = &mut self.transport {
            let name = name.into();
            headers.retain(|(known, _)| !known.eq_ignore_ascii_case(&name));
            headers.push((name, value.into()));
        }
        self
    }

    /// Sends `Authorization: Bearer <token>` to an HTTP upstream (ignored for stdio).
    #[must_use]
    pub fn bearer_token(self, token: impl AsRef<str>) -> Self {
        let value = format!("Bearer {}", token.as_ref());
        self.header("Authorization", value)
    }

    /// How long a proxied call may take, from the middleware on (60 s by default); past it the
    /// call is cancelled upstream and answered `TIMEOUT`, retryable.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long starting the upstream and fetching its catalog may take (30 s by default).
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// At most `max_active` calls to this upstream at once and `max_queued` waiting; beyond
    /// that `SERVER_BUSY` (the guard of built-in tools, for the whole upstream).
    #[must_use]
    pub fn concurrency(mut self, limits: Concurrency) -> Self {
        self.concurrency = Some(limits);
        self
    }

    /// Fetches the catalog again at this interval, for upstreams that do not say when their
    /// tools change. The `ttlMs` hint of this server's `tools/list` is never longer than the
    /// shortest such interval.
    #[must_use]
    pub fn refresh_every(mut self, interval: Duration) -> Self {
        self.refresh_every = Some(interval);
        self
    }

    /// The toolset of this upstream's tools (the mount's prefix by default), for
    /// [`ServerBuilder::enable_toolsets`](crate::ServerBuilder::enable_toolsets) and access policies.
    #[must_use]
    pub fn toolset(mut self, toolset: impl Into<String>) -> Self {
        self.toolset = Some(toolset.into());
        self
    }

    /// The protocol to speak to the upstream ([`UpstreamProtocol::Auto`] by default): force a
    /// 2025-11-25 session, say, for a server whose `server/discover` answers wrongly, or
    /// stateless 2026-07-28 to refuse anything older.
    #[must_use]
    pub fn protocol(mut self, protocol: UpstreamProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Serves the upstream's tools under their own names instead of `{prefix}_{tool}`: policy
    /// and audit in front of one existing server, its tools not renamed. The prefix stays the
    /// mount's namespace everywhere else: canonical keys (`prefix.tool`) for access policies
    /// and audit, the default toolset, [`UpstreamStatus`], logs.
    ///
    /// A name that two tools would have fails closed, and each time the catalog is rebuilt the
    /// collision is logged at error level with its owners: a built-in tool keeps its name, and
    /// a name two upstreams offer (unprefixed or not) is served by neither, whatever the mount
    /// order and whichever came first, so an upstream that gains a tool on a refresh never takes
    /// over the calls meant for another's. Nor is a tool served whose key is a built-in tool's
    /// (mounted as `health`, a tool `ping` is `health.ping`): a policy or an audit record could
    /// not tell them apart.
    #[must_use]
    pub fn unprefixed(mut self) -> Self {
        self.unprefixed = true;
        self
    }

    /// The wait before restarting a dead upstream: `initial`, doubled after each failed start
    /// up to `max`, back to `initial` once a start succeeds (100 ms and 30 s by default).
    #[must_use]
    pub fn restart_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.backoff = (initial, max.max(initial));
        self
    }
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
        let mut candidates = Vec::new();
        for (index, state) in self.upstreams.iter().enumerate() {
            for tool in state.tools().iter() {
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
        let mut by_name: HashMap<String, Arc<ProxiedTool>> = HashMap::new();
        let mut order = Vec::new();
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
            let proxied = Arc::new(proxied);
            by_name.insert(proxied.name().to_owned(), Arc::clone(&proxied));
            order.push(proxied);
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
        verb,
        description: tool.description.as_deref().unwrap_or_default().to_owned(),
        title: tool.title.clone(),
        tags: Vec::new(),
        scopes: Vec::new(),
        invalidates: Vec::new(),
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

/// A proxied call of a 2026-07-28 caller, which asks for input in rounds (or of a session
/// caller, see [`Passthrough::session`]): what the caller sent
/// for the upstream (its `requestState` and `inputResponses`, its capabilities), passed on
/// untouched, and what the upstream answered that is not a tool result, passed back untouched
/// by the transport. The upstream seals and verifies its own state: the gateway's keys never
/// see it.
pub(crate) struct Passthrough {
    pub(crate) request_state: Option<String>,
    pub(crate) input_responses: Option<rmcp::model::InputResponses>,
    /// The caller's capabilities, sent to a stateless upstream instead of the gateway's own
    /// (none): what the upstream may ask the caller for.
    pub(crate) capabilities: Option<rmcp::model::ClientCapabilities>,
    /// A caller on a session (2025-11-25, stdio), asked over it: the gateway answers a
    /// stateless upstream's `input_required` itself, with what it asked the caller, and calls
    /// again under the upstream's state.
    pub(crate) session: Option<Peer<RoleServer>>,
    answer: std::sync::Mutex<Option<Answer>>,
}

/// What an upstream answered a round-asking call, other than a tool result.
pub(crate) enum Answer {
    /// `input_required`: the caller answers, then calls again with the upstream's state.
    InputRequired(rmcp::model::InputRequiredResult),
    /// A protocol error that belongs to the caller's request: a client capability it did not
    /// declare (`-32021`), or a state or answers the upstream refused.
    Error(rmcp::ErrorData),
}

impl Passthrough {
    pub(crate) fn new(
        request_state: Option<String>,
        input_responses: Option<rmcp::model::InputResponses>,
        capabilities: Option<rmcp::model::ClientCapabilities>,
    ) -> Self {
        Passthrough {
            request_state,
            input_responses,
            capabilities,
            session: None,
            answer: Default::default(),
        }
    }

    /// A caller on a session, with these capabilities: asked over it.
    pub(crate) fn over_session(
        peer: Peer<RoleServer>,
        capabilities: Option<rmcp::model::ClientCapabilities>,
    ) -> Self {
        Passthrough {
            session: Some(peer),
            ..Passthrough::new(None, None, capabilities)
        }
    }

    /// Whether the call answers an earlier `input_required` (the upstream judges the state).
    pub(crate) fn answers(&self) -> bool {
        self.request_state.is_some() || self.input_responses.is_some()
    }

    pub(crate) fn set(&self, answer: Answer) {
        *self.answer.lock().unwrap_or_else(PoisonError::into_inner) = Some(answer);
    }

    pub(crate) fn take(&self) -> Option<Answer> {
        self.answer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
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

//! Serving a [`Server`] over MCP with `rmcp` (SPEC R1–R3, S2, E3): stdio, Streamable HTTP (the
//! 2025-11-25 session protocol and the stateless 2026-07-28 protocol on one endpoint) and an
//! axum router to mount in an existing application.
//!
// The examples are built only with the transports they use (not with `--no-default-features`).
#![cfg_attr(all(feature = "stdio", feature = "http"), doc = "```no_run")]
#![cfg_attr(not(all(feature = "stdio", feature = "http")), doc = "```ignore")]
//! # async fn run(server: fusion_runtime::Server) -> Result<(), fusion_runtime::serve::ServeError> {
//! use fusion_runtime::serve::{HttpOptions, Mcp};
//!
//! // stdio: stdout carries only protocol messages; log to stderr.
//! Mcp::new(server.clone()).serve_stdio().await?;
//!
//! // Streamable HTTP on http://127.0.0.1:8080/mcp until Ctrl-C.
//! Mcp::new(server).serve_http(HttpOptions::default()).await?;
//! # Ok(()) }
//! ```
//!
//! # Embedding
//!
//! [`Mcp::router`] is an `axum::Router`: merge it into an application of your own. Cancel
//! [`HttpOptions::shutdown`] when the application stops, so that open SSE streams and sessions
//! end instead of holding the graceful shutdown up:
//!
#![cfg_attr(feature = "http", doc = "```no_run")]
#![cfg_attr(not(feature = "http"), doc = "```ignore")]
//! # async fn run(server: fusion_runtime::Server) -> Result<(), Box<dyn std::error::Error>> {
//! use fusion_runtime::serve::{HttpOptions, Mcp};
//!
//! let options = HttpOptions::default();
//! let shutdown = options.shutdown.clone();
//! let app = axum::Router::new()
//!     .route("/healthz", axum::routing::get(|| async { "ok" }))
//!     .merge(Mcp::new(server).router(&options));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app)
//!     .with_graceful_shutdown(async move {
//!         let _ = tokio::signal::ctrl_c().await;
//!         // Ends the MCP endpoint's SSE streams and sessions; the rest drains as usual.
//!         shutdown.cancel();
//!     })
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! An application serving the router itself keeps its own connection bounds (header, idle and
//! write timeouts, a connection cap): those of [`HttpOptions`] are kept by
//! [`Mcp::serve_http_on`]; the router bounds sessions and request bodies wherever it is served.
//!
//! Defaults are the fast and safe configuration: the non-blocking stdio transport, `TCP_NODELAY`
//! on every accepted socket, JSON (not SSE) responses for stateless requests, loopback binding,
//! `Host`/`Origin` checked against loopback allow-lists, in front of everything else (bearer
//! authentication and [`Mcp::layer`] layers included), and every resource a client can hold
//! bounded (see [`HttpOptions`]).
//!
//! # Layout
//!
//! This file is the protocol handler: each MCP method, thin, over the [`Server`]. The jobs it
//! hands off have files of their own: `options` (what an endpoint is configured with),
//! `listing` (one paged listing for tools, resources, templates and prompts), `discovery` (the
//! search mode of a large surface), `rounds` (the question rounds of elicitation),
//! `subscriptions` (resource updates), `gateway` (what mounted upstreams add), `reply` (where a
//! sealed result becomes the protocol's), and the transports (`stdio`, `streamable` with its
//! `host_origin` guard, `sessions`, `connections`).
//!
//! Serving stays a module of `fusion-runtime` (behind its `stdio` and `http` features) rather
//! than a crate of its own: it still reaches into the server through crate-private methods
//! (the sealed request path, request-state keys, subscriptions), and the features already keep
//! it out of builds that do not serve. It can move to a crate once it needs only the server's
//! public API, which the narrow methods of [`Server`] it uses are the start of.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    DiscoverResult, ErrorCode, GetPromptRequestParams, GetPromptResponse, Implementation,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, PromptsCapability, ReadResourceRequestParams, ReadResourceResponse,
    ResourcesCapability, ServerCapabilities, ServerConfig, Tool as ToolDefinition,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

#[cfg(feature = "http")]
pub mod auth;
mod bundle;
#[cfg(feature = "http")]
mod connections;
#[cfg(feature = "http")]
mod descriptors;
#[cfg(feature = "http")]
mod direct;
#[cfg(feature = "http")]
mod session_calls;
/// Marks a session's call answered beside its worker (see `session_calls.rs`).
#[derive(Clone, Copy)]
struct BesideWorker;
mod discovery;
#[cfg(feature = "gateway")]
mod gateway;
#[cfg(feature = "http")]
mod host_origin;
mod listing;
#[cfg(feature = "stderr-log")]
mod log;
#[cfg(feature = "oauth")]
pub mod oauth;
mod options;
#[cfg(feature = "http")]
mod replica;
pub(crate) mod reply;
#[cfg(feature = "http")]
mod resource_metadata;
mod rounds;
#[cfg(feature = "http")]
mod scope_challenge;
#[cfg(feature = "http")]
mod sessions;
#[cfg(any(feature = "stdio", feature = "http"))]
mod signal;
#[cfg(feature = "stdio")]
mod stdio;
#[cfg(feature = "http")]
mod streamable;
mod subscriptions;
pub(crate) mod tasks;

#[cfg(feature = "http")]
pub use auth::{AuthError, StaticTokens, TokenVerifier, VerifyFuture};
pub use bundle::{BUNDLE_META_KEY, Bundle};
pub use discovery::{CALL_TOOL, Discovery, FIND_TOOLS, ToolSearch};
#[cfg(feature = "stderr-log")]
pub use log::log_to_stderr;
#[cfg(feature = "http")]
pub(crate) use options::Tally;
pub use options::{ContextFactory, McpOptions, RequestInfo, ServeError};
#[cfg(feature = "http")]
pub use replica::{InvalidReplicaName, ReplicaName};
#[cfg(feature = "http")]
pub use resource_metadata::ProtectedResource;
#[cfg(feature = "http")]
pub use sessions::{BoundedSessions, SessionsError};
#[cfg(any(feature = "stdio", feature = "http"))]
pub use signal::shutdown_signal;
#[cfg(feature = "http")]
pub use streamable::HttpOptions;

use crate::context::{CallContext, RequestFacts};
use crate::envelope::ClientForm;
use crate::error::{ToolError, panicked};
#[cfg(feature = "http")]
use crate::principal::Principal;
use crate::server::{Server, ToolResult};
use listing::Listings;
use rounds::{Asking, LazyBinding};
use subscriptions::Subscribers;

/// A [`Server`] ready to be served over MCP.
#[derive(Clone)]
pub struct Mcp {
    server: Server,
    options: McpOptions,
    context_factory: Option<ContextFactory>,
    #[cfg(feature = "http")]
    layers: Vec<streamable::RouterLayer>,
    /// The connections its handlers serve that subscribed to resources.
    subscriptions: Arc<Subscribers>,
    /// Its tasks: where they are kept, and those this process runs; kept in memory unless
    /// [`Mcp::tasks`] says, made with the first handler that serves tasks.
    tasks: Arc<std::sync::OnceLock<Arc<tasks::Tasks>>>,
    /// What the server reports it was built as.
    bundle: Option<Bundle>,
    /// How `tools/list` presents the tools.
    discovery: Discovery,
}

impl std::fmt::Debug for Mcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mcp")
            .field("server", &self.server)
            .field("options", &self.options)
            .field("context_factory", &self.context_factory.is_some())
            .finish_non_exhaustive()
    }
}

impl Mcp {
    /// Serves `server` with default options.
    pub fn new(server: Server) -> Self {
        Mcp {
            server,
            options: McpOptions::default(),
            context_factory: None,
            #[cfg(feature = "http")]
            layers: Vec::new(),
            subscriptions: Arc::default(),
            tasks: Arc::default(),
            bundle: Bundle::built(),
            discovery: Discovery::Full,
        }
    }

    /// How `tools/list` presents the tools: every one in full ([`Discovery::Full`], the
    /// default), or, for a large surface, a search tool that finds those a task needs
    /// ([`Discovery::search`]; see [`Discovery`]). Every tool stays callable by its name.
    #[must_use]
    pub fn discovery(mut self, discovery: Discovery) -> Self {
        self.discovery = discovery;
        self
    }

    /// Reports `bundle` (or nothing) in the `_meta` of `initialize` and `server/discover`,
    /// instead of what this binary was built as ([`Bundle::built`], the default).
    #[must_use]
    pub fn bundle(mut self, bundle: Option<Bundle>) -> Self {
        self.bundle = bundle;
        self
    }

    /// Keeps its tasks (see the [task module](crate::task)) in `store`, with `options`: a store
    /// its replicas share lets any of them answer for a task. The default keeps them in memory,
    /// for an hour.
    #[must_use]
    pub fn tasks(
        mut self,
        store: Arc<dyn crate::task::TaskStore>,
        options: crate::task::TaskOptions,
    ) -> Self {
        self.tasks = Arc::new(std::sync::OnceLock::from(Arc::new(tasks::Tasks::new(
            store, options,
        ))));
        self
    }

    /// Sets the protocol options.
    #[must_use]
    pub fn options(mut self, options: McpOptions) -> Self {
        self.options = options;
        self
    }

    /// Sets the per-request context factory.
    #[must_use]
    pub fn context(
        mut self,
        factory: impl Fn(&RequestInfo<'_>, &mut CallContext) + Send + Sync + 'static,
    ) -> Self {
        self.context_factory = Some(Arc::new(factory));
        self
    }

    /// The rmcp handler. Everything is computed here, once; the handler itself is an `Arc`, so
    /// the copies rmcp makes (one per HTTP session, one per stateless request) cost nothing.
    pub fn handler(&self) -> McpHandler {
        let page_size = self.options.page_size.max(1);
        let ttl = u64::try_from(self.options.list_ttl.as_millis()).unwrap_or(u64::MAX);
        // A list that depends on the caller must not be shared between callers.
        let list_cache_scope = if self.server.has_access_policy() {
            CacheScope::Private
        } else {
            self.options.list_cache_scope
        };
        // Mounted catalogs change while the server runs (SPEC R7): clients are told.
        #[cfg(feature = "gateway")]
        let lists_change = self.server.gateway().is_some();
        #[cfg(not(feature = "gateway"))]
        let lists_change = false;
        let mut capabilities = if lists_change {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build()
        } else {
            ServerCapabilities::builder().enable_tools().build()
        };
        let server = &self.server;
        // Handlers log through `Log`, at the level each client asks for.
        capabilities.logging = Some(Default::default());
        if server.has_resources() {
            // Sessions subscribe to resources and hear of the mutations that invalidate them.
            let mut resources = ResourcesCapability::default();
            resources.subscribe = Some(true);
            capabilities.resources = Some(resources);
        }
        // Every server answers `prompts/list` (an empty list, with its caching hints, when it
        // has none): one that answers it must declare it (2026-07-28, SEP-2575).
        capabilities.prompts = Some(PromptsCapability::default());
        if server.has_completions() {
            capabilities.completions = Some(Default::default());
        }
        // Tools that may run as tasks: the extension is declared (and `tasks/*` answered).
        let tasks = server
            .task_service()
            .filter(|_| server.has_tasks())
            .map(|service| tasks::Served {
                tasks: Arc::clone(self.tasks.get_or_init(|| Arc::new((service.in_memory)()))),
                service,
            });
        if tasks.is_some() {
            capabilities.extensions.get_or_insert_default().insert(
                rmcp::model::TASKS_EXTENSION_ID.to_owned(),
                Default::default(),
            );
        }
        // Without an access policy every caller sees the same listings: computed once here.
        let listings = if server.has_access_policy() {
            Listings::default()
        } else {
            Listings::of(server)
        };
        let mut info = ServerConfig::new(capabilities).with_server_info(Implementation::new(
            self.server.name(),
            self.server.version(),
        ));
        let search = match &self.discovery {
            Discovery::Full => None,
            Discovery::Search(search) => {
                for name in [FIND_TOOLS, CALL_TOOL] {
                    if server.tool(name).is_some() {
                        tracing::warn!(
                            tool = name,
                            "in search mode the search tool takes this name: the server's own tool of that name cannot be called"
                        );
                    }
                }
                Some(search.clone())
            }
        };
        if let Some(instructions) = self.server.served_instructions() {
            info = info.with_instructions(instructions);
        }
        // `server/discover` carries the same `_meta`.
        if let Some(bundle) = &self.bundle {
            bundle.add_to(info.meta.get_or_insert_default());
        }
        McpHandler {
            shared: Arc::new(Shared {
                server: self.server.clone(),
                info,
                listings,
                list_cache_scope,
                page_size,
                list_ttl: ttl,
                discover_cache_scope: self.options.list_cache_scope,
                context_factory: self.context_factory.clone(),
                subscriptions: Arc::clone(&self.subscriptions),
                tasks,
                search,
            }),
            connection: Arc::default(),
        }
    }
}

/// A Fusion server as an rmcp [`ServerHandler`]: a cheap `Arc` over what [`Mcp::handler`]
/// computed once, and what one connection keeps across its requests (its log level, its
/// resource subscriptions): each handler [`Mcp::handler`] makes is one connection's and its
/// clones share it, while an HTTP session's is kept by the session registry, so that it
/// outlives the worker of a parked session.
#[derive(Clone)]
pub struct McpHandler {
    shared: Arc<Shared>,
    /// The connection of requests that bring none of their own (every one but those of an HTTP
    /// session).
    connection: Arc<ConnectionState>,
}

/// What one connection keeps across its requests: a 2025-11-25 session (held by the session
/// registry over HTTP, so that it outlives the worker of a parked session), a stdio
/// connection, or (for nothing) one stateless request.
#[derive(Default)]
pub(crate) struct ConnectionState {
    /// The level `logging/setLevel` asked for (2025-11-25).
    log_level: std::sync::Mutex<Option<crate::logging::LogLevel>>,
    /// Its resource subscriptions.
    subscriptions: std::sync::Mutex<Vec<subscriptions::Subscription>>,
    /// Where its resource updates go: the peer of its latest request.
    peer: std::sync::Mutex<Option<rmcp::Peer<RoleServer>>>,
    /// The peer of the latest call its worker served: an HTTP session's later calls can be
    /// answered beside the worker with it (`session_calls.rs`).
    #[cfg(feature = "http")]
    worker_peer: std::sync::Mutex<Option<rmcp::Peer<RoleServer>>>,
}

fn locked<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain data: a panic elsewhere cannot leave it half-updated.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl std::fmt::Debug for McpHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHandler")
            .field("server", &self.shared.server)
            .finish_non_exhaustive()
    }
}

struct Shared {
    server: Server,
    info: ServerConfig,
    /// What every caller sees, when no access policy decides.
    listings: Listings,
    /// `Private` under an access policy, the configured scope otherwise.
    list_cache_scope: CacheScope,
    page_size: usize,
    list_ttl: u64,
    // What discovery says is the same for every caller, whatever the access policy.
    discover_cache_scope: CacheScope,
    context_factory: Option<ContextFactory>,
    /// The connections subscribed to resources (of every handler of the same [`Mcp`]).
    subscriptions: Arc<Subscribers>,
    /// Its tasks, when any tool may run as one (every handler of the same [`Mcp`] shares them).
    tasks: Option<tasks::Served>,
    /// Search mode's settings, when `tools/list` lists the search tools.
    search: Option<ToolSearch>,
}

impl McpHandler {
    /// The server behind this handler.
    pub fn server(&self) -> &Server {
        &self.shared.server
    }

    /// A handler for another connection: the same server, a state of its own.
    #[cfg(feature = "http")]
    pub(crate) fn for_new_session(&self) -> McpHandler {
        McpHandler {
            shared: Arc::clone(&self.shared),
            connection: Arc::default(),
        }
    }

    /// The connection `context` came on: its HTTP session's (found beside the request by the
    /// endpoint), or this handler's.
    fn connection_of(&self, context: &RequestContext<RoleServer>) -> Arc<ConnectionState> {
        #[cfg(feature = "http")]
        if let Some(connection) = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Arc<ConnectionState>>())
        {
            return Arc::clone(connection);
        }
        let _ = context;
        Arc::clone(&self.connection)
    }

    /// The call's context: the request's facts, then the context factory's additions. A
    /// panicking factory is an `INTERNAL_ERROR` (its text logged, never shown), not a request
    /// left unanswered.
    fn call_context(&self, context: RequestContext<RoleServer>) -> Result<CallContext, ToolError> {
        let mut call = self.shared.server.new_context();
        // Log messages go to the client from the level it asked for: in this request's `_meta`
        // (2026-07-28), or for the session (`logging/setLevel`).
        let connection = self.connection_of(&context);
        let log_level = context
            .meta
            .log_level()
            .map(crate::logging::LogLevel::from_wire)
            .or_else(|| *locked(&connection.log_level));
        // A subscribed session's updates follow its latest worker (a parked session gets a new
        // one when it is restored).
        if !locked(&connection.subscriptions).is_empty() {
            *locked(&connection.peer) = Some(context.peer.clone());
        }
        #[cfg(feature = "http")]
        {
            let mut worker_peer = locked(&connection.worker_peer);
            // Replaced when a parked session's restored worker serves its next call.
            if worker_peer
                .as_ref()
                .is_none_or(rmcp::Peer::is_transport_closed)
            {
                *worker_peer = Some(context.peer.clone());
            }
        }
        let log_sink = log_level.map(|level| {
            Arc::new(crate::logging::LogSink {
                peer: context.peer.clone(),
                level,
            })
        });
        // The principal the HTTP layer verified travels in the request parts.
        #[cfg(feature = "http")]
        let principal = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>())
            .cloned();
        match &self.shared.context_factory {
            None => {
                call.request = RequestFacts {
                    peer: Some(context.peer),
                    id: Some(context.id),
                    waiting: std::mem::take(&mut call.request.waiting),
                    renders_ui: None,
                };
                call.meta = context.meta;
                call.cancellation = context.ct;
                call.extensions = context.extensions;
            }
            Some(factory) => {
                // The factory sees a call that already knows its request.
                call.request = RequestFacts {
                    peer: Some(context.peer.clone()),
                    id: Some(context.id.clone()),
                    waiting: std::mem::take(&mut call.request.waiting),
                    renders_ui: None,
                };
                call.meta = context.meta.clone();
                call.cancellation = context.ct.clone();
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    factory(&RequestInfo { context: &context }, &mut call)
                }))
                .map_err(|panic| panicked("the context factory", panic))?;
                // The transport's own extensions (the HTTP request parts) win over anything
                // the factory added: a factory cannot forge them.
                let mut extensions = std::mem::take(&mut call.extensions);
                extensions.extend(context.extensions);
                call.extensions = extensions;
            }
        }
        // And so does the verified principal.
        #[cfg(feature = "http")]
        if let Some(principal) = principal {
            call.extensions.insert(principal);
        }
        if let Some(sink) = log_sink {
            call.extensions.insert(sink);
        }
        Ok(call)
    }
}

/// A future boxed and type-erased.
type Erased<'a, O> = std::pin::Pin<Box<dyn Future<Output = O> + Send + 'a>>;

/// `future` behind a box and a vtable, so that its body is compiled once, here, whoever awaits
/// it. rmcp's request dispatch awaits every handler method in one state machine, compiled again
/// in every codegen unit that instantiates it, with its drop glue copied into every unit that
/// drops it (fourteen in hello): a method's future there was inlined into each copy. The
/// serving functions' futures were compiled into the connector's `main` (three copies in
/// hello). Erased, the caller holds a pointer and drops it through the vtable, for an
/// allocation per request (per connection for the serving functions).
fn erased<'a, O>(future: impl Future<Output = O> + Send + 'a) -> Erased<'a, O> {
    Box::pin(future)
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        self.shared.info.clone()
    }

    fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<DiscoverResult, ErrorData>> + Send + '_ {
        erased(async move {
            let mut info = self.get_info();
            // Resource subscriptions are a session's (`resources/subscribe`, 2025-11-25): a
            // stateless client has none to use.
            if let Some(resources) = &mut info.capabilities.resources {
                resources.subscribe = None;
            }
            Ok(DiscoverResult::from_server_info(
                self.supported_protocol_versions().into_owned(),
                info,
            )
            .with_ttl_ms(self.shared.list_ttl)
            .with_cache_scope(self.shared.discover_cache_scope))
        })
    }

    fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListToolsResult, ErrorData>> + Send + '_ {
        erased(async move {
            if let Some(search) = &self.shared.search {
                let cursor = request.and_then(|request| request.cursor);
                return self.list_index(search, cursor, context);
            }
            // Built-in and proxied tools, from the gateway's current catalog (SPEC R7).
            #[cfg(feature = "gateway")]
            if self.shared.server.gateway().is_some() {
                let cursor = request.and_then(|request| request.cursor);
                return self.list_with_gateway(cursor, context);
            }
            self.list(request, context, |listings| &listings.tools)
        })
    }

    fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListResourcesResult, ErrorData>> + Send + '_ {
        erased(async move { self.list(request, context, |listings| &listings.resources) })
    }

    fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListResourceTemplatesResult, ErrorData>> + Send + '_ {
        erased(async move { self.list(request, context, |listings| &listings.templates) })
    }

    fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ReadResourceResponse, ErrorData>> + Send + '_ {
        erased(self.read(request, context))
    }

    fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<ListPromptsResult, ErrorData>> + Send + '_ {
        erased(async move { self.list(request, context, |listings| &listings.prompts) })
    }

    fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<GetPromptResponse, ErrorData>> + Send + '_ {
        erased(self.prompt(request, context))
    }

    fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CompleteResult, ErrorData>> + Send + '_ {
        erased(async move {
            if !self.shared.server.has_completions() {
                return Err(ErrorData::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    "completion/complete: this server completes nothing",
                    None,
                ));
            }
            let call = self
                .call_context(context)
                .map_err(|error| protocol_error("completion/complete", error))?;
            let resolved = request
                .context
                .and_then(|context| context.arguments)
                .unwrap_or_default();
            self.shared
                .server
                .complete(&request.r#ref, &request.argument, resolved, call)
                .await
        })
    }

    /// A session or stdio client is told when a mounted catalog changes.
    #[cfg(feature = "gateway")]
    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        if let Some(gateway) = self.shared.server.gateway() {
            gateway.register_client(context.peer);
        }
    }

    /// A 2026-07-28 client may listen for changes of the tool list (servers with mounts).
    #[cfg(feature = "gateway")]
    fn accepted_subscription_filter(
        &self,
        _requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        self.shared.server.gateway().map(|_| {
            rmcp::model::SubscriptionFilter::builder()
                .tools_list_changed()
                .build()
        })
    }

    #[cfg(feature = "gateway")]
    fn listen(
        &self,
        context: rmcp::service::SubscriptionContext,
    ) -> impl Future<Output = Result<(), ErrorData>> + Send + '_ {
        erased(async move { self.listen_for_changes(context).await })
    }

    // rmcp marks logging deprecated (SEP-2577); sessions still set their level this way.
    #[allow(deprecated)]
    fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<(), ErrorData>> + Send + '_ {
        erased(async move {
            // A stateless request says its level in its own `_meta`: there is no session to set.
            if Asking::of(&context).rounds {
                return Err(ErrorData::method_not_found::<
                    rmcp::model::SetLevelRequestMethod,
                >());
            }
            *locked(&self.connection_of(&context).log_level) =
                Some(crate::logging::LogLevel::from_wire(request.level));
            Ok(())
        })
    }

    fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<(), ErrorData>> + Send + '_ {
        erased(async move { self.subscribe_to(request.uri, context) })
    }

    fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<(), ErrorData>> + Send + '_ {
        erased(async move {
            self.unsubscribe_from(&request.uri, &context);
            Ok(())
        })
    }

    fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<rmcp::model::GetTaskResult, ErrorData>> + Send + '_ {
        match &self.shared.tasks {
            Some(served) => (served.service.get)(self, request, context),
            None => erased(async { Err(no_tasks()) }),
        }
    }

    fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<(), ErrorData>> + Send + '_ {
        match &self.shared.tasks {
            Some(served) => (served.service.cancel)(self, request, context),
            None => erased(async { Err(no_tasks()) }),
        }
    }

    fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<(), ErrorData>> + Send + '_ {
        match &self.shared.tasks {
            Some(served) => (served.service.update)(self, request, context),
            None => erased(async { Err(no_tasks()) }),
        }
    }

    fn get_tool(&self, name: &str) -> Option<ToolDefinition> {
        if self.shared.search.is_some()
            && let Some(search_tool) = self.search_tool(name)
        {
            return Some(search_tool);
        }
        let builtin = self
            .shared
            .server
            .tool(name)
            .map(|tool| tool.definition().clone());
        #[cfg(feature = "gateway")]
        let builtin = builtin.or_else(|| self.shared.server.proxied_tool(name));
        builtin
    }

    fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + Send + '_ {
        erased(self.answer_call(request, context))
    }
}

/// The bodies of the requests that do the work, each erased in the `ServerHandler` impl.
impl McpHandler {
    async fn read(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let asking = Asking::of(&context);
        let mut call = self
            .call_context(context)
            .map_err(|error| protocol_error("resources/read", error))?;
        // The URI holds the variables: the state is bound to it.
        let target = format!("resources/read {}", request.uri);
        let binding = LazyBinding::new(&asking, &target, || Value::Null, &call);
        let round = self
            .open_round(
                asking,
                &binding,
                request.request_state,
                request.input_responses,
            )
            .map_err(|error| self.refuse_content(&request.uri, error))?;
        call.extensions_mut().insert(Arc::clone(&round));
        let read = self.shared.server.read(&request.uri, call).await;
        let outcome = reply::read_result(&request.uri, read);
        if let Some(input_required) = self.close_round(&round, &binding, outcome.is_err())? {
            return Ok(ReadResourceResponse::InputRequired(input_required));
        }
        outcome.map(ReadResourceResponse::from)
    }

    async fn prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let asking = Asking::of(&context);
        let mut call = self
            .call_context(context)
            .map_err(|error| protocol_error("prompts/get", error))?;
        // `prompts/get NAME`: never a tool's name, so a state cannot move between the two.
        let target = format!("prompts/get {}", request.name);
        let binding = LazyBinding::new(
            &asking,
            &target,
            || Value::Object(request.arguments.clone().unwrap_or_default()),
            &call,
        );
        let round = self
            .open_round(
                asking,
                &binding,
                request.request_state,
                request.input_responses,
            )
            .map_err(|error| self.refuse_content(&request.name, error))?;
        call.extensions_mut().insert(Arc::clone(&round));
        let got = self
            .shared
            .server
            .prompt(&request.name, request.arguments, call)
            .await;
        let outcome = reply::prompt_result(&request.name, got);
        if let Some(input_required) = self.close_round(&round, &binding, outcome.is_err())? {
            return Ok(GetPromptResponse::InputRequired(input_required));
        }
        outcome.map(GetPromptResponse::from)
    }

    async fn answer_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Search mode: `find_tools` answers here, `call_tool` is the call of the tool it names.
        let (request, context) = match &self.shared.search {
            None => (request, context),
            Some(search) => match self.intercept(search, request, context) {
                discovery::Intercepted::Answer(answer) => {
                    return answer.map(CallToolResponse::Complete);
                }
                discovery::Intercepted::Call(request, context) => (request, context),
            },
        };
        let name: Cow<'_, str> = request.name;
        let asking = Asking::of(&context);
        // Only a server with tools that may run as tasks looks the tool up for it.
        let mode = match &self.shared.tasks {
            None => tasks::Mode::Call,
            Some(served) => {
                (served.service.mode)(self, &name, request.arguments.as_ref(), &context)?
            }
        };
        let outcome = match self.call_context(context) {
            Ok(mut call) => {
                // The answer as this client reads it: its protocol era's data block, and UI
                // blocks if it renders them.
                let form = ClientForm::of(
                    call.protocol_version().as_ref(),
                    asking.capabilities.as_ref(),
                );
                // A presenter builds no UI blocks for a client that does not draw them.
                call.set_renders_ui(form.ui);
                if let (tasks::Mode::Task, Some(served)) = (mode, &self.shared.tasks) {
                    let start = served.service.start;
                    return start(
                        self,
                        name.into_owned(),
                        request.arguments,
                        call,
                        asking,
                        form,
                    )
                    .await;
                }
                #[cfg(feature = "gateway")]
                if self.passes_rounds_through(&name, &asking) {
                    let rounds = (request.request_state, request.input_responses);
                    return self
                        .call_proxied(&name, request.arguments, rounds, asking, call)
                        .await;
                }
                let binding = LazyBinding::new(
                    &asking,
                    &name,
                    || Value::Object(request.arguments.clone().unwrap_or_default()),
                    &call,
                );
                let round = match self.open_round(
                    asking,
                    &binding,
                    request.request_state,
                    request.input_responses,
                ) {
                    Ok(round) => round,
                    Err(error) => return Err(self.refuse_request(&name, error)?),
                };
                call.extensions_mut().insert(Arc::clone(&round));

                let change = self.change_of(&call, request.arguments.as_ref());
                let outcome = self
                    .shared
                    .server
                    .call_tool(&name, request.arguments, call)
                    .await
                    .map(|result| result.for_client(form));
                let failed = outcome.as_ref().is_ok_and(ToolResult::is_error);
                if let Some(input_required) = self.close_round(&round, &binding, failed)? {
                    return Ok(CallToolResponse::InputRequired(input_required));
                }
                if let Ok(result) = &outcome
                    && !result.is_error()
                {
                    self.notify_invalidated(result.invalidates(), change.as_ref());
                }
                outcome
            }
            Err(error) => self.shared.server.refuse_call(&name, error),
        };
        self.complete(outcome)
    }
}

/// `tasks/*` of a server that serves no tasks (rmcp answers them only for one that declares the
/// extension, which such a server does not).
fn no_tasks() -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        "this server runs no tool as a task",
        None,
    )
}

fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::INVALID_PARAMS,
        format!("unknown tool: {name}"),
        None,
    )
}

impl McpHandler {
    /// A tool call's answer: its result; an unknown tool is a JSON-RPC error.
    fn complete(
        &self,
        outcome: Result<crate::server::ToolResult, crate::server::UnknownTool>,
    ) -> Result<CallToolResponse, ErrorData> {
        match outcome {
            Ok(result) => {
                let form = result.form();
                Ok(CallToolResponse::Complete(reply::call_tool_result(
                    result.into_sealed(),
                    form,
                )))
            }
            Err(unknown) => Err(unknown_tool(&unknown.0)),
        }
    }
}

/// A failure before a request that has no tool result to carry it (`tools/list`): a JSON-RPC
/// internal error naming only the error id under which the cause is logged.
#[cold]
fn protocol_error(method: &str, mut error: ToolError) -> ErrorData {
    error.assign_error_id(method);
    let message = match error.error_id() {
        Some(error_id) => format!("Internal error (errorId {error_id})."),
        None => "Internal error.".to_owned(),
    };
    ErrorData::internal_error(message, None)
}

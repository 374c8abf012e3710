//! Serving a [`Server`] over MCP with `rmcp` (SPEC R1–R3, S2, E3): stdio, Streamable HTTP (the
//! 2025-11-25 session protocol and the stateless 2026-07-28 protocol on one endpoint) and an
//! axum router to mount in an existing application.
//!
//! ```no_run
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
//! ```no_run
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

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

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
use tokio_util::sync::CancellationToken;

#[cfg(feature = "http")]
pub mod auth;
#[cfg(feature = "http")]
mod connections;
mod content;
#[cfg(feature = "gateway")]
mod gateway;
#[cfg(feature = "oauth")]
pub mod oauth;
#[cfg(feature = "http")]
mod replica;
#[cfg(feature = "http")]
mod resource_metadata;
#[cfg(feature = "http")]
mod sessions;
#[cfg(feature = "stdio")]
mod stdio;
#[cfg(feature = "http")]
mod streamable;

#[cfg(feature = "http")]
pub use auth::{AuthError, StaticTokens, TokenVerifier, VerifyFuture};
#[cfg(feature = "http")]
pub use replica::{InvalidReplicaName, ReplicaName};
#[cfg(feature = "http")]
pub use resource_metadata::ProtectedResource;
#[cfg(feature = "http")]
pub use sessions::{BoundedSessions, SessionsError};
#[cfg(feature = "http")]
pub use streamable::HttpOptions;

use crate::context::{CallContext, RequestFacts};
use crate::error::{ToolError, panicked};
#[cfg(feature = "http")]
use crate::principal::Principal;
use crate::server::Server;

/// Protocol-level options of an MCP endpoint.
#[derive(Debug, Clone)]
pub struct McpOptions {
    /// Tools per `tools/list` page (default 100).
    pub page_size: usize,
    /// How long a client may reuse a `tools/list` result (`ttlMs`, protocol 2026-07-28).
    /// The list only changes when the server is rebuilt, so the default is 5 minutes; with
    /// mounted upstreams, never longer than their shortest refresh interval.
    pub list_ttl: Duration,
    /// Who may share a cached `tools/list` result (`cacheScope`). `Public` by default: the list
    /// is the same for every caller. Use `Private` when it depends on who asks.
    pub list_cache_scope: CacheScope,
    /// The largest message read over stdio (one line), in bytes: 16 MiB by default, as rmcp's.
    /// A longer line is skipped as it arrives, never held, and answered with an error.
    pub max_message_bytes: usize,
}

impl Default for McpOptions {
    fn default() -> Self {
        McpOptions {
            page_size: 100,
            list_ttl: Duration::from_secs(300),
            list_cache_scope: CacheScope::Public,
            max_message_bytes: 16 * 1024 * 1024,
        }
    }
}

/// What a context factory learns about a request.
pub struct RequestInfo<'r> {
    context: &'r RequestContext<RoleServer>,
}

impl std::fmt::Debug for RequestInfo<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestInfo")
            .field("request_id", self.request_id())
            .finish_non_exhaustive()
    }
}

impl RequestInfo<'_> {
    /// The request's `_meta`.
    pub fn meta(&self) -> &rmcp::model::RequestMetaObject {
        &self.context.meta
    }

    /// The HTTP request, when the request came over HTTP.
    #[cfg(feature = "http")]
    pub fn http_request(&self) -> Option<&http::request::Parts> {
        self.context.extensions.get::<http::request::Parts>()
    }

    /// The negotiated or declared protocol version.
    pub fn protocol_version(&self) -> Option<rmcp::model::ProtocolVersion> {
        self.context.protocol_version()
    }

    /// The client's identity, when known.
    pub fn client_info(&self) -> Option<Implementation> {
        self.context.client_info()
    }

    /// The client's capabilities, when known (from the request's `_meta`, or the session's
    /// `initialize`).
    pub fn client_capabilities(&self) -> Option<rmcp::model::ClientCapabilities> {
        self.context.client_capabilities()
    }

    /// The JSON-RPC id of the request.
    pub fn request_id(&self) -> &rmcp::model::RequestId {
        &self.context.id
    }

    /// The progress token the client sent, if it asked for progress.
    pub fn progress_token(&self) -> Option<rmcp::model::ProgressToken> {
        self.context.meta.get_progress_token()
    }

    /// Cancelled when the client cancels the request (the call's
    /// [`CallContext::cancellation`] is the same token).
    pub fn cancellation(&self) -> &CancellationToken {
        &self.context.ct
    }
}

/// Runs once per request, before the tool: derives values for the call's context from what
/// the transport knows (a verified principal, a tenant, a trace id…).
///
/// When it runs, the call already holds the request's `_meta`, its cancellation token and what
/// the session knows (protocol version, client info). The transport's own values (the HTTP
/// request parts, the verified [`Principal`]) are read from the [`RequestInfo`]; they are added
/// to the call after the factory, over anything it inserted, so a factory cannot forge them.
pub type ContextFactory = Arc<dyn Fn(&RequestInfo<'_>, &mut CallContext) + Send + Sync>;

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
        }
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
        let definitions: Vec<ToolDefinition> = self
            .server
            .tools()
            .map(|tool| tool.definition().clone())
            .collect();
        let page_size = self.options.page_size.max(1);
        let ttl = u64::try_from(self.options.list_ttl.as_millis()).unwrap_or(u64::MAX);
        // A list that depends on the caller must not be shared between callers.
        let list_cache_scope = if self.server.has_access_policy() {
            CacheScope::Private
        } else {
            self.options.list_cache_scope
        };
        let chunks: Vec<&[ToolDefinition]> = if definitions.is_empty() {
            vec![&[]]
        } else {
            definitions.chunks(page_size).collect()
        };
        let pages = chunks
            .iter()
            .enumerate()
            .map(|(index, chunk)| {
                let mut page = ListToolsResult::with_all_items(chunk.to_vec())
                    .with_ttl_ms(ttl)
                    .with_cache_scope(list_cache_scope);
                if index + 1 < chunks.len() {
                    page.next_cursor = Some(cursor_of(index + 1));
                }
                page
            })
            .collect();
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
        // Without an access policy every caller sees the same listings: computed once here.
        let everyone = server.new_context();
        let content_listings = if server.has_access_policy() {
            content::ContentListings::default()
        } else {
            content::ContentListings {
                resources: content::Listing::new(server.visible_resources(&everyone), page_size),
                templates: content::Listing::new(
                    server.visible_resource_templates(&everyone),
                    page_size,
                ),
                prompts: content::Listing::new(server.visible_prompts(&everyone), page_size),
            }
        };
        let mut info = ServerConfig::new(capabilities).with_server_info(Implementation::new(
            self.server.name(),
            self.server.version(),
        ));
        if let Some(instructions) = self.server.instructions() {
            info = info.with_instructions(instructions);
        }
        McpHandler {
            shared: Arc::new(Shared {
                server: self.server.clone(),
                info,
                pages,
                content_listings,
                list_cache_scope,
                page_size,
                list_ttl: ttl,
                discover_cache_scope: self.options.list_cache_scope,
                context_factory: self.context_factory.clone(),
                subscriptions: Arc::clone(&self.subscriptions),
            }),
            connection: Arc::default(),
        }
    }
}

fn cursor_of(page: usize) -> String {
    format!("page-{page}")
}

fn page_of(cursor: &str) -> Option<usize> {
    cursor.strip_prefix("page-")?.parse().ok()
}

/// Counts events that a client can cause at will (refused tokens, refused connections), so
/// that they are logged at most once per [`Tally::WINDOW`] instead of once each.
#[cfg(feature = "http")]
#[derive(Debug, Default)]
pub(crate) struct Tally {
    state: std::sync::Mutex<TallyState>,
}

#[cfg(feature = "http")]
#[derive(Debug, Default)]
struct TallyState {
    unreported: u64,
    last_report: Option<std::time::Instant>,
}

#[cfg(feature = "http")]
impl Tally {
    pub(crate) const WINDOW: Duration = Duration::from_secs(60);

    /// Counts one event; says how many to report when a report is due (the first event, then
    /// the first one a window after the last report).
    pub(crate) fn record(&self) -> Option<u64> {
        self.record_at(std::time::Instant::now())
    }

    fn record_at(&self, now: std::time::Instant) -> Option<u64> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.unreported += 1;
        match state.last_report {
            Some(last) if now.duration_since(last) < Self::WINDOW => None,
            _ => {
                state.last_report = Some(now);
                Some(std::mem::take(&mut state.unreported))
            }
        }
    }
}

/// A transport could not start or stopped with an error: what failed, and why.
#[derive(Debug)]
pub struct ServeError {
    what: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl ServeError {
    // Unused when no transport is built in.
    #[cfg_attr(not(any(feature = "stdio", feature = "http")), allow(dead_code))]
    pub(crate) fn new(
        what: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        ServeError {
            what: what.into(),
            source: Some(source.into()),
        }
    }
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn std::error::Error + 'static))
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
    /// Its resource subscriptions: the URI and the resource's key.
    subscriptions: std::sync::Mutex<Vec<(String, crate::key::ToolKey)>>,
    /// Where its resource updates go: the peer of its latest request.
    peer: std::sync::Mutex<Option<rmcp::Peer<RoleServer>>>,
}

/// The most resources one session may be subscribed to at once.
const MAX_SUBSCRIPTIONS_PER_SESSION: usize = 256;

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
    pages: Vec<ListToolsResult>,
    content_listings: content::ContentListings,
    /// `Private` under an access policy, the configured scope otherwise.
    list_cache_scope: CacheScope,
    page_size: usize,
    list_ttl: u64,
    // What discovery says is the same for every caller, whatever the access policy.
    discover_cache_scope: CacheScope,
    context_factory: Option<ContextFactory>,
    /// The connections subscribed to resources (of every handler of the same [`Mcp`]).
    subscriptions: Arc<Subscribers>,
}

/// The connections with resource subscriptions; ended ones are dropped as they are met.
type Subscribers = std::sync::Mutex<Vec<std::sync::Weak<ConnectionState>>>;

impl McpHandler {
    /// The server behind this handler.
    pub fn server(&self) -> &Server {
        &self.shared.server
    }

    /// A handler for another connection: the same server, a state of its own.
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
                };
                call.meta = context.meta;
                call.cancellation = context.ct;
                call.extensions = context.extensions;
            }
            Some(factory) => {
                // The factory sees a call that already knows its request.
                call.request = RequestFacts {
                    peer: Some(context.peer.clone()),
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

impl McpHandler {
    /// `tools/list` under an access policy: only what this caller may call (see
    /// [`Server::visible_tools`]), paged the same way, and never cached for anyone else.
    fn list_visible(
        &self,
        cursor: Option<String>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let call = self
            .call_context(context)
            .map_err(|error| protocol_error("tools/list", error))?;
        // Grouped tools list only the actions this caller may call.
        let visible = self.shared.server.visible_tools(&call);
        let page_size = self.shared.page_size;
        let index = match cursor {
            None => 0,
            Some(cursor) => page_of(&cursor)
                .filter(|index| index * page_size < visible.len())
                .ok_or_else(|| {
                    ErrorData::invalid_params(format!("invalid cursor: {cursor}"), None)
                })?,
        };
        let start = index * page_size;
        let end = (start + page_size).min(visible.len());
        let mut page = ListToolsResult::with_all_items(visible[start..end].to_vec())
            .with_ttl_ms(self.shared.list_ttl)
            .with_cache_scope(CacheScope::Private);
        if end < visible.len() {
            page.next_cursor = Some(cursor_of(index + 1));
        }
        Ok(page)
    }
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        self.shared.info.clone()
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        let mut info = self.get_info();
        // Resource subscriptions are a session's (`resources/subscribe`, 2025-11-25): a
        // stateless client has none to use.
        if let Some(resources) = &mut info.capabilities.resources {
            resources.subscribe = None;
        }
        Ok(
            DiscoverResult::from_server_info(self.supported_protocol_versions().into_owned(), info)
                .with_ttl_ms(self.shared.list_ttl)
                .with_cache_scope(self.shared.discover_cache_scope),
        )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let cursor = request.and_then(|request| request.cursor);
        // Built-in and proxied tools, from the gateway's current catalog (SPEC R7).
        #[cfg(feature = "gateway")]
        if self.shared.server.gateway().is_some() {
            return self.list_with_gateway(cursor, context);
        }
        if self.shared.server.has_access_policy() {
            return self.list_visible(cursor, context);
        }
        let index = match cursor {
            None => 0,
            Some(cursor) => page_of(&cursor)
                .filter(|index| *index < self.shared.pages.len())
                .ok_or_else(|| {
                    ErrorData::invalid_params(format!("invalid cursor: {cursor}"), None)
                })?,
        };
        Ok(self.shared.pages[index].clone())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let cursor = request.and_then(|request| request.cursor);
        let page = if self.shared.server.has_access_policy() {
            let call = self
                .call_context(context)
                .map_err(|error| protocol_error("resources/list", error))?;
            content::page_for_caller(
                self.shared.server.visible_resources(&call),
                self.shared.page_size,
                cursor.as_deref(),
            )?
        } else {
            self.shared
                .content_listings
                .resources
                .page(cursor.as_deref())?
        };
        Ok(content::resources_result(
            page,
            self.shared.list_ttl,
            self.shared.list_cache_scope,
        ))
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let cursor = request.and_then(|request| request.cursor);
        let page = if self.shared.server.has_access_policy() {
            let call = self
                .call_context(context)
                .map_err(|error| protocol_error("resources/templates/list", error))?;
            content::page_for_caller(
                self.shared.server.visible_resource_templates(&call),
                self.shared.page_size,
                cursor.as_deref(),
            )?
        } else {
            self.shared
                .content_listings
                .templates
                .page(cursor.as_deref())?
        };
        Ok(content::templates_result(
            page,
            self.shared.list_ttl,
            self.shared.list_cache_scope,
        ))
    }

    async fn read_resource(
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
        let outcome = self.shared.server.read_resource(&request.uri, call).await;
        if let Some(input_required) = self.close_round(&round, &binding, outcome.is_err())? {
            return Ok(ReadResourceResponse::InputRequired(input_required));
        }
        outcome.map(ReadResourceResponse::from)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let cursor = request.and_then(|request| request.cursor);
        let page = if self.shared.server.has_access_policy() {
            let call = self
                .call_context(context)
                .map_err(|error| protocol_error("prompts/list", error))?;
            content::page_for_caller(
                self.shared.server.visible_prompts(&call),
                self.shared.page_size,
                cursor.as_deref(),
            )?
        } else {
            self.shared
                .content_listings
                .prompts
                .page(cursor.as_deref())?
        };
        Ok(content::prompts_result(
            page,
            self.shared.list_ttl,
            self.shared.list_cache_scope,
        ))
    }

    async fn get_prompt(
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
        let outcome = self
            .shared
            .server
            .get_prompt(&request.name, request.arguments, call)
            .await;
        if let Some(input_required) = self.close_round(&round, &binding, outcome.is_err())? {
            return Ok(GetPromptResponse::InputRequired(input_required));
        }
        outcome.map(GetPromptResponse::from)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
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
    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), ErrorData> {
        self.listen_for_changes(context).await
    }

    // rmcp marks logging deprecated (SEP-2577); sessions still set their level this way.
    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // A stateless request says its level in its own `_meta`: there is no session to set.
        if Asking::of(&context).rounds {
            return Err(ErrorData::method_not_found::<
                rmcp::model::SetLevelRequestMethod,
            >());
        }
        *locked(&self.connection_of(&context).log_level) =
            Some(crate::logging::LogLevel::from_wire(request.level));
        Ok(())
    }

    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let connection = self.connection_of(&context);
        let peer = context.peer.clone();
        let call = self
            .call_context(context)
            .map_err(|error| protocol_error("resources/subscribe", error))?;
        let key = self.shared.server.subscribable(&request.uri, &call)?;
        {
            let mut subscriptions = locked(&connection.subscriptions);
            if subscriptions.iter().any(|(uri, _)| *uri == request.uri) {
                return Ok(());
            }
            if subscriptions.len() >= MAX_SUBSCRIPTIONS_PER_SESSION {
                return Err(ErrorData::invalid_request(
                    format!(
                        "resources/subscribe: a session may hold at most {MAX_SUBSCRIPTIONS_PER_SESSION} subscriptions"
                    ),
                    None,
                ));
            }
            subscriptions.push((request.uri, key));
        }
        *locked(&connection.peer) = Some(peer);
        let mut subscribers = locked(&self.shared.subscriptions);
        subscribers.retain(|subscriber| subscriber.strong_count() > 0);
        if !subscribers
            .iter()
            .any(|subscriber| std::ptr::eq(subscriber.as_ptr(), Arc::as_ptr(&connection)))
        {
            subscribers.push(Arc::downgrade(&connection));
        }
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        locked(&self.connection_of(&context).subscriptions).retain(|(uri, _)| *uri != request.uri);
        Ok(())
    }

    fn get_tool(&self, name: &str) -> Option<ToolDefinition> {
        let builtin = self
            .shared
            .server
            .tool(name)
            .map(|tool| tool.definition().clone());
        #[cfg(feature = "gateway")]
        let builtin = builtin.or_else(|| self.shared.server.proxied_tool(name));
        builtin
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name: Cow<'_, str> = request.name;
        let asking = Asking::of(&context);
        let outcome = match self.call_context(context) {
            Ok(mut call) => {
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
                let outcome = self
                    .shared
                    .server
                    .call_tool(&name, request.arguments, call)
                    .await;
                let failed = outcome
                    .as_ref()
                    .is_ok_and(|result| result.is_error == Some(true));
                if let Some(input_required) = self.close_round(&round, &binding, failed)? {
                    return Ok(CallToolResponse::InputRequired(input_required));
                }
                outcome
            }
            Err(error) => self.shared.server.refuse_call(&name, error),
        };
        self.complete(outcome)
    }
}

fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::INVALID_PARAMS,
        format!("unknown tool: {name}"),
        None,
    )
}

/// What a request tells about asking its client: the protocol era and the capabilities the
/// client declared.
struct Asking {
    /// 2026-07-28: ask by answering `input_required`; otherwise over the session.
    rounds: bool,
    peer: rmcp::Peer<RoleServer>,
    capabilities: Option<rmcp::model::ClientCapabilities>,
}

impl Asking {
    fn of(context: &RequestContext<RoleServer>) -> Asking {
        Asking {
            rounds: context
                .protocol_version()
                .is_some_and(|version| !version.has_initialize()),
            peer: context.peer.clone(),
            capabilities: context.client_capabilities(),
        }
    }
}

impl McpHandler {
    /// A tool call's answer: its result, once the resources a successful mutation invalidates
    /// are notified; an unknown tool is a JSON-RPC error.
    fn complete(
        &self,
        outcome: Result<rmcp::model::CallToolResult, crate::server::UnknownTool>,
    ) -> Result<CallToolResponse, ErrorData> {
        match outcome {
            Ok(result) => {
                if result.is_error != Some(true) {
                    self.notify_invalidated(&result);
                }
                Ok(CallToolResponse::Complete(result))
            }
            Err(unknown) => Err(unknown_tool(&unknown.0)),
        }
    }

    /// Whether a call of `name` is a proxied tool's whose rounds are the upstream's (SPEC R7):
    /// a 2026-07-28 caller's, or a session caller's that can be asked something (one that can
    /// be asked nothing has nothing to pass through, and takes the plain path).
    #[cfg(feature = "gateway")]
    fn passes_rounds_through(&self, name: &str, asking: &Asking) -> bool {
        self.shared.server.gateway().is_some()
            && self.shared.server.tool(name).is_none()
            && (asking.rounds
                || asking.capabilities.as_ref().is_some_and(|capabilities| {
                    crate::elicit::Need::ALL
                        .iter()
                        .any(|need| need.declared_by(capabilities))
                }))
    }

    /// A proxied call whose rounds pass through: the upstream's `input_required` answer, or
    /// its refusal of the caller's state or answers, is the caller's as it came.
    #[cfg(feature = "gateway")]
    async fn call_proxied(
        &self,
        name: &str,
        arguments: Option<rmcp::model::JsonObject>,
        (state, responses): (Option<String>, Option<rmcp::model::InputResponses>),
        asking: Asking,
        mut call: CallContext,
    ) -> Result<CallToolResponse, ErrorData> {
        use crate::gateway::{Answer, Passthrough};
        let through = Arc::new(if asking.rounds {
            Passthrough::new(state, responses, asking.capabilities)
        } else {
            Passthrough::over_session(asking.peer, asking.capabilities)
        });
        call.extensions_mut().insert(Arc::clone(&through));
        let outcome = self.shared.server.call_tool(name, arguments, call).await;
        match through.take() {
            Some(Answer::InputRequired(result)) => Ok(CallToolResponse::InputRequired(result)),
            Some(Answer::Error(error)) => Err(error),
            None => self.complete(outcome),
        }
    }
}

/// What a sealed request state is bound to (target, arguments, principal). Only 2026-07-28
/// rounds open or seal a state, and only when one comes in or goes out, so the arguments'
/// digest is taken then: it was a sha256 of every call's arguments, about 7k instructions.
struct LazyBinding<'a> {
    target: &'a str,
    /// The arguments and the principal's subject, kept only when the call asks in rounds.
    kept: Option<(Value, Option<String>)>,
}

impl<'a> LazyBinding<'a> {
    fn new(
        asking: &Asking,
        target: &'a str,
        arguments: impl FnOnce() -> Value,
        call: &crate::context::CallContext,
    ) -> LazyBinding<'a> {
        let kept = asking.rounds.then(|| {
            let subject = call.principal().map(|principal| principal.subject.clone());
            (arguments(), subject)
        });
        LazyBinding { target, kept }
    }

    fn get(&self) -> crate::request_state::Binding {
        // `open_round` and `close_round` return before this unless the call asks in rounds.
        let (arguments, subject) = self.kept.as_ref().expect("a round's binding is kept");
        crate::request_state::Binding::new(self.target, arguments, subject.as_deref())
    }
}

impl McpHandler {
    /// The round a handler asks in: over the session, or (2026-07-28) with the questions asked
    /// and answered in earlier rounds: none on a first call; on a retry, those of its verified
    /// state with the new answers added. Answers without a state are not trusted (the
    /// questions are asked again) and answers to no open question are ignored; a state that
    /// does not verify, or an answer that is not a result of its question's kind, is refused.
    fn open_round(
        &self,
        asking: Asking,
        binding: &LazyBinding<'_>,
        state: Option<String>,
        responses: Option<rmcp::model::InputResponses>,
    ) -> Result<Arc<crate::elicit::Round>, ToolError> {
        use crate::elicit::{Era, Need, Round};
        let capabilities = asking.capabilities.as_ref();
        if !asking.rounds {
            return Ok(Arc::new(Round::new(
                Era::Session(asking.peer),
                capabilities,
            )));
        }
        let Some(state) = state else {
            return Ok(Arc::new(Round::new(
                Era::Rounds(Default::default()),
                capabilities,
            )));
        };
        let data = self
            .shared
            .server
            .inner
            .state_keys
            .open(&state, &binding.get())?;
        let mut asked = crate::elicit::from_state_data(data)
            .ok_or_else(|| ToolError::from(crate::request_state::StateError::Malformed))?;
        for (key, answer) in responses.unwrap_or_default() {
            let Some(question) = asked
                .get_mut(&key)
                .filter(|question| question.answer.is_none())
            else {
                continue;
            };
            if !Need::of_method(&question.method).is_some_and(|need| need.accepts(&answer)) {
                return Err(ToolError::new(
                    crate::error::codes::VALIDATION_ERROR,
                    format!(
                        "inputResponses.{key} is not a result of {}.",
                        question.method
                    ),
                )
                .with_recovery("Answer each inputRequest with the result of its method."));
            }
            question.answer = Some(answer);
        }
        Ok(Arc::new(Round::new(Era::Rounds(asked), capabilities)))
    }

    /// After the handler: the `input_required` result asking this run's questions (with the
    /// sealed state of every question so far), or `-32021` when the handler failed for want of
    /// a capability the client did not declare (2026-07-28); `None` when the result stands.
    fn close_round(
        &self,
        round: &crate::elicit::Round,
        binding: &LazyBinding<'_>,
        failed: bool,
    ) -> Result<Option<rmcp::model::InputRequiredResult>, ErrorData> {
        let crate::elicit::Era::Rounds(asked) = &round.era else {
            return Ok(None);
        };
        if let Some(need) = round.take_missing()
            && failed
        {
            return Err(ErrorData::missing_required_client_capability(
                need.capabilities(),
            ));
        }
        let pending = round.take_pending();
        if pending.is_empty() {
            return Ok(None);
        }
        let mut asked = asked.clone();
        let mut requests = rmcp::model::InputRequests::new();
        for (key, pending) in pending {
            asked.insert(key.clone(), pending.asked);
            requests.insert(key, pending.request);
        }
        let inner = &self.shared.server.inner;
        let state = inner.state_keys.seal(
            &binding.get(),
            &crate::elicit::state_data(&asked),
            inner.state_ttl,
        );
        Ok(Some(rmcp::model::InputRequiredResult::new(
            Some(requests),
            Some(state),
        )))
    }

    /// A request refused before its handler ran (a request state that does not verify, an
    /// answer of the wrong kind): a JSON-RPC invalid-params error whose `data` is the error
    /// body a tool would send, recorded as the call's failure.
    fn refuse_request(&self, name: &str, error: ToolError) -> Result<ErrorData, ErrorData> {
        let result = self
            .shared
            .server
            .refuse_call(name, error)
            .map_err(|unknown| unknown_tool(&unknown.0))?;
        Ok(invalid_params_with_body(result.structured_content))
    }
}

impl McpHandler {
    /// A prompt or read refused before its handler ran: as [`McpHandler::refuse_request`],
    /// naming the prompt or resource.
    fn refuse_content(&self, name: &str, error: ToolError) -> ErrorData {
        let inner = &self.shared.server.inner;
        let parts = crate::envelope::SealedParts::for_tool(name, &inner.version);
        let sealed = crate::envelope::seal_error(&inner.names, &parts, error);
        invalid_params_with_body(sealed.result.structured_content)
    }
}

impl McpHandler {
    /// Tells every session subscribed to a resource that a successful call's `invalidates`
    /// names (by key) that it changed (`notifications/resources/updated`).
    fn notify_invalidated(&self, result: &rmcp::model::CallToolResult) {
        let Some(globs) = result
            .structured_content
            .as_ref()
            .and_then(|envelope| envelope["meta"]["invalidates"].as_array())
            .filter(|globs| !globs.is_empty())
        else {
            return;
        };
        let globs: Vec<crate::key::Glob> = globs
            .iter()
            .filter_map(Value::as_str)
            .filter_map(|glob| crate::key::Glob::parse(glob.to_owned()).ok())
            .collect();
        let mut subscribers = locked(&self.shared.subscriptions);
        subscribers.retain(|subscriber| subscriber.strong_count() > 0);
        for connection in subscribers.iter().filter_map(std::sync::Weak::upgrade) {
            let Some(peer) = locked(&connection.peer).clone() else {
                continue;
            };
            for (uri, _) in locked(&connection.subscriptions)
                .iter()
                .filter(|(_, key)| globs.iter().any(|glob| glob.matches(key.as_str())))
            {
                let (peer, updated) = (
                    peer.clone(),
                    rmcp::model::ResourceUpdatedNotificationParam::new(uri),
                );
                // Sent off the call's path: a slow or gone client does not hold the call up.
                tokio::spawn(async move {
                    if let Err(error) = peer.notify_resource_updated(updated).await {
                        tracing::debug!(%error, "resource update not delivered");
                    }
                });
            }
        }
    }
}

/// `-32602` with the error body of a sealed failure envelope as `data`.
fn invalid_params_with_body(envelope: Option<Value>) -> ErrorData {
    let body = envelope
        .and_then(|mut envelope| envelope.get_mut("error").map(Value::take))
        .unwrap_or(Value::Null);
    let message = body
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("The request was refused.")
        .to_owned();
    ErrorData::invalid_params(message, Some(body))
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

#[cfg(all(test, feature = "http"))]
mod tests {
    use super::*;

    #[test]
    fn a_tally_reports_the_first_event_then_at_most_once_a_window() {
        let tally = Tally::default();
        let start = std::time::Instant::now();
        assert_eq!(tally.record_at(start), Some(1));
        for second in 1..60 {
            assert_eq!(tally.record_at(start + Duration::from_secs(second)), None);
        }
        // The 59 events counted meanwhile, and this one.
        assert_eq!(tally.record_at(start + Tally::WINDOW), Some(60));
        assert_eq!(tally.record_at(start + Tally::WINDOW), None);
    }
}

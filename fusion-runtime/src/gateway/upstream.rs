//! One upstream's connection: started by a supervisor task, which fetches its catalog,
//! refreshes it when the upstream says its tools changed (or on an interval), and restarts it
//! with backoff when it dies; and the client handler that carries the upstream's
//! notifications (progress, list changes) back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, Weak};
use std::time::{Duration, Instant};

use rmcp::model::{
    ClientConfig, ClientJsonRpcMessage, ClientRequest, Implementation, ListToolsRequest,
    PaginatedRequestParams, ProtocolVersion, RequestId, ServerNotification, ServerRequest,
    ServerResult, SubscriptionFilter, Tool as ToolDefinition,
};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt as _, NotificationContext,
    RequestContext, RunningService, Subscription,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, Peer, RoleClient, Service as _, ServiceExt as _};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::http::{HttpCalls, Origin};
use super::names::Renames;
use super::progress::{Routed, Routes};
use super::session::{SessionId, Snoop};
use super::{Gateway, Upstream, UpstreamProtocol, UpstreamStatus, UpstreamTransport};

/// A live connection to an upstream.
pub(crate) struct Link {
    /// rmcp's client.
    pub(crate) peer: Peer<RoleClient>,
    /// The gateway's own path for tool calls, to an HTTP upstream.
    pub(crate) http: Option<HttpCalls>,
}

/// The shared state of one mounted upstream.
pub(crate) struct UpstreamState {
    pub(crate) prefix: String,
    pub(crate) config: Upstream,
    pub(crate) concurrency: Option<crate::guard::ConcurrencyGuard>,
    /// The connection, while there is one.
    link: RwLock<Option<Arc<Link>>>,
    /// The last catalog the upstream gave.
    tools: RwLock<Arc<Vec<ToolDefinition>>>,
    /// How its tools are called here, for what it says of them (set with the catalog).
    renames: RwLock<Arc<Renames>>,
    server_version: RwLock<Option<String>>,
    /// It speaks 2026-07-28 and declares the tasks extension (set with the catalog).
    runs_tasks: AtomicBool,
    /// Where each in-flight call's progress goes, by the upstream's token (read by the
    /// transport, in order: see [`super::progress`]).
    routes: Routes,
    /// Set when the upstream says its tools changed.
    refresh: Notify,
    /// Set when a call found the upstream gone (HTTP upstreams do not end by themselves).
    reconnect: Notify,
    starts: AtomicU64,
    pid: AtomicU32,
    /// Becomes true after the first start was tried.
    attempted: watch::Sender<bool>,
}

impl UpstreamState {
    pub(crate) fn new(prefix: String, config: Upstream) -> Self {
        UpstreamState {
            concurrency: config.concurrency.map(crate::guard::ConcurrencyGuard::new),
            prefix,
            config,
            link: RwLock::new(None),
            tools: RwLock::new(Arc::new(Vec::new())),
            renames: RwLock::default(),
            server_version: RwLock::new(None),
            runs_tasks: AtomicBool::new(false),
            routes: Routes::default(),
            refresh: Notify::new(),
            reconnect: Notify::new(),
            starts: AtomicU64::new(0),
            pid: AtomicU32::new(0),
            attempted: watch::channel(false).0,
        }
    }

    /// The connection, if the upstream is up.
    pub(crate) fn link(&self) -> Option<Arc<Link>> {
        self.link
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn peer(&self) -> Option<Peer<RoleClient>> {
        self.link().map(|link| link.peer.clone())
    }

    pub(crate) fn tools(&self) -> Arc<Vec<ToolDefinition>> {
        Arc::clone(&self.tools.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// How its tools are called here now.
    pub(crate) fn renames(&self) -> Arc<Renames> {
        Arc::clone(&self.renames.read().unwrap_or_else(PoisonError::into_inner))
    }

    pub(crate) fn set_renames(&self, renames: Renames) {
        *self.renames.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(renames);
    }

    pub(crate) fn server_version(&self) -> Option<String> {
        self.server_version
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether its tools' calls may become tasks: it speaks 2026-07-28 (where the gateway
    /// declares the extension per request) and declares the extension.
    pub(crate) fn runs_tasks(&self) -> bool {
        self.runs_tasks.load(Ordering::Acquire)
    }

    pub(crate) fn status(&self) -> UpstreamStatus {
        let pid = self.pid.load(Ordering::Acquire);
        UpstreamStatus {
            prefix: self.prefix.clone(),
            connected: self.peer().is_some(),
            tools: self.tools().len(),
            starts: self.starts.load(Ordering::Acquire),
            pid: (pid != 0).then_some(pid),
            protocol: self.peer().and_then(|peer| {
                peer.peer_info()
                    .map(|info| info.protocol_version.as_str().to_owned())
            }),
        }
    }

    pub(crate) async fn first_attempt(&self) {
        let mut attempted = self.attempted.subscribe();
        let _ = attempted.wait_for(|done| *done).await;
    }

    /// Where the progress of calls in flight goes.
    pub(crate) fn routes(&self) -> &Routes {
        &self.routes
    }

    /// The upstream no longer knows a tool it listed: its catalog is fetched again.
    pub(crate) fn request_refresh(&self) {
        self.refresh.notify_one();
    }

    /// A call found the connection broken: the supervisor checks it and reconnects.
    pub(crate) fn connection_failed(&self) {
        self.reconnect.notify_one();
    }

    fn set_down(&self) {
        *self.link.write().unwrap_or_else(PoisonError::into_inner) = None;
        self.pid.store(0, Ordering::Release);
    }
}

/// Checks what can be checked of an upstream before starting it.
pub(crate) fn check(prefix: &str, upstream: &Upstream, problems: &mut Vec<String>) {
    match &upstream.transport {
        UpstreamTransport::Stdio { program, .. } if program.trim().is_empty() => {
            problems.push(format!("upstream `{prefix}`: the command is empty"));
        }
        UpstreamTransport::Stdio { .. } => {}
        UpstreamTransport::Http {
            url,
            headers,
            credentials,
        } => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                problems.push(format!(
                    "upstream `{prefix}`: `{url}` is not an http:// or https:// URL"
                ));
            }
            if let Some(source) = credentials {
                let endpoint = &source.credentials().token_endpoint;
                if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
                    problems.push(format!(
                        "upstream `{prefix}`: the token endpoint `{endpoint}` is not an http:// \
                         or https:// URL"
                    ));
                }
                if headers
                    .iter()
                    .any(|(name, _)| name.eq_ignore_ascii_case("authorization"))
                {
                    problems.push(format!(
                        "upstream `{prefix}`: an `Authorization` header and client credentials \
                         both authenticate it; keep one"
                    ));
                }
                if source.exchanges_tokens() && upstream.protocol == UpstreamProtocol::Session {
                    problems.push(format!(
                        "upstream `{prefix}`: token exchange sends each caller's own token, \
                         which a 2025-11-25 session opened with the gateway's token cannot \
                         carry; speak `UpstreamProtocol::Stateless` (or `Auto`) to it"
                    ));
                }
            }
            for (name, value) in headers {
                // The transport's own headers: rmcp would refuse every request.
                if [
                    "accept",
                    "mcp-session-id",
                    "mcp-protocol-version",
                    "last-event-id",
                ]
                .iter()
                .any(|reserved| name.eq_ignore_ascii_case(reserved))
                {
                    problems.push(format!(
                        "upstream `{prefix}`: `{name}` is set by the MCP transport itself"
                    ));
                }
                if http::HeaderName::try_from(name.as_str()).is_err() {
                    problems.push(format!(
                        "upstream `{prefix}`: `{name}` is not a valid HTTP header name"
                    ));
                }
                // The value is a secret: never in the message.
                if http::HeaderValue::try_from(value.as_str()).is_err() {
                    problems.push(format!(
                        "upstream `{prefix}`: the value of header `{name}` is not a valid \
                         HTTP header value"
                    ));
                }
            }
        }
    }
}

/// The rmcp client of one upstream: carries its notifications back.
struct UpstreamClient {
    state: Weak<UpstreamState>,
}

// Progress is not handled here: the transport routes it to its call (`super::progress`); what
// reaches the handler belongs to no call in flight any more.
impl ClientHandler for UpstreamClient {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if let Some(state) = self.state.upgrade() {
            state.refresh.notify_one();
        }
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.client_info = Implementation::new("fusion-gateway", env!("CARGO_PKG_VERSION"));
        info
    }
}

type Connection = RunningService<RoleClient, UpstreamClient>;

impl Origin for Arc<UpstreamState> {
    fn prefix(&self) -> &str {
        &self.prefix
    }

    fn request_refresh(&self) {
        UpstreamState::request_refresh(self);
    }

    fn answer<'a>(
        &'a self,
        peer: &'a Peer<RoleClient>,
        id: RequestId,
        request: ServerRequest,
    ) -> futures::future::BoxFuture<'a, ClientJsonRpcMessage> {
        Box::pin(async move {
            let client = UpstreamClient {
                state: Arc::downgrade(self),
            };
            match client
                .handle_request(request, RequestContext::new(id.clone(), peer.clone()))
                .await
            {
                Ok(result) => ClientJsonRpcMessage::response(result, id),
                Err(error) => ClientJsonRpcMessage::error(error, Some(id)),
            }
        })
    }
}

/// Starts the upstream and its rmcp client (and the gateway's own path for tool calls to an
/// HTTP upstream).
async fn connect(
    state: &Arc<UpstreamState>,
) -> Result<(Connection, Option<u32>, Option<HttpCalls>), String> {
    let client = UpstreamClient {
        state: Arc::downgrade(state),
    };
    match &state.config.transport {
        UpstreamTransport::Stdio {
            program,
            args,
            env,
            current_dir,
        } => {
            let mut command = tokio::process::Command::new(program);
            command.args(args);
            for (name, value) in env {
                command.env(name, value);
            }
            if let Some(dir) = current_dir {
                command.current_dir(dir);
            }
            // Its stderr is the gateway's.
            let process = super::child::ChildTransport::spawn(command)
                .map_err(|error| format!("starting `{program}`: {error}"))?;
            let pid = process.id();
            let process = Routed::new(process, Arc::clone(&state.routes));
            let connection = match state.config.protocol {
                UpstreamProtocol::Auto | UpstreamProtocol::Session => client.serve(process).await,
                UpstreamProtocol::Stateless => {
                    client.serve_with_lifecycle(process, stateless()).await
                }
            }
            .map_err(|error| format!("the MCP handshake with `{program}` failed: {error}"))?;
            Ok((connection, pid, None))
        }
        UpstreamTransport::Http {
            url,
            headers,
            credentials,
        } => {
            let http = http_client().map_err(|error| format!("connecting to {url}: {error}"))?;
            let session = Arc::new(SessionId::default());
            let transport = || {
                Routed::new(
                    rmcp::transport::StreamableHttpClientTransport::with_client(
                        Snoop {
                            client: http.clone(),
                            session: Arc::clone(&session),
                            credentials: credentials.clone(),
                        },
                        http_config(url, headers),
                    ),
                    Arc::clone(&state.routes),
                )
            };
            let lifecycle = match state.config.protocol {
                UpstreamProtocol::Session => ClientLifecycleMode::Initialize,
                UpstreamProtocol::Stateless => stateless(),
                UpstreamProtocol::Auto => ClientLifecycleMode::Auto {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                    legacy_version: Some(ProtocolVersion::V_2025_11_25),
                },
            };
            let connected = match client.serve_with_lifecycle(transport(), lifecycle).await {
                // A server whose `server/discover` offers only older versions: rmcp's `Auto`
                // gives up there instead of falling back, so the session is opened here.
                Err(ClientInitializeError::NoCompatibleProtocolVersion {
                    server_supported,
                    ..
                }) if state.config.protocol == UpstreamProtocol::Auto
                    && server_supported
                        .iter()
                        .any(|version| *version < ProtocolVersion::V_2026_07_28) =>
                {
                    UpstreamClient {
                        state: Arc::downgrade(state),
                    }
                    .serve_with_lifecycle(transport(), ClientLifecycleMode::Initialize)
                    .await
                }
                other => other,
            };
            let connection = connected.map_err(|error| format!("connecting to {url}: {error}"))?;
            let info = connection
                .peer()
                .peer_info()
                .ok_or_else(|| format!("connecting to {url}: no handshake"))?;
            let version = &info.protocol_version;
            let calls = HttpCalls::new(
                http,
                url,
                headers,
                version,
                // rmcp's client sends its facts with every request from 2026-07-28 on.
                *version >= ProtocolVersion::V_2026_07_28,
                &ClientHandler::get_info(connection.service()),
                session,
            )
            .map_err(|error| format!("connecting to {url}: {error}"))?
            .with_credentials(credentials.clone());
            Ok((connection, None, Some(calls)))
        }
    }
}

fn stateless() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

/// The HTTP client of an upstream's connection. rmcp's default opens a TCP connection per
/// request (it keeps none idle): 0.4 ms more per proxied call on loopback, measured. This one
/// keeps them alive (our servers set `TCP_NODELAY`, and so does it, so a reused connection
/// does not wait on delayed ACKs), and follows no redirect: a redirected POST is an error, not
/// a message replayed elsewhere with the upstream's credentials.
///
/// With fusion's `http-client` feature reqwest is built without a default crypto provider
/// (cargo shares that feature with this client), so the client brings the proxy verb's own TLS
/// (rustls on ring) instead of relying on a process-wide provider, which would panic when none
/// is installed.
pub(crate) fn http_client() -> Result<reqwest::Client, String> {
    let builder = reqwest::Client::builder()
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(60))
        .redirect(reqwest::redirect::Policy::none());
    #[cfg(feature = "http-client")]
    let builder = builder.tls_backend_preconfigured(
        crate::upstream::tls_config().map_err(|error| error.to_string())?,
    );
    builder
        .build()
        .map_err(|error| format!("the HTTP client could not be built: {error}"))
}

/// The configuration of rmcp's Streamable HTTP client for `url` with these headers.
fn http_config(url: &str, headers: &[(String, String)]) -> StreamableHttpClientTransportConfig {
    let mut custom = HashMap::new();
    let mut bearer = None;
    for (name, value) in headers {
        // A bearer token goes through rmcp's own field (its authorization support reads it);
        // any other `Authorization` scheme is a header like the others.
        if name.eq_ignore_ascii_case("authorization")
            && let Some(token) = value.strip_prefix("Bearer ")
        {
            bearer = Some(token.to_owned());
            continue;
        }
        // Checked when the server was built.
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::try_from(name.as_str()),
            http::HeaderValue::try_from(value.as_str()),
        ) {
            custom.insert(name, value);
        }
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    if let Some(token) = bearer {
        config = config.auth_header(token);
    }
    config
}

/// Every page of the upstream's `tools/list`, asked afresh (rmcp's client caches lists for
/// their TTL; a refresh must not read that cache).
async fn fetch_tools(peer: &Peer<RoleClient>) -> Result<Vec<ToolDefinition>, String> {
    let mut tools = Vec::new();
    let mut cursor = None;
    // A server that pages forever is cut off.
    for _ in 0..1000 {
        let params =
            cursor.map(|cursor| PaginatedRequestParams::default().with_cursor(Some(cursor)));
        let response = peer
            .send_request(ClientRequest::ListToolsRequest(ListToolsRequest {
                method: Default::default(),
                params,
                extensions: Default::default(),
            }))
            .await
            .map_err(|error| format!("tools/list failed: {error}"))?;
        let ServerResult::ListToolsResult(page) = response else {
            return Err("tools/list gave something else than a tool list".into());
        };
        tools.extend(page.tools);
        match page.next_cursor {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => return Ok(tools),
        }
    }
    Err("tools/list kept giving more pages".into())
}

/// Runs one upstream until `shutdown`: start, fetch the catalog, serve, refresh on change,
/// restart with backoff when it dies.
pub(crate) async fn supervise(
    state: Arc<UpstreamState>,
    gateway: Weak<Gateway>,
    shutdown: CancellationToken,
) {
    let (initial, max) = state.config.backoff;
    let mut backoff = initial;
    loop {
        let started = tokio::select! {
            _ = shutdown.cancelled() => break,
            started = tokio::time::timeout(state.config.connect_timeout, start(&state)) => started
                .unwrap_or_else(|_| Err("starting it took longer than its connect timeout".into())),
        };
        match started {
            Ok((connection, changes)) => {
                backoff = initial;
                publish(&gateway);
                state.attempted.send_replace(true);
                let alive = Instant::now();
                let stopped = serve(&state, &gateway, connection, changes, &shutdown).await;
                state.set_down();
                if stopped {
                    break;
                }
                tracing::warn!(
                    upstream = %state.prefix,
                    after = ?alive.elapsed(),
                    "the upstream stopped; restarting it"
                );
            }
            Err(error) => {
                state.attempted.send_replace(true);
                tracing::error!(upstream = %state.prefix, %error, retry_in = ?backoff,
                    "the upstream could not be started");
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(max);
            }
        }
    }
    state.set_down();
    state.attempted.send_replace(true);
}

/// One start: the connection, its change stream (2026-07-28), and the catalog, published.
async fn start(state: &Arc<UpstreamState>) -> Result<(Connection, Option<Subscription>), String> {
    let (connection, pid, http) = connect(state).await?;
    let exchanges = http
        .as_ref()
        .is_some_and(super::http::HttpCalls::exchanges_tokens);
    // A 2025-11-25 session was opened with the gateway's own token, and a server may bind it
    // to that identity: each caller's exchanged token is only sent where every request stands
    // alone.
    if exchanges
        && let Some(info) = connection.peer().peer_info()
        && info.protocol_version < ProtocolVersion::V_2026_07_28
    {
        return Err(format!(
            "token exchange needs an upstream that speaks 2026-07-28 (requests without a \
             session); this one answered {}",
            info.protocol_version
        ));
    }
    // Listening first: a change after the catalog is fetched is not missed.
    let changes = listen(state, connection.peer()).await;
    let tools = fetch_tools(connection.peer()).await?;
    tracing::info!(upstream = %state.prefix, tools = tools.len(), pid, "upstream started");
    *state
        .server_version
        .write()
        .unwrap_or_else(PoisonError::into_inner) = connection.peer().peer_info().and_then(|info| {
        info.server_info
            .as_ref()
            .map(|server| server.version.clone())
    });
    // Task requests travel on rmcp's client, which carries the gateway's own token: the tools
    // of an upstream that must see each caller's own exchanged token never become tasks.
    let runs_tasks = !exchanges
        && connection.peer().peer_info().is_some_and(|info| {
            info.protocol_version >= ProtocolVersion::V_2026_07_28
                && info.capabilities.supports_tasks()
        });
    state.runs_tasks.store(runs_tasks, Ordering::Release);
    *state.tools.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(tools);
    *state.link.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(Link {
        peer: connection.peer().clone(),
        http,
    }));
    state.pid.store(pid.unwrap_or(0), Ordering::Release);
    state.starts.fetch_add(1, Ordering::AcqRel);
    Ok((connection, changes))
}

/// A `subscriptions/listen` stream of the upstream's tool list changes, when it speaks
/// 2026-07-28 (where list changes are only sent on such a stream) and says its list changes.
/// Sessions and stdio upstreams send `notifications/tools/list_changed` unasked.
async fn listen(state: &UpstreamState, peer: &Peer<RoleClient>) -> Option<Subscription> {
    let info = peer.peer_info()?;
    let notifies = info
        .capabilities
        .tools
        .as_ref()
        .and_then(|tools| tools.list_changed)
        == Some(true);
    if info.protocol_version < ProtocolVersion::V_2026_07_28 || !notifies {
        return None;
    }
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    match peer.listen(filter).await {
        Ok(subscription) => Some(subscription),
        Err(error) => {
            tracing::warn!(upstream = %state.prefix, %error,
                "cannot listen for the upstream's tool list changes");
            None
        }
    }
}

/// The next notification of a listen stream; `None` once it ended (never without one).
async fn next_change(subscription: &mut Option<Subscription>) -> Option<ServerNotification> {
    match subscription {
        Some(subscription) => subscription.next().await.ok().flatten(),
        None => std::future::pending().await,
    }
}

fn publish(gateway: &Weak<Gateway>) {
    if let Some(gateway) = gateway.upgrade() {
        gateway.rebuild();
    }
}

/// Serves one connection until it ends (`false`) or the gateway shuts down (`true`).
async fn serve(
    state: &Arc<UpstreamState>,
    gateway: &Weak<Gateway>,
    connection: Connection,
    mut changes: Option<Subscription>,
    shutdown: &CancellationToken,
) -> bool {
    let listening = changes.is_some();
    // A listen stream that ended is opened again, after a pause that grows.
    let mut relisten: Option<(tokio::time::Instant, Duration)> = None;
    let peer = connection.peer().clone();
    let mut cancel = Some(connection.cancellation_token());
    let waiting = connection.waiting();
    tokio::pin!(waiting);
    let mut interval = state.config.refresh_every.map(|every| {
        let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval
    });
    loop {
        let tick = async {
            match &mut interval {
                Some(interval) => {
                    interval.tick().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => {
                // The service closes the transport: a child gets its stdin closed, then
                // SIGTERM, then is killed, if it lingers.
                if let Some(cancel) = cancel.take() {
                    cancel.cancel();
                }
                let _ = tokio::time::timeout(Duration::from_secs(10), &mut waiting).await;
                return true;
            }
            _ = &mut waiting => return false,
            _ = state.reconnect.notified() => {
                if peer.is_transport_closed() {
                    if let Some(cancel) = cancel.take() {
                        cancel.cancel();
                    }
                    let _ = tokio::time::timeout(Duration::from_secs(10), &mut waiting).await;
                    return false;
                }
            }
            _ = state.refresh.notified() => refresh(state, gateway, &peer).await,
            _ = tick => refresh(state, gateway, &peer).await,
            change = next_change(&mut changes) => match change {
                Some(ServerNotification::ToolListChangedNotification(_)) => {
                    refresh(state, gateway, &peer).await;
                }
                Some(_) => {}
                None => {
                    changes = None;
                    let pause = relisten.map_or(Duration::from_millis(500), |(_, pause)| {
                        (pause * 2).min(Duration::from_secs(30))
                    });
                    tracing::debug!(upstream = %state.prefix, retry_in = ?pause,
                        "the upstream's listen stream ended");
                    relisten = Some((tokio::time::Instant::now() + pause, pause));
                }
            },
            _ = async {
                match relisten {
                    Some((at, _)) if listening => tokio::time::sleep_until(at).await,
                    _ => std::future::pending().await,
                }
            } => {
                changes = listen(state, &peer).await;
                match changes {
                    // Changes made while it was closed are fetched now.
                    Some(_) => {
                        relisten = None;
                        refresh(state, gateway, &peer).await;
                    }
                    None => {
                        let pause = relisten.map_or(Duration::from_secs(1), |(_, pause)| {
                            (pause * 2).min(Duration::from_secs(30))
                        });
                        relisten = Some((tokio::time::Instant::now() + pause, pause));
                    }
                }
            }
        }
    }
}

async fn refresh(state: &Arc<UpstreamState>, gateway: &Weak<Gateway>, peer: &Peer<RoleClient>) {
    match fetch_tools(peer).await {
        Ok(tools) => {
            let changed = **state.tools() != tools;
            if changed {
                tracing::info!(upstream = %state.prefix, tools = tools.len(), "upstream catalog changed");
                *state.tools.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(tools);
                publish(gateway);
            }
        }
        Err(error) => {
            tracing::warn!(upstream = %state.prefix, %error, "refreshing the upstream catalog failed");
            state.connection_failed();
        }
    }
}

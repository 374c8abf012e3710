//! Streamable HTTP: the 2025-11-25 session protocol and the stateless 2026-07-28 protocol on
//! one endpoint, `Host`/`Origin` checked in front of everything, bearer authentication, and an
//! axum router to mount in an existing application.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::response::IntoResponse;
use http::StatusCode;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::auth::{Authenticator, TokenVerifier};
use super::connections::ConnectionLimits;
use super::host_origin::{HostOriginGuard, HostOriginLayer};
use super::sessions::{BoundedSessions, Caller, Opener, Refusal, SessionLimits};
use super::{Mcp, McpHandler, ProtectedResource, ReplicaName, ServeError};

/// A tower layer added with [`Mcp::layer`], kept as what it does to the router.
pub(super) type RouterLayer = Arc<dyn Fn(axum::Router) -> axum::Router + Send + Sync>;

impl Mcp {
    /// Wraps the HTTP endpoint in a tower layer (tracing, CORS, compression, timeouts, extra
    /// response headers…), wherever it is served: [`Mcp::router`], [`Mcp::serve_http`],
    /// [`Mcp::serve_http_on`]. The serving defaults (`TCP_NODELAY`, graceful Ctrl-C) stay.
    ///
    /// As with [`axum::Router::layer`], the last layer added runs first. Every request meets,
    /// in order: the `Host`/`Origin` check (a foreign one gets 403 before anything else runs),
    /// your layers, the bearer-token check ([`HttpOptions::auth`]), then the MCP endpoint.
    ///
    /// ```no_run
    /// # async fn run(server: fusion_runtime::Server) -> Result<(), fusion_runtime::serve::ServeError> {
    /// use fusion_runtime::serve::{HttpOptions, Mcp};
    ///
    /// // Any tower layer whose service axum accepts, e.g. from tower-http:
    /// // Mcp::new(server).layer(tower_http::trace::TraceLayer::new_for_http())
    /// let logged = axum::middleware::map_request(|request: axum::extract::Request| async move {
    ///     eprintln!("{} {}", request.method(), request.uri());
    ///     request
    /// });
    /// Mcp::new(server).layer(logged).serve_http(HttpOptions::default()).await?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn layer<L>(mut self, layer: L) -> Self
    where
        L: tower::Layer<axum::routing::Route> + Clone + Send + Sync + 'static,
        L::Service: tower::Service<axum::extract::Request> + Clone + Send + Sync + 'static,
        <L::Service as tower::Service<axum::extract::Request>>::Response:
            axum::response::IntoResponse + 'static,
        <L::Service as tower::Service<axum::extract::Request>>::Error:
            Into<std::convert::Infallible> + 'static,
        <L::Service as tower::Service<axum::extract::Request>>::Future: Send + 'static,
    {
        self.layers.push(Arc::new(move |router: axum::Router| {
            router.layer(layer.clone())
        }));
        self
    }

    /// The Streamable HTTP endpoint as a tower service, to mount at a path of your choice.
    /// It checks `Host` and `Origin` itself (rmcp's check), and bounds sessions as
    /// [`HttpOptions`] says, but has no bearer authentication, no request body timeout, and
    /// answers a refused session with rmcp's plain 500: [`Mcp::router`] adds those.
    pub fn http_service(
        &self,
        options: &HttpOptions,
    ) -> StreamableHttpService<McpHandler, BoundedSessions> {
        let sessions = options.bounded_sessions();
        self.endpoint(options.rmcp_config(&sessions), sessions)
    }

    fn endpoint(
        &self,
        config: StreamableHttpServerConfig,
        sessions: BoundedSessions,
    ) -> StreamableHttpService<McpHandler, BoundedSessions> {
        let handler = self.handler();
        // One handler per session (and per stateless request): each holds its own log level.
        StreamableHttpService::new(
            move || Ok(handler.for_new_session()),
            Arc::new(sessions),
            config,
        )
    }

    /// An axum router serving the endpoint at `options.path`, to merge into an existing
    /// application next to its own routes, or to wrap in more tower layers.
    ///
    /// Every request first has its `Host` and `Origin` checked against
    /// [`HttpOptions::allowed_hosts`] and [`HttpOptions::allowed_origins`] (DNS-rebinding
    /// protection: 403 otherwise, whether or not it carries a valid token), then goes through
    /// the layers added with [`Mcp::layer`], then, with [`HttpOptions::auth`], must carry a
    /// valid bearer token (401 otherwise), before anything reaches a tool.
    ///
    /// The router bounds what a request can hold: its body must arrive within
    /// [`HttpOptions::body_read_timeout`] (408 otherwise), and sessions are bounded as
    /// [`HttpOptions`] says. The connection bounds (header, idle and write timeouts, the
    /// connection cap, the shutdown timeout) belong to the server: [`Mcp::serve_http_on`] has
    /// them; an application serving the router itself sets its own.
    pub fn router(&self, options: &HttpOptions) -> axum::Router {
        // The Host/Origin layer below runs in front of everything, so rmcp's own copy of the
        // check is left out: rmcp clones its configuration, lists included, several times per
        // request.
        let sessions = options.bounded_sessions();
        if let Some(calls) = super::session_calls::SessionCalls::new(self.handler()) {
            sessions.answer_calls_with(calls);
        }
        let config = options
            .rmcp_config(&sessions)
            .disable_allowed_hosts()
            .disable_allowed_origins();
        // rmcp answers every request itself when SSE answers are asked for.
        let direct = options
            .json_response
            .then(|| {
                super::direct::Direct::new(
                    self.handler(),
                    config.max_request_body_bytes,
                    options.body_read_timeout,
                )
            })
            .flatten();
        let endpoint = SharedEndpoint(Arc::new(Endpoint {
            direct,
            service: self.endpoint(config, sessions.clone()),
            sessions,
            sessions_enabled: options.sessions,
            owners_checked: options.auth.is_some(),
            body_read_timeout: options.body_read_timeout,
        }));
        let mut router = axum::Router::new().route_service(&options.path, endpoint);
        let metadata_url = options.resource_metadata.clone().or_else(|| {
            options
                .protected_resource
                .as_ref()
                .map(ProtectedResource::metadata_url)
        });
        if let Some(verifier) = &options.auth {
            // Inside the bearer check: a verified token without a scope the tool needs gets the
            // 403 step-up challenge, which points to the metadata like the 401 does.
            if let Some(resource_metadata) = &metadata_url {
                router = router.layer(axum::middleware::from_fn_with_state(
                    super::scope_challenge::ScopeChallenge {
                        server: self.server.clone(),
                        resource_metadata: resource_metadata.clone(),
                    },
                    super::scope_challenge::challenge,
                ));
            }
            router = router.layer(axum::middleware::from_fn_with_state(
                Authenticator::new(Arc::clone(verifier), metadata_url.as_deref()),
                super::auth::authenticate,
            ));
        }
        // Added after the bearer check, so outside it: a client reads it before it has a token.
        if let Some(resource) = &options.protected_resource {
            let document: Arc<[u8]> = resource.document().to_string().into_bytes().into();
            for path in resource.well_known_paths() {
                let document = Arc::clone(&document);
                router = router.route(
                    &path,
                    axum::routing::get(move || {
                        let document = Arc::clone(&document);
                        async move { super::resource_metadata::respond(&document) }
                    }),
                );
            }
        }
        for layer in &self.layers {
            router = layer(router);
        }
        // Outermost, so that a foreign request gets 403 before the bearer check could answer
        // 401 (which would tell a rebinding page that the endpoint exists).
        router.layer(HostOriginLayer(HostOriginGuard::new(options)))
    }

    /// Binds `options.bind` and serves until Ctrl-C (or `options.shutdown` is cancelled),
    /// then lets in-flight requests finish, for [`HttpOptions::shutdown_timeout`] at most.
    pub fn serve_http(
        &self,
        options: HttpOptions,
    ) -> impl Future<Output = Result<(), ServeError>> + Send + '_ {
        super::erased(async move {
            let listener = tokio::net::TcpListener::bind(options.bind)
                .await
                .map_err(|error| ServeError::new(format!("cannot bind {}", options.bind), error))?;
            self.serve_http_on(listener, options).await
        })
    }

    /// Serves on a listener already bound (e.g. to port 0 in tests), within the bounds of
    /// `options` (see [`HttpOptions`]).
    pub fn serve_http_on(
        &self,
        listener: tokio::net::TcpListener,
        options: HttpOptions,
    ) -> impl Future<Output = Result<(), ServeError>> + Send + '_ {
        super::erased(async move {
            let address = listener
                .local_addr()
                .map_err(|error| ServeError::new("the listener has no address", error))?;
            let shutdown = options.shutdown.clone();
            let router = self.router(&options);
            tracing::info!(%address, path = %options.path, "serving MCP over Streamable HTTP");
            let signal = async move {
                tokio::select! {
                    () = shutdown.cancelled() => {}
                    result = tokio::signal::ctrl_c() => {
                        if let Err(error) = result {
                            tracing::warn!(%error, "cannot listen for Ctrl-C; stop with the shutdown token");
                            shutdown.cancelled().await;
                        }
                    }
                }
                // Ends open SSE streams and sessions so that shutdown does not wait on them.
                shutdown.cancel();
            };
            super::connections::serve(listener, router, options.connection_limits(), signal).await;
            Ok(())
        })
    }
}
/// The rmcp endpoint as the router serves it: behind an `Arc`, served with
/// [`StreamableHttpService::handle`] as rmcp's own `Service::call` does. axum clones a route's
/// service for every request, once more for every `Router::layer` around it, and rmcp's `call`
/// clones it again; each clone copies the endpoint's configuration and locks the node of its
/// cancellation token, which every request on every worker thread shares. Cloning this one is
/// a reference count.
///
/// Around rmcp it keeps each session to the credential that opened it, answers a refused
/// session with a status and a JSON-RPC error, and bounds the time a request body may take.
#[derive(Clone)]
struct SharedEndpoint(Arc<Endpoint>);

struct Endpoint {
    service: StreamableHttpService<McpHandler, BoundedSessions>,
    /// Plain stateless calls answered without rmcp's per-request service (`direct.rs`).
    direct: Option<super::direct::Direct>,
    sessions: BoundedSessions,
    sessions_enabled: bool,
    /// With authentication, a session id is only accepted from the credential that opened it.
    owners_checked: bool,
    body_read_timeout: Duration,
}

pub(super) const SESSION_HEADER: &str = "mcp-session-id";

impl tower::Service<axum::extract::Request> for SharedEndpoint {
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::extract::Request) -> Self::Future {
        let endpoint = Arc::clone(&self.0);
        Box::pin(async move { Ok(endpoint.serve(request).await) })
    }
}

impl Endpoint {
    async fn serve(&self, request: axum::extract::Request) -> axum::response::Response {
        let mut request = match &self.direct {
            Some(direct) => match direct.answer(request).await {
                Ok(response) => return response,
                Err(request) => request,
            },
            None => request,
        };
        let caller = request.extensions().get::<Caller>().copied();
        if let Some(session) = request.headers().get(SESSION_HEADER).cloned() {
            // A session id proves nothing about its bearer, and a session's streams carry its
            // owner's responses: another credential (even of the same principal) is answered
            // as if the session did not exist, as rmcp answers an unknown one.
            if self.owners_checked
                && !session
                    .to_str()
                    .is_ok_and(|id| self.sessions.belongs_to(id, caller.as_ref()))
            {
                tracing::debug!("refused a session id that this credential did not open");
                return (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response();
            }
            // The handler finds what the session keeps (its log level…) beside the request.
            if let Some(connection) = session
                .to_str()
                .ok()
                .and_then(|id| self.sessions.connection(id))
            {
                request.extensions_mut().insert(connection);
            }
            let ends_session = request.method() == http::Method::DELETE;
            let mut response = self.handle(request).await;
            // rmcp answers a session's end `202 Accepted`; the official clients take only
            // `200` or `204` for it (the Python SDK logs every other as a failed termination).
            if ends_session && response.status() == StatusCode::ACCEPTED {
                *response.status_mut() = StatusCode::NO_CONTENT;
            }
            return response;
        }
        if self.sessions_enabled && request.method() == http::Method::POST {
            // The request may open a session: rmcp asks the session manager without the
            // request, so who asks (and why it was refused) travels beside it.
            let (response, opener) = Opener::new(caller).around(self.handle(request)).await;
            if let Some(refusal) = opener.refusal() {
                return refused_session(refusal);
            }
            return response;
        }
        self.handle(request).await
    }

    async fn handle(&self, request: axum::extract::Request) -> axum::response::Response {
        use http_body::Body as _;
        let (request, timed_out) = if request.body().is_end_stream() {
            (request, None)
        } else {
            let timed_out = Arc::new(AtomicBool::new(false));
            let deadline = deadline_after(self.body_read_timeout);
            let request = request.map(|body| {
                axum::body::Body::new(DeadlineBody {
                    body,
                    deadline,
                    timer: None,
                    timed_out: Arc::clone(&timed_out),
                })
            });
            (request, Some(timed_out))
        };
        // Boxed, and awaited in one place: rmcp's future is large, and inline (once per
        // path) it made every request's future 13 kB, copied whole at each level.
        let response = Box::pin(self.service.handle(request)).await;
        if timed_out.is_some_and(|timed_out| timed_out.load(Ordering::Acquire)) {
            return body_timed_out();
        }
        response.map(axum::body::Body::new)
    }
}

/// The answer to a request whose body did not arrive within the body read timeout.
pub(super) fn body_timed_out() -> axum::response::Response {
    tracing::debug!("closing a connection whose request body did not arrive in time");
    (
        StatusCode::REQUEST_TIMEOUT,
        [(http::header::CONNECTION, "close")],
        "Request Timeout: the request body did not arrive in time",
    )
        .into_response()
}

/// `timeout` from now, or far enough when `timeout` is too large to add.
fn deadline_after(timeout: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600))
}

/// A request body that must arrive in full by its deadline (a dribbled body would hold the
/// request, and its connection, for as long as the client likes).
struct DeadlineBody {
    body: axum::body::Body,
    deadline: tokio::time::Instant,
    /// Only set once the body makes the reader wait: most bodies arrive with their head.
    timer: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    timed_out: Arc<AtomicBool>,
}

impl http_body::Body for DeadlineBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if let std::task::Poll::Ready(frame) = std::pin::Pin::new(&mut this.body).poll_frame(cx) {
            return std::task::Poll::Ready(frame);
        }
        let deadline = this.deadline;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        std::task::ready!(timer.as_mut().poll(cx));
        this.timed_out.store(true, Ordering::Release);
        std::task::Poll::Ready(Some(Err(axum::Error::new("request body timed out"))))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A session refused over a cap: an HTTP status a client library reports, and a JSON-RPC
/// error (without an id: the session manager never sees the request) that says what to do.
fn refused_session(refusal: Refusal) -> axum::response::Response {
    let (status, retry_after, limit, message) = match refusal {
        Refusal::Principal { limit } => (
            StatusCode::TOO_MANY_REQUESTS,
            "60",
            limit,
            format!(
                "Too many open sessions for this caller (limit {limit}): close a session you \
                 no longer use (HTTP DELETE with its Mcp-Session-Id) or wait for an idle one to \
                 expire, then retry"
            ),
        ),
        Refusal::Server { limit } => (
            StatusCode::SERVICE_UNAVAILABLE,
            "5",
            limit,
            format!("The server has too many open sessions (limit {limit}): retry later"),
        ),
    };
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32000, "message": message, "data": {"sessionLimit": limit}},
    });
    (
        status,
        [
            (http::header::CONTENT_TYPE, "application/json"),
            (http::header::RETRY_AFTER, retry_after),
        ],
        body.to_string(),
    )
        .into_response()
}

/// Options of the Streamable HTTP endpoint.
///
/// # Bounds
///
/// Every resource a client can hold is bounded by default, so that slow, idle or greedy
/// clients cannot starve the others (the numbers are the defaults):
///
/// | option | default | why |
/// | --- | --- | --- |
/// | [`header_read_timeout`](Self::header_read_timeout) | 10 s | a request head is a few hundred bytes: a client still sending one after 10 s is holding the connection open on purpose (slowloris) |
/// | [`body_read_timeout`](Self::body_read_timeout) | 30 s | the largest body (4 MiB) arrives in 30 s at about 1 Mbit/s; a body dribbled slower is refused with 408 |
/// | [`idle_timeout`](Self::idle_timeout) | 60 s | a keep-alive connection with no request for a minute is closed; clients reconnect at the cost of a handshake |
/// | [`write_timeout`](Self::write_timeout) | 30 s | a client that stops reading its response (an SSE stream included) for 30 s while the server has more to send is cut off, so unread responses cannot pile up in memory |
/// | [`max_connections`](Self::max_connections) | 512 | beyond it a new connection has its request answered `503` and is closed (within a second, request or not), while those already open are served; keep it under the process's file descriptor limit (`ulimit -n`) |
/// | [`shutdown_timeout`](Self::shutdown_timeout) | 10 s | after the shutdown signal, in-flight requests get this long to finish; connections still open then (half-sent requests, streams) are dropped |
/// | [`max_sessions`](Self::max_sessions) | 4096 | 2025-11-25 sessions open at once, parked ones included; beyond it `initialize` gets `503` |
/// | [`max_sessions_per_principal`](Self::max_sessions_per_principal) | 100 | sessions one principal (subject and tenant, whatever its tokens) may hold; beyond it `initialize` gets `429` |
/// | [`session_idle_timeout`](Self::session_idle_timeout) | 5 min | a session with no request for this long is closed (rmcp's own default); its client gets 404 and initializes again |
/// | [`replica`](Self::replica) | none | session ids are random; with a [`ReplicaName`], each starts with it (`r1.…`), for a load balancer to route a session to the replica that holds it |
/// | [`session_park_after`](Self::session_park_after) | 60 s | a session with no request in flight and no open stream for this long gives up its worker (about 95 kB) and keeps its `initialize` parameters (about 600 bytes); its next request restores it transparently |
///
/// Refusals carry a JSON-RPC error in a JSON body a client can show: `503` for the connection
/// cap and the server's session cap, `429` for a principal's session cap, each with
/// `Retry-After`. A session belongs to the exact credential (bearer token) that opened it:
/// another token, even one of the same principal, gets 404 for it, as for an unknown session;
/// a client that renews its token opens a new session.
///
/// The connection bounds (header, idle and write timeouts, the connection cap, the shutdown
/// timeout) are kept by [`Mcp::serve_http`] and [`Mcp::serve_http_on`]; an application that
/// serves [`Mcp::router`] itself keeps its own. Sessions and the body timeout are bounded by
/// the router wherever it is served.
#[derive(Clone)]
pub struct HttpOptions {
    /// Where to listen: `127.0.0.1:8080` by default. Binding beyond loopback is a choice the
    /// operator makes explicitly; add the public host names to `allowed_hosts` then.
    pub bind: SocketAddr,
    /// The endpoint path, `/mcp` by default.
    pub path: String,
    /// Accepted `Host` header values (DNS-rebinding protection): loopback names by default.
    pub allowed_hosts: Vec<String>,
    /// Accepted `Origin` header values: loopback origins on any port by default. A request with
    /// any other `Origin` gets 403; requests without `Origin` (non-browser clients) pass.
    pub allowed_origins: Vec<String>,
    /// The largest request body accepted (413 beyond): 4 MiB by default.
    pub max_body_bytes: usize,
    /// Serve 2025-11-25 clients with sessions (default). The stateless 2026-07-28 protocol is
    /// served on the same endpoint either way. A session's plain `tools/call` (no progress
    /// token, no log level set, a tool that takes nothing that asks or logs to the client and
    /// cannot run as a task) is answered on the connection's task with rmcp's answer, without
    /// the session's worker: about two thirds of the server's work, no task spawned.
    pub sessions: bool,
    /// Answer stateless requests with a JSON body rather than an SSE stream when the handler
    /// sends nothing before its result (default: on; it is the faster path). With it, a plain
    /// stateless `tools/call` (no progress token, no per-request log level, no `Mcp-Param-*`
    /// header) is also answered without rmcp's per-request service: the same answer, about
    /// half the server's work, no task spawned.
    pub json_response: bool,
    /// Keep-alive pings on SSE streams.
    pub sse_keep_alive: Option<Duration>,
    /// Cancel to stop the server (Ctrl-C does too).
    pub shutdown: CancellationToken,
    /// Verifies `Authorization: Bearer` tokens; `None` accepts anonymous requests.
    pub auth: Option<Arc<dyn TokenVerifier>>,
    /// The OAuth protected-resource metadata URL announced in `WWW-Authenticate`; with
    /// `protected_resource` and no URL here, the URL of the document served.
    pub resource_metadata: Option<String>,
    /// Serves RFC 9728 protected-resource metadata (see [`ProtectedResource`]).
    pub protected_resource: Option<ProtectedResource>,
    /// How long a client may take to send a request head, from its first byte (10 s).
    pub header_read_timeout: Duration,
    /// How long a request body may take to arrive in full, from its head (30 s); 408 beyond.
    pub body_read_timeout: Duration,
    /// How long a connection may stay open with no request (60 s).
    pub idle_timeout: Duration,
    /// How long a response may wait for its client to read (30 s); the connection is closed
    /// beyond.
    pub write_timeout: Duration,
    /// Connections served at once (512); more are answered `503` and closed.
    pub max_connections: usize,
    /// How long shutdown waits for open connections before dropping them (10 s).
    pub shutdown_timeout: Duration,
    /// Sessions open at once, parked ones included (4096); `initialize` gets `503` beyond.
    pub max_sessions: usize,
    /// Sessions one principal may hold at once (100); `initialize` gets `429` beyond.
    pub max_sessions_per_principal: usize,
    /// A session with no request for this long is closed (5 minutes); `None` keeps idle
    /// sessions until the caps are reached.
    pub session_idle_timeout: Option<Duration>,
    /// A session with nothing in flight for this long is parked: its worker is dropped and its
    /// next request restores it (60 s).
    pub session_park_after: Duration,
    /// This replica's name, carried in every session id it issues (`r1.6f1c…`) so that a
    /// load balancer in front of several replicas can send each session's requests to the
    /// replica that holds it (see [`ReplicaName`]); `None` (the default) for random ids.
    pub replica: Option<ReplicaName>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            path: "/mcp".into(),
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            allowed_origins: vec![
                "http://localhost:*".into(),
                "http://127.0.0.1:*".into(),
                "http://[::1]:*".into(),
                "https://localhost:*".into(),
                "https://127.0.0.1:*".into(),
            ],
            max_body_bytes: 4 * 1024 * 1024,
            sessions: true,
            json_response: true,
            sse_keep_alive: Some(Duration::from_secs(15)),
            shutdown: CancellationToken::new(),
            auth: None,
            resource_metadata: None,
            protected_resource: None,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(30),
            max_connections: 512,
            shutdown_timeout: Duration::from_secs(10),
            max_sessions: 4096,
            max_sessions_per_principal: 100,
            session_idle_timeout: Some(Duration::from_secs(300)),
            session_park_after: Duration::from_secs(60),
            replica: None,
        }
    }
}

impl HttpOptions {
    /// Listens on `bind` (and accepts its host in `Host` headers).
    #[must_use]
    pub fn bind(mut self, bind: SocketAddr) -> Self {
        let host = bind.ip().to_string();
        if !bind.ip().is_unspecified() && !self.allowed_hosts.contains(&host) {
            self.allowed_hosts.push(host);
        }
        self.bind = bind;
        self
    }

    /// Requires a bearer token verified by `verifier` on every request.
    #[must_use]
    pub fn auth(mut self, verifier: impl TokenVerifier) -> Self {
        self.auth = Some(Arc::new(verifier));
        self
    }

    /// Serves `resource` as this endpoint's protected-resource metadata (RFC 9728) and names
    /// it in every 401's `WWW-Authenticate`, so that an MCP client finds the authorization
    /// server on its own.
    #[must_use]
    pub fn protected_resource(mut self, resource: ProtectedResource) -> Self {
        self.protected_resource = Some(resource);
        self
    }

    /// Names this replica in every session id it issues (see [`ReplicaName`]).
    #[must_use]
    pub fn replica(mut self, name: ReplicaName) -> Self {
        self.replica = Some(name);
        self
    }

    /// Serves at most `max` connections at once.
    #[must_use]
    pub fn max_connections(mut self, max: usize) -> Self {
        self.max_connections = max;
        self
    }

    /// Keeps at most `total` sessions open, and at most `per_principal` for one principal.
    #[must_use]
    pub fn max_sessions(mut self, total: usize, per_principal: usize) -> Self {
        self.max_sessions = total;
        self.max_sessions_per_principal = per_principal;
        self
    }

    fn bounded_sessions(&self) -> BoundedSessions {
        BoundedSessions::new(
            SessionLimits {
                max_sessions: self.max_sessions,
                max_per_principal: self.max_sessions_per_principal,
                park_after: self.session_park_after,
                idle_timeout: self.session_idle_timeout,
            },
            self.replica.clone(),
            self.shutdown.clone(),
        )
    }

    fn connection_limits(&self) -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: self.header_read_timeout,
            idle_timeout: self.idle_timeout,
            write_timeout: self.write_timeout,
            max_connections: self.max_connections,
            shutdown_timeout: self.shutdown_timeout,
        }
    }

    fn rmcp_config(&self, sessions: &BoundedSessions) -> StreamableHttpServerConfig {
        let mut config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(self.allowed_hosts.clone())
            .with_allowed_origins(self.allowed_origins.clone())
            .enforce_origin_validation()
            .with_max_request_body_bytes(self.max_body_bytes)
            .with_legacy_session_mode(self.sessions)
            .with_json_response(self.json_response)
            .with_sse_keep_alive(self.sse_keep_alive)
            .with_cancellation_token(self.shutdown.child_token());
        // Parked sessions are kept, and restored from, there.
        config.session_store = Some(sessions.store());
        config
    }
}

impl fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpOptions")
            .field("bind", &self.bind)
            .field("path", &self.path)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("allowed_origins", &self.allowed_origins)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("sessions", &self.sessions)
            .field("json_response", &self.json_response)
            .field("auth", &self.auth.is_some())
            .field("protected_resource", &self.protected_resource)
            .field("header_read_timeout", &self.header_read_timeout)
            .field("body_read_timeout", &self.body_read_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("write_timeout", &self.write_timeout)
            .field("max_connections", &self.max_connections)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .field("max_sessions", &self.max_sessions)
            .field(
                "max_sessions_per_principal",
                &self.max_sessions_per_principal,
            )
            .field("session_idle_timeout", &self.session_idle_timeout)
            .field("session_park_after", &self.session_park_after)
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults are the ones the `HttpOptions` table (and the production guide, and
    /// billing's `--help`) state.
    #[test]
    fn the_bounds_default_to_the_documented_values() {
        let options = HttpOptions::default();
        assert_eq!(options.header_read_timeout, Duration::from_secs(10));
        assert_eq!(options.body_read_timeout, Duration::from_secs(30));
        assert_eq!(options.idle_timeout, Duration::from_secs(60));
        assert_eq!(options.write_timeout, Duration::from_secs(30));
        assert_eq!(options.max_connections, 512);
        assert_eq!(options.shutdown_timeout, Duration::from_secs(10));
        assert_eq!(options.max_sessions, 4096);
        assert_eq!(options.max_sessions_per_principal, 100);
        assert_eq!(options.session_idle_timeout, Some(Duration::from_secs(300)));
        assert_eq!(options.session_park_after, Duration::from_secs(60));
        assert_eq!(options.max_body_bytes, 4 * 1024 * 1024);
        let limits = options.connection_limits();
        assert_eq!(limits.header_read_timeout, options.header_read_timeout);
        assert_eq!(limits.idle_timeout, options.idle_timeout);
        assert_eq!(limits.write_timeout, options.write_timeout);
        assert_eq!(limits.max_connections, options.max_connections);
        assert_eq!(limits.shutdown_timeout, options.shutdown_timeout);
        let tuned = options.max_connections(3).max_sessions(7, 2);
        assert_eq!(
            (tuned.max_connections, tuned.max_sessions),
            (3, 7),
            "the builders set what they say"
        );
        assert_eq!(tuned.max_sessions_per_principal, 2);
    }
}

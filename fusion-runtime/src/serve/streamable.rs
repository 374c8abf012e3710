//! Streamable HTTP: the 2025-11-25 session protocol and the stateless 2026-07-28 protocol on
//! one endpoint, `Host`/`Origin` checked in front of everything, bearer authentication, and an
//! axum router to mount in an existing application.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::response::IntoResponse;
use http::StatusCode;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::auth::{Authenticator, TokenVerifier};
use super::{Mcp, McpHandler, ServeError};

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
    /// It checks `Host` and `Origin` itself (rmcp's check), but has no bearer authentication:
    /// [`Mcp::router`] adds that.
    pub fn http_service(
        &self,
        options: &HttpOptions,
    ) -> StreamableHttpService<McpHandler, LocalSessionManager> {
        self.endpoint(options.rmcp_config())
    }

    fn endpoint(
        &self,
        config: StreamableHttpServerConfig,
    ) -> StreamableHttpService<McpHandler, LocalSessionManager> {
        let handler = self.handler();
        StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
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
    pub fn router(&self, options: &HttpOptions) -> axum::Router {
        // The Host/Origin layer below runs in front of everything, so rmcp's own copy of the
        // check is left out: rmcp clones its configuration, lists included, several times per
        // request.
        let endpoint = SharedEndpoint(Arc::new(
            self.endpoint(
                options
                    .rmcp_config()
                    .disable_allowed_hosts()
                    .disable_allowed_origins(),
            ),
        ));
        let mut router = axum::Router::new().route_service(&options.path, endpoint);
        if let Some(verifier) = &options.auth {
            router = router.layer(axum::middleware::from_fn_with_state(
                Authenticator::new(Arc::clone(verifier), options.resource_metadata.as_deref()),
                super::auth::authenticate,
            ));
        }
        for layer in &self.layers {
            router = layer(router);
        }
        // Outermost, so that a foreign request gets 403 before the bearer check could answer
        // 401 (which would tell a rebinding page that the endpoint exists).
        router.layer(HostOriginLayer(HostOriginGuard::new(options)))
    }

    /// Binds `options.bind` and serves until Ctrl-C (or `options.shutdown` is cancelled),
    /// then lets in-flight requests finish.
    pub async fn serve_http(&self, options: HttpOptions) -> Result<(), ServeError> {
        let listener = tokio::net::TcpListener::bind(options.bind)
            .await
            .map_err(|error| ServeError::new(format!("cannot bind {}", options.bind), error))?;
        self.serve_http_on(listener, options).await
    }

    /// Serves on a listener already bound (e.g. to port 0 in tests).
    pub async fn serve_http_on(
        &self,
        listener: tokio::net::TcpListener,
        options: HttpOptions,
    ) -> Result<(), ServeError> {
        let address = listener
            .local_addr()
            .map_err(|error| ServeError::new("the listener has no address", error))?;
        let shutdown = options.shutdown.clone();
        let router = self.router(&options);
        tracing::info!(%address, path = %options.path, "serving MCP over Streamable HTTP");
        // Without TCP_NODELAY, Nagle's algorithm meets delayed ACKs: 44 ms per call instead
        // of 0.5 ms, measured on our machines.
        let listener =
            axum::serve::ListenerExt::tap_io(listener, |stream: &mut tokio::net::TcpStream| {
                if let Err(error) = stream.set_nodelay(true) {
                    tracing::warn!(%error, "could not set TCP_NODELAY");
                }
            });
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
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
            })
            .await
            .map_err(|error| ServeError::new("the HTTP server failed", error))
    }
}
// ---------------------------------------------------------------------------------------------
// DNS-rebinding protection, in front of everything else

/// The `Host` and `Origin` allow-lists of [`HttpOptions`], parsed once. The same rules as
/// rmcp's own check inside the endpoint: an allowed host without a port matches any port, an
/// empty host list allows every host, an allowed origin ending in `:*` matches any port, a
/// request without `Origin` passes, and with an empty origin list every `Origin` is refused.
#[derive(Clone)]
struct HostOriginGuard {
    /// Only an empty configured list allows every host: entries that do not parse (blank
    /// ones) must not turn a restrictive list into an open one.
    any_host: bool,
    hosts: Arc<[Authority]>,
    /// An allowed origin's `port` is `None` for any port (`:*`, or no port written).
    origins: Arc<[Origin]>,
}

#[derive(Debug, PartialEq, Eq)]
struct Authority {
    host: String,
    port: Option<u16>,
}

/// An origin as written: a request's has `port: None` when it omits its scheme's default.
#[derive(Debug, PartialEq, Eq)]
enum Origin {
    Null,
    Tuple {
        scheme: String,
        host: String,
        port: Option<u16>,
    },
}

impl Origin {
    /// The origin with its scheme's default port made explicit (RFC 6454), so that
    /// `https://app.example` and `https://app.example:443` are the same origin.
    fn with_default_port(self) -> Origin {
        match self {
            Origin::Tuple { scheme, host, port } => {
                let default_port = match scheme.as_str() {
                    "http" => Some(80),
                    "https" => Some(443),
                    _ => None,
                };
                Origin::Tuple {
                    port: port.or(default_port),
                    scheme,
                    host,
                }
            }
            Origin::Null => Origin::Null,
        }
    }
}

impl HostOriginGuard {
    fn new(options: &HttpOptions) -> Self {
        HostOriginGuard {
            any_host: options.allowed_hosts.is_empty(),
            hosts: options
                .allowed_hosts
                .iter()
                .map(String::as_str)
                .filter_map(allowed_authority)
                .collect(),
            origins: options
                .allowed_origins
                .iter()
                .map(String::as_str)
                .filter_map(allowed_origin)
                .collect(),
        }
    }

    fn check(&self, uri: &http::Uri, headers: &http::HeaderMap) -> Result<(), StatusCode> {
        let host = match headers.get(http::header::HOST) {
            Some(value) => value
                .to_str()
                .ok()
                .and_then(|text| http::uri::Authority::try_from(text).ok())
                .map(|authority| authority_of(authority.host(), authority.port_u16())),
            // HTTP/2 carries the host in `:authority`.
            None => uri
                .authority()
                .map(|authority| authority_of(authority.host(), authority.port_u16())),
        };
        let Some(host) = host else {
            return Err(StatusCode::BAD_REQUEST);
        };
        if !self.any_host
            && !self.hosts.iter().any(|allowed| {
                allowed.host == host.host && allowed.port.is_none_or(|port| host.port == Some(port))
            })
        {
            tracing::warn!(
                ?host,
                "refused a request with a foreign Host (DNS rebinding?)"
            );
            return Err(StatusCode::FORBIDDEN);
        }
        let Some(origin) = headers.get(http::header::ORIGIN) else {
            return Ok(());
        };
        let allowed = origin
            .to_str()
            .ok()
            .and_then(origin_of)
            .map(Origin::with_default_port)
            .is_some_and(|origin| {
                self.origins
                    .iter()
                    .any(|allowed| origin_matches(allowed, &origin))
            });
        if allowed {
            Ok(())
        } else {
            tracing::warn!(?origin, "refused a request with a foreign Origin");
            Err(StatusCode::FORBIDDEN)
        }
    }
}

fn authority_of(host: &str, port: Option<u16>) -> Authority {
    Authority {
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase(),
        port,
    }
}

fn allowed_authority(text: &str) -> Option<Authority> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    // `::1` is not an authority (`[::1]` is): take it as a bare host.
    Some(match http::uri::Authority::try_from(text) {
        Ok(authority) => authority_of(authority.host(), authority.port_u16()),
        Err(_) => authority_of(text, None),
    })
}

fn origin_of(text: &str) -> Option<Origin> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("null") {
        return Some(Origin::Null);
    }
    let uri = http::Uri::try_from(text).ok()?;
    let authority = uri.authority()?;
    let Authority { host, port } = authority_of(authority.host(), authority.port_u16());
    Some(Origin::Tuple {
        scheme: uri.scheme_str()?.to_ascii_lowercase(),
        host,
        port,
    })
}

/// An allowed origin: as written, with `:*` (any port) kept as no port.
fn allowed_origin(text: &str) -> Option<Origin> {
    let text = text.trim();
    let (base, any_port) = match text.strip_suffix(":*") {
        Some(base) => (base, true),
        None => (text, false),
    };
    match origin_of(base)? {
        Origin::Null | Origin::Tuple { port: Some(_), .. } if any_port => None,
        origin => Some(origin),
    }
}

/// Whether a request's `origin` (its default port explicit) is the `allowed` one.
fn origin_matches(allowed: &Origin, origin: &Origin) -> bool {
    match (allowed, origin) {
        (Origin::Null, Origin::Null) => true,
        (
            Origin::Tuple { scheme, host, port },
            Origin::Tuple {
                scheme: origin_scheme,
                host: origin_host,
                port: origin_port,
            },
        ) => {
            scheme == origin_scheme
                && host == origin_host
                && port.is_none_or(|port| *origin_port == Some(port))
        }
        _ => false,
    }
}

/// [`HostOriginGuard`] as a tower layer. The check is synchronous, so unlike an
/// `axum::middleware::from_fn` layer it calls the inner service directly, without cloning it
/// for every request.
#[derive(Clone)]
struct HostOriginLayer(HostOriginGuard);

impl<S> tower::Layer<S> for HostOriginLayer {
    type Service = HostOriginService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        HostOriginService {
            guard: self.0.clone(),
            inner,
        }
    }
}

#[derive(Clone)]
struct HostOriginService<S> {
    guard: HostOriginGuard,
    inner: S,
}

impl<S, B> tower::Service<http::Request<B>> for HostOriginService<S>
where
    S: tower::Service<http::Request<B>, Response = axum::response::Response>,
{
    type Response = axum::response::Response;
    type Error = S::Error;
    type Future = futures::future::Either<
        std::future::Ready<Result<axum::response::Response, S::Error>>,
        S::Future,
    >;

    fn poll_ready(
        &mut self,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        match self.guard.check(request.uri(), request.headers()) {
            Ok(()) => futures::future::Either::Right(self.inner.call(request)),
            Err(status) => {
                let message = if status == StatusCode::FORBIDDEN {
                    "Forbidden: Host or Origin header is not allowed"
                } else {
                    "Bad Request: invalid or missing Host header"
                };
                futures::future::Either::Left(std::future::ready(Ok(
                    (status, message).into_response()
                )))
            }
        }
    }
}

/// The rmcp endpoint as the router serves it: behind an `Arc`, served with
/// [`StreamableHttpService::handle`] as rmcp's own `Service::call` does. axum clones a route's
/// service for every request, once more for every `Router::layer` around it, and rmcp's `call`
/// clones it again; each clone copies the endpoint's configuration and locks the node of its
/// cancellation token, which every request on every worker thread shares. Cloning this one is
/// a reference count.
#[derive(Clone)]
struct SharedEndpoint(Arc<StreamableHttpService<McpHandler, LocalSessionManager>>);

type EndpointResponse =
    <StreamableHttpService<McpHandler, LocalSessionManager> as tower::Service<
        axum::extract::Request,
    >>::Response;

impl tower::Service<axum::extract::Request> for SharedEndpoint {
    type Response = EndpointResponse;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<EndpointResponse, Self::Error>>;

    fn poll_ready(
        &mut self,
        _context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::extract::Request) -> Self::Future {
        let endpoint = Arc::clone(&self.0);
        Box::pin(async move { Ok(endpoint.handle(request).await) })
    }
}

/// Options of the Streamable HTTP endpoint.
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
    /// served on the same endpoint either way.
    pub sessions: bool,
    /// Answer stateless requests with a JSON body rather than an SSE stream when the handler
    /// sends nothing before its result (default: on; it is the faster path).
    pub json_response: bool,
    /// Keep-alive pings on SSE streams.
    pub sse_keep_alive: Option<Duration>,
    /// Cancel to stop the server (Ctrl-C does too).
    pub shutdown: CancellationToken,
    /// Verifies `Authorization: Bearer` tokens; `None` accepts anonymous requests.
    pub auth: Option<Arc<dyn TokenVerifier>>,
    /// The OAuth protected-resource metadata URL announced in `WWW-Authenticate`.
    pub resource_metadata: Option<String>,
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

    fn rmcp_config(&self) -> StreamableHttpServerConfig {
        StreamableHttpServerConfig::default()
            .with_allowed_hosts(self.allowed_hosts.clone())
            .with_allowed_origins(self.allowed_origins.clone())
            .enforce_origin_validation()
            .with_max_request_body_bytes(self.max_body_bytes)
            .with_legacy_session_mode(self.sessions)
            .with_json_response(self.json_response)
            .with_sse_keep_alive(self.sse_keep_alive)
            .with_cancellation_token(self.shutdown.child_token())
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
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(options: &HttpOptions, host: Option<&str>, origin: Option<&str>) -> Option<u16> {
        let mut request = http::Request::builder().uri("/mcp");
        if let Some(host) = host {
            request = request.header(http::header::HOST, host);
        }
        if let Some(origin) = origin {
            request = request.header(http::header::ORIGIN, origin);
        }
        let request = request.body(()).unwrap();
        HostOriginGuard::new(options)
            .check(request.uri(), request.headers())
            .err()
            .map(|status| status.as_u16())
    }

    #[test]
    fn the_default_lists_accept_loopback_only() {
        let options = HttpOptions::default();
        for host in ["localhost:8080", "127.0.0.1:1", "[::1]:8080", "LOCALHOST"] {
            assert_eq!(check(&options, Some(host), None), None, "{host}");
        }
        for host in ["evil.example", "localhost.evil.example:8080", "127.0.0.2"] {
            assert_eq!(check(&options, Some(host), None), Some(403), "{host}");
        }
        assert_eq!(check(&options, Some("bad host"), None), Some(400));
        assert_eq!(check(&options, None, None), Some(400));
        for origin in [
            "http://localhost:5173",
            "http://[::1]:3000",
            "https://127.0.0.1",
            "HTTP://LocalHost:1",
        ] {
            assert_eq!(
                check(&options, Some("localhost"), Some(origin)),
                None,
                "{origin}"
            );
        }
        for origin in [
            "http://evil.example",
            "null",
            "",
            "localhost:5173",
            "file://localhost",
            "http://localhost.evil.example",
        ] {
            assert_eq!(
                check(&options, Some("localhost"), Some(origin)),
                Some(403),
                "{origin:?}"
            );
        }
    }

    #[test]
    fn ports_in_the_lists_are_exact_and_an_empty_origin_list_refuses_every_origin() {
        let options = HttpOptions {
            allowed_hosts: vec!["api.example:8443".into()],
            allowed_origins: vec!["https://app.example:443".into(), "null".into()],
            ..HttpOptions::default()
        };
        assert_eq!(check(&options, Some("api.example:8443"), None), None);
        assert_eq!(check(&options, Some("api.example:8080"), None), Some(403));
        assert_eq!(check(&options, Some("api.example"), None), Some(403));
        let host = Some("api.example:8443");
        assert_eq!(check(&options, host, Some("https://app.example")), None);
        assert_eq!(check(&options, host, Some("https://app.example:443")), None);
        assert_eq!(check(&options, host, Some("null")), None);
        assert_eq!(
            check(&options, host, Some("https://app.example:444")),
            Some(403)
        );
        assert_eq!(check(&options, host, Some("http://app.example")), Some(403));

        let any_host = HttpOptions {
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            ..HttpOptions::default()
        };
        assert_eq!(check(&any_host, Some("anything.example"), None), None);
        assert_eq!(
            check(
                &any_host,
                Some("anything.example"),
                Some("http://localhost:1")
            ),
            Some(403)
        );
    }

    #[test]
    fn a_list_of_blank_hosts_allows_no_host() {
        let options = HttpOptions {
            allowed_hosts: vec![" ".into(), String::new()],
            ..HttpOptions::default()
        };
        assert_eq!(check(&options, Some("evil.example"), None), Some(403));
        assert_eq!(check(&options, Some("localhost"), None), Some(403));
    }
}

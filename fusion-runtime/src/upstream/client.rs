//! The upstream itself: one pooled HTTP client, its base URL, credentials, timeouts and
//! limits, and the classification of what it answers.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{StatusCode, Url};
use serde_json::Value;

use super::decode::FromUpstream;
use super::request::UpstreamRequest;
use super::route::HttpMethod;
use crate::context::{CallContext, FromContext, ServerParts};
use crate::error::{ToolError, codes};

/// Codes of the failures an upstream causes, next to [`codes`](crate::codes).
pub mod upstream_codes {
    /// The upstream failed or could not be reached (5xx, timeout, connection); retryable.
    pub const UPSTREAM_UNAVAILABLE: &str = "UPSTREAM_UNAVAILABLE";
    /// The upstream refused the server's credentials (401); retrying does not help.
    pub const UPSTREAM_UNAUTHORIZED: &str = "UPSTREAM_UNAUTHORIZED";
    /// The upstream refused the request for a reason the agent may fix (another 4xx).
    pub const UPSTREAM_REJECTED: &str = "UPSTREAM_REJECTED";
}

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_MAX_RESPONSE: usize = 4 * 1024 * 1024;
const DEFAULT_MAX_REQUEST: usize = 1024 * 1024;
const DEFAULT_MAX_REDIRECTS: usize = 3;
/// The longest `Retry-After` passed on: a day-long window is an upstream's mistake.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);
/// The window given when the upstream says "later" without saying when.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// An upstream REST API that HTTP proxy tools call: its base URL, the headers every call
/// carries (credentials), timeouts and size limits, and one pooled client shared by every
/// call. None of it comes from an agent. Register it with
/// [`ServerBuilder::upstream`](crate::ServerBuilder::upstream).
///
/// ```
/// use std::time::Duration;
/// use fusion_runtime::upstream::HttpUpstream;
///
/// let upstream = HttpUpstream::builder("https://api.example.com/v1")
///     .bearer("sk_test_123")
///     .timeout(Duration::from_secs(10))
///     .max_response_bytes(1 << 20)
///     .build()
///     .unwrap();
/// assert_eq!(upstream.base_url(), "https://api.example.com/v1");
/// // The credentials never show.
/// assert!(!format!("{upstream:?}").contains("sk_test_123"));
/// ```
#[derive(Clone)]
pub struct HttpUpstream {
    inner: Arc<Inner>,
}

struct Inner {
    client: reqwest::Client,
    base: Url,
    headers: HeaderMap,
    /// Credentials sent in the query string of every call (an API key the API takes there).
    query: Vec<(String, String)>,
    max_response_bytes: usize,
    max_request_bytes: usize,
}

impl fmt::Debug for HttpUpstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpUpstream")
            .field("base", &self.inner.base.as_str())
            .field("headers", &self.inner.headers.keys().collect::<Vec<_>>())
            .field(
                "query",
                &self
                    .inner
                    .query
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .field("max_response_bytes", &self.inner.max_response_bytes)
            .field("max_request_bytes", &self.inner.max_request_bytes)
            .finish_non_exhaustive()
    }
}

/// Configures an [`HttpUpstream`].
pub struct HttpUpstreamBuilder {
    base: String,
    headers: Vec<(String, String)>,
    query: Vec<(String, String)>,
    timeout: Duration,
    connect_timeout: Duration,
    read_timeout: Duration,
    max_response_bytes: usize,
    max_request_bytes: usize,
    max_redirects: usize,
    pool_max_idle_per_host: usize,
}

impl fmt::Debug for HttpUpstreamBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpUpstreamBuilder")
            .field("base", &self.base)
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Why an upstream's configuration is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamConfigError(String);

impl fmt::Display for UpstreamConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UpstreamConfigError {}

impl HttpUpstreamBuilder {
    /// Every call carries `Authorization: Bearer {token}` (marked sensitive: never logged).
    #[must_use]
    pub fn bearer(self, token: impl Into<String>) -> Self {
        let token = token.into();
        self.header("authorization", format!("Bearer {token}"))
    }

    /// Every call carries this header (an API key header, a version pin…), marked sensitive.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Every call carries `name=value` in its query string: an API key the API takes only there
    /// (`?api_key=…`). It is added when the call is sent, after the call's own query, and never
    /// shows in [`url_of`](HttpUpstream::url_of), in `Debug` or in errors.
    #[must_use]
    pub fn query_credential(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.query.push((name.into(), value.into()));
        self
    }

    /// The longest a whole call may take, answer read included (30 s by default): past it the
    /// call is `UPSTREAM_UNAVAILABLE`, retryable.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The longest a connection may take to open (5 s by default).
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The longest the upstream may stay silent while answering (10 s by default): a
    /// trickling upstream is cut off here rather than holding the call.
    #[must_use]
    pub fn read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = timeout;
        self
    }

    /// The largest answer read (4 MiB by default); a larger one is refused, early when its
    /// `Content-Length` says so.
    #[must_use]
    pub fn max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// The largest body sent (1 MiB by default).
    #[must_use]
    pub fn max_request_bytes(mut self, bytes: usize) -> Self {
        self.max_request_bytes = bytes;
        self
    }

    /// How many redirects to the same origin are followed (3 by default). A redirect to
    /// another origin (host, port or scheme) is never followed.
    #[must_use]
    pub fn max_redirects(mut self, redirects: usize) -> Self {
        self.max_redirects = redirects;
        self
    }

    /// How many idle connections are kept per host (32 by default).
    #[must_use]
    pub fn pool_max_idle_per_host(mut self, connections: usize) -> Self {
        self.pool_max_idle_per_host = connections;
        self
    }

    /// Checks the configuration and builds the client.
    pub fn build(self) -> Result<HttpUpstream, UpstreamConfigError> {
        let base = Url::parse(&self.base).map_err(|error| {
            UpstreamConfigError(format!(
                "the base URL `{}` is not a URL: {error}",
                self.base
            ))
        })?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(UpstreamConfigError(format!(
                "the base URL `{base}` is not http or https"
            )));
        }
        if base.host_str().is_none() {
            return Err(UpstreamConfigError(format!(
                "the base URL `{base}` has no host"
            )));
        }
        if base.query().is_some() || base.fragment().is_some() {
            return Err(UpstreamConfigError(format!(
                "the base URL `{base}` has a query or fragment"
            )));
        }
        if !base.username().is_empty() || base.password().is_some() {
            return Err(UpstreamConfigError(
                "the base URL holds credentials: give them with `bearer` or `header`".to_owned(),
            ));
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &self.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| UpstreamConfigError(format!("`{name}` is not a header name")))?;
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                UpstreamConfigError(format!(
                    "the value of header `{name}` is not a header value"
                ))
            })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let origin = base.origin();
        let max_redirects = self.max_redirects;
        let redirects = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() > max_redirects || attempt.url().origin() != origin {
                attempt.stop()
            } else {
                attempt.follow()
            }
        });
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls_config()?)
            .no_proxy()
            .redirect(redirects)
            .timeout(self.timeout)
            .connect_timeout(self.connect_timeout)
            .read_timeout(self.read_timeout)
            .pool_max_idle_per_host(self.pool_max_idle_per_host)
            .user_agent(concat!("fusion/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| UpstreamConfigError(format!("the HTTP client failed: {error}")))?;
        Ok(HttpUpstream {
            inner: Arc::new(Inner {
                client,
                base,
                headers,
                query: self.query,
                max_response_bytes: self.max_response_bytes,
                max_request_bytes: self.max_request_bytes,
            }),
        })
    }
}

/// TLS with rustls and the ring provider, verified against the platform's roots; no global
/// provider is installed.
pub(crate) fn tls_config() -> Result<rustls::ClientConfig, UpstreamConfigError> {
    use rustls_platform_verifier::BuilderVerifierExt as _;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| UpstreamConfigError(format!("TLS: {error}")))?
        .with_platform_verifier()
        .map_err(|error| UpstreamConfigError(format!("TLS roots: {error}")))
        .map(|builder| builder.with_no_client_auth())
}

impl HttpUpstream {
    /// Configures an upstream at `base_url` (`https://api.example.com/v1`): routes are
    /// relative to it.
    pub fn builder(base_url: impl Into<String>) -> HttpUpstreamBuilder {
        HttpUpstreamBuilder {
            base: base_url.into(),
            headers: Vec::new(),
            query: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            read_timeout: DEFAULT_READ_TIMEOUT,
            max_response_bytes: DEFAULT_MAX_RESPONSE,
            max_request_bytes: DEFAULT_MAX_REQUEST,
            max_redirects: DEFAULT_MAX_REDIRECTS,
            pool_max_idle_per_host: 32,
        }
    }

    /// The base URL, without a trailing `/`.
    pub fn base_url(&self) -> &str {
        self.inner.base.as_str().trim_end_matches('/')
    }

    /// The URL a request goes to: the base URL's path, then the request's encoded path, then
    /// its query (without the upstream's [query credentials](HttpUpstreamBuilder::query_credential),
    /// added only when the call is sent).
    pub fn url_of(&self, request: &UpstreamRequest) -> Url {
        let mut url = self.inner.base.clone();
        let path = format!(
            "{}{}",
            self.inner.base.path().trim_end_matches('/'),
            request.path()
        );
        url.set_path(&path);
        if !request.query().is_empty() {
            url.query_pairs_mut().extend_pairs(request.query());
        }
        url
    }

    /// Sends `request` and reads the answer into `T`; every failure is classified (see the
    /// module's table).
    pub async fn send<T: FromUpstream>(&self, request: UpstreamRequest) -> Result<T, ToolError> {
        let (status, body) = self.exchange(&request).await?;
        let value = if body.iter().all(u8::is_ascii_whitespace) {
            Value::Null
        } else {
            serde_json::from_slice(&body).map_err(|error| {
                ToolError::internal_message(format!(
                    "{} answered {status} with a body that is not JSON: {error}",
                    request.template()
                ))
            })?
        };
        T::from_upstream(value).map_err(|error| {
            ToolError::internal_message(format!("{}: {error}", request.template()))
        })
    }

    /// Sends `request` and returns the bytes of a successful answer as they are, for an
    /// operation that answers something other than JSON (an image, a CSV file); the request
    /// names what it accepts with an `accept` [header](UpstreamRequest::header). Failures are
    /// classified as [`send`](Self::send)'s.
    pub async fn send_bytes(&self, request: UpstreamRequest) -> Result<Vec<u8>, ToolError> {
        self.exchange(&request).await.map(|(_, body)| body)
    }

    /// Sends `request`: the status and the body of a successful answer, or the classified
    /// failure.
    async fn exchange(
        &self,
        request: &UpstreamRequest,
    ) -> Result<(StatusCode, Vec<u8>), ToolError> {
        let mut url = self.url_of(request);
        if !self.inner.query.is_empty() {
            url.query_pairs_mut().extend_pairs(&self.inner.query);
        }
        let method = match request.method() {
            HttpMethod::Get => reqwest::Method::GET,
            HttpMethod::Head => reqwest::Method::HEAD,
            HttpMethod::Post => reqwest::Method::POST,
            HttpMethod::Put => reqwest::Method::PUT,
            HttpMethod::Patch => reqwest::Method::PATCH,
            HttpMethod::Delete => reqwest::Method::DELETE,
        };
        let mut builder = self
            .inner
            .client
            .request(method, url)
            .headers(self.inner.headers.clone());
        if !request
            .headers()
            .any(|(name, _)| name.eq_ignore_ascii_case("accept"))
        {
            builder = builder.header(reqwest::header::ACCEPT, "application/json");
        }
        for (name, value) in request.headers() {
            builder = builder.header(name, value);
        }
        if let Some(body) = request.encode_body()? {
            let bytes = body.bytes;
            if bytes.len() > self.inner.max_request_bytes {
                return Err(ToolError::new(
                    codes::VALIDATION_ERROR,
                    format!(
                        "The request would be {} bytes, over the upstream's limit of {}.",
                        bytes.len(),
                        self.inner.max_request_bytes
                    ),
                )
                .with_recovery("Send shorter values."));
            }
            builder = builder
                .header(reqwest::header::CONTENT_TYPE, body.content_type)
                .body(bytes);
        }
        let mut response = builder
            .send()
            .await
            .map_err(|error| unavailable(request, error))?;
        let status = response.status();
        let headers = response.headers().clone();
        let limit = self.inner.max_response_bytes;
        if let Some(length) = response.content_length()
            && length > limit as u64
        {
            return Err(too_large(request, status, length));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| unavailable(request, error))?
        {
            if body.len() + chunk.len() > limit {
                return Err(too_large(
                    request,
                    status,
                    (body.len() + chunk.len()) as u64,
                ));
            }
            body.extend_from_slice(&chunk);
        }
        if status.is_success() {
            Ok((status, body))
        } else {
            Err(classify(
                request.template(),
                status,
                &headers,
                &body,
                SystemTime::now(),
            ))
        }
    }
}

/// A timeout, a refused connection, a broken answer: retryable, the cause logged only.
fn unavailable(request: &UpstreamRequest, error: reqwest::Error) -> ToolError {
    // Without the URL: it holds the agent's path values, which the log line does not need.
    let timed_out = error.is_timeout();
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    let what = if timed_out {
        "did not answer in time"
    } else {
        "could not be reached"
    };
    ToolError::new(
        upstream_codes::UPSTREAM_UNAVAILABLE,
        format!("The upstream service {what}."),
    )
    .with_recovery("Retry in a moment; if it keeps failing, report the errorId to the operator.")
    .with_retry_after(DEFAULT_RETRY_AFTER)
    .with_internal_source(Box::new(LogText(format!("{}: {text}", request.template()))))
}

fn too_large(request: &UpstreamRequest, status: StatusCode, bytes: u64) -> ToolError {
    ToolError::internal_message(format!(
        "{} answered {status} with {bytes} bytes or more, over the response limit",
        request.template()
    ))
}

/// A failure text for the logs only.
#[derive(Debug)]
struct LogText(String);

impl fmt::Display for LogText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LogText {}

/// What an upstream's failure means to an agent. The upstream's body is never shown: it is
/// logged (cut to 256 characters) under the errorId when the failure has one.
///
/// | upstream | agent sees | retryable |
/// |---|---|---|
/// | 404, 410 | `NOT_FOUND` | no |
/// | 409, 412 | `CONFLICT` | no |
/// | 400, 422 and other 4xx | `UPSTREAM_REJECTED` | no |
/// | 401 | `UPSTREAM_UNAUTHORIZED` (errorId) | no |
/// | 403 | `FORBIDDEN` | no |
/// | 429 | `RATE_LIMITED`, `Retry-After` as `retryAfterMs` (1 s if absent) | yes |
/// | 503 | `UPSTREAM_UNAVAILABLE`, `Retry-After` honoured (1 s if absent) | yes |
/// | other 5xx, timeout, connection | `UPSTREAM_UNAVAILABLE` (errorId) | yes |
/// | 3xx not followed (another origin, too many) | `INTERNAL_ERROR` (errorId) | no |
pub fn classify(
    template: &str,
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    now: SystemTime,
) -> ToolError {
    let logged = || {
        let text = String::from_utf8_lossy(body);
        Box::new(LogText(format!(
            "{template} answered {status}: {}",
            crate::error::echo(&text, 256)
        )))
    };
    let retry_after = || retry_after(headers, now).unwrap_or(DEFAULT_RETRY_AFTER);
    match status.as_u16() {
        404 | 410 => ToolError::not_found("The upstream service has no such resource.")
            .with_recovery("Check the identifiers; list the resources to find valid ones."),
        409 | 412 => ToolError::conflict(
            "The upstream service refused the change: it conflicts with the resource's current state.",
        )
        .with_recovery("Read the resource again, then decide whether to retry with new values."),
        401 => ToolError::new(
            upstream_codes::UPSTREAM_UNAUTHORIZED,
            "The upstream service refused the server's credentials.",
        )
        .with_recovery("Do not retry: report the errorId to the operator.")
        .with_internal_source(logged()),
        403 => ToolError::forbidden("The upstream service does not allow this request.")
            .with_recovery("Do not retry the same request; choose another action."),
        429 => ToolError::new(
            codes::RATE_LIMITED,
            "The upstream service is rate limiting this server.",
        )
        .with_recovery("Wait for the retry window, then call again with the same arguments.")
        .with_retry_after(retry_after()),
        503 => ToolError::new(
            upstream_codes::UPSTREAM_UNAVAILABLE,
            "The upstream service is temporarily unavailable.",
        )
        .with_recovery("Wait for the retry window, then call again with the same arguments.")
        .with_retry_after(retry_after())
        .with_internal_source(logged()),
        500..=599 => ToolError::new(
            upstream_codes::UPSTREAM_UNAVAILABLE,
            "The upstream service failed.",
        )
        .with_recovery("Retry in a moment; if it keeps failing, report the errorId to the operator.")
        .with_retry_after(DEFAULT_RETRY_AFTER)
        .with_internal_source(logged()),
        400..=499 => ToolError::new(
            upstream_codes::UPSTREAM_REJECTED,
            format!("The upstream service rejected the request ({}).", status.as_u16()),
        )
        .with_recovery("Check the arguments against the tool's description; do not retry unchanged.")
        .with_internal_source(logged()),
        _ => ToolError::internal(*logged()),
    }
}

/// `Retry-After` as seconds or as an HTTP date, capped at an hour.
fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    let wait = match text.parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        Err(_) => {
            let at = httpdate::parse_http_date(text).ok()?;
            at.duration_since(now).unwrap_or(Duration::ZERO)
        }
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// The server's upstream, as a context parameter of HTTP proxy tools (generated code takes
/// it). The server refuses to build when a proxy tool is registered without an upstream.
#[derive(Debug, Clone)]
pub struct Upstream(pub HttpUpstream);

impl std::ops::Deref for Upstream {
    type Target = HttpUpstream;
    fn deref(&self) -> &HttpUpstream {
        &self.0
    }
}

impl FromContext for Upstream {
    fn from_context(context: &CallContext) -> Result<Self, ToolError> {
        context
            .state::<HttpUpstream>()
            .map(|upstream| Upstream((*upstream).clone()))
            .ok_or_else(|| ToolError::internal_message("no upstream was configured"))
    }

    fn check(server: &ServerParts) -> Result<(), String> {
        if server.has_state::<HttpUpstream>() {
            Ok(())
        } else {
            Err("it is an HTTP proxy tool but no upstream was configured with `ServerBuilder::upstream`".to_owned())
        }
    }
}

impl crate::ToolSpec {
    /// Makes this tool an HTTP proxy (SPEC T6), for code that declares tools at run time (an
    /// OpenAPI generator, a configuration file): the agent's arguments are `A` (whose schema
    /// is the input schema); the route's path parameters are taken from `A`'s fields by name,
    /// the other fields go to the query or the body by the method; the answer is read into
    /// `T` (a model declared `#[model(upstream)]`, or a list of them) and presented by `P`.
    ///
    /// When the server is built, it fails if the route does not parse, if a path parameter is
    /// not a field of `A`, if a field of `A` has the name of a guarded field of `P`'s model,
    /// or if no upstream was configured with
    /// [`ServerBuilder::upstream`](crate::ServerBuilder::upstream).
    #[must_use]
    pub fn http<P, A, T>(mut self, route: &str) -> Self
    where
        P: crate::Presenter,
        A: serde::de::DeserializeOwned + serde::Serialize + schemars::JsonSchema + Send + 'static,
        T: FromUpstream + crate::present::ToolOutput<P>,
    {
        let route = match super::HttpRoute::parse(route) {
            Ok(route) => route,
            Err(problem) => {
                self.problems.push(problem);
                return self;
            }
        };
        let schema = schemars::SchemaGenerator::default().into_root_schema_for::<A>();
        let properties: Vec<String> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| properties.keys().cloned().collect())
            .unwrap_or_default();
        for param in route.params() {
            if !properties.iter().any(|name| name == param) {
                self.problems.push(format!(
                    "the path parameter `{{{param}}}` of `{route}` is not one of the arguments"
                ));
            }
        }
        // Arguments are sent under their own names: none may be a guarded field's name, Rust
        // or upstream.
        let model = <P::Model as crate::Model>::NAME;
        let guarded = <P::Model as crate::Model>::FIELDS
            .iter()
            .filter(|field| field.guarded)
            .map(|field| field.name)
            .chain(T::GUARDED_NAMES.iter().copied());
        let mut refused: Vec<&str> = Vec::new();
        for name in guarded {
            if properties.iter().any(|property| property == name) && !refused.contains(&name) {
                refused.push(name);
                self.problems.push(format!(
                    "the argument `{name}` is a guarded field of {model}: it never comes in from an agent"
                ));
            }
        }
        self.params = crate::Params::new();
        self.params.whole::<A>();
        self.params.context::<Upstream>();
        let route = Arc::new(route);
        self.with_call_handler::<P, T, ToolError, _, _, _>(
            move |mut reader: crate::args::ArgReader<'_>| {
                let args = reader.whole::<A>();
                reader.finish()?;
                let args = args.ok_or_else(crate::args::kinds::missing_argument)?;
                let route = Arc::clone(&route);
                Ok(move |context: CallContext| async move {
                    let upstream = Upstream::from_context(&context)?;
                    let value = serde_json::to_value(&args).map_err(ToolError::internal)?;
                    let request = UpstreamRequest::from_arguments(&route, value)?;
                    Ok(upstream.send::<T>(request).await)
                })
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(retry_after: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            reqwest::header::RETRY_AFTER,
            HeaderValue::from_str(retry_after).unwrap(),
        );
        headers
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(
            retry_after(&headers("7"), now),
            Some(Duration::from_secs(7))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(90));
        assert_eq!(
            retry_after(&headers(&later), now),
            Some(Duration::from_secs(90))
        );
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(90));
        assert_eq!(retry_after(&headers(&earlier), now), Some(Duration::ZERO));
        assert_eq!(retry_after(&headers("999999"), now), Some(MAX_RETRY_AFTER));
        assert_eq!(retry_after(&headers("soon"), now), None);
    }

    #[test]
    fn failures_are_classified_without_the_body() {
        let now = SystemTime::now();
        let body = b"secret sk_live_1 leaked in an error";
        let cases = [
            (404, codes::NOT_FOUND, false),
            (409, codes::CONFLICT, false),
            (401, upstream_codes::UPSTREAM_UNAUTHORIZED, false),
            (403, codes::FORBIDDEN, false),
            (400, upstream_codes::UPSTREAM_REJECTED, false),
            (429, codes::RATE_LIMITED, true),
            (503, upstream_codes::UPSTREAM_UNAVAILABLE, true),
            (500, upstream_codes::UPSTREAM_UNAVAILABLE, true),
            (502, upstream_codes::UPSTREAM_UNAVAILABLE, true),
            (302, codes::INTERNAL_ERROR, false),
        ];
        for (status, code, retryable) in cases {
            let error = classify(
                "GET /x",
                StatusCode::from_u16(status).unwrap(),
                &HeaderMap::new(),
                body,
                now,
            );
            assert_eq!(error.code(), code, "{status}");
            assert_eq!(error.is_retryable(), retryable, "{status}");
            assert!(!error.message().contains("sk_live"), "{status}");
            assert!(
                !error.recovery().unwrap_or("").contains("sk_live"),
                "{status}"
            );
        }
        let limited = classify(
            "GET /x",
            StatusCode::TOO_MANY_REQUESTS,
            &headers("3"),
            b"",
            now,
        );
        assert_eq!(limited.retry_after(), Some(Duration::from_secs(3)));
    }
}

//! Proxied `tools/call` to an HTTP upstream on the gateway's own path.
//!
//! rmcp's Streamable HTTP client carries a request through its service loop, a worker task and
//! a task per POST, and reads every answer as a `ServerJsonRpcMessage` (an untagged enum tried
//! variant after variant): over half of what a proxied call cost the gateway. Once rmcp's
//! client has connected (the handshake, the session, the catalog and the listen stream stay
//! its), a call is POSTed here from the caller's own task, on the same keep-alive client, with
//! what rmcp would send: the same headers (the upstream's own, the bearer token,
//! `MCP-Protocol-Version`, the session's `Mcp-Session-Id` on 2025-11-25; `Mcp-Method` and
//! `Mcp-Name` on 2026-07-28) and the same `_meta` (the client's facts on every stateless
//! request). The answer, a JSON body or an event stream with progress before the result, is read
//! straight as a `CallToolResult` ([`super::read`]), any other message the generic way.
//!
//! What is unusual goes back to rmcp: a tool whose schema asks for `Mcp-Param-*` headers is
//! called through it, and so is a call whose session expired (404: the upstream did not see it),
//! which makes rmcp open a new session (whose id [`Snoop`] keeps for the next calls).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use futures::stream::BoxStream;
use http::{HeaderMap, HeaderName, HeaderValue};
use rmcp::model::{
    CallToolResult, ClientJsonRpcMessage, ClientRequest, JsonObject, NumberOrString,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, RequestId, RequestMetaObject,
    ServerJsonRpcMessage, ServerNotification, ServerRequest, ServerResult,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use rmcp::{Peer, RoleClient};
use tokio::sync::mpsc::UnboundedSender;

use super::Passthrough;
use super::call::Failure;
use super::upstream::UpstreamState;

/// The largest JSON answer or event read, as rmcp's client allows.
const MAX_MESSAGE: usize = 16 * 1024 * 1024;

/// The largest error body read, to find a JSON-RPC error in it.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The wait before resuming a stream that ended before its answer, when the upstream did not
/// say (rmcp's default), doubled after each failed attempt up to [`MAX_RESUME_WAIT`].
const RESUME_WAIT: Duration = Duration::from_secs(1);
const MAX_RESUME_WAIT: Duration = Duration::from_secs(30);

const ACCEPT: &str = "text/event-stream, application/json";

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The session id of an upstream's 2025-11-25 session, as rmcp's client has it now.
#[derive(Default)]
pub(crate) struct SessionId(RwLock<Option<Arc<str>>>);

impl SessionId {
    fn get(&self) -> Option<Arc<str>> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, id: Option<&str>) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = id.map(Arc::from);
    }
}

/// rmcp's reqwest client, keeping the session id each `initialize` answer gives (the first,
/// and those of the sessions rmcp opens again after one expired).
#[derive(Clone)]
pub(crate) struct Snoop {
    pub(crate) client: reqwest::Client,
    pub(crate) session: Arc<SessionId>,
}

impl StreamableHttpClient for Snoop {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let initialize = matches!(
            &message,
            ClientJsonRpcMessage::Request(request)
                if matches!(request.request, ClientRequest::InitializeRequest(_))
        );
        let response = self
            .client
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        if initialize
            && let Ok(
                StreamableHttpPostResponse::Json(_, session)
                | StreamableHttpPostResponse::Sse(_, session),
            ) = &response
        {
            self.session.set(session.as_deref());
        }
        response
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.client
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<
        BoxStream<'static, Result<sse_stream::Sse, SseError>>,
        StreamableHttpError<Self::Error>,
    > {
        self.client
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<
        BoxStream<'static, Result<sse_stream::Sse, SseError>>,
        StreamableHttpError<Self::Error>,
    > {
        self.client
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

/// How one upstream connection's tool calls are POSTed.
pub(crate) struct HttpCalls {
    client: reqwest::Client,
    url: reqwest::Url,
    /// Every POST's headers: the upstream's own, the bearer token, `Accept`, `Content-Type`,
    /// `MCP-Protocol-Version` (and `Mcp-Method` from 2026-07-28 on).
    headers: HeaderMap,
    /// Whether requests name their tool in `Mcp-Name` (2026-07-28 on).
    standard_headers: bool,
    /// The `_meta` entries every request carries (stateless: the protocol version and the
    /// client's facts), as JSON object members.
    meta: Box<str>,
    /// Those facts (stateless), to send a caller's capabilities instead of the gateway's.
    facts: Option<RequestMetaObject>,
    session: Arc<SessionId>,
    next: AtomicU64,
}

impl std::fmt::Debug for HttpCalls {
    // Header values (tokens) are secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpCalls")
            .field("url", &self.url.as_str())
            .finish_non_exhaustive()
    }
}

/// What the HTTP path made of a call.
pub(crate) enum Sent {
    /// The call's outcome.
    Done(Result<CallToolResult, Failure>),
    /// The session expired before the upstream saw the call: it goes through rmcp's client,
    /// which opens a new session.
    SessionExpired,
}

/// One call's exchange.
pub(crate) struct Call<'a> {
    pub(crate) upstream: &'a Arc<UpstreamState>,
    pub(crate) peer: &'a Peer<RoleClient>,
    pub(crate) id: &'a RequestId,
    pub(crate) name: &'a str,
    pub(crate) arguments: &'a JsonObject,
    /// The caller's trace context.
    pub(crate) trace: &'a RequestMetaObject,
    /// Where the call's progress goes, when the caller asked for it (its token is the id).
    pub(crate) progress: Option<UnboundedSender<ProgressNotificationParam>>,
    /// A 2026-07-28 caller's round: its state, answers and capabilities go on untouched.
    pub(crate) through: Option<&'a Passthrough>,
    /// Where the upstream's log messages on the call's stream go, when the caller asked for a
    /// level.
    pub(crate) log: Option<&'a crate::logging::LogSink>,
}

impl HttpCalls {
    /// The calls of a connection rmcp's client opened to `url` with `headers` (checked when
    /// the server was built), which speaks `version`. `client_facts` are what rmcp's client
    /// puts in the `_meta` of every stateless request.
    pub(crate) fn new(
        client: reqwest::Client,
        url: &str,
        headers: &[(String, String)],
        version: &ProtocolVersion,
        stateless: bool,
        client_facts: &rmcp::model::ClientConfig,
        session: Arc<SessionId>,
    ) -> Result<HttpCalls, String> {
        let url = reqwest::Url::parse(url).map_err(|error| format!("`{url}`: {error}"))?;
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            if let (Ok(name), Ok(mut value)) = (
                HeaderName::try_from(name.as_str()),
                HeaderValue::try_from(value.as_str()),
            ) {
                if name == http::header::AUTHORIZATION {
                    value.set_sensitive(true);
                }
                map.insert(name, value);
            }
        }
        map.insert(http::header::ACCEPT, HeaderValue::from_static(ACCEPT));
        map.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Ok(value) = HeaderValue::try_from(version.as_str()) {
            map.insert(HeaderName::from_static("mcp-protocol-version"), value);
        }
        let standard_headers = *version >= ProtocolVersion::STANDARD_HEADERS;
        if standard_headers {
            map.insert(
                HeaderName::from_static("mcp-method"),
                HeaderValue::from_static("tools/call"),
            );
        }
        let mut meta = String::new();
        let mut stateless_facts = None;
        if stateless {
            let mut facts = RequestMetaObject::default();
            facts.set_protocol_version(version.clone());
            facts.set_client_info(client_facts.client_info.clone());
            facts.set_client_capabilities(client_facts.capabilities.clone());
            meta = members(&facts);
            stateless_facts = Some(facts);
        }
        Ok(HttpCalls {
            client,
            url,
            headers: map,
            standard_headers,
            meta: meta.into(),
            facts: stateless_facts,
            session,
            next: AtomicU64::new(1),
        })
    }

    /// A request id of this path: negative, never one of rmcp's (which count up from 0 on
    /// the same session).
    pub(crate) fn next_id(&self) -> RequestId {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        NumberOrString::Number(-i64::try_from(n).unwrap_or(i64::MAX))
    }

    /// Sends the call and reads its answer.
    pub(crate) async fn call(&self, call: Call<'_>) -> Sent {
        let body = match self.body(&call) {
            Ok(body) => body,
            Err(error) => {
                return Sent::Done(Err(Failure::Unexpected(format!(
                    "the call could not be written: {error}"
                ))));
            }
        };
        let mut headers = self.headers.clone();
        let session = self.session.get();
        if let Some(session) = &session
            && let Ok(value) = HeaderValue::try_from(&**session)
        {
            headers.insert(HeaderName::from_static("mcp-session-id"), value);
        }
        if self.standard_headers
            && let Ok(value) = HeaderValue::try_from(header_text(call.name).as_ref())
        {
            headers.insert(HeaderName::from_static("mcp-name"), value);
        }
        let mut request = reqwest::Request::new(reqwest::Method::POST, self.url.clone());
        *request.headers_mut() = headers;
        *request.body_mut() = Some(body.into());
        let response = match self.client.execute(request).await {
            Ok(response) => response,
            Err(error) => return Sent::Done(Err(unreachable(&error))),
        };
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND && session.is_some() {
            return Sent::SessionExpired;
        }
        Sent::Done(self.answer(&call, response, session).await)
    }

    /// The POST body: `tools/call` with the arguments as given, and `_meta` as rmcp writes it
    /// (a progress token when the caller wants progress: the id).
    fn body(&self, call: &Call<'_>) -> serde_json::Result<Vec<u8>> {
        let mut meta = call.trace.clone();
        if call.progress.is_some() {
            meta.set_progress_token(ProgressToken(call.id.clone()));
        }
        self.write(call.id, call.name, call.arguments, &meta, call.through)
    }

    fn write(
        &self,
        id: &RequestId,
        name: &str,
        arguments: &JsonObject,
        meta: &RequestMetaObject,
        through: Option<&Passthrough>,
    ) -> serde_json::Result<Vec<u8>> {
        let call = (id, name, arguments);
        let mut body = Vec::with_capacity(256 + self.meta.len());
        body.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        serde_json::to_writer(&mut body, call.0)?;
        body.extend_from_slice(br#","method":"tools/call","params":{"name":"#);
        serde_json::to_writer(&mut body, call.1)?;
        body.extend_from_slice(br#","arguments":"#);
        serde_json::to_writer(&mut body, call.2)?;
        if let Some(through) = through {
            if let Some(state) = &through.request_state {
                body.extend_from_slice(br#","requestState":"#);
                serde_json::to_writer(&mut body, state)?;
            }
            if let Some(responses) = &through.input_responses {
                body.extend_from_slice(br#","inputResponses":"#);
                serde_json::to_writer(&mut body, responses)?;
            }
        }
        body.extend_from_slice(br#","_meta":{"#);
        // A stateless request says what its caller can be asked: the caller's capabilities
        // when it asks in rounds, else the gateway's own (none).
        let callers = through
            .and_then(|through| through.capabilities.as_ref())
            .zip(self.facts.as_ref())
            .map(|(capabilities, facts)| {
                let mut facts = facts.clone();
                facts.set_client_capabilities(capabilities.clone());
                members(&facts)
            });
        let facts = callers.as_deref().unwrap_or(&self.meta);
        body.extend_from_slice(facts.as_bytes());
        if !meta.0.0.is_empty() {
            let more = members(meta);
            if !facts.is_empty() {
                body.push(b',');
            }
            body.extend_from_slice(more.as_bytes());
        }
        body.extend_from_slice(b"}}}");
        Ok(body)
    }

    /// Reads the answer to the call from `response` (resuming its stream when it ends early).
    async fn answer(
        &self,
        call: &Call<'_>,
        response: reqwest::Response,
        session: Option<Arc<str>>,
    ) -> Result<CallToolResult, Failure> {
        // Rare paths are boxed, so that this future (held by every call) stays small.
        if !response.status().is_success() {
            return Err(Box::pin(refused(response)).await);
        }
        let mut events = EventParser::default();
        let mut response = Some(response);
        let mut attempt = 0;
        loop {
            if let Some(mut response) = response.take() {
                match content_type(&response) {
                    Kind::Json => {
                        let body = read_body(&mut response, MAX_MESSAGE).await?;
                        return match step(&body, call.id) {
                            Step::Answer(answer) => answer,
                            _ => Err(Failure::Unexpected(
                                "tools/call was answered with a message that is not its answer"
                                    .into(),
                            )),
                        };
                    }
                    Kind::Stream => {
                        if let Some(answer) =
                            self.read_stream(call, &mut response, &mut events).await
                        {
                            finish(response).await;
                            return answer;
                        }
                    }
                    Kind::Other(kind) => {
                        return Err(Failure::Unreachable(format!(
                            "tools/call was answered with content type {kind:?}"
                        )));
                    }
                }
            }
            // The stream ended before the answer: resumed after its last event if that had an
            // id, after the wait the upstream asked for, as rmcp does (SEP-1699); until the
            // call's timeout.
            let Some(last) = events.last_id.clone() else {
                return Err(Failure::Unreachable(
                    "the upstream closed the stream before answering".into(),
                ));
            };
            let wait = events.retry.take().unwrap_or_else(|| {
                RESUME_WAIT
                    .saturating_mul(1 << attempt.min(5))
                    .min(MAX_RESUME_WAIT)
            });
            attempt += 1;
            tokio::time::sleep(wait).await;
            match Box::pin(self.resume(session.as_deref(), &last)).await {
                Ok(resumed) if resumed.status().is_success() => {
                    response = Some(resumed);
                    events = events.resumed();
                }
                Ok(resumed)
                    if matches!(
                        resumed.status(),
                        reqwest::StatusCode::METHOD_NOT_ALLOWED
                            | reqwest::StatusCode::UNAUTHORIZED
                            | reqwest::StatusCode::FORBIDDEN
                    ) =>
                {
                    return Err(Failure::Unreachable(format!(
                        "resuming the call's stream was answered HTTP {}",
                        resumed.status()
                    )));
                }
                Ok(resumed) => {
                    tracing::debug!(status = %resumed.status(), upstream = %call.upstream.prefix,
                        "resuming a call's stream failed");
                }
                Err(error) => {
                    tracing::debug!(%error, upstream = %call.upstream.prefix,
                        "resuming a call's stream failed");
                }
            }
        }
    }

    /// Reads the events of `response` until the call's answer (`None` when the stream ends
    /// first), forwarding its progress and answering the upstream's requests on the way.
    async fn read_stream(
        &self,
        call: &Call<'_>,
        response: &mut reqwest::Response,
        events: &mut EventParser,
    ) -> Option<Result<CallToolResult, Failure>> {
        loop {
            while let Some(data) = events.next_message() {
                match step(&data, call.id) {
                    Step::Answer(answer) => return Some(answer),
                    Step::Progress(progress) => {
                        if let Some(queue) = &call.progress
                            && progress.progress_token.0 == *call.id
                        {
                            let _ = queue.send(progress);
                        }
                    }
                    Step::ListChanged => call.upstream.request_refresh(),
                    Step::Log(message) => {
                        if let Some(log) = call.log {
                            #[allow(deprecated)] // logging (SEP-2577), for the callers that ask
                            let _ = log.peer.notify_logging_message(message).await;
                        }
                    }
                    Step::Request(id, request) => {
                        Box::pin(self.answer_request(call, id, request)).await;
                    }
                    Step::Other => {}
                }
            }
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if let Err(error) = events.push(&chunk) {
                        return Some(Err(Failure::Unexpected(error)));
                    }
                }
                Ok(None) => return None,
                Err(error) => {
                    tracing::debug!(%error, upstream = %call.upstream.prefix,
                        "reading a call's stream failed");
                    return None;
                }
            }
        }
    }

    /// Answers a request the upstream sent on the call's stream (a ping, a sampling or roots
    /// request) as rmcp's client would, over the same session.
    async fn answer_request(&self, call: &Call<'_>, id: RequestId, request: ServerRequest) {
        let answer = super::upstream::answer_request(call.upstream, call.peer, id, request).await;
        let body = match serde_json::to_vec(&answer) {
            Ok(body) => body,
            Err(error) => {
                tracing::debug!(%error, "an answer to the upstream could not be written");
                return;
            }
        };
        let mut headers = self.headers.clone();
        headers.remove(HeaderName::from_static("mcp-method"));
        if let Some(session) = self.session.get()
            && let Ok(value) = HeaderValue::try_from(&*session)
        {
            headers.insert(HeaderName::from_static("mcp-session-id"), value);
        }
        let mut request = reqwest::Request::new(reqwest::Method::POST, self.url.clone());
        *request.headers_mut() = headers;
        *request.body_mut() = Some(body.into());
        if let Err(error) = self.client.execute(request).await {
            tracing::debug!(%error, upstream = %call.upstream.prefix,
                "an answer to the upstream was not delivered");
        }
    }

    /// `GET` the rest of a stream after its event `last`.
    async fn resume(
        &self,
        session: Option<&str>,
        last: &str,
    ) -> Result<reqwest::Response, reqwest::Error> {
        let mut headers = self.headers.clone();
        headers.remove(http::header::CONTENT_TYPE);
        if let Some(session) = session
            && let Ok(value) = HeaderValue::try_from(session)
        {
            headers.insert(HeaderName::from_static("mcp-session-id"), value);
        }
        if let Ok(value) = HeaderValue::try_from(last) {
            headers.insert(HeaderName::from_static("last-event-id"), value);
        }
        let mut request = reqwest::Request::new(reqwest::Method::GET, self.url.clone());
        *request.headers_mut() = headers;
        self.client.execute(request).await
    }
}

/// The members of a JSON object, without its braces.
fn members(meta: &RequestMetaObject) -> String {
    match serde_json::to_string(meta) {
        Ok(text) if text.len() > 2 => text[1..text.len() - 1].to_owned(),
        _ => String::new(),
    }
}

/// A header value as rmcp writes it (SEP-2243): as is, unless it cannot travel as one, then
/// `=?base64?…?=`.
fn header_text(value: &str) -> std::borrow::Cow<'_, str> {
    use base64::Engine as _;
    let bytes = value.as_bytes();
    let wrap = !value.is_empty()
        && (matches!(bytes.first(), Some(b' ' | b'\t'))
            || matches!(bytes.last(), Some(b' ' | b'\t'))
            || value
                .chars()
                .any(|c| (c as u32) < 0x20 || (c as u32) > 0x7E)
            || (value.starts_with("=?base64?") && value.ends_with("?=")));
    if wrap {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
        .into()
    } else {
        value.into()
    }
}

/// What a response holds.
enum Kind {
    Json,
    Stream,
    Other(Option<String>),
}

fn content_type(response: &reqwest::Response) -> Kind {
    let Some(value) = response.headers().get(http::header::CONTENT_TYPE) else {
        return Kind::Other(None);
    };
    let essence = value
        .to_str()
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Kind::Json
    } else if essence.eq_ignore_ascii_case("text/event-stream") {
        Kind::Stream
    } else {
        Kind::Other(Some(String::from_utf8_lossy(value.as_bytes()).into_owned()))
    }
}

fn unreachable(error: &reqwest::Error) -> Failure {
    Failure::Unreachable(format!("tools/call failed: {error}"))
}

/// A non-success status: the JSON-RPC error its JSON body holds, if any (as rmcp reads it;
/// except for authentication failures and rate limits), else the status.
async fn refused(mut response: reqwest::Response) -> Failure {
    let status = response.status();
    let json = matches!(content_type(&response), Kind::Json);
    let keeps_status = matches!(
        status,
        reqwest::StatusCode::UNAUTHORIZED
            | reqwest::StatusCode::FORBIDDEN
            | reqwest::StatusCode::TOO_MANY_REQUESTS
    );
    if json
        && !keeps_status
        && let Ok(body) = read_body(&mut response, MAX_ERROR_BODY).await
        && let Ok(ServerJsonRpcMessage::Error(error)) =
            serde_json::from_slice::<ServerJsonRpcMessage>(&body)
    {
        return Failure::Rpc(error.error);
    }
    Failure::Unreachable(format!("tools/call was answered HTTP {status}"))
}

/// The whole body, up to `max` bytes.
async fn read_body(response: &mut reqwest::Response, max: usize) -> Result<Vec<u8>, Failure> {
    let expected = response.content_length().unwrap_or(0);
    if expected > max as u64 {
        return Err(too_large());
    }
    let mut body = Vec::with_capacity(usize::try_from(expected).unwrap_or(0));
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > max {
                    return Err(too_large());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(error) => return Err(unreachable(&error)),
        }
    }
}

fn too_large() -> Failure {
    Failure::Unexpected(format!("an answer is larger than {MAX_MESSAGE} bytes"))
}

/// Reads what is left of an answered stream, so that its connection goes back to the pool.
/// Its end follows the answer at once (rmcp's servers end the stream there): it is awaited
/// here, briefly, which costs less than a task; a stream that goes on is drained in the
/// background, for a moment.
async fn finish(mut response: reqwest::Response) {
    let ended = tokio::time::timeout(Duration::from_millis(5), async {
        while let Ok(Some(_)) = response.chunk().await {}
    })
    .await;
    if ended.is_err() {
        tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_millis(100), async {
                while let Ok(Some(_)) = response.chunk().await {}
            })
            .await;
        });
    }
}

/// What one message from the upstream means for the call with id `id`.
#[derive(Debug)]
pub(crate) enum Step {
    /// The call's answer.
    Answer(Result<CallToolResult, Failure>),
    /// Progress (of this call, if its token is the call's).
    Progress(ProgressNotificationParam),
    /// The upstream's tools changed.
    ListChanged,
    /// A log message (of this call, when it comes on the call's stream).
    #[allow(deprecated)] // logging (SEP-2577), for the callers that ask
    Log(rmcp::model::LoggingMessageNotificationParam),
    /// A request of the upstream's, to answer.
    Request(RequestId, ServerRequest),
    /// Nothing for this call.
    Other,
}

/// Reads one message: the answer straight as a tool result when it is one, anything else as
/// rmcp reads it.
pub(crate) fn step(bytes: &[u8], id: &RequestId) -> Step {
    if let Some((_, result)) = super::read::tool_answer(bytes, |candidate| candidate == id) {
        return Step::Answer(Ok(result));
    }
    let bytes = bytes.strip_prefix(BOM).unwrap_or(bytes);
    let message = match serde_json::from_slice::<ServerJsonRpcMessage>(bytes) {
        Ok(message) => message,
        Err(error) => {
            // rmcp skips such an event too.
            tracing::debug!(%error, "an upstream sent something that is not a message");
            return Step::Other;
        }
    };
    match message {
        ServerJsonRpcMessage::Response(response) if response.id == *id => match response.result {
            ServerResult::CallToolResult(result) => Step::Answer(Ok(result)),
            ServerResult::InputRequiredResult(result) => {
                Step::Answer(Err(Failure::InputRequired(Box::new(result))))
            }
            other => Step::Answer(Err(Failure::Unexpected(format!(
                "tools/call answered with something else than a tool result: {other:?}"
            )))),
        },
        // An error without an id on the call's own exchange can only be about the call.
        ServerJsonRpcMessage::Error(error) if error.id.as_ref().is_none_or(|error| error == id) => {
            Step::Answer(Err(Failure::Rpc(error.error)))
        }
        ServerJsonRpcMessage::Notification(notification) => match notification.notification {
            ServerNotification::ProgressNotification(progress) => Step::Progress(progress.params),
            ServerNotification::ToolListChangedNotification(_) => Step::ListChanged,
            #[allow(deprecated)] // logging (SEP-2577), for the callers that ask
            ServerNotification::LoggingMessageNotification(message) => Step::Log(message.params),
            _ => Step::Other,
        },
        ServerJsonRpcMessage::Request(request) => Step::Request(request.id, request.request),
        ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_) => Step::Other,
    }
}

/// Server-sent events, parsed as their bytes arrive (the WHATWG event stream format): the data
/// of each message event, the last event id, the last retry hint.
#[derive(Default)]
pub(crate) struct EventParser {
    /// Bytes not parsed yet (an incomplete line).
    pending: Vec<u8>,
    /// The data of the event being read.
    data: Vec<u8>,
    has_data: bool,
    /// The event being read has a type other than `message`.
    other_type: bool,
    /// The last chunk ended with a `\r`.
    after_cr: bool,
    started: bool,
    /// Complete events' data, not taken yet.
    ready: std::collections::VecDeque<Vec<u8>>,
    pub(crate) last_id: Option<String>,
    pub(crate) retry: Option<Duration>,
}

impl EventParser {
    /// A parser for a resumed stream: the last id is kept.
    fn resumed(self) -> EventParser {
        EventParser {
            last_id: self.last_id,
            ..EventParser::default()
        }
    }

    /// Parses `chunk`; an error when an event grows past the limit.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<(), String> {
        if self.started && self.pending.is_empty() {
            return self.lines(chunk);
        }
        let mut joined = std::mem::take(&mut self.pending);
        joined.extend_from_slice(chunk);
        let mut start = 0;
        if !self.started {
            // A byte order mark may open the stream, even split across chunks.
            if joined.len() < BOM.len() && BOM.starts_with(&joined) {
                self.pending = joined;
                return Ok(());
            }
            self.started = true;
            if joined.starts_with(BOM) {
                start = BOM.len();
            }
        }
        self.lines(&joined[start..])
    }

    fn lines(&mut self, mut bytes: &[u8]) -> Result<(), String> {
        if self.after_cr {
            // The `\n` of a `\r\n` cut between chunks.
            self.after_cr = false;
            bytes = bytes.strip_prefix(b"\n").unwrap_or(bytes);
        }
        while let Some(end) = memchr::memchr2(b'\n', b'\r', bytes) {
            let line = &bytes[..end];
            let mut next = end + 1;
            if bytes[end] == b'\r' {
                match bytes.get(end + 1) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            self.line(line);
            bytes = &bytes[next..];
        }
        if self.pending.len() + bytes.len() + self.data.len() > MAX_MESSAGE {
            return Err(format!("an event is larger than {MAX_MESSAGE} bytes"));
        }
        self.pending.extend_from_slice(bytes);
        Ok(())
    }

    fn line(&mut self, line: &[u8]) {
        if line.is_empty() {
            // An event without data (a priming event, say) is no message; rmcp skips it too.
            if self.has_data && !self.other_type && !self.data.is_empty() {
                self.ready.push_back(std::mem::take(&mut self.data));
            }
            self.data.clear();
            self.has_data = false;
            self.other_type = false;
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => self.other_type = !(value.is_empty() || value == b"message"),
            b"id" if !value.contains(&0) => {
                self.last_id = Some(String::from_utf8_lossy(value).into_owned());
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                self.retry = std::str::from_utf8(value)
                    .ok()
                    .and_then(|digits| digits.parse().ok())
                    .map(Duration::from_millis);
            }
            _ => {}
        }
    }

    /// The data of the next complete message event.
    pub(crate) fn next_message(&mut self) -> Option<Vec<u8>> {
        self.ready.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt as _;
    use serde_json::{Value, json};

    use super::*;

    fn id() -> RequestId {
        NumberOrString::String("fusion-7".into())
    }

    /// What rmcp's client reads from a response body: the message, and from it the call's
    /// result, or why it is not one.
    fn rmcp_reads(body: &[u8]) -> Result<Value, String> {
        match serde_json::from_slice::<ServerJsonRpcMessage>(body) {
            Ok(ServerJsonRpcMessage::Response(response)) => match response.result {
                ServerResult::CallToolResult(result) => Ok(serde_json::to_value(result).unwrap()),
                ServerResult::InputRequiredResult(result) => Err(format!(
                    "input required {}",
                    serde_json::to_value(result).unwrap()
                )),
                _ => Err("not a tool result".into()),
            },
            Ok(ServerJsonRpcMessage::Error(error)) => Err(format!(
                "rpc {}",
                serde_json::to_value(error.error).unwrap()
            )),
            Ok(_) => Err("not an answer".into()),
            Err(_) => Err("not a message".into()),
        }
    }

    /// What the gateway's path reads from the same body.
    fn fast_reads(body: &[u8]) -> Result<Value, String> {
        match step(body, &id()) {
            Step::Answer(Ok(result)) => Ok(serde_json::to_value(result).unwrap()),
            Step::Answer(Err(Failure::Rpc(error))) => {
                Err(format!("rpc {}", serde_json::to_value(error).unwrap()))
            }
            Step::Answer(Err(Failure::Unexpected(_))) => Err("not a tool result".into()),
            // Passed back untouched to a caller that asks in rounds.
            Step::Answer(Err(Failure::InputRequired(result))) => Err(format!(
                "input required {}",
                serde_json::to_value(result).unwrap()
            )),
            Step::Answer(Err(other)) => panic!("{other:?}"),
            _ => Err("not an answer".into()),
        }
    }

    const RESULTS: &[&str] = &[
        r#"{"content":[{"type":"text","text":"{\"id\":\"INV-7\"}"}],"structuredContent":{"ok":true,"data":{"id":"INV-7","n":[1,2.5,null]}},"isError":false}"#,
        r#"{"content":[{"type":"text","text":"a\nb","annotations":{"audience":["user"],"priority":0.5},"_meta":{"k":1}},{"type":"text","text":"c","extra":true}],"_meta":{"m":"x"},"resultType":"complete"}"#,
        r#"{"content":[],"structuredContent":null}"#,
        r#"{"isError":true,"unknown":{"deep":[1]}}"#,
        r#"{"content":[{"type":"text","text":"Invoice not found."}],"structuredContent":{"ok":false,"error":{"code":"NOT_FOUND"}},"isError":true}"#,
        // Read the generic way: `type` not first, or not text.
        r#"{"content":[{"text":"t","type":"text"}]}"#,
        r#"{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"},{"type":"text","text":"x"}]}"#,
        r#"{"content":[{"type":"resource","resource":{"uri":"file:///a","text":"b"}}]}"#,
        // Every escape, raw UTF-8, whitespace everywhere, nulls.
        r#" { "content" : [ { "type" : "text" , "text" : "q\" s\\ l\/ \b\f\n\r\t \u00e9\u20AC \ud83d\ude00 é😀" , "annotations" : null , "_meta" : null } ] , "isError" : null , "_meta" : { "a" : [ 1 , { } ] } } "#,
        r#"{"content":[{"type":"text","text":""},{"type":"text","text":"\\\\\"\""}],"structuredContent":{"s":"\u0000x"}}"#,
        // Values of every kind in structuredContent: numbers read by serde_json, keys with
        // escapes, a repeated key (the last wins), empty containers, nesting, whitespace.
        r#"{"structuredContent":{"n":[0,-0,1,-1,1.5,-2.5e-3,1E10,18446744073709551615,-9223372036854775808,123456789012345678901234567890],"k\"ey\u00e9":{"a":[],"b":{},"c":[[[{"d":null}]]]},"t":true,"f":false,"z":null,"r":1,"r":2, "w" : [ 1 , "x" , { } ] }}"#,
    ];

    /// Answers neither reader takes: the same failure either way.
    const BROKEN: &[&str] = &[
        // Duplicate keys, a control character, lone surrogates, a bad escape, a truncation,
        // another version, trailing bytes.
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"content":[],"content":[]}}"#,
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"content":[{"type":"text","text":"a","text":"b"}]}}"#,
        "{\"jsonrpc\":\"2.0\",\"id\":\"fusion-7\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"a\u{1}b\"}]}}",
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"content":[{"type":"text","text":"\ud800"}]}}"#,
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"content":[{"type":"text","text":"\ude00"}]}}"#,
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"content":[{"type":"text","text":"\x"}]}}"#,
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"content":[{"type":"text","text":"a"}]"#,
        r#"{"jsonrpc":"1.0","id":"fusion-7","result":{"content":[]}}"#,
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"content":[]}} x"#,
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"structuredContent":{"a":tru}}}"#,
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"structuredContent":{"a":1x}}}"#,
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"structuredContent":{"a":[1,]}}}"#,
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"structuredContent":{"a":1e400}}}"#,
    ];

    /// A JSON body: the same result, or the same failure, as rmcp's read gives, for every
    /// shape of answer.
    #[test]
    fn json_answers_read_as_rmcp_reads_them() {
        for result in RESULTS {
            let body = format!(r#"{{"jsonrpc":"2.0","id":"fusion-7","result":{result}}}"#);
            let fast = fast_reads(body.as_bytes());
            assert!(fast.is_ok(), "{result}: {fast:?}");
            assert_eq!(fast, rmcp_reads(body.as_bytes()), "{result}");
            // Keys in another order (read the generic way), a byte order mark: the same.
            let body = format!(r#"{{"result":{result},"id":"fusion-7","jsonrpc":"2.0"}}"#);
            assert_eq!(fast_reads(body.as_bytes()), fast, "{result}");
            assert_eq!(
                fast_reads(format!("\u{feff}{body}").as_bytes()),
                fast,
                "{result}"
            );
        }
        // Nesting past serde_json's limit is refused by both; within it, read by both.
        for depth in [100, 126, 127, 128, 129, 200] {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":"fusion-7","result":{{"structuredContent":{}1{}}}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            );
            assert_eq!(
                fast_reads(body.as_bytes()).is_ok(),
                rmcp_reads(body.as_bytes()).is_ok(),
                "depth {depth}"
            );
            if let Ok(value) = rmcp_reads(body.as_bytes()) {
                assert_eq!(fast_reads(body.as_bytes()), Ok(value), "depth {depth}");
            }
        }
        for broken in BROKEN {
            assert!(rmcp_reads(broken.as_bytes()).is_err(), "{broken}");
            assert!(fast_reads(broken.as_bytes()).is_err(), "{broken}");
        }
        let error = br#"{"jsonrpc":"2.0","id":"fusion-7","error":{"code":-32602,"message":"Unknown tool: x","data":{"n":1}}}"#;
        assert!(fast_reads(error).unwrap_err().starts_with("rpc "));
        assert_eq!(fast_reads(error), rmcp_reads(error));
        // Answers that are not tool results are refused, as rmcp's client refuses them, except
        // `input_required`, read as rmcp reads it.
        for other in [
            r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"tools":[]}}"#,
            r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"resultType":"input_required","inputRequests":{"q1":{"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object","properties":{}}}}}}}"#,
            r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"resultType":"complete"}}"#,
        ] {
            assert_eq!(
                fast_reads(other.as_bytes()),
                rmcp_reads(other.as_bytes()),
                "{other}"
            );
        }
        // Not the call's answer.
        for other in [
            r#"{"jsonrpc":"2.0","id":"fusion-8","result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":8,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#,
            "not json",
        ] {
            assert_eq!(
                fast_reads(other.as_bytes()),
                Err("not an answer".into()),
                "{other}"
            );
        }
    }

    /// The messages rmcp's client reads from an event stream cut into `chunks`: its SSE reader,
    /// message events only, data that is not a message skipped.
    async fn rmcp_reads_stream(chunks: &[&[u8]]) -> Vec<Value> {
        let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = chunks
            .iter()
            .map(|chunk| Ok(bytes::Bytes::copy_from_slice(chunk)))
            .collect();
        let mut events = sse_stream::SseStream::from_bytes_stream(futures::stream::iter(chunks));
        let mut read = Vec::new();
        while let Some(event) = events.next().await {
            let event = event.unwrap();
            if !matches!(event.event.as_deref(), None | Some("" | "message")) {
                continue;
            }
            let Some(data) = event.data else { continue };
            let Ok(message) = serde_json::from_str::<ServerJsonRpcMessage>(&data) else {
                continue;
            };
            read.push(match message {
                ServerJsonRpcMessage::Response(response) => match response.result {
                    ServerResult::CallToolResult(result) => {
                        json!({"result": serde_json::to_value(result).unwrap()})
                    }
                    _ => json!("not a tool result"),
                },
                ServerJsonRpcMessage::Error(error) => json!({"error": error.error}),
                ServerJsonRpcMessage::Notification(notification) => {
                    match notification.notification {
                        ServerNotification::ProgressNotification(progress) => {
                            json!({"progress": progress.params})
                        }
                        ServerNotification::ToolListChangedNotification(_) => json!("changed"),
                        #[allow(deprecated)] // logging (SEP-2577)
                        ServerNotification::LoggingMessageNotification(message) => {
                            json!({"log": message.params})
                        }
                        _ => continue,
                    }
                }
                ServerJsonRpcMessage::Request(request) => json!({"request": request.id}),
            });
        }
        read
    }

    /// What the gateway's path reads from the same chunks, up to the answer.
    fn fast_reads_stream(chunks: &[&[u8]]) -> Vec<Value> {
        let mut events = EventParser::default();
        let mut read = Vec::new();
        for chunk in chunks {
            events.push(chunk).unwrap();
            while let Some(data) = events.next_message() {
                read.push(match step(&data, &id()) {
                    Step::Answer(Ok(result)) => {
                        json!({"result": serde_json::to_value(result).unwrap()})
                    }
                    Step::Answer(Err(Failure::Rpc(error))) => json!({"error": error}),
                    Step::Answer(Err(_)) => json!("not a tool result"),
                    Step::Progress(progress) => json!({"progress": progress}),
                    Step::ListChanged => json!("changed"),
                    Step::Log(message) => json!({"log": message}),
                    Step::Request(id, _) => json!({"request": id}),
                    Step::Other => continue,
                });
            }
        }
        read
    }

    /// An event stream: progress, then the answer, with what a stream may hold besides
    /// (a priming event, comments, other event types, ids, retry hints, data over several
    /// lines, CRLF or CR line ends), read whole and cut at every size.
    #[tokio::test]
    async fn streamed_answers_read_as_rmcp_reads_them() {
        let mut streams = Vec::new();
        for (index, result) in RESULTS.iter().enumerate() {
            let newline = ["\n", "\r\n", "\r"][index % 3];
            let events = [
                "id: 0\ndata:\n".to_owned(),
                ": keep-alive\nretry: 500\n".to_owned(),
                r#"id: 1
data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"fusion-7","progress":1,"total":2,"message":"half"}}
"#
                .to_owned(),
                "event: ping\ndata: {}\n".to_owned(),
                r#"data: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}
"#
                .to_owned(),
                r#"data: {"jsonrpc":"2.0","method":"notifications/progress",
data: "params":{"progressToken":"fusion-7","progress":2,"total":2}}
"#
                .to_owned(),
                r#"data: {"jsonrpc":"2.0","id":"ping-1","method":"ping"}
"#
                .to_owned(),
                "data: not json\n".to_owned(),
                format!("id: 2\nevent: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":\"fusion-7\",\"result\":{result}}}\n"),
            ];
            let stream = events.join("\n").replace('\n', newline) + newline;
            streams.push(stream);
        }
        streams.push(
            "data: {\"jsonrpc\":\"2.0\",\"id\":\"fusion-7\",\"error\":{\"code\":-32603,\"message\":\"boom\"}}\n\n"
                .to_owned(),
        );
        streams.push(
            "\u{feff}data: {\"jsonrpc\":\"2.0\",\"id\":\"fusion-7\",\"result\":{\"tools\":[]}}\n\n"
                .to_owned(),
        );
        for stream in &streams {
            let bytes = stream.as_bytes();
            let expected = rmcp_reads_stream(&[bytes]).await;
            assert!(
                expected
                    .last()
                    .is_some_and(|last| last.get("result").is_some()
                        || last.get("error").is_some()
                        || *last == "not a tool result"),
                "{stream:?}: {expected:?}"
            );
            for size in [1, 2, 3, 5, 8, 13, 64, bytes.len()] {
                let chunks: Vec<&[u8]> = bytes.chunks(size).collect();
                // rmcp reads a `\r` at the end of the stream as a line end; so does everyone
                // once the next chunk comes, which it does here but for the very last byte.
                let fast = fast_reads_stream(&chunks);
                assert_eq!(fast, expected, "{stream:?} in chunks of {size}");
            }
        }
    }

    /// The last event id and retry hint (to resume a stream), limits.
    #[test]
    fn event_streams_keep_what_resuming_needs() {
        let mut events = EventParser::default();
        events
            .push(b"id: 41\nretry: 250\ndata: a\n\nid: 42\ndata: b\n\ndata: c\n")
            .unwrap();
        assert_eq!(events.next_message().as_deref(), Some(&b"a"[..]));
        assert_eq!(events.next_message().as_deref(), Some(&b"b"[..]));
        // `c` is not complete until its blank line.
        assert_eq!(events.next_message(), None);
        assert_eq!(events.last_id.as_deref(), Some("42"));
        assert_eq!(events.retry, Some(Duration::from_millis(250)));
        let resumed = events.resumed();
        assert_eq!(resumed.last_id.as_deref(), Some("42"));
        let mut big = EventParser::default();
        let line = vec![b'x'; 1024 * 1024];
        let mut refused = false;
        for _ in 0..17 {
            big.push(b"data: ").unwrap();
            if big.push(&line).is_err() {
                refused = true;
                break;
            }
        }
        assert!(refused, "an event past the limit is refused");
    }

    /// The POST body is the request rmcp would send: same method, name, arguments and `_meta`
    /// (progress token, trace context, and on 2026-07-28 the protocol version and the
    /// client's facts); the headers name the tool as rmcp does.
    #[test]
    fn calls_are_written_as_rmcp_writes_them() {
        let facts = rmcp::model::ClientConfig::default();
        let arguments = JsonObject::from_iter([("id".to_owned(), json!("INV-1"))]);
        let mut trace = RequestMetaObject::default();
        trace.set_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
        for stateless in [false, true] {
            let version = if stateless {
                ProtocolVersion::V_2026_07_28
            } else {
                ProtocolVersion::V_2025_11_25
            };
            let calls = HttpCalls::new(
                super::super::upstream::http_client().unwrap(),
                "http://127.0.0.1:1/mcp",
                &[("X-Api-Key".into(), "k".into())],
                &version,
                stateless,
                &facts,
                Arc::default(),
            )
            .unwrap();
            let mut meta = trace.clone();
            meta.set_progress_token(ProgressToken(id()));
            let body = calls
                .write(&id(), "get_invoice", &arguments, &meta, None)
                .unwrap();
            let body: Value = serde_json::from_slice(&body).unwrap();
            let mut request = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
                rmcp::model::CallToolRequestParams::new("get_invoice")
                    .with_arguments(arguments.clone()),
            ));
            let meta = rmcp::model::GetMeta::get_meta_mut(&mut request);
            if stateless {
                meta.set_protocol_version(version.clone());
                meta.set_client_info(facts.client_info.clone());
                meta.set_client_capabilities(facts.capabilities.clone());
            }
            meta.extend(trace.clone());
            meta.set_progress_token(ProgressToken(id()));
            let rmcp_body =
                serde_json::to_value(ClientJsonRpcMessage::request(request, id())).unwrap();
            assert_eq!(body, rmcp_body, "stateless: {stateless}");
            assert_eq!(calls.headers["mcp-protocol-version"], version.as_str());
            assert_eq!(calls.headers["x-api-key"], "k");
            assert_eq!(calls.headers.contains_key("mcp-method"), stateless);
        }
        assert_eq!(header_text("get_invoice"), "get_invoice");
        assert_eq!(header_text("café"), "=?base64?Y2Fmw6k=?=");
        assert_eq!(header_text(" x"), "=?base64?IHg=?=");
    }
}

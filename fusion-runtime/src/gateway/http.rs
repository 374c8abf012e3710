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

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use http::{HeaderMap, HeaderName, HeaderValue};
use rmcp::model::{
    CallToolResult, ClientJsonRpcMessage, JsonObject, NumberOrString, ProgressNotificationParam,
    ProgressToken, ProtocolVersion, RequestId, RequestMetaObject, ServerJsonRpcMessage,
    ServerRequest,
};
use rmcp::{Peer, RoleClient};
use tokio::sync::mpsc::UnboundedSender;

use super::events::{EventParser, MAX_MESSAGE, Step, step};
use super::failure::Failure;
use super::session::SessionId;
use super::{Passthrough, TokenSource};

/// The largest error body read, to find a JSON-RPC error in it.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The wait before resuming a stream that ended before its answer, when the upstream did not
/// say (rmcp's default), doubled after each failed attempt up to [`MAX_RESUME_WAIT`].
const RESUME_WAIT: Duration = Duration::from_secs(1);
const MAX_RESUME_WAIT: Duration = Duration::from_secs(30);

const ACCEPT: &str = "text/event-stream, application/json";

/// The upstream a call goes to, as the HTTP path needs it: its name for the log, the refresh
/// its catalog changes ask for, and rmcp's client answering the requests it sends on a call's
/// stream. Implemented by the upstream's state, which owns this path's [`HttpCalls`].
pub(crate) trait Origin: Send + Sync {
    /// The upstream's prefix.
    fn prefix(&self) -> &str;
    /// The upstream said its tools changed.
    fn request_refresh(&self);
    /// What rmcp's client answers to `request`, to be sent back on this path.
    fn answer<'a>(
        &'a self,
        peer: &'a Peer<RoleClient>,
        id: RequestId,
        request: ServerRequest,
    ) -> BoxFuture<'a, ClientJsonRpcMessage>;
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
    /// The gateway's own OAuth client, whose current token each call carries.
    credentials: Option<Arc<TokenSource>>,
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
    pub(crate) upstream: &'a dyn Origin,
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
    /// The caller, whose token is exchanged when the upstream is configured so.
    pub(crate) caller: Option<super::credentials::Caller<'a>>,
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
            credentials: None,
            next: AtomicU64::new(1),
        })
    }

    /// Each call carries the current token of the gateway's own OAuth client.
    pub(crate) fn with_credentials(mut self, credentials: Option<Arc<TokenSource>>) -> Self {
        self.credentials = credentials;
        self
    }

    /// Whether each call carries its caller's exchanged token (RFC 8693).
    pub(crate) fn exchanges_tokens(&self) -> bool {
        self.credentials
            .as_ref()
            .is_some_and(|source| source.exchanges_tokens())
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
        let mut token = None;
        if let Some(source) = &self.credentials {
            // The caller's exchanged token goes in this request's own header: the gateway's
            // path sets every POST's headers, so callers share the upstream connection (and its
            // pool) without one caller's token ever riding on another's request. rmcp's client
            // (one header per connection) carries the gateway's own token only, for the
            // catalog; a call of an exchanging upstream never takes that path (see
            // `call::send_once`).
            match source.token_for(call.caller).await {
                Ok(current) => {
                    if let Ok(mut value) = HeaderValue::try_from(format!("Bearer {current}")) {
                        value.set_sensitive(true);
                        headers.insert(http::header::AUTHORIZATION, value);
                    }
                    token = Some(current);
                }
                Err(refusal) if source.exchanges_tokens() => {
                    return Sent::Done(Err(Failure::Exchange(refusal)));
                }
                Err(refusal) => return Sent::Done(Err(Failure::Unreachable(refusal.to_string()))),
            }
        }
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
        if status == reqwest::StatusCode::UNAUTHORIZED
            && let (Some(source), Some(token)) = (&self.credentials, &token)
        {
            source.refused(token).await;
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
                    tracing::debug!(status = %resumed.status(), upstream = %call.upstream.prefix(),
                        "resuming a call's stream failed");
                }
                Err(error) => {
                    tracing::debug!(%error, upstream = %call.upstream.prefix(),
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
        // An upstream's log flood is thinned before it reaches the caller.
        let mut logs = super::bounds::Flood::for_logs();
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
                        if let Some(log) = call.log
                            && logs.admit()
                        {
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
                    tracing::debug!(%error, upstream = %call.upstream.prefix(),
                        "reading a call's stream failed");
                    return None;
                }
            }
        }
    }

    /// Answers a request the upstream sent on the call's stream (a ping, a sampling or roots
    /// request) as rmcp's client would, over the same session.
    async fn answer_request(&self, call: &Call<'_>, id: RequestId, request: ServerRequest) {
        let answer = call.upstream.answer(call.peer, id, request).await;
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
            tracing::debug!(%error, upstream = %call.upstream.prefix(),
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

#[cfg(test)]
mod tests {
    use rmcp::model::ClientRequest;
    use serde_json::{Value, json};

    use super::*;

    fn id() -> RequestId {
        NumberOrString::String("fusion-7".into())
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

//! A stateless `tools/call` (2026-07-28) answered on the connection's own task.
//!
//! rmcp's Streamable HTTP endpoint serves every stateless request as a service of its own: it
//! deserializes the body by trying each request type in turn, serializes it back to check the
//! `Mcp-*` headers, builds a peer and its channels, and spawns four tasks, each a place where
//! the call changes threads. For the one request that carries almost all of an agent's
//! traffic, a plain `tools/call`, this path reads the body once, calls the handler in place
//! and writes rmcp's own answer: the same status, headers and bytes (checked against rmcp's
//! path in `tests/direct.rs`). A call of hello costs 0.46× the instructions it costs the
//! plain rmcp server, and spawns no task (`bench/guard.py`).
//!
//! It takes only a request that rmcp would accept as it stands and that cannot need a stream:
//! every check it does not repeat (an unusual `Accept`, a mismatched `Mcp-Name`, a
//! `Mcp-Param-*` header, a progress token, a per-request log level, a body that is not a
//! well-formed call…) sends the request to rmcp unchanged, which answers it as before.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::response::IntoResponse;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use rmcp::RoleServer;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, ErrorCode, ErrorData, JsonRpcRequest,
    ProtocolVersion, RequestMetaObject, ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::{Peer, RequestContext};
use tokio_util::sync::CancellationToken;

use super::McpHandler;

/// What the direct path needs: the handler and the limits rmcp's endpoint applies.
pub(super) struct Direct {
    handler: McpHandler,
    max_body_bytes: usize,
    body_read_timeout: Duration,
    /// The server's tools whose schema mirrors an argument in an `Mcp-Param-*` header (rmcp
    /// checks those), found once: the tools do not change while it serves.
    mirrored: HashSet<String>,
    /// A peer whose service has ended, for the `RequestContext` the handler takes. Nothing is
    /// ever sent through it: a call that could send (progress, log messages) is not taken.
    /// Made on the first call, inside the runtime.
    closed_peer: OnceLock<Peer<RoleServer>>,
}

impl Direct {
    /// The direct path of `handler`'s server, or none when its search mode answers
    /// `tools/call` itself.
    pub(super) fn new(
        handler: McpHandler,
        max_body_bytes: usize,
        body_read_timeout: Duration,
    ) -> Option<Direct> {
        if handler.shared.search.is_some() {
            return None;
        }
        let mirrored = handler
            .shared
            .server
            .tools()
            .filter(|tool| mirrors_headers(tool.definition().input_schema.get("properties")))
            .map(|tool| tool.definition().name.to_string())
            .collect();
        Some(Direct {
            handler,
            max_body_bytes,
            body_read_timeout,
            mirrored,
            closed_peer: OnceLock::new(),
        })
    }

    /// Answers `request` if it is a plain stateless `tools/call`; gives it back otherwise,
    /// with its body, for rmcp to answer.
    pub(super) async fn answer(
        &self,
        request: axum::extract::Request,
    ) -> Result<axum::response::Response, axum::extract::Request> {
        if !self.takes(request.method(), request.headers()) {
            return Err(request);
        }
        let (parts, body) = request.into_parts();
        let bytes = match tokio::time::timeout(
            self.body_read_timeout,
            axum::body::to_bytes(body, self.max_body_bytes),
        )
        .await
        {
            Err(_) => return Ok(super::streamable::body_timed_out()),
            Ok(Err(_)) => {
                return Ok((
                    StatusCode::BAD_REQUEST,
                    "Bad Request: the request body could not be read",
                )
                    .into_response());
            }
            Ok(Ok(bytes)) => bytes,
        };
        let call = serde_json::from_slice::<JsonRpcRequest<CallToolRequest>>(&bytes)
            .ok()
            .filter(|call| {
                plain_call(call, &parts.headers) && self.serves(&call.request.params.name)
            });
        let Some(JsonRpcRequest {
            id, mut request, ..
        }) = call
        else {
            return Err(http::Request::from_parts(parts, bytes.into()));
        };
        let mut context = RequestContext::new(id.clone(), self.closed_peer().clone());
        context.meta = request
            .extensions
            .remove::<RequestMetaObject>()
            .unwrap_or_default();
        context.extensions = std::mem::take(&mut request.extensions);
        context.extensions.insert(parts);
        // A fresh handler per request, as rmcp makes one for every stateless request: what a
        // connection keeps (its log level) is never shared between callers.
        let handler = self.handler.for_new_session();
        let params = request.params;
        let cancellation = context.ct.clone();
        let outcome = Detaching::new(
            Box::pin(async move { dispatch_call(&handler, params, context).await }),
            cancellation,
        )
        .await;
        Ok(answer(id, outcome))
    }

    /// Whether the request's line and headers are those of a stateless call rmcp would take
    /// (its own checks, made strict: anything unusual goes to rmcp).
    fn takes(&self, method: &http::Method, headers: &HeaderMap) -> bool {
        method == http::Method::POST
            && !headers.contains_key(super::streamable::SESSION_HEADER)
            && only(headers, "mcp-method").is_some_and(|value| value == "tools/call")
            && only(headers, "mcp-protocol-version")
                .is_some_and(|value| value == ProtocolVersion::V_2026_07_28.as_str())
            && only(headers, header::CONTENT_TYPE.as_str()).is_some_and(is_json)
            && only(headers, header::ACCEPT.as_str()).is_some_and(accepts_json_and_sse)
            && only(headers, header::CONTENT_LENGTH.as_str())
                .and_then(|value| value.to_str().ok()?.parse::<usize>().ok())
                .is_some_and(|length| length <= self.max_body_bytes)
            && !headers
                .keys()
                .any(|name| name.as_str().starts_with("mcp-param-"))
    }

    /// Whether `tool` is one of the server's own whose arguments no header mirrors: proxied
    /// tools and `x-mcp-header` annotations are rmcp's to check.
    fn serves(&self, tool: &str) -> bool {
        self.handler.shared.server.tool(tool).is_some() && !self.mirrored.contains(tool)
    }

    fn closed_peer(&self) -> &Peer<RoleServer> {
        self.closed_peer.get_or_init(|| {
            use rmcp::transport::WorkerTransport;
            use rmcp::transport::streamable_http_server::session::local::{
                SessionConfig, create_local_session,
            };
            // A session worker (not registered anywhere) whose handle is dropped at once: its
            // input ends, the service stops, and anything sent through its peer fails instead
            // of waiting. Over a session's transport type because the server already compiles
            // rmcp's service loop for it: another transport type cost 197 kB of binary.
            let (handle, worker) = create_local_session("fusion-direct", SessionConfig::default());
            drop(handle);
            let transport = WorkerTransport::spawn(worker);
            let running =
                rmcp::service::serve_directly(self.handler.for_new_session(), transport, None);
            running.peer().clone()
        })
    }
}

/// Whether a property reached through `properties` keys alone carries an `x-mcp-header`
/// annotation (where rmcp looks for them).
fn mirrors_headers(properties: Option<&serde_json::Value>) -> bool {
    let Some(serde_json::Value::Object(properties)) = properties else {
        return false;
    };
    properties.values().any(|schema| {
        schema.get("x-mcp-header").is_some() || mirrors_headers(schema.get("properties"))
    })
}

/// The header's value when it is there exactly once.
fn only<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h HeaderValue> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    values.next().is_none().then_some(first)
}

/// `application/json`, with parameters or not (rmcp's rule).
fn is_json(value: &HeaderValue) -> bool {
    value.to_str().is_ok_and(|value| {
        let essence = value.split_once(';').map_or(value, |(essence, _)| essence);
        essence.trim().eq_ignore_ascii_case("application/json")
    })
}

/// Both media types rmcp requires, listed plainly: a weight or any other parameter goes to
/// rmcp, which reads them.
fn accepts_json_and_sse(value: &HeaderValue) -> bool {
    let Ok(value) = value.to_str() else {
        return false;
    };
    if value.contains(';') {
        return false;
    }
    let listed = |wanted: &str| {
        value
            .split(',')
            .any(|item| item.trim().eq_ignore_ascii_case(wanted))
    };
    listed("application/json") && listed("text/event-stream")
}

/// Whether the parsed call is one rmcp would answer with a single JSON message: `Mcp-Name`
/// names its tool as written, its `_meta` is complete for 2026-07-28, and nothing asks for a
/// stream.
fn plain_call(call: &JsonRpcRequest<CallToolRequest>, headers: &HeaderMap) -> bool {
    let name = call.request.params.name.as_ref();
    // A name that needs no encoding, so that the header's text is the name itself.
    let plain_name = !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.'));
    let Some(meta) = call.request.extensions.get::<RequestMetaObject>() else {
        return false;
    };
    plain_name
        && only(headers, "mcp-name").is_some_and(|value| value.as_bytes() == name.as_bytes())
        && meta.protocol_version() == Some(ProtocolVersion::V_2026_07_28)
        && meta
            .missing_required_keys(&ProtocolVersion::V_2026_07_28)
            .is_empty()
        // What would make the handler stream notifications before its answer.
        && meta.get_progress_token().is_none()
        && meta.log_level().is_none()
}

/// rmcp's answer to a stateless request whose first message is its last: the message as
/// JSON, with the status rmcp gives it.
fn answer(
    id: rmcp::model::RequestId,
    outcome: Result<ServerResult, ErrorData>,
) -> axum::response::Response {
    let message = match outcome {
        Ok(result) => ServerJsonRpcMessage::response(result, id),
        Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
    };
    let status = match &message {
        ServerJsonRpcMessage::Error(error) => match error.error.code {
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
            | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
            | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
            ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
            _ => StatusCode::OK,
        },
        _ => StatusCode::OK,
    };
    match serde_json::to_vec(&message) {
        Ok(body) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response(),
        Err(error) => {
            tracing::error!(%error, "could not serialize a tool's answer");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal Server Error: the answer could not be serialized",
            )
                .into_response()
        }
    }
}

/// `tools/call` as rmcp's request dispatch runs it (for a request whose `_meta` rmcp's
/// checks already accept): the handler, the refusal of a task handle for a client that did not
/// declare tasks (SEP-2663), and the result in the shape of the negotiated version.
pub(super) async fn dispatch_call(
    handler: &McpHandler,
    params: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<ServerResult, ErrorData> {
    // Dates compare as text, as rmcp compares them.
    let current = context
        .protocol_version()
        .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
    let declared_tasks = context
        .client_capabilities()
        .is_some_and(|capabilities| capabilities.supports_tasks());
    let response = handler.call_tool(params, context).await?;
    if matches!(response, CallToolResponse::Task(_)) && !declared_tasks {
        return Err(ErrorData::missing_required_client_capability(
            rmcp::model::ClientCapabilities::builder()
                .enable_tasks()
                .build(),
        ));
    }
    let mut result = ServerResult::from(response);
    if current {
        result.fill_missing_cache_hints();
    } else if matches!(result, ServerResult::InputRequiredResult(_)) {
        return Err(ErrorData::invalid_request(
            "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer",
            None,
        ));
    } else {
        result.strip_result_type_for_legacy_peer();
        result.strip_non_object_output_for_legacy_peer();
    }
    Ok(result)
}

type Call = Pin<Box<dyn Future<Output = Result<ServerResult, ErrorData>> + Send>>;

/// The call, run in place; if the connection drops it before it ends (the client went away),
/// it is cancelled and finished on a task of its own, as rmcp's path does: the handler stops
/// where it waits, and what follows it (the seal, the audit record of a change already made)
/// still happens.
pub(super) struct Detaching {
    call: Option<Call>,
    cancellation: CancellationToken,
}

impl Detaching {
    pub(super) fn new(call: Call, cancellation: CancellationToken) -> Self {
        Detaching {
            call: Some(call),
            cancellation,
        }
    }
}

impl Future for Detaching {
    type Output = Result<ServerResult, ErrorData>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(call) = self.call.as_mut() else {
            return Poll::Ready(Err(ErrorData::internal_error(
                "a finished call was polled again",
                None,
            )));
        };
        // The pipeline catches what the tool's code throws; this catches the rest, so that a
        // panic costs the caller an error, not the connection.
        let polled =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call.as_mut().poll(cx)));
        let outcome = match polled {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(outcome)) => outcome,
            Err(_) => {
                tracing::error!("a call answered directly panicked outside the tool's pipeline");
                Err(ErrorData::internal_error("Internal error", None))
            }
        };
        self.call = None;
        Poll::Ready(outcome)
    }
}

impl Drop for Detaching {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            self.cancellation.cancel();
            tokio::spawn(async move {
                let _ = call.await;
            });
        }
    }
}

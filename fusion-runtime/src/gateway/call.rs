//! The upstream's side of a proxied call: forwarding it (trace context, progress,
//! cancellation) and reading the answer, or the failure, back. The stages that belong to the
//! server (access, middleware, audit, …) run around it, in the pipeline.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ErrorCode, ErrorData,
    JsonObject, ProgressToken, ProtocolVersion, RequestId, RequestMetaObject, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use rmcp::{Peer, RoleClient};
use serde_json::{Value, json};

use super::credentials::{Caller, Refusal};
pub(crate) use super::failure::Failure;
use super::http::{Call, HttpCalls, Sent};
use super::progress::Relay;
use super::upstream::UpstreamState;
use super::{Answer, Passthrough, ProxiedTool, codes as gateway_codes};
use crate::context::CallContext;
use crate::envelope::{Outcome, Reply, Sealed};
use crate::error::{ToolError, codes, echo};

/// Why a proxied call failed, for the log only.
#[derive(Debug)]
struct Cause(String);

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Cause {}

/// Forwards the call and waits for the upstream's answer, the caller's cancellation or the
/// end of the connection. Over HTTP the call goes on the gateway's own path
/// ([`super::http`]); otherwise, or when that path hands it back, through rmcp's client.
pub(crate) async fn send(
    upstream: &Arc<UpstreamState>,
    tool: &ProxiedTool,
    args: JsonObject,
    context: &CallContext,
) -> Result<CallToolResult, ToolError> {
    let link = upstream
        .link()
        .ok_or_else(|| unavailable(&upstream.prefix, "the upstream is not connected".into()))?;
    // A caller that asked for a task: the upstream is asked for one.
    if let Some(start) = context.extensions().get::<Arc<super::tasks::TaskStart>>() {
        let mut result = super::tasks::start(upstream, tool, args, context, start).await?;
        upstream.renames().result(&mut result);
        return Ok(result);
    }
    let given = context.extensions().get::<Arc<Passthrough>>();
    // A session caller of a stateless upstream: asked over its session, round after round.
    let mut result = if let Some(given) = given
        && let Some(caller) = &given.session
        && link.http.is_some()
        && link
            .peer
            .peer_info()
            .is_some_and(|info| info.protocol_version >= ProtocolVersion::V_2026_07_28)
    {
        Box::pin(bridged(
            upstream,
            tool,
            args,
            context,
            caller,
            given.capabilities.as_ref(),
        ))
        .await
    } else {
        // A 2026-07-28 caller's round: its state and answers go to the upstream untouched.
        let through = given
            .filter(|given| given.session.is_none())
            .map(Arc::as_ref);
        send_once(upstream, &link, tool, args, context, through).await
    }?;
    // The tools the upstream names in its answer, as the caller calls them here.
    upstream.renames().result(&mut result);
    Ok(result)
}

/// How many rounds a session caller is asked before the gateway gives up on a proxied call.
const MAX_ROUNDS: usize = 16;

/// A call of a session caller (2025-11-25, stdio) to a stateless upstream, which asks for
/// input with `input_required`: the gateway asks the caller each question over its session
/// (sampling, elicitation, roots), then calls again with the answers under the upstream's
/// state, until the upstream answers with a result.
async fn bridged(
    upstream: &Arc<UpstreamState>,
    tool: &ProxiedTool,
    args: JsonObject,
    context: &CallContext,
    caller: &rmcp::Peer<rmcp::RoleServer>,
    capabilities: Option<&rmcp::model::ClientCapabilities>,
) -> Result<CallToolResult, ToolError> {
    let mut round = Passthrough::new(None, None, capabilities.cloned());
    for _ in 0..MAX_ROUNDS {
        let link = upstream
            .link()
            .ok_or_else(|| unavailable(&upstream.prefix, "the upstream is not connected".into()))?;
        let outcome = send_once(upstream, &link, tool, args.clone(), context, Some(&round)).await;
        let asked = match round.take() {
            None => return outcome,
            Some(Answer::Error(error)) => return Err(failed(upstream, Failure::Rpc(error), None)),
            Some(Answer::InputRequired(asked)) => asked,
        };
        let mut answers = rmcp::model::InputResponses::new();
        for (key, request) in asked.input_requests.unwrap_or_default() {
            let request = match request {
                rmcp::model::InputRequest::CreateMessage(request) => {
                    rmcp::model::ServerRequest::CreateMessageRequest(request)
                }
                rmcp::model::InputRequest::Elicitation(request) => {
                    rmcp::model::ServerRequest::ElicitRequest(request)
                }
                rmcp::model::InputRequest::ListRoots(request) => {
                    rmcp::model::ServerRequest::ListRootsRequest(request)
                }
                other => {
                    return Err(upstream_error(
                        &upstream.prefix,
                        format!("input_required asked for something unknown: {other:?}"),
                    ));
                }
            };
            let answer = tokio::select! {
                answer = caller.send_request(request) => answer,
                _ = context.cancellation().cancelled() => {
                    return Err(ToolError::new(codes::CANCELLED, "The request was cancelled."));
                }
            };
            let answer = answer.map_err(|error| {
                ToolError::new(
                    codes::VALIDATION_ERROR,
                    format!("The client did not answer the upstream server's request: {error}."),
                )
            })?;
            answers.insert(key, serde_json::to_value(answer).unwrap_or(Value::Null));
        }
        round = Passthrough::new(asked.request_state, Some(answers), capabilities.cloned());
    }
    Err(upstream_error(
        &upstream.prefix,
        format!("tools/call still asked for input after {MAX_ROUNDS} rounds"),
    ))
}

/// One exchange of the call with the upstream.
async fn send_once(
    upstream: &Arc<UpstreamState>,
    link: &super::upstream::Link,
    tool: &ProxiedTool,
    args: JsonObject,
    context: &CallContext,
    through: Option<&Passthrough>,
) -> Result<CallToolResult, ToolError> {
    // The caller's trace context goes on: the upstream's spans join the same trace.
    let mut meta = RequestMetaObject::default();
    if let Some(traceparent) = context.meta().get_traceparent() {
        meta.set_traceparent(traceparent);
    }
    if let Some(tracestate) = context.meta().get_tracestate() {
        meta.set_tracestate(tracestate);
    }
    // Log messages go back only to a caller that asked for a level: the upstream is asked for
    // the same (in `_meta`, which 2026-07-28 servers and Fusion read).
    let log = context.extensions().get::<Arc<crate::logging::LogSink>>();
    if let Some(log) = log {
        #[allow(deprecated)] // logging (SEP-2577): served to the clients that ask for it
        meta.set_log_level(log.level.to_wire());
    }
    // Progress goes back only to a caller that asked for it.
    let mut relay = match (&context.request.peer, context.progress_token()) {
        (Some(caller), Some(token)) => Some(Relay::new(caller.clone(), token)),
        _ => None,
    };
    // Each path's future is boxed: inline, they would make every proxied call's future as
    // large as both, and futures are copied whole at each level they are awaited through.
    if let Some(http) = &link.http
        && tool.plain_headers
    {
        let sent = Box::pin(over_http(
            upstream,
            http,
            &link.peer,
            tool,
            &args,
            &meta,
            relay.as_mut(),
            through,
            log.map(Arc::as_ref),
            context,
        ))
        .await?;
        match sent {
            Sent::Done(outcome) => {
                return outcome.map_err(|failure| failed(upstream, failure, through));
            }
            Sent::SessionExpired => {
                tracing::debug!(upstream = %upstream.prefix,
                    "the upstream's session expired; the call goes through rmcp's client");
            }
        }
    }
    // rmcp's client carries the gateway's own token: a call that must run as its caller never
    // goes that way.
    if link.http.as_ref().is_some_and(HttpCalls::exchanges_tokens) {
        return Err(exchange_needs_the_http_path(&upstream.prefix));
    }
    Box::pin(over_rmcp(
        upstream, &link.peer, tool, args, meta, relay, through, context,
    ))
    .await
}

/// The call on the gateway's own HTTP path.
#[allow(clippy::too_many_arguments)]
async fn over_http(
    upstream: &Arc<UpstreamState>,
    http: &HttpCalls,
    peer: &Peer<RoleClient>,
    tool: &ProxiedTool,
    args: &JsonObject,
    meta: &RequestMetaObject,
    mut relay: Option<&mut Relay>,
    through: Option<&Passthrough>,
    log: Option<&crate::logging::LogSink>,
    context: &CallContext,
) -> Result<Sent, ToolError> {
    let id = http.next_id();
    // Its progress token is its id.
    if let Some(relay) = &mut relay {
        relay.route(upstream.routes(), ProgressToken(id.clone()));
    }
    // A call that ends here before its answer (cancelled, timed out, dropped) is cancelled
    // upstream too: over a session with `notifications/cancelled`, on 2026-07-28 by the
    // request's connection closing.
    let mut abandon = Abandon {
        peer: peer.clone(),
        id: Some(id.clone()),
    };
    let exchange = http.call(Call {
        upstream,
        peer,
        id: &id,
        name: &tool.upstream_name,
        arguments: args,
        trace: meta,
        progress: relay.as_ref().map(|relay| relay.queue().clone()),
        through,
        log,
        caller: caller_of(context),
    });
    let exchange = std::pin::pin!(exchange);
    let sent = tokio::select! {
        sent = relayed(relay, exchange) => sent,
        _ = context.cancellation().cancelled() => {
            return Err(ToolError::new(codes::CANCELLED, "The request was cancelled."));
        }
    };
    abandon.id = None;
    Ok(sent)
}

/// The call through rmcp's client.
#[allow(clippy::too_many_arguments)]
async fn over_rmcp(
    upstream: &Arc<UpstreamState>,
    peer: &Peer<RoleClient>,
    tool: &ProxiedTool,
    args: JsonObject,
    mut meta: RequestMetaObject,
    mut relay: Option<Relay>,
    through: Option<&Passthrough>,
    context: &CallContext,
) -> Result<CallToolResult, ToolError> {
    let mut params = CallToolRequestParams::new(tool.upstream_name.clone()).with_arguments(args);
    if let Some(through) = through {
        params.request_state.clone_from(&through.request_state);
        params.input_responses.clone_from(&through.input_responses);
        // The caller's capabilities replace the gateway's in a stateless request's facts
        // (rmcp puts its own first; these extend them).
        if let Some(capabilities) = &through.capabilities
            && peer
                .peer_info()
                .is_some_and(|info| info.protocol_version >= ProtocolVersion::V_2026_07_28)
        {
            meta.set_client_capabilities(capabilities.clone());
        }
    }
    let mut request = CallToolRequest::new(params);
    // The transport routes the request's progress to the relay as it sends it, under the
    // token rmcp picks: none can come before its route.
    if let Some(relay) = &relay {
        request.extensions.insert(relay.sink());
    }
    let options = PeerRequestOptions::no_options().with_meta(meta);
    let handle = peer
        .send_request_with_option(ClientRequest::CallToolRequest(request), options)
        .await
        .map_err(|error| failed(upstream, error.into(), through))?;
    if let Some(relay) = &mut relay {
        relay.route(upstream.routes(), handle.progress_token.clone());
    }
    let mut abandon = Abandon {
        peer: peer.clone(),
        id: Some(handle.id.clone()),
    };
    let waiting = std::pin::pin!(handle.await_response());
    let response = tokio::select! {
        response = relayed(relay.as_mut(), waiting) => response,
        _ = context.cancellation().cancelled() => {
            return Err(ToolError::new(codes::CANCELLED, "The request was cancelled."));
        }
    };
    abandon.id = None;
    match response {
        Ok(ServerResult::CallToolResult(result)) => Ok(result),
        Ok(ServerResult::InputRequiredResult(result)) => Err(failed(
            upstream,
            Failure::InputRequired(Box::new(result)),
            through,
        )),
        Ok(other) => Err(upstream_error(
            &upstream.prefix,
            format!("tools/call answered with something else than a tool result: {other:?}"),
        )),
        Err(error) => Err(failed(upstream, error.into(), through)),
    }
}

/// `exchange`, with the call's progress forwarded around it when the caller asked for it.
async fn relayed<T>(
    relay: Option<&mut Relay>,
    exchange: std::pin::Pin<&mut impl Future<Output = T>>,
) -> T {
    match relay {
        Some(relay) => relay.around(exchange).await,
        None => exchange.await,
    }
}

/// Sends `notifications/cancelled` for a request abandoned before its answer.
struct Abandon {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for Abandon {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let notification = rmcp::model::CancelledNotificationParam::new(
                    Some(id),
                    Some("cancelled by the gateway's caller".into()),
                );
                let _ = peer.notify_cancelled(notification).await;
            });
        }
    }
}

/// The upstream's result, intact: the outcome is read from it for spans, metrics and audit.
/// Only its `resultType` is filled in when absent (a 2025-11-25 upstream's result, passed to a
/// 2026-07-28 caller, must say it is complete; rmcp drops it again for a 2025-11-25 caller).
pub(crate) fn passed(mut result: CallToolResult) -> Sealed {
    result
        .result_type
        .get_or_insert(rmcp::model::ResultType::COMPLETE);
    let outcome = if result.is_error == Some(true) {
        // A Fusion upstream says its code in its envelope.
        let code = result
            .structured_content
            .as_ref()
            .and_then(|content| content.get("error"))
            .and_then(|error| error.get("code"))
            .and_then(Value::as_str)
            .unwrap_or(gateway_codes::UPSTREAM_TOOL_ERROR)
            .to_owned();
        Outcome::Failed {
            code,
            error_id: None,
        }
    } else {
        Outcome::Ok { cut: false }
    };
    Sealed {
        reply: Reply::Passed(result),
        outcome,
        dropped: Vec::new(),
    }
}

/// What a failed exchange with the upstream becomes for the agent: never the upstream's raw
/// text, except a short echo of why it rejected the arguments. For a caller that asks in rounds
/// (`through`), what belongs to its own exchange with the upstream goes back to it untouched
/// (set in `through`, sent by the transport instead of the error returned here): an
/// `input_required` answer, a `-32021` for a capability it did not declare, and the refusal of
/// the state or answers it sent.
pub(super) fn failed(
    upstream: &UpstreamState,
    failure: Failure,
    through: Option<&Passthrough>,
) -> ToolError {
    match failure {
        Failure::InputRequired(result) => match through {
            Some(through) => {
                through.set(Answer::InputRequired(*result));
                ToolError::new(
                    crate::elicit::INPUT_REQUIRED,
                    "The call waits for the client's answer.",
                )
            }
            None => upstream_error(
                &upstream.prefix,
                "tools/call answered input_required to a caller that does not ask in rounds".into(),
            ),
        },
        Failure::Rpc(data)
            if through.is_some_and(|through| {
                data.code == ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
                    || (data.code == ErrorCode::INVALID_PARAMS && through.answers())
            }) =>
        {
            let code = if data.code == ErrorCode::INVALID_PARAMS {
                codes::VALIDATION_ERROR
            } else {
                gateway_codes::UPSTREAM_ERROR
            };
            let message = format!(
                "The upstream server refused the request: {}",
                echo(&data.message, 300)
            );
            if let Some(through) = through {
                // The caller gets the upstream's refusal of its own exchange, as the protocol
                // defines it: -32021 with the capabilities it needs; a -32602 with its message
                // cut short and without `data`, which could be anything at any size.
                let passed = if data.code == ErrorCode::INVALID_PARAMS {
                    ErrorData::new(data.code, echo(&data.message, 300).into_owned(), None)
                } else {
                    data
                };
                through.set(Answer::Error(passed));
            }
            ToolError::new(code, message)
        }
        // The upstream needs a question the caller did not declare it can answer: the caller's
        // own lack, said as a built-in tool says it, not an upstream fault to report.
        Failure::Rpc(data)
            if data.code == ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
                && let Some(error) = crate::elicit::unsupported_by_caller(data.data.as_ref()) =>
        {
            error
        }
        Failure::Rpc(data) if data.code == ErrorCode::INVALID_PARAMS => {
            let unknown =
                data.message.contains("nknown tool") || data.message.contains("not found");
            if unknown {
                upstream.request_refresh();
                return unknown_tool(&upstream.prefix);
            }
            ToolError::new(
                codes::VALIDATION_ERROR,
                "The upstream server rejected the arguments.",
            )
            .with_recovery("Check the arguments against the tool's input schema, then call again.")
            .with_details(json!({ "upstream": echo(&data.message, 300) }))
        }
        Failure::Rpc(data) if data.code == ErrorCode::METHOD_NOT_FOUND => {
            upstream.request_refresh();
            unknown_tool(&upstream.prefix)
        }
        Failure::Rpc(data) => upstream_error(
            &upstream.prefix,
            format!("JSON-RPC error {}: {}", data.code.0, data.message),
        ),
        Failure::Timeout(timeout) => timed_out(&upstream.prefix, timeout),
        Failure::Unexpected(cause) => upstream_error(&upstream.prefix, cause),
        Failure::Unreachable(cause) => {
            upstream.connection_failed();
            unavailable(&upstream.prefix, cause)
        }
        Failure::Exchange(refusal) => not_exchanged(&upstream.prefix, refusal),
    }
}

/// The caller of a call over HTTP, for token exchange: its principal (the cache key) and the
/// bearer token the server verified for this request (borrowed, never kept).
fn caller_of(context: &CallContext) -> Option<Caller<'_>> {
    let principal = context.principal()?;
    let token = context
        .extensions()
        .get::<http::request::Parts>()?
        .headers
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()
        .and_then(crate::principal::bearer_token)?;
    Some(Caller {
        subject: &principal.subject,
        tenant: principal.tenant.as_deref(),
        token,
    })
}

/// No token for the caller at the upstream: the caller is told whether its credential is the
/// reason (refused, or none to exchange) or the authorization server is (retryable); the
/// server's answer stays in the log.
fn not_exchanged(prefix: &str, refusal: Refusal) -> ToolError {
    let cause = Box::new(Cause(format!(
        "upstream `{prefix}`: token exchange: {refusal}"
    )));
    match refusal {
        Refusal::Unavailable(_) => ToolError::new(
            gateway_codes::UPSTREAM_UNAVAILABLE,
            format!("The tools under `{prefix}` are unavailable right now: the authorization server could not be reached."),
        )
        .with_recovery("Retry in a moment.")
        .with_retryable(true)
        .with_retry_after(Duration::from_secs(1))
        .with_internal_source(cause),
        Refusal::Refused { .. } | Refusal::NoCallerToken => ToolError::new(
            codes::FORBIDDEN,
            format!("Your credential cannot be used for the tools under `{prefix}`: the authorization server did not exchange it for a token of that server."),
        )
        .with_recovery("Sign in again with an access token of the authorization server, then call again; if it persists, ask the operator whether you may use these tools.")
        .with_internal_source(cause),
    }
}

/// A call of an upstream that exchanges tokens, which could only go through rmcp's client
/// (with the gateway's own token): refused rather than run as the gateway.
fn exchange_needs_the_http_path(prefix: &str) -> ToolError {
    upstream_error(
        prefix,
        "token exchange: the call could not go on the gateway's own HTTP path".into(),
    )
}

pub(super) fn unavailable(prefix: &str, cause: String) -> ToolError {
    ToolError::new(
        gateway_codes::UPSTREAM_UNAVAILABLE,
        format!("The tools under `{prefix}` are unavailable right now."),
    )
    .with_recovery("Retry in a moment: the server behind them is being reconnected.")
    .with_retryable(true)
    .with_retry_after(Duration::from_secs(1))
    .with_internal_source(Box::new(Cause(format!("upstream `{prefix}`: {cause}"))))
}

pub(super) fn upstream_error(prefix: &str, cause: String) -> ToolError {
    ToolError::new(
        gateway_codes::UPSTREAM_ERROR,
        format!("The server behind `{prefix}` failed to answer this call."),
    )
    .with_recovery("Do not retry blindly: report the errorId to the operator, or try another tool.")
    .with_internal_source(Box::new(Cause(format!("upstream `{prefix}`: {cause}"))))
}

fn unknown_tool(prefix: &str) -> ToolError {
    ToolError::new(
        gateway_codes::UNKNOWN_TOOL,
        format!("The server behind `{prefix}` no longer has this tool."),
    )
    .with_recovery("List the tools again, then call one that is listed.")
}

/// Retryable with an errorId: the cause (which upstream, how long) goes to the log.
pub(crate) fn timed_out(prefix: &str, timeout: Duration) -> ToolError {
    ToolError::new(
        codes::TIMEOUT,
        format!(
            "The call took longer than its {} ms limit and was stopped.",
            timeout.as_millis()
        ),
    )
    .with_recovery("Retry later, or ask for less (a narrower filter, a smaller limit).")
    .with_retryable(true)
    .with_internal_source(Box::new(Cause(format!(
        "upstream `{prefix}` did not answer within {timeout:?}"
    ))))
}

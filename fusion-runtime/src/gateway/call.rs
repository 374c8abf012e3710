//! The upstream's side of a proxied call: forwarding it (trace context, progress,
//! cancellation) and reading the answer, or the failure, back. The stages that belong to the
//! server (access, middleware, audit, …) run around it, in the pipeline.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ErrorCode, JsonObject,
    RequestId, RequestMetaObject, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::{Peer, RoleClient};
use serde_json::{Value, json};

use super::upstream::UpstreamState;
use super::{ProxiedTool, codes as gateway_codes};
use crate::context::CallContext;
use crate::envelope::{Outcome, Sealed};
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
/// end of the connection.
pub(crate) async fn send(
    upstream: &Arc<UpstreamState>,
    tool: &ProxiedTool,
    args: JsonObject,
    context: &CallContext,
) -> Result<CallToolResult, ToolError> {
    let peer = upstream
        .peer()
        .ok_or_else(|| unavailable(&upstream.prefix, "the upstream is not connected".into()))?;
    // The caller's trace context goes on: the upstream's spans join the same trace.
    let mut meta = RequestMetaObject::default();
    if let Some(traceparent) = context.meta().get_traceparent() {
        meta.set_traceparent(traceparent);
    }
    if let Some(tracestate) = context.meta().get_tracestate() {
        meta.set_tracestate(tracestate);
    }
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new(tool.upstream_name.clone()).with_arguments(args),
    ));
    let options = PeerRequestOptions::no_options().with_meta(meta);
    // Progress goes back only to a caller that asked for it. rmcp picks the upstream request's
    // progress token when it sends it, and the upstream may report progress before the send
    // returns: its notifications wait for the route (see `UpstreamState::route_of`), which is
    // in place before the gate opens again.
    let (handle, _route) = match (&context.request.peer, context.progress_token()) {
        (Some(caller), Some(token)) => {
            let _gate = upstream.routing().lock().await;
            let handle = peer
                .send_request_with_option(request, options)
                .await
                .map_err(|error| failed(upstream, error))?;
            let route =
                upstream.route_progress(handle.progress_token.clone(), caller.clone(), token);
            (handle, Some(route))
        }
        _ => {
            let handle = peer
                .send_request_with_option(request, options)
                .await
                .map_err(|error| failed(upstream, error))?;
            (handle, None)
        }
    };
    // A call that ends here before its answer (cancelled, timed out, dropped) is cancelled
    // upstream too.
    let mut abandon = Abandon {
        peer: peer.clone(),
        id: Some(handle.id.clone()),
    };
    let response = tokio::select! {
        response = handle.await_response() => response,
        _ = context.cancellation().cancelled() => {
            return Err(ToolError::new(codes::CANCELLED, "The request was cancelled."));
        }
    };
    abandon.id = None;
    match response {
        Ok(ServerResult::CallToolResult(result)) => Ok(result),
        Ok(other) => Err(upstream_error(
            &upstream.prefix,
            format!("tools/call answered with something else than a tool result: {other:?}"),
        )),
        Err(error) => Err(failed(upstream, error)),
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
        result,
        outcome,
        dropped: Vec::new(),
    }
}

/// What a failed exchange with the upstream becomes for the agent: never the upstream's raw
/// text, except a short echo of why it rejected the arguments.
fn failed(upstream: &UpstreamState, error: ServiceError) -> ToolError {
    match error {
        ServiceError::McpError(data) if data.code == ErrorCode::INVALID_PARAMS => {
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
        ServiceError::McpError(data) if data.code == ErrorCode::METHOD_NOT_FOUND => {
            upstream.request_refresh();
            unknown_tool(&upstream.prefix)
        }
        ServiceError::McpError(data) => upstream_error(
            &upstream.prefix,
            format!("JSON-RPC error {}: {}", data.code.0, data.message),
        ),
        ServiceError::Timeout { timeout } => timed_out(&upstream.prefix, timeout),
        ServiceError::UnexpectedResponse => upstream_error(
            &upstream.prefix,
            "tools/call answered with something else than a tool result".into(),
        ),
        other => {
            upstream.connection_failed();
            unavailable(&upstream.prefix, other.to_string())
        }
    }
}

fn unavailable(prefix: &str, cause: String) -> ToolError {
    ToolError::new(
        gateway_codes::UPSTREAM_UNAVAILABLE,
        format!("The tools under `{prefix}` are unavailable right now."),
    )
    .with_recovery("Retry in a moment: the server behind them is being reconnected.")
    .with_retryable(true)
    .with_retry_after(Duration::from_secs(1))
    .with_internal_source(Box::new(Cause(format!("upstream `{prefix}`: {cause}"))))
}

fn upstream_error(prefix: &str, cause: String) -> ToolError {
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

//! The request path of a proxied call: the stages of a built-in call that belong to this
//! server (access, rate limit, middleware, guard, timeout, report), around a forward to the
//! upstream instead of arguments, handler and presenter.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ErrorCode, JsonObject,
    RequestId, RequestMetaObject, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::{Peer, RoleClient};
use serde_json::{Value, json};
use tracing::Instrument as _;

use super::upstream::UpstreamState;
use super::{Gateway, ProxiedTool, codes as gateway_codes};
use crate::audit::{self, AuditEntry, AuditError, AuditRecord, AuditSink};
use crate::context::CallContext;
use crate::envelope::{Outcome, Sealed, seal_error};
use crate::error::{ToolError, codes, echo, panic_text};
use crate::guard::RateLimit;
use crate::observe::{self, CallReport};
use crate::server::{Server, ServerInner};

/// Why a proxied call failed, for the log only.
#[derive(Debug)]
struct Cause(String);

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Cause {}

impl Server {
    /// The server's rate limit for the caller of `context` (proxied tools have no own limit).
    fn check_server_rate(&self, context: &CallContext) -> Result<(), ToolError> {
        let Some(limiter) = &self.inner.rate_limiter else {
            return Ok(());
        };
        let caller = context
            .principal()
            .map_or("", |principal| principal.subject.as_str());
        limiter.admit(caller).map_err(|wait| {
            let RateLimit { max, per } = limiter.limit();
            ToolError::new(
                codes::RATE_LIMITED,
                format!("Too many calls: at most {max} per {} ms.", per.as_millis()),
            )
            .with_recovery("Wait for the retry window, then call again with the same arguments.")
            .with_retry_after(wait)
        })
    }

    /// Runs the proxied tool `name`, if there is one now.
    pub(crate) async fn call_proxied(
        &self,
        gateway: &Gateway,
        name: &str,
        arguments: Option<JsonObject>,
        context: CallContext,
    ) -> Option<Sealed> {
        let catalog = gateway.catalog();
        let tool = Arc::clone(catalog.get(name)?);
        drop(catalog);
        let inner = &*self.inner;
        let args = arguments.unwrap_or_default();
        let span = observe::call_span(
            inner.span_level,
            tool.name(),
            Some(tool.facts.key.as_str()),
            &context,
        );
        // Every proxied call is a write for the audit trail: the gateway cannot know what the
        // upstream changed.
        let measured = (!span.is_disabled() || inner.metrics.is_some() || inner.audit.is_some())
            .then(|| {
                let principal = context.principal();
                let entry = inner.audit.as_ref().map(|_| {
                    AuditEntry::new(
                        tool.name(),
                        tool.facts.key.as_str(),
                        principal.map(|principal| principal.subject.clone()),
                        principal.and_then(|principal| principal.tenant.clone()),
                        audit::arguments_digest_of(&args),
                    )
                });
                (Instant::now(), entry)
            });
        let run = self.forward(gateway, &tool, args, context);
        let outcome = if span.is_disabled() {
            run.await
        } else {
            run.instrument(span.clone()).await
        };
        let mut sealed = match outcome {
            Ok(result) => passed(result),
            Err(error) => seal_error(&inner.names, &tool.sealed, error),
        };
        if let Some((started, Some(entry))) = &measured {
            sealed = audited(inner, &tool, sealed, entry, *started).await;
        }
        if let Some((started, _)) = measured {
            finish(inner, &tool, &span, &sealed, started.elapsed());
        }
        Some(sealed)
    }

    /// Access, rate limit, middleware, guard and timeout around the forward.
    async fn forward(
        &self,
        gateway: &Gateway,
        tool: &ProxiedTool,
        args: JsonObject,
        mut context: CallContext,
    ) -> Result<CallToolResult, ToolError> {
        // Before anything reaches the upstream.
        self.check_access(tool.info(), &context)?;
        self.check_server_rate(&context)?;
        let upstream = gateway.upstream(tool.upstream);
        let rest = async move {
            for middleware in gateway.middleware() {
                std::panic::AssertUnwindSafe(middleware.before(&mut context, tool.info()))
                    .catch_unwind()
                    .await
                    .map_err(|panic| {
                        ToolError::internal_message(format!(
                            "a middleware panicked: {}",
                            panic_text(&*panic)
                        ))
                    })??;
            }
            let _slot = match &upstream.concurrency {
                Some(guard) => Some(guard.enter().await?),
                None => None,
            };
            send(upstream, tool, args, &context).await
        };
        let timeout = upstream.config.timeout;
        tokio::time::timeout(timeout, rest)
            .await
            .unwrap_or_else(|_| Err(timed_out(&upstream.prefix, timeout)))
    }
}

/// Forwards the call and waits for the upstream's answer, the caller's cancellation or the
/// end of the connection.
async fn send(
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
    let handle = peer
        .send_request_with_option(request, PeerRequestOptions::no_options().with_meta(meta))
        .await
        .map_err(|error| failed(upstream, error))?;
    // Progress goes back only to a caller that asked for it.
    let _route = match (&context.request.peer, context.progress_token()) {
        (Some(caller), Some(token)) => {
            Some(upstream.route_progress(handle.progress_token.clone(), caller.clone(), token))
        }
        _ => None,
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
fn passed(mut result: CallToolResult) -> Sealed {
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
fn timed_out(prefix: &str, timeout: Duration) -> ToolError {
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

/// Audits a successful proxied call. A lost required record turns it into `AUDIT_FAILED`.
async fn audited(
    inner: &ServerInner,
    tool: &ProxiedTool,
    sealed: Sealed,
    entry: &AuditEntry,
    started: Instant,
) -> Sealed {
    let (Some(audit), Outcome::Ok { .. }) = (&inner.audit, &sealed.outcome) else {
        return sealed;
    };
    let mut record = entry.record();
    record.outcome = "ok";
    record.duration = started.elapsed();
    let recorded = if audit.sink.is_blocking() {
        let (sink, kept) = (Arc::clone(&audit.sink), record.clone());
        crate::blocking(move || record_with(&*sink, &kept))
            .await
            .unwrap_or_else(|error| Err(AuditError::new(error.to_string())))
    } else {
        record_with(&*audit.sink, &record)
    };
    let Err(error) = recorded else {
        return sealed;
    };
    audit::log_lost(&record, &error);
    if let Some(metrics) = &inner.metrics {
        metrics.audit_failed(tool.facts.key.as_str());
    }
    if !audit.required {
        return sealed;
    }
    let error = ToolError::new(
        codes::AUDIT_FAILED,
        "The change was made, but its audit record could not be written.",
    )
    .with_recovery(
        "Do not retry: the change stands. Fetch the data again to see its state, and report \
         the errorId to the operator.",
    )
    .with_internal_source(Box::new(error));
    seal_error(&inner.names, &tool.sealed, error)
}

fn record_with(sink: &dyn AuditSink, record: &AuditRecord) -> Result<(), AuditError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink.record(record))).unwrap_or_else(
        |panic| {
            Err(AuditError::new(format!(
                "the audit sink panicked: {}",
                panic_text(&*panic)
            )))
        },
    )
}

/// The span's fields and the metrics of a finished proxied call.
fn finish(
    inner: &ServerInner,
    tool: &ProxiedTool,
    span: &tracing::Span,
    sealed: &Sealed,
    latency: Duration,
) {
    let outcome = &sealed.outcome;
    if !span.is_disabled() {
        span.record("outcome", outcome.label());
        span.record(
            "latency_us",
            u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
        );
        if let Some(error_id) = outcome.error_id() {
            span.record("error_id", error_id);
        }
    }
    if let Some(metrics) = &inner.metrics {
        let report = CallReport {
            tool: tool.name(),
            action: Some(tool.facts.key.as_str()),
            outcome: outcome.label(),
            is_error: matches!(outcome, Outcome::Failed { .. }),
            latency,
        };
        let counted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            metrics.call_finished(&report)
        }));
        if let Err(panic) = counted {
            tracing::error!(
                tool = tool.name(),
                panic = panic_text(&*panic),
                "the metrics hook panicked: this call is not counted"
            );
        }
    }
}

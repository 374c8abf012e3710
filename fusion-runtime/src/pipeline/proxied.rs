//! The request path of a proxied call (SPEC R7): the stages of a built-in call that belong to
//! this server (access, rate limit, middleware, guard, timeout, audit, metrics, span), around a
//! forward to the upstream instead of arguments, handler and presenter.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use rmcp::model::{CallToolResult, JsonObject};
use tracing::Instrument as _;

use crate::audit::{self, AuditEntry, AuditError, AuditRecord, AuditSink};
use crate::context::CallContext;
use crate::envelope::{Outcome, Sealed, seal_error};
use crate::error::{ToolError, codes, panic_text};
use crate::gateway::call::{passed, send, timed_out};
use crate::gateway::{Gateway, ProxiedTool};
use crate::guard::RateLimit;
use crate::observe::{self, CallReport};
use crate::server::{Server, ServerInner};

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
        // Boxed: held inline by the timeout, it would be copied into it whole.
        let rest = Box::pin(async move {
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
        });
        let timeout = upstream.config.timeout;
        tokio::time::timeout(timeout, rest)
            .await
            .unwrap_or_else(|_| Err(timed_out(&upstream.prefix, timeout)))
    }
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
    let is_error = matches!(outcome, Outcome::Failed { .. });
    observe::record_end(span, outcome.label(), is_error, outcome.error_id(), latency);
    if let Some(metrics) = &inner.metrics {
        let report = CallReport {
            method: observe::TOOLS_CALL,
            tool: tool.name(),
            action: Some(tool.facts.key.as_str()),
            outcome: outcome.label(),
            is_error,
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

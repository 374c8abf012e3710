//! The last stage of a call (SPEC R6, R8): its span, its metrics and, for a successful write,
//! its audit record. Nothing is measured when nobody listens.

use std::time::{Instant, SystemTime};

use rmcp::model::JsonObject;

use super::running::panic_text;
use crate::action::Verb;
use crate::audit::{self, AuditRecord};
use crate::context::CallContext;
use crate::envelope::{Outcome, Sealed};
use crate::observe::{self, CallReport};
use crate::server::{CompiledAction, ServerInner};

/// What a call measures when anyone listens: nothing at all when no span, metrics or audit sink
/// is enabled (no clock read, no digest computed).
pub(crate) struct Report {
    pub(crate) span: tracing::Span,
    measured: Option<Measured>,
}

struct Measured {
    started: Instant,
    audit: Option<AuditFacts>,
}

struct AuditFacts {
    principal: Option<String>,
    tenant: Option<String>,
    digest: String,
}

impl Report {
    /// Starts the report of a call of `action` (`None` before an action is chosen).
    pub(crate) fn start(
        inner: &ServerInner,
        tool: &str,
        action: Option<&CompiledAction>,
        context: &CallContext,
        args: Option<&JsonObject>,
    ) -> Report {
        let span = observe::call_span(
            inner.span_level,
            tool,
            action.map(|action| action.facts.key.as_str()),
            context,
        );
        // Read-only calls are never audited.
        let audited =
            inner.audit.is_some() && action.is_some_and(|action| action.facts.verb != Verb::Query);
        if span.is_disabled() && inner.metrics.is_none() && !audited {
            return Report {
                span,
                measured: None,
            };
        }
        let audit = args.filter(|_| audited).map(|args| {
            let principal = context.principal();
            AuditFacts {
                principal: principal.map(|principal| principal.subject.clone()),
                tenant: principal.and_then(|principal| principal.tenant.clone()),
                digest: audit::arguments_digest_of(args),
            }
        });
        Report {
            span,
            measured: Some(Measured {
                started: Instant::now(),
                audit,
            }),
        }
    }

    /// Records how the call ended, and audits a successful write.
    pub(crate) fn finish(
        self,
        inner: &ServerInner,
        tool: &str,
        action: Option<&CompiledAction>,
        sealed: &Sealed,
    ) {
        let Some(measured) = self.measured else {
            return;
        };
        let latency = measured.started.elapsed();
        let span = &self.span;
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
                tool,
                action: action.map(|action| action.facts.key.as_str()),
                outcome: outcome.label(),
                is_error: matches!(outcome, Outcome::Failed { .. }),
                latency,
            };
            // The call is done: a panicking hook loses its count, not the agent's result.
            let counted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                metrics.call_finished(&report)
            }));
            if let Err(panic) = counted {
                tracing::error!(
                    tool,
                    panic = panic_text(&*panic),
                    "the metrics hook panicked: this call is not counted"
                );
            }
        }
        // Only successful calls are audited.
        let (Some(sink), Some(audit), Some(action), Outcome::Ok { cut }) =
            (&inner.audit, measured.audit, action, outcome)
        else {
            return;
        };
        let record = AuditRecord {
            at: SystemTime::now(),
            tool: tool.to_owned(),
            action: action.facts.key.as_str().to_owned(),
            principal: audit.principal,
            tenant: audit.tenant,
            arguments_digest: audit.digest,
            outcome: if *cut { "ok_truncated" } else { "ok" },
            duration: latency,
        };
        // A panicking sink is a failing sink: the write happened, the agent gets its result.
        let recorded =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink.record(&record)))
                .unwrap_or_else(|panic| {
                    Err(audit::AuditError::new(format!(
                        "the audit sink panicked: {}",
                        panic_text(&*panic)
                    )))
                });
        if let Err(error) = recorded {
            audit::log_lost(&record, &error);
            if let Some(metrics) = &inner.metrics {
                metrics.audit_failed(action.facts.key.as_str());
            }
        }
    }
}

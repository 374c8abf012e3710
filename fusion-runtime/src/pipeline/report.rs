//! The last stage of a call (SPEC R6, R8): for a successful write, its audit record; then its
//! span and its metrics, with the outcome the agent is told. Nothing is measured when nobody
//! listens.

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::JsonObject;

#[cfg(doc)]
use super::target::Ending;
use crate::action::{ActionFacts, Verb};
use crate::audit::{self, AuditEntry, AuditError, AuditRecord, AuditSink};
use crate::context::CallContext;
use crate::envelope::Outcome;
use crate::error::{ToolError, codes, panic_text};
use crate::observe::{self, CallReport};
use crate::server::{CompiledAction, ServerInner};

/// What a call measures when anyone listens: nothing at all when no span, metrics, audit sink
/// or audit entry is wanted (no clock read, no digest computed).
pub(crate) struct Report {
    pub(crate) span: tracing::Span,
    measured: Option<Measured>,
}

struct Measured {
    started: Instant,
    /// The call's audit entry: for the sink, for the handler, or both.
    audit: Option<AuditEntry>,
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
        // Read-only calls are never audited by the sink; a handler that asks for its entry
        // gets one whatever its verb.
        let audited = action.is_some_and(|action| {
            action.audit_entry
                || inner
                    .audit
                    .as_ref()
                    .is_some_and(|audit| audit.reads || action.facts.verb != Verb::Query)
        });
        let report = Report::open(inner, span, audited, || {
            let (args, action) = args.zip(action)?;
            // Keyed when the arguments carry a hidden value: the trail is no oracle for it.
            let digest = if action.layout.carries_hidden(args) {
                audit::keyed_arguments_digest_of(args, &inner.audit_digest_key)
            } else {
                audit::arguments_digest_of(args)
            };
            Some(entry(tool, action.facts.key.as_str(), context, digest))
        });
        #[cfg(feature = "bench-hooks")]
        if report.measured.is_some() {
            inner
                .measured_calls
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        report
    }

    /// A report whose call is measured when anything reads the measure (its span, the
    /// metrics, or the audit, when `audited`), with the audit entry `entry` makes.
    fn open(
        inner: &ServerInner,
        span: tracing::Span,
        audited: bool,
        entry: impl FnOnce() -> Option<AuditEntry>,
    ) -> Report {
        if span.is_disabled() && inner.metrics.is_none() && !audited {
            return Report {
                span,
                measured: None,
            };
        }
        let audit = if audited { entry() } else { None };
        Report {
            span,
            measured: Some(Measured {
                // The entry's clock, when there is one: one reading, one duration.
                started: audit
                    .as_ref()
                    .map_or_else(Instant::now, AuditEntry::started),
                audit,
            }),
        }
    }

    /// Starts the report of a call forwarded to another server (a proxied tool, SPEC R7): its
    /// span and metrics as a built-in call's, and its audit entry whenever there is an audit
    /// sink, since what the other server changed cannot be known.
    #[cfg(feature = "gateway")]
    pub(crate) fn start_forwarded(
        inner: &ServerInner,
        tool: &str,
        facts: &ActionFacts,
        context: &CallContext,
        args: &JsonObject,
    ) -> Report {
        let key = facts.key.as_str();
        let span = observe::call_span(inner.span_level, tool, Some(key), context);
        Report::open(inner, span, inner.audit.is_some(), || {
            Some(entry(tool, key, context, audit::arguments_digest_of(args)))
        })
    }

    /// The call's audit entry, for a handler that takes it.
    pub(crate) fn entry(&self) -> Option<&AuditEntry> {
        self.measured.as_ref()?.audit.as_ref()
    }

    /// The audit record of a call of `key` that succeeded (`cut`: the egress budget dropped
    /// part of its result), when `records` and its handler did not record it, written once.
    /// Returns the error of a required record that could not be written: the call then fails
    /// ([`Ending::unaudited`]). A sink that blocks runs on the blocking pool, never on an async
    /// worker.
    pub(crate) async fn audit(
        &self,
        inner: &ServerInner,
        key: &str,
        records: bool,
        cut: bool,
    ) -> Option<AuditError> {
        let Some(Measured {
            started,
            audit: Some(entry),
        }) = &self.measured
        else {
            return None;
        };
        let audit = inner.audit.as_ref()?;
        if !records || entry.is_recorded() {
            return None;
        }
        let mut record = entry.record();
        record.outcome = if cut { "ok_truncated" } else { "ok" };
        record.duration = started.elapsed();
        let error = write(inner, audit, record, key).await.err()?;
        audit.required.then_some(error)
    }

    /// Starts the report of a resource read or a prompt (`method`, the record's `tool`): its
    /// span and metrics as a call's, and its audit entry when the audit records reads.
    pub(crate) fn start_read(
        inner: &ServerInner,
        method: &'static str,
        facts: &ActionFacts,
        context: &CallContext,
        args: &JsonObject,
    ) -> Report {
        let key = facts.key.as_str();
        let span = observe::read_span(inner.span_level, method, key, context);
        let audited = inner.audit.as_ref().is_some_and(|audit| audit.reads);
        Report::open(inner, span, audited, || {
            Some(entry(
                method,
                key,
                context,
                audit::arguments_digest_of(args),
            ))
        })
    }

    /// Records how the call ended.
    pub(crate) fn finish(
        self,
        inner: &ServerInner,
        tool: &str,
        action: Option<&str>,
        outcome: &Outcome,
    ) {
        let Some(measured) = self.measured else {
            return;
        };
        let latency = measured.started.elapsed();
        let is_error = matches!(outcome, Outcome::Failed { .. });
        observe::record_end(
            &self.span,
            outcome.label(),
            is_error,
            outcome.error_id(),
            latency,
        );
        if let Some(metrics) = &inner.metrics {
            let report = CallReport {
                // Reads finish under their method's name (no tool name has a `/`).
                method: match tool {
                    observe::RESOURCES_READ | observe::PROMPTS_GET => tool,
                    _ => observe::TOOLS_CALL,
                },
                tool,
                action,
                outcome: outcome.label(),
                is_error,
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
    }
}

/// Hands `record` to the audit sink (on the blocking pool for a sink that blocks); a lost
/// record is logged in full and counted.
pub(crate) async fn write(
    inner: &ServerInner,
    audit: &crate::server::Audit,
    record: AuditRecord,
    key: &str,
) -> Result<(), AuditError> {
    let recorded = if audit.sink.is_blocking() {
        let (sink, kept) = (Arc::clone(&audit.sink), record.clone());
        crate::blocking(move || record_with(&*sink, &kept))
            .await
            .unwrap_or_else(|error| Err(AuditError::new(error.to_string())))
    } else {
        record_with(&*audit.sink, &record)
    };
    if let Err(error) = &recorded {
        audit::log_lost(&record, error);
        if let Some(metrics) = &inner.metrics {
            metrics.audit_failed(key);
        }
    }
    recorded
}

/// Hands `record` to `sink`; a panicking sink is a failing sink.
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

/// What the agent is told when the record its change requires was lost: the change stands, so
/// retrying would repeat it.
#[cold]
pub(super) fn audit_failed(error: AuditError) -> ToolError {
    ToolError::new(
        codes::AUDIT_FAILED,
        "The change was made, but its audit record could not be written.",
    )
    .with_recovery(
        "Do not retry: the change stands. Fetch the data again to see its state, and report \
         the errorId to the operator.",
    )
    .with_internal_source(Box::new(error))
}

/// What the agent is told when the record a read requires was lost: nothing changed, so it may
/// be retried.
#[cold]
pub(super) fn read_unaudited(error: AuditError) -> ToolError {
    ToolError::new(
        codes::AUDIT_FAILED,
        "The read could not be audited, so its result is withheld.",
    )
    .with_recovery("Nothing was changed: retry later, or report the errorId to the operator.")
    .with_retryable(true)
    .with_internal_source(Box::new(error))
}

/// The audit entry of a call of `tool` (`key`), by the caller its context names.
fn entry(tool: &str, key: &str, context: &CallContext, digest: String) -> AuditEntry {
    let principal = context.principal();
    AuditEntry::new(
        tool,
        key,
        principal.map(|principal| principal.subject.clone()),
        principal.and_then(|principal| principal.tenant.clone()),
        digest,
    )
}

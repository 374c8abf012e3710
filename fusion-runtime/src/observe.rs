//! Observability (SPEC R8): a `tracing` span per call, W3C trace context from the request's
//! `_meta`, and metrics hooks that cost nothing when unset.
//!
//! Every call runs in a span named after its MCP method, as the OpenTelemetry semantic
//! conventions for MCP have it: `tools/call`, `resources/read` or `prompts/get` (target
//! `fusion::call`, level `DEBUG` unless
//! [`ServerBuilder::call_span_level`](crate::ServerBuilder::call_span_level) says otherwise, as
//! tower-http does for requests). Its `otel.name` is the conventions' span name,
//! `{mcp.method.name} {target}` (`tools/call billing_get_invoice`, `prompts/get summary`;
//! a resource's URI is never in it), and `otel.kind` is `server`. Its fields:
//!
//! - the conventions': `mcp.method.name`; `gen_ai.tool.name` and
//!   `gen_ai.operation.name = execute_tool` (tool calls); `gen_ai.prompt.name` (prompts);
//!   `mcp.resource.uri` (resource reads); `mcp.session.id` (a 2025-11-25 session over HTTP),
//!   `mcp.protocol.version` and `jsonrpc.request.id` where the transport knows them;
//!   `error.type` (the error code, such as `NOT_FOUND`) with `otel.status_code = ERROR` on
//!   failures;
//! - Fusion's: `action` (the canonical key; absent when a grouped tool was called without a
//!   valid action), `tenant` (the verified caller's), `outcome` (`ok` or the error code),
//!   `latency_us`, `error_id`, and — when the request's `_meta` carries a W3C `traceparent` —
//!   `trace_id` and `parent_span_id`. With the `opentelemetry` feature, that remote span also
//!   becomes the span's OpenTelemetry parent.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::context::{CallContext, FromContext};
use crate::error::ToolError;

/// What a finished call reports to [`Metrics`].
#[derive(Debug, Clone, Copy)]
pub struct CallReport<'a> {
    /// The MCP method: [`TOOLS_CALL`], [`RESOURCES_READ`] or [`PROMPTS_GET`].
    pub method: &'a str,
    /// The exposed tool name; the method again for a resource read or a prompt.
    pub tool: &'a str,
    /// The canonical key; `None` when the call named no action of a grouped tool
    /// (`UNKNOWN_ACTION`, `MISSING_DISCRIMINATOR`).
    pub action: Option<&'a str>,
    /// `ok`, or the error code.
    pub outcome: &'a str,
    /// Whether the call failed (`isError`).
    pub is_error: bool,
    /// How long it took.
    pub latency: Duration,
}

/// Metrics hooks. Set with [`ServerBuilder::metrics`](crate::ServerBuilder::metrics); when
/// none is set, no clock is read and nothing is counted.
pub trait Metrics: Send + Sync + 'static {
    /// A call finished (successfully or not).
    fn call_finished(&self, report: &CallReport<'_>);

    /// An audit sink failed to record a call (the record went to the log instead).
    fn audit_failed(&self, action: &str) {
        let _ = action;
    }
}

/// Upper bounds of the latency buckets of [`CallStats`], in microseconds.
pub const LATENCY_BUCKETS_US: [u64; 12] = [
    50,
    100,
    250,
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    100_000,
    1_000_000,
    u64::MAX,
];

/// A simple in-process [`Metrics`]: call and error counts and a latency histogram, per server.
/// Export them to your metrics system from [`CallStats::snapshot`].
#[derive(Debug, Default)]
pub struct CallStats {
    calls: AtomicU64,
    errors: AtomicU64,
    // Successes are counted without a lock; error codes, rarer, under one.
    ok: AtomicU64,
    audit_failures: AtomicU64,
    buckets: [AtomicU64; LATENCY_BUCKETS_US.len()],
    by_outcome: Mutex<Vec<(String, u64)>>,
}

/// A copy of [`CallStats`] at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Calls finished.
    pub calls: u64,
    /// Calls that failed.
    pub errors: u64,
    /// Audit records that a sink could not keep.
    pub audit_failures: u64,
    /// Calls per latency bucket (see [`LATENCY_BUCKETS_US`]).
    pub latency_buckets: Vec<u64>,
    /// Calls per outcome (`ok` or error code).
    pub by_outcome: Vec<(String, u64)>,
}

impl CallStats {
    /// Empty stats.
    pub fn new() -> Self {
        CallStats::default()
    }

    /// The current counts.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            calls: self.calls.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            audit_failures: self.audit_failures.load(Ordering::Relaxed),
            latency_buckets: self
                .buckets
                .iter()
                .map(|bucket| bucket.load(Ordering::Relaxed))
                .collect(),
            by_outcome: {
                let mut outcomes = vec![("ok".to_owned(), self.ok.load(Ordering::Relaxed))];
                if let Ok(errors) = self.by_outcome.lock() {
                    outcomes.extend(errors.iter().cloned());
                }
                outcomes
            },
        }
    }
}

impl Metrics for CallStats {
    fn call_finished(&self, report: &CallReport<'_>) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if report.is_error {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        let micros = u64::try_from(report.latency.as_micros()).unwrap_or(u64::MAX);
        let bucket = LATENCY_BUCKETS_US
            .iter()
            .position(|bound| micros <= *bound)
            .unwrap_or(LATENCY_BUCKETS_US.len() - 1);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        if !report.is_error {
            self.ok.fetch_add(1, Ordering::Relaxed);
        } else if let Ok(mut outcomes) = self.by_outcome.lock() {
            match outcomes
                .iter_mut()
                .find(|(outcome, _)| outcome == report.outcome)
            {
                Some((_, count)) => *count += 1,
                None => outcomes.push((report.outcome.to_owned(), 1)),
            }
        }
    }

    fn audit_failed(&self, _action: &str) {
        self.audit_failures.fetch_add(1, Ordering::Relaxed);
    }
}

/// A W3C trace context (`traceparent`), parsed from a request's `_meta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceContext {
    /// The trace id: 16 bytes.
    pub trace_id: [u8; 16],
    /// The caller's span id: 8 bytes.
    pub parent_span_id: [u8; 8],
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
}

impl TraceContext {
    /// Parses a `traceparent` header value: `00-<trace id>-<parent id>-<flags>`. Returns `None`
    /// for anything invalid, including the all-zero ids the specification forbids.
    pub fn parse(traceparent: &str) -> Option<TraceContext> {
        let mut parts = traceparent.trim().split('-');
        let version = parts.next()?;
        let trace = parts.next()?;
        let parent = parts.next()?;
        let flags = parts.next()?;
        // Version 00 has exactly four parts; later versions may append more.
        if version.len() != 2 || version == "ff" || (version == "00" && parts.next().is_some()) {
            return None;
        }
        let trace_id: [u8; 16] = hex(trace)?;
        let parent_span_id: [u8; 8] = hex(parent)?;
        let [flags]: [u8; 1] = hex(flags)?;
        if trace_id == [0; 16] || parent_span_id == [0; 8] {
            return None;
        }
        Some(TraceContext {
            trace_id,
            parent_span_id,
            flags,
        })
    }

    /// The trace id as 32 lowercase hex digits.
    pub fn trace_id_hex(&self) -> String {
        to_hex(&self.trace_id)
    }

    /// The parent span id as 16 lowercase hex digits.
    pub fn parent_span_id_hex(&self) -> String {
        to_hex(&self.parent_span_id)
    }

    /// Whether the caller sampled the trace.
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }
}

fn hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != N * 2
        || !text
            .bytes()
            .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    let mut out = [0u8; N];
    for (index, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[index * 2..index * 2 + 2], 16).ok()?;
    }
    Some(out)
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The caller's trace context, for handlers that propagate it (to an HTTP API, say).
impl FromContext for Option<TraceContext> {
    fn from_context(context: &CallContext) -> Result<Self, ToolError> {
        Ok(context
            .meta()
            .get_traceparent()
            .and_then(TraceContext::parse))
    }
}

/// The MCP method of a tool call, `mcp.method.name` of its span.
pub const TOOLS_CALL: &str = "tools/call";
/// The MCP method of a resource read.
pub const RESOURCES_READ: &str = "resources/read";
/// The MCP method of a prompt.
pub const PROMPTS_GET: &str = "prompts/get";

/// The name of the histogram the OpenTelemetry semantic conventions for MCP give the duration
/// of an operation a server handled: export [`CallReport::latency`] under it (in seconds),
/// with the attributes of [`CallReport::attributes`].
pub const OPERATION_DURATION: &str = "mcp.server.operation.duration";

impl CallReport<'_> {
    /// The attributes of [`OPERATION_DURATION`] for this call, as the conventions name them:
    /// `mcp.method.name`, `gen_ai.tool.name` (tool calls) or `gen_ai.prompt.name` (prompts),
    /// `gen_ai.operation.name` (`execute_tool`, tool calls) and `error.type` (the error code,
    /// failures only).
    pub fn attributes(&self) -> Vec<(&'static str, &str)> {
        let mut attributes = vec![("mcp.method.name", self.method)];
        match self.method {
            TOOLS_CALL => {
                attributes.push(("gen_ai.tool.name", self.tool));
                attributes.push(("gen_ai.operation.name", "execute_tool"));
            }
            PROMPTS_GET => {
                if let Some(prompt) = self.action {
                    attributes.push(("gen_ai.prompt.name", prompt));
                }
            }
            _ => {}
        }
        if self.is_error {
            attributes.push(("error.type", self.outcome));
        }
        attributes
    }
}

/// A span named after an MCP method, with the fields every method's span has besides `$extra`.
/// `span!` needs its level as a constant and its fields declared up front.
macro_rules! mcp_span {
    ($level:expr, $method:literal, { $($extra:tt)* }) => {
        match $level {
            tracing::Level::ERROR => mcp_span!(@at tracing::Level::ERROR, $method, { $($extra)* }),
            tracing::Level::WARN => mcp_span!(@at tracing::Level::WARN, $method, { $($extra)* }),
            tracing::Level::INFO => mcp_span!(@at tracing::Level::INFO, $method, { $($extra)* }),
            tracing::Level::DEBUG => mcp_span!(@at tracing::Level::DEBUG, $method, { $($extra)* }),
            _ => mcp_span!(@at tracing::Level::TRACE, $method, { $($extra)* }),
        }
    };
    (@at $at:expr, $method:literal, { $($extra:tt)* }) => {
        tracing::span!(
            target: "fusion::call",
            $at,
            $method,
            "otel.name" = tracing::field::Empty,
            "otel.kind" = "server",
            "otel.status_code" = tracing::field::Empty,
            "mcp.method.name" = $method,
            $($extra)*
            "mcp.session.id" = tracing::field::Empty,
            "mcp.protocol.version" = tracing::field::Empty,
            "jsonrpc.request.id" = tracing::field::Empty,
            "mcp.resource.uri" = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
            tenant = tracing::field::Empty,
            outcome = tracing::field::Empty,
            latency_us = tracing::field::Empty,
            error_id = tracing::field::Empty,
            trace_id = tracing::field::Empty,
            parent_span_id = tracing::field::Empty,
        )
    };
}

/// The span of one call of a tool (exposed as `tool`), at `level`.
pub(crate) fn call_span(
    level: tracing::Level,
    tool: &str,
    action: Option<&str>,
    context: &CallContext,
) -> tracing::Span {
    let span = mcp_span!(level, "tools/call", {
        "gen_ai.tool.name" = tool,
        "gen_ai.operation.name" = "execute_tool",
        action,
    });
    if !span.is_disabled() {
        span.record("otel.name", format!("{TOOLS_CALL} {tool}"));
        record_request(&span, context);
    }
    span
}

/// The span of a resource read (`method` [`RESOURCES_READ`], the resource's key) or a prompt
/// ([`PROMPTS_GET`], the prompt's name), at `level`.
pub(crate) fn read_span(
    level: tracing::Level,
    method: &'static str,
    key: &str,
    context: &CallContext,
) -> tracing::Span {
    let span = if method == PROMPTS_GET {
        mcp_span!(level, "prompts/get", { "gen_ai.prompt.name" = key, action = key, })
    } else {
        mcp_span!(level, "resources/read", { action = key, })
    };
    if !span.is_disabled() {
        // A resource's URI is not in the name: the conventions keep span names low-cardinality.
        span.record(
            "otel.name",
            if method == PROMPTS_GET {
                format!("{method} {key}")
            } else {
                method.to_owned()
            },
        );
        record_request(&span, context);
    }
    span
}

/// Records how a call ended on its span: Fusion's outcome, latency and error id, and the
/// conventions' `error.type` (the error code) with an error status.
pub(crate) fn record_end(
    span: &tracing::Span,
    outcome: &str,
    is_error: bool,
    error_id: Option<&str>,
    latency: Duration,
) {
    if span.is_disabled() {
        return;
    }
    span.record("outcome", outcome);
    span.record(
        "latency_us",
        u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
    );
    if is_error {
        span.record("error.type", outcome);
        span.record("otel.status_code", "ERROR");
    }
    if let Some(error_id) = error_id {
        span.record("error_id", error_id);
    }
}

/// What the request says of itself, on an enabled span: its session, protocol version and
/// JSON-RPC id where the transport knows them, the caller's tenant, and its W3C trace context.
fn record_request(span: &tracing::Span, context: &CallContext) {
    if let Some(version) = context.protocol_version() {
        span.record("mcp.protocol.version", version.as_str());
    }
    if let Some(id) = &context.request.id {
        span.record("jsonrpc.request.id", tracing::field::display(id));
    }
    #[cfg(feature = "http")]
    if let Some(session) = context
        .http_request()
        .and_then(|parts| parts.headers.get("mcp-session-id"))
        .and_then(|value| value.to_str().ok())
    {
        span.record("mcp.session.id", session);
    }
    if let Some(tenant) = context
        .principal()
        .and_then(|principal| principal.tenant.as_deref())
    {
        span.record("tenant", tenant);
    }
    if let Some(trace) = context
        .meta()
        .get_traceparent()
        .and_then(TraceContext::parse)
    {
        span.record("trace_id", trace.trace_id_hex());
        span.record("parent_span_id", trace.parent_span_id_hex());
        #[cfg(feature = "opentelemetry")]
        otel::set_parent(span, &trace);
    }
}

#[cfg(feature = "opentelemetry")]
mod otel {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    use super::TraceContext;

    /// Makes the remote caller's span the OpenTelemetry parent of `span`.
    pub(super) fn set_parent(span: &tracing::Span, trace: &TraceContext) {
        let remote = SpanContext::new(
            TraceId::from_bytes(trace.trace_id),
            SpanId::from_bytes(trace.parent_span_id),
            TraceFlags::new(trace.flags),
            true,
            TraceState::default(),
        );
        let parent = opentelemetry::Context::new().with_remote_span_context(remote);
        if let Err(error) = span.set_parent(parent) {
            tracing::debug!(?error, "could not set the OpenTelemetry parent");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_is_parsed_strictly() {
        let trace =
            TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(trace.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(trace.parent_span_id_hex(), "00f067aa0ba902b7");
        assert!(trace.sampled());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert_eq!(TraceContext::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn stats_count_calls_errors_and_latency() {
        let stats = CallStats::new();
        let report = |outcome, is_error, micros| CallReport {
            method: TOOLS_CALL,
            tool: "t",
            action: Some("a.t"),
            outcome,
            is_error,
            latency: Duration::from_micros(micros),
        };
        stats.call_finished(&report("ok", false, 40));
        stats.call_finished(&report("ok", false, 3_000));
        stats.call_finished(&report("SERVER_BUSY", true, 10));
        let snapshot = stats.snapshot();
        assert_eq!((snapshot.calls, snapshot.errors), (3, 1));
        assert_eq!(snapshot.latency_buckets[0], 2);
        assert_eq!(snapshot.latency_buckets[6], 1);
        assert_eq!(
            snapshot.by_outcome,
            [("ok".to_owned(), 2), ("SERVER_BUSY".to_owned(), 1)]
        );
    }
}

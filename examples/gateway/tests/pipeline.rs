//! A proxied call takes the server's own stages, proven at both ends: the gateway in process in
//! front of a recording rmcp upstream (`support/recorder.rs`) over Streamable HTTP. The server's
//! middleware sees the call with its principal (and a refusal there never reaches the
//! upstream), a `tools/call` span covers it, the metrics hook counts it, the caller's W3C trace
//! context arrives at the upstream in `_meta`, and the server's rate limit applies.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fusion::gateway::Upstream;
use fusion::middleware::from_fn;
use fusion::observe::CallReport;
use fusion::serde_json::json;
use fusion::{Metrics, Principal, RateLimit, ServerBuilder, ToolError};
use rmcp::model::RequestMetaObject;
use support::recorder::Recorder;
use support::*;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TRACESTATE: &str = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7";

/// The fields of every closed `tools/call` span.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<BTreeMap<String, String>>>>);

struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Spans {
    fn on_new_span(&self, attributes: &Attributes<'_>, id: &Id, context: Context<'_, S>) {
        let mut fields = Fields(BTreeMap::new());
        attributes.record(&mut fields);
        if let Some(span) = context.span(id) {
            span.extensions_mut().insert(fields);
        }
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, context: Context<'_, S>) {
        if let Some(span) = context.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(fields);
        }
    }
    fn on_close(&self, id: Id, context: Context<'_, S>) {
        if let Some(span) = context.span(&id)
            && span.name() == "tools/call"
            && let Some(fields) = span.extensions().get::<Fields>()
        {
            self.0.lock().unwrap().push(fields.0.clone());
        }
    }
}

/// One report the metrics hook got: tool, action, outcome, is_error.
type Report = (String, Option<String>, String, bool);

/// Every report the metrics hook got.
#[derive(Clone, Default)]
struct Reports(Arc<Mutex<Vec<Report>>>);

impl Metrics for Reports {
    fn call_finished(&self, report: &CallReport<'_>) {
        self.0.lock().unwrap().push((
            report.tool.to_owned(),
            report.action.map(str::to_owned),
            report.outcome.to_owned(),
            report.is_error,
        ));
    }
}

/// The spans of this test process: one global subscriber, installed by the first test that
/// asks, so that spans on every worker thread are seen (a thread-local one misses them).
fn spans() -> Spans {
    static SPANS: std::sync::OnceLock<Spans> = std::sync::OnceLock::new();
    SPANS
        .get_or_init(|| {
            let spans = Spans::default();
            tracing::subscriber::set_global_default(
                tracing_subscriber::registry().with(spans.clone()),
            )
            .expect("the only global subscriber");
            spans
        })
        .clone()
}

#[tokio::test]
async fn middleware_span_metrics_and_trace_context_cover_proxied_calls() {
    let spans = spans();
    within(async {
        let upstream = Recorder::start().await;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let reports = Reports::default();
        let middleware_saw = Arc::clone(&seen);
        let server = ServerBuilder::new("gw", "1.0.0")
            .middleware(from_fn(move |call, action| {
                middleware_saw.lock().unwrap().push((
                    call.principal().map(|principal| principal.subject.clone()),
                    action.key().to_string(),
                ));
                if action.key().as_str() == "traced.delete" {
                    return Err(ToolError::forbidden("Nothing is deleted today."));
                }
                Ok(())
            }))
            .metrics(Arc::new(reports.clone()))
            .mount("traced", Upstream::http(&upstream.url))
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let client = connect(&server, Principal::new("alice"), ()).await;

        let mut meta = RequestMetaObject::default();
        meta.set_traceparent(TRACEPARENT);
        meta.set_tracestate(TRACESTATE);
        let echoed = call_with_meta(client.peer(), "traced_echo", json!({"message": "hi"}), meta)
            .await
            .unwrap();
        assert_eq!(text_of(&echoed), "echo: hi");
        // A refusal by the middleware: the upstream never sees the call.
        let refused = call(client.peer(), "traced_delete", json!({"what": "all"}))
            .await
            .unwrap();
        let error = error_of(&refused);
        assert_eq!(error["code"], "FORBIDDEN", "{error}");
        let told = refused.content[0].as_text().unwrap().text.as_str();
        assert!(
            told.contains("<message>Nothing is deleted today.</message>"),
            "{told}"
        );

        // The upstream got the echo, with the caller's trace context in `_meta`, and nothing
        // else.
        let calls = upstream.calls();
        assert_eq!(calls.len(), 1, "{calls:?}");
        assert_eq!(calls[0].tool, "echo");
        assert_eq!(calls[0].arguments, json!({"message": "hi"}));
        assert_eq!(calls[0].traceparent.as_deref(), Some(TRACEPARENT));
        assert_eq!(calls[0].tracestate.as_deref(), Some(TRACESTATE));

        // The middleware saw both calls, with the caller's principal and the canonical keys.
        assert_eq!(
            *seen.lock().unwrap(),
            [
                (Some("alice".to_owned()), "traced.echo".to_owned()),
                (Some("alice".to_owned()), "traced.delete".to_owned()),
            ]
        );
        // Counted...
        assert_eq!(
            *reports.0.lock().unwrap(),
            [
                (
                    "traced_echo".into(),
                    Some("traced.echo".into()),
                    "ok".into(),
                    false
                ),
                (
                    "traced_delete".into(),
                    Some("traced.delete".into()),
                    "FORBIDDEN".into(),
                    true
                ),
            ]
        );
        // ...and spanned, the span joined to the caller's trace.
        let recorded: Vec<_> = spans
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|span| span["gen_ai.tool.name"].starts_with("traced_"))
            .cloned()
            .collect();
        assert_eq!(recorded.len(), 2, "{recorded:?}");
        let echo = &recorded[0];
        assert_eq!(echo["gen_ai.tool.name"], "traced_echo");
        assert_eq!(echo["otel.name"], "tools/call traced_echo");
        assert_eq!(echo["mcp.method.name"], "tools/call");
        assert_eq!(echo["gen_ai.operation.name"], "execute_tool");
        // What the transport knew of the request: its id and protocol version.
        assert!(echo.contains_key("jsonrpc.request.id"), "{echo:?}");
        assert!(echo.contains_key("mcp.protocol.version"), "{echo:?}");
        assert!(!echo.contains_key("error.type"), "{echo:?}");
        assert_eq!(echo["action"], "traced.echo");
        assert_eq!(echo["outcome"], "ok");
        assert!(echo["latency_us"].parse::<u64>().is_ok(), "{echo:?}");
        assert_eq!(echo["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(echo["parent_span_id"], "00f067aa0ba902b7");
        let delete = &recorded[1];
        assert_eq!(delete["gen_ai.tool.name"], "traced_delete");
        assert_eq!(delete["outcome"], "FORBIDDEN");
        assert_eq!(delete["error.type"], "FORBIDDEN");
        assert_eq!(delete["otel.status_code"], "ERROR");
        assert!(!delete.contains_key("trace_id"));

        client.cancel().await.unwrap();
        server.shutdown_upstreams().await;
    })
    .await;
}

#[tokio::test]
async fn the_servers_rate_limit_applies_to_proxied_calls_before_forwarding() {
    let _ = spans();
    within(async {
        let upstream = Recorder::start().await;
        let server = ServerBuilder::new("gw", "1.0.0")
            .rate_limit(RateLimit::new(2, Duration::from_secs(60)))
            .mount("up", Upstream::http(&upstream.url))
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let alice = connect(&server, Principal::new("alice"), ()).await;
        for _ in 0..2 {
            let ok = call(alice.peer(), "up_echo", json!({"message": "a"}))
                .await
                .unwrap();
            assert_eq!(text_of(&ok), "echo: a");
        }
        let limited = call(alice.peer(), "up_echo", json!({"message": "a"}))
            .await
            .unwrap();
        let error = error_of(&limited);
        assert_eq!(error["code"], "RATE_LIMITED", "{error}");
        assert!(error["retryAfterMs"].as_u64().unwrap() > 0, "{error}");
        // The refused call never left the gateway.
        assert_eq!(upstream.calls_of("echo").len(), 2);
        // The limit is per caller: another principal still gets through.
        let bob = connect(&server, Principal::new("bob"), ()).await;
        let ok = call(bob.peer(), "up_echo", json!({"message": "b"}))
            .await
            .unwrap();
        assert_eq!(text_of(&ok), "echo: b");
        assert_eq!(upstream.calls_of("echo").len(), 3);
        alice.cancel().await.unwrap();
        bob.cancel().await.unwrap();
        server.shutdown_upstreams().await;
    })
    .await;
}

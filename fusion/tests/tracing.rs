//! Observability (SPEC R8): one span per call, named and described as the OpenTelemetry
//! semantic conventions for MCP say (`tools/call {tool}`, `mcp.method.name`,
//! `gen_ai.tool.name`, `error.type`), with Fusion's action, tenant, outcome, latency and error
//! id, whose parent is the W3C trace context the request carried in `_meta`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use fusion::protocol::model::RequestMetaObject;
use fusion::testing::Tester;
use fusion::{ActionInfo, CallContext, Exposition, Principal, ServerBuilder, ToolError, tool};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Answers, or fails as asked.
#[tool(query, name = "probe.answer")]
async fn answer(fail: bool) -> Result<u32, ToolError> {
    if fail {
        Err(std::io::Error::other("the database is down").into())
    } else {
        Ok(42)
    }
}

/// The fields of every closed span of a call (`tools/call`, `resources/read`, `prompts/get`).
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
            && ["tools/call", "resources/read", "prompts/get"].contains(&span.name())
            && let Some(fields) = span.extensions().get::<Fields>()
        {
            self.0.lock().unwrap().push(fields.0.clone());
        }
    }
}

fn tester(traceparent: Option<&'static str>) -> Tester {
    let server = ServerBuilder::new("s", "1")
        .tool::<answer>()
        .build()
        .unwrap();
    Tester::new(server).with_context(move |call| {
        if let Some(traceparent) = traceparent {
            let mut meta = RequestMetaObject::default();
            meta.set_traceparent(traceparent);
            call.set_meta(meta);
        }
    })
}

#[tokio::test(flavor = "current_thread")]
async fn every_call_has_a_span_with_its_outcome_latency_and_trace_context() {
    let spans = Spans::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let ok = tester(Some(TRACEPARENT))
        .call("probe.answer", json!({"fail": false}))
        .await;
    assert!(!ok.is_error());
    let failed = tester(None)
        .call("probe.answer", json!({"fail": true}))
        .await;
    let recorded = spans.0.lock().unwrap().clone();
    assert_eq!(recorded.len(), 2, "{recorded:?}");
    let first = &recorded[0];
    assert_eq!(first["otel.name"], "tools/call probe_answer");
    assert_eq!(first["otel.kind"], "server");
    assert_eq!(first["mcp.method.name"], "tools/call");
    assert_eq!(first["gen_ai.tool.name"], "probe_answer");
    assert_eq!(first["gen_ai.operation.name"], "execute_tool");
    assert!(!first.contains_key("error.type"));
    assert_eq!(first["action"], "probe.answer");
    assert_eq!(first["outcome"], "ok");
    assert!(first["latency_us"].parse::<u64>().is_ok());
    assert_eq!(first["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(first["parent_span_id"], "00f067aa0ba902b7");
    assert!(!first.contains_key("error_id"));
    let second = &recorded[1];
    assert_eq!(second["outcome"], "INTERNAL_ERROR");
    assert_eq!(second["error.type"], "INTERNAL_ERROR");
    assert_eq!(second["otel.status_code"], "ERROR");
    assert_eq!(
        second["error_id"],
        failed.error()["errorId"].as_str().unwrap()
    );
    assert!(!second.contains_key("trace_id"));
}

#[tokio::test(flavor = "current_thread")]
async fn denied_calls_and_calls_without_a_valid_action_are_spanned_as_errors() {
    let spans = Spans::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let server = ServerBuilder::new("s", "1")
        .exposition(Exposition::Grouped)
        .tool::<answer>()
        .access(|call: &CallContext, _action: ActionInfo<'_>| call.principal().is_some())
        .build()
        .unwrap();
    let anonymous = Tester::new(server.clone());
    let denied = anonymous.call("probe.answer", json!({"fail": false})).await;
    assert_eq!(denied.error_code(), Some("FORBIDDEN"));
    // A caller who may call the tool's action hears which actions are valid.
    let tester = Tester::new(server).with_context(|call| {
        call.extensions_mut().insert(Principal::new("caller"));
    });
    let unknown = tester
        .call_exposed("probe", json!({"action": "explode"}))
        .await
        .unwrap();
    assert_eq!(unknown.error_code(), Some("UNKNOWN_ACTION"));
    let missing = tester
        .call_exposed("probe", json!({"fail": true}))
        .await
        .unwrap();
    assert_eq!(missing.error_code(), Some("MISSING_DISCRIMINATOR"));
    let recorded = spans.0.lock().unwrap().clone();
    assert_eq!(recorded.len(), 3, "{recorded:?}");
    let denied = &recorded[0];
    assert_eq!(
        (
            denied["gen_ai.tool.name"].as_str(),
            denied["action"].as_str()
        ),
        ("probe", "probe.answer")
    );
    assert_eq!(denied["error.type"], "FORBIDDEN");
    assert_eq!(denied["outcome"], "FORBIDDEN");
    assert!(denied["latency_us"].parse::<u64>().is_ok());
    for (span, outcome) in recorded[1..]
        .iter()
        .zip(["UNKNOWN_ACTION", "MISSING_DISCRIMINATOR"])
    {
        assert_eq!(span["gen_ai.tool.name"], "probe");
        assert_eq!(span["error.type"], outcome);
        assert!(
            !span.contains_key("action"),
            "no valid action was named: {span:?}"
        );
        assert_eq!(span["outcome"], outcome);
        assert!(span["latency_us"].parse::<u64>().is_ok());
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_traceparent_becomes_the_opentelemetry_parent() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("fusion-test"));
    let _guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
    let ok = tester(Some(TRACEPARENT))
        .call("probe.answer", json!({"fail": false}))
        .await;
    assert!(!ok.is_error());
    provider.force_flush().unwrap();
    let exported = exporter.get_finished_spans().unwrap();
    let call = exported
        .iter()
        .find(|span| span.name == "tools/call probe_answer")
        .expect("the call's span was exported");
    assert_eq!(
        call.span_context.trace_id().to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(call.parent_span_id.to_string(), "00f067aa0ba902b7");
}

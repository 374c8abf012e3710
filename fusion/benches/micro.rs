//! Micro-benchmarks, each against its baseline in the same run (issue 5):
//!
//! - `egress`: a presenter's view vs serde_json on a hand-written struct of the same fields;
//! - `arguments`: reading a fillable profile as the pipeline does vs `serde_json::from_value`
//!   into a hand-written struct;
//! - `dispatch`: one call through the whole pipeline with 10, 100 and 1,000 tools registered;
//! - `tools_list`: `tools/list` per caller under an access policy, grouped, before and after
//!   grouped tools were restricted to the caller's actions;
//! - `build`: compiling a registry of 1,000 tools.
//!
//! Run with `cargo bench -p fusion --bench micro`; `bench/micro.sh` prints the ratios.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use fusion::testing::Tester;
use fusion::{
    CallContext, Params, Presenter, ServerBuilder, ToolError, ToolSpec, model, presenter,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The billing invoice, as the flagship declares it.
#[model(fillable(create = [customer_id, total_cents]))]
pub struct Invoice {
    #[cast("Invoice id, such as INV-7")]
    id: String,
    #[cast("Customer id")]
    customer_id: String,
    #[cast("Total in integer cents")]
    total_cents: i64,
    #[cast("open, paid or voided")]
    status: String,
    #[hidden]
    webhook_secret: fusion::Hidden<String>,
    #[guarded]
    #[hidden]
    tenant_id: fusion::Hidden<String>,
    #[hidden]
    internal_flags: fusion::Hidden<String>,
}

/// The view an agent gets.
#[presenter(Invoice, fields(id, customer_id, total_cents, status))]
#[derive(Debug)]
pub struct InvoiceView;

/// What a careful hand-written server serializes: the same visible fields.
#[derive(Serialize)]
struct HandView<'a> {
    id: &'a str,
    customer_id: &'a str,
    total_cents: i64,
    status: &'a str,
}

/// What a hand-written server deserializes arguments into.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct HandCreate {
    customer_id: String,
    total_cents: i64,
}

fn invoice(n: u32) -> Invoice {
    Invoice {
        id: format!("INV-{n}"),
        customer_id: format!("C-{}", n % 37),
        total_cents: i64::from(n * 7919 % 100_000),
        status: ["open", "paid", "voided"][n as usize % 3].to_owned(),
        webhook_secret: format!("whsec_{n}").into(),
        tenant_id: "t_777".into(),
        internal_flags: "beta".into(),
    }
}

fn egress(c: &mut Criterion) {
    let invoice = invoice(7);
    let mut group = c.benchmark_group("egress");
    group.bench_function("fusion_view", |b| {
        let mut out = Vec::with_capacity(256);
        b.iter(|| {
            out.clear();
            serde_json::to_writer(&mut out, &InvoiceView::item(black_box(&invoice))).unwrap();
            black_box(out.len())
        })
    });
    group.bench_function("serde_json_baseline", |b| {
        let mut out = Vec::with_capacity(256);
        b.iter(|| {
            let invoice = black_box(&invoice);
            let view = HandView {
                id: &invoice.id,
                customer_id: &invoice.customer_id,
                total_cents: invoice.total_cents,
                status: &invoice.status,
            };
            out.clear();
            serde_json::to_writer(&mut out, &view).unwrap();
            black_box(out.len())
        })
    });
    group.finish();
}

fn arguments(c: &mut Criterion) {
    let mut params = Params::new();
    params.group::<InvoiceCreate>();
    let compiled = params.compile("billing_create_invoice").unwrap();
    let args = json!({"customer_id": "C-12", "total_cents": 4200});
    let object = args.as_object().cloned().unwrap();
    let mut group = c.benchmark_group("arguments");
    group.bench_function("fusion_profile", |b| {
        b.iter_batched(
            || object.clone(),
            |object| black_box(compiled.read_group::<InvoiceCreate>(object).unwrap()),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("serde_json_baseline", |b| {
        b.iter_batched(
            || Value::Object(object.clone()),
            |value| black_box(serde_json::from_value::<HandCreate>(value).unwrap()),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

#[derive(Serialize, JsonSchema)]
struct Pong {
    ok: bool,
}

fn registry(tools: usize) -> fusion::Server {
    let mut builder = ServerBuilder::new("bench", "1.0.0");
    for index in 0..tools {
        builder = builder.tool_spec(
            ToolSpec::query(
                format!("ns{}.tool_{index}", index % 10),
                "A tool of the benchmark.",
            )
            .handler(|_: CallContext, _: Nothing| async { Ok::<_, ToolError>(Pong { ok: true }) }),
        );
    }
    builder.build().unwrap()
}

fn dispatch(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("dispatch");
    for tools in [10, 100, 1000] {
        let server = registry(tools);
        // The last tool registered: no luck from being first in any list.
        let name = format!("ns{}_tool_{}", (tools - 1) % 10, tools - 1);
        let tester = Tester::new(server);
        group.bench_function(format!("tools_{tools}"), |b| {
            b.to_async(&runtime).iter(|| async {
                black_box(tester.call_exposed(&name, json!({})).await.unwrap());
            })
        });
    }
    group.finish();
}

/// The production stages (access, middleware, guards, audit, metrics, span) cost nothing when
/// unset: the full pipeline of a server without them against the core path alone, and the
/// same tool with all of them set, for scale.
fn hooks(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let bare = registry(10);
    let name = "ns9_tool_9";
    let mut group = c.benchmark_group("hooks");
    group.bench_function("core_path_only", |b| {
        b.to_async(&runtime).iter(|| async {
            black_box(
                bare.call_tool_core_only(name, None, bare.new_context())
                    .await
                    .unwrap(),
            );
        })
    });
    group.bench_function("pipeline_hooks_unset", |b| {
        b.to_async(&runtime).iter(|| async {
            black_box(
                bare.call_tool(name, None, bare.new_context())
                    .await
                    .unwrap(),
            );
        })
    });
    let stats = std::sync::Arc::new(fusion::observe::CallStats::new());
    let hooked = ServerBuilder::new("bench", "1.0.0")
        .tool_spec(
            ToolSpec::query("ns9.tool_9", "A tool of the benchmark.")
                .with_concurrency(fusion::Concurrency::new(64, 64))
                .with_middleware(fusion::middleware::from_fn(|_, _| Ok(())))
                .handler(|_: CallContext, _: Nothing| async {
                    Ok::<_, ToolError>(Pong { ok: true })
                }),
        )
        .access(|_: &CallContext, _: fusion::ActionInfo<'_>| true)
        .metrics(stats)
        .build()
        .unwrap();
    group.bench_function("pipeline_hooks_set", |b| {
        b.to_async(&runtime).iter(|| async {
            black_box(
                hooked
                    .call_tool(name, None, hooked.new_context())
                    .await
                    .unwrap(),
            );
        })
    });
    group.finish();
}

/// Arguments of a benchmark action: a few typed fields, as a real tool takes.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct ActionArgs {
    /// The invoice id, such as INV-7.
    id: String,
    /// How many to return.
    limit: Option<u32>,
    /// A note.
    memo: Option<String>,
}

/// Three namespaces of eight actions (three reads, five writes), grouped, under an access
/// policy that lets readers call reads only: what `tools/list` serves per caller.
fn grouped_server() -> fusion::Server {
    let mut builder = ServerBuilder::new("bench", "1.0.0").exposition(fusion::Exposition::Grouped);
    for namespace in ["billing", "crm", "ops"] {
        for index in 0..8 {
            let key = format!("{namespace}.action_{index}");
            let spec = if index < 3 {
                ToolSpec::query(
                    key,
                    "Reads something of the benchmark; see `billing.action_0`.",
                )
            } else {
                ToolSpec::mutation(key, "Changes something of the benchmark.")
            };
            builder = builder.tool_spec(spec.handler(|_: CallContext, _: ActionArgs| async {
                Ok::<_, ToolError>(Pong { ok: true })
            }));
        }
    }
    builder
        .access(|call: &CallContext, action: fusion::ActionInfo<'_>| {
            action.verb() == fusion::Verb::Query
                || call
                    .principal()
                    .is_some_and(|principal| principal.has_scope("write"))
        })
        .build()
        .unwrap()
}

/// `tools/list` under an access policy, per caller, serialized as the transport sends it:
/// before (every visible tool's whole definition, writes included) and after (grouped tools
/// restricted to the caller's actions, cached per set of actions; uncached for scale).
fn tools_list(c: &mut Criterion) {
    let server = grouped_server();
    let caller = |scopes: &[&str]| {
        let mut context = server.new_context();
        context.extensions_mut().insert(
            fusion::Principal::new("bench").with_scopes(scopes.iter().map(|s| (*s).to_owned())),
        );
        context
    };
    let reader = caller(&[]);
    let writer = caller(&["write"]);
    let mut group = c.benchmark_group("tools_list");
    // What `list_visible` did before: filter the tools, clone their whole definitions.
    let before = |context: &CallContext| {
        let tools: Vec<fusion::protocol::model::Tool> = server
            .tools()
            .filter(|tool| server.is_visible(tool.name(), context))
            .map(|tool| tool.definition().clone())
            .collect();
        serde_json::to_vec(&tools).unwrap()
    };
    group.bench_function("before_reader", |b| b.iter(|| black_box(before(&reader))));
    group.bench_function("before_writer", |b| b.iter(|| black_box(before(&writer))));
    group.bench_function("after_reader", |b| {
        b.iter(|| black_box(serde_json::to_vec(&server.visible_tools(&reader)).unwrap()))
    });
    group.bench_function("after_writer", |b| {
        b.iter(|| black_box(serde_json::to_vec(&server.visible_tools(&writer)).unwrap()))
    });
    group.bench_function("after_reader_uncached", |b| {
        b.iter(|| black_box(serde_json::to_vec(&server.visible_tools_uncached(&reader)).unwrap()))
    });
    group.finish();
}

fn build(c: &mut Criterion) {
    let mut group = c.benchmark_group("build");
    group.bench_function("registry_1000_tools", |b| {
        b.iter(|| black_box(registry(1000)))
    });
    group.finish();
}

fn checks(_: &mut Criterion) {
    // The view really is what the baseline writes.
    let invoice = invoice(7);
    let fusion = serde_json::to_string(&InvoiceView::item(&invoice)).unwrap();
    let hand = serde_json::to_string(&HandView {
        id: &invoice.id,
        customer_id: &invoice.customer_id,
        total_cents: invoice.total_cents,
        status: &invoice.status,
    })
    .unwrap();
    assert_eq!(fusion, hand);
    assert_eq!(InvoiceView::FIELDS.len(), 4);
}

criterion_group!(
    benches, checks, egress, arguments, dispatch, hooks, tools_list, build
);
criterion_main!(benches);

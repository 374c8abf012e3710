//! The whole in-process pipeline per call (the tester path) for the billing connector, against
//! the same work done by a hand-written function: the store lookup and serde_json.
//!
//! Run with `cargo bench -p fusion-bench --bench pipeline`.

use std::hint::black_box;
use std::sync::Arc;

use billing::{Invoice, Store, local_principal};
use criterion::{Criterion, criterion_group, criterion_main};
use fusion::Exposition;
use fusion::testing::Tester;
use serde::Serialize;
use serde_json::{Value, json};

/// What a hand-written server serializes: the visible fields.
#[derive(Serialize)]
struct View<'a> {
    id: &'a str,
    customer_id: &'a str,
    total_cents: i64,
    status: &'a str,
}

impl<'a> From<&'a Invoice> for View<'a> {
    fn from(invoice: &'a Invoice) -> Self {
        View {
            id: &invoice.id,
            customer_id: &invoice.customer_id,
            total_cents: invoice.total_cents,
            status: invoice.status.as_str(),
        }
    }
}

/// The hand-written handler: look up, serialize the visible fields, once as text and once as
/// a JSON tree (the result's text block and `structuredContent`).
fn handwritten_get(store: &Store, id: &str) -> (String, Value) {
    let invoice = store.get(billing::DEMO_TENANT, id).unwrap().unwrap();
    let view = View::from(&invoice);
    (
        serde_json::to_string(&view).unwrap(),
        serde_json::to_value(&view).unwrap(),
    )
}

fn handwritten_list(store: &Store, limit: usize) -> (String, Value) {
    let invoices = store.list(billing::DEMO_TENANT, None, limit).unwrap();
    let views: Vec<View<'_>> = invoices.iter().map(View::from).collect();
    (
        serde_json::to_string(&views).unwrap(),
        serde_json::to_value(&views).unwrap(),
    )
}

fn pipeline(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let store = Arc::new(Store::open_in_memory().unwrap());
    let server = billing::server(Arc::clone(&store), Exposition::Flat).unwrap();
    let tester = Tester::new(server).with_context(|call| {
        call.extensions_mut().insert(local_principal());
    });
    let get = json!({"id": "INV-7"});
    let list = json!({"limit": 50});

    let mut group = c.benchmark_group("pipeline_get_invoice");
    group.bench_function("fusion", |b| {
        b.to_async(&runtime).iter(|| async {
            black_box(
                tester
                    .call_exposed("billing_get_invoice", get.clone())
                    .await
                    .unwrap(),
            )
        })
    });
    group.bench_function("handwritten", |b| {
        b.iter(|| black_box(handwritten_get(&store, "INV-7")))
    });
    group.finish();

    let mut group = c.benchmark_group("pipeline_list_invoices_50");
    group.bench_function("fusion", |b| {
        b.to_async(&runtime).iter(|| async {
            black_box(
                tester
                    .call_exposed("billing_list_invoices", list.clone())
                    .await
                    .unwrap(),
            )
        })
    });
    group.bench_function("handwritten", |b| {
        b.iter(|| black_box(handwritten_list(&store, 50)))
    });
    group.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);

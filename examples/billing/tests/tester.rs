//! The billing connector through Fusion's in-memory tester: the real pipeline, no transport.
//! This is also how a connector's own unit tests read.

use std::sync::Arc;

use billing::{Store, local_principal};
use fusion::Exposition;
use fusion::testing::Tester;
use serde_json::json;

fn tester(exposition: Exposition) -> Tester {
    let store = Arc::new(Store::open_in_memory().expect("an in-memory store"));
    let server = billing::server(store, exposition).expect("the billing server builds");
    Tester::new(server).with_context(|call| {
        call.extensions_mut().insert(local_principal());
    })
}

#[tokio::test]
async fn voiding_never_leaks_and_says_what_is_stale() {
    let tester = tester(Exposition::Flat);
    let voided = tester
        .call("billing.void_invoice", json!({"id": "INV-3"}))
        .await;
    assert!(!voided.is_error(), "{}", voided.raw_text());
    assert_eq!(voided.data()["status"], "voided");
    assert!(!voided.raw_text().contains("whsec_"));
    assert!(!voided.raw_text().contains("t_777"));
    assert_eq!(voided.invalidations(), ["billing.*"]);
    assert_eq!(
        voided.rules()[0],
        "id: Invoice id, such as INV-7",
        "the labels of the presented fields come first"
    );
    let kinds: Vec<String> = voided
        .ui_blocks()
        .into_iter()
        .map(|block| block.kind)
        .collect();
    assert_eq!(kinds, ["markdown", "mermaid", "code"]);
    let again = tester
        .call("billing.void_invoice", json!({"id": "INV-3"}))
        .await;
    assert_eq!(again.error_code(), Some("AlreadyVoided"));
    assert!(again.invalidations().is_empty());
}

#[tokio::test]
async fn a_missing_invoice_points_to_the_list() {
    let tester = tester(Exposition::Flat);
    let missing = tester
        .call("billing.get_invoice", json!({"id": "INV-99999"}))
        .await;
    assert_eq!(missing.error_code(), Some("InvoiceNotFound"));
    assert_eq!(
        missing.error()["availableActions"],
        json!(["billing_list_invoices"])
    );
    assert!(
        missing.error()["recovery"]
            .as_str()
            .unwrap()
            .contains("billing_list_invoices")
    );
}

#[tokio::test]
async fn lists_are_limited_charted_and_suggest_the_next_step() {
    let tester = tester(Exposition::Flat);
    let list = tester
        .call(
            "billing.list_invoices",
            json!({"status": "open", "limit": 80}),
        )
        .await;
    assert_eq!(list.data().as_array().unwrap().len(), 50);
    assert_eq!(list.truncation(), Some((50, 80)));
    let kinds: Vec<String> = list
        .ui_blocks()
        .into_iter()
        .map(|block| block.kind)
        .collect();
    assert_eq!(kinds, ["table", "chart"]);
    assert_eq!(list.suggestions()[0].tool, "billing_get_invoice");
    assert_eq!(list.meta()["cache"], "volatile");
}

#[tokio::test]
async fn grouped_exposition_keeps_each_actions_settings() {
    let tester = tester(Exposition::Grouped);
    let names: Vec<&str> = tester.server().tools().map(|tool| tool.name()).collect();
    assert_eq!(names, ["billing"]);
    let created = tester
        .call(
            "billing.create_invoice",
            json!({"customer_id": "C-1", "total_cents": 1250}),
        )
        .await;
    assert_eq!(created.data()["id"], "INV-1001");
    assert_eq!(
        created.invalidations(),
        ["billing.list_invoices", "billing.invoice_stats"]
    );
    assert_eq!(created.meta()["action"], "create_invoice");
    let guide = tester.call("billing.statuses", json!({})).await;
    assert_eq!(guide.meta()["cache"], "immutable");
    let unknown = tester
        .call_exposed("billing", json!({"action": "refund"}))
        .await
        .unwrap();
    assert_eq!(unknown.error_code(), Some("UNKNOWN_ACTION"));
}

#[tokio::test]
async fn calls_without_a_verified_caller_are_refused() {
    let store = Arc::new(Store::open_in_memory().unwrap());
    let anonymous = Tester::new(billing::server(store, Exposition::Flat).unwrap());
    let refused = anonymous
        .call("billing.get_invoice", json!({"id": "INV-1"}))
        .await;
    assert_eq!(refused.error_code(), Some("UNAUTHORIZED"));
}

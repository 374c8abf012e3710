//! Flat and grouped exposition (SPEC T2): settings stay per action in both.

mod common;

use common::*;
use fusion::Exposition;
use fusion::testing::Tester;
use serde_json::{Value, json};

#[test]
fn grouped_exposition_makes_one_tool_per_namespace() {
    let server = server_with(Exposition::Grouped);
    let names: Vec<&str> = server.tools().map(|tool| tool.name()).collect();
    assert_eq!(names, ["billing", "ops"]);
    let billing = server.tool("billing").unwrap();
    let actions: Vec<String> = billing
        .actions()
        .iter()
        .map(|action| action.key().to_string())
        .collect();
    assert_eq!(actions.len(), 6);
    let input = Value::Object((*billing.definition().input_schema).clone());
    assert_eq!(input["required"], json!(["action"]));
    assert_eq!(input["properties"]["action"]["enum"][0], "get_invoice");
    // Each action keeps its own required fields in its branch.
    let branches = input["oneOf"].as_array().unwrap();
    let create = branches
        .iter()
        .find(|branch| branch["properties"]["action"]["const"] == "create_invoice")
        .unwrap();
    assert_eq!(
        create["required"],
        json!(["action", "customer_id", "total_cents"])
    );
    // Annotations summarise the actions: not read-only, destructive as any action is.
    let annotations = billing.definition().annotations.clone().unwrap();
    assert_eq!(annotations.read_only_hint, Some(false));
    assert_eq!(annotations.destructive_hint, Some(true));
    let ops = server
        .tool("ops")
        .unwrap()
        .definition()
        .annotations
        .clone()
        .unwrap();
    assert_eq!(ops.destructive_hint, Some(false));
}

#[tokio::test]
async fn each_actions_arguments_are_enforced_in_grouped_mode() {
    let server = server_with(Exposition::Grouped);
    let tester = Tester::new(server.clone());
    let ok = tester
        .call_exposed("billing", json!({"action": "get_invoice", "id": "INV-1"}))
        .await
        .unwrap();
    assert!(!ok.is_error(), "{}", ok.raw_text());
    assert_eq!(ok.meta()["tool"], "billing");
    assert_eq!(ok.meta()["action"], "get_invoice");

    let runs = db(&server).runs();
    let missing = tester
        .call_exposed(
            "billing",
            json!({"action": "create_invoice", "customer_id": "C"}),
        )
        .await
        .unwrap();
    assert_eq!(missing.error_code(), Some("VALIDATION_ERROR"));
    assert_eq!(
        missing.error()["details"]["issues"][0]["field"],
        "total_cents"
    );
    // An argument of another action is not an argument of this one.
    let foreign = tester
        .call_exposed(
            "billing",
            json!({"action": "get_invoice", "id": "INV-1", "total_cents": 3}),
        )
        .await
        .unwrap();
    assert_eq!(foreign.error_code(), Some("VALIDATION_ERROR"));
    assert_eq!(db(&server).runs(), runs, "no handler ran");
}

#[tokio::test]
async fn unknown_or_missing_actions_list_the_valid_ones() {
    let tester = Tester::new(server_with(Exposition::Grouped));
    let unknown = tester
        .call_exposed("billing", json!({"action": "delete_everything"}))
        .await
        .unwrap();
    assert!(unknown.is_error());
    assert_eq!(unknown.error_code(), Some("UNKNOWN_ACTION"));
    let valid = unknown.error()["details"]["validActions"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(valid.len(), 6);
    assert!(valid.contains(&json!("void_invoice")));
    assert!(
        unknown.error()["recovery"]
            .as_str()
            .unwrap()
            .contains("get_invoice")
    );
    let missing = tester
        .call_exposed("billing", json!({"id": "INV-1"}))
        .await
        .unwrap();
    assert_eq!(missing.error_code(), Some("MISSING_DISCRIMINATOR"));
    let not_a_string = tester
        .call_exposed("billing", json!({"action": 3}))
        .await
        .unwrap();
    assert_eq!(not_a_string.error_code(), Some("MISSING_DISCRIMINATOR"));
}

#[tokio::test]
async fn settings_stay_per_action_in_grouped_mode() {
    let tester = Tester::new(server_with(Exposition::Grouped));
    // The canonical key is the same in both modes; the tester adds the discriminator.
    let voided = tester
        .call("billing.void_invoice", json!({"id": "INV-1"}))
        .await;
    assert_eq!(voided.invalidations(), ["billing.*"]);
    let created = tester
        .call(
            "billing.create_invoice",
            json!({"customer_id": "C", "total_cents": 2}),
        )
        .await;
    assert_eq!(
        created.invalidations(),
        ["billing.list_invoices", "billing.summaries"]
    );
    let read = tester.call("billing.list_invoices", json!({})).await;
    assert!(read.invalidations().is_empty());
    assert_eq!(read.meta()["cache"], "volatile");
    assert_eq!(read.truncation(), Some((3, 11)));
    let immutable = tester.call("billing.summaries", json!({})).await;
    assert_eq!(immutable.meta()["cache"], "immutable");
}

#[tokio::test]
async fn suggestions_and_error_actions_use_the_grouped_call() {
    let tester = Tester::new(server_with(Exposition::Grouped));
    let open = tester
        .call("billing.get_invoice", json!({"id": "INV-1"}))
        .await;
    assert_eq!(open.suggestions()[0].tool, "billing");
    assert_eq!(
        open.suggestions()[0].arguments,
        json!({"action": "void_invoice", "id": "INV-1"})
    );
    let missing = tester
        .call("billing.get_invoice", json!({"id": "INV-404"}))
        .await;
    assert_eq!(
        missing.error()["availableActions"],
        json!(["billing {\"action\":\"list_invoices\"}"])
    );
}

//! What leaves the process (SPEC M2, P1, R4): only presented fields, in one envelope whose
//! shape the advertised output schema describes.

mod common;

use common::*;
use fusion::testing::Tester;
use serde_json::{Value, json};

#[tokio::test]
async fn no_response_ever_carries_a_hidden_uncast_or_unpresented_field() {
    let tester = Tester::new(server());
    let calls = [
        ("billing.get_invoice", json!({"id": "INV-1"})),
        ("billing.get_invoice", json!({"id": "INV-404"})),
        ("billing.list_invoices", json!({})),
        ("billing.list_invoices", json!({"status": "open"})),
        ("billing.summaries", json!({})),
        ("billing.void_invoice", json!({"id": "INV-4"})),
        ("billing.void_invoice", json!({"id": "INV-4"})),
        (
            "billing.create_invoice",
            json!({"customer_id": "C-9", "total_cents": 5, "memo": "hi"}),
        ),
        (
            "billing.update_invoice",
            json!({"id": "INV-2", "total_cents": 7}),
        ),
        ("ops.reindex", json!({"fail_with": "io"})),
    ];
    for (key, arguments) in calls {
        let result = tester.call(key, arguments).await;
        assert_no_secret(&result.raw_text());
    }
    // An agent that sends a guarded field hears back only what it sent itself.
    let guarded = tester
        .call(
            "billing.create_invoice",
            json!({"customer_id": "C-9", "total_cents": 5, "tenant_id": "t_other"}),
        )
        .await;
    for secret in SECRETS {
        assert!(!guarded.raw_text().contains(secret));
    }
}

#[tokio::test]
async fn the_view_contains_exactly_the_presented_fields() {
    let tester = Tester::new(server());
    let result = tester
        .call("billing.get_invoice", json!({"id": "INV-1"}))
        .await;
    assert_eq!(
        result.data(),
        &json!({"id": "INV-1", "customer_id": "C-1", "total_cents": 1000, "status": "open", "memo": null})
    );
    let summaries = tester.call("billing.summaries", json!({})).await;
    let first = &summaries.data()[0];
    assert_eq!(first, &json!({"id": "INV-1", "status": "open"}));
}

#[tokio::test]
async fn success_envelope_and_text_blocks_have_the_documented_shape_and_order() {
    let tester = Tester::new(server());
    let result = tester
        .call("billing.get_invoice", json!({"id": "INV-1"}))
        .await;
    assert!(!result.is_error());
    assert_eq!(result.raw().is_error, Some(false));
    let envelope = result.envelope();
    assert_eq!(envelope["ok"], true);
    assert_eq!(envelope["meta"]["tool"], "billing_get_invoice");
    assert_eq!(envelope["meta"]["version"], "1.4.0");
    let texts = result.texts();
    // data JSON first, then UI blocks, rules, suggestions.
    let data: Value = serde_json::from_str(texts[0]).expect("the first block is the data as JSON");
    assert_eq!(&data, result.data());
    let kinds: Vec<&str> = texts[1..]
        .iter()
        .map(|text| text.split(['>', ' ']).next().unwrap_or(""))
        .collect();
    assert_eq!(
        kinds,
        [
            "<ui_passthrough",
            "<ui_passthrough",
            "<ui_passthrough",
            "<ui_passthrough",
            "<ui_passthrough",
            "<domain_rules",
            "<action_suggestions"
        ]
    );
}

#[tokio::test]
async fn every_success_result_validates_against_the_advertised_output_schema() {
    let server = server();
    let tester = Tester::new(server.clone());
    let calls = [
        ("billing.get_invoice", json!({"id": "INV-3"})),
        ("billing.list_invoices", json!({})),
        ("billing.list_invoices", json!({"status": "paid"})),
        ("billing.summaries", json!({})),
        ("billing.void_invoice", json!({"id": "INV-1"})),
        (
            "billing.create_invoice",
            json!({"customer_id": "C-1", "total_cents": 1}),
        ),
        (
            "billing.update_invoice",
            json!({"id": "INV-2", "memo": "updated"}),
        ),
        ("ops.health", json!({})),
        ("ops.reindex", json!({"fail_with": "nothing"})),
    ];
    for (key, arguments) in calls {
        let result = tester.call(key, arguments).await;
        assert!(!result.is_error(), "{key}: {}", result.raw_text());
        let tool = server
            .tool(server.action(key).unwrap().exposed_tool())
            .unwrap();
        let schema = Value::Object((**tool.definition().output_schema.as_ref().unwrap()).clone());
        assert_valid(&schema, result.envelope());
    }
}

#[tokio::test]
async fn advertised_schemas_are_valid_json_schemas_with_object_roots() {
    for exposition in [fusion::Exposition::Flat, fusion::Exposition::Grouped] {
        let server = server_with(exposition);
        for tool in server.tools() {
            let definition = tool.definition();
            for schema in [
                Some(definition.input_schema.clone()),
                definition.output_schema.clone(),
            ]
            .into_iter()
            .flatten()
            {
                let schema = Value::Object((*schema).clone());
                assert_eq!(
                    schema["type"],
                    "object",
                    "{}: MCP schemas have an object root",
                    tool.name()
                );
                assert!(
                    jsonschema::meta::is_valid(&schema),
                    "{}: {schema}",
                    tool.name()
                );
            }
        }
    }
}

#[tokio::test]
async fn the_agent_limit_cuts_collections_and_says_so() {
    let tester = Tester::new(server());
    let result = tester.call("billing.list_invoices", json!({})).await;
    assert_eq!(result.data().as_array().map(Vec::len), Some(3));
    assert_eq!(result.truncation(), Some((3, 10)));
    let notice = result
        .texts()
        .into_iter()
        .find(|text| text.starts_with("<truncation"))
        .expect("a truncation notice");
    assert!(notice.contains("shown=\"3\"") && notice.contains("total=\"10\""));
    assert!(notice.contains("filters"), "{notice}");
    // A collection within the limit is not cut.
    let small = tester
        .call(
            "billing.list_invoices",
            json!({"status": "paid", "customer_id": "C-2"}),
        )
        .await;
    assert_eq!(small.truncation(), None);
    assert!(
        small
            .texts()
            .iter()
            .all(|text| !text.starts_with("<truncation"))
    );
}

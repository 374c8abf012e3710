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
    // A client that draws UI: the UI blocks come between the data and the rules.
    let tester = Tester::new(server()).rendering_ui();
    let result = tester
        .call("billing.get_invoice", json!({"id": "INV-1"}))
        .await;
    assert!(!result.is_error());
    assert_eq!(result.raw().is_error, Some(false));
    let envelope = result.envelope();
    assert_eq!(envelope["ok"], true);
    // The tool and its version are in the listing; no fact varies for this call, and the
    // suggestions are in the text: nothing but `ok` and `data` (issue 21).
    assert_eq!(
        envelope.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["data", "ok"]
    );
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
    // Any other client reads the same answer without them.
    let lean = Tester::new(server())
        .call("billing.get_invoice", json!({"id": "INV-1"}))
        .await;
    assert_eq!(lean.envelope(), envelope);
    assert_eq!(lean.texts()[0], texts[0]);
    assert_eq!(lean.texts()[1..], texts[6..]);
    assert!(lean.ui_blocks().is_empty());
}

/// Calls covering every action of the test server, each with at least one success and one
/// error: `(key, arguments, whether the call fails)`.
fn calls_of_every_action() -> Vec<(&'static str, Value, bool)> {
    vec![
        ("billing.get_invoice", json!({"id": "INV-3"}), false),
        ("billing.get_invoice", json!({"id": "INV-404"}), true),
        ("billing.get_invoice", json!({}), true),
        ("billing.list_invoices", json!({}), false),
        ("billing.list_invoices", json!({"status": "paid"}), false),
        ("billing.list_invoices", json!({"status": "lost"}), true),
        ("billing.summaries", json!({}), false),
        ("billing.summaries", json!({"id": "INV-1"}), true),
        ("billing.void_invoice", json!({"id": "INV-1"}), false),
        ("billing.void_invoice", json!({"id": "INV-1"}), true),
        (
            "billing.create_invoice",
            json!({"customer_id": "C-1", "total_cents": 1}),
            false,
        ),
        (
            "billing.create_invoice",
            json!({"customer_id": "C-1", "total_cents": 1, "tenant_id": "t_other"}),
            true,
        ),
        (
            "billing.update_invoice",
            json!({"id": "INV-2", "memo": "updated"}),
            false,
        ),
        (
            "billing.update_invoice",
            json!({"id": "INV-404", "memo": "x"}),
            true,
        ),
        ("ops.health", json!({}), false),
        ("ops.health", json!({"verbose": true}), true),
        ("ops.reindex", json!({"fail_with": "nothing"}), false),
        ("ops.reindex", json!({"fail_with": "io"}), true),
        ("ops.reindex", json!({"fail_with": "busy"}), true),
        ("ops.reindex", json!({"fail_with": "panic"}), true),
    ]
}

fn output_schema(server: &fusion::Server, key: &str) -> Value {
    let tool = server
        .tool(server.action(key).unwrap().exposed_tool())
        .unwrap();
    Value::Object((**tool.definition().output_schema.as_ref().unwrap()).clone())
}

#[tokio::test]
async fn every_result_validates_against_the_advertised_output_schema_in_both_expositions() {
    for exposition in [fusion::Exposition::Flat, fusion::Exposition::Grouped] {
        let server = server_with(exposition);
        let tester = Tester::new(server.clone());
        let calls = calls_of_every_action();
        // The list covers every action, each with a success and an error.
        for action in server.actions() {
            for fails in [false, true] {
                assert!(
                    calls
                        .iter()
                        .any(|(key, _, f)| *key == action.key().to_string() && *f == fails),
                    "{}: no call with is_error = {fails}",
                    action.key()
                );
            }
        }
        for (key, arguments, fails) in calls {
            let result = tester.call(key, arguments.clone()).await;
            assert_eq!(
                result.is_error(),
                fails,
                "{exposition:?} {key} {arguments}: {}",
                result.raw_text()
            );
            let schema = output_schema(&server, key);
            assert_valid(&schema, result.envelope());
            // The schema is not vacuous: `ok` is required and a boolean, and a success's
            // `data` is the tool's (a success and a failure both validate against the one
            // schema, which no longer spends a `oneOf` on telling them apart: `ok` does).
            let mut wrong = result.envelope().clone();
            wrong["ok"] = json!("yes");
            assert!(
                !jsonschema::is_valid(&schema, &wrong),
                "{exposition:?} {key}: {wrong} should not validate"
            );
            if !fails && schema["properties"]["data"].get("type").is_some() {
                let mut wrong = result.envelope().clone();
                wrong["data"] = json!(true);
                assert!(
                    !jsonschema::is_valid(&schema, &wrong),
                    "{exposition:?} {key}: {wrong} should not validate"
                );
            }
        }
    }
}

#[tokio::test]
async fn grouped_errors_before_dispatch_validate_against_the_grouped_output_schema() {
    let server = server_with(fusion::Exposition::Grouped);
    let tester = Tester::new(server.clone());
    let schema = Value::Object(
        (**server
            .tool("billing")
            .unwrap()
            .definition()
            .output_schema
            .as_ref()
            .unwrap())
        .clone(),
    );
    for arguments in [
        json!({"action": "delete_everything"}),
        json!({"id": "INV-1"}),
        json!({"action": 3}),
    ] {
        let result = tester.call_exposed("billing", arguments).await.unwrap();
        assert!(result.is_error());
        assert_valid(&schema, result.envelope());
    }
}

/// The schema of `data` in a success envelope schema.
fn data_schema(envelope: &Value) -> &Value {
    &envelope["properties"]["data"]
}

#[test]
fn grouped_output_schemas_describe_data_as_any_of_the_actions_views() {
    let server = server_with(fusion::Exposition::Grouped);
    for tool in server.tools() {
        let grouped = Value::Object((**tool.definition().output_schema.as_ref().unwrap()).clone());
        let shapes = data_schema(&grouped)["anyOf"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: data is anyOf the actions' data", tool.name()));
        // Every action's own data schema is one of the shapes.
        for action in tool.actions() {
            let own = Value::Object(action.output_schema().clone());
            assert!(
                shapes.contains(data_schema(&own)),
                "{}: {own} is not among {shapes:?}",
                action.key()
            );
        }
    }
    // A summary is not an invoice view, and a hidden field is no shape at all.
    let billing = output_schema(&server, "billing.get_invoice");
    let matches = |instance: Value| {
        let mut standalone = data_schema(&billing).clone();
        standalone["$defs"] = billing["$defs"].clone();
        jsonschema::is_valid(&standalone, &instance)
    };
    assert!(matches(json!([{"id": "INV-1", "status": "open"}])));
    assert!(matches(
        json!({"id": "INV-1", "customer_id": "C-1", "total_cents": 1000, "status": "open", "memo": null})
    ));
    assert!(!matches(json!({"id": "INV-1", "status": "open"})));
    assert!(!matches(
        json!({"id": "INV-1", "status": "open", "webhook_secret": "whsec_1"})
    ));
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

/// A uniform list reads as a table by default; a server (or a tool) whose clients' programs
/// parse the text copy keeps it JSON.
#[tokio::test]
async fn a_server_may_keep_the_json_text_copy_of_its_lists() {
    let list = |server| async move {
        Tester::new(server)
            .call("billing.list_invoices", json!({}))
            .await
    };
    let compact = list(server()).await;
    assert!(
        compact
            .data()
            .as_array()
            .is_some_and(|items| items.len() >= 2)
    );
    assert!(
        compact.texts()[0].starts_with('['),
        "{}",
        compact.texts()[0]
    );
    assert!(serde_json::from_str::<Value>(compact.texts()[0]).is_err());
    let json_server = tools(
        fusion::ServerBuilder::new("billing", "1.4.0")
            .state(Db::seeded())
            .data_text(fusion::envelope::DataText::Json),
    )
    .build()
    .unwrap();
    let json = list(json_server).await;
    let text: Value = serde_json::from_str(json.texts()[0]).expect("the text copy is JSON");
    assert_eq!(&text, json.data());
    // Each record's keys in the presenter's order, as its view writes them (the text is
    // written from the data only for a client that reads it).
    assert!(
        json.texts()[0].starts_with(
            r#"[{"id":"INV-1","customer_id":"C-1","total_cents":1000,"status":"open","memo":null},"#
        ),
        "{}",
        json.texts()[0]
    );
    assert_eq!(json.envelope(), compact.envelope());
}

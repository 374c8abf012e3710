//! The built registry can be read back entirely (for the capability lockfile), and tools can be
//! declared without macros.

mod common;

use common::*;
use fusion::testing::Tester;
use fusion::{CallContext, ServerBuilder, ToolError, ToolSpec, Verb};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[test]
fn every_action_schema_annotation_presenter_rule_and_glob_is_introspectable() {
    let server = server();
    assert_eq!(server.name(), "billing");
    assert_eq!(server.actions().len(), 8);
    let get = server.action("billing.get_invoice").unwrap();
    assert_eq!(get.key().namespace(), Some("billing"));
    assert_eq!(get.key().action(), "get_invoice");
    assert_eq!(get.verb(), Verb::Query);
    assert_eq!(get.description(), "Gets one invoice by id.");
    assert_eq!(get.tags(), ["billing", "read"]);
    assert_eq!(get.exposed_tool(), "billing_get_invoice");
    assert_eq!(
        get.error_actions(),
        ["billing.list_invoices", "billing.get_invoice"]
    );
    let presenter = get.presenter().unwrap();
    assert_eq!(presenter.name, "InvoiceView");
    assert_eq!(presenter.model, "Invoice");
    assert_eq!(
        presenter.fields,
        ["id", "customer_id", "total_cents", "status", "memo"]
    );
    assert_eq!(
        presenter.rules.last(),
        Some(&"Amounts are cents: divide by 100 for display.")
    );
    assert_eq!(
        presenter.actions,
        ["billing.void_invoice", "billing.get_invoice"]
    );
    assert_eq!(get.input_schema()["required"], json!(["id"]));
    assert_eq!(
        get.output_schema()["properties"]["data"]["properties"]["id"]["type"],
        "string"
    );
    assert_eq!(get.output_schema()["required"], json!(["ok"]));
    assert!(server.action("ops.health").unwrap().presenter().is_none());
    let tool = server.tool("billing_get_invoice").unwrap();
    assert_eq!(tool.actions().len(), 1);
}

#[derive(Deserialize, JsonSchema)]
struct Echo {
    /// What to repeat.
    text: String,
    times: Option<u8>,
}

#[derive(Serialize, JsonSchema)]
struct Echoed {
    text: String,
}

#[tokio::test]
async fn tools_built_without_macros_run_the_same_pipeline() {
    let spec = ToolSpec::action("util.echo", "Repeats text.")
        .with_title("Echo")
        .with_tags(["util"])
        .handler(|context: CallContext, args: Echo| async move {
            let prefix = context
                .state::<String>()
                .map(|prefix| (*prefix).clone())
                .unwrap_or_default();
            if args.text == "fail" {
                return Err(ToolError::conflict("refused"));
            }
            Ok(Echoed {
                text: format!(
                    "{prefix}{}",
                    args.text.repeat(usize::from(args.times.unwrap_or(1)))
                ),
            })
        });
    let server = ServerBuilder::new("util", "0.1.0")
        .state(String::from("> "))
        .tool_spec(spec)
        .build()
        .unwrap();
    let tester = Tester::new(server.clone());
    let ok = tester
        .call("util.echo", json!({"text": "ab", "times": 2}))
        .await;
    assert_eq!(ok.data(), &json!({"text": "> abab"}));
    let invalid = tester
        .call("util.echo", json!({"text": "ab", "times": 300, "extra": 1}))
        .await;
    assert_eq!(invalid.error_code(), Some("VALIDATION_ERROR"));
    let fields: Vec<&Value> = invalid.error()["details"]["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|issue| &issue["field"])
        .collect();
    assert_eq!(fields, [&json!("times"), &json!("extra")]);
    let conflict = tester.call("util.echo", json!({"text": "fail"})).await;
    assert_eq!(conflict.error_code(), Some("CONFLICT"));
    let schema = server.action("util.echo").unwrap().input_schema();
    assert_eq!(
        schema["properties"]["text"]["description"],
        "What to repeat."
    );
    assert_eq!(schema["additionalProperties"], false);
}

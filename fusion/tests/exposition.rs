//! Flat and grouped exposition (SPEC T2): settings stay per action in both.

mod common;

use common::*;
use fusion::testing::Tester;
use fusion::{ActionInfo, CallContext, Exposition, Principal, ServerBuilder, Verb, tool};
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
    // The grouped tool that carries the stale queries, named once.
    assert_eq!(voided.invalidations(), ["billing"]);
    let created = tester
        .call(
            "billing.create_invoice",
            json!({"customer_id": "C", "total_cents": 2}),
        )
        .await;
    assert_eq!(created.invalidations(), ["billing"]);
    let grouped = tester.server().tool("billing").unwrap().definition();
    let described = grouped.description.as_deref().unwrap();
    assert!(
        described.contains(
            "earlier results of `billing` with `{\"action\":\"list_invoices\"}`, `billing` \
             with `{\"action\":\"summaries\"}` are stale."
        ),
        "{described}"
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

// ---------------------------------------------------------------------------------------------
// Per caller: what an access policy lets each caller see and call

/// Reads for everyone with a principal; writes with the `write` scope; nothing for `nobody`.
fn policy(call: &CallContext, action: ActionInfo<'_>) -> bool {
    match call.principal() {
        Some(principal) if principal.subject == "nobody" => false,
        Some(principal) => action.verb() == Verb::Query || principal.has_scope("write"),
        None => false,
    }
}

fn guarded_server(exposition: Exposition) -> fusion::Server {
    tools(
        ServerBuilder::new("billing", "1.4.0")
            .exposition(exposition)
            .state(Db::seeded())
            .access(policy),
    )
    .build()
    .expect("the test server builds")
}

fn caller(subject: &str, scopes: &[&str]) -> impl Fn(&mut CallContext) + Send + Sync + 'static {
    let principal =
        Principal::new(subject).with_scopes(scopes.iter().map(|scope| (*scope).to_owned()));
    move |call: &mut CallContext| {
        call.extensions_mut().insert(principal.clone());
    }
}

fn context_of(server: &fusion::Server, subject: &str, scopes: &[&str]) -> CallContext {
    let mut context = server.new_context();
    caller(subject, scopes)(&mut context);
    context
}

fn input_of(definition: &fusion::protocol::model::Tool) -> Value {
    Value::Object((*definition.input_schema).clone())
}

#[test]
fn grouped_tools_list_only_the_actions_each_caller_may_call() {
    let server = guarded_server(Exposition::Grouped);
    let reader = server.visible_tools(&context_of(&server, "reader", &[]));
    let names: Vec<&str> = reader.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, ["billing", "ops"]);
    let billing = &reader[0];
    let input = input_of(billing);
    assert_eq!(
        input["properties"]["action"]["enum"],
        json!(["get_invoice", "list_invoices", "summaries"])
    );
    let branches: Vec<&Value> = input["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|branch| &branch["properties"]["action"]["const"])
        .collect();
    assert_eq!(
        branches,
        [
            &json!("get_invoice"),
            &json!("list_invoices"),
            &json!("summaries")
        ]
    );
    // Arguments only writes take are not described either.
    for argument in ["notify", "total_cents", "memo"] {
        assert!(input["properties"].get(argument).is_none(), "{input}");
    }
    let description = billing.description.as_deref().unwrap();
    for write in ["void_invoice", "create_invoice", "update_invoice"] {
        assert!(!description.contains(write), "{description}");
        assert!(!input.to_string().contains(write), "{input}");
    }
    // Annotations describe what this caller may do: read only.
    let annotations = billing.annotations.clone().unwrap();
    assert_eq!(annotations.read_only_hint, Some(true));
    assert_eq!(annotations.destructive_hint, Some(false));
    let meta = billing.meta.as_ref().unwrap();
    assert_eq!(meta.0["dev.fusion/actions"].as_array().unwrap().len(), 3);
    // `ops` keeps its read, `reindex` (an action) is gone.
    assert_eq!(
        input_of(&reader[1])["properties"]["action"]["enum"],
        json!(["health"])
    );

    // A writer sees the tools whole, as built.
    let writer = server.visible_tools(&context_of(&server, "writer", &["write"]));
    let whole: Vec<fusion::protocol::model::Tool> = server
        .tools()
        .map(|tool| tool.definition().clone())
        .collect();
    assert_eq!(writer, whole);
    // A caller who may call nothing sees nothing.
    assert!(
        server
            .visible_tools(&context_of(&server, "nobody", &[]))
            .is_empty()
    );
    // Callers with the same rights get the same definition (built once, then reused).
    let again = server.visible_tools(&context_of(&server, "another reader", &[]));
    assert_eq!(again, reader);
}

#[test]
fn flat_tools_list_only_what_each_caller_may_call() {
    let server = guarded_server(Exposition::Flat);
    let reader = server.visible_tools(&context_of(&server, "reader", &[]));
    let names: Vec<&str> = reader.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "billing_get_invoice",
            "billing_list_invoices",
            "billing_summaries",
            "ops_health"
        ]
    );
    assert_eq!(
        server
            .visible_tools(&context_of(&server, "writer", &["write"]))
            .len(),
        8
    );
}

#[tokio::test]
async fn unknown_or_missing_actions_list_only_what_the_caller_may_call() {
    let server = guarded_server(Exposition::Grouped);
    let reader = Tester::new(server.clone()).with_context(caller("reader", &[]));
    for arguments in [json!({"action": "refund"}), json!({"id": "INV-1"})] {
        let refused = reader
            .call_exposed("billing", arguments.clone())
            .await
            .unwrap();
        assert!(
            matches!(
                refused.error_code(),
                Some("UNKNOWN_ACTION" | "MISSING_DISCRIMINATOR")
            ),
            "{arguments}: {}",
            refused.raw_text()
        );
        assert_eq!(
            refused.error()["details"]["validActions"],
            json!(["get_invoice", "list_invoices", "summaries"])
        );
        let text = refused.raw_text();
        for write in ["void_invoice", "create_invoice", "update_invoice"] {
            assert!(!text.contains(write), "{text}");
        }
    }
    // An action it may not call is refused by name.
    let denied = reader
        .call_exposed("billing", json!({"action": "void_invoice", "id": "INV-1"}))
        .await
        .unwrap();
    assert_eq!(denied.error_code(), Some("FORBIDDEN"));
    assert!(
        denied.error()["message"]
            .as_str()
            .unwrap()
            .contains("void_invoice")
    );
    // A caller who may call none of the tool's actions hears of none.
    let nobody = Tester::new(server.clone()).with_context(caller("nobody", &[]));
    for arguments in [json!({"action": "refund"}), json!({})] {
        let refused = nobody.call_exposed("billing", arguments).await.unwrap();
        assert_eq!(refused.error_code(), Some("FORBIDDEN"));
        assert_eq!(refused.error()["details"], Value::Null);
        let text = refused.raw_text();
        for action in ["get_invoice", "list_invoices", "summaries", "void_invoice"] {
            assert!(!text.contains(action), "{text}");
        }
    }
    // A writer hears of every action.
    let writer = Tester::new(server).with_context(caller("writer", &["write"]));
    let unknown = writer
        .call_exposed("billing", json!({"action": "refund"}))
        .await
        .unwrap();
    assert_eq!(
        unknown.error()["details"]["validActions"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
}

// ---------------------------------------------------------------------------------------------
// Canonical keys in author text

#[derive(Debug, fusion::ToolError)]
enum NoteError {
    #[tool_error(
        code = "NoteNotFound",
        message = "Note {0} does not exist: `billing.get_invoice` shows invoices, `notes.missing` is no tool.",
        recovery = "Call `billing.list_invoices` to find valid ids, then `ops.health`."
    )]
    NotFound(String),
}

/// Finds a note; ids come from `billing.list_invoices` (not billing.get_invoice).
#[tool(query, name = "notes.find")]
async fn find_note(id: String) -> Result<String, NoteError> {
    Err(NoteError::NotFound(id))
}

const INSTRUCTIONS: &str =
    "Start with `billing.list_invoices`; `billing.nothing` and `billing_list_invoices` stay.";

fn noted_server(exposition: Exposition) -> fusion::Server {
    tools(
        ServerBuilder::new("billing", "1.4.0")
            .exposition(exposition)
            .instructions(INSTRUCTIONS)
            .state(Db::seeded()),
    )
    .tool::<find_note>()
    .build()
    .expect("the test server builds")
}

#[tokio::test]
async fn tool_keys_in_author_text_are_written_as_the_agent_calls_them() {
    let list_grouped = "`billing` with `{\"action\":\"list_invoices\"}`";
    for (exposition, list, get, health) in [
        (
            Exposition::Flat,
            "`billing_list_invoices`",
            "`billing_get_invoice`",
            "`ops_health`",
        ),
        (
            Exposition::Grouped,
            list_grouped,
            "`billing` with `{\"action\":\"get_invoice\"}`",
            "`ops` with `{\"action\":\"health\"}`",
        ),
    ] {
        let server = noted_server(exposition);
        // Server instructions.
        assert_eq!(
            server.instructions(),
            Some(
                format!("Start with {list}; `billing.nothing` and `billing_list_invoices` stay.")
                    .as_str()
            ),
            "{exposition:?}"
        );
        // Tool descriptions.
        let notes = server.tool(server.action("notes.find").unwrap().exposed_tool());
        let description = notes.unwrap().definition().description.clone().unwrap();
        assert!(
            description.contains(&format!(
                "Finds a note; ids come from {list} (not billing.get_invoice)."
            )),
            "{exposition:?}: {description}"
        );
        // Error messages and recovery lines, in the envelope and in the text block.
        let failed = Tester::new(server)
            .call("notes.find", json!({"id": "N-1"}))
            .await;
        assert_eq!(failed.error_code(), Some("NoteNotFound"));
        assert_eq!(
            failed.error()["message"],
            format!("Note N-1 does not exist: {get} shows invoices, `notes.missing` is no tool.")
        );
        let recovery = format!("Call {list} to find valid ids, then {health}.");
        assert_eq!(failed.error()["recovery"], recovery.as_str());
        let escaped = recovery.replace('"', "&quot;");
        assert!(
            failed.texts()[0].contains(&recovery) || failed.texts()[0].contains(&escaped),
            "{}",
            failed.texts()[0]
        );
    }
}

#[tokio::test]
async fn author_text_without_backticks_is_left_as_written() {
    let tester = Tester::new(server_with(Exposition::Grouped));
    let missing = tester
        .call("billing.get_invoice", json!({"id": "INV-404"}))
        .await;
    assert_eq!(
        missing.error()["recovery"],
        "Call billing.list_invoices to find valid ids."
    );
}

#[tokio::test]
async fn the_tester_takes_exposed_names_as_well_as_keys() {
    let flat = Tester::new(server());
    let by_key = flat
        .call("billing.get_invoice", json!({"id": "INV-1"}))
        .await;
    let by_name = flat
        .call("billing_get_invoice", json!({"id": "INV-1"}))
        .await;
    assert_eq!(by_key.data(), by_name.data());
    assert_eq!(by_name.data()["id"], "INV-1");

    // Grouped: the exposed name takes the discriminator as the agent sends it.
    let grouped = Tester::new(server_with(Exposition::Grouped));
    let result = grouped
        .call("billing", json!({"action": "get_invoice", "id": "INV-2"}))
        .await;
    assert_eq!(result.data()["id"], "INV-2");
}

#[tokio::test]
#[should_panic(
    expected = "no tool with key or name `billing.get_invoce`; did you mean `billing.get_invoice`?"
)]
async fn the_tester_says_which_key_a_typo_meant() {
    Tester::new(server())
        .call("billing.get_invoce", json!({"id": "INV-1"}))
        .await;
}

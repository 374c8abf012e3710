//! Search mode (`Mcp::discovery(Discovery::search())`): `tools/list` holds `find_tools` and
//! `call_tool`; a search finds exactly what the caller may list in full (the access policy
//! decides, per caller); a tool found is called by its name, unlisted, or through
//! `call_tool`. Both protocol eras, over rmcp's client on an in-memory duplex.

mod common;

use std::future::Future;
use std::time::Duration;

use common::*;
use fusion::protocol as rmcp;
use fusion::serve::{CALL_TOOL, Discovery, FIND_TOOLS, Mcp, ToolSearch};
use fusion::{ActionInfo, CallContext, Principal, ServerBuilder, Verb};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, InitializeResult, ProtocolVersion, Tool,
};
use rmcp::service::{RunningService, ServiceError, serve_directly};
use rmcp::{RoleClient, RoleServer, ServiceExt};
use serde_json::{Value, json};

async fn within<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), future)
        .await
        .expect("the test did not finish in time")
}

/// Reads for every caller; writes with the `write` scope.
fn policy(call: &CallContext, action: ActionInfo<'_>) -> bool {
    call.principal()
        .is_some_and(|principal| action.verb() == Verb::Query || principal.has_scope("write"))
}

fn guarded_server() -> fusion::Server {
    tools(
        ServerBuilder::new("billing", "1.4.0")
            .state(Db::seeded())
            .access(policy),
    )
    .build()
    .expect("the test server builds")
}

fn as_caller(mcp: Mcp, scopes: &[&str]) -> Mcp {
    let principal =
        Principal::new("someone").with_scopes(scopes.iter().map(|scope| (*scope).to_owned()));
    mcp.context(move |_request, call| {
        call.extensions_mut().insert(principal.clone());
    })
}

type Client = RunningService<RoleClient, ()>;

/// rmcp's client on `era`: a 2025-11-25 session (with its handshake), or 2026-07-28 without
/// one.
async fn connect(mcp: &Mcp, era: &ProtocolVersion) -> Client {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    if *era == ProtocolVersion::V_2026_07_28 {
        let mut client_info = ClientConfig::default();
        client_info.protocol_version = era.clone();
        let mut server_info = InitializeResult::default();
        server_info.protocol_version = era.clone();
        let running =
            serve_directly::<RoleServer, _, _, _, _>(mcp.handler(), server_io, Some(client_info));
        tokio::spawn(async move {
            let _ = running.waiting().await;
        });
        return serve_directly::<RoleClient, _, _, _, _>((), client_io, Some(server_info.into()));
    }
    let handler = mcp.handler();
    tokio::spawn(async move {
        let running = handler.serve(server_io).await.expect("server handshake");
        let _ = running.waiting().await;
    });
    ().serve(client_io).await.expect("client handshake")
}

const ERAS: [ProtocolVersion; 2] = [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28];

async fn call(
    client: &Client,
    tool: &str,
    arguments: Value,
) -> Result<CallToolResult, ServiceError> {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object");
    };
    client
        .peer()
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
        .await
}

fn text(result: &CallToolResult) -> &str {
    &result.content[0].as_text().expect("a text block").text
}

/// The names of the tools a `find_tools` answer holds.
fn found(result: &CallToolResult) -> Vec<String> {
    assert_ne!(result.is_error, Some(true), "{}", text(result));
    let answer: Value = serde_json::from_str(text(result)).expect("JSON");
    answer["tools"]
        .as_array()
        .expect("a list of tools")
        .iter()
        .map(|tool| tool["name"].as_str().expect("a name").to_owned())
        .collect()
}

fn names(tools: &[Tool]) -> Vec<String> {
    tools.iter().map(|tool| tool.name.to_string()).collect()
}

#[tokio::test]
async fn a_caller_finds_exactly_what_it_may_list_in_full() {
    within(async {
        let server = guarded_server();
        let search = Discovery::Search(ToolSearch::default().max_results(50));
        for era in &ERAS {
            for (scopes, may_write) in [(&[][..], false), (&["write"][..], true)] {
                let full = connect(&as_caller(Mcp::new(server.clone()), scopes), era).await;
                let listed_in_full = full.peer().list_all_tools().await.unwrap();
                full.cancel().await.unwrap();
                let searching = connect(
                    &as_caller(Mcp::new(server.clone()).discovery(search.clone()), scopes),
                    era,
                )
                .await;

                // The listing is the index: the two search tools.
                let index = searching.peer().list_all_tools().await.unwrap();
                assert_eq!(names(&index), [FIND_TOOLS, CALL_TOOL], "{era:?} {scopes:?}");
                let description = index[0].description.as_deref().unwrap();
                let billing = listed_in_full
                    .iter()
                    .filter(|tool| tool.name.starts_with("billing_"))
                    .count();
                assert!(
                    description.contains(&format!("billing ({billing})")),
                    "{era:?} {scopes:?}: {description}"
                );
                assert!(
                    description.contains(&format!("among this server's {}", listed_in_full.len())),
                    "{description}"
                );

                // A whole namespace: what the full listing holds of it, in its order.
                let billing_found = found(
                    &call(&searching, FIND_TOOLS, json!({"namespace": "billing"}))
                        .await
                        .unwrap(),
                );
                let billing_listed: Vec<String> = names(&listed_in_full)
                    .into_iter()
                    .filter(|name| name.starts_with("billing_"))
                    .collect();
                assert_eq!(billing_found, billing_listed, "{era:?} {scopes:?}");

                // A query: the writer finds the tool that voids an invoice first; the reader,
                // who may not call it, does not find it at all.
                let voiding = found(
                    &call(&searching, FIND_TOOLS, json!({"query": "void an invoice"}))
                        .await
                        .unwrap(),
                );
                assert_eq!(
                    voiding.first().map(String::as_str) == Some("billing_void_invoice"),
                    may_write,
                    "{era:?} {scopes:?}: {voiding:?}"
                );
                assert!(
                    voiding
                        .iter()
                        .all(|name| listed_in_full.iter().any(|tool| tool.name == name.as_str())),
                    "{era:?} {scopes:?}: found {voiding:?}, may list {:?}",
                    names(&listed_in_full)
                );
                searching.cancel().await.unwrap();
            }
        }
    })
    .await;
}

#[tokio::test]
async fn a_found_tool_is_called_by_its_name_or_through_call_tool() {
    within(async {
        let server = guarded_server();
        for era in &ERAS {
            let reader = connect(
                &as_caller(Mcp::new(server.clone()).discovery(Discovery::search()), &[]),
                era,
            )
            .await;
            let answer = call(&reader, FIND_TOOLS, json!({"query": "get invoice"}))
                .await
                .unwrap();
            let answer: Value = serde_json::from_str(text(&answer)).unwrap();
            let get = &answer["tools"][0];
            assert_eq!(get["name"], "billing_get_invoice", "{answer}");
            // What the agent needs to call it: its description and input schema.
            assert_eq!(get["inputSchema"]["required"], json!(["id"]), "{answer}");
            assert!(get["description"].as_str().is_some(), "{answer}");

            // By its name, never listed, and through `call_tool`: the same answer.
            let direct = call(&reader, "billing_get_invoice", json!({"id": "INV-1"}))
                .await
                .unwrap();
            assert_ne!(direct.is_error, Some(true), "{}", text(&direct));
            assert_eq!(
                direct.structured_content.as_ref().unwrap()["data"]["id"],
                "INV-1"
            );
            let through = call(
                &reader,
                CALL_TOOL,
                json!({"name": "billing_get_invoice", "arguments": {"id": "INV-1"}}),
            )
            .await
            .unwrap();
            assert_eq!(through.structured_content, direct.structured_content);

            // What the caller may not call stays refused, whichever way it is called.
            let runs = db(&server).runs();
            for (tool, arguments) in [
                ("billing_void_invoice", json!({"id": "INV-1"})),
                (
                    CALL_TOOL,
                    json!({"name": "billing_void_invoice", "arguments": {"id": "INV-1"}}),
                ),
            ] {
                let refused = call(&reader, tool, arguments).await;
                let refused_directly =
                    call(&reader, "billing_void_invoice", json!({"id": "INV-1"})).await;
                match (refused, refused_directly) {
                    (Ok(refused), Ok(directly)) => {
                        assert_eq!(refused.is_error, Some(true), "{era:?} {tool}");
                        assert_eq!(
                            refused
                                .structured_content
                                .as_ref()
                                .map(|body| &body["error"]["code"]),
                            directly
                                .structured_content
                                .as_ref()
                                .map(|body| &body["error"]["code"]),
                        );
                    }
                    (
                        Err(ServiceError::McpError(refused)),
                        Err(ServiceError::McpError(directly)),
                    ) => {
                        assert_eq!(refused.code, directly.code, "{era:?} {tool}");
                    }
                    other => panic!("{era:?} {tool}: refused differently: {other:?}"),
                }
            }
            assert_eq!(db(&server).runs(), runs, "no refused call ran");

            // An unknown tool is unknown either way.
            for (tool, arguments) in [
                ("billing_nothing", json!({})),
                (CALL_TOOL, json!({"name": "billing_nothing"})),
            ] {
                match call(&reader, tool, arguments).await {
                    Err(ServiceError::McpError(error)) => {
                        assert!(
                            error.message.contains("unknown tool: billing_nothing"),
                            "{error:?}"
                        );
                    }
                    other => panic!("{tool}: {other:?}"),
                }
            }
            reader.cancel().await.unwrap();
        }
    })
    .await;
}

#[tokio::test]
async fn bad_search_arguments_are_answered_with_what_is_wrong() {
    within(async {
        let mcp = as_caller(
            Mcp::new(guarded_server()).discovery(Discovery::search()),
            &[],
        );
        let client = connect(&mcp, &ProtocolVersion::V_2025_11_25).await;
        for (tool, arguments, expected) in [
            (FIND_TOOLS, json!({}), "needs a `query`"),
            (
                FIND_TOOLS,
                json!({"query": "invoice", "limit": -1}),
                "positive integer",
            ),
            (CALL_TOOL, json!({"arguments": {}}), "needs `name`"),
            (
                CALL_TOOL,
                json!({"name": "billing_get_invoice", "arguments": "INV-1"}),
                "must be an object",
            ),
        ] {
            let result = call(&client, tool, arguments.clone()).await.unwrap();
            assert_eq!(result.is_error, Some(true), "{tool} {arguments}");
            assert!(
                text(&result).contains(expected),
                "{tool} {arguments}: {}",
                text(&result)
            );
        }
        client.cancel().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn pinned_tools_stay_listed_and_full_mode_is_unchanged() {
    within(async {
        let server = guarded_server();
        let pinned = Discovery::Search(
            ToolSearch::default()
                .pin("billing_get_invoice")
                .pin("billing_void_invoice"),
        );
        // The reader may not call `billing_void_invoice`: it is not listed to it, pinned or not.
        let reader = connect(
            &as_caller(Mcp::new(server.clone()).discovery(pinned), &[]),
            &ProtocolVersion::V_2025_11_25,
        )
        .await;
        assert_eq!(
            names(&reader.peer().list_all_tools().await.unwrap()),
            [FIND_TOOLS, CALL_TOOL, "billing_get_invoice"]
        );
        reader.cancel().await.unwrap();

        // The default lists every tool the caller may call, and no search tool.
        let full = connect(
            &as_caller(Mcp::new(server.clone()), &["write"]),
            &ProtocolVersion::V_2025_11_25,
        )
        .await;
        let listed = full.peer().list_all_tools().await.unwrap();
        let built: Vec<Tool> = server
            .tools()
            .map(|tool| tool.definition().clone())
            .collect();
        assert_eq!(listed, built);
        match call(&full, FIND_TOOLS, json!({"query": "invoice"})).await {
            Err(ServiceError::McpError(error)) => assert!(error.message.contains("unknown tool")),
            other => panic!("{other:?}"),
        }
        full.cancel().await.unwrap();
    })
    .await;
}

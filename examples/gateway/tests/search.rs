//! A gateway in search mode: `tools/list` holds `find_tools` and `call_tool` (and the tools
//! pinned beside them), a search finds the mounted tools the caller may call and no other,
//! and a tool found is called by its name or through `call_tool`. In process over both
//! protocol eras, and the binary with `--tool-search` over HTTP with two bearer tokens.

mod support;

use fusion::gateway::Upstream;
use fusion::serde_json::{Value, json};
use fusion::serve::{CALL_TOOL, Discovery, FIND_TOOLS, Mcp, ToolSearch};
use fusion::{ActionInfo, CallContext, Principal, ServerBuilder};
use rmcp::model::{CallToolResult, ClientConfig, InitializeResult, ProtocolVersion};
use rmcp::service::{RunningService, serve_directly};
use rmcp::{RoleClient, RoleServer, ServiceExt as _};
use support::recorder::Recorder;
use support::*;

/// rmcp's client as `who`, on a 2025-11-25 session or on 2026-07-28 without a handshake.
async fn connect_as(mcp: &Mcp, who: &str, era: &ProtocolVersion) -> RunningService<RoleClient, ()> {
    let principal = Principal::new(who);
    let mcp = mcp.clone().context(move |_request, call| {
        call.extensions_mut().insert(principal.clone());
    });
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

/// The names of the tools a `find_tools` answer holds.
fn found(result: &CallToolResult) -> Vec<String> {
    assert_ne!(result.is_error, Some(true), "{}", text_of(result));
    let answer: Value = fusion::serde_json::from_str(&text_of(result)).expect("JSON");
    answer["tools"]
        .as_array()
        .expect("a list of tools")
        .iter()
        .map(|tool| tool["name"].as_str().expect("a name").to_owned())
        .collect()
}

#[tokio::test]
async fn a_gateway_in_search_mode_finds_what_each_caller_may_call() {
    within(async {
        let upstream = Recorder::start().await;
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount("up", Upstream::http(&upstream.url))
            // Bob may not delete.
            .access(|call: &CallContext, action: ActionInfo<'_>| {
                let bob = call
                    .principal()
                    .is_some_and(|principal| principal.subject == "bob");
                !(bob && action.key().as_str() == "up.delete")
            })
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let mcp = Mcp::new(server.clone())
            .discovery(Discovery::Search(ToolSearch::default().pin("up_echo")));
        for era in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28] {
            for (who, may_delete) in [("alice", true), ("bob", false)] {
                let client = connect_as(&mcp, who, &era).await;
                let peer = client.peer();
                let listed = peer.list_all_tools().await.unwrap();
                let names: Vec<&str> = listed.iter().map(|tool| tool.name.as_ref()).collect();
                assert_eq!(names, [FIND_TOOLS, CALL_TOOL, "up_echo"], "{era:?} {who}");
                // The index counts what this caller may call: six tools, or five for bob.
                let description = listed[0].description.as_deref().unwrap();
                let count = if may_delete { 6 } else { 5 };
                assert!(
                    description.contains(&format!("Namespaces: up ({count})")),
                    "{era:?} {who}: {description}"
                );

                let deleting = found(
                    &call(peer, FIND_TOOLS, json!({"query": "delete everything"}))
                        .await
                        .unwrap(),
                );
                assert_eq!(
                    deleting.contains(&"up_delete".to_owned()),
                    may_delete,
                    "{era:?} {who}: {deleting:?}"
                );
                let echoing = found(
                    &call(peer, FIND_TOOLS, json!({"query": "echo a message"}))
                        .await
                        .unwrap(),
                );
                assert_eq!(echoing[0], "up_echo", "{era:?} {who}");

                // Called through `call_tool`, it reaches the upstream as `echo`.
                let echoed = call(
                    peer,
                    CALL_TOOL,
                    json!({"name": "up_echo", "arguments": {"message": "hi"}}),
                )
                .await
                .unwrap();
                assert_ne!(echoed.is_error, Some(true), "{echoed:?}");
                assert!(text_of(&echoed).contains("hi"), "{echoed:?}");
                let seen = upstream.calls();
                let last = seen.last().expect("the upstream saw the call");
                assert_eq!(last.tool, "echo");
                assert_eq!(last.arguments, json!({"message": "hi"}));
                client.cancel().await.unwrap();
            }
        }
        server.shutdown_upstreams().await;
    })
    .await;
}

// Starting the gateway blocks this thread until it listens: a multi-threaded runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_with_tool_search_over_http() {
    within(async {
        let args = [
            "--upstream".to_owned(),
            format!("acct=stdio:'{}' --in-memory", billing_bin().display()),
            "--tool-search".to_owned(),
        ];
        let gateway =
            GatewayHttp::start(&args, &[("GATEWAY_TOKENS", "tok-w=ops,tok-r=viewer:read")]);
        for (token, may_write) in [("tok-r", false), ("tok-w", true)] {
            let client = gateway.client(token).await;
            let peer = client.peer();
            let listed = peer.list_all_tools().await.unwrap();
            let names: Vec<&str> = listed.iter().map(|tool| tool.name.as_ref()).collect();
            assert_eq!(names, [FIND_TOOLS, CALL_TOOL, "gateway_status"], "{token}");

            let voiding = found(
                &call(peer, FIND_TOOLS, json!({"query": "void invoice"}))
                    .await
                    .unwrap(),
            );
            assert_eq!(
                voiding.first().map(String::as_str) == Some("acct_billing_void_invoice"),
                may_write,
                "{token}: {voiding:?}"
            );
            assert_eq!(
                voiding.contains(&"acct_billing_void_invoice".to_owned()),
                may_write,
                "{token}: {voiding:?}"
            );
            // A tool found is called by its name, never listed.
            let read = call(peer, "acct_billing_get_invoice", json!({"id": "INV-2"}))
                .await
                .unwrap();
            assert_eq!(read.is_error, Some(false), "{token}: {read:?}");
            assert_eq!(read.structured_content.unwrap()["data"]["id"], "INV-2");
            client.cancel().await.unwrap();
        }
    })
    .await;
}

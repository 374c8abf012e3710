//! 2026-07-28 multi-round calls through the gateway: a proxied tool that answers
//! `input_required` reaches the caller untouched (its questions, the upstream's own
//! `requestState`), and the caller's answers and that state reach the upstream untouched on
//! the retry, with the caller's capabilities; the upstream judges its own state (a refusal is
//! the caller's JSON-RPC error). On the gateway's own HTTP path and through rmcp's client (a
//! tool with an `Mcp-Param` header). A 2025-11-25 caller is asked the upstream's questions over
//! its session by the gateway, which calls the upstream again with the answers.

mod support;

use fusion::ServerBuilder;
use fusion::gateway::Upstream;
use fusion::serde_json::json;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientConfig, ClientRequest,
    ElicitationCapability, ErrorCode, ServerResult, Tool,
};
use rmcp::service::ServiceError;
use rmcp::{ClientHandler, Peer, RoleClient};
use support::recorder::{Recorder, tool};
use support::*;

/// A client that declares elicitation.
#[derive(Clone, Default)]
struct Elicits;

impl ClientHandler for Elicits {
    /// Picks `b` (a 2025-11-25 session's elicitation).
    async fn create_elicitation(
        &self,
        _request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let mut result = rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept);
        result.content = Some(json!({"pick": "b"}));
        Ok(result)
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::default());
        let mut info = ClientConfig::default();
        info.capabilities = capabilities;
        info
    }
}

fn ask_tools() -> Vec<Tool> {
    let mut header = tool("ask_header");
    header.input_schema = std::sync::Arc::new(
        json!({"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}})
            .as_object()
            .unwrap()
            .clone(),
    );
    vec![tool("ask"), header]
}

async fn send(
    peer: &Peer<RoleClient>,
    params: CallToolRequestParams,
) -> Result<ServerResult, ServiceError> {
    peer.send_request(ClientRequest::CallToolRequest(CallToolRequest::new(params)))
        .await
}

#[tokio::test]
async fn input_required_and_its_answers_pass_through_untouched() {
    within(async {
        let upstream = Recorder::start().await;
        upstream.set_tools_quietly(ask_tools());
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount("up", Upstream::http(&upstream.url))
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let http = serve_http(&server).await;
        let client = http_client(&http.url, true, Elicits).await;
        // rmcp's client writes `Mcp-Param-*` headers for the tools it has listed.
        client.peer().list_all_tools().await.unwrap();
        for (name, own_path) in [("up_ask", true), ("up_ask_header", false)] {
            let arguments = object(json!({"n": 1}));
            let first = send(
                client.peer(),
                CallToolRequestParams::new(name).with_arguments(arguments.clone()),
            )
            .await
            .expect("first round");
            let ServerResult::InputRequiredResult(asked) = first else {
                panic!("{name}: expected input_required, got {first:?}");
            };
            // The upstream's questions and its own state, as it sent them.
            assert_eq!(asked.request_state.as_deref(), Some("recorder-state-1"));
            let questions = fusion::serde_json::to_value(&asked.input_requests).unwrap();
            assert_eq!(
                questions["q1"]["method"], "elicitation/create",
                "{questions}"
            );
            assert_eq!(questions["q1"]["params"]["message"], "Which one?");

            let mut retry = CallToolRequestParams::new(name).with_arguments(arguments.clone());
            retry.request_state = asked.request_state.clone();
            let answer = json!({"action": "accept", "content": {"pick": "b"}});
            retry.input_responses = Some([("q1".to_owned(), answer.clone())].into());
            let done = send(client.peer(), retry).await.expect("second round");
            let ServerResult::CallToolResult(result) = done else {
                panic!("{name}: expected a tool result, got {done:?}");
            };
            assert_ne!(result.is_error, Some(true), "{result:?}");
            assert_eq!(
                text_of(&result),
                format!("answered: {}", json!({"q1": answer}))
            );
            let tool = name.trim_start_matches("up_");
            let seen = upstream.calls_of(tool);
            assert_eq!(seen.len(), 2, "{name}");
            assert_eq!(seen[0].request_state, None);
            assert_eq!(seen[1].request_state.as_deref(), Some("recorder-state-1"));
            assert_eq!(seen[1].input_responses, Some(json!({"q1": answer})));
            // The caller's capabilities, not the gateway's (none).
            for call in &seen {
                assert_eq!(
                    call.client_capabilities
                        .as_ref()
                        .map(|c| c["elicitation"].is_object()),
                    Some(true),
                    "{name}: {:?}",
                    call.client_capabilities
                );
            }
            // The path it was meant to take: the gateway's own numbers its requests below 0.
            let negative = matches!(seen[0].id, rmcp::model::NumberOrString::Number(n) if n < 0);
            assert_eq!(negative, own_path, "{name}: {:?}", seen[0].id);

            // A state the upstream refuses: its JSON-RPC error is the caller's (its code and its
            // message, cut short).
            let mut forged = CallToolRequestParams::new(name).with_arguments(arguments);
            forged.request_state = Some("recorder-state-1-TAMPERED".into());
            forged.input_responses = Some([("q1".to_owned(), json!({"action": "decline"}))].into());
            match send(client.peer(), forged).await {
                Err(ServiceError::McpError(error)) => {
                    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
                    assert!(error.message.contains("verification"), "{error:?}");
                    // Cut short, and without the upstream's `data`.
                    assert!(error.message.chars().count() < 400, "{error:?}");
                    assert_eq!(error.data, None, "{error:?}");
                }
                other => panic!("{name}: expected -32602, got {other:?}"),
            }
        }

        // A 2025-11-25 caller is asked over its session by the gateway, which calls again under
        // the upstream's state with its answer.
        let before = upstream.calls_of("ask").len();
        let session = http_client(&http.url, false, Elicits).await;
        let result = call(session.peer(), "up_ask", json!({})).await.unwrap();
        assert_ne!(result.is_error, Some(true), "{result:?}");
        let answer = json!({"action": "accept", "content": {"pick": "b"}});
        assert_eq!(
            text_of(&result),
            format!("answered: {}", json!({"q1": answer}))
        );
        let seen = upstream.calls_of("ask");
        assert_eq!(seen.len(), before + 2);
        assert_eq!(seen[before].request_state, None);
        assert_eq!(
            seen[before + 1].request_state.as_deref(),
            Some("recorder-state-1")
        );
        assert_eq!(
            seen[before + 1].input_responses,
            Some(json!({"q1": answer}))
        );
        assert_eq!(
            seen[before]
                .client_capabilities
                .as_ref()
                .map(|c| c["elicitation"].is_object()),
            Some(true)
        );
    })
    .await;
}

/// Confirms before it answers: a Fusion tool that asks the user.
#[fusion::tool(action, name = "desk.close")]
async fn close(ask: fusion::Elicit) -> Result<String, fusion::ToolError> {
    if ask.confirm("Close the ticket?").await? {
        Ok("closed".to_owned())
    } else {
        Ok("kept".to_owned())
    }
}

/// A client that declares nothing it can be asked.
#[derive(Clone, Default)]
struct Silent;

impl ClientHandler for Silent {}

/// A caller that cannot be asked (stdio, no elicitation), through the gateway to a stateless
/// Fusion upstream whose tool asks: the upstream refuses with `-32021`, and the caller gets the
/// classified `ELICITATION_UNSUPPORTED` a built-in tool gives, not an upstream fault to report.
#[tokio::test]
async fn a_caller_that_cannot_be_asked_gets_elicitation_unsupported_from_an_upstream_that_asks() {
    within(async {
        let desk = ServerBuilder::new("desk", "1.0.0")
            .tool::<close>()
            .build()
            .unwrap();
        let desk_http = serve_http(&desk).await;
        let gateway = ServerBuilder::new("gw", "1.0.0")
            .mount("up", Upstream::http(&desk_http.url))
            .build()
            .unwrap();
        gateway.upstreams_ready().await;
        let caller = connect(&gateway, fusion::Principal::new("alice"), Silent).await;
        let result = call(caller.peer(), "up_desk_close", json!({}))
            .await
            .unwrap();
        let error = error_of(&result);
        assert_eq!(error["code"], "ELICITATION_UNSUPPORTED", "{error}");
        assert!(
            !text_of(&result).contains("errorId"),
            "{}",
            text_of(&result)
        );
    })
    .await;
}

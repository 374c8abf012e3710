//! Asking the client for more than a confirmation, in both protocol eras: the client's model
//! (`Sample`), its roots (`Roots`), several questions at once (one round on 2026-07-28, under
//! the keys the handler names), a prompt that asks, answers of the wrong kind (refused) and
//! answers to no open question (ignored), and what each kind of client can be asked.

// The client side answers sampling and roots, which rmcp marks deprecated (SEP-2577).
#![allow(deprecated)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fusion::elicit::Root;
use fusion::protocol as rmcp;
use fusion::serve::Mcp;
use fusion::{
    Answer, Elicit, PromptMessages, Roots, Sample, SamplingRequest, ServerBuilder, ToolError,
    prompt, tool,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction, ErrorCode, GetPromptRequestParams, GetPromptResponse, InitializeResult,
    ListRootsResult, ProtocolVersion, SamplingMessage,
};
use rmcp::service::{RequestContext, RunningService, ServiceError, serve_directly};
use rmcp::{ClientHandler, ErrorData, RoleClient, RoleServer, ServiceExt};
use serde_json::{Value, json};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct Name {
    /// Your name.
    name: String,
}

/// Asks the user, the model and the roots at once.
#[tool(query, name = "desk.greet")]
async fn greet(ask: Elicit, sample: Sample, roots: Roots) -> Result<Value, ToolError> {
    let (name, greeting, roots) = tokio::join!(
        ask.named("user_name").ask::<Name>("What is your name?"),
        sample
            .named("greeting")
            .create(SamplingRequest::new(50).system("Be brief.").user("Greet.")),
        roots.named("client_roots").list(),
    );
    let name = match name? {
        Answer::Accepted(Name { name }) => name,
        _ => "stranger".to_owned(),
    };
    let greeting = greeting?;
    let roots: Vec<String> = roots?.into_iter().map(|root: Root| root.uri).collect();
    Ok(json!({
        "name": name,
        "greeting": greeting.text,
        "model": greeting.model,
        "roots": roots,
    }))
}

/// Says what the client can be asked.
#[tool(query, name = "desk.can")]
async fn can(ask: Elicit, sample: Sample, roots: Roots) -> Result<Value, ToolError> {
    Ok(json!([
        ask.supported(),
        sample.supported(),
        roots.supported()
    ]))
}

/// Needs the model.
#[tool(query, name = "desk.summarize")]
async fn summarize(sample: Sample) -> Result<String, ToolError> {
    sample.text("Summarize the desk.", 20).await
}

/// Needs the roots, answered within 300 ms.
#[tool(query, name = "desk.quick_roots", ask_timeout = "300ms")]
async fn quick_roots(roots: Roots) -> Result<usize, ToolError> {
    Ok(roots.list().await?.len())
}

/// A prompt that asks for its subject first.
#[prompt(name = "desk.letter")]
async fn letter(ask: Elicit) -> Result<PromptMessages, ToolError> {
    let name = match ask.ask::<Name>("Who is the letter to?").await? {
        Answer::Accepted(Name { name }) => name,
        _ => "whom it may concern".to_owned(),
    };
    Ok(PromptMessages::new().user(format!("Write a letter to {name}.")))
}

fn mcp() -> Mcp {
    Mcp::new(
        ServerBuilder::new("desk", "1.0.0")
            .tool::<greet>()
            .tool::<can>()
            .tool::<summarize>()
            .tool::<quick_roots>()
            .prompt::<letter>()
            .build()
            .expect("server builds"),
    )
}

/// A client that declares `capabilities` and answers every question the same way, counting
/// what it was asked.
#[derive(Clone, Default)]
struct Desk {
    capabilities: ClientCapabilities,
    asked: Arc<Mutex<Vec<String>>>,
}

impl Desk {
    fn full() -> Desk {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(Default::default());
        capabilities.sampling = Some(Default::default());
        capabilities.roots = Some(Default::default());
        Desk {
            capabilities,
            ..Desk::default()
        }
    }

    fn asked(&self) -> Vec<String> {
        let mut asked = self.asked.lock().unwrap().clone();
        asked.sort();
        asked
    }
}

impl ClientHandler for Desk {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.capabilities = self.capabilities.clone();
        info
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.asked.lock().unwrap().push("elicitation".into());
        let mut result = ElicitResult::new(ElicitationAction::Accept);
        result.content = Some(json!({ "name": "Ann" }));
        Ok(result)
    }

    async fn create_message(
        &self,
        request: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.asked.lock().unwrap().push("sampling".into());
        assert!(!request.messages.is_empty());
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text("Hello!"),
            "test-model".into(),
        ))
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        self.asked.lock().unwrap().push("roots".into());
        Ok(serde_json::from_value(json!({ "roots": [{ "uri": "file:///desk" }] })).unwrap())
    }
}

struct Connected {
    client: RunningService<RoleClient, Desk>,
    server: tokio::task::JoinHandle<()>,
}

async fn within<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), future)
        .await
        .expect("in time")
}

impl Connected {
    async fn call(&self, name: &str) -> Result<CallToolResult, ServiceError> {
        within(
            self.client
                .call_tool(CallToolRequestParams::new(name.to_owned())),
        )
        .await
    }

    async fn call_once(&self, params: CallToolRequestParams) -> CallToolResponse {
        within(self.client.call_tool_once(params))
            .await
            .expect("answered")
    }

    async fn close(self) {
        self.client.cancel().await.expect("the client stops");
        within(self.server).await.expect("server task");
    }
}

/// 2025-11-25, with the `initialize` handshake.
async fn session(mcp: &Mcp, desk: Desk) -> Connected {
    let (client_io, server_io) = tokio::io::duplex(256 * 1024);
    let handler = mcp.handler();
    let server = tokio::spawn(async move {
        let running = handler.serve(server_io).await.expect("server handshake");
        let _ = running.waiting().await;
    });
    let client = desk.serve(client_io).await.expect("client handshake");
    Connected { client, server }
}

/// 2026-07-28, without a handshake; the client's capabilities travel in each request's `_meta`.
fn rounds(mcp: &Mcp, desk: Desk) -> Connected {
    let (client_io, server_io) = tokio::io::duplex(256 * 1024);
    let mut client_info = desk.get_info();
    client_info.protocol_version = ProtocolVersion::V_2026_07_28;
    let mut server_info = InitializeResult::default();
    server_info.protocol_version = ProtocolVersion::V_2026_07_28;
    let running =
        serve_directly::<RoleServer, _, _, _, _>(mcp.handler(), server_io, Some(client_info));
    let server = tokio::spawn(async move {
        let _ = running.waiting().await;
    });
    let client =
        serve_directly::<RoleClient, _, _, _, _>(desk, client_io, Some(server_info.into()));
    Connected { client, server }
}

#[tokio::test]
async fn the_user_the_model_and_the_roots_answer_in_both_eras() {
    let mcp = mcp();
    for era in ["2025-11-25", "2026-07-28"] {
        let desk = Desk::full();
        let connected = match era {
            "2025-11-25" => session(&mcp, desk.clone()).await,
            _ => rounds(&mcp, desk.clone()),
        };
        let result = connected.call("desk_greet").await.expect("completes");
        assert_eq!(result.is_error, Some(false), "{era}: {result:?}");
        assert_eq!(
            result.structured_content.as_ref().unwrap()["data"],
            json!({"name": "Ann", "greeting": "Hello!", "model": "test-model", "roots": ["file:///desk"]}),
            "{era}"
        );
        // Each asked once: on 2026-07-28, all three in one round.
        assert_eq!(desk.asked(), ["elicitation", "roots", "sampling"], "{era}");
        connected.close().await;
    }
}

#[tokio::test]
async fn questions_asked_together_travel_in_one_round_under_their_keys() {
    let mcp = mcp();
    let connected = rounds(&mcp, Desk::full());
    let CallToolResponse::InputRequired(asked) = connected
        .call_once(CallToolRequestParams::new("desk_greet"))
        .await
    else {
        panic!("expected input_required")
    };
    let requests = serde_json::to_value(asked.input_requests.as_ref().unwrap()).unwrap();
    assert_eq!(requests["user_name"]["method"], "elicitation/create");
    assert_eq!(
        requests["user_name"]["params"]["message"],
        "What is your name?"
    );
    assert_eq!(requests["greeting"]["method"], "sampling/createMessage");
    assert_eq!(requests["greeting"]["params"]["maxTokens"], 50);
    assert_eq!(requests["greeting"]["params"]["systemPrompt"], "Be brief.");
    assert_eq!(requests["client_roots"]["method"], "roots/list");
    assert_eq!(requests.as_object().unwrap().len(), 3);
    let state = asked.request_state.expect("a sealed state");

    // Answers to no open question are ignored; the open ones complete the call.
    let answers = json!({
        "user_name": {"action": "accept", "content": {"name": "Bo"}},
        "greeting": {"role": "assistant", "content": {"type": "text", "text": "Hi"}, "model": "m"},
        "client_roots": {"roots": []},
        "unrelated": {"action": "accept"},
    });
    let mut params = CallToolRequestParams::new("desk_greet");
    params.input_responses = serde_json::from_value(answers.clone()).unwrap();
    params.request_state = Some(state.clone());
    let CallToolResponse::Complete(result) = connected.call_once(params).await else {
        panic!("expected a result")
    };
    assert_eq!(
        result.structured_content.unwrap()["data"],
        json!({"name": "Bo", "greeting": "Hi", "model": "m", "roots": []})
    );

    // An answer that is not a result of its question's kind is refused before the handler.
    let mut wrong = answers;
    wrong["greeting"] = json!(12345);
    let mut params = CallToolRequestParams::new("desk_greet");
    params.input_responses = serde_json::from_value(wrong).unwrap();
    params.request_state = Some(state);
    match within(connected.client.call_tool_once(params)).await {
        Err(ServiceError::McpError(error)) => {
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
            assert_eq!(error.data.unwrap()["code"], "VALIDATION_ERROR");
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
    connected.close().await;
}

#[tokio::test]
async fn a_prompt_asks_in_both_eras() {
    let mcp = mcp();
    for era in ["2025-11-25", "2026-07-28"] {
        let desk = Desk::full();
        let connected = match era {
            "2025-11-25" => session(&mcp, desk.clone()).await,
            _ => rounds(&mcp, desk.clone()),
        };
        let prompt = within(
            connected
                .client
                .get_prompt(GetPromptRequestParams::new("desk_letter")),
        )
        .await
        .expect("the prompt completes");
        let text = serde_json::to_value(&prompt.messages).unwrap()[0]["content"]["text"].clone();
        assert_eq!(text, "Write a letter to Ann.", "{era}");
        assert_eq!(desk.asked(), ["elicitation"], "{era}");
        connected.close().await;
    }
    // One round at a time: the first answers `input_required`, bound to the prompt.
    let connected = rounds(&mcp, Desk::full());
    let first = within(
        connected
            .client
            .get_prompt_once(GetPromptRequestParams::new("desk_letter")),
    )
    .await
    .unwrap();
    let GetPromptResponse::InputRequired(asked) = first else {
        panic!("expected input_required, got {first:?}")
    };
    // Its state does not open a tool call.
    let mut params = CallToolRequestParams::new("desk_summarize");
    params.request_state = asked.request_state;
    match within(connected.client.call_tool_once(params)).await {
        Err(ServiceError::McpError(error)) => {
            assert_eq!(error.data.unwrap()["code"], "REQUEST_STATE_MISMATCH");
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
    connected.close().await;
}

#[tokio::test]
async fn a_client_is_asked_only_what_it_declared() {
    let mcp = mcp();
    let mut only_sampling = ClientCapabilities::default();
    only_sampling.sampling = Some(Default::default());
    for (capabilities, expected) in [
        (ClientCapabilities::default(), json!([false, false, false])),
        (only_sampling, json!([false, true, false])),
        (Desk::full().capabilities, json!([true, true, true])),
    ] {
        for era in ["2025-11-25", "2026-07-28"] {
            let desk = Desk {
                capabilities: capabilities.clone(),
                ..Desk::default()
            };
            let connected = match era {
                "2025-11-25" => session(&mcp, desk).await,
                _ => rounds(&mcp, desk),
            };
            let result = connected.call("desk_can").await.expect("completes");
            assert_eq!(
                result.structured_content.unwrap()["data"],
                expected,
                "{era}"
            );
            connected.close().await;
        }
    }
    // Without `sampling`: a tool error on a session, -32021 on 2026-07-28; never asked.
    let desk = Desk::default();
    let connected = session(&mcp, desk.clone()).await;
    let result = connected.call("desk_summarize").await.expect("a result");
    assert_eq!(
        result.structured_content.unwrap()["error"]["code"],
        "SAMPLING_UNSUPPORTED"
    );
    connected.close().await;
    let connected = rounds(&mcp, desk.clone());
    match connected.call("desk_summarize").await {
        Err(ServiceError::McpError(error)) => {
            assert_eq!(error.code, ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY);
            assert_eq!(
                error.data,
                Some(json!({ "requiredCapabilities": { "sampling": {} } }))
            );
        }
        other => panic!("expected -32021, got {other:?}"),
    }
    assert!(desk.asked().is_empty());
    connected.close().await;
}

#[tokio::test]
async fn a_round_state_expires_with_its_tools_ask_timeout() {
    let mcp = mcp();
    let connected = rounds(&mcp, Desk::full());
    let answer = || serde_json::from_value(json!({ "q1": { "roots": [] } })).unwrap();
    // Answered in time, the call completes.
    let CallToolResponse::InputRequired(asked) = connected
        .call_once(CallToolRequestParams::new("desk_quick_roots"))
        .await
    else {
        panic!("expected input_required")
    };
    let mut params = CallToolRequestParams::new("desk_quick_roots");
    params.input_responses = answer();
    params.request_state = asked.request_state;
    let CallToolResponse::Complete(result) = connected.call_once(params).await else {
        panic!("expected a result")
    };
    assert_eq!(result.structured_content.unwrap()["data"], 0);
    // Answered past the tool's 300 ms, the state has expired: nothing runs.
    let CallToolResponse::InputRequired(asked) = connected
        .call_once(CallToolRequestParams::new("desk_quick_roots"))
        .await
    else {
        panic!("expected input_required")
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut params = CallToolRequestParams::new("desk_quick_roots");
    params.input_responses = answer();
    params.request_state = asked.request_state;
    match within(connected.client.call_tool_once(params)).await {
        Err(ServiceError::McpError(error)) => {
            assert_eq!(error.data.unwrap()["code"], "REQUEST_STATE_EXPIRED");
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
    connected.close().await;
}

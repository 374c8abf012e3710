//! Asking the client through rmcp's own client, in-process, in both protocol eras: on
//! 2025-11-25 the server sends `elicitation/create` (or `sampling/createMessage`, `roots/list`)
//! and awaits the answer; on 2026-07-28 the call answers `input_required` and the retry brings
//! the answer under a sealed request state, which is refused (a JSON-RPC error) when altered,
//! expired, or replayed for another tool, other arguments or another key.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fusion::protocol as rmcp;
use fusion::request_state::{StateKey, StateKeys};
use fusion::serve::Mcp;
use fusion::{Answer, Elicit, ServerBuilder, State, ToolError, tool};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationCapability, ErrorCode,
    InitializeResult, InputRequiredResult, ProtocolVersion,
};
use rmcp::service::{RequestContext, RunningService, ServiceError, serve_directly};
use rmcp::{ClientHandler, ErrorData, RoleClient, RoleServer, ServiceExt};
use serde_json::{Value, json};

#[derive(Default)]
struct Ledger {
    voided: AtomicUsize,
}

/// Voids an invoice after the user confirmed.
#[tool(mutation, name = "billing.void")]
async fn void(ledger: State<Ledger>, ask: Elicit, id: String) -> Result<Value, ToolError> {
    if !ask.confirm(format!("Void invoice {id}?")).await? {
        return Err(ToolError::new("NOT_CONFIRMED", "The user did not confirm.")
            .with_recovery("Do not retry without asking the user."));
    }
    ledger.voided.fetch_add(1, Ordering::SeqCst);
    Ok(json!({ "voided": id }))
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Reason {
    /// Why.
    reason: String,
}

/// Asks for a reason, then for a confirmation: two rounds on 2026-07-28.
#[tool(action, name = "billing.note")]
async fn note(ask: Elicit, id: String) -> Result<Value, ToolError> {
    let Answer::Accepted(Reason { reason }) = ask.ask::<Reason>("Why?").await? else {
        return Ok(json!({ "id": id, "reason": null }));
    };
    let sure = ask.confirm("Sure?").await?;
    Ok(json!({ "id": id, "reason": reason, "sure": sure }))
}

fn mcp_with(keys: Option<StateKeys>, ttl: Duration) -> Mcp {
    let mut builder = ServerBuilder::new("elicit", "1.0.0")
        .tool::<void>()
        .tool::<note>()
        .state(Ledger::default())
        .request_state_ttl(ttl);
    if let Some(keys) = keys {
        builder = builder.request_state_keys(keys);
    }
    Mcp::new(builder.build().expect("server builds"))
}

fn mcp() -> Mcp {
    mcp_with(None, Duration::from_secs(600))
}

/// A client whose user gives `answers` in turn (`None`: no elicitation capability).
#[derive(Clone)]
struct User {
    answers: Option<Arc<Mutex<Vec<ElicitResult>>>>,
    asked: Arc<Mutex<Vec<String>>>,
}

impl User {
    fn answering(answers: Vec<ElicitResult>) -> User {
        User {
            answers: Some(Arc::new(Mutex::new(answers))),
            asked: Arc::default(),
        }
    }
    fn without_capability() -> User {
        User {
            answers: None,
            asked: Arc::default(),
        }
    }
    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

fn accept(content: Value) -> ElicitResult {
    let mut result = ElicitResult::new(ElicitationAction::Accept);
    result.content = Some(content);
    result
}

fn decline() -> ElicitResult {
    ElicitResult::new(ElicitationAction::Decline)
}

impl ClientHandler for User {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        if self.answers.is_some() {
            let mut capabilities = ClientCapabilities::default();
            capabilities.elicitation = Some(ElicitationCapability::default());
            info.capabilities = capabilities;
        }
        info
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = &request {
            self.asked.lock().unwrap().push(message.clone());
        }
        let answers = self
            .answers
            .as_ref()
            .expect("a client without the capability is never asked");
        let mut answers = answers.lock().unwrap();
        assert!(!answers.is_empty(), "asked more often than expected");
        Ok(answers.remove(0))
    }
}

struct Connected {
    client: RunningService<RoleClient, User>,
    server: tokio::task::JoinHandle<()>,
}

impl Connected {
    async fn call(&self, name: &str, arguments: Value) -> CallToolResult {
        let Value::Object(arguments) = arguments else {
            panic!("arguments are an object")
        };
        tokio::time::timeout(
            Duration::from_secs(30),
            self.client
                .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)),
        )
        .await
        .expect("in time")
        .expect("the call completes")
    }

    /// A call that must fail with a JSON-RPC error.
    async fn call_error(&self, name: &str, arguments: Value) -> ErrorData {
        let Value::Object(arguments) = arguments else {
            panic!("arguments are an object")
        };
        let outcome = tokio::time::timeout(
            Duration::from_secs(30),
            self.client
                .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)),
        )
        .await
        .expect("in time");
        match outcome {
            Err(ServiceError::McpError(error)) => error,
            other => panic!("expected a JSON-RPC error, got {other:?}"),
        }
    }

    async fn close(self) {
        self.client.cancel().await.expect("the client stops");
        tokio::time::timeout(Duration::from_secs(5), self.server)
            .await
            .expect("the server stops")
            .expect("server task");
    }
}

/// 2025-11-25, with the `initialize` handshake.
async fn session(mcp: &Mcp, user: User) -> Connected {
    let (client_io, server_io) = tokio::io::duplex(256 * 1024);
    let handler = mcp.handler();
    let server = tokio::spawn(async move {
        let running = handler.serve(server_io).await.expect("server handshake");
        let _ = running.waiting().await;
    });
    let client = user.serve(client_io).await.expect("client handshake");
    Connected { client, server }
}

/// 2026-07-28, without a handshake.
fn rounds(mcp: &Mcp, user: User) -> Connected {
    let (client_io, server_io) = tokio::io::duplex(256 * 1024);
    let mut client_info = user.get_info();
    client_info.protocol_version = ProtocolVersion::V_2026_07_28;
    let mut server_info = InitializeResult::default();
    server_info.protocol_version = ProtocolVersion::V_2026_07_28;
    let running =
        serve_directly::<RoleServer, _, _, _, _>(mcp.handler(), server_io, Some(client_info));
    let server = tokio::spawn(async move {
        let _ = running.waiting().await;
    });
    let client =
        serve_directly::<RoleClient, _, _, _, _>(user, client_io, Some(server_info.into()));
    Connected { client, server }
}

async fn connect(era: &str, mcp: &Mcp, user: User) -> Connected {
    match era {
        "2025-11-25" => session(mcp, user).await,
        _ => rounds(mcp, user),
    }
}

fn code(result: &CallToolResult) -> Option<String> {
    result.structured_content.as_ref()?["error"]["code"]
        .as_str()
        .map(str::to_owned)
}

fn voided(mcp: &Mcp) -> usize {
    mcp.handler()
        .server()
        .new_context()
        .state::<Ledger>()
        .expect("ledger")
        .voided
        .load(Ordering::SeqCst)
}

const ERAS: [&str; 2] = ["2025-11-25", "2026-07-28"];

#[tokio::test]
async fn an_accepted_confirmation_runs_the_tool_in_both_eras() {
    for era in ERAS {
        let mcp = mcp();
        let user = User::answering(vec![accept(json!({ "confirm": true }))]);
        let connected = connect(era, &mcp, user.clone()).await;
        let result = connected
            .call("billing_void", json!({ "id": "INV-1" }))
            .await;
        assert_eq!(result.is_error, Some(false), "{era}: {result:?}");
        assert_eq!(user.asked(), ["Void invoice INV-1?"], "{era}");
        assert_eq!(voided(&mcp), 1, "{era}");
        connected.close().await;
    }
}

#[tokio::test]
async fn a_declined_or_negative_confirmation_changes_nothing_in_both_eras() {
    for era in ERAS {
        for answer in [decline(), accept(json!({ "confirm": false }))] {
            let mcp = mcp();
            let user = User::answering(vec![answer]);
            let connected = connect(era, &mcp, user.clone()).await;
            let result = connected
                .call("billing_void", json!({ "id": "INV-1" }))
                .await;
            assert_eq!(code(&result).as_deref(), Some("NOT_CONFIRMED"), "{era}");
            assert_eq!(user.asked().len(), 1, "{era}");
            assert_eq!(voided(&mcp), 0, "{era}");
            connected.close().await;
        }
    }
}

#[tokio::test]
async fn a_client_without_the_capability_gets_a_clear_error_and_is_never_asked() {
    // On a session: a tool error the agent reads.
    let mcp = mcp();
    let user = User::without_capability();
    let connected = session(&mcp, user.clone()).await;
    let result = connected
        .call("billing_void", json!({ "id": "INV-1" }))
        .await;
    assert_eq!(code(&result).as_deref(), Some("ELICITATION_UNSUPPORTED"));
    // The message is in the `<tool_error>` block the agent reads.
    let text = serde_json::to_string(&result.content).unwrap();
    assert!(
        text.contains("did not declare the elicitation capability"),
        "{text}"
    );
    connected.close().await;
    // On 2026-07-28: MissingRequiredClientCapability, naming the capability.
    let connected = rounds(&mcp, user.clone());
    let error = connected
        .call_error("billing_void", json!({ "id": "INV-1" }))
        .await;
    assert_eq!(error.code, ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY);
    assert_eq!(
        error.data,
        Some(json!({ "requiredCapabilities": { "elicitation": {} } }))
    );
    assert!(user.asked().is_empty());
    assert_eq!(voided(&mcp), 0);
    connected.close().await;
}

#[tokio::test]
async fn typed_questions_and_two_rounds_in_both_eras() {
    for era in ERAS {
        let mcp = mcp();
        let user = User::answering(vec![
            accept(json!({ "reason": "duplicate" })),
            accept(json!({ "confirm": true })),
        ]);
        let connected = connect(era, &mcp, user.clone()).await;
        let result = connected
            .call("billing_note", json!({ "id": "INV-2" }))
            .await;
        assert_eq!(result.is_error, Some(false), "{era}: {result:?}");
        let data = &result.structured_content.as_ref().unwrap()["data"];
        assert_eq!(data["reason"], "duplicate", "{era}");
        assert_eq!(data["sure"], true, "{era}");
        assert_eq!(user.asked(), ["Why?", "Sure?"], "{era}");
        connected.close().await;
    }
}

// ---------------------------------------------------------------------------------------------
// The sealed state, end to end (2026-07-28), driven one round at a time

async fn first_round(connected: &Connected, name: &str, arguments: Value) -> InputRequiredResult {
    let Value::Object(arguments) = arguments else {
        panic!()
    };
    match connected
        .client
        .call_tool_once(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments))
        .await
        .expect("answered")
    {
        CallToolResponse::InputRequired(result) => result,
        other => panic!("expected input_required, got {other:?}"),
    }
}

/// A retry with `answer` to `q1` under `state`, one round.
async fn retry_once(
    connected: &Connected,
    name: &str,
    arguments: Value,
    state: Option<String>,
    answer: ElicitResult,
) -> Result<CallToolResponse, ServiceError> {
    let Value::Object(arguments) = arguments else {
        panic!()
    };
    let mut params = CallToolRequestParams::new(name.to_owned())
        .with_arguments(arguments)
        .with_input_responses([("q1".to_owned(), serde_json::to_value(answer).unwrap())].into());
    params.request_state = state;
    connected.client.call_tool_once(params).await
}

async fn retry(
    connected: &Connected,
    name: &str,
    arguments: Value,
    state: Option<String>,
    answer: ElicitResult,
) -> CallToolResult {
    match retry_once(connected, name, arguments, state, answer)
        .await
        .expect("answered")
    {
        CallToolResponse::Complete(result) => result,
        other => panic!("expected a result, got {other:?}"),
    }
}

/// A retry refused with a JSON-RPC error: the `code` of its error body.
async fn refused(
    connected: &Connected,
    name: &str,
    arguments: Value,
    state: Option<String>,
    answer: ElicitResult,
) -> String {
    match retry_once(connected, name, arguments, state, answer).await {
        Err(ServiceError::McpError(error)) => {
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{error:?}");
            error.data.as_ref().unwrap()["code"]
                .as_str()
                .unwrap()
                .to_owned()
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

#[tokio::test]
async fn the_first_round_asks_with_a_sealed_state() {
    let mcp = mcp();
    let connected = rounds(&mcp, User::answering(vec![]));
    let asked = first_round(&connected, "billing_void", json!({ "id": "INV-1" })).await;
    let requests = asked.input_requests.expect("a question");
    let wire = serde_json::to_value(&requests).unwrap();
    assert_eq!(wire["q1"]["method"], "elicitation/create");
    assert_eq!(wire["q1"]["params"]["message"], "Void invoice INV-1?");
    assert!(asked.request_state.is_some());
    assert_eq!(voided(&mcp), 0);
    // The honest retry completes.
    let result = retry(
        &connected,
        "billing_void",
        json!({ "id": "INV-1" }),
        asked.request_state,
        accept(json!({ "confirm": true })),
    )
    .await;
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert_eq!(voided(&mcp), 1);
    connected.close().await;
}

#[tokio::test]
async fn a_tampered_or_transplanted_state_is_refused_and_an_answer_without_one_is_not_trusted() {
    let mcp = mcp();
    let connected = rounds(&mcp, User::answering(vec![]));
    let asked = first_round(&connected, "billing_void", json!({ "id": "INV-1" })).await;
    let state = asked.request_state.unwrap();
    let mut tampered = state.clone().into_bytes();
    let middle = tampered.len() / 2;
    tampered[middle] = if tampered[middle] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let yes = || accept(json!({ "confirm": true }));
    for (name, arguments, state, expected) in [
        (
            "billing_void",
            json!({ "id": "INV-1" }),
            tampered.clone(),
            "REQUEST_STATE_INVALID",
        ),
        (
            "billing_void",
            json!({ "id": "INV-1" }),
            format!("{state}-TAMPERED"),
            "REQUEST_STATE_INVALID",
        ),
        (
            "billing_void",
            json!({ "id": "INV-2" }),
            state.clone(),
            "REQUEST_STATE_MISMATCH",
        ),
        (
            "billing_note",
            json!({ "id": "INV-1" }),
            state.clone(),
            "REQUEST_STATE_MISMATCH",
        ),
    ] {
        assert_eq!(
            refused(&connected, name, arguments, Some(state), yes()).await,
            expected,
            "{name}"
        );
    }
    // An answer without the state that asked it proves nothing: the question is asked again.
    match retry_once(
        &connected,
        "billing_void",
        json!({ "id": "INV-1" }),
        None,
        yes(),
    )
    .await
    .expect("answered")
    {
        CallToolResponse::InputRequired(again) => {
            assert!(again.input_requests.unwrap().contains_key("q1"));
        }
        other => panic!("expected the question again, got {other:?}"),
    }
    assert_eq!(voided(&mcp), 0);
    connected.close().await;
}

#[tokio::test]
async fn an_expired_state_or_one_from_a_removed_key_is_refused() {
    let old = StateKey::new("old", [1u8; 32]).unwrap();
    let new = StateKey::new("new", [2u8; 32]).unwrap();
    // Expired.
    let mcp = mcp_with(None, Duration::ZERO);
    let connected = rounds(&mcp, User::answering(vec![]));
    let asked = first_round(&connected, "billing_void", json!({ "id": "INV-1" })).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let code = refused(
        &connected,
        "billing_void",
        json!({ "id": "INV-1" }),
        asked.request_state,
        accept(json!({ "confirm": true })),
    )
    .await;
    assert_eq!(code, "REQUEST_STATE_EXPIRED");
    assert_eq!(voided(&mcp), 0);
    connected.close().await;
    // Sealed under `old`; a replica holding [new, old] accepts it, one holding [new] refuses.
    let sealing = mcp_with(
        Some(StateKeys::new([old.clone()])),
        Duration::from_secs(600),
    );
    let connected = rounds(&sealing, User::answering(vec![]));
    let asked = first_round(&connected, "billing_void", json!({ "id": "INV-1" })).await;
    connected.close().await;
    let replica = mcp_with(
        Some(StateKeys::new([new.clone(), old.clone()])),
        Duration::from_secs(600),
    );
    let connected = rounds(&replica, User::answering(vec![]));
    let result = retry(
        &connected,
        "billing_void",
        json!({ "id": "INV-1" }),
        asked.request_state.clone(),
        accept(json!({ "confirm": true })),
    )
    .await;
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert_eq!(voided(&replica), 1);
    connected.close().await;
    let replica = mcp_with(
        Some(StateKeys::new([new.clone()])),
        Duration::from_secs(600),
    );
    let connected = rounds(&replica, User::answering(vec![]));
    let code = refused(
        &connected,
        "billing_void",
        json!({ "id": "INV-1" }),
        asked.request_state.clone(),
        accept(json!({ "confirm": true })),
    )
    .await;
    assert_eq!(code, "REQUEST_STATE_UNKNOWN_KEY");
    assert_eq!(voided(&replica), 0);
    connected.close().await;
}

// ---------------------------------------------------------------------------------------------
// Guarded fields are never asked for

/// A contact whose owner is set by the server only.
#[fusion::model]
struct Contact {
    #[cast("Contact name")]
    name: String,
    #[cast("The user who owns it")]
    #[guarded]
    owner_id: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct OwnerPick {
    /// The new owner.
    #[serde(rename = "ownerId")]
    owner_id: String,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Remark {
    /// A remark; serde also reads it under an alias no schema shows.
    #[serde(alias = "owner_id")]
    remark: String,
}

/// Asks for a remark, whose alias names the guarded field.
#[tool(action, name = "crm.remark")]
async fn remark(ask: Elicit) -> Result<Value, ToolError> {
    let Answer::Accepted(remark) = ask.ask::<Remark>("Any remark?").await? else {
        return Ok(json!({}));
    };
    Ok(json!({ "remark": remark.remark }))
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct OwnerNote {
    /// Whom to tell.
    #[schemars(extend("x-fusion-not-guarded" = "whom to notify; the owner is not changed"))]
    owner_id: String,
}

/// What the handler was told when it asked.
#[derive(Default)]
struct Told(Mutex<Vec<String>>);

/// Reassigns a contact to the owner the user picks: refused before the question leaves.
#[tool(mutation, name = "crm.reassign")]
async fn reassign(told: State<Told>, ask: Elicit, id: String) -> Result<Value, ToolError> {
    match ask.ask::<OwnerPick>("Who owns it now?").await {
        Ok(Answer::Accepted(pick)) => Ok(json!({ "id": id, "owner": pick.owner_id })),
        Ok(_) => Ok(json!({ "id": id })),
        Err(error) => {
            told.0.lock().unwrap().push(format!("{error:?}"));
            Err(error)
        }
    }
}

/// Notifies an owner the user names: stated not to be the guarded field.
#[tool(action, name = "crm.notify")]
async fn notify(ask: Elicit, id: String) -> Result<Value, ToolError> {
    let Answer::Accepted(note) = ask.ask::<OwnerNote>("Whom to tell?").await? else {
        return Ok(json!({ "id": id }));
    };
    Ok(json!({ "id": id, "told": note.owner_id }))
}

#[tokio::test]
async fn an_elicitation_of_a_guarded_field_is_refused_before_it_is_asked() {
    for era in ERAS {
        let server = ServerBuilder::new("crm", "1.0.0")
            .model::<Contact>()
            .tool::<reassign>()
            .tool::<notify>()
            .tool::<remark>()
            .state(Told::default())
            .build()
            .expect("server builds");
        let mcp = Mcp::new(server);
        let user = User::answering(vec![
            accept(json!({ "owner_id": "u-7" })),
            accept(json!({ "owner_id": "u-8" })),
        ]);
        let connected = connect(era, &mcp, user.clone()).await;
        let result = connected.call("crm_reassign", json!({ "id": "C-1" })).await;
        assert_eq!(code(&result).as_deref(), Some("INTERNAL_ERROR"), "{era}");
        assert!(user.asked().is_empty(), "{era}: the client was asked");
        // The handler (and the server's log) learn why; the agent only that it failed.
        let told = mcp
            .handler()
            .server()
            .new_context()
            .state::<Told>()
            .expect("told")
            .0
            .lock()
            .unwrap()
            .clone();
        assert_eq!(told.len(), 1, "{era}");
        for part in [
            "OwnerPick cannot be asked for",
            "elicitation field `ownerId`",
            "`Contact.owner_id`, a guarded field",
            "x-fusion-not-guarded",
        ] {
            assert!(told[0].contains(part), "{era}: {told:?}");
        }
        let text = serde_json::to_string(&result.structured_content).unwrap();
        assert!(!text.contains("owner_id"), "{era}: {text}");
        // Stated not guarded, the question is asked.
        let result = connected.call("crm_notify", json!({ "id": "C-1" })).await;
        assert_eq!(result.is_error, Some(false), "{era}: {result:?}");
        assert_eq!(
            result.structured_content.as_ref().unwrap()["data"]["told"],
            "u-7"
        );
        assert_eq!(user.asked(), ["Whom to tell?"], "{era}");
        // An answer under a name the form does not show (serde's alias) sets nothing.
        let result = connected.call("crm_remark", json!({})).await;
        assert_eq!(code(&result).as_deref(), Some("VALIDATION_ERROR"), "{era}");
        // The whole answer: the `<tool_error>` block and the envelope.
        let text = format!(
            "{}{}",
            serde_json::to_string(&result.content).unwrap(),
            serde_json::to_string(&result.structured_content).unwrap()
        );
        assert!(text.contains("unknown field `owner_id`"), "{era}: {text}");
        assert!(!text.contains("u-8"), "{era}: {text}");
        connected.close().await;
    }
}

//! Long-running calls as tasks (issue 26, the SEP-2663 tasks extension), over rmcp's own client
//! and server in-process (2025-11-25 sessions over `tokio::io::duplex`): a tool declared with
//! `task = "optional"` answers a client that declared the extension with a task, whose status,
//! result, questions and cancellation reach only the caller that created it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fusion::protocol as rmcp;
use fusion::serve::Mcp;
use fusion::{
    Elicit, Hidden, MemoryTaskStore, Principal, ServerBuilder, State, TaskOptions, TaskStore,
    ToolError, model, presenter, tool,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    ElicitRequestParams, ElicitResult, ElicitationCapability, ErrorCode, GetTaskParams,
    GetTaskResult, TaskPayload, TaskStatus, TaskStatusNotificationParams, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RunningService, ServiceError};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};

/// How many exports ran to their end.
#[derive(Default)]
struct Finished(AtomicUsize);

#[model]
struct Export {
    #[cast("Rows exported")]
    rows: u64,
    #[hidden]
    signing_key: Hidden<String>,
}

#[presenter(Export, fields(rows))]
struct ExportView;

/// Exports `rows` rows, taking `millis` milliseconds.
#[tool(query, name = "jobs.export", task = "optional", returns = ExportView)]
async fn export(finished: State<Finished>, rows: u64, millis: u64) -> Result<Export, ToolError> {
    tokio::time::sleep(Duration::from_millis(millis)).await;
    finished.0.fetch_add(1, Ordering::SeqCst);
    Ok(Export {
        rows,
        signing_key: Hidden::new("sk_live_never_shown".to_owned()),
    })
}

/// Rebuilds the index; only as a task.
#[tool(mutation, name = "jobs.reindex", task = "required")]
async fn reindex() -> Result<String, ToolError> {
    Ok("reindexed".to_owned())
}

/// Fails the way a tool fails, or panics.
#[tool(query, name = "jobs.fail", task = "optional")]
async fn fail(panic: bool) -> Result<String, ToolError> {
    if panic {
        panic!("the job fell over");
    }
    Err(ToolError::conflict("The ledger is closed."))
}

/// Asks before purging.
#[tool(mutation, name = "jobs.purge", task = "optional")]
async fn purge(ask: Elicit, what: String) -> Result<String, ToolError> {
    if ask.confirm(format!("Purge {what}?")).await? {
        Ok(format!("purged {what}"))
    } else {
        Ok("kept".to_owned())
    }
}

/// Not a task.
#[tool(query, name = "jobs.ping")]
async fn ping() -> Result<String, ToolError> {
    Ok("pong".to_owned())
}

/// The audit trail: each record's action and outcome.
#[derive(Default)]
struct Trail(std::sync::Mutex<Vec<(String, &'static str)>>);

impl fusion::AuditSink for Trail {
    fn record(&self, record: &fusion::AuditRecord) -> Result<(), fusion::audit::AuditError> {
        let mut trail = self.0.lock().unwrap();
        trail.push((record.action.clone(), record.outcome));
        Ok(())
    }
}

fn server(finished: &Arc<Finished>) -> fusion::Server {
    audited(finished, &Arc::default())
}

fn audited(finished: &Arc<Finished>, trail: &Arc<Trail>) -> fusion::Server {
    ServerBuilder::new("jobs", "1.0.0")
        .audit(Arc::clone(trail))
        .state_arc(Arc::clone(finished))
        .tool::<export>()
        .tool::<reindex>()
        .tool::<fail>()
        .tool::<purge>()
        .tool::<ping>()
        .build()
        .expect("the jobs server builds")
}

/// A client that declares the tasks extension (or not) and elicitation, and accepts every
/// question it is asked over the session.
#[derive(Clone)]
struct Client {
    tasks: bool,
    /// The task statuses it was told of (`notifications/tasks`), in order.
    told: Arc<std::sync::Mutex<Vec<(String, TaskStatus)>>>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = if self.tasks {
            ClientCapabilities::builder().enable_tasks().build()
        } else {
            ClientCapabilities::default()
        };
        capabilities.elicitation = Some(ElicitationCapability::default());
        let mut info = ClientConfig::default();
        info.capabilities = capabilities;
        info
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(ElicitResult::new(rmcp::model::ElicitationAction::Accept)
            .with_content(json!({ "confirm": true })))
    }

    async fn on_task_status(
        &self,
        params: TaskStatusNotificationParams,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        let task = &params.task;
        let told = (task.task.task_id.clone(), task.task.status);
        self.told.lock().unwrap().push(told);
    }
}

type Session = RunningService<RoleClient, Client>;

/// A session of `principal` (none: unauthenticated) with the endpoint `mcp` serves.
async fn connect(mcp: &Mcp, principal: Option<Principal>, tasks: bool) -> Session {
    let mcp = mcp.clone().context(move |_request, call| {
        if let Some(principal) = &principal {
            call.extensions_mut().insert(principal.clone());
        }
    });
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let handler = mcp.handler();
    tokio::spawn(async move {
        let running = handler.serve(server_io).await.expect("server handshake");
        let _ = running.waiting().await;
    });
    let told = Arc::default();
    Client { tasks, told }
        .serve(client_io)
        .await
        .expect("client handshake")
}

fn alice() -> Principal {
    Principal::new("alice").with_tenant("acme")
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object");
    };
    CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

/// Starts a call that must become a task: its id.
async fn start(session: &Session, name: &str, arguments: Value) -> String {
    match session.peer().call_tool_once(call(name, arguments)).await {
        Ok(CallToolResponse::Task(created)) => {
            assert_eq!(created.task.status, TaskStatus::Working);
            assert!(created.task.ttl_ms.is_some() && created.task.poll_interval_ms.is_some());
            created.task.task_id
        }
        other => panic!("{name} did not become a task: {other:?}"),
    }
}

async fn get(session: &Session, id: &str) -> Result<GetTaskResult, ServiceError> {
    session.peer().get_task(GetTaskParams::new(id)).await
}

/// Polls task `id` until it leaves `working` (at most 5 s).
async fn settled(session: &Session, id: &str) -> GetTaskResult {
    for _ in 0..250 {
        let got = get(session, id).await.expect("the owner reads its task");
        if got.task.status() != TaskStatus::Working {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("task {id} is still working after 5 s");
}

fn result_of(got: &GetTaskResult) -> &rmcp::model::JsonObject {
    match &got.task.payload {
        TaskPayload::Completed { result } => result,
        other => panic!("the task did not complete: {other:?}"),
    }
}

/// `-32602`, the answer for an id that is not the caller's.
fn is_unknown_task(error: &ServiceError) -> bool {
    matches!(error, ServiceError::McpError(error)
        if error.code == ErrorCode::INVALID_PARAMS && error.message == "unknown task")
}

#[tokio::test]
async fn a_task_runs_its_tool_through_the_presenter_and_completes() {
    let finished = Arc::new(Finished::default());
    let mcp = Mcp::new(server(&finished));
    let session = connect(&mcp, Some(alice()), true).await;
    assert!(
        session
            .peer()
            .peer_info()
            .is_some_and(|info| info.capabilities.supports_tasks()),
        "the extension is declared"
    );
    let id = start(
        &session,
        "jobs_export",
        json!({ "rows": 42, "millis": 100 }),
    )
    .await;
    // 244 random bits, as 64 hex digits.
    assert!(
        id.len() == 64 && id.bytes().all(|byte| byte.is_ascii_hexdigit()),
        "{id}"
    );
    let working = get(&session, &id).await.unwrap();
    assert_eq!(working.task.status(), TaskStatus::Working);
    let done = settled(&session, &id).await;
    let result = result_of(&done);
    let text = Value::Object(result.clone()).to_string();
    assert_eq!(result["isError"], false, "{text}");
    assert_eq!(result["structuredContent"]["data"]["rows"], 42, "{text}");
    // The presenter shows the rows only: the hidden key never leaves, in the task either.
    assert!(
        !text.contains("sk_live") && !text.contains("signing_key"),
        "{text}"
    );
    assert_eq!(finished.0.load(Ordering::SeqCst), 1);
    // A tool that is not a task answers at once, as before.
    let pong = session.peer().call_tool(call("jobs_ping", json!({}))).await;
    assert!(pong.is_ok_and(|result| result.is_error != Some(true)));
}

#[tokio::test]
async fn a_client_without_the_extension_gets_answers_and_is_refused_a_required_task() {
    let finished = Arc::new(Finished::default());
    let mcp = Mcp::new(server(&finished));
    let session = connect(&mcp, Some(alice()), false).await;
    let answered = session
        .peer()
        .call_tool_once(call("jobs_export", json!({ "rows": 1, "millis": 0 })))
        .await;
    assert!(
        matches!(answered, Ok(CallToolResponse::Complete(ref result)) if result.is_error != Some(true)),
        "{answered:?}"
    );
    let refused = session
        .peer()
        .call_tool_once(call("jobs_reindex", json!({})))
        .await;
    assert!(
        matches!(&refused, Err(ServiceError::McpError(error))
            if error.code == ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
            && error.data.as_ref().is_some_and(|data| data.to_string().contains("io.modelcontextprotocol/tasks"))),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_tool_error_completes_the_task_and_a_panic_fails_it() {
    let finished = Arc::new(Finished::default());
    let mcp = Mcp::new(server(&finished));
    let session = connect(&mcp, Some(alice()), true).await;
    let refused = start(&session, "jobs_fail", json!({ "panic": false })).await;
    let refused = settled(&session, &refused).await;
    assert_eq!(result_of(&refused)["isError"], true);
    let fell = start(&session, "jobs_fail", json!({ "panic": true })).await;
    let fell = settled(&session, &fell).await;
    let TaskPayload::Failed { error } = &fell.task.payload else {
        panic!("a panic fails the task: {fell:?}");
    };
    assert_eq!(error["code"], -32603);
    // The panic's text is logged, never sent.
    let message = error["message"].as_str().unwrap();
    assert!(
        !message.contains("fell over") && message.contains("errorId"),
        "{message}"
    );
}

#[tokio::test]
async fn only_the_principal_and_tenant_that_created_a_task_reach_it() {
    let finished = Arc::new(Finished::default());
    let mcp = Mcp::new(server(&finished));
    let owner = connect(&mcp, Some(alice()), true).await;
    let id = start(&owner, "jobs_export", json!({ "rows": 1, "millis": 300 })).await;
    let others = [
        // A read-only token of the same tenant: another subject.
        Some(Principal::new("alice-readonly").with_tenant("acme")),
        // The same subject in another tenant.
        Some(Principal::new("alice").with_tenant("globex")),
        // Nobody.
        None,
    ];
    for other in others {
        let session = connect(&mcp, other.clone(), true).await;
        let peer = session.peer();
        let read = get(&session, &id).await;
        assert!(
            read.as_ref().is_err_and(is_unknown_task),
            "{other:?}: {read:?}"
        );
        let cancel = peer.cancel_task(CancelTaskParams::new(&id)).await;
        assert!(
            cancel.as_ref().is_err_and(is_unknown_task),
            "{other:?}: {cancel:?}"
        );
        let update = peer
            .update_task(UpdateTaskParams::new(&id, Default::default()))
            .await;
        assert!(
            update.as_ref().is_err_and(is_unknown_task),
            "{other:?}: {update:?}"
        );
    }
    // What they got is what an id never issued gets.
    let never = get(&owner, &"0".repeat(64)).await;
    assert!(never.as_ref().is_err_and(is_unknown_task), "{never:?}");
    // The task ran on, untouched.
    let done = settled(&owner, &id).await;
    assert_eq!(done.task.status(), TaskStatus::Completed);
}

#[tokio::test]
async fn cancelling_a_task_stops_its_handler_and_a_done_task_stays_done() {
    let finished = Arc::new(Finished::default());
    let mcp = Mcp::new(server(&finished));
    let session = connect(&mcp, Some(alice()), true).await;
    let id = start(&session, "jobs_export", json!({ "rows": 1, "millis": 400 })).await;
    session
        .peer()
        .cancel_task(CancelTaskParams::new(&id))
        .await
        .expect("the owner cancels");
    assert_eq!(
        get(&session, &id).await.unwrap().task.status(),
        TaskStatus::Cancelled
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        finished.0.load(Ordering::SeqCst),
        0,
        "the handler was stopped"
    );
    assert_eq!(
        get(&session, &id).await.unwrap().task.status(),
        TaskStatus::Cancelled
    );
    // Cancelling a done task acknowledges and changes nothing.
    let done = start(&session, "jobs_export", json!({ "rows": 1, "millis": 0 })).await;
    settled(&session, &done).await;
    session
        .peer()
        .cancel_task(CancelTaskParams::new(&done))
        .await
        .expect("an idempotent cancel");
    assert_eq!(
        get(&session, &done).await.unwrap().task.status(),
        TaskStatus::Completed
    );
}

#[tokio::test]
async fn a_task_that_asks_waits_for_its_answer_in_input_required() {
    let finished = Arc::new(Finished::default());
    let mcp = Mcp::new(server(&finished));
    let session = connect(&mcp, Some(alice()), true).await;
    let id = start(&session, "jobs_purge", json!({ "what": "drafts" })).await;
    let asking = settled(&session, &id).await;
    let TaskPayload::InputRequired { input_requests } = &asking.task.payload else {
        panic!("the task waits for its answer: {asking:?}");
    };
    let (key, request) = input_requests.iter().next().expect("one question");
    let asked = serde_json::to_value(request).unwrap();
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    // A wrong kind of answer is refused, and the question stays open.
    let wrong = session
        .peer()
        .update_task(UpdateTaskParams::new(
            &id,
            [(key.clone(), json!({ "not": "an elicit result" }))].into(),
        ))
        .await;
    assert!(
        matches!(&wrong, Err(ServiceError::McpError(error)) if error.code == ErrorCode::INVALID_PARAMS),
        "{wrong:?}"
    );
    assert_eq!(
        get(&session, &id).await.unwrap().task.status(),
        TaskStatus::InputRequired
    );
    session
        .peer()
        .update_task(UpdateTaskParams::new(
            &id,
            [(
                key.clone(),
                json!({ "action": "accept", "content": { "confirm": true } }),
            )]
            .into(),
        ))
        .await
        .expect("the answer is taken");
    let done = settled(&session, &id).await;
    let text = Value::Object(result_of(&done).clone()).to_string();
    assert!(text.contains("purged drafts"), "{text}");
}

fn quick(ttl_ms: u64, max_result_bytes: usize) -> TaskOptions {
    TaskOptions {
        ttl: Duration::from_millis(ttl_ms),
        poll_interval: Duration::from_millis(50),
        max_result_bytes,
        // Renewed every 50 ms: a task outliving it is still vouched for.
        lease: Duration::from_millis(300),
        ..TaskOptions::default()
    }
}

#[tokio::test]
async fn a_task_is_forgotten_after_its_ttl_and_a_result_too_large_fails_it() {
    let finished = Arc::new(Finished::default());
    let store = Arc::new(MemoryTaskStore::new());
    let mcp = Mcp::new(server(&finished)).tasks(store, quick(500, 1 << 20));
    let session = connect(&mcp, Some(alice()), true).await;
    let id = start(&session, "jobs_export", json!({ "rows": 1, "millis": 0 })).await;
    let created = get(&session, &id).await.unwrap();
    assert_eq!(created.task.task.ttl_ms, Some(500));
    assert_eq!(created.task.task.poll_interval_ms, Some(50));
    assert_eq!(
        settled(&session, &id).await.task.status(),
        TaskStatus::Completed
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    let gone = get(&session, &id).await;
    assert!(gone.as_ref().is_err_and(is_unknown_task), "{gone:?}");

    let small =
        Mcp::new(server(&finished)).tasks(Arc::new(MemoryTaskStore::new()), quick(5000, 64));
    let session = connect(&small, Some(alice()), true).await;
    let id = start(&session, "jobs_export", json!({ "rows": 1, "millis": 0 })).await;
    let large = settled(&session, &id).await;
    let TaskPayload::Failed { error } = &large.task.payload else {
        panic!("a result larger than kept fails its task: {large:?}");
    };
    assert!(
        error["message"].as_str().unwrap().contains("larger than"),
        "{error:?}"
    );
}

#[tokio::test]
async fn an_owner_past_its_cap_of_live_tasks_is_told_to_retry_and_others_are_not() {
    let finished = Arc::new(Finished::default());
    let capped = TaskOptions {
        max_live_per_owner: 2,
        ..quick(5000, 1 << 20)
    };
    let mcp = Mcp::new(server(&finished)).tasks(Arc::new(MemoryTaskStore::new()), capped);
    let session = connect(&mcp, Some(alice()), true).await;
    let slow = json!({ "rows": 1, "millis": 400 });
    let first = start(&session, "jobs_export", slow.clone()).await;
    start(&session, "jobs_export", slow.clone()).await;
    let refused = session
        .peer()
        .call_tool_once(call("jobs_export", slow.clone()))
        .await;
    let Ok(CallToolResponse::Complete(refused)) = refused else {
        panic!("a third live task is refused with a tool result: {refused:?}");
    };
    assert_eq!(refused.is_error, Some(true));
    let error = &refused.structured_content.as_ref().unwrap()["error"];
    assert_eq!(error["code"], "RATE_LIMITED", "{refused:?}");
    assert_eq!(error["retryable"], true, "{refused:?}");
    // The message is said once, in the `<tool_error>` block the agent reads.
    let told = refused
        .content
        .iter()
        .filter_map(|block| block.as_text())
        .any(|block| block.text.contains("2 tasks running"));
    assert!(told, "{refused:?}");
    // Another principal of the same tenant has a cap of its own.
    let bob = connect(&mcp, Some(Principal::new("bob").with_tenant("acme")), true).await;
    start(&bob, "jobs_export", json!({ "rows": 1, "millis": 0 })).await;
    // A task that ends frees its place.
    session
        .peer()
        .cancel_task(CancelTaskParams::new(&first))
        .await
        .unwrap();
    start(&session, "jobs_export", slow).await;
}

/// What `session` was told of its tasks' statuses so far.
fn told(session: &Session) -> Vec<(String, TaskStatus)> {
    session.service().told.lock().unwrap().clone()
}

#[tokio::test]
async fn a_task_s_status_is_sent_to_the_session_that_started_it_and_no_other() {
    let finished = Arc::new(Finished::default());
    let mcp = Mcp::new(server(&finished));
    let acme = connect(&mcp, Some(alice()), true).await;
    let globex = connect(
        &mcp,
        Some(Principal::new("alice").with_tenant("globex")),
        true,
    )
    .await;
    let done = start(&acme, "jobs_export", json!({ "rows": 1, "millis": 50 })).await;
    let cancelled = start(&globex, "jobs_export", json!({ "rows": 1, "millis": 2000 })).await;
    let asked = start(&acme, "jobs_purge", json!({ "what": "drafts" })).await;
    settled(&acme, &done).await;
    assert_eq!(
        settled(&acme, &asked).await.task.status(),
        TaskStatus::InputRequired
    );
    globex
        .peer()
        .cancel_task(CancelTaskParams::new(&cancelled))
        .await
        .unwrap();
    // Notifications travel after the answers that settled them: wait for them a little.
    for _ in 0..100 {
        if told(&acme).len() >= 2 && !told(&globex).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut acme_told = told(&acme);
    acme_told.sort_by_key(|(id, _)| *id != done);
    assert_eq!(
        acme_told,
        [
            (done.clone(), TaskStatus::Completed),
            (asked.clone(), TaskStatus::InputRequired)
        ]
    );
    // The other tenant's session hears of its own task only, and the first of nothing else.
    assert_eq!(told(&globex), [(cancelled.clone(), TaskStatus::Cancelled)]);
}

/// Two endpoints sharing one store, as replicas behind a load balancer share a database.
#[tokio::test]
async fn a_task_started_on_one_replica_is_read_and_cancelled_through_another() {
    let finished = Arc::new(Finished::default());
    let store: Arc<dyn TaskStore> = Arc::new(MemoryTaskStore::new());
    let one = Mcp::new(server(&finished)).tasks(Arc::clone(&store), quick(5000, 1 << 20));
    let two = Mcp::new(server(&finished)).tasks(Arc::clone(&store), quick(5000, 1 << 20));
    let on_one = connect(&one, Some(alice()), true).await;
    let on_two = connect(&two, Some(alice()), true).await;
    let id = start(&on_one, "jobs_export", json!({ "rows": 1, "millis": 400 })).await;
    assert_eq!(
        get(&on_two, &id).await.unwrap().task.status(),
        TaskStatus::Working
    );
    on_two
        .peer()
        .cancel_task(CancelTaskParams::new(&id))
        .await
        .expect("the owner cancels through the other replica");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        finished.0.load(Ordering::SeqCst),
        0,
        "the running replica stopped it"
    );
    assert_eq!(
        get(&on_one, &id).await.unwrap().task.status(),
        TaskStatus::Cancelled
    );
}

#[tokio::test]
async fn starting_cancelling_and_finishing_a_task_are_audited_like_its_write() {
    let (finished, trail) = (Arc::new(Finished::default()), Arc::new(Trail::default()));
    let mcp = Mcp::new(audited(&finished, &trail));
    let session = connect(&mcp, Some(alice()), true).await;
    let reindex = start(&session, "jobs_reindex", json!({})).await;
    settled(&session, &reindex).await;
    let purge = start(&session, "jobs_purge", json!({ "what": "drafts" })).await;
    settled(&session, &purge).await;
    session
        .peer()
        .cancel_task(CancelTaskParams::new(&purge))
        .await
        .unwrap();
    // A query's task is not audited, as its call is not.
    let export = start(&session, "jobs_export", json!({ "rows": 1, "millis": 0 })).await;
    settled(&session, &export).await;
    let recorded = trail.0.lock().unwrap().clone();
    let expected: Vec<(String, &str)> = [
        ("jobs.reindex", "task_started"),
        ("jobs.reindex", "ok"),
        ("jobs.purge", "task_started"),
        ("jobs.purge", "task_cancelled"),
    ]
    .into_iter()
    .map(|(action, outcome)| (action.to_owned(), outcome))
    .collect();
    assert_eq!(recorded, expected);
}

#[tokio::test]
async fn a_task_whose_replica_stopped_is_reported_failed_and_a_live_one_is_not() {
    let finished = Arc::new(Finished::default());
    let store: Arc<dyn TaskStore> = Arc::new(MemoryTaskStore::new());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    // What a replica that died leaves in the shared store: a task it ran, whose lease it no
    // longer renews.
    let orphan = fusion::TaskRecord {
        id: "a".repeat(64),
        owner: fusion::TaskOwner {
            tenant: Some("acme".to_owned()),
            subject: Some("alice".to_owned()),
        },
        tool: "jobs_export".to_owned(),
        state: fusion::TaskState::Working,
        status_message: None,
        created_ms: now - 2000,
        updated_ms: now - 2000,
        ttl_ms: 60_000,
        poll_interval_ms: 50,
        lease_ms: now - 1000,
    };
    store.create(&orphan).await.unwrap();
    let mcp = Mcp::new(server(&finished)).tasks(Arc::clone(&store), quick(5000, 1 << 20));
    let session = connect(&mcp, Some(alice()), true).await;
    let lost = get(&session, &orphan.id).await.unwrap();
    let TaskPayload::Failed { error } = &lost.task.payload else {
        panic!("an abandoned task is failed: {lost:?}");
    };
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("stopped before it finished"),
        "{error:?}"
    );
    // Its status says why as well, for a client that shows only that.
    assert_eq!(
        lost.task.task.status_message.as_ref(),
        error["message"].as_str().map(String::from).as_ref()
    );
    // A task running twice its lease on a live replica is renewed, and completes.
    let id = start(&session, "jobs_export", json!({ "rows": 1, "millis": 700 })).await;
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert_eq!(
        get(&session, &id).await.unwrap().task.status(),
        TaskStatus::Working
    );
    assert_eq!(
        settled(&session, &id).await.task.status(),
        TaskStatus::Completed
    );
}

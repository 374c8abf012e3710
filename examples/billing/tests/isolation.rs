//! Tenants stay apart and nobody's silence holds anything (issue 24), over rmcp's client and
//! server in-process (2025-11-25 sessions over `tokio::io::duplex`), with two tenants whose
//! invoice numbers are the same (`INV-1` of each):
//!
//! - a question nobody answers ends at its deadline with a retryable `NO_ANSWER`;
//! - calls waiting on a person hold no concurrency slot nor FIFO turn another tenant needs;
//! - one tenant can take only its share of a tool's slots;
//! - the one-at-a-time lock of a destructive action is per tenant;
//! - a session that goes away releases everything it held at once;
//! - a subscription hears of its own tenant's changes to the resource it names, and of nothing
//!   else.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use billing::Store;
use fusion::Principal;
use fusion::serde_json::{Value, json};
use fusion::serve::Mcp;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, ElicitationCapability, GetPromptRequestParams,
    ReadResourceRequestParams, ResourceUpdatedNotificationParam, SubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};

/// A client whose user answers "yes" to every question, or never answers at all.
#[derive(Clone)]
struct User {
    answers: bool,
    asked: Arc<AtomicUsize>,
    /// The URIs of the resource updates it heard.
    updates: Arc<Mutex<Vec<String>>>,
}

impl User {
    fn answering() -> Self {
        User {
            answers: true,
            asked: Arc::default(),
            updates: Arc::default(),
        }
    }

    fn silent() -> Self {
        User {
            answers: false,
            asked: Arc::default(),
            updates: Arc::default(),
        }
    }
}

impl ClientHandler for User {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::default());
        info.capabilities = capabilities;
        info
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        if !self.answers {
            std::future::pending::<()>().await;
        }
        let mut result = ElicitResult::new(ElicitationAction::Accept);
        result.content = Some(json!({ "confirm": true }));
        Ok(result)
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.updates.lock().unwrap().push(params.uri);
    }
}

type Client = Arc<RunningService<RoleClient, User>>;

/// A 2025-11-25 session of `tenant` on `server`.
async fn connect(server: &fusion::Server, tenant: &str, user: User) -> Client {
    let principal = Principal::new(format!("user-of-{tenant}"))
        .with_tenant(tenant)
        .with_scopes([billing::WRITE_SCOPE.to_owned()]);
    let mcp = Mcp::new(server.clone()).context(move |_request, call| {
        call.extensions_mut().insert(principal.clone());
    });
    let (client_io, server_io) = tokio::io::duplex(1024 * 1024);
    let handler = mcp.handler();
    tokio::spawn(async move {
        let running = handler.serve(server_io).await.expect("server handshake");
        let _ = running.waiting().await;
    });
    Arc::new(user.serve(client_io).await.expect("client handshake"))
}

async fn call(client: &Client, name: &str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("an object")
    };
    tokio::time::timeout(
        Duration::from_secs(20),
        client.call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)),
    )
    .await
    .unwrap_or_else(|_| panic!("{name} answered within 20 s"))
    .expect("answered")
}

fn error_of(result: &CallToolResult) -> Option<&Value> {
    result
        .structured_content
        .as_ref()
        .and_then(|envelope| envelope.get("error"))
}

fn code(result: &CallToolResult) -> Option<&str> {
    error_of(result)?["code"].as_str()
}

/// Creates an invoice of the client's tenant; its id.
async fn create(client: &Client, total_cents: i64) -> String {
    let created = call(
        client,
        "billing_create_invoice",
        json!({ "customer_id": "C-1", "total_cents": total_cents }),
    )
    .await;
    assert_eq!(code(&created), None, "{created:?}");
    created.structured_content.as_ref().unwrap()["data"]["id"]
        .as_str()
        .expect("an id")
        .to_owned()
}

/// Above the confirmation threshold: voiding it asks the user.
const LARGE: i64 = 250_000;

fn store() -> (tempfile::TempDir, Arc<Store>) {
    let data = tempfile::tempdir().expect("a data directory");
    let store = Arc::new(Store::open(data.path()).expect("store"));
    (data, store)
}

/// Starts `count` voids of `id` by `client`, which never answers their questions, and waits
/// until every one that was let in is asked (the rest are refused by now).
async fn flood_with_unanswered_voids(
    client: &Client,
    user: &User,
    id: &str,
    count: usize,
) -> Vec<tokio::task::JoinHandle<CallToolResult>> {
    let calls: Vec<_> = (0..count)
        .map(|_| {
            let client = Arc::clone(client);
            let id = id.to_owned();
            tokio::spawn(async move {
                let Value::Object(arguments) = json!({ "id": id }) else {
                    unreachable!()
                };
                client
                    .call_tool(
                        CallToolRequestParams::new("billing_void_invoice")
                            .with_arguments(arguments),
                    )
                    .await
                    .expect("answered")
            })
        })
        .collect();
    // Settle: every call that got in is waiting on its question, or waiting for a turn.
    let mut last = usize::MAX;
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = user.asked.load(Ordering::SeqCst);
        if now == last && now > 0 {
            break;
        }
        last = now;
    }
    calls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_unanswered_questions_leave_other_tenants_slots_and_turns_alone() {
    let (_data, store) = store();
    let server = billing::builder(store)
        .build()
        .expect("the billing server builds");
    let (b_user, a_user) = (User::silent(), User::answering());
    let b = connect(&server, "t_b", b_user.clone()).await;
    let a = connect(&server, "t_a", a_user.clone()).await;
    let b_large = create(&b, LARGE).await;
    let a_large = create(&a, LARGE).await;
    let a_small = create(&a, 500).await;
    // The same number in both tenants: only the tenant tells them apart.
    assert_eq!(a_large, b_large);

    // 128 voids of B's own INV-1, each asking a question B never answers: as many as the tool
    // has slots and queue seats (64 + 64).
    let flood = flood_with_unanswered_voids(&b, &b_user, &b_large, 128).await;

    // A's void of a small invoice runs at once: B's waiting calls hold none of A's slots.
    let started = Instant::now();
    let small = call(&a, "billing_void_invoice", json!({ "id": a_small })).await;
    assert_eq!(code(&small), None, "{small:?}");
    // A's void of its own INV-1 asks A (who answers) and is voided: B's unanswered void of
    // B's INV-1 holds no turn of A's.
    let large = call(&a, "billing_void_invoice", json!({ "id": a_large })).await;
    assert_eq!(code(&large), None, "{large:?}");
    assert_eq!(a_user.asked.load(Ordering::SeqCst), 1);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // B got at most its share: the calls past it were refused at once, retryable.
    let asked = b_user.asked.load(Ordering::SeqCst);
    assert!(asked <= 64, "B's questions in flight: {asked}");
    let mut refused = 0;
    for call in &flood {
        if call.is_finished() {
            refused += 1;
        }
    }
    assert!(refused >= 64, "B's calls refused past its share: {refused}");
    for call in flood {
        call.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_nobody_answers_ends_at_its_deadline_with_a_retryable_no_answer() {
    let (_data, store) = store();
    let server = billing::builder(store)
        .ask_timeout(Duration::from_millis(300))
        .build()
        .expect("the billing server builds");
    let b_user = User::silent();
    let b = connect(&server, "t_b", b_user.clone()).await;
    let id = create(&b, LARGE).await;
    let started = Instant::now();
    let voided = call(&b, "billing_void_invoice", json!({ "id": id })).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(code(&voided), Some("NO_ANSWER"), "{voided:?}");
    let error = error_of(&voided).unwrap();
    assert_eq!(error["retryable"], true, "{error}");
    // The message is in the `<tool_error>` block the agent reads.
    let told = voided.content[0].as_text().unwrap().text.as_str();
    assert!(
        told.starts_with("<tool_error") && told.contains("300 ms"),
        "{told}"
    );
    // Nothing changed, and the invoice can be voided once someone answers.
    let after = call(&b, "billing_get_invoice", json!({ "id": id })).await;
    assert_eq!(
        after.structured_content.as_ref().unwrap()["data"]["status"],
        "open"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_goes_away_releases_its_share_at_once() {
    let (_data, store) = store();
    let server = billing::builder(store)
        .build()
        .expect("the billing server builds");
    let b_user = User::silent();
    let b = connect(&server, "t_b", b_user.clone()).await;
    let large = create(&b, LARGE).await;
    let small = create(&b, 500).await;
    let flood = flood_with_unanswered_voids(&b, &b_user, &large, 128).await;
    // B's share is taken by its own waiting calls.
    let refused = call(&b, "billing_void_invoice", json!({ "id": small })).await;
    assert_eq!(code(&refused), Some("SERVER_BUSY"), "{refused:?}");
    for call in flood {
        call.abort();
    }
    // B goes away: rmcp stops the session's handlers once it has drained their answers (up
    // to 5 s); its unanswered questions end with them, and a new session of B's finds its
    // share free, retrying busy answers as an agent would.
    b.cancellation_token().cancel();
    drop(b);
    let gone = Instant::now();
    let again = connect(&server, "t_b", User::answering()).await;
    loop {
        let voided = call(&again, "billing_void_invoice", json!({ "id": small })).await;
        match code(&voided) {
            None => break,
            Some("SERVER_BUSY") if gone.elapsed() < Duration::from_secs(8) => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Some(_) => panic!(
                "B's share is still taken {:?} later: {voided:?}",
                gone.elapsed()
            ),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_hears_only_of_its_own_tenants_changes_to_its_own_resource() {
    let (_data, store) = store();
    let server = billing::builder(store)
        .build()
        .expect("the billing server builds");
    let (a_user, b_user) = (User::answering(), User::answering());
    let a = connect(&server, "t_a", a_user.clone()).await;
    let b = connect(&server, "t_b", b_user.clone()).await;
    let mut a_ids = Vec::new();
    for _ in 0..3 {
        a_ids.push(create(&a, 500).await);
    }
    let b_one = create(&b, 500).await;
    let b_two = create(&b, 500).await;
    assert_eq!(a_ids[0], b_one, "the same number in both tenants");
    let uri = format!("billing://invoices/{b_one}");
    // Subscriptions are a 2025-11-25 session's (rmcp marks them legacy).
    #[allow(deprecated)]
    b.subscribe(SubscribeRequestParams::new(uri.clone()))
        .await
        .expect("subscribed");
    // A voids three invoices, its INV-1 among them: B hears nothing of it.
    for id in &a_ids {
        let voided = call(&a, "billing_void_invoice", json!({ "id": id })).await;
        assert_eq!(code(&voided), None, "{voided:?}");
    }
    // B changes its other invoice: not the one B subscribed to.
    let voided = call(&b, "billing_void_invoice", json!({ "id": b_two })).await;
    assert_eq!(code(&voided), None, "{voided:?}");
    // B changes the one it subscribed to: that, it hears.
    let voided = call(&b, "billing_void_invoice", json!({ "id": b_one })).await;
    assert_eq!(code(&voided), None, "{voided:?}");
    let started = Instant::now();
    while b_user.updates.lock().unwrap().is_empty() && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Give a wrongly sent update the time to arrive.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(*b_user.updates.lock().unwrap(), [uri]);
}

/// Everything of an answer but the id it echoes.
fn normalized(result: &CallToolResult, id: &str) -> String {
    let text: Vec<String> = result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.clone()))
        .collect();
    let whole = json!({
        "structured": result.structured_content,
        "text": text,
        "isError": result.is_error,
    })
    .to_string();
    whole.replace(id, "<id>")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_ids_look_exactly_like_ids_nobody_has() {
    let (_data, store) = store();
    let server = billing::builder(store)
        .build()
        .expect("the billing server builds");
    // t_777 has INV-1 to INV-1000 (the seed); t_b has none.
    let b = connect(&server, "t_b", User::answering()).await;
    let theirs = ["INV-1", "INV-2", "INV-17", "INV-500", "INV-1000"];
    let nobodys = ["INV-1001", "INV-5000", "INV-999999", "INV-9", "INV-0"];
    for (tool, extra) in [
        ("billing_get_invoice", json!({})),
        ("billing_void_invoice", json!({})),
        ("billing_send_reminder", json!({})),
        ("billing_update_invoice", json!({ "total_cents": 100 })),
    ] {
        let mut bodies = std::collections::BTreeMap::<String, Vec<&str>>::new();
        for id in theirs.iter().chain(&nobodys) {
            let mut arguments = extra.clone();
            arguments["id"] = json!(id);
            let result = call(&b, tool, arguments).await;
            assert_eq!(code(&result), Some("InvoiceNotFound"), "{tool} {id}");
            bodies.entry(normalized(&result, id)).or_default().push(id);
        }
        assert_eq!(bodies.len(), 1, "{tool}: {bodies:#?}");
    }
    // The invoice resource and the reminder prompt, likewise.
    let mut reads = std::collections::BTreeMap::<String, Vec<&str>>::new();
    let mut prompts = std::collections::BTreeMap::<String, Vec<&str>>::new();
    for id in theirs.iter().chain(&nobodys) {
        let read = b
            .read_resource(ReadResourceRequestParams::new(format!(
                "billing://invoices/{id}"
            )))
            .await
            .expect_err("no such invoice for B");
        reads
            .entry(format!("{read:?}").replace(id, "<id>"))
            .or_default()
            .push(id);
        let mut arguments = fusion::serde_json::Map::new();
        arguments.insert("id".into(), json!(id));
        let prompt = b
            .get_prompt(
                GetPromptRequestParams::new("billing.reminder_draft").with_arguments(arguments),
            )
            .await
            .expect_err("no such invoice for B");
        prompts
            .entry(format!("{prompt:?}").replace(id, "<id>"))
            .or_default()
            .push(id);
    }
    assert_eq!(reads.len(), 1, "{reads:#?}");
    assert_eq!(prompts.len(), 1, "{prompts:#?}");
}

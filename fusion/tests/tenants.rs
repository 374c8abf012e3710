//! What one tenant does never holds up another (issue 24), over rmcp's client and server
//! in-process (2025-11-25 sessions over `tokio::io::duplex`), two tenants attached by the
//! transport's context: the FIFO turn of a destructive action and a tool's concurrency slots
//! are per tenant, so are the server's slots as a whole, and a question to the client
//! (sampling, roots) ends at the tool's `ask_timeout` with a retryable `NO_ANSWER`.

// The client side answers sampling and roots, which rmcp marks deprecated (SEP-2577).
#![allow(deprecated)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use fusion::protocol as rmcp;
use fusion::serve::Mcp;
use fusion::{
    Concurrency, Principal, Roots, Sample, Server, ServerBuilder, State, ToolError, tool,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
    CreateMessageRequestParams, CreateMessageResult, ListRootsResult,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

/// Holds each call of tenant `t_b` until the test lets it go; other tenants pass at once.
struct Gate(Arc<Semaphore>);

fn of_b(principal: &Principal) -> bool {
    principal.tenant.as_deref() == Some("t_b")
}

/// Closes a record (one at a time per record, per tenant).
#[tool(
    mutation,
    name = "desk.close",
    invalidates = "desk.*",
    serialize = "id"
)]
async fn close(
    gate: State<Gate>,
    caller: Principal,
    /// The record.
    id: String,
) -> Result<String, ToolError> {
    if of_b(&caller) {
        let _pass = gate.0.acquire().await.map_err(ToolError::internal)?;
    }
    Ok(format!("closed {id}"))
}

/// Reads slowly: two at once, two waiting.
#[tool(query, name = "desk.read", concurrency(max = 2, queue = 2))]
async fn read(gate: State<Gate>, caller: Principal) -> Result<String, ToolError> {
    if of_b(&caller) {
        let _pass = gate.0.acquire().await.map_err(ToolError::internal)?;
    }
    Ok("read".to_owned())
}

/// Counts, twice an hour per caller.
#[tool(query, name = "desk.count", rate_limit = "2/h")]
async fn count() -> Result<u32, ToolError> {
    Ok(1)
}

/// Needs the model, which may not take more than 200 ms to answer.
#[tool(query, name = "desk.summarize", ask_timeout = "200ms")]
async fn summarize(sample: Sample) -> Result<String, ToolError> {
    sample.text("Summarize the desk.", 20).await
}

/// Needs the roots, within 200 ms.
#[tool(query, name = "desk.roots", ask_timeout = "200ms")]
async fn roots(roots: Roots) -> Result<usize, ToolError> {
    Ok(roots.list().await?.len())
}

/// Lists, searches and peeks, each without limits of its own: only the server's hold them.
#[tool(query, name = "desk.list")]
async fn list(gate: State<Gate>, caller: Principal) -> Result<String, ToolError> {
    pass(&gate, &caller).await
}

/// Searches (see `desk.list`).
#[tool(query, name = "desk.search")]
async fn search(gate: State<Gate>, caller: Principal) -> Result<String, ToolError> {
    pass(&gate, &caller).await
}

/// Peeks (see `desk.list`).
#[tool(query, name = "desk.peek")]
async fn peek(gate: State<Gate>, caller: Principal) -> Result<String, ToolError> {
    pass(&gate, &caller).await
}

/// Holds a call of `t_b` at the gate.
async fn pass(gate: &Gate, caller: &Principal) -> Result<String, ToolError> {
    if of_b(caller) {
        let _pass = gate.0.acquire().await.map_err(ToolError::internal)?;
    }
    Ok("done".to_owned())
}

/// Asks the model, which may take 3 s (and never answers here).
#[tool(query, name = "desk.ponder", ask_timeout = "3s")]
async fn ponder(sample: Sample) -> Result<String, ToolError> {
    sample.text("Ponder the desk.", 20).await
}

fn server(gate: &Arc<Semaphore>) -> Server {
    desk(gate).build().expect("the desk builds")
}

/// The desk with the server as a whole limited to `limits`.
fn limited(gate: &Arc<Semaphore>, limits: Concurrency) -> Server {
    desk(gate)
        .tool::<list>()
        .tool::<search>()
        .tool::<peek>()
        .tool::<ponder>()
        .server_concurrency(Some(limits))
        .build()
        .expect("the desk builds")
}

fn desk(gate: &Arc<Semaphore>) -> ServerBuilder {
    ServerBuilder::new("desk", "1.0.0")
        .state(Gate(Arc::clone(gate)))
        .tool::<close>()
        .tool::<read>()
        .tool::<summarize>()
        .tool::<roots>()
        .tool::<count>()
}

/// A client that declares sampling and roots and never answers either.
#[derive(Clone)]
struct Silent;

impl ClientHandler for Silent {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        let mut capabilities = ClientCapabilities::default();
        capabilities.sampling = Some(Default::default());
        capabilities.roots = Some(Default::default());
        info.capabilities = capabilities;
        info
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        std::future::pending().await
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        std::future::pending().await
    }
}

type Client = Arc<RunningService<RoleClient, Silent>>;

async fn connect(server: &Server, tenant: &str) -> Client {
    connect_as(server, &format!("user-of-{tenant}"), tenant).await
}

/// A session of `subject` of `tenant`.
async fn connect_as(server: &Server, subject: &str, tenant: &str) -> Client {
    let principal = Principal::new(subject).with_tenant(tenant);
    let mcp = Mcp::new(server.clone()).context(move |_request, call| {
        call.extensions_mut().insert(principal.clone());
    });
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let handler = mcp.handler();
    tokio::spawn(async move {
        let running = handler.serve(server_io).await.expect("server handshake");
        let _ = running.waiting().await;
    });
    Arc::new(Silent.serve(client_io).await.expect("client handshake"))
}

async fn call(client: &Client, name: &str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("an object")
    };
    tokio::time::timeout(
        Duration::from_secs(5),
        client.call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)),
    )
    .await
    .unwrap_or_else(|_| panic!("{name} answered within 5 s"))
    .expect("answered")
}

fn spawn_call(
    client: &Client,
    name: &'static str,
    arguments: Value,
) -> tokio::task::JoinHandle<CallToolResult> {
    let client = Arc::clone(client);
    tokio::spawn(async move { call(&client, name, arguments).await })
}

fn error_of(result: &CallToolResult) -> Option<&Value> {
    result.structured_content.as_ref()?.get("error")
}

fn code(result: &CallToolResult) -> Option<&str> {
    error_of(result)?["code"].as_str()
}

/// The `<tool_error>` block the agent reads (message, recovery, tools to call).
fn told(result: &CallToolResult) -> &str {
    result
        .content
        .iter()
        .find_map(|block| {
            block
                .as_text()
                .filter(|text| text.text.starts_with("<tool_error"))
        })
        .map_or("", |text| text.text.as_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fifo_turn_of_a_destructive_action_is_per_tenant() {
    let gate = Arc::new(Semaphore::new(0));
    let server = server(&gate);
    let (a, b) = (connect(&server, "t_a").await, connect(&server, "t_b").await);
    // B's close of its record 7 holds the turn of B's record 7.
    let held = spawn_call(&b, "desk_close", json!({ "id": "7" }));
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A's record 7 is another record: A does not wait for B.
    let closed = call(&a, "desk_close", json!({ "id": "7" })).await;
    assert_eq!(code(&closed), None, "{closed:?}");
    // B's second close of its own record 7 waits for the first.
    let second = spawn_call(&b, "desk_close", json!({ "id": "7" }));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!second.is_finished());
    gate.add_permits(2);
    assert_eq!(code(&held.await.unwrap()), None);
    assert_eq!(code(&second.await.unwrap()), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tenant_takes_at_most_its_share_of_a_tools_slots() {
    let gate = Arc::new(Semaphore::new(0));
    let server = server(&gate);
    let (a, b) = (connect(&server, "t_a").await, connect(&server, "t_b").await);
    // B's reads: one runs (half of two slots), one waits (half of four in all).
    let b_reads = [
        spawn_call(&b, "desk_read", json!({})),
        spawn_call(&b, "desk_read", json!({})),
    ];
    tokio::time::sleep(Duration::from_millis(200)).await;
    // B's third is refused at once, retryable…
    let refused = call(&b, "desk_read", json!({})).await;
    assert_eq!(code(&refused), Some("SERVER_BUSY"), "{refused:?}");
    assert_eq!(error_of(&refused).unwrap()["retryable"], true);
    // …while A's reads run at once on the slots B may not take.
    for _ in 0..3 {
        let read = call(&a, "desk_read", json!({})).await;
        assert_eq!(code(&read), None, "{read:?}");
    }
    gate.add_permits(2);
    for read in b_reads {
        assert_eq!(code(&read.await.unwrap()), None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_and_roots_nobody_answers_end_at_the_tools_ask_timeout() {
    let gate = Arc::new(Semaphore::new(0));
    let server = server(&gate);
    let client = connect(&server, "t_a").await;
    for (tool, what) in [("desk_summarize", "sampling"), ("desk_roots", "roots")] {
        let started = Instant::now();
        let result = call(&client, tool, json!({})).await;
        assert!(started.elapsed() < Duration::from_secs(2), "{tool}");
        assert_eq!(code(&result), Some("NO_ANSWER"), "{tool}: {result:?}");
        let error = error_of(&result).unwrap();
        assert_eq!(error["retryable"], true, "{error}");
        let message = told(&result);
        assert!(
            message.contains(what) && message.contains("200 ms"),
            "{message}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_counts_each_tenants_callers_apart_even_with_the_same_subject() {
    let gate = Arc::new(Semaphore::new(0));
    let server = server(&gate);
    // Subjects are an identity provider's: `alice` of one tenant is not `alice` of another.
    let a = connect_as(&server, "alice", "t_a").await;
    let b = connect_as(&server, "alice", "t_b").await;
    for _ in 0..2 {
        assert_eq!(code(&call(&b, "desk_count", json!({})).await), None);
    }
    assert_eq!(
        code(&call(&b, "desk_count", json!({})).await),
        Some("RATE_LIMITED")
    );
    assert_eq!(code(&call(&a, "desk_count", json!({})).await), None);
}

/// One call of each of four tools with no limit of their own.
fn flood() -> impl Iterator<Item = (&'static str, Value)> {
    [
        ("desk_list", json!({})),
        ("desk_search", json!({})),
        ("desk_peek", json!({})),
        ("desk_close", json!({ "id": "1" })),
    ]
    .into_iter()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tenant_flooding_many_tools_takes_at_most_its_share_of_the_server() {
    let gate = Arc::new(Semaphore::new(0));
    // 4 running and 4 waiting in all; a tenant may hold 2 running and 4 in all.
    let server = limited(&gate, Concurrency::new(4, 4));
    let (a, b) = (connect(&server, "t_a").await, connect(&server, "t_b").await);
    // B floods four tools, none of which has a limit of its own: two run, two wait.
    let b_calls: Vec<_> = flood()
        .map(|(tool, arguments)| spawn_call(&b, tool, arguments))
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // B's fifth call, on yet another tool, is refused at once, retryable, with a hint.
    let refused = call(&b, "desk_close", json!({ "id": "2" })).await;
    assert_eq!(code(&refused), Some("SERVER_BUSY"), "{refused:?}");
    let error = error_of(&refused).unwrap();
    assert_eq!(error["retryable"], true, "{error}");
    let told = told(&refused);
    assert!(
        told.contains("<message>The server is at capacity.</message>"),
        "{told}"
    );
    assert!(
        told.contains("<recovery>") && told.contains("retry"),
        "{told}"
    );
    // A gets in at once on every tool, on the slots B may not take.
    for (tool, arguments) in flood() {
        let answered = call(&a, tool, arguments).await;
        assert_eq!(code(&answered), None, "{tool}: {answered:?}");
    }
    // B's four, and one more.
    gate.add_permits(5);
    for answered in b_calls {
        assert_eq!(code(&answered.await.unwrap()), None);
    }
    // Everything B held is given back: B's calls get in again.
    assert_eq!(
        code(&call(&b, "desk_close", json!({ "id": "2" })).await),
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_on_a_person_lends_its_server_slot() {
    let gate = Arc::new(Semaphore::new(1));
    // One call of a tenant running at once, two in all.
    let server = limited(&gate, Concurrency::new(2, 2));
    let b = connect(&server, "t_b").await;
    // B's question nobody answers waits 3 s…
    let pondering = spawn_call(&b, "desk_ponder", json!({}));
    tokio::time::sleep(Duration::from_millis(200)).await;
    // …without B's one running slot: B's next call runs meanwhile.
    let started = Instant::now();
    let listed = call(&b, "desk_list", json!({})).await;
    assert_eq!(code(&listed), None, "{listed:?}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert!(!pondering.is_finished());
    assert_eq!(code(&pondering.await.unwrap()), Some("NO_ANSWER"));
}

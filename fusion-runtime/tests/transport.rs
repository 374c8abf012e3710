//! The rmcp transport of a Fusion server, driven by rmcp's own client in-process over
//! `tokio::io::duplex`: `tools/list` pagination and cache hints, `get_tool`, the per-request
//! context factory, progress notifications, cancellation, tool failures and unknown tools.
//!
//! The server is defined here with [`ToolSpec`] builders: this crate cannot use the macros.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fusion_runtime::rmcp;
use fusion_runtime::serve::{Mcp, McpOptions};
use fusion_runtime::{
    ActionInfo, CallContext, FromContext, Progress, Server, ServerBuilder, ToolError, ToolSpec,
    Verb,
};
use rmcp::model::{
    CacheScope, CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientConfig, ClientRequest, ErrorCode, InitializeResult, JsonObject, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, RequestMetaObject, ServerResult,
};
use rmcp::service::{
    NotificationContext, PeerRequestOptions, RunningService, ServiceError, serve_directly,
};
use rmcp::{ClientHandler, Peer, RoleClient, RoleServer, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::{Notify, mpsc};

/// Every test finishes well within this, or fails instead of hanging CI.
const TEST_TIMEOUT: Duration = Duration::from_secs(30);

async fn within<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(TEST_TIMEOUT, future)
        .await
        .expect("the test did not finish in time")
}

// ---------------------------------------------------------------------------------------------
// The server under test

#[derive(Deserialize, JsonSchema)]
struct Text {
    text: String,
}

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

#[derive(Deserialize, JsonSchema)]
struct Steps {
    steps: u32,
}

#[derive(Serialize, JsonSchema)]
struct Echoed {
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct Done {
    done: bool,
}

#[derive(Serialize, JsonSchema)]
struct Seen {
    /// What the context factory attached.
    trace: Option<String>,
    /// Whether the handler could send progress.
    progress_requested: bool,
}

/// A value the context factory derives from the request's `_meta`.
#[derive(Clone)]
struct Trace(String);

/// What the handlers and the context factory report to the test.
#[derive(Default)]
struct Probe {
    /// How many times the context factory ran.
    factory_runs: AtomicUsize,
    /// The `dev.test/trace` value of each request's `_meta`, as the factory saw it.
    factory_traces: Mutex<Vec<Option<String>>>,
    /// `demo_wait` has started.
    started: Notify,
    /// `demo_wait`'s future was dropped.
    dropped: AtomicBool,
    /// `demo_wait` ran to completion (it never should).
    completed: AtomicBool,
}

/// Sets `Probe::dropped` when the handler's future is dropped, whatever the reason.
struct DropFlag(Arc<Probe>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.dropped.store(true, Ordering::SeqCst);
    }
}

const TOOL_NAMES: [&str; 7] = [
    "demo_echo",
    "demo_fail",
    "demo_panic",
    "demo_progress",
    "demo_wait",
    "demo_seen",
    "demo_alpha",
];

fn demo_server(probe: &Arc<Probe>) -> Server {
    demo_server_with(probe, |builder| builder)
}

fn demo_server_with(
    probe: &Arc<Probe>,
    customize: impl FnOnce(ServerBuilder) -> ServerBuilder,
) -> Server {
    let wait_probe = Arc::clone(probe);
    let builder = ServerBuilder::new("demo", "1.2.3")
        .instructions("A server for transport tests.")
        .tool_spec(
            ToolSpec::query("demo.echo", "Repeats the text.").handler(
                |_: CallContext, args: Text| async move {
                    Ok::<_, ToolError>(Echoed { text: args.text })
                },
            ),
        )
        .tool_spec(
            ToolSpec::action("demo.fail", "Always fails, with a domain error.").handler(
                |_: CallContext, _: NoArgs| async move {
                    Err::<Done, _>(
                        ToolError::new("Broken", "The demo is broken on purpose.")
                            .with_recovery("Call demo_echo instead."),
                    )
                },
            ),
        )
        .tool_spec(ToolSpec::action("demo.panic", "Panics.").handler(
            |_: CallContext, _: NoArgs| async move {
                if true {
                    panic!("the demo handler panicked");
                }
                Ok::<_, ToolError>(Done { done: true })
            },
        ))
        .tool_spec(
            ToolSpec::action("demo.progress", "Reports progress, step by step.").handler(
                |context: CallContext, args: Steps| async move {
                    let progress = Progress::from_context(&context)?;
                    for step in 1..=args.steps {
                        progress
                            .report(
                                f64::from(step),
                                Some(f64::from(args.steps)),
                                format!("step {step}"),
                            )
                            .await;
                    }
                    Ok::<_, ToolError>(Done { done: true })
                },
            ),
        )
        .tool_spec(
            ToolSpec::action("demo.wait", "Waits until cancelled.").handler(
                move |_: CallContext, _: NoArgs| {
                    let probe = Arc::clone(&wait_probe);
                    async move {
                        let _flag = DropFlag(Arc::clone(&probe));
                        probe.started.notify_one();
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        probe.completed.store(true, Ordering::SeqCst);
                        Ok::<_, ToolError>(Done { done: true })
                    }
                },
            ),
        )
        .tool_spec(
            ToolSpec::query("demo.seen", "Says what the call's context holds.").handler(
                |context: CallContext, _: NoArgs| async move {
                    let progress = Progress::from_context(&context)?;
                    Ok::<_, ToolError>(Seen {
                        trace: context
                            .extensions()
                            .get::<Trace>()
                            .map(|trace| trace.0.clone()),
                        progress_requested: progress.is_requested(),
                    })
                },
            ),
        )
        .tool_spec(
            ToolSpec::query("demo.alpha", "Another tool, to fill pages.").handler(
                |_: CallContext, _: NoArgs| async move { Ok::<_, ToolError>(Done { done: true }) },
            ),
        );
    customize(builder).build().expect("the demo server builds")
}

fn demo_mcp(probe: &Arc<Probe>, options: McpOptions) -> Mcp {
    with_factory(Mcp::new(demo_server(probe)).options(options), probe)
}

/// Adds the test's context factory: counts its runs, records the `dev.test/trace` value of
/// each request's `_meta` and attaches it as a [`Trace`].
fn with_factory(mcp: Mcp, probe: &Arc<Probe>) -> Mcp {
    let factory_probe = Arc::clone(probe);
    mcp.context(move |request, call| {
        factory_probe.factory_runs.fetch_add(1, Ordering::SeqCst);
        let trace = request
            .meta()
            .0
            .get("dev.test/trace")
            .and_then(Value::as_str)
            .map(str::to_owned);
        factory_probe
            .factory_traces
            .lock()
            .unwrap()
            .push(trace.clone());
        if let Some(trace) = trace {
            call.extensions_mut().insert(Trace(trace));
        }
    })
}

// ---------------------------------------------------------------------------------------------
// The client side

/// A client that forwards every progress notification to the test.
#[derive(Clone)]
struct ProgressClient {
    progress: mpsc::UnboundedSender<ProgressNotificationParam>,
}

impl ClientHandler for ProgressClient {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.progress.send(params);
    }
}

struct Connected {
    client: RunningService<RoleClient, ProgressClient>,
    progress: mpsc::UnboundedReceiver<ProgressNotificationParam>,
    server: tokio::task::JoinHandle<()>,
    wire: Wire,
}

impl Connected {
    fn peer(&self) -> &Peer<RoleClient> {
        self.client.peer()
    }

    async fn close(self) {
        self.client.cancel().await.expect("the client stops");
        tokio::time::timeout(Duration::from_secs(5), self.server)
            .await
            .expect("the server stops when the client goes away")
            .expect("server task");
    }
}

/// Connects rmcp's client to `mcp` over an in-memory pipe, with the `initialize` handshake
/// (protocol 2025-11-25). Every message on the pipe is recorded in `Connected::wire`.
async fn connect(mcp: &Mcp) -> Connected {
    let (client_io, server_io, wire) = tapped_pipe();
    let handler = mcp.handler();
    let server = tokio::spawn(async move {
        let running = handler.serve(server_io).await.expect("server handshake");
        let _ = running.waiting().await;
    });
    let (sender, progress) = mpsc::unbounded_channel();
    let client = ProgressClient { progress: sender }
        .serve(client_io)
        .await
        .expect("client handshake");
    Connected {
        client,
        progress,
        server,
        wire,
    }
}

/// What went over a pipe, one JSON-RPC message per entry.
#[derive(Clone, Default)]
struct Wire {
    to_server: Arc<Mutex<Vec<Value>>>,
    to_client: Arc<Mutex<Vec<Value>>>,
}

impl Wire {
    fn to_server(&self) -> Vec<Value> {
        self.to_server.lock().unwrap().clone()
    }

    fn to_client(&self) -> Vec<Value> {
        self.to_client.lock().unwrap().clone()
    }
}

/// Two ends of an in-memory pipe carrying newline-delimited JSON-RPC, with a tap in the
/// middle that records every message.
fn tapped_pipe() -> (DuplexStream, DuplexStream, Wire) {
    let (client_io, client_tap) = tokio::io::duplex(64 * 1024);
    let (server_tap, server_io) = tokio::io::duplex(64 * 1024);
    let wire = Wire::default();
    let (from_client, to_client) = tokio::io::split(client_tap);
    let (from_server, to_server) = tokio::io::split(server_tap);
    tokio::spawn(relay(from_client, to_server, Arc::clone(&wire.to_server)));
    tokio::spawn(relay(from_server, to_client, Arc::clone(&wire.to_client)));
    (client_io, server_io, wire)
}

async fn relay(
    from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    record: Arc<Mutex<Vec<Value>>>,
) {
    let mut lines = BufReader::new(from).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Ok(message) = serde_json::from_str(&line) {
            record.lock().unwrap().push(message);
        }
        if to.write_all(line.as_bytes()).await.is_err() || to.write_all(b"\n").await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// Connects without a handshake, both sides already on `version` (how the 2026-07-28
/// discover lifecycle leaves a connection: no `initialize`, per-request metadata).
fn connect_directly(mcp: &Mcp, version: ProtocolVersion) -> Connected {
    let (client_io, server_io, wire) = tapped_pipe();
    let (sender, progress) = mpsc::unbounded_channel();
    let handler = ProgressClient { progress: sender };
    let mut client_info = ClientConfig::default();
    client_info.protocol_version = version.clone();
    let mut server_info = InitializeResult::default();
    server_info.protocol_version = version;
    let running =
        serve_directly::<RoleServer, _, _, _, _>(mcp.handler(), server_io, Some(client_info));
    let server = tokio::spawn(async move {
        let _ = running.waiting().await;
    });
    let client =
        serve_directly::<RoleClient, _, _, _, _>(handler, client_io, Some(server_info.into()));
    Connected {
        client,
        progress,
        server,
        wire,
    }
}

fn arguments(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        other => panic!("not a JSON object: {other}"),
    }
}

async fn call(
    peer: &Peer<RoleClient>,
    tool: &str,
    args: Value,
) -> Result<CallToolResult, ServiceError> {
    peer.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments(args)))
        .await
}

fn page_request(cursor: &str) -> Option<PaginatedRequestParams> {
    Some(PaginatedRequestParams::default().with_cursor(Some(cursor.to_owned())))
}

fn invalid_params(result: Result<impl std::fmt::Debug, ServiceError>) -> String {
    match result {
        Err(ServiceError::McpError(error)) => {
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{error:?}");
            assert_eq!(error.code.0, -32602);
            error.message.into_owned()
        }
        other => panic!("expected a JSON-RPC -32602 error, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Tests

#[tokio::test]
async fn tools_list_pages_with_cursors() {
    within(async {
        let probe = Arc::new(Probe::default());
        let options = McpOptions {
            page_size: 2,
            ..McpOptions::default()
        };
        let connected = connect(&demo_mcp(&probe, options)).await;
        let peer = connected.peer();

        // Walk the pages by hand: 7 tools, 2 per page, 4 pages.
        let mut names = Vec::new();
        let mut cursors = Vec::new();
        let mut page = peer.list_tools(None).await.expect("first page");
        loop {
            assert!(
                page.tools.len() <= 2,
                "a page holds at most page_size tools"
            );
            assert!(!page.tools.is_empty(), "no empty page");
            names.extend(page.tools.iter().map(|tool| tool.name.to_string()));
            let Some(cursor) = page.next_cursor.clone() else {
                break;
            };
            cursors.push(cursor.clone());
            page = peer
                .list_tools(page_request(&cursor))
                .await
                .unwrap_or_else(|error| panic!("page at cursor {cursor}: {error}"));
        }
        assert_eq!(names, TOOL_NAMES, "every tool, once, in registration order");
        assert_eq!(cursors.len(), 3);

        // A cursor is reusable: the same page comes back.
        let again = peer.list_tools(page_request(&cursors[1])).await.unwrap();
        assert_eq!(
            again
                .tools
                .iter()
                .map(|tool| tool.name.as_ref())
                .collect::<Vec<_>>(),
            &TOOL_NAMES[4..6]
        );

        // rmcp's helper follows the cursors too.
        let all = peer.list_all_tools().await.expect("list_all_tools");
        assert_eq!(
            all.iter()
                .map(|tool| tool.name.as_ref())
                .collect::<Vec<_>>(),
            TOOL_NAMES
        );

        // Invalid cursors are JSON-RPC invalid params, never an empty page.
        for bogus in ["bogus", "page-4", "page-99", "page--1", "page-", ""] {
            let message = invalid_params(peer.list_tools(page_request(bogus)).await);
            assert!(message.contains("cursor"), "{bogus:?}: {message}");
        }
        // The connection survives them.
        assert_eq!(peer.list_all_tools().await.unwrap().len(), 7);

        connected.close().await;
    })
    .await;
}

#[tokio::test]
async fn one_page_by_default_and_get_tool() {
    within(async {
        let probe = Arc::new(Probe::default());
        let mcp = demo_mcp(&probe, McpOptions::default());
        let connected = connect(&mcp).await;
        let page = connected.peer().list_tools(None).await.unwrap();
        assert_eq!(page.tools.len(), 7);
        assert_eq!(page.next_cursor, None);

        let handler = mcp.handler();
        let echo = handler
            .get_tool("demo_echo")
            .expect("get_tool finds demo_echo");
        assert_eq!(echo.name, "demo_echo");
        assert_eq!(echo, page.tools[0], "the same definition as in tools/list");
        assert_eq!(echo.input_schema["required"], json!(["text"]));
        assert!(echo.output_schema.is_some());
        assert!(
            handler.get_tool("demo.echo").is_none(),
            "keys are not names"
        );
        assert!(handler.get_tool("nope").is_none());

        // The handshake reports the server's identity and instructions.
        let info = connected.peer().peer_info().expect("server info");
        let server = info.server_info.as_ref().expect("serverInfo");
        assert_eq!(
            (server.name.as_str(), server.version.as_str()),
            ("demo", "1.2.3")
        );
        // The author's instructions, then the envelope every tool answers with, said once.
        let instructions = info.instructions.as_deref().expect("instructions");
        assert!(
            instructions.starts_with("A server for transport tests.\n\n"),
            "{instructions}"
        );
        assert!(
            instructions.contains("structuredContent {ok: true, data, meta?}"),
            "{instructions}"
        );
        connected.close().await;
    })
    .await;
}

#[tokio::test]
async fn list_results_carry_cache_hints_for_2026_07_28() {
    within(async {
        let probe = Arc::new(Probe::default());
        let options = McpOptions {
            page_size: 3,
            list_ttl: Duration::from_millis(4_321),
            list_cache_scope: CacheScope::Private,
            ..McpOptions::default()
        };
        let connected = connect_directly(&demo_mcp(&probe, options), ProtocolVersion::V_2026_07_28);
        let peer = connected.peer();
        let first = peer
            .list_tools(None)
            .await
            .expect("tools/list on 2026-07-28");
        assert_eq!(first.ttl_ms, Some(4_321));
        assert_eq!(first.cache_scope, Some(CacheScope::Private));
        let second = peer
            .list_tools(page_request(first.next_cursor.as_deref().unwrap()))
            .await
            .unwrap();
        assert_eq!(second.ttl_ms, Some(4_321));
        assert_eq!(second.cache_scope, Some(CacheScope::Private));

        let merged = peer.list_all_tools_with_cache_hint().await.unwrap();
        assert_eq!(merged.items.len(), 7);
        assert_eq!(merged.cache_scope, Some(CacheScope::Private));
        assert!(merged.ttl_ms.is_some_and(|ttl| ttl <= 4_321));

        // Calls work on this revision too, with per-request metadata instead of a handshake.
        let result = call(peer, "demo_echo", json!({"text": "hi"}))
            .await
            .unwrap();
        assert_eq!(
            result.structured_content.unwrap()["data"],
            json!({"text": "hi"})
        );
        connected.close().await;

        // The defaults: five minutes, public.
        let connected = connect_directly(
            &demo_mcp(&probe, McpOptions::default()),
            ProtocolVersion::V_2026_07_28,
        );
        let page = connected.peer().list_tools(None).await.unwrap();
        assert_eq!(page.ttl_ms, Some(300_000));
        assert_eq!(page.cache_scope, Some(CacheScope::Public));
        connected.close().await;
    })
    .await;
}

#[tokio::test]
async fn context_factory_runs_once_per_request_and_sees_meta() {
    within(async {
        let probe = Arc::new(Probe::default());
        let connected = connect(&demo_mcp(&probe, McpOptions::default())).await;
        let peer = connected.peer();
        // Listing tools builds no call context.
        peer.list_all_tools().await.unwrap();
        assert_eq!(probe.factory_runs.load(Ordering::SeqCst), 0);

        for (index, trace) in ["abc", "def", "ghi"].into_iter().enumerate() {
            let meta: RequestMetaObject =
                serde_json::from_value(json!({"dev.test/trace": trace})).unwrap();
            let mut params =
                CallToolRequestParams::new("demo_seen").with_arguments(JsonObject::new());
            params.meta = Some(meta);
            let result = peer.call_tool(params).await.expect("demo_seen");
            let data = &result.structured_content.unwrap()["data"];
            assert_eq!(
                data["trace"], trace,
                "the handler sees what the factory derived"
            );
            assert_eq!(
                data["progress_requested"], true,
                "rmcp's client always sends a progress token"
            );
            assert_eq!(probe.factory_runs.load(Ordering::SeqCst), index + 1);
        }
        // Without the key, the factory sees none, and nothing leaks from the previous call.
        let result = call(peer, "demo_seen", json!({})).await.unwrap();
        assert_eq!(
            result.structured_content.unwrap()["data"]["trace"],
            Value::Null
        );
        // A call that fails validation still ran the factory, once.
        let _ = call(peer, "demo_echo", json!({"text": 1})).await.unwrap();
        assert_eq!(probe.factory_runs.load(Ordering::SeqCst), 5);
        assert_eq!(
            *probe.factory_traces.lock().unwrap(),
            vec![
                Some("abc".to_owned()),
                Some("def".to_owned()),
                Some("ghi".to_owned()),
                None,
                None
            ]
        );
        connected.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_panicking_context_factory_is_an_internal_error_and_the_server_keeps_serving() {
    within(async {
        let probe = Arc::new(Probe::default());
        // An access policy makes `tools/list` build a call context too.
        let server = demo_server_with(&probe, |builder| {
            builder.access(|_: &CallContext, _: ActionInfo<'_>| true)
        });
        let mcp = Mcp::new(server).context(|request, _call| {
            if request.meta().0.contains_key("dev.test/panic") {
                panic!("factory secret: db password hunter2");
            }
        });
        let connected = connect(&mcp).await;
        let peer = connected.peer();
        let panicking = || {
            let meta: RequestMetaObject =
                serde_json::from_value(json!({"dev.test/panic": true})).unwrap();
            Some(meta)
        };

        let mut params = CallToolRequestParams::new("demo_echo")
            .with_arguments(arguments(json!({"text": "hi"})));
        params.meta = panicking();
        let failed = peer.call_tool(params).await.expect("a result, not silence");
        assert_eq!(failed.is_error, Some(true));
        let body = failed.structured_content.clone().unwrap();
        assert_eq!(body["error"]["code"], "INTERNAL_ERROR", "{body}");
        assert!(
            body["error"]["errorId"]
                .as_str()
                .is_some_and(|id| !id.is_empty())
        );
        let wire = serde_json::to_string(&failed).unwrap();
        assert!(
            !wire.contains("hunter2") && !wire.contains("factory"),
            "{wire}"
        );

        let mut list = PaginatedRequestParams::default();
        list.meta = panicking();
        let refused = peer
            .list_tools(Some(list))
            .await
            .expect_err("no list from a broken factory");
        let ServiceError::McpError(error) = refused else {
            panic!("a JSON-RPC error, got {refused:?}")
        };
        assert_eq!(error.code, ErrorCode::INTERNAL_ERROR);
        assert!(error.message.contains("errorId"), "{}", error.message);
        assert!(!error.message.contains("hunter2"), "{}", error.message);

        // The same connection still serves.
        let echoed = call(peer, "demo_echo", json!({"text": "again"}))
            .await
            .unwrap();
        assert_eq!(echoed.structured_content.unwrap()["data"]["text"], "again");
        assert!(!peer.list_all_tools().await.unwrap().is_empty());
        connected.close().await;
    })
    .await;
}

/// What a context factory saw of one request, inside the factory.
#[derive(Debug, Default)]
struct FactoryView {
    request_id: Option<Value>,
    progress: Option<ProgressToken>,
    call_progress: Option<ProgressToken>,
    call_trace: Option<Value>,
    /// The factory cancelled `RequestInfo::cancellation`; is `call.cancellation()` cancelled?
    call_cancelled: bool,
}

#[tokio::test]
async fn the_factory_sees_a_call_that_already_knows_its_request() {
    within(async {
        let probe = Arc::new(Probe::default());
        let view = Arc::new(Mutex::new(FactoryView::default()));
        let recorder = Arc::clone(&view);
        let mcp = Mcp::new(demo_server(&probe)).context(move |request, call| {
            let cancel = request.meta().0.contains_key("dev.test/cancel");
            if cancel {
                request.cancellation().cancel();
            }
            *recorder.lock().unwrap() = FactoryView {
                request_id: Some(serde_json::to_value(request.request_id()).unwrap()),
                progress: request.progress_token(),
                call_progress: call.progress_token(),
                call_trace: call.meta().0.get("dev.test/trace").cloned(),
                call_cancelled: cancel && call.cancellation().is_cancelled(),
            };
        });
        let connected = connect(&mcp).await;
        let peer = connected.peer().clone();

        let mut params = CallToolRequestParams::new("demo_seen").with_arguments(JsonObject::new());
        params.meta = Some(serde_json::from_value(json!({"dev.test/trace": "t-1"})).unwrap());
        let handle = peer
            .send_request_with_option(
                ClientRequest::CallToolRequest(CallToolRequest::new(params)),
                PeerRequestOptions::no_options(),
            )
            .await
            .expect("request sent");
        let (id, token) = (handle.id.clone(), handle.progress_token.clone());
        handle.await_response().await.expect("response");
        {
            let view = view.lock().unwrap();
            assert_eq!(view.request_id, Some(serde_json::to_value(&id).unwrap()));
            assert_eq!(
                view.progress.as_ref(),
                Some(&token),
                "the client's own token"
            );
            assert_eq!(view.call_progress.as_ref(), Some(&token));
            assert_eq!(view.call_trace, Some(json!("t-1")));
            assert!(!view.call_cancelled);
        }

        // The call's cancellation is the request's.
        let mut params = CallToolRequestParams::new("demo_seen").with_arguments(JsonObject::new());
        params.meta = Some(serde_json::from_value(json!({"dev.test/cancel": true})).unwrap());
        let _ = peer.call_tool(params).await;
        assert!(view.lock().unwrap().call_cancelled);
        connected.close().await;
    })
    .await;
}

#[tokio::test]
async fn progress_reaches_the_client_that_asked() {
    within(async {
        let probe = Arc::new(Probe::default());
        let mut connected = connect(&demo_mcp(&probe, McpOptions::default())).await;
        let peer = connected.peer().clone();
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new("demo_progress")
                .with_arguments(arguments(json!({"steps": 3}))),
        ));
        let handle = peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .expect("request sent");
        let token: ProgressToken = handle.progress_token.clone();
        let response = handle.await_response().await.expect("response");
        let ServerResult::CallToolResult(result) = response else {
            panic!("not a tool result: {response:?}");
        };
        assert_eq!(result.is_error, Some(false));

        let mut received = Vec::new();
        while received.len() < 3 {
            let notification =
                tokio::time::timeout(Duration::from_secs(5), connected.progress.recv())
                    .await
                    .expect("three progress notifications")
                    .expect("channel open");
            received.push(notification);
        }
        for (index, notification) in received.iter().enumerate() {
            assert_eq!(
                notification.progress_token, token,
                "the request's own token"
            );
            assert_eq!(notification.progress, (index + 1) as f64);
            assert_eq!(notification.total, Some(3.0));
            assert_eq!(
                notification.message.as_deref(),
                Some(format!("step {}", index + 1).as_str())
            );
        }
        connected.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_cancelled_call_stops_its_handler() {
    within(async {
        let probe = Arc::new(Probe::default());
        let connected = connect(&demo_mcp(&probe, McpOptions::default())).await;
        let peer = connected.peer().clone();

        // Send the call, wait until the handler runs, then cancel with notifications/cancelled.
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new("demo_wait").with_arguments(JsonObject::new()),
        ));
        let started = probe.started.notified();
        let mut handle = peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .expect("request sent");
        started.await;
        assert!(!probe.dropped.load(Ordering::SeqCst));
        peer.notify_cancelled(CancelledNotificationParam::new(
            Some(handle.id.clone()),
            Some("the user gave up".into()),
        ))
        .await
        .expect("cancellation sent");
        wait_for(|| probe.dropped.load(Ordering::SeqCst), "the handler's future is dropped").await;
        assert!(!probe.completed.load(Ordering::SeqCst), "the handler never completed");

        // rmcp's client gives up on the request at once, with a local error.
        let local = tokio::time::timeout(Duration::from_secs(5), &mut handle.rx)
            .await
            .expect("the client settles the cancelled request");
        assert!(
            matches!(&local, Ok(Err(ServiceError::Cancelled { reason })) if reason.as_deref() == Some("the user gave up")),
            "{local:?}"
        );
        // And the server sends no response to a cancelled request: after a round trip that
        // the server answers, nothing on the wire answers the cancelled id.
        call(&peer, "demo_echo", json!({"text": "still here"}))
            .await
            .unwrap();
        let id = serde_json::to_value(&handle.id).unwrap();
        let wire = connected.wire.to_client();
        assert!(
            !wire.iter().any(|message| message["id"] == id),
            "a response to the cancelled request {id}: {wire:#?}"
        );
        let cancel = connected.wire.to_server();
        assert!(cancel.iter().any(|message| message["method"] == "notifications/cancelled"
            && message["params"]["requestId"] == id));
        assert!(!probe.completed.load(Ordering::SeqCst));
        connected.close().await;
    })
    .await;
}

#[tokio::test]
async fn dropping_the_call_future_cancels_the_handler() {
    within(async {
        let probe = Arc::new(Probe::default());
        let connected = connect(&demo_mcp(&probe, McpOptions::default())).await;
        let peer = connected.peer().clone();

        // rmcp's `call_tool` future sends notifications/cancelled when it is dropped unfinished.
        let started = probe.started.notified();
        tokio::select! {
            result = call(&peer, "demo_wait", json!({})) => panic!("demo_wait returned: {result:?}"),
            () = started => {}
        }
        wait_for(|| probe.dropped.load(Ordering::SeqCst), "the handler's future is dropped").await;
        assert!(!probe.completed.load(Ordering::SeqCst), "the handler never completed");
        let result = call(&peer, "demo_echo", json!({"text": "next"})).await.unwrap();
        assert_eq!(result.is_error, Some(false));
        // What went over the wire: the call, then rmcp's cancellation of it, and no response.
        let sent = connected.wire.to_server();
        let request = sent
            .iter()
            .find(|message| message["params"]["name"] == "demo_wait")
            .expect("the demo_wait request");
        let cancel = sent
            .iter()
            .find(|message| message["method"] == "notifications/cancelled")
            .expect("a notifications/cancelled");
        assert_eq!(cancel["params"]["requestId"], request["id"]);
        assert_eq!(cancel["params"]["reason"], "request abandoned by the caller");
        let received = connected.wire.to_client();
        assert!(!received.iter().any(|message| message["id"] == request["id"]));
        connected.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_cancelled_call_is_a_cancelled_result_in_process() {
    // Below the transport: the same cancellation token, cancelled by hand, yields CANCELLED.
    within(async {
        let probe = Arc::new(Probe::default());
        let server = demo_server(&probe);
        let context = server.new_context();
        let token = context.cancellation().clone();
        let started = probe.started.notified();
        let running = tokio::spawn({
            let server = server.clone();
            async move {
                server
                    .call_tool("demo_wait", Some(JsonObject::new()), context)
                    .await
            }
        });
        started.await;
        token.cancel();
        let result = running
            .await
            .unwrap()
            .expect("a known tool")
            .into_protocol();
        assert!(probe.dropped.load(Ordering::SeqCst));
        assert!(!probe.completed.load(Ordering::SeqCst));
        assert_eq!(result.is_error, Some(true));
        let envelope = result.structured_content.unwrap();
        assert_eq!(envelope["ok"], false);
        assert_eq!(envelope["error"]["code"], "CANCELLED");
    })
    .await;
}

#[tokio::test]
async fn an_access_policy_pages_what_each_caller_may_see() {
    within(async {
        // Queries for everyone; the other tools only for a caller whose `_meta` says "admin".
        let probe = Arc::new(Probe::default());
        let server = demo_server_with(&probe, |builder| {
            builder.access(|call: &CallContext, action: ActionInfo<'_>| {
                action.verb() == Verb::Query
                    || call
                        .extensions()
                        .get::<Trace>()
                        .is_some_and(|trace| trace.0 == "admin")
            })
        });
        let options = McpOptions {
            page_size: 2,
            ..McpOptions::default()
        };
        let mcp = with_factory(Mcp::new(server).options(options), &probe);
        let queries = ["demo_echo", "demo_seen", "demo_alpha"];

        // Anonymous: two pages of queries, private, an invalid cursor past the end.
        let anonymous = connect_directly(&mcp, ProtocolVersion::V_2026_07_28);
        let peer = anonymous.peer();
        let first = peer.list_tools(None).await.expect("first page");
        assert_eq!(
            first.cache_scope,
            Some(CacheScope::Private),
            "depends on the caller"
        );
        let cursor = first.next_cursor.clone().expect("a second page");
        let second = peer
            .list_tools(page_request(&cursor))
            .await
            .expect("second page");
        assert_eq!(second.next_cursor, None);
        let names: Vec<String> = first
            .tools
            .iter()
            .chain(&second.tools)
            .map(|tool| tool.name.to_string())
            .collect();
        assert_eq!(names, queries);
        for bogus in ["page-2", "page-9", "nope"] {
            invalid_params(peer.list_tools(page_request(bogus)).await);
        }
        // What it cannot see, it cannot call.
        let denied = call(peer, "demo_fail", json!({})).await.expect("a result");
        assert_eq!(denied.is_error, Some(true));
        assert_eq!(
            denied.structured_content.unwrap()["error"]["code"],
            "FORBIDDEN"
        );
        anonymous.close().await;

        // The admin sees every tool, over four pages.
        let admin = connect_directly(&mcp, ProtocolVersion::V_2026_07_28);
        let peer = admin.peer();
        let meta: RequestMetaObject =
            serde_json::from_value(json!({"dev.test/trace": "admin"})).unwrap();
        let mut names = Vec::new();
        let mut cursor = None;
        loop {
            let mut params = PaginatedRequestParams::default().with_cursor(cursor);
            params.meta = Some(meta.clone());
            let page = peer.list_tools(Some(params)).await.expect("admin page");
            names.extend(page.tools.iter().map(|tool| tool.name.to_string()));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(names, TOOL_NAMES);
        admin.close().await;
    })
    .await;
}

#[tokio::test]
async fn failures_are_results_and_unknown_tools_are_protocol_errors() {
    within(async {
        let probe = Arc::new(Probe::default());
        let connected = connect(&demo_mcp(&probe, McpOptions::default())).await;
        let peer = connected.peer();

        let ok = call(peer, "demo_echo", json!({"text": "hello"}))
            .await
            .unwrap();
        assert_eq!(ok.is_error, Some(false));
        let envelope = ok.structured_content.unwrap();
        assert_eq!(envelope["ok"], true);
        assert_eq!(envelope["data"], json!({"text": "hello"}));
        // The tool and its version are in the listing, not in every answer.
        assert_eq!(envelope.get("meta"), None);

        let failed = call(peer, "demo_fail", json!({}))
            .await
            .expect("a result, not an error");
        assert_eq!(failed.is_error, Some(true));
        let error = &failed.structured_content.as_ref().unwrap()["error"];
        assert_eq!(error["code"], "Broken");
        // The recovery is said once, in the block the agent reads.
        assert_eq!(error.get("recovery"), None);
        let block = failed.content[0]
            .as_text()
            .expect("a text block")
            .text
            .clone();
        assert!(block.starts_with("<tool_error code=\"Broken\">"), "{block}");

        let panicked = call(peer, "demo_panic", json!({}))
            .await
            .expect("a result, not an error");
        assert_eq!(panicked.is_error, Some(true));
        let error = &panicked.structured_content.as_ref().unwrap()["error"];
        assert_eq!(error["code"], "INTERNAL_ERROR");
        assert!(
            !error.to_string().contains("the demo handler panicked"),
            "a panic's text stays in the logs: {error}"
        );

        let invalid = call(peer, "demo_echo", json!({"text": 5}))
            .await
            .expect("a result");
        assert_eq!(invalid.is_error, Some(true));
        assert_eq!(
            invalid.structured_content.unwrap()["error"]["code"],
            "VALIDATION_ERROR"
        );

        let message = invalid_params(call(peer, "demo_nope", json!({})).await);
        assert!(message.contains("demo_nope"), "{message}");
        // Without arguments at all, too.
        let message = invalid_params(
            peer.call_tool(CallToolRequestParams::new("demo.echo"))
                .await,
        );
        assert!(message.contains("demo.echo"), "{message}");

        // The server still serves after all of that.
        let ok = call(peer, "demo_echo", json!({"text": "again"}))
            .await
            .unwrap();
        assert_eq!(ok.is_error, Some(false));
        connected.close().await;
    })
    .await;
}

/// Polls `condition` every 5 ms for up to 5 s.
async fn wait_for(condition: impl Fn() -> bool, what: &str) {
    for _ in 0..1000 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting until {what}");
}

//! A 2025-11-25 session's plain `tools/call`s answered beside the session's worker
//! (`serve/session_calls.rs`): rmcp's answer, on the connection's own task; every call that
//! could need the call's own stream (a progress token, a log level, a tool that asks or logs, a
//! handler given the whole call context) still answered by the worker; and a call cancelled by
//! its client, or whose client goes away, stopped with its path still ended.
#![cfg(feature = "http")]

mod support;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use fusion_runtime::args::ArgReader;
use fusion_runtime::present::Plain;
use fusion_runtime::serve::{HttpOptions, Mcp};
use fusion_runtime::{CallContext, Params, ServerBuilder, ToolError, ToolSpec};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use support::calls::{Echoed, Millis, NoArgs, Seen, Text};
use support::{Raw, RawResponse, Served, call, eventually, within};

/// A tool as `#[tool]` generates it: its arguments read whole, `context` declaring its context
/// parameters, and the handler given only its arguments (not the whole call context).
fn generated<A, F, Fut>(spec: ToolSpec, context: fn(&mut Params), f: F) -> ToolSpec
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Echoed, ToolError>> + Send + 'static,
{
    let mut params = Params::new();
    params.whole::<A>();
    context(&mut params);
    let f = Arc::new(f);
    spec.with_params(params)
        .with_call_handler::<Plain, Echoed, ToolError, _, _, _>(move |mut reader: ArgReader<'_>| {
            let args = reader.whole::<A>();
            reader.finish()?;
            let args = args.ok_or_else(|| ToolError::internal_message("no arguments"))?;
            let f = Arc::clone(&f);
            Ok(move |_: CallContext| async move { Ok(f(args).await) })
        })
}

fn no_context(_: &mut Params) {}

/// `echo` repeats its text; `task_id` answers with the tokio task it runs on; `slow` waits;
/// `logs` takes a `Log` (it may tell the client things tied to the call); `whole` is given the
/// whole call context. `seen` counts what the pipeline reports.
fn server(seen: Arc<Seen>) -> fusion_runtime::Server {
    let metrics: Arc<dyn fusion_runtime::Metrics> = Arc::clone(&seen) as _;
    ServerBuilder::new("sessions", "1.0.0")
        .metrics(metrics)
        .tool_spec(generated(
            ToolSpec::query("demo.echo", "Repeats the text."),
            no_context,
            |args: Text| async move { Ok(Echoed { text: args.text }) },
        ))
        .tool_spec(generated(
            ToolSpec::query("demo.task_id", "The tokio task the call runs on."),
            no_context,
            |_: NoArgs| async move {
                Ok(Echoed {
                    text: tokio::task::id().to_string(),
                })
            },
        ))
        .tool_spec(generated(
            ToolSpec::query("demo.logs", "Runs on the task it is given, with a log."),
            |params| params.context::<fusion_runtime::logging::Log>(),
            |_: NoArgs| async move {
                Ok(Echoed {
                    text: tokio::task::id().to_string(),
                })
            },
        ))
        .tool_spec(
            ToolSpec::query("demo.whole", "Given the whole call context.").handler(
                |_: CallContext, _: NoArgs| async move {
                    Ok::<_, ToolError>(Echoed {
                        text: tokio::task::id().to_string(),
                    })
                },
            ),
        )
        .tool_spec(generated(
            ToolSpec::query("demo.slow", "Waits."),
            no_context,
            move |args: Millis| {
                let seen = Arc::clone(&seen);
                async move {
                    seen.begun.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(args.millis)).await;
                    Ok(Echoed {
                        text: "done".into(),
                    })
                }
            },
        ))
        .build()
        .expect("the server builds")
}

async fn serve(seen: Arc<Seen>) -> Served {
    Served::start(Mcp::new(server(seen)), HttpOptions::default()).await
}

/// A new session on `raw`: its id.
async fn open(raw: &mut Raw) -> String {
    let opened = raw.open_session(None).await.expect("initialize");
    assert_eq!(opened.status, 200, "{}", opened.text());
    opened
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned()
}

async fn post(raw: &mut Raw, session: &str, message: &Value) -> RawResponse {
    let response = raw.post(None, Some(session), message).await.expect("post");
    assert_eq!(response.status, 200, "{}", response.text());
    response
}

/// Whether the session's worker answered: its request streams start with an event that has
/// an id (for resuming), which an answer made beside it does not carry.
fn from_worker(response: &RawResponse) -> bool {
    response.text().lines().any(|line| line.starts_with("id:"))
}

/// Sends `message` in `session` without reading its answer.
async fn send(raw: &mut Raw, session: &str, message: &Value) {
    let headers = [
        ("Accept", "application/json, text/event-stream"),
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let body = message.to_string();
    raw.send("POST", &headers, Some(&body)).await.expect("sent");
}

/// `demo_echo` of `text`, as request `id` of `session`.
async fn echo(raw: &mut Raw, session: &str, id: u64, text: &str) -> RawResponse {
    post(
        raw,
        session,
        &call(id, "demo_echo", json!({ "text": text })),
    )
    .await
}

fn text_of(response: &RawResponse) -> String {
    response.message()["result"]["structuredContent"]["data"]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text: {}", response.text()))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_plain_calls_get_the_workers_answer_on_the_connections_task() {
    within(async {
        let served = serve(Arc::default()).await;
        let cases = [
            ("demo_echo", json!({"text": "hello \"world\" é"})),
            // Arguments the tool refuses: an error result.
            ("demo_echo", json!({"text": 42})),
            ("demo_echo", json!({})),
            // A tool the server does not have: a JSON-RPC error.
            ("demo_nothing", json!({})),
        ];
        for (tool, arguments) in cases {
            // The first call of a session goes through its worker; the same call again is
            // answered beside it, with the same message.
            let mut raw = Raw::connect(served.address).await.expect("connect");
            let session = open(&mut raw).await;
            let first = post(&mut raw, &session, &call(7, tool, arguments.clone())).await;
            let again = post(&mut raw, &session, &call(7, tool, arguments.clone())).await;
            assert!(from_worker(&first), "{}", first.text());
            if tool == "demo_nothing" {
                // Not one of the server's tools: always the worker's.
                assert!(from_worker(&again), "{}", again.text());
            } else {
                assert!(!from_worker(&again), "{}", again.text());
            }
            assert_eq!(first.message(), again.message(), "{tool} {arguments}");
            assert_eq!(
                first.header("content-type"),
                again.header("content-type"),
                "{tool}"
            );
        }
        // On one keep-alive connection, the calls answered beside the worker run on the
        // connection's task: nothing is spawned for them.
        let mut raw = Raw::connect(served.address).await.expect("connect");
        let session = open(&mut raw).await;
        let task = |id| call(id, "demo_task_id", json!({}));
        let by_worker = text_of(&post(&mut raw, &session, &task(1)).await);
        let second = text_of(&post(&mut raw, &session, &task(2)).await);
        let third = text_of(&post(&mut raw, &session, &task(3)).await);
        assert_eq!(second, third);
        assert_ne!(by_worker, second);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_that_could_need_their_own_stream_are_still_the_workers() {
    within(async {
        let served = serve(Arc::default()).await;
        let mut raw = Raw::connect(served.address).await.expect("connect");
        let session = open(&mut raw).await;
        echo(&mut raw, &session, 1, "a").await;
        // Plain: beside the worker.
        let plain = echo(&mut raw, &session, 2, "b").await;
        assert!(!from_worker(&plain), "{}", plain.text());
        // A progress token: the worker's (its notifications ride the call's stream).
        let progress = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "demo_echo", "arguments": {"text": "c"}, "_meta": {"progressToken": "p"}}});
        let progress = post(&mut raw, &session, &progress).await;
        assert!(from_worker(&progress), "{}", progress.text());
        assert_eq!(text_of(&progress), "c");
        // A tool that takes a `Log`, and one given the whole call context: the worker's.
        for tool in ["demo_logs", "demo_whole"] {
            let answered = post(&mut raw, &session, &call(4, tool, json!({}))).await;
            assert!(from_worker(&answered), "{tool}: {}", answered.text());
        }
        // A session that asked for log messages: every call is the worker's.
        let level = json!({"jsonrpc": "2.0", "id": 5, "method": "logging/setLevel",
            "params": {"level": "info"}});
        post(&mut raw, &session, &level).await;
        let logged = echo(&mut raw, &session, 6, "d").await;
        assert!(from_worker(&logged), "{}", logged.text());
        // Another session is not affected.
        let other = open(&mut raw).await;
        echo(&mut raw, &other, 1, "e").await;
        let plain = echo(&mut raw, &other, 2, "f").await;
        assert!(!from_worker(&plain), "{}", plain.text());
    })
    .await;
}

/// Waits until the slow tool has begun `count` calls.
async fn begun(seen: &Arc<Seen>, count: usize) {
    eventually(Duration::from_secs(10), "the call begins", || {
        let seen = Arc::clone(seen);
        async move { seen.begun.load(Ordering::SeqCst) == count }
    })
    .await;
}

/// Waits until the pipeline reported `count` calls of the slow tool ended; their last outcome.
async fn ended(seen: &Arc<Seen>, count: usize) -> String {
    eventually(Duration::from_secs(10), "the call's path ends", || {
        let seen = Arc::clone(seen);
        async move { seen.ended.load(Ordering::SeqCst) == count }
    })
    .await;
    seen.outcome.lock().unwrap().clone()
}

/// A new session on its own connection, its first call made (through the worker), and a
/// slow call, request 2, running beside the worker: the `count`th slow call begun. The
/// connection the slow call waits on, and the session.
async fn slow_call_running(served: &Served, seen: &Arc<Seen>, count: usize) -> (Raw, String) {
    let mut raw = Raw::connect(served.address).await.expect("connect");
    let session = open(&mut raw).await;
    echo(&mut raw, &session, 1, "a").await;
    let slow = call(2, "demo_slow", json!({"millis": 20_000}));
    send(&mut raw, &session, &slow).await;
    begun(seen, count).await;
    (raw, session)
}

/// The client cancels request `id` of `session`: a notification, accepted.
async fn cancel(raw: &mut Raw, session: &str, id: u64) {
    let cancelled = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "the user changed their mind"}});
    let accepted = raw
        .post(None, Some(session), &cancelled)
        .await
        .expect("post");
    assert_eq!(accepted.status, 202, "{}", accepted.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_answered_beside_the_worker_is_cancelled_by_its_client() {
    within(async {
        let seen = Arc::new(Seen::default());
        let served = serve(Arc::clone(&seen)).await;
        let (mut raw, session) = slow_call_running(&served, &seen, 1).await;
        // The client cancels it, on another connection: the handler stops where it waits
        // (not after its 20 s), and the call's path ends.
        let mut other = Raw::connect(served.address).await.expect("connect");
        cancel(&mut other, &session, 2).await;
        let outcome = ended(&seen, 1).await;
        assert!(outcome.contains("CANCELLED"), "{outcome}");
        // Its stream still ends with an answer, and the session goes on.
        let answer = raw.response().await.expect("the cancelled call's answer");
        assert!(!from_worker(&answer), "{}", answer.text());
        let after = echo(&mut raw, &session, 3, "b").await;
        assert_eq!(text_of(&after), "b");
        // A cancellation of another session's request id touches nothing here.
        let third = echo(&mut raw, &session, 4, "c").await;
        assert_eq!(text_of(&third), "c");

        // A session that ends (DELETE) ends its calls too.
        // Its connection stays open: the call ends because the session does.
        let (_waiting, session) = slow_call_running(&served, &seen, 2).await;
        let mut other = Raw::connect(served.address).await.expect("connect");
        let deleted = other.delete(None, &session).await.expect("delete");
        assert!(deleted.status < 300, "{}", deleted.text());
        let outcome = ended(&seen, 2).await;
        assert!(outcome.contains("CANCELLED"), "{outcome}");

        // A client that goes away: its call is stopped too, and its path still ends.
        let (raw, _) = slow_call_running(&served, &seen, 3).await;
        drop(raw);
        let outcome = ended(&seen, 3).await;
        assert!(outcome.contains("CANCELLED"), "{outcome}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_id_reused_while_its_call_runs_goes_to_the_worker_and_both_stay_cancellable() {
    within(async {
        let seen = Arc::new(Seen::default());
        let served = serve(Arc::clone(&seen)).await;
        let (mut raw, session) = slow_call_running(&served, &seen, 1).await;
        // The same id again while the slow call runs beside the worker: answered, by the
        // worker, and without taking the slow call's place.
        let mut other = Raw::connect(served.address).await.expect("connect");
        let reused = echo(&mut other, &session, 2, "b").await;
        assert!(from_worker(&reused), "{}", reused.text());
        assert_eq!(text_of(&reused), "b");
        // So the client can still cancel the slow call by its id.
        cancel(&mut other, &session, 2).await;
        let outcome = ended(&seen, 1).await;
        assert!(outcome.contains("CANCELLED"), "{outcome}");
        // Once it has ended, the id is free again for a call beside the worker.
        let answer = raw.response().await.expect("the cancelled call's answer");
        assert!(!from_worker(&answer), "{}", answer.text());
        let again = echo(&mut raw, &session, 2, "c").await;
        assert!(!from_worker(&again), "{}", again.text());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_in_a_call_answered_beside_the_worker_can_ask_the_client() {
    within(async {
        // A provider (or any middleware) given the call's context could take an `Elicit` from
        // it, which the tool's declared parameters do not show: beside the worker, its
        // question could not ride the call's stream, so the client cannot be asked at all.
        let supported = Arc::new(std::sync::Mutex::new(Vec::new()));
        let recorded = Arc::clone(&supported);
        let server = ServerBuilder::new("asking", "1.0.0")
            .provide(move |context: &CallContext| {
                use fusion_runtime::FromContext as _;
                let elicit = fusion_runtime::elicit::Elicit::from_context(context)?;
                recorded.lock().unwrap().push(elicit.supported());
                Ok(())
            })
            .tool_spec(generated(
                ToolSpec::query("demo.echo", "Repeats the text."),
                no_context,
                |args: Text| async move { Ok(Echoed { text: args.text }) },
            ))
            .build()
            .expect("the server builds");
        let served = Served::start(Mcp::new(server), HttpOptions::default()).await;
        let mut raw = Raw::connect(served.address).await.expect("connect");
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "asks", "version": "1.0.0"}}});
        let opened = raw.post(None, None, &initialize).await.expect("initialize");
        let session = opened
            .header("mcp-session-id")
            .expect("a session")
            .to_owned();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        raw.post(None, Some(&session), &initialized)
            .await
            .expect("initialized");
        let first = echo(&mut raw, &session, 1, "a").await;
        let second = echo(&mut raw, &session, 2, "b").await;
        assert!(from_worker(&first) && !from_worker(&second));
        assert_eq!(*supported.lock().unwrap(), [true, false]);
    })
    .await;
}

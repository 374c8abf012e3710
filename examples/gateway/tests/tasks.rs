//! Upstream tasks through the gateway (issue 26): the billing binary (2026-07-28 over HTTP on
//! 127.0.0.1, the gateway's token) mounted behind a gateway served over HTTP with three
//! callers' tokens. rmcp's own client, declaring the tasks extension, starts
//! `billing.export_invoices` through the gateway as a task, in a 2025-11-25 session and
//! stateless 2026-07-28: it gets the gateway's id (not the upstream's), polls it to
//! completion, fetches the CSV (no hidden column) and cancels another; another principal of the
//! same tenant and one of no tenant are told no such task exists; a caller that did not declare
//! the extension gets the export at once; and once the upstream is gone, polling says so
//! without the gateway's internals.
#![cfg(unix)]

mod support;

use std::time::Duration;

use fusion::auth::StaticTokens;
use fusion::gateway::{Upstream, UpstreamProtocol};
use fusion::serve::{HttpOptions, Mcp};
use fusion::{Principal, ServerBuilder};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    ErrorCode, GetTaskParams, GetTaskResult, ProtocolVersion, TaskPayload, TaskStatus,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt as _};
use support::*;

/// The owner of the tasks started here.
const ALICE: &str = "gw-tasks-alice-5d1e";
/// Another principal of alice's tenant, read-only.
const READER: &str = "gw-tasks-reader-90aa";
/// A principal of no tenant.
const MALLORY: &str = "gw-tasks-mallory-3c7f";

const EXPORT: &str = "b_billing_export_invoices";

type Client = RunningService<RoleClient, ClientConfig>;

/// The gateway over HTTP on 127.0.0.1, billing mounted stateless under `b`, with the three
/// callers' tokens; stops when `shutdown` is cancelled.
async fn gateway(billing: &str) -> (String, tokio_util::sync::CancellationToken) {
    let server = ServerBuilder::new("gw", "1.0.0")
        .mount(
            "b",
            Upstream::http(billing)
                .bearer_token("tok-w")
                .protocol(UpstreamProtocol::Stateless),
        )
        .build()
        .unwrap();
    server.upstreams_ready().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let options = HttpOptions::default().bind(address).auth(
        StaticTokens::new()
            .with(ALICE, Principal::new("alice").with_tenant("t1"))
            .with(READER, Principal::new("reader").with_tenant("t1"))
            .with(MALLORY, Principal::new("mallory")),
    );
    let shutdown = options.shutdown.clone();
    let mcp = Mcp::new(server);
    tokio::spawn(async move { mcp.serve_http_on(listener, options).await });
    (format!("http://{address}/mcp"), shutdown)
}

/// A client of `token` at `url`: a session (2025-11-25) or stateless (2026-07-28), declaring
/// the tasks extension when `tasks`.
async fn client(url: &str, token: &str, modern: bool, tasks: bool) -> Client {
    install_crypto_provider();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token),
    );
    let mut config = ClientConfig::default();
    if tasks {
        config.capabilities = ClientCapabilities::builder().enable_tasks().build();
    }
    if modern {
        config
            .serve_with_lifecycle(
                transport,
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            )
            .await
            .unwrap()
    } else {
        config.serve(transport).await.unwrap()
    }
}

async fn start_export(client: &Client) -> String {
    match client
        .peer()
        .call_tool_once(CallToolRequestParams::new(EXPORT))
        .await
    {
        Ok(CallToolResponse::Task(created)) => {
            assert_eq!(created.task.status, TaskStatus::Working);
            created.task.task_id
        }
        other => panic!("the export did not become a task: {other:?}"),
    }
}

async fn get(client: &Client, id: &str) -> Result<GetTaskResult, ServiceError> {
    client.peer().get_task(GetTaskParams::new(id)).await
}

/// Polls task `id` until it leaves `working` (at most 20 s).
async fn settled(client: &Client, id: &str) -> GetTaskResult {
    for _ in 0..1000 {
        let got = get(client, id).await.expect("the owner reads its task");
        assert_eq!(got.task.task.task_id, id, "the gateway's id comes back");
        if got.task.status() != TaskStatus::Working {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("task {id} is still working after 20 s");
}

fn is_unknown_task(error: &ServiceError) -> bool {
    matches!(error, ServiceError::McpError(error) if error.code == ErrorCode::INVALID_PARAMS)
}

/// The export's CSV: a header, a row per invoice of the gateway's tenant, no hidden column.
fn assert_export(result: &fusion::serde_json::Map<String, fusion::serde_json::Value>) {
    let text = fusion::serde_json::Value::Object(result.clone()).to_string();
    assert_eq!(result.get("isError"), Some(&false.into()), "{text}");
    let data = &result["structuredContent"]["data"];
    let csv = data["csv"].as_str().expect("a CSV");
    let rows = data["rows"].as_u64().expect("a row count");
    assert!(rows > 0, "{data}");
    assert_eq!(csv.lines().count() as u64, rows + 1);
    assert_eq!(
        csv.lines().next(),
        Some("id,customer_id,status,total_cents")
    );
    assert!(
        !text.contains("whsec_") && !text.contains("webhook_secret") && !text.contains("t_777,"),
        "a hidden value left in the export: {text}"
    );
}

/// Everything a caller of era `modern` does with tasks through the gateway at `url`; the
/// upstream's own endpoint is `billing` (to show that the gateway's ids are not its).
async fn exercise(url: &str, billing: &str, modern: bool) {
    let alice = client(url, ALICE, modern, true).await;
    let id = start_export(&alice).await;
    assert_eq!(id.len(), 64, "{id}");

    // Another principal of the same tenant, and one of none, are told no such task exists.
    for token in [READER, MALLORY] {
        let other = client(url, token, modern, true).await;
        let read = get(&other, &id).await;
        assert!(
            read.as_ref().is_err_and(is_unknown_task),
            "{token}: {read:?}"
        );
        let cancel = other.peer().cancel_task(CancelTaskParams::new(&id)).await;
        assert!(
            cancel.as_ref().is_err_and(is_unknown_task),
            "{token}: {cancel:?}"
        );
    }
    // The id is the gateway's: the upstream, asked with the gateway's own token, has no such
    // task.
    let upstream = client(billing, "tok-w", true, true).await;
    let direct = get(&upstream, &id).await;
    assert!(direct.as_ref().is_err_and(is_unknown_task), "{direct:?}");

    let done = settled(&alice, &id).await;
    let TaskPayload::Completed { result } = &done.task.payload else {
        panic!("the export completed: {done:?}");
    };
    assert_export(result);
    // Still there, still alice's alone, after it finished.
    let again = settled(&alice, &id).await;
    assert_eq!(again.task.status(), TaskStatus::Completed);
    let reader = client(url, READER, modern, true).await;
    assert!(get(&reader, &id).await.is_err_and(|e| is_unknown_task(&e)));

    // Exports cancelled at once end cancelled, unless one finished first (the seed's export
    // takes milliseconds, the cancel one more hop): of a few tries, one is cancelled.
    let mut ends = Vec::new();
    while ends.len() < 20 && !ends.contains(&TaskStatus::Cancelled) {
        let id = start_export(&alice).await;
        alice
            .peer()
            .cancel_task(CancelTaskParams::new(&id))
            .await
            .expect("the owner cancels");
        ends.push(settled(&alice, &id).await.task.status());
    }
    assert!(
        ends.iter()
            .all(|end| matches!(end, TaskStatus::Cancelled | TaskStatus::Completed)),
        "{ends:?}"
    );
    assert!(ends.contains(&TaskStatus::Cancelled), "{ends:?}");

    // An id never issued is unknown too.
    let never = get(&alice, &"0".repeat(64)).await;
    assert!(never.as_ref().is_err_and(is_unknown_task), "{never:?}");

    // A caller that did not declare the extension gets the export at once, as before.
    let plain = client(url, ALICE, modern, false).await;
    let answered = plain
        .peer()
        .call_tool_once(CallToolRequestParams::new(EXPORT))
        .await
        .unwrap();
    let CallToolResponse::Complete(result) = answered else {
        panic!("a plain call is answered at once: {answered:?}");
    };
    let fusion::serde_json::Value::Object(result) = fusion::serde_json::to_value(result).unwrap()
    else {
        unreachable!()
    };
    assert_export(&result);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_tasks_through_the_gateway_in_each_era() {
    within(async {
        let billing = billing_http();
        let (url, shutdown) = gateway(billing.url()).await;
        for modern in [false, true] {
            exercise(&url, billing.url(), modern).await;
        }
        shutdown.cancel();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_upstream_is_gone_is_said_so_plainly() {
    within(async {
        let billing = billing_http();
        let (url, shutdown) = gateway(billing.url()).await;
        let alice = client(&url, ALICE, true, true).await;
        let id = start_export(&alice).await;
        settled(&alice, &id).await;
        drop(billing);
        let error = match get(&alice, &id).await {
            Err(ServiceError::McpError(error)) => error,
            other => panic!("polling a gone upstream fails: {other:?}"),
        };
        assert_eq!(error.code, ErrorCode::INTERNAL_ERROR, "{error:?}");
        assert!(
            error.message.contains("`b`") && error.message.contains("cannot be reached"),
            "{error:?}"
        );
        for internal in ["127.0.0.1", "error sending request", "Connect", "reqwest"] {
            assert!(!error.message.contains(internal), "{error:?}");
        }
        assert!(error.data.is_none(), "{error:?}");
        shutdown.cancel();
    })
    .await;
}

//! rmcp's stateless (2026-07-28) client with the tasks extension declared, and what the task
//! tests do with it: start billing's export as a task, read a task, wait for it to settle.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, ErrorCode,
    GetTaskParams, GetTaskResult, ProtocolVersion, TaskStatus,
};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};

pub(crate) type Client = RunningService<RoleClient, ClientConfig>;

/// A stateless (2026-07-28) client of `token` at `url` that declares the tasks extension.
pub(crate) async fn client(url: &str, token: &str) -> Client {
    connect(
        url,
        token,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    )
    .await
}

/// A 2025-11-25 session client of `token` at `url` (`initialize`) that declares the tasks
/// extension.
pub(crate) async fn session_client(url: &str, token: &str) -> Client {
    let session = connect(url, token, ClientLifecycleMode::Initialize).await;
    let negotiated = session
        .peer_info()
        .map(|info| info.protocol_version.clone());
    assert_eq!(negotiated, Some(ProtocolVersion::V_2025_11_25), "{url}");
    session
}

async fn connect(url: &str, token: &str, lifecycle: ClientLifecycleMode) -> Client {
    let http = super::http_client_builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("HTTP client");
    let transport = StreamableHttpClientTransport::with_client(
        http,
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token),
    );
    let mut config = ClientConfig::default();
    config.capabilities = ClientCapabilities::builder().enable_tasks().build();
    config
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .expect("connect over HTTP")
}

/// Starts `billing.export_invoices` as a task; its id.
pub(crate) async fn start_export(client: &Client) -> String {
    let call = CallToolRequestParams::new("billing_export_invoices");
    match client.peer().call_tool_once(call).await {
        Ok(CallToolResponse::Task(created)) => created.task.task_id,
        other => panic!("the export did not become a task: {other:?}"),
    }
}

/// `tasks/get` of `id`.
pub(crate) async fn get(client: &Client, id: &str) -> Result<GetTaskResult, ServiceError> {
    client.peer().get_task(GetTaskParams::new(id)).await
}

/// Polls task `id` until it leaves `working` (at most `within`).
pub(crate) async fn settled_within(client: &Client, id: &str, within: Duration) -> GetTaskResult {
    let started = std::time::Instant::now();
    while started.elapsed() < within {
        let got = get(client, id).await.expect("the owner reads its task");
        if got.task.status() != TaskStatus::Working {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("task {id} is still working after {within:?}");
}

/// Polls task `id` until it leaves `working` (at most 10 s).
pub(crate) async fn settled(client: &Client, id: &str) -> GetTaskResult {
    settled_within(client, id, Duration::from_secs(10)).await
}

/// The answer to an id this caller has no task under (never issued, or someone else's).
pub(crate) fn is_unknown_task(error: &ServiceError) -> bool {
    matches!(error, ServiceError::McpError(error) if error.code == ErrorCode::INVALID_PARAMS)
}

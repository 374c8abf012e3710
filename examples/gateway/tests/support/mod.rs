//! Helpers of the gateway tests: the binaries under test, and rmcp clients.

// Each test binary uses its own subset.
#![allow(dead_code)]

pub(crate) mod recorder;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::ServiceError;
use rmcp::{Peer, RoleClient};
use serde_json::Value;

/// Every test finishes well within this, or fails instead of hanging.
pub(crate) const TEST_TIMEOUT: Duration = Duration::from_secs(120);

pub(crate) async fn within<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(TEST_TIMEOUT, future)
        .await
        .expect("the test did not finish in time")
}

/// The cargo workspace root.
pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

pub(crate) fn gateway_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gateway"))
}

/// The `billing` binary of this build (beside `gateway`), built once if missing: cargo only
/// builds the binaries of the package under test.
pub(crate) fn billing_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let path = gateway_bin().with_file_name("billing");
            if !path.exists() {
                let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
                let status = std::process::Command::new(cargo)
                    .args(["build", "-q", "-p", "billing", "--bin", "billing"])
                    .current_dir(workspace_root())
                    .status()
                    .expect("running cargo build -p billing");
                assert!(status.success(), "cargo build -p billing failed");
            }
            assert!(path.exists(), "no billing binary at {}", path.display());
            path
        })
        .clone()
}

pub(crate) fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        other => panic!("not a JSON object: {other}"),
    }
}

pub(crate) async fn call(
    client: &Peer<RoleClient>,
    tool: &str,
    arguments: Value,
) -> Result<CallToolResult, ServiceError> {
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(object(arguments)))
        .await
}

/// The `error` of a Fusion envelope in a failed result.
pub(crate) fn error_of(result: &CallToolResult) -> Value {
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let envelope = result
        .structured_content
        .clone()
        .expect("structuredContent");
    assert_eq!(envelope["ok"], false, "{envelope}");
    envelope["error"].clone()
}

/// Every text block of a result, joined.
pub(crate) fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Serves `server` in process (newline-delimited JSON-RPC over a duplex pipe, as over stdio)
/// to an rmcp client with `handler`; every call acts for `principal`.
pub(crate) async fn connect<C: rmcp::ClientHandler>(
    server: &fusion::Server,
    principal: fusion::Principal,
    handler: C,
) -> rmcp::service::RunningService<RoleClient, C> {
    use rmcp::ServiceExt as _;
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(server_io);
    let mcp = fusion::serve::Mcp::new(server.clone()).context(move |_request, call| {
        call.extensions_mut().insert(principal.clone());
    });
    tokio::spawn(async move {
        let _ = mcp.serve_lines(read, write).await;
    });
    handler.serve(client_io).await.expect("client handshake")
}

/// A `tools/call` with this `_meta`.
pub(crate) async fn call_with_meta(
    client: &Peer<RoleClient>,
    tool: &str,
    arguments: Value,
    meta: rmcp::model::RequestMetaObject,
) -> Result<CallToolResult, ServiceError> {
    use rmcp::model::{CallToolRequest, ClientRequest, ServerResult};
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new(tool.to_owned()).with_arguments(object(arguments)),
    ));
    let handle = client
        .send_request_with_option(
            request,
            rmcp::service::PeerRequestOptions::no_options().with_meta(meta),
        )
        .await?;
    match handle.await_response().await? {
        ServerResult::CallToolResult(result) => Ok(result),
        other => panic!("not a tool result: {other:?}"),
    }
}

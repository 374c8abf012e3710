//! The running server reports what `cargo fusion bundle` built (its content hash and lockfile
//! digest) under `dev.fusion/bundle` in the `_meta` of the `initialize` answer (2025-11-25)
//! and of `server/discover` (2026-07-28), to a real rmcp client over an in-memory duplex.
#![cfg(feature = "stdio")]
#![allow(missing_docs, missing_debug_implementations)]

use std::sync::Arc;
use std::time::Duration;

use fusion::protocol as rmcp;
use fusion::serve::{BUNDLE_META_KEY, Bundle, Mcp};
use fusion::{ServerBuilder, ToolError, tool};
use rmcp::model::{
    ClientConfig, InitializeResult, MetaObject, ProtocolVersion, RequestMetaObject, ServerPeerInfo,
};
use rmcp::service::{RunningService, serve_directly};
use rmcp::{RoleClient, RoleServer, ServiceExt};
use serde_json::{Value, json};

/// Says hello.
#[tool(query, name = "hello.greet")]
pub async fn greet() -> Result<String, ToolError> {
    Ok("hello".to_owned())
}

fn mcp() -> Mcp {
    Mcp::new(
        ServerBuilder::new("hello", "1.0.0")
            .tool::<greet>()
            .build()
            .unwrap(),
    )
}

async fn within<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), future)
        .await
        .expect("in time")
}

/// A 2025-11-25 session: the `initialize` answer the client received.
async fn initialized(mcp: &Mcp) -> (RunningService<RoleClient, ()>, Arc<ServerPeerInfo>) {
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let handler = mcp.handler();
    tokio::spawn(async move {
        let running = handler.serve(server_io).await.expect("server handshake");
        let _ = running.waiting().await;
    });
    let client = within(().serve(client_io)).await.expect("client handshake");
    let info = client.peer_info().expect("the initialize answer");
    (client, info)
}

/// A 2026-07-28 stateless client: the `server/discover` answer's `_meta`.
async fn discovered(mcp: &Mcp) -> Option<MetaObject> {
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let mut client_info = ClientConfig::default();
    client_info.protocol_version = ProtocolVersion::V_2026_07_28;
    let mut server_info = InitializeResult::default();
    server_info.protocol_version = ProtocolVersion::V_2026_07_28;
    let running =
        serve_directly::<RoleServer, _, _, _, _>(mcp.handler(), server_io, Some(client_info));
    tokio::spawn(async move {
        let _ = running.waiting().await;
    });
    let client = serve_directly::<RoleClient, _, _, _, _>((), client_io, Some(server_info.into()));
    let discovered = within(client.discover(RequestMetaObject::default()))
        .await
        .expect("discovered");
    client.cancel().await.unwrap();
    discovered.meta
}

fn bundle_of(meta: Option<&MetaObject>) -> Option<&Value> {
    meta.and_then(|meta| meta.0.get(BUNDLE_META_KEY))
}

#[tokio::test]
async fn initialize_and_discover_report_the_bundle() {
    let hash = "sha256:0f343b0931126a20f133d67c2b018a3b5a1b2c3d4e5f60718293a4b5c6d7e8f9";
    let mcp = mcp().bundle(Some(Bundle::new(hash, Some("surface-digest-1".to_owned()))));
    let expected = json!({"hash": hash, "lock": "surface-digest-1"});

    let (client, info) = initialized(&mcp).await;
    assert_eq!(
        bundle_of(info.meta.as_ref()),
        Some(&expected),
        "{:?}",
        info.meta
    );
    // The rest of the answer is unchanged.
    assert_eq!(info.server_info.as_ref().unwrap().name, "hello");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2025_11_25);
    client.cancel().await.unwrap();

    let meta = discovered(&mcp).await;
    assert_eq!(bundle_of(meta.as_ref()), Some(&expected), "{meta:?}");
    // The server's identity is still there, next to the bundle.
    assert!(
        meta.as_ref()
            .is_some_and(|meta| meta.0.contains_key("io.modelcontextprotocol/serverInfo")),
        "{meta:?}"
    );
}

#[tokio::test]
async fn a_build_that_is_not_a_bundle_reports_none() {
    // This test binary was not built by `cargo fusion bundle`: nothing is reported by default.
    assert_eq!(Bundle::built(), None);
    let (client, info) = initialized(&mcp()).await;
    assert_eq!(bundle_of(info.meta.as_ref()), None, "{:?}", info.meta);
    client.cancel().await.unwrap();
    assert_eq!(bundle_of(discovered(&mcp()).await.as_ref()), None);

    // And an explicit `None` hides what a bundle would report.
    let hidden = mcp().bundle(None);
    let (client, info) = initialized(&hidden).await;
    assert_eq!(bundle_of(info.meta.as_ref()), None);
    client.cancel().await.unwrap();
}

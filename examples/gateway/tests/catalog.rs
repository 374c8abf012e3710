//! A mounted catalog that changes while the gateway runs: fetched again when the upstream says
//! so (here on a 2026-07-28 `subscriptions/listen` stream; 2025-11-25 sessions in
//! `eras.rs`) or on its refresh interval, and the gateway's own clients told in their protocol's
//! way: `notifications/tools/list_changed` to stdio and 2025-11-25 session clients, on a listen
//! stream to 2026-07-28 clients, and a `tools/list` cache hint (`ttlMs`) never longer than the
//! refresh interval for the clients that do not listen.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fusion::gateway::Upstream;
use fusion::serde_json::json;
use fusion::{Principal, ServerBuilder};
use rmcp::model::{ErrorCode, ServerNotification, SubscriptionFilter};
use rmcp::service::{NotificationContext, ServiceError};
use rmcp::{ClientHandler, RoleClient};
use support::recorder::{Recorder, default_tools, tool};
use support::*;

/// Counts the `notifications/tools/list_changed` a client receives.
#[derive(Clone, Default)]
struct Told(Arc<AtomicUsize>);

impl Told {
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl ClientHandler for Told {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn tools_list_changed() -> SubscriptionFilter {
    SubscriptionFilter::builder().tools_list_changed().build()
}

#[tokio::test]
async fn a_changed_upstream_catalog_is_served_at_once_and_every_kind_of_client_is_told() {
    within(async {
        let upstream = Recorder::start().await;
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount("up", Upstream::http(&upstream.url))
            .build()
            .unwrap();
        server.upstreams_ready().await;
        // The upstream speaks 2026-07-28: the gateway listens for its changes.
        eventually("the gateway listens to its upstream", || {
            upstream.listens() == 1
        })
        .await;

        // A stdio client (the stdio framing over a pipe), told the list may change.
        let stdio = Told::default();
        let stdio_client = connect(&server, Principal::new("alice"), stdio.clone()).await;
        let capabilities = stdio_client
            .peer()
            .peer_info()
            .unwrap()
            .capabilities
            .clone();
        assert_eq!(capabilities.tools.unwrap().list_changed, Some(true));
        // A 2025-11-25 session and a 2026-07-28 client that listens, over HTTP.
        let http = serve_http(&server).await;
        let session = Told::default();
        let session_client = http_client(&http.url, false, session.clone()).await;
        let modern_client = http_client(&http.url, true, ()).await;
        let mut listening = modern_client
            .peer()
            .listen(tools_list_changed())
            .await
            .expect("the gateway accepts a listen stream");
        assert_eq!(listening.acknowledged().tools_list_changed, Some(true));
        // Without a refresh interval, the configured cache hint stands (5 minutes).
        let page = modern_client.peer().list_tools(None).await.unwrap();
        assert_eq!(page.ttl_ms, Some(300_000));
        assert!(!page.tools.iter().any(|tool| tool.name == "up_fresh"));

        let mut tools = default_tools();
        tools.push(tool("fresh"));
        upstream.set_tools(tools).await;
        eventually("the new tool is served", || {
            server.proxied_tool("up_fresh").is_some()
        })
        .await;
        eventually("the stdio client is told", || stdio.count() == 1).await;
        eventually("the session client is told", || session.count() == 1).await;
        let told = tokio::time::timeout(Duration::from_secs(10), listening.next())
            .await
            .expect("the listening client is told")
            .unwrap();
        assert!(
            matches!(
                told,
                Some(ServerNotification::ToolListChangedNotification(_))
            ),
            "{told:?}"
        );
        for client in [
            stdio_client.peer(),
            session_client.peer(),
            modern_client.peer(),
        ] {
            let listed = client.list_all_tools().await.unwrap();
            assert!(listed.iter().any(|tool| tool.name == "up_fresh"));
        }
        let fresh = call(modern_client.peer(), "up_fresh", json!({}))
            .await
            .unwrap();
        assert_eq!(text_of(&fresh), "fresh called");

        // A tool the upstream drops is no longer served.
        upstream
            .set_tools(
                default_tools()
                    .into_iter()
                    .filter(|tool| tool.name != "echo")
                    .collect(),
            )
            .await;
        eventually("the dropped tool is gone", || {
            server.proxied_tool("up_echo").is_none()
        })
        .await;
        eventually("the stdio client is told again", || stdio.count() == 2).await;
        match call(stdio_client.peer(), "up_echo", json!({"message": "x"})).await {
            Err(ServiceError::McpError(error)) => assert_eq!(error.code, ErrorCode::INVALID_PARAMS),
            other => panic!("expected unknown tool, got {other:?}"),
        }
        // One listen stream to the upstream all along; nobody asked twice.
        assert_eq!(upstream.listens(), 1);
        listening.cancel().await.unwrap();
        stdio_client.cancel().await.unwrap();
        session_client.cancel().await.unwrap();
        modern_client.cancel().await.unwrap();
        server.shutdown_upstreams().await;
    })
    .await;
}

#[tokio::test]
async fn a_quiet_upstream_is_fetched_again_on_its_interval_and_no_cache_hint_outlasts_it() {
    within(async {
        let upstream = Recorder::start().await;
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount(
                "up",
                Upstream::http(&upstream.url).refresh_every(Duration::from_millis(300)),
            )
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let http = serve_http(&server).await;
        let modern_client = http_client(&http.url, true, ()).await;
        // A client that is not told of changes may keep the list 300 ms, not 5 minutes.
        let page = modern_client.peer().list_tools(None).await.unwrap();
        assert_eq!(page.ttl_ms, Some(300));
        let session = Told::default();
        let session_client = http_client(&http.url, false, session.clone()).await;

        // The upstream changes its tools and tells nobody.
        let fetched = upstream.lists();
        let mut tools = default_tools();
        tools.push(tool("late"));
        upstream.set_tools_quietly(tools);
        eventually("the new tool is served", || {
            server.proxied_tool("up_late").is_some()
        })
        .await;
        assert!(upstream.lists() > fetched);
        eventually("the session client is told", || session.count() == 1).await;
        let late = call(session_client.peer(), "up_late", json!({}))
            .await
            .unwrap();
        assert_eq!(text_of(&late), "late called");
        // Unchanged fetches tell nobody.
        let lists = upstream.lists();
        eventually("fetched twice more", || upstream.lists() >= lists + 2).await;
        assert_eq!(session.count(), 1);
        session_client.cancel().await.unwrap();
        modern_client.cancel().await.unwrap();
        server.shutdown_upstreams().await;
    })
    .await;
}

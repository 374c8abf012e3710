//! Ending a 2025-11-25 session over HTTP on 127.0.0.1: `DELETE` with its `Mcp-Session-Id`
//! answers `204 No Content`, a status every official client takes for a terminated session
//! (rmcp's own `202` made the Python SDK log "Session termination failed: 202" on every exit);
//! the session is gone after it.
#![cfg(feature = "http")]

mod support;

use fusion_runtime::serve::{HttpOptions, Mcp};
use serde_json::json;
use support::{Raw, Served, call, demo_server, within};

#[tokio::test]
async fn deleting_a_session_answers_no_content_and_ends_it() {
    within(async {
        let served = Served::start(Mcp::new(demo_server()), HttpOptions::default()).await;
        let mut raw = Raw::connect(served.address).await.expect("connect");
        let opened = raw.open_session(None).await.expect("initialize");
        let session = opened
            .header("mcp-session-id")
            .expect("a session")
            .to_owned();
        let echo = call(1, "demo_echo", json!({"text": "hello"}));
        assert_eq!(
            raw.post(None, Some(&session), &echo).await.unwrap().status,
            200
        );

        let deleted = raw.delete(None, &session).await.expect("DELETE");
        assert_eq!(deleted.status, 204, "{}", deleted.text());
        assert!(deleted.body.is_empty());

        // Gone.
        assert_eq!(
            raw.post(None, Some(&session), &echo).await.unwrap().status,
            404
        );
        served.stop().await;
    })
    .await;
}

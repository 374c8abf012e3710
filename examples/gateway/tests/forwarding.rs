//! What a proxied call carries to the upstream beyond its arguments, proven at the upstream
//! (`support/recorder.rs`): a cancelled or timed-out call is cancelled there
//! (`notifications/cancelled` on a 2025-11-25 session; on 2026-07-28 the request's stream is
//! closed, which cancels its handler), and progress the upstream reports at once reaches the
//! caller (its route exists before the request leaves).

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fusion::gateway::Upstream;
use fusion::serde_json::json;
use fusion::{Principal, ServerBuilder};
use rmcp::model::{ProgressNotificationParam, ProtocolVersion};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};
use support::recorder::Recorder;
use support::*;

/// Cancels a proxied `wait` from the caller's side and checks what the upstream saw.
async fn a_cancelled_call_is_cancelled_upstream(upstream: Recorder, era: ProtocolVersion) {
    let server = ServerBuilder::new("gw", "1.0.0")
        .mount("up", Upstream::http(&upstream.url))
        .build()
        .unwrap();
    server.upstreams_ready().await;
    let client = connect(&server, Principal::new("alice"), ()).await;
    let peer = client.peer().clone();
    let waiting = tokio::spawn(async move { call(&peer, "up_wait", json!({"ms": 60_000})).await });
    eventually("the upstream has the call", || {
        upstream.calls_of("wait").len() == 1
    })
    .await;
    assert_eq!(upstream.calls_of("wait")[0].protocol, Some(era.clone()));
    // Dropping rmcp's call sends notifications/cancelled to the gateway.
    waiting.abort();
    eventually("the upstream's handler is cancelled", || {
        upstream.handler_cancellations() == 1
    })
    .await;
    if era < ProtocolVersion::V_2026_07_28 {
        eventually("the upstream got notifications/cancelled", || {
            upstream.cancel_notifications().len() == 1
        })
        .await;
        let cancelled = &upstream.cancel_notifications()[0];
        assert!(cancelled.request_id.is_some(), "{cancelled:?}");
        assert_eq!(
            cancelled.reason.as_deref(),
            Some("cancelled by the gateway's caller")
        );
    } else {
        // 2026-07-28 has no cancel notification over HTTP: closing the stream is the signal.
        assert!(upstream.cancel_notifications().is_empty());
    }
    client.cancel().await.unwrap();
    server.shutdown_upstreams().await;
}

#[tokio::test]
async fn a_cancelled_call_is_cancelled_at_a_session_upstream() {
    within(async {
        let upstream = Recorder::start_legacy().await;
        a_cancelled_call_is_cancelled_upstream(upstream, ProtocolVersion::V_2025_11_25).await;
    })
    .await;
}

#[tokio::test]
async fn a_cancelled_call_is_cancelled_at_a_stateless_upstream() {
    within(async {
        let upstream = Recorder::start().await;
        a_cancelled_call_is_cancelled_upstream(upstream, ProtocolVersion::V_2026_07_28).await;
    })
    .await;
}

#[tokio::test]
async fn a_timed_out_call_is_cancelled_upstream() {
    within(async {
        let upstream = Recorder::start_legacy().await;
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount(
                "up",
                Upstream::http(&upstream.url).timeout(Duration::from_millis(300)),
            )
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let client = connect(&server, Principal::new("alice"), ()).await;
        let result = call(client.peer(), "up_wait", json!({"ms": 60_000}))
            .await
            .unwrap();
        assert_eq!(error_of(&result)["code"], "TIMEOUT");
        eventually("the upstream got notifications/cancelled", || {
            upstream.cancel_notifications().len() == 1
        })
        .await;
        eventually("the upstream's handler is cancelled", || {
            upstream.handler_cancellations() == 1
        })
        .await;
        client.cancel().await.unwrap();
        server.shutdown_upstreams().await;
    })
    .await;
}

/// Keeps the progress notifications a client receives, by token.
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

/// The upstream reports progress the moment it gets the call, before the gateway's send
/// returns, maybe: none of it may be lost, for any of many calls at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reported_at_once_reaches_the_caller() {
    within(async {
        let upstream = Recorder::start().await;
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount("up", Upstream::http(&upstream.url))
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let progress = Progress::default();
        let client = connect(&server, Principal::new("alice"), progress.clone()).await;
        const CALLS: usize = 40;
        const STEPS: usize = 3;
        let mut calls = Vec::new();
        for _ in 0..CALLS {
            let peer = client.peer().clone();
            // rmcp's client puts a progress token of its own in every request.
            calls.push(tokio::spawn(async move {
                call(
                    &peer,
                    "up_progress",
                    json!({"steps": STEPS, "then_ms": 100}),
                )
                .await
                .unwrap()
            }));
        }
        for call in calls {
            call.await.unwrap();
        }
        let seen = progress.0.lock().unwrap().clone();
        let mut per_call = std::collections::BTreeMap::<String, Vec<f64>>::new();
        for notification in &seen {
            per_call
                .entry(format!("{:?}", notification.progress_token))
                .or_default()
                .push(notification.progress);
        }
        assert_eq!(per_call.len(), CALLS, "{per_call:?}");
        for (token, mut steps) in per_call {
            steps.sort_by(f64::total_cmp);
            assert_eq!(steps, [1.0, 2.0, 3.0], "{token}");
        }
        client.cancel().await.unwrap();
        server.shutdown_upstreams().await;
    })
    .await;
}

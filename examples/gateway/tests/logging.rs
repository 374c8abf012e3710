//! An upstream's log messages on a proxied call's HTTP stream reach the caller that asked for
//! a level (`logging/setLevel` on a 2025-11-25 session, `_meta` logLevel at 2026-07-28), which
//! the gateway asks the upstream for in turn; a caller that asked for none gets none.

// Logging is deprecated by the protocol (SEP-2577); the gateway serves it to those who ask.
#![allow(deprecated)]

mod support;

use std::sync::{Arc, Mutex};

use fusion::ServerBuilder;
use fusion::gateway::Upstream;
use fusion::serde_json::json;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, LoggingLevel,
    LoggingMessageNotificationParam, RequestMetaObject, SetLevelRequestParams,
};
use rmcp::service::{NotificationContext, PeerRequestOptions};
use rmcp::{ClientHandler, RoleClient};
use support::recorder::{Recorder, tool};
use support::*;

/// Keeps the log messages it receives.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<fusion::serde_json::Value>>>);

impl ClientHandler for Logs {
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.lock().unwrap().push(params.data);
    }
}

impl Logs {
    fn all(&self) -> Vec<fusion::serde_json::Value> {
        self.0.lock().unwrap().clone()
    }
}

#[tokio::test]
async fn log_messages_of_a_call_reach_the_caller_that_asked_for_them() {
    within(async {
        let upstream = Recorder::start().await;
        upstream.set_tools_quietly(vec![tool("log")]);
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount("up", Upstream::http(&upstream.url))
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let http = serve_http(&server).await;

        // A session that asked for no level: nothing.
        let quiet = Logs::default();
        let client = http_client(&http.url, false, quiet.clone()).await;
        call(client.peer(), "up_log", json!({})).await.unwrap();
        // A session that asked for `debug`.
        let session = Logs::default();
        let client = http_client(&http.url, false, session.clone()).await;
        client
            .peer()
            .set_level(SetLevelRequestParams::new(LoggingLevel::Debug))
            .await
            .unwrap();
        let result = call(client.peer(), "up_log", json!({})).await.unwrap();
        assert_eq!(text_of(&result), "logged");
        // A 2026-07-28 request that asks in its `_meta`.
        let modern = Logs::default();
        let client = http_client(&http.url, true, modern.clone()).await;
        let mut meta = RequestMetaObject::default();
        meta.set_log_level(LoggingLevel::Info);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new("up_log").with_arguments(object(json!({}))),
        ));
        client
            .peer()
            .send_request_with_option(request, PeerRequestOptions::no_options().with_meta(meta))
            .await
            .unwrap()
            .await_response()
            .await
            .unwrap();

        eventually("the log messages arrive", || {
            session.all().len() == 2 && modern.all().len() == 2
        })
        .await;
        assert_eq!(session.all(), [json!("line 1"), json!("line 2")]);
        assert_eq!(modern.all(), [json!("line 1"), json!("line 2")]);
        assert!(quiet.all().is_empty(), "{:?}", quiet.all());
        // The upstream was asked for a level only by those calls.
        assert_eq!(upstream.calls_of("log").len(), 3);
    })
    .await;
}

//! Calls to an HTTP upstream go on the gateway's own path (rmcp's client keeps the session):
//! what it must still do as rmcp's client did. A session the upstream forgot is opened again
//! and the call goes through; a request the upstream sends on a call's stream is answered;
//! HTTP failures are classified (retryable with an errorId and no upstream text, a redirect
//! never followed, a JSON-RPC error in an error status mapped).

mod support;

use fusion::gateway::{Upstream, UpstreamProtocol};
use fusion::serde_json::json;
use fusion::{Principal, ServerBuilder};
use rmcp::model::NumberOrString;
use support::recorder::{Recorder, Refusal};
use support::*;

fn own_path(id: &NumberOrString) -> bool {
    matches!(id, NumberOrString::Number(id) if *id < 0)
}

#[tokio::test]
async fn a_forgotten_session_is_opened_again_and_calls_go_on() {
    within(async {
        let upstream = Recorder::start_legacy().await;
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount("up", Upstream::http(&upstream.url))
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let client = connect(&server, Principal::new("alice"), ()).await;
        for (index, word) in ["one", "two", "three"].into_iter().enumerate() {
            if index == 1 {
                // As a restarted server would: the next request in the session gets 404.
                upstream.forget_sessions().await;
            }
            let result = call(client.peer(), "up_echo", json!({"message": word}))
                .await
                .unwrap();
            assert_eq!(text_of(&result), format!("echo: {word}"), "{result:?}");
        }
        let calls = upstream.calls_of("echo");
        // Each call reached it once: the 404 came before the upstream saw the call.
        assert_eq!(calls.len(), 3, "{calls:?}");
        let session = |index: usize| {
            calls[index]
                .headers
                .iter()
                .find(|(name, _)| name == "mcp-session-id")
                .map(|(_, value)| value.clone())
                .expect("a session id")
        };
        // The second went through rmcp's client, which opened a new session; the third
        // was back on the gateway's own path, in the new session.
        assert!(own_path(&calls[0].id), "{:?}", calls[0].id);
        assert!(!own_path(&calls[1].id), "{:?}", calls[1].id);
        assert!(own_path(&calls[2].id), "{:?}", calls[2].id);
        assert_ne!(session(0), session(1));
        assert_eq!(session(1), session(2));
        client.cancel().await.unwrap();
        server.shutdown_upstreams().await;
    })
    .await;
}

#[tokio::test]
async fn a_request_of_the_upstream_on_a_calls_stream_is_answered() {
    within(async {
        let upstream = Recorder::start_legacy().await;
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount("up", Upstream::http(&upstream.url))
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let client = connect(&server, Principal::new("alice"), ()).await;
        // A ping, answered as rmcp's client answers it.
        let result = call(client.peer(), "up_ping_client", json!({}))
            .await
            .unwrap();
        assert_eq!(text_of(&result), "pong", "{result:?}");
        assert!(own_path(&upstream.calls_of("ping_client")[0].id));
        client.cancel().await.unwrap();
        server.shutdown_upstreams().await;
    })
    .await;
}

#[tokio::test]
async fn http_failures_are_classified_in_either_era() {
    within(async {
        let elsewhere = Recorder::start().await;
        for protocol in [UpstreamProtocol::Session, UpstreamProtocol::Stateless] {
            let upstream = Recorder::start().await;
            let server = ServerBuilder::new("gw", "1.0.0")
                .mount("up", Upstream::http(&upstream.url).protocol(protocol))
                .build()
                .unwrap();
            server.upstreams_ready().await;
            let client = connect(&server, Principal::new("alice"), ()).await;
            for refusal in [
                Refusal::Status(500),
                Refusal::Status(503),
                Refusal::Status(401),
                Refusal::Redirect(elsewhere.url.clone()),
            ] {
                upstream.refuse(Some(refusal.clone()));
                let result = call(client.peer(), "up_echo", json!({"message": "x"}))
                    .await
                    .unwrap();
                let error = error_of(&result);
                assert_eq!(
                    error["code"], "UPSTREAM_UNAVAILABLE",
                    "{refusal:?}: {error}"
                );
                assert_eq!(error["retryable"], true, "{refusal:?}");
                assert!(error["errorId"].is_string(), "{refusal:?}: {error}");
                let text = fusion::serde_json::to_string(&result).unwrap();
                for internal in ["internal details", "HTTP", "127.0.0.1", "upstream `"] {
                    assert!(
                        !text.contains(internal),
                        "{refusal:?}: {internal} in {text}"
                    );
                }
            }
            // The redirect was not followed.
            assert!(elsewhere.calls().is_empty(), "{:?}", elsewhere.calls());
            // A JSON-RPC error in an error status is the upstream's answer: mapped.
            upstream.refuse(Some(Refusal::InvalidParams));
            let result = call(client.peer(), "up_echo", json!({"message": "x"}))
                .await
                .unwrap();
            let error = error_of(&result);
            assert_eq!(error["code"], "VALIDATION_ERROR", "{error}");
            assert_eq!(error["details"]["upstream"], "steps must be a number");
            // And once it serves again, so does the gateway.
            upstream.refuse(None);
            let result = call(client.peer(), "up_echo", json!({"message": "back"}))
                .await
                .unwrap();
            assert_eq!(text_of(&result), "echo: back");
            client.cancel().await.unwrap();
            server.shutdown_upstreams().await;
        }
    })
    .await;
}

//! The protocol an HTTP upstream is spoken to in (`Upstream::protocol`): a 2025-11-25 session
//! or stateless 2026-07-28, forced or probed. Against the billing binary, which serves both on
//! one endpoint, and against the recording upstream, which shows what reached it: the era of
//! every request, list changes pushed by a session or on a listen stream, and the fallbacks of
//! `Auto` for servers that speak only 2025-11-25.

mod support;

use fusion::gateway::{Upstream, UpstreamProtocol};
use fusion::serde_json::json;
use fusion::{Principal, ServerBuilder};
use rmcp::model::ProtocolVersion;
use support::recorder::{Options, Recorder, default_tools, tool};
use support::*;

#[tokio::test]
async fn billing_over_http_in_each_era() {
    within(async {
        let billing = billing_http();
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount(
                "sess",
                Upstream::http(billing.url())
                    .bearer_token("tok-w")
                    .protocol(UpstreamProtocol::Session),
            )
            .mount(
                "stl",
                Upstream::http(billing.url())
                    .bearer_token("tok-w")
                    .protocol(UpstreamProtocol::Stateless),
            )
            .mount("auto", Upstream::http(billing.url()).bearer_token("tok-w"))
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let protocols: Vec<_> = server
            .upstreams()
            .into_iter()
            .map(|status| (status.prefix, status.protocol))
            .collect();
        assert_eq!(
            protocols,
            [
                ("sess".to_owned(), Some("2025-11-25".to_owned())),
                ("stl".to_owned(), Some("2026-07-28".to_owned())),
                ("auto".to_owned(), Some("2026-07-28".to_owned())),
            ]
        );
        let client = connect(&server, Principal::new("alice"), ()).await;
        let tools = client.peer().list_all_tools().await.unwrap();
        for prefix in ["sess", "stl", "auto"] {
            let count = tools
                .iter()
                .filter(|tool| tool.name.starts_with(&format!("{prefix}_")))
                .count();
            assert_eq!(count, 9, "{prefix}");
        }
        // Reads and writes in either era; the three mounts share billing's one store.
        for (prefix, invoice) in [("sess", "INV-3"), ("stl", "INV-6")] {
            let read = call(
                client.peer(),
                &format!("{prefix}_billing_get_invoice"),
                json!({"id": invoice}),
            )
            .await
            .unwrap();
            assert_eq!(read.is_error, Some(false), "{prefix}: {read:?}");
            assert_eq!(read.structured_content.unwrap()["data"]["status"], "open");
            let voided = call(
                client.peer(),
                &format!("{prefix}_billing_void_invoice"),
                json!({"id": invoice}),
            )
            .await
            .unwrap();
            assert_eq!(voided.is_error, Some(false), "{prefix}: {voided:?}");
        }
        for invoice in ["INV-3", "INV-6"] {
            let read = call(
                client.peer(),
                "auto_billing_get_invoice",
                json!({"id": invoice}),
            )
            .await
            .unwrap();
            assert_eq!(read.structured_content.unwrap()["data"]["status"], "voided");
        }
        client.cancel().await.unwrap();
        server.shutdown_upstreams().await;
    })
    .await;
}

/// Mounts `upstream` forced to `protocol`, calls `echo` and changes the upstream's tools
/// loudly: the call must arrive in `era` and the change must be seen.
async fn spoken_in(upstream: &Recorder, protocol: UpstreamProtocol, era: ProtocolVersion) {
    let server = ServerBuilder::new("gw", "1.0.0")
        .mount("up", Upstream::http(&upstream.url).protocol(protocol))
        .build()
        .unwrap();
    server.upstreams_ready().await;
    assert_eq!(
        server.upstreams()[0].protocol.as_deref(),
        Some(era.as_str())
    );
    let client = connect(&server, Principal::new("alice"), ()).await;
    let echoed = call(client.peer(), "up_echo", json!({"message": "hi"}))
        .await
        .unwrap();
    assert_eq!(text_of(&echoed), "echo: hi");
    assert_eq!(upstream.calls_of("echo")[0].protocol, Some(era.clone()));
    assert!(
        upstream
            .list_protocols()
            .iter()
            .all(|seen| *seen == Some(era.clone())),
        "{:?}",
        upstream.list_protocols()
    );
    let mut tools = default_tools();
    tools.push(tool("fresh"));
    upstream.set_tools(tools).await;
    eventually("the change is seen", || {
        server.proxied_tool("up_fresh").is_some()
    })
    .await;
    client.cancel().await.unwrap();
    server.shutdown_upstreams().await;
}

#[tokio::test]
async fn a_forced_session_gets_its_changes_pushed() {
    within(async {
        let upstream = Recorder::start().await;
        spoken_in(
            &upstream,
            UpstreamProtocol::Session,
            ProtocolVersion::V_2025_11_25,
        )
        .await;
        // A session is told unasked: nobody listened.
        assert_eq!(upstream.listens(), 0);
    })
    .await;
}

#[tokio::test]
async fn a_forced_stateless_upstream_is_listened_to() {
    within(async {
        let upstream = Recorder::start().await;
        spoken_in(
            &upstream,
            UpstreamProtocol::Stateless,
            ProtocolVersion::V_2026_07_28,
        )
        .await;
        assert_eq!(upstream.listens(), 1);
    })
    .await;
}

#[tokio::test]
async fn auto_falls_back_to_a_session_for_servers_that_speak_only_2025_11_25() {
    within(async {
        // One that does not know server/discover (rmcp falls back), and one whose discover
        // offers only 2025-11-25 (rmcp gives up; the gateway opens the session).
        for options in [
            Options {
                legacy_only: true,
                ..Options::default()
            },
            Options {
                legacy_discover: true,
                ..Options::default()
            },
        ] {
            let upstream = Recorder::start_with(options).await;
            spoken_in(
                &upstream,
                UpstreamProtocol::Auto,
                ProtocolVersion::V_2025_11_25,
            )
            .await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_server_that_speaks_only_2025_11_25_is_not_reached_stateless() {
    within(async {
        let upstream = Recorder::start_legacy().await;
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount(
                "up",
                Upstream::http(&upstream.url).protocol(UpstreamProtocol::Stateless),
            )
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let status = &server.upstreams()[0];
        assert!(!status.connected, "{status:?}");
        assert_eq!(status.protocol, None);
        assert!(upstream.calls().is_empty() && upstream.lists() == 0);
        server.shutdown_upstreams().await;
    })
    .await;
}

//! The confused-deputy rule: a caller's bearer token is the gateway's business only. Upstreams
//! get the credential configured for them, never what a caller sent, so that a token issued
//! for the gateway cannot be replayed against another service, and an upstream never sees a
//! credential it could misuse.

mod support;

use fusion::Principal;
use fusion::ServerBuilder;
use fusion::auth::StaticTokens;
use fusion::gateway::Upstream;
use fusion::serde_json::json;
use fusion::serve::{HttpOptions, Mcp};
use rmcp::ServiceExt as _;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use support::recorder::{Options, Recorder};
use support::*;

const CALLER_TOKEN: &str = "caller-token-5d0e8b1f-for-the-gateway-only";
const GATEWAY_CREDENTIAL: &str = "gateway-own-credential-a41c";

#[tokio::test]
async fn a_callers_token_never_reaches_an_upstream() {
    within(async {
        let upstream = Recorder::start_with(Options {
            required_header: Some(("authorization", format!("Bearer {GATEWAY_CREDENTIAL}"))),
            ..Options::default()
        })
        .await;
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount(
                "crm",
                Upstream::http(&upstream.url).bearer_token(GATEWAY_CREDENTIAL),
            )
            .build()
            .unwrap();
        server.upstreams_ready().await;

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let options = HttpOptions::default()
            .bind(address)
            .auth(StaticTokens::new().with(CALLER_TOKEN, Principal::new("alice")));
        let shutdown = options.shutdown.clone();
        let mcp = Mcp::new(server.clone());
        tokio::spawn(async move { mcp.serve_http_on(listener, options).await });

        install_crypto_provider();
        for modern in [false, true] {
            let config =
                StreamableHttpClientTransportConfig::with_uri(format!("http://{address}/mcp"))
                    .auth_header(CALLER_TOKEN);
            let transport = StreamableHttpClientTransport::from_config(config);
            let client = if modern {
                use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _};
                ().serve_with_lifecycle(
                    transport,
                    ClientLifecycleMode::Discover {
                        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
                    },
                )
                .await
                .unwrap()
            } else {
                ().serve(transport).await.unwrap()
            };
            let echoed = call(client.peer(), "crm_echo", json!({"message": "hi"}))
                .await
                .unwrap();
            assert_eq!(text_of(&echoed), "echo: hi");
            client.cancel().await.unwrap();
        }

        let calls = upstream.calls_of("echo");
        assert_eq!(calls.len(), 2);
        let mut seen = upstream.request_headers();
        seen.extend(calls.iter().flat_map(|call| call.headers.clone()));
        assert!(!seen.is_empty());
        for (name, value) in &seen {
            assert!(
                !value.contains(CALLER_TOKEN),
                "the caller's token reached the upstream in `{name}`"
            );
        }
        for call in &calls {
            let authorization: Vec<&str> = call
                .headers
                .iter()
                .filter(|(name, _)| name == "authorization")
                .map(|(_, value)| value.as_str())
                .collect();
            assert_eq!(authorization, [format!("Bearer {GATEWAY_CREDENTIAL}")]);
        }
        shutdown.cancel();
        server.shutdown_upstreams().await;
    })
    .await;
}

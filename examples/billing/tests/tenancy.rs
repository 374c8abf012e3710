//! Production concerns over real HTTP (issue 4): the tenant comes from a verified bearer token,
//! tenants never see each other's invoices (stateless 2026-07-28 requests and 2025-11-25
//! sessions alike), scopes gate writes, concurrent writes are
//! serialized, and every successful write lands in the append-only audit trail.
#![cfg(unix)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use fusion::serde_json::{Value, json};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use support::BillingHttp;

const ALPHA: &str = "alpha-token-3f9c";
const BETA: &str = "beta-token-71aa";
const READER: &str = "reader-token-0b2e";

fn tokens() -> Vec<String> {
    vec![
        format!("--token={ALPHA}=t_777"),
        format!("--token={BETA}=t_other"),
        format!("--token={READER}=t_777:read"),
    ]
}

fn spawn_with_tokens(extra: &[&str]) -> BillingHttp {
    let tokens = tokens();
    let mut args: Vec<&str> = tokens.iter().map(String::as_str).collect();
    args.extend_from_slice(extra);
    BillingHttp::spawn_exactly(&args)
}

/// A stateless 2026-07-28 caller with a bearer token.
#[derive(Clone)]
struct Caller {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
}

/// The answer to one request.
struct Answer {
    status: u16,
    www_authenticate: Option<String>,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        fusion::serde_json::from_str(&self.body)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {}", self.body))
    }

    /// The tool result's envelope.
    fn envelope(&self) -> Value {
        self.json()["result"]["structuredContent"].clone()
    }

    /// The error code of a failed tool call, `None` on success.
    fn error_code(&self) -> Option<String> {
        let envelope = self.envelope();
        assert!(envelope.is_object(), "not a tool result: {}", self.body);
        envelope["error"]["code"].as_str().map(str::to_owned)
    }
}

impl Caller {
    fn new(server: &BillingHttp, token: Option<&str>) -> Self {
        Caller {
            http: support::http_client_builder().build().expect("HTTP client"),
            url: server.url().to_owned(),
            token: token.map(str::to_owned),
        }
    }

    async fn request(&self, method: &str, name: Option<&str>, mut params: Value) -> Answer {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "tenancy-test", "version": "1.0.0"},
            "io.modelcontextprotocol/clientCapabilities": {}
        });
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut request = self
            .http
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", method)
            .body(body.to_string());
        if let Some(name) = name {
            request = request.header("Mcp-Name", name);
        }
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = tokio::time::timeout(Duration::from_secs(20), request.send())
            .await
            .expect("an answer within 20 s")
            .expect("HTTP request");
        let status = response.status().as_u16();
        let www_authenticate = response
            .headers()
            .get("www-authenticate")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let body = response.text().await.expect("HTTP body");
        Answer {
            status,
            www_authenticate,
            body,
        }
    }

    async fn call(&self, tool: &str, arguments: Value) -> Answer {
        let answer = self
            .request(
                "tools/call",
                Some(tool),
                json!({"name": tool, "arguments": arguments}),
            )
            .await;
        assert_eq!(answer.status, 200, "{tool}: {}", answer.body);
        answer
    }

    async fn list(&self) -> Vec<String> {
        self.tools()
            .await
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The tool definitions `tools/list` shows this caller.
    async fn tools(&self) -> Vec<Value> {
        let answer = self.request("tools/list", None, json!({})).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        answer.json()["result"]["tools"]
            .as_array()
            .expect("tools")
            .clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_bad_token_is_refused_with_401_before_any_tool_runs() {
    let server = spawn_with_tokens(&["--in-memory"]);
    for token in [None, Some("not-a-token"), Some("")] {
        let caller = Caller::new(&server, token);
        let answer = caller
            .request(
                "tools/call",
                Some("billing_void_invoice"),
                json!({"name": "billing_void_invoice", "arguments": {"id": "INV-3"}}),
            )
            .await;
        assert_eq!(answer.status, 401, "{token:?}: {}", answer.body);
        let challenge = answer.www_authenticate.expect("a WWW-Authenticate header");
        assert!(challenge.starts_with("Bearer realm=\"mcp\""), "{challenge}");
    }
    let bad = Caller::new(&server, Some("not-a-token"))
        .request("tools/list", None, json!({}))
        .await;
    assert!(
        bad.www_authenticate
            .unwrap()
            .contains("error=\"invalid_token\"")
    );
    // Nothing was voided by the refused calls.
    let invoice = Caller::new(&server, Some(ALPHA))
        .call("billing_get_invoice", json!({"id": "INV-3"}))
        .await;
    assert_eq!(invoice.envelope()["data"]["status"], "open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tenant_never_reads_or_changes_anothers_invoices() {
    let server = spawn_with_tokens(&["--in-memory"]);
    let alpha = Caller::new(&server, Some(ALPHA));
    let beta = Caller::new(&server, Some(BETA));
    let created = beta
        .call(
            "billing_create_invoice",
            json!({"customer_id": "C-beta", "total_cents": 500}),
        )
        .await;
    assert_eq!(created.error_code(), None, "{}", created.body);
    let beta_invoice = created.envelope()["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Invoice numbers are per tenant: beta's first invoice is its INV-1.
    assert_eq!(beta_invoice, "INV-1");
    // Each tenant sees only its own invoices, whichever tool asks: alpha's INV-1 is alpha's.
    let alpha_first = alpha
        .call("billing_get_invoice", json!({"id": beta_invoice}))
        .await
        .envelope();
    assert_eq!(alpha_first["data"]["customer_id"], "C-1", "{alpha_first}");
    assert_eq!(
        beta.call("billing_get_invoice", json!({"id": "INV-7"}))
            .await
            .error_code()
            .as_deref(),
        Some("InvoiceNotFound")
    );
    let beta_list = beta
        .call("billing_list_invoices", json!({"limit": 50}))
        .await
        .envelope();
    assert_eq!(
        beta_list["data"],
        json!([{"id": beta_invoice, "customer_id": "C-beta", "total_cents": 500, "status": "open"}])
    );
    let alpha_list = alpha
        .call("billing_list_invoices", json!({"limit": 50}))
        .await
        .envelope();
    assert!(
        alpha_list["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|invoice| invoice["customer_id"] != "C-beta")
    );
    let beta_stats = beta
        .call("billing_invoice_stats", json!({}))
        .await
        .envelope();
    let counts: BTreeMap<String, u64> = beta_stats["data"]["by_status"]
        .as_array()
        .unwrap()
        .iter()
        .map(|line| {
            (
                line["status"].as_str().unwrap().to_owned(),
                line["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(counts.values().sum::<u64>(), 1, "{counts:?}");

    // Nor changes them: alpha's void of "INV-1" voids alpha's own INV-1.
    let voided = alpha
        .call("billing_void_invoice", json!({"id": beta_invoice}))
        .await
        .envelope();
    assert_eq!(voided["data"]["customer_id"], "C-1", "{voided}");
    assert_eq!(
        beta.call("billing_get_invoice", json!({"id": beta_invoice}))
            .await
            .envelope()["data"],
        json!({"id": beta_invoice, "customer_id": "C-beta", "total_cents": 500, "status": "open"})
    );
    assert_eq!(
        beta.call("billing_void_invoice", json!({"id": "INV-3"}))
            .await
            .error_code()
            .as_deref(),
        Some("InvoiceNotFound")
    );
    assert_eq!(
        alpha
            .call("billing_get_invoice", json!({"id": "INV-3"}))
            .await
            .envelope()["data"]["status"],
        "open"
    );

    // A tenant id sent in the arguments is refused: it is guarded.
    let smuggled = alpha
        .call(
            "billing_create_invoice",
            json!({"customer_id": "C-1", "total_cents": 1, "tenant_id": "t_other"}),
        )
        .await;
    assert_eq!(smuggled.error_code().as_deref(), Some("VALIDATION_ERROR"));
    assert_eq!(
        beta.call("billing_list_invoices", json!({}))
            .await
            .envelope()["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_token_sees_and_calls_only_reads() {
    let server = spawn_with_tokens(&["--in-memory"]);
    let reader = Caller::new(&server, Some(READER));
    let listed = reader.list().await;
    assert!(listed.contains(&"billing_get_invoice".to_owned()));
    assert!(
        !listed
            .iter()
            .any(|name| name == "billing_void_invoice" || name == "billing_create_invoice"),
        "{listed:?}"
    );
    assert_eq!(
        reader
            .call("billing_get_invoice", json!({"id": "INV-3"}))
            .await
            .error_code(),
        None
    );
    let denied = reader
        .call("billing_void_invoice", json!({"id": "INV-3"}))
        .await;
    assert_eq!(denied.error_code().as_deref(), Some("FORBIDDEN"));
    let writer = Caller::new(&server, Some(ALPHA));
    assert_eq!(writer.list().await.len(), 9);
    assert_eq!(
        writer
            .call("billing_get_invoice", json!({"id": "INV-3"}))
            .await
            .envelope()["data"]["status"],
        "open"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouped_a_read_only_token_sees_and_hears_of_reads_only() {
    let server = spawn_with_tokens(&["--in-memory", "--grouped"]);
    let reader = Caller::new(&server, Some(READER));
    let tools = reader.tools().await;
    assert_eq!(tools.len(), 1);
    let billing = &tools[0];
    let reads = json!([
        "get_invoice",
        "list_invoices",
        "invoice_stats",
        "statuses",
        "export_invoices"
    ]);
    assert_eq!(
        billing["inputSchema"]["properties"]["action"]["enum"],
        reads
    );
    assert_eq!(billing["annotations"]["readOnlyHint"], true);
    for write in [
        "void_invoice",
        "create_invoice",
        "update_invoice",
        "send_reminder",
    ] {
        assert!(!billing.to_string().contains(write), "{billing}");
    }
    let unknown = reader
        .call("billing", json!({"action": "refund"}))
        .await
        .envelope();
    assert_eq!(unknown["error"]["code"], "UNKNOWN_ACTION");
    assert_eq!(unknown["error"]["details"]["validActions"], reads);
    let denied = reader
        .call("billing", json!({"action": "void_invoice", "id": "INV-3"}))
        .await;
    assert_eq!(denied.error_code().as_deref(), Some("FORBIDDEN"));
    // Error text names tools as a grouped agent calls them.
    let missing = reader
        .call(
            "billing",
            json!({"action": "get_invoice", "id": "INV-99999"}),
        )
        .await;
    // The recovery, in the `<tool_error>` block the agent reads.
    let told = missing.json()["result"]["content"][0]["text"].clone();
    assert!(
        told.as_str().unwrap_or_default().contains(
            "<recovery>Call `billing` with `{\"action\":\"list_invoices\"}` to find valid invoice ids.</recovery>"
        ),
        "{told}"
    );
    // A writer sees every action.
    let writer = Caller::new(&server, Some(ALPHA));
    let tools = writer.tools().await;
    assert_eq!(
        tools[0]["inputSchema"]["properties"]["action"]["enum"]
            .as_array()
            .unwrap()
            .len(),
        9
    );
    assert_eq!(tools[0]["annotations"]["readOnlyHint"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_voids_over_http_succeed_exactly_once() {
    // Every write holds the store for 40 ms: fifty voids back to back take twice the store's
    // busy timeout (1 s). The tool's FIFO guard (`serialize = "id"`) queues the voids of one
    // invoice without a thread and without the store, so each is answered in turn: one void,
    // 49 AlreadyVoided. Without it (`serialize = false`), the calls that wait for the store more than a
    // second fail with StoreUnavailable.
    // On SQLite: the memory store of `--in-memory` has no write to hold.
    let data = tempfile::tempdir().expect("a temporary data directory");
    let data_dir = data.path().to_str().unwrap().to_owned();
    let tokens = tokens();
    let mut args: Vec<&str> = tokens.iter().map(String::as_str).collect();
    args.extend(["--data-dir", &data_dir]);
    let server = BillingHttp::spawn_with_env(&args, &[("BILLING_WRITE_HOLD_MS", "40")]);
    let caller = Caller::new(&server, Some(ALPHA));
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let caller = caller.clone();
            tokio::spawn(async move {
                caller
                    .call("billing_void_invoice", json!({"id": "INV-6"}))
                    .await
                    .error_code()
            })
        })
        .collect();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for task in tasks {
        let code = task.await.unwrap().unwrap_or_else(|| "ok".to_owned());
        *outcomes.entry(code).or_default() += 1;
    }
    assert_eq!(
        outcomes,
        BTreeMap::from([("AlreadyVoided".to_owned(), 49), ("ok".to_owned(), 1)])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_load_is_served_without_stalls_or_failures() {
    let server = spawn_with_tokens(&["--in-memory"]);
    let caller = Caller::new(&server, Some(ALPHA));
    let tasks: Vec<_> = (0..16)
        .map(|worker| {
            let caller = caller.clone();
            tokio::spawn(async move {
                let mut codes = Vec::new();
                for step in 0..25u32 {
                    let n = (worker * 61 + step * 17) % 1000 + 1;
                    let answer = match step % 5 {
                        0 => {
                            caller
                                .call("billing_list_invoices", json!({"limit": 50}))
                                .await
                        }
                        1 => {
                            caller
                                .call("billing_void_invoice", json!({"id": format!("INV-{n}")}))
                                .await
                        }
                        _ => {
                            caller
                                .call("billing_get_invoice", json!({"id": format!("INV-{n}")}))
                                .await
                        }
                    };
                    codes.push(answer.error_code());
                }
                codes
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        for code in tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("no stall")
            .unwrap()
        {
            total += 1;
            // Only domain outcomes of a correct server: nothing internal, nothing refused.
            assert!(
                matches!(code.as_deref(), None | Some("AlreadyVoided")),
                "{code:?}"
            );
        }
    }
    assert_eq!(total, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn successful_writes_land_in_the_append_only_audit_trail() {
    let data = tempfile::tempdir().expect("a temporary data directory");
    let data_dir = data.path().to_str().unwrap().to_owned();
    let server = spawn_with_tokens(&["--data-dir", &data_dir]);
    let alpha = Caller::new(&server, Some(ALPHA));
    let beta = Caller::new(&server, Some(BETA));
    assert_eq!(
        alpha
            .call("billing_void_invoice", json!({"id": "INV-3"}))
            .await
            .error_code(),
        None
    );
    assert_eq!(
        alpha
            .call("billing_void_invoice", json!({"id": "INV-3"}))
            .await
            .error_code()
            .as_deref(),
        Some("AlreadyVoided")
    );
    assert_eq!(
        alpha
            .call("billing_get_invoice", json!({"id": "INV-3"}))
            .await
            .error_code(),
        None
    );
    assert_eq!(
        beta.call(
            "billing_create_invoice",
            json!({"customer_id": "C-9", "total_cents": 99})
        )
        .await
        .error_code(),
        None
    );
    assert_eq!(
        alpha
            .call("billing_send_reminder", json!({"id": "INV-4"}))
            .await
            .error_code(),
        None
    );
    drop(server);

    let database = rusqlite::Connection::open(data.path().join("billing.sqlite3")).unwrap();
    let mut rows = database
        .prepare("SELECT action, tenant, principal, arguments_digest, outcome FROM audit_events ORDER BY seq")
        .unwrap();
    let trail: Vec<(String, String, String, String, String)> = rows
        .query_map([], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get(3)?,
                row.get(4)?,
            ))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let summary: Vec<(&str, &str, &str)> = trail
        .iter()
        .map(|(action, tenant, _, _, outcome)| (action.as_str(), tenant.as_str(), outcome.as_str()))
        .collect();
    // The failed void and the read are not audited.
    assert_eq!(
        summary,
        [
            ("billing.void_invoice", "t_777", "ok"),
            ("billing.create_invoice", "t_other", "ok"),
            ("billing.send_reminder", "t_777", "ok"),
        ]
    );
    assert_eq!(trail[0].2, "token:t_777");
    assert_eq!(
        trail[0].3,
        fusion::audit::arguments_digest(&json!({"id": "INV-3"}))
    );
    // Append-only: the trail cannot be rewritten.
    assert!(
        database
            .execute("UPDATE audit_events SET outcome = 'forged'", [])
            .is_err()
    );
    assert!(database.execute("DELETE FROM audit_events", []).is_err());
}

/// A 2025-11-25 session opened by rmcp's client with `initialize` and a bearer token, which it
/// sends again on every request of the session.
async fn session(server: &BillingHttp, token: &str) -> RunningService<RoleClient, ClientConfig> {
    let http = support::http_client_builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("HTTP client");
    let transport = StreamableHttpClientTransport::with_client(
        http,
        StreamableHttpClientTransportConfig::with_uri(server.url().to_owned()).auth_header(token),
    );
    let client = ClientConfig::new(
        Default::default(),
        Implementation::new("tenancy-session-test", "1.0.0"),
    )
    .with_protocol_version(ProtocolVersion::V_2025_11_25)
    .serve(transport)
    .await
    .expect("initialize with a bearer token");
    let info = client.peer().peer_info().expect("initialize result");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2025_11_25);
    client
}

/// The envelope of a tool call made in a session.
async fn session_call(
    client: &RunningService<RoleClient, ClientConfig>,
    tool: &str,
    arguments: Value,
) -> Value {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object");
    };
    let result = client
        .peer()
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
        .await
        .unwrap_or_else(|error| panic!("{tool}: {error}"));
    result.structured_content.expect("an envelope")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_stay_apart_in_2025_11_25_sessions_too() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let server = spawn_with_tokens(&["--in-memory"]);
        let alpha = session(&server, ALPHA).await;
        let beta = session(&server, BETA).await;

        let created = session_call(
            &beta,
            "billing_create_invoice",
            json!({"customer_id": "C-session", "total_cents": 700}),
        )
        .await;
        assert_eq!(created["ok"], true, "{created}");
        let beta_invoice = created["data"]["id"].as_str().unwrap().to_owned();

        // Alpha's session neither reads nor changes beta's invoice, and the reverse: numbers
        // are per tenant, so the same id names alpha's own invoice there.
        for tool in ["billing_get_invoice", "billing_void_invoice"] {
            let own = session_call(&alpha, tool, json!({"id": beta_invoice})).await;
            assert_eq!(own["data"]["customer_id"], "C-1", "{tool}: {own}");
        }
        let refused = session_call(&beta, "billing_get_invoice", json!({"id": "INV-7"})).await;
        assert_eq!(refused["error"]["code"], "InvoiceNotFound", "{refused}");
        assert_eq!(
            session_call(&alpha, "billing_get_invoice", json!({"id": "INV-7"})).await["data"]["id"],
            "INV-7"
        );
        // Each session lists only its tenant's invoices.
        let listed = session_call(&beta, "billing_list_invoices", json!({"limit": 50})).await;
        assert_eq!(
            listed["data"],
            json!([{"id": beta_invoice, "customer_id": "C-session", "total_cents": 700, "status": "open"}])
        );
        let listed = session_call(&alpha, "billing_list_invoices", json!({"limit": 50})).await;
        let ids: Vec<&Value> = listed["data"].as_array().unwrap().iter().map(|invoice| &invoice["id"]).collect();
        assert_eq!(ids.len(), 50, "{listed}");
        assert!(
            listed["data"]
                .as_array()
                .unwrap()
                .iter()
                .all(|invoice| invoice["customer_id"] != "C-session"),
            "{listed}"
        );
        // Beta's invoice is still open: alpha's void did nothing.
        assert_eq!(
            session_call(&beta, "billing_get_invoice", json!({"id": beta_invoice})).await["data"]["status"],
            "open"
        );

        // Without a token, no session is opened at all.
        support::install_crypto_provider();
        let anonymous = StreamableHttpClientTransport::from_uri(server.url().to_owned());
        assert!(().serve(anonymous).await.is_err(), "initialize without a token");

        alpha.cancel().await.expect("client stops");
        beta.cancel().await.expect("client stops");
    })
    .await
    .expect("the test did not finish in time");
}

/// One raw 2025-11-25 request in a session: the status and the body.
async fn session_request(
    server: &BillingHttp,
    method: reqwest::Method,
    token: &str,
    session: Option<&str>,
    body: Option<Value>,
) -> (u16, reqwest::header::HeaderMap, String) {
    let opens_stream = method == reqwest::Method::GET;
    let mut request = support::http_client_builder()
        .build()
        .expect("HTTP client")
        .request(method, server.url())
        .bearer_auth(token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-11-25");
    if let Some(session) = session {
        request = request.header("Mcp-Session-Id", session);
    }
    if let Some(body) = body {
        request = request
            .header("Content-Type", "application/json")
            .body(body.to_string());
    }
    let response = tokio::time::timeout(Duration::from_secs(20), request.send())
        .await
        .expect("an answer within 20 s")
        .expect("HTTP request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    // A GET that succeeds opens an event stream that does not end: read no body for it.
    let body = if opens_stream && status == 200 {
        String::new()
    } else {
        response.text().await.expect("HTTP body")
    };
    (status, headers, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_answers_only_the_caller_who_opened_it() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let server = spawn_with_tokens(&["--in-memory"]);
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "session-owner-test", "version": "1.0.0"}}});
        let (status, headers, body) = session_request(
            &server,
            reqwest::Method::POST,
            ALPHA,
            None,
            Some(initialize),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let session = headers
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
            .expect("a session id")
            .to_owned();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let (status, _, body) = session_request(
            &server,
            reqwest::Method::POST,
            ALPHA,
            Some(&session),
            Some(initialized),
        )
        .await;
        assert_eq!(status, 202, "{body}");
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "billing_get_invoice", "arguments": {"id": "INV-7"}}});

        // Another tenant's valid token with alpha's session id: as if the session did not
        // exist, for calls, for the event stream and for closing it.
        let (status, _, body) = session_request(
            &server,
            reqwest::Method::POST,
            BETA,
            Some(&session),
            Some(call.clone()),
        )
        .await;
        assert_eq!(status, 404, "{body}");
        assert!(!body.contains("INV-7"), "{body}");
        let (status, _, _) =
            session_request(&server, reqwest::Method::GET, BETA, Some(&session), None).await;
        assert_eq!(status, 404);
        let (status, _, _) =
            session_request(&server, reqwest::Method::DELETE, BETA, Some(&session), None).await;
        assert_eq!(status, 404);
        // A session id nobody opened is refused the same way.
        let (status, _, _) = session_request(
            &server,
            reqwest::Method::POST,
            ALPHA,
            Some("not-a-session"),
            Some(call.clone()),
        )
        .await;
        assert_eq!(status, 404);

        // The owner's session is untouched by all of that.
        let (status, _, body) = session_request(
            &server,
            reqwest::Method::POST,
            ALPHA,
            Some(&session),
            Some(call.clone()),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("INV-7"), "{body}");

        // Once the owner closes it, nobody can use it.
        let (status, _, body) = session_request(
            &server,
            reqwest::Method::DELETE,
            ALPHA,
            Some(&session),
            None,
        )
        .await;
        assert!((200..300).contains(&status), "{status}: {body}");
        let (status, _, _) = session_request(
            &server,
            reqwest::Method::POST,
            ALPHA,
            Some(&session),
            Some(call),
        )
        .await;
        assert_eq!(status, 404);
    })
    .await
    .expect("the test did not finish in time");
}

/// The invoice resource and the reminder prompt take the caller's tenant from the same server
/// middleware as the tools: each tenant reads only its own invoices, a read is not a change
/// (nothing lands in the audit trail), and on 2026-07-28 a request whose `Mcp-Name` is not the
/// URI or prompt it names is refused before anything runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_prompts_take_the_tenant_like_tools_and_check_mcp_name() {
    let data = tempfile::tempdir().expect("a temporary data directory");
    let data_dir = data.path().to_str().unwrap().to_owned();
    let server = spawn_with_tokens(&["--data-dir", &data_dir]);
    let alpha = Caller::new(&server, Some(ALPHA));
    let beta = Caller::new(&server, Some(BETA));
    let uri = "billing://invoices/INV-7";

    let read = alpha
        .request("resources/read", Some(uri), json!({"uri": uri}))
        .await;
    assert_eq!(read.status, 200, "{}", read.body);
    let contents = &read.json()["result"]["contents"];
    let invoice: Value =
        fusion::serde_json::from_str(contents[0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(invoice["id"], "INV-7", "{}", read.body);
    assert!(invoice.get("tenant_id").is_none(), "{invoice}");

    // Beta has no INV-7: its tenant came from its token, not from the URI.
    let missing = beta
        .request("resources/read", Some(uri), json!({"uri": uri}))
        .await;
    let body = missing.json();
    assert_eq!(body["error"]["data"]["code"], "InvoiceNotFound", "{body}");

    let prompt = "billing_reminder_draft";
    let got = alpha
        .request(
            "prompts/get",
            Some(prompt),
            json!({"name": prompt, "arguments": {"id": "INV-7"}}),
        )
        .await;
    assert_eq!(got.status, 200, "{}", got.body);
    let messages = got.json()["result"]["messages"].to_string();
    assert!(
        messages.contains("INV-7") && !messages.contains("tenant_id"),
        "{messages}"
    );
    let missing = beta
        .request(
            "prompts/get",
            Some(prompt),
            json!({"name": prompt, "arguments": {"id": "INV-7"}}),
        )
        .await;
    assert_eq!(missing.json()["error"]["data"]["code"], "InvoiceNotFound");

    // Mcp-Name must name what the body names.
    for (method, name, params) in [
        (
            "resources/read",
            "billing://invoices/INV-1",
            json!({"uri": uri}),
        ),
        (
            "prompts/get",
            "billing_other",
            json!({"name": prompt, "arguments": {"id": "INV-7"}}),
        ),
    ] {
        let refused = alpha.request(method, Some(name), params).await;
        assert_eq!(refused.status, 400, "{method}: {}", refused.body);
        let body = refused.json();
        assert_eq!(body["error"]["code"], -32020, "{method}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("does not match"),
            "{body}"
        );
    }

    // Reads are not changes: the audit trail holds nothing of them.
    drop(server);
    let database = rusqlite::Connection::open(data.path().join("billing.sqlite3"))
        .expect("the database opens");
    let audited: i64 = database
        .query_row("SELECT COUNT(*) FROM audit_events", [], |row| row.get(0))
        .expect("the audit table");
    assert_eq!(audited, 0);
}

//! rmcp's own client drives the billing server, the way an MCP host would: in-process over
//! `tokio::io::duplex`, and as a child process over stdio (`billing --in-memory`).
//!
//! Both transports run one scenario: list the eight tools with their schemas, call every tool
//! and check its `structuredContent` envelope, send invalid arguments (a result with
//! `isError` and `VALIDATION_ERROR`, not a protocol error) and call an unknown tool (a JSON-RPC
//! error with code -32602).

use std::collections::BTreeSet;
use std::future::Future;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use billing::Store;
use fusion::Exposition;
use fusion::serde_json::{Value, json};
use fusion::serve::Mcp;
use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorCode, JsonObject};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use rmcp::{Peer, RoleClient, ServiceExt};

/// Every test finishes well within this, or fails instead of hanging CI.
const TEST_TIMEOUT: Duration = Duration::from_secs(60);

const TOOLS: [&str; 9] = [
    "billing_get_invoice",
    "billing_list_invoices",
    "billing_void_invoice",
    "billing_create_invoice",
    "billing_update_invoice",
    "billing_invoice_stats",
    "billing_statuses",
    "billing_send_reminder",
    "billing_export_invoices",
];

async fn within<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(TEST_TIMEOUT, future)
        .await
        .expect("the test did not finish in time")
}

/// The billing MCP endpoint, in-process, as the binary builds it: every call acts for the
/// demo tenant.
fn billing_mcp() -> Mcp {
    let store = Store::open_in_memory().expect("in-memory store");
    let server = billing::server(Arc::new(store), Exposition::Flat).expect("billing server");
    Mcp::new(server).context(|_request, call| {
        call.extensions_mut().insert(billing::local_principal());
    })
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        other => panic!("not a JSON object: {other}"),
    }
}

async fn call(
    client: &Peer<RoleClient>,
    tool: &str,
    arguments: Value,
) -> Result<CallToolResult, ServiceError> {
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(object(arguments)))
        .await
}

/// Calls a tool that must succeed; returns the envelope's `data` after checking the envelope.
async fn ok(client: &Peer<RoleClient>, tool: &str, arguments: Value) -> Value {
    let result = call(client, tool, arguments.clone())
        .await
        .unwrap_or_else(|error| panic!("{tool} {arguments}: protocol error {error}"));
    assert_ne!(
        result.is_error,
        Some(true),
        "{tool} {arguments} failed: {result:?}"
    );
    let envelope = result
        .structured_content
        .clone()
        .unwrap_or_else(|| panic!("{tool}: no structuredContent"));
    assert_eq!(envelope["ok"], true, "{tool}: {envelope}");
    // The tool's name and version are in the listing, not repeated in its answers.
    assert!(
        envelope
            .get("meta")
            .is_none_or(|meta| meta.get("tool").is_none()),
        "{tool}: {envelope}"
    );
    // The first text block is the data the model reads: a list of records as a table (its
    // count and fields once, then a line per item), anything else as JSON.
    let first = text_blocks(&result)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("{tool}: no text content"));
    match envelope["data"].as_array().filter(|items| items.len() > 1) {
        Some(items) => {
            // The header names the records' fields (in the presenter's order) once.
            let fields: Vec<&str> = items[0]
                .as_object()
                .expect("records")
                .keys()
                .map(String::as_str)
                .collect();
            let count = format!("[{}]{{", items.len());
            let header = first
                .lines()
                .next()
                .and_then(|line| line.strip_prefix(&count))
                .and_then(|line| line.strip_suffix("}:"))
                .unwrap_or_else(|| panic!("{tool}: {first}"));
            let mut named: Vec<&str> = header.split(',').collect();
            named.sort_unstable();
            assert_eq!(named, fields, "{tool}: {first}");
            assert_eq!(first.lines().count(), items.len() + 1, "{tool}: {first}");
            for item in items {
                assert!(
                    first.contains(item["id"].as_str().expect("an id")),
                    "{tool}: {first}"
                );
            }
        }
        None => {
            let shown: Value =
                fusion::serde_json::from_str(&first).expect("the first block is JSON data");
            assert_eq!(
                shown, envelope["data"],
                "{tool}: content and envelope differ"
            );
        }
    }
    envelope["data"].clone()
}

/// Calls a tool that must fail as a tool (not as a protocol): returns the envelope's `error`.
async fn tool_error(client: &Peer<RoleClient>, tool: &str, arguments: Value) -> Value {
    let result = call(client, tool, arguments.clone())
        .await
        .unwrap_or_else(|error| {
            panic!("{tool} {arguments}: a protocol error ({error}) instead of an isError result")
        });
    assert_eq!(
        result.is_error,
        Some(true),
        "{tool} {arguments}: {result:?}"
    );
    let envelope = result
        .structured_content
        .clone()
        .unwrap_or_else(|| panic!("{tool}: no structuredContent"));
    assert_eq!(envelope["ok"], false, "{tool}: {envelope}");
    let error = envelope["error"].clone();
    assert!(error["code"].is_string(), "{tool}: {envelope}");
    // The message is for the agent, in the `<tool_error>` block; `retryable` is said when true.
    assert!(error.get("message").is_none(), "{tool}: {envelope}");
    assert!(
        error
            .get("retryable")
            .is_none_or(|retryable| retryable == true),
        "{tool}: {envelope}"
    );
    let blocks = text_blocks(&result);
    assert_eq!(blocks.len(), 1, "{tool}: one <tool_error> block");
    assert!(blocks[0].contains("<message>"), "{tool}: {}", blocks[0]);
    assert!(
        blocks[0].starts_with(&format!(
            "<tool_error code=\"{}\">",
            error["code"].as_str().unwrap()
        )),
        "{tool}: {}",
        blocks[0]
    );
    error
}

fn text_blocks(result: &CallToolResult) -> Vec<String> {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.clone()))
        .collect()
}

/// The whole scenario, over whichever transport `client` speaks.
async fn exercise(client: &Peer<RoleClient>) {
    // The handshake told the client who it talks to.
    let info = client.peer_info().expect("server info after the handshake");
    assert_eq!(
        info.server_info.as_ref().map(|server| server.name.as_str()),
        Some("billing")
    );
    assert!(info.capabilities.tools.is_some());

    // tools/list: all eight, each with an object input schema and the envelope output schema.
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: BTreeSet<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, TOOLS.into_iter().collect::<BTreeSet<_>>());
    for tool in &tools {
        assert_eq!(tool.input_schema["type"], "object", "{}", tool.name);
        assert!(
            tool.description.as_deref().is_some_and(|d| !d.is_empty()),
            "{} has no description",
            tool.name
        );
        let output = tool
            .output_schema
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no output schema", tool.name));
        assert_eq!(output["type"], "object", "{}", tool.name);
        // `ok` tells a success (with `data`) from a failure; both validate.
        assert_eq!(
            output["properties"]["ok"]["type"], "boolean",
            "{}",
            tool.name
        );
        assert_eq!(output["required"], json!(["ok"]), "{}", tool.name);
        assert!(output["properties"]["data"].is_object(), "{}", tool.name);
        let annotations = tool.annotations.as_ref().expect("annotations");
        assert!(annotations.read_only_hint.is_some(), "{}", tool.name);
    }
    let get = tools
        .iter()
        .find(|tool| tool.name == "billing_get_invoice")
        .unwrap();
    assert_eq!(get.input_schema["required"], json!(["id"]));
    assert_eq!(get.annotations.as_ref().unwrap().read_only_hint, Some(true));
    let void = tools
        .iter()
        .find(|tool| tool.name == "billing_void_invoice")
        .unwrap();
    assert_eq!(
        void.annotations.as_ref().unwrap().destructive_hint,
        Some(true)
    );
    // The guarded and hidden columns never appear in a schema.
    for tool in &tools {
        let schemas = format!(
            "{} {}",
            Value::Object((*tool.input_schema).clone()),
            Value::Object((**tool.output_schema.as_ref().unwrap()).clone())
        );
        for secret in ["tenant_id", "webhook_secret", "internal_flags"] {
            assert!(!schemas.contains(secret), "{} mentions {secret}", tool.name);
        }
    }

    // Every tool, successfully. Reads first, while the seed is untouched.
    let invoice = ok(client, "billing_get_invoice", json!({"id": "INV-7"})).await;
    assert_eq!(
        invoice,
        json!({"id": "INV-7", "customer_id": "C-7", "total_cents": 55433, "status": "paid"})
    );

    let open = ok(
        client,
        "billing_list_invoices",
        json!({"status": "open", "limit": 5}),
    )
    .await;
    let open = open.as_array().expect("a list");
    assert_eq!(open.len(), 5);
    assert!(open.iter().all(|invoice| invoice["status"] == "open"));
    let default = ok(client, "billing_list_invoices", json!({})).await;
    assert_eq!(default.as_array().unwrap().len(), 20, "default limit");

    let stats = ok(client, "billing_invoice_stats", json!({})).await;
    let by_status = stats["by_status"].as_array().expect("by_status");
    assert_eq!(by_status.len(), 3);
    let count: u64 = by_status
        .iter()
        .map(|line| line["count"].as_u64().unwrap())
        .sum();
    assert_eq!(count, 1000);

    let statuses = ok(client, "billing_statuses", json!({})).await;
    assert_eq!(statuses["statuses"].as_array().unwrap().len(), 3);

    let reminder = ok(client, "billing_send_reminder", json!({"id": "INV-3"})).await;
    assert_eq!(reminder, json!({"invoice": "INV-3", "customer_id": "C-3"}));

    let created = ok(
        client,
        "billing_create_invoice",
        json!({"customer_id": "C-99", "total_cents": 1234}),
    )
    .await;
    assert_eq!(created["customer_id"], "C-99");
    assert_eq!(created["total_cents"], 1234);
    assert_eq!(created["status"], "open");
    let id = created["id"].as_str().expect("an id").to_owned();

    let updated = ok(
        client,
        "billing_update_invoice",
        json!({"id": id, "total_cents": 4321}),
    )
    .await;
    assert_eq!(updated["total_cents"], 4321);

    let voided = ok(client, "billing_void_invoice", json!({"id": id})).await;
    assert_eq!(voided["status"], "voided");

    // Domain errors are tool results with their own codes.
    let again = tool_error(client, "billing_void_invoice", json!({"id": id})).await;
    assert_eq!(again["code"], "AlreadyVoided");
    let missing = tool_error(client, "billing_get_invoice", json!({"id": "INV-0"})).await;
    assert_eq!(missing["code"], "InvoiceNotFound");

    // Invalid arguments are results with isError and VALIDATION_ERROR, never protocol errors.
    for (tool, arguments) in [
        ("billing_get_invoice", json!({"id": 42})),
        ("billing_get_invoice", json!({})),
        (
            "billing_get_invoice",
            json!({"id": "INV-1", "tenant_id": "t_1"}),
        ),
        ("billing_list_invoices", json!({"status": "lost"})),
        ("billing_list_invoices", json!({"limit": -1})),
        (
            "billing_create_invoice",
            json!({"customer_id": "C-1", "total_cents": "ten"}),
        ),
        ("billing_update_invoice", json!({"id": "INV-1", "bogus": 1})),
    ] {
        let error = tool_error(client, tool, arguments.clone()).await;
        assert_eq!(
            error["code"], "VALIDATION_ERROR",
            "{tool} {arguments}: {error}"
        );
        assert_eq!(error.get("retryable"), None, "{tool} {arguments}");
    }

    // An unknown tool is a protocol error: JSON-RPC -32602 (invalid params).
    match call(client, "billing_pay_invoice", json!({"id": "INV-1"})).await {
        Err(ServiceError::McpError(error)) => {
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{error:?}");
            assert_eq!(error.code.0, -32602);
            assert!(error.message.contains("billing_pay_invoice"), "{error:?}");
        }
        other => panic!("an unknown tool must be a JSON-RPC error, got {other:?}"),
    }

    // The connection is still healthy after every kind of failure.
    ok(client, "billing_get_invoice", json!({"id": "INV-1"})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_over_duplex() {
    within(async {
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let mcp = billing_mcp();
        let server = tokio::spawn(async move {
            let running = mcp
                .handler()
                .serve(server_io)
                .await
                .expect("server handshake");
            running.waiting().await.expect("server loop")
        });
        let client: RunningService<RoleClient, ()> =
            ().serve(client_io).await.expect("client handshake");

        exercise(client.peer()).await;

        client.cancel().await.expect("client stops");
        // Closing the client's end ends the server's loop.
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the server stops when the client goes away")
            .expect("server task");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_process_over_stdio() {
    within(async {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_billing"));
        command
            .arg("--in-memory")
            .env("RUST_LOG", "warn")
            .kill_on_drop(true);
        let (transport, _stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn billing --in-memory");
        let pid = transport.id().expect("a running child");
        let client: RunningService<RoleClient, ()> =
            ().serve(transport)
                .await
                .expect("client handshake over stdio");

        exercise(client.peer()).await;

        // Closing stdin ends `billing`'s stdio loop; rmcp kills the child if it lingers.
        client.cancel().await.expect("client stops");
        wait_until_gone(pid).await;
    })
    .await;
}

/// Waits until the process `pid` has exited (Linux: its `/proc` entry is gone or a zombie).
async fn wait_until_gone(pid: u32) {
    let status = format!("/proc/{pid}/status");
    for _ in 0..100 {
        match std::fs::read_to_string(&status) {
            Err(_) => return,
            Ok(text)
                if text
                    .lines()
                    .any(|line| line.starts_with("State:") && line.contains('Z')) =>
            {
                return;
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    panic!("billing (pid {pid}) still runs 5 s after the client closed its stdin");
}

/// The data block per protocol era: a client from before `structuredContent` (2025-03-26)
/// reads a list as the serialized JSON the specification asks for; a current one as a table.
#[tokio::test]
async fn a_client_before_structured_content_reads_the_data_as_json() {
    within(async {
        for (version, json_copy) in [
            (rmcp::model::ProtocolVersion::V_2025_03_26, true),
            (rmcp::model::ProtocolVersion::V_2025_11_25, false),
        ] {
            let (client_io, server_io) = tokio::io::duplex(64 * 1024);
            let mcp = billing_mcp();
            tokio::spawn(async move {
                if let Ok(running) = mcp.handler().serve(server_io).await {
                    let _ = running.waiting().await;
                }
            });
            let info = rmcp::model::ClientConfig::new(
                Default::default(),
                rmcp::model::Implementation::new("old-client", "1.0.0"),
            )
            .with_protocol_version(version.clone());
            let client = info.serve(client_io).await.expect("client handshake");
            let negotiated = client.peer().peer_info().expect("server info");
            assert_eq!(negotiated.protocol_version, version);
            let result = call(client.peer(), "billing_list_invoices", json!({"limit": 3}))
                .await
                .expect("tools/call");
            let data = &result.structured_content.as_ref().expect("envelope")["data"];
            let first = text_blocks(&result).remove(0);
            if json_copy {
                let shown: Value = fusion::serde_json::from_str(&first).expect("JSON data");
                assert_eq!(&shown, data, "{version}");
            } else {
                assert!(first.starts_with("[3]{"), "{version}: {first}");
            }
            client.cancel().await.expect("client stops");
        }
    })
    .await;
}

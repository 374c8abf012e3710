//! The runtime's mount (`ServerBuilder::mount`), in process: a gateway server in front of the
//! real `billing` binary over stdio, driven by rmcp's client. Listing with prefixes and intact
//! schemas, results passed intact, access checked before forwarding, audit records, error
//! classification, a killed upstream restarted.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fusion::audit::{AuditError, AuditRecord, AuditSink};
use fusion::gateway::Upstream;
use fusion::serde_json::{Value, json};
use fusion::serve::Mcp;
use fusion::{ActionInfo, CallContext, Principal, Server, ServerBuilder, ToolError, ToolSpec};
use rmcp::model::ErrorCode;
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use support::*;

const PREFIX: &str = "acct";

fn billing_upstream() -> Upstream {
    Upstream::stdio(billing_bin().to_string_lossy())
        .arg("--in-memory")
        .restart_backoff(Duration::from_millis(50), Duration::from_millis(400))
        .timeout(Duration::from_secs(20))
}

/// Keeps every audit record.
#[derive(Default, Clone)]
struct Records(Arc<Mutex<Vec<AuditRecord>>>);

impl AuditSink for Records {
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError> {
        self.0.lock().unwrap().push(record.clone());
        Ok(())
    }
}

impl Records {
    fn all(&self) -> Vec<AuditRecord> {
        self.0.lock().unwrap().clone()
    }
}

#[fusion::data(deserialize, schema)]
struct NoArgs {}

/// A gateway over `billing --in-memory` under `acct`, beside one built-in tool; its access
/// policy refuses `acct_billing_void_invoice`; every call acts for `alice`.
async fn gateway(records: &Records) -> (Server, RunningService<RoleClient, ()>) {
    let server = ServerBuilder::new("gw", "1.0.0")
        .tool_spec(
            ToolSpec::query("health.ping", "Answers if alive.")
                .handler(|_: CallContext, _: NoArgs| async { Ok::<_, ToolError>("pong") }),
        )
        .mount(PREFIX, billing_upstream())
        .access(|_: &CallContext, action: ActionInfo<'_>| {
            action.key().as_str() != "acct.billing_void_invoice"
        })
        .audit(records.clone())
        .build()
        .expect("gateway server");
    server.upstreams_ready().await;
    let client = serve_in_process(&server).await;
    (server, client)
}

async fn serve_in_process(server: &Server) -> RunningService<RoleClient, ()> {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let mcp = Mcp::new(server.clone()).context(|_request, call| {
        call.extensions_mut()
            .insert(Principal::new("alice").with_tenant("t_alice"));
    });
    tokio::spawn(async move {
        let running = mcp
            .handler()
            .serve(server_io)
            .await
            .expect("server handshake");
        let _ = running.waiting().await;
    });
    ().serve(client_io).await.expect("client handshake")
}

/// rmcp's client on `billing --in-memory` directly.
async fn billing_direct() -> RunningService<RoleClient, ()> {
    let mut command = tokio::process::Command::new(billing_bin());
    command
        .arg("--in-memory")
        .stderr(std::process::Stdio::null());
    ().serve(TokioChildProcess::new(command).expect("spawn billing"))
        .await
        .expect("billing handshake")
}

#[tokio::test]
async fn proxied_tools_are_listed_under_the_prefix_with_their_definitions_intact() {
    within(async {
        let records = Records::default();
        let (_server, client) = gateway(&records).await;
        let direct = billing_direct().await;
        let listed = client.peer().list_all_tools().await.expect("tools/list");
        let upstream = direct
            .peer()
            .list_all_tools()
            .await
            .expect("billing tools/list");
        assert_eq!(upstream.len(), 9);
        let names: Vec<&str> = listed.iter().map(|tool| tool.name.as_ref()).collect();
        // Built-in first, then the upstream's, in its order; the denied one is not listed.
        assert_eq!(names[0], "health_ping");
        let expected: Vec<String> = upstream
            .iter()
            .filter(|tool| tool.name != "billing_void_invoice")
            .map(|tool| format!("{PREFIX}_{}", tool.name))
            .collect();
        assert_eq!(
            names[1..],
            expected.iter().map(String::as_str).collect::<Vec<_>>()
        );
        for original in upstream
            .iter()
            .filter(|tool| tool.name != "billing_void_invoice")
        {
            let proxied = listed
                .iter()
                .find(|tool| tool.name == format!("{PREFIX}_{}", original.name))
                .unwrap();
            let mut renamed = original.clone();
            renamed.name = proxied.name.clone();
            // The tools its description names, as they are called here.
            renamed.description = original
                .description
                .as_ref()
                .map(|description| {
                    upstream.iter().fold(description.to_string(), |text, tool| {
                        text.replace(
                            &format!("`{}`", tool.name),
                            &format!("`{PREFIX}_{}`", tool.name),
                        )
                    })
                })
                .map(Into::into);
            assert_eq!(
                proxied, &renamed,
                "everything but the names is the upstream's"
            );
        }
        client.cancel().await.unwrap();
        direct.cancel().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn results_pass_intact_and_hidden_fields_stay_absent() {
    within(async {
        let records = Records::default();
        let (_server, client) = gateway(&records).await;
        let direct = billing_direct().await;
        for (tool, arguments) in [
            ("billing_get_invoice", json!({"id": "INV-7"})),
            (
                "billing_list_invoices",
                json!({"status": "open", "limit": 3}),
            ),
            // A failure of the upstream's tool is its own result, not re-enveloped.
            ("billing_get_invoice", json!({"id": "INV-999999"})),
            ("billing_get_invoice", json!({"id": 7})),
        ] {
            let via = call(
                client.peer(),
                &format!("{PREFIX}_{tool}"),
                arguments.clone(),
            )
            .await
            .expect("proxied call");
            let own = call(direct.peer(), tool, arguments.clone())
                .await
                .expect("direct call");
            assert_eq!(via.is_error, own.is_error, "{tool} {arguments}");
            // Intact but for the names of billing's tools, as they are called here.
            let renamed = |text: String| {
                let text = text.replace("`billing_", &format!("`{PREFIX}_billing_"));
                let text = text.replace("- billing_", &format!("- {PREFIX}_billing_"));
                let text = text.replace(">billing_", &format!(">{PREFIX}_billing_"));
                text.replace("\"billing_", &format!("\"{PREFIX}_billing_"))
            };
            let own_structured = fusion::serde_json::to_string(&own.structured_content).unwrap();
            assert_eq!(
                fusion::serde_json::to_string(&via.structured_content).unwrap(),
                renamed(own_structured),
                "{tool} {arguments}"
            );
            assert_eq!(via.content.len(), own.content.len(), "{tool} {arguments}");
            for (via, own) in via.content.iter().zip(&own.content) {
                let (via, own) = (via.as_text().unwrap(), own.as_text().unwrap());
                assert_eq!(via.text, renamed(own.text.clone()), "{tool} {arguments}");
            }
            // The data is the upstream's, byte for byte.
            assert_eq!(
                via.structured_content.as_ref().unwrap().get("data"),
                own.structured_content.as_ref().unwrap().get("data"),
            );
            let text = fusion::serde_json::to_string(&via).unwrap();
            for hidden in ["whsec_", "webhook_secret", "tenant_id", "t_777"] {
                assert!(
                    !text.contains(hidden),
                    "{hidden} leaked through {tool}: {text}"
                );
            }
        }
        let missing = call(
            client.peer(),
            &format!("{PREFIX}_billing_get_invoice"),
            json!({"id": "INV-999999"}),
        )
        .await
        .unwrap();
        // The upstream's own code, the tools it names as they are called here: the gateway
        // added nothing.
        let envelope = missing.structured_content.clone().unwrap();
        assert_eq!(
            envelope,
            json!({"ok": false, "error": {"code": "InvoiceNotFound"}})
        );
        let told = missing.content[0].as_text().unwrap().text.as_str();
        assert!(
            told.contains(
                "<recovery>Call `acct_billing_list_invoices` to find valid invoice ids.</recovery>"
            ),
            "{told}"
        );
        client.cancel().await.unwrap();
        direct.cancel().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn access_is_checked_before_forwarding_and_successes_are_audited_as_writes() {
    within(async {
        let records = Records::default();
        let (_server, client) = gateway(&records).await;
        let void = format!("{PREFIX}_billing_void_invoice");
        let denied = call(client.peer(), &void, json!({"id": "INV-3"}))
            .await
            .unwrap();
        let error = error_of(&denied);
        assert_eq!(error["code"], "FORBIDDEN", "{error}");
        assert!(records.all().is_empty(), "a refused call is not audited");
        // The upstream never saw it: the invoice is still open.
        let get = format!("{PREFIX}_billing_get_invoice");
        let invoice = call(client.peer(), &get, json!({"id": "INV-3"}))
            .await
            .unwrap();
        assert_eq!(invoice.is_error, Some(false), "{invoice:?}");
        assert_eq!(
            invoice.structured_content.unwrap()["data"]["status"],
            "open"
        );

        // A read through the gateway is still a proxied call: audited as a write.
        let audited = records.all();
        assert_eq!(audited.len(), 1, "{audited:?}");
        let record = &audited[0];
        assert_eq!(record.tool, get);
        assert_eq!(record.action, "acct.billing_get_invoice");
        assert_eq!(record.principal.as_deref(), Some("alice"));
        assert_eq!(record.tenant.as_deref(), Some("t_alice"));
        assert_eq!(record.outcome, "ok");
        // A failed call is not.
        let failed = call(client.peer(), &get, json!({"id": "INV-999999"}))
            .await
            .unwrap();
        assert_eq!(failed.is_error, Some(true));
        assert_eq!(records.all().len(), 1);
        // The built-in tool is there too, and a name nobody has is a protocol error.
        let pong = call(client.peer(), "health_ping", json!({})).await.unwrap();
        assert_eq!(pong.structured_content.unwrap()["data"], "pong");
        match call(client.peer(), "acct_nothing", json!({})).await {
            Err(ServiceError::McpError(error)) => assert_eq!(error.code, ErrorCode::INVALID_PARAMS),
            other => panic!("expected -32602, got {other:?}"),
        }
        client.cancel().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn an_upstream_that_cannot_start_leaves_the_others_serving() {
    within(async {
        let server = ServerBuilder::new("gw", "1.0.0")
            .mount(
                "ghost",
                Upstream::stdio("/nonexistent/fusion-upstream-binary")
                    .restart_backoff(Duration::from_millis(20), Duration::from_millis(50)),
            )
            .mount(PREFIX, billing_upstream())
            .build()
            .expect("gateway server");
        server.upstreams_ready().await;
        let statuses = server.upstreams();
        assert!(
            !statuses[0].connected && statuses[1].connected,
            "{statuses:?}"
        );
        // Its tools are unknown, so not listed; the other upstream serves.
        let client = serve_in_process(&server).await;
        let listed = client.peer().list_all_tools().await.unwrap();
        assert!(listed.iter().all(|tool| !tool.name.starts_with("ghost_")));
        assert_eq!(listed.len(), 9);
        client.cancel().await.unwrap();
        server.shutdown_upstreams().await;
        assert!(server.upstreams().iter().all(|status| !status.connected));
    })
    .await;
}

#[tokio::test]
async fn a_killed_upstream_gives_a_retryable_error_then_is_restarted() {
    within(async {
        let records = Records::default();
        let (server, client) = gateway(&records).await;
        let get = format!("{PREFIX}_billing_get_invoice");
        let first = server.upstreams()[0].clone();
        let pid = first.pid.expect("a child pid");
        assert_eq!(first.starts, 1);
        // SIGKILL: no goodbye.
        let killed = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        // Until it is back, calls fail retryable, with an errorId and no internal text.
        let mut saw_unavailable = false;
        let restarted = loop {
            let result = call(client.peer(), &get, json!({"id": "INV-7"}))
                .await
                .unwrap();
            if result.is_error == Some(true) {
                let error = error_of(&result);
                assert_eq!(error["code"], "UPSTREAM_UNAVAILABLE", "{error}");
                assert_eq!(error["retryable"], true);
                assert!(error["errorId"].is_string(), "{error}");
                let text = fusion::serde_json::to_string(&result).unwrap();
                for internal in ["No such", "closed", "ransport", "upstream `"] {
                    assert!(!text.contains(internal), "{internal} in {text}");
                }
                saw_unavailable = true;
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            break result;
        };
        assert!(
            saw_unavailable,
            "the call right after the kill cannot have succeeded"
        );
        assert_eq!(restarted.structured_content.unwrap()["data"]["id"], "INV-7");
        let now = server.upstreams()[0].clone();
        assert_eq!(now.starts, 2, "{now:?}");
        assert_ne!(now.pid, Some(pid));
        client.cancel().await.unwrap();
        // Shutting down stops the child.
        let child = now.pid.unwrap();
        server.shutdown_upstreams().await;
        let alive = std::path::Path::new(&format!("/proc/{child}")).exists()
            && !std::fs::read_to_string(format!("/proc/{child}/stat"))
                .unwrap_or_default()
                .contains(") Z ");
        assert!(!alive, "the child {child} outlived the shutdown");
    })
    .await;
}

#[test]
fn mounting_is_checked_when_the_server_is_built() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _guard = runtime.enter();
    let error = ServerBuilder::new("gw", "1.0.0")
        .mount("a.b", Upstream::stdio("x"))
        .mount("dup", Upstream::http("ftp://nowhere"))
        .mount(
            "dup",
            Upstream::http("http://127.0.0.1:1/mcp").header("Bad Header", "v"),
        )
        .build()
        .unwrap_err();
    let problems = error.problems().join("\n");
    for expected in [
        "mount prefix `a.b`",
        "two upstreams are mounted under `dup`",
        "`ftp://nowhere` is not an http:// or https:// URL",
        "`Bad Header` is not a valid HTTP header name",
    ] {
        assert!(
            problems.contains(expected),
            "{expected} not in:\n{problems}"
        );
    }
    drop(_guard);
    // Outside a runtime, nothing can be started.
    let error = ServerBuilder::new("gw", "1.0.0")
        .mount("x", Upstream::stdio("x"))
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("Tokio runtime"), "{error}");
    let _ = Value::Null;
}

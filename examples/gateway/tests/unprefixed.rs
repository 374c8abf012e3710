//! Unprefixed mounts (`Upstream::unprefixed`): an upstream's tools served under their own
//! names, the prefix still the mount's namespace for access policies, audit and status; and a
//! name two tools would have served once, failing closed (built-in first, then mount order),
//! on the first fetch and when a catalog changes, with an error logged naming both owners; and
//! no proxied tool served under a built-in tool's canonical key.

mod support;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use fusion::audit::{AuditError, AuditRecord, AuditSink};
use fusion::gateway::Upstream;
use fusion::serde_json::json;
use fusion::serve::Mcp;
use fusion::{ActionInfo, CallContext, Principal, Server, ServerBuilder, ToolError, ToolSpec};
use rmcp::model::{ErrorCode, Tool};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use support::recorder::{Recorder, tool};
use support::*;

/// Keeps every audit record.
#[derive(Default, Clone)]
struct Records(Arc<Mutex<Vec<AuditRecord>>>);

impl AuditSink for Records {
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError> {
        self.0.lock().unwrap().push(record.clone());
        Ok(())
    }
}

#[fusion::data(deserialize, schema)]
struct NoArgs {}

fn ping_tool() -> ToolSpec {
    ToolSpec::query("health.ping", "Answers if alive.")
        .handler(|_: CallContext, _: NoArgs| async { Ok::<_, ToolError>("pong") })
}

async fn serve_in_process(server: &Server) -> RunningService<RoleClient, ()> {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let mcp = Mcp::new(server.clone()).context(|_request, call| {
        call.extensions_mut().insert(Principal::new("alice"));
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

/// Every ERROR event of this test process, as the fmt layer writes it (the gateway logs from
/// its own tasks: a global subscriber, installed once).
fn errors_logged() -> Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    Arc::clone(LOG.get_or_init(|| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&log);
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::ERROR)
            .with_writer(move || Writer(Arc::clone(&sink)))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
        log
    }))
}

struct Writer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Writer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().write(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The logged error lines that contain every one of `parts`.
fn error_lines(log: &Mutex<Vec<u8>>, parts: &[&str]) -> usize {
    String::from_utf8_lossy(&log.lock().unwrap())
        .lines()
        .filter(|line| line.contains("ERROR") && parts.iter().all(|part| line.contains(part)))
        .count()
}

#[tokio::test]
async fn an_unprefixed_upstream_is_served_under_its_own_names_and_policed_under_its_prefix() {
    within(async {
        let records = Records::default();
        let server = ServerBuilder::new("gw", "1.0.0")
            .tool_spec(ping_tool())
            .mount(
                "acct",
                Upstream::stdio(billing_bin().to_string_lossy())
                    .arg("--in-memory")
                    .timeout(Duration::from_secs(20))
                    .unprefixed(),
            )
            // Policies see the canonical key `prefix.tool`, whatever the exposed name.
            .access(|_: &CallContext, action: ActionInfo<'_>| {
                action.key().as_str() != "acct.billing_void_invoice"
            })
            .audit(records.clone())
            .build()
            .expect("gateway server");
        server.upstreams_ready().await;
        let client = serve_in_process(&server).await;
        let mut command = tokio::process::Command::new(billing_bin());
        command
            .arg("--in-memory")
            .stderr(std::process::Stdio::null());
        let direct =
            ().serve(TokioChildProcess::new(command).expect("spawn billing"))
                .await
                .expect("billing handshake");

        // Listed as the upstream lists them, names included; the denied one is not listed.
        let listed = client.peer().list_all_tools().await.expect("tools/list");
        let upstream = direct.peer().list_all_tools().await.expect("tools/list");
        assert_eq!(listed[0].name, "health_ping");
        let expected: Vec<Tool> = upstream
            .into_iter()
            .filter(|tool| tool.name != "billing_void_invoice")
            .collect();
        assert_eq!(expected.len(), 8);
        assert_eq!(listed[1..], expected[..]);

        // Called by its own name, the result intact.
        let arguments = json!({"id": "INV-7"});
        let via = call(client.peer(), "billing_get_invoice", arguments.clone())
            .await
            .expect("proxied call");
        let own = call(direct.peer(), "billing_get_invoice", arguments)
            .await
            .unwrap();
        assert_eq!(via, own);
        // The prefixed name is nobody's.
        match call(
            client.peer(),
            "acct_billing_get_invoice",
            json!({"id": "INV-7"}),
        )
        .await
        {
            Err(ServiceError::McpError(error)) => assert_eq!(error.code, ErrorCode::INVALID_PARAMS),
            other => panic!("expected -32602, got {other:?}"),
        }
        // The policy's key, before the upstream: the invoice stays open.
        let denied = call(
            client.peer(),
            "billing_void_invoice",
            json!({"id": "INV-3"}),
        )
        .await
        .unwrap();
        assert_eq!(error_of(&denied)["code"], "FORBIDDEN");
        let invoice = call(client.peer(), "billing_get_invoice", json!({"id": "INV-3"}))
            .await
            .unwrap();
        assert_eq!(
            invoice.structured_content.unwrap()["data"]["status"],
            "open"
        );
        // Audited under the exposed name and the canonical key.
        let audited = records.0.lock().unwrap().clone();
        assert_eq!(audited.len(), 2, "{audited:?}");
        assert_eq!(audited[0].tool, "billing_get_invoice");
        assert_eq!(audited[0].action, "acct.billing_get_invoice");
        // Its status is the mount's.
        let status = server.upstreams();
        assert_eq!(status[0].prefix, "acct");
        assert_eq!(status[0].tools, 9);
        client.cancel().await.unwrap();
        direct.cancel().await.unwrap();
    })
    .await;
}

fn described(name: &str, description: &str) -> Tool {
    let mut tool = tool(name);
    tool.description = Some(description.to_owned().into());
    tool
}

/// The listed tool of this name.
/// A call of `name` is refused as an unknown tool (JSON-RPC -32602).
async fn assert_unknown(client: &RunningService<RoleClient, ()>, name: &str) {
    match call(client.peer(), name, json!({})).await {
        Err(ServiceError::McpError(error)) => {
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{name}: {error:?}");
        }
        other => panic!("{name}: expected -32602, got {other:?}"),
    }
}

async fn listed(client: &RunningService<RoleClient, ()>, name: &str) -> Option<Tool> {
    client
        .peer()
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .find(|tool| tool.name == name)
}

#[tokio::test]
async fn a_name_two_tools_would_have_fails_closed() {
    within(async {
        let log = errors_logged();
        // `a` and `b` unprefixed, `p` prefixed between them.
        let a = Recorder::start().await;
        a.set_tools_quietly(vec![
            described("echo", "a's"),
            described("health_ping", "a's"),
            described("only_a", "a's"),
        ]);
        // Mounted as `health`, its `ping` has the built-in tool's key: not served either.
        let health = Recorder::start().await;
        health.set_tools_quietly(vec![described("ping", "health's")]);
        let p = Recorder::start().await;
        p.set_tools_quietly(vec![described("echo", "p's")]);
        let b = Recorder::start().await;
        b.set_tools_quietly(vec![
            described("echo", "b's"),
            described("p_echo", "b's"),
            described("only_b", "b's"),
        ]);
        let server = ServerBuilder::new("gw", "1.0.0")
            .tool_spec(ping_tool())
            .mount("a", Upstream::http(&a.url).unprefixed())
            .mount("p", Upstream::http(&p.url))
            .mount("b", Upstream::http(&b.url).unprefixed())
            .mount("health", Upstream::http(&health.url).unprefixed())
            .build()
            .unwrap();
        server.upstreams_ready().await;
        eventually("every upstream is listened to", || {
            a.listens() == 1 && b.listens() == 1
        })
        .await;
        let client = serve_in_process(&server).await;
        let tools = client.peer().list_all_tools().await.unwrap();
        let names: Vec<(&str, &str)> = tools
            .iter()
            .map(|tool| {
                (
                    tool.name.as_ref(),
                    tool.description.as_deref().unwrap_or_default(),
                )
            })
            .collect();
        // The built-in tool keeps its name; `echo` (a and b) and `p_echo` (p's `echo` prefixed,
        // b's unprefixed) are offered twice: served by neither.
        assert_eq!(
            names,
            [
                ("health_ping", "Answers if alive."),
                ("only_a", "a's"),
                ("only_b", "b's"),
            ]
        );
        // Each name reaches the owner it is listed under, and a contested one nobody.
        let pong = call(client.peer(), "health_ping", json!({})).await.unwrap();
        assert_eq!(pong.structured_content.unwrap()["data"], "pong");
        call(client.peer(), "only_b", json!({})).await.unwrap();
        for name in ["echo", "p_echo", "ping"] {
            assert_unknown(&client, name).await;
        }
        assert!(a.calls_of("health_ping").is_empty());
        assert!(a.calls_of("echo").is_empty());
        assert!(p.calls_of("echo").is_empty());
        assert!(b.calls_of("echo").is_empty());
        assert!(b.calls_of("p_echo").is_empty());
        assert_eq!(b.calls_of("only_b").len(), 1);
        assert!(health.calls_of("ping").is_empty());
        assert!(
            error_lines(
                &log,
                &[
                    "upstream=health ",
                    "its key `health.ping` is a built-in tool's"
                ]
            ) >= 1
        );
        // Each collision logged as an error by each side, naming both owners.
        assert!(
            error_lines(
                &log,
                &["upstream=a ", "its name `health_ping` is a built-in tool's"]
            ) >= 1
        );
        let both = "tool `echo` of upstream `a` and tool `echo` of upstream `b`";
        let prefixed = "tool `echo` of upstream `p` and tool `p_echo` of upstream `b`";
        for (upstream, name, owners) in [
            ("a", "echo", both),
            ("b", "echo", both),
            ("p", "p_echo", prefixed),
            ("b", "p_echo", prefixed),
        ] {
            assert!(
                error_lines(
                    &log,
                    &[
                        &format!("upstream={upstream} "),
                        &format!("its name `{name}` is offered by {owners}"),
                    ]
                ) >= 1,
                "{upstream}/{name}: {}",
                String::from_utf8_lossy(&log.lock().unwrap())
            );
        }

        // A later mount's refresh brings a name an earlier one serves: from then on neither
        // serves it.
        b.set_tools(vec![
            described("echo", "b's"),
            described("only_b", "b's"),
            described("only_a", "b's"),
            described("late", "b's"),
        ])
        .await;
        let mut waited = 0;
        while listed(&client, "late").await.is_none() {
            assert!(waited < 500, "b's new tool was not listed");
            tokio::time::sleep(Duration::from_millis(20)).await;
            waited += 1;
        }
        assert!(listed(&client, "only_a").await.is_none());
        assert_unknown(&client, "only_a").await;
        assert!(a.calls_of("only_a").is_empty());
        assert!(b.calls_of("only_a").is_empty());
        assert!(
            error_lines(
                &log,
                &[
                    "upstream=b ",
                    "its name `only_a` is offered by tool `only_a` of upstream `a` and tool \
                     `only_a` of upstream `b`"
                ]
            ) >= 1
        );
        call(client.peer(), "late", json!({})).await.unwrap();
        assert_eq!(b.calls_of("late").len(), 1);

        // An earlier mount's refresh brings a name a later one serves: the later one loses it
        // and the earlier one does not get it, so a client with the old list reaches nobody,
        // never a server it did not choose.
        a.set_tools(vec![
            described("echo", "a's"),
            described("only_a", "a's"),
            described("late", "a's"),
        ])
        .await;
        let mut waited = 0;
        while listed(&client, "late").await.is_some() {
            assert!(waited < 500, "b's `late` is still listed");
            tokio::time::sleep(Duration::from_millis(20)).await;
            waited += 1;
        }
        assert_unknown(&client, "late").await;
        assert!(a.calls_of("late").is_empty());
        assert_eq!(
            b.calls_of("late").len(),
            1,
            "b's `late` is not called again"
        );
        assert!(
            error_lines(
                &log,
                &[
                    "upstream=a ",
                    "its name `late` is offered by tool `late` of upstream `a` and tool `late` \
                     of upstream `b`"
                ]
            ) >= 1
        );
        // Each names appears once.
        let tools = client.peer().list_all_tools().await.unwrap();
        let mut names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "{names:?}");
        client.cancel().await.unwrap();
    })
    .await;
}

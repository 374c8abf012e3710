//! The `gateway` binary's own policy: its audit trail (`--audit-db`, an append-only SQLite
//! table; the log otherwise) records proxied calls, and a read-only token is refused before
//! anything is forwarded, proven at the upstreams.

mod support;

use fusion::serde_json::json;
use support::recorder::Recorder;
use support::*;

/// `acct=stdio:'billing --in-memory'`.
fn billing_upstream() -> [String; 2] {
    [
        "--upstream".to_owned(),
        format!("acct=stdio:'{}' --in-memory", billing_bin().display()),
    ]
}

/// A fresh path in the temporary directory, removed with its database when dropped.
struct TempDb(std::path::PathBuf);

impl Drop for TempDb {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn temp_db(name: &str) -> TempDb {
    TempDb(std::env::temp_dir().join(format!(
        "fusion-gateway-{name}-{}-{}.db",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    )))
}

/// (tool, action, principal, outcome) of every row of the audit table.
fn audit_rows(db: &std::path::Path) -> Vec<(String, String, Option<String>, String)> {
    let connection = rusqlite::Connection::open(db).unwrap();
    let mut statement = connection
        .prepare("SELECT tool, action, principal, outcome FROM audit_events ORDER BY seq")
        .unwrap();
    statement
        .query_map([], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[tokio::test]
async fn proxied_calls_through_the_binary_are_audited_in_sqlite() {
    within(async {
        let db = temp_db("audit");
        let mut args = billing_upstream().to_vec();
        args.extend(["--audit-db".to_owned(), db.0.display().to_string()]);
        let gateway = GatewayStdio::start(&args, &[]).await;
        let peer = gateway.client.peer();
        let voided = call(peer, "acct_billing_void_invoice", json!({"id": "INV-3"}))
            .await
            .unwrap();
        assert_eq!(voided.is_error, Some(false), "{voided:?}");
        let read = call(peer, "acct_billing_get_invoice", json!({"id": "INV-3"}))
            .await
            .unwrap();
        assert_eq!(read.structured_content.unwrap()["data"]["status"], "voided");
        // A failed call is not audited; the built-in read-only status tool is not either.
        let missing = call(
            peer,
            "acct_billing_get_invoice",
            json!({"id": "INV-999999"}),
        )
        .await
        .unwrap();
        assert_eq!(missing.is_error, Some(true));
        let status = call(peer, "gateway_status", json!({})).await.unwrap();
        assert_eq!(status.is_error, Some(false));
        let log = gateway.stop().await;
        // The records are in the database, durable after the gateway stopped.
        let local = Some("local".to_owned());
        assert_eq!(
            audit_rows(&db.0),
            [
                (
                    "acct_billing_void_invoice".to_owned(),
                    "acct.billing_void_invoice".to_owned(),
                    local.clone(),
                    "ok".to_owned()
                ),
                (
                    "acct_billing_get_invoice".to_owned(),
                    "acct.billing_get_invoice".to_owned(),
                    local,
                    "ok".to_owned()
                ),
            ]
        );
        assert!(log.contains("audit records go to SQLite"), "{log}");
        // The table is append-only.
        let connection = rusqlite::Connection::open(&db.0).unwrap();
        assert!(connection.execute("DELETE FROM audit_events", []).is_err());
    })
    .await;
}

#[tokio::test]
async fn without_an_audit_database_records_go_to_the_log() {
    within(async {
        let gateway = GatewayStdio::start(&billing_upstream(), &[]).await;
        let voided = call(
            gateway.client.peer(),
            "acct_billing_void_invoice",
            json!({"id": "INV-6"}),
        )
        .await
        .unwrap();
        assert_eq!(voided.is_error, Some(false), "{voided:?}");
        let log = gateway.stop().await;
        let record = log
            .lines()
            .find(|line| line.contains("fusion::audit"))
            .unwrap_or_else(|| panic!("no audit record in the log:\n{log}"));
        assert!(
            record.contains("acct.billing_void_invoice") && record.contains("local"),
            "{record}"
        );
    })
    .await;
}

// Starting the gateway blocks this thread until it listens, and it connects to the recorder,
// served by this runtime, first: another worker must be free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_token_is_refused_before_anything_is_forwarded() {
    within(async {
        let upstream = Recorder::start().await;
        let mut args = billing_upstream().to_vec();
        args.extend(["--upstream".to_owned(), format!("up=http:{}", upstream.url)]);
        let gateway =
            GatewayHttp::start(&args, &[("GATEWAY_TOKENS", "tok-w=ops,tok-r=viewer:read")]);
        let viewer = gateway.client("tok-r").await;
        // It sees only what it may call.
        let listed = viewer.peer().list_all_tools().await.unwrap();
        let names: Vec<&str> = listed.iter().map(|tool| tool.name.as_ref()).collect();
        assert!(names.contains(&"up_echo") && names.contains(&"acct_billing_get_invoice"));
        assert!(!names.contains(&"up_delete") && !names.contains(&"acct_billing_void_invoice"));
        // Calling them anyway: refused by the gateway.
        for (tool, arguments) in [
            ("up_delete", json!({"what": "everything"})),
            ("acct_billing_void_invoice", json!({"id": "INV-3"})),
        ] {
            let refused = call(viewer.peer(), tool, arguments).await.unwrap();
            assert_eq!(error_of(&refused)["code"], "FORBIDDEN", "{tool}");
        }
        // Reads pass.
        let echoed = call(viewer.peer(), "up_echo", json!({"message": "hi"}))
            .await
            .unwrap();
        assert_eq!(text_of(&echoed), "echo: hi");
        // The upstream saw the read and nothing else.
        let seen: Vec<String> = upstream.calls().into_iter().map(|call| call.tool).collect();
        assert_eq!(seen, ["echo"]);
        // Billing never voided the invoice; a writer still can.
        let ops = gateway.client("tok-w").await;
        let invoice = call(
            ops.peer(),
            "acct_billing_get_invoice",
            json!({"id": "INV-3"}),
        )
        .await
        .unwrap();
        assert_eq!(
            invoice.structured_content.unwrap()["data"]["status"],
            "open"
        );
        let deleted = call(ops.peer(), "up_delete", json!({"what": "one"}))
            .await
            .unwrap();
        assert_eq!(text_of(&deleted), "deleted");
        assert_eq!(upstream.calls_of("delete").len(), 1);
        viewer.cancel().await.unwrap();
        ops.cancel().await.unwrap();
    })
    .await;
}

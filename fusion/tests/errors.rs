//! Errors that guide (SPEC E1, E2): specific codes, recovery, actions, retry windows; internal
//! failures and panics never show their text and never stop the server.

mod common;

use common::*;
use fusion::testing::Tester;
use serde_json::json;

#[tokio::test]
async fn a_domain_error_keeps_its_code_recovery_and_actions() {
    let tester = Tester::new(server());
    let result = tester
        .call("billing.get_invoice", json!({"id": "INV-404"}))
        .await;
    assert!(result.is_error());
    assert_eq!(result.raw().is_error, Some(true));
    assert_eq!(result.envelope()["ok"], false);
    // structuredContent holds the code for programs; the agent reads the rest in the text.
    assert_eq!(
        result.envelope(),
        &json!({"ok": false, "error": {"code": "InvoiceNotFound"}})
    );
    let error = result.error();
    assert_eq!(error["code"], "InvoiceNotFound");
    assert_eq!(error["message"], "Invoice INV-404 does not exist.");
    assert_eq!(
        error["recovery"],
        "Call billing.list_invoices to find valid ids."
    );
    assert_eq!(error["availableActions"], json!(["billing_list_invoices"]));
    assert_eq!(error["retryable"], false);
    assert_eq!(error.get("errorId"), None);
    assert_eq!(
        result.texts(),
        [
            "<tool_error code=\"InvoiceNotFound\">\n<message>Invoice INV-404 does not exist.</message>\n<recovery>Call billing.list_invoices to find valid ids.</recovery>\n<available_actions>billing_list_invoices</available_actions>\n</tool_error>"
        ]
    );
    let busy = tester
        .call("ops.reindex", json!({"fail_with": "busy"}))
        .await;
    assert_eq!(busy.error_code(), Some("StoreBusy"));
    assert_eq!(busy.error()["retryable"], true);
}

#[tokio::test]
async fn a_retry_window_reaches_the_envelope_and_the_text() {
    #[derive(Debug, fusion::ToolError)]
    enum ExportError {
        #[tool_error(
            code = "ExportThrottled",
            message = "Too many exports.",
            recovery = "Wait, then export again.",
            retry_after = "5s"
        )]
        Throttled,
        #[tool_error(code = "ExportQueued", message = "Queued.", retry_after = "250ms")]
        Queued,
        #[tool_error(code = "ExportFailed", message = "Failed.", retryable)]
        Failed,
    }
    /// Exports the invoices.
    #[fusion::tool(action, name = "billing.export")]
    async fn export(how: String) -> Result<bool, ExportError> {
        Err(match how.as_str() {
            "throttled" => ExportError::Throttled,
            "queued" => ExportError::Queued,
            _ => ExportError::Failed,
        })
    }
    let server = fusion::ServerBuilder::new("s", "1")
        .tool::<export>()
        .build()
        .unwrap();
    let tester = Tester::new(server);

    let throttled = tester
        .call("billing.export", json!({"how": "throttled"}))
        .await;
    assert_eq!(throttled.error_code(), Some("ExportThrottled"));
    assert_eq!(throttled.error()["retryable"], true);
    assert_eq!(throttled.error()["retryAfterMs"], 5000);
    assert_eq!(
        throttled.texts(),
        [
            "<tool_error code=\"ExportThrottled\">\n<message>Too many exports.</message>\n<recovery>Wait, then export again.</recovery>\n<retry_after>5000ms</retry_after>\n</tool_error>"
        ]
    );

    let queued = tester
        .call("billing.export", json!({"how": "queued"}))
        .await;
    assert_eq!(queued.error()["retryAfterMs"], 250);
    assert!(
        queued.texts()[0].contains("<retry_after>250ms</retry_after>"),
        "{}",
        queued.texts()[0]
    );

    // Retryable without a window: no window is invented.
    let failed = tester
        .call("billing.export", json!({"how": "failed"}))
        .await;
    assert_eq!(failed.error()["retryable"], true);
    assert_eq!(failed.error().get("retryAfterMs"), None);
    assert!(!failed.texts()[0].contains("<retry_after>"));
}

#[tokio::test]
async fn error_text_is_xml_escaped() {
    let tester = Tester::new(server());
    let result = tester
        .call("billing.get_invoice", json!({"id": "<b>&\"x\""}))
        .await;
    let text = result.texts()[0];
    assert!(
        text.contains("<message>Invoice &lt;b&gt;&amp;\"x\" does not exist.</message>"),
        "{text}"
    );
    assert_eq!(
        result.error()["message"],
        "Invoice <b>&\"x\" does not exist."
    );
}

async fn logged<F: std::future::Future>(future: F) -> (F::Output, String) {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let output = future.await;
    (output, logs.text())
}

#[tokio::test(flavor = "current_thread")]
async fn internal_errors_show_an_error_id_and_log_the_text_under_it() {
    let tester = Tester::new(server());
    let (result, logs) = logged(tester.call("ops.reindex", json!({"fail_with": "io"}))).await;
    assert_eq!(result.error_code(), Some("INTERNAL_ERROR"));
    let error_id = result.error()["errorId"]
        .as_str()
        .expect("an errorId")
        .to_owned();
    assert_eq!(error_id.len(), 32);
    assert!(!result.raw_text().contains("nvme0n1"));
    assert!(!result.raw_text().contains("secret-path"));
    assert!(result.texts()[0].contains(&format!("<error_id>{error_id}</error_id>")));
    assert!(logs.contains(&error_id), "{logs}");
    assert!(logs.contains("disk /dev/nvme0n1 failed"), "{logs}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_plain_std_error_from_a_handler_is_internal_and_logged_under_its_error_id() {
    /// Reads the number of rows, failing like a broken disk.
    #[fusion::tool(query, name = "ops.row_count")]
    async fn row_count(fail: bool) -> Result<u32, std::io::Error> {
        if fail {
            Err(std::io::Error::other(
                "read /srv/db/rows.bin: sector 7731 unreadable",
            ))
        } else {
            Ok(7)
        }
    }
    let server = fusion::ServerBuilder::new("s", "1")
        .tool::<row_count>()
        .build()
        .unwrap();
    let tester = Tester::new(server);
    let ok = tester.call("ops.row_count", json!({"fail": false})).await;
    assert_eq!(ok.data(), &json!(7));

    let (result, logs) = logged(tester.call("ops.row_count", json!({"fail": true}))).await;
    assert!(result.is_error());
    assert_eq!(result.error_code(), Some("INTERNAL_ERROR"));
    let error_id = result.error()["errorId"]
        .as_str()
        .expect("an errorId")
        .to_owned();
    assert_eq!(error_id.len(), 32);
    assert!(result.texts()[0].contains(&format!("<error_id>{error_id}</error_id>")));
    let raw = result.raw_text();
    for internal in ["/srv/db/rows.bin", "sector 7731", "unreadable"] {
        assert!(!raw.contains(internal), "`{internal}` leaked in {raw}");
    }
    // The text is logged, on the same line as the errorId the agent received.
    let line = logs
        .lines()
        .find(|line| line.contains(&error_id))
        .unwrap_or_else(|| panic!("no log line with {error_id}: {logs}"));
    assert!(
        line.contains("read /srv/db/rows.bin: sector 7731 unreadable"),
        "{line}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_panicking_handler_yields_internal_error_and_the_server_keeps_serving() {
    let server = server();
    let tester = Tester::new(server.clone());
    let (result, logs) = logged(tester.call("ops.reindex", json!({"fail_with": "panic"}))).await;
    assert!(result.is_error());
    assert_eq!(result.error_code(), Some("INTERNAL_ERROR"));
    let error_id = result.error()["errorId"].as_str().unwrap().to_owned();
    assert!(!result.raw_text().contains("secret-path"));
    assert!(
        logs.contains(&error_id) && logs.contains("secret-path"),
        "{logs}"
    );
    // The same server, the same tool, still answers.
    for _ in 0..3 {
        let ok = tester
            .call("ops.reindex", json!({"fail_with": "none"}))
            .await;
        assert!(!ok.is_error());
        let read = tester
            .call("billing.get_invoice", json!({"id": "INV-2"}))
            .await;
        assert!(!read.is_error());
    }
}

#[tokio::test]
async fn each_internal_error_gets_its_own_id() {
    let tester = Tester::new(server());
    let first = tester.call("ops.reindex", json!({"fail_with": "io"})).await;
    let second = tester.call("ops.reindex", json!({"fail_with": "io"})).await;
    assert_ne!(first.error()["errorId"], second.error()["errorId"]);
}

#[tokio::test]
async fn an_unknown_tool_is_a_protocol_error_not_a_result() {
    let tester = Tester::new(server());
    let unknown = tester
        .call_exposed("billing_delete_everything", json!({}))
        .await;
    assert_eq!(
        unknown.unwrap_err(),
        fusion::UnknownTool("billing_delete_everything".into())
    );
}

#[tokio::test]
async fn an_available_action_naming_no_tool_is_dropped() {
    /// Fails with an action that does not exist.
    #[fusion::tool(query, name = "billing.broken")]
    async fn broken() -> Result<bool, fusion::ToolError> {
        Err(fusion::ToolError::new("Broken", "broken")
            .with_actions(["billing.nothing", "billing.broken"]))
    }
    let server = fusion::ServerBuilder::new("s", "1")
        .tool::<broken>()
        .build()
        .unwrap();
    let result = Tester::new(server).call("billing.broken", json!({})).await;
    assert_eq!(
        result.error()["availableActions"],
        json!(["billing_broken"])
    );
}

#[test]
fn a_message_formats_its_fields_with_their_format_specs_in_display_and_in_the_error() {
    #[derive(Debug, fusion::ToolError)]
    enum QuotaError {
        #[tool_error(code = "OverQuota", message = "Account {0:>6} used {1:?} calls.")]
        Over(String, u32),
        #[tool_error(
            code = "Closed",
            message = "Account {account} closed after {calls} calls."
        )]
        Closed { account: String, calls: u32 },
    }
    let over = QuotaError::Over("A-1".into(), 7);
    assert_eq!(over.to_string(), "Account    A-1 used 7 calls.");
    assert_eq!(
        fusion::ToolError::from(over).message(),
        "Account    A-1 used 7 calls."
    );
    let closed = QuotaError::Closed {
        account: "A-2".into(),
        calls: 3,
    };
    assert_eq!(closed.to_string(), "Account A-2 closed after 3 calls.");
    let error = fusion::ToolError::from(closed);
    assert_eq!(error.code(), "Closed");
    assert_eq!(error.message(), "Account A-2 closed after 3 calls.");
}

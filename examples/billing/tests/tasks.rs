//! `billing.export_invoices` as a task (issue 26) over Streamable HTTP on 127.0.0.1, with
//! rmcp's own stateless (2026-07-28) client declaring the tasks extension: the export answers
//! with a task id at once, its CSV carries no hidden column, and only the token that started
//! it reaches it: a read-only token of the same tenant and another tenant's token are told
//! that no such task exists. The binary keeps its tasks in its SQLite database: a finished
//! export is still there after a restart.
#![cfg(unix)]

mod support;

use std::sync::Arc;

use billing::Store;
use fusion::Exposition;
use fusion::Principal;
use fusion::auth::StaticTokens;
use fusion::serve::{HttpOptions, Mcp};
use rmcp::model::{CancelTaskParams, TaskPayload, TaskStatus};
use support::tasks::{Client, client, get, is_unknown_task, settled, start_export};

/// The owner: the demo tenant's writer.
const WRITER: &str = "tasks-writer-1f0c";
/// A read-only token of the same tenant.
const READER: &str = "tasks-reader-77ad";
/// A writer of another tenant.
const OTHER: &str = "tasks-other-9b21";

/// The billing endpoint on 127.0.0.1 with the three tokens; stops with the returned options.
async fn serve() -> (String, HttpOptions) {
    let store = Arc::new(Store::open_in_memory().expect("in-memory store"));
    let server = billing::server(store, Exposition::Flat).expect("billing server");
    let tokens = StaticTokens::new()
        .with(WRITER, billing::local_principal())
        .with(
            READER,
            Principal::new("reader").with_tenant(billing::DEMO_TENANT),
        )
        .with(
            OTHER,
            Principal::new("local")
                .with_tenant("t_other")
                .with_scopes([billing::WRITE_SCOPE.to_owned()]),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let address = listener.local_addr().expect("bound address");
    let options = HttpOptions::default().auth(tokens).bind(address);
    tokio::spawn({
        let options = options.clone();
        async move { Mcp::new(server).serve_http_on(listener, options).await }
    });
    (format!("http://{address}/mcp"), options)
}

/// A stateless client of the anonymous demo tenant (`--allow-anonymous`).
async fn anonymous_client(url: &str) -> Client {
    client(url, "unused-without-authentication").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_runs_as_a_task_that_only_its_owner_reaches() {
    let (url, options) = serve().await;
    let writer = client(&url, WRITER).await;
    let id = start_export(&writer).await;

    for token in [READER, OTHER] {
        let other = client(&url, token).await;
        let read = get(&other, &id).await;
        assert!(
            read.as_ref().is_err_and(is_unknown_task),
            "{token}: {read:?}"
        );
        let cancel = other.peer().cancel_task(CancelTaskParams::new(&id)).await;
        assert!(
            cancel.as_ref().is_err_and(is_unknown_task),
            "{token}: {cancel:?}"
        );
    }

    let done = settled(&writer, &id).await;
    let TaskPayload::Completed { result } = &done.task.payload else {
        panic!("the export completed: {done:?}");
    };
    let data = &result["structuredContent"]["data"];
    let csv = data["csv"].as_str().expect("a CSV");
    // The seed's 1000 invoices, a header, and no hidden column.
    assert_eq!(data["rows"], 1000, "{data}");
    assert_eq!(csv.lines().count(), 1001);
    assert_eq!(
        csv.lines().next(),
        Some("id,customer_id,status,total_cents")
    );
    let text = fusion::serde_json::Value::Object(result.clone()).to_string();
    assert!(
        !text.contains("whsec_") && !text.contains("webhook_secret") && !text.contains("t_777,"),
        "a hidden value left in the export"
    );

    // An export cancelled at once ends cancelled.
    let cancelled = start_export(&writer).await;
    writer
        .peer()
        .cancel_task(CancelTaskParams::new(&cancelled))
        .await
        .expect("the owner cancels");
    let status = get(&writer, &cancelled).await.unwrap().task.status();
    assert_eq!(status, TaskStatus::Cancelled);
    options.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_export_outlives_a_restart_of_the_binary() {
    let data = tempfile::tempdir().expect("a data directory");
    let dir = data.path().to_str().expect("a UTF-8 path").to_owned();
    let spawn = || {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || {
            support::BillingHttp::spawn_exactly(&["--data-dir", &dir, "--allow-anonymous"])
        })
    };
    let (id, before) = {
        let server = spawn().await.unwrap();
        let client = anonymous_client(server.url()).await;
        let id = start_export(&client).await;
        let done = settled(&client, &id).await;
        assert_eq!(done.task.status(), TaskStatus::Completed);
        (id, done)
    };
    let server = spawn().await.unwrap();
    let client = anonymous_client(server.url()).await;
    let after = get(&client, &id).await.expect("the task is still there");
    assert_eq!(after.task, before.task);
}

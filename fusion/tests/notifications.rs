//! What a server tells a client beside its answers: log messages (`Log`), sent only from the
//! level the client asked for (`logging/setLevel` on a session, `_meta` on a 2026-07-28
//! request), and resource updates to the sessions subscribed to a resource a mutation
//! invalidates.

// The client side hears log messages, which rmcp marks deprecated (SEP-2577).
#![allow(deprecated)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use fusion::protocol as rmcp;
use fusion::serve::Mcp;
use fusion::{Log, LogLevel, ServerBuilder, State, ToolError, resource, tool};
use rmcp::model::{
    CallToolRequestParams, ClientConfig, ErrorCode, InitializeResult, LoggingLevel,
    LoggingMessageNotificationParam, ProtocolVersion, RequestMetaObject,
    ResourceUpdatedNotificationParam, SetLevelRequestParams, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService, ServiceError, serve_directly};
use rmcp::{ClientHandler, RoleClient, RoleServer, ServiceExt};
use serde_json::{Value, json};

/// Imports rows, saying how it goes at every level.
#[tool(query, name = "ops.import")]
async fn import(log: Log) -> Result<Value, ToolError> {
    let enabled = [LogLevel::Debug, LogLevel::Warning].map(|level| log.enabled(level));
    log.debug("reading the file").await;
    log.info("imported 40 rows").await;
    log.named("ops.import")
        .log(LogLevel::Warning, json!({"skipped": 2}))
        .await;
    Ok(json!({ "enabled": enabled }))
}

/// The invoice, as subscribers read it.
#[resource(uri = "billing://invoices/{id}", name = "billing.invoice", returns = InvoiceView)]
async fn invoice(db: State<Db>, id: String) -> Result<Invoice, ToolError> {
    db.invoices
        .lock()
        .unwrap()
        .iter()
        .find(|invoice| invoice.id == id)
        .cloned()
        .ok_or_else(|| ToolError::not_found(format!("No invoice {id}.")))
}

fn mcp() -> Mcp {
    Mcp::new(
        tools(ServerBuilder::new("ops", "1.0.0").state(Db::seeded()))
            .tool::<import>()
            .resource::<invoice>()
            .build()
            .expect("the server builds"),
    )
}

/// A client that keeps what it hears.
#[derive(Clone, Default)]
struct Ear {
    logs: Arc<Mutex<Vec<Value>>>,
    updates: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Ear {
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.logs
            .lock()
            .unwrap()
            .push(serde_json::to_value(params).unwrap());
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.updates.lock().unwrap().push(params.uri);
    }
}

impl Ear {
    fn logs(&self) -> Vec<Value> {
        self.logs.lock().unwrap().clone()
    }

    /// The updates heard, once `count` arrived (or after a while).
    async fn updates(&self, count: usize) -> Vec<String> {
        for _ in 0..100 {
            if self.updates.lock().unwrap().len() >= count {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.updates.lock().unwrap().clone()
    }
}

async fn within<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), future)
        .await
        .expect("in time")
}

async fn session(mcp: &Mcp, ear: Ear) -> RunningService<RoleClient, Ear> {
    let (client_io, server_io) = tokio::io::duplex(256 * 1024);
    let handler = mcp.handler();
    tokio::spawn(async move {
        let running = handler.serve(server_io).await.expect("server handshake");
        let _ = running.waiting().await;
    });
    ear.serve(client_io).await.expect("client handshake")
}

fn stateless(mcp: &Mcp, ear: Ear) -> RunningService<RoleClient, Ear> {
    let (client_io, server_io) = tokio::io::duplex(256 * 1024);
    let mut client_info = ClientConfig::default();
    client_info.protocol_version = ProtocolVersion::V_2026_07_28;
    let mut server_info = InitializeResult::default();
    server_info.protocol_version = ProtocolVersion::V_2026_07_28;
    let running =
        serve_directly::<RoleServer, _, _, _, _>(mcp.handler(), server_io, Some(client_info));
    tokio::spawn(async move {
        let _ = running.waiting().await;
    });
    serve_directly::<RoleClient, _, _, _, _>(ear, client_io, Some(server_info.into()))
}

async fn import_call(
    client: &RunningService<RoleClient, Ear>,
    level: Option<LoggingLevel>,
) -> Value {
    let mut params = CallToolRequestParams::new("ops_import");
    if let Some(level) = level {
        let mut meta = RequestMetaObject::default();
        meta.set_log_level(level);
        params.meta = Some(meta);
    }
    let result = within(client.call_tool(params)).await.expect("completes");
    result.structured_content.unwrap()["data"].clone()
}

#[tokio::test]
async fn a_session_hears_log_messages_from_the_level_it_set() {
    let mcp = mcp();
    let ear = Ear::default();
    let client = session(&mcp, ear.clone()).await;
    // No level asked for: nothing is sent.
    assert_eq!(
        import_call(&client, None).await,
        json!({"enabled": [false, false]})
    );
    assert!(ear.logs().is_empty());
    within(client.set_level(SetLevelRequestParams::new(LoggingLevel::Info)))
        .await
        .expect("the level is set");
    assert_eq!(
        import_call(&client, None).await,
        json!({"enabled": [false, true]})
    );
    // Notifications of a request arrive before its response.
    assert_eq!(
        ear.logs(),
        [
            json!({"level": "info", "data": "imported 40 rows"}),
            json!({"level": "warning", "logger": "ops.import", "data": {"skipped": 2}}),
        ]
    );
    // Another session has a level of its own.
    let other = Ear::default();
    let second = session(&mcp, other.clone()).await;
    import_call(&second, None).await;
    assert!(other.logs().is_empty());
    client.cancel().await.unwrap();
    second.cancel().await.unwrap();
}

#[tokio::test]
async fn a_stateless_request_hears_log_messages_from_the_level_in_its_meta() {
    let mcp = mcp();
    let ear = Ear::default();
    let client = stateless(&mcp, ear.clone());
    assert_eq!(
        import_call(&client, None).await,
        json!({"enabled": [false, false]})
    );
    assert!(ear.logs().is_empty());
    assert_eq!(
        import_call(&client, Some(LoggingLevel::Warning)).await,
        json!({"enabled": [false, true]})
    );
    assert_eq!(
        ear.logs(),
        [json!({"level": "warning", "logger": "ops.import", "data": {"skipped": 2}})]
    );
    // There is no session whose level could be set.
    match within(client.set_level(SetLevelRequestParams::new(LoggingLevel::Debug))).await {
        Err(ServiceError::McpError(error)) => assert_eq!(error.code, ErrorCode::METHOD_NOT_FOUND),
        other => panic!("expected method not found, got {other:?}"),
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn subscribed_sessions_hear_of_the_mutations_that_invalidate_a_resource() {
    let mcp = mcp();
    let (ann, bob) = (Ear::default(), Ear::default());
    let ann_client = session(&mcp, ann.clone()).await;
    let bob_client = session(&mcp, bob.clone()).await;
    assert_eq!(
        ann_client
            .peer_info()
            .unwrap()
            .capabilities
            .resources
            .as_ref()
            .unwrap()
            .subscribe,
        Some(true)
    );
    for uri in ["billing://invoices/INV-1", "billing://invoices/INV-2"] {
        within(ann_client.subscribe(SubscribeRequestParams::new(uri)))
            .await
            .expect("subscribed");
    }
    within(bob_client.subscribe(SubscribeRequestParams::new("billing://invoices/INV-1")))
        .await
        .expect("subscribed");
    within(bob_client.unsubscribe(UnsubscribeRequestParams::new("billing://invoices/INV-1")))
        .await
        .expect("unsubscribed");
    // An unknown resource cannot be subscribed to.
    match within(ann_client.subscribe(SubscribeRequestParams::new("billing://nothing"))).await {
        Err(ServiceError::McpError(error)) => {
            assert_eq!(error.code, ErrorCode::RESOURCE_NOT_FOUND)
        }
        other => panic!("expected resource not found, got {other:?}"),
    }
    // `billing.void_invoice` invalidates `billing.*`, the invoice resource included; it names
    // the invoice (`id`, the URI template's parameter), so only INV-1's subscribers hear of it.
    let mut void = CallToolRequestParams::new("billing_void_invoice");
    void.arguments = json!({"id": "INV-1"}).as_object().cloned();
    let result = within(bob_client.call_tool(void)).await.expect("voided");
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert_eq!(ann.updates(1).await, ["billing://invoices/INV-1"]);
    assert!(bob.updates(0).await.is_empty(), "bob unsubscribed");
    // Voiding INV-2 tells of INV-2.
    let mut void = CallToolRequestParams::new("billing_void_invoice");
    void.arguments = json!({"id": "INV-2"}).as_object().cloned();
    within(bob_client.call_tool(void)).await.expect("voided");
    let mut heard = ann.updates(2).await;
    heard.sort();
    assert_eq!(
        heard,
        ["billing://invoices/INV-1", "billing://invoices/INV-2"]
    );
    // A query invalidates nothing.
    let mut get = CallToolRequestParams::new("billing_get_invoice");
    get.arguments = json!({"id": "INV-2"}).as_object().cloned();
    within(ann_client.call_tool(get)).await.expect("read");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(ann.updates(2).await.len(), 2);
    ann_client.cancel().await.unwrap();
    bob_client.cancel().await.unwrap();

    // A stateless client has no session to subscribe with, and discovery says so.
    let client = stateless(&mcp, Ear::default());
    match within(client.subscribe(SubscribeRequestParams::new("billing://invoices/INV-1"))).await {
        Err(ServiceError::McpError(error)) => assert_eq!(error.code, ErrorCode::METHOD_NOT_FOUND),
        other => panic!("expected method not found, got {other:?}"),
    }
    let discovered = within(client.discover(RequestMetaObject::default()))
        .await
        .expect("discovered");
    assert_eq!(
        discovered
            .capabilities
            .resources
            .as_ref()
            .unwrap()
            .subscribe,
        None
    );
    assert!(discovered.capabilities.logging.is_some());
    client.cancel().await.unwrap();
}

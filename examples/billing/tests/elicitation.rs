//! Voiding a large invoice asks the user to confirm, in both protocol eras, through rmcp's
//! client in-process: accepted, it is voided and audited; declined, nothing changes and nothing
//! is audited as a change.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use billing::Store;
use fusion::Exposition;
use fusion::serde_json::{Value, json};
use fusion::serve::Mcp;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, ElicitationCapability, InitializeResult, ProtocolVersion,
};
use rmcp::service::{RequestContext, RunningService, serve_directly};
use rmcp::{ClientHandler, ErrorData, RoleClient, RoleServer, ServiceExt};

#[derive(Clone)]
struct User {
    answer: ElicitationAction,
    asked: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for User {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::default());
        info.capabilities = capabilities;
        info
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.asked.lock().unwrap().push(message);
        }
        let mut result = ElicitResult::new(self.answer.clone());
        if self.answer == ElicitationAction::Accept {
            result.content = Some(json!({ "confirm": true }));
        }
        Ok(result)
    }
}

async fn connect(era: &str, mcp: &Mcp, user: User) -> RunningService<RoleClient, User> {
    let (client_io, server_io) = tokio::io::duplex(256 * 1024);
    if era == "2025-11-25" {
        let handler = mcp.handler();
        tokio::spawn(async move {
            let running = handler.serve(server_io).await.expect("server handshake");
            let _ = running.waiting().await;
        });
        return user.serve(client_io).await.expect("client handshake");
    }
    let mut client_info = user.get_info();
    client_info.protocol_version = ProtocolVersion::V_2026_07_28;
    let mut server_info = InitializeResult::default();
    server_info.protocol_version = ProtocolVersion::V_2026_07_28;
    let running =
        serve_directly::<RoleServer, _, _, _, _>(mcp.handler(), server_io, Some(client_info));
    tokio::spawn(async move {
        let _ = running.waiting().await;
    });
    serve_directly::<RoleClient, _, _, _, _>(user, client_io, Some(server_info.into()))
}

async fn call(
    client: &RunningService<RoleClient, User>,
    name: &str,
    arguments: Value,
) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("an object")
    };
    tokio::time::timeout(
        Duration::from_secs(30),
        client.call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)),
    )
    .await
    .expect("in time")
    .expect("answered")
}

fn data_of(result: &CallToolResult) -> &Value {
    &result.structured_content.as_ref().expect("an envelope")["data"]
}

fn code(result: &CallToolResult) -> Option<&str> {
    result.structured_content.as_ref()?["error"]["code"].as_str()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voiding_a_large_invoice_asks_and_only_an_accepted_answer_voids_and_audits() {
    for era in ["2025-11-25", "2026-07-28"] {
        for answer in [ElicitationAction::Accept, ElicitationAction::Decline] {
            let data = tempfile::tempdir().expect("a data directory");
            let store = Arc::new(Store::open(data.path()).expect("store"));
            let server = billing::server(Arc::clone(&store), Exposition::Flat).expect("server");
            let mcp = Mcp::new(server).context(|_request, call| {
                call.extensions_mut().insert(billing::local_principal());
            });
            let user = User {
                answer: answer.clone(),
                asked: Arc::default(),
            };
            let client = connect(era, &mcp, user.clone()).await;
            // A small invoice is voided without a question.
            let small = call(&client, "billing_void_invoice", json!({ "id": "INV-3" })).await;
            assert_eq!(code(&small), None, "{era}: {small:?}");
            assert!(user.asked.lock().unwrap().is_empty(), "{era}");
            let created = call(
                &client,
                "billing_create_invoice",
                json!({ "customer_id": "C-1", "total_cents": 250_000 }),
            )
            .await;
            let id = data_of(&created)["id"].as_str().expect("an id").to_owned();
            let voided = call(&client, "billing_void_invoice", json!({ "id": id })).await;
            let asked = user.asked.lock().unwrap().clone();
            assert_eq!(asked.len(), 1, "{era}");
            assert!(
                asked[0].contains(&id) && asked[0].contains("$2500.00"),
                "{asked:?}"
            );
            let after = call(&client, "billing_get_invoice", json!({ "id": id })).await;
            let status = data_of(&after)["status"].as_str().unwrap().to_owned();
            if answer == ElicitationAction::Accept {
                assert_eq!(code(&voided), None, "{era}: {voided:?}");
                assert_eq!(status, "voided", "{era}");
                // Voiding it again changes nothing: the user is not asked about it.
                let again = call(&client, "billing_void_invoice", json!({ "id": id })).await;
                assert_eq!(code(&again), Some("AlreadyVoided"), "{era}: {again:?}");
                assert_eq!(user.asked.lock().unwrap().len(), 1, "{era}");
            } else {
                assert_eq!(code(&voided), Some("VoidNotConfirmed"), "{era}: {voided:?}");
                assert_ne!(status, "voided", "{era}");
            }
            client.cancel().await.expect("client stops");
            drop(mcp);
            drop(store);
            let database = rusqlite::Connection::open(data.path().join("billing.sqlite3")).unwrap();
            let voids: i64 = database
                .query_row(
                    "SELECT COUNT(*) FROM audit_events WHERE action = 'billing.void_invoice'",
                    [],
                    |row| row.get(0),
                )
                .unwrap();
            // INV-3, and the large one only when accepted.
            let expected = if answer == ElicitationAction::Accept {
                2
            } else {
                1
            };
            assert_eq!(voids, expected, "{era} {answer:?}");
        }
    }
}

//! UI blocks are built only for a client that draws them (issue 22, item 4): a presenter's
//! `ui` function is not even called for a client that did not declare the UI extension, over
//! a real rmcp client and server, and in the tester.

use std::sync::atomic::{AtomicUsize, Ordering};

use fusion::envelope::UI_EXTENSION;
use fusion::serve::Mcp;
use fusion::testing::Tester;
use fusion::{Presented, ServerBuilder, ToolError, UiBlock, model, presenter, tool};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig};
use serde_json::json;

/// A ticket.
#[model]
#[derive(Debug)]
pub struct Ticket {
    /// Its id.
    #[cast("Ticket id, such as T-7")]
    pub id: String,
}

/// How many times the presenter built its UI blocks.
static BUILT: AtomicUsize = AtomicUsize::new(0);

fn ticket_ui(shown: Presented<'_, TicketRowItem<'_>>) -> Vec<UiBlock> {
    BUILT.fetch_add(1, Ordering::SeqCst);
    vec![UiBlock::markdown(format!(
        "**{} ticket(s)**",
        shown.items().len()
    ))]
}

/// Tickets, with a summary for clients that draw it.
#[presenter(Ticket, fields(id), ui = ticket_ui, ui_kinds = ["markdown"])]
#[derive(Debug)]
pub struct TicketRow;

/// Lists tickets.
#[tool(query, name = "desk.list_tickets", returns = TicketRow)]
async fn list_tickets() -> Result<Vec<Ticket>, ToolError> {
    Ok(vec![
        Ticket { id: "T-1".into() },
        Ticket { id: "T-2".into() },
    ])
}

fn server() -> fusion::Server {
    ServerBuilder::new("desk", "1.0.0")
        .tool::<list_tickets>()
        .build()
        .expect("the desk builds")
}

/// Calls `desk_list_tickets` as an rmcp client declaring `capabilities`; returns its text
/// blocks.
async fn list_as(capabilities: ClientCapabilities) -> Vec<String> {
    let mcp = Mcp::new(server());
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    let handler = mcp.handler();
    let server = tokio::spawn(async move {
        let running = handler.serve(server_io).await.expect("server handshake");
        let _ = running.waiting().await;
    });
    let mut info = ClientConfig::default();
    info.capabilities = capabilities;
    let client = info.serve(client_io).await.expect("client handshake");
    let result = client
        .call_tool(CallToolRequestParams::new("desk_list_tickets"))
        .await
        .expect("answered");
    client.cancel().await.expect("the client stops");
    server.await.expect("server task");
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.clone()))
        .collect()
}

// One test: the counter is the process's.
#[tokio::test]
async fn ui_blocks_are_built_only_for_a_client_that_draws_them() {
    let plain = list_as(ClientCapabilities::default()).await;
    assert_eq!(BUILT.load(Ordering::SeqCst), 0, "built for nobody");
    assert!(
        !plain.iter().any(|text| text.contains("ticket(s)")),
        "{plain:?}"
    );
    assert!(
        plain[0].contains("T-1") && plain[0].contains("T-2"),
        "{plain:?}"
    );

    let mut drawing = ClientCapabilities::default();
    drawing.extensions = Some([(UI_EXTENSION.to_owned(), Default::default())].into());
    let drawn = list_as(drawing).await;
    assert_eq!(BUILT.load(Ordering::SeqCst), 1);
    assert!(
        drawn.iter().any(|text| text.contains("**2 ticket(s)**")),
        "{drawn:?}"
    );

    // The tester's client draws none unless told to.
    let tester = Tester::new(server());
    let answer = tester.call("desk.list_tickets", json!({})).await;
    assert!(answer.ui_blocks().is_empty());
    assert_eq!(BUILT.load(Ordering::SeqCst), 1);
    let drawn = Tester::new(server())
        .rendering_ui()
        .call("desk.list_tickets", json!({}))
        .await;
    assert_eq!(drawn.ui_blocks().len(), 1);
    assert_eq!(BUILT.load(Ordering::SeqCst), 2);
    // A call made in-process, where no client said, keeps them.
    let server = server();
    let direct = server
        .call_tool("desk_list_tickets", None, server.new_context())
        .await
        .expect("a tool");
    assert_eq!(BUILT.load(Ordering::SeqCst), 3);
    assert!(!direct.is_error());
}

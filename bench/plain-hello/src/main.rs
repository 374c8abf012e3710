//! `examples/hello` without Fusion: the same notes, tools and answers written with plain rmcp
//! the way its documentation teaches (`#[tool_router]`, `#[tool]`, `Parameters`, `Json`), for
//! `bench/hello.sh` to compare with. `plain-hello` serves MCP over stdio (rmcp's
//! `stdio_pipes()`, which its docs recommend when both streams are pipes); `plain-hello --http
//! 127.0.0.1:8080` serves Streamable HTTP on `/mcp`. Ctrl-C stops it.
//!
//! The author of a note is kept out of the answers by hand: a view struct with the two fields an
//! agent may see, filled by copying them.

use std::sync::{Arc, Mutex};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A note, with the author an agent never sees.
#[derive(Debug, Clone)]
struct Note {
    id: String,
    text: String,
    // Kept, like hello's, and never sent.
    #[allow(dead_code)]
    author: String,
}

/// What an agent sees of a note.
#[derive(Debug, Serialize, JsonSchema)]
struct NoteView {
    /// Note id, such as N-1
    id: String,
    /// What the note says
    text: String,
}

impl From<&Note> for NoteView {
    fn from(note: &Note) -> Self {
        NoteView {
            id: note.id.clone(),
            text: note.text.clone(),
        }
    }
}

/// Notes, as an object (rmcp sends structured content only for objects).
#[derive(Debug, Serialize, JsonSchema)]
struct NoteList {
    notes: Vec<NoteView>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct ListArgs {
    /// Only the notes that contain this word.
    containing: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct AddArgs {
    /// What the note says.
    text: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct GetArgs {
    /// Note id, such as N-1.
    id: String,
}

#[derive(Debug, Clone)]
struct Hello {
    notes: Arc<Mutex<Vec<Note>>>,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Hello {
    fn new() -> Self {
        Hello {
            notes: Arc::default(),
            tool_router: Self::tool_router(),
        }
    }

    /// Lists the notes, or those that contain a word.
    #[tool(name = "notes_list", annotations(read_only_hint = true))]
    fn list(&self, Parameters(args): Parameters<ListArgs>) -> Json<NoteList> {
        let notes = self
            .notes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Json(NoteList {
            notes: notes
                .iter()
                .filter(|note| {
                    args.containing
                        .as_ref()
                        .is_none_or(|word| note.text.contains(word.as_str()))
                })
                .map(NoteView::from)
                .collect(),
        })
    }

    /// Reads one note.
    #[tool(name = "notes_get", annotations(read_only_hint = true))]
    fn get(&self, Parameters(args): Parameters<GetArgs>) -> Result<Json<NoteView>, String> {
        let notes = self
            .notes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        notes
            .iter()
            .find(|note| note.id == args.id)
            .map(|note| Json(NoteView::from(note)))
            .ok_or_else(|| format!("No note has the id {}.", args.id))
    }

    /// Adds a note, written by the user running the server.
    #[tool(name = "notes_add", annotations(destructive_hint = false))]
    fn add(&self, Parameters(args): Parameters<AddArgs>) -> Result<Json<NoteView>, String> {
        if args.text.trim().is_empty() {
            return Err("A note needs some text.".into());
        }
        let mut notes = self
            .notes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let note = Note {
            id: format!("N-{}", notes.len() + 1),
            text: args.text,
            author: std::env::var("USER").unwrap_or_else(|_| "local".into()),
        };
        let view = NoteView::from(&note);
        notes.push(note);
        Ok(Json(view))
    }
}

// The router built once and kept, as rmcp's docs show for a router stored in a field (the
// default, `Self::tool_router()`, would build it again, schemas included, for every call).
#[tool_handler(router = self.tool_router)]
impl ServerHandler for Hello {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "plain-hello",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions("Notes kept in memory: list them, read one, add one.")
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let hello = Hello::new();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {
            let service = hello.serve(rmcp::transport::stdio_pipes()).await?;
            service.waiting().await?;
        }
        [flag, address] if flag == "--http" => {
            let listener = tokio::net::TcpListener::bind(address.as_str()).await?;
            let bound = listener.local_addr()?;
            let service = StreamableHttpService::new(
                move || Ok(hello.clone()),
                Arc::new(LocalSessionManager::default()),
                StreamableHttpServerConfig::default()
                    .with_allowed_hosts(["localhost", "127.0.0.1"])
                    .with_json_response(true),
            );
            let router = axum::Router::new().route_service("/mcp", service);
            eprintln!("plain-hello: listening on http://{bound}/mcp");
            // TCP_NODELAY, as Fusion sets by default: without it a session's SSE answers wait
            // for the client's delayed ACK (40 ms a call).
            let listener =
                axum::serve::ListenerExt::tap_io(listener, |stream: &mut tokio::net::TcpStream| {
                    let _ = stream.set_nodelay(true);
                });
            axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = tokio::signal::ctrl_c().await;
                })
                .await?;
        }
        _ => return Err("usage: plain-hello [--http ADDR]".into()),
    }
    Ok(())
}

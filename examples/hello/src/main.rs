//! The smallest honest Fusion connector: notes kept in memory, each with an author the agent
//! never sees. `cargo run -p hello` serves MCP over stdio; `cargo run -p hello -- --http
//! 127.0.0.1:8080` serves Streamable HTTP on `/mcp`. Ctrl-C or SIGTERM stops it gracefully.

use std::sync::{Arc, Mutex};

use fusion::serve::{HttpOptions, Mcp};
use fusion::{Hidden, ServerBuilder, State, ToolError, model, presenter, tool};

/// A note.
#[model]
struct Note {
    #[cast("Note id, such as N-1")]
    id: String,
    #[cast("What the note says")]
    text: String,
    /// Who wrote it: kept by the server, never sent to an agent.
    #[hidden]
    author: Hidden<String>,
}

/// What an agent sees of a note: its id and text, never its author.
#[presenter(Note, fields(id, text), rules = ["Quote notes verbatim."])]
struct NoteView;

/// The store: notes in memory, gone when the process stops. Each note is behind an `Arc`, so a
/// tool hands it to its presenter without copying it.
#[derive(Default)]
struct Notes(Mutex<Vec<Arc<Note>>>);

impl Notes {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Note>>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Lists the notes, or those that contain a word.
#[tool(query, name = "notes.list", returns = NoteView)]
async fn list_notes(
    notes: State<Notes>,
    containing: Option<String>,
) -> Result<Vec<Arc<Note>>, ToolError> {
    Ok(notes
        .lock()
        .iter()
        .filter(|note| {
            containing
                .as_ref()
                .is_none_or(|word| note.text.contains(word.as_str()))
        })
        .cloned()
        .collect())
}

/// Reads one note.
#[tool(query, name = "notes.get", returns = NoteView)]
async fn get_note(notes: State<Notes>, id: String) -> Result<Arc<Note>, ToolError> {
    let found = notes.lock().iter().find(|note| note.id == id).cloned();
    found.ok_or_else(|| {
        ToolError::new("NO_SUCH_NOTE", format!("No note has the id {id}."))
            .with_recovery("Call `notes.list` to see the notes and their ids.")
    })
}

/// Adds a note, written by the user running the server.
#[tool(mutation, name = "notes.add", returns = NoteView, destructive = false)]
async fn add_note(notes: State<Notes>, text: String) -> Result<Arc<Note>, ToolError> {
    if text.trim().is_empty() {
        return Err(ToolError::new("EMPTY_NOTE", "A note needs some text.")
            .with_recovery("Call `notes.add` again with the note's text."));
    }
    let mut notes = notes.lock();
    let note = Arc::new(Note {
        id: format!("N-{}", notes.len() + 1),
        text,
        author: Hidden::new(std::env::var("USER").unwrap_or_else(|_| "local".into())),
    });
    notes.push(note.clone());
    Ok(note)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    fusion::serve::log_to_stderr();
    let server = ServerBuilder::new("hello", env!("CARGO_PKG_VERSION"))
        .instructions("Notes kept in memory: list them, read one, add one.")
        .state(Notes::default())
        .tool::<list_notes>()
        .tool::<get_note>()
        .tool::<add_note>()
        .build()?;
    let mcp = Mcp::new(server);
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => mcp.serve_stdio_until_signal().await?,
        [flag, address] if flag == "--http" => {
            let listener = tokio::net::TcpListener::bind(address.as_str()).await?;
            eprintln!("hello: listening on http://{}/mcp", listener.local_addr()?);
            mcp.serve_http_until_signal(listener, HttpOptions::default())
                .await?;
        }
        _ => return Err("usage: hello [--http ADDR]".into()),
    }
    Ok(())
}

//! The smallest honest Fusion connector: notes kept in memory, each with an author the agent
//! never sees. `cargo run -p hello` serves MCP over stdio; `cargo run -p hello -- --http
//! 127.0.0.1:8080` serves Streamable HTTP on `/mcp`. Ctrl-C or SIGTERM stops it gracefully.

use std::sync::Mutex;

use fusion::serve::{HttpOptions, Mcp};
use fusion::{Hidden, ServerBuilder, State, ToolError, model, presenter, tool};

/// A note.
#[model]
#[derive(Clone)]
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

/// The store: notes in memory, gone when the process stops.
#[derive(Default)]
struct Notes(Mutex<Vec<Note>>);

/// Lists the notes, or those that contain a word.
#[tool(query, name = "notes.list", returns = NoteView)]
async fn list_notes(
    notes: State<Notes>,
    containing: Option<String>,
) -> Result<Vec<Note>, ToolError> {
    let notes = notes
        .0
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    Ok(notes
        .iter()
        .filter(|note| {
            containing
                .as_ref()
                .is_none_or(|word| note.text.contains(word.as_str()))
        })
        .cloned()
        .collect())
}

/// Adds a note, written by the user running the server.
#[tool(mutation, name = "notes.add", returns = NoteView, destructive = false)]
async fn add_note(notes: State<Notes>, text: String) -> Result<Note, ToolError> {
    if text.trim().is_empty() {
        return Err(ToolError::new("EMPTY_NOTE", "A note needs some text.")
            .with_recovery("Call notes.add again with the note's text."));
    }
    let mut notes = notes
        .0
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let note = Note {
        id: format!("N-{}", notes.len() + 1),
        text,
        author: Hidden::new(std::env::var("USER").unwrap_or_else(|_| "local".into())),
    };
    notes.push(note.clone());
    Ok(note)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    fusion::serve::log_to_stderr();
    let server = ServerBuilder::new("hello", env!("CARGO_PKG_VERSION"))
        .instructions("Notes kept in memory: list them, add one.")
        .state(Notes::default())
        .tool::<list_notes>()
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

//! The __NAME__ connector: notes kept in memory, one list per tenant, in front of AI agents.
//!
//! Read top to bottom: the model says what each field means and which never leave or enter;
//! the presenters say what an agent sees; the tools are plain `async fn`s; [`builder`] puts
//! them together. Replace the in-memory [`Notes`] with your own store.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use fusion::{
    CallContext, Create, Filter, Hidden, Page, Principal, Provided, Router, Server, ServerBuilder,
    State, ToolError, model, presenter, tool,
};

/// A note as stored. It reaches an agent only through a presenter.
#[model(fillable(create = [title, body], filter = [done]))]
#[derive(Clone)]
pub struct Note {
    /// Primary key, `N-{n}`.
    #[cast("Note id, such as N-1")]
    pub id: String,
    /// A short title.
    #[cast("The note's title")]
    pub title: String,
    /// The text.
    #[cast("The note's text")]
    pub body: String,
    /// Whether it is done.
    #[cast("true once the note is done")]
    pub done: bool,
    /// The tenant that owns the note: from the caller's credential, never from an agent.
    #[guarded]
    #[hidden]
    pub tenant: Hidden<String>,
    /// A secret link token: never shown to an agent.
    #[hidden]
    pub share_token: Hidden<String>,
}

/// One note.
#[presenter(Note, fields(id, title, body, done))]
#[derive(Debug)]
pub struct NoteView;

/// Notes in a list: at most 50 reach the agent.
#[presenter(Note, fields(id, title, done), limit = 50)]
#[derive(Debug)]
pub struct NoteList;

/// The notes of every tenant, in memory.
#[derive(Debug, Clone, Default)]
pub struct Notes {
    by_tenant: Arc<Mutex<BTreeMap<String, Vec<Note>>>>,
}

impl Notes {
    fn with<R>(&self, tenant: &str, f: impl FnOnce(&mut Vec<Note>) -> R) -> R {
        let mut all = self.by_tenant.lock().unwrap_or_else(|poison| poison.into_inner());
        f(all.entry(tenant.to_owned()).or_default())
    }

    /// Adds a note for `tenant`; its id and secret token are made here.
    pub fn add(&self, tenant: &str, title: &str, body: &str) -> Note {
        self.with(tenant, |notes| {
            let number = notes.len() + 1;
            let note = Note {
                id: format!("N-{number}"),
                title: title.to_owned(),
                body: body.to_owned(),
                done: false,
                tenant: Hidden::new(tenant.to_owned()),
                share_token: Hidden::new(format!("share_{tenant}_{number}_secret")),
            };
            notes.push(note.clone());
            note
        })
    }
}

/// The tenant a call acts for: from the verified principal, never from an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant(pub String);

impl Provided for Tenant {}

/// The caller's tenant; a call without one is refused.
pub fn tenant_of(call: &CallContext) -> Result<Tenant, ToolError> {
    call.principal()
        .and_then(|principal| principal.tenant.clone())
        .map(Tenant)
        .ok_or_else(|| ToolError::unauthorized("The caller's credential names no tenant."))
}

/// The principal of a caller acting for `tenant`.
pub fn principal_of(tenant: &str) -> Principal {
    Principal::new(format!("tenant:{tenant}")).with_tenant(tenant)
}

/// Gets one note by its id (`__IDENT__.list_notes` finds ids).
#[tool(query, name = "__IDENT__.get_note", returns = NoteView, title = "Get note")]
pub async fn get_note(
    notes: State<Notes>,
    tenant: Tenant,
    /// The note id, such as N-1.
    #[schemars(length(max = 32))]
    id: String,
) -> Result<Note, ToolError> {
    notes
        .with(&tenant.0, |notes| notes.iter().find(|note| note.id == id).cloned())
        .ok_or_else(|| {
            ToolError::not_found(format!("Note {} does not exist.", fusion::echo(&id, 32)))
                .with_recovery("Call `__IDENT__.list_notes` to find note ids.")
        })
}

/// Lists notes, oldest first, optionally only those done (or not).
#[tool(query, name = "__IDENT__.list_notes", returns = NoteList, title = "List notes")]
pub async fn list_notes(
    notes: State<Notes>,
    tenant: Tenant,
    filter: Filter<Note>,
    /// How many notes to return (default 20).
    limit: Option<u32>,
    /// How many matching notes to skip first (default 0).
    offset: Option<u32>,
) -> Result<Page<Note>, ToolError> {
    let (limit, offset) = (limit.unwrap_or(20) as usize, offset.unwrap_or(0) as usize);
    let (page, total) = notes.with(&tenant.0, |notes| {
        let matching: Vec<&Note> = notes
            .iter()
            .filter(|note| filter.done.is_none_or(|done| note.done == done))
            .collect();
        let page = matching.iter().skip(offset).take(limit).map(|note| (*note).clone());
        (page.collect(), matching.len() as u64)
    });
    Ok(Page::new(page).with_total(total).at_offset(offset as u64))
}

/// Creates a note.
#[tool(mutation, name = "__IDENT__.create_note", returns = NoteView, destructive = false,
       invalidates = ["__IDENT__.list_notes"], title = "Create note")]
pub async fn create_note(
    notes: State<Notes>,
    tenant: Tenant,
    note: Create<Note>,
) -> Result<Note, ToolError> {
    Ok(notes.add(&tenant.0, &note.title, &note.body))
}

/// The connector's tools over `notes`.
pub fn builder(notes: Notes) -> ServerBuilder {
    ServerBuilder::new("__NAME__", env!("CARGO_PKG_VERSION"))
        .instructions("Notes of one tenant. Find notes with `__IDENT__.list_notes` first.")
        .state(notes)
        .provide(tenant_of)
        .router(
            Router::new("__IDENT__")
                .tool::<get_note>()
                .tool::<list_notes>()
                .tool::<create_note>(),
        )
}

/// The server over an empty store, with one welcome note for the tenant `local`.
pub async fn server_from_env() -> Result<Server, Box<dyn std::error::Error + Send + Sync>> {
    let notes = Notes::default();
    notes.add("local", "Welcome", "This note lives in memory.");
    Ok(builder(notes).build()?)
}

//! What a call costs Fusion, counted, not timed (BENCHMARKS.md, "Kept from regressing"): heap
//! allocations per call through the whole in-process pipeline (arguments, guards, handler,
//! presenter, envelope, text blocks), by a counting global allocator of this binary's own.
//! Counts do not depend on the machine's load, so the targets hold on a busy CI machine.
//!
//! The connector is examples/hello's: notes with a hidden author, presented as id and text. A
//! get that returns the stored `Arc<Note>` allocates less than one that returns a copy of the
//! note (its strings, hidden ones included): no forced copies.
//!
//! `cargo test -p fusion --test costs -- --nocapture` prints the counts.

use std::alloc::System;
use std::sync::Arc;

use fusion::testing::Tester;
use fusion::{Hidden, ServerBuilder, State, ToolError, model, presenter, tool};
use serde_json::json;
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The tests of this binary run one at a time: the allocator counts the whole process.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A note.
#[model]
#[derive(Clone)]
struct Note {
    #[cast("Note id, such as N-1")]
    id: String,
    #[cast("What the note says")]
    text: String,
    /// Who wrote it: never sent to an agent.
    #[hidden]
    author: Hidden<String>,
}

/// What an agent sees of a note.
#[presenter(Note, fields(id, text), rules = ["Quote notes verbatim."])]
struct NoteView;

/// The store: shared notes.
struct Notes(Vec<Arc<Note>>);

/// Reads one note, returning the store's own (shared).
#[tool(query, name = "notes.get", returns = NoteView)]
async fn get_note(notes: State<Notes>, id: String) -> Result<Arc<Note>, ToolError> {
    find(&notes, &id).cloned()
}

/// Reads one note, returning a copy of it.
#[tool(query, name = "notes.get_copy", returns = NoteView)]
async fn get_copy(notes: State<Notes>, id: String) -> Result<Note, ToolError> {
    find(&notes, &id).map(|note| Note::clone(note))
}

/// Lists the notes that contain a word, shared.
#[tool(query, name = "notes.list", returns = NoteView)]
async fn list_notes(notes: State<Notes>, containing: String) -> Result<Vec<Arc<Note>>, ToolError> {
    Ok(notes
        .0
        .iter()
        .filter(|note| note.text.contains(containing.as_str()))
        .cloned()
        .collect())
}

fn find<'n>(notes: &'n Notes, id: &str) -> Result<&'n Arc<Note>, ToolError> {
    notes
        .0
        .iter()
        .find(|note| note.id == id)
        .ok_or_else(|| ToolError::new("NO_SUCH_NOTE", format!("No note has the id {id}.")))
}

fn tester() -> Tester {
    let notes = (1..=100)
        .map(|n| {
            Arc::new(Note {
                id: format!("N-{n}"),
                text: format!("note {n} tag{}", n % 10),
                author: Hidden::new(format!("author of note {n}, never on the wire")),
            })
        })
        .collect();
    Tester::new(
        ServerBuilder::new("hello", "1")
            .state(Notes(notes))
            .tool::<get_note>()
            .tool::<get_copy>()
            .tool::<list_notes>()
            .build()
            .expect("the server builds"),
    )
}

/// Allocations (and reallocations) per call of `key`, averaged over `CALLS` calls after a
/// warm-up, with the results dropped inside the measurement.
async fn allocations_per_call(tester: &Tester, key: &str, arguments: serde_json::Value) -> f64 {
    const CALLS: u32 = 200;
    for _ in 0..20 {
        assert!(!tester.call(key, arguments.clone()).await.is_error());
    }
    let arguments: Vec<_> = (0..CALLS).map(|_| arguments.clone()).collect();
    let before = GLOBAL.stats();
    for arguments in arguments {
        let result = tester.call(key, arguments).await;
        assert!(!result.is_error(), "{}", result.raw_text());
    }
    let after = GLOBAL.stats();
    let count =
        (after.allocations + after.reallocations) - (before.allocations + before.reallocations);
    count as f64 / f64::from(CALLS)
}

/// Targets (BENCHMARKS.md): allocations per call through the pipeline. Measured on
/// 2026-12-04 at 70 (get) and 272 (list of 10); the margin leaves room for small changes, not
/// for a copy of every record or a second serialization of the data.
const GET_ALLOCATIONS: f64 = 77.0;
const LIST_ALLOCATIONS: f64 = 300.0;

#[tokio::test(flavor = "current_thread")]
async fn a_get_and_a_list_stay_within_their_allocations_per_call() {
    let _one = ONE_AT_A_TIME.lock().await;
    let tester = tester();
    let get = allocations_per_call(&tester, "notes.get", json!({"id": "N-42"})).await;
    let list = allocations_per_call(&tester, "notes.list", json!({"containing": "tag3"})).await;
    println!("allocations per call: get {get:.1}, list of 10 {list:.1}");
    assert!(
        get <= GET_ALLOCATIONS,
        "a get allocates {get:.1} times, target {GET_ALLOCATIONS}"
    );
    assert!(
        list <= LIST_ALLOCATIONS,
        "a list allocates {list:.1} times, target {LIST_ALLOCATIONS}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_shared_model_is_presented_without_copying_it() {
    let _one = ONE_AT_A_TIME.lock().await;
    let tester = tester();
    let shared = allocations_per_call(&tester, "notes.get", json!({"id": "N-42"})).await;
    let copied = allocations_per_call(&tester, "notes.get_copy", json!({"id": "N-42"})).await;
    println!("allocations per get: shared {shared:.1}, copied {copied:.1}");
    // The copy's three strings (id, text and the hidden author) are the whole difference.
    assert!(
        copied - shared > 2.5,
        "a shared note saves its copy: {shared:.1} vs {copied:.1}"
    );
    let same = |key: &str| {
        let tester = &tester;
        let key = key.to_owned();
        async move {
            tester
                .call(&key, json!({"id": "N-42"}))
                .await
                .envelope()
                .clone()
        }
    };
    let (shared, copied) = (same("notes.get").await, same("notes.get_copy").await);
    assert_eq!(shared["data"], copied["data"]);
    assert_eq!(
        shared["data"],
        json!({"id": "N-42", "text": "note 42 tag2"})
    );
}

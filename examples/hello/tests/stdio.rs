//! hello as an agent's client runs it: its binary, spoken to over stdio by rmcp's client. The
//! author of a note never reaches the wire, and SIGTERM stops the server cleanly while its
//! client is still connected.

use std::process::Stdio;
use std::time::Duration;

use fusion::protocol::model::{CallToolRequestParams, CallToolResult, JsonObject};
use fusion::serde_json::{Value, json};
use rmcp::{Peer, RoleClient, ServiceExt};

/// The author every note of this run gets (hello reads it from `USER`).
const AUTHOR: &str = "author-7f3e-never-on-the-wire";

async fn call(client: &Peer<RoleClient>, tool: &str, arguments: Value) -> (CallToolResult, String) {
    let arguments: JsonObject = match arguments {
        Value::Object(object) => object,
        other => panic!("arguments are an object, not {other}"),
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
        .await
        .expect("the call is answered");
    // What went over the wire, as the client read it.
    let wire = fusion::serde_json::to_string(&result).expect("a result serializes");
    (result, wire)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notes_over_stdio_never_carry_their_author_and_sigterm_stops_the_server() {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_hello"))
        .env("USER", AUTHOR)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("hello starts");
    let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = tokio::time::timeout(Duration::from_secs(10), ().serve((stdout, stdin)))
        .await
        .expect("the handshake is prompt")
        .expect("the handshake succeeds");

    let mut tools: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools are listed")
        .into_iter()
        .map(|tool| tool.name.into_owned())
        .collect();
    tools.sort();
    assert_eq!(tools, ["notes_add", "notes_get", "notes_list"]);

    let (added, wire) = call(client.peer(), "notes_add", json!({"text": "buy milk"})).await;
    assert_eq!(added.is_error, Some(false), "{wire}");
    let envelope = added.structured_content.expect("an envelope");
    assert_eq!(envelope["data"], json!({"id": "N-1", "text": "buy milk"}));
    assert!(!wire.contains(AUTHOR), "the author leaked: {wire}");
    assert!(wire.contains("Quote notes verbatim."), "{wire}");

    // A get presents the stored note (shared, not copied) the same way.
    let (got, wire) = call(client.peer(), "notes_get", json!({"id": "N-1"})).await;
    assert_eq!(got.is_error, Some(false), "{wire}");
    let envelope = got.structured_content.expect("an envelope");
    assert_eq!(envelope["data"], json!({"id": "N-1", "text": "buy milk"}));
    assert!(!wire.contains(AUTHOR), "the author leaked: {wire}");
    let (missing, wire) = call(client.peer(), "notes_get", json!({"id": "N-9"})).await;
    assert_eq!(missing.is_error, Some(true), "{wire}");
    let error = &missing.structured_content.as_ref().unwrap()["error"];
    assert_eq!(error["code"], "NO_SUCH_NOTE");
    // The recovery, in the block the agent reads, names the tool as the agent calls it.
    assert!(
        text_of(&missing)
            .contains("<recovery>Call `notes_list` to see the notes and their ids.</recovery>"),
        "{wire}"
    );

    let (listed, wire) = call(client.peer(), "notes_list", json!({"containing": "milk"})).await;
    let envelope = listed.structured_content.expect("an envelope");
    assert_eq!(envelope["data"], json!([{"id": "N-1", "text": "buy milk"}]));
    assert!(!wire.contains(AUTHOR), "the author leaked: {wire}");

    let (empty, wire) = call(client.peer(), "notes_add", json!({"text": "  "})).await;
    assert_eq!(empty.is_error, Some(true), "{wire}");
    let error = &empty.structured_content.as_ref().unwrap()["error"];
    assert_eq!(error["code"], "EMPTY_NOTE");
    assert!(
        text_of(&empty)
            .contains("<recovery>Call `notes_add` again with the note's text.</recovery>"),
        "{wire}"
    );

    // SIGTERM with the client still connected: the server stops by itself, successfully.
    let pid = child.id().expect("hello is running").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("hello stops within the bound after SIGTERM")
        .expect("hello's status");
    assert!(status.success(), "hello exits 0 after SIGTERM: {status}");
    drop(client);
}

/// The text of a result's first block: the `<tool_error>` block of a failure.
fn text_of(result: &CallToolResult) -> &str {
    result.content[0]
        .as_text()
        .map_or("", |text| text.text.as_str())
}

//! The suite's fixtures of the tasks extension (SEP-2663): tools that run as tasks when the
//! client declared the extension.

use std::time::Duration;

use fusion::{Answer, Elicit, ServerBuilder, ToolError, tool};

pub(crate) fn register(builder: ServerBuilder) -> ServerBuilder {
    builder
        .tool::<greet>()
        .tool::<slow_compute>()
        .tool::<failing_job>()
        .tool::<protocol_error_job>()
        .tool::<confirm_delete>()
        .tool::<multi_input>()
}

/// Greets someone, at once (never a task).
#[tool(query, name = "greet")]
async fn greet(
    /// Who to greet.
    name: String,
) -> Result<String, ToolError> {
    Ok(format!("Hello, {name}!"))
}

/// Computes for `seconds` seconds, then answers with its label; a task when the client can
/// have one.
#[tool(query, name = "slow_compute", task = "optional")]
async fn slow_compute(
    /// How long to compute.
    seconds: u64,
    /// What to call the result.
    label: Option<String>,
) -> Result<String, ToolError> {
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let label = label.unwrap_or_else(|| "result".to_owned());
    Ok(format!("{label}: computed for {seconds}s"))
}

/// Fails after a second, the way a tool fails; only as a task.
#[tool(query, name = "failing_job", task = "required")]
async fn failing_job() -> Result<String, ToolError> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    Err(ToolError::conflict("The job failed."))
}

/// Falls over (a panic: an internal failure, not the tool's answer).
#[tool(query, name = "protocol_error_job", task = "optional")]
async fn protocol_error_job() -> Result<String, ToolError> {
    panic!("the job fell over")
}

/// Deletes a file once the user confirmed.
#[tool(mutation, name = "confirm_delete", task = "optional")]
async fn confirm_delete(
    ask: Elicit,
    /// The file to delete.
    filename: String,
) -> Result<String, ToolError> {
    Ok(if ask.confirm(format!("Delete {filename}?")).await? {
        format!("Deleted {filename}")
    } else {
        format!("Kept {filename}")
    })
}

/// An answer with a name and a confirmation.
#[fusion::data(deserialize, schema)]
#[derive(Debug)]
struct Confirmed {
    /// A name.
    name: String,
    /// Whether to go on.
    confirm: bool,
}

fn confirmed(answer: Answer<Confirmed>) -> String {
    match answer {
        Answer::Accepted(Confirmed { name, confirm }) => format!("{name} ({confirm})"),
        Answer::Declined | Answer::Cancelled => "no answer".to_owned(),
    }
}

/// Asks two questions at once.
#[tool(query, name = "multi_input", task = "optional")]
async fn multi_input(ask: Elicit) -> Result<String, ToolError> {
    let (first, second) = tokio::join!(
        ask.named("first").ask::<Confirmed>("First: your name?"),
        ask.named("second").ask::<Confirmed>("Second: your name?"),
    );
    Ok(format!(
        "first: {}; second: {}",
        confirmed(first?),
        confirmed(second?)
    ))
}

// A tool is a documented, non-generic `async fn` returning a `Result`, with plain parameter names.
use fusion::{ToolError, tool};

#[tool(query)]
async fn undocumented(id: String) -> Result<String, ToolError> {
    Ok(id)
}

/// Not async.
#[tool(query)]
fn blocking(id: String) -> Result<String, ToolError> {
    Ok(id)
}

/// Destructured.
#[tool(action)]
async fn destructured((a, b): (String, String)) -> Result<String, ToolError> {
    Ok(a + &b)
}

/// No verb.
#[tool(name = "billing.ping")]
async fn ping() -> Result<String, ToolError> {
    Ok("pong".into())
}

/// Query options that do not fit.
#[tool(query, invalidates = "billing.*", idempotent)]
async fn read(id: String) -> Result<String, ToolError> {
    Ok(id)
}

/// Mutation options that do not fit.
#[tool(mutation, cache = immutable)]
async fn write(id: String) -> Result<String, ToolError> {
    Ok(id)
}

fn main() {}

use fusion::{ToolError, tool};

/// A proxy tool has no body.
#[tool(query, http = "GET /status")]
pub async fn with_body() -> Result<(), ToolError> {
    Ok(())
}

/// A tool without a body must say which call it makes.
#[tool(query)]
pub async fn without_http() -> Result<(), ToolError>;

fn main() {}

// A timeout is a positive duration, a rate a positive number of calls per second, minute or hour.
use fusion::{ToolError, tool};

/// Never waits.
#[tool(query, name = "ops.zero", timeout = "0s")]
async fn zero() -> Result<bool, ToolError> {
    Ok(true)
}

/// Limited in words.
#[tool(query, name = "ops.wordy", rate_limit = "ten per second")]
async fn wordy() -> Result<bool, ToolError> {
    Ok(true)
}

/// Limited per fortnight.
#[tool(query, name = "ops.fortnight", timeout = "5 seconds", rate_limit = "3/fortnight")]
async fn fortnight() -> Result<bool, ToolError> {
    Ok(true)
}

fn main() {}

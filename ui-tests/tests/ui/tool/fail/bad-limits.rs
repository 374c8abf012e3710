// A timeout is a positive duration (a question's too), a rate a positive number of calls per
// second, minute or hour, a tenant's share a percent of the slots.
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

/// Never lets the user think.
#[tool(query, name = "ops.hasty", ask_timeout = "0s")]
async fn hasty() -> Result<bool, ToolError> {
    Ok(true)
}

/// Shares nothing.
#[tool(query, name = "ops.stingy", concurrency(max = 4, tenant_share = 0))]
async fn stingy() -> Result<bool, ToolError> {
    Ok(true)
}

/// Takes more than all.
#[tool(query, name = "ops.greedy", concurrency(max = 4, tenant_share = 150))]
async fn greedy() -> Result<bool, ToolError> {
    Ok(true)
}

fn main() {}

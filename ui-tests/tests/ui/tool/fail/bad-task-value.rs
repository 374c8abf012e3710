// `task` takes "optional" or "required": a misspelt value, or a bool as other SDKs write it,
// is refused on the value itself, naming the two.
use fusion::{ToolError, tool};

/// Exports the invoices.
#[tool(query, name = "billing.export", task = "background")]
async fn export() -> Result<bool, ToolError> {
    Ok(true)
}

/// Exports the payments.
#[tool(query, name = "billing.export_payments", task = true)]
async fn export_payments() -> Result<bool, ToolError> {
    Ok(true)
}

fn main() {}

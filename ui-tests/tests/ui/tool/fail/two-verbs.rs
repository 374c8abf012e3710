// A tool has exactly one verb.
use fusion::{ToolError, tool};

/// Voids an invoice.
#[tool(query, mutation, name = "billing.void_invoice")]
async fn void_invoice(id: String) -> Result<String, ToolError> {
    Ok(id)
}

fn main() {}

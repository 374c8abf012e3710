// A tool name is `namespace.action`: one dot at most.
use fusion::{ToolError, tool};

/// Gets an invoice.
#[tool(query, name = "acme.billing.get_invoice")]
async fn get_invoice(id: String) -> Result<String, ToolError> {
    Ok(id)
}

fn main() {}

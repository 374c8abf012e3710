// Invalidation globs are dot-segmented: `*` and `**` stand alone in a segment.
use fusion::{ToolError, tool};

/// Voids an invoice.
#[tool(mutation, name = "billing.void_invoice", invalidates = ["billing.*", "bill*.list", "billing..x"])]
async fn void_invoice(id: String) -> Result<String, ToolError> {
    Ok(id)
}

fn main() {}

// A `#[tool]` with a mistake still declares its tool type: registering it, or calling the
// function, reports nothing more, so the only errors are the user's own.
use fusion::{ServerBuilder, ToolError, tool};

/// Gets an invoice.
#[tool(query, name = "billing.get_invoice", cahce = immutable)]
async fn get_invoice(id: String) -> Result<String, ToolError> {
    Ok(id)
}

#[tool(mutation, name = "billing.void_invoice")]
async fn void_invoice(id: String) -> Result<String, ToolError> {
    get_invoice(id).await
}

fn main() {
    let _ = ServerBuilder::new("billing", "1.0.0")
        .tool::<get_invoice>()
        .tool::<void_invoice>();
}

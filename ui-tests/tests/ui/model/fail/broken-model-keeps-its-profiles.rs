// A `#[model]` with mistakes in its attribute still generates the profiles that can be read: a
// tool taking one, and its registration, report nothing, so the only errors are the user's own.
use fusion::{Create, ServerBuilder, ToolError, model, tool};

#[model(fillable(create = [id, total, "note"], updte = [total]))]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[cast("Total in cents")]
    pub total: i64,
}

/// Creates an invoice.
#[tool(mutation, name = "billing.create_invoice")]
async fn create_invoice(invoice: Create<Invoice>) -> Result<String, ToolError> {
    Ok(format!("{} for {}", invoice.id, invoice.total))
}

fn main() {
    let _ = ServerBuilder::new("billing", "1.0.0").tool::<create_invoice>();
}

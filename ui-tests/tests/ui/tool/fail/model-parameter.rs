// A model is never a tool parameter: an agent would set every field, guarded ones included.
use fusion::{ToolError, model, tool};

#[model(fillable(create = [id]))]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[guarded]
    #[hidden]
    pub tenant_id: fusion::Hidden<String>,
}

/// Stores an invoice.
#[tool(mutation, name = "billing.store_invoice")]
async fn store_invoice(invoice: Invoice) -> Result<bool, ToolError> {
    let _ = invoice;
    Ok(true)
}

fn main() {}

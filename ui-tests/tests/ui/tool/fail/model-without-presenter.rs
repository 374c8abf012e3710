// A tool cannot return a model without a presenter: there is no path on which a raw model is
// serialized.
use fusion::{ToolError, model, tool};

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[hidden]
    pub webhook_secret: fusion::Hidden<String>,
}

/// Gets an invoice.
#[tool(query, name = "billing.get_invoice")]
async fn get_invoice(id: String) -> Result<Invoice, ToolError> {
    Ok(Invoice { id, webhook_secret: "whsec_1".into() })
}

fn main() {}

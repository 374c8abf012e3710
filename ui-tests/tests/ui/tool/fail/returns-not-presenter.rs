// `returns =` names a presenter: a model reaches the agent only through one.
use fusion::{ToolError, model, tool};

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[hidden]
    pub webhook_secret: fusion::Hidden<String>,
}

/// Not a presenter: a plain struct that happens to sit next to the model.
pub struct InvoiceSummary;

/// Gets an invoice.
#[tool(query, name = "billing.get_invoice", returns = InvoiceSummary)]
async fn get_invoice(id: String) -> Result<Invoice, ToolError> {
    Ok(Invoice { id, webhook_secret: "whsec_1".into() })
}

fn main() {}

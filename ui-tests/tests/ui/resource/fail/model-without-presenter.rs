// A resource cannot return a model without a presenter: its contents leave only through one.
use fusion::{ToolError, model, resource};

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[hidden]
    pub webhook_secret: fusion::Hidden<String>,
}

/// One invoice.
#[resource(uri = "billing://invoices/{id}", name = "billing.invoice")]
async fn invoice(id: String) -> Result<Invoice, ToolError> {
    Ok(Invoice { id, webhook_secret: "whsec_1".into() })
}

fn main() {}

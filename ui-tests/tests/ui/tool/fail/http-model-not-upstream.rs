use fusion::{ToolError, model, presenter, tool};

/// Not declared `#[model(upstream)]`: it cannot be read from an upstream's answer.
#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
}

#[presenter(Invoice, fields(id))]
pub struct InvoiceView;

/// Reads one invoice.
#[tool(query, http = "GET /invoices/{id}", returns = InvoiceView)]
pub async fn get_invoice(id: String) -> Result<Invoice, ToolError>;

fn main() {}

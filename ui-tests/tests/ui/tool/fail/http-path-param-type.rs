use fusion::{ToolError, model, presenter, tool};

#[model(upstream)]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
}

#[presenter(Invoice, fields(id))]
pub struct InvoiceView;

/// An optional value cannot fill a path segment.
#[tool(query, http = "GET /invoices/{id}", returns = InvoiceView)]
pub async fn get_invoice(id: Option<String>) -> Result<Invoice, ToolError>;

fn main() {}

use fusion::{ToolError, model, presenter, tool};

#[model(upstream)]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
}

#[presenter(Invoice, fields(id))]
pub struct InvoiceView;

/// The route says `{invoice_id}`, the argument is `id`.
#[tool(query, http = "GET /invoices/{invoice_id}", returns = InvoiceView)]
pub async fn get_invoice(id: String) -> Result<Invoice, ToolError>;

fn main() {}

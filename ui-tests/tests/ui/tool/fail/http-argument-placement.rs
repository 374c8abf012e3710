use fusion::{ToolError, model, presenter, tool};

#[model(upstream)]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
}

#[presenter(Invoice, fields(id))]
pub struct InvoiceView;

/// A path parameter cannot also be sent in the query.
#[tool(query, http = "GET /invoices/{id}", returns = InvoiceView)]
pub async fn get_invoice(#[upstream(query)] id: String) -> Result<Invoice, ToolError>;

/// Headers never come from arguments.
#[tool(query, http = "GET /invoices", returns = InvoiceView)]
pub async fn list_invoices(#[upstream(header)] tenant: String) -> Result<Vec<Invoice>, ToolError>;

fn main() {}

use fusion::{ToolError, model, presenter, tool};

#[model(upstream)]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
}

#[presenter(Invoice, fields(id))]
pub struct InvoiceView;

/// A query string in the route.
#[tool(query, http = "GET /invoices/{id}?expand=lines", returns = InvoiceView)]
pub async fn with_query(id: String) -> Result<Invoice, ToolError>;

/// Two parameters in one segment: where one ends is anyone's guess.
#[tool(query, http = "GET /invoices/{id}-{line}", returns = InvoiceView)]
pub async fn two_in_a_segment(id: String, line: u32) -> Result<Invoice, ToolError>;

/// A method a route may not use.
#[tool(query, http = "TRACE /invoices", returns = InvoiceView)]
pub async fn bad_method() -> Result<Vec<Invoice>, ToolError>;

/// A dot segment.
#[tool(query, http = "GET /invoices/../admin", returns = InvoiceView)]
pub async fn dot_segment() -> Result<Vec<Invoice>, ToolError>;

fn main() {}

// Several mistakes in one file, across the three macros, are all reported in one run.
use fusion::{ToolError, model, presenter, tool};

#[model(fillable(create = [tenant_id, totl]))]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[cast("Total in cents")]
    pub total: i64,
    #[guarded]
    #[hidden]
    pub tenant_id: fusion::Hidden<String>,
}

#[presenter(Invoice, fields(id, tenant_id, totals), limit = 0)]
pub struct InvoiceView;

/// Voids an invoice.
#[tool(mutation, action, name = "a.b.c", invalidates = "billing.*x")]
async fn void_invoice(id: String) -> Result<String, ToolError> {
    Ok(id)
}

fn main() {}

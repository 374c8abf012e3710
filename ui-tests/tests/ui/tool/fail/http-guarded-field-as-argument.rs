use fusion::{Hidden, ToolError, model, presenter, tool};

#[model(upstream)]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[guarded]
    #[hidden]
    #[upstream(name = "tenantId")]
    pub tenant_id: Hidden<String>,
}

#[presenter(Invoice, fields(id))]
pub struct InvoiceView;

/// An agent would choose the tenant through the path.
#[tool(query, http = "GET /tenants/{tenant_id}/invoices/{id}", returns = InvoiceView)]
pub async fn by_path(tenant_id: String, id: String) -> Result<Invoice, ToolError>;

/// Or through the body, under the field's upstream name.
#[tool(mutation, http = "POST /invoices", returns = InvoiceView)]
pub async fn by_body(
    id: String,
    #[upstream(name = "tenantId")] owner: String,
) -> Result<Invoice, ToolError>;

fn main() {}

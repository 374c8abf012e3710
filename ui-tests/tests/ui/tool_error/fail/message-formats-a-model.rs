// A model formatted into an agent-facing message: refused, even though its `Debug` redacts.
use fusion::model;

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[hidden]
    pub webhook_secret: fusion::Hidden<String>,
}

#[derive(Debug, fusion::ToolError)]
pub enum BillingError {
    #[tool_error(code = "Conflict", message = "Conflicts with {0:?}.")]
    Conflict(Invoice),
}

fn main() {}

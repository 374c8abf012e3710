// A hidden value has no `Display`: it cannot be formatted into an error or a log line.
use fusion::{ToolError, model};

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[hidden]
    pub webhook_secret: fusion::Hidden<String>,
}

pub fn mismatch(invoice: &Invoice) -> ToolError {
    ToolError::conflict(format!("Token {} does not match.", invoice.webhook_secret))
}

fn main() {}

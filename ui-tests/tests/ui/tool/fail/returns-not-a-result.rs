// A tool returns `Result<T, E>`: anything else is reported once, on the return type.
use fusion::{model, tool};

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
}

/// Gets an invoice.
#[tool(query, name = "billing.get_invoice")]
async fn get_invoice(id: String) -> Invoice {
    Invoice { id }
}

/// Finds an invoice.
#[tool(query, name = "billing.find_invoice")]
async fn find_invoice(id: String) -> Option<Invoice> {
    Some(Invoice { id })
}

fn main() {}

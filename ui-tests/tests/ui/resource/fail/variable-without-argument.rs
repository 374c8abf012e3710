// Every variable of a URI template is an argument of the handler.
use fusion::{ToolError, resource};

/// One line of an invoice.
#[resource(uri = "billing://invoices/{id}/lines/{line}", name = "billing.invoice_line")]
async fn invoice_line(id: String) -> Result<String, ToolError> {
    Ok(id)
}

fn main() {}

// An argument that no URI template variable names could never be sent: only context values
// may be taken besides the variables.
use fusion::{State, ToolError, resource};

pub struct Db;

/// One invoice.
#[resource(uri = "billing://invoices/{id}", name = "billing.invoice")]
async fn invoice(db: State<Db>, id: String, currency: String) -> Result<String, ToolError> {
    let _ = db;
    Ok(format!("{id} in {currency}"))
}

fn main() {}

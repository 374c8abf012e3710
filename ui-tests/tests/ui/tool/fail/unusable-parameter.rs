// A parameter is an argument, a group of arguments, or taken from the call context; anything
// else is reported on the parameter's type.
use fusion::{ToolError, tool};

pub struct DatabaseHandle;

/// Gets an invoice.
#[tool(query, name = "billing.get_invoice")]
async fn get_invoice(db: DatabaseHandle, id: String) -> Result<String, ToolError> {
    let _ = db;
    Ok(id)
}

fn main() {}

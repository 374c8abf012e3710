// `returns =` names a presenter.
use fusion::{ToolError, tool};

pub struct NotAPresenter;

/// Gets an invoice.
#[tool(query, name = "billing.get_invoice", returns = NotAPresenter)]
async fn get_invoice(id: String) -> Result<String, ToolError> {
    Ok(id)
}

fn main() {}

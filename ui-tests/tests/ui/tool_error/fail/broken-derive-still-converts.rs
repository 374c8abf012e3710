// A `#[derive(ToolError)]` with mistakes still converts into `ToolError` (and from its `from`
// sources): `?` in handlers reports nothing, so the only errors are the user's own, and nothing
// pushes the user to implement `std::error::Error`, which would turn the domain error into
// INTERNAL_ERROR.
use fusion::{ServerBuilder, ToolError, tool};

#[derive(Debug, ToolError)]
pub enum BillingError {
    #[tool_error(code = "InvoiceNotFound", mesage = "No such invoice.")]
    NotFound,
    #[tool_error(interal, from)]
    Store(std::io::Error),
}

fn read(id: &str) -> Result<String, std::io::Error> {
    Ok(id.to_owned())
}

fn find(id: &str) -> Result<String, BillingError> {
    let invoice = read(id)?;
    if invoice.is_empty() {
        return Err(BillingError::NotFound);
    }
    Ok(invoice)
}

/// Gets an invoice.
#[tool(query, name = "billing.get_invoice")]
async fn get_invoice(id: String) -> Result<String, BillingError> {
    let invoice = find(&id)?;
    Ok(invoice)
}

fn handler(id: &str) -> Result<String, ToolError> {
    Ok(find(id)?)
}

fn main() {
    let _ = handler("x");
    let _ = BillingError::NotFound.to_string();
    let _ = ServerBuilder::new("billing", "1.0.0").tool::<get_invoice>();
}

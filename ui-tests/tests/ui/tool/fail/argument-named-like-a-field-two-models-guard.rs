// Two models guard a field of the same name (`tenant_id`, the usual case): the error names the
// field of the model whose profile the tool takes.
use fusion::{Create, ToolError, model, tool};

#[model(fillable(create = [subject]))]
pub struct Ticket {
    #[cast("Ticket subject")]
    pub subject: String,
    #[cast("Tenant")]
    #[guarded]
    pub tenant_id: String,
}

#[model(fillable(create = [name]))]
pub struct Customer {
    #[cast("Customer name")]
    pub name: String,
    #[cast("Tenant")]
    #[guarded]
    pub tenant_id: String,
}

/// Opens a ticket.
#[tool(mutation, name = "helpdesk.open_ticket")]
async fn open_ticket(ticket: Create<Ticket>, tenant_id: String) -> Result<bool, ToolError> {
    let _ = (ticket, tenant_id);
    Ok(true)
}

/// Adds a customer.
#[tool(mutation, name = "helpdesk.add_customer")]
async fn add_customer(customer: Create<Customer>) -> Result<bool, ToolError> {
    let _ = customer;
    Ok(true)
}

fn main() {}

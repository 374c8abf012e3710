// A `#[presenter]` with mistakes still declares its item type, with the fields that are valid,
// and is still a presenter: a `suggest` function naming the item type, a tool returning through
// the presenter, a presenter nesting it and the registration report nothing, so the only errors
// are the user's own.
use fusion::{Presented, ServerBuilder, Suggestion, ToolError, model, presenter, tool};

#[model]
pub struct Customer {
    #[cast("Customer name")]
    pub name: String,
}

#[presenter(Customer, fields(name, nme))]
pub struct CustomerView;

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[cast("Total in cents")]
    pub total: i64,
    #[cast("The customer billed")]
    pub customer: Customer,
}

fn suggest(shown: Presented<'_, InvoiceViewItem<'_>>) -> Vec<Suggestion> {
    shown
        .items()
        .iter()
        .map(|invoice| Suggestion::new("billing.get_invoice", format!("Open {}", invoice.id)))
        .collect()
}

#[presenter(Invoice, fields(id, totl, customer = CustomerView), limt = 50,
            suggest = suggest, actions = ["billing.get_invoice"])]
pub struct InvoiceView;

/// Gets an invoice.
#[tool(query, name = "billing.get_invoice", returns = InvoiceView)]
async fn get_invoice(id: String) -> Result<Invoice, ToolError> {
    Ok(Invoice { id, total: 100, customer: Customer { name: "Acme".into() } })
}

fn main() {
    let _ = ServerBuilder::new("billing", "1.0.0").tool::<get_invoice>();
}

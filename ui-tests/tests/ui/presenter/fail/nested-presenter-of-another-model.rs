// A nested presenter presents its own model (or an `Option` or `Vec` of it), not another type.
use fusion::{model, presenter};

#[model]
pub struct Customer {
    #[cast("Customer name")]
    pub name: String,
}

#[presenter(Customer, fields(name))]
pub struct CustomerView;

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[cast("The customer's id")]
    pub customer_id: String,
}

#[presenter(Invoice, fields(id, customer_id = CustomerView))]
pub struct InvoiceView;

fn main() {}

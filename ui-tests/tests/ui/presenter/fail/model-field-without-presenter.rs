// A presented field whose type is another model goes through that model's presenter: listed
// as it is, it does not compile.
use fusion::{model, presenter};

#[model]
pub struct Customer {
    #[cast("Customer name")]
    pub name: String,
    #[hidden]
    pub password_hash: fusion::Hidden<String>,
}

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[cast("The customer billed")]
    pub customer: Customer,
}

#[presenter(Invoice, fields(id, customer))]
pub struct InvoiceView;

fn main() {}

// A presenter can never list a hidden field, nor a field that is not cast.
use fusion::{model, presenter};

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[hidden]
    pub webhook_secret: fusion::Hidden<String>,
    pub internal_note: String,
}

#[presenter(Invoice, fields(id, webhook_secret, internal_note))]
pub struct InvoiceView;

fn main() {}

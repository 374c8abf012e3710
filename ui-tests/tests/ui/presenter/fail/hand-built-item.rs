// A presenter's item is built from the model's presented fields: a hand-built one cannot put a
// hidden value in a presented slot.
use fusion::{model, presenter};

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[hidden]
    pub webhook_secret: fusion::Hidden<String>,
}

#[presenter(Invoice, fields(id))]
pub struct InvoiceView;

pub fn forged(invoice: &Invoice) -> InvoiceViewItem<'_> {
    InvoiceViewItem { id: &invoice.webhook_secret }
}

fn main() {}

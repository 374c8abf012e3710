// A conversion into JSON cannot carry a hidden value either.
use fusion::model;
use serde_json::{Value, json};

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[hidden]
    pub webhook_secret: fusion::Hidden<String>,
}

impl From<Invoice> for Value {
    fn from(invoice: Invoice) -> Value {
        json!({ "id": invoice.id, "webhook_secret": invoice.webhook_secret })
    }
}

fn main() {}

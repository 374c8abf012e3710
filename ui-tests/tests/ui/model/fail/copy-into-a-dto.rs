// Copying a model into a serializable DTO: a hidden value is not a `String`, and a `Hidden`
// field makes the DTO unserializable.
use fusion::{Hidden, model};
use serde::Serialize;

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[hidden]
    pub webhook_secret: Hidden<String>,
}

#[derive(Serialize)]
pub struct InvoiceDto {
    pub id: String,
    pub webhook_secret: String,
}

#[derive(Serialize)]
pub struct InvoiceWithSecret {
    pub id: String,
    pub webhook_secret: Hidden<String>,
}

pub fn to_dto(invoice: &Invoice) -> InvoiceDto {
    InvoiceDto { id: invoice.id.clone(), webhook_secret: invoice.webhook_secret.clone() }
}

fn main() {}

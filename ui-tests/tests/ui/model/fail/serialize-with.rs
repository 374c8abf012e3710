// A wrapper that serializes a model field by field still cannot serialize a hidden value.
use fusion::model;
use serde::{Serialize, Serializer};

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[hidden]
    pub webhook_secret: fusion::Hidden<String>,
}

fn whole_invoice<S: Serializer>(invoice: &Invoice, serializer: S) -> Result<S::Ok, S::Error> {
    (&invoice.id, &invoice.webhook_secret).serialize(serializer)
}

#[derive(Serialize)]
pub struct Envelope {
    #[serde(serialize_with = "whole_invoice")]
    pub invoice: Invoice,
}

fn main() {}

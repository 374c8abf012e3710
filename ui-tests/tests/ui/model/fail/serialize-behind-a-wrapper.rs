// `Box`, `&`, `&mut` and `Pin` are fundamental, so the orphan rules allow these impls; each
// conflicts with the model's proof that it is never serialized.
use std::pin::Pin;

use fusion::model;
use serde::{Serialize, Serializer};

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[hidden]
    pub webhook_secret: fusion::Hidden<String>,
}

impl Serialize for Box<Invoice> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.id)
    }
}

impl Serialize for &Invoice {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.id)
    }
}

impl Serialize for &mut Invoice {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.id)
    }
}

impl Serialize for Pin<Box<Invoice>> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.id)
    }
}

fn main() {}

// A boxed model deserialized from arguments would let an agent set guarded fields.
use fusion::model;
use serde::{Deserialize, Deserializer};

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[guarded]
    #[hidden]
    pub tenant_id: fusion::Hidden<String>,
}

impl<'de> Deserialize<'de> for Box<Invoice> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let id = String::deserialize(deserializer)?;
        Ok(Box::new(Invoice { id, tenant_id: "t_1".into() }))
    }
}

fn main() {}

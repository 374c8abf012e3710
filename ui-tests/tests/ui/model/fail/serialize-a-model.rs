// A model's raw value can never be serialized: it does not implement `Serialize`.
use fusion::model;

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[hidden]
    pub webhook_secret: fusion::Hidden<String>,
}

fn main() {
    let invoice = Invoice { id: "INV-1".into(), webhook_secret: "whsec_1".into() };
    let _leak = serde_json::to_string(&invoice);
}

// A model never comes in from an agent: reading one from JSON does not compile.
use fusion::model;

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[guarded]
    #[hidden]
    pub tenant_id: fusion::Hidden<String>,
}

fn main() {
    let _invoice: Result<Invoice, _> = serde_json::from_str(r#"{"id": "INV-1", "tenant_id": "t_2"}"#);
}

// serde's remote derive reads every field of the model: a hidden one is not serializable.
use fusion::model;
use serde::Serialize;

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[hidden]
    pub webhook_secret: fusion::Hidden<String>,
}

#[derive(Serialize)]
#[serde(remote = "Invoice")]
pub struct InvoiceDef {
    pub id: String,
    pub webhook_secret: fusion::Hidden<String>,
}

fn main() {}

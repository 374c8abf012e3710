// Deriving `Serialize` on a model is refused at the derive.
use fusion::model;
use serde::Serialize;

#[model]
#[derive(Debug, Serialize)]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[hidden]
    pub webhook_secret: fusion::Hidden<String>,
}

fn main() {}

// Implementing `Serialize` by hand conflicts with the model's guarantee.
use fusion::model;

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[hidden]
    pub webhook_secret: fusion::Hidden<String>,
}

impl serde::Serialize for Invoice {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.webhook_secret.expose())
    }
}

fn main() {}

// A model written by hand cannot be `Serialize`: it would reach the agent raw through the
// plain output path.
use fusion::FieldInfo;

#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct Invoice {
    pub id: String,
    pub webhook_secret: String,
}

impl fusion::Model for Invoice {
    const NAME: &'static str = "Invoice";
    const FIELDS: &'static [FieldInfo] = &[];
}

fn main() {}

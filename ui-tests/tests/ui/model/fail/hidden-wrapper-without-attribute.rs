// A `Hidden` value in a field not marked `#[hidden]`: the model's facts would disagree with the
// type (a filter could list it, a lockfile would not record it).
use fusion::{Hidden, model};

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[cast("Signing secret")]
    pub webhook_secret: Hidden<String>,
}

fn main() {}

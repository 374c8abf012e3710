// A filter on a hidden field lets an agent guess its value one query at a time.
use fusion::{Hidden, model};

#[model(fillable(create = [api_key], filter = [api_key]))]
pub struct Account {
    #[cast("Account id")]
    pub id: String,
    #[cast("The API key, set when the account is created")]
    #[hidden]
    pub api_key: Hidden<String>,
}

fn main() {}

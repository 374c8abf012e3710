// A derive of `PartialEq`, `Eq` or `Hash` on a type holding a `Hidden` (a model or a plain
// struct) fails: it would compare or hash the hidden field with the field's own impls, which
// do not exist.
use fusion::{Hidden, model};

#[model]
#[derive(PartialEq, Eq)]
pub struct ApiKey {
    #[cast("Key id")]
    pub id: String,
    #[hidden]
    pub secret: Hidden<String>,
}

#[derive(PartialEq, Hash)]
pub struct Credentials {
    pub user: String,
    pub token: Hidden<String>,
}

fn main() {}

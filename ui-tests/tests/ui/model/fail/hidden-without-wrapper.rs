// A hidden field holds its value in `fusion::Hidden`, so that the value itself cannot leave.
use fusion::model;

#[model]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[hidden]
    pub webhook_secret: String,
}

fn main() {}

// A profile naming a field that does not exist is reported on the name, with a suggestion.
use fusion::model;

#[model(fillable(create = [customer_id, totl_cents], filter = [colour]))]
pub struct Invoice {
    #[cast("Customer id")]
    pub customer_id: String,
    #[cast("Total in cents")]
    pub total_cents: i64,
}

fn main() {}

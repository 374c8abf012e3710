// A plain type that holds a hidden value is not serializable, so it cannot be presented.
use fusion::{Hidden, model, presenter};
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Serialize, JsonSchema)]
pub struct Address {
    pub city: String,
    pub door_code: Hidden<String>,
}

#[model]
pub struct Customer {
    #[cast("Customer name")]
    pub name: String,
    #[cast("Where the customer lives")]
    pub address: Address,
}

#[presenter(Customer, fields(name, address))]
pub struct CustomerView;

fn main() {}

// A model never comes in from an agent and has no schema of its own: deriving `Deserialize`
// or `JsonSchema` on it is refused, with the right tool named.
use fusion::model;

#[model]
#[derive(Clone, serde::Deserialize, schemars::JsonSchema)]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[guarded]
    #[hidden]
    pub tenant_id: fusion::Hidden<String>,
}

fn main() {}

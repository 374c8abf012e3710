// A guarded field can never come in from an agent: no profile may list it.
use fusion::model;

#[model(fillable(create = [customer_id, tenant_id]))]
pub struct Invoice {
    #[cast("Customer id")]
    pub customer_id: String,
    #[cast("Owning tenant")]
    #[guarded]
    pub tenant_id: String,
}

fn main() {}

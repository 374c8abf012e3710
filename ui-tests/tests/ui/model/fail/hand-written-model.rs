// A model written by hand, without `#[model]`, is refused even when it is not `Serialize`.
use fusion::FieldInfo;

pub struct Invoice {
    pub id: String,
}

impl fusion::Model for Invoice {
    const NAME: &'static str = "Invoice";
    const FIELDS: &'static [FieldInfo] = &[];
}

fn main() {}

// Fillable fields need a label; labels cannot be empty; flags take no arguments.
use fusion::model;

#[model(fillable(update = [note]))]
pub struct Invoice {
    #[cast("")]
    pub id: String,
    pub note: String,
    #[hidden(always)]
    pub secret: fusion::Hidden<String>,
}

fn main() {}

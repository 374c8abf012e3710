// A constraint Fusion cannot enforce is refused rather than advertised.
use fusion::model;

#[model(fillable(create = [tags]))]
pub struct Item {
    #[cast("Labels")]
    #[schemars(contains(regex(pattern = "^x")), length(max = 3))]
    pub tags: Vec<String>,
}

fn main() {}

// `#[data]` derives for types; on anything else it says so, on the item's keyword.
#[fusion::data]
fn summary() -> usize {
    0
}

#[fusion::data(json)]
struct Unknown {
    days: usize,
}

fn main() {}

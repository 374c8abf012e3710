// `Hidden` has no `Hash`: a `Hasher` that records its input would get every byte.
use std::hash::{DefaultHasher, Hash};

use fusion::Hidden;

pub fn record(stored: &Hidden<String>) {
    let mut hasher = DefaultHasher::new();
    stored.hash(&mut hasher);
}

fn main() {}

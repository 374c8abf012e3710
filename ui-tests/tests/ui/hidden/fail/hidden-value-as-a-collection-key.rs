// Nor can a hidden value key a `HashMap`, a `HashSet` or a `BTreeMap`: they hash, compare and
// order it. The key to use is its `keyed_digest`.
use std::collections::{BTreeMap, HashMap, HashSet};

use fusion::Hidden;

pub fn index(key: Hidden<String>, owner: String) {
    let mut by_key = HashMap::new();
    by_key.insert(key.clone(), owner.clone());
    let mut seen = HashSet::new();
    seen.insert(key.clone());
    let mut sorted = BTreeMap::new();
    sorted.insert(key, owner);
}

fn main() {}

// The hurried route around a refused `==`: compare through a wrapper. `Option`'s `==`, a
// slice's `contains` and `sort` all need the comparison `Hidden` does not have.
use fusion::Hidden;

pub fn same(stored: &Option<Hidden<String>>, guess: Option<Hidden<String>>) -> bool {
    *stored == guess
}

pub fn known(keys: &[Hidden<String>], guess: &Hidden<String>) -> bool {
    keys.contains(guess)
}

pub fn sorted(mut keys: Vec<Hidden<String>>) -> Vec<Hidden<String>> {
    keys.sort();
    keys
}

fn main() {}

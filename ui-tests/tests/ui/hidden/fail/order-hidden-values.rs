// `Hidden` has no `PartialOrd` or `Ord`: `probe <= secret` finds a secret one character at a
// time, by bisection.
use fusion::Hidden;

pub fn below(stored: &Hidden<String>, probe: Hidden<String>) -> bool {
    probe <= *stored
}

pub fn order(stored: &Hidden<String>, probe: &Hidden<String>) -> std::cmp::Ordering {
    stored.cmp(probe)
}

fn main() {}

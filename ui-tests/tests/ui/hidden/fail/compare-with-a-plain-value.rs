// Nor `PartialEq` with a plain value: `stored == "guess"` is the same oracle.
use fusion::Hidden;

pub fn same(stored: &Hidden<String>) -> bool {
    *stored == "tok_guess"
}

pub fn differs(stored: &Hidden<String>, guess: String) -> bool {
    *stored != guess
}

fn main() {}

// `assert_eq!` needs `PartialEq` (and would print both sides on failure): a test checks a
// hidden value with `assert!(secret.matches("..."))`.
use fusion::Hidden;

pub fn check(stored: Hidden<String>) {
    assert_eq!(stored, Hidden::new(String::from("tok_1")));
}

fn main() {}

//! The proofs: what must not compile does not, with a clear message on the user's own tokens;
//! what must compile does, and runs.
//!
//! The `.stderr` files are blessed with `TRYBUILD=overwrite cargo test -p ui-tests` and read
//! before committing. They depend on the compiler's wording: our machines have exactly one
//! toolchain (1.95), and a toolchain change is the moment to re-bless them deliberately.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*/fail/*.rs");
    t.pass("tests/ui/*/pass/*.rs");
}

//! Compile-fail and compile-pass proofs of Fusion's guarantees.

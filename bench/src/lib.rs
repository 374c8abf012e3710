//! Benchmarks of Fusion's serving path against a raw rmcp baseline.
//!
//! The crate is four binaries and a script; the library itself is empty.
//!
//! * `raw-billing` (`src/bin/raw-billing.rs`): the billing connector written directly on rmcp's
//!   `ServerHandler`, with the same tool contract and output as the Fusion `billing` connector.
//! * `loadgen` (`src/bin/loadgen.rs`): an MCP load driver over stdio or Streamable HTTP that
//!   prints one JSON line per run.
//! * `echo-server` (`src/bin/echo-server.rs`): a canned-answer server to measure the driver's
//!   own ceiling.
//! * `summarize` (`src/bin/summarize.rs`): medians and Fusion/raw ratios of a file of runs.
//! * `compare.sh`: builds the release binaries, runs both servers interleaved over stdio and
//!   HTTP, and writes the median ratios to `results/latest.json`.
//!
//! See `README.md` beside this crate's manifest.

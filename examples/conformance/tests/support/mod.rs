//! Helpers of the conformance test: `conformance-server` under the official conformance suite.
//! The suite's runner, the checks of a run and of the scenario lists, and the server process
//! are `testkit/harness`'s, shared with the billing and gateway tests.

use std::path::PathBuf;
use std::process::Command;

pub(crate) use testkit_harness::{
    AcceptedWarning, ServerHttp, require_every_check_passes, require_every_scenario_listed,
};

/// The `conformance-server` binary cargo built for this test run.
pub(crate) fn server_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_conformance-server"))
}

/// A fresh `conformance-server --http 127.0.0.1:0`, once it listens (at most 30 s), killed when
/// dropped.
pub(crate) fn spawn_server() -> ServerHttp {
    let mut command = Command::new(server_bin());
    command.args(["--http", "127.0.0.1:0"]);
    ServerHttp::start(command, "conformance-server")
}

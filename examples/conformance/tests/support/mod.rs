//! Helpers of the conformance test: the official conformance suite from `testkit/`
//! (`testkit/README.md` says what it checks and prints) against the `conformance-server` binary.
//!
//! * [`server_bin`]: the binary under test.
//! * [`ServerHttp`]: a fresh `conformance-server` serving Streamable HTTP on
//!   `127.0.0.1:<free port>`, killed when dropped (also when the test panics).
//! * From `testkit/harness`: [`ensure_testkit`] (installs the suite once per test process),
//!   [`Conformance`] (runs `testkit/conformance.sh` and reads what it prints), and the paths and
//!   process runner they use.
//!
//! Unix only; the testkit runs on Linux x64.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

// The testkit's paths, install, process runner and conformance reader: one copy, in
// testkit/harness.
pub(crate) use testkit_harness::{Conformance, ensure_testkit, tail, test_deps_dir};

/// The `conformance-server` binary cargo built for this test run.
pub(crate) fn server_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_conformance-server"))
}

// ---------------------------------------------------------------------------------------------
// The server over HTTP

/// How long the server may take to print its `listening on` line.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

/// A `conformance-server --http 127.0.0.1:0` child process. Its stderr (logs) is kept for
/// failure messages. Dropping it kills the process, so the server stops with the test, also
/// when the test panics.
pub(crate) struct ServerHttp {
    child: Child,
    url: String,
    logs: Arc<Mutex<String>>,
}

impl ServerHttp {
    /// Starts the server and waits (at most 30 s) for its
    /// `conformance-server: listening on http://127.0.0.1:PORT/mcp` line. Panics with its
    /// output if it exits or stays silent instead.
    pub(crate) fn spawn() -> Self {
        let mut child = Command::new(server_bin())
            .args(["--http", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", server_bin().display()));
        let logs = Arc::new(Mutex::new(String::new()));
        let (url_tx, url_rx) = mpsc::channel();
        let stderr = child.stderr.take().expect("stderr is piped");
        let shared = Arc::clone(&logs);
        // Keeps draining stderr after the line, so the server never blocks on a full pipe.
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.strip_prefix("conformance-server: listening on ") {
                    let _ = url_tx.send(url.trim().to_owned());
                }
                let mut logs = shared
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                logs.push_str(&line);
                logs.push('\n');
            }
        });
        let mut server = ServerHttp {
            child,
            url: String::new(),
            logs,
        };
        match url_rx.recv_timeout(LISTEN_TIMEOUT) {
            Ok(url) => server.url = url,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                "conformance-server did not print `listening on …` within {LISTEN_TIMEOUT:?}; stderr:\n{}",
                server.logs()
            ),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = server.child.wait().map(|status| status.to_string());
                panic!(
                    "conformance-server exited ({}) before listening; stderr:\n{}",
                    status.unwrap_or_else(|error| error.to_string()),
                    server.logs()
                )
            }
        }
        server
    }

    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Everything the server wrote to stderr so far (its logs).
    pub(crate) fn logs(&self) -> String {
        self.logs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

impl Drop for ServerHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

//! Helpers shared by the billing integration tests that drive the real `billing` binary with
//! external programs: the official MCP clients and the conformance suite from `testkit/`
//! (read `testkit/README.md` for what they check and print).
//!
//! * Paths: [`workspace_root`], [`testkit_dir`], [`test_deps_dir`], [`billing_bin`].
//! * [`ensure_testkit`]: runs `testkit/install.sh` once per test process, serialized across
//!   concurrently running test processes by a `flock` on `.test-deps/.install.lock`.
//! * [`BillingHttp`]: a fresh `billing --in-memory` serving Streamable HTTP on
//!   `127.0.0.1:<free port>`, killed when dropped (also when the test panics).
//! * [`Caller`]: stateless 2026-07-28 tool calls with a bearer token, over raw HTTP.
//! * [`run`]: runs a command in its own process group with a timeout and captures its output
//!   ([`Ran`]); [`testkit_script`] builds the command for a `testkit/*.sh` script.
//! * Reading what the scripts print: [`Matrix`] / [`ClientReport`] (`testkit/matrix.sh`),
//!   [`Conformance`] (`testkit/conformance.sh`).
//!
//! Unix only (process groups, `flock`); the testkit itself runs on Linux x64.

// Every test binary that declares `mod support;` uses its own subset of these helpers (and of
// the harness's, re-exported).
#![allow(dead_code, unused_imports)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use fusion::serde_json::Value;

pub(crate) mod tasks;

// ---------------------------------------------------------------------------------------------
// Paths

// The testkit's paths, install, process runner and conformance reader: one copy, in
// testkit/harness.
pub(crate) use testkit_harness::{
    Conformance, ServerHttp, ensure_testkit, run, tail, test_deps_dir, testkit_dir, testkit_script,
};

/// The `billing` binary cargo built for this test run, or the one `BILLING_UNDER_TEST` names
/// (to run the same tests against another build, e.g. an older one, and see what it does).
pub(crate) fn billing_bin() -> PathBuf {
    std::env::var_os("BILLING_UNDER_TEST")
        .filter(|path| !path.is_empty())
        .map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_billing")),
            PathBuf::from,
        )
}

/// `words` as one POSIX shell command line (each word single-quoted when needed), the form the
/// testkit clients take for `--stdio "<command line>"`.
pub(crate) fn shell_line<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|word| {
            let word = word.as_ref();
            let plain = !word.is_empty()
                && word
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c));
            if plain {
                word.to_owned()
            } else {
                format!("'{}'", word.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------------------------
// The billing server over HTTP

/// A `billing --in-memory --http 127.0.0.1:0` child process (fresh demo data: INV-1..INV-1000)
/// serving Streamable HTTP: the harness's [`ServerHttp`] (url, pid, logs, interrupt; killed
/// when dropped, also when the test panics), started the ways these tests need.
pub(crate) struct BillingHttp(ServerHttp);

impl std::ops::Deref for BillingHttp {
    type Target = ServerHttp;

    fn deref(&self) -> &ServerHttp {
        &self.0
    }
}

impl std::ops::DerefMut for BillingHttp {
    fn deref_mut(&mut self) -> &mut ServerHttp {
        &mut self.0
    }
}

impl From<ServerHttp> for BillingHttp {
    fn from(server: ServerHttp) -> Self {
        BillingHttp(server)
    }
}

impl BillingHttp {
    /// Starts the server and waits (at most 30 s) for its
    /// `billing: listening on http://127.0.0.1:PORT/mcp` line. Panics with its output if it
    /// exits or stays silent instead.
    pub(crate) fn spawn() -> Self {
        Self::spawn_with(&[])
    }

    /// Like [`BillingHttp::spawn`], with more arguments for the binary (e.g. `--grouped`).
    pub(crate) fn spawn_with(extra_args: &[&str]) -> Self {
        let mut args = vec!["--in-memory", "--allow-anonymous"];
        args.extend_from_slice(extra_args);
        Self::spawn_exactly(&args)
    }

    /// Starts `billing <args> --http 127.0.0.1:0`: nothing else is added (no `--in-memory`,
    /// no `--allow-anonymous`), for tests of authentication and of the on-disk store.
    pub(crate) fn spawn_exactly(args: &[&str]) -> Self {
        Self::spawn_with_env(args, &[])
    }

    /// Like [`BillingHttp::spawn_exactly`], with these environment variables set for the
    /// process (tokens, a test failpoint).
    pub(crate) fn spawn_with_env(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(billing_bin());
        command
            .args(args)
            .args(["--http", "127.0.0.1:0"])
            .envs(env.iter().copied());
        BillingHttp(ServerHttp::start(command, "billing"))
    }
}

// ---------------------------------------------------------------------------------------------
// testkit/matrix.sh

/// The client/protocol combinations of `testkit/matrix.sh`, in its order, with the protocol
/// version each must negotiate.
pub(crate) const MATRIX_CLIENTS: [(&str, &str); 5] = [
    ("ts-v1", "2025-11-25"),
    ("ts-v2-2025", "2025-11-25"),
    ("ts-v2-2026", "2026-07-28"),
    ("py-2025", "2025-11-25"),
    ("py-2026", "2026-07-28"),
];

/// How long one client may take for one plan (normally 1–4 s).
pub(crate) const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);

/// One client's report line from `testkit/matrix.sh` (`<name> {json}`).
#[derive(Debug, Clone)]
pub(crate) struct ClientReport {
    /// The matrix name: `ts-v1`, `ts-v2-2025`, `ts-v2-2026`, `py-2025` or `py-2026`.
    pub(crate) name: String,
    /// The JSON report (keys in `testkit/README.md`); `None` if the client printed none.
    pub(crate) report: Option<Value>,
    /// The line as printed.
    pub(crate) line: String,
}

impl ClientReport {
    fn text(&self, key: &str) -> &str {
        self.report
            .as_ref()
            .and_then(|report| report[key].as_str())
            .unwrap_or("?")
    }

    /// Every check of this client passed.
    pub(crate) fn ok(&self) -> bool {
        self.report
            .as_ref()
            .is_some_and(|report| report["ok"] == Value::Bool(true))
    }

    /// SDK package and version, e.g. `@modelcontextprotocol/sdk 1.32.2`.
    pub(crate) fn sdk(&self) -> String {
        let sdk = self.report.as_ref().map(|report| &report["sdk"]);
        let field = |key: &str| {
            sdk.and_then(|sdk| sdk[key].as_str())
                .unwrap_or("?")
                .to_owned()
        };
        format!("{} {}", field("name"), field("version"))
    }

    /// The protocol version the client negotiated.
    pub(crate) fn protocol(&self) -> &str {
        self.text("protocolVersion")
    }

    /// The transport, `stdio` or `http`.
    pub(crate) fn transport(&self) -> &str {
        self.text("transport")
    }

    /// How many checks the client ran.
    pub(crate) fn checks(&self) -> u64 {
        self.report
            .as_ref()
            .and_then(|report| report["checks"].as_u64())
            .unwrap_or(0)
    }

    /// The failed checks, as the client worded them.
    pub(crate) fn failures(&self) -> Vec<String> {
        self.report
            .as_ref()
            .and_then(|report| report["failures"].as_array())
            .map(|failures| {
                failures
                    .iter()
                    .map(|failure| {
                        failure
                            .as_str()
                            .map_or_else(|| failure.to_string(), str::to_owned)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The client's informational findings (`notes[]`, e.g. what its SDK let through).
    pub(crate) fn notes(&self) -> Vec<String> {
        self.report
            .as_ref()
            .and_then(|report| report["notes"].as_array())
            .map(|notes| {
                notes
                    .iter()
                    .map(|note| {
                        note.as_str()
                            .map_or_else(|| note.to_string(), str::to_owned)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// One line for the test output: name, SDK, transport, negotiated version, checks.
    pub(crate) fn summary(&self) -> String {
        format!(
            "{:<11} {:<36} {:<5} negotiated {:<10} {:>3} checks, {}",
            self.name,
            self.sdk(),
            self.transport(),
            self.protocol(),
            self.checks(),
            if self.ok() { "ok" } else { "FAILED" }
        )
    }
}

/// Reports collected from one or more `testkit/matrix.sh` runs, with their output kept for
/// failure messages.
#[derive(Debug, Default)]
pub(crate) struct Matrix {
    /// One report per client run, in run order.
    pub(crate) reports: Vec<ClientReport>,
    /// What went wrong outside the reports (script failed without reports, timeout, …).
    pub(crate) problems: Vec<String>,
    /// Each run's command, outcome, stdout and stderr (plus server logs where there is a server).
    pub(crate) transcripts: Vec<String>,
}

impl Matrix {
    /// Runs `testkit/matrix.sh <target...> --plan <plan> [--only <client>]...` (target e.g.
    /// `["--http", server.url()]`; no `only` = all five clients) and adds its reports. The
    /// logs of `server`, if given, go into the transcript.
    pub(crate) fn run(
        &mut self,
        target: &[&str],
        plan: &Path,
        only: &[&str],
        server: Option<&BillingHttp>,
    ) {
        let mut command = testkit_script("matrix.sh");
        command.args(target).arg("--plan").arg(plan);
        for client in only {
            command.args(["--only", client]);
        }
        let clients = if only.is_empty() {
            MATRIX_CLIENTS.len()
        } else {
            only.len()
        };
        let ran = run(&mut command, CLIENT_TIMEOUT * clients as u32);
        let before = self.reports.len();
        for line in ran.stdout.lines() {
            let Some((name, json)) = line.split_once(' ') else {
                continue;
            };
            if !MATRIX_CLIENTS.iter().any(|(client, _)| *client == name) {
                continue;
            }
            self.reports.push(ClientReport {
                name: name.to_owned(),
                report: fusion::serde_json::from_str(json).ok(),
                line: line.to_owned(),
            });
        }
        let summary = ran
            .stdout
            .lines()
            .find(|line| line.starts_with("matrix: "))
            .unwrap_or("(no `matrix:` line)");
        if ran.timed_out() {
            self.problems
                .push(format!("matrix.sh timed out ({summary})"));
        } else if !ran.success() && self.reports[before..].iter().all(ClientReport::ok) {
            self.problems.push(format!(
                "matrix.sh failed although no client reported a failure ({summary})"
            ));
        }
        let mut transcript = ran.describe();
        if let Some(server) = server {
            let _ = write!(
                transcript,
                "\n--- server stderr ({}) ---\n{}",
                server.url(),
                tail(&server.logs(), 20_000)
            );
        }
        self.transcripts.push(transcript);
    }

    /// Panics, with the failing reports, the problems and every transcript, unless each of the
    /// five clients ran exactly `runs_per_client` times, passed every check and negotiated the
    /// protocol version it asked for.
    pub(crate) fn assert_all_passed(&self, what: &str, runs_per_client: usize) {
        let mut problems = self.problems.clone();
        for (client, protocol) in MATRIX_CLIENTS {
            let runs: Vec<_> = self
                .reports
                .iter()
                .filter(|report| report.name == client)
                .collect();
            if runs.len() != runs_per_client {
                problems.push(format!(
                    "{client}: {} report(s), expected {runs_per_client}",
                    runs.len()
                ));
            }
            for report in runs {
                if report.report.is_none() {
                    problems.push(format!(
                        "{client}: no JSON report (line: {:?})",
                        report.line
                    ));
                    continue;
                }
                for failure in report.failures() {
                    problems.push(format!("{client}: ✗ {failure}"));
                }
                if !report.ok() && report.failures().is_empty() {
                    problems.push(format!("{client}: not ok"));
                }
                if report.protocol() != protocol {
                    problems.push(format!(
                        "{client}: negotiated {}, expected {protocol}",
                        report.protocol()
                    ));
                }
            }
        }
        if problems.is_empty() {
            return;
        }
        let lines: Vec<&str> = self
            .reports
            .iter()
            .map(|report| report.line.as_str())
            .collect();
        panic!(
            "{what}: the official clients found problems:\n  {}\n\n=== report lines ===\n{}\n\n=== runs ===\n{}",
            problems.join("\n  "),
            lines.join("\n"),
            self.transcripts.join("\n\n")
        );
    }

    /// Prints (visible with `--nocapture`) `what` and one [`ClientReport::summary`] line per
    /// report (plus its notes), in one piece so that tests running in parallel do not
    /// interleave.
    pub(crate) fn print(&self, what: &str) {
        let mut text = format!("{what}:");
        for report in &self.reports {
            let _ = write!(text, "\n  {}", report.summary());
            for note in report.notes() {
                let _ = write!(text, "\n      note: {note}");
            }
        }
        println!("{text}");
    }
}

// ---------------------------------------------------------------------------------------------
// Stateless 2026-07-28 calls over raw HTTP

/// A stateless 2026-07-28 caller with a bearer token: one plain POST per call, so that what is
/// measured is the server (no session, no client library).
#[derive(Clone)]
pub(crate) struct Caller {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
}

/// The answer to one call: the HTTP status and the body.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: String,
}

impl Answer {
    /// The body as JSON.
    pub(crate) fn json(&self) -> Value {
        fusion::serde_json::from_str(&self.body)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {}", tail(&self.body, 2000)))
    }

    /// The tool result's envelope.
    pub(crate) fn envelope(&self) -> Value {
        let envelope = self.json()["result"]["structuredContent"].clone();
        assert!(
            envelope.is_object(),
            "not a tool result: {}",
            tail(&self.body, 2000)
        );
        envelope
    }

    /// The error code of a failed tool call, `None` on success.
    pub(crate) fn error_code(&self) -> Option<String> {
        self.envelope()["error"]["code"].as_str().map(str::to_owned)
    }
}

impl Caller {
    /// Calls `server` with `token` (none: anonymous).
    pub(crate) fn new(server: &BillingHttp, token: Option<&str>) -> Self {
        Caller {
            http: http_client_builder().build().expect("HTTP client"),
            url: server.url().to_owned(),
            token: token.map(str::to_owned),
        }
    }

    /// `tools/call` of `tool`; the answer must come within 30 s.
    pub(crate) async fn call(&self, tool: &str, arguments: Value) -> Answer {
        self.try_call(tool, arguments, Duration::from_secs(30))
            .await
            .unwrap_or_else(|error| panic!("{tool}: {error}"))
    }

    /// `tools/call` of `tool`, or why no answer came within `timeout` (the server died, say).
    pub(crate) async fn try_call(
        &self,
        tool: &str,
        arguments: Value,
        timeout: Duration,
    ) -> Result<Answer, String> {
        let body = fusion::serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "billing-test", "version": "1.0.0"},
                "io.modelcontextprotocol/clientCapabilities": {}
            }}
        });
        let mut request = self
            .http
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", "tools/call")
            .header("Mcp-Name", tool)
            .body(body.to_string());
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = tokio::time::timeout(timeout, request.send())
            .await
            .map_err(|_| format!("no answer within {timeout:?}"))?
            .map_err(|error| format!("HTTP request failed: {error}"))?;
        let status = response.status().as_u16();
        let body = tokio::time::timeout(timeout, response.text())
            .await
            .map_err(|_| format!("no body within {timeout:?}"))?
            .map_err(|error| format!("HTTP body failed: {error}"))?;
        Ok(Answer { status, body })
    }
}

/// A plain HTTP client builder that never goes through a proxy (the servers are on loopback).
///
/// Fusion's `http-client` feature builds reqwest on rustls without a crypto provider (its
/// upstream client brings ring itself), and features are shared by everything in one build:
/// any other reqwest client in the process then needs a process-wide provider, which this
/// installs once.
pub(crate) fn http_client_builder() -> reqwest::ClientBuilder {
    install_crypto_provider();
    reqwest::Client::builder().no_proxy()
}

/// Installs rustls's ring provider as the process default, unless one is installed already.
pub(crate) fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

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

// Every test binary that declares `mod support;` uses its own subset of these helpers.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use rustix::fs::FlockOperation;
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// Paths

/// The cargo workspace root (`examples/billing/../..`).
pub(crate) fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize()
        .unwrap_or_else(|error| panic!("workspace root {}: {error}", root.display()))
}

/// `<workspace>/testkit`: the scripts that drive the official clients.
pub(crate) fn testkit_dir() -> PathBuf {
    workspace_root().join("testkit")
}

/// Where `testkit/install.sh` puts the clients: `$FUSION_TEST_DEPS` if set (made absolute),
/// else `<workspace>/.test-deps`. Every command from [`testkit_script`] gets this exact path
/// in `FUSION_TEST_DEPS`, so the scripts and these helpers always agree.
pub(crate) fn test_deps_dir() -> PathBuf {
    match std::env::var_os("FUSION_TEST_DEPS") {
        Some(dir) if !dir.is_empty() => {
            std::path::absolute(PathBuf::from(dir)).expect("FUSION_TEST_DEPS is not a usable path")
        }
        _ => workspace_root().join(".test-deps"),
    }
}

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
// Installing the testkit

/// How long `testkit/install.sh` may take (cold: ~45 s on a 2-core machine with fast network).
const INSTALL_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Makes sure the official clients and the conformance suite are installed in
/// [`test_deps_dir`]: runs `testkit/install.sh` (idempotent, ~1 s when up to date) once per
/// test process, holding an exclusive `flock` on `<deps>/.install.lock` so that test binaries
/// running at the same time never install concurrently. Panics with the installer's output
/// when it fails (every later caller in the process panics with the same message).
pub(crate) fn ensure_testkit() {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    if let Err(message) = INSTALLED.get_or_init(install_testkit) {
        panic!("{message}");
    }
}

fn install_testkit() -> Result<(), String> {
    let deps = test_deps_dir();
    std::fs::create_dir_all(&deps)
        .map_err(|error| format!("creating {}: {error}", deps.display()))?;
    let lock_path = deps.join(".install.lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|error| format!("opening {}: {error}", lock_path.display()))?;
    // Wait for another process's install, but not forever.
    let deadline = Instant::now() + INSTALL_TIMEOUT + Duration::from_secs(60);
    loop {
        match rustix::fs::flock(&lock, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => break,
            Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR)
                if Instant::now() < deadline =>
            {
                thread::sleep(Duration::from_millis(200));
            }
            Err(error) => return Err(format!("flock {}: {error}", lock_path.display())),
        }
    }
    let ran = run(&mut testkit_script("install.sh"), INSTALL_TIMEOUT);
    drop(lock); // closing the file releases the lock
    if ran.success() {
        Ok(())
    } else {
        Err(format!(
            "testkit/install.sh could not install the official MCP clients into {} \
             (needs node >= 20 with npm, python3 >= 3.10 with venv, and access to npm and PyPI; \
             logs in that directory):\n{}",
            deps.display(),
            ran.describe()
        ))
    }
}

/// `bash testkit/<script>` with `FUSION_TEST_DEPS` set to [`test_deps_dir`], run from the
/// workspace root. Add the script's arguments and pass it to [`run`].
pub(crate) fn testkit_script(script: &str) -> Command {
    let mut command = Command::new("bash");
    command
        .arg(testkit_dir().join(script))
        .env("FUSION_TEST_DEPS", test_deps_dir())
        .current_dir(workspace_root());
    command
}

// ---------------------------------------------------------------------------------------------
// Running a command with a timeout

/// What a command run by [`run`] did.
#[derive(Debug)]
pub(crate) struct Ran {
    /// The command, as `Debug` prints it.
    pub(crate) command: String,
    /// Its exit status; `None` when it was killed for exceeding the timeout.
    pub(crate) status: Option<ExitStatus>,
    /// Everything it wrote to stdout (lossy UTF-8).
    pub(crate) stdout: String,
    /// Everything it wrote to stderr (lossy UTF-8).
    pub(crate) stderr: String,
    /// How long it ran.
    pub(crate) elapsed: Duration,
    /// The timeout it was given.
    pub(crate) timeout: Duration,
}

impl Ran {
    /// Exited by itself with status 0.
    pub(crate) fn success(&self) -> bool {
        self.status.is_some_and(|status| status.success())
    }

    /// Killed for exceeding its timeout.
    pub(crate) fn timed_out(&self) -> bool {
        self.status.is_none()
    }

    /// A readable account for a panic message: command, outcome, stdout and stderr (each
    /// limited to its last 30 000 characters).
    pub(crate) fn describe(&self) -> String {
        let outcome = match self.status {
            Some(status) => format!("{status} after {:.1?}", self.elapsed),
            None => format!(
                "KILLED after {:.1?}: it exceeded its timeout of {:?}",
                self.elapsed, self.timeout
            ),
        };
        format!(
            "command: {}\noutcome: {outcome}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.command,
            tail(&self.stdout, 30_000),
            tail(&self.stderr, 30_000)
        )
    }
}

/// The last `max` characters of `text` (whole text when shorter), marked when cut.
pub(crate) fn tail(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.trim_end().to_owned();
    }
    let rest: String = text.chars().skip(count - max).collect();
    format!("[… {} characters cut …]{}", count - max, rest.trim_end())
}

/// Runs `command` with stdin closed and stdout/stderr captured, in a new process group. After
/// `timeout` it is killed. Once it has exited (and what it started had up to 2 s to finish
/// writing), every process left in that group (clients, servers they spawned) is killed, so
/// nothing outlives the test. Never panics on a failing command; panics only if the command
/// cannot be started.
pub(crate) fn run(command: &mut Command, timeout: Duration) -> Ran {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let description = format!("{command:?}");
    let started = Instant::now();
    let mut child = command
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {description}: {error}"));
    let mut stdout = capture(child.stdout.take().expect("stdout is piped"));
    let mut stderr = capture(child.stderr.take().expect("stderr is piped"));

    let pid = Pid::from_child(&child);
    let deadline = started + timeout;
    let mut timed_out = false;
    // Wait without reaping (WNOWAIT): while the leader is a zombie its pid cannot be reused,
    // so killing the group by that id cannot hit an unrelated process.
    loop {
        let exited = rustix::process::waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
        );
        match exited {
            Ok(Some(_)) => break,
            Ok(None) | Err(rustix::io::Errno::INTR) => {}
            Err(error) => panic!("waitid({description}): {error}"),
        }
        if Instant::now() >= deadline {
            timed_out = true;
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let elapsed = started.elapsed();
    if !timed_out {
        // Let what the command started finish writing what it has (up to 2 s)…
        let grace = Instant::now() + Duration::from_secs(2);
        stdout.wait(grace);
        stderr.wait(grace);
    }
    // …then kill whatever is left in its group. ESRCH (the group is empty) is fine.
    let _ = rustix::process::kill_process_group(pid, Signal::KILL);
    let status = child
        .wait()
        .unwrap_or_else(|error| panic!("wait({description}): {error}"));
    // A process outside the group (e.g. started in its own session) may still hold a pipe:
    // give the readers a moment more, then take what they have.
    let grace = Instant::now() + Duration::from_secs(5);
    stdout.wait(grace);
    stderr.wait(grace);
    let (stdout, stderr) = (stdout.text(), stderr.text());
    Ran {
        command: description,
        status: (!timed_out).then_some(status),
        stdout,
        stderr,
        elapsed,
        timeout,
    }
}

/// Reads a pipe to its end on a thread, keeping everything read so far.
struct Capture {
    buffer: Arc<Mutex<Vec<u8>>>,
    done: mpsc::Receiver<()>,
    finished: bool,
}

fn capture(mut pipe: impl Read + Send + 'static) -> Capture {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let (done_tx, done) = mpsc::channel();
    let shared = Arc::clone(&buffer);
    thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => shared
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .extend_from_slice(&chunk[..n]),
            }
        }
        let _ = done_tx.send(());
    });
    Capture {
        buffer,
        done,
        finished: false,
    }
}

impl Capture {
    /// Waits until the pipe is closed (every writer gone) or `until`; true if it is closed.
    fn wait(&mut self, until: Instant) -> bool {
        if !self.finished {
            let left = until.saturating_duration_since(Instant::now());
            self.finished = self.done.recv_timeout(left).is_ok();
        }
        self.finished
    }

    /// Everything read so far, as lossy UTF-8.
    fn text(&self) -> String {
        let bytes = self
            .buffer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

// ---------------------------------------------------------------------------------------------
// The billing server over HTTP

/// How long the server may take to print its `listening on` line.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

/// A `billing --in-memory --http 127.0.0.1:0` child process (fresh demo data: INV-1..INV-1000)
/// serving Streamable HTTP. Its stderr (logs) is kept for failure messages. Dropping it kills
/// the process, so the server stops with the test, also when the test panics.
pub(crate) struct BillingHttp {
    child: Child,
    url: String,
    logs: Arc<Mutex<String>>,
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
        let mut child = Command::new(billing_bin())
            .args(args)
            .args(["--http", "127.0.0.1:0"])
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", billing_bin().display()));
        let logs = Arc::new(Mutex::new(String::new()));
        let (url_tx, url_rx) = mpsc::channel();
        let stderr = child.stderr.take().expect("stderr is piped");
        let shared = Arc::clone(&logs);
        // Keeps draining stderr after the line, so the server never blocks on a full pipe.
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.strip_prefix("billing: listening on ") {
                    let _ = url_tx.send(url.trim().to_owned());
                }
                let mut logs = shared
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                logs.push_str(&line);
                logs.push('\n');
            }
        });
        let mut server = BillingHttp {
            child,
            url: String::new(),
            logs,
        };
        match url_rx.recv_timeout(LISTEN_TIMEOUT) {
            Ok(url) => server.url = url,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                "billing did not print `billing: listening on …` within {LISTEN_TIMEOUT:?}; stderr:\n{}",
                server.logs()
            ),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = server.child.wait().map(|status| status.to_string());
                panic!(
                    "billing exited ({}) before listening; stderr:\n{}",
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

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits at most `timeout` for the process to exit by itself (a failpoint aborted it, say);
    /// returns its exit status, or `None` if it is still running.
    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Everything the server wrote to stderr so far (its logs).
    pub(crate) fn logs(&self) -> String {
        self.logs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

impl BillingHttp {
    /// Sends SIGINT (what Ctrl-C sends) and waits at most `timeout` for the process to exit;
    /// returns its exit status, or `None` if it is still running.
    pub(crate) fn interrupt(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).ok()?)?;
        rustix::process::kill_process(pid, Signal::INT).ok()?;
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for BillingHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
                report: serde_json::from_str(json).ok(),
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
// testkit/conformance.sh

/// How long one `testkit/conformance.sh` run may take (normally 10–15 s).
pub(crate) const CONFORMANCE_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The outcome of one `testkit/conformance.sh` run.
#[derive(Debug)]
pub(crate) struct Conformance {
    /// The run itself.
    pub(crate) ran: Ran,
    /// Checks passed (`conformance: N passed, …`).
    pub(crate) passed: Option<u64>,
    /// Checks failed and not excused by the baseline (`…, M failed`).
    pub(crate) failed: Option<u64>,
    /// Failed checks the baseline excuses (`(K expected by baseline)`).
    pub(crate) baselined: Option<u64>,
    /// Scenarios that produced results (`scenarios: S; …`).
    pub(crate) scenarios: Option<u64>,
}

impl Conformance {
    /// Runs `testkit/conformance.sh <url> --spec <spec> --baseline <baseline> <scenarios...>`.
    pub(crate) fn run(url: &str, spec: &str, baseline: &Path, scenarios: &[&str]) -> Self {
        let mut command = testkit_script("conformance.sh");
        command
            .arg(url)
            .args(["--spec", spec, "--baseline"])
            .arg(baseline)
            .args(scenarios);
        let ran = run(&mut command, CONFORMANCE_TIMEOUT);
        let line = |prefix: &str| {
            ran.stdout
                .lines()
                .find_map(|line| line.strip_prefix(prefix))
                .map(str::to_owned)
        };
        let number_before = |text: &str, word: &str| -> Option<u64> {
            let (before, _) = text.split_once(word)?;
            before
                .split_whitespace()
                .last()?
                .trim_start_matches('(')
                .parse()
                .ok()
        };
        let last = line("conformance: ");
        let totals = line("scenarios: ");
        Conformance {
            passed: last.as_deref().and_then(|l| number_before(l, " passed")),
            failed: last.as_deref().and_then(|l| number_before(l, " failed")),
            baselined: totals
                .as_deref()
                .and_then(|l| number_before(l, " expected by baseline")),
            scenarios: totals
                .as_deref()
                .and_then(|l| l.split(';').next())
                .and_then(|n| n.trim().parse().ok()),
            ran,
        }
    }

    /// The per-scenario lines (`✓ tools-list: 4 passed, 0 failed`, …) with their failing checks.
    pub(crate) fn scenario_lines(&self) -> Vec<&str> {
        self.ran
            .stdout
            .lines()
            .filter(|line| !line.starts_with("conformance: ") && !line.starts_with("scenarios: "))
            .collect()
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
        serde_json::from_str(&self.body)
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
        let body = serde_json::json!({
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

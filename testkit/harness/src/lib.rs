//! The Rust side of `testkit/`: what the integration tests of the examples use to drive the
//! official MCP clients and the conformance suite (`testkit/README.md` says what they check and
//! print). One copy for every test crate, so that a fix to the timeout, the process-group kill
//! or the install lock reaches all of them.
//!
//! * Paths: [`workspace_root`], [`testkit_dir`], [`test_deps_dir`].
//! * [`ensure_testkit`]: runs `testkit/install.sh` once per test process, serialized across
//!   concurrently running test processes by a `flock` on `.test-deps/.install.lock`.
//! * [`run`]: runs a command in its own process group with a timeout and captures its output
//!   ([`Ran`]); [`testkit_script`] builds the command for a `testkit/*.sh` script.
//! * [`ServerHttp`]: a server under test on `127.0.0.1:<free port>`, killed when dropped.
//! * [`Conformance`]: runs `testkit/conformance.sh` and reads what it prints;
//!   [`require_every_check_passes`] runs it with no baseline and requires a clean pass,
//!   [`require_every_scenario_listed`] checks a test's scenario lists against the suite's.
//!
//! * [`postgres::TempPostgres`]: a temporary PostgreSQL cluster on 127.0.0.1.
//!
//! Unix only (process groups, `flock`); the testkit runs on Linux x64.
#![cfg(unix)]

pub mod postgres;

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

// ---------------------------------------------------------------------------------------------
// Paths

/// The cargo workspace root (`testkit/harness/../..`).
pub fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize()
        .unwrap_or_else(|error| panic!("workspace root {}: {error}", root.display()))
}

/// `<workspace>/testkit`: the scripts that drive the official clients.
pub fn testkit_dir() -> PathBuf {
    workspace_root().join("testkit")
}

/// Where `testkit/install.sh` puts the clients: `$FUSION_TEST_DEPS` if set (made absolute),
/// else `<workspace>/.test-deps`. Every command from [`testkit_script`] gets this exact path
/// in `FUSION_TEST_DEPS`, so the scripts and these helpers always agree.
pub fn test_deps_dir() -> PathBuf {
    match std::env::var_os("FUSION_TEST_DEPS") {
        Some(dir) if !dir.is_empty() => {
            std::path::absolute(PathBuf::from(dir)).expect("FUSION_TEST_DEPS is not a usable path")
        }
        _ => workspace_root().join(".test-deps"),
    }
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
pub fn ensure_testkit() {
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
pub fn testkit_script(script: &str) -> Command {
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
pub struct Ran {
    /// The command, as `Debug` prints it.
    pub command: String,
    /// Its exit status; `None` when it was killed for exceeding the timeout.
    pub status: Option<ExitStatus>,
    /// Everything it wrote to stdout (lossy UTF-8).
    pub stdout: String,
    /// Everything it wrote to stderr (lossy UTF-8).
    pub stderr: String,
    /// How long it ran.
    pub elapsed: Duration,
    /// The timeout it was given.
    pub timeout: Duration,
}

impl Ran {
    /// Exited by itself with status 0.
    pub fn success(&self) -> bool {
        self.status.is_some_and(|status| status.success())
    }

    /// Killed for exceeding its timeout.
    pub fn timed_out(&self) -> bool {
        self.status.is_none()
    }

    /// A readable account for a panic message: command, outcome, stdout and stderr (each
    /// limited to its last 30 000 characters).
    pub fn describe(&self) -> String {
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
pub fn tail(text: &str, max: usize) -> String {
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
pub fn run(command: &mut Command, timeout: Duration) -> Ran {
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
// testkit/conformance.sh

/// How long one `testkit/conformance.sh` run may take (about a minute for 40 scenarios on a
/// 2-core machine: the suite starts node once per scenario; longer when other tests load it).
pub const CONFORMANCE_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// The outcome of one `testkit/conformance.sh` run.
#[derive(Debug)]
pub struct Conformance {
    /// The run itself.
    pub ran: Ran,
    /// Checks passed (`conformance: N passed, …`).
    pub passed: Option<u64>,
    /// Checks failed and not excused by the baseline (`…, M failed`).
    pub failed: Option<u64>,
    /// Failed checks the baseline excuses (`(K expected by baseline)`).
    pub baselined: Option<u64>,
    /// Scenarios that produced results (`scenarios: S; …`).
    pub scenarios: Option<u64>,
}

impl Conformance {
    /// Runs `testkit/conformance.sh <url> --spec <spec> --baseline <baseline> <scenarios...>`;
    /// with no baseline (`--baseline none`) no failure is excused.
    pub fn run(url: &str, spec: &str, baseline: Option<&Path>, scenarios: &[&str]) -> Self {
        let mut command = testkit_script("conformance.sh");
        command.arg(url).args(["--spec", spec, "--baseline"]);
        match baseline {
            Some(baseline) => command.arg(baseline),
            None => command.arg("none"),
        };
        command.args(scenarios);
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

    /// The per-scenario lines (`✓ tools-list: 4 passed, 0 failed`, …) with their failing checks
    /// and warnings.
    pub fn scenario_lines(&self) -> Vec<&str> {
        self.ran
            .stdout
            .lines()
            .filter(|line| !line.starts_with("conformance: ") && !line.starts_with("scenarios: "))
            .collect()
    }

    /// The checks that ended as a WARNING: `(scenario, check id)`, read from the
    /// `    ! warning <id>: …` lines under each scenario's line.
    pub fn warnings(&self) -> Vec<(String, String)> {
        let mut scenario = String::new();
        let mut warnings = Vec::new();
        for line in self.scenario_lines() {
            if let Some(check) = line.trim_start().strip_prefix("! warning ") {
                let id = check.split(':').next().unwrap_or(check).trim();
                warnings.push((scenario.clone(), id.to_owned()));
            } else if !line.starts_with(' ') {
                // `✓ name: …`, `✗ name: …` or `~ name: …`.
                scenario = line
                    .split_once(' ')
                    .map(|(_, rest)| rest)
                    .and_then(|rest| rest.split(':').next())
                    .unwrap_or_default()
                    .to_owned();
            }
        }
        warnings
    }

    /// The suite's server scenarios for revision `spec` (`conformance.sh --list --spec <spec>`):
    /// the required ones and those run but not scored (pending, added after the release,
    /// extensions).
    pub fn server_scenarios(spec: &str) -> Vec<String> {
        let mut command = testkit_script("conformance.sh");
        command.args(["--list", "--spec", spec]);
        let ran = run(&mut command, Duration::from_secs(60));
        assert!(ran.success(), "conformance.sh --list: {}", ran.describe());
        let mut scenarios = Vec::new();
        let mut in_server_block = false;
        for line in ran.stdout.lines() {
            let trimmed = line.trim();
            if trimmed.starts_with("Server scenarios") {
                in_server_block = true;
            } else if trimmed.starts_with("Client scenarios") || trimmed.starts_with("Run and") {
                in_server_block = false;
            } else if let Some(item) = trimmed.strip_prefix("- ") {
                // Unscored entries say their side: `- name [server]`.
                match item.strip_suffix(" [server]") {
                    Some(name) => scenarios.push(name.to_owned()),
                    None if in_server_block => scenarios.push(item.to_owned()),
                    None => {}
                }
            }
        }
        scenarios
    }
}

// ---------------------------------------------------------------------------------------------
// A server over HTTP

/// How long the server may take to print its `listening on` line.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(30);

/// A server child process serving Streamable HTTP on 127.0.0.1, started by
/// [`ServerHttp::start`]. Its stderr (logs) is kept for failure messages. Dropping it kills the
/// process, so the server stops with the test, also when the test panics.
#[derive(Debug)]
pub struct ServerHttp {
    child: Child,
    url: String,
    logs: Arc<Mutex<String>>,
}

impl ServerHttp {
    /// Starts `command`, a server that prints `NAME: listening on http://…` on stderr (the
    /// way Fusion's example servers do), and waits (at most 30 s) for that line. Panics with
    /// its output if it exits or stays silent instead.
    pub fn start(mut command: Command, name: &str) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {command:?}: {error}"));
        let logs = Arc::new(Mutex::new(String::new()));
        let (url_tx, url_rx) = mpsc::channel();
        let stderr = child.stderr.take().expect("stderr is piped");
        let shared = Arc::clone(&logs);
        let listening = format!("{name}: listening on ");
        // Keeps draining stderr after the line, so the server never blocks on a full pipe.
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.strip_prefix(&listening) {
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
                "{name} did not print `listening on …` within {LISTEN_TIMEOUT:?}; stderr:\n{}",
                server.logs()
            ),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = server.child.wait().map(|status| status.to_string());
                panic!(
                    "{name} exited ({}) before listening; stderr:\n{}",
                    status.unwrap_or_else(|error| error.to_string()),
                    server.logs()
                )
            }
        }
        server
    }

    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits at most `timeout` for the process to exit by itself (a failpoint aborted it, say);
    /// returns its exit status, or `None` if it is still running.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Sends SIGINT (what Ctrl-C sends) and waits at most `timeout` for the process to exit;
    /// returns its exit status, or `None` if it is still running.
    pub fn interrupt(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).ok()?)?;
        rustix::process::kill_process(pid, Signal::INT).ok()?;
        self.wait_exit(timeout)
    }

    /// Everything the server wrote to stderr so far (its logs).
    pub fn logs(&self) -> String {
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

// ---------------------------------------------------------------------------------------------
// What the conformance tests require

/// `(spec, scenario, check, reason)`: a WARNING (a SHOULD the suite did not see met) a test
/// accepts, with the reason it is right (or out of reach) there.
pub type AcceptedWarning = (&'static str, &'static str, &'static str, &'static str);

/// Runs `scenarios` at `spec` against `server` with no baseline, prints the counts per scenario
/// and requires every check to pass, every scenario to have a passing result, and every
/// WARNING to be one of `accepted`. Failure messages carry the suite's output and the server's
/// logs.
pub fn require_every_check_passes(
    server: &ServerHttp,
    spec: &str,
    scenarios: &[&str],
    accepted: &[AcceptedWarning],
) {
    ensure_testkit();
    let run = Conformance::run(server.url(), spec, None, scenarios);
    let suite = std::fs::read_to_string(
        test_deps_dir().join("node/node_modules/@modelcontextprotocol/conformance/package.json"),
    )
    .ok()
    .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
    .and_then(|package| package["version"].as_str().map(str::to_owned))
    .unwrap_or_else(|| "?".into());
    let count = |n: Option<u64>| n.map_or_else(|| "?".to_owned(), |n| n.to_string());
    // One println: tests running in parallel must not interleave their lines.
    println!(
        "conformance {spec} (@modelcontextprotocol/conformance {suite}) at {}, Streamable HTTP, \
         no baseline: {} checks passed, {} failed, {} scenarios\n  {}",
        server.url(),
        count(run.passed),
        count(run.failed),
        count(run.scenarios),
        run.scenario_lines().join("\n  ")
    );
    let complete = run.ran.success()
        && run.failed == Some(0)
        && run.passed.is_some_and(|n| n > 0)
        && run.scenarios == Some(scenarios.len() as u64);
    let failure = |what: String| {
        format!(
            "conformance {spec}: {what}\n\n{}\n--- server stderr ({}) ---\n{}",
            run.ran.describe(),
            server.url(),
            tail(&server.logs(), 20_000)
        )
    };
    assert!(
        complete,
        "{}",
        failure(format!(
            "expected every check of these {} scenarios to pass: {}",
            scenarios.len(),
            scenarios.join(", ")
        ))
    );
    // Each scenario ran and passed (a scenario that produced no result has no line).
    for scenario in scenarios {
        let prefix = format!("✓ {scenario}: ");
        assert!(
            run.scenario_lines()
                .iter()
                .any(|line| line.starts_with(&prefix)),
            "{}",
            failure(format!("no passing result for `{scenario}`"))
        );
    }
    let unexpected: Vec<String> = run
        .warnings()
        .into_iter()
        .filter(|(scenario, check)| {
            !accepted
                .iter()
                .any(|&(at, s, c, _)| at == spec && s == scenario && c == check)
        })
        .map(|(scenario, check)| format!("{scenario}:{check}"))
        .collect();
    assert!(
        unexpected.is_empty(),
        "{}",
        failure(format!("WARNINGs not accepted: {}", unexpected.join(", ")))
    );
}

/// Requires `ours` (the scenarios a test runs at `spec`) and `left_out` (names or name
/// prefixes it does not run there) to cover every server scenario the suite has for `spec`,
/// and `ours` to hold none the suite does not have and none that is left out: a scenario the
/// suite adds is noticed.
pub fn require_every_scenario_listed(spec: &str, ours: &[&str], left_out: &[&str]) {
    ensure_testkit();
    let theirs = Conformance::server_scenarios(spec);
    assert!(!theirs.is_empty(), "{spec}: the suite listed no scenario");
    let is_left_out = |scenario: &str| left_out.iter().any(|prefix| scenario.starts_with(prefix));
    for scenario in &theirs {
        assert!(
            is_left_out(scenario) || ours.contains(&scenario.as_str()),
            "{spec}: the suite's server scenario `{scenario}` is neither run nor left out"
        );
    }
    for scenario in ours {
        assert!(
            theirs.iter().any(|theirs| theirs == scenario),
            "{spec}: `{scenario}` is not one of the suite's server scenarios: {theirs:?}"
        );
        assert!(
            !is_left_out(scenario),
            "{spec}: `{scenario}` is both run and left out"
        );
    }
}

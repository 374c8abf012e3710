//! A temporary PostgreSQL cluster for tests: `initdb` in a temp dir, `pg_ctl` on a free port of
//! 127.0.0.1 (as the `postgres` user when run as root), stopped when dropped. PostgreSQL is
//! installed with apt-get when missing and this runs as root; [`TempPostgres::start`] returns
//! `None` (saying why) when it still cannot be had, and the test then checks nothing.

use std::path::PathBuf;
use std::process::Command;

/// A started cluster; `pg_ctl stop -m immediate` on drop.
#[derive(Debug)]
pub struct TempPostgres {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    as_postgres: bool,
    /// The server's options (`pg_ctl -o`), to start it again the same way.
    options: String,
    _dir: tempfile::TempDir,
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The directory of `initdb` and `pg_ctl`: from `pg_config`, else the newest Debian layout.
fn postgres_bin() -> Option<PathBuf> {
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
        && out.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if dir.join("initdb").exists() {
            return Some(dir);
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .map(|entry| entry.path().join("bin"))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    found.sort();
    found.pop()
}

/// Installs PostgreSQL with apt-get once per process, as root only.
fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if postgres_bin().is_some() || !is_root() {
            return;
        }
        eprintln!("postgres: not installed; apt-get install -y postgresql");
        let _ = Command::new("sh")
            .args([
                "-c",
                "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql",
            ])
            .status();
    });
}

impl TempPostgres {
    /// A started cluster, or `None` (with the reason on stderr) when PostgreSQL cannot be had.
    pub fn start() -> Option<TempPostgres> {
        Self::start_with("")
    }

    /// Like [`TempPostgres::start`], with `settings` (`-c name=value`, space-separated) added to
    /// the server's options: a small `max_connections`, say.
    pub fn start_with(settings: &str) -> Option<TempPostgres> {
        install();
        let Some(bin) = postgres_bin() else {
            eprintln!("SKIPPED: PostgreSQL is not installed and could not be installed");
            return None;
        };
        let dir = tempfile::tempdir().expect("a temp dir");
        let as_postgres = is_root();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).expect("the data dir");
        if as_postgres {
            // initdb refuses to run as root: the cluster belongs to `postgres`.
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
            let chown = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&data)
                .status()
                .expect("chown");
            assert!(chown.success());
        }
        let mut cluster = TempPostgres {
            bin,
            data,
            port: free_port(),
            as_postgres,
            options: String::new(),
            _dir: dir,
        };
        let data = cluster.data.to_string_lossy().into_owned();
        cluster.run(
            "initdb",
            &[
                "-D",
                &data,
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        cluster.options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {data} -c fsync=off -c max_connections=200 \
             {settings}",
            cluster.port
        );
        cluster.pg_ctl_start();
        Some(cluster)
    }

    fn pg_ctl_start(&self) {
        let data = self.data.to_string_lossy().into_owned();
        let log = format!("{data}/log");
        self.run(
            "pg_ctl",
            &["-D", &data, "-o", &self.options, "-l", &log, "-w", "start"],
        );
    }

    /// Kills the server's postmaster with SIGKILL, as a crash or the OOM killer would: no
    /// shutdown, no checkpoint; its backends end as they notice.
    pub fn kill(&self) {
        let pid = std::fs::read_to_string(self.data.join("postmaster.pid"))
            .ok()
            .and_then(|file| file.lines().next()?.trim().parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw)
            .expect("the postmaster's pid in postmaster.pid");
        rustix::process::kill_process(pid, rustix::process::Signal::KILL)
            .expect("SIGKILL the postmaster");
    }

    /// Starts the server again after [`TempPostgres::kill`] (crash recovery replays its WAL),
    /// on the same port with the same options; retried for a few seconds while the killed
    /// server's backends still hold its shared memory.
    pub fn restart(&self) {
        let data = self.data.to_string_lossy().into_owned();
        let log = format!("{data}/log");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let out = self
                .command("pg_ctl")
                .args(["-D", &data, "-o", &self.options, "-l", &log, "-w", "start"])
                .output()
                .expect("run pg_ctl");
            if out.status.success() {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "pg_ctl start failed after a kill: {}{}",
                String::from_utf8_lossy(&out.stdout),
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// Runs one of PostgreSQL's programs (as `postgres` when run as root); panics with its
    /// output when it fails.
    pub fn run(&self, tool: &str, args: &[&str]) -> String {
        let out = self
            .command(tool)
            .args(args)
            .output()
            .expect("run a PostgreSQL tool");
        assert!(
            out.status.success(),
            "{tool} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// One of PostgreSQL's programs, to run as `postgres` when this runs as root.
    fn command(&self, tool: &str) -> Command {
        let program = self.bin.join(tool);
        if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        }
    }

    /// A new database named `name`, with `sql` run in it (`psql`, stopping at the first
    /// error); its URL.
    pub fn database_with(&self, name: &str, sql: &str) -> String {
        let port = self.port.to_string();
        self.run(
            "createdb",
            &["-h", "127.0.0.1", "-p", &port, "-U", "postgres", name],
        );
        if !sql.is_empty() {
            let url = self.url(name);
            self.run("psql", &[&url, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql]);
        }
        self.url(name)
    }

    /// The URL of database `database` of this cluster.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// The cluster's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        let data = self.data.to_string_lossy().into_owned();
        let _ = self
            .command("pg_ctl")
            .args(["-D", &data, "-m", "immediate", "-w", "stop"])
            .output();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}

//! Issue 26, item 4, across replicas: `deploy/replicas.sh` with `HOLD=1` sets up the cluster of
//! the deploy test (a temporary PostgreSQL, three billing replicas on it, nginx in front, on
//! 127.0.0.1; PostgreSQL and nginx installed with apt-get when missing) and keeps it up while
//! this test drives it with rmcp's stateless client. The export is slowed by the debug-only
//! `BILLING_EXPORT_HOLD_MS` (each of its ten batches waits) and the replicas vouch for their
//! tasks for 1.5 s (`--task-lease-ms`), so that:
//!
//! * an export started on replica 1 is read while it works, and its result once done, through
//!   replica 2, replica 3 and nginx (by 2025-11-25 session clients too); another tenant and a read-only token of the same tenant
//!   are told that no such task exists, through every replica;
//! * an export started on replica 1 and cancelled through replica 3 is cancelled as every
//!   replica tells, and replica 1's run of it stops (its log says so, well before the export
//!   would have finished);
//! * an export whose replica is killed (SIGKILL) while it works is reported `failed` through
//!   the others once its lease ran out, with a message that says what happened and nothing
//!   internal: never `working` for longer, never unknown.
//!
//! The script stops everything it started once this test closes its standard input (also when
//! the test panics).
#![cfg(unix)]

mod support;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::model::{CancelTaskParams, TaskPayload, TaskStatus};
use support::tasks::{
    Client, client, get, is_unknown_task, session_client, settled_within, start_export,
};

/// Each of the export's ten batches waits this long: an export takes about 3 s.
const EXPORT_HOLD_MS: u64 = 300;
/// How long a replica vouches for a task it runs.
const LEASE: Duration = Duration::from_millis(1500);

struct Replica {
    url: String,
    pid: u32,
    log: String,
}

/// The cluster `deploy/replicas.sh` holds up until [`Cluster`] is dropped.
struct Cluster {
    script: Child,
    hold: Option<ChildStdin>,
    replicas: Vec<Replica>,
    nginx: String,
}

impl Cluster {
    /// The cluster, or `None` when the script skipped (no PostgreSQL or nginx, not root).
    fn start() -> Option<Cluster> {
        support::ensure_testkit();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/replicas.sh");
        let mut child = Command::new("bash")
            .env("HOLD", "1")
            .env(
                "REPLICA_ARGS",
                format!("--task-lease-ms {}", LEASE.as_millis()),
            )
            .env("BILLING_EXPORT_HOLD_MS", EXPORT_HOLD_MS.to_string())
            // The replicas' logs tell where a run ended (at info, the default).
            .env("RUST_LOG", "info,rmcp=warn")
            .arg(script)
            .arg(support::billing_bin())
            .arg("3")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run deploy/replicas.sh");
        let hold = child.stdin.take();
        let mut lines = BufReader::new(child.stdout.take().expect("its stdout"));
        let (mut replicas, mut nginx, mut said) = (Vec::new(), None, String::new());
        loop {
            let mut line = String::new();
            if lines
                .read_line(&mut line)
                .expect("read the script's output")
                == 0
            {
                let status = child.wait().expect("the script's end");
                if status.code() == Some(77) {
                    eprintln!("SKIPPED: {said}");
                    return None;
                }
                panic!("deploy/replicas.sh ended before the cluster was up ({status}):\n{said}");
            }
            said.push_str(&line);
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["replica", _, port, pid, log] => replicas.push(Replica {
                    url: format!("http://127.0.0.1:{port}/mcp"),
                    pid: pid.parse().expect("a pid"),
                    log: (*log).to_owned(),
                }),
                ["nginx", port] => nginx = Some(format!("http://127.0.0.1:{port}/mcp")),
                ["CLUSTER", "READY"] => break,
                _ => {}
            }
        }
        assert_eq!(replicas.len(), 3, "{said}");
        Some(Cluster {
            script: child,
            hold,
            replicas,
            nginx: nginx.expect("nginx's port"),
        })
    }

    fn log(&self, replica: usize) -> String {
        std::fs::read_to_string(&self.replicas[replica].log).unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // The script's standard input closes: it stops everything and exits.
        drop(self.hold.take());
        let _ = self.script.wait();
    }
}

/// The writer of the demo tenant (`t_777`), the owner of every task here.
const OWNER: &str = "tok-a";
/// A writer of another tenant, and a read-only token of the owner's tenant.
const STRANGERS: [&str; 2] = ["tok-b", "tok-r"];

async fn status(client: &Client, id: &str) -> TaskStatus {
    get(client, id)
        .await
        .unwrap_or_else(|error| panic!("task {id}: {error}"))
        .task
        .status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_are_reached_cancelled_and_failed_through_any_replica() {
    let Some(cluster) = tokio::task::spawn_blocking(Cluster::start).await.unwrap() else {
        return;
    };
    let begun = Instant::now();
    let [one, two, three] = [0, 1, 2].map(|i| cluster.replicas[i].url.clone());
    let a = client(&one, OWNER).await;
    let b = client(&two, OWNER).await;
    let c = client(&three, OWNER).await;
    let lb = client(&cluster.nginx, OWNER).await;

    // Started on replica 1, read through the others while it works.
    let id = start_export(&a).await;
    for (name, other) in [("replica 2", &b), ("replica 3", &c), ("nginx", &lb)] {
        assert_eq!(status(other, &id).await, TaskStatus::Working, "{name}");
    }
    // Nobody else reaches it, through any replica.
    for url in [&one, &two, &three, &cluster.nginx] {
        for token in STRANGERS {
            let stranger = client(url, token).await;
            let read = get(&stranger, &id).await;
            assert!(
                read.as_ref().is_err_and(is_unknown_task),
                "{token} at {url}: {read:?}"
            );
            let cancel = stranger
                .peer()
                .cancel_task(CancelTaskParams::new(&id))
                .await;
            assert!(
                cancel.as_ref().is_err_and(is_unknown_task),
                "{token} at {url}: {cancel:?}"
            );
        }
    }
    // Its result, fetched through replica 2, then the same through replica 3 and nginx.
    let done = settled_within(&b, &id, Duration::from_secs(20)).await;
    let TaskPayload::Completed { result } = &done.task.payload else {
        panic!("the export completed: {done:?}");
    };
    assert_eq!(result["structuredContent"]["data"]["rows"], 1000);
    let csv = result["structuredContent"]["data"]["csv"].as_str().unwrap();
    assert_eq!(csv.lines().count(), 1001);
    for (name, other) in [("replica 3", &c), ("nginx", &lb), ("replica 1", &a)] {
        let again = get(other, &id).await.expect("the owner reads its task");
        assert_eq!(again.task, done.task, "{name}");
    }
    // And by a 2025-11-25 session client, through nginx (pinned to whichever replica holds its
    // session) and on replica 2.
    for url in [&cluster.nginx, &two] {
        let session = session_client(url, OWNER).await;
        let again = get(&session, &id).await.expect("the owner reads its task");
        assert_eq!(again.task, done.task, "a session at {url}");
    }
    eprintln!(
        "replica tasks: started on 1, completed as 2, 3 and nginx tell ({:?})",
        begun.elapsed()
    );

    // Started on replica 1, cancelled through replica 3.
    let cancelled = start_export(&a).await;
    assert_eq!(status(&b, &cancelled).await, TaskStatus::Working);
    let asked = Instant::now();
    c.peer()
        .cancel_task(CancelTaskParams::new(&cancelled))
        .await
        .expect("the owner cancels through replica 3");
    for (name, other) in [
        ("replica 1", &a),
        ("replica 2", &b),
        ("replica 3", &c),
        ("nginx", &lb),
    ] {
        assert_eq!(
            status(other, &cancelled).await,
            TaskStatus::Cancelled,
            "{name}"
        );
    }
    // Replica 1 hears of it at its next renewal (a third of a lease) and its run stops there,
    // long before the export's ten batches would have ended.
    let ended = format!("task={cancelled} status=\"cancelled\"");
    let stopped = loop {
        let log = cluster.log(0);
        if log.contains(&ended) {
            break asked.elapsed();
        }
        assert!(
            !log.contains(&format!("task={cancelled}")),
            "replica 1's run of the cancelled export did not end cancelled:\n{log}"
        );
        assert!(
            asked.elapsed() < LEASE * 2,
            "replica 1 still runs the export cancelled through replica 3:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        stopped < Duration::from_millis(EXPORT_HOLD_MS * 10),
        "{stopped:?}"
    );
    eprintln!("replica tasks: cancelled through 3; replica 1's run stopped {stopped:?} later");

    // Started on replica 1, which is killed while the export works.
    let orphan = start_export(&a).await;
    tokio::time::sleep(Duration::from_millis(EXPORT_HOLD_MS)).await;
    assert_eq!(status(&b, &orphan).await, TaskStatus::Working);
    let killed = Instant::now();
    let kill = Command::new("kill")
        .args(["-KILL", &cluster.replicas[0].pid.to_string()])
        .status()
        .expect("run kill");
    assert!(kill.success(), "replica 1 was not killed");
    // Working (never unknown) until its lease runs out, then failed.
    let failed = settled_within(&b, &orphan, LEASE * 4).await;
    let noticed = killed.elapsed();
    assert!(noticed <= LEASE + Duration::from_secs(2), "{noticed:?}");
    let TaskPayload::Failed { error } = &failed.task.payload else {
        panic!("the orphaned export failed: {failed:?}");
    };
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("stopped before it finished"), "{error:?}");
    assert_eq!(failed.task.task.status_message.as_deref(), Some(message));
    let said = format!("{failed:?}").to_lowercase();
    for internal in ["fusion_tasks", "postgres", "panic", "lease", "sql", "r1"] {
        assert!(!said.contains(internal), "{internal} in {failed:?}");
    }
    let session = session_client(&three, OWNER).await;
    for (name, other) in [
        ("replica 3", &c),
        ("nginx", &lb),
        ("a session on 3", &session),
    ] {
        let again = get(other, &orphan).await.expect("the owner reads its task");
        assert_eq!(again.task, failed.task, "{name}");
    }
    eprintln!(
        "replica tasks: replica 1 killed; its export reported failed {noticed:?} later \
         (lease {LEASE:?}); whole test {:?}",
        begun.elapsed()
    );
}

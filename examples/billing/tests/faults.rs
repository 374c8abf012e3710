//! The billing binary under faults and hostile clients, over real HTTP with an on-disk store:
//!
//! * another process holds the database's write lock: only the writes wait, and they fail
//!   retryably within a bound, while reads, other tenants and calls that never touch the
//!   database stay fast;
//! * the audit record cannot be written: no write is acknowledged without it;
//! * the process dies between a change and its audit record (a failpoint aborts it there):
//!   after a restart, the change and its record are both there or both absent;
//! * a create retried with its idempotency key (also after a crash that lost the answer)
//!   returns the first invoice and writes nothing;
//! * megabyte arguments are refused, never stored or echoed;
//! * invoice numbers say nothing about another tenant;
//! * the database is private to its owner; tokens never need the command line;
//! * in process: a full database fails writes retryably and never acknowledges one without its
//!   audit record; every string argument's limit is in the input schema.
//!
//! Run them against another build with `BILLING_UNDER_TEST=/path/to/billing` (see
//! `support::billing_bin`); latencies are printed with `--nocapture`.
#![cfg(unix)]

mod support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use std::sync::Arc;

use billing::{Store, local_principal};
use fusion::audit::SqliteAuditSink;
use fusion::serde_json::{Value, json};
use fusion::testing::Tester;
use support::{Answer, BillingHttp, Caller};

const ALPHA: &str = "alpha-token-5e1d";
const BETA: &str = "beta-token-90c7";

/// `billing --data-dir <data> --token … --http 127.0.0.1:0`, with `env`.
fn serve(data: &Path, env: &[(&str, &str)]) -> BillingHttp {
    let data = data.to_str().expect("a UTF-8 path").to_owned();
    let alpha = format!("--token={ALPHA}=t_777");
    let beta = format!("--token={BETA}=t_other");
    BillingHttp::spawn_with_env(&["--data-dir", &data, &alpha, &beta], env)
}

/// [`serve`] started off the runtime's threads (it waits for the `listening on` line).
async fn serve_async(data: &Path, env: &[(&str, &str)]) -> BillingHttp {
    let data = data.to_path_buf();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env
            .iter()
            .map(|(key, value)| (key.as_str(), value.as_str()))
            .collect();
        serve(&data, &env)
    })
    .await
    .expect("the server starts")
}

fn database(data: &Path) -> rusqlite::Connection {
    let connection = rusqlite::Connection::open(data.join("billing.sqlite3")).unwrap();
    connection.busy_timeout(Duration::from_secs(5)).unwrap();
    connection
}

fn ok(answer: &Answer) -> &Answer {
    let envelope = answer.envelope();
    assert_eq!(envelope["ok"], true, "{envelope}");
    answer
}

/// How many audit records an action has.
fn audited(data: &Path, action: &str) -> i64 {
    database(data)
        .query_row(
            "SELECT COUNT(*) FROM audit_events WHERE action = ?1",
            [action],
            |row| row.get(0),
        )
        .unwrap()
}

/// The tenant's invoice count, from the stats tool.
async fn count(caller: &Caller) -> u64 {
    let stats = caller
        .call("billing_invoice_stats", json!({}))
        .await
        .envelope();
    stats["data"]["by_status"]
        .as_array()
        .unwrap_or_else(|| panic!("{stats}"))
        .iter()
        .map(|line| line["count"].as_u64().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_held_database_lock_stalls_only_the_writes_that_need_it() {
    let data = tempfile::tempdir().unwrap();
    let server = serve_async(data.path(), &[]).await;
    let (alpha, beta) = (
        Caller::new(&server, Some(ALPHA)),
        Caller::new(&server, Some(BETA)),
    );
    ok(&beta
        .call(
            "billing_create_invoice",
            json!({"customer_id": "C-b", "total_cents": 1}),
        )
        .await);

    // Another process takes the write lock and keeps it.
    let holder = database(data.path());
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let held = Instant::now();

    // Four creates in flight, as the outside tester had.
    let creates: Vec<_> = (0..4)
        .map(|n| {
            let caller = if n % 2 == 0 {
                alpha.clone()
            } else {
                beta.clone()
            };
            tokio::spawn(async move {
                let started = Instant::now();
                let answer = caller
                    .call(
                        "billing_create_invoice",
                        json!({"customer_id": format!("C-{n}"), "total_cents": 100}),
                    )
                    .await;
                (started.elapsed(), answer.envelope())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(150)).await;

    // Calls that do not need the write lock answer at once: a call that never touches the
    // database, reads, and another tenant's list.
    let unrelated = [
        (&alpha, "billing_statuses", json!({})),
        (&alpha, "billing_get_invoice", json!({"id": "INV-7"})),
        (&beta, "billing_list_invoices", json!({"limit": 5})),
        (&alpha, "billing_invoice_stats", json!({})),
        (
            &alpha,
            "billing_list_invoices",
            json!({"status": "open", "limit": 5}),
        ),
    ];
    let mut latencies = Vec::new();
    for (caller, tool, arguments) in unrelated {
        let started = Instant::now();
        let answer = caller.call(tool, arguments).await;
        let took = started.elapsed();
        ok(&answer);
        latencies.push((tool, took));
    }
    println!("while the lock is held, unrelated calls took: {latencies:?}");
    for (tool, took) in &latencies {
        assert!(
            *took < Duration::from_millis(500),
            "{tool} took {took:?} while another process held the write lock"
        );
    }

    // The writes that needed the lock fail within a bound, retryably, with a retry window.
    let mut waits = Vec::new();
    for create in creates {
        let (took, envelope) = create.await.unwrap();
        waits.push(took);
        assert_eq!(envelope["ok"], false, "{envelope}");
        assert_eq!(envelope["error"]["code"], "StoreUnavailable", "{envelope}");
        assert_eq!(envelope["error"]["retryable"], true, "{envelope}");
        assert!(
            envelope["error"]["retryAfterMs"].as_u64().unwrap_or(0) > 0,
            "{envelope}"
        );
        assert!(
            took < Duration::from_secs(3),
            "a blocked write answered after {took:?}"
        );
    }
    println!(
        "the blocked creates answered StoreUnavailable after {waits:?} (lock held for {:?})",
        held.elapsed()
    );
    holder.execute_batch("ROLLBACK").unwrap();

    // Nothing was written meanwhile; once the lock is gone, the retry succeeds.
    assert_eq!(count(&beta).await, 1);
    ok(&alpha
        .call(
            "billing_create_invoice",
            json!({"customer_id": "C-0", "total_cents": 100}),
        )
        .await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flood_of_writes_against_a_held_lock_is_answered_within_a_bound() {
    let data = tempfile::tempdir().unwrap();
    let server = serve_async(data.path(), &[]).await;
    let alpha = Caller::new(&server, Some(ALPHA));
    let holder = database(data.path());
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let flood: Vec<_> = (0..150)
        .map(|n| {
            let alpha = alpha.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let answer = alpha
                    .call(
                        "billing_create_invoice",
                        json!({"customer_id": format!("C-{n}"), "total_cents": 1}),
                    )
                    .await;
                (started.elapsed(), answer.error_code())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    ok(&alpha
        .call("billing_get_invoice", json!({"id": "INV-7"}))
        .await);
    let read = started.elapsed();
    let mut slowest = Duration::ZERO;
    for call in flood {
        let (took, code) = call.await.unwrap();
        slowest = slowest.max(took);
        // Retryable either way: the store's window, or the tool's capacity.
        assert!(
            matches!(code.as_deref(), Some("StoreUnavailable" | "SERVER_BUSY")),
            "{code:?}"
        );
    }
    println!(
        "150 creates against a held lock: a read took {read:?}, the slowest create {slowest:?}"
    );
    assert!(read < Duration::from_millis(500), "a read took {read:?}");
    assert!(
        slowest < Duration::from_secs(4),
        "a create took {slowest:?}"
    );
    holder.execute_batch("ROLLBACK").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_audit_write_never_answers_plain_success() {
    let data = tempfile::tempdir().unwrap();
    let server = serve_async(data.path(), &[]).await;
    let alpha = Caller::new(&server, Some(ALPHA));
    let total_of = |answer: &Answer| answer.envelope()["data"]["total_cents"].clone();
    let before = total_of(
        &alpha
            .call("billing_get_invoice", json!({"id": "INV-3"}))
            .await,
    );

    // The audit table refuses every record, as a full disk would.
    database(data.path())
        .execute_batch(
            "CREATE TRIGGER audit_refused BEFORE INSERT ON audit_events \
             BEGIN SELECT RAISE(ABORT, 'database or disk is full (simulated)'); END;",
        )
        .unwrap();
    let calls = [
        (
            "billing_update_invoice",
            json!({"id": "INV-3", "total_cents": 4242}),
        ),
        ("billing_void_invoice", json!({"id": "INV-6"})),
        (
            "billing_create_invoice",
            json!({"customer_id": "C-1", "total_cents": 5}),
        ),
        // Recorded by the server's audit sink rather than in the store's transaction.
        ("billing_send_reminder", json!({"id": "INV-4"})),
    ];
    for (tool, arguments) in calls {
        let envelope = alpha.call(tool, arguments).await.envelope();
        assert_eq!(
            envelope["ok"], false,
            "{tool} answered success without its audit record: {envelope}"
        );
        // Not retryable: `retryable` is said only when true.
        assert_eq!(envelope["error"].get("retryable"), None, "{envelope}");
    }
    // The store's writes rolled back with their records.
    assert_eq!(
        total_of(
            &alpha
                .call("billing_get_invoice", json!({"id": "INV-3"}))
                .await
        ),
        before
    );
    assert_eq!(
        alpha
            .call("billing_get_invoice", json!({"id": "INV-6"}))
            .await
            .envelope()["data"]["status"],
        "open"
    );
    assert_eq!(count(&alpha).await, 1000);

    // Once records can be written again, so can changes, each with its record.
    database(data.path())
        .execute_batch("DROP TRIGGER audit_refused")
        .unwrap();
    ok(&alpha
        .call(
            "billing_update_invoice",
            json!({"id": "INV-3", "total_cents": 4242}),
        )
        .await);
    assert_eq!(audited(data.path(), "billing.update_invoice"), 1);
}

/// Runs `tool` with the process aborting at `failpoint`; returns the data directory's state
/// once it is dead.
async fn crash_at(data: &Path, failpoint: &str, tool: &str, arguments: Value) {
    let mut server = serve_async(data, &[("BILLING_FAILPOINT", failpoint)]).await;
    let caller = Caller::new(&server, Some(ALPHA));
    let answer = caller
        .try_call(tool, arguments, Duration::from_secs(10))
        .await;
    assert!(
        answer.is_err(),
        "the failpoint `{failpoint}` did not stop the server: {}",
        answer.map(|answer| answer.body).unwrap_or_default()
    );
    let status = server
        .wait_exit(Duration::from_secs(10))
        .unwrap_or_else(|| {
            panic!(
                "still running after the failpoint; logs:\n{}",
                server.logs()
            )
        });
    assert!(!status.success(), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_a_change_and_its_audit_record_leaves_neither() {
    let data = tempfile::tempdir().unwrap();
    // Seed the database first (the failpoint must not hit the seeding).
    drop(serve_async(data.path(), &[]).await);

    crash_at(
        data.path(),
        "between-change-and-audit",
        "billing_update_invoice",
        json!({"id": "INV-3", "total_cents": 4242}),
    )
    .await;
    let total: i64 = database(data.path())
        .query_row(
            "SELECT total_cents FROM invoices WHERE id = 'INV-3' AND tenant_id = 't_777'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    let records = audited(data.path(), "billing.update_invoice");
    assert_eq!(
        (total == 4242, records),
        (false, 0),
        "after the crash: total {total}, {records} audit record(s)"
    );

    crash_at(
        data.path(),
        "between-change-and-audit",
        "billing_create_invoice",
        json!({"customer_id": "C-crash", "total_cents": 7}),
    )
    .await;
    let created: i64 = database(data.path())
        .query_row(
            "SELECT COUNT(*) FROM invoices WHERE customer_id = 'C-crash'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(
        (created, audited(data.path(), "billing.create_invoice")),
        (0, 0)
    );

    // After a crash past the commit, the change and its record are both there.
    crash_at(
        data.path(),
        "after-commit",
        "billing_void_invoice",
        json!({"id": "INV-6"}),
    )
    .await;
    let status: String = database(data.path())
        .query_row(
            "SELECT status FROM invoices WHERE id = 'INV-6' AND tenant_id = 't_777'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(
        (
            status.as_str(),
            audited(data.path(), "billing.void_invoice")
        ),
        ("voided", 1)
    );

    // The restarted server serves, and audits, as before.
    let server = serve_async(data.path(), &[]).await;
    ok(&Caller::new(&server, Some(ALPHA))
        .call(
            "billing_update_invoice",
            json!({"id": "INV-3", "total_cents": 4242}),
        )
        .await);
    assert_eq!(audited(data.path(), "billing.update_invoice"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_create_with_its_idempotency_key_returns_the_first_invoice() {
    let data = tempfile::tempdir().unwrap();
    drop(serve_async(data.path(), &[]).await);

    // The first attempt commits, then the process dies before answering.
    let request =
        json!({"customer_id": "C-7", "total_cents": 1250, "idempotency_key": "order-7-attempt"});
    crash_at(
        data.path(),
        "after-commit",
        "billing_create_invoice",
        request.clone(),
    )
    .await;
    let server = serve_async(data.path(), &[]).await;
    let (alpha, beta) = (
        Caller::new(&server, Some(ALPHA)),
        Caller::new(&server, Some(BETA)),
    );
    assert_eq!(count(&alpha).await, 1001, "the first attempt committed");

    // The agent retries with the same key: the invoice the lost answer was about.
    let retried = alpha.call("billing_create_invoice", request.clone()).await;
    let first = ok(&retried).envelope()["data"].clone();
    assert_eq!(first["id"], "INV-1001", "{first}");
    assert_eq!(first["customer_id"], "C-7");
    assert_eq!(count(&alpha).await, 1001, "the retry wrote nothing");

    // Any number of concurrent retries: still one invoice.
    let retries: Vec<_> = (0..8)
        .map(|_| {
            let (alpha, request) = (alpha.clone(), request.clone());
            tokio::spawn(async move { alpha.call("billing_create_invoice", request).await })
        })
        .collect();
    for retry in retries {
        assert_eq!(ok(&retry.await.unwrap()).envelope()["data"], first);
    }
    assert_eq!(count(&alpha).await, 1001);

    // The same key with other arguments is a mistake, refused rather than guessed at.
    let reused = alpha
        .call(
            "billing_create_invoice",
            json!({"customer_id": "C-7", "total_cents": 999, "idempotency_key": "order-7-attempt"}),
        )
        .await;
    assert_eq!(
        reused.error_code().as_deref(),
        Some("IdempotencyKeyReused"),
        "{}",
        reused.body
    );
    // Keys belong to their tenant: another tenant's same key is its own invoice.
    let other = beta.call("billing_create_invoice", request.clone()).await;
    assert_eq!(ok(&other).envelope()["data"]["id"], "INV-1");
    assert_eq!(count(&alpha).await, 1001);
    assert_eq!(count(&beta).await, 1);
    // A new key is a new invoice.
    let next = alpha
        .call(
            "billing_create_invoice",
            json!({"customer_id": "C-7", "total_cents": 1250, "idempotency_key": "order-8"}),
        )
        .await;
    assert_eq!(ok(&next).envelope()["data"]["id"], "INV-1002");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn megabyte_arguments_are_refused_never_stored_or_echoed() {
    let data = tempfile::tempdir().unwrap();
    let server = serve_async(data.path(), &[]).await;
    let alpha = Caller::new(&server, Some(ALPHA));
    let huge = "C".repeat(3_000_000);
    let calls = [
        (
            "billing_create_invoice",
            json!({"customer_id": huge, "total_cents": 5}),
        ),
        ("billing_get_invoice", json!({"id": huge})),
        ("billing_void_invoice", json!({"id": huge})),
        (
            "billing_update_invoice",
            json!({"id": huge, "total_cents": 5}),
        ),
        ("billing_send_reminder", json!({"id": huge})),
        (
            "billing_create_invoice",
            json!({"customer_id": "C-1", "total_cents": 5, "idempotency_key": huge}),
        ),
    ];
    for (tool, arguments) in calls {
        let answer = alpha.call(tool, arguments).await;
        assert_eq!(answer.status, 200);
        assert_eq!(
            answer.error_code().as_deref(),
            Some("VALIDATION_ERROR"),
            "{tool}: {}",
            support::tail(&answer.body, 500)
        );
        assert!(
            answer.body.len() < 16 * 1024,
            "{tool} echoed {} bytes",
            answer.body.len()
        );
    }
    assert_eq!(count(&alpha).await, 1000, "nothing was stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invoice_numbers_say_nothing_about_another_tenant() {
    let data = tempfile::tempdir().unwrap();
    let server = serve_async(data.path(), &[]).await;
    let (alpha, beta) = (
        Caller::new(&server, Some(ALPHA)),
        Caller::new(&server, Some(BETA)),
    );
    let create = |caller: &Caller| {
        let caller = caller.clone();
        async move {
            let answer = caller
                .call(
                    "billing_create_invoice",
                    json!({"customer_id": "C-1", "total_cents": 5}),
                )
                .await;
            ok(&answer).envelope()["data"]["id"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    // Tenant t_777 has 1,000 invoices; t_other's first is still its number 1.
    assert_eq!(create(&beta).await, "INV-1");
    for _ in 0..3 {
        create(&alpha).await;
    }
    assert_eq!(create(&beta).await, "INV-2");
    assert_eq!(create(&alpha).await, "INV-1004");
    // Each tenant's INV-1 is its own.
    let alpha_first = alpha
        .call("billing_get_invoice", json!({"id": "INV-1"}))
        .await
        .envelope();
    assert_eq!(alpha_first["data"]["customer_id"], "C-1", "{alpha_first}");
    assert_eq!(alpha_first["data"]["total_cents"], 7919);
}

#[test]
fn the_database_is_private_to_its_owner() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("nested/billing");
    let mut server = serve(&dir, &[]);
    // WAL and shared-memory files exist while the server runs.
    let mode = |path: &Path| {
        std::fs::metadata(path)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode(&dir), 0o700, "the data directory");
    for file in [
        "billing.sqlite3",
        "billing.sqlite3-wal",
        "billing.sqlite3-shm",
    ] {
        assert_eq!(mode(&dir.join(file)), 0o600, "{file}");
    }
    server.interrupt(Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_come_from_a_file_or_the_environment_never_the_command_line() {
    let data = tempfile::tempdir().unwrap();
    let file = data.path().join("tokens");
    std::fs::write(
        &file,
        format!("# billing tokens\n{ALPHA}=t_777\n\n{BETA}=t_other:read\n"),
    )
    .unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let path = file.to_str().unwrap().to_owned();
    let from_file = tokio::task::spawn_blocking(move || {
        BillingHttp::spawn_exactly(&["--in-memory", "--token-file", &path])
    })
    .await
    .unwrap();
    let from_env = tokio::task::spawn_blocking(|| {
        BillingHttp::spawn_with_env(
            &["--in-memory"],
            &[("BILLING_TOKENS", &format!("{ALPHA}=t_777"))],
        )
    })
    .await
    .unwrap();
    for server in [&from_file, &from_env] {
        let answer = Caller::new(server, Some(ALPHA))
            .call("billing_get_invoice", json!({"id": "INV-7"}))
            .await;
        ok(&answer);
        let refused = Caller::new(server, Some("not-a-token"))
            .try_call("billing_statuses", json!({}), Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(refused.status, 401);
        let command_line = std::fs::read(format!("/proc/{}/cmdline", server.pid())).unwrap();
        let command_line = String::from_utf8_lossy(&command_line);
        assert!(!command_line.contains(ALPHA), "{command_line}");
    }
    // The file's read-only token is read-only.
    let reader = Caller::new(&from_file, Some(BETA));
    assert_eq!(
        reader
            .call("billing_void_invoice", json!({"id": "INV-3"}))
            .await
            .error_code()
            .as_deref(),
        Some("FORBIDDEN")
    );
    // `--help` says why.
    let help = std::process::Command::new(support::billing_bin())
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--token-file"), "{help}");
    assert!(help.contains("process list"), "{help}");
}

/// The billing server over `store` as the binary builds it (audit trail in the database),
/// acting for the demo tenant.
fn in_process(store: &Arc<Store>) -> Tester {
    let sink = SqliteAuditSink::open(store.path().expect("an on-disk store")).unwrap();
    let server = billing::builder(Arc::clone(store))
        .audit(sink)
        .build()
        .expect("the billing server builds");
    Tester::new(server).with_context(|call| {
        call.extensions_mut().insert(local_principal());
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_database_never_acknowledges_a_write_without_its_record() {
    let data = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(data.path()).unwrap());
    let tester = in_process(&store);
    let size = std::fs::metadata(data.path().join("billing.sqlite3"))
        .unwrap()
        .len();
    store.set_max_size(size).unwrap();

    // Creates until the database is full: the failure is retryable, with a retry window.
    let mut acknowledged = 0;
    let full = loop {
        let created = tester
            .call(
                "billing.create_invoice",
                json!({"customer_id": "C-full-and-a-long-customer-id-to-fill-pages", "total_cents": 1}),
            )
            .await;
        if created.is_error() {
            break created;
        }
        acknowledged += 1;
        assert!(acknowledged < 100_000, "the cap never filled");
    };
    assert_eq!(
        full.error_code(),
        Some("StoreUnavailable"),
        "{}",
        full.raw_text()
    );
    assert_eq!(full.error()["retryable"], true);
    assert!(full.error()["retryAfterMs"].as_u64().unwrap() > 0);

    // Updates on a full database: each is acknowledged with its record, or changes nothing.
    let mut updated = 0;
    for n in (3..=300).step_by(3) {
        let id = format!("INV-{n}");
        let answer = tester
            .call(
                "billing.update_invoice",
                json!({"id": id, "total_cents": 4242}),
            )
            .await;
        let total = store.get("t_777", &id).unwrap().unwrap().total_cents;
        if answer.is_error() {
            assert_eq!(answer.error_code(), Some("StoreUnavailable"));
            assert_ne!(total, 4242, "{id} changed without an acknowledgement");
        } else {
            updated += 1;
            assert_eq!(total, 4242);
        }
    }
    println!("full database: {acknowledged} creates and {updated} of 100 updates acknowledged");
    assert_eq!(store.count("t_777", None).unwrap(), 1000 + acknowledged);
    assert_eq!(
        audited(data.path(), "billing.create_invoice"),
        i64::try_from(acknowledged).unwrap()
    );
    assert_eq!(audited(data.path(), "billing.update_invoice"), updated);
}

#[tokio::test]
async fn every_string_argument_has_its_limit_in_the_input_schema() {
    let store = Arc::new(Store::open_in_memory().unwrap());
    let server = billing::server(store, fusion::Exposition::Flat).unwrap();
    let limit = |tool: &str, argument: &str| {
        server.tool(tool).unwrap().definition().input_schema["properties"][argument]["maxLength"]
            .as_u64()
    };
    assert_eq!(limit("billing_create_invoice", "customer_id"), Some(64));
    assert_eq!(
        limit("billing_create_invoice", "idempotency_key"),
        Some(128)
    );
    for tool in [
        "billing_get_invoice",
        "billing_void_invoice",
        "billing_update_invoice",
        "billing_send_reminder",
    ] {
        assert_eq!(limit(tool, "id"), Some(32), "{tool}");
    }
    // The description tells agents how to retry a create.
    let description = server
        .tool("billing_create_invoice")
        .unwrap()
        .definition()
        .description
        .clone()
        .unwrap_or_default();
    assert!(description.contains("idempotency_key"), "{description}");
}

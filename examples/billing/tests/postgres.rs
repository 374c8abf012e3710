//! The PostgreSQL store (issue 16) against a real, temporary PostgreSQL: the same behaviour as
//! the SQLite store where it applies (seed, tenancy, per-tenant numbers, idempotency keys,
//! audit in the same transaction), migrations once when replicas start together, and the
//! serialization of one invoice's voids across three servers on one database.
//!
//! Each test starts its own cluster (the harness's `TempPostgres`: `initdb` in a temp dir,
//! `pg_ctl` on a free port of 127.0.0.1, as the `postgres` user when run as root) and stops it
//! when done. PostgreSQL is installed with apt-get when missing and this runs as root; a test
//! that still finds no PostgreSQL says so and passes without checking anything.
#![cfg(unix)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use testkit_harness::postgres::TempPostgres;

use billing::{Created, Invoices, NewInvoice, PgLock, PgStore, Status, VoidOutcome};
use fusion::audit::AuditRecord;
use fusion::serde_json::json;
use fusion::testing::Tester;
use fusion::{Principal, ToolError};

fn audit(action: &str, tenant: &str) -> AuditRecord {
    AuditRecord {
        at: std::time::SystemTime::now(),
        tool: action.replace('.', "_"),
        action: action.to_owned(),
        principal: Some(format!("token:{tenant}")),
        tenant: Some(tenant.to_owned()),
        arguments_digest: "digest".into(),
        outcome: "ok",
        duration: std::time::Duration::from_millis(1),
    }
}

async fn audit_count(url: &str, action: &str, outcome: &str) -> i64 {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
        .query_one(
            "SELECT count(*) FROM audit_events WHERE action = $1 AND outcome = $2",
            &[&action, &outcome],
        )
        .await
        .expect("count audit records")
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_starting_together_migrate_and_seed_once_and_tenants_stay_apart() {
    let Some(pg) = TempPostgres::start() else {
        return;
    };
    let url = pg.database_with("seed", "");
    // Three replicas start at once: one migrates and seeds, the others find it done.
    let (a, b, c) = tokio::join!(
        PgStore::connect(&url, 4),
        PgStore::connect(&url, 4),
        PgStore::connect(&url, 4)
    );
    let (a, _b, _c) = (a.unwrap(), b.unwrap(), c.unwrap());
    let (page, total) = a.page("t_777", None, 0, 3).await.unwrap();
    assert_eq!(total, 1000);
    let ids: Vec<&str> = page.iter().map(|invoice| invoice.id.as_str()).collect();
    assert_eq!(ids, ["INV-1", "INV-2", "INV-3"]);
    // The SQLite seed's formula.
    let seven = a.get("t_777", "INV-7").await.unwrap().unwrap();
    assert_eq!(seven.customer_id, "C-7");
    assert_eq!(seven.total_cents, 55_433, "(7 * 7919) % 100000");
    assert_eq!(seven.status, Status::Paid);
    assert_eq!(seven.webhook_secret.expose(), "whsec_7");
    let (open, open_total) = a.page("t_777", Some(Status::Open), 0, 1).await.unwrap();
    assert_eq!(open_total, 333);
    assert_eq!(open[0].id, "INV-3");
    let totals = a.totals_by_status("t_777").await.unwrap();
    assert_eq!(totals.iter().map(|t| t.1).sum::<u64>(), 1000);
    // Completing an id: an exact prefix, in number order, at most the limit.
    assert_eq!(
        a.ids_with_prefix("t_777", "INV-99", 3).await.unwrap(),
        ["INV-99", "INV-990", "INV-991"]
    );
    assert_eq!(
        a.ids_with_prefix("t_777", "INV-1", 200)
            .await
            .unwrap()
            .len(),
        112
    );
    assert!(
        a.ids_with_prefix("t_777", "inv-", 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        a.ids_with_prefix("t_777", "INV-_", 10)
            .await
            .unwrap()
            .is_empty()
    );
    // Another tenant sees none of it, and cannot change it.
    assert!(
        a.ids_with_prefix("t_other", "INV-", 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(a.get("t_other", "INV-7").await.unwrap(), None);
    assert_eq!(a.page("t_other", None, 0, 10).await.unwrap().1, 0);
    assert!(
        a.totals_by_status("t_other")
            .await
            .unwrap()
            .iter()
            .all(|t| t.1 == 0)
    );
    assert_eq!(
        a.void(
            "t_other",
            "INV-3",
            &audit("billing.void_invoice", "t_other")
        )
        .await
        .unwrap(),
        VoidOutcome::NotFound
    );
    assert_eq!(
        a.set_total(
            "t_other",
            "INV-3",
            1,
            &audit("billing.update_invoice", "t_other")
        )
        .await
        .unwrap(),
        None
    );
    assert_eq!(
        a.get("t_777", "INV-3").await.unwrap().unwrap().status,
        Status::Open
    );
    // A restart keeps every write and seeds nothing again.
    a.void("t_777", "INV-3", &audit("billing.void_invoice", "t_777"))
        .await
        .unwrap();
    let again = PgStore::connect(&url, 2).await.unwrap();
    assert_eq!(again.page("t_777", None, 0, 1).await.unwrap().1, 1000);
    assert_eq!(
        again.get("t_777", "INV-3").await.unwrap().unwrap().status,
        Status::Voided
    );
    assert_eq!(audit_count(&url, "billing.void_invoice", "ok").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_number_per_tenant_replay_keys_and_audit_in_the_same_transaction() {
    let Some(pg) = TempPostgres::start() else {
        return;
    };
    let url = pg.database_with("creates", "");
    let store = PgStore::connect(&url, 8).await.unwrap();
    let other = PgStore::connect(&url, 8).await.unwrap();
    let new = |key| NewInvoice {
        customer_id: "C-1",
        total_cents: 500,
        idempotency_key: key,
    };
    let Created::New(first) = store
        .create(
            "t_777",
            &new(None),
            &audit("billing.create_invoice", "t_777"),
        )
        .await
        .unwrap()
    else {
        panic!("a new invoice")
    };
    assert_eq!(first.id, "INV-1001");
    assert_eq!(first.status, Status::Open);
    let Created::New(theirs) = other
        .create(
            "t_other",
            &new(None),
            &audit("billing.create_invoice", "t_other"),
        )
        .await
        .unwrap()
    else {
        panic!("a new invoice")
    };
    assert_eq!(theirs.id, "INV-1", "numbers are per tenant");

    // 40 creates of one tenant on two "replicas" at once: 40 distinct consecutive numbers.
    let mut tasks = Vec::new();
    for n in 0..40 {
        let store = if n % 2 == 0 {
            store.clone()
        } else {
            other.clone()
        };
        tasks.push(tokio::spawn(async move {
            let key = format!("k-{n}");
            match store
                .create(
                    "t_777",
                    &NewInvoice {
                        customer_id: "C-2",
                        total_cents: n,
                        idempotency_key: Some(&key),
                    },
                    &audit("billing.create_invoice", "t_777"),
                )
                .await
                .unwrap()
            {
                Created::New(invoice) => invoice.id,
                other => panic!("{other:?}"),
            }
        }));
    }
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.unwrap());
    }
    ids.sort_by_key(|id| id[4..].parse::<u32>().unwrap());
    let expected: Vec<String> = (1002..1042).map(|n| format!("INV-{n}")).collect();
    assert_eq!(ids, expected);

    // The same key and request, again, on the other replica: the same invoice, nothing new.
    let key = "k-7";
    let replay = other
        .create(
            "t_777",
            &NewInvoice {
                customer_id: "C-2",
                total_cents: 7,
                idempotency_key: Some(key),
            },
            &audit("billing.create_invoice", "t_777"),
        )
        .await
        .unwrap();
    let Created::Replayed(replayed) = replay else {
        panic!("{replay:?}")
    };
    assert_eq!(replayed.total_cents, 7);
    // The same key with another request: refused, nothing written.
    assert_eq!(
        store
            .create(
                "t_777",
                &NewInvoice {
                    customer_id: "C-2",
                    total_cents: 8,
                    idempotency_key: Some(key),
                },
                &audit("billing.create_invoice", "t_777"),
            )
            .await
            .unwrap(),
        Created::KeyReused
    );
    // Keys are per tenant: the other tenant's k-7 is a new invoice.
    assert!(matches!(
        other
            .create(
                "t_other",
                &NewInvoice {
                    customer_id: "C-2",
                    total_cents: 8,
                    idempotency_key: Some(key),
                },
                &audit("billing.create_invoice", "t_other"),
            )
            .await
            .unwrap(),
        Created::New(_)
    ));
    assert_eq!(store.page("t_777", None, 0, 1).await.unwrap().1, 1041);
    assert_eq!(other.page("t_other", None, 0, 1).await.unwrap().1, 2);
    // One record per invoice created (1 + 40 + 2), one per replay, none for the refusal.
    assert_eq!(audit_count(&url, "billing.create_invoice", "ok").await, 43);
    assert_eq!(
        audit_count(&url, "billing.create_invoice", "ok_replayed").await,
        1
    );
    // The trail is append-only.
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let refused = client.execute("DELETE FROM audit_events", &[]).await;
    assert!(refused.is_err(), "audit_events must refuse deletes");
    // A total changes on open invoices only, with its record.
    let changed = store
        .set_total(
            "t_777",
            &first.id,
            900,
            &audit("billing.update_invoice", "t_777"),
        )
        .await
        .unwrap();
    assert_eq!(changed.map(|invoice| invoice.total_cents), Some(900));
    assert_eq!(
        store
            .set_total(
                "t_777",
                "INV-7",
                900,
                &audit("billing.update_invoice", "t_777")
            )
            .await
            .unwrap(),
        None,
        "INV-7 is paid"
    );
    assert_eq!(audit_count(&url, "billing.update_invoice", "ok").await, 1);
}

/// Counts the shared lock's acquisitions and passes them to PostgreSQL's.
struct Counted {
    lock: PgLock,
    keys: Arc<std::sync::Mutex<Vec<String>>>,
    held: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

struct CountedHeld {
    _inner: Box<dyn Send>,
    held: Arc<AtomicUsize>,
}

impl Drop for CountedHeld {
    fn drop(&mut self) {
        self.held.fetch_sub(1, Ordering::SeqCst);
    }
}

impl fusion::SerializationLock for Counted {
    fn acquire<'a>(
        &'a self,
        key: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<Box<dyn Send + 'static>, ToolError>> {
        Box::pin(async move {
            let inner = self.lock.acquire(key).await?;
            self.keys.lock().unwrap().push(key.to_owned());
            let now = self.held.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            Ok(Box::new(CountedHeld {
                _inner: inner,
                held: self.held.clone(),
            }) as Box<dyn Send>)
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_voids_across_three_servers_on_one_database_one_succeeds() {
    let Some(pg) = TempPostgres::start() else {
        return;
    };
    let url = pg.database_with("voids", "");
    let keys = Arc::new(std::sync::Mutex::new(Vec::new()));
    let held = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut testers = Vec::new();
    for _ in 0..3 {
        // Three replicas: each with its own pools, as three processes would have.
        let store = PgStore::connect(&url, 8).await.unwrap();
        let lock = Counted {
            lock: PgLock::new(&url, 8).unwrap(),
            keys: keys.clone(),
            held: held.clone(),
            most: most.clone(),
        };
        let server = billing::builder_on(Invoices::Postgres(store.clone()))
            .serialization_lock(lock)
            .audit(billing::PgAuditSink::new(store))
            .build()
            .unwrap();
        testers.push(Tester::new(server).with_context(|call| {
            call.extensions_mut().insert(
                Principal::new("token:t_777")
                    .with_tenant("t_777")
                    .with_scopes([billing::WRITE_SCOPE.to_owned()]),
            );
        }));
    }
    let mut calls = Vec::new();
    for n in 0..50 {
        let tester = testers[n % 3].clone();
        calls.push(tokio::spawn(async move {
            tester
                .call("billing.void_invoice", json!({"id": "INV-3"}))
                .await
        }));
    }
    let mut voided = 0;
    let mut already = 0;
    for call in calls {
        let result = call.await.unwrap();
        if result.is_error() {
            assert_eq!(
                result.error_code(),
                Some("AlreadyVoided"),
                "{}",
                result.raw_text()
            );
            already += 1;
        } else {
            assert_eq!(result.data()["status"], "voided");
            voided += 1;
        }
    }
    assert_eq!((voided, already), (1, 49));
    // Every call took the shared lock under the FIFO key (the tenant's, then the invoice's),
    // and never two at once.
    let keys = keys.lock().unwrap().clone();
    assert_eq!(keys.len(), 50);
    assert!(
        keys.iter()
            .all(|key| key == "billing.void_invoice/\"t_777\"/\"INV-3\""),
        "{keys:?}"
    );
    assert_eq!(most.load(Ordering::SeqCst), 1);
    assert_eq!(held.load(Ordering::SeqCst), 0);
    // Exactly one audit record: the acknowledged void's.
    assert_eq!(audit_count(&url, "billing.void_invoice", "ok").await, 1);
    // Reads agree on every replica.
    for tester in &testers {
        let got = tester
            .call("billing.get_invoice", json!({"id": "INV-3"}))
            .await;
        assert_eq!(got.data()["status"], "voided");
    }
}

/// A Tester on a fresh PgStore of `url` for the demo tenant, with write scope.
async fn tester_on(url: &str) -> Tester {
    let store = PgStore::connect(url, 2).await.unwrap();
    let server = billing::builder_on(Invoices::Postgres(store.clone()))
        .audit(billing::PgAuditSink::new(store))
        .build()
        .unwrap();
    Tester::new(server).with_context(|call| {
        call.extensions_mut().insert(
            Principal::new("token:t_777")
                .with_tenant("t_777")
                .with_scopes([billing::WRITE_SCOPE.to_owned()]),
        );
    })
}

/// Waits until a backend runs a statement containing `query` and waits on `wait_event`, then
/// terminates it (as a database restart or a failover would). Watches from a connection of its
/// own: inside a transaction, `pg_stat_activity` is a snapshot taken once.
async fn terminate_backend(url: &str, query: &str, wait_event: &str) {
    let admin = &admin_client(url).await;
    // Generous: the other tests start clusters of their own on the same two cores.
    for _ in 0..1200 {
        let row = admin
            .query_opt(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE pid <> pg_backend_pid() AND query LIKE '%' || $1 || '%' \
                 AND wait_event = $2",
                &[&query, &wait_event],
            )
            .await
            .unwrap();
        if let Some(row) = row {
            assert!(row.get::<_, bool>(0), "pg_terminate_backend refused");
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let activity: Vec<String> = admin
        .query(
            "SELECT pid::text || ' ' || coalesce(state, '') || ' ' || coalesce(wait_event, '') \
             || ' ' || query FROM pg_stat_activity WHERE datname = current_database()",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    panic!("no backend ran {query:?} waiting on {wait_event}: {activity:#?}");
}

/// A create of an invoice for `customer`, running.
fn spawn_create(
    tester: &Tester,
    customer: &'static str,
) -> tokio::task::JoinHandle<fusion::testing::TestResult> {
    let tester = tester.clone();
    tokio::spawn(async move {
        tester
            .call(
                "billing.create_invoice",
                json!({"customer_id": customer, "total_cents": 100}),
            )
            .await
    })
}

async fn admin_client(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
}

async fn created_for(admin: &tokio_postgres::Client, customer: &str) -> i64 {
    admin
        .query_one(
            "SELECT count(*) FROM invoices WHERE customer_id = $1",
            &[&customer],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_lost_before_the_commit_is_retryable_and_wrote_nothing() {
    let Some(pg) = TempPostgres::start() else {
        return;
    };
    let url = pg.database_with("lost_before", "");
    let tester = tester_on(&url).await;
    let admin = admin_client(&url).await;
    // Another replica's create of the tenant holds the create lock, so ours waits inside its
    // transaction, where its connection is cut.
    admin.batch_execute("BEGIN").await.unwrap();
    admin
        .execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('billing.create/' || $1, 0))",
            &[&"t_777"],
        )
        .await
        .unwrap();
    let create = spawn_create(&tester, "C-LOST");
    terminate_backend(&url, "billing.create/", "advisory").await;
    let result = create.await.unwrap();
    admin.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        result.error_code(),
        Some("StoreUnavailable"),
        "{}",
        result.raw_text()
    );
    assert_eq!(result.error()["retryable"], true, "{}", result.raw_text());
    assert!(
        !result.raw_text().contains("terminat"),
        "{}",
        result.raw_text()
    );
    assert_eq!(created_for(&admin, "C-LOST").await, 0);
    assert_eq!(audit_count(&url, "billing.create_invoice", "ok").await, 0);
    // The retry the agent is told to make succeeds once the pool has dropped the dead
    // connection (a checkout may still hand it out once, which is answered retryable again).
    let mut retry = None;
    for _ in 0..5 {
        let answer = tester
            .call(
                "billing.create_invoice",
                json!({"customer_id": "C-LOST", "total_cents": 100}),
            )
            .await;
        if !answer.is_error() {
            retry = Some(answer);
            break;
        }
        assert_eq!(
            answer.error_code(),
            Some("StoreUnavailable"),
            "{}",
            answer.raw_text()
        );
        let wait = answer.error()["retryAfterMs"].as_u64().unwrap_or(1000);
        tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
    }
    assert!(retry.is_some(), "no retry succeeded");
    assert_eq!(created_for(&admin, "C-LOST").await, 1);
    assert_eq!(audit_count(&url, "billing.create_invoice", "ok").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_lost_during_the_commit_is_reported_as_an_unknown_outcome() {
    let Some(pg) = TempPostgres::start() else {
        return;
    };
    let url = pg.database_with("lost_during", "");
    let tester = tester_on(&url).await;
    let admin = admin_client(&url).await;
    // A deferred trigger makes this customer's commits slow, so the connection can be cut
    // while PostgreSQL is committing.
    admin
        .batch_execute(
            "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN IF NEW.customer_id = 'C-SLOW' THEN PERFORM pg_sleep(30); END IF; \
             RETURN NULL; END $$; \
             CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON invoices \
             DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit();",
        )
        .await
        .unwrap();
    let create = spawn_create(&tester, "C-SLOW");
    terminate_backend(&url, "COMMIT", "PgSleep").await;
    let result = create.await.unwrap();
    assert_eq!(
        result.error_code(),
        Some("StoreOutcomeUnknown"),
        "{}",
        result.raw_text()
    );
    // Not retryable: a blind retry of a change that may have been applied could apply it twice.
    assert_ne!(result.error()["retryable"], true, "{}", result.raw_text());
    assert!(
        !result.raw_text().contains("terminat"),
        "{}",
        result.raw_text()
    );
    // The agent is pointed at the calls that tell it what happened.
    let text = result.raw_text();
    assert!(text.contains("billing_get_invoice"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_that_are_not_invoice_changes_are_audited_through_the_pg_sink() {
    let Some(pg) = TempPostgres::start() else {
        return;
    };
    let url = pg.database_with("sink", "");
    let tester = tester_on(&url).await;
    let admin = admin_client(&url).await;
    let sent = tester
        .call("billing.send_reminder", json!({"id": "INV-3"}))
        .await;
    assert!(!sent.is_error(), "{}", sent.raw_text());
    let row = admin
        .query_one(
            "SELECT tenant, principal, outcome FROM audit_events \
             WHERE action = 'billing.send_reminder'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Option<String>>(0).as_deref(), Some("t_777"));
    assert_eq!(
        row.get::<_, Option<String>>(1).as_deref(),
        Some("token:t_777")
    );
    assert_eq!(row.get::<_, String>(2), "ok");
    // Reads are not audited.
    let read = tester
        .call("billing.get_invoice", json!({"id": "INV-3"}))
        .await;
    assert!(!read.is_error(), "{}", read.raw_text());
    let total: i64 = admin
        .query_one("SELECT count(*) FROM audit_events", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(total, 1);
    // With the trail unwritable, the sent reminder is reported as AUDIT_FAILED (done, not to
    // be retried), not as plain success, and the database error stays out of the answer.
    admin
        .batch_execute("ALTER TABLE audit_events RENAME TO audit_events_moved")
        .await
        .unwrap();
    let unaudited = tester
        .call("billing.send_reminder", json!({"id": "INV-3"}))
        .await;
    assert_eq!(
        unaudited.error_code(),
        Some("AUDIT_FAILED"),
        "{}",
        unaudited.raw_text()
    );
    assert!(
        !unaudited.raw_text().contains("audit_events"),
        "{}",
        unaudited.raw_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_their_tasks_and_reach_only_their_owners() {
    use fusion::{TaskOwner, TaskRecord, TaskState, TaskStore};
    let Some(pg) = TempPostgres::start() else {
        return;
    };
    let url = pg.database_with("tasks", "");
    // Two replicas' stores on one database.
    let one = billing::PgTaskStore::new(PgStore::connect(&url, 2).await.unwrap());
    let two = billing::PgTaskStore::new(PgStore::connect(&url, 2).await.unwrap());
    let owner = |tenant: Option<&str>, subject: Option<&str>| TaskOwner {
        tenant: tenant.map(str::to_owned),
        subject: subject.map(str::to_owned),
    };
    let alice = owner(Some("t_a"), Some("alice"));
    let task = TaskRecord {
        id: "f".repeat(64),
        owner: alice.clone(),
        tool: "billing_export_invoices".to_owned(),
        state: TaskState::Working,
        status_message: None,
        created_ms: 10_000,
        updated_ms: 10_000,
        ttl_ms: 1000,
        poll_interval_ms: 100,
        lease_ms: 10_500,
    };
    one.create(&task).await.unwrap();
    // The other replica renews, reads and cancels it; a late result does not undo the cancel.
    assert!(two.renew(&task.id, 10_800, 10_100).await.unwrap());
    let read = two.get(&alice, &task.id, 10_200).await.unwrap().unwrap();
    assert_eq!(
        (read.state.clone(), read.lease_ms),
        (TaskState::Working, 10_800)
    );
    assert!(
        two.settle(&task.id, &TaskState::Cancelled, 10_300)
            .await
            .unwrap()
    );
    let late = TaskState::Completed(Default::default());
    assert!(!one.settle(&task.id, &late, 10_400).await.unwrap());
    assert!(!one.renew(&task.id, 11_000, 10_400).await.unwrap());
    let cancelled = one.get(&alice, &task.id, 10_500).await.unwrap().unwrap();
    assert_eq!(cancelled.state, TaskState::Cancelled);
    for other in [
        owner(Some("t_a"), Some("reader")),
        owner(Some("t_b"), Some("alice")),
        owner(None, None),
    ] {
        assert_eq!(two.get(&other, &task.id, 10_500).await.unwrap(), None);
        assert!(two.list(&other, 10_500).await.unwrap().is_empty());
    }
    assert_eq!(one.list(&alice, 10_500).await.unwrap(), [cancelled]);
    // Past its time to live it is gone.
    assert_eq!(one.get(&alice, &task.id, 11_000).await.unwrap(), None);
}

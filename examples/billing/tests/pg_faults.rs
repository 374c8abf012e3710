//! Billing's PostgreSQL mode under the faults of a database (issue 24): the real binary over
//! HTTP on 127.0.0.1, driven by rmcp's client, on a temporary PostgreSQL (the harness's
//! `TempPostgres`, installed with apt-get when missing and this runs as root):
//!
//! 1. concurrent creates and voids while the postmaster is killed with SIGKILL, then started
//!    again: every call is answered with a success or a classified error that says nothing of
//!    SQL, the driver or the database's address; the server recovers without a restart; every
//!    acknowledged write is in the database with its audit record (the change and its record
//!    are one transaction), and nothing was written without one;
//! 2. every connection slot of the database taken by other sessions: calls get a retryable
//!    error at once, and succeed again once the slots are freed.
//!
//! What the agent got in each phase is printed (`--nocapture`).
#![cfg(unix)]

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fusion::serde_json::{Value, json};
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{Peer, RoleClient, ServiceExt};
use testkit_harness::postgres::TempPostgres;

use support::BillingHttp;

const TOKEN: &str = "pg-faults-token-7a41";
const TENANT: &str = "t_777";
/// What the test's own sessions call themselves, so that the billing server's are told apart.
const FILLER: &str = "pg_faults_filler";
/// Writers running at once.
const WRITERS: usize = 8;

/// What one call was answered.
#[derive(Debug, Clone)]
enum Answer {
    Ok(Value),
    Failed {
        code: String,
        retryable: bool,
        text: String,
    },
    /// No tool result at all (the transport failed).
    NoResult(String),
}

impl Answer {
    fn label(&self) -> String {
        match self {
            Answer::Ok(_) => "ok".to_owned(),
            Answer::Failed {
                code, retryable, ..
            } => format!("{code} (retryable: {retryable})"),
            Answer::NoResult(_) => "no result".to_owned(),
        }
    }
}

/// One write and what it was answered.
#[derive(Debug, Clone)]
struct Write {
    kind: Kind,
    answer: Answer,
}

#[derive(Debug, Clone)]
enum Kind {
    Create { customer: String, total: i64 },
    Void { id: String },
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        other => panic!("not a JSON object: {other}"),
    }
}

async fn call(peer: &Peer<RoleClient>, tool: &str, arguments: Value) -> Answer {
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(object(arguments));
    let result = match tokio::time::timeout(Duration::from_secs(30), peer.call_tool(params)).await {
        Err(_) => return Answer::NoResult("no answer within 30 s".to_owned()),
        Ok(Err(error)) => return Answer::NoResult(error.to_string()),
        Ok(Ok(result)) => result,
    };
    let envelope = result.structured_content.unwrap_or_default();
    if envelope["ok"] == true {
        return Answer::Ok(envelope["data"].clone());
    }
    let error = &envelope["error"];
    Answer::Failed {
        code: error["code"].as_str().unwrap_or_default().to_owned(),
        retryable: error["retryable"] == true,
        // Everything the agent reads of the failure, its text block included.
        text: format!(
            "{envelope} {}",
            result
                .content
                .iter()
                .filter_map(|content| content.as_text().map(|text| text.text.clone()))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}

/// Words that would tell the agent about the store's internals: SQL, the driver, the pool,
/// PostgreSQL's own messages, the database's address.
const INTERNAL: &[&str] = &[
    "postgres",
    "tokio",
    "deadpool",
    "db error",
    "sqlstate",
    "select ",
    "insert ",
    "update ",
    "advisory",
    "127.0.0.1",
    "os error",
    "too many clients",
    "terminating connection",
    "connection refused",
    "error {",
];

/// Asserts that a failure is one the agent can act on: a classified code (retryable, or the
/// outcome-unknown one that says to check first), with nothing internal in it.
fn assert_classified(answer: &Answer, phase: &str) {
    match answer {
        Answer::Ok(_) => {}
        Answer::NoResult(error) => panic!("{phase}: a call got no tool result: {error}"),
        Answer::Failed {
            code,
            retryable,
            text,
        } => {
            let lower = text.to_lowercase();
            for word in INTERNAL {
                assert!(
                    !lower.contains(word),
                    "{phase}: {code} tells the agent {word:?}: {text}"
                );
            }
            match code.as_str() {
                "StoreUnavailable" | "SERVER_BUSY" => {
                    assert!(retryable, "{phase}: {code} is not retryable: {text}");
                }
                // Not retried blindly: the agent is told to check first.
                "StoreOutcomeUnknown" => {}
                other => panic!("{phase}: an unclassified failure {other}: {text}"),
            }
        }
    }
}

fn tally<'a>(answers: impl Iterator<Item = &'a Answer>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for answer in answers {
        *counts.entry(answer.label()).or_insert(0) += 1;
    }
    counts
}

async fn session(url: &str) -> RunningService<RoleClient, ()> {
    support::install_crypto_provider();
    let http = support::http_client_builder()
        .timeout(Duration::from_secs(40))
        .build()
        .expect("HTTP client");
    let transport = StreamableHttpClientTransport::with_client(
        http,
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(TOKEN),
    );
    ().serve(transport).await.expect("initialize over HTTP")
}

/// The writers: creates (each with its own idempotency key) and voids of distinct open seeded
/// invoices (`INV-3`, `INV-6`, …: never above the confirmation threshold), until `stop`.
async fn write_until(
    peer: Peer<RoleClient>,
    stop: Arc<AtomicBool>,
    writes: Arc<Mutex<Vec<Write>>>,
) {
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    while !stop.load(Ordering::Acquire) {
        let n = NEXT.fetch_add(1, Ordering::AcqRel);
        let (kind, answer) = if n.is_multiple_of(2) && n * 3 / 2 <= 999 {
            let id = format!("INV-{}", n / 2 * 3);
            let answer = call(&peer, "billing_void_invoice", json!({"id": id})).await;
            (Kind::Void { id }, answer)
        } else {
            let customer = format!("C-pg-{n}");
            let total = i64::try_from(n).unwrap_or(0) * 10 + 1;
            let answer = call(
                &peer,
                "billing_create_invoice",
                json!({"customer_id": customer, "total_cents": total,
                       "idempotency_key": format!("pg-faults-{n}")}),
            )
            .await;
            (Kind::Create { customer, total }, answer)
        };
        writes.lock().unwrap().push(Write { kind, answer });
    }
}

/// Calls `billing_get_invoice` until it succeeds; how long that took.
async fn until_served(peer: &Peer<RoleClient>, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let answer = call(peer, "billing_get_invoice", json!({"id": "INV-7"})).await;
        if let Answer::Ok(_) = answer {
            return start.elapsed();
        }
        assert_classified(&answer, "recovery");
        assert!(
            start.elapsed() < within,
            "not served again within {within:?}: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn connect(url: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let mut config: tokio_postgres::Config = url.parse().expect("a PostgreSQL URL");
    config.application_name(FILLER);
    config.connect_timeout(Duration::from_secs(5));
    let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

/// Opens sessions until the database refuses one for want of slots (`53300`).
async fn fill(url: &str, held: &mut Vec<tokio_postgres::Client>) {
    for _ in 0..200 {
        match connect(url).await {
            Ok(client) => held.push(client),
            Err(error) => {
                assert_eq!(
                    error.code(),
                    Some(&tokio_postgres::error::SqlState::TOO_MANY_CONNECTIONS),
                    "{error}"
                );
                return;
            }
        }
    }
    panic!("200 sessions and the database still takes more");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn billing_on_postgres_answers_a_killed_database_and_exhausted_slots_and_loses_nothing() {
    // A small cluster, so that its slots are quickly taken.
    let Some(pg) = TempPostgres::start_with("-c max_connections=24") else {
        return;
    };
    let pg = Arc::new(pg);
    let url = pg.database_with("billing", "");
    let server = {
        let url = url.clone();
        tokio::task::spawn_blocking(move || {
            let token = format!("--token={TOKEN}={TENANT}");
            BillingHttp::spawn_exactly(&["--database-url", &url, "--pool-size", "4", &token])
        })
        .await
        .unwrap()
    };
    let client = session(server.url()).await;
    let peer = client.peer().clone();
    let db = connect(&url).await.expect("the test's own session");
    let voided_before: i64 = db
        .query_one(
            "SELECT count(*) FROM invoices WHERE tenant_id = $1 AND status = 'voided'",
            &[&TENANT],
        )
        .await
        .unwrap()
        .get(0);
    drop(db);

    // 1. Writes while the database is killed, then started again.
    let stop = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(Mutex::new(Vec::new()));
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| tokio::spawn(write_until(peer.clone(), stop.clone(), writes.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before_kill = writes.lock().unwrap().len();
    let killed = {
        let pg = Arc::clone(&pg);
        tokio::task::spawn_blocking(move || pg.kill())
    };
    killed.await.unwrap();
    let killed_at = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let during_outage = writes.lock().unwrap().len();
    {
        let pg = Arc::clone(&pg);
        tokio::task::spawn_blocking(move || pg.restart())
            .await
            .unwrap();
    }
    let down_for = killed_at.elapsed();
    let recovered_in = until_served(&peer, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Release);
    for writer in writers {
        writer.await.unwrap();
    }
    let writes = std::mem::take(&mut *writes.lock().unwrap());
    for write in &writes {
        assert_classified(&write.answer, "database killed");
    }
    let outage = &writes[before_kill..during_outage];
    eprintln!(
        "killed: {} writes ({} before the kill: {:?}; {} while down: {:?}; all: {:?}); \
         down {down_for:?}, served again {recovered_in:?} after the restart",
        writes.len(),
        before_kill,
        tally(writes[..before_kill].iter().map(|w| &w.answer)),
        outage.len(),
        tally(outage.iter().map(|w| &w.answer)),
        tally(writes.iter().map(|w| &w.answer)),
    );
    assert!(
        outage.iter().any(|w| !matches!(w.answer, Answer::Ok(_))),
        "no write failed while the database was down"
    );
    // One replica, eight writers, below every limit: nothing is busy, the store is down.
    assert!(
        !writes.iter().any(|w| matches!(&w.answer,
            Answer::Failed { code, .. } if code == "SERVER_BUSY")),
        "a write was told the server is busy while the database was down"
    );
    assert!(
        writes[during_outage..]
            .iter()
            .any(|w| matches!(w.answer, Answer::Ok(_))),
        "no write succeeded after the restart"
    );

    // 2. Every slot of the database taken by other sessions.
    let mut fillers = Vec::new();
    fill(&url, &mut fillers).await;
    // The server's own sessions end, and their slots go to the test's.
    let ended: i64 = fillers[0]
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE backend_type = 'client backend' AND application_name <> $1",
            &[&FILLER],
        )
        .await
        .unwrap()
        .get(0);
    tokio::time::sleep(Duration::from_millis(200)).await;
    fill(&url, &mut fillers).await;
    let start = Instant::now();
    let mut exhausted = Vec::new();
    for n in 0..6 {
        let answer = if n % 2 == 0 {
            call(&peer, "billing_get_invoice", json!({"id": "INV-7"})).await
        } else {
            call(
                &peer,
                "billing_create_invoice",
                json!({"customer_id": "C-full", "total_cents": 7}),
            )
            .await
        };
        assert_classified(&answer, "slots exhausted");
        exhausted.push(answer);
    }
    let answered_within = start.elapsed() / 6;
    eprintln!(
        "exhausted: {} sessions held, {ended} of the server's ended; {:?}, {answered_within:?} \
         per call",
        fillers.len(),
        tally(exhausted.iter()),
    );
    assert!(
        exhausted
            .iter()
            .all(|answer| !matches!(answer, Answer::Ok(_))),
        "a call was served with every slot taken: {exhausted:?}"
    );
    assert!(
        answered_within < Duration::from_secs(6),
        "calls waited {answered_within:?} each"
    );
    drop(fillers);
    let freed_in = until_served(&peer, Duration::from_secs(15)).await;
    eprintln!("exhausted: served again {freed_in:?} after the slots were freed");

    // Nothing acknowledged is lost, and nothing is there without its audit record.
    let db = connect(&url).await.expect("the test's own session");
    let mut acknowledged_creates = 0;
    let mut acknowledged_voids = 0;
    for write in &writes {
        let Answer::Ok(data) = &write.answer else {
            continue;
        };
        match &write.kind {
            Kind::Create { customer, total } => {
                acknowledged_creates += 1;
                let id = data["id"].as_str().expect("the created invoice's id");
                let row = db
                    .query_opt(
                        "SELECT customer_id, total_cents FROM invoices \
                         WHERE tenant_id = $1 AND id = $2",
                        &[&TENANT, &id],
                    )
                    .await
                    .unwrap()
                    .unwrap_or_else(|| panic!("acknowledged create {id} is lost"));
                assert_eq!(
                    (row.get::<_, String>(0), row.get::<_, i64>(1)),
                    (customer.clone(), *total)
                );
            }
            Kind::Void { id } => {
                acknowledged_voids += 1;
                let status: String = db
                    .query_one(
                        "SELECT status FROM invoices WHERE tenant_id = $1 AND id = $2",
                        &[&TENANT, id],
                    )
                    .await
                    .unwrap()
                    .get(0);
                assert_eq!(status, "voided", "acknowledged void of {id} is lost");
            }
        }
    }
    let count = async |sql: &str| -> i64 { db.query_one(sql, &[&TENANT]).await.unwrap().get(0) };
    let created_rows =
        count("SELECT count(*) FROM invoices WHERE tenant_id = $1 AND number > 1000").await;
    let create_records = count(
        "SELECT count(*) FROM audit_events WHERE tenant = $1 \
         AND action = 'billing.create_invoice' AND outcome = 'ok'",
    )
    .await;
    let voided_rows =
        count("SELECT count(*) FROM invoices WHERE tenant_id = $1 AND status = 'voided'").await
            - voided_before;
    let void_records = count(
        "SELECT count(*) FROM audit_events WHERE tenant = $1 \
         AND action = 'billing.void_invoice' AND outcome = 'ok'",
    )
    .await;
    let unknown = writes
        .iter()
        .filter(
            |w| matches!(&w.answer, Answer::Failed { code, .. } if code == "StoreOutcomeUnknown"),
        )
        .count();
    eprintln!(
        "ledger: creates acknowledged {acknowledged_creates}, rows {created_rows}, audit records \
         {create_records}; voids acknowledged {acknowledged_voids}, rows {voided_rows}, audit \
         records {void_records}; outcome unknown {unknown}"
    );
    assert_eq!(
        created_rows, create_records,
        "every created row has its record"
    );
    assert_eq!(voided_rows, void_records, "every voided row has its record");
    // Rows beyond the acknowledged ones are writes whose answer said the outcome is unknown.
    let extra = (created_rows - acknowledged_creates) + (voided_rows - acknowledged_voids);
    assert!(
        (0..=i64::try_from(unknown).unwrap()).contains(&extra),
        "{extra} writes applied that were neither acknowledged nor of unknown outcome"
    );
    drop(client);
}

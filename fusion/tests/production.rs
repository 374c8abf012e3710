//! The production runtime (SPEC T5, G1–G3, R5, R6, R8): middleware and typed context, routers,
//! guards, access and toolsets, audit, metrics and spans — all through the real pipeline.

use std::any::TypeId;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fusion::audit::{AuditError, AuditRecord, AuditSink};
use fusion::middleware::{Middleware, MiddlewareFuture, from_fn};
use fusion::observe::CallStats;
use fusion::testing::Tester;
use fusion::{
    ActionInfo, CallContext, Ext, Principal, Router, ServerBuilder, State, ToolError, Verb, tool,
};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

/// A tenant derived by middleware; handlers take it as `Ext<Tenant>`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tenant(String);

/// Derives the tenant from the verified principal, or rejects the call.
struct TenantFromPrincipal;

impl Middleware for TenantFromPrincipal {
    fn before<'a>(
        &'a self,
        call: &'a mut CallContext,
        _action: ActionInfo<'a>,
    ) -> MiddlewareFuture<'a> {
        Box::pin(async move {
            let tenant = call
                .principal()
                .and_then(|principal| principal.tenant.clone())
                .ok_or_else(|| ToolError::unauthorized("No verified tenant."))?;
            call.extensions_mut().insert(Tenant(tenant));
            Ok(())
        })
    }

    fn provides(&self) -> Vec<TypeId> {
        vec![TypeId::of::<Tenant>()]
    }
}

/// Records the order in which middleware ran.
#[derive(Default)]
struct Trail(Mutex<Vec<&'static str>>);

fn mark(name: &'static str) -> impl Middleware {
    from_fn(move |call, _action| {
        if let Some(trail) = call.state::<Trail>() {
            trail.0.lock().unwrap().push(name);
        }
        Ok(())
    })
}

/// Says which tenant is calling.
#[tool(query, name = "whoami")]
async fn whoami(tenant: Ext<Tenant>, trail: State<Trail>) -> Result<String, ToolError> {
    trail.0.lock().unwrap().push("handler");
    Ok(tenant.0.0.clone())
}

fn as_tenant(tenant: &str) -> impl Fn(&mut CallContext) + Send + Sync + 'static {
    let tenant = tenant.to_owned();
    move |call| {
        call.extensions_mut()
            .insert(Principal::new("agent-1").with_tenant(tenant.clone()));
    }
}

#[tokio::test]
async fn middleware_derives_typed_context_in_a_documented_order() {
    let server = ServerBuilder::new("s", "1")
        .state(Trail::default())
        .middleware(mark("server"))
        .router(
            Router::new("team")
                .middleware(mark("router"))
                .middleware(TenantFromPrincipal)
                .tags(["team"])
                .tool_spec(<whoami as fusion::Tool>::spec().with_middleware(mark("action"))),
        )
        .build()
        .unwrap();
    let action = server
        .action("team.whoami")
        .expect("the router's namespace is applied");
    assert_eq!(action.tags(), ["team"]);
    let trail = server.new_context().state::<Trail>().unwrap();
    let tester = Tester::new(server).with_context(as_tenant("t_1"));
    let result = tester.call("team.whoami", json!({})).await;
    assert_eq!(result.data(), &json!("t_1"));
    assert_eq!(
        *trail.0.lock().unwrap(),
        ["server", "router", "action", "handler"]
    );
}

#[tokio::test]
async fn middleware_rejects_before_the_handler_runs() {
    let server = ServerBuilder::new("s", "1")
        .state(Trail::default())
        .router(
            Router::new("team")
                .middleware(TenantFromPrincipal)
                .tool::<whoami>(),
        )
        .build()
        .unwrap();
    let trail = server.new_context().state::<Trail>().unwrap();
    let anonymous = Tester::new(server).call("team.whoami", json!({})).await;
    assert_eq!(anonymous.error_code(), Some("UNAUTHORIZED"));
    assert!(
        trail.0.lock().unwrap().is_empty(),
        "the handler must not run"
    );
}

#[test]
fn a_handler_needing_context_no_middleware_provides_is_refused() {
    let error = ServerBuilder::new("s", "1")
        .state(Trail::default())
        .tool::<whoami>()
        .build()
        .err()
        .unwrap();
    assert_eq!(error.problems().len(), 1);
    assert!(
        error.problems()[0].contains("no middleware of its chain provides a `production::Tenant`"),
        "{error}"
    );
}

/// Reads, then writes after a pause: racy unless calls are serialized.
#[derive(Default)]
struct Ledger {
    status: Mutex<std::collections::HashMap<String, &'static str>>,
    successes: AtomicUsize,
}

/// Voids an entry, racily.
#[tool(mutation, name = "ledger.void", serialize = "id")]
async fn void_entry(ledger: State<Ledger>, id: String) -> Result<String, ToolError> {
    let already = ledger.status.lock().unwrap().get(&id).copied() == Some("voided");
    tokio::time::sleep(Duration::from_millis(2)).await;
    if already {
        return Err(ToolError::new(
            "AlreadyVoided",
            format!("{id} is already voided"),
        ));
    }
    ledger.status.lock().unwrap().insert(id.clone(), "voided");
    ledger.successes.fetch_add(1, Ordering::SeqCst);
    Ok(id)
}

/// The same racy write, with serialization switched off.
#[tool(mutation, name = "ledger.void_unserialized", serialize = false)]
async fn void_unserialized(ledger: State<Ledger>, id: String) -> Result<String, ToolError> {
    void_entry(ledger, id).await
}

async fn concurrent_voids(
    key: &'static str,
    id: &str,
    calls: usize,
) -> (usize, usize, Arc<Ledger>) {
    let server = ServerBuilder::new("s", "1")
        .state(Ledger::default())
        .tool::<void_entry>()
        .tool::<void_unserialized>()
        .build()
        .unwrap();
    let ledger = server.new_context().state::<Ledger>().unwrap();
    let tester = Tester::new(server);
    let mut tasks = Vec::new();
    for _ in 0..calls {
        let tester = tester.clone();
        let id = id.to_owned();
        tasks.push(tokio::spawn(async move {
            tester.call(key, json!({"id": id})).await
        }));
    }
    let mut ok = 0;
    let mut already = 0;
    for task in tasks {
        let result = task.await.unwrap();
        match result.error_code() {
            None => ok += 1,
            Some("AlreadyVoided") => already += 1,
            Some(other) => panic!("unexpected {other}: {}", result.raw_text()),
        }
    }
    (ok, already, ledger)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serialized_mutations_let_exactly_one_of_fifty_concurrent_voids_win() {
    let (ok, already, ledger) = concurrent_voids("ledger.void", "E-1", 50).await;
    assert_eq!((ok, already), (1, 49));
    assert_eq!(
        ledger.successes.load(Ordering::SeqCst),
        1,
        "nothing lost, nothing doubled"
    );
    // The guard is what makes the difference: without it the same handler races.
    let (racy_ok, _, _) = concurrent_voids("ledger.void_unserialized", "E-1", 50).await;
    assert!(
        racy_ok > 1,
        "the unserialized handler should race ({racy_ok} successes)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keyed_serialization_does_not_serialize_different_keys() {
    let server = ServerBuilder::new("s", "1")
        .state(Ledger::default())
        .tool::<void_entry>()
        .build()
        .unwrap();
    let tester = Tester::new(server);
    let started = std::time::Instant::now();
    let tasks: Vec<_> = (0..20)
        .map(|n| {
            let tester = tester.clone();
            tokio::spawn(async move {
                tester
                    .call("ledger.void", json!({"id": format!("E-{n}")}))
                    .await
            })
        })
        .collect();
    for task in tasks {
        assert!(!task.await.unwrap().is_error());
    }
    // 20 calls of 2 ms on 20 different keys run side by side, not one after another (40 ms).
    assert!(
        started.elapsed() < Duration::from_millis(35),
        "{:?}",
        started.elapsed()
    );
}

/// Holds its slot until released.
#[derive(Default)]
struct Gate {
    entered: AtomicUsize,
    open: tokio::sync::Notify,
}

/// Waits at the gate.
#[tool(query, name = "slow.wait", concurrency(max = 2, queue = 1))]
async fn slow(gate: State<Gate>) -> Result<bool, ToolError> {
    gate.entered.fetch_add(1, Ordering::SeqCst);
    gate.open.notified().await;
    Ok(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn beyond_active_and_queued_calls_get_server_busy_at_once() {
    let server = ServerBuilder::new("s", "1")
        .state(Gate::default())
        .tool::<slow>()
        .build()
        .unwrap();
    let gate = server.new_context().state::<Gate>().unwrap();
    let tester = Tester::new(server);
    let running: Vec<_> = (0..3)
        .map(|_| {
            let tester = tester.clone();
            tokio::spawn(async move { tester.call("slow.wait", json!({})).await })
        })
        .collect();
    // Two run, one waits in the queue.
    while gate.entered.load(Ordering::SeqCst) < 2 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let refused = tokio::time::timeout(
        Duration::from_millis(200),
        tester.call("slow.wait", json!({})),
    )
    .await
    .expect("refused at once, not stalled");
    assert_eq!(refused.error_code(), Some("SERVER_BUSY"));
    assert_eq!(refused.error()["retryable"], true);
    assert_eq!(refused.error()["retryAfterMs"], 1000);
    // Release everyone: the queued call runs too.
    while gate.entered.load(Ordering::SeqCst) < 3 {
        gate.open.notify_waiters();
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    gate.open.notify_waiters();
    for task in running {
        assert!(!task.await.unwrap().is_error());
    }
}

#[derive(serde::Serialize, JsonSchema)]
struct Row {
    id: u32,
    text: String,
}

/// Lists big rows.
#[tool(query, name = "rows.list", max_bytes = 300)]
async fn rows(count: u32) -> Result<Vec<Row>, ToolError> {
    Ok((0..count)
        .map(|id| Row {
            id,
            text: "x".repeat(40),
        })
        .collect())
}

#[tokio::test]
async fn the_egress_budget_cuts_at_item_boundaries_without_flipping_is_error() {
    let tester = Tester::new(ServerBuilder::new("s", "1").tool::<rows>().build().unwrap());
    let small = tester.call("rows.list", json!({"count": 2})).await;
    assert_eq!(small.data().as_array().unwrap().len(), 2);
    assert_eq!(small.truncation(), None);
    let big = tester.call("rows.list", json!({"count": 50})).await;
    assert!(!big.is_error());
    let kept = big.data().as_array().unwrap();
    assert!(!kept.is_empty() && kept.len() < 50);
    assert!(serde_json::to_string(big.data()).unwrap().len() <= 300);
    assert_eq!(
        kept.last().unwrap()["id"],
        kept.len() - 1,
        "whole items, in order"
    );
    assert_eq!(big.truncation(), Some((kept.len() as u64, 50)));
    assert_eq!(big.meta()["truncated"]["reason"], "budget");
    // The text block is still the data, as valid JSON.
    let text: Value = serde_json::from_str(big.texts()[0]).unwrap();
    assert_eq!(&text, big.data());
    assert!(
        big.texts()
            .iter()
            .any(|text| text.contains("reason=\"budget\"") && text.contains("fewer items"))
    );
}

/// Counts how many times arguments were parsed.
static PARSED: AtomicUsize = AtomicUsize::new(0);

/// An argument whose parsing is observable.
#[derive(JsonSchema)]
struct Watched(#[allow(dead_code)] String);

impl<'de> Deserialize<'de> for Watched {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        PARSED.fetch_add(1, Ordering::SeqCst);
        String::deserialize(deserializer).map(Watched)
    }
}

/// A write that needs a scope.
#[tool(mutation, name = "admin.purge", toolset = "admin")]
async fn purge(target: Watched) -> Result<bool, ToolError> {
    let _ = target;
    Ok(true)
}

/// A read anyone may do.
#[tool(query, name = "admin.status", toolset = "admin")]
async fn status() -> Result<bool, ToolError> {
    Ok(true)
}

/// A tool in another toolset.
#[tool(query, name = "ops.ping", toolset = "ops")]
async fn ping() -> Result<bool, ToolError> {
    Ok(true)
}

fn scoped(call: &CallContext, action: ActionInfo<'_>) -> bool {
    action.verb() == Verb::Query
        || call
            .principal()
            .is_some_and(|principal| principal.has_scope("admin:write"))
}

#[tokio::test]
async fn a_denied_call_is_forbidden_before_its_arguments_are_parsed() {
    let server = ServerBuilder::new("s", "1")
        .tool::<purge>()
        .tool::<status>()
        .access(scoped)
        .build()
        .unwrap();
    let reader = Tester::new(server.clone()).with_context(|call| {
        call.extensions_mut().insert(Principal::new("reader"));
    });
    let before = PARSED.load(Ordering::SeqCst);
    let denied = reader
        .call("admin.purge", json!({"target": "everything"}))
        .await;
    assert_eq!(denied.error_code(), Some("FORBIDDEN"));
    assert_eq!(
        PARSED.load(Ordering::SeqCst),
        before,
        "the parser never ran"
    );
    assert!(!reader.call("admin.status", json!({})).await.is_error());
    let writer = Tester::new(server).with_context(|call| {
        call.extensions_mut()
            .insert(Principal::new("writer").with_scopes(["admin:write".to_owned()]));
    });
    assert!(
        !writer
            .call("admin.purge", json!({"target": "everything"}))
            .await
            .is_error()
    );
    assert_eq!(PARSED.load(Ordering::SeqCst), before + 1);
}

#[tokio::test]
async fn toolsets_decide_which_tools_a_server_has() {
    let all = ServerBuilder::new("s", "1")
        .tool::<purge>()
        .tool::<status>()
        .tool::<ping>()
        .build()
        .unwrap();
    assert_eq!(all.tools().count(), 3);
    let ops_only = ServerBuilder::new("s", "1")
        .tool::<purge>()
        .tool::<status>()
        .tool::<ping>()
        .enable_toolsets(["ops"])
        .build()
        .unwrap();
    let names: Vec<&str> = ops_only.tools().map(|tool| tool.name()).collect();
    assert_eq!(names, ["ops_ping"]);
    let tester = Tester::new(ops_only);
    assert!(
        tester
            .call_exposed("admin_purge", json!({"target": "x"}))
            .await
            .is_err()
    );
    let without_admin = ServerBuilder::new("s", "1")
        .tool::<purge>()
        .tool::<ping>()
        .disable_toolsets(["admin"])
        .build()
        .unwrap();
    assert_eq!(
        without_admin.action("ops.ping").unwrap().toolset(),
        Some("ops")
    );
    assert!(without_admin.action("admin.purge").is_none());
    let typo = ServerBuilder::new("s", "1")
        .tool::<ping>()
        .enable_toolsets(["opps"])
        .build();
    assert_eq!(
        typo.err().unwrap().problems(),
        ["toolset `opps` has no tools"]
    );
}

/// Keeps audit records in memory, or fails on demand.
#[derive(Default)]
struct Recorder {
    records: Mutex<Vec<AuditRecord>>,
    failing: std::sync::atomic::AtomicBool,
}

impl AuditSink for Recorder {
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(AuditError("disk full".into()));
        }
        self.records.lock().unwrap().push(record.clone());
        Ok(())
    }
}

#[tokio::test]
async fn successful_writes_are_audited_and_reads_and_failures_are_not() {
    let recorder = Arc::new(Recorder::default());
    let stats = Arc::new(CallStats::new());
    let server = ServerBuilder::new("s", "1")
        .state(Ledger::default())
        .tool::<void_entry>()
        .tool::<status>()
        .audit(Arc::clone(&recorder))
        .metrics(stats.clone())
        .build()
        .unwrap();
    let tester = Tester::new(server).with_context(as_tenant("t_9"));
    assert!(
        !tester
            .call("ledger.void", json!({"id": "E-7"}))
            .await
            .is_error()
    );
    assert!(
        tester
            .call("ledger.void", json!({"id": "E-7"}))
            .await
            .is_error()
    );
    assert!(
        tester
            .call("ledger.void", json!({"id": 5}))
            .await
            .is_error()
    );
    assert!(!tester.call("admin.status", json!({})).await.is_error());
    let records = recorder.records.lock().unwrap().clone();
    assert_eq!(records.len(), 1, "{records:?}");
    let record = &records[0];
    assert_eq!(
        (record.tool.as_str(), record.action.as_str()),
        ("ledger_void", "ledger.void")
    );
    assert_eq!(record.principal.as_deref(), Some("agent-1"));
    assert_eq!(record.tenant.as_deref(), Some("t_9"));
    assert_eq!(record.outcome, "ok");
    assert_eq!(
        record.arguments_digest,
        fusion::audit::arguments_digest(&json!({"id": "E-7"}))
    );
    assert!(record.duration >= Duration::from_millis(2));
    let snapshot = stats.snapshot();
    assert_eq!(
        (snapshot.calls, snapshot.errors, snapshot.audit_failures),
        (4, 2, 0)
    );

    // A failing sink: the call still succeeds, the record goes to the log and the metric.
    recorder.failing.store(true, Ordering::SeqCst);
    assert!(
        !tester
            .call("ledger.void", json!({"id": "E-8"}))
            .await
            .is_error()
    );
    assert_eq!(stats.snapshot().audit_failures, 1);
}

#[tokio::test]
async fn without_hooks_nothing_is_measured() {
    // No span subscriber, no metrics, no audit: the pipeline takes its fast path and works.
    let tester = Tester::new(
        ServerBuilder::new("s", "1")
            .tool::<status>()
            .build()
            .unwrap(),
    );
    assert!(!tester.call("admin.status", json!({})).await.is_error());
}

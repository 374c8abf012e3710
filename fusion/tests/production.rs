//! The production runtime (SPEC T5, G1–G3, R5, R6, R8): middleware and typed context, routers,
//! guards, access and toolsets, audit, metrics and spans — all through the real pipeline.

use std::any::TypeId;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fusion::audit::{AuditEntry, AuditError, AuditRecord, AuditSink};
use fusion::middleware::{Middleware, MiddlewareFuture, from_fn};
use fusion::observe::CallStats;
use fusion::testing::Tester;
use fusion::{
    ActionInfo, CallContext, Ext, Principal, Router, ServerBuilder, State, ToolError, Verb, tool,
};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt as _;

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

/// Echoes a number; its middleware leaves a trail.
#[tool(mutation, name = "team.count", serialize = "n")]
async fn count(n: u32, trail: State<Trail>) -> Result<u32, ToolError> {
    trail.0.lock().unwrap().push("handler");
    Ok(n)
}

/// The documented order is the real one: access, then the arguments, then middleware and
/// guards. An invalid call is refused before any middleware runs or any lock is taken.
#[tokio::test]
async fn arguments_are_validated_before_middleware_and_guards() {
    let server = ServerBuilder::new("s", "1")
        .state(Trail::default())
        .access(|call: &CallContext, _: ActionInfo<'_>| {
            if let Some(trail) = call.state::<Trail>() {
                trail.0.lock().unwrap().push("access");
            }
            true
        })
        .middleware(mark("middleware"))
        .tool::<count>()
        .build()
        .unwrap();
    let trail = server.new_context().state::<Trail>().unwrap();
    let tester = Tester::new(server);
    let invalid = tester.call("team.count", json!({"n": "seven"})).await;
    assert_eq!(invalid.error_code(), Some("VALIDATION_ERROR"));
    assert_eq!(*trail.0.lock().unwrap(), ["access"]);
    trail.0.lock().unwrap().clear();
    let valid = tester.call("team.count", json!({"n": 7})).await;
    assert_eq!(valid.data(), &json!(7));
    assert_eq!(
        *trail.0.lock().unwrap(),
        ["access", "middleware", "handler"]
    );
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Team(String);
impl fusion::Provided for Team {}

/// Says which team is calling.
#[tool(query, name = "team.name")]
async fn team_name(team: Team) -> Result<String, ToolError> {
    Ok(team.0)
}

#[tokio::test]
async fn a_provided_value_is_a_plain_parameter_and_its_provider_can_refuse() {
    let provider = |call: &CallContext| {
        call.principal()
            .and_then(|principal| principal.tenant.clone())
            .map(Team)
            .ok_or_else(|| ToolError::unauthorized("No team."))
    };
    let server = ServerBuilder::new("s", "1")
        .router(Router::new("team").provide(provider).tool::<team_name>())
        .build()
        .unwrap();
    let tester = Tester::new(server.clone()).with_context(as_tenant("red"));
    assert_eq!(
        tester.call("team.name", json!({})).await.data(),
        &json!("red")
    );
    let anonymous = Tester::new(server).call("team.name", json!({})).await;
    assert_eq!(anonymous.error_code(), Some("UNAUTHORIZED"));
    // Without a provider the server does not build, and says what is missing.
    let problems = ServerBuilder::new("s", "1")
        .tool::<team_name>()
        .build()
        .expect_err("no provider of `Team`")
        .problems()
        .to_vec();
    assert!(
        problems[0].contains("no provider of") && problems[0].contains("Team"),
        "{problems:?}"
    );
}

#[tokio::test]
async fn an_async_middleware_owns_the_context_while_it_awaits() {
    let lookup = fusion::middleware::from_async(|mut call: CallContext, action| async move {
        // Stands for a lookup in a remote service.
        tokio::task::yield_now().await;
        let tenant = call
            .principal()
            .and_then(|principal| principal.tenant.clone())
            .ok_or_else(|| {
                ToolError::unauthorized(format!("`{}` needs a tenant.", action.key()))
            })?;
        call.extensions_mut().insert(Tenant(tenant));
        Ok(call)
    })
    .providing::<Tenant>();
    let server = ServerBuilder::new("s", "1")
        .state(Trail::default())
        .router(Router::new("team").middleware(lookup).tool::<whoami>())
        .build()
        .unwrap();
    let tester = Tester::new(server.clone()).with_context(as_tenant("t_9"));
    let result = tester.call("team.whoami", json!({})).await;
    // What the context carried before the middleware (the principal) is still there after it.
    assert_eq!(result.data(), &json!("t_9"));
    let anonymous = Tester::new(server).call("team.whoami", json!({})).await;
    assert_eq!(anonymous.error_code(), Some("UNAUTHORIZED"));
    // The key between backticks is written as the agent calls the tool.
    assert_eq!(
        anonymous.error()["message"],
        "`team_whoami` needs a tenant."
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

/// A rendezvous: each call waits until every other call is inside its handler too.
struct Meeting {
    barrier: tokio::sync::Barrier,
    inside: AtomicUsize,
}

/// Waits for the others, serialized per `id`.
#[tool(mutation, name = "ledger.meet", serialize = "id")]
async fn meet(meeting: State<Meeting>, id: String) -> Result<usize, ToolError> {
    meeting.inside.fetch_add(1, Ordering::SeqCst);
    meeting.barrier.wait().await;
    let _ = id;
    Ok(meeting.inside.load(Ordering::SeqCst))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keyed_serialization_does_not_serialize_different_keys() {
    const CALLS: usize = 20;
    let server = ServerBuilder::new("s", "1")
        .state(Meeting {
            barrier: tokio::sync::Barrier::new(CALLS),
            inside: AtomicUsize::new(0),
        })
        .tool::<meet>()
        .build()
        .unwrap();
    let tester = Tester::new(server);
    let tasks: Vec<_> = (0..CALLS)
        .map(|n| {
            let tester = tester.clone();
            tokio::spawn(async move {
                tester
                    .call("ledger.meet", json!({"id": format!("E-{n}")}))
                    .await
            })
        })
        .collect();
    // Every handler passes the barrier only once all 20 are inside at the same time, which
    // keyed serialization allows for 20 different keys; a lock shared by the keys would keep
    // all but one outside forever. The timeout only turns that deadlock into a failure.
    let all = async {
        for task in tasks {
            let result = task.await.unwrap();
            assert!(!result.is_error(), "{}", result.raw_text());
            assert_eq!(result.data(), &json!(CALLS));
        }
    };
    tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .expect("different keys must not wait for each other");
}

/// Holds its slot until released.
struct Gate {
    entered: AtomicUsize,
    open: tokio::sync::Semaphore,
}

/// Waits at the gate.
#[tool(query, name = "slow.wait", concurrency(max = 2, queue = 1))]
async fn slow(gate: State<Gate>) -> Result<bool, ToolError> {
    gate.entered.fetch_add(1, Ordering::SeqCst);
    gate.open.acquire().await.unwrap().forget();
    Ok(true)
}

/// Polls `future` exactly once.
async fn poll_once<F: std::future::Future + Unpin>(future: &mut F) -> std::task::Poll<F::Output> {
    std::future::poll_fn(|cx| std::task::Poll::Ready(std::pin::Pin::new(&mut *future).poll(cx)))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn beyond_active_and_queued_calls_get_server_busy_at_once() {
    let server = ServerBuilder::new("s", "1")
        .state(Gate {
            entered: AtomicUsize::new(0),
            open: tokio::sync::Semaphore::new(0),
        })
        .tool::<slow>()
        .build()
        .unwrap();
    let gate = server.new_context().state::<Gate>().unwrap();
    let tester = Tester::new(server);
    let running: Vec<_> = (0..2)
        .map(|_| {
            let tester = tester.clone();
            tokio::spawn(async move { tester.call("slow.wait", json!({})).await })
        })
        .collect();
    // Two run...
    while gate.entered.load(Ordering::SeqCst) < 2 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // ...one waits in the queue...
    let mut queued = Box::pin(tester.call("slow.wait", json!({})));
    assert!(
        poll_once(&mut queued).await.is_pending(),
        "the third call is queued"
    );
    // ...and the fourth is refused on its first poll: at once, never stalled.
    let mut fourth = Box::pin(tester.call("slow.wait", json!({})));
    let std::task::Poll::Ready(refused) = poll_once(&mut fourth).await else {
        panic!("the fourth call must be refused at once, not wait");
    };
    assert_eq!(refused.error_code(), Some("SERVER_BUSY"));
    assert_eq!(refused.error()["retryable"], true);
    assert_eq!(refused.error()["retryAfterMs"], 1000);
    // Release everyone: the queued call runs too.
    gate.open.add_permits(3);
    assert!(!queued.await.is_error());
    assert_eq!(gate.entered.load(Ordering::SeqCst), 3);
    for task in running {
        assert!(!task.await.unwrap().is_error());
    }
}

#[derive(serde::Serialize, JsonSchema)]
struct Row {
    id: u32,
    text: String,
}

/// The egress budget of the `rows` tools, in bytes of the whole serialized result.
const BUDGET: usize = 1500;

fn row_list(from: u32, count: u32) -> Vec<Row> {
    (from..count)
        .map(|id| Row {
            id,
            text: "x\"y".repeat(10),
        })
        .collect()
}

/// Lists big rows.
#[tool(query, name = "rows.list", max_bytes = 1500)]
async fn rows(count: u32) -> Result<Vec<Row>, ToolError> {
    Ok(row_list(0, count))
}

/// Lists big rows from an offset.
#[tool(query, name = "rows.page", max_bytes = 1500)]
async fn rows_page(count: u32, offset: Option<u32>) -> Result<Vec<Row>, ToolError> {
    Ok(row_list(offset.unwrap_or(0), count))
}

/// One big text, which no item boundary can cut.
#[tool(query, name = "rows.blob", max_bytes = 1500)]
async fn blob() -> Result<String, ToolError> {
    Ok("z".repeat(4000))
}

/// The size of what the result carries: `content` and `structuredContent`, as sent.
fn wire_size(result: &fusion::testing::TestResult) -> usize {
    serde_json::to_string(result.raw()).unwrap().len()
}

#[tokio::test]
async fn the_egress_budget_cuts_at_item_boundaries_without_flipping_is_error() {
    let tester = Tester::new(ServerBuilder::new("s", "1").tool::<rows>().build().unwrap());
    let small = tester.call("rows.list", json!({"count": 2})).await;
    assert_eq!(small.data().as_array().unwrap().len(), 2);
    assert_eq!(small.truncation(), None);
    assert!(wire_size(&small) <= BUDGET);
    let big = tester.call("rows.list", json!({"count": 50})).await;
    assert!(!big.is_error());
    let kept = big.data().as_array().unwrap();
    assert!(!kept.is_empty() && kept.len() < 50);
    // The whole result fits, though the data goes out twice (text block and structuredContent).
    assert!(wire_size(&big) <= BUDGET, "{} bytes", wire_size(&big));
    // The budget is fitted to the data's JSON copy in the text block (what clients before
    // structuredContent receive), so that it holds for every client; others get the list as a
    // table there, which is smaller. With the JSON copy, it is not cut more than needed: one
    // more item (twice, escaped once) would not fit.
    let mut as_json = big.raw().clone();
    as_json.content[0] = fusion::protocol::model::ContentBlock::text(big.data().to_string());
    let json_size = serde_json::to_string(&as_json).unwrap().len();
    assert!(json_size <= BUDGET, "{json_size} bytes");
    let item = serde_json::to_string(&kept[0]).unwrap();
    let escaped = serde_json::to_string(&item).unwrap().len() - 2;
    assert!(json_size + item.len() + escaped + 2 > BUDGET);
    assert_eq!(
        kept.last().unwrap()["id"],
        kept.len() - 1,
        "whole items, in order"
    );
    assert_eq!(big.truncation(), Some((kept.len() as u64, 50)));
    assert_eq!(big.meta()["truncated"]["hidden"], 50 - kept.len());
    assert_eq!(big.meta()["truncated"]["reason"], "budget");
    // The text block is still the data: the kept items, as a table (a header, a line each).
    let text = big.texts()[0];
    assert!(text.starts_with(&format!("[{}]{{", kept.len())), "{text}");
    assert_eq!(text.lines().count(), kept.len() + 1, "{text}");
    let notice = big
        .texts()
        .into_iter()
        .find(|text| text.starts_with("<truncation"))
        .expect("a truncation notice");
    assert!(
        notice.contains("reason=\"budget\"") && notice.contains("fewer items"),
        "{notice}"
    );
    assert!(
        notice.contains(&format!("{} are hidden", 50 - kept.len())),
        "{notice}"
    );
}

#[tokio::test]
async fn a_cut_result_names_the_offset_of_the_next_items() {
    let tester = Tester::new(
        ServerBuilder::new("s", "1")
            .tool::<rows_page>()
            .build()
            .unwrap(),
    );
    let mut seen = Vec::new();
    let mut arguments = json!({"count": 50});
    let mut pages = 0;
    loop {
        let page = tester.call("rows.page", arguments.clone()).await;
        assert!(!page.is_error(), "{}", page.raw_text());
        assert!(wire_size(&page) <= BUDGET);
        seen.extend(
            page.data()
                .as_array()
                .unwrap()
                .iter()
                .map(|row| row["id"].as_u64().unwrap()),
        );
        pages += 1;
        assert!(pages < 50, "the pages must make progress");
        let Some(next) = page.meta()["truncated"]["nextOffset"].as_u64() else {
            break;
        };
        assert_eq!(next, seen.len() as u64);
        let notice = page
            .texts()
            .into_iter()
            .find(|text| text.starts_with("<truncation"))
            .unwrap()
            .to_owned();
        assert!(
            notice.contains(&format!("\"offset\": {next}")) && notice.contains("rows_page"),
            "{notice}"
        );
        arguments["offset"] = next.into();
    }
    assert!(pages > 1);
    assert_eq!(
        seen,
        (0..50).collect::<Vec<u64>>(),
        "every item, once, in order"
    );
}

#[tokio::test]
async fn a_result_that_is_not_a_collection_is_sent_whole_and_logged() {
    let tester = Tester::new(ServerBuilder::new("s", "1").tool::<blob>().build().unwrap());
    let events = Events::default();
    let guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(events.clone()));
    let result = tester.call("rows.blob", json!({})).await;
    drop(guard);
    assert!(!result.is_error());
    assert_eq!(result.data().as_str().map(str::len), Some(4000));
    assert_eq!(result.truncation(), None);
    let events = events.0.lock().unwrap().clone();
    assert!(
        events.iter().any(|event| event.target == "fusion::egress"
            && event.level == tracing::Level::WARN
            && event.fields["tool"] == "rows_blob"),
        "{events:?}"
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
            return Err(AuditError::new("disk full"));
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

    // A failing sink: the record is required, so the agent is not told plain success but
    // AUDIT_FAILED (the change stands: do not retry); the record goes to the log and the metric.
    recorder.failing.store(true, Ordering::SeqCst);
    let events = Events::default();
    let guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(events.clone()));
    let unaudited = tester.call("ledger.void", json!({"id": "E-8"})).await;
    drop(guard);
    assert_eq!(unaudited.error_code(), Some("AUDIT_FAILED"));
    assert_eq!(unaudited.error()["retryable"], false);
    assert!(
        unaudited.error()["errorId"].is_string(),
        "{}",
        unaudited.raw_text()
    );
    assert!(!unaudited.raw_text().contains("disk full"));
    assert_eq!(stats.snapshot().audit_failures, 1);
    let events = events.0.lock().unwrap().clone();
    let lost: Vec<_> = events
        .iter()
        .filter(|event| event.target == "fusion::audit" && event.level == tracing::Level::ERROR)
        .collect();
    assert_eq!(lost.len(), 1, "the lost record is logged once: {events:?}");
    let fields = &lost[0].fields;
    assert_eq!(fields["error"], "disk full");
    assert_eq!(fields["action"], "ledger.void");
    assert_eq!(fields["tenant"], "t_9");
    assert_eq!(
        fields["arguments_digest"],
        fusion::audit::arguments_digest(&json!({"id": "E-8"}))
    );
    assert_eq!(fields["outcome"], "ok");
    assert_eq!(
        recorder.records.lock().unwrap().len(),
        1,
        "nothing reached the sink"
    );
}

#[tokio::test]
async fn a_best_effort_sink_that_fails_leaves_the_result_alone() {
    let recorder = Arc::new(Recorder::default());
    recorder.failing.store(true, Ordering::SeqCst);
    let stats = Arc::new(CallStats::new());
    let server = ServerBuilder::new("s", "1")
        .state(Ledger::default())
        .tool::<void_entry>()
        .audit_best_effort(Arc::clone(&recorder))
        .metrics(stats.clone())
        .build()
        .unwrap();
    let tester = Tester::new(server).with_context(as_tenant("t_9"));
    let voided = tester.call("ledger.void", json!({"id": "E-8"})).await;
    assert_eq!(voided.data(), &json!("E-8"));
    assert_eq!(stats.snapshot().audit_failures, 1);
}

/// The audit records a store committed together with its changes.
#[derive(Default)]
struct AuditedLedger {
    committed: Mutex<Vec<(String, AuditRecord)>>,
}

/// Voids an entry and keeps its audit record in the same (here: one lock's) transaction.
#[tool(mutation, name = "ledger.void_audited")]
async fn void_audited(
    ledger: State<AuditedLedger>,
    audit: AuditEntry,
    id: String,
) -> Result<String, ToolError> {
    let record = audit.record();
    let store = State::arc(&ledger).clone();
    let kept = id.clone();
    fusion::blocking(move || store.committed.lock().unwrap().push((kept, record))).await?;
    audit.recorded();
    Ok(id)
}

/// Takes its audit entry but changes nothing, so it does not record it.
#[tool(mutation, name = "ledger.touch")]
async fn touch(audit: AuditEntry, id: String) -> Result<String, ToolError> {
    assert!(!audit.is_recorded());
    Ok(id)
}

#[tokio::test]
async fn a_handler_that_records_its_own_entry_is_not_recorded_again() {
    let recorder = Arc::new(Recorder::default());
    let ledger = Arc::new(AuditedLedger::default());
    let server = ServerBuilder::new("s", "1")
        .state_arc(Arc::clone(&ledger))
        .tool::<void_audited>()
        .tool::<touch>()
        .audit(Arc::clone(&recorder))
        .build()
        .unwrap();
    let tester = Tester::new(server).with_context(as_tenant("t_9"));
    assert_eq!(
        tester
            .call("ledger.void_audited", json!({"id": "E-1"}))
            .await
            .data(),
        &json!("E-1")
    );
    let committed = ledger.committed.lock().unwrap().clone();
    assert_eq!(committed.len(), 1);
    let (id, record) = &committed[0];
    assert_eq!(id, "E-1");
    assert_eq!(
        (record.tool.as_str(), record.action.as_str()),
        ("ledger_void_audited", "ledger.void_audited")
    );
    assert_eq!(record.principal.as_deref(), Some("agent-1"));
    assert_eq!(record.tenant.as_deref(), Some("t_9"));
    assert_eq!(
        record.arguments_digest,
        fusion::audit::arguments_digest(&json!({"id": "E-1"}))
    );
    assert!(
        recorder.records.lock().unwrap().is_empty(),
        "the sink did not record it again"
    );
    // A failing sink does not matter to a call that recorded itself…
    recorder.failing.store(true, Ordering::SeqCst);
    assert!(
        !tester
            .call("ledger.void_audited", json!({"id": "E-2"}))
            .await
            .is_error()
    );
    // …but one that did not is the sink's to record.
    assert_eq!(
        tester
            .call("ledger.touch", json!({"id": "E-3"}))
            .await
            .error_code(),
        Some("AUDIT_FAILED")
    );
    recorder.failing.store(false, Ordering::SeqCst);
    assert!(
        !tester
            .call("ledger.touch", json!({"id": "E-4"}))
            .await
            .is_error()
    );
    let records = recorder.records.lock().unwrap().clone();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].action, "ledger.touch");
}

/// An event the subscriber saw.
#[derive(Debug, Clone)]
struct Event {
    target: String,
    level: tracing::Level,
    fields: std::collections::BTreeMap<String, String>,
}

/// Collects every event.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<Event>>>);

struct Fields<'a>(&'a mut std::collections::BTreeMap<String, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Events {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _context: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut fields = std::collections::BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Event {
            target: event.metadata().target().to_owned(),
            level: *event.metadata().level(),
            fields,
        });
    }
}

#[tokio::test]
async fn without_hooks_nothing_is_measured() {
    // No span anyone wants, no metrics, no audit: no call reads a clock or digests arguments.
    let quiet = ServerBuilder::new("s", "1")
        .tool::<status>()
        .build()
        .unwrap();
    let tester = Tester::new(quiet.clone());
    // A subscriber that wants other targets only: fusion's call span stays disabled.
    let _subscriber = tracing::subscriber::set_default(tracing_subscriber::registry().with(
        tracing_subscriber::filter::Targets::new().with_target("elsewhere", tracing::Level::TRACE),
    ));
    for _ in 0..5 {
        assert!(!tester.call("admin.status", json!({})).await.is_error());
    }
    assert_eq!(quiet.measured_calls(), 0);

    // The probe sees measuring when there is a listener: metrics…
    let counted = ServerBuilder::new("s", "1")
        .tool::<status>()
        .metrics(Arc::new(CallStats::new()))
        .build()
        .unwrap();
    for _ in 0..3 {
        Tester::new(counted.clone())
            .call("admin.status", json!({}))
            .await;
    }
    assert_eq!(counted.measured_calls(), 3);
    // …or a subscriber that wants fusion's spans.
    let traced = ServerBuilder::new("s", "1")
        .tool::<status>()
        .build()
        .unwrap();
    {
        let _spans =
            tracing::subscriber::set_default(tracing_subscriber::registry().with(
                tracing_subscriber::filter::Targets::new().with_default(tracing::Level::TRACE),
            ));
        Tester::new(traced.clone())
            .call("admin.status", json!({}))
            .await;
    }
    assert_eq!(traced.measured_calls(), 1);
}

#[tokio::test]
async fn denied_calls_and_calls_without_a_valid_action_are_counted_as_errors() {
    let stats = Arc::new(CallStats::new());
    let server = ServerBuilder::new("s", "1")
        .exposition(fusion::Exposition::Grouped)
        .tool::<purge>()
        .tool::<status>()
        .access(scoped)
        .metrics(stats.clone())
        .build()
        .unwrap();
    let reader = Tester::new(server).with_context(|call| {
        call.extensions_mut().insert(Principal::new("reader"));
    });
    let denied = reader.call("admin.purge", json!({"target": "x"})).await;
    assert_eq!(denied.error_code(), Some("FORBIDDEN"));
    let unknown = reader
        .call_exposed("admin", json!({"action": "explode"}))
        .await
        .unwrap();
    assert_eq!(unknown.error_code(), Some("UNKNOWN_ACTION"));
    let missing = reader.call_exposed("admin", json!({})).await.unwrap();
    assert_eq!(missing.error_code(), Some("MISSING_DISCRIMINATOR"));
    assert!(!reader.call("admin.status", json!({})).await.is_error());
    let snapshot = stats.snapshot();
    assert_eq!((snapshot.calls, snapshot.errors), (4, 3), "{snapshot:?}");
    assert_eq!(snapshot.latency_buckets.iter().sum::<u64>(), 4);
    let count = |outcome: &str| {
        snapshot
            .by_outcome
            .iter()
            .find(|(name, _)| name == outcome)
            .map_or(0, |(_, count)| *count)
    };
    assert_eq!(
        [
            count("ok"),
            count("FORBIDDEN"),
            count("UNKNOWN_ACTION"),
            count("MISSING_DISCRIMINATOR")
        ],
        [1, 1, 1, 1]
    );
}

/// Panics as soon as it is called, for the principal `boom`.
fn panics_at_once() -> impl Middleware {
    from_fn(|call, _action| {
        if call
            .principal()
            .is_some_and(|principal| principal.subject == "boom")
        {
            panic!("middleware exploded with secret-token-1");
        }
        Ok(())
    })
}

/// Panics after it has had to wait, for the principal `later`.
struct PanicsAfterWaiting;

impl Middleware for PanicsAfterWaiting {
    fn before<'a>(
        &'a self,
        call: &'a mut CallContext,
        _action: ActionInfo<'a>,
    ) -> MiddlewareFuture<'a> {
        Box::pin(async move {
            let later = call
                .principal()
                .is_some_and(|principal| principal.subject == "later");
            tokio::task::yield_now().await;
            if later {
                panic!("middleware exploded with secret-token-2");
            }
            Ok(())
        })
    }
}

fn as_principal(subject: &'static str) -> impl Fn(&mut CallContext) + Send + Sync + 'static {
    move |call| {
        call.extensions_mut().insert(Principal::new(subject));
    }
}

fn assert_internal_error(result: &fusion::testing::TestResult) {
    assert_eq!(
        result.error_code(),
        Some("INTERNAL_ERROR"),
        "{}",
        result.raw_text()
    );
    let error_id = result.error()["errorId"].as_str().expect("an error id");
    assert_eq!(error_id.len(), 32);
    assert!(
        !result.raw_text().contains("secret-token"),
        "{}",
        result.raw_text()
    );
}

#[tokio::test]
async fn a_panicking_middleware_gives_internal_error_and_the_server_keeps_serving() {
    let stats = Arc::new(CallStats::new());
    let server = ServerBuilder::new("s", "1")
        .middleware(panics_at_once())
        .router(
            Router::new("admin")
                .middleware(PanicsAfterWaiting)
                .tool::<status>(),
        )
        .metrics(stats.clone())
        .build()
        .unwrap();
    let at_once = Tester::new(server.clone()).with_context(as_principal("boom"));
    assert_internal_error(&at_once.call("admin.status", json!({})).await);
    let after_waiting = Tester::new(server.clone()).with_context(as_principal("later"));
    assert_internal_error(&after_waiting.call("admin.status", json!({})).await);
    // The same server still answers.
    let fine = Tester::new(server).with_context(as_principal("fine"));
    assert_eq!(
        fine.call("admin.status", json!({})).await.data(),
        &json!(true)
    );
    let snapshot = stats.snapshot();
    assert_eq!((snapshot.calls, snapshot.errors), (3, 2));
}

#[tokio::test]
async fn a_panicking_access_policy_gives_internal_error_and_the_server_keeps_serving() {
    let server = ServerBuilder::new("s", "1")
        .tool::<status>()
        .access(|call: &CallContext, _action: ActionInfo<'_>| {
            if call
                .principal()
                .is_some_and(|principal| principal.subject == "boom")
            {
                panic!("policy exploded with secret-token-3");
            }
            true
        })
        .build()
        .unwrap();
    let boom = Tester::new(server.clone()).with_context(as_principal("boom"));
    assert_internal_error(&boom.call("admin.status", json!({})).await);
    // Listing asks the same policy: a tool it cannot decide about is not shown.
    let mut context = server.new_context();
    as_principal("boom")(&mut context);
    assert!(!server.is_visible("admin_status", &context));
    let fine = Tester::new(server).with_context(as_principal("fine"));
    assert_eq!(
        fine.call("admin.status", json!({})).await.data(),
        &json!(true)
    );
}

mod cents {
    /// Money, as integer cents.
    #[derive(serde::Serialize, schemars::JsonSchema)]
    pub(crate) struct Money {
        pub(crate) cents: i64,
    }
}

mod text {
    /// Money, as text.
    #[derive(serde::Serialize, schemars::JsonSchema)]
    pub(crate) struct Money {
        pub(crate) amount: String,
    }
}

/// A balance in cents.
#[tool(query, name = "wallet.balance")]
async fn balance() -> Result<cents::Money, ToolError> {
    Ok(cents::Money { cents: 1 })
}

/// A balance as text: another type with the same name.
#[tool(query, name = "wallet.balance_text")]
async fn balance_text() -> Result<text::Money, ToolError> {
    Ok(text::Money {
        amount: "0.01".into(),
    })
}

/// The same balance again: the same type under the same name.
#[tool(query, name = "wallet.balance_again")]
async fn balance_again() -> Result<cents::Money, ToolError> {
    Ok(cents::Money { cents: 1 })
}

#[test]
fn grouped_actions_returning_different_types_of_one_name_are_refused() {
    let error = ServerBuilder::new("s", "1")
        .exposition(fusion::Exposition::Grouped)
        .tool::<balance>()
        .tool::<balance_text>()
        .build()
        .expect_err("a conflict in the output `$defs`");
    assert_eq!(
        error.problems(),
        ["grouped tool `wallet`: actions return different types named `Money`"]
    );
    // One type shared by two actions is fine, and flat tools keep their own schemas.
    let shared = ServerBuilder::new("s", "1")
        .exposition(fusion::Exposition::Grouped)
        .tool::<balance>()
        .tool::<balance_again>()
        .build()
        .unwrap();
    let output = shared
        .tool("wallet")
        .unwrap()
        .definition()
        .output_schema
        .clone();
    let output = serde_json::to_value(output).unwrap();
    assert_eq!(
        output["$defs"]["Money"]["properties"]["cents"]["type"], "integer",
        "{output}"
    );
    assert!(
        ServerBuilder::new("s", "1")
            .tool::<balance>()
            .tool::<balance_text>()
            .build()
            .is_ok()
    );
}

/// Hooks that panic.
struct Exploding;

impl AuditSink for Exploding {
    fn record(&self, _record: &AuditRecord) -> Result<(), AuditError> {
        panic!("the audit sink exploded");
    }
}

impl fusion::Metrics for Exploding {
    fn call_finished(&self, _report: &fusion::observe::CallReport<'_>) {
        panic!("the metrics hook exploded");
    }
}

#[tokio::test]
async fn panicking_hooks_do_not_take_the_result_or_the_server_down() {
    let server = ServerBuilder::new("s", "1")
        .state(Ledger::default())
        .tool::<void_entry>()
        .audit_best_effort(Exploding)
        .metrics(Arc::new(Exploding))
        .build()
        .unwrap();
    let tester = Tester::new(server);
    let events = Events::default();
    let guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(events.clone()));
    // A best-effort trail: the write happened, the agent gets its result, the lost audit
    // record goes to the log.
    let first = tester.call("ledger.void", json!({"id": "E-1"})).await;
    let second = tester.call("ledger.void", json!({"id": "E-2"})).await;
    drop(guard);
    assert_eq!(first.data(), &json!("E-1"));
    assert_eq!(second.data(), &json!("E-2"));
    let events = events.0.lock().unwrap().clone();
    let lost: Vec<_> = events
        .iter()
        .filter(|event| event.target == "fusion::audit" && event.level == tracing::Level::ERROR)
        .collect();
    assert_eq!(lost.len(), 2, "{events:?}");
    assert!(lost[0].fields["error"].contains("the audit sink exploded"));
}

/// Set when the slow handler's future is dropped: proves a timed-out call was stopped.
#[derive(Default)]
struct Stopped(std::sync::atomic::AtomicBool);

struct SetOnDrop(Arc<Stopped>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.0.store(true, Ordering::SeqCst);
    }
}

/// Never finishes on its own.
#[tool(query, name = "slow.forever", timeout = "50ms")]
async fn forever(stopped: State<Stopped>) -> Result<bool, ToolError> {
    let _guard = SetOnDrop(State::arc(&stopped).clone());
    std::future::pending::<()>().await;
    Ok(true)
}

/// Answers at once.
#[tool(query, name = "slow.quick")]
async fn quick() -> Result<bool, ToolError> {
    Ok(true)
}

#[tokio::test]
async fn a_call_past_its_timeout_is_stopped_and_answered_timeout_retryable() {
    let server = ServerBuilder::new("s", "1")
        .state(Stopped::default())
        .tool::<forever>()
        .tool::<quick>()
        .build()
        .unwrap();
    assert_eq!(
        server.action("slow.forever").unwrap().timeout(),
        Some(Duration::from_millis(50))
    );
    assert_eq!(server.action("slow.quick").unwrap().timeout(), None);
    let stopped = server.new_context().state::<Stopped>().unwrap();
    let tester = Tester::new(server);
    let started = std::time::Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        tester.call("slow.forever", json!({})),
    )
    .await
    .expect("the timeout answers");
    assert_eq!(result.error_code(), Some("TIMEOUT"));
    assert_eq!(result.error()["retryable"], true);
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert!(stopped.0.load(Ordering::SeqCst), "the handler was stopped");
    assert!(!tester.call("slow.quick", json!({})).await.is_error());
}

#[tokio::test]
async fn a_server_default_timeout_applies_to_tools_without_their_own() {
    let server = ServerBuilder::new("s", "1")
        .state(Stopped::default())
        .default_timeout(Duration::from_secs(7))
        .tool::<quick>()
        .tool::<forever>()
        .build()
        .unwrap();
    assert_eq!(
        server.action("slow.quick").unwrap().timeout(),
        Some(Duration::from_secs(7))
    );
    // A tool's own timeout wins.
    assert_eq!(
        server.action("slow.forever").unwrap().timeout(),
        Some(Duration::from_millis(50))
    );
}

/// Limited to one call a minute per caller.
#[tool(query, name = "slow.rare", rate_limit = "1/m")]
async fn rare() -> Result<bool, ToolError> {
    Ok(true)
}

#[tokio::test]
async fn rate_limits_answer_rate_limited_per_caller_with_the_time_to_wait() {
    let server = ServerBuilder::new("s", "1")
        .rate_limit(fusion::RateLimit::new(3, Duration::from_secs(60)))
        .tool::<quick>()
        .tool::<rare>()
        .build()
        .unwrap();
    let alice = Tester::new(server.clone()).with_context(|call| {
        call.extensions_mut().insert(Principal::new("alice"));
    });
    let bob = Tester::new(server).with_context(|call| {
        call.extensions_mut().insert(Principal::new("bob"));
    });
    // The tool's own limit: one a minute.
    assert!(!alice.call("slow.rare", json!({})).await.is_error());
    let again = alice.call("slow.rare", json!({})).await;
    assert_eq!(again.error_code(), Some("RATE_LIMITED"));
    let wait = again.error()["retryAfterMs"].as_u64().unwrap();
    assert!(wait > 50_000 && wait <= 60_000, "{wait}");
    assert_eq!(again.error()["retryable"], true);
    // The server's limit, three a minute across tools: the refused call above counted too.
    assert!(!alice.call("slow.quick", json!({})).await.is_error());
    let over = alice.call("slow.quick", json!({})).await;
    assert_eq!(over.error_code(), Some("RATE_LIMITED"));
    // Bob has buckets of his own.
    assert!(!bob.call("slow.rare", json!({})).await.is_error());
    assert!(!bob.call("slow.quick", json!({})).await.is_error());
}

/// What a [`RecordingLock`] was asked for.
#[derive(Default)]
struct LockRecord {
    keys: Mutex<Vec<String>>,
    held: AtomicUsize,
    most: AtomicUsize,
}

/// A serialization lock shared "across replicas" that records what it is asked for, and can
/// fail or panic as the client of a lock store that is down would.
#[derive(Clone, Copy)]
enum LockBehaviour {
    Grant,
    Fail,
    Panic,
}

struct RecordingLock {
    record: Arc<LockRecord>,
    behaviour: LockBehaviour,
}

struct Release(Arc<LockRecord>);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, Ordering::SeqCst);
    }
}

impl fusion::SerializationLock for RecordingLock {
    fn acquire<'a>(
        &'a self,
        key: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<Box<dyn Send + 'static>, ToolError>> {
        Box::pin(async move {
            self.record.keys.lock().unwrap().push(key.to_owned());
            match self.behaviour {
                LockBehaviour::Grant => {
                    let now = self.record.held.fetch_add(1, Ordering::SeqCst) + 1;
                    self.record.most.fetch_max(now, Ordering::SeqCst);
                    Ok(Box::new(Release(Arc::clone(&self.record))) as Box<dyn Send>)
                }
                LockBehaviour::Fail => Err(ToolError::new(
                    "LockUnavailable",
                    "The lock store did not answer; nothing was changed.",
                )
                .with_retryable(true)
                .with_retry_after(Duration::from_secs(1))),
                LockBehaviour::Panic => panic!("lock store client bug: secret=hunter2"),
            }
        })
    }
}

fn ledger_with_lock(behaviour: LockBehaviour) -> (Tester, Arc<Ledger>, Arc<LockRecord>) {
    let record = Arc::new(LockRecord::default());
    let server = ServerBuilder::new("s", "1")
        .state(Ledger::default())
        .tool::<void_entry>()
        .tool::<void_unserialized>()
        .serialization_lock(RecordingLock {
            record: Arc::clone(&record),
            behaviour,
        })
        .build()
        .unwrap();
    let ledger = server.new_context().state::<Ledger>().unwrap();
    (Tester::new(server), ledger, record)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_lock_is_taken_with_the_validated_key_and_released_after_the_call() {
    let (tester, ledger, record) = ledger_with_lock(LockBehaviour::Grant);
    let mut calls = Vec::new();
    for _ in 0..20 {
        let tester = tester.clone();
        calls.push(tokio::spawn(async move {
            tester.call("ledger.void", json!({"id": "E-7"})).await
        }));
    }
    for call in calls {
        call.await.unwrap();
    }
    assert_eq!(ledger.successes.load(Ordering::SeqCst), 1);
    // Taken after the in-process FIFO turn: one holder at a time, all released.
    assert_eq!(record.most.load(Ordering::SeqCst), 1);
    assert_eq!(record.held.load(Ordering::SeqCst), 0);
    // Invalid arguments never reach the lock; an unserialized mutation does not take it.
    let invalid = tester.call("ledger.void", json!({"id": 7})).await;
    assert_eq!(invalid.error_code(), Some("VALIDATION_ERROR"));
    let unserialized = tester
        .call("ledger.void_unserialized", json!({"id": "E-8"}))
        .await;
    assert!(!unserialized.is_error(), "{}", unserialized.raw_text());
    let keys = record.keys.lock().unwrap().clone();
    assert_eq!(keys.len(), 20, "{keys:?}");
    assert!(
        keys.iter().all(|key| key == "ledger.void/\"E-7\""),
        "{keys:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_that_fails_answers_the_call_and_the_handler_never_runs() {
    let (tester, ledger, record) = ledger_with_lock(LockBehaviour::Fail);
    let result = tester.call("ledger.void", json!({"id": "E-1"})).await;
    assert_eq!(
        result.error_code(),
        Some("LockUnavailable"),
        "{}",
        result.raw_text()
    );
    assert_eq!(result.error()["retryable"], true);
    assert_eq!(ledger.successes.load(Ordering::SeqCst), 0);
    assert_eq!(record.keys.lock().unwrap().len(), 1);
    // The in-process FIFO turn was given back: the next call is not stuck behind it.
    let again = tokio::time::timeout(
        Duration::from_secs(5),
        tester.call("ledger.void", json!({"id": "E-1"})),
    )
    .await
    .expect("the FIFO turn of a failed lock was released");
    assert_eq!(again.error_code(), Some("LockUnavailable"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_that_panics_is_an_internal_error_that_leaks_nothing() {
    let (tester, ledger, _record) = ledger_with_lock(LockBehaviour::Panic);
    let result = tester.call("ledger.void", json!({"id": "E-1"})).await;
    assert_eq!(
        result.error_code(),
        Some("INTERNAL_ERROR"),
        "{}",
        result.raw_text()
    );
    assert!(
        !result.raw_text().contains("hunter2"),
        "{}",
        result.raw_text()
    );
    assert_eq!(ledger.successes.load(Ordering::SeqCst), 0);
    // The server goes on serving; the unserialized tool does not touch the lock at all.
    let other = tester
        .call("ledger.void_unserialized", json!({"id": "E-2"}))
        .await;
    assert!(!other.is_error(), "{}", other.raw_text());
}

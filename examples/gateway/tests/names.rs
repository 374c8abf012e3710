//! Every name an agent reads through a prefixed gateway is a name the gateway serves: the
//! `billing` binary (flat and grouped) mounted under `acct`, each of its answers read as an
//! agent reads it (the envelope's `invalidates`, its suggestions and available actions, the
//! `<cache_invalidation/>` block, and every name between backticks in its text blocks,
//! messages and recovery lines; the tools' descriptions, their "earlier results of … are
//! stale" included), and every name found called through the gateway, whose answers are read
//! in turn.

mod support;

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::time::Duration;

use fusion::gateway::Upstream;
use fusion::serde_json::{Value, json};
use fusion::serve::Mcp;
use fusion::{Principal, ServerBuilder};
use rmcp::model::CallToolResult;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use support::*;

const PREFIX: &str = "acct";

/// The most calls one walk makes: every name of billing's answers is reached well before.
const MAX_CALLS: usize = 120;

/// A gateway with only `billing --in-memory ARGS` mounted under `acct`, served in process.
async fn gateway(args: &[&str]) -> (fusion::Server, RunningService<RoleClient, ()>) {
    let mut upstream = Upstream::stdio(billing_bin().to_string_lossy())
        .arg("--in-memory")
        .timeout(Duration::from_secs(20));
    for arg in args {
        upstream = upstream.arg(*arg);
    }
    let server = ServerBuilder::new("gw", "1.0.0")
        .mount(PREFIX, upstream)
        .build()
        .expect("gateway server");
    server.upstreams_ready().await;
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let mcp = Mcp::new(server.clone()).context(|_request, call| {
        call.extensions_mut().insert(Principal::new("alice"));
    });
    tokio::spawn(async move {
        let running = mcp.handler().serve(server_io).await.expect("handshake");
        let _ = running.waiting().await;
    });
    let client = ().serve(client_io).await.expect("client handshake");
    (server, client)
}

/// A call an answer points to: a tool, and the arguments it gives (or none).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Next {
    tool: String,
    arguments: String,
}

impl Next {
    fn new(tool: &str, arguments: Option<&Value>) -> Self {
        Next {
            tool: tool.to_owned(),
            arguments: arguments.map_or_else(|| "{}".to_owned(), Value::to_string),
        }
    }
}

/// What the names of one surface are: those the gateway lists, and those billing serves
/// itself (the gateway's without the prefix), which an agent of the gateway must never read.
struct Surface {
    served: HashSet<String>,
    upstream_only: HashSet<String>,
}

impl Surface {
    fn new(listed: &[rmcp::model::Tool]) -> Self {
        let served: HashSet<String> = listed.iter().map(|tool| tool.name.to_string()).collect();
        let upstream_only = served
            .iter()
            .filter_map(|name| name.strip_prefix(&format!("{PREFIX}_")))
            .map(str::to_owned)
            .filter(|name| !served.contains(name))
            .collect();
        Surface {
            served,
            upstream_only,
        }
    }

    /// Checks a name the agent reads as a name: the gateway serves it.
    fn check(&self, name: &str, whence: &str) {
        assert!(
            self.served.contains(name),
            "{whence} names `{name}`, which the gateway does not serve"
        );
    }

    /// Every span between backticks in `text` that is a tool's name: served (and then a call
    /// to follow, with the `{"action":…}` a grouped name is written with), never billing's own.
    fn in_text(&self, text: &str, whence: &str, next: &mut Vec<Next>) {
        let mut rest = text;
        while let Some(open) = rest.find('`') {
            let Some(close) = rest[open + 1..].find('`') else {
                break;
            };
            let span = &rest[open + 1..open + 1 + close];
            rest = &rest[open + close + 2..];
            assert!(
                !self.upstream_only.contains(span),
                "{whence} names `{span}`, which only billing serves: {text}"
            );
            if self.served.contains(span) {
                let action = rest
                    .strip_prefix(" with `")
                    .and_then(|with| with.split_once('`'))
                    .and_then(|(arguments, _)| fusion::serde_json::from_str(arguments).ok());
                next.push(Next::new(span, action.as_ref()));
            }
        }
    }

    /// A reference to a call (`name` or `name {"action":…}`), as a list of them gives it.
    fn reference(&self, reference: &str, whence: &str, next: &mut Vec<Next>) {
        let (name, arguments) = match reference.split_once(' ') {
            Some((name, arguments)) => (
                name,
                Some(fusion::serde_json::from_str::<Value>(arguments).expect("JSON arguments")),
            ),
            None => (reference, None),
        };
        self.check(name, whence);
        next.push(Next::new(name, arguments.as_ref()));
    }

    /// Every name in an answer, checked, and the calls they point to; the names it says are
    /// stale are added to `stale`.
    fn answer(
        &self,
        called: &Next,
        result: &CallToolResult,
        stale: &mut BTreeSet<String>,
    ) -> Vec<Next> {
        let whence = format!("the answer of {} {}", called.tool, called.arguments);
        let mut next = Vec::new();
        // Besides `invalidates`, the envelope names no tool: the other names are in the text
        // blocks.
        let envelope = result
            .structured_content
            .as_ref()
            .unwrap_or_else(|| panic!("{whence} has no envelope: {result:?}"));
        for tool in envelope["meta"]["invalidates"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let tool = tool.as_str().expect("a stale tool's name");
            self.check(tool, &whence);
            stale.insert(tool.to_owned());
            next.push(Next::new(tool, None));
        }
        for block in &result.content {
            let Some(text) = block.as_text().map(|text| text.text.as_str()) else {
                continue;
            };
            self.in_text(text, &whence, &mut next);
            // The lists in text: `- tool {arguments}: reason` and `<available_actions>`.
            if text.starts_with("<action_suggestions>") {
                for line in text.lines().filter_map(|line| line.strip_prefix("- ")) {
                    let (tool, rest) = line.split_once(' ').unwrap_or((line, ""));
                    self.check(tool, &whence);
                    let mut arguments =
                        fusion::serde_json::Deserializer::from_str(rest).into_iter::<Value>();
                    let arguments = arguments.next().and_then(Result::ok);
                    next.push(Next::new(tool, arguments.as_ref()));
                }
            }
            // `<cache_invalidation cause="tool" domains="tool,tool"/>`
            if let Some(attributes) = text.strip_prefix("<cache_invalidation ") {
                for (attribute, value) in attributes
                    .trim_end_matches("/>")
                    .split_whitespace()
                    .filter_map(|pair| pair.split_once('='))
                {
                    for tool in value.trim_matches('"').split(',') {
                        self.check(tool, &format!("{whence}, <cache_invalidation {attribute}>"));
                        if attribute == "domains" {
                            stale.insert(tool.to_owned());
                        }
                    }
                }
            }
            for line in text.lines() {
                if let Some(list) = line
                    .strip_prefix("<available_actions>")
                    .and_then(|list| list.strip_suffix("</available_actions>"))
                {
                    for reference in list.split(", ") {
                        self.reference(reference, &whence, &mut next);
                    }
                }
            }
        }
        next
    }
}

/// What a walk met.
struct Walk {
    /// The calls the answers and descriptions named.
    named: BTreeSet<Next>,
    /// The error codes answered.
    codes: BTreeSet<String>,
    /// The tools answers said are stale after a success.
    stale: BTreeSet<String>,
}

/// Calls `first`, then every call their answers name, and theirs, …: each answer read as an
/// agent reads it.
async fn follow(client: &RunningService<RoleClient, ()>, first: Vec<Next>) -> Walk {
    let listed = client.peer().list_all_tools().await.expect("tools/list");
    let surface = Surface::new(&listed);
    // The descriptions name tools too.
    let mut named_calls = BTreeSet::new();
    // The first calls are made each once, in order (some repeat on purpose); then what the
    // answers name, once.
    let seeds = first.len();
    let mut queue: VecDeque<Next> = first.into();
    for tool in &listed {
        let mut named = Vec::new();
        let whence = format!("the description of {}", tool.name);
        surface.in_text(
            tool.description.as_deref().unwrap_or_default(),
            &whence,
            &mut named,
        );
        named_calls.extend(named.iter().cloned());
        queue.extend(named);
    }
    let mut seen = HashSet::new();
    let mut codes = BTreeSet::new();
    let mut stale = BTreeSet::new();
    let mut made = 0;
    while let Some(next) = queue.pop_front() {
        made += 1;
        if !seen.insert(next.clone()) && made > seeds {
            continue;
        }
        assert!(
            seen.len() <= MAX_CALLS,
            "more calls than expected: {seen:?}"
        );
        let arguments: Value = fusion::serde_json::from_str(&next.arguments).unwrap();
        let result = call(client.peer(), &next.tool, arguments)
            .await
            .unwrap_or_else(|error| panic!("{} {} failed: {error}", next.tool, next.arguments));
        if result.is_error == Some(true) {
            let code = &result.structured_content.as_ref().unwrap()["error"]["code"];
            assert_ne!(code, "UNKNOWN_TOOL", "{next:?}");
            codes.insert(code.as_str().unwrap_or_default().to_owned());
        }
        let named = surface.answer(&next, &result, &mut stale);
        named_calls.extend(named.iter().cloned());
        queue.extend(named);
    }
    Walk {
        named: named_calls,
        codes,
        stale,
    }
}

/// Answers of every kind: successes, a cut list, the domain errors with their recoveries, a
/// refused argument. `tool` and `arguments` as `billing` calls them flat.
fn seeds() -> Vec<(&'static str, Value)> {
    vec![
        ("statuses", json!({})),
        ("invoice_stats", json!({})),
        ("list_invoices", json!({"limit": 2})),
        ("list_invoices", json!({"status": "open", "limit": 3})),
        ("get_invoice", json!({"id": "INV-3"})),
        ("get_invoice", json!({"id": "INV-999999"})),
        ("get_invoice", json!({"id": 7})),
        ("void_invoice", json!({"id": "INV-6"})),
        // Voided in the seed.
        ("void_invoice", json!({"id": "INV-5"})),
        ("update_invoice", json!({"id": "INV-5", "total_cents": 5})),
        (
            "create_invoice",
            json!({"customer_id": "C-1", "total_cents": -5}),
        ),
        (
            "create_invoice",
            json!({"customer_id": "C-1", "total_cents": 500, "idempotency_key": "k-1"}),
        ),
        (
            "create_invoice",
            json!({"customer_id": "C-2", "total_cents": 500, "idempotency_key": "k-1"}),
        ),
        ("send_reminder", json!({"id": "INV-3"})),
    ]
}

/// The walk met every kind of failure the seeds ask for, recovery lines and actions included.
fn assert_codes(walk: &Walk) {
    for code in [
        "InvoiceNotFound",
        "AlreadyVoided",
        "InvoiceNotOpen",
        "InvalidAmount",
        "IdempotencyKeyReused",
        "VALIDATION_ERROR",
    ] {
        assert!(walk.codes.contains(code), "no {code}: {:?}", walk.codes);
    }
}

#[tokio::test]
async fn every_name_in_a_flat_upstreams_answers_is_served_and_answers() {
    within(async {
        let (server, client) = gateway(&[]).await;
        let first = seeds()
            .into_iter()
            .map(|(action, arguments)| {
                Next::new(&format!("{PREFIX}_billing_{action}"), Some(&arguments))
            })
            .collect();
        let walk = follow(&client, first).await;
        assert_codes(&walk);
        let named = walk.named;
        // Recovery lines, available actions and suggestions named these, as the gateway
        // serves them.
        let tools: BTreeSet<&str> = named.iter().map(|next| next.tool.as_str()).collect();
        for tool in [
            "acct_billing_list_invoices",
            "acct_billing_get_invoice",
            "acct_billing_create_invoice",
            "acct_billing_void_invoice",
        ] {
            assert!(tools.contains(tool), "{tool} not named: {named:?}");
        }
        // What a mutation makes stale: its queries, as the gateway serves them.
        for tool in ["acct_billing_list_invoices", "acct_billing_get_invoice"] {
            assert!(
                walk.stale.contains(tool),
                "{tool} not stale: {:?}",
                walk.stale
            );
        }
        let listed = client.peer().list_all_tools().await.unwrap();
        let void = listed
            .iter()
            .find(|tool| tool.name == "acct_billing_void_invoice")
            .unwrap();
        let description = void.description.as_deref().unwrap_or_default();
        assert!(
            description.contains("earlier results of `acct_billing_")
                && !description.contains("billing.*"),
            "{description}"
        );
        client.cancel().await.unwrap();
        server.shutdown_upstreams().await;
    })
    .await;
}

#[tokio::test]
async fn every_name_in_a_grouped_upstreams_answers_is_served_and_answers() {
    within(async {
        let (server, client) = gateway(&["--grouped"]).await;
        let tool = format!("{PREFIX}_billing");
        let first = seeds()
            .into_iter()
            .map(|(action, mut arguments)| {
                arguments["action"] = action.into();
                Next::new(&tool, Some(&arguments))
            })
            .collect();
        let walk = follow(&client, first).await;
        assert_codes(&walk);
        let named = walk.named;
        let actions: BTreeSet<String> = named
            .iter()
            .inspect(|next| assert_eq!(next.tool, tool))
            .filter_map(|next| {
                let arguments: Value = fusion::serde_json::from_str(&next.arguments).unwrap();
                arguments["action"].as_str().map(str::to_owned)
            })
            .collect();
        for action in [
            "list_invoices",
            "get_invoice",
            "create_invoice",
            "void_invoice",
        ] {
            assert!(actions.contains(action), "{action} not named: {named:?}");
        }
        // A grouped tool is stale as a whole, under the name the gateway serves.
        assert_eq!(walk.stale, BTreeSet::from([tool.clone()]));
        let listed = client.peer().list_all_tools().await.unwrap();
        let grouped = listed.iter().find(|listed| listed.name == tool).unwrap();
        let description = grouped.description.as_deref().unwrap_or_default();
        assert!(
            description.contains(&format!(
                "earlier results of `{tool}` with `{{\"action\":\"list_invoices\"}}`"
            )) && !description.contains("billing.*"),
            "{description}"
        );
        client.cancel().await.unwrap();
        server.shutdown_upstreams().await;
    })
    .await;
}

//! Verbs with intent (SPEC T1, T2) and state the agent can feel (SPEC S1).

mod common;

use common::*;
use fusion::testing::Tester;
use fusion::{CacheHint, Verb};
use serde_json::{Value, json};

#[test]
fn verbs_set_the_mcp_annotations() {
    let server = server();
    let annotations = |key: &str| server.action(key).unwrap().annotations().clone();
    let query = annotations("billing.get_invoice");
    assert_eq!(
        (
            query.read_only_hint,
            query.destructive_hint,
            query.idempotent_hint
        ),
        (Some(true), Some(false), Some(true))
    );
    let mutation = annotations("billing.void_invoice");
    assert_eq!(
        (
            mutation.read_only_hint,
            mutation.destructive_hint,
            mutation.idempotent_hint
        ),
        (Some(false), Some(true), Some(false))
    );
    let idempotent = annotations("billing.update_invoice");
    assert_eq!(
        (idempotent.destructive_hint, idempotent.idempotent_hint),
        (Some(true), Some(true))
    );
    let not_destructive = annotations("billing.create_invoice");
    assert_eq!(not_destructive.destructive_hint, Some(false));
    let action = annotations("ops.reindex");
    assert_eq!(
        (
            action.read_only_hint,
            action.destructive_hint,
            action.idempotent_hint
        ),
        (Some(false), Some(false), Some(false))
    );
    assert_eq!(server.action("ops.reindex").unwrap().verb(), Verb::Action);
    // The title is the tool's own, which clients show first; the annotations do not repeat
    // it (every listing would pay for it twice).
    assert_eq!(query.title, None);
    let tool = server.tool("billing_get_invoice").unwrap().definition();
    assert_eq!(tool.title.as_deref(), Some("Get invoice"));
}

#[test]
fn names_descriptions_tags_and_defaults() {
    let server = server();
    let names: Vec<&str> = server.tools().map(|tool| tool.name()).collect();
    assert_eq!(
        names,
        [
            "billing_get_invoice",
            "billing_list_invoices",
            "billing_summaries",
            "billing_void_invoice",
            "billing_create_invoice",
            "billing_update_invoice",
            "ops_health",
            "ops_reindex"
        ]
    );
    let get = server
        .tool("billing_get_invoice")
        .unwrap()
        .definition()
        .clone();
    assert_eq!(get.description.as_deref(), Some("Gets one invoice by id."));
    assert_eq!(get.title.as_deref(), Some("Get invoice"));
    let meta = serde_json::to_value(&get.meta).unwrap();
    assert_eq!(meta["dev.fusion/tags"], json!(["billing", "read"]));
    assert_eq!(meta["dev.fusion/key"], "billing.get_invoice");
    assert_eq!(meta["dev.fusion/verb"], "query");
    assert_eq!(
        get.input_schema["properties"]["id"]["description"],
        "The invoice id, such as INV-7."
    );
    // A tool without `name` is named after its function.
    let bare = fusion::ServerBuilder::new("s", "1")
        .tool::<unnamed>()
        .build()
        .unwrap();
    assert_eq!(bare.tools().next().unwrap().name(), "unnamed");
}

/// A tool named after its function.
#[fusion::tool(query)]
async fn unnamed() -> Result<bool, fusion::ToolError> {
    Ok(true)
}

#[test]
fn cache_hints_are_visible_in_tools_list() {
    let server = server();
    assert_eq!(
        server.action("billing.list_invoices").unwrap().cache(),
        Some(CacheHint::Volatile)
    );
    assert_eq!(
        server.action("billing.summaries").unwrap().cache(),
        Some(CacheHint::Immutable)
    );
    let volatile = server
        .tool("billing_list_invoices")
        .unwrap()
        .definition()
        .clone();
    assert!(volatile.description.unwrap().contains("Cache: volatile"));
    assert_eq!(
        serde_json::to_value(&volatile.meta).unwrap()["dev.fusion/cache"],
        "volatile"
    );
    let immutable = server
        .tool("billing_summaries")
        .unwrap()
        .definition()
        .clone();
    assert!(immutable.description.unwrap().contains("Cache: immutable"));
}

#[tokio::test]
async fn a_successful_mutation_says_what_to_fetch_again_and_a_failed_one_does_not() {
    let tester = Tester::new(server());
    let voided = tester
        .call("billing.void_invoice", json!({"id": "INV-1"}))
        .await;
    // `billing.*`'s queries, as the agent calls them.
    let stale = [
        "billing_get_invoice",
        "billing_list_invoices",
        "billing_summaries",
    ];
    assert_eq!(voided.invalidations(), stale);
    assert_eq!(voided.meta()["invalidates"], json!(stale));
    assert_eq!(
        voided.texts().last().copied(),
        Some(
            "<cache_invalidation cause=\"billing_void_invoice\" \
             domains=\"billing_get_invoice,billing_list_invoices,billing_summaries\"/>"
        )
    );

    let again = tester
        .call("billing.void_invoice", json!({"id": "INV-1"}))
        .await;
    assert_eq!(again.error_code(), Some("AlreadyVoided"));
    assert!(again.invalidations().is_empty());
    assert_eq!(again.meta().get("invalidates"), None);
    assert!(!again.raw_text().contains("cache_invalidation"));

    let invalid = tester.call("billing.void_invoice", json!({})).await;
    assert!(invalid.invalidations().is_empty());

    let created = tester
        .call(
            "billing.create_invoice",
            json!({"customer_id": "C", "total_cents": 1}),
        )
        .await;
    assert_eq!(
        created.invalidations(),
        ["billing_list_invoices", "billing_summaries"]
    );

    let read = tester
        .call("billing.get_invoice", json!({"id": "INV-2"}))
        .await;
    assert!(read.invalidations().is_empty());
    assert_eq!(read.meta().get("invalidates"), None);
}

#[test]
fn invalidation_globs_can_be_read_back() {
    let server = server();
    let globs: Vec<&str> = server
        .action("billing.create_invoice")
        .unwrap()
        .invalidates()
        .iter()
        .map(|glob| glob.as_str())
        .collect();
    assert_eq!(globs, ["billing.list_invoices", "billing.summaries"]);
    let meta = serde_json::to_value(
        &server
            .tool("billing_update_invoice")
            .unwrap()
            .definition()
            .meta,
    )
    .unwrap();
    assert_eq!(meta["dev.fusion/invalidates"], json!(["billing.**"]));
    // The agent reads the tools it calls, not the globs.
    let described = server
        .tool("billing_create_invoice")
        .unwrap()
        .definition()
        .description
        .clone()
        .unwrap();
    assert!(
        described.ends_with(
            "After it succeeds, earlier results of `billing_list_invoices`, \
             `billing_summaries` are stale."
        ),
        "{described}"
    );
    assert_eq!(
        server.action("billing.get_invoice").unwrap().version(),
        "1.4.0"
    );
    assert_eq!(Value::from(server.version()), json!("1.4.0"));
}

//! The billing connector's surface is the reviewed one, `fusion.lock` next to Cargo.toml
//! (rewrite it with `FUSION_LOCK=update cargo test -p billing`, then review its diff), and the
//! gate fails on the changes that matter, each with its class.
//!
//! The changes are made to a copy of the reviewed lockfile, not to billing's code: a reviewed
//! lockfile that lists a field the code does not present is the code having removed it.

use std::sync::Arc;

use fusion::audit::TracingAuditSink;
use fusion::lock::{
    Check, Class, LockError, Lockfile, Mode, Outcome, PresentedField, Rule, Surface,
};
use fusion::serde_json::json;

const REVIEWED: &str = include_str!("../fusion.lock");

/// The server as `main` builds it: flat, every toolset, with an audit sink whose record is
/// required.
fn builder() -> fusion::ServerBuilder {
    let store = billing::Store::open_in_memory().expect("an in-memory store");
    billing::builder(Arc::new(store)).audit(TracingAuditSink)
}

fn server() -> fusion::Server {
    builder().build().expect("billing builds")
}

/// The reviewed surface, with a token budget: a tool's definition that grows more than 10 %
/// fails the check until the lockfile is updated (and the growth reviewed).
#[test]
fn the_surface_is_the_reviewed_one() {
    Check::new("fusion.lock")
        .token_budget(fusion::lock::DEFAULT_THRESHOLD_PERCENT)
        .assert(&server());
}

#[test]
fn a_definition_that_blows_the_token_budget_is_risky() {
    let reviewed = Lockfile::parse(REVIEWED).unwrap().surface;
    let budget = reviewed
        .tokens
        .as_ref()
        .expect("billing keeps a token budget");
    assert_eq!(budget.tokenizer, "o200k_base");
    let listed: u64 = budget.definitions.values().sum();
    assert!(
        listed <= 400 * budget.definitions.len() as u64,
        "{listed} tokens for {} tools",
        budget.definitions.len()
    );
    // As if the reviewed definition had been a fifth smaller: the code's is 25 % more.
    let (_dir, path) = reviewed_with(|surface| {
        let budget = surface.tokens.as_mut().unwrap();
        let get = budget.definitions.get_mut("billing_get_invoice").unwrap();
        *get = *get * 4 / 5;
    });
    let error = Check::new(&path)
        .mode(Mode::Check)
        .fail_on(Class::Risky)
        .run(&server())
        .expect_err("the check fails");
    let LockError::Changed { diff, .. } = &error else {
        panic!("not a change: {error}");
    };
    let changes: Vec<(Rule, &str)> = diff
        .changes()
        .iter()
        .map(|change| (change.rule, change.subject.as_str()))
        .collect();
    assert_eq!(changes, [(Rule::TokensGrew, "billing_get_invoice")]);
    assert!(
        error.to_string().contains("over the 10 % threshold"),
        "{error}"
    );
    // Within the threshold, the change is cosmetic: reviewed by updating the lockfile.
    let (_dir, path) = reviewed_with(|surface| {
        let budget = surface.tokens.as_mut().unwrap();
        *budget.definitions.get_mut("billing_get_invoice").unwrap() -= 1;
    });
    let (rules, _) = failure(&path, Class::Cosmetic);
    assert_eq!(rules, [(Rule::TokensChanged, "billing_get_invoice".into())]);
}

/// The worst answer of each presenter (a full page at its limit) is in the budget too: a change
/// that makes a page cost more than 10 % more tokens fails the check until it is reviewed.
#[test]
fn an_answer_that_blows_the_token_budget_is_risky() {
    let reviewed = Lockfile::parse(REVIEWED).unwrap().surface;
    let answers = &reviewed.tokens.as_ref().unwrap().answers;
    let list = answers["billing.list_invoices"].expect("a bounded page");
    let get = answers["billing.get_invoice"].expect("one invoice");
    assert!(
        list > 20 * get / 2,
        "50 invoices in {list} tokens, one in {get}"
    );
    // The change: every answer's data as JSON in its text block instead of a table.
    let verbose = builder()
        .data_text(fusion::envelope::DataText::Json)
        .build()
        .unwrap();
    let error = Check::new("fusion.lock")
        .mode(Mode::Check)
        .fail_on(Class::Risky)
        .run(&verbose)
        .expect_err("the check fails");
    let LockError::Changed { diff, .. } = &error else {
        panic!("not a change: {error}");
    };
    let grew: Vec<&str> = diff
        .changes()
        .iter()
        .filter(|change| change.rule == Rule::TokensGrew)
        .map(|change| change.subject.as_str())
        .collect();
    assert_eq!(grew, ["billing.list_invoices"], "{error}");
    assert!(
        error.to_string().contains("worst answer grew from"),
        "{error}"
    );
}

#[test]
fn the_reviewed_lockfile_is_consistent_and_written_as_fusion_writes_it() {
    let reviewed = Lockfile::parse(REVIEWED).expect("fusion.lock reads");
    assert!(reviewed.verify().is_empty(), "{:?}", reviewed.verify());
    assert_eq!(
        reviewed.surface.to_lockfile(),
        REVIEWED.replace("\r\n", "\n")
    );
    // Two builds, two surfaces: the same bytes.
    let one = fusion::lock::surface(&server()).to_lockfile();
    let other = fusion::lock::surface(&server()).to_lockfile();
    assert_eq!(one, other);
}

/// The reviewed surface, edited by `edit`, written where a check can read it.
fn reviewed_with(edit: impl FnOnce(&mut Surface)) -> (tempfile::TempDir, std::path::PathBuf) {
    let mut surface = Lockfile::parse(REVIEWED).unwrap().surface;
    edit(&mut surface);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fusion.lock");
    std::fs::write(&path, surface.to_lockfile()).unwrap();
    (dir, path)
}

/// The rules of a failed check, and its message.
fn failure(path: &std::path::Path, fail_on: Class) -> (Vec<(Rule, String)>, String) {
    let error = Check::new(path)
        .mode(Mode::Check)
        .fail_on(fail_on)
        .run(&server())
        .expect_err("the check fails");
    let LockError::Changed { diff, .. } = &error else {
        panic!("not a change: {error}");
    };
    let rules = diff
        .changes()
        .iter()
        .map(|change| (change.rule, change.subject.clone()))
        .collect();
    (rules, error.to_string())
}

fn action<'s>(surface: &'s mut Surface, key: &str) -> &'s mut fusion::lock::ActionEntry {
    surface.actions.get_mut(key).expect("a billing action")
}

#[test]
fn a_field_removed_from_a_presenter_is_breaking() {
    let (_dir, path) = reviewed_with(|surface| {
        let get = action(surface, "billing.get_invoice");
        let view = get.egress.presenters.get_mut("InvoiceView").unwrap();
        view.fields.insert(
            "due_date".into(),
            PresentedField {
                label: "Due date".into(),
                presenter: None,
            },
        );
        let data = &mut get.output_schema;
        data["properties"]["due_date"] = json!({"type": "string", "description": "Due date"});
        data["required"]
            .as_array_mut()
            .unwrap()
            .push(json!("due_date"));
    });
    let (rules, message) = failure(&path, Class::Cosmetic);
    assert_eq!(
        rules,
        [(Rule::OutputFieldRemoved, "billing.get_invoice".into())]
    );
    assert!(
        message.contains(
            "breaking  billing.get_invoice: presenter `InvoiceView` no longer presents `due_date`"
        ),
        "{message}"
    );
    // Breaking fails whatever the policy.
    assert_eq!(failure(&path, Class::Breaking).0.len(), 1);
}

#[test]
fn a_field_added_to_a_presenter_is_risky() {
    let (_dir, path) = reviewed_with(|surface| {
        let get = action(surface, "billing.get_invoice");
        get.egress
            .presenters
            .get_mut("InvoiceView")
            .unwrap()
            .fields
            .remove("customer_id");
        let data = &mut get.output_schema;
        data["properties"]
            .as_object_mut()
            .unwrap()
            .remove("customer_id");
        data["required"]
            .as_array_mut()
            .unwrap()
            .retain(|field| field != "customer_id");
    });
    let (rules, message) = failure(&path, Class::Cosmetic);
    assert_eq!(
        rules,
        [(Rule::PresenterFieldAdded, "billing.get_invoice".into())]
    );
    assert!(
        message.contains(
            "risky     billing.get_invoice: egress widened: presenter `InvoiceView` lets `customer_id` out"
        ),
        "{message}"
    );
    // A policy that fails on breaking changes only lets it through, and says so.
    let outcome = Check::new(&path)
        .mode(Mode::Check)
        .fail_on(Class::Breaking)
        .run(&server())
        .unwrap();
    assert!(
        matches!(&outcome, Outcome::Tolerated(diff) if diff.worst() == Some(Class::Risky)),
        "{outcome:?}"
    );
}

#[test]
fn flipping_destructive_is_breaking() {
    let (_dir, path) = reviewed_with(|surface| {
        action(surface, "billing.void_invoice")
            .annotations
            .destructive = Some(false);
    });
    let (rules, message) = failure(&path, Class::Breaking);
    assert_eq!(
        rules,
        [(Rule::DestructiveFlipped, "billing.void_invoice".into())]
    );
    assert!(
        message
            .contains("breaking  billing.void_invoice: `destructive` flipped from false to true"),
        "{message}"
    );
}

#[test]
fn a_new_required_argument_is_breaking() {
    let (_dir, path) = reviewed_with(|surface| {
        let input = &mut action(surface, "billing.get_invoice").input_schema;
        input["properties"].as_object_mut().unwrap().remove("id");
        input.as_object_mut().unwrap().remove("required");
    });
    let (rules, message) = failure(&path, Class::Breaking);
    assert_eq!(
        rules,
        [(Rule::RequiredArgumentAdded, "billing.get_invoice".into())]
    );
    assert!(
        message.contains("breaking  billing.get_invoice: new required argument `id`"),
        "{message}"
    );
    assert!(
        message.contains("FUSION_LOCK=update cargo test"),
        "{message}"
    );
}

#[test]
fn the_server_refuses_to_start_on_a_surface_that_was_not_reviewed() {
    assert!(builder().lock(REVIEWED).build().is_ok());

    let (_dir, path) = reviewed_with(|surface| {
        action(surface, "billing.void_invoice")
            .annotations
            .destructive = Some(false);
    });
    let error = builder()
        .lock(std::fs::read_to_string(path).unwrap())
        .build()
        .expect_err("fails closed");
    let diff = error.lock_diff().expect("the classified diff");
    assert_eq!(diff.changes()[0].rule, Rule::DestructiveFlipped);
    assert!(
        error.to_string().starts_with(
            "the server cannot be built: its surface is not the one reviewed in its lockfile (1 change: 1 breaking)\n  breaking  billing.void_invoice: `destructive` flipped"
        ),
        "{error}"
    );

    // Grouped exposition is another surface: every namespaced tool has another name.
    let grouped = builder()
        .exposition(fusion::Exposition::Grouped)
        .lock(REVIEWED)
        .build()
        .expect_err("fails closed");
    assert!(
        grouped
            .lock_diff()
            .unwrap()
            .changes()
            .iter()
            .any(|change| change.rule == Rule::ExpositionChanged)
    );
}

#[test]
fn the_lockfile_holds_what_billing_declares() {
    let reviewed = Lockfile::parse(REVIEWED).unwrap().surface;
    assert_eq!(reviewed.server.name, "billing");
    assert!(reviewed.server.access_policy);
    let void = &reviewed.actions["billing.void_invoice"];
    assert_eq!(void.state.invalidates, ["billing.*"]);
    assert_eq!(
        void.guards.serialization,
        fusion::lock::Serialization::PerArgument("id".into())
    );
    let view = &void.egress.presenters["InvoiceView"];
    assert_eq!(
        view.fields.keys().collect::<Vec<_>>(),
        ["customer_id", "id", "status", "total_cents"]
    );
    assert_eq!(view.rules.len(), 2);
    assert_eq!(void.egress.ui_kinds, ["code", "markdown", "mermaid"]);
    let list = &reviewed.actions["billing.list_invoices"];
    assert_eq!(list.egress.limit, Some(50));
    assert_eq!(list.egress.ui_kinds, ["chart", "markdown", "table"]);
    assert_eq!(list.guards.max_bytes, Some(65536));
    assert_eq!(
        reviewed.actions["billing.invoice_stats"]
            .access
            .toolset
            .as_deref(),
        Some("reports")
    );
}

//! The capability lockfile from real servers (SPEC L1): what the surface holds of what the
//! macros declare, the gate's modes and messages, the classes of real code changes (each
//! version of a tool or presenter below is the code before or after a change), and the
//! start-up check.

#![allow(missing_docs, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use fusion::audit::TracingAuditSink;
use fusion::lock::{Check, Class, LockError, Mode, Outcome, Rule, Serialization};
use fusion::{
    ActionInfo, CallContext, Exposition, Presented, RateLimit, Server, ServerBuilder, Suggestion,
    Tool, ToolError, UiBlock, model, presenter, tool,
};

#[model]
pub struct Owner {
    #[cast("Owner name")]
    pub name: String,
    #[cast("Owner email")]
    pub email: String,
    #[hidden]
    pub password: fusion::Hidden<String>,
}

#[model]
pub struct Item {
    #[cast("Item id")]
    pub id: String,
    #[cast("Item name")]
    pub name: String,
    #[cast("Price in integer cents")]
    pub price_cents: i64,
    #[cast("Who owns it")]
    pub owner: Owner,
    #[hidden]
    pub secret: fusion::Hidden<String>,
}

#[presenter(Owner, fields(name))]
#[derive(Debug)]
pub struct OwnerView;

#[presenter(Owner, fields(name, email))]
#[derive(Debug)]
pub struct OwnerWithEmail;

fn next(_: Presented<'_, ItemViewItem<'_>>) -> Vec<Suggestion> {
    Vec::new()
}

fn blocks(_: Presented<'_, ItemViewItem<'_>>) -> Vec<UiBlock> {
    Vec::new()
}

#[presenter(Item, fields(id, name, owner = OwnerView), limit = 20,
            rules = ["Prices are cents."], suggest = next, actions = ["shop.delete_item"],
            ui = blocks)]
#[derive(Debug)]
pub struct ItemView;

// The presenter after one change each.
#[presenter(Item, fields(id, owner = OwnerView), limit = 20, rules = ["Prices are cents."])]
#[derive(Debug)]
pub struct ItemWithoutName;

#[presenter(Item, fields(id, name, price_cents, owner = OwnerView), limit = 20,
            rules = ["Prices are cents."])]
#[derive(Debug)]
pub struct ItemWithPrice;

#[presenter(Item, fields(id, name, owner = OwnerWithEmail), limit = 20,
            rules = ["Prices are cents."])]
#[derive(Debug)]
pub struct ItemWithOwnerEmail;

#[presenter(Item, fields(id, name, owner = OwnerView), limit = 20,
            rules = ["Prices are integer cents."])]
#[derive(Debug)]
pub struct ItemWithOtherRule;

#[presenter(Item, fields(id, name, owner = OwnerView), limit = 20, rules = ["Prices are cents."])]
#[derive(Debug)]
pub struct ItemPlain;

fn table(_: Presented<'_, ItemWithTableItem<'_>>) -> Vec<UiBlock> {
    Vec::new()
}

#[presenter(Item, fields(id, name, owner = OwnerView), limit = 20, rules = ["Prices are cents."],
            ui = table, ui_kinds = ["table"])]
#[derive(Debug)]
pub struct ItemWithTable;

fn missing<T>() -> Result<T, ToolError> {
    Err(ToolError::not_found("No such item."))
}

/// Gets one item.
#[tool(query, name = "shop.get_item", returns = ItemPlain, title = "Get item", tags = ["items"])]
async fn get_item(id: String) -> Result<Item, ToolError> {
    let _ = id;
    missing()
}

/// Gets one item.
#[tool(query, name = "shop.get_item", returns = ItemWithoutName, title = "Get item", tags = ["items"])]
async fn get_item_without_name(id: String) -> Result<Item, ToolError> {
    let _ = id;
    missing()
}

/// Gets one item.
#[tool(query, name = "shop.get_item", returns = ItemWithPrice, title = "Get item", tags = ["items"])]
async fn get_item_with_price(id: String) -> Result<Item, ToolError> {
    let _ = id;
    missing()
}

/// Gets one item.
#[tool(query, name = "shop.get_item", returns = ItemWithOwnerEmail, title = "Get item", tags = ["items"])]
async fn get_item_with_owner_email(id: String) -> Result<Item, ToolError> {
    let _ = id;
    missing()
}

/// Gets one item.
#[tool(query, name = "shop.get_item", returns = ItemWithOtherRule, title = "Get item", tags = ["items"])]
async fn get_item_with_other_rule(id: String) -> Result<Item, ToolError> {
    let _ = id;
    missing()
}

/// Gets one item.
#[tool(query, name = "shop.get_item", returns = ItemPlain, title = "Get item", tags = ["items"])]
async fn get_item_in_a_store(
    id: String,
    /// The store that has it.
    store: String,
) -> Result<Item, ToolError> {
    let _ = (id, store);
    missing()
}

/// Gets one item.
#[tool(query, name = "shop.get_item", returns = ItemPlain, title = "Get an item", tags = ["items"])]
async fn get_item_retitled(id: String) -> Result<Item, ToolError> {
    let _ = id;
    missing()
}

/// Gets one item.
#[tool(query, name = "shop.get_item", returns = ItemWithTable, title = "Get item", tags = ["items"])]
async fn get_item_with_a_table(id: String) -> Result<Item, ToolError> {
    let _ = id;
    missing()
}

/// Deletes an item.
#[tool(mutation, name = "shop.delete_item", invalidates = "shop.*")]
async fn delete_item(id: String) -> Result<String, ToolError> {
    Ok(id)
}

/// Deletes an item.
#[tool(
    mutation,
    name = "shop.delete_item",
    invalidates = "shop.*",
    destructive = false
)]
async fn delete_item_not_destructive(id: String) -> Result<String, ToolError> {
    Ok(id)
}

// For a token with `shop:admin` only (the same description, for a single change).
/// Deletes an item.
#[tool(
    mutation,
    name = "shop.delete_item",
    invalidates = "shop.*",
    scopes = ["shop:admin"]
)]
async fn delete_item_for_admins(id: String) -> Result<String, ToolError> {
    Ok(id)
}

// Asks for a confirmation first (the same description, for a single change).
/// Deletes an item.
#[tool(mutation, name = "shop.delete_item", invalidates = "shop.*")]
async fn delete_item_after_asking(
    id: String,
    confirm: fusion::Elicit,
) -> Result<String, ToolError> {
    let _ = confirm.supported();
    Ok(id)
}

/// The shop with these two tools.
fn shop<Get: Tool, Delete: Tool>() -> Server {
    ServerBuilder::new("shop", "1.0.0")
        .tool::<Get>()
        .tool::<Delete>()
        .build()
        .expect("the shop builds")
}

/// A temporary directory, removed when dropped.
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn new() -> Self {
        Scratch(tempfile::tempdir().unwrap())
    }

    fn path(&self) -> PathBuf {
        self.0.path().join("fusion.lock")
    }
}

/// The rules of the changes from `before` (as reviewed) to `after` (the code), through the
/// gate: the lockfile written from one, the other checked against it.
fn changes(before: &Server, after: &Server) -> Vec<Rule> {
    let scratch = Scratch::new();
    Check::new(scratch.path())
        .mode(Mode::Update)
        .run(before)
        .unwrap();
    match Check::new(scratch.path()).mode(Mode::Check).run(after) {
        Err(LockError::Changed { diff, .. }) => {
            diff.changes().iter().map(|change| change.rule).collect()
        }
        other => panic!("expected changes, got {other:?}"),
    }
}

#[test]
fn real_code_changes_get_their_class() {
    let reviewed = shop::<get_item, delete_item>();
    let cases: [(&str, Server, &[Rule]); 10] = [
        (
            "a field removed from the presenter",
            shop::<get_item_without_name, delete_item>(),
            &[Rule::OutputFieldRemoved, Rule::PresenterRenamed],
        ),
        (
            "a field added to the presenter",
            shop::<get_item_with_price, delete_item>(),
            &[Rule::PresenterFieldAdded, Rule::PresenterRenamed],
        ),
        (
            "a field added to a nested presenter",
            shop::<get_item_with_owner_email, delete_item>(),
            // The item's presenter and the owner's have other names.
            &[
                Rule::PresenterFieldAdded,
                Rule::PresenterRenamed,
                Rule::PresenterRenamed,
            ],
        ),
        (
            "destructive flipped",
            shop::<get_item, delete_item_not_destructive>(),
            // Not destructive, so no longer serialized by default either.
            &[Rule::DestructiveFlipped, Rule::GuardLoosened],
        ),
        (
            "a required argument added",
            shop::<get_item_in_a_store, delete_item>(),
            &[Rule::RequiredArgumentAdded],
        ),
        (
            "a rule reworded",
            shop::<get_item_with_other_rule, delete_item>(),
            &[
                Rule::RulesChanged,
                Rule::RulesChanged,
                Rule::PresenterRenamed,
            ],
        ),
        (
            "the presenter renders tables",
            shop::<get_item_with_a_table, delete_item>(),
            &[Rule::UiKindAdded, Rule::PresenterRenamed],
        ),
        (
            "a required scope declared",
            shop::<get_item, delete_item_for_admins>(),
            &[Rule::ScopeAdded],
        ),
        (
            "a title reworded",
            shop::<get_item_retitled, delete_item>(),
            &[Rule::TitleChanged],
        ),
        (
            "the tool asks the user first",
            shop::<get_item, delete_item_after_asking>(),
            &[Rule::AsksUserAdded],
        ),
    ];
    // And back: a token with fewer scopes can call it again.
    assert_eq!(
        changes(&shop::<get_item, delete_item_for_admins>(), &reviewed),
        [Rule::ScopeRemoved]
    );
    let scoped = shop::<get_item, delete_item_for_admins>();
    assert_eq!(
        scoped.action("shop.delete_item").unwrap().scopes(),
        ["shop:admin"]
    );
    for (what, changed, expected) in cases {
        let mut found = changes(&reviewed, &changed);
        let mut expected = expected.to_vec();
        found.sort();
        expected.sort();
        assert_eq!(found, expected, "{what}");
    }
}

#[test]
fn the_surface_holds_what_the_code_declares() {
    let server = shop::<get_item, delete_item>();
    let surface = fusion::lock::surface(&server);
    let get = &surface.actions["shop.get_item"];
    assert_eq!(get.exposure.tool, "shop_get_item");
    assert_eq!(get.title.as_deref(), Some("Get item"));
    assert_eq!(get.description, "Gets one item.");
    assert_eq!(get.annotations.read_only, Some(true));
    assert_eq!(get.input_schema["required"], serde_json::json!(["id"]));
    // The data, not the envelope, with the definitions it uses.
    assert_eq!(
        get.output_schema["properties"]["owner"]["$ref"],
        "#/$defs/OwnerView"
    );
    assert!(get.output_schema["$defs"]["OwnerView"].is_object());
    assert!(get.output_schema.get("oneOf").is_none());

    let egress = &get.egress;
    assert_eq!(egress.presenter.as_deref(), Some("ItemPlain"));
    assert_eq!(egress.limit, Some(20));
    let item = &egress.presenters["ItemPlain"];
    assert_eq!(item.model, "Item");
    assert_eq!(item.fields["name"].label, "Item name");
    assert_eq!(item.fields["owner"].presenter.as_deref(), Some("OwnerView"));
    // Labels apart from the presenter's own rules.
    assert_eq!(item.rules, ["Prices are cents."]);
    assert_eq!(
        egress.presenters["OwnerView"].fields["name"].label,
        "Owner name"
    );
    let owner: Vec<&String> = egress.presenters["OwnerView"].fields.keys().collect();
    assert_eq!(owner, ["name"]);

    // A destructive mutation is serialized per action by default.
    let delete = &surface.actions["shop.delete_item"];
    assert_eq!(delete.guards.serialization, Serialization::PerAction);
    assert_eq!(delete.state.invalidates, ["shop.*"]);
    assert_eq!(delete.annotations.destructive, Some(true));
    assert!(!delete.asks_user && !get.asks_user);
    let asking = fusion::lock::surface(&shop::<get_item, delete_item_after_asking>());
    assert!(asking.actions["shop.delete_item"].asks_user);
}

/// Lists items.
#[tool(query, name = "shop.list_items", returns = ItemView, cache = volatile,
       concurrency(max = 4, queue = 8))]
async fn list_items() -> Result<Vec<Item>, ToolError> {
    Ok(Vec::new())
}

/// Archives an item.
#[tool(
    mutation,
    name = "shop.archive_item",
    toolset = "admin",
    serialize = "id",
    version = "2.0"
)]
async fn archive_item(id: String) -> Result<String, ToolError> {
    Ok(id)
}

/// Pings.
#[tool(
    action,
    name = "ping",
    idempotent,
    rate_limit = "10/s",
    timeout = "2s",
    max_bytes = 512
)]
async fn ping() -> Result<String, ToolError> {
    Ok("pong".into())
}

fn full() -> ServerBuilder {
    ServerBuilder::new("shop", "1.0.0")
        .instructions("Find items with `shop.list_items`.")
        .tool::<list_items>()
        .tool::<delete_item>()
        .tool::<archive_item>()
        .tool::<ping>()
        .max_bytes(4096)
        .default_timeout(Duration::from_secs(5))
        .rate_limit(RateLimit::new(100, Duration::from_secs(60)))
        .access(|_: &CallContext, _: ActionInfo<'_>| true)
        .audit_best_effort(TracingAuditSink)
}

#[test]
fn the_surface_holds_server_facts_guards_and_defaults() {
    let surface = fusion::lock::surface(&full().build().unwrap());
    let server = &surface.server;
    assert_eq!(
        server.instructions.as_deref(),
        Some("Find items with `shop_list_items`.")
    );
    assert!(server.access_policy);
    assert_eq!(server.audit, Some(fusion::lock::Audit::BestEffort));
    assert_eq!(
        server.rate_limit,
        Some(fusion::lock::RateLimit {
            max: 100,
            per_ms: 60_000
        })
    );

    let list = &surface.actions["shop.list_items"];
    assert_eq!(list.state.cache, Some(fusion::lock::Cache::Volatile));
    assert_eq!(list.guards.concurrency.unwrap().max_active, 4);
    assert_eq!(list.guards.concurrency.unwrap().max_queued, 8);
    // The server's defaults, where the tool sets nothing.
    assert_eq!(list.guards.max_bytes, Some(4096));
    assert_eq!(list.guards.timeout_ms, Some(5000));
    assert_eq!(list.guards.serialization, Serialization::None);
    let egress = &list.egress;
    // `ui = …` without `ui_kinds`: every kind of block.
    assert_eq!(
        egress.ui_kinds,
        ["chart", "code", "markdown", "mermaid", "table"]
    );
    assert_eq!(egress.suggests, ["shop.delete_item"]);
    assert_eq!(list.output_schema["maxItems"], 20);

    let archive = &surface.actions["shop.archive_item"];
    assert_eq!(archive.access.toolset.as_deref(), Some("admin"));
    assert_eq!(
        archive.guards.serialization,
        Serialization::PerArgument("id".into())
    );
    assert_eq!(archive.version.as_deref(), Some("2.0"));
    assert_eq!(surface.actions["shop.list_items"].version, None);

    let ping = &surface.actions["ping"];
    assert_eq!(ping.annotations.idempotent, Some(true));
    assert_eq!(ping.annotations.destructive, Some(false));
    assert_eq!(ping.guards.timeout_ms, Some(2000));
    assert_eq!(ping.guards.max_bytes, Some(512));
    assert_eq!(
        ping.guards.rate_limit,
        Some(fusion::lock::RateLimit {
            max: 10,
            per_ms: 1000
        })
    );
    assert!(ping.egress.ui_kinds.is_empty() && ping.egress.presenter.is_none());

    // Only what is served: a disabled toolset's tools are not in the surface.
    let served = fusion::lock::surface(&full().disable_toolsets(["admin"]).build().unwrap());
    assert!(!served.actions.contains_key("shop.archive_item"));
    let changes = fusion::lock::diff(&surface, &served);
    assert_eq!(changes.changes()[0].rule, Rule::ActionRemoved);

    // Grouped: the tool and the discriminator.
    let grouped = fusion::lock::surface(&full().exposition(Exposition::Grouped).build().unwrap());
    assert_eq!(grouped.actions["shop.list_items"].exposure.tool, "shop");
    assert_eq!(
        grouped.actions["shop.list_items"]
            .exposure
            .action
            .as_deref(),
        Some("list_items")
    );
    assert_eq!(grouped.actions["ping"].exposure.action, None);
}

#[test]
fn the_lockfile_is_the_same_bytes_whatever_the_order_of_registration() {
    let one = full().build().unwrap();
    let other = ServerBuilder::new("shop", "1.0.0")
        .instructions("Find items with `shop.list_items`.")
        .tool::<ping>()
        .tool::<archive_item>()
        .tool::<delete_item>()
        .tool::<list_items>()
        .max_bytes(4096)
        .default_timeout(Duration::from_secs(5))
        .rate_limit(RateLimit::new(100, Duration::from_secs(60)))
        .access(|_: &CallContext, _: ActionInfo<'_>| true)
        .audit_best_effort(TracingAuditSink)
        .build()
        .unwrap();
    let text = fusion::lock::surface(&one).to_lockfile();
    assert_eq!(text, fusion::lock::surface(&other).to_lockfile());
    assert_eq!(text, fusion::lock::surface(&one).to_lockfile());
    assert!(!text.contains(env!("CARGO_MANIFEST_DIR")));
}

#[test]
fn a_missing_lockfile_fails_and_says_how_to_create_it() {
    let scratch = Scratch::new();
    let server = shop::<get_item, delete_item>();
    let error = Check::new(scratch.path())
        .mode(Mode::Check)
        .run(&server)
        .unwrap_err();
    assert!(matches!(error, LockError::Missing { .. }));
    let message = error.to_string();
    assert!(message.contains("does not exist"), "{message}");
    assert!(
        message.contains("FUSION_LOCK=update cargo test"),
        "{message}"
    );
    assert!(!scratch.path().exists());

    // Update creates it, in a directory that did not exist yet.
    let nested = scratch.0.path().join("locks/fusion.lock");
    let outcome = Check::new(&nested).mode(Mode::Update).run(&server).unwrap();
    assert_eq!(outcome, Outcome::Created);
    assert_eq!(
        std::fs::read_to_string(&nested).unwrap(),
        fusion::lock::surface(&server).to_lockfile()
    );
    assert_eq!(
        Check::new(&nested).mode(Mode::Check).run(&server).unwrap(),
        Outcome::Unchanged
    );
}

#[test]
fn update_rewrites_and_reports_what_it_took_in() {
    let scratch = Scratch::new();
    let before = shop::<get_item, delete_item>();
    let after = shop::<get_item, delete_item_not_destructive>();
    Check::new(scratch.path())
        .mode(Mode::Update)
        .run(&before)
        .unwrap();
    let Outcome::Updated(diff) = Check::new(scratch.path())
        .mode(Mode::Update)
        .run(&after)
        .unwrap()
    else {
        panic!("not updated");
    };
    assert_eq!(diff.worst(), Some(Class::Breaking));
    assert_eq!(
        Check::new(scratch.path())
            .mode(Mode::Check)
            .run(&after)
            .unwrap(),
        Outcome::Unchanged
    );
    // Unchanged on update: the file is not rewritten.
    assert_eq!(
        Check::new(scratch.path())
            .mode(Mode::Update)
            .run(&after)
            .unwrap(),
        Outcome::Unchanged
    );
}

#[test]
fn the_policy_says_which_classes_fail() {
    let scratch = Scratch::new();
    let reviewed = shop::<get_item, delete_item>();
    Check::new(scratch.path())
        .mode(Mode::Update)
        .run(&reviewed)
        .unwrap();
    let check = |server: &Server, fail_on: Class| {
        Check::new(scratch.path())
            .mode(Mode::Check)
            .fail_on(fail_on)
            .run(server)
    };
    // Cosmetic: fails by default, passes a policy that fails on safe changes and worse.
    let retitled = shop::<get_item_retitled, delete_item>();
    let error = check(&retitled, Class::Cosmetic).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("this check fails on any change"),
        "{message}"
    );
    assert!(
        message.contains("cosmetic  shop.get_item: title reworded: \"Get item\" → \"Get an item\""),
        "{message}"
    );
    assert!(matches!(
        check(&retitled, Class::Safe),
        Ok(Outcome::Tolerated(_))
    ));
    // Breaking fails every policy.
    let flipped = shop::<get_item, delete_item_not_destructive>();
    let error = check(&flipped, Class::Breaking).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("this check fails on breaking changes and worse"),
        "{error}"
    );
    assert_eq!(error.diff().unwrap().worst(), Some(Class::Breaking));
}

#[test]
fn a_lockfile_edited_by_hand_or_in_conflict_fails_with_the_way_out() {
    let scratch = Scratch::new();
    let server = shop::<get_item, delete_item>();
    Check::new(scratch.path())
        .mode(Mode::Update)
        .run(&server)
        .unwrap();
    let text = std::fs::read_to_string(scratch.path()).unwrap();
    let check = || Check::new(scratch.path()).mode(Mode::Check).run(&server);

    // Same meaning, other bytes: stale digests.
    let edited = text.replacen("\"sha256:", "\"sha256:0", 1);
    std::fs::write(scratch.path(), &edited).unwrap();
    let error = check().unwrap_err();
    assert!(matches!(error, LockError::NotCanonical { .. }), "{error}");

    std::fs::write(scratch.path(), format!("<<<<<<< HEAD\n{text}")).unwrap();
    let error = check().unwrap_err();
    assert!(matches!(error, LockError::Invalid { .. }), "{error}");
    assert!(error.to_string().contains("FUSION_LOCK=update"), "{error}");

    // A checkout with CRLF line ends holds the same lockfile.
    std::fs::write(scratch.path(), text.replace('\n', "\r\n")).unwrap();
    assert_eq!(check().unwrap(), Outcome::Unchanged);
}

#[test]
fn the_server_fails_closed_on_a_surface_that_was_not_reviewed() {
    let reviewed = fusion::lock::surface(&shop::<get_item, delete_item>()).to_lockfile();
    let build = |lock: &str| {
        ServerBuilder::new("shop", "1.0.0")
            .tool::<get_item_in_a_store>()
            .tool::<delete_item>()
            .lock(lock)
            .build()
    };
    let error = build(&reviewed).unwrap_err();
    let diff = error.lock_diff().expect("a lock failure");
    assert_eq!(diff.changes()[0].rule, Rule::RequiredArgumentAdded);
    assert!(
        error
            .to_string()
            .contains("breaking  shop.get_item: new required argument `store`"),
        "{error}"
    );
    let ok = ServerBuilder::new("shop", "1.0.0")
        .tool::<get_item>()
        .tool::<delete_item>()
        .lock(reviewed.as_str())
        .build();
    assert!(ok.is_ok());

    let error = build("not a lockfile").unwrap_err();
    assert!(error.lock_diff().is_none());
    assert!(
        error
            .to_string()
            .contains("the lockfile given to `ServerBuilder::lock` cannot be read"),
        "{error}"
    );

    // A lockfile edited by hand to describe the code is not a reviewed one: its digests say so.
    let edited = fusion::lock::surface(&build_unlocked()).to_lockfile();
    let edited = {
        let mut file: serde_json::Value = serde_json::from_str(&edited).unwrap();
        file["digests"] =
            serde_json::from_str::<serde_json::Value>(&reviewed).unwrap()["digests"].clone();
        file.to_string()
    };
    let error = build(&edited).unwrap_err();
    assert!(error.lock_diff().is_none());
    assert!(
        error
            .to_string()
            .contains("is inconsistent, its digests do not match its content (edited by hand?): `shop.get_item`: the file states sha256:"),
        "{error}"
    );
}

/// The server `the_server_fails_closed_on_a_surface_that_was_not_reviewed` builds, without a
/// lockfile.
fn build_unlocked() -> Server {
    ServerBuilder::new("shop", "1.0.0")
        .tool::<get_item_in_a_store>()
        .tool::<delete_item>()
        .build()
        .unwrap()
}

/// Run by `fusion_lock_in_the_environment_sets_the_mode` in a child process.
#[test]
#[ignore = "run in a child process, with FUSION_LOCK set"]
fn check_as_the_environment_says() {
    let path = std::env::var_os("LOCK_TEST_PATH").expect("LOCK_TEST_PATH");
    fusion::lock::check(&shop::<get_item, delete_item>(), Path::new(&path));
}

#[test]
fn fusion_lock_in_the_environment_sets_the_mode() {
    let scratch = Scratch::new();
    let run = |value: &str| {
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "check_as_the_environment_says"])
            .env("FUSION_LOCK", value)
            .env("LOCK_TEST_PATH", scratch.path())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), text)
    };
    let (passed, text) = run("");
    assert!(!passed && text.contains("does not exist"), "{text}");
    let (passed, text) = run("update");
    assert!(passed, "{text}");
    assert!(scratch.path().exists());
    let (passed, text) = run("check");
    assert!(passed, "{text}");
    let (passed, text) = run("updat");
    assert!(!passed, "{text}");
    assert!(
        text.contains("FUSION_LOCK=updat is not understood"),
        "{text}"
    );
}

#[test]
fn the_guide_shows_the_whole_classification_table() {
    let guide = include_str!("../src/docs/lock.md");
    assert!(
        guide.contains(&Rule::table()),
        "docs/lock.md must hold this table:\n{}",
        Rule::table()
    );
}

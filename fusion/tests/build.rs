//! The registry refuses to build a server that would lie to an agent (SPEC T4, P4, S1):
//! every problem is listed at once.

mod common;

use common::*;
use fusion::{ServerBuilder, State, ToolError, presenter, tool};

fn problems(builder: ServerBuilder) -> Vec<String> {
    match builder.build() {
        Ok(_) => panic!("the server should not build"),
        Err(error) => {
            let text = error.to_string();
            for problem in error.problems() {
                assert!(text.contains(problem.as_str()));
            }
            error.problems().to_vec()
        }
    }
}

/// Another tool claiming an existing name.
#[tool(query, name = "billing.get_invoice")]
async fn impostor() -> Result<bool, ToolError> {
    Ok(true)
}

#[test]
fn a_duplicate_name_is_refused() {
    let problems =
        problems(tools(ServerBuilder::new("s", "1").state(Db::seeded())).tool::<impostor>());
    assert_eq!(problems, ["two tools are named `billing.get_invoice`"]);
}

/// A bare tool whose flat name collides with a namespaced one.
#[tool(query, name = "billing_get_invoice")]
async fn collides() -> Result<bool, ToolError> {
    Ok(true)
}

#[test]
fn a_collision_of_exposed_names_is_refused() {
    let problems =
        problems(tools(ServerBuilder::new("s", "1").state(Db::seeded())).tool::<collides>());
    assert_eq!(
        problems,
        ["two tools are exposed under the name `billing_get_invoice`"]
    );
}

#[test]
fn a_suggestion_or_error_action_naming_a_missing_tool_and_a_glob_matching_nothing_are_refused() {
    // Without list_invoices and void_invoice: InvoiceView suggests void_invoice, BillingError
    // offers list_invoices, and `crm.stale` invalidates a domain with no tool.
    let builder = ServerBuilder::new("s", "1")
        .state(Db::seeded())
        .tool::<get_invoice>()
        .tool::<stale>();
    let problems = problems(builder);
    assert!(problems.iter().any(|problem| problem
        == "presenter `InvoiceView` suggests an action that names `billing.void_invoice`, which is not a tool of this server (tool returning it: `billing.get_invoice`)"), "{problems:#?}");
    assert!(problems.iter().any(|problem| problem
        == "tool `billing.get_invoice`: an error's available actions names `billing.list_invoices`, which is not a tool of this server"), "{problems:#?}");
    assert!(
        problems.iter().any(|problem| problem
            == "tool `crm.stale` invalidates `inventory.*`, which matches no tool, resource or prompt of this server"),
        "{problems:#?}"
    );
    assert_eq!(problems.len(), 3, "{problems:#?}");
}

/// Invalidates a domain that does not exist.
#[tool(mutation, name = "crm.stale", invalidates = "inventory.*")]
async fn stale() -> Result<bool, ToolError> {
    Ok(true)
}

struct Missing;

/// Needs state that was never registered.
#[tool(query, name = "needs.state")]
async fn needs_state(missing: State<Missing>) -> Result<bool, ToolError> {
    let _ = missing;
    Ok(true)
}

#[test]
fn a_parameter_that_cannot_be_provided_is_refused() {
    let problems = problems(ServerBuilder::new("s", "1").tool::<needs_state>());
    assert_eq!(problems.len(), 1);
    assert!(problems[0].starts_with("tool `needs.state` cannot be served: its parameter of type `fusion_runtime::context::State<build::Missing>`"), "{problems:?}");
    assert!(
        problems[0].ends_with("no such state was registered with `ServerBuilder::state`"),
        "{problems:?}"
    );
}

#[test]
fn verb_settings_and_keys_are_checked_for_tools_built_without_macros() {
    use fusion::{CacheHint, ToolSpec};
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Nothing {}
    let ok = |_: fusion::CallContext, _: Nothing| async { Ok::<_, ToolError>(true) };
    let builder = ServerBuilder::new("s", "1")
        .tool_spec(
            ToolSpec::mutation("a.cached", "Cached write.")
                .with_cache(CacheHint::Immutable)
                .handler(ok),
        )
        .tool_spec(
            ToolSpec::query("a.invalidating", "Invalidating read.")
                .with_invalidates("a.*")
                .handler(ok),
        )
        .tool_spec(ToolSpec::query("a.b.c", "Two dots.").handler(ok))
        .tool_spec(
            ToolSpec::query("a.bad_glob", "Bad glob.")
                .handler(ok)
                .with_invalidates("a.**x"),
        )
        .tool_spec(ToolSpec::query("a.undescribed", " ").handler(ok))
        .tool_spec(ToolSpec::query("a.no_handler", "No handler."));
    let problems = problems(builder);
    for expected in [
        "tool `a.cached` is a mutation: only queries declare `cache`",
        "tool `a.invalidating` is a query: a read cannot invalidate anything",
        "invalid tool name `a.b.c` has more than one dot: a tool name is `namespace.action`",
        "tool `a.undescribed` has no description for the agent",
        "tool `a.no_handler` has no handler",
    ] {
        assert!(
            problems.iter().any(|problem| problem == expected),
            "missing {expected:?} in {problems:#?}"
        );
    }
    assert!(
        problems
            .iter()
            .any(|problem| problem.starts_with("tool `a.bad_glob`: glob `a.**x`")),
        "{problems:#?}"
    );
}

/// Suggests a tool that exists.
#[presenter(Invoice, fields(id), suggest = nothing, actions = ["billing.get_invoice"])]
#[derive(Debug)]
pub struct SuggestsGet;

fn nothing(_: fusion::Presented<'_, SuggestsGetItem<'_>>) -> Vec<fusion::Suggestion> {
    Vec::new()
}

/// Suggests a tool that exists.
#[tool(query, name = "billing.ok", returns = SuggestsGet)]
async fn fine() -> Result<Invoice, ToolError> {
    Ok(invoice(1, Status::Open))
}

#[test]
fn a_consistent_server_builds() {
    let server = tools(ServerBuilder::new("s", "1").state(Db::seeded()))
        .tool::<fine>()
        .build();
    assert!(server.is_ok());
}

/// Recovery lines name tools between backticks: one a typo, one a field path.
#[derive(Debug, fusion::ToolError)]
enum LookupError {
    #[tool_error(
        code = "Gone",
        message = "It is gone.",
        recovery = "Call `billing.list_invoice` to find valid ids, then set `customer.id`."
    )]
    Gone,
    #[tool_error(
        code = "Stale",
        message = "It moved.",
        recovery = "Call `billing.get_invoice` again."
    )]
    Stale,
}

/// Its errors' recoveries name tools.
#[tool(query, name = "billing.lookup")]
async fn lookup(moved: bool) -> Result<bool, LookupError> {
    Err(if moved {
        LookupError::Stale
    } else {
        LookupError::Gone
    })
}

#[test]
fn a_recovery_naming_a_missing_tool_is_refused_and_main_prints_it_readably() {
    let Err(error) = tools(ServerBuilder::new("s", "1").state(Db::seeded()))
        .tool::<lookup>()
        .build()
    else {
        panic!("the server should not build");
    };
    // Only the typo: `billing.get_invoice` is a tool, and `customer` is no namespace here.
    assert_eq!(
        error.problems(),
        [
            "tool `billing.lookup`: the recovery of `LookupError::Gone` names \
          `billing.list_invoice`, which is not a tool of this server (the tools of `billing` \
          are `billing.get_invoice`, `billing.list_invoices`, `billing.summaries`, \
          `billing.void_invoice`, `billing.create_invoice`, `billing.update_invoice`, \
          `billing.lookup`)"
        ]
    );
    // `fn main() -> Result<(), BuildError>` prints `Error: ` and the `Debug`: the same text.
    assert_eq!(format!("{error:?}"), error.to_string());
    assert!(format!("{error:?}").starts_with("the server cannot be built: tool `billing.lookup`"));
}

/// The same error as `lookup`'s, from another tool.
#[tool(query, name = "billing.lookup_again")]
async fn lookup_again() -> Result<bool, LookupError> {
    Err(LookupError::Gone)
}

#[test]
fn a_recovery_naming_a_missing_tool_is_one_problem_naming_every_tool_whose_error_has_it() {
    let builder = tools(ServerBuilder::new("s", "1").state(Db::seeded()))
        .tool::<lookup>()
        .tool::<lookup_again>();
    assert_eq!(
        problems(builder),
        [
            "tools `billing.lookup`, `billing.lookup_again`: the recovery of `LookupError::Gone` \
          names `billing.list_invoice`, which is not a tool of this server (the tools of \
          `billing` are `billing.get_invoice`, `billing.list_invoices`, `billing.summaries`, \
          `billing.void_invoice`, `billing.create_invoice`, `billing.update_invoice`, \
          `billing.lookup`, `billing.lookup_again`)"
        ]
    );
}

#[test]
fn a_presenters_unknown_action_is_one_problem_naming_every_tool_returning_it() {
    // get_invoice, list_invoices and create_invoice return InvoiceView, which suggests
    // void_invoice: left out, it is one mistake.
    let builder = ServerBuilder::new("s", "1")
        .state(Db::seeded())
        .tool::<get_invoice>()
        .tool::<list_invoices>()
        .tool::<summaries>()
        .tool::<create_invoice>();
    let problems = problems(builder);
    assert_eq!(
        problems,
        [
            "presenter `InvoiceView` suggests an action that names `billing.void_invoice`, which \
          is not a tool of this server (tools returning it: `billing.get_invoice`, \
          `billing.list_invoices`, `billing.create_invoice`)"
        ]
    );
}

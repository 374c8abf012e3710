//! The attribute's receivers and the function as written: nothing is checked here beyond the
//! shape of each single value.

use darling::util::Flag;
use darling::{Error, FromMeta, Result};
use proc_macro2::TokenStream;
use syn::{Ident, ItemFn, LitStr, Path};

use crate::common::{Rate, StrList, Window, meta_list};
use crate::paths::Krate;

#[derive(FromMeta)]
pub(super) struct ToolArgs {
    pub(super) query: Flag,
    pub(super) mutation: Flag,
    pub(super) action: Flag,
    #[darling(default)]
    pub(super) name: Option<LitStr>,
    #[darling(default)]
    pub(super) returns: Option<Path>,
    #[darling(default)]
    pub(super) invalidates: StrList,
    #[darling(default)]
    pub(super) cache: Option<Ident>,
    pub(super) idempotent: Flag,
    #[darling(default)]
    pub(super) destructive: Option<bool>,
    #[darling(default)]
    pub(super) open_world: Option<bool>,
    #[darling(default)]
    pub(super) title: Option<LitStr>,
    #[darling(default)]
    pub(super) description: Option<LitStr>,
    #[darling(default)]
    pub(super) tags: StrList,
    /// `scopes = ["billing:write"]`: OAuth scopes required to see and call the tool.
    #[darling(default)]
    pub(super) scopes: StrList,
    #[darling(default)]
    pub(super) version: Option<LitStr>,
    #[darling(default)]
    pub(super) middleware: Exprs,
    #[darling(default)]
    pub(super) concurrency: Option<ConcurrencyArgs>,
    #[darling(default)]
    pub(super) serialize: Option<SerializeArg>,
    #[darling(default)]
    pub(super) max_bytes: Option<syn::LitInt>,
    /// The egress budget in tokens.
    #[darling(default)]
    pub(super) max_tokens: Option<syn::LitInt>,
    #[darling(default)]
    pub(super) toolset: Option<LitStr>,
    #[darling(default)]
    pub(super) timeout: Option<Window>,
    /// How long each question to the client waits for its answer.
    #[darling(default)]
    pub(super) ask_timeout: Option<Window>,
    #[darling(default)]
    pub(super) rate_limit: Option<Rate>,
    /// `task = "optional"` or `task = "required"`: the tool may (or must) run as a task.
    #[darling(default)]
    pub(super) task: Option<TaskArg>,
    /// `http = "GET /invoices/{id}"`: an HTTP proxy tool, declared without a body.
    #[darling(default)]
    pub(super) http: Option<LitStr>,
    #[darling(rename = "crate", default)]
    pub(super) krate: Krate,
}

/// `concurrency(max = 4, queue = 16, tenant_share = 25)`.
#[derive(FromMeta)]
pub(super) struct ConcurrencyArgs {
    pub(super) max: syn::LitInt,
    #[darling(default)]
    pub(super) queue: Option<syn::LitInt>,
    /// The percent of the slots and seats one tenant may take (1 to 100).
    #[darling(default)]
    pub(super) tenant_share: Option<syn::LitInt>,
}

/// `serialize = false`, `serialize = true` (per action) or `serialize = "argument"`.
pub(super) enum SerializeArg {
    Off,
    PerAction,
    PerArgument(LitStr),
}

impl FromMeta for SerializeArg {
    fn from_bool(value: bool) -> Result<Self> {
        Ok(if value {
            SerializeArg::PerAction
        } else {
            SerializeArg::Off
        })
    }

    fn from_string(_: &str) -> Result<Self> {
        Err(Error::custom("unreachable: handled by from_value"))
    }

    fn from_value(value: &syn::Lit) -> Result<Self> {
        match value {
            syn::Lit::Bool(flag) => Self::from_bool(flag.value),
            syn::Lit::Str(argument) => Ok(SerializeArg::PerArgument(argument.clone())),
            other => Err(Error::custom(
                "`serialize` is `true` (per action), `false`, or the name of an argument",
            )
            .with_span(other)),
        }
    }
}

/// `task = "optional"` (a task for a client that declared the tasks extension) or
/// `task = "required"` (only as a task).
pub(super) enum TaskArg {
    Optional,
    Required,
}

impl FromMeta for TaskArg {
    fn from_string(value: &str) -> Result<Self> {
        match value {
            "optional" => Ok(TaskArg::Optional),
            "required" => Ok(TaskArg::Required),
            other => Err(Error::custom(format!(
                "`task` is \"optional\" (a task when the client supports tasks) or \"required\" \
                 (only as a task), not {other:?}"
            ))),
        }
    }

    // `task = true` (as FastMCP writes it) says neither which.
    fn from_bool(value: bool) -> Result<Self> {
        Err(Error::custom(format!(
            "`task` is \"optional\" (a task when the client supports tasks) or \"required\" \
             (only as a task), not `{value}`"
        )))
    }
}

/// One expression or a list of expressions: `middleware = auth()` or `middleware = [a, b()]`.
#[derive(Default)]
pub(super) struct Exprs(pub(super) Vec<syn::Expr>);

impl FromMeta for Exprs {
    fn from_expr(expr: &syn::Expr) -> Result<Self> {
        match expr {
            syn::Expr::Array(array) => Ok(Exprs(array.elems.iter().cloned().collect())),
            other => Ok(Exprs(vec![other.clone()])),
        }
    }
}

/// The function as written and what its attribute says.
pub(super) struct Tool {
    pub(super) function: ItemFn,
    /// `None` when the attribute could not be read (the error is reported): the rules that
    /// read it do not run, so that a typo is not also reported as a missing verb.
    pub(super) args: Option<ToolArgs>,
    /// The facade as `crate = …` names it, even when the rest of the attribute could not be
    /// read: the fallback names it too.
    pub(super) krate: Krate,
    /// A proxy's arguments and their names in the upstream (`#[upstream(name = …)]`).
    pub(super) wire_names: Vec<(Ident, String)>,
}

pub(super) fn parse(
    args: TokenStream,
    function: ItemFn,
    errors: &mut darling::error::Accumulator,
) -> Tool {
    let list = errors.handle(meta_list(args));
    let krate = list.as_deref().map(Krate::find_in).unwrap_or_default();
    let args = list.and_then(|list| errors.handle(ToolArgs::from_list(&list)));
    Tool {
        function,
        args,
        krate,
        wire_names: Vec::new(),
    }
}

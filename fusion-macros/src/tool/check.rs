//! The rules of a tool, one function each. They all run, so that every mistake is reported in
//! one go; what passes is the checked tool that `expand` turns into code.

use darling::util::Flag;
use darling::{Error, Result};
use syn::{FnArg, Ident, ItemFn, LitStr, Pat, ReturnType, Signature, Type};

use super::parse::{Tool, ToolArgs};
use crate::common::Constraint;
use crate::common::{check_glob, check_key, check_scopes, docs, not_guarded};
use crate::paths::Krate;

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Verb {
    Query,
    Mutation,
    Action,
}

/// A parameter: its name is the argument's name.
pub(super) struct Param<'a> {
    pub(super) ident: &'a Ident,
    pub(super) ty: &'a Type,
    pub(super) doc: Option<String>,
    /// `#[schemars(...)]` constraints on the argument.
    pub(super) constraints: Vec<Constraint>,
    /// `#[not_guarded("why")]`: named like a guarded field, but not that field.
    pub(super) not_guarded: Option<LitStr>,
}

/// A tool that follows every rule.
pub(super) struct Checked<'a> {
    pub(super) function: &'a ItemFn,
    pub(super) args: &'a ToolArgs,
    pub(super) krate: &'a Krate,
    pub(super) verb: Verb,
    pub(super) key: String,
    pub(super) description: String,
    pub(super) params: Vec<Param<'a>>,
    pub(super) output: &'a Type,
}

/// The checked tool, or `None` when a rule fails (its error is in `errors`).
pub(super) fn check<'a>(
    tool: &'a Tool,
    errors: &mut darling::error::Accumulator,
) -> Option<Checked<'a>> {
    let sig = &tool.function.sig;
    let args = tool.args.as_ref();
    let verb = args.and_then(|args| errors.handle(check_one_verb(args)));
    errors.handle(check_async(sig));
    errors.handle(check_not_generic(sig));
    errors.handle(check_free_function(sig));
    let params = errors.handle(check_plain_parameters(sig));
    let output = errors.handle(check_return_type(sig));
    let mut key = None;
    let mut description = None;
    if let Some(args) = args {
        key = errors.handle(check_key_syntax(args, sig));
        description = errors.handle(check_description(args, &tool.function));
        errors.handle(check_globs(args));
        errors.handle(check_scopes(&args.scopes));
        if let Some(verb) = verb {
            errors.handle(check_query_invalidates_nothing(args, verb));
            errors.handle(check_cache(args, verb));
            errors.handle(check_query_is_idempotent(args, verb));
            errors.handle(check_query_is_not_destructive(args, verb));
            errors.handle(check_query_is_not_serialized(args, verb));
        }
        errors.handle(check_positive_limits(args));
    }
    Some(Checked {
        function: &tool.function,
        args: args?,
        krate: &args?.krate,
        verb: verb?,
        key: key?,
        description: description?,
        params: params?,
        output: output?,
    })
}

// A tool has exactly one verb: it decides the annotations and what the runtime does around the
// call.
fn check_one_verb(args: &ToolArgs) -> Result<Verb> {
    let given: Vec<(Verb, &Flag, &str)> = [
        (Verb::Query, &args.query, "query"),
        (Verb::Mutation, &args.mutation, "mutation"),
        (Verb::Action, &args.action, "action"),
    ]
    .into_iter()
    .filter(|(_, flag, _)| flag.is_present())
    .collect();
    match given.as_slice() {
        [(verb, _, _)] => Ok(*verb),
        [] => Err(Error::custom(
            "a tool has a verb: `#[tool(query, …)]`, `#[tool(mutation, …)]` or `#[tool(action, …)]`",
        )),
        [_, rest @ ..] => {
            let mut errors = Error::accumulator();
            for (_, flag, name) in rest {
                errors.push(
                    Error::custom(format!(
                        "a tool has exactly one verb; remove `{name}` or the other verb"
                    ))
                    .with_span(&flag.span()),
                );
            }
            Err(errors
                .finish()
                .err()
                .unwrap_or_else(|| Error::custom("a tool has exactly one verb")))
        }
    }
}

// A tool is awaited by the runtime: it is an `async fn`.
fn check_async(sig: &Signature) -> Result<()> {
    match sig.asyncness {
        Some(_) => Ok(()),
        None => Err(Error::custom("a tool is an `async fn`").with_span(&sig.fn_token)),
    }
}

// A tool has one schema and one dispatch entry: it cannot be generic.
fn check_not_generic(sig: &Signature) -> Result<()> {
    if sig.generics.params.is_empty() {
        Ok(())
    } else {
        Err(Error::custom("a tool cannot be generic").with_span(&sig.generics))
    }
}

// The runtime calls a tool with its arguments only: it is a free function, not a method.
fn check_free_function(sig: &Signature) -> Result<()> {
    match sig.receiver() {
        None => Ok(()),
        Some(receiver) => {
            Err(Error::custom("a tool is a free function, not a method").with_span(receiver))
        }
    }
}

// Each parameter is a plain name (`id: String`): the name is the argument's name.
fn check_plain_parameters(sig: &Signature) -> Result<Vec<Param<'_>>> {
    let mut errors = Error::accumulator();
    let mut params = Vec::new();
    for input in &sig.inputs {
        let FnArg::Typed(typed) = input else { continue };
        match &*typed.pat {
            Pat::Ident(pat) if pat.subpat.is_none() && pat.by_ref.is_none() => {
                let mut constraints = Vec::new();
                for attr in typed.attrs.iter().filter(|attr| attr.path().is_ident("schemars")) {
                    constraints.extend(errors.handle(Constraint::parse_attr(attr)).into_iter().flatten());
                }
                let not_guarded = errors.handle(not_guarded(&typed.attrs)).flatten();
                params.push(Param {
                    ident: &pat.ident,
                    ty: &typed.ty,
                    doc: docs(&typed.attrs),
                    constraints,
                    not_guarded,
                })
            }
            other => errors.push(
                Error::custom("tool parameters are plain names (`id: String`): the name is the argument's name")
                    .with_span(other),
            ),
        }
    }
    errors.finish_with(params)
}

// A tool says how it went: it returns `Result<T, E>`, so it has a return type.
fn check_return_type(sig: &Signature) -> Result<&Type> {
    match &sig.output {
        ReturnType::Type(_, ty) => Ok(ty),
        ReturnType::Default => Err(Error::custom(
            "a tool returns `Result<T, E>`: add a return type",
        )
        .with_span(&sig.ident)),
    }
}

// A tool's key is `namespace.action` or `action` (SPEC T2); without `name`, it is the
// function's name.
fn check_key_syntax(args: &ToolArgs, sig: &Signature) -> Result<String> {
    match &args.name {
        Some(name) => check_key(name).map(|()| name.value()),
        None => Ok(sig.ident.to_string().trim_start_matches("r#").to_owned()),
    }
}

// An agent chooses a tool by its description: `description = "…"` or the function's doc
// comment.
fn check_description(args: &ToolArgs, function: &ItemFn) -> Result<String> {
    args.description
        .as_ref()
        .map(LitStr::value)
        .or_else(|| docs(&function.attrs))
        .ok_or_else(|| {
            Error::custom("a tool needs a description for the agent: add a doc comment (`/// …`) to the function")
                .with_span(&function.sig.ident)
        })
}

// Invalidations are globs over tool keys (SPEC S1).
fn check_globs(args: &ToolArgs) -> Result<()> {
    let mut errors = Error::accumulator();
    for glob in &args.invalidates.0 {
        errors.handle(check_glob(glob));
    }
    errors.finish()
}

// A query reads: it has nothing to invalidate.
fn check_query_invalidates_nothing(args: &ToolArgs, verb: Verb) -> Result<()> {
    match args.invalidates.0.first() {
        Some(glob) if verb == Verb::Query => Err(Error::custom(
            "a query reads and cannot invalidate anything; only mutations and actions do",
        )
        .with_span(glob)),
        _ => Ok(()),
    }
}

// Only a query declares how long its result stays true, `immutable` or `volatile`.
fn check_cache(args: &ToolArgs, verb: Verb) -> Result<()> {
    match &args.cache {
        Some(cache) if verb != Verb::Query => {
            Err(Error::custom("only a query declares `cache`").with_span(cache))
        }
        Some(cache) if cache != "immutable" && cache != "volatile" => {
            Err(Error::custom("`cache` is `immutable` or `volatile`").with_span(cache))
        }
        _ => Ok(()),
    }
}

// A query is idempotent by nature: saying so is a mistake about the verb.
fn check_query_is_idempotent(args: &ToolArgs, verb: Verb) -> Result<()> {
    if verb == Verb::Query && args.idempotent.is_present() {
        Err(Error::custom("a query is always idempotent").with_span(&args.idempotent.span()))
    } else {
        Ok(())
    }
}

// A query never destroys anything.
fn check_query_is_not_destructive(args: &ToolArgs, verb: Verb) -> Result<()> {
    if verb == Verb::Query && args.destructive.is_some() {
        Err(Error::custom("a query is never destructive"))
    } else {
        Ok(())
    }
}

// A query changes nothing, so its calls need no serialization.
fn check_query_is_not_serialized(args: &ToolArgs, verb: Verb) -> Result<()> {
    if verb == Verb::Query && args.serialize.is_some() {
        Err(Error::custom(
            "a query changes nothing: it needs no serialization",
        ))
    } else {
        Ok(())
    }
}

// Limits (`concurrency(max)`, `max_bytes`, `max_tokens`, `timeout`) are positive: zero would
// refuse every call.
fn check_positive_limits(args: &ToolArgs) -> Result<()> {
    let mut errors = Error::accumulator();
    for limit in args
        .concurrency
        .iter()
        .map(|concurrency| &concurrency.max)
        .chain(&args.max_bytes)
        .chain(&args.max_tokens)
    {
        if limit
            .base10_parse::<usize>()
            .map_or(true, |value| value == 0)
        {
            errors.push(Error::custom("expected a positive number").with_span(limit));
        }
    }
    // A zero timeout would stop every call before it starts (every question, for
    // `ask_timeout`).
    for timeout in [&args.timeout, &args.ask_timeout]
        .into_iter()
        .flatten()
        .filter(|timeout| timeout.millis == 0)
    {
        errors.push(
            Error::custom("a timeout is a positive duration, such as \"5s\"")
                .with_span(&timeout.span),
        );
    }
    // A share is a percent of the slots: 0 would refuse every tenant's calls.
    if let Some(share) = args
        .concurrency
        .as_ref()
        .and_then(|concurrency| concurrency.tenant_share.as_ref())
        && !share
            .base10_parse::<u8>()
            .is_ok_and(|percent| (1..=100).contains(&percent))
    {
        errors.push(
            Error::custom("a tenant share is a percent of the slots, from 1 to 100")
                .with_span(share),
        );
    }
    errors.finish()
}

//! The rules of a domain error enum, one function each; every one runs, so that all mistakes
//! are reported together.

use darling::{Error, Result};
use syn::LitStr;

use super::parse::{Input, Variant, VariantArgs};
use crate::common::check_key;

/// An enum that follows every rule: each variant with its arguments.
pub(super) struct Checked<'a> {
    pub(super) input: &'a Input<'a>,
    pub(super) variants: Vec<(&'a Variant<'a>, &'a VariantArgs)>,
}

/// The checked enum, or `None` when a rule fails (its error is in `errors`).
pub(super) fn check<'a>(
    input: &'a Input<'a>,
    errors: &mut darling::error::Accumulator,
) -> Option<Checked<'a>> {
    let Some(variants) = &input.variants else {
        errors.push(
            Error::custom("`ToolError` is derived for an enum of domain errors")
                .with_span(&input.original.ident),
        );
        return None;
    };
    errors.handle(check_not_generic(input));
    let mut checked = Vec::new();
    let mut valid = true;
    for variant in variants {
        let Some(args) = &variant.args else {
            valid = false;
            continue;
        };
        errors.handle(check_actions_are_keys(args));
        if args.transparent.is_present() {
            errors.handle(check_transparent_wraps_one_error(variant, args));
        } else if args.internal.is_present() {
            errors.handle(check_internal_has_no_code(variant, args));
            errors.handle(check_internal_wraps_one_error(variant));
            errors.handle(check_internal_says_nothing_to_the_agent(args));
        } else {
            errors.handle(check_from_is_internal(args));
            errors.handle(check_domain_has_code_and_message(variant, args));
        }
        checked.push((variant, args));
    }
    valid.then_some(Checked {
        input,
        variants: checked,
    })
}

// A domain error enum has one catalog of codes and actions: it cannot be generic.
fn check_not_generic(input: &Input<'_>) -> Result<()> {
    let generics = &input.original.generics;
    if generics.params.is_empty() {
        Ok(())
    } else {
        Err(Error::custom("a domain error enum cannot be generic").with_span(generics))
    }
}

// The actions an error offers are tool keys, checked against the server when it is built.
fn check_actions_are_keys(args: &VariantArgs) -> Result<()> {
    let mut errors = Error::accumulator();
    for action in &args.actions.0 {
        errors.handle(check_key(action));
    }
    errors.finish()
}

// An internal error has no code or message of its own: the agent sees INTERNAL_ERROR.
fn check_internal_has_no_code(variant: &Variant<'_>, args: &VariantArgs) -> Result<()> {
    if args.code.is_some() || args.message.is_some() {
        Err(Error::custom(
            "an `internal` error has no code or message of its own: the agent sees INTERNAL_ERROR",
        )
        .with_span(variant.ident))
    } else {
        Ok(())
    }
}

// An internal variant wraps exactly one error, whose text is only logged.
fn check_internal_wraps_one_error(variant: &Variant<'_>) -> Result<()> {
    if variant.fields.len() == 1 {
        Ok(())
    } else {
        Err(Error::custom(
            "an `internal` variant wraps exactly one error: `Store(rusqlite::Error)`",
        )
        .with_span(variant.ident))
    }
}

// The agent sees only INTERNAL_ERROR and an errorId: anything meant for it (a retry window,
// `retryable`, a recovery, actions) would be dropped, so it does not compile. The agent is
// told not to retry blindly.
fn check_internal_says_nothing_to_the_agent(args: &VariantArgs) -> Result<()> {
    let agent_facing = [
        (
            args.retry_after.as_ref().map(|window| window.span),
            "an `internal` error has no retry window: the agent is told not to retry blindly",
        ),
        (
            args.retryable.is_present().then(|| args.retryable.span()),
            "an `internal` error is never retryable: the agent is told not to retry blindly",
        ),
        (
            args.recovery.as_ref().map(LitStr::span),
            "an `internal` error has no recovery of its own: the agent sees INTERNAL_ERROR",
        ),
        (
            args.actions.0.first().map(LitStr::span),
            "an `internal` error lists no actions: the agent sees INTERNAL_ERROR",
        ),
    ];
    let mut errors = Error::accumulator();
    for (span, message) in agent_facing {
        if let Some(span) = span {
            errors.push(Error::custom(message).with_span(&span));
        }
    }
    errors.finish()
}

// A transparent variant passes one error through as it is (a `ToolError` from the framework,
// such as `fusion::blocking`'s, or another domain error): it says nothing of its own.
fn check_transparent_wraps_one_error(variant: &Variant<'_>, args: &VariantArgs) -> Result<()> {
    let mut errors = Error::accumulator();
    if variant.fields.len() != 1 {
        errors.push(
            Error::custom(
                "a `transparent` variant wraps exactly one error: `Tool(fusion::ToolError)`",
            )
            .with_span(variant.ident),
        );
    }
    let says_something = args.code.is_some()
        || args.message.is_some()
        || args.recovery.is_some()
        || !args.actions.0.is_empty()
        || args.retryable.is_present()
        || args.retry_after.is_some()
        || args.internal.is_present();
    if says_something {
        errors.push(
            Error::custom(
                "a `transparent` error is the error it wraps: it takes only `from`, no code, message, recovery, actions, retry or `internal`",
            )
            .with_span(variant.ident),
        );
    }
    errors.finish()
}

// `from` converts a source error into an internal variant; a domain variant is built by the
// handler, which knows what went wrong.
fn check_from_is_internal(args: &VariantArgs) -> Result<()> {
    if args.from.is_present() {
        Err(
            Error::custom("`from` is for `internal` and `transparent` variants")
                .with_span(&args.from.span()),
        )
    } else {
        Ok(())
    }
}

// A domain variant has a code and a message: what the agent reads.
fn check_domain_has_code_and_message(variant: &Variant<'_>, args: &VariantArgs) -> Result<()> {
    match (&args.code, &args.message) {
        (None, _) => Err(Error::custom(
            "add `#[tool_error(code = \"…\", message = \"…\")]`, or `#[tool_error(internal)]`",
        )
        .with_span(variant.ident)),
        (Some(_), None) => {
            Err(Error::custom("add `message = \"…\"`: what the agent reads")
                .with_span(variant.ident))
        }
        (Some(_), Some(_)) => Ok(()),
    }
}

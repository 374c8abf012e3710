//! `#[tool]`: a plain `async fn` becomes a tool with a verb, a key, options and a compiled
//! dispatch entry (SPEC T1–T4, S1).
//!
//! The function stays as written and callable. Next to it, in the type namespace, a struct of
//! the same name describes the tool: register it with `ServerBuilder::tool::<get_invoice>()`.

mod check;
mod expand;
mod parse;
mod proxy;

use darling::Error;
use proc_macro2::TokenStream;
use syn::ItemFn;

use crate::fallback;

pub(crate) use expand::{not_guarded_statements, without_param_docs};

pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    // A function without a body is an HTTP proxy tool, whose body `proxy` writes.
    let (function, bodiless) = match syn::parse2::<ItemFn>(item.clone()) {
        Ok(function) => (function, false),
        Err(_) => match syn::parse2::<proxy::Bodiless>(item.clone()) {
            Ok(bodiless) => (bodiless.into_function(), true),
            Err(_) => return fallback::not_a_function(item),
        },
    };
    let mut errors = Error::accumulator();
    let mut tool = parse::parse(args, function, &mut errors);
    proxy::prepare(&mut tool, bodiless, &mut errors);
    let checked = check::check(&tool, &mut errors);
    match (errors.finish(), checked) {
        (Ok(()), Some(checked)) => expand::tool(&checked, &tool.wire_names),
        (result, _) => fallback::tool(result.err(), &tool.function, &tool.krate),
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;
    use syn::parse_quote;

    use super::{check, parse};

    /// The number of errors reported for `#[tool(#args)] #function`, and whether there is
    /// enough of a tool to expand.
    fn errors(args: proc_macro2::TokenStream, function: syn::ItemFn) -> (usize, bool) {
        let mut errors = darling::Error::accumulator();
        let tool = parse::parse(args, function, &mut errors);
        let checked = check::check(&tool, &mut errors).is_some();
        (
            errors.finish().err().map_or(0, |error| error.len()),
            checked,
        )
    }

    #[test]
    fn a_valid_tool_passes() {
        let function = parse_quote! {
            /// Gets an invoice.
            async fn get_invoice(id: String) -> Result<String, ToolError> { Ok(id) }
        };
        assert_eq!(
            errors(quote!(query, name = "billing.get_invoice"), function),
            (0, true)
        );
    }

    #[test]
    fn every_mistake_is_reported_at_once() {
        // Two verbs, not async, a destructured parameter, no return type, a key with two dots,
        // no description, a malformed glob.
        let function = parse_quote! {
            fn void_invoice((a, b): (String, String)) {}
        };
        let args = quote!(mutation, action, name = "a.b.c", invalidates = "billing.*x");
        assert_eq!(errors(args, function), (7, false));
    }

    #[test]
    fn an_unreadable_attribute_is_one_mistake() {
        // A typo in the verb is not also a missing verb.
        let function = parse_quote! {
            /// Gets an invoice.
            async fn get_invoice(id: String) -> Result<String, ToolError> { Ok(id) }
        };
        assert_eq!(
            errors(quote!(qurey, name = "billing.get_invoice"), function),
            (1, false)
        );
        let function = parse_quote! {
            /// Gets an invoice.
            async fn get_invoice(id: String) -> Result<String, ToolError> { Ok(id) }
        };
        assert_eq!(
            errors(quote!(query, cahce = immutable), function),
            (1, false)
        );
    }

    #[test]
    fn options_are_checked_against_the_verb() {
        // A query invalidates nothing, is not declared idempotent, has no serialization and
        // no zero limit; a mutation has no cache.
        let function = parse_quote! {
            /// Reads.
            async fn read(id: String) -> Result<String, ToolError> { Ok(id) }
        };
        let args = quote!(
            query,
            invalidates = "billing.*",
            idempotent,
            serialize = true,
            max_bytes = 0,
            max_tokens = 0
        );
        assert_eq!(errors(args, function), (5, true));
        let function = parse_quote! {
            /// Writes.
            async fn write(id: String) -> Result<String, ToolError> { Ok(id) }
        };
        assert_eq!(
            errors(quote!(mutation, cache = immutable), function),
            (1, true)
        );
    }
}

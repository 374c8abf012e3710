//! `#[resource]` and `#[prompt]`: a plain `async fn` becomes a resource read by URI, or a prompt
//! with typed arguments. Both share the tool's parameter kinds (context parameters, argument
//! groups, plain arguments) and differ in what they declare, so they share one model, split by
//! stage as serde does.
//!
//! The function stays as written and callable. Next to it, in the type namespace, a struct of
//! the same name describes it: register it with `ServerBuilder::resource::<invoice>()` or
//! `ServerBuilder::prompt::<invoice_review>()`.

mod check;
mod expand;
mod parse;

use darling::Error;
use proc_macro2::TokenStream;
use syn::ItemFn;

use crate::fallback;

/// Which macro is expanded.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Resource,
    Prompt,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Kind::Resource => "resource",
            Kind::Prompt => "prompt",
        }
    }
}

pub(crate) fn expand(kind: Kind, args: TokenStream, item: TokenStream) -> TokenStream {
    let Ok(function) = syn::parse2::<ItemFn>(item.clone()) else {
        return fallback::not_a_function_for(kind.noun(), item);
    };
    let mut errors = Error::accumulator();
    let surface = parse::parse(kind, args, function, &mut errors);
    let checked = check::check(&surface, &mut errors);
    match (errors.finish(), checked) {
        (Ok(()), Some(checked)) => expand::surface(&checked),
        (result, _) => fallback::surface(kind, result.err(), &surface.function, &surface.krate),
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;
    use syn::parse_quote;

    use super::{Kind, check, parse};

    /// The number of errors reported, and whether there is enough of the item to expand (a
    /// rule on a single option leaves it; the errors still stop the expansion).
    fn errors(kind: Kind, args: proc_macro2::TokenStream, function: syn::ItemFn) -> (usize, bool) {
        let mut errors = darling::Error::accumulator();
        let surface = parse::parse(kind, args, function, &mut errors);
        let checked = check::check(&surface, &mut errors).is_some();
        (
            errors.finish().err().map_or(0, |error| error.len()),
            checked,
        )
    }

    #[test]
    fn a_valid_resource_passes() {
        let function = parse_quote! {
            /// One invoice.
            async fn invoice(id: String) -> Result<Invoice, ToolError> { todo!() }
        };
        let args = quote!(
            uri = "billing://invoices/{id}",
            name = "billing.invoice",
            returns = InvoiceView,
            cache = volatile
        );
        assert_eq!(errors(Kind::Resource, args, function), (0, true));
    }

    #[test]
    fn every_resource_mistake_is_reported_at_once() {
        // Not async, no URI variable for `id` but one for `number`, a bad cache, a key with two
        // dots, no description, a completion of an unknown variable.
        let function = parse_quote! {
            fn invoice(id: String) -> Result<Invoice, ToolError> { todo!() }
        };
        let args = quote!(
            uri = "billing://invoices/{number}",
            name = "a.b.c",
            cache = forever,
            complete(code = codes)
        );
        assert_eq!(errors(Kind::Resource, args, function), (6, false));
    }

    #[test]
    fn a_resource_needs_a_uri() {
        let function = parse_quote! {
            /// Summary.
            async fn summary() -> Result<String, ToolError> { todo!() }
        };
        assert_eq!(errors(Kind::Resource, quote!(), function), (1, true));
    }

    #[test]
    fn a_prompt_completes_its_own_arguments_only() {
        let function = parse_quote! {
            /// Review.
            async fn review(customer: String) -> Result<String, ToolError> { todo!() }
        };
        assert_eq!(
            errors(
                Kind::Prompt,
                quote!(complete(customer = c, other = o)),
                function
            ),
            (1, true)
        );
    }

    #[test]
    fn a_prompt_has_no_uri() {
        let function = parse_quote! {
            /// Review.
            async fn review() -> Result<String, ToolError> { todo!() }
        };
        assert_eq!(
            errors(Kind::Prompt, quote!(uri = "a://b"), function),
            (1, true)
        );
    }
}

//! `#[derive(ToolError)]`: domain errors with their own codes, recovery lines and actions, known
//! statically so that the server can check the actions when it is built (SPEC E1).

mod check;
mod expand;
mod parse;

use darling::Error;
use proc_macro2::TokenStream;
use syn::DeriveInput;

use crate::fallback;

pub(crate) fn derive(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(error) => return error.to_compile_error(),
    };
    let mut errors = Error::accumulator();
    let parsed = parse::parse(&input, &mut errors);
    let checked = check::check(&parsed, &mut errors);
    match (errors.finish(), checked) {
        (Ok(()), Some(checked)) => expand::tool_error(&checked),
        (result, _) => {
            // A generic enum would need the conversions generic too; it is refused anyway.
            let conversions = match &parsed.variants {
                Some(variants) if input.generics.params.is_empty() => {
                    expand::source_conversions(&input.ident, variants)
                }
                _ => TokenStream::new(),
            };
            fallback::tool_error(result.err(), &input, &parsed.krate, conversions)
        }
    }
}

#[cfg(test)]
mod tests {
    use syn::parse_quote;

    use super::{check, parse};

    /// The number of errors reported for `#[derive(ToolError)]` on `input`.
    fn errors(input: syn::DeriveInput) -> usize {
        let mut errors = darling::Error::accumulator();
        let parsed = parse::parse(&input, &mut errors);
        let _ = check::check(&parsed, &mut errors);
        errors.finish().err().map_or(0, |error| error.len())
    }

    #[test]
    fn a_valid_enum_passes() {
        let input = parse_quote! {
            enum BillingError {
                #[tool_error(code = "InvoiceNotFound", message = "No invoice {0}.", actions = ["billing.list_invoices"])]
                NotFound(String),
                #[tool_error(internal, from)]
                Store(std::io::Error),
            }
        };
        assert_eq!(errors(input), 0);
    }

    #[test]
    fn every_mistake_is_reported_at_once() {
        let input = parse_quote! {
            enum BillingError {
                // Unknown option.
                #[tool_error(code = "NotFound", mesage = "No invoice.")]
                NotFound,
                // No code; `from` on a domain variant.
                #[tool_error(from)]
                Conflict(String),
                // Code without message; an action that is not a key.
                #[tool_error(code = "Busy", actions = ["a.b.c"])]
                Busy,
                // An internal error with a code, two fields and a retry window.
                #[tool_error(internal, code = "Store", retry_after = "5s")]
                Store(std::io::Error, u8),
                // A malformed retry window.
                #[tool_error(code = "Slow", message = "Slow.", retry_after = "5 parsecs")]
                Slow,
            }
        };
        assert_eq!(errors(input), 9);
    }

    #[test]
    fn a_transparent_variant_wraps_one_error_and_says_nothing() {
        let valid = parse_quote! {
            enum BillingError {
                #[tool_error(transparent, from)]
                Tool(fusion::ToolError),
            }
        };
        assert_eq!(errors(valid), 0);
        let invalid = parse_quote! {
            enum BillingError {
                // Two fields; a code of its own.
                #[tool_error(transparent, code = "Busy")]
                Tool(fusion::ToolError, u8),
            }
        };
        assert_eq!(errors(invalid), 2);
    }

    #[test]
    fn a_struct_is_refused_without_a_panic() {
        assert_eq!(
            errors(parse_quote!(
                struct NotAnEnum;
            )),
            1
        );
    }
}

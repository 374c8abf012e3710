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

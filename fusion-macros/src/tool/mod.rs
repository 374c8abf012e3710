//! `#[tool]`: a plain `async fn` becomes a tool with a verb, a key, options and a compiled
//! dispatch entry (SPEC T1–T4, S1).
//!
//! The function stays as written and callable. Next to it, in the type namespace, a struct of
//! the same name describes the tool: register it with `ServerBuilder::tool::<get_invoice>()`.

mod check;
mod expand;
mod parse;

use darling::Error;
use proc_macro2::TokenStream;
use syn::ItemFn;

use crate::fallback;

pub(crate) use expand::without_param_docs;

pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let Ok(function) = syn::parse2::<ItemFn>(item.clone()) else {
        return fallback::not_a_function(item);
    };
    let mut errors = Error::accumulator();
    let tool = parse::parse(args, function, &mut errors);
    let checked = check::check(&tool, &mut errors);
    match (errors.finish(), checked) {
        (Ok(()), Some(checked)) => expand::tool(&checked),
        (result, _) => fallback::tool(result.err(), &tool.function, &tool.krate),
    }
}

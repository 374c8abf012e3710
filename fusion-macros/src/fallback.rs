//! What is emitted alongside errors, so that the rest of the program still finds what it names
//! and the user sees only their own mistake.

use darling::Error;
use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::ItemFn;

/// `#[tool]` on something that is not a function: the item as written.
pub(crate) fn not_a_function(item: TokenStream) -> TokenStream {
    let error =
        syn::Error::new(Span::call_site(), "`#[tool]` goes on an `async fn`").to_compile_error();
    quote!(#error #item)
}

/// A `#[tool]` with mistakes: the function is still emitted, so that callers and IDEs keep
/// working.
pub(crate) fn tool(errors: Option<Error>, function: &ItemFn) -> TokenStream {
    let errors = errors.map(Error::write_errors);
    let function = crate::tool::without_param_docs(function.clone());
    quote!(#errors #function)
}

/// A `#[derive(ToolError)]` with mistakes.
pub(crate) fn tool_error(errors: Option<Error>) -> TokenStream {
    errors.map(Error::write_errors).unwrap_or_default()
}

/// A `#[presenter]` with mistakes: the struct as written.
pub(crate) fn presenter_without_model(errors: Option<Error>, item: TokenStream) -> TokenStream {
    let errors = errors.map(Error::write_errors);
    quote!(#errors #item)
}

/// `#[model]` on something that is not a struct: the item as written.
pub(crate) fn not_a_struct(item: TokenStream) -> TokenStream {
    let error = syn::Error::new(
        Span::call_site(),
        "`#[model]` goes on a struct with named fields",
    )
    .to_compile_error();
    quote!(#error #item)
}

/// Not a model at all (generic, or without named fields): the struct without Fusion's
/// attributes, so that the rest of the crate still type-checks.
pub(crate) fn model(errors: Option<Error>, item: syn::ItemStruct) -> TokenStream {
    let errors = errors.map(Error::write_errors);
    let item = crate::model::strip_fusion_attrs(item);
    quote!(#errors #item)
}

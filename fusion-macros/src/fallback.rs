//! What is emitted alongside errors, so that the rest of the program still finds what it names
//! and the user sees only their own mistake.

use darling::Error;
use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{DeriveInput, ItemFn};

use crate::paths::Krate;

/// `#[tool]` on something that is not a function: the item as written.
pub(crate) fn not_a_function(item: TokenStream) -> TokenStream {
    let error =
        syn::Error::new(Span::call_site(), "`#[tool]` goes on an `async fn`").to_compile_error();
    quote!(#error #item)
}

/// A `#[tool]` with mistakes: the function, and the tool type with a stub `Tool` impl, so
/// that `ServerBuilder::tool::<f>()` elsewhere still names a tool and reports nothing of its
/// own. A method keeps only the function (a struct cannot be declared in an `impl`).
pub(crate) fn tool(errors: Option<Error>, function: &ItemFn, krate: &Krate) -> TokenStream {
    let errors = errors.map(Error::write_errors);
    let private = krate.private();
    let ident = &function.sig.ident;
    let vis = &function.vis;
    let tool_type = function.sig.receiver().is_none().then(|| {
        quote! {
            #[allow(non_camel_case_types)]
            #vis struct #ident {}

            #[automatically_derived]
            #[allow(unused_qualifications)]
            impl #private::Tool for #ident {
                fn spec() -> #private::ToolSpec {
                    ::core::unimplemented!()
                }
            }
        }
    });
    let function = crate::tool::without_param_docs(function.clone());
    quote!(#errors #function #tool_type)
}

/// A `#[derive(ToolError)]` with mistakes: stub `From<E> for ToolError`, `ErrorCatalog` and
/// `Display` impls, and the `from` conversions. Without them, every `?` on the error would ask
/// for `std::error::Error`, whose blanket conversion would silently turn the domain error into
/// INTERNAL_ERROR.
pub(crate) fn tool_error(
    errors: Option<Error>,
    input: &DeriveInput,
    krate: &Krate,
    conversions: TokenStream,
) -> TokenStream {
    let errors = errors.map(Error::write_errors);
    let private = krate.private();
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        #errors

        #[allow(unused_qualifications)]
        const _: () = {
            #[automatically_derived]
            impl #impl_generics ::core::convert::From<#ident #ty_generics> for #private::ToolError #where_clause {
                fn from(_: #ident #ty_generics) -> Self {
                    ::core::unimplemented!()
                }
            }

            #[automatically_derived]
            impl #impl_generics #private::ErrorCatalog for #ident #ty_generics #where_clause {
                const ACTIONS: &'static [&'static str] = &[];
            }

            #[automatically_derived]
            impl #impl_generics ::core::fmt::Display for #ident #ty_generics #where_clause {
                fn fmt(&self, _: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    ::core::unimplemented!()
                }
            }

            #conversions
        };
    }
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

//! What is emitted alongside errors, so that the rest of the program still finds what it names
//! and the user sees only their own mistake.

use darling::Error;
use darling::ast::NestedMeta;
use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::ext::IdentExt as _;
use syn::{DeriveInput, Ident, ItemFn, Visibility};

use crate::common::salvage;
use crate::paths::Krate;
use crate::presenter::check::Checked as CheckedPresenter;
use crate::presenter::expand as presenter_expand;
use crate::presenter::parse::{PresenterArgs, item_ident};

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

/// A `#[presenter]` with mistakes, over a model: the struct, its item type with the fields
/// that follow the rules, and stub impls, so that `suggest` and `ui` functions naming the item
/// type, tools returning through the presenter and presenters nesting it report nothing of
/// their own. A generic struct keeps only the item type (the impls would need generics).
pub(crate) fn presenter(errors: Error, checked: &CheckedPresenter<'_>) -> TokenStream {
    let errors = errors.write_errors();
    let item = checked.item;
    let ident = &item.ident;
    let item_ident = item_ident(checked.args, ident);
    let item_type = if checked.fields.is_empty() {
        phantom_item_type(&item.vis, &item_ident)
    } else {
        presenter_expand::item_type(checked)
    };
    if !item.generics.params.is_empty() {
        return quote!(#errors #item #item_type);
    }
    let private = checked.args.krate.private();
    let model = &checked.presenter.model_path;
    let name = ident.to_string();
    let keys = checked
        .fields
        .iter()
        .map(|(listed, _)| listed.ident.unraw().to_string());
    let presenter_of = presenter_expand::presenter_of_impls(checked);
    let hooks = presenter_expand::hooks(checked);
    quote! {
        #errors
        #item
        #item_type

        #[allow(unused_qualifications)]
        const _: () = {
            #[automatically_derived]
            impl #private::serde::Serialize for #item_ident<'_> {
                fn serialize<S>(&self, _: S) -> #private::Result<S::Ok, S::Error>
                where
                    S: #private::serde::Serializer,
                {
                    ::core::unimplemented!()
                }
            }

            #presenter_of

            #[automatically_derived]
            impl #private::Presenter for #ident {
                type Model = #model;
                type Item<'a> = #item_ident<'a>;
                const NAME: &'static str = #name;
                const FIELDS: &'static [&'static str] = &[#(#keys),*];
                const RULES: &'static [&'static str] = &[];
                const LIMIT: #private::Option<usize> = #private::None;
                const ACTIONS: &'static [&'static str] = &[];

                fn item(_: &#model) -> #item_ident<'_> {
                    ::core::unimplemented!()
                }

                fn item_schema(_: &mut #private::schemars::SchemaGenerator) -> #private::schemars::Schema {
                    ::core::unimplemented!()
                }

                #hooks
            }
        };
    }
}

/// A `#[presenter]` whose model is unknown (its attribute could not be read, or `#[model]`
/// could not make a model of its struct): the item as written and an item type without fields,
/// so that functions naming it still resolve.
pub(crate) fn presenter_without_model(
    errors: Option<Error>,
    list: &[NestedMeta],
    item: TokenStream,
) -> TokenStream {
    let errors = errors.map(Error::write_errors);
    let item_type = syn::parse2::<DeriveInput>(item.clone())
        .ok()
        .filter(|input| input.generics.params.is_empty())
        .map(|input| {
            let args: PresenterArgs = salvage(list.get(1..).unwrap_or_default());
            phantom_item_type(&input.vis, &item_ident(&args, &input.ident))
        });
    quote!(#errors #item #item_type)
}

fn phantom_item_type(vis: &Visibility, item_ident: &Ident) -> TokenStream {
    quote! {
        #vis struct #item_ident<'a>(::core::marker::PhantomData<&'a ()>);
    }
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
/// attributes, so that the rest of the crate still type-checks, and a descriptor that tells
/// presenters so, so that they emit their own fallback instead of "cannot find macro".
pub(crate) fn model(errors: Option<Error>, item: syn::ItemStruct) -> TokenStream {
    let errors = errors.map(Error::write_errors);
    let item = crate::model::strip_fusion_attrs(item);
    let name = item.ident.to_string();
    let descriptor = crate::model::descriptor(&item, quote!(#name !));
    quote!(#errors #item #descriptor)
}

/// `#[resource]` or `#[prompt]` on something that is not a function.
pub(crate) fn not_a_function_for(noun: &str, item: TokenStream) -> TokenStream {
    let error = syn::Error::new(
        Span::call_site(),
        format!("`#[{noun}]` goes on an `async fn`"),
    )
    .to_compile_error();
    quote!(#error #item)
}

/// A `#[resource]` or `#[prompt]` with mistakes: the function, and its type with a stub impl, so
/// that `ServerBuilder::resource::<f>()` elsewhere reports nothing of its own.
pub(crate) fn surface(
    kind: crate::surface::Kind,
    errors: Option<Error>,
    function: &ItemFn,
    krate: &Krate,
) -> TokenStream {
    let errors = errors.map(Error::write_errors);
    let private = krate.private();
    let ident = &function.sig.ident;
    let vis = &function.vis;
    let stub = match kind {
        crate::surface::Kind::Resource => quote! {
            impl #private::Resource for #ident {
                fn spec() -> #private::ResourceSpec {
                    ::core::unimplemented!()
                }
            }
        },
        crate::surface::Kind::Prompt => quote! {
            impl #private::Prompt for #ident {
                fn spec() -> #private::PromptSpec {
                    ::core::unimplemented!()
                }
            }
        },
    };
    let item_type = function.sig.receiver().is_none().then(|| {
        quote! {
            #[allow(non_camel_case_types)]
            #vis struct #ident {}

            #[automatically_derived]
            #[allow(unused_qualifications)]
            #stub
        }
    });
    let function = crate::tool::without_param_docs(function.clone());
    quote!(#errors #function #item_type)
}

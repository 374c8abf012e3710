//! The tool's code: the function, its tool type and its `Tool` impl. Only `quote!`; every
//! rule was checked before.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::ext::IdentExt as _;
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn};

use super::check::{Checked, Param, Verb};
use super::parse::SerializeArg;
use crate::common::fnv1a;

pub(super) fn tool(tool: &Checked<'_>) -> TokenStream {
    let private = tool.krate.private();
    let function = without_param_docs(tool.function.clone());
    let fn_ident = &tool.function.sig.ident;
    let vis = &tool.function.vis;
    let output = &tool.output;
    let key = &tool.key;
    let description = &tool.description;
    let verb = match tool.verb {
        Verb::Query => quote!(#private::Verb::Query),
        Verb::Mutation => quote!(#private::Verb::Mutation),
        Verb::Action => quote!(#private::Verb::Action),
    };
    let presenter = match &tool.args.returns {
        Some(presenter) => quote_spanned!(presenter.span()=> #presenter),
        None => quote!(#private::Plain),
    };

    let mut options = Vec::new();
    if let Some(title) = &tool.args.title {
        options.push(quote!(.with_title(#title)));
    }
    let tags = &tool.args.tags.0;
    if !tags.is_empty() {
        options.push(quote!(.with_tags([#(#tags),*])));
    }
    for glob in &tool.args.invalidates.0 {
        options.push(quote!(.with_invalidates(#glob)));
    }
    if let Some(cache) = &tool.args.cache {
        let hint = if cache == "immutable" {
            quote!(#private::CacheHint::Immutable)
        } else {
            quote!(#private::CacheHint::Volatile)
        };
        options.push(quote!(.with_cache(#hint)));
    }
    if tool.args.idempotent.is_present() {
        options.push(quote!(.with_idempotent(true)));
    }
    if let Some(destructive) = tool.args.destructive {
        options.push(quote!(.with_destructive(#destructive)));
    }
    if let Some(open_world) = tool.args.open_world {
        options.push(quote!(.with_open_world(#open_world)));
    }
    if let Some(version) = &tool.args.version {
        options.push(quote!(.with_version(#version)));
    }
    for middleware in &tool.args.middleware.0 {
        options.push(quote_spanned!(middleware.span()=> .with_middleware(#middleware)));
    }
    if let Some(concurrency) = &tool.args.concurrency {
        let max = &concurrency.max;
        let queue = concurrency
            .queue
            .as_ref()
            .map_or_else(|| quote!(0), |queue| quote!(#queue));
        options.push(quote!(.with_concurrency(#private::Concurrency::new(#max, #queue))));
    }
    match &tool.args.serialize {
        Some(SerializeArg::Off) => options.push(quote!(.with_serialization(#private::Serialization::Off))),
        Some(SerializeArg::PerAction) => {
            options.push(quote!(.with_serialization(#private::Serialization::PerAction)));
        }
        Some(SerializeArg::PerArgument(argument)) => options.push(quote!(
            .with_serialization(#private::Serialization::PerArgument(#private::String::from(#argument)))
        )),
        None => {}
    }
    if let Some(max_bytes) = &tool.args.max_bytes {
        options.push(quote!(.with_max_bytes(#max_bytes)));
    }
    if let Some(toolset) = &tool.args.toolset {
        options.push(quote!(.with_toolset(#toolset)));
    }

    // Spanned on the parameter's type, so that a type that cannot be a parameter is reported
    // there.
    let probe = |param: &Param<'_>| {
        let ty = &param.ty;
        quote_spanned! {ty.span()=>
            (&&&&&#private::kinds::Probe::<#ty>::NEW).__fusion_param()
        }
    };
    let declarations = tool.params.iter().map(|param| {
        let probe = probe(param);
        let name = param.ident.to_string().trim_start_matches("r#").to_owned();
        let doc = match &param.doc {
            Some(doc) => quote!(#private::Some(#doc)),
            None => quote!(#private::None),
        };
        quote_spanned!(param.ty.span()=> #probe.declare(&mut params, #name, #doc);)
    });
    let bindings: Vec<Ident> = tool
        .params
        .iter()
        .map(|param| {
            quote::format_ident!(
                "__fusion_{}",
                param.ident.to_string().trim_start_matches("r#")
            )
        })
        .collect();
    let takes = tool.params.iter().zip(&bindings).map(|(param, binding)| {
        let probe = probe(param);
        let name = param.ident.to_string().trim_start_matches("r#").to_owned();
        quote_spanned!(param.ty.span()=> let #binding = #probe.take(__fusion_context, &mut __fusion_args, #name)?;)
    });
    let mut name_checks = Vec::new();
    for param in &tool.params {
        let name = param.ident.unraw().to_string();
        let hash = proc_macro2::Literal::u64_suffixed(fnv1a(&[&name]));
        let probe = probe(param);
        let span = param.ident.span();
        for other in tool
            .params
            .iter()
            .filter(|other| other.ident != param.ident)
        {
            let other_ty = &other.ty;
            name_checks.push(quote_spanned! {span=>
                #probe.must_not_take(
                    (&&#private::kinds::ReservedProbe::<#other_ty, #hash>::NEW).__fusion_reserved(),
                );
            });
        }
    }
    let struct_doc = format!(
        "The tool `{key}`, declared by [`{fn_ident}`](fn@{fn_ident}). Register it with \
         `ServerBuilder::tool::<{fn_ident}>()`."
    );

    quote! {
        #function

        #[doc = #struct_doc]
        #[allow(non_camel_case_types)]
        #vis struct #fn_ident {}

        #[allow(unused_qualifications, clippy::needless_borrow, clippy::unused_unit)]
        const _: () = {
            use #private::kinds::{ViaContext as _, ViaField as _, ViaGroup as _, ViaNothing as _};
            use #private::kinds::{ViaModel as _, ViaReserved as _, ViaUnreserved as _};
            use #private::kinds::{ViaCatalog as _, ViaNoCatalog as _};

            // Compile-time only: a plain argument never takes the name of a guarded or hidden
            // field of a model whose profile the tool takes.
            fn __fusion_check_argument_names() {
                #(#name_checks)*
            }

            #[automatically_derived]
            impl #private::Tool for #fn_ident {
                fn spec() -> #private::ToolSpec {
                    let mut params = #private::Params::new();
                    #(#declarations)*
                    #private::ToolSpec::new(#verb, #key, #description)
                        #(#options)*
                        .with_error_actions(
                            (&&#private::kinds::CatalogProbe::<<#output as #private::HandlerResult>::Err>::NEW)
                                .__fusion_catalog(),
                        )
                        .with_params(params)
                        .with_call_handler::<#presenter, _, _, _, _>(
                            |mut __fusion_call: #private::Call| async move {
                                let (#(#bindings,)*) = {
                                    let (__fusion_context, mut __fusion_args) = __fusion_call.parts();
                                    #(#takes)*
                                    __fusion_args.finish()?;
                                    (#(#bindings,)*)
                                };
                                let (#(#private::Some(#bindings),)*) = (#(#bindings,)*) else {
                                    return #private::Err(#private::missing_argument());
                                };
                                #private::Ok::<#output, #private::ToolError>(#fn_ident(#(#bindings),*).await)
                            },
                        )
                }
            }
        };
    }
}

/// The function as the compiler sees it: parameter doc comments are the arguments'
/// descriptions, and rustc refuses them on parameters.
pub(crate) fn without_param_docs(mut function: ItemFn) -> ItemFn {
    for input in &mut function.sig.inputs {
        if let FnArg::Typed(typed) = input {
            typed.attrs.retain(|attr| !attr.path().is_ident("doc"));
        }
    }
    function
}

//! The code of a resource or prompt: the function, its type and its `Resource` or `Prompt`
//! impl. Only `quote!`; every rule was checked before.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use super::Kind;
use super::check::{Checked, Param};

pub(super) fn surface(item: &Checked<'_>) -> TokenStream {
    let private = item.krate.private();
    let function = crate::tool::without_param_docs(item.function.clone());
    let fn_ident = &item.function.sig.ident;
    let vis = &item.function.vis;
    let output = &item.output;
    // The return type is taken apart where it is written, so that a return type that is not a
    // `Result` is reported there, once.
    let first = output
        .to_token_stream()
        .into_iter()
        .next()
        .map_or_else(proc_macro2::Span::call_site, |token| token.span());
    let private_at_output = item.krate.private_at(first);
    let handler_return = quote_spanned!(first=> <#output as #private_at_output::HandlerReturn>);
    // `Ok` and `Err` spanned at the last token: a result type that cannot be presented is
    // reported on the whole return type, as a tool's is.
    let last = output
        .to_token_stream()
        .into_iter()
        .last()
        .map_or(first, |token| token.span());
    let (ok_ident, err_ident) = (Ident::new("Ok", last), Ident::new("Err", last));
    let ok = quote!(#handler_return::#ok_ident);
    let err = quote!(#handler_return::#err_ident);
    let key = &item.key;
    let description = &item.description;
    let args = item.args;

    let mut options = Vec::new();
    if let Some(title) = &args.title {
        options.push(quote!(.with_title(#title)));
    }
    if let Some(toolset) = &args.toolset {
        options.push(quote!(.with_toolset(#toolset)));
    }
    let scopes = &args.scopes.0;
    if !scopes.is_empty() {
        options.push(quote!(.with_scopes([#(#scopes),*])));
    }
    if let Some(mime) = &args.mime {
        options.push(quote!(.with_mime_type(#mime)));
    }
    if let Some(cache) = &args.cache {
        let hint = if cache == "immutable" {
            quote!(#private::CacheHint::Immutable)
        } else {
            quote!(#private::CacheHint::Volatile)
        };
        options.push(quote!(.with_cache(#hint)));
    }
    for presenter in &args.uses.0 {
        options.push(quote_spanned!(presenter.span()=> .with_presenter::<#presenter>()));
    }
    for (name, complete) in &args.complete.0 {
        let name = name.to_string();
        options.push(quote_spanned!(complete.span()=> .with_completion(#name, #complete)));
    }

    let probe = |param: &Param<'_>| {
        let ty = &param.ty;
        quote_spanned! {ty.span()=>
            (&&&&&#private::kinds::Probe::<#ty>::NEW).__fusion_param()
        }
    };
    let name_of = |param: &Param<'_>| param.ident.to_string().trim_start_matches("r#").to_owned();
    let declarations = item.params.iter().map(|param| {
        let probe = probe(param);
        let name = name_of(param);
        let doc = match &param.doc {
            Some(doc) => quote!(#private::Some(#doc)),
            None => quote!(#private::None),
        };
        quote_spanned!(param.ty.span()=> #probe.declare(&mut params, #name, #doc);)
    });
    let statements = crate::tool::not_guarded_statements(
        &item
            .params
            .iter()
            .map(|param| (param.ident, param.not_guarded.as_ref()))
            .collect::<Vec<_>>(),
    );
    let bindings: Vec<Ident> = item
        .params
        .iter()
        .map(|param| quote::format_ident!("__fusion_{}", name_of(param)))
        .collect();
    let reads = item.params.iter().zip(&bindings).map(|(param, binding)| {
        let probe = probe(param);
        let name = name_of(param);
        quote_spanned!(param.ty.span()=> let #binding = #probe.read(&mut __fusion_args, #name);)
    });
    let takes = item.params.iter().zip(&bindings).map(|(param, binding)| {
        let probe = probe(param);
        quote_spanned!(param.ty.span()=> let #binding = #probe.take(&__fusion_context, #binding)?;)
    });
    // A resource's parameter that no template variable names must come from the context;
    // checked on its type, where it is written.
    let context_only = item
        .params
        .iter()
        .filter(|param| item.kind == Kind::Resource && !item.variables.contains(&name_of(param)))
        .map(|param| {
            let ty = &param.ty;
            let private = item.krate.private_at(ty.span());
            quote_spanned!(ty.span()=> #private::not_a_variable::<#ty>();)
        });
    let handler_result = quote!(#handler_return::into_result(#fn_ident(#(#bindings),*).await));
    let read = quote! {
        #[allow(unused_mut)]
        |mut __fusion_args: #private::ArgReader<'_>| {
            #(#reads)*
            __fusion_args.finish()?;
            #private::Ok(move |__fusion_context: #private::CallContext| async move {
                #(#takes)*
                #private::Ok::<_, #private::ToolError>(#handler_result)
            })
        }
    };

    let (impl_block, struct_doc) = match item.kind {
        Kind::Resource => {
            let uri = args.uri.as_ref().expect("checked: a resource has a URI");
            let presenter = match &args.returns {
                Some(presenter) => quote_spanned!(presenter.span()=> #presenter),
                None => quote!(#private::Plain),
            };
            (
                quote! {
                    #[automatically_derived]
                    impl #private::Resource for #fn_ident {
                        fn spec() -> #private::ResourceSpec {
                            #(#context_only)*
                            let mut params = #private::Params::new();
                            #(#declarations)*
                            #(#statements)*
                            #private::ResourceSpec::new(#key, #uri, #description)
                                #(#options)*
                                .with_params(params)
                                .with_call_handler::<#presenter, #ok, #err, _, _, _>(#read)
                        }
                    }
                },
                format!(
                    "The resource `{key}` ({}), read by [`{fn_ident}`](fn@{fn_ident}). Register it \
                     with `ServerBuilder::resource::<{fn_ident}>()`.",
                    uri.value()
                ),
            )
        }
        Kind::Prompt => (
            quote! {
                #[automatically_derived]
                impl #private::Prompt for #fn_ident {
                    fn spec() -> #private::PromptSpec {
                        let mut params = #private::Params::new();
                        #(#declarations)*
                        #(#statements)*
                        #private::PromptSpec::new(#key, #description)
                            #(#options)*
                            .with_params(params)
                            .with_call_handler::<#ok, #err, _, _, _>(#read)
                    }
                }
            },
            format!(
                "The prompt `{key}`, built by [`{fn_ident}`](fn@{fn_ident}). Register it with \
                 `ServerBuilder::prompt::<{fn_ident}>()`."
            ),
        ),
    };

    quote! {
        #function

        #[doc = #struct_doc]
        #[allow(non_camel_case_types)]
        #vis struct #fn_ident {}

        #[allow(unused_qualifications, clippy::needless_borrow, clippy::unused_unit)]
        const _: () = {
            use #private::kinds::{ViaContext as _, ViaField as _, ViaGroup as _, ViaNothing as _};
            use #private::kinds::ViaModel as _;

            #impl_block
        };
    }
}

//! The tool's code: the function, its tool type and its `Tool` impl. Only `quote!`; every
//! rule was checked before.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::ext::IdentExt as _;
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, Type};

use super::check::{Checked, Param, Verb};
use super::parse::{SerializeArg, TaskArg};
use crate::common::name_hash;

pub(super) fn tool(tool: &Checked<'_>, wire_names: &[(Ident, String)]) -> TokenStream {
    let private = tool.krate.private();
    let function = without_param_docs(tool.function.clone());
    let fn_ident = &tool.function.sig.ident;
    let vis = &tool.function.vis;
    let output = &tool.output;
    // Everything that takes the handler's return type apart is written across the return
    // type (first token to last), so that a return type that is not a `Result`, an error that
    // does not convert into `ToolError` and a success type that cannot reach the agent are
    // reported there, once: a failed projection leaves nothing for later bounds to report.
    let (first, last) = across(output);
    let private_at_output = tool.krate.private_at(first);
    let handler_return = quote_spanned!(first=> <#output as #private_at_output::HandlerReturn>);
    let at_last = |name: &str| Ident::new(name, last);
    let (ok_ident, err_ident) = (at_last("Ok"), at_last("Err"));
    let ok = quote!(#handler_return::#ok_ident);
    let err = quote!(#handler_return::#err_ident);
    let catalog = {
        let (new, method) = (at_last("NEW"), at_last("__fusion_catalog"));
        quote_spanned!(first=> (&&#private_at_output::kinds::CatalogProbe::<#err>::#new).#method())
    };
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
    let scopes = &tool.args.scopes.0;
    if !scopes.is_empty() {
        options.push(quote!(.with_scopes([#(#scopes),*])));
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
        let share = concurrency.tenant_share.as_ref().map(|share| {
            let percent = share.base10_parse::<u8>().unwrap_or(100);
            quote!(.with_tenant_share(#percent))
        });
        options.push(quote!(.with_concurrency(#private::Concurrency::new(#max, #queue)#share)));
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
    if let Some(max_tokens) = &tool.args.max_tokens {
        options.push(quote!(.with_max_tokens(#max_tokens)));
    }
    if let Some(toolset) = &tool.args.toolset {
        options.push(quote!(.with_toolset(#toolset)));
    }
    if let Some(timeout) = &tool.args.timeout {
        let millis = proc_macro2::Literal::u64_suffixed(timeout.millis);
        options.push(quote!(.with_timeout(::core::time::Duration::from_millis(#millis))));
    }
    if let Some(timeout) = &tool.args.ask_timeout {
        let millis = proc_macro2::Literal::u64_suffixed(timeout.millis);
        options.push(quote!(.with_ask_timeout(::core::time::Duration::from_millis(#millis))));
    }
    match &tool.args.task {
        Some(TaskArg::Optional) => {
            options.push(quote!(.with_task(#private::TaskSupport::Optional)))
        }
        Some(TaskArg::Required) => {
            options.push(quote!(.with_task(#private::TaskSupport::Required)))
        }
        None => {}
    }
    if let Some(rate) = &tool.args.rate_limit {
        let count = proc_macro2::Literal::u32_suffixed(rate.count);
        let per = proc_macro2::Literal::u64_suffixed(rate.per_millis);
        options.push(quote!(.with_rate_limit(#private::RateLimit::new(
            #count,
            ::core::time::Duration::from_millis(#per),
        ))));
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
        if param.constraints.is_empty() {
            return quote_spanned!(param.ty.span()=> #probe.declare(&mut params, #name, #doc););
        }
        // Only a plain argument takes constraints; on another kind of parameter the method is
        // missing, which reports the mistake on its type.
        let constraints = param
            .constraints
            .iter()
            .map(|constraint| constraint.expand(&private));
        quote_spanned! {param.ty.span()=>
            #probe.declare_constrained(&mut params, #name, #doc, |mut schema: #private::schemars::Schema| {
                #(#constraints)*
                schema
            });
        }
    });
    let statements = not_guarded_statements(
        &tool
            .params
            .iter()
            .map(|param| (param.ident, param.not_guarded.as_ref()))
            .collect::<Vec<_>>(),
    );
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
    let handler_result = {
        let method = at_last("into_result");
        let args = quote_spanned!(last=> (#fn_ident(#(#bindings),*).await));
        quote!(#handler_return::#method #args)
    };
    // Two steps, as the request path runs them: the agent's arguments are read and validated
    // before middleware and guards; context parameters are taken after them.
    let reads = tool.params.iter().zip(&bindings).map(|(param, binding)| {
        let probe = probe(param);
        let name = param.ident.to_string().trim_start_matches("r#").to_owned();
        quote_spanned!(param.ty.span()=> let #binding = #probe.read(&mut __fusion_args, #name);)
    });
    let takes = tool.params.iter().zip(&bindings).map(|(param, binding)| {
        let probe = probe(param);
        quote_spanned!(param.ty.span()=> let #binding = #probe.take(&__fusion_context, #binding)?;)
    });
    let mut name_checks = Vec::new();
    // A parameter stated not guarded is checked when the server is built (a hidden field's
    // name stays refused there).
    for param in tool
        .params
        .iter()
        .filter(|param| param.not_guarded.is_none())
    {
        let name = param.ident.unraw().to_string();
        let hash = proc_macro2::Literal::u64_suffixed(name_hash(&name));
        let probe = probe(param);
        let span = param.ident.span();
        let private = tool.krate.private_at(span);
        for other in tool
            .params
            .iter()
            .filter(|other| other.ident != param.ident)
        {
            let other_ty = &other.ty;
            name_checks.push(quote_spanned! {span=>
                {
                    let clash = (&&#private::kinds::ReservedProbe::<#other_ty, #hash>::NEW).__fusion_reserved();
                    #probe.must_not_take(clash);
                }
            });
        }
    }
    name_checks.extend(super::proxy::name_checks(tool, wire_names));
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
                    #(#statements)*
                    #private::ToolSpec::new(#verb, #key, #description)
                        #(#options)*
                        .with_error_catalog(#catalog)
                        .with_params(params)
                        .with_call_handler::<#presenter, #ok, #err, _, _, _>(
                            #[allow(unused_mut)]
                            |mut __fusion_args: #private::ArgReader<'_>| {
                                #(#reads)*
                                __fusion_args.finish()?;
                                #private::Ok(move |__fusion_context: #private::CallContext| async move {
                                    #(#takes)*
                                    #private::Ok::<_, #private::ToolError>(#handler_result)
                                })
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
            // Doc comments, constraints and `not_guarded` describe the argument; rustc accepts
            // none of them there.
            typed.attrs.retain(|attr| {
                !attr.path().is_ident("doc")
                    && !attr.path().is_ident("schemars")
                    && !attr.path().is_ident("not_guarded")
            });
        }
    }
    function
}

/// `params.not_guarded(name, reason);` for each parameter stated not guarded.
pub(crate) fn not_guarded_statements(
    params: &[(&Ident, Option<&syn::LitStr>)],
) -> Vec<TokenStream> {
    params
        .iter()
        .filter_map(|(ident, reason)| {
            let name = ident.unraw().to_string();
            reason.map(|reason| quote_spanned!(reason.span()=> params.not_guarded(#name, #reason);))
        })
        .collect()
}

/// The spans of a type's first and last tokens: tokens located at the first and the last are
/// reported by rustc across the whole type.
fn across(ty: &Type) -> (Span, Span) {
    let mut tokens = ty.to_token_stream().into_iter();
    let first = tokens
        .next()
        .map_or_else(Span::call_site, |token| token.span());
    let last = tokens.last().map_or(first, |token| token.span());
    (first, last)
}

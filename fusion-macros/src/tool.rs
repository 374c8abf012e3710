//! `#[tool]`: a plain `async fn` becomes a tool with a verb, a key, options and a compiled
//! dispatch entry (SPEC T1–T4, S1).
//!
//! The function stays as written and callable. Next to it, in the type namespace, a struct of
//! the same name describes the tool: register it with `ServerBuilder::tool::<get_invoice>()`.

use darling::util::Flag;
use darling::{Error, FromMeta, Result};
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, LitStr, Pat, Path, ReturnType, Type};

use crate::common::{Krate, StrList, check_glob, check_key, docs, fnv1a, meta_list};
use syn::ext::IdentExt as _;

// ---------------------------------------------------------------------------------------------
// Parse

#[derive(FromMeta, Default)]
struct ToolArgs {
    query: Flag,
    mutation: Flag,
    action: Flag,
    #[darling(default)]
    name: Option<LitStr>,
    #[darling(default)]
    returns: Option<Path>,
    #[darling(default)]
    invalidates: StrList,
    #[darling(default)]
    cache: Option<Ident>,
    idempotent: Flag,
    #[darling(default)]
    destructive: Option<bool>,
    #[darling(default)]
    open_world: Option<bool>,
    #[darling(default)]
    title: Option<LitStr>,
    #[darling(default)]
    description: Option<LitStr>,
    #[darling(default)]
    tags: StrList,
    #[darling(default)]
    version: Option<LitStr>,
    #[darling(default)]
    middleware: Exprs,
    #[darling(default)]
    concurrency: Option<ConcurrencyArgs>,
    #[darling(default)]
    serialize: Option<SerializeArg>,
    #[darling(default)]
    max_bytes: Option<syn::LitInt>,
    #[darling(default)]
    toolset: Option<LitStr>,
    #[darling(rename = "crate", default)]
    krate: Krate,
}

/// `concurrency(max = 4, queue = 16)`.
#[derive(FromMeta)]
struct ConcurrencyArgs {
    max: syn::LitInt,
    #[darling(default)]
    queue: Option<syn::LitInt>,
}

/// `serialize = false`, `serialize = true` (per action) or `serialize = "argument"`.
enum SerializeArg {
    Off,
    PerAction,
    PerArgument(LitStr),
}

impl FromMeta for SerializeArg {
    fn from_bool(value: bool) -> Result<Self> {
        Ok(if value {
            SerializeArg::PerAction
        } else {
            SerializeArg::Off
        })
    }

    fn from_string(_: &str) -> Result<Self> {
        Err(Error::custom("unreachable: handled by from_value"))
    }

    fn from_value(value: &syn::Lit) -> Result<Self> {
        match value {
            syn::Lit::Bool(flag) => Self::from_bool(flag.value),
            syn::Lit::Str(argument) => Ok(SerializeArg::PerArgument(argument.clone())),
            other => Err(Error::custom(
                "`serialize` is `true` (per action), `false`, or the name of an argument",
            )
            .with_span(other)),
        }
    }
}

/// One expression or a list of expressions: `middleware = auth()` or `middleware = [a, b()]`.
#[derive(Default)]
struct Exprs(Vec<syn::Expr>);

impl FromMeta for Exprs {
    fn from_expr(expr: &syn::Expr) -> Result<Self> {
        match expr {
            syn::Expr::Array(array) => Ok(Exprs(array.elems.iter().cloned().collect())),
            other => Ok(Exprs(vec![other.clone()])),
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Verb {
    Query,
    Mutation,
    Action,
}

struct Param {
    ident: Ident,
    ty: Type,
    doc: Option<String>,
}

struct ToolDef {
    function: ItemFn,
    args: ToolArgs,
    verb: Verb,
    key: String,
    description: String,
    params: Vec<Param>,
    output: Type,
}

pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let function: ItemFn = match syn::parse2(item.clone()) {
        Ok(function) => function,
        Err(_) => {
            let error = syn::Error::new(Span::call_site(), "`#[tool]` goes on an `async fn`")
                .to_compile_error();
            return quote!(#error #item);
        }
    };
    let mut errors = Error::accumulator();
    let tool = parse(args, function.clone(), &mut errors);
    match (errors.finish(), tool) {
        (Ok(()), Some(tool)) => generate(&tool),
        (result, _) => {
            // The function is still emitted, so that callers and IDEs keep working.
            let errors = result.err().map(Error::write_errors);
            let function = strip_param_docs(function);
            quote!(#errors #function)
        }
    }
}

fn parse(
    args: TokenStream,
    function: ItemFn,
    errors: &mut darling::error::Accumulator,
) -> Option<ToolDef> {
    let args = errors
        .handle(meta_list(args).and_then(|list| ToolArgs::from_list(&list)))
        .unwrap_or_default();
    let verb = errors.handle(verb(&args));
    check_signature(&function, errors);
    let params = params(&function, errors);
    let output = match &function.sig.output {
        ReturnType::Type(_, ty) => Some((**ty).clone()),
        ReturnType::Default => {
            errors.push(
                Error::custom("a tool returns `Result<T, E>`: add a return type")
                    .with_span(&function.sig.ident),
            );
            None
        }
    };
    let key = match &args.name {
        Some(name) => {
            errors.handle(check_key(name));
            name.value()
        }
        None => function
            .sig
            .ident
            .to_string()
            .trim_start_matches("r#")
            .to_owned(),
    };
    let description = args
        .description
        .as_ref()
        .map(LitStr::value)
        .or_else(|| docs(&function.attrs));
    if description.is_none() {
        errors.push(
            Error::custom("a tool needs a description for the agent: add a doc comment (`/// …`) to the function")
                .with_span(&function.sig.ident),
        );
    }
    for glob in &args.invalidates.0 {
        errors.handle(check_glob(glob));
    }
    if let Some(verb) = verb {
        check_options(&args, verb, errors);
    }
    Some(ToolDef {
        function,
        args,
        verb: verb?,
        key,
        description: description?,
        params,
        output: output?,
    })
}

/// Exactly one verb: it decides the annotations and what the runtime does around the call.
fn verb(args: &ToolArgs) -> Result<Verb> {
    let given: Vec<(Verb, &Flag, &str)> = [
        (Verb::Query, &args.query, "query"),
        (Verb::Mutation, &args.mutation, "mutation"),
        (Verb::Action, &args.action, "action"),
    ]
    .into_iter()
    .filter(|(_, flag, _)| flag.is_present())
    .collect();
    match given.as_slice() {
        [(verb, _, _)] => Ok(*verb),
        [] => Err(Error::custom(
            "a tool has a verb: `#[tool(query, …)]`, `#[tool(mutation, …)]` or `#[tool(action, …)]`",
        )),
        [_, rest @ ..] => {
            let mut errors = Error::accumulator();
            for (_, flag, name) in rest {
                errors.push(
                    Error::custom(format!(
                        "a tool has exactly one verb; remove `{name}` or the other verb"
                    ))
                    .with_span(&flag.span()),
                );
            }
            Err(errors
                .finish()
                .err()
                .unwrap_or_else(|| Error::custom("a tool has exactly one verb")))
        }
    }
}

/// Options that only make sense for some verbs.
fn check_options(args: &ToolArgs, verb: Verb, errors: &mut darling::error::Accumulator) {
    if verb == Verb::Query && !args.invalidates.0.is_empty() {
        errors.push(
            Error::custom(
                "a query reads and cannot invalidate anything; only mutations and actions do",
            )
            .with_span(&args.invalidates.0[0]),
        );
    }
    if let Some(cache) = &args.cache {
        if verb != Verb::Query {
            errors.push(Error::custom("only a query declares `cache`").with_span(cache));
        } else if cache != "immutable" && cache != "volatile" {
            errors.push(Error::custom("`cache` is `immutable` or `volatile`").with_span(cache));
        }
    }
    if verb == Verb::Query && args.idempotent.is_present() {
        errors
            .push(Error::custom("a query is always idempotent").with_span(&args.idempotent.span()));
    }
    if verb == Verb::Query && args.destructive.is_some() {
        errors.push(Error::custom("a query is never destructive"));
    }
    if verb == Verb::Query && args.serialize.is_some() {
        errors.push(Error::custom(
            "a query changes nothing: it needs no serialization",
        ));
    }
    for limit in args
        .concurrency
        .iter()
        .map(|concurrency| &concurrency.max)
        .chain(&args.max_bytes)
    {
        if limit
            .base10_parse::<usize>()
            .map_or(true, |value| value == 0)
        {
            errors.push(Error::custom("expected a positive number").with_span(limit));
        }
    }
}

fn check_signature(function: &ItemFn, errors: &mut darling::error::Accumulator) {
    let sig = &function.sig;
    if sig.asyncness.is_none() {
        errors.push(Error::custom("a tool is an `async fn`").with_span(&sig.fn_token));
    }
    if !sig.generics.params.is_empty() {
        errors.push(Error::custom("a tool cannot be generic").with_span(&sig.generics));
    }
    if let Some(receiver) = sig.receiver() {
        errors.push(Error::custom("a tool is a free function, not a method").with_span(receiver));
    }
}

fn params(function: &ItemFn, errors: &mut darling::error::Accumulator) -> Vec<Param> {
    let mut params = Vec::new();
    for input in &function.sig.inputs {
        let FnArg::Typed(typed) = input else { continue };
        match &*typed.pat {
            Pat::Ident(pat) if pat.subpat.is_none() && pat.by_ref.is_none() => params.push(Param {
                ident: pat.ident.clone(),
                ty: (*typed.ty).clone(),
                doc: docs(&typed.attrs),
            }),
            other => errors.push(
                Error::custom("tool parameters are plain names (`id: String`): the name is the argument's name")
                    .with_span(other),
            ),
        }
    }
    params
}

fn strip_param_docs(mut function: ItemFn) -> ItemFn {
    for input in &mut function.sig.inputs {
        if let FnArg::Typed(typed) = input {
            typed.attrs.retain(|attr| !attr.path().is_ident("doc"));
        }
    }
    function
}

// ---------------------------------------------------------------------------------------------
// Expand

fn generate(tool: &ToolDef) -> TokenStream {
    let private = tool.args.krate.private();
    let function = strip_param_docs(tool.function.clone());
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
    let probe = |param: &Param| {
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
                        .with_call_handler::<#presenter, _, _, _, _, _>(
                            #[allow(unused_mut)]
                            |mut __fusion_args: #private::ArgReader<'_>| {
                                #(#reads)*
                                __fusion_args.finish()?;
                                #private::Ok(move |__fusion_context: #private::CallContext| async move {
                                    #(#takes)*
                                    #private::Ok::<#output, #private::ToolError>(#fn_ident(#(#bindings),*).await)
                                })
                            },
                        )
                }
            }
        };
    }
}

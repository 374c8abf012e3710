//! `#[tool(http = "GET /invoices/{id}")]` on a function without a body: the macro writes the
//! body, an HTTP call to the server's upstream (SPEC T6). The route is checked here, so that a
//! bad template or a path parameter no argument fills does not compile; the types are checked
//! by the code written (a path parameter's type must be a `PathSegment`, the result a
//! `FromUpstream`).

use darling::{Error, Result};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt as _;
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned as _;
use syn::{Attribute, FnArg, ItemFn, LitStr, Pat, Signature, Token, Visibility};

use super::parse::Tool;
use fusion_names::route::{Method, Route, Segment};

use crate::common::name_hash;

/// A function declared without a body: `async fn get(id: String) -> Result<M, ToolError>;`.
pub(super) struct Bodiless {
    attrs: Vec<Attribute>,
    vis: Visibility,
    sig: Signature,
}

impl Parse for Bodiless {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        let sig = input.parse()?;
        input.parse::<Token![;]>()?;
        Ok(Bodiless { attrs, vis, sig })
    }
}

impl Bodiless {
    /// The function with a body that never returns, until `prepare` writes the real one.
    pub(super) fn into_function(self) -> ItemFn {
        let mut attrs = self.attrs;
        // Until the body is written (and when a mistake keeps it from being written), the
        // arguments are unused: that is not the user's mistake.
        attrs.push(syn::parse_quote!(#[allow(unused_variables)]));
        ItemFn {
            modifiers: Default::default(),
            attrs,
            vis: self.vis,
            sig: self.sig,
            block: Box::new(syn::parse_quote!({ ::core::unreachable!() })),
        }
    }
}

/// The variant of `HttpMethod` the written code names.
fn method_variant(method: Method) -> proc_macro2::Ident {
    let name = match method {
        Method::Get => "Get",
        Method::Head => "Head",
        Method::Post => "Post",
        Method::Put => "Put",
        Method::Patch => "Patch",
        Method::Delete => "Delete",
    };
    proc_macro2::Ident::new(name, Span::call_site())
}

/// The route, checked by the rules the runtime applies to routes built at run time.
fn parse_route(template: &LitStr) -> Result<Route> {
    fusion_names::route::parse(&template.value())
        .map_err(|message| Error::custom(message).with_span(template))
}

/// Where `#[upstream(…)]` puts an argument.
#[derive(Clone, Copy, PartialEq)]
enum Placement {
    Default,
    Query,
    Body,
}

struct ParamUse {
    ident: syn::Ident,
    ty: syn::Type,
    /// The argument's name in the upstream's query or body.
    wire: String,
    placement: Placement,
    span: Span,
}

/// Writes the body of a proxy tool, or reports why it cannot: `http` on a function with a body,
/// a body-less function without `http`, a bad route, a path parameter no argument fills.
pub(super) fn prepare(tool: &mut Tool, bodiless: bool, errors: &mut darling::error::Accumulator) {
    let http = tool.args.as_ref().and_then(|args| args.http.clone());
    let Some(template) = http else {
        if bodiless {
            errors.push(
                Error::custom(
                    "a tool without a body is an HTTP proxy: say which call it makes, `#[tool(query, http = \"GET /invoices/{id}\", …)]`",
                )
                .with_span(&tool.function.sig.ident),
            );
        }
        return;
    };
    if !bodiless {
        errors.push(
            Error::custom(
                "an HTTP proxy tool has no body: the call is generated; end the signature with `;`",
            )
            .with_span(&tool.function.block.brace_token.span.join()),
        );
        return;
    }
    let Some(route) = errors.handle(parse_route(&template)) else {
        return;
    };
    let Some(params) = errors.handle(read_params(&mut tool.function)) else {
        return;
    };
    tool.wire_names = params
        .iter()
        .map(|param| (param.ident.clone(), param.wire.clone()))
        .collect();
    // Every path parameter is filled by the argument of the same name (as the agent sends it).
    for segment in &route.segments {
        if let Segment::Param { name, .. } = segment {
            match params.iter().find(|param| param.ident.unraw() == name) {
                None => {
                    let known: Vec<String> = params
                        .iter()
                        .map(|param| format!("`{}`", param.ident.unraw()))
                        .collect();
                    errors.push(
                        Error::custom(format!(
                            "the path parameter `{{{name}}}` has no argument of that name{}",
                            if known.is_empty() {
                                String::new()
                            } else {
                                format!(" (the arguments are {})", known.join(", "))
                            }
                        ))
                        .with_span(&template),
                    );
                }
                Some(param) if param.placement != Placement::Default => errors.push(
                    Error::custom(format!(
                        "`{name}` fills a path parameter: it cannot also go to the query or the body"
                    ))
                    .with_span(&param.span),
                ),
                Some(_) => {}
            }
        }
    }
    let private = tool.krate.private();
    let method = method_variant(route.method);
    let template_text = template.value();
    let path_names: Vec<&str> = route
        .segments
        .iter()
        .filter_map(|segment| match segment {
            Segment::Param { name, .. } => Some(name.as_str()),
            Segment::Literal(_) => None,
        })
        .collect();
    let path = route.segments.iter().map(|segment| match segment {
        Segment::Literal(text) => quote!(__fusion_request.literal(#text);),
        Segment::Param {
            prefix,
            name,
            suffix,
        } => {
            let Some(param) = params.iter().find(|param| param.ident.unraw() == name) else {
                return TokenStream::new();
            };
            let ident = &param.ident;
            let ty = &param.ty;
            if prefix.is_empty() && suffix.is_empty() {
                quote_spanned! {ty.span()=>
                    __fusion_request.param::<#ty>(#name, &#ident)?;
                }
            } else {
                quote_spanned! {ty.span()=>
                    __fusion_request.param_between::<#ty>(#prefix, #name, &#ident, #suffix)?;
                }
            }
        }
    });
    let rest = params
        .iter()
        .filter(|param| !path_names.contains(&param.ident.unraw().to_string().as_str()))
        .map(|param| {
            let ident = &param.ident;
            let ty = &param.ty;
            let wire = &param.wire;
            let placement = format_ident!(
                "{}",
                match param.placement {
                    Placement::Default => "Default",
                    Placement::Query => "Query",
                    Placement::Body => "Body",
                }
            );
            quote_spanned! {ty.span()=>
                (&&&#private::upstream_kinds::PartProbe::<#ty>::NEW)
                    .__fusion_part()
                    .add(&mut __fusion_request, #private::Placement::#placement, #wire, &#ident)?;
            }
        });
    let upstream = format_ident!("__fusion_upstream");
    // The answer is read into the success type: a type that cannot be (a model not declared
    // `#[model(upstream)]`) is reported there.
    let send_method = proc_macro2::Ident::new("send", success_span(&tool.function.sig.output));
    let send = quote!(#upstream.#send_method(__fusion_request));
    tool.function
        .sig
        .inputs
        .push(syn::parse_quote!(#upstream: #private::Upstream));
    let feature_check = quote_spanned! {template.span()=>
        #private::upstream_kinds::require_http_client::<()>();
    };
    *tool.function.block = syn::parse_quote!({
        #feature_check
        use #private::upstream_kinds::{ViaPartContext as _, ViaPartField as _, ViaPartGroup as _};
        #[allow(unused_mut)]
        let mut __fusion_request =
            #private::UpstreamRequest::new(#private::HttpMethod::#method, #template_text);
        #(#path)*
        #(#rest)*
        #private::Result::map_err(
            #send.await,
            ::core::convert::Into::into,
        )
    });
}

/// Where the success type of `-> Result<T, E>` is written (`T`'s first token), or the return
/// type's when it is not written so.
fn success_span(output: &syn::ReturnType) -> Span {
    let syn::ReturnType::Type(_, ty) = output else {
        return Span::call_site();
    };
    if let syn::Type::Path(path) = &**ty
        && let Some(last) = path.path.segments.last()
        && let syn::PathArguments::AngleBracketed(args) = &last.arguments
        && let Some(syn::GenericArgument::Type(success)) = args.args.first()
    {
        return success.span();
    }
    ty.span()
}

/// The user's parameters, with their `#[upstream(…)]` attributes read and removed.
fn read_params(function: &mut ItemFn) -> Result<Vec<ParamUse>> {
    let mut errors = Error::accumulator();
    let mut params = Vec::new();
    for input in &mut function.sig.inputs {
        let FnArg::Typed(typed) = input else { continue };
        let mut wire = None;
        let mut placement = Placement::Default;
        let mut span = typed.pat.span();
        for attr in typed
            .attrs
            .iter()
            .filter(|attr| attr.path().is_ident("upstream"))
        {
            let parsed = attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("name") {
                    let name: LitStr = meta.value()?.parse()?;
                    if name.value().is_empty() {
                        return Err(meta.error("an upstream name cannot be empty"));
                    }
                    wire = Some(name.value());
                    Ok(())
                } else if meta.path.is_ident("query") {
                    placement = Placement::Query;
                    span = meta.path.span();
                    Ok(())
                } else if meta.path.is_ident("body") {
                    placement = Placement::Body;
                    span = meta.path.span();
                    Ok(())
                } else {
                    Err(meta.error(
                        "expected `#[upstream(name = \"nameInTheUpstream\")]`, `#[upstream(query)]` or `#[upstream(body)]`: an argument goes to the path, the query or the body; headers and cookies are the server's configuration, never an argument",
                    ))
                }
            });
            if let Err(error) = parsed {
                errors.push(error.into());
            }
        }
        typed.attrs.retain(|attr| !attr.path().is_ident("upstream"));
        if let Pat::Ident(pat) = &*typed.pat {
            params.push(ParamUse {
                ident: pat.ident.clone(),
                ty: (*typed.ty).clone(),
                wire: wire.unwrap_or_else(|| pat.ident.unraw().to_string()),
                placement,
                span,
            });
        }
    }
    errors.finish_with(params)
}

/// The compile-time checks a proxy adds: no argument (path, query or body) carries the name of
/// a guarded field of the returned model, under its own name or its upstream name.
pub(super) fn name_checks(
    tool: &super::check::Checked<'_>,
    wire_names: &[(syn::Ident, String)],
) -> Vec<TokenStream> {
    let Some(presenter) = &tool.args.returns else {
        return Vec::new();
    };
    if tool.args.http.is_none() {
        return Vec::new();
    }
    let mut checks = Vec::new();
    for param in &tool.params {
        if param.ident == "__fusion_upstream" {
            continue;
        }
        let name = param.ident.unraw().to_string();
        let mut names = vec![name.clone()];
        if let Some((_, wire)) = wire_names.iter().find(|(ident, _)| ident == param.ident)
            && *wire != name
        {
            names.push(wire.clone());
        }
        let ty = &param.ty;
        let span = param.ident.span();
        let private = tool.krate.private_at(span);
        for name in names {
            let hash = proc_macro2::Literal::u64_suffixed(name_hash(&name));
            checks.push(quote_spanned! {span=>
                {
                    let clash = (&&#private::kinds::ReservedProbe::<<#presenter as #private::Presenter>::Model, #hash>::NEW).__fusion_reserved();
                    (&&&&&#private::kinds::Probe::<#ty>::NEW).__fusion_param().must_not_send(clash);
                }
            });
        }
    }
    checks
}

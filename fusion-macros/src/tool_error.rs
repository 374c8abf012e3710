//! `#[derive(ToolError)]`: domain errors with their own codes, recovery lines and actions, known
//! statically so that the server can check the actions when it is built (SPEC E1).

use darling::util::Flag;
use darling::{Error, FromMeta, Result};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::{Attribute, DeriveInput, Fields, Ident, LitStr};

use crate::common::{Krate, StrList, check_key};

#[derive(FromMeta, Default)]
struct VariantArgs {
    #[darling(default)]
    code: Option<LitStr>,
    #[darling(default)]
    message: Option<LitStr>,
    #[darling(default)]
    recovery: Option<LitStr>,
    #[darling(default)]
    actions: StrList,
    retryable: Flag,
    #[darling(default)]
    retry_after: Option<RetryAfter>,
    internal: Flag,
    from: Flag,
}

/// `retry_after = "5s"`: a retry window of a whole number of `ms`, `s` or `m`, in milliseconds.
struct RetryAfter {
    millis: u64,
    span: Span,
}

impl FromMeta for RetryAfter {
    fn from_value(value: &syn::Lit) -> Result<Self> {
        let syn::Lit::Str(text) = value else {
            return Err(Error::custom(
                "expected a retry window as a string, such as `retry_after = \"5s\"`",
            )
            .with_span(value));
        };
        parse_window(&text.value())
            .map(|millis| RetryAfter {
                millis,
                span: text.span(),
            })
            .ok_or_else(|| {
                Error::custom(format!(
                    "malformed retry window `{}`: a whole number followed by `ms`, `s` or `m`, such as \"500ms\" or \"5s\"",
                    text.value()
                ))
                .with_span(text)
            })
    }
}

/// `"500ms"`, `"5s"` or `"2m"` in milliseconds; `None` when malformed or too long.
fn parse_window(text: &str) -> Option<u64> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let factor = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(factor)
}

#[derive(FromMeta, Default)]
struct ContainerArgs {
    #[darling(rename = "crate", default)]
    krate: Krate,
}

struct Variant {
    ident: Ident,
    fields: Fields,
    args: VariantArgs,
}

pub(crate) fn derive(input: TokenStream) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(error) => return error.to_compile_error(),
    };
    match parse(&input) {
        Ok((krate, variants)) => generate(&input, &krate, &variants),
        Err(errors) => errors.write_errors(),
    }
}

fn tool_error_args<T: FromMeta + Default>(attrs: &[Attribute]) -> Result<T> {
    let mut found = None;
    let mut errors = Error::accumulator();
    for attr in attrs
        .iter()
        .filter(|attr| attr.path().is_ident("tool_error"))
    {
        if found.is_some() {
            errors.push(Error::custom("duplicate `#[tool_error]`").with_span(attr));
            continue;
        }
        found = errors.handle(T::from_meta(&attr.meta));
    }
    errors.finish_with(found.unwrap_or_default())
}

fn parse(input: &DeriveInput) -> Result<(Krate, Vec<Variant>)> {
    let mut errors = Error::accumulator();
    let container: ContainerArgs = errors
        .handle(tool_error_args(&input.attrs))
        .unwrap_or_default();
    let syn::Data::Enum(data) = &input.data else {
        return Err(
            Error::custom("`ToolError` is derived for an enum of domain errors")
                .with_span(&input.ident),
        );
    };
    if !input.generics.params.is_empty() {
        errors.push(
            Error::custom("a domain error enum cannot be generic").with_span(&input.generics),
        );
    }
    let mut variants = Vec::new();
    for variant in &data.variants {
        let Some(args) = errors.handle(tool_error_args::<VariantArgs>(&variant.attrs)) else {
            continue;
        };
        check_variant(&variant.ident, &variant.fields, &args, &mut errors);
        variants.push(Variant {
            ident: variant.ident.clone(),
            fields: variant.fields.clone(),
            args,
        });
    }
    errors.finish_with((container.krate, variants))
}

/// A domain variant has a code and a message; an internal one wraps exactly one error whose
/// text is only logged, and has no retry window (the agent is told not to retry blindly).
fn check_variant(
    ident: &Ident,
    fields: &Fields,
    args: &VariantArgs,
    errors: &mut darling::error::Accumulator,
) {
    for action in &args.actions.0 {
        errors.handle(check_key(action));
    }
    if args.internal.is_present() {
        if args.code.is_some() || args.message.is_some() {
            errors.push(
                Error::custom("an `internal` error has no code or message of its own: the agent sees INTERNAL_ERROR")
                    .with_span(ident),
            );
        }
        if fields.len() != 1 {
            errors.push(
                Error::custom(
                    "an `internal` variant wraps exactly one error: `Store(rusqlite::Error)`",
                )
                .with_span(ident),
            );
        }
        // The agent sees only INTERNAL_ERROR and an errorId: anything meant for it would be
        // dropped, so it does not compile.
        let agent_facing = [
            (
                args.retry_after.as_ref().map(|window| window.span),
                "an `internal` error has no retry window: the agent is told not to retry blindly",
            ),
            (
                args.retryable.is_present().then(|| args.retryable.span()),
                "an `internal` error is never retryable: the agent is told not to retry blindly",
            ),
            (
                args.recovery.as_ref().map(LitStr::span),
                "an `internal` error has no recovery of its own: the agent sees INTERNAL_ERROR",
            ),
            (
                args.actions.0.first().map(LitStr::span),
                "an `internal` error lists no actions: the agent sees INTERNAL_ERROR",
            ),
        ];
        for (span, message) in agent_facing {
            if let Some(span) = span {
                errors.push(Error::custom(message).with_span(&span));
            }
        }
        return;
    }
    if args.from.is_present() {
        errors
            .push(Error::custom("`from` is for `internal` variants").with_span(&args.from.span()));
    }
    if args.code.is_none() {
        errors.push(
            Error::custom(
                "add `#[tool_error(code = \"…\", message = \"…\")]`, or `#[tool_error(internal)]`",
            )
            .with_span(ident),
        );
    }
    if args.message.is_none() && args.code.is_some() {
        errors.push(Error::custom("add `message = \"…\"`: what the agent reads").with_span(ident));
    }
}

fn generate(input: &DeriveInput, krate: &Krate, variants: &[Variant]) -> TokenStream {
    let private = krate.private();
    let message_checks: Vec<TokenStream> = variants
        .iter()
        .filter(|variant| !variant.args.internal.is_present())
        .flat_map(|variant| {
            let Some(message) = &variant.args.message else {
                return Vec::new();
            };
            message_arguments(&message.value())
                .iter()
                .filter_map(|argument| message_argument_type(variant, argument))
                .map(|ty| {
                    quote::quote_spanned! {message.span()=>
                        (&&&#private::kinds::MessageArg::<#ty>::NEW).__fusion_message_arg().check();
                    }
                })
                .collect()
        })
        .collect();
    let ident = &input.ident;
    let arms = variants
        .iter()
        .map(|variant| conversion_arm(&private, ident, variant));
    let display_arms = variants.iter().map(|variant| display_arm(ident, variant));
    let actions: Vec<&LitStr> = variants
        .iter()
        .flat_map(|variant| &variant.args.actions.0)
        .collect();
    let from_impls = variants
        .iter()
        .filter(|variant| variant.args.from.is_present())
        .filter_map(|variant| {
            let field = variant.fields.iter().next()?;
            let ty = &field.ty;
            let variant_ident = &variant.ident;
            let construct = match &field.ident {
                Some(name) => quote!(#ident::#variant_ident { #name: source }),
                None => quote!(#ident::#variant_ident(source)),
            };
            Some(quote! {
                #[automatically_derived]
                impl ::core::convert::From<#ty> for #ident {
                    fn from(source: #ty) -> Self {
                        #construct
                    }
                }
            })
        });
    quote! {
        #[allow(unused_qualifications, unused_variables)]
        const _: () = {
            #[automatically_derived]
            impl ::core::convert::From<#ident> for #private::ToolError {
                fn from(error: #ident) -> Self {
                    match error {
                        #(#arms)*
                    }
                }
            }

            #[automatically_derived]
            impl #private::ErrorCatalog for #ident {
                const ACTIONS: &'static [&'static str] = &[#(#actions),*];
            }

            #[automatically_derived]
            impl ::core::fmt::Display for #ident {
                fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    match self {
                        #(#display_arms)*
                    }
                }
            }

            #(#from_impls)*

            // Compile-time only: an agent-facing message formats neither a model nor a hidden
            // value (their `Debug` is redacting, but what the agent reads should not even try).
            fn __fusion_check_messages() {
                use #private::kinds::{ViaHiddenInMessage as _, ViaModelInMessage as _, ViaPlainInMessage as _};
                #(#message_checks)*
            }
        };
    }
}

/// The names of the arguments a format string refers to: `0` in `{0}` or `{0:?}`, `id` in
/// `{id}`.
fn message_arguments(text: &str) -> Vec<String> {
    let mut arguments = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '{' {
            continue;
        }
        if chars.peek() == Some(&'{') {
            chars.next();
            continue;
        }
        let argument: String = chars
            .by_ref()
            .take_while(|&c| c != '}' && c != ':')
            .collect();
        let argument = argument.trim().to_owned();
        if !argument.is_empty() && !arguments.contains(&argument) {
            arguments.push(argument);
        }
    }
    arguments
}

/// The type of the field a message argument names, if any.
fn message_argument_type<'a>(variant: &'a Variant, argument: &str) -> Option<&'a syn::Type> {
    match argument.parse::<usize>() {
        Ok(index) => variant.fields.iter().nth(index).map(|field| &field.ty),
        Err(_) => variant
            .fields
            .iter()
            .find(|field| field.ident.as_ref().is_some_and(|ident| ident == argument))
            .map(|field| &field.ty),
    }
}

/// `Enum::Variant { a, b }` or `Enum::Variant(__field_0, __field_1)`, binding every field.
fn pattern(enum_ident: &Ident, variant: &Variant) -> (TokenStream, Vec<Ident>) {
    let variant_ident = &variant.ident;
    match &variant.fields {
        Fields::Named(named) => {
            let names: Vec<Ident> = named
                .named
                .iter()
                .filter_map(|field| field.ident.clone())
                .collect();
            (quote!(#enum_ident::#variant_ident { #(#names),* }), names)
        }
        Fields::Unnamed(unnamed) => {
            let names: Vec<Ident> = (0..unnamed.unnamed.len())
                .map(|index| format_ident!("__field_{}", index))
                .collect();
            (quote!(#enum_ident::#variant_ident(#(#names),*)), names)
        }
        Fields::Unit => (quote!(#enum_ident::#variant_ident), Vec::new()),
    }
}

/// The message with `{0}` rewritten to `{__field_0}`, so that tuple fields can be named in it.
fn message(variant: &Variant) -> Option<LitStr> {
    let message = variant.args.message.as_ref()?;
    let text = message.value();
    let mut rewritten = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        rewritten.push(c);
        if c == '{' {
            if chars.peek() == Some(&'{') {
                rewritten.push('{');
                chars.next();
            } else if chars.peek().is_some_and(char::is_ascii_digit) {
                rewritten.push_str("__field_");
            }
        }
    }
    Some(LitStr::new(&rewritten, message.span()))
}

fn conversion_arm(private: &TokenStream, enum_ident: &Ident, variant: &Variant) -> TokenStream {
    let (pattern, names) = pattern(enum_ident, variant);
    if variant.args.internal.is_present() {
        let source = names
            .first()
            .cloned()
            .unwrap_or_else(|| Ident::new("source", Span::call_site()));
        return quote!(#pattern => #private::ToolError::internal(#source),);
    }
    let code = variant
        .args
        .code
        .clone()
        .unwrap_or_else(|| LitStr::new("", Span::call_site()));
    let message = message(variant).unwrap_or_else(|| LitStr::new("", Span::call_site()));
    let recovery = variant
        .args
        .recovery
        .as_ref()
        .map(|recovery| quote!(.with_recovery(#recovery)));
    let actions = &variant.args.actions.0;
    let actions = (!actions.is_empty()).then(|| quote!(.with_actions([#(#actions),*])));
    let retryable = variant
        .args
        .retryable
        .is_present()
        .then(|| quote!(.with_retryable(true)));
    // A retry window makes the error retryable too.
    let retry_after = variant.args.retry_after.as_ref().map(|window| {
        let millis = proc_macro2::Literal::u64_suffixed(window.millis);
        quote!(.with_retry_after(::core::time::Duration::from_millis(#millis)))
    });
    quote! {
        #pattern => #private::ToolError::new(#code, ::std::format!(#message))
            #recovery #actions #retryable #retry_after,
    }
}

fn display_arm(enum_ident: &Ident, variant: &Variant) -> TokenStream {
    let (pattern, names) = pattern(enum_ident, variant);
    if variant.args.internal.is_present() {
        let source = names
            .first()
            .cloned()
            .unwrap_or_else(|| Ident::new("source", Span::call_site()));
        return quote!(#pattern => ::core::fmt::Display::fmt(#source, f),);
    }
    let message = message(variant).unwrap_or_else(|| LitStr::new("", Span::call_site()));
    quote!(#pattern => f.write_fmt(::core::format_args!(#message)),)
}

#[cfg(test)]
mod tests {
    use super::{message_arguments, parse_window};

    #[test]
    fn message_arguments_are_the_names_a_format_string_refers_to() {
        assert_eq!(
            message_arguments("Invoice {0} is {status:?}; {{literal}} {0:>5} { id }"),
            ["0", "status", "id"]
        );
        assert!(message_arguments("No arguments {{at all}}.").is_empty());
    }

    #[test]
    fn retry_windows_are_whole_numbers_of_ms_s_or_m() {
        assert_eq!(parse_window("500ms"), Some(500));
        assert_eq!(parse_window("5s"), Some(5_000));
        assert_eq!(parse_window("2m"), Some(120_000));
        assert_eq!(parse_window("0s"), Some(0));
        for malformed in [
            "",
            "5",
            "s",
            "5 s",
            "1.5s",
            "-5s",
            "5h",
            "5sec",
            "99999999999999999999ms",
        ] {
            assert_eq!(parse_window(malformed), None, "{malformed}");
        }
        assert_eq!(parse_window(&format!("{}m", u64::MAX / 60_000 + 1)), None);
    }
}

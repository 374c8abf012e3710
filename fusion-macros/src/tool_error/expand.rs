//! The conversion into `ToolError`, the catalog of actions and `Display`. Only `quote!`; every
//! rule was checked before.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use syn::{Fields, Ident, LitStr};

use super::check::Checked;
use super::parse::{Variant, VariantArgs};

pub(super) fn tool_error(checked: &Checked<'_>) -> TokenStream {
    let input = checked.input.original;
    let variants = &checked.variants;
    let private = checked.input.krate.private();
    let message_checks: Vec<TokenStream> = variants
        .iter()
        .filter(|(_, args)| !args.internal.is_present() && !args.transparent.is_present())
        .flat_map(|&(variant, args)| {
            let Some(message) = &args.message else {
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
        .map(|&(variant, args)| conversion_arm(&private, ident, variant, args));
    let display_arms = variants
        .iter()
        .map(|&(variant, args)| display_arm(&private, ident, variant, args));
    let actions: Vec<&LitStr> = variants
        .iter()
        .flat_map(|(_, args)| &args.actions.0)
        .collect();
    // The tool keys its recovery lines name between backticks (`` `ns.action` ``), checked
    // against the server's tools when it is built, as `actions` are.
    let type_name = ident.to_string();
    let recovery_tools: Vec<TokenStream> = variants
        .iter()
        .filter_map(|&(variant, args)| Some((variant, args.recovery.as_ref()?)))
        .flat_map(|(variant, recovery)| {
            let variant = variant.ident.to_string();
            let type_name = &type_name;
            keys_between_backticks(&recovery.value())
                .into_iter()
                .map(move |key| quote!((#type_name, #variant, #key)))
        })
        .collect();
    let from_impls = source_conversions(ident, variants.iter().map(|&(variant, _)| variant));
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
                const RECOVERY_TOOLS: &'static [(&'static str, &'static str, &'static str)] =
                    &[#(#recovery_tools),*];
            }

            #[automatically_derived]
            impl ::core::fmt::Display for #ident {
                fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    match self {
                        #(#display_arms)*
                    }
                }
            }

            #from_impls

            // Compile-time only: an agent-facing message formats neither a model nor a hidden
            // value (their `Debug` is redacting, but what the agent reads should not even try).
            fn __fusion_check_messages() {
                use #private::kinds::{ViaHiddenInMessage as _, ViaModelInMessage as _, ViaPlainInMessage as _};
                #(#message_checks)*
            }
        };
    }
}

/// The spans between backticks of `text` that read as a namespaced tool key (`ns.action`):
/// dotted words of letters, digits and `_`. Others (a field, a JSON value) are not names.
fn keys_between_backticks(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| {
            span.contains('.')
                && span.split('.').all(|word| {
                    !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                })
        })
        .map(str::to_owned)
        .collect()
}

/// `From<Source> for Enum` for each `from` variant: `?` on the source error builds the
/// variant. Also emitted by the fallback.
pub(super) fn source_conversions<'a>(
    ident: &Ident,
    variants: impl IntoIterator<Item = &'a Variant<'a>>,
) -> TokenStream {
    variants
        .into_iter()
        .filter(|variant| variant.from)
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
        })
        .collect()
}

/// Each field rebound as the message formats it: itself, or a stand-in for a model or a hidden
/// value, which the message check refuses (one error for the mistake, not one more per
/// `format!`). `by_ref`: the fields are bound by reference already (in `Display`).
fn message_values(private: &TokenStream, names: &[Ident], by_ref: bool) -> TokenStream {
    let borrow = (!by_ref).then(|| quote!(&));
    quote! {
        #[allow(unused_imports)]
        use #private::kinds::{ViaHiddenValue as _, ViaModelValue as _, ViaPlainValue as _};
        #(
            #[allow(unused_variables)]
            let #names = (&&&#private::kinds::MessageValue(#borrow #names)).__fusion_message_value();
        )*
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
fn message_argument_type<'a>(variant: &Variant<'a>, argument: &str) -> Option<&'a syn::Type> {
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
fn pattern(enum_ident: &Ident, variant: &Variant<'_>) -> (TokenStream, Vec<Ident>) {
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
fn message(args: &VariantArgs) -> Option<LitStr> {
    let message = args.message.as_ref()?;
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

fn conversion_arm(
    private: &TokenStream,
    enum_ident: &Ident,
    variant: &Variant<'_>,
    args: &VariantArgs,
) -> TokenStream {
    let (pattern, names) = pattern(enum_ident, variant);
    let source = || {
        names
            .first()
            .cloned()
            .unwrap_or_else(|| Ident::new("source", Span::call_site()))
    };
    if args.transparent.is_present() {
        let source = source();
        return quote!(#pattern => ::core::convert::Into::<#private::ToolError>::into(#source),);
    }
    if args.internal.is_present() {
        let source = source();
        return quote!(#pattern => #private::ToolError::internal(#source),);
    }
    let code = args
        .code
        .clone()
        .unwrap_or_else(|| LitStr::new("", Span::call_site()));
    let message = message(args).unwrap_or_else(|| LitStr::new("", Span::call_site()));
    let recovery = args
        .recovery
        .as_ref()
        .map(|recovery| quote!(.with_recovery(#recovery)));
    let actions = &args.actions.0;
    let actions = (!actions.is_empty()).then(|| quote!(.with_actions([#(#actions),*])));
    let retryable = args
        .retryable
        .is_present()
        .then(|| quote!(.with_retryable(true)));
    // A retry window makes the error retryable too.
    let retry_after = args.retry_after.as_ref().map(|window| {
        let millis = proc_macro2::Literal::u64_suffixed(window.millis);
        quote!(.with_retry_after(::core::time::Duration::from_millis(#millis)))
    });
    let values = message_values(private, &names, false);
    quote! {
        #pattern => {
            #values
            #private::ToolError::new(#code, ::std::format!(#message))
                #recovery #actions #retryable #retry_after
        }
    }
}

fn display_arm(
    private: &TokenStream,
    enum_ident: &Ident,
    variant: &Variant<'_>,
    args: &VariantArgs,
) -> TokenStream {
    let (pattern, names) = pattern(enum_ident, variant);
    if args.internal.is_present() || args.transparent.is_present() {
        let source = names
            .first()
            .cloned()
            .unwrap_or_else(|| Ident::new("source", Span::call_site()));
        return quote!(#pattern => ::core::fmt::Display::fmt(#source, f),);
    }
    let message = message(args).unwrap_or_else(|| LitStr::new("", Span::call_site()));
    let values = message_values(private, &names, true);
    quote!(#pattern => { #values f.write_fmt(::core::format_args!(#message)) })
}

#[cfg(test)]
mod tests {
    use super::message_arguments;

    #[test]
    fn message_arguments_are_the_names_a_format_string_refers_to() {
        assert_eq!(
            message_arguments("Invoice {0} is {status:?}; {{literal}} {0:>5} { id }"),
            ["0", "status", "id"]
        );
        assert!(message_arguments("No arguments {{at all}}.").is_empty());
    }
}

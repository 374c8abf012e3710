//! The derive's receivers and the enum as written: each single value is read here (a retry
//! window is parsed where it is written); the rules that span values are in `check`.

use darling::util::Flag;
use darling::{Error, FromMeta, Result};
use syn::punctuated::Punctuated;
use syn::{Attribute, DeriveInput, Fields, Ident, LitStr, Token};

use crate::common::{StrList, Window};
use crate::paths::Krate;

#[derive(FromMeta, Default)]
pub(super) struct VariantArgs {
    #[darling(default)]
    pub(super) code: Option<LitStr>,
    #[darling(default)]
    pub(super) message: Option<LitStr>,
    #[darling(default)]
    pub(super) recovery: Option<LitStr>,
    #[darling(default)]
    pub(super) actions: StrList,
    pub(super) retryable: Flag,
    #[darling(default)]
    pub(super) retry_after: Option<Window>,
    pub(super) internal: Flag,
    pub(super) transparent: Flag,
    pub(super) from: Flag,
}

#[derive(FromMeta, Default)]
pub(super) struct ContainerArgs {
    #[darling(rename = "crate", default)]
    pub(super) krate: Krate,
}

/// The type as written and what its attributes say.
pub(super) struct Input<'a> {
    pub(super) original: &'a DeriveInput,
    pub(super) krate: Krate,
    /// `None` when the type is not an enum.
    pub(super) variants: Option<Vec<Variant<'a>>>,
}

pub(super) struct Variant<'a> {
    pub(super) ident: &'a Ident,
    pub(super) fields: &'a Fields,
    /// `None` when the variant's attribute could not be read (the error is reported).
    pub(super) args: Option<VariantArgs>,
    /// `#[tool_error(…, from)]`, read even when the rest of the attribute could not be: a
    /// fallback still converts the source error, so that `?` on it reports nothing.
    pub(super) from: bool,
}

pub(super) fn parse<'a>(
    input: &'a DeriveInput,
    errors: &mut darling::error::Accumulator,
) -> Input<'a> {
    let container: ContainerArgs = errors
        .handle(tool_error_args(&input.attrs))
        .unwrap_or_default();
    let variants = match &input.data {
        syn::Data::Enum(data) => Some(
            data.variants
                .iter()
                .map(|variant| {
                    let args: Option<VariantArgs> = errors.handle(tool_error_args(&variant.attrs));
                    let from = match &args {
                        Some(args) => args.from.is_present(),
                        None => mentions_from(&variant.attrs),
                    };
                    Variant {
                        ident: &variant.ident,
                        fields: &variant.fields,
                        args,
                        from,
                    }
                })
                .collect(),
        ),
        _ => None,
    };
    Input {
        original: input,
        krate: container.krate,
        variants,
    }
}

/// The one `#[tool_error(…)]` among `attrs`, or the defaults.
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

/// Whether a `#[tool_error(…)]` among `attrs` says `from`, whatever else it says.
fn mentions_from(attrs: &[Attribute]) -> bool {
    attrs
        .iter()
        .filter(|attr| attr.path().is_ident("tool_error"))
        .filter_map(|attr| {
            attr.parse_args_with(Punctuated::<syn::Meta, Token![,]>::parse_terminated)
                .ok()
        })
        .flatten()
        .any(|meta| meta.path().is_ident("from"))
}

//! Pieces shared by the macros: attribute value shapes, doc comments, "did you mean"
//! suggestions, and tool keys and globs checked on their literals.

use darling::ast::NestedMeta;
use darling::{Error, FromMeta, Result};
use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::ext::IdentExt as _;
use syn::{Attribute, Expr, Ident, Lit, LitStr};

use crate::paths::Krate;

/// A list of identifiers: `name(a, b)` or `name = [a, b]`. An element that is not an
/// identifier does not fail the list: it is kept as an error for the checks to report, so that
/// a fallback still has the well-formed names.
#[derive(Clone, Default)]
pub(crate) struct IdentList {
    pub(crate) idents: Vec<Ident>,
    pub(crate) malformed: Vec<Error>,
}

impl IdentList {
    fn push(&mut self, ident: Option<Ident>, element: &impl ToTokens) {
        match ident {
            Some(ident) => self.idents.push(ident),
            None => self
                .malformed
                .push(Error::custom("expected a field name").with_span(element)),
        }
    }
}

impl FromMeta for IdentList {
    fn from_list(items: &[NestedMeta]) -> Result<Self> {
        let mut list = IdentList::default();
        for item in items {
            let ident = match item {
                NestedMeta::Meta(syn::Meta::Path(path)) => path.get_ident().cloned(),
                _ => None,
            };
            list.push(ident, item);
        }
        Ok(list)
    }

    fn from_expr(expr: &Expr) -> Result<Self> {
        match expr {
            Expr::Array(array) => {
                let mut list = IdentList::default();
                for element in &array.elems {
                    let ident = match element {
                        Expr::Path(path) => path.path.get_ident().cloned(),
                        _ => None,
                    };
                    list.push(ident, element);
                }
                Ok(list)
            }
            Expr::Group(group) => Self::from_expr(&group.expr),
            other => {
                Err(Error::custom("expected a list of field names: `[a, b]`").with_span(other))
            }
        }
    }
}

/// One string or a list of strings: `name = "a"` or `name = ["a", "b"]`.
#[derive(Clone, Default)]
pub(crate) struct StrList(pub(crate) Vec<LitStr>);

impl FromMeta for StrList {
    fn from_expr(expr: &Expr) -> Result<Self> {
        match expr {
            Expr::Lit(lit) => Self::from_value(&lit.lit),
            Expr::Group(group) => Self::from_expr(&group.expr),
            Expr::Array(array) => {
                let mut errors = Error::accumulator();
                let mut strings = Vec::new();
                for element in &array.elems {
                    match element {
                        Expr::Lit(syn::ExprLit {
                            lit: Lit::Str(text),
                            ..
                        }) => strings.push(text.clone()),
                        other => {
                            errors.push(Error::custom("expected a string literal").with_span(other))
                        }
                    }
                }
                errors.finish_with(StrList(strings))
            }
            other => Err(Error::custom("expected a string or a list of strings").with_span(other)),
        }
    }

    fn from_value(value: &Lit) -> Result<Self> {
        match value {
            Lit::Str(text) => Ok(StrList(vec![text.clone()])),
            other => Err(Error::unexpected_lit_type(other)),
        }
    }
}

/// The text of the doc comments among `attrs`, lines joined, or `None`.
pub(crate) fn docs(attrs: &[Attribute]) -> Option<String> {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|attr| attr.path().is_ident("doc"))
        .filter_map(|attr| match &attr.meta {
            syn::Meta::NameValue(syn::MetaNameValue {
                value:
                    Expr::Lit(syn::ExprLit {
                        lit: Lit::Str(text),
                        ..
                    }),
                ..
            }) => Some(text.value()),
            _ => None,
        })
        .map(|line| line.strip_prefix(' ').map(str::to_owned).unwrap_or(line))
        .collect();
    let text = lines.join("\n").trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// The closest candidate to `name`, if one is close enough to be a likely typo.
pub(crate) fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|candidate| (edit_distance(name, candidate), candidate))
        .filter(|(distance, candidate)| *distance <= (name.len().max(candidate.len()) / 3).max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, a_char) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, b_char) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(a_char != *b_char);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// An error naming an unknown field, with a suggestion when one is close.
pub(crate) fn unknown_field<'a>(
    ident: &Ident,
    owner: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Error {
    let name = ident.to_string();
    let message = match did_you_mean(&name, candidates) {
        Some(close) => format!("`{owner}` has no field `{name}`; did you mean `{close}`?"),
        None => format!("`{owner}` has no field `{name}`"),
    };
    Error::custom(message).with_span(ident)
}

/// A tool key: `namespace.action` or `action`. The syntax and its problem sentences are
/// `fusion_names`', shared with the runtime's `ToolKey::parse`.
pub(crate) fn check_key(key: &LitStr) -> Result<()> {
    fusion_names::check_key(&key.value())
        .map_err(|problem| Error::custom(format!("tool name {problem}")).with_span(key))
}

/// A glob over tool keys: segments are `*`, `**` or a key segment (`fusion_names`, shared with
/// the runtime's `Glob::parse`).
pub(crate) fn check_glob(glob: &LitStr) -> Result<()> {
    fusion_names::check_glob(&glob.value())
        .map_err(|problem| Error::custom(problem).with_span(glob))
}

/// A deterministic 64-bit hash (FNV-1a), for unique generated names.
pub(crate) fn fnv1a(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain(std::iter::once(0xff)) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}

/// What can still be read of an attribute whose items did not all parse: the items that parse
/// on their own (the first of each name), parsed together. Fallbacks rely on it; the errors
/// were reported by the strict reading.
pub(crate) fn salvage<T: FromMeta + Default>(items: &[NestedMeta]) -> T {
    let mut names: Vec<&syn::Path> = Vec::new();
    let mut kept = Vec::new();
    for item in items {
        let NestedMeta::Meta(meta) = item else {
            continue;
        };
        if !names.contains(&meta.path()) && T::from_list(std::slice::from_ref(item)).is_ok() {
            names.push(meta.path());
            kept.push(item.clone());
        }
    }
    T::from_list(&kept).unwrap_or_default()
}

/// Parses the arguments of an attribute macro into darling's nested meta list.
pub(crate) fn meta_list(args: TokenStream) -> Result<Vec<NestedMeta>> {
    NestedMeta::parse_meta_list(args).map_err(Error::from)
}

/// The `#[schemars(…)]` attributes among `attrs`: constraints (`length(max = 64)`,
/// `range(min = 1)`, `regex(pattern = …)`…) that an argument's input schema advertises.
pub(crate) fn schemars_attrs(attrs: &[Attribute]) -> Vec<Attribute> {
    attrs
        .iter()
        .filter(|attr| attr.path().is_ident("schemars"))
        .cloned()
        .collect()
}

/// An expression of type `fn(&mut SchemaGenerator) -> Schema`: the schema of an argument
/// `ident: ty` with its `#[schemars(…)]` attributes, as schemars' own derive writes it for a
/// one-field struct (so every schemars attribute means what schemars documents).
pub(crate) fn field_schema_fn(
    krate: &Krate,
    ident: &Ident,
    ty: &TokenStream,
    attrs: &[Attribute],
) -> TokenStream {
    let private = krate.private();
    let schemars_path = krate.schemars_path();
    let key = ident.unraw().to_string();
    quote! {{
        fn __fusion_field_schema(
            generator: &mut #private::schemars::SchemaGenerator,
        ) -> #private::schemars::Schema {
            #[derive(#private::schemars::JsonSchema)]
            #[schemars(crate = #schemars_path)]
            #[allow(dead_code, non_camel_case_types)]
            struct __FusionField {
                #(#attrs)*
                #ident: #ty,
            }
            #private::field_schema::<__FusionField>(generator, #key)
        }
        __fusion_field_schema
    }}
}

//! Pieces shared by the macros: attribute value shapes, doc comments, "did you mean"
//! suggestions, and tool keys and globs checked on their literals.

use darling::ast::NestedMeta;
use darling::{Error, FromMeta, Result};
use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::{Attribute, Expr, Ident, Lit, LitStr};

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
/// `#[not_guarded("why")]` on a parameter: the argument is named like a guarded field of a model
/// but is not that field; the reason is recorded in the lockfile. Once, with a reason.
pub(crate) fn not_guarded(attrs: &[Attribute]) -> Result<Option<LitStr>> {
    let mut found: Option<LitStr> = None;
    for attr in attrs
        .iter()
        .filter(|attr| attr.path().is_ident("not_guarded"))
    {
        let usage = "write `#[not_guarded(\"why this argument is not the guarded field it is named like\")]`";
        let reason: LitStr = attr
            .parse_args()
            .map_err(|_| Error::custom(usage).with_span(attr))?;
        if reason.value().trim().is_empty() {
            return Err(Error::custom(format!(
                "`not_guarded` needs a reason for the reviewer: {usage}"
            ))
            .with_span(&reason));
        }
        if found.is_some() {
            return Err(Error::custom("`not_guarded` is given twice").with_span(attr));
        }
        found = Some(reason);
    }
    Ok(found)
}

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

/// Declared OAuth scopes: each a `scope-token` of RFC 6749 §3.3 (printable ASCII but space,
/// `"` and `\`), the rule the runtime also applies when the server is built.
pub(crate) fn check_scopes(scopes: &StrList) -> Result<()> {
    let mut errors = Error::accumulator();
    for scope in &scopes.0 {
        let value = scope.value();
        let token = !value.is_empty()
            && value.bytes().all(|byte| {
                byte == 0x21 || (0x23..=0x5B).contains(&byte) || (0x5D..=0x7E).contains(&byte)
            });
        if !token {
            errors.push(
                Error::custom(format!(
                    "`{value}` is not an OAuth scope (printable ASCII without spaces, `\"` or \
                     `\\`); name each scope as its own string: `scopes = [\"a:read\", \"b:read\"]`"
                ))
                .with_span(scope),
            );
        }
    }
    errors.finish()
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

/// The hash under which a name is reserved and checked (`ReservesName<H>`): of the name
/// normalized as the server compares guarded names (lowercase, without `_` and `-`), so that
/// `ownerId` and `OWNER_ID` meet `owner_id`.
pub(crate) fn name_hash(name: &str) -> u64 {
    fnv1a(&[&fusion_names::field_name_key(name)])
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

/// A constraint on a model field or a tool parameter, written as schemars writes it on a type's
/// field (`#[schemars(length(max = 64))]`). It goes into the schema of the argument (a model
/// field's goes to every profile that fills it), and the runtime enforces it there.
pub(crate) enum Constraint {
    /// `length(min = …, max = …)` or `length(equal = …)`.
    Length {
        min: Option<syn::Expr>,
        max: Option<syn::Expr>,
    },
    /// `range(min = …, max = …)`.
    Range {
        min: Option<syn::Expr>,
        max: Option<syn::Expr>,
    },
    /// `regex(pattern = "…")` or `pattern("…")`.
    Pattern(syn::Expr),
    /// `email` or `url`.
    Format(&'static str),
}

impl Constraint {
    pub(crate) fn parse_attr(attr: &Attribute) -> darling::Result<Vec<Constraint>> {
        let items = attr
            .parse_args_with(
                syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
            )
            .map_err(Error::from)?;
        let mut errors = Error::accumulator();
        let mut constraints = Vec::new();
        for item in &items {
            if let Some(constraint) = errors.handle(Constraint::parse_item(item)) {
                constraints.push(constraint);
            }
        }
        errors.finish_with(constraints)
    }

    fn parse_item(item: &syn::Meta) -> darling::Result<Constraint> {
        let name = item
            .path()
            .get_ident()
            .map(Ident::to_string)
            .unwrap_or_default();
        match (name.as_str(), item) {
            ("length" | "range", syn::Meta::List(list)) => {
                let pairs = list
                    .parse_args_with(
                        syn::punctuated::Punctuated::<syn::MetaNameValue, syn::Token![,]>::parse_terminated,
                    )
                    .map_err(Error::from)?;
                let (mut min, mut max) = (None, None);
                for pair in pairs {
                    let key = pair.path.get_ident().map(Ident::to_string).unwrap_or_default();
                    match key.as_str() {
                        "min" => min = Some(pair.value),
                        "max" => max = Some(pair.value),
                        "equal" if name == "length" => {
                            min = Some(pair.value.clone());
                            max = Some(pair.value);
                        }
                        _ => {
                            return Err(Error::custom(format!(
                                "`{name}` takes `min` and `max`{}",
                                if name == "length" { " (or `equal`)" } else { "" }
                            ))
                            .with_span(&pair.path));
                        }
                    }
                }
                Ok(if name == "length" {
                    Constraint::Length { min, max }
                } else {
                    Constraint::Range { min, max }
                })
            }
            ("regex", syn::Meta::List(list)) => {
                let pair: syn::MetaNameValue = list.parse_args().map_err(Error::from)?;
                if pair.path.is_ident("pattern") {
                    Ok(Constraint::Pattern(pair.value))
                } else {
                    Err(Error::custom("expected `regex(pattern = \"…\")`").with_span(&pair.path))
                }
            }
            ("pattern", syn::Meta::List(list)) => {
                Ok(Constraint::Pattern(list.parse_args().map_err(Error::from)?))
            }
            ("email", syn::Meta::Path(_)) => Ok(Constraint::Format("email")),
            ("url", syn::Meta::Path(_)) => Ok(Constraint::Format("uri")),
            _ => Err(Error::custom(
                "an argument takes the constraints `length(..)`, `range(..)`, `regex(pattern = ..)`, `pattern(..)`, `email` and `url`: each is advertised in its schema and enforced",
            )
            .with_span(item)),
        }
    }
}

impl Constraint {
    /// The call that adds this constraint to a profile field's `schema`.
    pub(crate) fn expand(&self, private: &TokenStream) -> TokenStream {
        let bound = |value: &Option<syn::Expr>| match value {
            Some(value) => quote!(#private::Some(#private::serde_json::Value::from(#value))),
            None => quote!(#private::None),
        };
        match self {
            Constraint::Length { min, max } => {
                let (min, max) = (bound(min), bound(max));
                quote!(#private::constrain::length(&mut schema, #min, #max);)
            }
            Constraint::Range { min, max } => {
                let (min, max) = (bound(min), bound(max));
                quote!(#private::constrain::range(&mut schema, #min, #max);)
            }
            Constraint::Pattern(pattern) => {
                quote!(#private::constrain::pattern(&mut schema, #pattern);)
            }
            Constraint::Format(format) => {
                quote!(#private::constrain::format(&mut schema, #format);)
            }
        }
    }
}

/// A duration written as a whole number of `ms`, `s` or `m` (`"500ms"`, `"5s"`, `"2m"`), in
/// milliseconds: `retry_after = "5s"`, `timeout = "30s"`.
pub(crate) struct Window {
    pub(crate) millis: u64,
    pub(crate) span: proc_macro2::Span,
}

impl FromMeta for Window {
    fn from_value(value: &Lit) -> Result<Self> {
        let Lit::Str(text) = value else {
            return Err(Error::custom(
                "expected a duration as a string, such as \"500ms\", \"5s\" or \"2m\"",
            )
            .with_span(value));
        };
        parse_window(&text.value())
            .map(|millis| Window {
                millis,
                span: text.span(),
            })
            .ok_or_else(|| {
                Error::custom(format!(
                    "malformed duration `{}`: a whole number followed by `ms`, `s` or `m`, such as \"500ms\" or \"5s\"",
                    text.value()
                ))
                .with_span(text)
            })
    }
}

/// `"500ms"`, `"5s"` or `"2m"` in milliseconds; `None` when malformed or too long.
pub(crate) fn parse_window(text: &str) -> Option<u64> {
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

/// A rate: `"10/s"`, `"100/m"` or `"1000/h"`: at most so many calls per second, minute or hour.
pub(crate) struct Rate {
    pub(crate) count: u32,
    pub(crate) per_millis: u64,
}

impl FromMeta for Rate {
    fn from_value(value: &Lit) -> Result<Self> {
        let malformed = |text: &str| {
            Error::custom(format!(
                "malformed rate `{text}`: a positive whole number of calls per `s`, `m` or `h`, such as \"10/s\" or \"100/m\""
            ))
        };
        let Lit::Str(text) = value else {
            return Err(malformed("").with_span(value));
        };
        let written = text.value();
        let parsed = written.split_once('/').and_then(|(count, unit)| {
            let count: u32 = count.trim().parse().ok().filter(|count| *count > 0)?;
            let per_millis = match unit.trim() {
                "s" => 1_000,
                "m" => 60_000,
                "h" => 3_600_000,
                _ => return None,
            };
            Some((count, per_millis))
        });
        match parsed {
            Some((count, per_millis)) => Ok(Rate { count, per_millis }),
            None => Err(malformed(&written).with_span(text)),
        }
    }
}

#[cfg(test)]
mod window_tests {
    use super::parse_window;

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

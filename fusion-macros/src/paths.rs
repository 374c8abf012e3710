//! The path to the facade: the only place that spells `__private` and `rules::checks`, the
//! modules generated code names (besides `::core`).

use darling::ast::NestedMeta;
use darling::{Error, FromMeta, Result};
use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{Expr, Lit, Path};

/// The path of the `fusion` facade in the user's crate: `::fusion` unless renamed with
/// `crate = path`.
#[derive(Clone)]
pub(crate) struct Krate(pub(crate) Path);

impl Default for Krate {
    fn default() -> Self {
        Krate(syn::parse_quote!(::fusion))
    }
}

impl Krate {
    /// `#krate::__private`: the only module generated code names.
    pub(crate) fn private(&self) -> TokenStream {
        let path = &self.0;
        quote!(#path::__private)
    }

    /// `#krate::rules::checks`: the checks against Fusion's rules, public so that a note naming
    /// one names a rule and not Fusion's internals.
    pub(crate) fn checks(&self) -> TokenStream {
        let path = &self.0;
        quote!(#path::rules::checks)
    }

    /// `#krate::__private`, spanned on a user's token: rustc reports an expression's errors
    /// where its tokens are, so code whose errors belong on that token is written with these.
    /// The path resolves the same from there: it is global (`::fusion`) or the user's own.
    pub(crate) fn private_at(&self, span: Span) -> TokenStream {
        self.private()
            .into_iter()
            .map(|mut token| {
                token.set_span(span);
                token
            })
            .collect()
    }

    /// `#krate::serde` as a string, for `#[serde(crate = "…")]`: the facade's public
    /// re-export, so that an error in derived code names `fusion::serde`, as the user would.
    pub(crate) fn serde_path(&self) -> String {
        self.text_of("serde")
    }

    /// `#krate::tail` as a string, for the attributes that take a path as text.
    pub(crate) fn text_of(&self, tail: &str) -> String {
        let mut text = String::new();
        if self.0.leading_colon.is_some() {
            text.push_str("::");
        }
        for segment in &self.0.segments {
            text.push_str(&segment.ident.to_string());
            text.push_str("::");
        }
        text.push_str(tail);
        text
    }

    /// The `crate = path` among an attribute's items, whatever else is wrong with them: a
    /// fallback still names the facade the user named.
    pub(crate) fn find_in(items: &[NestedMeta]) -> Krate {
        items
            .iter()
            .find_map(|item| match item {
                NestedMeta::Meta(syn::Meta::NameValue(pair)) if pair.path.is_ident("crate") => {
                    Krate::from_expr(&pair.value).ok()
                }
                _ => None,
            })
            .unwrap_or_default()
    }
}

impl FromMeta for Krate {
    fn from_expr(expr: &Expr) -> Result<Self> {
        match expr {
            Expr::Path(path) => Ok(Krate(path.path.clone())),
            Expr::Lit(lit) => Self::from_value(&lit.lit),
            Expr::Group(group) => Self::from_expr(&group.expr),
            other => Err(Error::custom("expected a path such as `::my_fusion`").with_span(other)),
        }
    }

    fn from_value(value: &Lit) -> Result<Self> {
        match value {
            Lit::Str(text) => text.parse::<Path>().map(Krate).map_err(|_| {
                Error::custom("expected a path such as `::my_fusion`").with_span(text)
            }),
            other => Err(Error::unexpected_lit_type(other)),
        }
    }
}

//! The attribute's receivers and the function as written: nothing is checked here beyond the
//! shape of each single value.

use darling::ast::NestedMeta;
use darling::{Error, FromMeta, Result};
use proc_macro2::TokenStream;
use syn::{Ident, ItemFn, LitStr, Path};

use super::Kind;
use crate::common::{StrList, meta_list};
use crate::paths::Krate;

/// `#[resource(...)]` and `#[prompt(...)]`: one receiver, the checks say which keys belong to
/// which macro.
#[derive(FromMeta, Default)]
pub(super) struct SurfaceArgs {
    #[darling(default)]
    pub(super) name: Option<LitStr>,
    #[darling(default)]
    pub(super) uri: Option<LitStr>,
    #[darling(default)]
    pub(super) returns: Option<Path>,
    #[darling(default)]
    pub(super) mime: Option<LitStr>,
    #[darling(default)]
    pub(super) cache: Option<Ident>,
    #[darling(default)]
    pub(super) title: Option<LitStr>,
    #[darling(default)]
    pub(super) description: Option<LitStr>,
    #[darling(default)]
    pub(super) toolset: Option<LitStr>,
    /// `scopes = ["billing:admin"]`: OAuth scopes required to see and read (or get) it.
    #[darling(default)]
    pub(super) scopes: StrList,
    #[darling(default)]
    pub(super) uses: Paths,
    #[darling(default)]
    pub(super) complete: Completions,
    #[darling(rename = "crate", default)]
    pub(super) krate: Krate,
}

/// One path or a list of paths: `uses = InvoiceView` or `uses = [A, B]`.
#[derive(Default)]
pub(super) struct Paths(pub(super) Vec<Path>);

impl FromMeta for Paths {
    fn from_expr(expr: &syn::Expr) -> Result<Self> {
        match expr {
            syn::Expr::Path(path) => Ok(Paths(vec![path.path.clone()])),
            syn::Expr::Array(array) => {
                let mut errors = Error::accumulator();
                let mut paths = Vec::new();
                for element in &array.elems {
                    match element {
                        syn::Expr::Path(path) => paths.push(path.path.clone()),
                        other => {
                            errors.push(Error::custom("expected a presenter").with_span(other))
                        }
                    }
                }
                errors.finish_with(Paths(paths))
            }
            syn::Expr::Group(group) => Self::from_expr(&group.expr),
            other => {
                Err(Error::custom("expected a presenter or a list of presenters").with_span(other))
            }
        }
    }
}

/// `complete(id = invoice_ids, status = statuses)`: an argument (or template variable) and the
/// function that completes it.
#[derive(Default)]
pub(super) struct Completions(pub(super) Vec<(Ident, syn::Expr)>);

impl FromMeta for Completions {
    fn from_list(items: &[NestedMeta]) -> Result<Self> {
        let mut errors = Error::accumulator();
        let mut pairs = Vec::new();
        for item in items {
            match item {
                NestedMeta::Meta(syn::Meta::NameValue(pair)) if pair.path.get_ident().is_some() => {
                    let ident = pair.path.get_ident().cloned().expect("checked");
                    pairs.push((ident, pair.value.clone()));
                }
                other => errors.push(
                    Error::custom("expected `argument = completion_function`").with_span(other),
                ),
            }
        }
        errors.finish_with(Completions(pairs))
    }
}

/// The function as written and what its attribute says.
pub(super) struct Surface {
    pub(super) kind: Kind,
    pub(super) function: ItemFn,
    /// `None` when the attribute could not be read (the error is reported).
    pub(super) args: Option<SurfaceArgs>,
    pub(super) krate: Krate,
}

pub(super) fn parse(
    kind: Kind,
    args: TokenStream,
    function: ItemFn,
    errors: &mut darling::error::Accumulator,
) -> Surface {
    let list = errors.handle(meta_list(args));
    let krate = list.as_deref().map(Krate::find_in).unwrap_or_default();
    let args = list.and_then(|list| errors.handle(SurfaceArgs::from_list(&list)));
    Surface {
        kind,
        function,
        args,
        krate,
    }
}

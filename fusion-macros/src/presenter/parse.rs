//! The presenter as written, with the model's facts that its descriptor handed over: the
//! receivers of the attribute and the callback's input. Nothing is checked here.

use darling::ast::NestedMeta;
use darling::{Error, FromMeta};
use proc_macro2::TokenStream;
use syn::parse::{Parse, ParseStream};
use syn::{Ident, ItemStruct, LitBool, LitInt, LitStr, Path, Token};

use crate::common::{StrList, meta_list};
use crate::paths::Krate;

pub(super) struct CallbackInput {
    pub(super) model: ModelFacts,
    pub(super) attr: TokenStream,
    pub(super) item: TokenStream,
}

pub(super) struct ModelFacts {
    pub(super) name: String,
    pub(super) fields: Vec<FieldFacts>,
}

pub(super) struct FieldFacts {
    pub(super) ident: Ident,
    pub(super) index: usize,
    pub(super) label: Option<LitStr>,
    pub(super) hidden: bool,
}

impl Parse for CallbackInput {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        keyword(input, "model")?;
        let model;
        syn::braced!(model in input);
        let name: LitStr = model.parse()?;
        let list;
        syn::bracketed!(list in model);
        let mut fields = Vec::new();
        while !list.is_empty() {
            let field;
            syn::braced!(field in list);
            let ident: Ident = field.parse()?;
            let index: LitInt = field.parse()?;
            let label = if field.peek(Token![_]) {
                field.parse::<Token![_]>()?;
                None
            } else {
                Some(field.parse::<LitStr>()?)
            };
            let hidden: LitBool = field.parse()?;
            let _guarded: LitBool = field.parse()?;
            fields.push(FieldFacts {
                ident,
                index: index.base10_parse()?,
                label,
                hidden: hidden.value,
            });
        }
        keyword(input, "attr")?;
        let attr;
        syn::braced!(attr in input);
        keyword(input, "item")?;
        let item;
        syn::braced!(item in input);
        Ok(CallbackInput {
            model: ModelFacts {
                name: name.value(),
                fields,
            },
            attr: attr.parse()?,
            item: item.parse()?,
        })
    }
}

fn keyword(input: ParseStream<'_>, expected: &str) -> syn::Result<()> {
    let ident: Ident = input.parse()?;
    if ident == expected {
        Ok(())
    } else {
        Err(syn::Error::new(
            ident.span(),
            format!("expected `{expected}`"),
        ))
    }
}

/// `fields(id, total, customer = CustomerView)`: the presented fields, each presented as it is
/// or, after `=`, through a presenter of its own.
#[derive(Default)]
pub(super) struct FieldList(pub(super) Vec<ListedField>);

pub(super) struct ListedField {
    pub(super) ident: Ident,
    pub(super) nested: Option<Path>,
}

impl FromMeta for FieldList {
    fn from_list(items: &[NestedMeta]) -> darling::Result<Self> {
        let mut errors = Error::accumulator();
        let mut fields = Vec::new();
        for item in items {
            match item {
                NestedMeta::Meta(syn::Meta::Path(path)) if path.get_ident().is_some() => {
                    fields.extend(path.get_ident().map(|ident| ListedField {
                        ident: ident.clone(),
                        nested: None,
                    }));
                }
                NestedMeta::Meta(syn::Meta::NameValue(pair)) if pair.path.get_ident().is_some() => {
                    match &pair.value {
                        syn::Expr::Path(presenter) => fields.extend(pair.path.get_ident().map(
                            |ident| ListedField {
                                ident: ident.clone(),
                                nested: Some(presenter.path.clone()),
                            },
                        )),
                        other => errors.push(
                            Error::custom(
                                "expected a presenter: `customer = CustomerView` presents the field through `CustomerView`",
                            )
                            .with_span(other),
                        ),
                    }
                }
                other => errors.push(
                    Error::custom("expected a field name, or `field = ItsPresenter`").with_span(other),
                ),
            }
        }
        errors.finish_with(FieldList(fields))
    }
}

impl FieldList {
    pub(super) fn idents(&self) -> impl Iterator<Item = &Ident> {
        self.0.iter().map(|field| &field.ident)
    }
}

#[derive(FromMeta)]
pub(super) struct PresenterArgs {
    pub(super) fields: FieldList,
    #[darling(default)]
    pub(super) limit: Option<LitInt>,
    #[darling(default)]
    pub(super) rules: StrList,
    #[darling(default)]
    pub(super) suggest: Option<Path>,
    #[darling(default)]
    pub(super) actions: StrList,
    #[darling(default)]
    pub(super) ui: Option<Path>,
    #[darling(default)]
    pub(super) item: Option<Ident>,
    #[darling(rename = "crate", default)]
    pub(super) krate: Krate,
}

/// The presenter as written and what its attribute says.
pub(super) struct Presenter {
    pub(super) model_path: Path,
    pub(super) model: ModelFacts,
    /// `None` when the attribute could not be read (the error is reported).
    pub(super) args: Option<PresenterArgs>,
    /// `None` when the item is not a struct (the error is reported).
    pub(super) item: Option<ItemStruct>,
}

pub(super) fn parse(
    input: CallbackInput,
    errors: &mut darling::error::Accumulator,
) -> Option<Presenter> {
    let list = errors.handle(meta_list(input.attr))?;
    let model_path = match list.first() {
        Some(NestedMeta::Meta(syn::Meta::Path(path))) => path.clone(),
        _ => {
            errors.push(Error::custom("expected the model first"));
            return None;
        }
    };
    let args = errors.handle(PresenterArgs::from_list(&list[1..]));
    let item = errors.handle(syn::parse2::<ItemStruct>(input.item).map_err(Error::from));
    Some(Presenter {
        model_path,
        model: input.model,
        args,
        item,
    })
}

//! The presenter as written, with the model's facts that its descriptor handed over: the
//! receivers of the attribute and the callback's input. Nothing is checked here.

use darling::ast::NestedMeta;
use darling::{Error, FromMeta};
use proc_macro2::TokenStream;
use quote::format_ident;
use syn::parse::{Parse, ParseStream};
use syn::{Ident, ItemStruct, LitBool, LitInt, LitStr, Path, Token};

use crate::common::{StrList, meta_list, salvage};
use crate::paths::Krate;

pub(crate) struct CallbackInput {
    /// `None` when `#[model]` could not make a model of its struct (it reports why).
    pub(crate) model: Option<ModelFacts>,
    pub(crate) attr: TokenStream,
    pub(crate) item: TokenStream,
}

pub(crate) struct ModelFacts {
    pub(crate) name: String,
    pub(crate) fields: Vec<FieldFacts>,
}

pub(crate) struct FieldFacts {
    pub(crate) ident: Ident,
    pub(crate) index: usize,
    pub(crate) label: Option<LitStr>,
    pub(crate) hidden: bool,
}

impl Parse for CallbackInput {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        keyword(input, "model")?;
        let model;
        syn::braced!(model in input);
        let name: LitStr = model.parse()?;
        // `"Invoice" !`: the struct is not a model.
        let model = if model.parse::<Option<Token![!]>>()?.is_some() {
            None
        } else {
            Some(ModelFacts {
                name: name.value(),
                fields: fields_facts(&model)?,
            })
        };
        keyword(input, "attr")?;
        let attr;
        syn::braced!(attr in input);
        keyword(input, "item")?;
        let item;
        syn::braced!(item in input);
        Ok(CallbackInput {
            model,
            attr: attr.parse()?,
            item: item.parse()?,
        })
    }
}

/// `[{ id 0 "label" false false } …]`: each field with its index, label (or `_`), hidden and
/// guarded.
fn fields_facts(input: ParseStream<'_>) -> syn::Result<Vec<FieldFacts>> {
    let list;
    syn::bracketed!(list in input);
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
    Ok(fields)
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
/// or, after `=`, through a presenter of its own. An element of another shape does not fail
/// the list: it is kept as an error for the checks to report, so that a fallback still has the
/// well-formed fields.
#[derive(Default)]
pub(crate) struct FieldList {
    pub(crate) fields: Vec<ListedField>,
    pub(crate) malformed: Vec<Error>,
}

pub(crate) struct ListedField {
    pub(crate) ident: Ident,
    pub(crate) nested: Option<Path>,
}

impl FromMeta for FieldList {
    fn from_list(items: &[NestedMeta]) -> darling::Result<Self> {
        let mut list = FieldList::default();
        for item in items {
            match item {
                NestedMeta::Meta(syn::Meta::Path(path)) if path.get_ident().is_some() => {
                    list.fields.extend(path.get_ident().map(|ident| ListedField {
                        ident: ident.clone(),
                        nested: None,
                    }));
                }
                NestedMeta::Meta(syn::Meta::NameValue(pair)) if pair.path.get_ident().is_some() => {
                    match &pair.value {
                        syn::Expr::Path(presenter) => list.fields.extend(pair.path.get_ident().map(
                            |ident| ListedField {
                                ident: ident.clone(),
                                nested: Some(presenter.path.clone()),
                            },
                        )),
                        other => list.malformed.push(
                            Error::custom(
                                "expected a presenter: `customer = CustomerView` presents the field through `CustomerView`",
                            )
                            .with_span(other),
                        ),
                    }
                }
                other => list.malformed.push(
                    Error::custom("expected a field name, or `field = ItsPresenter`").with_span(other),
                ),
            }
        }
        Ok(list)
    }
}

impl FieldList {
    pub(crate) fn idents(&self) -> impl Iterator<Item = &Ident> {
        self.fields.iter().map(|field| &field.ident)
    }
}

#[derive(FromMeta, Default)]
pub(crate) struct PresenterArgs {
    // A missing list is reported by the checks, as an empty one is.
    #[darling(default)]
    pub(crate) fields: FieldList,
    #[darling(default)]
    pub(crate) limit: Option<LitInt>,
    /// The most tokens an answer with this presenter's data may cost.
    #[darling(default)]
    pub(crate) max_tokens: Option<LitInt>,
    #[darling(default)]
    pub(crate) rules: StrList,
    #[darling(default)]
    pub(crate) suggest: Option<Path>,
    #[darling(default)]
    pub(crate) actions: StrList,
    #[darling(default)]
    pub(crate) ui: Option<Path>,
    #[darling(default)]
    pub(crate) ui_kinds: Option<StrList>,
    #[darling(default)]
    pub(crate) item: Option<Ident>,
    #[darling(rename = "crate", default)]
    pub(crate) krate: Krate,
}

/// The presenter as written and what its attribute says.
pub(crate) struct Presenter {
    pub(crate) model_path: Path,
    pub(crate) model: ModelFacts,
    /// The attribute's options; when they could not all be read (the error is reported), the
    /// ones that could, so that a fallback still has the fields and functions.
    pub(crate) args: PresenterArgs,
    /// Whether every option was read: the rules that relate several options run only then, so
    /// that an option that failed to parse is not also reported missing.
    pub(crate) complete: bool,
    /// `None` when the item is not a struct (the error is reported).
    pub(crate) item: Option<ItemStruct>,
}

pub(crate) fn parse(
    attr: TokenStream,
    item: TokenStream,
    model: ModelFacts,
    errors: &mut darling::error::Accumulator,
) -> Option<Presenter> {
    let list = errors.handle(meta_list(attr))?;
    let model_path = match list.first() {
        Some(NestedMeta::Meta(syn::Meta::Path(path))) => path.clone(),
        _ => {
            errors.push(Error::custom("expected the model first"));
            return None;
        }
    };
    let (args, complete) = match PresenterArgs::from_list(&list[1..]) {
        Ok(args) => (args, true),
        Err(error) => {
            errors.push(error);
            (salvage(&list[1..]), false)
        }
    };
    let item = errors.handle(syn::parse2::<ItemStruct>(item).map_err(Error::from));
    Some(Presenter {
        model_path,
        model,
        args,
        complete,
        item,
    })
}

/// The name of the presenter's item type: `item = …`, or `{Presenter}Item`.
pub(crate) fn item_ident(args: &PresenterArgs, presenter: &Ident) -> Ident {
    args.item
        .clone()
        .unwrap_or_else(|| format_ident!("{}Item", presenter))
}

//! `#[presenter]`: the egress view, rules, agent limit, suggestions and UI blocks (SPEC P1–P5).
//!
//! A presenter names its model, but the model's fields were declared in another item. So
//! `#[presenter(Invoice, …)]` expands to a call of `Invoice!`, the descriptor macro that
//! `#[model]` left under the model's name, which calls back `__presenter_for_model!` with the
//! model's field facts. Everything is then checked with full knowledge, spans intact.

use darling::ast::NestedMeta;
use darling::{Error, FromMeta};
use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned as _;
use syn::{Ident, ItemStruct, LitBool, LitInt, LitStr, Path, Token};

use crate::common::{Krate, StrList, check_key, unknown_field};
use syn::ext::IdentExt as _;

// ---------------------------------------------------------------------------------------------
// Stage 1: the attribute hands over to the model's descriptor.

pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let list = match crate::common::meta_list(args.clone()) {
        Ok(list) => list,
        Err(error) => {
            let error = error.write_errors();
            return quote!(#error #item);
        }
    };
    let Some(NestedMeta::Meta(syn::Meta::Path(model))) = list.first() else {
        let error = syn::Error::new(
            Span::call_site(),
            "expected the model first: `#[presenter(Invoice, fields(id, total))]`",
        )
        .to_compile_error();
        return quote!(#error #item);
    };
    let krate = list
        .iter()
        .find_map(|meta| match meta {
            NestedMeta::Meta(syn::Meta::NameValue(pair)) if pair.path.is_ident("crate") => {
                Krate::from_expr(&pair.value).ok()
            }
            _ => None,
        })
        .unwrap_or_default();
    let private = krate.private();
    quote! {
        #model! { [#private::__presenter_for_model] attr { #args } item { #item } }
    }
}

// ---------------------------------------------------------------------------------------------
// Stage 2: the callback, with the model's facts.

struct CallbackInput {
    model: ModelFacts,
    attr: TokenStream,
    item: TokenStream,
}

struct ModelFacts {
    name: String,
    fields: Vec<FieldFacts>,
}

struct FieldFacts {
    ident: Ident,
    index: usize,
    label: Option<LitStr>,
    hidden: bool,
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
struct FieldList(Vec<ListedField>);

struct ListedField {
    ident: Ident,
    nested: Option<Path>,
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
    fn idents(&self) -> impl Iterator<Item = &Ident> {
        self.0.iter().map(|field| &field.ident)
    }
}

#[derive(FromMeta)]
struct PresenterArgs {
    fields: FieldList,
    #[darling(default)]
    limit: Option<LitInt>,
    #[darling(default)]
    rules: StrList,
    #[darling(default)]
    suggest: Option<Path>,
    #[darling(default)]
    actions: StrList,
    #[darling(default)]
    ui: Option<Path>,
    #[darling(default)]
    item: Option<Ident>,
    #[darling(rename = "crate", default)]
    krate: Krate,
}

struct Presenter {
    model_path: Path,
    model: ModelFacts,
    args: PresenterArgs,
    item: ItemStruct,
    limit: Option<usize>,
}

pub(crate) fn expand_callback(input: TokenStream) -> TokenStream {
    let input: CallbackInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(error) => return error.to_compile_error(),
    };
    let item_tokens = input.item.clone();
    // Every mistake is reported in one run: parsing and checking share one accumulator, and
    // only a presenter that cannot be understood at all stops before the checks.
    let mut errors = Error::accumulator();
    let presenter = parse(input, &mut errors);
    if let Some(presenter) = &presenter {
        check_fields(presenter, &mut errors);
        check_suggestions(presenter, &mut errors);
    }
    match (errors.finish(), presenter) {
        (Ok(()), Some(presenter)) => generate(&presenter),
        (result, _) => {
            let errors = result.err().map(Error::write_errors);
            quote!(#errors #item_tokens)
        }
    }
}

fn parse(input: CallbackInput, errors: &mut darling::error::Accumulator) -> Option<Presenter> {
    let list = errors.handle(crate::common::meta_list(input.attr))?;
    let model_path = match list.first() {
        Some(NestedMeta::Meta(syn::Meta::Path(path))) => path.clone(),
        _ => {
            errors.push(Error::custom("expected the model first"));
            return None;
        }
    };
    let args = errors.handle(PresenterArgs::from_list(&list[1..]));
    let item = errors.handle(syn::parse2::<ItemStruct>(input.item).map_err(Error::from));
    if let Some(item) = &item {
        let is_unit = matches!(item.fields, syn::Fields::Unit);
        if !is_unit || !item.generics.params.is_empty() {
            errors.push(
                Error::custom("a presenter is a unit struct: `pub struct InvoiceView;`")
                    .with_span(&item.ident),
            );
        }
    }
    let limit = args
        .as_ref()
        .and_then(|args| args.limit.as_ref())
        .and_then(|limit| match limit.base10_parse::<usize>() {
            Ok(0) | Err(_) => {
                errors
                    .push(Error::custom("`limit` is a positive number of items").with_span(limit));
                None
            }
            Ok(limit) => Some(limit),
        });
    Some(Presenter {
        model_path,
        model: input.model,
        args: args?,
        item: item?,
        limit,
    })
}

/// The listed fields exist, are cast and are not hidden, once each: the view can never contain
/// a hidden field.
fn check_fields(presenter: &Presenter, errors: &mut darling::error::Accumulator) {
    let listed: Vec<&Ident> = presenter.args.fields.idents().collect();
    if listed.is_empty() {
        errors.push(Error::custom(
            "a presenter lists at least one field: `fields(id, total)`",
        ));
    }
    for (position, ident) in listed.iter().enumerate() {
        if listed[..position].contains(ident) {
            errors.push(Error::custom(format!("`{ident}` is listed twice")).with_span(ident));
            continue;
        }
        let Some(field) = presenter
            .model
            .fields
            .iter()
            .find(|field| field.ident == **ident)
        else {
            let names: Vec<String> = presenter
                .model
                .fields
                .iter()
                .map(|field| field.ident.to_string())
                .collect();
            errors.push(unknown_field(
                ident,
                &presenter.model.name,
                names.iter().map(String::as_str),
            ));
            continue;
        };
        if field.hidden {
            errors.push(
                Error::custom(format!(
                    "`{ident}` is hidden in `{}`: a hidden field never reaches the wire, so no presenter may list it",
                    presenter.model.name
                ))
                .with_span(ident),
            );
        } else if field.label.is_none() {
            errors.push(
                Error::custom(format!(
                    "`{ident}` is not cast in `{}`: cast it with a label (`#[cast(\"…\")]`) to present it",
                    presenter.model.name
                ))
                .with_span(ident),
            );
        }
    }
}

/// Suggestions name the tools they may suggest, so the server can check that they exist.
fn check_suggestions(presenter: &Presenter, errors: &mut darling::error::Accumulator) {
    let args = &presenter.args;
    match (&args.suggest, args.actions.0.is_empty()) {
        (Some(suggest), true) => errors.push(
            Error::custom(
                "declare the tools `suggest` may name: `actions = [\"billing.void_invoice\"]`",
            )
            .with_span(suggest),
        ),
        (None, false) => errors.push(
            Error::custom(
                "`actions` lists the tools a `suggest` function names; add `suggest = your_fn`",
            )
            .with_span(&args.actions.0[0]),
        ),
        _ => {}
    }
    for action in &args.actions.0 {
        errors.handle(check_key(action));
    }
}

// ---------------------------------------------------------------------------------------------
// Expand

fn generate(presenter: &Presenter) -> TokenStream {
    let private = presenter.args.krate.private();
    let model = &presenter.model_path;
    let item = &presenter.item;
    let ident = &item.ident;
    let vis = &item.vis;
    let item_ident = presenter
        .args
        .item
        .clone()
        .unwrap_or_else(|| format_ident!("{}Item", ident));
    let name = ident.to_string();
    // Each listed field with its facts, in the presenter's order.
    let fields: Vec<(&ListedField, &FieldFacts)> = presenter
        .args
        .fields
        .0
        .iter()
        .filter_map(|listed| {
            let facts = presenter
                .model
                .fields
                .iter()
                .find(|field| field.ident == listed.ident)?;
            Some((listed, facts))
        })
        .collect();
    let count = fields.len();
    // Spanned on the listed field (or its nested presenter), where type errors belong.
    let field_type = |listed: &ListedField, facts: &FieldFacts| {
        let index = facts.index;
        let span = listed
            .nested
            .as_ref()
            .map_or_else(|| listed.ident.span(), |nested| nested.span());
        quote_spanned!(span=> <#model as #private::FieldAt<#index>>::Type)
    };

    // Spans of the presenter's own tokens, so type errors point at the listed field.
    let view_fields = fields.iter().map(|(listed, facts)| {
        let ident = &listed.ident;
        let ty = field_type(listed, facts);
        let label = facts.label.as_ref().map(LitStr::value).unwrap_or_default();
        match &listed.nested {
            None => quote_spanned! {ident.span()=>
                #[doc = #label]
                pub #ident: &'a #ty
            },
            Some(nested) => quote_spanned! {nested.span()=>
                #[doc = #label]
                pub #ident: #private::Nested<'a, #nested, #ty>
            },
        }
    });
    let constructor = fields.iter().map(|(listed, facts)| {
        let ident = &listed.ident;
        let index = facts.index;
        let value = quote!(<#model as #private::FieldAt<#index>>::field(model));
        match &listed.nested {
            None => quote_spanned!(ident.span()=> #ident: #value),
            Some(nested) => quote_spanned!(nested.span()=> #ident: #private::Nested::new(#value)),
        }
    });
    let serialize_fields = fields.iter().map(|(listed, facts)| {
        let ident = &listed.ident;
        let key = ident.unraw().to_string();
        // Through the presenting trait, so that a field that cannot be presented is reported
        // once, on the field, and its serialization does not fail a second time.
        let ty = field_type(listed, facts);
        let value = match &listed.nested {
            None => quote_spanned!(ident.span()=> &#private::PresentedField(self.#ident)),
            Some(nested) => quote_spanned!(nested.span()=>
                &<#nested as #private::PresenterOf<#ty>>::wire(self.#ident.__fusion_value())
            ),
        };
        let span = listed
            .nested
            .as_ref()
            .map_or_else(|| ident.span(), |nested| nested.span());
        quote_spanned! {span=>
            #private::serde::ser::SerializeStruct::serialize_field(&mut state, #key, #value)?;
        }
    });
    let schema_fields = fields.iter().map(|(listed, facts)| {
        let ident = &listed.ident;
        let key = ident.unraw().to_string();
        let ty = field_type(listed, facts);
        let label = facts.label.as_ref().map(LitStr::value).unwrap_or_default();
        let schema = match &listed.nested {
            None => {
                quote_spanned!(ident.span()=> #private::presented_value_schema::<#ty>(generator))
            }
            Some(nested) => quote_spanned!(nested.span()=>
                <#nested as #private::PresenterOf<#ty>>::views_schema(generator)
            ),
        };
        quote! {
            {
                let mut schema = #schema;
                schema.insert("description".into(), #label.into());
                properties.insert(#key.into(), schema.to_value());
            }
        }
    });
    let nested = fields.iter().filter_map(|(listed, _)| {
        let nested = listed.nested.as_ref()?;
        let key = listed.ident.unraw().to_string();
        Some(quote_spanned! {nested.span()=>
            #private::NestedPresenter {
                field: #key,
                presenter: #private::PresenterInfo::of::<#nested>,
            }
        })
    });
    let keys: Vec<String> = fields
        .iter()
        .map(|(listed, _)| listed.ident.unraw().to_string())
        .collect();
    let rules: Vec<String> = fields
        .iter()
        .map(|(listed, facts)| {
            let label = facts.label.as_ref().map(LitStr::value).unwrap_or_default();
            format!("{}: {}", listed.ident.unraw(), label)
        })
        .chain(presenter.args.rules.0.iter().map(LitStr::value))
        .collect();
    let limit = match presenter.limit {
        Some(limit) => quote!(#private::Some(#limit)),
        None => quote!(#private::None),
    };
    let actions = &presenter.args.actions.0;
    let suggest = presenter.args.suggest.as_ref().map(|suggest| {
        quote! {
            fn suggest(shown: #private::Presented<'_, Self::Item<'_>>) -> #private::Vec<#private::Suggestion> {
                #suggest(shown)
            }
        }
    });
    let ui = presenter.args.ui.as_ref().map(|ui| {
        quote! {
            fn ui(shown: #private::Presented<'_, Self::Item<'_>>) -> #private::Vec<#private::UiBlock> {
                #ui(shown)
            }
        }
    });
    let item_doc =
        format!("What an agent sees of one value presented by [`{name}`]: only the listed fields.");

    quote! {
        #item

        #[doc = #item_doc]
        #[allow(unused_qualifications)]
        #vis struct #item_ident<'a> {
            #(#view_fields,)*
        }

        #[allow(unused_qualifications)]
        const _: () = {
            #[automatically_derived]
            impl #private::serde::Serialize for #item_ident<'_> {
                fn serialize<S>(&self, serializer: S) -> #private::Result<S::Ok, S::Error>
                where
                    S: #private::serde::Serializer,
                {
                    let mut state = #private::serde::Serializer::serialize_struct(serializer, #name, #count)?;
                    #(#serialize_fields)*
                    #private::serde::ser::SerializeStruct::end(state)
                }
            }

            #[automatically_derived]
            impl #private::PresenterOf<#model> for #ident {
                type Views<'a> = #item_ident<'a>;
                fn views(value: &#model) -> #item_ident<'_> {
                    #private::nested::one::<Self>(value)
                }
                fn serialize_views<S>(value: &#model, serializer: S) -> #private::Result<S::Ok, S::Error>
                where
                    S: #private::serde::Serializer,
                {
                    #private::nested::serialize_one::<Self, S>(value, serializer)
                }
                fn views_schema(generator: &mut #private::schemars::SchemaGenerator) -> #private::schemars::Schema {
                    #private::nested::one_schema::<Self>(generator)
                }
            }

            #[automatically_derived]
            impl #private::PresenterOf<#private::Option<#model>> for #ident {
                type Views<'a> = #private::Option<#item_ident<'a>>;
                fn views(value: &#private::Option<#model>) -> #private::Option<#item_ident<'_>> {
                    #private::nested::option::<Self>(value)
                }
                fn serialize_views<S>(value: &#private::Option<#model>, serializer: S) -> #private::Result<S::Ok, S::Error>
                where
                    S: #private::serde::Serializer,
                {
                    #private::nested::serialize_option::<Self, S>(value, serializer)
                }
                fn views_schema(generator: &mut #private::schemars::SchemaGenerator) -> #private::schemars::Schema {
                    #private::nested::option_schema::<Self>(generator)
                }
            }

            #[automatically_derived]
            impl #private::PresenterOf<#private::Vec<#model>> for #ident {
                type Views<'a> = #private::Vec<#item_ident<'a>>;
                fn views(value: &#private::Vec<#model>) -> #private::Vec<#item_ident<'_>> {
                    #private::nested::vec::<Self>(value)
                }
                fn serialize_views<S>(value: &#private::Vec<#model>, serializer: S) -> #private::Result<S::Ok, S::Error>
                where
                    S: #private::serde::Serializer,
                {
                    #private::nested::serialize_vec::<Self, S>(value, serializer)
                }
                fn views_schema(generator: &mut #private::schemars::SchemaGenerator) -> #private::schemars::Schema {
                    #private::nested::vec_schema::<Self>(generator)
                }
            }

            #[automatically_derived]
            impl #private::Presenter for #ident {
                type Model = #model;
                type Item<'a> = #item_ident<'a>;
                const NAME: &'static str = #name;
                const FIELDS: &'static [&'static str] = &[#(#keys),*];
                const RULES: &'static [&'static str] = &[#(#rules),*];
                const LIMIT: #private::Option<usize> = #limit;
                const ACTIONS: &'static [&'static str] = &[#(#actions),*];
                const NESTED: &'static [#private::NestedPresenter] = &[#(#nested),*];

                fn item(model: &#model) -> #item_ident<'_> {
                    #item_ident { #(#constructor,)* }
                }

                fn item_schema(generator: &mut #private::schemars::SchemaGenerator) -> #private::schemars::Schema {
                    let mut properties = #private::serde_json::Map::new();
                    #(#schema_fields)*
                    #private::object_schema(properties, &[#(#keys),*])
                }

                #suggest
                #ui
            }
        };
    }
}

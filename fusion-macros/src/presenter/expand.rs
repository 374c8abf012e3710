//! The presenter's code: the item type (the egress view), its serializer and schema, and the
//! `Presenter` impls. Only `quote!`; every rule was checked before.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::LitStr;
use syn::ext::IdentExt as _;
use syn::spanned::Spanned as _;

use super::check::Checked;
use super::parse::{FieldFacts, ListedField, item_ident};

pub(crate) fn presenter(checked: &Checked<'_>) -> TokenStream {
    let args = checked.args;
    let private = args.krate.private();
    let model = &checked.presenter.model_path;
    let item = checked.item;
    let ident = &item.ident;
    let item_ident = item_ident(args, ident);
    let name = ident.to_string();
    let fields = &checked.fields;
    let count = fields.len();
    let field_type = |listed: &ListedField, facts: &FieldFacts| field_type(checked, listed, facts);

    let constructor = fields.iter().map(|(listed, facts)| {
        let ident = &listed.ident;
        let index = facts.index;
        let value = quote!(<#model as #private::FieldAt<#index>>::field(model));
        match &listed.nested {
            None => quote_spanned!(ident.span()=> #ident: #value),
            Some(nested) => quote_spanned!(nested.span()=> #ident: #private::Nested::new(#value)),
        }
    });
    // Written with `__private` spanned on the listed field (or its nested presenter) too: an
    // expression mixing spans is reported on the whole attribute.
    let serialize_fields = fields.iter().map(|(listed, facts)| {
        let ident = &listed.ident;
        let key = ident.unraw().to_string();
        let span = listed
            .nested
            .as_ref()
            .map_or_else(|| ident.span(), |nested| nested.span());
        let private = args.krate.private_at(span);
        // Through the presenting trait, so that a field that cannot be presented is reported
        // once, on the field, and its serialization does not fail a second time.
        let ty = field_type(listed, facts);
        let value = match &listed.nested {
            None => quote_spanned!(ident.span()=> &#private::PresentedField(self.#ident)),
            Some(nested) => quote_spanned!(nested.span()=>
                &<#nested as #private::PresenterOf<#ty>>::wire(self.#ident.__fusion_value())
            ),
        };
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
                let private = args.krate.private_at(ident.span());
                quote_spanned!(ident.span()=> {
                    // One of the two is the one used, by design.
                    #[allow(unused_imports)]
                    use #private::{PresentableSchema as _, UnpresentableSchema as _};
                    (&#private::PresentedSchema::<#ty>::PROBE).presented_schema(generator)
                })
            }
            Some(nested) => {
                let private = args.krate.private_at(nested.span());
                quote_spanned!(nested.span()=>
                    <#nested as #private::PresenterOf<#ty>>::views_schema(generator)
                )
            }
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
        .chain(args.rules.0.iter().map(LitStr::value))
        .collect();
    let limit = match checked.limit {
        Some(limit) => quote!(#private::Some(#limit)),
        None => quote!(#private::None),
    };
    let max_tokens = match checked.max_tokens {
        Some(max_tokens) => quote!(#private::Some(#max_tokens)),
        None => quote!(#private::None),
    };
    let actions = &args.actions.0;
    let hooks = hooks(checked);
    let item_type = item_type(checked);
    let presenter_of = presenter_of_impls(checked);

    quote! {
        #item

        #item_type

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

            #presenter_of

            #[automatically_derived]
            impl #private::Presenter for #ident {
                type Model = #model;
                type Item<'a> = #item_ident<'a>;
                const NAME: &'static str = #name;
                const FIELDS: &'static [&'static str] = &[#(#keys),*];
                const RULES: &'static [&'static str] = &[#(#rules),*];
                const LIMIT: #private::Option<usize> = #limit;
                const MAX_TOKENS: #private::Option<usize> = #max_tokens;
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

                #hooks
            }
        };
    }
}

/// The type of a listed field, spanned on the listed field (or its nested presenter), where
/// type errors belong.
fn field_type(checked: &Checked<'_>, listed: &ListedField, facts: &FieldFacts) -> TokenStream {
    let private = checked.args.krate.private();
    let model = &checked.presenter.model_path;
    let index = facts.index;
    let span = listed
        .nested
        .as_ref()
        .map_or_else(|| listed.ident.span(), |nested| nested.span());
    quote_spanned!(span=> <#model as #private::FieldAt<#index>>::Type)
}

/// The item type: the egress view of one model value, with only the listed fields.
pub(crate) fn item_type(checked: &Checked<'_>) -> TokenStream {
    let private = checked.args.krate.private();
    let ident = &checked.item.ident;
    let vis = &checked.item.vis;
    let item_ident = item_ident(checked.args, ident);
    let name = ident.to_string();
    // Spans of the presenter's own tokens, so type errors point at the listed field.
    let view_fields = checked.fields.iter().map(|(listed, facts)| {
        let ident = &listed.ident;
        let ty = field_type(checked, listed, facts);
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
    let item_doc =
        format!("What an agent sees of one value presented by [`{name}`]: only the listed fields.");
    // A field whose type has no `Debug` shows as `..`, as in a model's `Debug`.
    let debug_fields = checked.fields.iter().map(|(listed, _)| {
        let ident = &listed.ident;
        let key = ident.unraw().to_string();
        quote! {
            debug.field(#key, (&&#private::model_kinds::DebugField(&self.#ident)).__fusion_debug());
        }
    });
    let debug_name = item_ident.to_string();
    quote! {
        #[doc = #item_doc]
        #[allow(unused_qualifications)]
        #vis struct #item_ident<'a> {
            #(#view_fields,)*
        }

        #[allow(unused_qualifications, clippy::needless_borrow)]
        const _: () = {
            use #private::model_kinds::{ViaDebug as _, ViaNoDebug as _};

            #[automatically_derived]
            impl #private::fmt::Debug for #item_ident<'_> {
                fn fmt(&self, f: &mut #private::fmt::Formatter<'_>) -> #private::fmt::Result {
                    let mut debug = f.debug_struct(#debug_name);
                    #(#debug_fields)*
                    debug.finish()
                }
            }
        };
    }
}

/// `PresenterOf` the model, an `Option` and a `Vec` of it, so that the presenter can present a
/// nested field. They only delegate to the `Presenter` impl.
pub(crate) fn presenter_of_impls(checked: &Checked<'_>) -> TokenStream {
    let private = checked.args.krate.private();
    let model = &checked.presenter.model_path;
    let ident = &checked.item.ident;
    let item_ident = item_ident(checked.args, ident);
    quote! {
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
    }
}

/// The `suggest` and `ui` functions of the `Presenter` impl, which call the user's.
pub(crate) fn hooks(checked: &Checked<'_>) -> TokenStream {
    let private = checked.args.krate.private();
    let suggest = checked.args.suggest.as_ref().map(|suggest| {
        quote! {
            fn suggest(shown: #private::Presented<'_, Self::Item<'_>>) -> #private::Vec<#private::Suggestion> {
                #suggest(shown)
            }
        }
    });
    let ui = checked.args.ui.as_ref().map(|ui| {
        // Every kind unless the presenter lists the ones it renders.
        let kinds = match &checked.args.ui_kinds {
            None => quote!(#private::UiBlock::KINDS),
            Some(kinds) => {
                let kinds = &kinds.0;
                quote!(&[#(#kinds),*])
            }
        };
        quote! {
            const UI_KINDS: &'static [&'static str] = #kinds;

            fn ui(shown: #private::Presented<'_, Self::Item<'_>>) -> #private::Vec<#private::UiBlock> {
                #ui(shown)
            }
        }
    });
    quote!(#suggest #ui)
}

//! The model's code: the struct without Fusion's attributes, its `Model` impl and proofs, the
//! fillable profiles' input types and the descriptor that presenters call. Only `quote!`; every
//! rule was checked before.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt as _;
use syn::spanned::Spanned as _;
use syn::{Fields, Ident, ItemStruct, LitStr};

use super::parse::{Model, ModelField, Profile, ProfileKind};
use crate::common::Constraint;
use crate::common::{fnv1a, name_hash};

pub(super) fn model(model: &Model) -> TokenStream {
    let private = model.krate.private();
    let item = strip_fusion_attrs(model.item.clone());
    let ident = &model.item.ident;
    let name = ident.to_string();

    let field_infos = model.fields.iter().map(|field| {
        let field_name = field.name();
        let label = match &field.label {
            Some(label) => quote!(#private::Some(#label)),
            None => quote!(#private::None),
        };
        let (hidden, guarded) = (field.hidden, field.guarded);
        quote! {
            #private::FieldInfo { name: #field_name, label: #label, hidden: #hidden, guarded: #guarded }
        }
    });

    let field_idents = model.fields.iter().map(|field| &field.ident);
    let field_access = model
        .fields
        .iter()
        .enumerate()
        .filter(|(_, field)| field.presentable())
        .map(|(index, field)| {
            let field_ident = &field.ident;
            let ty = &field.ty;
            quote! {
                #[automatically_derived]
                impl #private::FieldAt<#index> for #ident {
                    type Type = #ty;
                    #[inline]
                    fn field(&self) -> &#ty {
                        &self.#field_ident
                    }
                }
            }
        });

    // `#[hidden]` and `Hidden<T>` agree: the attribute decides the model's facts, the type
    // carries the hidden-ness with the value. Spanned on the field's type.
    let hidden_checks = model.fields.iter().map(|field| {
        let ty = &field.ty;
        if field.hidden {
            quote_spanned!(ty.span()=> #private::model_kinds::hidden_field::<#ty>();)
        } else {
            quote_spanned!(ty.span()=> (&&#private::model_kinds::FieldProbe::<#ty>::NEW).__fusion_unmarked().check();)
        }
    });

    let debug_fields = model.fields.iter().map(|field| {
        let field_ident = &field.ident;
        let field_name = field.name();
        if field.hidden {
            quote!(debug.field(#field_name, &#private::model_kinds::Redacted);)
        } else {
            quote!(debug.field(#field_name, (&&#private::model_kinds::DebugField(&self.#field_ident)).__fusion_debug());)
        }
    });

    // `Box`, `&`, `&mut` and `Pin` are fundamental: a `Serialize` impl for the model behind
    // one of them is allowed by the orphan rules. Each gets the proof impl, which conflicts
    // with any such `Serialize` (or `Deserialize`) impl.
    let wrappers = [
        quote!(&'__fusion #ident),
        quote!(&'__fusion mut #ident),
        quote!(#private::Box<#ident>),
        quote!(#private::Pin<#ident>),
        quote!(#private::Pin<&'__fusion #ident>),
        quote!(#private::Pin<&'__fusion mut #ident>),
        quote!(#private::Pin<#private::Box<#ident>>),
    ];
    let wrapper_proofs = wrappers.iter().map(|wrapper| {
        quote! {
            #[automatically_derived]
            impl<'__fusion> #private::ModelsNeverImplementSerialize for #wrapper {
                type Proof = Self;
            }
            #[automatically_derived]
            impl<'__fusion> #private::ModelsNeverImplementDeserialize for #wrapper {
                type Proof = Self;
            }
        }
    });

    let profiles = model
        .profiles
        .iter()
        .map(|profile| generate_profile(model, profile));
    let reserved_markers = generate_reserved_markers(model);
    let descriptor = descriptor(&model.item, facts(model));
    let upstream = model.upstream.then(|| from_upstream(model));

    quote! {
        #item

        #[doc(hidden)]
        #[allow(non_upper_case_globals, unused_qualifications, clippy::needless_borrow)]
        const _: () = {
            use #private::model_kinds::{ViaDebug as _, ViaNoDebug as _};
            use #private::model_kinds::{ViaUnhidden as _, ViaUnmarkedHidden as _};

            #[automatically_derived]
            impl #private::Model for #ident {
                const NAME: &'static str = #name;
                const FIELDS: &'static [#private::FieldInfo] = &[#(#field_infos),*];

                // Hidden columns are written and never read by design: no dead-code warning.
                fn __fusion_declared(&self) {
                    let _ = (#(&self.#field_idents,)*);
                }
            }

            fn __fusion_check_hidden_fields() {
                #(#hidden_checks)*
            }

            // Hidden fields show as `[hidden]`, whatever their type; a field whose type has no
            // `Debug` shows as `..`.
            #[automatically_derived]
            impl #private::fmt::Debug for #ident {
                fn fmt(&self, f: &mut #private::fmt::Formatter<'_>) -> #private::fmt::Result {
                    let mut debug = f.debug_struct(#name);
                    #(#debug_fields)*
                    debug.finish()
                }
            }

            // Conflicts with the blanket impl for `T: Serialize` if the model is serializable;
            // `Proof = Self` is what `Model` requires, and what no `Serialize` type has.
            #[automatically_derived]
            impl #private::ModelsNeverImplementSerialize for #ident {
                type Proof = Self;
            }
            #[automatically_derived]
            impl #private::ModelsNeverImplementDeserialize for #ident {
                type Proof = Self;
            }
            #(#wrapper_proofs)*

            // The model has serde's traits and schemars' in name only: the bounds never hold.
            // No other impl of them can be written (it would conflict), and any use of one is
            // reported with a message that names presenters and profiles.
            #[automatically_derived]
            impl<'__fusion> #private::serde::Serialize for #ident
            where
                #private::TheWire: #private::CarriesRawModel<'__fusion, #ident>,
            {
                fn serialize<S>(&self, _: S) -> #private::Result<S::Ok, S::Error>
                where
                    S: #private::serde::Serializer,
                {
                    #private::unreachable_model_impl()
                }
            }
            #[automatically_derived]
            impl<'de> #private::serde::Deserialize<'de> for #ident
            where
                #private::TheWire: #private::AcceptsRawModel<'de, #ident>,
            {
                fn deserialize<D>(_: D) -> #private::Result<Self, D::Error>
                where
                    D: #private::serde::Deserializer<'de>,
                {
                    #private::unreachable_model_impl()
                }
            }
            #[automatically_derived]
            impl<'__fusion> #private::schemars::JsonSchema for #ident
            where
                #private::TheWire: #private::DescribesRawModel<'__fusion, #ident>,
            {
                fn schema_name() -> #private::Cow<'static, str> {
                    #private::unreachable_model_impl()
                }
                fn json_schema(_: &mut #private::schemars::SchemaGenerator) -> #private::schemars::Schema {
                    #private::unreachable_model_impl()
                }
            }

            #(#field_access)*
        };

        #reserved_markers

        #upstream

        #(#profiles)*

        #descriptor
    }
}

/// The marker of a guarded or hidden field, `{Model}_{field}`: a tool's plain argument that
/// takes the field's name is reported with this type's name.
fn reserved_marker(field: &ModelField) -> Ident {
    // Named and spanned as the field itself: an error reads "a field that an agent never sets:
    // `owner_id`" and shows the field's declaration where it names the marker. The module
    // (`Contact_never_set_by_an_agent::owner_id`) tells two models' fields apart.
    field.ident.clone()
}

/// The module holding the markers of the model's guarded and hidden fields.
fn reserved_module(model: &Model) -> Ident {
    format_ident!("{}_never_set_by_an_agent", model.item.ident)
}

fn generate_reserved_markers(model: &Model) -> TokenStream {
    // Spanned on the field: rustc shows a marker's definition where it names the marker.
    let markers: Vec<TokenStream> = model
        .fields
        .iter()
        .filter(|field| field.guarded || field.hidden)
        .map(|field| {
            let marker = reserved_marker(field);
            quote_spanned! {field.ident.span()=>
                #[doc(hidden)]
                #[derive(::core::fmt::Debug)]
                pub struct #marker;
            }
        })
        .collect();
    if markers.is_empty() {
        return TokenStream::new();
    }
    let module = reserved_module(model);
    let vis = &model.item.vis;
    let doc = format!(
        "The fields of `{}` that an agent never sets (guarded or hidden).",
        model.item.ident
    );
    quote! {
        #[doc = #doc]
        #[doc(hidden)]
        #[allow(non_camel_case_types, non_snake_case, dead_code, unreachable_pub)]
        #vis mod #module {
            #(#markers)*
        }
    }
}

/// The `create`/`update`/`filter` input type: only the listed fields, required for `create`,
/// optional otherwise, unknown fields rejected. Its schema is written here rather than derived,
/// so that the generated code names nothing the user's scope could shadow.
fn generate_profile(model: &Model, profile: &Profile) -> TokenStream {
    let private = model.krate.private();
    let serde_path = model.krate.serde_path();
    let model_ident = &model.item.ident;
    let vis = &model.item.vis;
    let input_ident = format_ident!("{}{}", model_ident, profile.kind.type_suffix());
    let input_name = input_ident.to_string();
    let profile_type = format_ident!("{}", profile.kind.type_suffix());
    let required = profile.kind == ProfileKind::Create;
    let doc = format!(
        "The arguments of [`{model_ident}`]'s `{}` profile: {}.",
        profile.kind.name(),
        if required {
            "listed fields are required"
        } else {
            "every field is optional"
        }
    );
    let description = format!("The `{}` arguments of {model_ident}.", profile.kind.name());
    let names: Vec<String> = profile
        .fields
        .iter()
        .map(|ident| ident.unraw().to_string())
        .collect();
    // (field, label, the field's own type, constraints). In `update` and `filter` the input
    // field is `Option<type>`: absent is `None`, and a sent value (`null` included, when the
    // field's type admits it) is `Some`; the schema is the field's own type, not required.
    let listed: Vec<(&Ident, &LitStr, &syn::Type, &[Constraint])> = profile
        .fields
        .iter()
        .filter_map(|ident| {
            let field = model.fields.iter().find(|field| field.ident == *ident)?;
            Some((
                ident,
                field.label.as_ref()?,
                &field.ty,
                field.constraints.as_slice(),
            ))
        })
        .collect();
    // The guarded and hidden fields this profile leaves out: no other argument of a tool that
    // takes it may have their names (`#[tool]` checks it with these impls).
    let module = reserved_module(model);
    // One impl per hash: two fields whose names normalize alike reserve it once.
    let mut reserved_hashes = std::collections::HashSet::new();
    let reserves = model
        .fields
        .iter()
        .filter(|field| (field.guarded || field.hidden) && !profile.fields.contains(&field.ident))
        .filter(|field| reserved_hashes.insert(name_hash(&field.name())))
        .map(|field| {
            let hash = proc_macro2::Literal::u64_suffixed(name_hash(&field.name()));
            let marker = reserved_marker(field);
            quote! {
                #[automatically_derived]
                impl #private::kinds::ReservesName<#hash> for #input_ident {
                    type Field = #module::#marker;
                }
            }
        });
    // A profile of an upstream model is sent to the upstream under the fields' upstream names:
    // `create` leaves out what was not given, `update`/`filter` send what was (`null` included).
    let upstream_fields = model.upstream.then(|| {
        let pushes = listed.iter().map(|(ident, _, ty, _)| {
            let field = model.fields.iter().find(|field| field.ident == **ident);
            let wire = field.map_or_else(|| ident.unraw().to_string(), ModelField::wire_name);
            if required {
                quote_spanned! {ty.span()=>
                    let value = (&&#private::upstream_kinds::EncodeProbe::<#ty>::NEW).__fusion_encode(&self.#ident)?;
                    if !value.is_null() {
                        out.push((#wire, value));
                    }
                }
            } else {
                quote_spanned! {ty.span()=>
                    if let #private::Some(value) = &self.#ident {
                        out.push((#wire, (&&#private::upstream_kinds::EncodeProbe::<#ty>::NEW).__fusion_encode(value)?));
                    }
                }
            }
        });
        quote! {
            #[automatically_derived]
            impl #private::UpstreamFields for #input_ident {
                fn upstream_fields(
                    &self,
                    out: &mut #private::Vec<(&'static str, #private::serde_json::Value)>,
                ) -> #private::Result<(), #private::serde_json::Error> {
                    use #private::upstream_kinds::{ViaHidden as _, ViaSerialize as _};
                    #(#pushes)*
                    #private::Ok(())
                }
            }
        }
    });
    let present = model.krate.text_of("__private::present_field");
    let fields = listed.iter().map(|(ident, label, ty, _)| {
        if required {
            quote_spanned! {ident.span()=>
                #[doc = #label]
                pub #ident: #ty
            }
        } else {
            quote_spanned! {ident.span()=>
                #[doc = #label]
                #[serde(default, deserialize_with = #present)]
                pub #ident: #private::Option<#ty>
            }
        }
    });
    let schema_properties = listed.iter().map(|(ident, label, ty, constraints)| {
        let key = ident.unraw().to_string();
        let constraints = constraints
            .iter()
            .map(|constraint| constraint.expand(&private));
        let require = required.then(|| {
            quote! {
                if #private::is_required::<#ty>() {
                    required.push(#key);
                }
            }
        });
        quote! {
            let mut schema = generator.subschema_for::<#ty>();
            schema.insert("description".into(), #label.into());
            #(#constraints)*
            properties.insert(#key.into(), schema.to_value());
            #require
        }
    });
    quote! {
        #[doc = #doc]
        #[derive(#private::serde::Deserialize)]
        #[serde(crate = #serde_path, deny_unknown_fields)]
        #[allow(unused_qualifications, dead_code)]
        #vis struct #input_ident {
            #(#fields,)*
        }

        #[allow(unused_qualifications)]
        const _: () = {
            #[automatically_derived]
            impl #private::schemars::JsonSchema for #input_ident {
                fn schema_name() -> #private::Cow<'static, str> {
                    #private::Cow::Borrowed(#input_name)
                }

                fn json_schema(generator: &mut #private::schemars::SchemaGenerator) -> #private::schemars::Schema {
                    let mut properties = #private::serde_json::Map::new();
                    let mut required: #private::Vec<&'static str> = #private::Vec::new();
                    #({ #schema_properties })*
                    let mut schema = #private::object_schema(properties, &required);
                    schema.insert("description".into(), #description.into());
                    schema
                }
            }

            #[automatically_derived]
            impl #private::ArgumentGroup for #input_ident {
                const FIELDS: &'static [&'static str] = &[#(#names),*];
                const MODEL: #private::Option<#private::ModelFields> =
                    #private::Some(#private::ModelFields::of::<#model_ident>());
            }

            #(#reserves)*

            #[automatically_derived]
            impl #private::Fillable<#private::profile::#profile_type> for #model_ident {
                type Input = #input_ident;
            }

            #upstream_fields
        };
    }
}

/// `FromUpstream` for a model declared `#[model(upstream)]`: every field read from the
/// upstream's JSON under its upstream name (a nested upstream model through its own impl, any
/// other type through serde), and, for HTTP proxy tools, the names of its guarded fields
/// reserved: no argument of a proxy tool returning it may carry one.
fn from_upstream(model: &Model) -> TokenStream {
    let private = model.krate.private();
    let ident = &model.item.ident;
    let name = ident.to_string();
    let fields = model.fields.iter().map(|field| {
        let field_ident = &field.ident;
        let ty = &field.ty;
        let wire = field.wire_name();
        quote_spanned! {ty.span()=>
            #field_ident: (&&#private::upstream_kinds::DecodeProbe::<#ty>::NEW)
                .__fusion_decode(__fusion_object.remove(#wire), #wire)?
        }
    });
    let module = reserved_module(model);
    let mut reserves = Vec::new();
    let mut reserved_hashes = std::collections::HashSet::new();
    let mut guarded_names = Vec::new();
    for field in model.fields.iter().filter(|field| field.guarded) {
        let marker = reserved_marker(field);
        let mut names = vec![field.name()];
        if field.wire_name() != field.name() {
            names.push(field.wire_name());
        }
        guarded_names.extend(names.iter().cloned());
        // `owner_id` and its upstream name `ownerId` are one reserved name.
        for name in names
            .iter()
            .filter(|name| reserved_hashes.insert(name_hash(name)))
        {
            let hash = proc_macro2::Literal::u64_suffixed(name_hash(name));
            reserves.push(quote! {
                #[automatically_derived]
                impl #private::kinds::ReservesName<#hash> for #ident {
                    type Field = #module::#marker;
                }
            });
        }
    }
    quote! {
        #[allow(unused_qualifications, clippy::needless_borrow)]
        const _: () = {
            use #private::upstream_kinds::{ViaSerde as _, ViaUpstream as _};

            #[automatically_derived]
            impl #private::FromUpstream for #ident {
                const GUARDED_NAMES: &'static [&'static str] = &[#(#guarded_names),*];

                fn from_upstream(
                    value: #private::serde_json::Value,
                ) -> #private::Result<Self, #private::DecodeError> {
                    #[allow(unused_mut)]
                    let mut __fusion_object = #private::upstream_object(value, #name)?;
                    #private::Ok(#ident { #(#fields,)* })
                }
            }

            #(#reserves)*
        };
    }
}

/// The facts `#[presenter]` needs: `"Invoice" [{ id 0 "label" false false } …]`, each field
/// with its index, label (or `_`), hidden and guarded.
fn facts(model: &Model) -> TokenStream {
    let name = model.item.ident.to_string();
    let fields = model.fields.iter().enumerate().map(|(index, field)| {
        let ident = &field.ident;
        let label = match &field.label {
            Some(label) => quote!(#label),
            None => quote!(_),
        };
        let hidden = field.hidden;
        let guarded = field.guarded;
        quote!({ #ident #index #label #hidden #guarded })
    });
    quote!(#name [#(#fields)*])
}

/// A `macro_rules!` macro that carries the model's facts to `#[presenter]`, which runs in
/// another item (often another module or crate) and cannot see the struct. It is re-exported
/// under the model's own name, in the macro namespace, so that whatever path names the model
/// type also names its descriptor.
pub(crate) fn descriptor(item: &ItemStruct, facts: TokenStream) -> TokenStream {
    let ident = &item.ident;
    let vis = &item.vis;
    let descriptor_ident = descriptor_ident(item);
    quote! {
        #[doc(hidden)]
        #[macro_export]
        #[allow(non_local_definitions)]
        macro_rules! #descriptor_ident {
            ([$($callback:tt)*] $($rest:tt)*) => {
                $($callback)*! { model { #facts } $($rest)* }
            };
        }
        #[doc(hidden)]
        #[allow(unused_imports)]
        #vis use #descriptor_ident as #ident;
    }
}

/// A name for the descriptor macro, unique in the crate (macro-exported names share the crate
/// root): derived from the model's name, fields, file and position.
fn descriptor_ident(item: &ItemStruct) -> Ident {
    let span = proc_macro::Span::call_site();
    let location = format!("{}:{}:{}", span.file(), span.line(), span.column());
    let name = item.ident.to_string();
    let field_names: Vec<String> = item
        .fields
        .iter()
        .filter_map(|field| field.ident.as_ref().map(Ident::to_string))
        .collect();
    let mut parts = vec![location.as_str(), name.as_str()];
    parts.extend(field_names.iter().map(String::as_str));
    format_ident!("__fusion_model_{}_{:016x}", item.ident, fnv1a(&parts))
}

/// The struct without Fusion's field attributes, which only `#[model]` understands.
pub(crate) fn strip_fusion_attrs(mut item: ItemStruct) -> ItemStruct {
    if let Fields::Named(named) = &mut item.fields {
        for field in &mut named.named {
            field.attrs.retain(|attr| {
                // `schemars` too: a model has no schema, its constraints go to its profiles.
                !["cast", "hidden", "guarded", "schemars", "upstream"]
                    .iter()
                    .any(|name| attr.path().is_ident(name))
            });
        }
    }
    item
}

//! `#[model]`: casts, hidden and guarded fields, fillable profiles (SPEC M1–M4).

use darling::{Error, FromMeta};
use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::ext::IdentExt as _;
use syn::spanned::Spanned as _;
use syn::{Attribute, Field, Fields, Ident, ItemStruct, LitStr, Type};

use crate::common::{IdentList, Krate, fnv1a, meta_list, unknown_field};

// ---------------------------------------------------------------------------------------------
// Parse

#[derive(FromMeta, Default)]
struct ModelArgs {
    #[darling(default)]
    fillable: Fillable,
    #[darling(rename = "crate", default)]
    krate: Krate,
}

#[derive(FromMeta, Default)]
struct Fillable {
    create: Option<IdentList>,
    update: Option<IdentList>,
    filter: Option<IdentList>,
}

struct Model {
    item: ItemStruct,
    krate: Krate,
    fields: Vec<ModelField>,
    profiles: Vec<Profile>,
}

struct ModelField {
    ident: Ident,
    ty: Type,
    label: Option<LitStr>,
    hidden: bool,
    guarded: bool,
}

impl ModelField {
    /// The field's name as serde and the agent know it (`r#type` is `type`).
    fn name(&self) -> String {
        self.ident.unraw().to_string()
    }

    fn presentable(&self) -> bool {
        self.label.is_some() && !self.hidden
    }
}

#[derive(Clone, Copy, PartialEq)]
enum ProfileKind {
    Create,
    Update,
    Filter,
}

impl ProfileKind {
    fn name(self) -> &'static str {
        match self {
            ProfileKind::Create => "create",
            ProfileKind::Update => "update",
            ProfileKind::Filter => "filter",
        }
    }

    fn type_suffix(self) -> &'static str {
        match self {
            ProfileKind::Create => "Create",
            ProfileKind::Update => "Update",
            ProfileKind::Filter => "Filter",
        }
    }
}

struct Profile {
    kind: ProfileKind,
    fields: Vec<Ident>,
}

pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let item: ItemStruct = match syn::parse2(item.clone()) {
        Ok(item) => item,
        Err(_) => {
            let error = syn::Error::new(
                Span::call_site(),
                "`#[model]` goes on a struct with named fields",
            )
            .to_compile_error();
            return quote!(#error #item);
        }
    };
    // Every mistake is reported in one run, and what is valid is still generated, so that
    // presenters and tools over the model report their own mistakes too.
    let mut errors = Error::accumulator();
    let generated = match parse(args, item.clone(), &mut errors) {
        Some(mut model) => {
            check(&mut model, &mut errors);
            generate(&model)
        }
        // Not a model at all: re-emit the struct without Fusion's attributes so that the rest
        // of the crate still type-checks.
        None => strip_fusion_attrs(item).into_token_stream(),
    };
    let errors = errors.finish().err().map(Error::write_errors);
    quote!(#errors #generated)
}

fn parse(
    args: TokenStream,
    item: ItemStruct,
    errors: &mut darling::error::Accumulator,
) -> Option<Model> {
    let args = errors
        .handle(meta_list(args).and_then(|list| ModelArgs::from_list(&list)))
        .unwrap_or_default();
    if !item.generics.params.is_empty() {
        errors.push(Error::custom("a model cannot be generic").with_span(&item.generics));
        return None;
    }
    let mut fields = Vec::new();
    match &item.fields {
        Fields::Named(named) => {
            for field in &named.named {
                fields.extend(parse_field(field, errors));
            }
        }
        _ => {
            errors.push(
                Error::custom("a model is a struct with named fields").with_span(&item.ident),
            );
            return None;
        }
    }
    let mut profiles = Vec::new();
    for (kind, list) in [
        (ProfileKind::Create, args.fillable.create),
        (ProfileKind::Update, args.fillable.update),
        (ProfileKind::Filter, args.fillable.filter),
    ] {
        if let Some(list) = list {
            profiles.push(Profile {
                kind,
                fields: list.0,
            });
        }
    }
    Some(Model {
        item,
        krate: args.krate,
        fields,
        profiles,
    })
}

/// Reads a field's Fusion attributes; mistakes are reported and the field is still returned,
/// so that the checks that depend on it run too.
fn parse_field(field: &Field, errors: &mut darling::error::Accumulator) -> Option<ModelField> {
    let mut label = None;
    let mut hidden = false;
    let mut guarded = false;
    for attr in &field.attrs {
        if attr.path().is_ident("cast") {
            match attr.parse_args::<LitStr>() {
                Ok(text) if text.value().trim().is_empty() => errors.push(
                    Error::custom(
                        "a cast label tells the agent what the field means; it cannot be empty",
                    )
                    .with_span(&text),
                ),
                Ok(text) if label.is_some() => {
                    errors
                        .push(Error::custom("duplicate `#[cast]` on this field").with_span(&text));
                }
                Ok(text) => label = Some(text),
                Err(_) => errors.push(
                    Error::custom("expected `#[cast(\"what this field means\")]`").with_span(attr),
                ),
            }
        } else if attr.path().is_ident("hidden") {
            flag(attr, &mut hidden, errors);
        } else if attr.path().is_ident("guarded") {
            flag(attr, &mut guarded, errors);
        }
    }
    Some(ModelField {
        ident: field.ident.clone()?,
        ty: field.ty.clone(),
        label,
        hidden,
        guarded,
    })
}

fn flag(attr: &Attribute, set: &mut bool, errors: &mut darling::error::Accumulator) {
    let name = attr
        .path()
        .get_ident()
        .map(Ident::to_string)
        .unwrap_or_default();
    if !matches!(attr.meta, syn::Meta::Path(_)) {
        errors
            .push(Error::custom(format!("`#[{name}]` takes no arguments")).with_span(attr.path()));
    } else if *set {
        errors.push(
            Error::custom(format!("duplicate `#[{name}]` on this field")).with_span(attr.path()),
        );
    }
    *set = true;
}

// ---------------------------------------------------------------------------------------------
// Check

/// Runs every check; what fails is reported and left out of the generated code.
fn check(model: &mut Model, errors: &mut darling::error::Accumulator) {
    check_derives(model, errors);
    let mut profiles = std::mem::take(&mut model.profiles);
    for profile in &mut profiles {
        check_profile(model, profile, errors);
    }
    model.profiles = profiles;
}

/// A model's raw value never crosses the wire in either direction and has no schema of its
/// own: deriving `Serialize`, `Deserialize` or `JsonSchema` on it is refused here with the
/// right tool named (the impls `#[model]` emits would conflict with any such derive anyway;
/// this makes the common case read clearly). `Debug` is generated with hidden fields redacted,
/// so a derived one is dropped in its favour.
fn check_derives(model: &mut Model, errors: &mut darling::error::Accumulator) {
    for attr in &mut model.item.attrs {
        if !attr.path().is_ident("derive") {
            continue;
        }
        let Ok(paths) = attr.parse_args_with(
            syn::punctuated::Punctuated::<syn::Path, syn::Token![,]>::parse_terminated,
        ) else {
            continue;
        };
        let mut kept = Vec::new();
        for path in paths {
            let name = path
                .segments
                .last()
                .map(|segment| segment.ident.to_string())
                .unwrap_or_default();
            let refusal = match name.as_str() {
                "Serialize" => Some(
                    "a model cannot derive `Serialize`: its raw value would reach the wire; \
                     declare a `#[presenter]` that lists the fields the agent may see",
                ),
                "Deserialize" => Some(
                    "a model cannot derive `Deserialize`: an agent would set every field, guarded \
                     ones included; declare a fillable profile (`#[model(fillable(create = [...]))]`) \
                     and take `fusion::Create<Model>`",
                ),
                "JsonSchema" => Some(
                    "a model cannot derive `JsonSchema`: its schema would list its hidden fields; \
                     a presenter's view and a fillable profile have schemas of their own",
                ),
                // Generated instead, with hidden fields shown as `[hidden]`.
                "Debug" => {
                    continue;
                }
                _ => None,
            };
            match refusal {
                Some(message) => errors.push(Error::custom(message).with_span(&path)),
                None => kept.push(path),
            }
        }
        // Refused derives are dropped from the output, so that each mistake is reported once.
        *attr = syn::parse_quote!(#[derive(#(#kept),*)]);
    }
}

/// Every field named by a fillable profile exists, is cast (its label describes the
/// argument), is not guarded (a guarded field never comes in from an agent), is not hidden in a
/// filter (matching results would reveal its value) and appears once.
fn check_profile(model: &Model, profile: &mut Profile, errors: &mut darling::error::Accumulator) {
    let owner = model.item.ident.to_string();
    let mut valid: Vec<Ident> = Vec::new();
    for ident in &profile.fields {
        if valid.contains(ident) {
            errors.push(
                Error::custom(format!(
                    "`{ident}` is listed twice in `{}`",
                    profile.kind.name()
                ))
                .with_span(ident),
            );
            continue;
        }
        let Some(field) = model.fields.iter().find(|field| field.ident == *ident) else {
            let names: Vec<String> = model
                .fields
                .iter()
                .map(|field| field.ident.to_string())
                .collect();
            errors.push(unknown_field(
                ident,
                &owner,
                names.iter().map(String::as_str),
            ));
            continue;
        };
        if field.guarded {
            errors.push(
                Error::custom(format!(
                    "`{ident}` is guarded: it can never come in from an agent, so no `{}` profile may list it",
                    profile.kind.name()
                ))
                .with_span(ident),
            );
        } else if field.hidden && profile.kind == ProfileKind::Filter {
            errors.push(
                Error::custom(format!(
                    "`{ident}` is hidden: a filter on it would let an agent guess its value one query at a time; \
                     filter on a field the agent may see"
                ))
                .with_span(ident),
            );
        } else if field.label.is_none() {
            errors.push(
                Error::custom(format!(
                    "`{ident}` must be cast with a label to be fillable: the label describes the argument to the agent"
                ))
                .with_span(ident),
            );
        } else {
            valid.push(ident.clone());
        }
    }
    profile.fields = valid;
}

// ---------------------------------------------------------------------------------------------
// Expand

fn generate(model: &Model) -> TokenStream {
    let private = model.krate.private();
    let item = strip_fusion_attrs(model.item.clone());
    let ident = &model.item.ident;
    let vis = &model.item.vis;
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
    let descriptor_ident = descriptor_ident(model);
    let descriptor = generate_descriptor(model, &descriptor_ident);

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

        #(#profiles)*

        #descriptor
        #[doc(hidden)]
        #[allow(unused_imports)]
        #vis use #descriptor_ident as #ident;
    }
}

/// The marker of a guarded or hidden field, `{Model}_{field}`: a tool's plain argument that
/// takes the field's name is reported with this type's name.
fn reserved_marker(model: &Model, field: &ModelField) -> Ident {
    format_ident!("{}_{}", model.item.ident, field.name())
}

/// The module holding the markers of the model's guarded and hidden fields.
fn reserved_module(model: &Model) -> Ident {
    format_ident!("__fusion_never_set_by_agents_{}", model.item.ident)
}

fn generate_reserved_markers(model: &Model) -> TokenStream {
    let markers: Vec<Ident> = model
        .fields
        .iter()
        .filter(|field| field.guarded || field.hidden)
        .map(|field| reserved_marker(model, field))
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
        #[allow(non_camel_case_types, non_snake_case, dead_code)]
        #vis mod #module {
            #(
                #[doc(hidden)]
                pub struct #markers;
            )*
        }
    }
}

/// The `create`/`update`/`filter` input type: only the listed fields, required for `create`,
/// optional otherwise, unknown fields rejected. Its schema is written here rather than derived,
/// so that the generated code names nothing the user's scope could shadow.
fn generate_profile(model: &Model, profile: &Profile) -> TokenStream {
    let private = model.krate.private();
    let serde_path = format!("{}::__private::serde", path_string(&model.krate.0));
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
    let listed: Vec<(&Ident, &LitStr, TokenStream)> = profile
        .fields
        .iter()
        .filter_map(|ident| {
            let field = model.fields.iter().find(|field| field.ident == *ident)?;
            let ty = &field.ty;
            let ty = if required {
                quote!(#ty)
            } else {
                quote!(#private::Option<#ty>)
            };
            Some((ident, field.label.as_ref()?, ty))
        })
        .collect();
    // The guarded and hidden fields this profile leaves out: no other argument of a tool that
    // takes it may have their names (`#[tool]` checks it with these impls).
    let module = reserved_module(model);
    let reserves = model
        .fields
        .iter()
        .filter(|field| (field.guarded || field.hidden) && !profile.fields.contains(&field.ident))
        .map(|field| {
            let hash = proc_macro2::Literal::u64_suffixed(fnv1a(&[&field.name()]));
            let marker = reserved_marker(model, field);
            quote! {
                #[automatically_derived]
                impl #private::kinds::ReservesName<#hash> for #input_ident {
                    type Field = #module::#marker;
                }
            }
        });
    let fields = listed.iter().map(|(ident, label, ty)| {
        let default = (!required).then(|| quote!(#[serde(default)]));
        quote_spanned! {ident.span()=>
            #[doc = #label]
            #default
            pub #ident: #ty
        }
    });
    let schema_properties = listed.iter().map(|(ident, label, ty)| {
        let key = ident.unraw().to_string();
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
        };
    }
}

/// A `macro_rules!` macro that carries the model's field facts to `#[presenter]`, which runs
/// in another item (often another module or crate) and cannot see the struct. It is re-exported
/// under the model's own name, in the macro namespace, so that whatever path names the model
/// type also names its descriptor.
fn generate_descriptor(model: &Model, descriptor_ident: &Ident) -> TokenStream {
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
    quote! {
        #[doc(hidden)]
        #[macro_export]
        #[allow(non_local_definitions)]
        macro_rules! #descriptor_ident {
            ([$($callback:tt)*] $($rest:tt)*) => {
                $($callback)*! { model { #name [#(#fields)*] } $($rest)* }
            };
        }
    }
}

/// A name for the descriptor macro, unique in the crate (macro-exported names share the crate
/// root): derived from the model's name, fields, file and position.
fn descriptor_ident(model: &Model) -> Ident {
    let span = proc_macro::Span::call_site();
    let location = format!("{}:{}:{}", span.file(), span.line(), span.column());
    let name = model.item.ident.to_string();
    let field_names: Vec<String> = model
        .fields
        .iter()
        .map(|field| field.ident.to_string())
        .collect();
    let mut parts = vec![location.as_str(), name.as_str()];
    parts.extend(field_names.iter().map(String::as_str));
    format_ident!("__fusion_model_{}_{:016x}", model.item.ident, fnv1a(&parts))
}

fn strip_fusion_attrs(mut item: ItemStruct) -> ItemStruct {
    if let Fields::Named(named) = &mut item.fields {
        for field in &mut named.named {
            field.attrs.retain(|attr| {
                !["cast", "hidden", "guarded"]
                    .iter()
                    .any(|name| attr.path().is_ident(name))
            });
        }
    }
    item
}

pub(crate) fn path_string(path: &syn::Path) -> String {
    let mut text = String::new();
    if path.leading_colon.is_some() {
        text.push_str("::");
    }
    let segments: Vec<String> = path
        .segments
        .iter()
        .map(|segment| segment.ident.to_string())
        .collect();
    text.push_str(&segments.join("::"));
    text
}

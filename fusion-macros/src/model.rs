//! `#[model]`: casts, hidden and guarded fields, fillable profiles (SPEC M1–M4).

use darling::{Error, FromMeta};
use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};
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
    check_not_serialize(model, errors);
    let mut profiles = std::mem::take(&mut model.profiles);
    for profile in &mut profiles {
        check_profile(model, profile, errors);
    }
    model.profiles = profiles;
}

/// A model must never be serializable: only its presenters' views reach the wire. The
/// generated `ModelsNeverImplementSerialize` impl enforces this for any `Serialize` impl; this
/// check only makes the common case, a derive, read clearly.
fn check_not_serialize(model: &mut Model, errors: &mut darling::error::Accumulator) {
    for attr in &mut model.item.attrs {
        if !attr.path().is_ident("derive") {
            continue;
        }
        let Ok(paths) = attr.parse_args_with(
            syn::punctuated::Punctuated::<syn::Path, syn::Token![,]>::parse_terminated,
        ) else {
            continue;
        };
        let (serialize, kept): (Vec<syn::Path>, Vec<syn::Path>) =
            paths.into_iter().partition(|path| {
                path.segments
                    .last()
                    .is_some_and(|segment| segment.ident == "Serialize")
            });
        if serialize.is_empty() {
            continue;
        }
        // Dropped from the output, so that the mistake is reported once, here.
        *attr = syn::parse_quote!(#[derive(#(#kept),*)]);
        for path in serialize {
            errors.push(
                Error::custom(
                    "a model cannot derive `Serialize`: its raw value would reach the wire; \
                     declare a `#[presenter]` that lists the fields the agent may see",
                )
                .with_span(&path),
            );
        }
    }
}

/// Every field named by a fillable profile exists, is cast (its label describes the
/// argument), is not guarded (a guarded field never comes in from an agent) and appears once.
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
        let field_name = field.ident.to_string();
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

    let profiles = model
        .profiles
        .iter()
        .map(|profile| generate_profile(model, profile));
    let descriptor_ident = descriptor_ident(model);
    let descriptor = generate_descriptor(model, &descriptor_ident);

    quote! {
        #item

        #[doc(hidden)]
        #[allow(non_upper_case_globals, unused_qualifications)]
        const _: () = {
            #[automatically_derived]
            impl #private::Model for #ident {
                const NAME: &'static str = #name;
                const FIELDS: &'static [#private::FieldInfo] = &[#(#field_infos),*];

                // Hidden columns are written and never read by design: no dead-code warning.
                fn __fusion_declared(&self) {
                    let _ = (#(&self.#field_idents,)*);
                }
            }

            // Conflicts with the blanket impl for `T: Serialize` if the model is serializable;
            // `Proof = Self` is what `Model` requires, and what no `Serialize` type has.
            #[automatically_derived]
            impl #private::ModelsNeverImplementSerialize for #ident {
                type Proof = Self;
            }

            #(#field_access)*
        };

        #(#profiles)*

        #descriptor
        #[doc(hidden)]
        #[allow(unused_imports)]
        #vis use #descriptor_ident as #ident;
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
    let names: Vec<String> = profile.fields.iter().map(Ident::to_string).collect();
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
    let fields = listed.iter().map(|(ident, label, ty)| {
        let default = (!required).then(|| quote!(#[serde(default)]));
        quote_spanned! {ident.span()=>
            #[doc = #label]
            #default
            pub #ident: #ty
        }
    });
    let schema_properties = listed.iter().map(|(ident, label, ty)| {
        let key = ident.to_string();
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
            }

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

//! The model as written: the attribute's receivers, and each field's Fusion attributes read
//! where they are written (a label is not empty, a flag takes no arguments, nothing twice).

use darling::ast::NestedMeta;
use darling::{Error, FromMeta};
use proc_macro2::TokenStream;
use syn::ext::IdentExt as _;
use syn::{Attribute, Field, Fields, Ident, ItemStruct, LitStr, Type};

use crate::common::Constraint;
use crate::common::{IdentList, meta_list, salvage};
use crate::paths::Krate;

#[derive(FromMeta, Default)]
pub(super) struct ModelArgs {
    #[darling(default)]
    pub(super) fillable: Fillable,
    /// `upstream`: the model can be read from an upstream's JSON (HTTP proxy tools), and its
    /// profiles sent to one.
    #[darling(default)]
    pub(super) upstream: darling::util::Flag,
    #[darling(rename = "crate", default)]
    pub(super) krate: Krate,
}

#[derive(FromMeta, Default)]
pub(super) struct Fillable {
    pub(super) create: Option<IdentList>,
    pub(super) update: Option<IdentList>,
    pub(super) filter: Option<IdentList>,
}

pub(super) struct Model {
    pub(super) item: ItemStruct,
    pub(super) krate: Krate,
    pub(super) fields: Vec<ModelField>,
    pub(super) profiles: Vec<Profile>,
    pub(super) upstream: bool,
}

pub(super) struct ModelField {
    pub(super) ident: Ident,
    pub(super) ty: Type,
    pub(super) label: Option<LitStr>,
    pub(super) hidden: bool,
    pub(super) guarded: bool,
    /// `#[schemars(...)]` constraints (`length`, `range`, `regex`, `email`…): they apply to the
    /// field wherever a profile fills it, and are enforced there.
    pub(super) constraints: Vec<Constraint>,
    /// `#[upstream(name = "petId")]`: the field's name in the upstream's JSON.
    pub(super) upstream_name: Option<LitStr>,
}

impl ModelField {
    /// The field's name in the upstream's JSON: `#[upstream(name = …)]`, else its own name.
    pub(super) fn wire_name(&self) -> String {
        self.upstream_name
            .as_ref()
            .map_or_else(|| self.name(), LitStr::value)
    }

    /// The field's name as serde and the agent know it (`r#type` is `type`).
    pub(super) fn name(&self) -> String {
        self.ident.unraw().to_string()
    }

    pub(super) fn presentable(&self) -> bool {
        self.label.is_some() && !self.hidden
    }
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum ProfileKind {
    Create,
    Update,
    Filter,
}

impl ProfileKind {
    pub(super) fn name(self) -> &'static str {
        match self {
            ProfileKind::Create => "create",
            ProfileKind::Update => "update",
            ProfileKind::Filter => "filter",
        }
    }

    pub(super) fn type_suffix(self) -> &'static str {
        match self {
            ProfileKind::Create => "Create",
            ProfileKind::Update => "Update",
            ProfileKind::Filter => "Filter",
        }
    }
}

pub(super) struct Profile {
    pub(super) kind: ProfileKind,
    pub(super) fields: Vec<Ident>,
    /// The list's elements that are not field names, reported by the checks.
    pub(super) malformed: Vec<Error>,
}

pub(super) fn parse(
    args: TokenStream,
    item: ItemStruct,
    errors: &mut darling::error::Accumulator,
) -> Option<Model> {
    let args = match errors.handle(meta_list(args)) {
        Some(list) => ModelArgs::from_list(&list).unwrap_or_else(|error| {
            errors.push(error);
            salvage_args(&list)
        }),
        None => ModelArgs::default(),
    };
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
    let upstream = args.upstream.is_present();
    if !upstream {
        for field in &fields {
            if let Some(name) = &field.upstream_name {
                errors.push(
                    Error::custom(
                        "`#[upstream(name = …)]` names a field in an upstream's JSON: declare the model `#[model(upstream, …)]`",
                    )
                    .with_span(name),
                );
            }
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
                fields: list.idents,
                malformed: list.malformed,
            });
        }
    }
    Some(Model {
        item,
        krate: args.krate,
        fields,
        profiles,
        upstream,
    })
}

/// The profiles and facade of an attribute that did not parse whole, so that tools taking a
/// profile do not also report it missing: the items that parse, and within `fillable(…)` the
/// profiles that parse.
fn salvage_args(list: &[NestedMeta]) -> ModelArgs {
    let mut args: ModelArgs = salvage(list);
    let fillable = list.iter().find_map(|item| match item {
        NestedMeta::Meta(syn::Meta::List(fillable)) if fillable.path.is_ident("fillable") => {
            NestedMeta::parse_meta_list(fillable.tokens.clone()).ok()
        }
        _ => None,
    });
    if let Some(fillable) = fillable {
        args.fillable = salvage(&fillable);
    }
    args
}

/// Reads a field's Fusion attributes; mistakes are reported and the field is still returned,
/// so that the checks that depend on it run too.
fn parse_field(field: &Field, errors: &mut darling::error::Accumulator) -> Option<ModelField> {
    let mut label = None;
    let mut hidden = false;
    let mut guarded = false;
    let mut constraints = Vec::new();
    let mut upstream_name = None;
    for attr in &field.attrs {
        if attr.path().is_ident("upstream") {
            let parsed = attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("name") {
                    let name: LitStr = meta.value()?.parse()?;
                    if name.value().is_empty() {
                        return Err(meta.error("an upstream name cannot be empty"));
                    }
                    if upstream_name.replace(name).is_some() {
                        return Err(meta.error("duplicate `name`"));
                    }
                    Ok(())
                } else {
                    Err(meta.error("expected `#[upstream(name = \"nameInTheUpstream\")]`"))
                }
            });
            if let Err(error) = parsed {
                errors.push(error.into());
            }
        } else if attr.path().is_ident("schemars") {
            constraints.extend(
                errors
                    .handle(Constraint::parse_attr(attr))
                    .into_iter()
                    .flatten(),
            );
        } else if attr.path().is_ident("cast") {
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
        constraints,
        upstream_name,
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

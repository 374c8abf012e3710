//! The rules of a model, one function each. What fails is reported and left out of the
//! generated code, so that presenters and tools over the model report their own mistakes too.

use darling::{Error, Result};
use syn::Ident;

use super::parse::{Model, ModelField, Profile, ProfileKind};
use crate::common::unknown_field;

pub(super) fn check(model: &mut Model, errors: &mut darling::error::Accumulator) {
    check_derives(model, errors);
    let mut profiles = std::mem::take(&mut model.profiles);
    for profile in &mut profiles {
        profile.fields = check_profile(model, profile, errors);
    }
    model.profiles = profiles;
}

// A model's raw value never crosses the wire in either direction and has no schema of its
// own: deriving `Serialize`, `Deserialize` or `JsonSchema` on it is refused here with the
// right tool named (the impls `#[model]` emits would conflict with any such derive anyway;
// this makes the common case read clearly). `Debug` is generated with hidden fields redacted,
// so a derived one is dropped in its favour.
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

/// The fields of a fillable profile that follow every rule below; the others are reported.
/// Each field is reported once, for the first rule it breaks.
fn check_profile(
    model: &Model,
    profile: &Profile,
    errors: &mut darling::error::Accumulator,
) -> Vec<Ident> {
    // A profile lists field names.
    for malformed in &profile.malformed {
        errors.push(malformed.clone());
    }
    let mut valid: Vec<Ident> = Vec::new();
    for ident in &profile.fields {
        let result = check_listed_once(profile, &valid, ident)
            .and_then(|()| check_field_exists(model, ident))
            .and_then(|field| check_not_guarded(profile, ident, field))
            .and_then(|field| check_not_hidden_in_filter(profile, ident, field))
            .and_then(|field| check_cast(ident, field));
        if errors.handle(result).is_some() {
            valid.push(ident.clone());
        }
    }
    valid
}

// A field appears once in a profile.
fn check_listed_once(profile: &Profile, valid: &[Ident], ident: &Ident) -> Result<()> {
    if valid.contains(ident) {
        Err(Error::custom(format!(
            "`{ident}` is listed twice in `{}`",
            profile.kind.name()
        ))
        .with_span(ident))
    } else {
        Ok(())
    }
}

// A profile lists fields of the model.
fn check_field_exists<'a>(model: &'a Model, ident: &Ident) -> Result<&'a ModelField> {
    model
        .fields
        .iter()
        .find(|field| field.ident == *ident)
        .ok_or_else(|| {
            let names: Vec<String> = model
                .fields
                .iter()
                .map(|field| field.ident.to_string())
                .collect();
            unknown_field(
                ident,
                &model.item.ident.to_string(),
                names.iter().map(String::as_str),
            )
        })
}

// A guarded field never comes in from an agent: no profile lists it (SPEC M3).
fn check_not_guarded<'a>(
    profile: &Profile,
    ident: &Ident,
    field: &'a ModelField,
) -> Result<&'a ModelField> {
    if field.guarded {
        Err(Error::custom(format!(
            "`{ident}` is guarded: it can never come in from an agent, so no `{}` profile may list it",
            profile.kind.name()
        ))
        .with_span(ident))
    } else {
        Ok(field)
    }
}

// A filter on a hidden field would let an agent guess its value one query at a time.
fn check_not_hidden_in_filter<'a>(
    profile: &Profile,
    ident: &Ident,
    field: &'a ModelField,
) -> Result<&'a ModelField> {
    if field.hidden && profile.kind == ProfileKind::Filter {
        Err(Error::custom(format!(
            "`{ident}` is hidden: a filter on it would let an agent guess its value one query at a time; \
             filter on a field the agent may see"
        ))
        .with_span(ident))
    } else {
        Ok(field)
    }
}

// A fillable field is cast: its label describes the argument to the agent.
fn check_cast<'a>(ident: &Ident, field: &'a ModelField) -> Result<&'a ModelField> {
    if field.label.is_some() {
        Ok(field)
    } else {
        Err(Error::custom(format!(
            "`{ident}` must be cast with a label to be fillable: the label describes the argument to the agent"
        ))
        .with_span(ident))
    }
}

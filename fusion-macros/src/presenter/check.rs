//! The rules of a presenter, one function each, checked with full knowledge of the model.

use darling::{Error, Result};
use syn::{Ident, ItemStruct};

use super::parse::{FieldFacts, ListedField, ModelFacts, Presenter, PresenterArgs};
use crate::common::{check_key, unknown_field};

/// A presenter as far as it follows the rules.
pub(crate) struct Checked<'a> {
    pub(crate) presenter: &'a Presenter,
    pub(crate) args: &'a PresenterArgs,
    pub(crate) item: &'a ItemStruct,
    /// Each listed field with the model's facts about it, in the presenter's order.
    pub(crate) fields: Vec<(&'a ListedField, &'a FieldFacts)>,
    pub(crate) limit: Option<usize>,
    pub(crate) max_tokens: Option<usize>,
}

/// The presenter with what follows the rules, or `None` when there is no struct to present
/// (the errors are in `errors`). What breaks a rule is reported and left out: a listed field
/// that breaks one is not among `fields`, an invalid limit is `None`.
pub(crate) fn check<'a>(
    presenter: &'a Presenter,
    errors: &mut darling::error::Accumulator,
) -> Option<Checked<'a>> {
    let args = &presenter.args;
    if let Some(item) = &presenter.item {
        errors.handle(check_unit_struct(item));
    }
    let limit = errors.handle(check_limit(args));
    let max_tokens = errors.handle(check_max_tokens(args));
    if presenter.complete {
        errors.handle(check_some_field(args));
    }
    // The list holds field names, or `field = ItsPresenter`.
    for malformed in &args.fields.malformed {
        errors.push(malformed.clone());
    }
    let mut fields = Vec::new();
    for (position, listed) in args.fields.fields.iter().enumerate() {
        let facts = check_listed_once(args, position, listed)
            .and_then(|()| check_field_exists(&presenter.model, listed))
            .and_then(|facts| check_not_hidden(&presenter.model, listed, facts))
            .and_then(|facts| check_cast(&presenter.model, listed, facts));
        fields.extend(errors.handle(facts).map(|facts| (listed, facts)));
    }
    if presenter.complete {
        errors.handle(check_suggest_has_actions(args));
    }
    errors.handle(check_actions_are_keys(args));
    if presenter.complete {
        errors.handle(check_ui_kinds_have_ui(args));
    }
    errors.handle(check_ui_kinds(args));
    Some(Checked {
        presenter,
        args,
        item: presenter.item.as_ref()?,
        fields,
        limit: limit.flatten(),
        max_tokens: max_tokens.flatten(),
    })
}

// A presenter is a unit struct: it is a name for a view, and holds nothing.
fn check_unit_struct(item: &ItemStruct) -> Result<()> {
    let is_unit = matches!(item.fields, syn::Fields::Unit);
    if is_unit && item.generics.params.is_empty() {
        Ok(())
    } else {
        Err(
            Error::custom("a presenter is a unit struct: `pub struct InvoiceView;`")
                .with_span(&item.ident),
        )
    }
}

// The agent limit is a positive number of items.
fn check_limit(args: &PresenterArgs) -> Result<Option<usize>> {
    positive(args.limit.as_ref(), "`limit` is a positive number of items")
}

// The token budget is a positive number of tokens.
fn check_max_tokens(args: &PresenterArgs) -> Result<Option<usize>> {
    positive(
        args.max_tokens.as_ref(),
        "`max_tokens` is a positive number of tokens",
    )
}

fn positive(value: Option<&syn::LitInt>, message: &str) -> Result<Option<usize>> {
    let Some(value) = value else {
        return Ok(None);
    };
    match value.base10_parse::<usize>() {
        Ok(0) | Err(_) => Err(Error::custom(message).with_span(value)),
        Ok(value) => Ok(Some(value)),
    }
}

// A presenter shows at least one field.
fn check_some_field(args: &PresenterArgs) -> Result<()> {
    if args.fields.fields.is_empty() {
        Err(Error::custom(
            "a presenter lists at least one field: `fields(id, total)`",
        ))
    } else {
        Ok(())
    }
}

// A field is listed once.
fn check_listed_once(args: &PresenterArgs, position: usize, listed: &ListedField) -> Result<()> {
    let ident = &listed.ident;
    if args
        .fields
        .idents()
        .take(position)
        .any(|earlier| earlier == ident)
    {
        Err(Error::custom(format!("`{ident}` is listed twice")).with_span(ident))
    } else {
        Ok(())
    }
}

// A listed field is a field of the model.
fn check_field_exists<'a>(model: &'a ModelFacts, listed: &ListedField) -> Result<&'a FieldFacts> {
    let ident: &Ident = &listed.ident;
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
            unknown_field(ident, &model.name, names.iter().map(String::as_str))
        })
}

// A hidden field never reaches the wire, so no presenter may list it: the view can never
// contain one.
fn check_not_hidden<'a>(
    model: &ModelFacts,
    listed: &ListedField,
    facts: &'a FieldFacts,
) -> Result<&'a FieldFacts> {
    if facts.hidden {
        Err(Error::custom(format!(
            "`{}` is hidden in `{}`: a hidden field never reaches the wire, so no presenter may list it",
            listed.ident, model.name
        ))
        .with_span(&listed.ident))
    } else {
        Ok(facts)
    }
}

// A presented field is cast: its label is the rule the agent receives with it.
fn check_cast<'a>(
    model: &ModelFacts,
    listed: &ListedField,
    facts: &'a FieldFacts,
) -> Result<&'a FieldFacts> {
    if facts.label.is_some() {
        Ok(facts)
    } else {
        Err(Error::custom(format!(
            "`{}` is not cast in `{}`: cast it with a label (`#[cast(\"…\")]`) to present it",
            listed.ident, model.name
        ))
        .with_span(&listed.ident))
    }
}

// A `suggest` function comes with the tools it may name (`actions`), so that the server can
// check that they exist; `actions` without `suggest` would never be used.
fn check_suggest_has_actions(args: &PresenterArgs) -> Result<()> {
    match (&args.suggest, args.actions.0.first()) {
        (Some(suggest), None) => Err(Error::custom(
            "declare the tools `suggest` may name: `actions = [\"billing.void_invoice\"]`",
        )
        .with_span(suggest)),
        (None, Some(action)) => Err(Error::custom(
            "`actions` lists the tools a `suggest` function names; add `suggest = your_fn`",
        )
        .with_span(action)),
        _ => Ok(()),
    }
}

// The actions are tool keys.
fn check_actions_are_keys(args: &PresenterArgs) -> Result<()> {
    let mut errors = Error::accumulator();
    for action in &args.actions.0 {
        errors.handle(check_key(action));
    }
    errors.finish()
}

// `ui_kinds` lists the kinds of block a `ui` function renders (the lockfile records them, and
// a block of another kind is dropped); without `ui` it would never be used.
fn check_ui_kinds_have_ui(args: &PresenterArgs) -> Result<()> {
    match (
        &args.ui,
        args.ui_kinds.as_ref().and_then(|kinds| kinds.0.first()),
    ) {
        (None, Some(kind)) => Err(Error::custom(
            "`ui_kinds` lists the kinds of block a `ui` function renders; add `ui = your_fn`",
        )
        .with_span(kind)),
        _ => Ok(()),
    }
}

/// The kinds of UI block, as `UiBlock::kind` names them in the runtime.
const UI_KINDS: &[&str] = &["chart", "code", "markdown", "mermaid", "table"];

// `ui_kinds` lists at least one kind (without it, a `ui` function may render every kind), and
// each is a kind of block, listed once.
fn check_ui_kinds(args: &PresenterArgs) -> Result<()> {
    let Some(kinds) = &args.ui_kinds else {
        return Ok(());
    };
    if kinds.0.is_empty() {
        return Err(Error::custom(
            "`ui_kinds` lists at least one kind of block: `ui_kinds = [\"table\"]`",
        ));
    }
    let mut errors = Error::accumulator();
    for (position, kind) in kinds.0.iter().enumerate() {
        let value = kind.value();
        if !UI_KINDS.contains(&value.as_str()) {
            errors.push(
                Error::custom(format!(
                    "unknown UI block kind `{value}`: expected one of {}",
                    UI_KINDS.join(", ")
                ))
                .with_span(kind),
            );
        } else if kinds.0[..position]
            .iter()
            .any(|earlier| earlier.value() == value)
        {
            errors.push(Error::custom(format!("`{value}` is listed twice")).with_span(kind));
        }
    }
    errors.finish()
}

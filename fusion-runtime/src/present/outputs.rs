//! The shapes a handler may return, each presented through its tool's presenter (or as plain
//! data): a model, a shared model, an optional one, a list, a page, any of them with media.

use std::borrow::Borrow;
use std::sync::Arc;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;
use serde_json::Value;

use super::{Page, Plain, Presentation, Presented, Presenter, ToolOutput, Truncation};
use crate::error::ToolError;
use crate::media::WithMedia;
use crate::model::Model;

impl<T> ToolOutput<Plain> for T
where
    T: Serialize + JsonSchema + Send + 'static,
{
    fn data_schema(generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<T>()
    }

    fn present(self, _ui: bool) -> Result<Presentation, ToolError> {
        let (data, data_text) = serialize_twice(&self)?;
        let mut presentation = Presentation::plain(data);
        presentation.data_text = Some(data_text);
        Ok(presentation)
    }
}

impl<M, P> ToolOutput<P> for M
where
    M: Model,
    P: Presenter<Model = M>,
{
    fn data_schema(generator: &mut SchemaGenerator) -> Schema {
        P::item_schema(generator)
    }

    fn present(self, ui: bool) -> Result<Presentation, ToolError> {
        let item = P::item(&self);
        presented::<P, _>(Presented::One(&item), &item, None, ui)
    }
}

/// A model shared with the store (`Arc<Model>`): presented from the shared value, so a handler
/// that keeps its records behind `Arc`s answers a get without copying the record and its hidden
/// fields.
#[diagnostic::do_not_recommend]
impl<M, P> ToolOutput<P> for Arc<M>
where
    M: Model,
    P: Presenter<Model = M>,
{
    fn data_schema(generator: &mut SchemaGenerator) -> Schema {
        P::item_schema(generator)
    }

    fn present(self, ui: bool) -> Result<Presentation, ToolError> {
        let item = P::item(&self);
        presented::<P, _>(Presented::One(&item), &item, None, ui)
    }
}

/// A result with media attached ([`WithMedia`]): presented as the
/// value alone, the media sent after its text blocks.
// Not recommended (here and on the shapes below): under a missing `returns =`, a list of
// the shapes a presenter can return would bury the note that says to add one.
#[diagnostic::do_not_recommend]
impl<P: ?Sized, T: ToolOutput<P>> ToolOutput<P> for WithMedia<T> {
    const PAGED: bool = T::PAGED;

    fn data_schema(generator: &mut SchemaGenerator) -> Schema {
        T::data_schema(generator)
    }

    fn present(self, ui: bool) -> Result<Presentation, ToolError> {
        let mut presentation = self.value.present(ui)?;
        presentation.media.extend(self.media);
        Ok(presentation)
    }
}

/// The usual "find" shape: `None` is a successful result whose data is `null` (the agent is
/// told nothing matched), not an error. Map it to an error yourself (`.ok_or(...)`) when
/// absence is one.
#[diagnostic::do_not_recommend]
impl<M, P> ToolOutput<P> for Option<M>
where
    M: Model,
    P: Presenter<Model = M>,
{
    fn data_schema(generator: &mut SchemaGenerator) -> Schema {
        optional_schema::<P>(generator)
    }

    fn present(self, ui: bool) -> Result<Presentation, ToolError> {
        match self {
            Some(model) => <M as ToolOutput<P>>::present(model, ui),
            None => Ok(nothing_found::<P>()),
        }
    }
}

/// The "find" shape with the model shared with the store.
#[diagnostic::do_not_recommend]
impl<M, P> ToolOutput<P> for Option<Arc<M>>
where
    M: Model,
    P: Presenter<Model = M>,
{
    fn data_schema(generator: &mut SchemaGenerator) -> Schema {
        optional_schema::<P>(generator)
    }

    fn present(self, ui: bool) -> Result<Presentation, ToolError> {
        match self {
            Some(model) => <Arc<M> as ToolOutput<P>>::present(model, ui),
            None => Ok(nothing_found::<P>()),
        }
    }
}

/// The schema of an optional item: `P`'s item or `null`.
fn optional_schema<P: Presenter>(generator: &mut SchemaGenerator) -> Schema {
    let item = P::item_schema(generator);
    let mut schema = Schema::default();
    schema.insert(
        "anyOf".into(),
        Value::Array(vec![item.to_value(), serde_json::json!({"type": "null"})]),
    );
    schema
}

/// A find that found nothing: `null` data, with the presenter's actions still declared.
fn nothing_found<P: Presenter>() -> Presentation {
    let mut presentation = Presentation::plain(Value::Null);
    presentation.data_text = Some("null".to_owned());
    presentation.declared_actions = P::ACTIONS;
    presentation
}

#[diagnostic::do_not_recommend]
impl<M, P> ToolOutput<P> for Vec<M>
where
    M: Model,
    P: Presenter<Model = M>,
{
    fn data_schema(generator: &mut SchemaGenerator) -> Schema {
        list_schema::<P>(generator)
    }

    fn present(self, ui: bool) -> Result<Presentation, ToolError> {
        let returned = self.len();
        let limited = P::LIMIT.map_or(returned, |limit| limit.min(returned));
        let truncation = (limited < returned).then(|| Truncation::of_list(returned, limited));
        present_list::<P, _>(&self[..limited], truncation, ui)
    }
}

/// Models shared with the store: presented without copying them.
#[diagnostic::do_not_recommend]
impl<M, P> ToolOutput<P> for Vec<Arc<M>>
where
    M: Model,
    P: Presenter<Model = M>,
{
    fn data_schema(generator: &mut SchemaGenerator) -> Schema {
        list_schema::<P>(generator)
    }

    fn present(self, ui: bool) -> Result<Presentation, ToolError> {
        let returned = self.len();
        let limited = P::LIMIT.map_or(returned, |limit| limit.min(returned));
        let truncation = (limited < returned).then(|| Truncation::of_list(returned, limited));
        present_list::<P, _>(&self[..limited], truncation, ui)
    }
}

#[diagnostic::do_not_recommend]
impl<M, P> ToolOutput<P> for Page<M>
where
    M: Model,
    P: Presenter<Model = M>,
{
    const PAGED: bool = true;

    fn data_schema(generator: &mut SchemaGenerator) -> Schema {
        list_schema::<P>(generator)
    }

    fn present(self, ui: bool) -> Result<Presentation, ToolError> {
        present_page::<P, _>(self, ui)
    }
}

/// A page of models shared with the store.
#[diagnostic::do_not_recommend]
impl<M, P> ToolOutput<P> for Page<Arc<M>>
where
    M: Model,
    P: Presenter<Model = M>,
{
    const PAGED: bool = true;

    fn data_schema(generator: &mut SchemaGenerator) -> Schema {
        list_schema::<P>(generator)
    }

    fn present(self, ui: bool) -> Result<Presentation, ToolError> {
        present_page::<P, _>(self, ui)
    }
}

/// Presents a page of models (owned or shared) with its facts.
fn present_page<P: Presenter, B: Borrow<P::Model>>(
    page: Page<B>,
    ui: bool,
) -> Result<Presentation, ToolError> {
    let returned = page.items.len();
    let limited = P::LIMIT.map_or(returned, |limit| limit.min(returned));
    // Always attached: the seal decides from the page's facts whether anything is missing.
    let truncation = Truncation {
        returned,
        limited,
        shown: limited,
        skipped: 0,
        total: page.total,
        offset: page.offset,
        next_cursor: page.next_cursor,
        more: page.more,
    };
    present_list::<P, _>(&page.items[..limited], Some(truncation), ui)
}

/// The schema of a presented collection: an array of `P`'s items, at most its agent limit.
fn list_schema<P: Presenter>(generator: &mut SchemaGenerator) -> Schema {
    let items = P::item_schema(generator);
    let mut schema = Schema::default();
    schema.insert("type".into(), "array".into());
    schema.insert("items".into(), items.to_value());
    if let Some(limit) = P::LIMIT {
        schema.insert("maxItems".into(), limit.into());
    }
    schema
}

/// Presents the models left after the agent limit.
fn present_list<P: Presenter, B: Borrow<P::Model>>(
    shown: &[B],
    truncation: Option<Truncation>,
    ui: bool,
) -> Result<Presentation, ToolError> {
    let items: Vec<P::Item<'_>> = shown.iter().map(|model| P::item(model.borrow())).collect();
    presented::<P, _>(Presented::Many(&items), &items, truncation, ui)
}

/// What presenter `P` makes of the views shown: suggestions, UI blocks (when `ui`: the client
/// draws them) and the data.
fn presented<P: Presenter, D: Serialize + ?Sized>(
    shown: Presented<'_, P::Item<'_>>,
    data: &D,
    truncation: Option<Truncation>,
    ui: bool,
) -> Result<Presentation, ToolError> {
    let suggestions = P::suggest(shown);
    // Built only for a client that draws them: for any other they would be sent nowhere.
    let ui = if ui { P::ui(shown) } else { Vec::new() };
    let (data, data_text, columns) = match shown {
        // A list of flat records is read as a table by most clients: its JSON text is written
        // later, only for a client that reads JSON.
        Presented::Many(items) if items.len() >= 2 => {
            let tree = serde_json::to_value(data).map_err(ToolError::internal)?;
            if super::flat_records(&tree, P::FIELDS) {
                (tree, None, P::FIELDS)
            } else {
                let text = serde_json::to_string(data).map_err(ToolError::internal)?;
                (tree, Some(text), &[][..])
            }
        }
        _ => {
            let (data, text) = serialize_twice(data)?;
            (data, Some(text), &[][..])
        }
    };
    Ok(Presentation {
        data,
        data_text,
        columns,
        ui,
        suggestions,
        declared_actions: P::ACTIONS,
        declared_ui: P::UI_KINDS,
        truncation,
        media: Vec::new(),
    })
}

/// The data twice, both straight from the value: as a JSON tree for `structuredContent` and as
/// text for the first content block. Writing the text from the tree instead would walk it a
/// second time, slower than serializing the view again.
fn serialize_twice<T: Serialize + ?Sized>(value: &T) -> Result<(Value, String), ToolError> {
    let text = serde_json::to_string(value).map_err(ToolError::internal)?;
    let data = serde_json::to_value(value).map_err(ToolError::internal)?;
    Ok((data, text))
}

//! Presenters: what the agent perceives (SPEC P1–P5).
//!
//! A presenter turns model values into the package an agent receives: the egress view (only
//! the listed fields), the rules that tell it how to read them, an agent limit for
//! collections, suggested next actions and UI blocks rendered by the server.

mod outputs;
mod records;
mod ui;

pub(crate) use records::{flat_records, json_text};
pub use ui::UiBlock;

use std::borrow::Cow;
use std::marker::PhantomData;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;
use serde_json::Value;

use crate::error::ToolError;
use crate::model::{FieldInfo, Model};

/// A presenter over one model. `#[presenter]` implements it; its [`Item`](Presenter::Item) is
/// the generated view type, which borrows the model and contains only the listed fields.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a presenter",
    label = "not a presenter",
    note = "declare one with `#[fusion::presenter(Model, fields(...))]`"
)]
pub trait Presenter: Send + Sync + 'static {
    /// The model presented.
    type Model: Model;
    /// The egress view of one model value: only the presented fields, with its own serializer.
    type Item<'a>: Serialize + Send + Sync;
    /// The presenter's name.
    const NAME: &'static str;
    /// The fields the agent sees, in order.
    const FIELDS: &'static [&'static str];
    /// The rules attached to every response: labels of the presented fields, then the
    /// presenter's own rules.
    const RULES: &'static [&'static str];
    /// The most items of a collection the agent receives; `None` for no limit.
    const LIMIT: Option<usize>;
    /// The most tokens an answer with this presenter's data may cost an agent; `None` for no
    /// budget (a tool may set its own). Needs the `tokens` feature.
    const MAX_TOKENS: Option<usize> = None;
    /// The canonical keys of every tool this presenter may suggest (checked at build).
    const ACTIONS: &'static [&'static str];
    /// The fields presented through presenters of their own, with those presenters.
    const NESTED: &'static [NestedPresenter] = &[];
    /// The kinds of block [`ui`](Presenter::ui) may render ([`UiBlock::kind`]); a block of
    /// another kind is dropped and logged, never sent. `#[presenter]` sets it to the kinds
    /// `ui_kinds = […]` lists, or to every kind when `ui = …` comes without it; none by
    /// default, so an impl that overrides `ui` sets it too.
    const UI_KINDS: &'static [&'static str] = &[];

    /// The view of one model value.
    fn item(model: &Self::Model) -> Self::Item<'_>;

    /// The JSON schema of one item.
    fn item_schema(generator: &mut SchemaGenerator) -> Schema;

    /// Suggested next actions, computed from the data shown.
    fn suggest(shown: Presented<'_, Self::Item<'_>>) -> Vec<Suggestion> {
        let _ = shown;
        Vec::new()
    }

    /// UI blocks, computed from the data shown.
    fn ui(shown: Presented<'_, Self::Item<'_>>) -> Vec<UiBlock> {
        let _ = shown;
        Vec::new()
    }
}

/// What a presenter's suggestion and UI functions receive: the views that the agent is shown
/// (after the agent limit), never the raw models.
#[derive(Debug)]
pub enum Presented<'v, V> {
    /// A single value.
    One(&'v V),
    /// A collection (already cut to the agent limit).
    Many(&'v [V]),
}

impl<V> Clone for Presented<'_, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<V> Copy for Presented<'_, V> {}

impl<'v, V> Presented<'v, V> {
    /// All items shown: one or many.
    pub fn items(self) -> &'v [V] {
        match self {
            Presented::One(one) => std::slice::from_ref(one),
            Presented::Many(many) => many,
        }
    }

    /// The single value, when one value is presented.
    pub fn one(self) -> Option<&'v V> {
        match self {
            Presented::One(one) => Some(one),
            Presented::Many(_) => None,
        }
    }
}

/// A presented field whose value is presented by a presenter of its own (a nested model).
#[derive(Debug, Clone, Copy)]
pub struct NestedPresenter {
    /// The field of the outer presenter.
    pub field: &'static str,
    /// The facts of the presenter of its value.
    pub presenter: fn() -> PresenterInfo,
}

// By field and presenter name: comparing the presenters' facts whole would never end for a
// presenter that nests itself.
impl PartialEq for NestedPresenter {
    fn eq(&self, other: &Self) -> bool {
        self.field == other.field && (self.presenter)().name == (other.presenter)().name
    }
}

impl Eq for NestedPresenter {}

/// A value that a presenter may list as it is: serializable and described by a schema.
///
/// Every `Serialize + JsonSchema` type is one: scalars, `String`, enums, collections, and
/// your own types. A model is not (its raw value never reaches the wire: present it through
/// its own presenter, `fields(customer = CustomerView)`), and neither is a type that holds a
/// [`Hidden`](crate::Hidden) value, since `Hidden` cannot be serialized.
///
/// `serde_json::Value` is presented as it is: Fusion cannot see inside it. It cannot hold a
/// `Hidden` value or a model (neither converts to JSON), so it carries only what the code put
/// in it on purpose; prefer typed fields, whose schema the agent receives.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be presented as it is",
    label = "a presented field is `Serialize + JsonSchema`, or is presented by a presenter of its own",
    note = "a model (or an `Option` or `Vec` of one) is presented through its presenter: `fields(this_field = ItsPresenter)`",
    note = "a `Hidden` value never reaches the wire, nor does a type that holds one"
)]
pub trait PresentedValue: Serialize + JsonSchema {}

// Not recommended: a model listed as it is should hear "present it through its presenter", not
// "implement `Serialize`".
#[diagnostic::do_not_recommend]
impl<T: Serialize + JsonSchema + ?Sized> PresentedValue for T {}

/// A presented field's value as its view serializes it: only if it is presentable as it is
/// (used by generated code).
#[doc(hidden)]
pub struct PresentedField<'a, T: ?Sized>(pub &'a T);

impl<T: ?Sized> std::fmt::Debug for PresentedField<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PresentedField")
    }
}

impl<T: PresentedValue + ?Sized> Serialize for PresentedField<'_, T> {
    #[inline]
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// A presented field's schema, chosen by autoref (used by generated code):
/// `(&PresentedSchema::<T>::PROBE).presented_schema(generator)`. A field that cannot be
/// presented already fails to compile where its value is serialized, with its own message;
/// its schema takes the fallback so that the one mistake is reported once.
#[doc(hidden)]
pub struct PresentedSchema<T: ?Sized>(std::marker::PhantomData<fn() -> *const T>);

impl<T: ?Sized> PresentedSchema<T> {
    pub const PROBE: Self = Self(std::marker::PhantomData);
}

impl<T: ?Sized> std::fmt::Debug for PresentedSchema<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PresentedSchema")
    }
}

/// The schema of a presentable field (used by generated code).
#[doc(hidden)]
pub trait PresentableSchema {
    fn presented_schema(&self, generator: &mut SchemaGenerator) -> Schema;
}

impl<T: PresentedValue + ?Sized> PresentableSchema for PresentedSchema<T> {
    fn presented_schema(&self, generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<T>()
    }
}

/// The fallback for a field that cannot be presented (used by generated code): never part of
/// a program that compiles, since the field's serialization is then an error. A schema that
/// admits nothing, should that ever change.
#[doc(hidden)]
pub trait UnpresentableSchema {
    fn presented_schema(&self, generator: &mut SchemaGenerator) -> Schema;
}

impl<T: ?Sized> UnpresentableSchema for &PresentedSchema<T> {
    fn presented_schema(&self, _: &mut SchemaGenerator) -> Schema {
        Schema::from(false)
    }
}

/// A presenter of the values of a nested field of type `T`: its model, an `Option` or a `Vec`
/// of it. `#[presenter]` implements it for all three.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not present `{T}`",
    label = "a nested presenter presents a field that holds its own model",
    note = "a nested field holds the nested presenter's model, or an `Option` or `Vec` of it"
)]
pub trait PresenterOf<T>: Presenter {
    /// What suggestion and UI functions see of the value: views, never the models.
    type Views<'a>
    where
        T: 'a;
    /// The views of the value.
    fn views(value: &T) -> Self::Views<'_>;
    /// Serializes the views.
    fn serialize_views<S: serde::Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error>;
    /// The schema of the views.
    fn views_schema(generator: &mut SchemaGenerator) -> Schema;
    /// The value, to serialize (used by generated code).
    #[doc(hidden)]
    fn wire(value: &T) -> NestedWire<'_, Self, T>
    where
        Self: Sized,
    {
        NestedWire(value, PhantomData)
    }
}

/// How the `PresenterOf` impls that `#[presenter]` emits present one value, an `Option` or a
/// `Vec` (used by generated code).
#[doc(hidden)]
pub mod nested {
    use super::*;

    pub fn one<P: Presenter>(value: &P::Model) -> P::Item<'_> {
        P::item(value)
    }

    pub fn serialize_one<P: Presenter, S: serde::Serializer>(
        value: &P::Model,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        P::item(value).serialize(serializer)
    }

    pub fn one_schema<P: Presenter>(generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<ItemSchema<P>>()
    }

    pub fn option<P: Presenter>(value: &Option<P::Model>) -> Option<P::Item<'_>> {
        value.as_ref().map(P::item)
    }

    pub fn serialize_option<P: Presenter, S: serde::Serializer>(
        value: &Option<P::Model>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        value.as_ref().map(P::item).serialize(serializer)
    }

    pub fn option_schema<P: Presenter>(generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<Option<ItemSchema<P>>>()
    }

    pub fn vec<P: Presenter>(value: &[P::Model]) -> Vec<P::Item<'_>> {
        value.iter().map(P::item).collect()
    }

    pub fn serialize_vec<P: Presenter, S: serde::Serializer>(
        value: &[P::Model],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(value.iter().map(P::item))
    }

    pub fn vec_schema<P: Presenter>(generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<Vec<ItemSchema<P>>>()
    }
}

/// A nested value on its way to the wire, presented by `P` (used by generated code).
#[doc(hidden)]
pub struct NestedWire<'a, P, T>(&'a T, PhantomData<fn() -> P>);

impl<P, T> std::fmt::Debug for NestedWire<'_, P, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NestedWire")
    }
}

impl<P: PresenterOf<T>, T> Serialize for NestedWire<'_, P, T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        P::serialize_views(self.0, serializer)
    }
}

/// A nested field of a view: its value, which only `P` presents (never serialized raw).
pub struct Nested<'a, P, T> {
    value: &'a T,
    presenter: PhantomData<fn() -> P>,
}

impl<'a, P, T> Nested<'a, P, T> {
    /// Wraps a nested field's value (used by generated code).
    #[doc(hidden)]
    pub fn new(value: &'a T) -> Self {
        Nested {
            value,
            presenter: PhantomData,
        }
    }

    /// The raw value, for the view's serializer (used by generated code).
    #[doc(hidden)]
    pub fn __fusion_value(&self) -> &'a T {
        self.value
    }
}

impl<'a, P: PresenterOf<T>, T> Nested<'a, P, T> {
    /// The views of the nested value, as the agent sees them: `P`'s item, or an `Option` or
    /// `Vec` of items.
    pub fn view(&self) -> P::Views<'a> {
        P::views(self.value)
    }
}

impl<P, T> std::fmt::Debug for Nested<'_, P, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Nested<{}>", std::any::type_name::<P>())
    }
}

/// The schema of presenter `P`'s item, as a named definition, so that nested presenters (even
/// one presenting its own model again) are described once and referenced.
struct ItemSchema<P>(PhantomData<fn() -> P>);

impl<P: Presenter> JsonSchema for ItemSchema<P> {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed(P::NAME)
    }

    fn schema_id() -> Cow<'static, str> {
        Cow::Borrowed(std::any::type_name::<P>())
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        P::item_schema(generator)
    }
}

/// A suggested next action (SPEC P4): a tool (by canonical key), why, and optional arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Suggestion {
    pub(crate) tool: Cow<'static, str>,
    pub(crate) reason: Cow<'static, str>,
    pub(crate) arguments: Option<Value>,
}

impl Suggestion {
    /// Suggests calling `tool` (a canonical key such as `billing.void_invoice`) for `reason`.
    pub fn new(tool: impl Into<Cow<'static, str>>, reason: impl Into<Cow<'static, str>>) -> Self {
        Suggestion {
            tool: tool.into(),
            reason: reason.into(),
            arguments: None,
        }
    }

    /// Suggests the arguments too.
    #[must_use]
    pub fn with_arguments(mut self, arguments: Value) -> Self {
        self.arguments = Some(arguments);
        self
    }

    /// The tool's canonical key.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// Why the agent might call it.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The suggested arguments.
    pub fn arguments(&self) -> Option<&Value> {
        self.arguments.as_ref()
    }
}

/// How a collection reached the agent: what the handler returned, what the presenter's agent
/// limit left of it, what the egress budget let out, and, for a [`Page`], where it sits in the
/// whole collection. One value describes the whole cut, so that the agent gets one notice.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Truncation {
    /// Items the handler returned.
    pub returned: usize,
    /// Items left after the presenter's agent limit.
    pub limited: usize,
    /// Items shown: fewer than `limited` when the egress budget cut more.
    pub shown: usize,
    /// Items left out because each is over the egress budget on its own: the first of the
    /// ones left by the agent limit, when not even it fits. Counted as passed, so that paging
    /// moves on rather than asking for the same offset again.
    pub skipped: usize,
    /// Items there are in all, when known: a page's total, or everything the handler returned
    /// when it returned a plain collection.
    pub total: Option<u64>,
    /// The position of the first returned item in the whole collection, when the page says.
    pub offset: Option<u64>,
    /// The opaque cursor of the items after the returned ones, when the page says.
    pub next_cursor: Option<String>,
    /// Items exist after the returned ones, though their total is not known (the page says).
    pub more: bool,
}

impl Truncation {
    /// A plain collection of `returned` items, of which the agent limit leaves `limited`.
    pub(crate) fn of_list(returned: usize, limited: usize) -> Self {
        Truncation {
            returned,
            limited,
            shown: limited,
            skipped: 0,
            total: Some(returned as u64),
            offset: None,
            next_cursor: None,
            more: false,
        }
    }

    /// Whether the egress budget cut items (bytes) after the agent limit (items).
    pub fn by_budget(&self) -> bool {
        self.shown < self.limited
    }

    /// Items passed over: shown, or skipped as too large to show.
    pub fn passed(&self) -> usize {
        self.shown + self.skipped
    }

    /// Items there are but not shown, when the total is known.
    pub fn hidden(&self) -> Option<u64> {
        self.total
            .map(|total| total.saturating_sub(self.shown as u64))
    }
}

/// One page of a collection that is paged at the source (SPEC P3): the items a handler fetched,
/// and what it knows of the rest. Return it instead of a `Vec` so that the agent is told how
/// many items exist and how to get the next ones:
///
/// ```
/// # use fusion_runtime::Page;
/// // Items 40 to 59 of 333, fetched with `LIMIT 20 OFFSET 40`.
/// let page = Page::new(vec!["INV-41"; 20]).with_total(333).at_offset(40);
/// assert_eq!(page.total(), Some(333));
/// ```
///
/// The items go through the presenter (its agent limit still applies) and the egress budget;
/// the envelope's `meta.truncated` and the truncation notice then describe the whole cut:
/// `total`, the items shown, and the `offset` (when the tool takes an integer `offset`
/// argument) or `cursor` (when it takes a string `cursor` argument) that continues exactly
/// after the last item shown. An opaque cursor continues after the whole page only: when the
/// limit or the budget shows less than the page, it is not given (it would skip items) unless
/// the page also says its offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<M> {
    items: Vec<M>,
    total: Option<u64>,
    offset: Option<u64>,
    next_cursor: Option<String>,
    more: bool,
}

impl<M> Page<M> {
    /// A page of `items`, with nothing known of the rest yet.
    pub fn new(items: Vec<M>) -> Self {
        Page {
            items,
            total: None,
            offset: None,
            next_cursor: None,
            more: false,
        }
    }

    /// How many items the whole collection has (e.g. a `COUNT(*)` with the same filters).
    #[must_use]
    pub fn with_total(mut self, total: u64) -> Self {
        self.total = Some(total);
        self
    }

    /// The position of the first item in the whole collection: the `offset` the page was
    /// fetched from.
    #[must_use]
    pub fn at_offset(mut self, offset: u64) -> Self {
        self.offset = Some(offset);
        self
    }

    /// Whether items exist after this page, for a page that does not count the whole
    /// collection (a handler that fetched one item more than it returns knows): the agent is
    /// then told that more exist and, with [`at_offset`](Page::at_offset), the offset of the
    /// next ones. A [`total`](Page::with_total) says it already.
    ///
    /// ```
    /// # use fusion_runtime::Page;
    /// // `LIMIT 21 OFFSET 40` gave 21 rows: 20 are returned, and more follow.
    /// let page = Page::new(vec!["INV-41"; 20]).at_offset(40).with_more(true);
    /// assert!(page.has_more());
    /// ```
    #[must_use]
    pub fn with_more(mut self, more: bool) -> Self {
        self.more = more;
        self
    }

    /// The opaque cursor that fetches the items after this page; none on the last page.
    #[must_use]
    pub fn with_next_cursor(mut self, cursor: impl Into<String>) -> Self {
        self.next_cursor = Some(cursor.into());
        self
    }

    /// The items.
    pub fn items(&self) -> &[M] {
        &self.items
    }

    /// The size of the whole collection, if known.
    pub fn total(&self) -> Option<u64> {
        self.total
    }

    /// The position of the first item, if known.
    pub fn offset(&self) -> Option<u64> {
        self.offset
    }

    /// The cursor of the next page, if any.
    pub fn next_cursor(&self) -> Option<&str> {
        self.next_cursor.as_deref()
    }

    /// Whether items exist after this page: said by [`with_more`](Page::with_more), a next
    /// cursor, or a total beyond the page.
    pub fn has_more(&self) -> bool {
        self.more
            || self.next_cursor.is_some()
            || matches!((self.offset, self.total),
                (Some(offset), Some(total)) if offset.saturating_add(self.items.len() as u64) < total)
    }

    /// The items, taken out.
    pub fn into_items(self) -> Vec<M> {
        self.items
    }
}

/// What a handler's result becomes once presented: the egress data and what accompanies it.
#[derive(Debug)]
pub struct Presentation {
    pub(crate) data: Value,
    /// The data as JSON text, written straight from the view (faster than from `data`); `None`
    /// when it is written only if someone reads it (see [`Presentation::data_json`]).
    pub(crate) data_text: Option<String>,
    /// The presenter's fields in order when `data_text` was left out because `data` is a list
    /// of flat records with these keys (empty otherwise): most clients read such a list as a
    /// table, so its JSON text would be written for nothing.
    pub(crate) columns: &'static [&'static str],
    pub(crate) ui: Vec<UiBlock>,
    pub(crate) suggestions: Vec<Suggestion>,
    pub(crate) declared_actions: &'static [&'static str],
    /// The kinds of UI block the presenter declared; a block of another kind is dropped.
    pub(crate) declared_ui: &'static [&'static str],
    pub(crate) truncation: Option<Truncation>,
    /// Non-text blocks attached by [`WithMedia`](crate::media::WithMedia), sent after the text.
    pub(crate) media: Vec<crate::media::Media>,
}

impl Presentation {
    /// Plain data with nothing attached.
    pub fn plain(data: Value) -> Self {
        Presentation {
            data,
            data_text: None,
            columns: &[],
            ui: Vec::new(),
            suggestions: Vec::new(),
            declared_actions: &[],
            declared_ui: &[],
            truncation: None,
            media: Vec::new(),
        }
    }

    /// The data that goes to the agent.
    pub fn data(&self) -> &Value {
        &self.data
    }

    /// The data's JSON text, taken out: as written from the view, or written now from `data`
    /// with each record's keys in the presenter's order (the text the view writes).
    pub(crate) fn take_data_json(&mut self) -> String {
        self.data_text
            .take()
            .unwrap_or_else(|| json_text(&self.data, self.columns))
    }
}

/// Marks a tool whose result is not a model and is serialized as it is.
#[derive(Debug)]
pub enum Plain {}

/// A handler's successful result, as presented by `P` ([`Plain`] when the tool has no
/// presenter).
///
/// A model (or a `Vec` of models) is only a `ToolOutput` of its presenters; a plain
/// `Serialize + JsonSchema` value is a `ToolOutput<Plain>`. A model is never `Serialize`, so a
/// tool cannot return one without a presenter.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the result of this tool",
    label = "this result type cannot reach the agent as is",
    note = "a model reaches the agent only through a presenter: add `returns = SomePresenter` to `#[tool]`",
    note = "a tool without a presenter returns a type that is `Serialize + JsonSchema`"
)]
pub trait ToolOutput<P: ?Sized>: Send + Sized + 'static {
    /// Whether the value is a [`Page`]: the tool's `offset` and `cursor` arguments then say
    /// where the next items are, even when nothing else cuts the result.
    const PAGED: bool = false;
    /// The schema of the envelope's `data`.
    fn data_schema(generator: &mut SchemaGenerator) -> Schema;
    /// Presents the value; with the presenter's UI blocks when `ui` (the client draws them).
    fn present(self, ui: bool) -> Result<Presentation, ToolError>;
}

/// Presents a handler's result, with UI blocks when `ui` (used by generated code).
#[doc(hidden)]
pub fn present<P: ?Sized, T, E>(result: Result<T, E>, ui: bool) -> Result<Presentation, ToolError>
where
    T: ToolOutput<P>,
    E: Into<ToolError>,
{
    result.map_err(Into::into)?.present(ui)
}

/// The schema of a presenter's item: a closed object whose fields are all present (used by
/// generated code).
#[doc(hidden)]
pub fn object_schema(properties: serde_json::Map<String, Value>, required: &[&str]) -> Schema {
    let mut schema = Schema::default();
    schema.insert("type".into(), "object".into());
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert("required".into(), required.to_vec().into());
    schema.insert("additionalProperties".into(), false.into());
    schema
}

/// Whether an argument of type `T` must be present: exactly when an absent value (null) is
/// not acceptable to it, as for serde itself (used by generated code).
#[doc(hidden)]
pub fn is_required<T: serde::de::DeserializeOwned>() -> bool {
    T::deserialize(&Value::Null).is_err()
}

/// The presenter-facing facts a registry keeps for introspection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresenterInfo {
    /// The presenter's name.
    pub name: &'static str,
    /// The model presented.
    pub model: &'static str,
    /// What the model declares about each of its fields (its guarded fields are refused on
    /// every input surface of a server that presents it).
    pub model_fields: &'static [FieldInfo],
    /// The fields the agent sees.
    pub fields: &'static [&'static str],
    /// The rules attached to every response.
    pub rules: &'static [&'static str],
    /// The agent limit for collections.
    pub limit: Option<usize>,
    /// The token budget of an answer.
    pub max_tokens: Option<usize>,
    /// The tools it may suggest.
    pub actions: &'static [&'static str],
    /// The fields it presents through presenters of their own.
    pub nested: &'static [NestedPresenter],
    /// The kinds of UI block it may render ([`Presenter::UI_KINDS`]); empty when it renders
    /// none.
    pub ui_kinds: &'static [&'static str],
}

impl PresenterInfo {
    /// The facts of presenter `P`.
    pub fn of<P: Presenter>() -> Self {
        PresenterInfo {
            name: P::NAME,
            model: <P::Model as Model>::NAME,
            model_fields: <P::Model as Model>::FIELDS,
            fields: P::FIELDS,
            rules: P::RULES,
            limit: P::LIMIT,
            max_tokens: P::MAX_TOKENS,
            actions: P::ACTIONS,
            nested: P::NESTED,
            ui_kinds: P::UI_KINDS,
        }
    }

    /// The label of a presented field: its rule, `field: label`, without the field's name.
    pub fn label(&self, field: &str) -> Option<&'static str> {
        let index = self.fields.iter().position(|listed| *listed == field)?;
        self.rules
            .get(index)?
            .strip_prefix(field)?
            .strip_prefix(": ")
    }

    /// The presenter's own rules: its rules after the labels of its fields.
    pub fn own_rules(&self) -> &'static [&'static str] {
        let labels = self
            .fields
            .iter()
            .take_while(|field| self.label(field).is_some())
            .count();
        &self.rules[labels..]
    }

    /// Every rule an agent receives with this presenter's data: its own, then those of its
    /// nested presenters, each labelled with the field it describes (`customer.name: …`).
    pub fn all_rules(&self) -> Vec<String> {
        let mut rules: Vec<String> = self.rules.iter().map(|rule| (*rule).to_owned()).collect();
        self.nested_rules("", 0, &mut rules);
        rules
    }

    /// A presenter may nest itself (a manager is an employee): the depth is bounded.
    fn nested_rules(&self, prefix: &str, depth: usize, rules: &mut Vec<String>) {
        const MAX_DEPTH: usize = 4;
        if depth >= MAX_DEPTH {
            return;
        }
        for nested in self.nested {
            let inner = (nested.presenter)();
            let path = format!("{prefix}{}", nested.field);
            for rule in inner.rules {
                let labelled = rule
                    .split_once(": ")
                    .filter(|(field, _)| inner.fields.contains(field));
                let text = match labelled {
                    Some((field, label)) => format!("{path}.{field}: {label}"),
                    None => format!("In {path}: {rule}"),
                };
                if !rules.contains(&text) {
                    rules.push(text);
                }
            }
            inner.nested_rules(&format!("{path}."), depth + 1, rules);
        }
    }
}

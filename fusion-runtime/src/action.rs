//! What a compiled action is, read back (SPEC T1, T2, S1): its verb, settings, schemas and the
//! name an agent calls it by. A leaf of the runtime: the stages of the request path (access,
//! middleware, the envelope) read actions through [`ActionInfo`] without knowing how a server
//! is built or run.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{JsonObject, ToolAnnotations};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::guard::{Concurrency, RateLimit, Serialization};
use crate::key::{Glob, ToolKey};
use crate::present::PresenterInfo;

/// The verb of a tool (SPEC T1). It sets the MCP annotations and what the runtime does around
/// the call: what may be retried, what is audited, what is serialized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// Reads; never changes anything. `readOnlyHint: true`, `idempotentHint: true`.
    Query,
    /// Changes state; destructive unless declared otherwise. `destructiveHint: true`.
    Mutation,
    /// Does something that is neither a read nor a destructive write.
    Action,
}

impl Verb {
    /// `query`, `mutation` or `action`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Query => "query",
            Verb::Mutation => "mutation",
            Verb::Action => "action",
        }
    }
}

/// What a request runs: a tool's action, a resource read or a prompt. Middleware sees it
/// through [`ActionInfo::surface`]; a resource read and a prompt are [`Verb::Query`] actions
/// keyed by the resource's or prompt's canonical key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Surface {
    /// `tools/call`.
    Tool,
    /// `resources/read`.
    Resource,
    /// `prompts/get`.
    Prompt,
}

/// How long a query's result stays true (SPEC S1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CacheHint {
    /// The result never changes: the agent may reuse it.
    Immutable,
    /// The result may change at any time: the agent should fetch it again before relying on it.
    Volatile,
}

impl CacheHint {
    /// `immutable` or `volatile`.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheHint::Immutable => "immutable",
            CacheHint::Volatile => "volatile",
        }
    }
}

/// How a server exposes its actions to agents (SPEC T2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Exposition {
    /// One MCP tool per action: `billing.get_invoice` is exposed as `billing_get_invoice`.
    #[default]
    Flat,
    /// One MCP tool per namespace, with a discriminator argument `action`:
    /// `billing.get_invoice` is tool `billing` called with `{"action": "get_invoice", …}`.
    /// Every action keeps its own settings, schema and required fields.
    Grouped,
}

/// How one action is called: its own tool, or an action of a grouped tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exposure {
    /// A tool of its own, called by this name.
    Tool(Arc<str>),
    /// Action `action` of the grouped tool `tool`: `{"action": "<action>", …}`.
    Grouped {
        /// The grouped tool's name.
        tool: Arc<str>,
        /// The value of the `action` discriminator.
        action: Arc<str>,
    },
}

impl Exposure {
    /// The name of the MCP tool that carries the action.
    pub fn tool(&self) -> &str {
        match self {
            Exposure::Tool(tool) | Exposure::Grouped { tool, .. } => tool,
        }
    }

    /// The discriminator of a grouped action.
    pub fn action(&self) -> Option<&str> {
        match self {
            Exposure::Tool(_) => None,
            Exposure::Grouped { action, .. } => Some(action),
        }
    }

    /// How an agent is told to call it: `billing_get_invoice`, or
    /// `billing {"action":"get_invoice"}`.
    pub fn reference(&self) -> String {
        match self {
            Exposure::Tool(tool) => tool.to_string(),
            Exposure::Grouped { tool, action } => format!("{tool} {{\"action\":\"{action}\"}}"),
        }
    }

    /// How agent-facing text names it, backticks included: `` `billing_get_invoice` ``, or
    /// `` `billing` with `{"action":"get_invoice"}` ``.
    pub fn in_text(&self) -> String {
        match self {
            Exposure::Tool(tool) => format!("`{tool}`"),
            Exposure::Grouped { tool, action } => {
                format!("`{tool}` with `{{\"action\":\"{action}\"}}`")
            }
        }
    }

    /// The arguments that call the action: `arguments` with the discriminator added when
    /// grouped.
    pub fn arguments(&self, mut arguments: JsonObject) -> JsonObject {
        if let Exposure::Grouped { action, .. } = self {
            arguments.insert("action".into(), Value::from(action.as_ref()));
        }
        arguments
    }
}

/// Everything an action declares and everything computed from it when the server was built.
#[derive(Debug)]
pub struct ActionFacts {
    pub(crate) key: ToolKey,
    pub(crate) verb: Verb,
    pub(crate) description: String,
    pub(crate) title: Option<String>,
    pub(crate) tags: Vec<String>,
    /// The OAuth scopes declared to call it; empty for the defaults of the verb.
    pub(crate) scopes: Vec<String>,
    pub(crate) invalidates: Vec<Glob>,
    /// The queries `invalidates` matches, as the agent calls them: whose earlier results a
    /// success makes stale (set once every action of the server is named).
    pub(crate) stale: Vec<Exposure>,
    pub(crate) cache: Option<CacheHint>,
    pub(crate) annotations: ToolAnnotations,
    pub(crate) version: String,
    pub(crate) input_schema: Arc<JsonObject>,
    pub(crate) output_schema: Arc<JsonObject>,
    pub(crate) data_schema: Value,
    pub(crate) presenter: Option<PresenterInfo>,
    pub(crate) error_actions: &'static [&'static str],
    pub(crate) concurrency: Option<Concurrency>,
    pub(crate) serialization: Serialization,
    pub(crate) max_bytes: Option<usize>,
    /// The egress budget in tokens (feature `tokens`).
    pub(crate) max_tokens: Option<usize>,
    /// The data block's form for clients that read `structuredContent`.
    pub(crate) data_text: DataText,
    pub(crate) timeout: Option<std::time::Duration>,
    pub(crate) rate_limit: Option<RateLimit>,
    pub(crate) toolset: Option<String>,
    pub(crate) exposure: Exposure,
    /// Returns a page and takes a string `cursor` argument: a page's next cursor is given.
    pub(crate) takes_cursor: bool,
    pub(crate) surface: Surface,
    /// The arguments named like a guarded field that the author stated are not it, by path,
    /// with the reason (recorded in the lockfile).
    pub(crate) not_guarded: std::collections::BTreeMap<String, String>,
    /// Whether it may run as a task.
    pub(crate) task: crate::task::TaskSupport,
}

impl ActionFacts {
    /// What middleware and reports see of a resource or a prompt: a read (`Query`) under its
    /// key, with the server's default timeout.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn for_content(
        surface: Surface,
        key: ToolKey,
        name: &str,
        description: &str,
        title: Option<&str>,
        toolset: Option<&str>,
        input_schema: Arc<JsonObject>,
        presenter: Option<PresenterInfo>,
        timeout: Option<std::time::Duration>,
        version: &str,
    ) -> ActionFacts {
        let mut annotations = ToolAnnotations::new();
        annotations.read_only_hint = Some(true);
        ActionFacts {
            key,
            verb: Verb::Query,
            description: description.to_owned(),
            title: title.map(str::to_owned),
            tags: Vec::new(),
            scopes: Vec::new(),
            invalidates: Vec::new(),
            stale: Vec::new(),
            cache: None,
            annotations,
            version: version.to_owned(),
            input_schema,
            output_schema: Arc::new(JsonObject::new()),
            data_schema: Value::Null,
            presenter,
            error_actions: &[],
            concurrency: None,
            serialization: Serialization::Off,
            max_bytes: None,
            max_tokens: None,
            data_text: DataText::default(),
            timeout,
            rate_limit: None,
            toolset: toolset.map(str::to_owned),
            exposure: Exposure::Tool(Arc::from(name)),
            takes_cursor: false,
            not_guarded: Default::default(),
            task: crate::task::TaskSupport::Forbidden,
            surface,
        }
    }
}

/// An action, read back: everything it declares and everything computed from it.
#[derive(Debug, Clone, Copy)]
pub struct ActionInfo<'s>(pub(crate) &'s ActionFacts);

impl<'s> ActionInfo<'s> {
    /// The canonical key, `billing.get_invoice`.
    pub fn key(&self) -> &'s ToolKey {
        &self.0.key
    }

    /// The verb.
    pub fn verb(&self) -> Verb {
        self.0.verb
    }

    /// The description the action declared.
    pub fn description(&self) -> &'s str {
        &self.0.description
    }

    /// The title, if any.
    pub fn title(&self) -> Option<&'s str> {
        self.0.title.as_deref()
    }

    /// Tags.
    pub fn tags(&self) -> &'s [String] {
        &self.0.tags
    }

    /// The OAuth scopes the action declares (`#[tool(scopes = [...])]`); empty when it
    /// leaves them to the defaults of its verb.
    pub fn scopes(&self) -> &'s [String] {
        &self.0.scopes
    }

    /// The MCP annotations the verb and options produce.
    pub fn annotations(&self) -> &'s ToolAnnotations {
        &self.0.annotations
    }

    /// The action's own input schema.
    pub fn input_schema(&self) -> &'s JsonObject {
        &self.0.input_schema
    }

    /// The action's own output schema (the success envelope).
    pub fn output_schema(&self) -> &'s JsonObject {
        &self.0.output_schema
    }

    /// The presenter of its result, if any.
    pub fn presenter(&self) -> Option<&'s PresenterInfo> {
        self.0.presenter.as_ref()
    }

    /// The invalidation globs.
    pub fn invalidates(&self) -> &'s [Glob] {
        &self.0.invalidates
    }

    /// The cache hint of a query.
    pub fn cache(&self) -> Option<CacheHint> {
        self.0.cache
    }

    /// The version reported in responses.
    pub fn version(&self) -> &'s str {
        &self.0.version
    }

    /// The error actions declared statically.
    pub fn error_actions(&self) -> &'static [&'static str] {
        self.0.error_actions
    }

    /// Its concurrency limit, if any (SPEC G1).
    pub fn concurrency(&self) -> Option<Concurrency> {
        self.0.concurrency
    }

    /// How its calls are serialized (SPEC G2).
    pub fn serialization(&self) -> &'s Serialization {
        &self.0.serialization
    }

    /// Its egress budget in bytes, if any (SPEC G3).
    pub fn max_bytes(&self) -> Option<usize> {
        self.0.max_bytes
    }

    /// Its egress budget in tokens, if any: the tool's, else its presenter's, else the
    /// server's.
    pub fn max_tokens(&self) -> Option<usize> {
        self.0.max_tokens
    }

    /// How long a call may take, if limited.
    pub fn timeout(&self) -> Option<std::time::Duration> {
        self.0.timeout
    }

    /// Whether it may run as a task.
    pub fn task(&self) -> crate::task::TaskSupport {
        self.0.task
    }

    /// How often each caller may call it, if limited (the server's own limit applies too).
    pub fn rate_limit(&self) -> Option<RateLimit> {
        self.0.rate_limit
    }

    /// How an agent calls it.
    pub fn exposure(&self) -> &'s Exposure {
        &self.0.exposure
    }

    /// The name of the exposed tool that carries this action.
    pub fn exposed_tool(&self) -> &'s str {
        self.0.exposure.tool()
    }

    /// The toolset the action belongs to, if any.
    pub fn toolset(&self) -> Option<&'s str> {
        self.0.toolset.as_deref()
    }

    /// Whether this is a tool's action, a resource read or a prompt. For a resource or a
    /// prompt, [`key`](Self::key) is its canonical key, [`verb`](Self::verb) is
    /// [`Verb::Query`] and [`exposed_tool`](Self::exposed_tool) its listed name.
    pub fn surface(&self) -> Surface {
        self.0.surface
    }
}

/// How every action of a server is called, by canonical key: what suggestions, error actions
/// and tool keys in agent-facing text are rewritten to, in either exposition.
#[derive(Debug, Default)]
pub(crate) struct Names {
    by_key: HashMap<String, Name>,
}

#[derive(Debug)]
struct Name {
    exposure: Exposure,
    /// [`Exposure::reference`].
    reference: String,
    /// [`Exposure::in_text`].
    in_text: String,
}

impl Names {
    pub(crate) fn insert(&mut self, key: &ToolKey, exposure: &Exposure) {
        self.by_key.insert(
            key.as_str().to_owned(),
            Name {
                exposure: exposure.clone(),
                reference: exposure.reference(),
                in_text: exposure.in_text(),
            },
        );
    }

    pub(crate) fn exposure(&self, key: &str) -> Option<&Exposure> {
        self.by_key.get(key).map(|name| &name.exposure)
    }

    /// How an agent is told to call `key`, if it is a tool of the server.
    pub(crate) fn reference(&self, key: &str) -> Option<&str> {
        self.by_key.get(key).map(|name| name.reference.as_str())
    }

    /// `text` with every tool key written between backticks (`` `billing.list_invoices` ``)
    /// rewritten to how the agent calls that tool in this exposition ([`Exposure::in_text`]).
    /// Only a span that is exactly a key of the server changes; text without backticks is
    /// returned as it is, without copying.
    pub(crate) fn rewrite<'t>(&self, text: &'t str) -> Cow<'t, str> {
        rewrite_spans(text, |span| {
            self.by_key.get(span).map(|name| name.in_text.as_str())
        })
    }
}

/// `text` with each span between a pair of backticks for which `replacement` has a text
/// replaced by it, backticks included (pairs are read left to right). Text without backticks,
/// or without a span to replace, is returned as it is, without copying.
pub(crate) fn rewrite_spans<'t, 'r>(
    text: &'t str,
    replacement: impl Fn(&str) -> Option<&'r str>,
) -> Cow<'t, str> {
    if !text.contains('`') {
        return Cow::Borrowed(text);
    }
    let mut out = String::new();
    // Copied up to here.
    let mut copied = 0;
    let mut from = 0;
    while let Some(open) = text[from..].find('`').map(|at| from + at) {
        let Some(close) = text[open + 1..].find('`').map(|at| open + 1 + at) else {
            break;
        };
        if let Some(replacement) = replacement(&text[open + 1..close]) {
            out.push_str(&text[copied..open]);
            out.push_str(replacement);
            copied = close + 1;
        }
        from = close + 1;
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// What the data block of a success (its first text block) holds: the policy of the one copy
/// of each answer the model reads.
///
/// The default, [`DataText::Compact`], is for clients that receive `structuredContent`
/// (protocol 2025-06-18 and later): the program reads the data there, as JSON, and the model
/// reads the text block, where a uniform list is a table (TOON's tabular form) and anything
/// else the JSON it was. The 2025-11-25 specification asks a server that returns structured content to
/// also put "the serialized JSON in a TextContent block" *for backwards compatibility*: for
/// clients that predate `structuredContent` and read only `content`. Those get
/// [`DataText::Json`] ([`DataText::for_protocol`](crate::envelope::DataText::for_protocol)),
/// so that their programs can still parse it. Defined here, beside the facts of the tool whose
/// policy it is (a server or a tool may keep the JSON copy); its rendering is the envelope's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DataText {
    /// A uniform list as a table, anything else as JSON.
    #[default]
    Compact,
    /// The data as JSON, the specification's backward-compatible copy.
    Json,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(exposition: Exposition) -> Names {
        let mut names = Names::default();
        for key in ["billing.list_invoices", "ping"] {
            let key = ToolKey::parse(key).unwrap();
            let exposure = match (exposition, key.namespace()) {
                (Exposition::Grouped, Some(namespace)) => Exposure::Grouped {
                    tool: Arc::from(namespace),
                    action: Arc::from(key.action()),
                },
                (Exposition::Grouped, None) => Exposure::Tool(Arc::from(key.action())),
                (Exposition::Flat, _) => Exposure::Tool(Arc::from(key.flat_name())),
            };
            names.insert(&key, &exposure);
        }
        names
    }

    #[test]
    fn keys_between_backticks_become_the_exposed_call() {
        let text = "Call `billing.list_invoices` to find ids, then `ping`.";
        assert_eq!(
            names(Exposition::Flat).rewrite(text),
            "Call `billing_list_invoices` to find ids, then `ping`."
        );
        assert_eq!(
            names(Exposition::Grouped).rewrite(text),
            "Call `billing` with `{\"action\":\"list_invoices\"}` to find ids, then `ping`."
        );
    }

    #[test]
    fn only_an_exact_key_between_backticks_changes() {
        let names = names(Exposition::Flat);
        for text in [
            "billing.list_invoices without backticks",
            "`billing.list_invoices ` with a space",
            "`billing.list` is no key",
            "an `unclosed billing.list_invoices",
            "`a` `b` ``",
            "",
        ] {
            assert!(matches!(names.rewrite(text), Cow::Borrowed(same) if same == text));
        }
        // Pairs are read left to right: the second key is between the second pair.
        assert_eq!(
            names.rewrite("`x` `billing.list_invoices` and `billing.list_invoices`"),
            "`x` `billing_list_invoices` and `billing_list_invoices`"
        );
        // Multi-byte text around a key.
        assert_eq!(
            names.rewrite("é `billing.list_invoices` ✓"),
            "é `billing_list_invoices` ✓"
        );
    }
}

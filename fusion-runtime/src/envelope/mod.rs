//! The one response shape, as Rust types, sealed in one place (SPEC R4, S1, E1–E2).
//!
//! `structuredContent` is an [`Envelope`]: a [`Success`] `{"ok": true, "data": …, "meta"?: {…}}`
//! or a [`Failure`] `{"ok": false, "error": {…}, "meta"?: {…}}`, with what varies per call and
//! no more (issue 21: the agent pays for every token; what it reads is in the text blocks). Sealing builds these types, the
//! output schema every tool advertises is generated from them, and the tester reads results
//! back through them, so the three cannot drift. `content` carries the text blocks for the
//! agent, in this order: data (JSON), truncation notice, `<ui_passthrough>` blocks,
//! `<domain_rules>`, `<action_suggestions>`, `<cache_invalidation/>`; or one `<tool_error>`
//! block.

mod budget;
mod render;
mod rpc;
mod seal;

use std::fmt::Write as _;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::action::{ActionFacts, CacheHint, Verb};
use crate::xml;

pub(crate) use budget::COUNTS_TOKENS;
#[cfg(feature = "tokens")]
pub(crate) use budget::load_tokenizer;
pub use render::{ClientForm, DataText, UI_EXTENSION};
pub(crate) use rpc::{content_error, failure};
pub use seal::Dropped;
pub(crate) use seal::{Outcome, Reply, Sealed, seal_error, seal_success};

/// The `structuredContent` of every result of a Fusion tool: what a program reads. It says what
/// varies per call and no more; what the agent reads (the suggestions, an error's message,
/// recovery and tools to call) is in the text blocks, once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Envelope {
    /// The call succeeded.
    Success(Success),
    /// The call failed.
    Failure(Failure),
}

/// A successful call's envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Success {
    /// Always `true`.
    pub ok: Const<true>,
    /// What the tool returned, as its presenter lets it out.
    pub data: Value,
    /// Facts about the response, when there are any.
    #[serde(default, skip_serializing_if = "Meta::is_empty")]
    pub meta: Meta,
}

/// A failed call's envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    /// Always `false`.
    pub ok: Const<false>,
    /// What went wrong, for programs (the agent reads the `<tool_error>` block).
    pub error: ErrorFacts,
    /// Facts about the response, when there are any.
    #[serde(default, skip_serializing_if = "Meta::is_empty")]
    pub meta: Meta,
}

/// A boolean that is always `B`: the `ok` discriminator of an [`Envelope`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Const<const B: bool>;

impl<const B: bool> Serialize for Const<B> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bool(B)
    }
}

impl<'de, const B: bool> Deserialize<'de> for Const<B> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        if bool::deserialize(deserializer)? == B {
            Ok(Const)
        } else {
            Err(serde::de::Error::custom(format_args!("expected `{B}`")))
        }
    }
}

impl<const B: bool> JsonSchema for Const<B> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        if B { "True".into() } else { "False".into() }
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "const": B })
    }
}

/// Facts about a response, success or failure, that vary per call. What is the same in every
/// answer of a tool (its name, its version) is in the listing; the suggested next calls are in
/// the `<action_suggestions>` block the agent reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(inline)]
pub struct Meta {
    /// The action of a grouped tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// How long the result stays true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheHint>,
    /// The collection was cut to the agent limit or the egress budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<Truncated>,
    /// The tools whose earlier results are now stale, by the names the agent calls them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalidates: Vec<String>,
}

impl Meta {
    /// Whether there is no fact to say (then `meta` is left out).
    pub fn is_empty(&self) -> bool {
        self == &Meta::default()
    }
}

/// How a collection reached the agent cut (SPEC P3, G3): by the page the handler fetched, the
/// presenter's agent limit and the egress budget, together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(inline)]
pub struct Truncated {
    /// Items shown.
    pub shown: u64,
    /// Items left out because each alone is over the response size limit (they come right
    /// after the shown ones; `nextOffset` is past them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<u64>,
    /// Items there are in all, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Items there are but not shown (`total - shown`), when the total is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<u64>,
    /// What cut last: the page, the agent limit or the egress budget.
    pub reason: CutReason,
    /// The position of the first item shown, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// The `offset` argument that shows the next items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
    /// The `cursor` argument that shows the next items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// What cut a collection last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(inline)]
pub enum CutReason {
    /// The handler returned one page of a larger collection.
    Page,
    /// The presenter's agent limit (items).
    Limit,
    /// The egress budget (bytes or tokens).
    Budget,
}

impl CutReason {
    /// `page`, `limit` or `budget`.
    pub fn as_str(self) -> &'static str {
        match self {
            CutReason::Page => "page",
            CutReason::Limit => "limit",
            CutReason::Budget => "budget",
        }
    }
}

/// A suggested next call (SPEC P4), with the exposed tool name and arguments the agent sends,
/// as the `<action_suggestions>` block says it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct SuggestedCall {
    /// The exposed tool to call.
    pub tool: String,
    /// The arguments to send (with the `action` discriminator in grouped exposition).
    pub arguments: Value,
    /// Why.
    pub reason: String,
}

/// A tool's failure as the agent is told it (SPEC E1, E2): all of it in the `<tool_error>` text
/// block, and its [`ErrorFacts`] in `structuredContent`. A failed resource read, prompt or
/// completion carries it whole as its JSON-RPC error's `data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(inline)]
pub struct ErrorBody {
    /// What went wrong, e.g. VALIDATION_ERROR or a domain code.
    pub code: String,
    /// What the agent reads.
    pub message: String,
    /// Whether the same call may succeed later.
    pub retryable: bool,
    /// What to do next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<String>,
    /// Tools to call instead, as the agent calls them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub available_actions: Vec<String>,
    /// Structured details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// How long to wait before retrying, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// The id under which the server logged an internal error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_id: Option<String>,
}

/// What a program needs of a failure, in `structuredContent`: its code and when it may be
/// retried, and the details and error id. The message, the recovery and the tools to call are
/// for the agent, in the `<tool_error>` block (with the details, the wait and the id too).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(inline)]
pub struct ErrorFacts {
    /// What went wrong, e.g. VALIDATION_ERROR or a domain code.
    pub code: String,
    /// The same call may succeed later (absent: it will not).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retryable: bool,
    /// Structured details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// How long to wait before retrying, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// The id under which the server logged an internal error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_id: Option<String>,
}

impl From<&ErrorBody> for ErrorFacts {
    fn from(body: &ErrorBody) -> Self {
        ErrorFacts {
            code: body.code.clone(),
            retryable: body.retryable,
            details: body.details.clone(),
            retry_after_ms: body.retry_after_ms,
            error_id: body.error_id.clone(),
        }
    }
}

/// The parts of an action's responses that never change, rendered when the server is built.
#[derive(Debug)]
pub(crate) struct SealedParts {
    /// The exposed tool that answers.
    pub(crate) tool: String,
    /// The meta of every response; a success adds its own facts.
    pub(crate) meta: Meta,
    /// The tools whose earlier results a success makes stale, as the agent calls them (never
    /// said of a failure).
    pub(crate) invalidates: Vec<String>,
    /// The globs over keys it invalidates, for the transport to notify the resources they
    /// match; `None` when a success invalidates nothing.
    pub(crate) invalidated: Option<std::sync::Arc<[crate::key::Glob]>>,
    pub(crate) rules_block: Option<String>,
    pub(crate) invalidation_block: Option<String>,
}

impl SealedParts {
    pub(crate) fn new(action: &ActionFacts) -> Self {
        let writes = action.verb != Verb::Query && !action.invalidates.is_empty();
        // The agent is told the tools it calls, never the globs over keys that state sync
        // matches (`invalidated`); a grouped tool is named once.
        let mut stale: Vec<String> = Vec::new();
        for exposure in &action.stale {
            if !stale.iter().any(|tool| tool == exposure.tool()) {
                stale.push(exposure.tool().to_owned());
            }
        }
        let told = writes && !stale.is_empty();
        SealedParts {
            tool: action.exposure.tool().to_owned(),
            meta: Meta {
                action: action.exposure.action().map(str::to_owned),
                cache: action.cache,
                ..Meta::default()
            },
            invalidates: if told { stale.clone() } else { Vec::new() },
            invalidated: writes.then(|| action.invalidates.as_slice().into()),
            rules_block: action
                .presenter
                .as_ref()
                .map(|presenter| not_listed(presenter.all_rules(), &action.output_schema))
                .filter(|rules| !rules.is_empty())
                .map(|rules| rules_block(&rules)),
            invalidation_block: told.then(|| {
                format!(
                    "<cache_invalidation cause=\"{}\" domains=\"{}\"/>",
                    xml::escape_attr(action.exposure.tool()),
                    xml::escape_attr(&stale.join(","))
                )
            }),
        }
    }

    /// For failures that happen before an action is chosen (grouped tools).
    pub(crate) fn for_tool(tool: &str) -> Self {
        SealedParts {
            tool: tool.to_owned(),
            meta: Meta::default(),
            invalidates: Vec::new(),
            invalidated: None,
            rules_block: None,
            invalidation_block: None,
        }
    }
}

/// The rules an answer still has to say: a rule the tool's output schema already gives as a
/// description (a field's label, `status: open, paid or voided`, as the field's description; a
/// presenter's rule as an enum value's meaning) was read with the listing, and is not sent
/// again with every answer.
fn not_listed(rules: Vec<String>, output_schema: &serde_json::Map<String, Value>) -> Vec<String> {
    fn descriptions<'s>(schema: &'s Value, found: &mut std::collections::HashSet<&'s str>) {
        match schema {
            Value::Object(members) => {
                if let Some(Value::String(description)) = members.get("description") {
                    found.insert(description);
                }
                for member in members.values() {
                    descriptions(member, found);
                }
            }
            Value::Array(items) => items.iter().for_each(|item| descriptions(item, found)),
            _ => {}
        }
    }
    let mut listed = std::collections::HashSet::new();
    for member in output_schema.values() {
        descriptions(member, &mut listed);
    }
    rules
        .into_iter()
        .filter(|rule| {
            let label = rule
                .split_once(": ")
                .filter(|(path, _)| !path.contains(' '))
                .map(|(_, label)| label);
            !listed.contains(rule.as_str()) && !label.is_some_and(|label| listed.contains(label))
        })
        .collect()
}

pub(crate) fn rules_block(rules: &[String]) -> String {
    let mut block = String::from("<domain_rules>");
    for rule in rules {
        let _ = write!(block, "\n- {}", xml::escape(rule));
    }
    block.push_str("\n</domain_rules>");
    block
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_read_back_what_they_write() {
        let success = Envelope::Success(Success {
            ok: Const,
            data: serde_json::json!([1, {"a": "b"}]),
            meta: Meta {
                action: Some("a".into()),
                cache: Some(CacheHint::Volatile),
                truncated: Some(Truncated {
                    shown: 1,
                    skipped: Some(1),
                    total: Some(3),
                    hidden: Some(2),
                    reason: CutReason::Budget,
                    offset: Some(3),
                    next_offset: Some(4),
                    next_cursor: Some("c".into()),
                }),
                invalidates: vec!["a.*".into()],
            },
        });
        let text = serde_json::to_string(&success).unwrap();
        assert!(text.contains("\"nextOffset\":4"), "{text}");
        assert!(text.contains("\"nextCursor\":\"c\""), "{text}");
        assert_eq!(serde_json::from_str::<Envelope>(&text).unwrap(), success);
        // `ok` tells the two shapes apart.
        let mut failure = serde_json::to_value(&success).unwrap();
        failure["ok"] = false.into();
        assert!(serde_json::from_value::<Envelope>(failure).is_err());
    }

    #[test]
    fn a_rule_the_listing_already_says_is_not_sent_again() {
        let schema = serde_json::json!({
            "data": {"properties": {
                "status": {"description": "open or voided", "oneOf": [
                    {"const": "voided", "description": "A voided invoice cannot change."}
                ]}
            }}
        });
        let rules = vec![
            "status: open or voided".to_owned(),
            "A voided invoice cannot change.".to_owned(),
            "Amounts are cents.".to_owned(),
            "status: something else".to_owned(),
        ];
        assert_eq!(
            not_listed(rules, schema.as_object().unwrap()),
            ["Amounts are cents.", "status: something else"]
        );
    }

    #[test]
    fn an_envelope_says_only_what_varies_per_call() {
        let success = Envelope::Success(Success {
            ok: Const,
            data: serde_json::json!({"id": "INV-1"}),
            meta: Meta::default(),
        });
        let text = serde_json::to_string(&success).unwrap();
        assert_eq!(text, r#"{"ok":true,"data":{"id":"INV-1"}}"#);
        assert_eq!(serde_json::from_str::<Envelope>(&text).unwrap(), success);
        let body = ErrorBody {
            code: "InvoiceNotFound".into(),
            message: "Invoice INV-4 does not exist.".into(),
            retryable: false,
            recovery: Some("Call `billing_list_invoices`.".into()),
            available_actions: vec!["billing_list_invoices".into()],
            details: None,
            retry_after_ms: None,
            error_id: None,
        };
        let failure = Envelope::Failure(Failure {
            ok: Const,
            error: ErrorFacts::from(&body),
            meta: Meta::default(),
        });
        let text = serde_json::to_string(&failure).unwrap();
        assert_eq!(text, r#"{"ok":false,"error":{"code":"InvoiceNotFound"}}"#);
        assert_eq!(serde_json::from_str::<Envelope>(&text).unwrap(), failure);
        let retryable = ErrorFacts {
            retryable: true,
            retry_after_ms: Some(5),
            ..ErrorFacts::from(&body)
        };
        assert_eq!(
            serde_json::to_value(&retryable).unwrap(),
            serde_json::json!({"code": "InvoiceNotFound", "retryable": true, "retryAfterMs": 5})
        );
    }
}

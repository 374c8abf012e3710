//! The names of an upstream's tools in what it says, as this server's callers call them.
//!
//! A Fusion upstream names its own tools to the agent: in recovery lines and messages, in
//! `availableActions`, in suggestions, in truncation notices, rules and descriptions, all as
//! *it* serves them (`billing_list_invoices`, or `billing` with an `action`). Behind a prefix the
//! gateway serves them under other names (`acct_billing_list_invoices`), so an agent following
//! the upstream's words would call a tool that does not exist. The gateway knows the mapping,
//! and rewrites what is a name and nothing else:
//!
//! - the names the envelope holds (`meta.invalidates`) and the lines of the text blocks that
//!   list names (`<available_actions>`, each suggestion of `<action_suggestions>`, the
//!   `<cache_invalidation/>` block's), exactly; a name the gateway does not serve (taken by
//!   another tool) is left out, as the upstream itself leaves out a name it does not serve;
//! - in agent-facing prose (messages, recovery lines, reasons, descriptions, and the text blocks
//!   Fusion writes beside the data: `<tool_error>`, `<truncation>`, `<domain_rules>`,
//!   `<action_suggestions>`, Markdown UI), only a span between backticks that is exactly the
//!   name of one of the upstream's tools: Fusion writes every tool it names that way.
//!
//! The envelope (`structuredContent`) names no tool, and is never touched: not its `data`, not
//! the text block that carries it, not a table, chart, diagram or code block. A result whose
//! `structuredContent` is not a Fusion envelope (another SDK's server) passes intact: nothing
//! says which of its words are names.

use std::borrow::Cow;
use std::collections::HashMap;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value};

use crate::action::rewrite_spans;

/// How the tools of one upstream are called here, by the names the upstream gives them.
#[derive(Debug, Default)]
pub(crate) struct Renames {
    /// Every tool of the upstream's last catalog: the name it is served under here, or `None`
    /// when it is not served (its name is another tool's).
    by_upstream_name: HashMap<String, Option<Served>>,
    /// Every tool is served under its own name (an unprefixed mount): nothing to rewrite.
    identity: bool,
}

#[derive(Debug)]
struct Served {
    name: String,
    /// `` `name` ``, as prose writes it.
    in_text: String,
}

impl Renames {
    /// From each upstream name to the name served here, if any.
    pub(crate) fn new(served: impl IntoIterator<Item = (String, Option<String>)>) -> Self {
        let by_upstream_name: HashMap<String, Option<Served>> = served
            .into_iter()
            .map(|(upstream, here)| {
                let here = here.map(|name| Served {
                    in_text: format!("`{name}`"),
                    name,
                });
                (upstream, here)
            })
            .collect();
        let identity = by_upstream_name
            .iter()
            .all(|(upstream, here)| here.as_ref().is_some_and(|here| here.name == *upstream));
        Renames {
            by_upstream_name,
            identity,
        }
    }

    /// The name `upstream` names is served under here, if it is served.
    fn name(&self, upstream: &str) -> Option<&str> {
        self.by_upstream_name
            .get(upstream)?
            .as_ref()
            .map(|served| served.name.as_str())
    }

    /// Prose: each span between backticks that is exactly a served tool's upstream name becomes
    /// its name here.
    pub(crate) fn text<'t>(&self, text: &'t str) -> Cow<'t, str> {
        if self.identity {
            return Cow::Borrowed(text);
        }
        rewrite_spans(text, |span| {
            self.by_upstream_name
                .get(span)?
                .as_ref()
                .map(|served| served.in_text.as_str())
        })
    }

    /// A reference to a tool: its name, then optionally a space and what follows it (the
    /// `{"action":…}` of a grouped tool). `None` when the tool is not served here.
    fn reference(&self, reference: &str) -> Option<String> {
        match reference.split_once(' ') {
            Some((name, rest)) => Some(format!("{} {rest}", self.name(name)?)),
            None => self.name(reference).map(str::to_owned),
        }
    }

    /// A result of one of the upstream's tools, as this server's callers call the tools it
    /// names (see the module's documentation).
    pub(crate) fn result(&self, result: &mut CallToolResult) {
        if self.identity {
            return;
        }
        let Some(Value::Object(envelope)) = &mut result.structured_content else {
            return;
        };
        if !is_envelope(envelope) {
            return;
        }
        self.stale(envelope);
        result.content.retain_mut(|block| {
            if let ContentBlock::Text(block) = block
                && let Some(rewritten) = self.block(&block.text)
            {
                block.text = rewritten;
                return !block.text.is_empty();
            }
            true
        });
    }

    /// `meta.invalidates`: the tools a success made stale, as served here.
    fn stale(&self, envelope: &mut Map<String, Value>) {
        let Some(Value::Object(meta)) = envelope.get_mut("meta") else {
            return;
        };
        if let Some(Value::Array(stale)) = meta.get_mut("invalidates") {
            stale.retain_mut(|tool| {
                let Some(here) = tool.as_str().and_then(|tool| self.name(tool)) else {
                    return false;
                };
                *tool = here.into();
                true
            });
            if stale.is_empty() {
                meta.remove("invalidates");
            }
        }
    }

    /// A text block Fusion writes beside the data, rewritten (empty when nothing of it is left);
    /// `None` for any other block (the data, a table, chart, diagram or code) and for one with
    /// nothing to rewrite.
    fn block(&self, text: &str) -> Option<String> {
        const PROSE: [&str; 3] = [
            "<truncation ",
            "<domain_rules>",
            "<ui_passthrough type=\"markdown\">",
        ];
        let rewritten = if text.starts_with("<tool_error ") {
            self.lines(text, "<available_actions>", |line| {
                let Some(list) = line
                    .strip_prefix("<available_actions>")
                    .and_then(|line| line.strip_suffix("</available_actions>"))
                else {
                    return Some(self.text(line).into_owned());
                };
                let kept: Vec<String> = list
                    .split(", ")
                    .filter_map(|reference| self.reference(reference))
                    .collect();
                (!kept.is_empty())
                    .then(|| format!("<available_actions>{}</available_actions>", kept.join(", ")))
            })
        } else if text.starts_with("<action_suggestions>") {
            // `- tool {arguments}: reason`, one a line.
            let rewritten = self.lines(text, "- ", |line| {
                let (tool, rest) = line.strip_prefix("- ")?.split_once(' ')?;
                let tool = self.name(tool)?;
                // The arguments are data: only the reason after them is prose.
                let mut arguments = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
                let reason = match arguments.next() {
                    Some(Ok(_)) => &rest[arguments.byte_offset()..],
                    _ => return Some(format!("- {tool} {rest}")),
                };
                let arguments = &rest[..rest.len() - reason.len()];
                Some(format!("- {tool} {arguments}{}", self.text(reason)))
            });
            // Nothing left to suggest: no block.
            if !rewritten.contains("\n- ") {
                return Some(String::new());
            }
            rewritten
        } else if let Some(rest) = text.strip_prefix("<cache_invalidation cause=\"") {
            // `cause="tool" domains="tool,tool"`: tool names, which need no escaping.
            let (cause, rest) = rest.split_once("\" domains=\"")?;
            let domains = rest.strip_suffix("\"/>")?;
            let cause = self.name(cause).unwrap_or(cause);
            let domains: Vec<&str> = domains
                .split(',')
                .filter_map(|tool| self.name(tool))
                .collect();
            if domains.is_empty() {
                return Some(String::new());
            }
            format!(
                "<cache_invalidation cause=\"{cause}\" domains=\"{}\"/>",
                domains.join(",")
            )
        } else if PROSE.iter().any(|tag| text.starts_with(tag)) {
            match self.text(text) {
                Cow::Owned(rewritten) => rewritten,
                Cow::Borrowed(_) => return None,
            }
        } else {
            return None;
        };
        (rewritten != text).then_some(rewritten)
    }

    /// `text` with each line that starts with `marker` given to `line` (`None` leaves it out),
    /// and the others rewritten as prose.
    fn lines(&self, text: &str, marker: &str, line: impl Fn(&str) -> Option<String>) -> String {
        let mut out = String::with_capacity(text.len() + 16);
        for (index, each) in text.split('\n').enumerate() {
            let each = if each.starts_with(marker) {
                match line(each) {
                    Some(each) => Cow::Owned(each),
                    None => continue,
                }
            } else {
                self.text(each)
            };
            if index > 0 {
                out.push('\n');
            }
            out.push_str(&each);
        }
        out
    }
}

/// Whether `structured` has the shape of a Fusion envelope: `ok`, with `data` on a success or an
/// `error` with its `code` on a failure, and `meta`, nothing else.
fn is_envelope(structured: &Map<String, Value>) -> bool {
    let known = structured
        .keys()
        .all(|key| matches!(key.as_str(), "ok" | "data" | "error" | "meta"));
    let meta = structured.get("meta").is_none_or(Value::is_object);
    let body = match structured.get("ok") {
        Some(Value::Bool(true)) => {
            structured.contains_key("data") && !structured.contains_key("error")
        }
        Some(Value::Bool(false)) => {
            !structured.contains_key("data")
                && structured
                    .get("error")
                    .and_then(|error| error.get("code"))
                    .is_some_and(Value::is_string)
        }
        _ => false,
    };
    known && meta && body
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn renames() -> Renames {
        Renames::new([
            (
                "billing_get_invoice".to_owned(),
                Some("acct_billing_get_invoice".to_owned()),
            ),
            (
                "billing_list_invoices".to_owned(),
                Some("acct_billing_list_invoices".to_owned()),
            ),
            // Its name is another tool's here.
            ("billing_void_invoice".to_owned(), None),
        ])
    }

    #[test]
    fn only_names_between_backticks_change_in_prose() {
        let renames = renames();
        assert_eq!(
            renames.text("Call `billing_list_invoices`, not billing_list_invoices or `billing`."),
            "Call `acct_billing_list_invoices`, not billing_list_invoices or `billing`."
        );
        // A tool that is not served here keeps its words: there is no name to give it.
        assert_eq!(
            renames.text("Void it with `billing_void_invoice`."),
            "Void it with `billing_void_invoice`."
        );
    }

    #[test]
    fn an_unprefixed_upstream_is_left_as_it_is() {
        let renames = Renames::new([("ping".to_owned(), Some("ping".to_owned()))]);
        let mut result = CallToolResult::success(vec![ContentBlock::text("<domain_rules>`x`")]);
        result.structured_content = Some(json!({"ok": true, "data": 1}));
        let before = result.clone();
        renames.result(&mut result);
        assert_eq!(result, before);
    }

    #[test]
    fn a_failure_names_only_tools_served_here() {
        let renames = renames();
        let block = "<tool_error code=\"InvoiceNotFound\">\n<message>Invoice `billing_get_invoice` \
                     is gone.</message>\n<recovery>Call `billing_list_invoices`.</recovery>\n\
                     <available_actions>billing_list_invoices, billing_void_invoice</available_actions>\n\
                     </tool_error>";
        let mut result = CallToolResult::error(vec![ContentBlock::text(block)]);
        let envelope = json!({
            "ok": false,
            "error": {"code": "InvoiceNotFound", "details": {"note": "`billing_list_invoices`"}}
        });
        result.structured_content = Some(envelope.clone());
        renames.result(&mut result);
        // The envelope names no tool; its details are data.
        assert_eq!(result.structured_content, Some(envelope));
        assert_eq!(
            result.content[0].as_text().unwrap().text,
            "<tool_error code=\"InvoiceNotFound\">\n<message>Invoice `acct_billing_get_invoice` \
             is gone.</message>\n<recovery>Call `acct_billing_list_invoices`.</recovery>\n\
             <available_actions>acct_billing_list_invoices</available_actions>\n</tool_error>"
        );
    }

    #[test]
    fn suggestions_are_renamed_or_left_out_and_the_data_is_not_touched() {
        let renames = renames();
        let data = "{\"note\":\"`billing_list_invoices`\"}";
        let mut result = CallToolResult::success(vec![
            ContentBlock::text(data),
            ContentBlock::text(
                "<ui_passthrough type=\"code\" language=\"md\">\n`billing_list_invoices`\n</ui_passthrough>",
            ),
            ContentBlock::text(
                "<domain_rules>\n- List with `billing_list_invoices`.\n</domain_rules>",
            ),
            ContentBlock::text(
                "<action_suggestions>\n- billing_void_invoice {\"id\":\"INV-3\"}: Void it.\n\
                 - billing_list_invoices {}: See `billing_get_invoice` for one.\n</action_suggestions>",
            ),
        ]);
        result.structured_content = Some(json!({
            "ok": true,
            "data": {"note": "`billing_list_invoices`"},
            "meta": {"cache": "volatile"}
        }));
        renames.result(&mut result);
        let envelope = result.structured_content.as_ref().unwrap();
        assert_eq!(envelope["data"]["note"], "`billing_list_invoices`");
        let texts: Vec<&str> = result
            .content
            .iter()
            .map(|block| block.as_text().unwrap().text.as_str())
            .collect();
        assert_eq!(texts[0], data);
        assert!(
            texts[1].contains("\n`billing_list_invoices`\n"),
            "{}",
            texts[1]
        );
        assert_eq!(
            texts[2],
            "<domain_rules>\n- List with `acct_billing_list_invoices`.\n</domain_rules>"
        );
        assert_eq!(
            texts[3],
            "<action_suggestions>\n- acct_billing_list_invoices {}: See `acct_billing_get_invoice` \
             for one.\n</action_suggestions>"
        );
    }

    #[test]
    fn what_a_success_makes_stale_is_named_as_served_here() {
        let renames = renames();
        let mut result = CallToolResult::success(vec![
            ContentBlock::text("{}"),
            ContentBlock::text(
                "<cache_invalidation cause=\"billing_void_invoice\" \
                 domains=\"billing_get_invoice,billing_list_invoices,billing_void_invoice\"/>",
            ),
        ]);
        result.structured_content = Some(json!({
            "ok": true,
            "data": {},
            "meta": {"invalidates": ["billing_get_invoice", "billing_list_invoices",
                                     "billing_void_invoice"]}
        }));
        renames.result(&mut result);
        assert_eq!(
            result.structured_content.as_ref().unwrap()["meta"]["invalidates"],
            json!(["acct_billing_get_invoice", "acct_billing_list_invoices"])
        );
        // The cause is not served here (another tool has its name): it keeps its own.
        assert_eq!(
            result.content[1].as_text().unwrap().text,
            "<cache_invalidation cause=\"billing_void_invoice\" \
             domains=\"acct_billing_get_invoice,acct_billing_list_invoices\"/>"
        );
    }

    #[test]
    fn a_suggestions_block_left_with_none_is_left_out() {
        let renames = renames();
        let mut result = CallToolResult::success(vec![
            ContentBlock::text("{}"),
            ContentBlock::text(
                "<action_suggestions>\n- billing_void_invoice {\"id\":\"a: `b`\"}: Void it.\n</action_suggestions>",
            ),
        ]);
        result.structured_content = Some(json!({"ok": true, "data": {}}));
        renames.result(&mut result);
        assert_eq!(result.content.len(), 1);
    }

    #[test]
    fn a_result_that_is_not_the_called_tools_envelope_passes_intact() {
        let renames = renames();
        for structured in [
            None,
            Some(json!({"ok": true, "meta": {"tool": "other"}})),
            Some(json!({"meta": {}, "data": 1})),
            Some(json!({"ok": true, "data": 1, "answer": 2})),
            Some(json!({"ok": false, "error": {"message": "no code"}})),
        ] {
            let mut result = CallToolResult::success(vec![ContentBlock::text(
                "<domain_rules>`billing_list_invoices`",
            )]);
            result.structured_content = structured;
            let before = result.clone();
            renames.result(&mut result);
            assert_eq!(result, before);
        }
    }
}

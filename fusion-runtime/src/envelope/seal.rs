//! Sealing: a presentation or an error becomes the envelope an agent receives, typed until the
//! transport writes it (`serve::reply`). The only place an envelope is built, and the only
//! place an error id is assigned.

use std::fmt::Write as _;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use super::budget::fit_budget;
use super::{
    Const, CutReason, ErrorBody, ErrorFacts, Failure, SealedParts, Success, SuggestedCall,
};
use crate::action::{ActionFacts, Names};
use crate::error::ToolError;
use crate::present::{Presentation, Suggestion, Truncation};
use crate::xml;

/// A sealed result, and what the report of the call needs to know about it. Typed until the
/// transport turns it into the protocol's result (`serve::reply`).
#[derive(Debug)]
pub(crate) struct Sealed {
    pub(crate) reply: Reply,
    pub(crate) outcome: Outcome,
    /// What the author wrote that the agent was not shown (logged; the tester shows it).
    pub(crate) dropped: Vec<Dropped>,
}

/// Something the author's code put in a result that sealing left out, and why. Logged as an
/// error on a server; [`TestResult::dropped`](crate::testing::TestResult::dropped) shows it in
/// tests, where it is almost always a typo in a tool key.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Dropped {
    /// A presenter's suggestion.
    Suggestion {
        /// The tool key it named.
        tool: String,
        /// Why it was left out.
        reason: &'static str,
    },
    /// One of an error's available actions: no tool has this key.
    AvailableAction {
        /// The key it named.
        key: String,
    },
    /// A presenter's UI block of a kind it did not declare in `ui_kinds`.
    UiBlock {
        /// Its kind ([`UiBlock::kind`](crate::UiBlock::kind)).
        kind: &'static str,
    },
}

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dropped::Suggestion { tool, reason } => {
                write!(f, "suggestion of `{tool}` dropped: {reason}")
            }
            Dropped::AvailableAction { key } => {
                write!(f, "available action `{key}` dropped: no tool has this key")
            }
            Dropped::UiBlock { kind } => {
                write!(f, "UI block of kind `{kind}` dropped: {UI_NOT_DECLARED}")
            }
        }
    }
}

/// What the agent receives, as sealing left it.
#[derive(Debug)]
pub(crate) enum Reply {
    /// A success: its text blocks, its envelope (fitted to the egress budget), and the globs
    /// of the resources it invalidates.
    Success {
        content: Vec<ContentBlock>,
        /// Where the UI blocks are in `content` (sent only to a client that renders them).
        ui: std::ops::Range<usize>,
        /// The tool's form of the data block for clients that read `structuredContent`.
        data_text: super::DataText,
        /// Whether the data block is still empty: a list of flat records, written in the
        /// client's form when the answer leaves (see `ClientForm::apply`).
        data_pending: bool,
        /// The presenter's fields in its order (empty without a presenter): the columns of a
        /// list written as a table.
        columns: &'static [&'static str],
        envelope: Value,
        invalidated: Option<std::sync::Arc<[crate::key::Glob]>>,
    },
    /// A failure: its text block, its envelope, and the error as the agent is told it, still
    /// typed.
    Failure {
        block: String,
        envelope: Box<Failure>,
        body: Box<ErrorBody>,
    },
    /// A mounted upstream's result, intact (SPEC R7).
    #[cfg_attr(not(feature = "gateway"), allow(dead_code))]
    Passed(CallToolResult),
}

impl Sealed {
    /// Whether the agent receives a failure (`isError: true`).
    pub(crate) fn is_error(&self) -> bool {
        match &self.reply {
            Reply::Success { .. } => false,
            Reply::Failure { .. } => true,
            Reply::Passed(result) => result.is_error == Some(true),
        }
    }

    /// The globs of the resources a success invalidates (none for a failure).
    pub(crate) fn invalidated(&self) -> &[crate::key::Glob] {
        match &self.reply {
            Reply::Success {
                invalidated: Some(globs),
                ..
            } => globs,
            _ => &[],
        }
    }
}

const ARGUMENTS_NOT_AN_OBJECT: &str = "its arguments are not a JSON object";
const NOT_DECLARED: &str =
    "it names a tool the presenter did not declare in `actions`, or a key no tool has";
const UI_NOT_DECLARED: &str = "the presenter did not declare this kind in `ui_kinds`";

/// How a call ended, as spans, metrics and the audit trail record it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Success; `cut` when the egress budget dropped part of the result.
    Ok { cut: bool },
    /// Failure with this code, and the id its internal text was logged under.
    Failed {
        code: String,
        error_id: Option<String>,
    },
}

impl Outcome {
    /// `ok` or the error code.
    pub(crate) fn label(&self) -> &str {
        match self {
            Outcome::Ok { .. } => "ok",
            Outcome::Failed { code, .. } => code,
        }
    }

    pub(crate) fn error_id(&self) -> Option<&str> {
        match self {
            Outcome::Ok { .. } => None,
            Outcome::Failed { error_id, .. } => error_id.as_deref(),
        }
    }
}

impl Success {
    /// The envelope as JSON, with the data moved in rather than copied. Field for field what
    /// `serde_json::to_value` writes (a test checks it).
    pub(crate) fn into_value(self) -> Value {
        let mut envelope = serde_json::Map::new();
        envelope.insert("ok".into(), true.into());
        envelope.insert("data".into(), self.data);
        if !self.meta.is_empty() {
            envelope.insert("meta".into(), to_value(&self.meta));
        }
        Value::Object(envelope)
    }
}

/// Serializes a type whose serialization cannot fail (plain data, string keys).
fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

impl super::Truncated {
    /// What the agent is told about a collection that reached it cut, or `None` when nothing
    /// is missing. `offset` is the call's `offset` argument (0 when absent) when the action
    /// pages by offset: the next offset is then given, counted from the page's own offset or
    /// from that argument, so that it continues exactly after the last item shown.
    pub(crate) fn describe(
        cut: &Truncation,
        offset: Option<u64>,
        action: &ActionFacts,
    ) -> Option<Self> {
        let shown = cut.shown as u64;
        let passed = cut.passed() as u64;
        let returned = cut.returned as u64;
        let inside = cut.passed() < cut.returned;
        let start = cut.offset.or(offset);
        let after = more_after(cut, start);
        if !inside && !after && cut.total.is_none_or(|total| shown >= total) {
            return None;
        }
        let next_offset = match (offset, start) {
            (Some(_), Some(start)) if inside => Some(start.saturating_add(passed)),
            (Some(_), Some(start)) if after => Some(start.saturating_add(returned)),
            _ => None,
        };
        // An opaque cursor continues after the whole page: given only when all of it is shown.
        let next_cursor = match &cut.next_cursor {
            Some(cursor) if action.takes_cursor => (!inside).then(|| cursor.clone()),
            Some(_) => {
                dropped_cursor(action);
                None
            }
            None => None,
        };
        Some(super::Truncated {
            shown,
            skipped: (cut.skipped > 0).then_some(cut.skipped as u64),
            total: cut.total,
            hidden: cut.hidden(),
            reason: if cut.by_budget() {
                CutReason::Budget
            } else if cut.limited < cut.returned {
                CutReason::Limit
            } else {
                CutReason::Page
            },
            offset: start,
            next_offset,
            next_cursor,
        })
    }

    /// What the agent reads about the cut: how many items were shown and hidden, what cut
    /// them (page, agent limit, budget), and how to see the others.
    pub(crate) fn notice(&self, tool: &str, cut: &Truncation) -> String {
        let super::Truncated {
            shown,
            skipped,
            total,
            hidden,
            reason,
            offset,
            next_offset,
            ref next_cursor,
        } = *self;
        let mut text = format!("<truncation shown=\"{shown}\"");
        if let Some(skipped) = skipped {
            let _ = write!(text, " skipped=\"{skipped}\"");
        }
        if let Some(total) = total {
            let _ = write!(text, " total=\"{total}\"");
        }
        if let Some(hidden) = hidden {
            let _ = write!(text, " hidden=\"{hidden}\"");
        }
        let _ = write!(text, " reason=\"{}\"", reason.as_str());
        if let Some(offset) = offset {
            let _ = write!(text, " offset=\"{offset}\"");
        }
        if let Some(next) = next_offset {
            let _ = write!(text, " next_offset=\"{next}\"");
        }
        if let Some(cursor) = next_cursor {
            let _ = write!(text, " next_cursor=\"{}\"", xml::escape_attr(cursor));
        }
        match (total, hidden) {
            (Some(total), Some(hidden)) => {
                let _ = write!(
                    text,
                    ">Only {shown} of {total} items are shown; {hidden} are hidden."
                );
            }
            _ => {
                let _ = write!(text, ">Only {shown} items are shown; more exist.");
            }
        }
        if let Some(offset) = offset.filter(|_| shown > 0) {
            let _ = write!(
                text,
                " They are items {} to {}.",
                offset.saturating_add(1),
                offset.saturating_add(shown)
            );
        }
        if let Some(skipped) = skipped {
            match offset {
                Some(offset) => {
                    let first = offset.saturating_add(shown).saturating_add(1);
                    let _ = write!(
                        text,
                        " Item {first} is larger than the response size limit on its own and is left out"
                    );
                    if skipped > 1 {
                        let _ = write!(text, " with the {} after it", skipped - 1);
                    }
                    text.push('.');
                }
                None => {
                    let _ = write!(
                        text,
                        " {skipped} item(s) larger than the response size limit on their own are left out."
                    );
                }
            }
        }
        let mut by = Vec::with_capacity(3);
        if cut.total.is_some_and(|total| (cut.returned as u64) < total)
            || cut.next_cursor.is_some()
            || cut.more
        {
            by.push(format!(
                "the page the tool fetched ({} items)",
                cut.returned
            ));
        }
        if cut.limited < cut.returned {
            by.push(format!("the agent limit ({} items)", cut.limited));
        }
        if cut.by_budget() {
            by.push(format!("the response size limit ({shown} items fit)"));
        }
        if let Some((last, first)) = by.split_last() {
            if first.is_empty() {
                let _ = write!(text, " Cut by {last}.");
            } else {
                let _ = write!(text, " Cut by {} and {last}.", first.join(", "));
            }
        }
        let instead = match reason {
            // Fewer items would not help: the first alone is over the limit.
            CutReason::Budget if skipped.is_some() => "",
            CutReason::Budget => ", or ask for fewer items",
            CutReason::Limit => ", or narrow the request with filters",
            CutReason::Page => "",
        };
        if let Some(next) = next_offset {
            let _ = write!(
                text,
                " Call `{tool}` again with the same arguments and \"offset\": {next} for the next ones{instead}."
            );
        } else if let Some(cursor) = next_cursor {
            let cursor = Value::from(cursor.as_str()).to_string();
            let _ = write!(
                text,
                " Call `{tool}` again with the same arguments and \"cursor\": {} for the next ones.",
                xml::escape(&cursor)
            );
        } else if cut.passed() == cut.returned && !more_after(cut, offset) {
            text.push_str(" There are no more after these.");
        } else if reason == CutReason::Budget {
            text.push_str(" Ask for fewer items (a smaller limit, or filters) to see the others.");
        } else {
            text.push_str(" Narrow the request with filters to see the others.");
        }
        text.push_str("</truncation>");
        text
    }
}

/// Whether items exist after the returned ones: the page says so, has a next cursor, or its
/// position and total say so.
fn more_after(cut: &Truncation, start: Option<u64>) -> bool {
    cut.more
        || cut.next_cursor.is_some()
        || matches!((start, cut.total), (Some(start), Some(total))
            if start.saturating_add(cut.returned as u64) < total)
}

/// A page's next cursor that the agent could not send back: the author's mistake, logged.
#[cold]
fn dropped_cursor(action: &ActionFacts) {
    tracing::error!(
        tool = %action.key,
        "the page's next cursor is dropped: the tool takes no string `cursor` argument"
    );
}

/// Seals a successful presentation, fitted to the action's egress budget when it has one (SPEC
/// G3, see [`fit_budget`]). `offset` is the call's `offset` argument (0 when absent) when the
/// action pages by offset: the truncation notice then says which offset shows the next items
/// (see [`Truncated::describe`](super::Truncated::describe)).
pub(crate) fn seal_success(
    names: &Names,
    action: &ActionFacts,
    sealed: &SealedParts,
    presentation: Presentation,
    offset: Option<u64>,
) -> Sealed {
    let Presentation {
        data,
        data_text,
        columns,
        mut ui,
        suggestions,
        declared_actions,
        declared_ui,
        truncation,
        media,
    } = presentation;
    let mut dropped = Vec::new();
    // The kinds a presenter declares are the ones its lockfile entry promises: no other leaves.
    ui.retain(|block| {
        let declared = declared_ui.contains(&block.kind());
        if !declared {
            tracing::error!(
                tool = %action.key,
                kind = block.kind(),
                "UI block dropped: {UI_NOT_DECLARED}"
            );
            dropped.push(Dropped::UiBlock { kind: block.kind() });
        }
        declared
    });
    let tool = action.exposure.tool();
    let mut content = Vec::with_capacity(2 + ui.len());
    // A list of flat records without its text (see `Presentation::columns`) keeps its block
    // empty: the client's form writes it, as a table or JSON (`ClientForm::apply`).
    let data_pending = data_text.is_none() && !columns.is_empty();
    content.push(ContentBlock::text(match data_text {
        Some(text) => text,
        None if data_pending => String::new(),
        None => crate::present::json_text(&data, columns),
    }));
    let mut meta = sealed.meta.clone();
    if let Some(truncation) = &truncation
        && let Some(truncated) = super::Truncated::describe(truncation, offset, action)
    {
        content.push(ContentBlock::text(truncated.notice(tool, truncation)));
        meta.truncated = Some(truncated);
    }
    let ui_blocks = ui.len();
    let first_ui = content.len();
    for block in &ui {
        content.push(ContentBlock::text(block.render()));
    }
    // Rules describe fields: nothing to describe when nothing was found.
    if let Some(rules) = &sealed.rules_block
        && !data.is_null()
    {
        content.push(ContentBlock::text(rules.clone()));
    }
    // Said once, in the text the agent reads; `structuredContent` does not repeat them.
    let suggestions =
        resolve_suggestions(names, action, declared_actions, suggestions, &mut dropped);
    if !suggestions.is_empty() {
        let mut block = String::from("<action_suggestions>");
        for suggestion in &suggestions {
            block.push_str("\n- ");
            xml::escape_into(&mut block, &suggestion.tool);
            block.push(' ');
            xml::escape_into(&mut block, &suggestion.arguments.to_string());
            block.push_str(": ");
            xml::escape_into(&mut block, &suggestion.reason);
        }
        block.push_str("\n</action_suggestions>");
        content.push(ContentBlock::text(block));
    }
    if let Some(block) = &sealed.invalidation_block {
        content.push(ContentBlock::text(block.clone()));
    }
    meta.invalidates.clone_from(&sealed.invalidates);
    // Last, so that the budget's positions of the data, notice and UI blocks hold.
    content.extend(media.into_iter().map(crate::media::Media::into_block));
    let envelope = Success {
        ok: Const,
        data,
        meta,
    };
    let mut result = CallToolResult::success(content);
    let cut = match super::budget::Budget::of(action) {
        Some(budget) => fit_budget(
            &mut result,
            envelope,
            action,
            budget,
            truncation,
            ui_blocks,
            offset,
        ),
        None => {
            result.structured_content = Some(envelope.into_value());
            false
        }
    };
    let CallToolResult {
        content,
        structured_content,
        ..
    } = result;
    // Unless the budget had to measure it, and wrote it.
    let data_pending = data_pending
        && content
            .first()
            .and_then(ContentBlock::as_text)
            .is_some_and(|block| block.text.is_empty());
    Sealed {
        reply: Reply::Success {
            content,
            // A cut drops the UI blocks first (see `fit_budget`).
            ui: first_ui..if cut { first_ui } else { first_ui + ui_blocks },
            data_text: action.data_text,
            data_pending,
            columns: action
                .presenter
                .as_ref()
                .map_or(&[][..], |presenter| presenter.fields),
            envelope: structured_content.unwrap_or(Value::Null),
            invalidated: sealed.invalidated.clone(),
        },
        outcome: Outcome::Ok { cut },
        dropped,
    }
}

/// Keeps the suggestions that name a declared, existing tool, as the agent calls it. Any other
/// is a bug in the presenter: it is logged and never shown.
fn resolve_suggestions(
    names: &Names,
    action: &ActionFacts,
    declared: &[&str],
    suggestions: Vec<Suggestion>,
    dropped: &mut Vec<Dropped>,
) -> Vec<SuggestedCall> {
    let mut resolved = Vec::with_capacity(suggestions.len());
    for Suggestion {
        tool,
        reason,
        arguments,
    } in suggestions
    {
        let arguments = match arguments {
            Some(Value::Object(arguments)) => arguments,
            None => serde_json::Map::new(),
            Some(_) => {
                tracing::error!(
                    tool = %action.key,
                    suggested = %tool,
                    "suggestion dropped: {ARGUMENTS_NOT_AN_OBJECT}"
                );
                dropped.push(Dropped::Suggestion {
                    tool: tool.into_owned(),
                    reason: ARGUMENTS_NOT_AN_OBJECT,
                });
                continue;
            }
        };
        let exposure = declared
            .contains(&tool.as_ref())
            .then(|| names.exposure(&tool))
            .flatten();
        match exposure {
            Some(exposure) => resolved.push(SuggestedCall {
                tool: exposure.tool().to_owned(),
                arguments: Value::Object(exposure.arguments(arguments)),
                reason: reason.into_owned(),
            }),
            None => {
                tracing::error!(
                    tool = %action.key,
                    suggested = %tool,
                    "suggestion dropped: {NOT_DECLARED}"
                );
                dropped.push(Dropped::Suggestion {
                    tool: tool.into_owned(),
                    reason: NOT_DECLARED,
                });
            }
        }
    }
    resolved
}

/// Seals a failure: `isError: true`, the error envelope, one `<tool_error>` block. An internal
/// error gets its error id here, and its hidden text is logged under it. Tool keys between
/// backticks in the message and the recovery line become the exposed call
/// ([`Names::rewrite`]).
pub(crate) fn seal_error(names: &Names, sealed: &SealedParts, mut error: ToolError) -> Sealed {
    let tool = sealed.tool.as_str();
    error.assign_error_id(tool);
    let mut available_actions = Vec::with_capacity(error.actions().len());
    let mut dropped = Vec::new();
    for action in error.actions() {
        match names.reference(action) {
            Some(reference) => available_actions.push(reference.to_owned()),
            None => {
                tracing::error!(
                    tool,
                    action,
                    "available action dropped: no tool has this key"
                );
                dropped.push(Dropped::AvailableAction {
                    key: action.to_owned(),
                });
            }
        }
    }
    let body = ErrorBody {
        code: error.code().to_owned(),
        // Tool keys written by the author, as the agent calls those tools.
        message: names.rewrite(error.message()).into_owned(),
        retryable: error.is_retryable(),
        recovery: error
            .recovery()
            .map(|recovery| names.rewrite(recovery).into_owned()),
        available_actions,
        details: error.details().cloned(),
        retry_after_ms: error
            .retry_after()
            .map(|retry_after| u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX)),
        error_id: error.error_id().map(str::to_owned),
    };
    let block = error_block(&body);
    let outcome = Outcome::Failed {
        code: body.code.clone(),
        error_id: body.error_id.clone(),
    };
    let envelope = Failure {
        ok: Const,
        error: ErrorFacts::from(&body),
        meta: sealed.meta.clone(),
    };
    Sealed {
        reply: Reply::Failure {
            block,
            envelope: Box::new(envelope),
            body: Box::new(body),
        },
        outcome,
        dropped,
    }
}

/// The `<tool_error>` block: the error body as the agent reads it (`structuredContent` keeps
/// its facts for programs: code, retryable, details, wait and id).
fn error_block(body: &ErrorBody) -> String {
    let mut block = format!("<tool_error code=\"{}\">", xml::escape_attr(&body.code));
    let _ = write!(block, "\n<message>{}</message>", xml::escape(&body.message));
    if let Some(recovery) = &body.recovery {
        let _ = write!(block, "\n<recovery>{}</recovery>", xml::escape(recovery));
    }
    // The tools to call, unless the message or the recovery already names each of them.
    let named = |action: &String| {
        body.message.contains(action.as_str())
            || body
                .recovery
                .as_ref()
                .is_some_and(|recovery| recovery.contains(action.as_str()))
    };
    if !body.available_actions.iter().all(named) {
        let _ = write!(
            block,
            "\n<available_actions>{}</available_actions>",
            xml::escape(&body.available_actions.join(", "))
        );
    }
    if let Some(details) = &body.details {
        let _ = write!(
            block,
            "\n<details>{}</details>",
            xml::escape(&details.to_string())
        );
    }
    if let Some(retry_after_ms) = body.retry_after_ms {
        let _ = write!(block, "\n<retry_after>{retry_after_ms}ms</retry_after>");
    }
    if let Some(error_id) = &body.error_id {
        let _ = write!(block, "\n<error_id>{}</error_id>", xml::escape(error_id));
    }
    block.push_str("\n</tool_error>");
    block
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::Meta;

    #[test]
    fn the_error_block_names_the_tools_to_call_once() {
        let body = |recovery: &str| ErrorBody {
            code: "InvoiceNotFound".into(),
            message: "Invoice INV-4 does not exist.".into(),
            retryable: false,
            recovery: Some(recovery.into()),
            available_actions: vec!["billing_list_invoices".into()],
            details: None,
            retry_after_ms: None,
            error_id: None,
        };
        let named = error_block(&body("Call `billing_list_invoices` to find ids."));
        assert_eq!(
            named,
            "<tool_error code=\"InvoiceNotFound\">\n<message>Invoice INV-4 does not exist.</message>\n<recovery>Call `billing_list_invoices` to find ids.</recovery>\n</tool_error>"
        );
        let unnamed = error_block(&body("Look the id up first."));
        assert!(
            unnamed.contains("<available_actions>billing_list_invoices</available_actions>"),
            "{unnamed}"
        );
    }

    #[test]
    fn into_value_writes_what_serde_writes() {
        let success = Success {
            ok: Const,
            data: serde_json::json!({"id": "INV-1", "n": [1, 2]}),
            meta: Meta {
                invalidates: vec!["billing.*".into()],
                ..Meta::default()
            },
        };
        assert_eq!(
            serde_json::to_value(&success).unwrap(),
            success.clone().into_value()
        );
    }
}

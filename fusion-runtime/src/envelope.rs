//! The one response shape, sealed in one place (SPEC R4, S1, E1–E2).
//!
//! `structuredContent` is the envelope: `{"ok": true, "data": …, "meta": {…}}` or
//! `{"ok": false, "error": {…}, "meta": {…}}`. `content` carries the text blocks for the agent,
//! in this order: data (JSON), truncation notice, `<ui_passthrough>` blocks, `<domain_rules>`,
//! `<action_suggestions>`, `<cache_invalidation/>`; or one `<tool_error>` block.

use std::any::Any;
use std::borrow::Cow;
use std::fmt::Write as _;
use std::panic::AssertUnwindSafe;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::error::{ToolError, codes};
use crate::present::{Presentation, PresenterInfo, Suggestion, Truncation};
use crate::registry::{Action, Server};
use crate::tool::{Call, Handler, HandlerFuture, Verb};
use crate::xml;

/// The parts of an action's responses that never change, rendered when the server is built.
#[derive(Debug, Default)]
pub(crate) struct Sealed {
    meta: Map<String, Value>,
    rules_block: Option<String>,
    invalidation_block: Option<String>,
    invalidates: Option<Value>,
}

impl Sealed {
    pub(crate) fn new(action: &Action, grouped_action: Option<&str>) -> Self {
        let mut meta = Map::new();
        meta.insert("tool".into(), action.exposed_tool.as_ref().into());
        if let Some(grouped_action) = grouped_action {
            meta.insert("action".into(), grouped_action.into());
        }
        meta.insert("version".into(), action.version.as_str().into());
        if let Some(cache) = action.cache {
            meta.insert("cache".into(), cache.as_str().into());
        }
        let rules_block = action
            .presenter
            .as_ref()
            .map(PresenterInfo::all_rules)
            .filter(|rules| !rules.is_empty())
            .map(|rules| rules_block(&rules));
        let writes = action.verb != Verb::Query && !action.invalidates.is_empty();
        let globs: Vec<&str> = action
            .invalidates
            .iter()
            .map(|glob| glob.as_str())
            .collect();
        Sealed {
            meta,
            rules_block,
            invalidation_block: writes.then(|| {
                format!(
                    "<cache_invalidation cause=\"{}\" domains=\"{}\"/>",
                    xml::escape_attr(action.key.as_str()),
                    xml::escape_attr(&globs.join(","))
                )
            }),
            invalidates: writes.then(|| globs.into()),
        }
    }

    /// For failures that happen before an action is chosen (grouped tools).
    pub(crate) fn for_tool(tool: &str, version: &str) -> Self {
        let mut meta = Map::new();
        meta.insert("tool".into(), tool.into());
        meta.insert("version".into(), version.into());
        Sealed {
            meta,
            ..Sealed::default()
        }
    }
}

fn rules_block(rules: &[String]) -> String {
    let mut block = String::from("<domain_rules>");
    for rule in rules {
        let _ = write!(block, "\n- {}", xml::escape(rule));
    }
    block.push_str("\n</domain_rules>");
    block
}

/// A running handler: a panic becomes an `INTERNAL_ERROR` and the server keeps serving; a
/// cancelled request drops the handler's future and yields `CANCELLED`. One future doing both,
/// polled directly: the cancellation is only armed once the handler has had to wait.
pub(crate) struct Running {
    handler: Option<HandlerFuture>,
    early: Option<ToolError>,
    cancellation: CancellationToken,
    cancelled: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
}

impl Running {
    pub(crate) fn new(handler: &dyn Handler, call: Call, cancellation: CancellationToken) -> Self {
        let (handler, early) =
            match std::panic::catch_unwind(AssertUnwindSafe(|| handler.call(call))) {
                Ok(future) => (Some(future), None),
                Err(panic) => (None, Some(panicked("the handler", panic))),
            };
        Running {
            handler,
            early,
            cancellation,
            cancelled: None,
        }
    }
}

impl Future for Running {
    type Output = Result<Presentation, ToolError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(error) = this.early.take() {
            return Poll::Ready(Err(error));
        }
        let Some(handler) = this.handler.as_mut() else {
            return Poll::Ready(Err(ToolError::internal_message(
                "a finished handler was polled again",
            )));
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| handler.as_mut().poll(cx))) {
            Ok(Poll::Ready(outcome)) => return Poll::Ready(outcome),
            Err(panic) => {
                this.handler = None;
                return Poll::Ready(Err(panicked("the handler", panic)));
            }
            Ok(Poll::Pending) => {}
        }
        let cancellation = &this.cancellation;
        let cancelled = this
            .cancelled
            .get_or_insert_with(|| Box::pin(cancellation.clone().cancelled_owned()));
        if cancelled.as_mut().poll(cx).is_ready() {
            // Dropping the handler's future stops it.
            this.handler = None;
            return Poll::Ready(Err(ToolError::new(
                codes::CANCELLED,
                "The request was cancelled.",
            )));
        }
        Poll::Pending
    }
}

/// A future of the call's path (middleware and guards) whose panic becomes an `INTERNAL_ERROR`:
/// the panic is logged under the error id and the server keeps serving. Only wrapped around
/// calls that have middleware or guards; a bare call has [`Running`] alone.
pub(crate) struct CatchPanic<F> {
    future: Option<F>,
    stage: &'static str,
}

impl<F> CatchPanic<F> {
    pub(crate) fn new(future: F, stage: &'static str) -> Self {
        CatchPanic {
            future: Some(future),
            stage,
        }
    }
}

impl<F> Future for CatchPanic<F>
where
    F: Future<Output = Result<Presentation, ToolError>> + Unpin,
{
    type Output = Result<Presentation, ToolError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Some(future) = this.future.as_mut() else {
            return Poll::Ready(Err(ToolError::internal_message(
                "a finished call was polled again",
            )));
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| Pin::new(future).poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(outcome)) => {
                this.future = None;
                Poll::Ready(outcome)
            }
            Err(panic) => {
                // Never polled again: dropped now, releasing whatever it held.
                this.future = None;
                Poll::Ready(Err(panicked(this.stage, panic)))
            }
        }
    }
}

/// The `INTERNAL_ERROR` of a panic in `stage`; the panic's text is logged, never shown.
#[cold]
pub(crate) fn panicked(stage: &str, panic: Box<dyn Any + Send>) -> ToolError {
    ToolError::internal_message(format!("{stage} panicked: {}", panic_text(&*panic)))
}

/// The message of a panic payload.
pub(crate) fn panic_text(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-string panic payload")
}

/// Seals a successful presentation, and fits it to `budget` bytes when there is one (SPEC G3,
/// see [`fit_budget`]). `offset` is the call's `offset` argument (0 when absent) when the action
/// pages by offset: the truncation notice then says which offset shows the next items.
/// Returns the result and whether the budget cut anything.
pub(crate) fn seal_success(
    server: &Server,
    action: &Action,
    presentation: Presentation,
    budget: Option<usize>,
    offset: Option<u64>,
) -> (CallToolResult, bool) {
    let Presentation {
        data,
        data_text,
        ui,
        suggestions,
        declared_actions,
        truncation,
    } = presentation;
    let sealed = &action.sealed;
    let mut content = Vec::with_capacity(2 + ui.len());
    content.push(ContentBlock::text(
        data_text.unwrap_or_else(|| data.to_string()),
    ));
    let mut meta = sealed.meta.clone();
    if let Some(truncation) = truncation {
        let notice = Notice::new(&truncation, offset);
        content.push(ContentBlock::text(notice.text(&action.exposed_tool)));
        meta.insert("truncated".into(), notice.meta());
    }
    let ui_blocks = ui.len();
    for block in &ui {
        content.push(ContentBlock::text(block.render()));
    }
    if let Some(rules) = &sealed.rules_block {
        content.push(ContentBlock::text(rules.clone()));
    }
    let suggestions = resolve_suggestions(server, action, declared_actions, suggestions);
    if !suggestions.is_empty() {
        let mut block = String::from("<action_suggestions>");
        let mut listed = Vec::with_capacity(suggestions.len());
        for (tool, arguments, reason) in suggestions {
            block.push_str("\n- ");
            xml::escape_into(&mut block, &tool);
            block.push(' ');
            xml::escape_into(&mut block, &arguments.to_string());
            block.push_str(": ");
            xml::escape_into(&mut block, &reason);
            let mut entry = Map::new();
            entry.insert("tool".into(), Value::String(tool));
            entry.insert("arguments".into(), arguments);
            entry.insert("reason".into(), Value::String(reason.into_owned()));
            listed.push(Value::Object(entry));
        }
        block.push_str("\n</action_suggestions>");
        content.push(ContentBlock::text(block));
        meta.insert("suggestions".into(), Value::Array(listed));
    }
    if let Some(block) = &sealed.invalidation_block {
        content.push(ContentBlock::text(block.clone()));
    }
    if let Some(invalidates) = &sealed.invalidates {
        meta.insert("invalidates".into(), invalidates.clone());
    }
    let mut envelope = Map::new();
    envelope.insert("ok".into(), true.into());
    envelope.insert("data".into(), data);
    envelope.insert("meta".into(), Value::Object(meta));
    let mut result = CallToolResult::success(content);
    result.structured_content = Some(Value::Object(envelope));
    let cut = budget.is_some_and(|budget| {
        fit_budget(&mut result, action, budget, truncation, ui_blocks, offset)
    });
    (result, cut)
}

/// What the agent is told about a cut collection (SPEC P3, G3): how many items were shown,
/// how many hidden, and how to see the others.
struct Notice {
    shown: usize,
    total: usize,
    hidden: usize,
    by_budget: bool,
    /// The `offset` that shows the next items, when the action pages by offset.
    next_offset: Option<u64>,
}

impl Notice {
    fn new(truncation: &Truncation, offset: Option<u64>) -> Self {
        Notice {
            shown: truncation.shown,
            total: truncation.total,
            hidden: truncation.hidden(),
            by_budget: truncation.by_budget,
            next_offset: offset.map(|offset| offset.saturating_add(truncation.shown as u64)),
        }
    }

    fn reason(&self) -> &'static str {
        if self.by_budget { "budget" } else { "limit" }
    }

    fn text(&self, tool: &str) -> String {
        let Notice {
            shown,
            total,
            hidden,
            ..
        } = *self;
        let reason = self.reason();
        let mut text = format!(
            "<truncation shown=\"{shown}\" total=\"{total}\" hidden=\"{hidden}\" reason=\"{reason}\""
        );
        if let Some(next) = self.next_offset {
            let _ = write!(text, " next_offset=\"{next}\"");
        }
        if self.by_budget {
            let _ = write!(
                text,
                ">Only {shown} of {total} items fit in the response size limit; {hidden} are hidden."
            );
        } else {
            let _ = write!(
                text,
                ">Only {shown} of {total} items are shown; {hidden} are hidden."
            );
        }
        match self.next_offset {
            Some(next) => {
                let instead = if self.by_budget {
                    "ask for fewer items"
                } else {
                    "narrow the request with filters"
                };
                let _ = write!(
                    text,
                    " Call `{tool}` again with the same arguments and \"offset\": {next} for the next ones, or {instead}."
                );
            }
            None if self.by_budget => text
                .push_str(" Ask for fewer items (a smaller limit, or filters) to see the others."),
            None => text.push_str(" Narrow the request with filters to see the others."),
        }
        text.push_str("</truncation>");
        text
    }

    fn meta(&self) -> Value {
        let mut meta = json!({
            "shown": self.shown,
            "total": self.total,
            "hidden": self.hidden,
            "reason": self.reason(),
        });
        if let Some(next) = self.next_offset {
            meta["nextOffset"] = next.into();
        }
        meta
    }
}

/// Fits a sealed success to `budget` bytes (SPEC G3).
///
/// **What is counted:** the whole result as it goes on the wire — the compact JSON of the
/// `CallToolResult`: every `content` text block (JSON-escaped, so the data's text copy counts
/// with its escapes), `structuredContent` (the envelope with `data` and `meta`) and `isError`.
/// The data is therefore counted twice, as it is sent twice. Only the JSON-RPC frame around
/// the result is not.
///
/// **What is cut, in order:** the UI blocks first (they render the data, which matters more);
/// then, for a collection, whole items from the end, so both copies of the data stay the same
/// valid JSON array, and the truncation notice says how many were shown and hidden and, when
/// the action pages by `offset`, which offset shows the next ones. `isError` is never touched.
/// A result that is not a collection (or an empty one) cannot be cut at item boundaries: if it
/// is still over the budget without its UI blocks it is sent whole, and a warning (target
/// `fusion::egress`) tells the operator, as it does when not even one item fits. Returns
/// whether anything was dropped.
fn fit_budget(
    result: &mut CallToolResult,
    action: &Action,
    budget: usize,
    truncation: Option<Truncation>,
    ui_blocks: usize,
    offset: Option<u64>,
) -> bool {
    if size_upper_bound(result) <= budget || json_size(&*result) <= budget {
        return false;
    }
    // The data block, then the notice if any, then the UI blocks.
    let first_ui = 1 + usize::from(truncation.is_some());
    result.content.drain(first_ui..first_ui + ui_blocks);
    let size = json_size(&*result);
    if size <= budget {
        return ui_blocks > 0;
    }
    let Some(Value::Object(envelope)) = result.structured_content.as_mut() else {
        return ui_blocks > 0;
    };
    let Some(Value::Array(items)) = envelope
        .get_mut("data")
        .filter(|data| data.as_array().is_some_and(|items| !items.is_empty()))
    else {
        over_budget(action, budget, size, "it has no items to cut: sent whole");
        return ui_blocks > 0;
    };
    let items = std::mem::take(items);
    let total = truncation.map_or(items.len(), |truncation| truncation.total);
    let mut notice = Notice {
        // The largest numbers the notice can hold, so that what is measured is an upper bound.
        shown: total,
        total,
        hidden: total,
        by_budget: true,
        next_offset: offset.map(|offset| offset.saturating_add(total as u64)),
    };
    set_cut(result, action, &[], &notice, truncation.is_some());
    let mut used = json_size(&*result);
    let mut keep = 0;
    for item in &items {
        // Once in `structuredContent`, once escaped in the text block, each after a comma.
        let (size, escapes) = json_size_and_escapes(item);
        let needed = 2 * size + escapes + if keep > 0 { 2 } else { 0 };
        if used + needed > budget {
            break;
        }
        used += needed;
        keep += 1;
    }
    // The estimate used the notice's largest numbers: check it with the real ones, and take
    // one more item while it fits (shrinking only guards the estimate).
    let mut fits = |keep: usize, result: &mut CallToolResult| {
        notice.shown = keep;
        notice.hidden = total - keep;
        notice.next_offset = offset.map(|offset| offset.saturating_add(keep as u64));
        set_cut(result, action, &items[..keep], &notice, true);
        json_size(&*result) <= budget
    };
    while !fits(keep, result) && keep > 0 {
        keep -= 1;
    }
    while keep < items.len() && fits(keep + 1, result) {
        keep += 1;
    }
    if keep < items.len() {
        // The last try did not fit: put back the last one that did.
        fits(keep, result);
    }
    if keep == 0 {
        let size = json_size(&*result);
        if size > budget {
            over_budget(action, budget, size, "even without any item");
        }
    }
    true
}

/// Tells the operator that a result could not be brought within its budget.
#[cold]
fn over_budget(action: &Action, budget: usize, size: usize, why: &str) {
    tracing::warn!(
        target: "fusion::egress",
        tool = %action.exposed_tool,
        action = %action.key,
        budget,
        size,
        "the result is over its egress budget: {why}"
    );
}

/// Puts `items` in both copies of the data and `notice` in its block and in the meta. The
/// notice block is at index 1 when `has_notice`; it is inserted there otherwise.
fn set_cut(
    result: &mut CallToolResult,
    action: &Action,
    items: &[Value],
    notice: &Notice,
    has_notice: bool,
) {
    let mut data_text = String::from("[");
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            data_text.push(',');
        }
        data_text.push_str(&item.to_string());
    }
    data_text.push(']');
    result.content[0] = ContentBlock::text(data_text);
    let block = ContentBlock::text(notice.text(&action.exposed_tool));
    if has_notice {
        result.content[1] = block;
    } else {
        result.content.insert(1, block);
    }
    if let Some(Value::Object(envelope)) = result.structured_content.as_mut() {
        envelope.insert("data".into(), Value::Array(items.to_vec()));
        if let Some(Value::Object(meta)) = envelope.get_mut("meta") {
            meta.insert("truncated".into(), notice.meta());
        }
    }
}

/// Counts bytes written and, when asked, the bytes a JSON string escapes (`"` and `\`).
#[derive(Default)]
struct Counter {
    count_escapes: bool,
    bytes: usize,
    escapes: usize,
}

impl std::io::Write for Counter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.bytes += bytes.len();
        if self.count_escapes {
            self.escapes += bytes
                .iter()
                .filter(|&&byte| byte == b'"' || byte == b'\\')
                .count();
        }
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes `value`'s compact JSON into a [`Counter`] without building it.
fn measure<T: serde::Serialize + ?Sized>(value: &T, count_escapes: bool) -> Counter {
    let mut counter = Counter {
        count_escapes,
        ..Counter::default()
    };
    // Writing to a counter cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter
}

/// The length of a value's compact JSON, without building it.
fn json_size<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    measure(value, false).bytes
}

/// The length of a value's compact JSON, and how many more bytes it takes inside a JSON
/// string (serde_json escapes only `"`, `\` and control characters, which compact JSON
/// already writes as escapes).
fn json_size_and_escapes<T: serde::Serialize + ?Sized>(value: &T) -> (usize, usize) {
    let counter = measure(value, true);
    (counter.bytes, counter.escapes)
}

/// A bound on [`json_size`] of a result that does not scan its text blocks, so that results
/// far below their budget (nearly all of them) are not serialized twice: JSON escaping turns
/// a byte into at most six (`\u001f`), and a text block's own JSON around its text is far
/// less than [`BLOCK_OVERHEAD`].
fn size_upper_bound(result: &CallToolResult) -> usize {
    const BLOCK_OVERHEAD: usize = 64;
    const RESULT_OVERHEAD: usize = 128;
    let mut bound = RESULT_OVERHEAD;
    for block in &result.content {
        bound += BLOCK_OVERHEAD
            + match block.as_text() {
                Some(text) if text.meta.is_none() && text.annotations.is_none() => {
                    6 * text.text.len()
                }
                // Not a plain text block (Fusion writes none): measure it.
                _ => json_size(block),
            };
    }
    if result.meta.is_some() {
        bound += json_size(&result.meta);
    }
    bound
        + result
            .structured_content
            .as_ref()
            .map_or(0, value_size_bound)
}

/// A bound on a JSON value's compact size from a walk that formats nothing: a string takes at
/// most six bytes per byte plus its quotes, a number at most 24 bytes.
fn value_size_bound(value: &Value) -> usize {
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 24,
        Value::String(text) => 2 + 6 * text.len(),
        Value::Array(items) => {
            2 + items
                .iter()
                .map(|item| value_size_bound(item) + 1)
                .sum::<usize>()
        }
        Value::Object(entries) => {
            2 + entries
                .iter()
                .map(|(key, value)| 2 + 6 * key.len() + 1 + value_size_bound(value) + 1)
                .sum::<usize>()
        }
    }
}

/// Keeps the suggestions that name a declared, existing tool, as (exposed tool, arguments,
/// suggestion). Any other is a bug in the presenter: it is logged and never shown.
fn resolve_suggestions(
    server: &Server,
    action: &Action,
    declared: &[&str],
    suggestions: Vec<Suggestion>,
) -> Vec<(String, Value, Cow<'static, str>)> {
    let mut resolved = Vec::with_capacity(suggestions.len());
    for Suggestion {
        tool,
        reason,
        arguments,
    } in suggestions
    {
        let arguments = match arguments {
            Some(Value::Object(arguments)) => Some(arguments),
            None => None,
            Some(_) => {
                tracing::error!(
                    tool = %action.key,
                    suggested = %tool,
                    "suggestion dropped: its arguments are not a JSON object"
                );
                continue;
            }
        };
        let exposed = declared
            .contains(&tool.as_ref())
            .then(|| server.exposed_call(&tool, arguments))
            .flatten();
        match exposed {
            Some((exposed, arguments)) => {
                resolved.push((exposed, Value::Object(arguments), reason));
            }
            None => tracing::error!(
                tool = %action.key,
                suggested = %tool,
                "suggestion dropped: it names a tool the presenter did not declare in `actions`"
            ),
        }
    }
    resolved
}

/// Seals a failure: `isError: true`, the error envelope, one `<tool_error>` block.
pub(crate) fn seal_error(
    server: &Server,
    tool: &str,
    sealed: &Sealed,
    mut error: ToolError,
) -> CallToolResult {
    error.assign_error_id(tool);
    error.retain_actions(|action| {
        let exists = server.exposed_ref(action).is_some();
        if !exists {
            tracing::error!(
                tool,
                action,
                "available action dropped: no tool has this key"
            );
        }
        exists
    });
    let actions: Vec<&str> = error
        .actions()
        .filter_map(|action| server.exposed_ref(action))
        .collect();

    let mut object = Map::new();
    object.insert("code".into(), error.code().into());
    object.insert("message".into(), error.message().into());
    object.insert("retryable".into(), error.is_retryable().into());
    if let Some(recovery) = error.recovery() {
        object.insert("recovery".into(), recovery.into());
    }
    if !actions.is_empty() {
        object.insert("availableActions".into(), actions.clone().into());
    }
    if let Some(details) = error.details() {
        object.insert("details".into(), details.clone());
    }
    if let Some(retry_after) = error.retry_after() {
        let millis = u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX);
        object.insert("retryAfterMs".into(), millis.into());
    }
    if let Some(error_id) = error.error_id() {
        object.insert("errorId".into(), error_id.into());
    }

    let mut block = format!("<tool_error code=\"{}\">", xml::escape_attr(error.code()));
    let _ = write!(
        block,
        "\n<message>{}</message>",
        xml::escape(error.message())
    );
    if let Some(recovery) = error.recovery() {
        let _ = write!(block, "\n<recovery>{}</recovery>", xml::escape(recovery));
    }
    if !actions.is_empty() {
        let _ = write!(
            block,
            "\n<available_actions>{}</available_actions>",
            xml::escape(&actions.join(", "))
        );
    }
    if let Some(details) = error.details() {
        let _ = write!(
            block,
            "\n<details>{}</details>",
            xml::escape(&details.to_string())
        );
    }
    if let Some(retry_after) = error.retry_after() {
        let _ = write!(
            block,
            "\n<retry_after>{}ms</retry_after>",
            retry_after.as_millis()
        );
    }
    if let Some(error_id) = error.error_id() {
        let _ = write!(block, "\n<error_id>{}</error_id>", xml::escape(error_id));
    }
    block.push_str("\n</tool_error>");

    let mut envelope = Map::new();
    envelope.insert("ok".into(), false.into());
    envelope.insert("error".into(), Value::Object(object));
    envelope.insert("meta".into(), Value::Object(sealed.meta.clone()));
    let mut result = CallToolResult::error(vec![ContentBlock::text(block)]);
    result.structured_content = Some(Value::Object(envelope));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_bound_is_never_below_the_size_on_the_wire() {
        let texts = [
            String::new(),
            "plain text".to_owned(),
            "\u{1}\u{1f}\"\\\n\t".repeat(40),
            "ünïcödé ✓ 𝄞".repeat(10),
            serde_json::to_string(&serde_json::json!([{"id": "a\"b", "n": 1}])).unwrap(),
        ];
        for text in &texts {
            let mut result = CallToolResult::success(vec![
                ContentBlock::text(text.clone()),
                ContentBlock::text(format!("<rules>{text}</rules>")),
            ]);
            result.structured_content = Some(serde_json::json!({
                "ok": true, "data": [text, {"k": text, text: [u64::MAX, i64::MIN, -1.7976931348623157e308, null, false]}],
                "meta": {"tool": "t", "version": "1"}
            }));
            let exact = serde_json::to_string(&result).unwrap().len();
            assert_eq!(json_size(&result), exact);
            assert!(size_upper_bound(&result) >= exact, "{text:?}");
            let structured = result.structured_content.as_ref().unwrap();
            assert!(value_size_bound(structured) >= json_size(structured));
        }
    }
}

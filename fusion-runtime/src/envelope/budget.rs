//! The egress budget (SPEC G3): a result too large for its action's budget, in bytes or in
//! tokens, is cut at item boundaries, and the agent is told how to see the rest.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use super::{Const, Meta, Success, Truncated};
use crate::action::ActionFacts;
use crate::present::Truncation;

/// Whether this build counts tokens (feature `tokens`): a server without it refuses token
/// budgets when it is built rather than failing to keep them.
pub(crate) const COUNTS_TOKENS: bool = cfg!(feature = "tokens");

/// What an answer may cost: bytes on the wire, tokens an agent reads, or both.
#[derive(Debug, Clone, Copy)]
pub(super) struct Budget {
    bytes: Option<usize>,
    tokens: Option<usize>,
}

impl Budget {
    /// The budget of `action`, if it has one.
    pub(super) fn of(action: &ActionFacts) -> Option<Self> {
        (action.max_bytes.is_some() || action.max_tokens.is_some()).then_some(Budget {
            bytes: action.max_bytes,
            tokens: action.max_tokens,
        })
    }

    /// A size in bytes under which both hold: a token is at least one byte of text.
    fn bytes_bound(self) -> usize {
        self.bytes
            .unwrap_or(usize::MAX)
            .min(self.tokens.unwrap_or(usize::MAX))
    }

    /// Whether `result` fits. Tokens are counted only when its bytes do not already show it.
    fn fits(self, result: &CallToolResult) -> bool {
        let size = json_size(result);
        if self.bytes.is_some_and(|bytes| size > bytes) {
            return false;
        }
        match self.tokens {
            Some(tokens) if size > tokens => count_tokens(result) <= tokens,
            _ => true,
        }
    }
}

/// The tokens an agent reads of `result`: the text of its text blocks and its
/// `structuredContent` as compact JSON. Counted before the client's form is applied, so an
/// upper bound of what is sent (the tabular form and the UI blocks a client does not draw only
/// take tokens away).
#[cfg(feature = "tokens")]
fn count_tokens(result: &CallToolResult) -> usize {
    use fusion_lock::tokens::{O200k, Tokenizer as _};
    let text: usize = result
        .content
        .iter()
        .filter_map(ContentBlock::as_text)
        .map(|block| O200k.count(&block.text))
        .sum();
    text + result
        .structured_content
        .as_ref()
        .map_or(0, |value| O200k.count_json(value))
}

/// Never reached (a server with a token budget does not build without the tokenizer); its
/// bytes bound its tokens from above.
#[cfg(not(feature = "tokens"))]
fn count_tokens(result: &CallToolResult) -> usize {
    json_size(result)
}

/// Loads the tokenizer's vocabulary now (a server with a token budget does it when it is
/// built), so that the first answer to count does not pay for it.
#[cfg(feature = "tokens")]
pub(crate) fn load_tokenizer() {
    use fusion_lock::tokens::{O200k, Tokenizer as _};
    let _ = O200k.count("");
}

/// Fits a sealed success to its `budget` (SPEC G3): bytes, tokens, or both.
///
/// **What is counted:** the whole result as it goes on the wire — the compact JSON of the
/// `CallToolResult`: every `content` text block (JSON-escaped, so the data's text copy counts
/// with its escapes), `structuredContent` (the envelope with `data` and `meta`) and `isError`.
/// The data is therefore counted twice, as it is sent twice. Only the JSON-RPC frame around
/// the result is not.
///
/// **What is cut, in order:** the UI blocks first (they render the data, which matters more);
/// then, for a collection, whole items from the end, so both copies of the data stay the same
/// valid JSON array, and the one truncation notice describes the whole cut (the page, the agent
/// limit and the budget) and, when the action pages by `offset`, which offset shows the next
/// ones. `isError` is never touched.
/// A result that is not a collection (or an empty one) cannot be cut at item boundaries: if it
/// is still over the budget without its UI blocks it is sent whole, and a warning (target
/// `fusion::egress`) tells the operator, as it does when not even one item fits. Returns
/// whether anything was dropped.
///
/// **Tokens** are those an agent reads: the text of the text blocks and `structuredContent`
/// as compact JSON, counted with o200k only when the bytes do not already settle it (a token
/// is at least a byte). They are counted as sealed, before the client's form turns a list into
/// a table or leaves the UI blocks out, so what is sent costs at most the budget.
pub(super) fn fit_budget(
    result: &mut CallToolResult,
    envelope: Success,
    action: &ActionFacts,
    budget: Budget,
    truncation: Option<Truncation>,
    ui_blocks: usize,
    offset: Option<u64>,
) -> bool {
    // The notice block is there when the envelope describes a cut.
    let has_notice = envelope.meta.truncated.is_some();
    // An empty data block (JSON text never is) was left for the client's form (see
    // `seal_success`): it will hold the data's JSON text or its shorter table, in its JSON
    // string at most twice the text's length (only `"` and `\` are escaped again: compact JSON
    // has no control characters).
    let data_pending = result
        .content
        .first()
        .and_then(ContentBlock::as_text)
        .is_some_and(|block| block.text.is_empty());
    result.structured_content = Some(envelope.into_value());
    // The envelope's bound is above its data's: walked once for both.
    let envelope_bound = result
        .structured_content
        .as_ref()
        .map_or(0, value_size_bound);
    let pending_bound = if data_pending { 2 * envelope_bound } else { 0 };
    if blocks_size_bound(result) + envelope_bound + pending_bound <= budget.bytes_bound() {
        return false;
    }
    if data_pending {
        // Measured exactly from here on: the text is written as JSON, its largest form.
        let columns = action
            .presenter
            .as_ref()
            .map_or(&[][..], |presenter| presenter.fields);
        let data = result
            .structured_content
            .as_ref()
            .map_or(&Value::Null, |envelope| &envelope["data"]);
        result.content[0] = ContentBlock::text(crate::present::json_text(data, columns));
    }
    if budget.fits(result) {
        return false;
    }
    // The data block, then the notice if any, then the UI blocks.
    let first_ui = 1 + usize::from(has_notice);
    result.content.drain(first_ui..first_ui + ui_blocks);
    if budget.fits(result) {
        return ui_blocks > 0;
    }
    let size = json_size(&*result);
    // Rare: the envelope is read back from the result rather than kept aside on every call.
    let Some(Ok(Success { data, mut meta, .. })) = result
        .structured_content
        .take()
        .map(serde_json::from_value::<Success>)
    else {
        // Sealed just above: never happens.
        return ui_blocks > 0;
    };
    let items = match data {
        Value::Array(items) if !items.is_empty() => items,
        data => {
            result.structured_content = Some(
                Success {
                    ok: Const,
                    data,
                    meta,
                }
                .into_value(),
            );
            over_budget(action, budget, size, "it has no items to cut: sent whole");
            return ui_blocks > 0;
        }
    };
    let mut cut = truncation.unwrap_or_else(|| Truncation::of_list(items.len(), items.len()));
    let tool = action.exposure.tool();
    // The notice of an upper bound: its numbers at their largest, so that what is measured
    // with it is an upper bound of the real one.
    cut.shown = items.len().saturating_sub(1);
    meta.truncated = Truncated::describe(&cut, offset, action).map(|mut truncated| {
        truncated.hidden = truncated.total;
        truncated.next_offset = truncated
            .next_offset
            .map(|next| next.saturating_add(items.len() as u64));
        truncated
    });
    let notice = |meta: &Meta, cut: &Truncation| {
        meta.truncated
            .as_ref()
            .map(|truncated| truncated.notice(tool, cut))
    };
    set_cut(result, &[], &meta, notice(&meta, &cut), has_notice);
    let has_notice = meta.truncated.is_some() || has_notice;
    let mut used = json_size(&*result);
    let mut keep = 0;
    for item in &items {
        // Once in `structuredContent`, once escaped in the text block, each after a comma.
        let (size, escapes) = json_size_and_escapes(item);
        let needed = 2 * size + escapes + if keep > 0 { 2 } else { 0 };
        if used + needed > budget.bytes_bound() {
            break;
        }
        used += needed;
        keep += 1;
    }
    // The estimate used the notice's largest numbers, and a token budget as if each token were
    // a byte: check it with the real ones (shrinking only guards the estimate), then take more
    // items while they fit, doubling the step and halving it back (tokens are counted whole
    // for each try: a handful of tries, not one per item).
    let mut fits = |keep: usize, result: &mut CallToolResult| {
        cut.shown = keep;
        meta.truncated = Truncated::describe(&cut, offset, action);
        set_cut(
            result,
            &items[..keep],
            &meta,
            notice(&meta, &cut),
            has_notice,
        );
        budget.fits(result)
    };
    while !fits(keep, result) && keep > 0 {
        keep -= 1;
    }
    let mut last_try = keep;
    let mut over = items.len() + 1;
    let mut step = 1;
    while keep < items.len() {
        let next = (keep + step).min(items.len());
        last_try = next;
        if fits(next, result) {
            keep = next;
            step *= 2;
        } else {
            over = next;
            break;
        }
    }
    while over - keep > 1 && over <= items.len() {
        let middle = keep + (over - keep) / 2;
        last_try = middle;
        if fits(middle, result) {
            keep = middle;
        } else {
            over = middle;
        }
    }
    if last_try != keep {
        // The last try did not fit: put back the last one that did.
        fits(keep, result);
    }
    if keep == 0 {
        // Not even the first item fits: it is left out, said so, and counted as passed, so
        // that the next offset moves past it instead of asking for the same one forever.
        cut.skipped = 1;
        meta.truncated = Truncated::describe(&cut, offset, action);
        set_cut(result, &[], &meta, notice(&meta, &cut), has_notice);
        let size = json_size(&*result);
        over_budget(
            action,
            budget,
            size,
            "its first item alone is over it: the item is left out",
        );
    }
    true
}

/// Tells the operator that a result could not be brought within its budget.
#[cold]
fn over_budget(action: &ActionFacts, budget: Budget, size: usize, why: &str) {
    tracing::warn!(
        target: "fusion::egress",
        tool = %action.exposure.tool(),
        action = %action.key,
        max_bytes = budget.bytes,
        max_tokens = budget.tokens,
        size,
        "the result is over its egress budget: {why}"
    );
}

/// Puts `items` in both copies of the data, `meta` (with its truncation) in the envelope and
/// `notice` in the notice block. The notice block is at index 1 when `has_notice`; it is
/// inserted there otherwise.
fn set_cut(
    result: &mut CallToolResult,
    items: &[Value],
    meta: &Meta,
    notice: Option<String>,
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
    if let Some(notice) = notice {
        let block = ContentBlock::text(notice);
        if has_notice {
            result.content[1] = block;
        } else {
            result.content.insert(1, block);
        }
    }
    result.structured_content = Some(
        Success {
            ok: Const,
            data: Value::Array(items.to_vec()),
            meta: meta.clone(),
        }
        .into_value(),
    );
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

/// A bound on [`json_size`] of a result's text blocks and `_meta` (its `structuredContent` is
/// bounded by [`value_size_bound`]) that does not scan its text blocks, so that results
/// far below their budget (nearly all of them) are not serialized twice: JSON escaping turns
/// a byte into at most six (`\u001f`), and a text block's own JSON around its text is far
/// less than [`BLOCK_OVERHEAD`].
fn blocks_size_bound(result: &CallToolResult) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The bound of a whole result.
    fn size_upper_bound(result: &CallToolResult) -> usize {
        blocks_size_bound(result)
            + result
                .structured_content
                .as_ref()
                .map_or(0, value_size_bound)
    }

    #[test]
    fn an_empty_data_block_is_bounded_by_twice_its_datas_bound() {
        let columns = ["id", "note", "n"];
        let hostile = [
            "\"\\\"\\".repeat(50),
            "\u{1}\u{1f}\n\t".repeat(40),
            "ünïcödé ✓ 𝄞".repeat(10),
            "plain".to_owned(),
        ];
        for text in &hostile {
            let data = serde_json::json!([
                {"id": text, "note": null, "n": -1.7976931348623157e308},
                {"id": "x", "note": text, "n": u64::MAX},
                {"id": text, "note": true, "n": 0},
            ]);
            let sealed = |block: String| {
                let mut result = CallToolResult::success(vec![
                    ContentBlock::text(block),
                    ContentBlock::text("<rules>r</rules>"),
                ]);
                result.structured_content =
                    Some(serde_json::json!({"ok": true, "data": data, "meta": {}}));
                result
            };
            let bound = size_upper_bound(&sealed(String::new())) + 2 * value_size_bound(&data);
            let json = crate::present::json_text(&data, &columns);
            assert!(bound >= json_size(&sealed(json)), "{text:?}");
            let table = super::super::render::tabular(&data, Some(&columns)).unwrap();
            assert!(bound >= json_size(&sealed(table)), "{text:?}");
        }
    }

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

//! The egress budget of proxied results (issue 24): an upstream's result larger than its
//! mount's `max_bytes` (or `max_tokens`) reaches the caller cut, with the truncation notice
//! built-in tools use, instead of whole (a 50 MB answer was passed on as it came).
//!
//! The cut keeps the content blocks that fit, in order; the first that does not fit is cut
//! short when it is text (at a character boundary), and left out otherwise, with every block
//! after it. Structured content that does not fit in what is left is left out: half a JSON
//! value would not be one. Sizes are counted without copying the result.

use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;

use super::{Gateway, ProxiedTool};

/// The largest proxied result passed on when the mount does not say: 1 MiB.
pub(crate) const DEFAULT_PROXIED_MAX_BYTES: usize = 1024 * 1024;

/// `result`, within the budgets of `tool`'s upstream: its bytes, then its tokens.
pub(crate) fn fit_result(
    result: CallToolResult,
    gateway: &Gateway,
    tool: &ProxiedTool,
) -> CallToolResult {
    fit_task_result(result, gateway, tool.upstream, &tool.definition.name)
}

/// A result of `tool` (a served name) of upstream `upstream`, within that upstream's budgets:
/// its bytes, then its tokens. Named by index, as a task's tool may have left the catalog
/// since the task started.
pub(crate) fn fit_task_result(
    result: CallToolResult,
    gateway: &Gateway,
    upstream: usize,
    tool: &str,
) -> CallToolResult {
    let config = &gateway.upstream(upstream).config;
    let result = fit(result, config.max_bytes, Unit::Bytes, tool);
    match config.max_tokens {
        Some(max_tokens) => fit(result, max_tokens, Unit::Tokens, tool),
        None => result,
    }
}

/// The JSON size of `value`, counted as it is written.
fn size_of(value: &impl Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// What a budget counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// The JSON of each block and of the structured content.
    Bytes,
    /// The tokens an agent reads (o200k): a text block's text, the JSON of any other block and
    /// of the structured content. Only with the `tokens` feature (the build refuses a token
    /// budget without it).
    Tokens,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Unit::Bytes => "bytes",
            Unit::Tokens => "tokens",
        }
    }

    /// Room kept for the notice and the result's own fields.
    fn notice_room(self) -> usize {
        match self {
            Unit::Bytes => 1024,
            Unit::Tokens => 256,
        }
    }

    fn of_block(self, block: &ContentBlock) -> usize {
        match (self, block) {
            (Unit::Tokens, ContentBlock::Text(text)) => count_tokens(&text.text),
            (Unit::Tokens, block) => {
                count_tokens(&serde_json::to_string(block).unwrap_or_default())
            }
            (Unit::Bytes, block) => size_of(block),
        }
    }

    fn of_value(self, value: &serde_json::Value) -> usize {
        match self {
            Unit::Bytes => size_of(value),
            Unit::Tokens => count_tokens(&value.to_string()),
        }
    }

    /// Where to cut `text` so that its start takes at most `left` of this unit: at a character
    /// boundary.
    fn prefix_end(self, text: &str, left: usize) -> usize {
        let boundary = |mut end: usize| {
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            end
        };
        let mut fits = boundary(left.min(text.len()));
        if self == Unit::Bytes {
            return fits;
        }
        // A token is at least one byte, so `left` bytes fit; it is rarely more than a few
        // dozen, which bounds the search.
        let mut over = text.len().min(left.saturating_mul(32)) + 1;
        while over - fits > 1 {
            let middle = boundary(fits + (over - fits) / 2);
            if middle <= fits {
                break;
            }
            if count_tokens(&text[..middle]) <= left {
                fits = middle;
            } else {
                over = middle;
            }
        }
        fits
    }
}

#[cfg(feature = "tokens")]
fn count_tokens(text: &str) -> usize {
    use fusion_lock::tokens::{O200k, Tokenizer as _};
    O200k.count(text)
}

/// Never reached without a tokenizer (see [`Unit::Tokens`]): bytes bound tokens from above.
#[cfg(not(feature = "tokens"))]
fn count_tokens(text: &str) -> usize {
    text.len()
}

fn fit(mut result: CallToolResult, limit: usize, unit: Unit, tool: &str) -> CallToolResult {
    if unit == Unit::Tokens
        && size_of(&result.content) + result.structured_content.as_ref().map_or(0, size_of) <= limit
    {
        // Fewer bytes than the budget's tokens: under it, without counting.
        return result;
    }
    let sizes: Vec<usize> = result
        .content
        .iter()
        .map(|block| unit.of_block(block))
        .collect();
    let structured = result
        .structured_content
        .as_ref()
        .map_or(0, |value| unit.of_value(value));
    if sizes.iter().sum::<usize>() + structured <= limit {
        return result;
    }
    let total = result.content.len();
    let mut left = limit.saturating_sub(unit.notice_room());
    let mut kept = Vec::with_capacity(total);
    let mut shortened = false;
    for (block, size) in std::mem::take(&mut result.content).into_iter().zip(sizes) {
        if size <= left {
            left -= size;
            kept.push(block);
            continue;
        }
        if let ContentBlock::Text(text) = &block
            && left > 0
        {
            let end = unit.prefix_end(&text.text, left);
            kept.push(ContentBlock::text(&text.text[..end]));
            shortened = true;
            left = 0;
        }
        break;
    }
    let dropped_structure = result.structured_content.is_some() && structured > left;
    if dropped_structure {
        result.structured_content = None;
    }
    let shown = kept.len() - usize::from(shortened);
    let hidden = total - shown;
    let unit = unit.name();
    let mut notice = format!(
        "<truncation shown=\"{shown}\" total=\"{total}\" hidden=\"{hidden}\" reason=\"budget\">\
         The result of `{tool}` is larger than the response size limit ({limit} {unit}): \
         only {shown} of its {total} content items are shown whole"
    );
    if shortened {
        notice.push_str(", and the next one only in part");
    }
    if dropped_structure {
        notice.push_str("; its structured content is left out");
    }
    notice.push_str(
        ". Ask for less (a narrower filter, a smaller limit) to see the rest.</truncation>",
    );
    kept.push(ContentBlock::text(notice));
    result.content = kept;
    result
}

/// A token bucket for what an upstream sends a caller besides its result (progress, log
/// messages): `burst` at once, then `per_second`.
pub(crate) struct Flood {
    burst: f64,
    per_second: f64,
    tokens: f64,
    updated: tokio::time::Instant,
}

/// Progress notifications forwarded at once, then per second, for one call.
const PROGRESS_BURST: u32 = 32;
const PROGRESS_PER_SECOND: u32 = 10;
/// Log messages forwarded at once, then per second, for one call.
const LOGS_BURST: u32 = 64;
const LOGS_PER_SECOND: u32 = 20;

impl Flood {
    fn new(burst: u32, per_second: u32) -> Self {
        Flood {
            burst: f64::from(burst),
            per_second: f64::from(per_second),
            tokens: f64::from(burst),
            updated: tokio::time::Instant::now(),
        }
    }

    /// The rate of one call's log messages: past it they are dropped (each stands alone, so
    /// none supersedes another to be kept instead).
    pub(crate) fn for_logs() -> Self {
        Flood::new(LOGS_BURST, LOGS_PER_SECOND)
    }

    /// The rate of one call's progress.
    pub(crate) fn for_progress() -> Self {
        Flood::new(PROGRESS_BURST, PROGRESS_PER_SECOND)
    }

    fn refill(&mut self) {
        let now = tokio::time::Instant::now();
        let earned = now.duration_since(self.updated).as_secs_f64() * self.per_second;
        self.tokens = (self.tokens + earned).min(self.burst);
        self.updated = now;
    }

    /// Whether one more may go now (and takes its token).
    pub(crate) fn admit(&mut self) -> bool {
        self.refill();
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// When the next one may go.
    pub(crate) fn next_turn(&self) -> tokio::time::Instant {
        let missing = (1.0 - self.tokens).max(0.0);
        self.updated + std::time::Duration::from_secs_f64(missing / self.per_second)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_result_within_the_budget_passes_untouched() {
        let result = CallToolResult::success(vec![ContentBlock::text("small")]);
        let passed = fit(result.clone(), 1024 * 1024, Unit::Bytes, "up_tool");
        assert_eq!(passed, result);
    }

    #[test]
    fn a_large_result_is_cut_at_its_blocks_with_the_notice() {
        let mut result = CallToolResult::success(vec![
            ContentBlock::text("a".repeat(2_000)),
            ContentBlock::text("é".repeat(100_000)),
            ContentBlock::text("c".repeat(10)),
        ]);
        result.structured_content = Some(json!({ "data": "d".repeat(50_000) }));
        let cut = fit(result, 16 * 1024, Unit::Bytes, "up_tool");
        assert!(size_of(&cut) <= 16 * 1024, "{}", size_of(&cut));
        assert_eq!(cut.structured_content, None);
        let texts: Vec<&str> = cut
            .content
            .iter()
            .map(|block| block.as_text().unwrap().text.as_str())
            .collect();
        assert_eq!(texts.len(), 3, "whole, shortened, notice");
        assert_eq!(texts[0].len(), 2_000);
        assert!(texts[1].starts_with('é') && texts[1].len() < 200_000);
        assert!(
            texts[2]
                .starts_with("<truncation shown=\"1\" total=\"3\" hidden=\"2\" reason=\"budget\">")
                && texts[2].contains("structured content is left out"),
            "{}",
            texts[2]
        );
    }

    #[cfg(feature = "tokens")]
    #[test]
    fn a_token_budget_cuts_at_the_blocks_and_counts_what_the_agent_reads() {
        use fusion_lock::tokens::{O200k, Tokenizer as _};
        let prose = "The invoice was paid in full by the customer last week. ";
        let mut result = CallToolResult::success(vec![
            ContentBlock::text(prose.repeat(20)),
            ContentBlock::text(prose.repeat(200)),
            ContentBlock::text(prose),
        ]);
        result.structured_content = Some(json!({ "data": prose.repeat(100) }));
        // Under the budget in bytes already: untouched, nothing counted.
        let small = CallToolResult::success(vec![ContentBlock::text(prose)]);
        assert_eq!(fit(small.clone(), 100, Unit::Tokens, "up_tool"), small);
        let cut = fit(result, 1_000, Unit::Tokens, "up_tool");
        let texts: Vec<&str> = cut
            .content
            .iter()
            .map(|block| block.as_text().unwrap().text.as_str())
            .collect();
        let tokens: usize = texts.iter().map(|text| O200k.count(text)).sum();
        assert!(tokens <= 1_000, "{tokens} tokens");
        assert_eq!(cut.structured_content, None);
        assert_eq!(texts.len(), 3, "whole, shortened, notice");
        assert_eq!(texts[0], prose.repeat(20));
        // The shortened block uses what the budget leaves, not a byte-for-token guess.
        assert!(
            O200k.count(texts[1]) > 1_000 - 256 - O200k.count(texts[0]) - 20,
            "{} tokens kept of the second block",
            O200k.count(texts[1])
        );
        assert!(
            texts[2].contains("larger than the response size limit (1000 tokens)"),
            "{}",
            texts[2]
        );
    }
}

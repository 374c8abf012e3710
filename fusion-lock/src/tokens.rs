//! What an agent pays for a connector, in tokens (feature `tokens`): a tool's definition as
//! `tools/list` shows it, and each answer's text blocks and `structuredContent`.
//!
//! Counted with a real tokenizer whose vocabulary ships inside its crate: nothing is
//! downloaded, so counts are the same offline, in CI and on a developer's machine. [`O200k`]
//! (the vocabulary of OpenAI's recent models) is the default; any [`Tokenizer`] can stand in.
//!
//! ```
//! use fusion_lock::tokens::{O200k, Tokenizer};
//! assert_eq!(O200k.count("hello world"), 2);
//! ```

use serde_json::Value;

/// Counts the tokens of a text.
pub trait Tokenizer: Send + Sync {
    /// The tokenizer's name, as reports print it (`o200k_base`).
    fn name(&self) -> &str;
    /// The number of tokens of `text`, special-token markers counted as plain text.
    fn count(&self, text: &str) -> usize;

    /// The tokens of `value` as it is sent: compact JSON.
    fn count_json(&self, value: &Value) -> usize {
        self.count(&value.to_string())
    }
}

/// The `o200k_base` tokenizer (GPT-4o and later), its vocabulary built in; loaded once, on
/// first use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct O200k;

impl Tokenizer for O200k {
    fn name(&self) -> &str {
        "o200k_base"
    }

    fn count(&self, text: &str) -> usize {
        tiktoken_rs::o200k_base_singleton()
            .encode_ordinary(text)
            .len()
    }
}

/// The tokens of one tool's definition as listed (name, title, description, input and output
/// schemas, annotations, `_meta`): the JSON object `tools/list` carries for it.
pub fn definition(tool: &Value, tokenizer: &dyn Tokenizer) -> usize {
    tokenizer.count_json(tool)
}

/// The tokens of one answer (a `CallToolResult` as JSON), split as an agent receives them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AnswerTokens {
    /// The text of its text content blocks, together.
    pub text: usize,
    /// Its `structuredContent`, as compact JSON (0 when absent).
    pub structured: usize,
}

impl AnswerTokens {
    /// Text and structured content together: what a client that forwards both pays.
    pub fn total(&self) -> usize {
        self.text + self.structured
    }
}

/// The tokens of a `CallToolResult` given as JSON: the text of each text block (a block's text
/// is what the model reads, not its JSON quoting), and the `structuredContent`.
pub fn answer(result: &Value, tokenizer: &dyn Tokenizer) -> AnswerTokens {
    let text = result
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|block| block.get("text").and_then(Value::as_str))
                .map(|text| tokenizer.count(text))
                .sum()
        })
        .unwrap_or(0);
    let structured = result
        .get("structuredContent")
        .filter(|value| !value.is_null())
        .map_or(0, |value| tokenizer.count_json(value));
    AnswerTokens { text, structured }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn o200k_counts_like_the_reference_tokenizer() {
        // Counts of the reference implementation for o200k_base.
        assert_eq!(O200k.count(""), 0);
        assert_eq!(O200k.count("hello world"), 2);
        assert!(
            O200k.count("<|endoftext|>") > 1,
            "special tokens count as text"
        );
    }

    #[test]
    fn an_answer_counts_its_text_blocks_and_its_structured_content_apart() {
        let result = json!({
            "content": [
                {"type": "text", "text": "hello world"},
                {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
                {"type": "text", "text": "hello world"}
            ],
            "structuredContent": {"a": 1}
        });
        let tokens = answer(&result, &O200k);
        assert_eq!(tokens.text, 4);
        assert_eq!(tokens.structured, O200k.count(r#"{"a":1}"#));
        assert_eq!(tokens.total(), 4 + tokens.structured);
        assert_eq!(
            answer(&json!({"content": []}), &O200k),
            AnswerTokens::default()
        );
    }
}

//! Reading the answer to a `tools/call` in one pass, straight as a `CallToolResult`: shared by
//! the stdio transport ([`super::child`]) and the HTTP path ([`super::http`]).
//!
//! rmcp reads every message as a `ServerJsonRpcMessage`, whose result is an untagged enum of
//! every result type: the whole message is buffered as a generic tree, then tried against each
//! variant in turn (an error built for each miss) until one fits. A gateway reads mostly tool
//! results, which can be large. The readers here know the message answers a tool call, and read
//! it as one; anything they do not expect makes them give up, and the message is then read the
//! generic way, so that what comes out is always what rmcp would read.

use rmcp::model::{CallToolResult, ContentBlock, RequestId, ResultType, TextContent};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// `bytes` (one JSON-RPC message) read as the answer to one of our tool calls, those whose id
/// `ours` accepts; `None` when it is not one, or not in the shape read here: the caller then
/// reads it the generic way.
pub(crate) fn tool_answer(
    bytes: &[u8],
    ours: impl Fn(&RequestId) -> bool,
) -> Option<(RequestId, CallToolResult)> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    match (ToolAnswer { ours }).deserialize(&mut reader) {
        Ok(Some(answer)) if reader.end().is_ok() => Some(answer),
        _ => None,
    }
}

/// Reads a message in one pass as the answer to one of our tool calls: `Some` when its `id`
/// (before its `result`, as every SDK writes them) is one, `None` (or an error) for anything
/// else, which is then read again the generic way.
struct ToolAnswer<F> {
    /// Whether a message with this id answers one of our tool calls.
    ours: F,
}

impl<'de, F: Fn(&RequestId) -> bool> DeserializeSeed<'de> for ToolAnswer<F> {
    type Value = Option<(RequestId, CallToolResult)>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, F: Fn(&RequestId) -> bool> Visitor<'de> for ToolAnswer<F> {
    type Value = Option<(RequestId, CallToolResult)>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON-RPC message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut id: Option<RequestId> = None;
        let mut answer = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*key {
                "id" if id.is_none() => id = Some(map.next_value()?),
                "result" if answer.is_none() => {
                    if !id.as_ref().is_some_and(&self.ours) {
                        return Ok(None);
                    }
                    answer = Some(map.next_value_seed(FastResult)?);
                }
                "jsonrpc" => {
                    map.next_value::<IgnoredAny>()?;
                }
                // `error`, `method`, a repeated key: not a tool result.
                _ => return Ok(None),
            }
        }
        let (Some(id), Some(answer)) = (id, answer) else {
            return Ok(None);
        };
        Ok(Some((id, answer)))
    }
}

/// A `CallToolResult` as rmcp reads it (unknown keys ignored, `content` defaulting to none,
/// at least one known field, `resultType` complete), but with its text blocks read in place:
/// rmcp's `ContentBlock` is tagged by `type`, which serde reads by buffering each block (its
/// text copied twice). A block whose `type` is not its first key, or is not `text`, fails the
/// fast read, and the whole message is read again the generic way.
pub(crate) struct FastResult;

impl<'de> DeserializeSeed<'de> for FastResult {
    type Value = CallToolResult;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FastResult {
    type Value = CallToolResult;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a tool result")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error as _;
        let mut result = CallToolResult::default();
        result.result_type = None;
        let mut known = false;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*key {
                "resultType" => {
                    let result_type: ResultType = map.next_value()?;
                    if !result_type.is_complete() {
                        return Err(A::Error::custom("not a complete tool result"));
                    }
                    result.result_type = Some(result_type);
                }
                "content" => {
                    result.content = map.next_value_seed(FastBlocks)?;
                    known = true;
                }
                "structuredContent" => {
                    result.structured_content = Some(map.next_value()?);
                    known = true;
                }
                "isError" => {
                    result.is_error = map.next_value()?;
                    known = true;
                }
                "_meta" => result.meta = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !known {
            return Err(A::Error::custom("not a tool result"));
        }
        Ok(result)
    }
}

/// The `content` of a tool result, text blocks only (see [`FastResult`]).
struct FastBlocks;

impl<'de> DeserializeSeed<'de> for FastBlocks {
    type Value = Vec<ContentBlock>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for FastBlocks {
    type Value = Vec<ContentBlock>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("content blocks")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(4).min(64));
        while let Some(block) = seq.next_element_seed(TextBlock)? {
            blocks.push(block);
        }
        Ok(blocks)
    }
}

/// One `{"type": "text", …}` block, read in place.
struct TextBlock;

impl<'de> DeserializeSeed<'de> for TextBlock {
    type Value = ContentBlock;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for TextBlock {
    type Value = ContentBlock;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a text block")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error as _;
        let first = map.next_key::<std::borrow::Cow<'de, str>>()?;
        let kind = match first.as_deref() {
            Some("type") => map.next_value::<std::borrow::Cow<'de, str>>()?,
            _ => return Err(A::Error::custom("`type` is not first")),
        };
        if kind != "text" {
            return Err(A::Error::custom("not a text block"));
        }
        let mut text = None;
        let mut meta = None;
        let mut annotations = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match &*key {
                "text" => text = Some(map.next_value::<String>()?),
                "_meta" => meta = map.next_value()?,
                "annotations" => annotations = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let mut block = TextContent::new(text.ok_or_else(|| A::Error::missing_field("text"))?);
        block.meta = meta;
        block.annotations = annotations;
        Ok(ContentBlock::Text(block))
    }
}

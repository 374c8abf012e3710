//! Reading the answer to a `tools/call` in one pass, straight as a `CallToolResult`: shared by
//! the stdio transport ([`super::child`]) and the HTTP path ([`super::http`]).
//!
//! rmcp reads every message as a `ServerJsonRpcMessage`, whose result is an untagged enum of
//! every result type: the whole message is buffered as a generic tree, then tried against each
//! variant in turn (an error built for each miss) until one fits. A gateway reads mostly tool
//! results, which can be large. The reader here knows the message answers a tool call and reads
//! it as one: its structure by hand, text blocks unescaped in one pass over their bytes (most
//! of a tool result, and serde_json's string reader costs three times as much on the escaped
//! JSON they usually hold), every other value with serde_json. Anything it does not expect
//! makes it give up, and the message is then read the generic way, so that what comes out is
//! always what rmcp would read.

use rmcp::model::{CallToolResult, ContentBlock, RequestId, ResultType, TextContent};
use serde::de::{Deserialize, IgnoredAny};

/// `bytes` (one JSON-RPC message) read as the answer to one of our tool calls, those whose id
/// `ours` accepts; `None` when it is not one, or not in the shape read here: the caller then
/// reads it the generic way.
pub(crate) fn tool_answer(
    bytes: &[u8],
    ours: impl Fn(&RequestId) -> bool,
) -> Option<(RequestId, CallToolResult)> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let mut cursor = Cursor { bytes, at: 0 };
    let answer = cursor.message(ours)?;
    cursor.space();
    (cursor.at == bytes.len()).then_some(answer)
}

/// A position in a message. Every reader returns `None` at anything unexpected.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, consumed.
    fn next(&mut self) -> Option<u8> {
        self.space();
        let byte = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(byte)
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    /// One value, read by serde_json.
    fn value<T: Deserialize<'a>>(&mut self) -> Option<T> {
        self.space();
        let mut values =
            serde_json::Deserializer::from_slice(&self.bytes[self.at..]).into_iter::<T>();
        let value = values.next()?.ok()?;
        self.at += values.byte_offset();
        Some(value)
    }

    /// An object's members: `member` is called with each key, positioned at its value.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.expect(b'{')?;
        self.space();
        if self.bytes.get(self.at) == Some(&b'}') {
            self.at += 1;
            return Some(());
        }
        loop {
            let key = self.key()?;
            self.expect(b':')?;
            member(self, key)?;
            match self.next()? {
                b',' => {}
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    /// A key: its bytes, when it has no escape (else the reader gives up).
    fn key(&mut self) -> Option<&'a [u8]> {
        self.expect(b'"')?;
        let rest = &self.bytes[self.at..];
        let end = memchr::memchr2(b'"', b'\\', rest)?;
        if rest[end] != b'"' {
            return None;
        }
        let key = &rest[..end];
        // serde_json refuses what is not UTF-8 or holds a control character.
        if has_control(key) || (!key.is_ascii() && std::str::from_utf8(key).is_err()) {
            return None;
        }
        self.at += end + 1;
        Some(key)
    }

    /// `{"jsonrpc": "2.0", "id": …, "result": {…}}`, the id first of the two.
    fn message(
        &mut self,
        ours: impl Fn(&RequestId) -> bool,
    ) -> Option<(RequestId, CallToolResult)> {
        let mut id = None;
        let mut result = None;
        let mut version = false;
        self.object(|cursor, key| match key {
            b"jsonrpc" if !version => {
                version = true;
                (cursor.value::<&str>()? == "2.0").then_some(())
            }
            b"id" if id.is_none() => {
                id = Some(cursor.value::<RequestId>()?);
                Some(())
            }
            b"result" if result.is_none() && id.as_ref().is_some_and(&ours) => {
                result = Some(cursor.result()?);
                Some(())
            }
            // `error`, `method`, a repeated key, a result before the id.
            _ => None,
        })?;
        if !version {
            return None;
        }
        Some((id?, result?))
    }

    /// A `CallToolResult` as rmcp reads it: unknown keys ignored, `content` defaulting to none,
    /// at least one known field, `resultType` complete.
    fn result(&mut self) -> Option<CallToolResult> {
        let mut result = CallToolResult::default();
        result.result_type = None;
        let mut seen = [false; 5];
        let mut first = |index: usize| !std::mem::replace(&mut seen[index], true);
        self.object(|cursor, key| {
            match key {
                b"resultType" if first(0) => {
                    let result_type = cursor.value::<ResultType>()?;
                    result_type.is_complete().then_some(())?;
                    result.result_type = Some(result_type);
                }
                b"content" if first(1) => result.content = cursor.blocks()?,
                // `null` is kept, as rmcp keeps it.
                b"structuredContent" if first(2) => {
                    result.structured_content = Some(cursor.json(0)?);
                }
                b"isError" if first(3) => result.is_error = cursor.value()?,
                b"_meta" if first(4) => result.meta = cursor.value()?,
                b"resultType" | b"content" | b"structuredContent" | b"isError" | b"_meta" => {
                    return None;
                }
                _ => {
                    cursor.value::<IgnoredAny>()?;
                }
            }
            Some(())
        })?;
        (seen[1] || seen[2] || seen[3]).then_some(result)
    }

    /// `content`: text blocks only.
    fn blocks(&mut self) -> Option<Vec<ContentBlock>> {
        self.expect(b'[')?;
        let mut blocks = Vec::with_capacity(8);
        self.space();
        if self.bytes.get(self.at) == Some(&b']') {
            self.at += 1;
            return Some(blocks);
        }
        loop {
            blocks.push(self.text_block()?);
            match self.next()? {
                b',' => {}
                b']' => return Some(blocks),
                _ => return None,
            }
        }
    }

    /// `{"type": "text", "text": …}`, `type` first.
    fn text_block(&mut self) -> Option<ContentBlock> {
        let mut text = None;
        let mut meta = None;
        let mut annotations = None;
        let mut typed = false;
        self.object(|cursor, key| {
            match key {
                b"type" if !typed => {
                    typed = true;
                    cursor.expect(b'"')?;
                    let rest = &cursor.bytes[cursor.at..];
                    rest.starts_with(b"text\"").then_some(())?;
                    cursor.at += 5;
                }
                _ if !typed => return None,
                b"text" if text.is_none() => text = Some(cursor.string()?),
                b"_meta" if meta.is_none() => meta = Some(cursor.value()?),
                b"annotations" if annotations.is_none() => annotations = Some(cursor.value()?),
                b"type" | b"text" | b"_meta" | b"annotations" => return None,
                _ => {
                    cursor.value::<IgnoredAny>()?;
                }
            }
            Some(())
        })?;
        let mut block = TextContent::new(text?);
        block.meta = meta.flatten();
        block.annotations = annotations.flatten();
        Some(ContentBlock::Text(block))
    }

    /// Any value, built as serde_json builds a `Value` (a repeated key keeps its last value),
    /// its strings read as text blocks are; numbers are read by serde_json itself. Past a
    /// depth well within serde_json's limit, the reader gives up and serde_json decides.
    fn json(&mut self, depth: usize) -> Option<serde_json::Value> {
        use serde_json::Value;
        if depth > 100 {
            return None;
        }
        self.space();
        let value = match *self.bytes.get(self.at)? {
            b'"' => Value::String(self.string()?),
            b'{' => {
                self.at += 1;
                let mut object = serde_json::Map::new();
                self.space();
                if self.bytes.get(self.at) == Some(&b'}') {
                    self.at += 1;
                } else {
                    loop {
                        self.space();
                        let key = self.string()?;
                        self.expect(b':')?;
                        let value = self.json(depth + 1)?;
                        object.insert(key, value);
                        match self.next()? {
                            b',' => {}
                            b'}' => break,
                            _ => return None,
                        }
                    }
                }
                Value::Object(object)
            }
            b'[' => {
                self.at += 1;
                let mut items = Vec::new();
                self.space();
                if self.bytes.get(self.at) == Some(&b']') {
                    self.at += 1;
                } else {
                    loop {
                        items.push(self.json(depth + 1)?);
                        match self.next()? {
                            b',' => {}
                            b']' => break,
                            _ => return None,
                        }
                    }
                }
                Value::Array(items)
            }
            b't' => self.literal(b"true", Value::Bool(true))?,
            b'f' => self.literal(b"false", Value::Bool(false))?,
            b'n' => self.literal(b"null", Value::Null)?,
            _ => self.value()?,
        };
        Some(value)
    }

    fn literal(&mut self, word: &[u8], value: serde_json::Value) -> Option<serde_json::Value> {
        self.bytes[self.at..].starts_with(word).then_some(())?;
        self.at += word.len();
        Some(value)
    }

    /// A string, unescaped: its plain runs copied whole, found with `memchr`.
    fn string(&mut self) -> Option<String> {
        self.expect(b'"')?;
        let mut out: Option<Vec<u8>> = None;
        loop {
            let rest = &self.bytes[self.at..];
            let end = memchr::memchr2(b'"', b'\\', rest)?;
            let run = &rest[..end];
            // A control character must be escaped (serde_json refuses it).
            if has_control(run) {
                return None;
            }
            self.at += end + 1;
            let closed = rest[end] == b'"';
            let out = match (&mut out, closed) {
                // No escape at all (most keys and short values): copied once, at its size.
                (None, true) => return std::str::from_utf8(run).ok().map(str::to_owned),
                (Some(out), _) => out,
                // Escaped text (JSON in a text block, say) is often long: room for most of
                // it at once (under 1 kB, which glibc serves from its quick bins).
                (None, false) => {
                    out.insert(Vec::with_capacity((self.bytes.len() - self.at).min(1000)))
                }
            };
            out.extend_from_slice(run);
            if closed {
                // Runs end at ASCII bytes, so they are whole characters: the text is valid
                // UTF-8 if every run is.
                return String::from_utf8(std::mem::take(out)).ok();
            }
            let escape = *self.bytes.get(self.at)?;
            self.at += 1;
            let byte = match escape {
                b'"' => b'"',
                b'\\' => b'\\',
                b'/' => b'/',
                b'b' => 0x08,
                b'f' => 0x0c,
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                b'u' => {
                    let c = self.unicode()?;
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                    continue;
                }
                _ => return None,
            };
            out.push(byte);
        }
    }

    /// The character of a `\u` escape (a surrogate pair in two), positioned after the `u`.
    fn unicode(&mut self) -> Option<char> {
        let first = self.hex4()?;
        match first {
            0xD800..=0xDBFF => {
                self.bytes[self.at..].starts_with(b"\\u").then_some(())?;
                self.at += 2;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return None;
                }
                char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
            }
            // A lone trailing surrogate.
            0xDC00..=0xDFFF => None,
            _ => char::from_u32(first),
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.bytes.get(self.at..self.at + 4)?;
        let mut value = 0;
        for &digit in digits {
            value = value * 16 + char::from(digit).to_digit(16)?;
        }
        self.at += 4;
        Some(value)
    }
}

/// Whether `bytes` holds a control character (below 0x20), eight bytes at a time: a byte
/// below 0x20 borrows when 0x20 is taken from it, setting its high bit where it had none.
fn has_control(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::MAX / 255;
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let mut eight = [0; 8];
        eight.copy_from_slice(word);
        let word = u64::from_le_bytes(eight);
        if word.wrapping_sub(ONES * 0x20) & !word & (ONES << 7) != 0 {
            return true;
        }
    }
    words.remainder().iter().any(|&byte| byte < 0x20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_found_wherever_they_are() {
        for length in 0..20 {
            let plain = vec![b'a'; length];
            assert!(!has_control(&plain));
            for at in 0..length {
                for control in [0u8, 0x1f, b'\n'] {
                    let mut bytes = plain.clone();
                    bytes[at] = control;
                    assert!(has_control(&bytes), "{bytes:?}");
                }
                let mut bytes = plain.clone();
                bytes[at] = 0x20;
                bytes.push(0xff);
                assert!(!has_control(&bytes), "{bytes:?}");
            }
        }
    }

    /// The shapes of tool results that SDKs write are read here, not handed back to the
    /// generic reader (whose result is the same: see the tests of `http` and `child`).
    #[test]
    fn common_tool_results_are_read_in_one_pass() {
        let ours = |id: &RequestId| *id == RequestId::Number(-3);
        for result in [
            r#"{"content":[{"type":"text","text":"{\"id\":\"INV-3\"}"}],"structuredContent":{"ok":true},"isError":false}"#,
            r#"{"content":[],"isError":true,"_meta":{"k":1},"resultType":"complete"}"#,
            r#"{"structuredContent":null,"extra":[1,{"a":"\""}]}"#,
            r#"{"content":[{"type":"text","text":"é\u00e9","annotations":{"priority":1},"_meta":{"k":"v"},"x":1}]}"#,
        ] {
            let message = format!(r#"{{"jsonrpc":"2.0","id":-3,"result":{result}}}"#);
            assert!(tool_answer(message.as_bytes(), ours).is_some(), "{result}");
        }
        for other in [
            // Not ours; not a result; not text; `type` not first; the result before the id.
            r#"{"jsonrpc":"2.0","id":4,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":-3,"error":{"code":1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":-3,"result":{"content":[{"type":"image","data":"","mimeType":"image/png"}]}}"#,
            r#"{"jsonrpc":"2.0","id":-3,"result":{"content":[{"text":"t","type":"text"}]}}"#,
            r#"{"jsonrpc":"2.0","result":{"content":[]},"id":-3}"#,
            r#"{"jsonrpc":"2.0","id":-3,"result":{"resultType":"input_required"}}"#,
            r#"{"jsonrpc":"2.0","id":-3,"result":{"unknown":1}}"#,
        ] {
            assert!(tool_answer(other.as_bytes(), ours).is_none(), "{other}");
        }
    }
}

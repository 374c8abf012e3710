//! stdio: the MCP client starts the server and talks over its standard input and output, one
//! JSON-RPC message per line.
//!
//! The framing is ours rather than rmcp's so that bad input is answered instead of dropped:
//! a line that is not JSON gets a parse error (`-32700`), JSON that is not a message gets an
//! invalid request (`-32600`), and a line over the size limit is skipped without being held in
//! memory and answered the same way. Where the request's `id` can be read (from the start of
//! an oversized line too), the error carries it, so a client waiting on that id is not left
//! waiting forever. Notifications, which have no id, are never answered (JSON-RPC 2.0).

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, JsonObject, JsonRpcVersion2_0,
    RequestId, RequestMetaObject,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use super::{Mcp, ServeError};

/// How much of an oversized line is kept to find its `id`.
const ID_WINDOW: usize = 4096;

impl Mcp {
    /// Serves over stdio until the client closes the stream. Uses rmcp's non-blocking pipes
    /// (1.6× the throughput of the default handles on our machines). Only protocol messages
    /// are written to stdout.
    pub fn serve_stdio(&self) -> impl Future<Output = Result<(), ServeError>> + Send + '_ {
        super::erased(async move {
            let (read, write) = rmcp::transport::stdio_pipes();
            self.serve_lines(read, write).await
        })
    }

    /// Serves newline-delimited JSON-RPC (the stdio framing) over any byte streams: a pipe, a
    /// Unix socket, or `tokio::io::duplex` in tests. Returns when `read` ends. Messages longer
    /// than [`McpOptions::max_message_bytes`](super::McpOptions::max_message_bytes) are
    /// refused.
    pub async fn serve_lines<R, W>(&self, read: R, write: W) -> Result<(), ServeError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let transport = LineTransport::new(read, write, self.options.max_message_bytes);
        let service = self
            .handler()
            .serve(transport)
            .await
            .map_err(|error| ServeError::new("the stdio handshake failed", error))?;
        service
            .waiting()
            .await
            .map_err(|error| ServeError::new("the stdio service stopped", error))?;
        Ok(())
    }
}

/// Newline-delimited JSON-RPC over a pair of byte streams, answering what it cannot read.
struct LineTransport<R, W> {
    read: BufReader<R>,
    /// Shared by the concurrent sends and the error replies; each holds it for one whole line.
    write: Arc<Mutex<W>>,
    /// The line being read: kept across cancelled reads (`receive` runs inside a `select!`).
    line: Vec<u8>,
    max_line: usize,
    /// Skipping the rest of an oversized line; its first bytes are kept in `line`.
    discarding: bool,
}

/// What one bounded read produced.
enum LineRead {
    /// A whole line is in `line` (without its newline).
    Line,
    /// A line over the limit ended; its first bytes are in `line`.
    Oversized,
    Eof,
    Failed(std::io::Error),
}

impl<R: AsyncRead + Unpin, W> LineTransport<R, W> {
    fn new(read: R, write: W, max_line: usize) -> Self {
        LineTransport {
            read: BufReader::new(read),
            write: Arc::new(Mutex::new(write)),
            line: Vec::new(),
            max_line: max_line.max(1),
            discarding: false,
        }
    }

    /// Reads one line without ever holding more than the limit. Cancel-safe: bytes are
    /// copied and consumed with no await in between, so a dropped read resumes where it was.
    async fn read_line(&mut self) -> LineRead {
        loop {
            let available = match self.read.fill_buf().await {
                Ok(available) => available,
                Err(error) => return LineRead::Failed(error),
            };
            if available.is_empty() {
                return LineRead::Eof;
            }
            let newline = available.iter().position(|&byte| byte == b'\n');
            let take = newline.map_or(available.len(), |index| index + 1);
            let content = newline.map_or(available.len(), |index| index);
            if self.discarding {
                // Keep only the first bytes, to find the id.
                let room = ID_WINDOW.saturating_sub(self.line.len()).min(content);
                self.line.extend_from_slice(&available[..room]);
            } else if self.line.len() + content > self.max_line {
                self.discarding = true;
                self.line.truncate(ID_WINDOW);
                let room = ID_WINDOW.saturating_sub(self.line.len()).min(content);
                self.line.extend_from_slice(&available[..room]);
            } else {
                self.line.extend_from_slice(&available[..content]);
            }
            self.read.consume(take);
            if newline.is_some() {
                return if std::mem::take(&mut self.discarding) {
                    LineRead::Oversized
                } else {
                    LineRead::Line
                };
            }
        }
    }
}

impl<R, W> LineTransport<R, W>
where
    W: AsyncWrite + Send + Unpin + 'static,
{
    /// Sends an error reply from a task of its own, so that a `receive` dropped mid-write
    /// never leaves half a line on the stream.
    fn reply_error(&self, error: ErrorData, id: Option<RequestId>) {
        let message = TxJsonRpcMessage::<RoleServer>::error(error, id);
        let write = Arc::clone(&self.write);
        tokio::spawn(async move {
            if let Err(error) = write_message(&write, &message).await {
                tracing::debug!(%error, "could not answer a malformed message");
            }
        });
    }
}

/// Writes one message as one line, holding the stream for the whole line.
async fn write_message<W: AsyncWrite + Unpin>(
    write: &Mutex<W>,
    message: &TxJsonRpcMessage<RoleServer>,
) -> std::io::Result<()> {
    // Most answers fit without growing (`to_vec` starts at 128 bytes and doubles, copying).
    let mut bytes = Vec::with_capacity(2048);
    serde_json::to_writer(&mut bytes, message)?;
    bytes.push(b'\n');
    let mut write = write.lock().await;
    write.write_all(&bytes).await?;
    write.flush().await
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = Arc::clone(&self.write);
        async move { write_message(&write, &item).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let read = self.read_line().await;
            let line = std::mem::take(&mut self.line);
            match read {
                LineRead::Line => {}
                LineRead::Oversized => {
                    tracing::warn!(
                        target: "fusion::stdio",
                        limit = self.max_line,
                        "refused a message over the size limit"
                    );
                    self.reply_error(
                        ErrorData::invalid_request(
                            format!(
                                "The message is larger than the limit of {} bytes.",
                                self.max_line
                            ),
                            None,
                        ),
                        id_at_start(&line),
                    );
                    self.line = reuse(line);
                    continue;
                }
                LineRead::Eof => return None,
                LineRead::Failed(error) => {
                    tracing::error!(target: "fusion::stdio", %error, "reading stdin failed");
                    return None;
                }
            }
            let parsed = parse(&line);
            self.line = reuse(line);
            match parsed {
                Parsed::Message(message) => return Some(*message),
                Parsed::Blank => {}
                Parsed::Refused(error, id) => self.reply_error(error, id),
                Parsed::Ignored => {}
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.lock().await.shutdown().await
    }
}

/// Keeps a line buffer's capacity for the next line, unless a large message left it big.
fn reuse(mut line: Vec<u8>) -> Vec<u8> {
    line.clear();
    if line.capacity() > 64 * 1024 {
        line.shrink_to(64 * 1024);
    }
    line
}

/// What one whole line is.
enum Parsed {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    Blank,
    /// Answered with this error (and the request's id when it can be read).
    Refused(ErrorData, Option<RequestId>),
    /// A notification that is not a message rmcp knows: no reply is allowed.
    Ignored,
}

fn parse(line: &[u8]) -> Parsed {
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    let line = line.strip_prefix(BOM).unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Parsed::Blank;
    }
    if let Some(message) = tool_call(line) {
        return Parsed::Message(Box::new(message));
    }
    let error = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
        Ok(message) => return Parsed::Message(Box::new(message)),
        Err(error) => error,
    };
    // Read again as plain JSON only on this rare path, to tell a parse error from a message
    // of the wrong shape and to find its id.
    let Ok(value) = serde_json::from_slice::<Value>(line) else {
        tracing::debug!(target: "fusion::stdio", %error, "a line that is not JSON");
        return Parsed::Refused(
            ErrorData::parse_error("Parse error: the message is not valid JSON.", None),
            None,
        );
    };
    let id = value.get("id").and_then(request_id);
    if id.is_none() && value.get("method").is_some() {
        // A notification: JSON-RPC allows no reply, and clients send ones servers do not know.
        tracing::debug!(target: "fusion::stdio", %error, "ignored a notification");
        return Parsed::Ignored;
    }
    tracing::debug!(target: "fusion::stdio", %error, "a message of the wrong shape");
    Parsed::Refused(
        ErrorData::invalid_request("Invalid request: not a JSON-RPC 2.0 message.", None),
        id,
    )
}

/// A `tools/call` request, read in one pass; `None` for anything else (read rmcp's way).
///
/// rmcp reads a client message as an untagged enum of every request type: the message is
/// buffered as a generic tree, then tried against each type until one fits, an error built for
/// each miss (a dozen before `tools/call`). Here the `method`, when it comes before `params` as
/// every SDK writes it, says what `params` are. The result is what rmcp's reading gives: the
/// `_meta` of the params in the request's extensions.
fn tool_call(line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
    let mut reader = serde_json::Deserializer::from_slice(line);
    let message = ToolCall.deserialize(&mut reader).ok().flatten()?;
    reader.end().ok()?;
    Some(message)
}

struct ToolCall;

impl<'de> DeserializeSeed<'de> for ToolCall {
    type Value = Option<RxJsonRpcMessage<RoleServer>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ToolCall {
    type Value = Option<RxJsonRpcMessage<RoleServer>>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON-RPC request")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut version = None;
        let mut id = None;
        let mut is_tool_call = false;
        let mut request = None;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match &*key {
                "jsonrpc" if version.is_none() => {
                    version = Some(map.next_value::<JsonRpcVersion2_0>()?);
                }
                "id" if id.is_none() => id = Some(map.next_value::<RequestId>()?),
                "method" if !is_tool_call => {
                    if map.next_value::<Cow<'de, str>>()? != "tools/call" {
                        return Ok(None);
                    }
                    is_tool_call = true;
                }
                "params" if is_tool_call && request.is_none() => {
                    request = Some(map.next_value_seed(ToolCallParams)?);
                }
                // `params` before `method`, a repeated key, or anything else.
                _ => return Ok(None),
            }
        }
        let (Some(_), Some(id), Some(request)) = (version, id, request) else {
            return Ok(None);
        };
        Ok(Some(RxJsonRpcMessage::<RoleServer>::request(
            ClientRequest::CallToolRequest(request),
            id,
        )))
    }
}

/// The `params` of a `tools/call`, with their `_meta` moved to the request's extensions.
struct ToolCallParams;

impl<'de> DeserializeSeed<'de> for ToolCallParams {
    type Value = CallToolRequest;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ToolCallParams {
    type Value = CallToolRequest;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("tool call parameters")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut name: Option<String> = None;
        let mut params = CallToolRequestParams::default();
        let mut meta: Option<JsonObject> = None;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match &*key {
                "name" if name.is_none() => name = Some(map.next_value()?),
                "arguments" => params.arguments = map.next_value()?,
                "_meta" => meta = map.next_value()?,
                "inputResponses" => params.input_responses = map.next_value()?,
                "requestState" => params.request_state = map.next_value()?,
                "name" => return Err(serde::de::Error::duplicate_field("name")),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        params.name = name
            .ok_or_else(|| serde::de::Error::missing_field("name"))?
            .into();
        let mut request = CallToolRequest::new(params);
        if let Some(meta) = meta {
            request.extensions.insert(RequestMetaObject::from(meta));
        }
        Ok(request)
    }
}

fn request_id(value: &Value) -> Option<RequestId> {
    match value {
        Value::String(id) => Some(RequestId::String(id.as_str().into())),
        Value::Number(id) => id.as_i64().map(RequestId::Number),
        _ => None,
    }
}

/// The top-level `"id"` of a message of which only the first bytes are known, when it comes
/// before anything that cannot be skipped cheaply (clients write it first).
fn id_at_start(start: &[u8]) -> Option<RequestId> {
    let mut depth = 0usize;
    let mut index = 0;
    let mut key_at_top: Option<(usize, usize)> = None;
    while index < start.len() {
        match start[index] {
            b'"' => {
                let from = index + 1;
                let end = string_end(start, from)?;
                if depth == 1 {
                    key_at_top = Some((from, end));
                }
                index = end + 1;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            b':' if depth == 1 => {
                if let Some((from, end)) = key_at_top.take()
                    && &start[from..end] == b"id"
                {
                    return id_value(&start[index + 1..]);
                }
            }
            b',' => key_at_top = None,
            _ => {}
        }
        index += 1;
    }
    None
}

/// Where the JSON string starting at `from` (after its quote) ends: its closing quote.
fn string_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut index = from;
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            b'"' => return Some(index),
            _ => index += 1,
        }
    }
    None
}

/// A number or string id at the start of `rest`.
fn id_value(rest: &[u8]) -> Option<RequestId> {
    let rest = rest.trim_ascii_start();
    let end = match rest.first()? {
        b'"' => string_end(rest, 1)? + 1,
        _ => rest
            .iter()
            .position(|byte| matches!(byte, b',' | b'}') || byte.is_ascii_whitespace())?,
    };
    serde_json::from_slice::<Value>(&rest[..end])
        .ok()
        .as_ref()
        .and_then(request_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_found_at_the_top_level_only() {
        let number = br#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"x":"aaaa"#;
        assert_eq!(id_at_start(number), Some(RequestId::Number(42)));
        let string = br#"{"id" : "a\"b", "method":"#;
        assert_eq!(id_at_start(string), Some(RequestId::String("a\"b".into())));
        // An "id" inside the params is not the request's.
        let nested = br#"{"jsonrpc":"2.0","params":{"id":7,"text":"aaaa"#;
        assert_eq!(id_at_start(nested), None);
        // A value named "id" is not a key.
        let value = br#"{"method":"id","id":3}"#;
        assert_eq!(id_at_start(value), Some(RequestId::Number(3)));
        assert_eq!(id_at_start(br#"{"id":"unterminated"#), None);
        assert_eq!(id_at_start(b"not json at all"), None);
    }

    /// A tool call read in one pass is what rmcp's reading gives, `_meta` included.
    #[test]
    fn tool_calls_read_fast_are_read_as_rmcp_reads_them() {
        let lines = [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"billing_get_invoice","arguments":{"id":"INV-7"}}}"#,
            r#"{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"x","arguments":{"n":[1,{"k":null}]},"_meta":{"progressToken":3,"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},"extra":1}}"#,
            r#"{"method":"tools/call","params":{"name":"no_arguments"},"jsonrpc":"2.0","id":0}"#,
        ];
        for line in lines {
            let fast = tool_call(line.as_bytes()).expect("read fast");
            let generic: RxJsonRpcMessage<RoleServer> = serde_json::from_str(line).unwrap();
            assert_eq!(
                serde_json::to_value(&fast).unwrap(),
                serde_json::to_value(&generic).unwrap(),
                "{line}"
            );
            let meta = |message: &RxJsonRpcMessage<RoleServer>| match message {
                rmcp::model::JsonRpcMessage::Request(request) => match &request.request {
                    ClientRequest::CallToolRequest(call) => (
                        call.extensions.get::<RequestMetaObject>().cloned(),
                        call.params.clone(),
                    ),
                    other => panic!("not a tool call: {other:?}"),
                },
                other => panic!("not a request: {other:?}"),
            };
            assert_eq!(meta(&fast), meta(&generic), "{line}");
        }
        // Anything else is left to rmcp.
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"params":{"name":"x"},"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}} trailing"#,
        ] {
            assert!(tool_call(line.as_bytes()).is_none(), "{line}");
        }
    }

    #[test]
    fn lines_are_told_apart() {
        assert!(matches!(parse(b"  \r"), Parsed::Blank));
        assert!(matches!(
            parse(b"{not json"),
            Parsed::Refused(ref error, None) if error.code.0 == -32700
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":5}"#),
            Parsed::Refused(ref error, Some(RequestId::Number(5))) if error.code.0 == -32600
        ));
        assert!(matches!(parse(br#"[1,2]"#), Parsed::Refused(_, None)));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","method":"notifications/unknown","params":3}"#),
            Parsed::Ignored | Parsed::Message(_)
        ));
        assert!(matches!(
            parse(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r"),
            Parsed::Message(_)
        ));
    }
}

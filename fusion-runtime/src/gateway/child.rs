//! The transport to a stdio upstream: its child process, one JSON-RPC message per line.
//!
//! Ours rather than rmcp's `TokioChildProcess` for the cost of reading answers: this transport
//! knows which of its requests were `tools/call`, and reads their answers straight as a
//! `CallToolResult` ([`super::read`]); anything else takes rmcp's path. Stopping follows the
//! MCP stdio sequence: stdin closed, then `SIGTERM`, then `SIGKILL`, a few seconds apart.
//!
//! A line longer than [`MAX_LINE`] is not kept (issue 24: a 50 MB answer cost the gateway
//! 70 MB and more): it is skipped as it is read, and when its start names a `tools/call`
//! still awaited, that call is answered with an error at once.

use std::collections::HashSet;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How long a child may take to exit after each step of stopping it.
const EXIT_WAIT: Duration = Duration::from_secs(3);

/// The longest line read from an upstream, as rmcp's client allows a message.
const MAX_LINE: usize = super::events::MAX_MESSAGE;

/// How much of a skipped line is kept to find its request id.
const ID_PREFIX: usize = 256;

/// Request ids remembered at most (answers to forgotten ones are read the generic way).
const MAX_PENDING: usize = 4096;

/// A running child process, spoken to over its stdin and stdout.
pub(crate) struct ChildTransport {
    child: Child,
    read: BufReader<ChildStdout>,
    /// Shared by concurrent sends; `None` once closed.
    write: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    /// The line being read, kept across cancelled reads (`receive` runs in a `select!`).
    line: Vec<u8>,
    /// The start of a line too long to keep, while the rest of it is skipped.
    skipped: Option<Vec<u8>>,
    /// Ids of `tools/call` requests sent and not answered yet.
    tool_calls: Arc<Mutex<HashSet<RequestId>>>,
}

impl ChildTransport {
    /// Starts `command` with piped stdin and stdout (stderr as configured by the caller).
    pub(crate) fn spawn(mut command: Command) -> std::io::Result<ChildTransport> {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the child has no stdin or stdout"));
        };
        Ok(ChildTransport {
            child,
            read: BufReader::with_capacity(64 * 1024, stdout),
            write: Arc::new(tokio::sync::Mutex::new(Some(stdin))),
            line: Vec::new(),
            skipped: None,
            tool_calls: Arc::default(),
        })
    }

    pub(crate) fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Closes stdin and waits; then `SIGTERM`; then kills.
    async fn stop(&mut self) -> std::io::Result<()> {
        if let Some(mut stdin) = self.write.lock().await.take() {
            let _ = stdin.shutdown().await;
        }
        if tokio::time::timeout(EXIT_WAIT, self.child.wait())
            .await
            .is_ok()
        {
            return Ok(());
        }
        #[cfg(unix)]
        if let Some(pid) = self
            .child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            if tokio::time::timeout(EXIT_WAIT, self.child.wait())
                .await
                .is_ok()
            {
                return Ok(());
            }
        }
        self.child.kill().await
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let ClientJsonRpcMessage::Request(request) = &item
            && matches!(request.request, ClientRequest::CallToolRequest(_))
        {
            let mut calls = self
                .tool_calls
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            // Ids of calls never answered (the upstream lost them) are not kept forever.
            if calls.len() >= MAX_PENDING {
                calls.clear();
            }
            calls.insert(request.id.clone());
        }
        let bytes = serde_json::to_vec(&item).map(|mut bytes| {
            bytes.push(b'\n');
            bytes
        });
        let write = Arc::clone(&self.write);
        async move {
            let bytes = bytes.map_err(std::io::Error::other)?;
            let mut write = write.lock().await;
            let stdin = write
                .as_mut()
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
            stdin.write_all(&bytes).await?;
            stdin.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            // Cancel-safe: bytes read before a cancellation stay in `self.line`.
            match read_capped(&mut self.read, &mut self.line, &mut self.skipped).await {
                Ok(Line::End) => return None,
                Ok(Line::Complete) => {}
                Ok(Line::Oversized(start)) => {
                    tracing::warn!(max = MAX_LINE, "an upstream wrote a line too long to read");
                    if let Some(answer) = too_large(&self.tool_calls, &start) {
                        return Some(answer);
                    }
                    continue;
                }
                Err(error) => {
                    tracing::debug!(%error, "reading an upstream's stdout failed");
                    return None;
                }
            }
            let mut line = std::mem::take(&mut self.line);
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let parsed = (!line.iter().all(u8::is_ascii_whitespace))
                .then(|| parse(&self.tool_calls, &line))
                .flatten();
            line.clear();
            if line.capacity() <= 256 * 1024 {
                self.line = line;
            }
            if let Some(message) = parsed {
                return Some(message);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.stop().await
    }
}

/// What one read of a line ended with.
enum Line {
    /// A whole line, newline included, in the line buffer.
    Complete,
    /// A line longer than [`MAX_LINE`], skipped: its first bytes.
    Oversized(Vec<u8>),
    /// The stream ended (a last line without its newline is dropped, as before).
    End,
}

/// Reads up to the next newline into `line`, or past it when the line grows beyond
/// [`MAX_LINE`] (keeping only its start in `skipped`). Cancel-safe: what was read stays in
/// `line` or `skipped`.
async fn read_capped<R: AsyncBufRead + Unpin>(
    read: &mut R,
    line: &mut Vec<u8>,
    skipped: &mut Option<Vec<u8>>,
) -> std::io::Result<Line> {
    loop {
        let available = read.fill_buf().await?;
        if available.is_empty() {
            line.clear();
            *skipped = None;
            return Ok(Line::End);
        }
        let (used, done) = match memchr::memchr(b'\n', available) {
            Some(end) => (end + 1, true),
            None => (available.len(), false),
        };
        let chunk = &available[..used];
        match skipped {
            Some(_) => {}
            None if line.len() + used > MAX_LINE => {
                let mut start = std::mem::take(line);
                start.extend_from_slice(&chunk[..used.min(ID_PREFIX)]);
                start.truncate(ID_PREFIX);
                *skipped = Some(start);
            }
            None => line.extend_from_slice(chunk),
        }
        read.consume(used);
        if done {
            return Ok(match skipped.take() {
                Some(start) => Line::Oversized(start),
                None => Line::Complete,
            });
        }
    }
}

/// The error answer of the awaited `tools/call` a skipped line (of which `start` is the
/// beginning) answered, when its id can be read there.
fn too_large(tool_calls: &Mutex<HashSet<RequestId>>, start: &[u8]) -> Option<ServerJsonRpcMessage> {
    let key = memchr::memmem::find(start, b"\"id\"")?;
    let rest = start[key + 4..].trim_ascii_start().strip_prefix(b":")?;
    let id = serde_json::Deserializer::from_slice(rest)
        .into_iter::<RequestId>()
        .next()?
        .ok()?;
    if !tool_calls
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&id)
    {
        return None;
    }
    Some(ServerJsonRpcMessage::error(
        rmcp::ErrorData::internal_error(
            format!("the upstream's answer is larger than {MAX_LINE} bytes"),
            None,
        ),
        Some(id),
    ))
}

/// Reads one message: a tool call's answer straight as a tool result, anything else
/// as rmcp reads it. `None` for a line that is not a message (logged and skipped).
fn parse(tool_calls: &Mutex<HashSet<RequestId>>, line: &[u8]) -> Option<ServerJsonRpcMessage> {
    let answer = super::read::tool_answer(line, |id| {
        tool_calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(id)
    });
    if let Some((id, result)) = answer {
        tool_calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        return Some(ServerJsonRpcMessage::response(
            ServerResult::CallToolResult(result),
            id,
        ));
    }
    match serde_json::from_slice::<ServerJsonRpcMessage>(line) {
        Ok(message) => {
            // An answer read this way (an error, say) is no longer awaited.
            if let ServerJsonRpcMessage::Response(rmcp::model::JsonRpcResponse { id, .. })
            | ServerJsonRpcMessage::Error(rmcp::model::JsonRpcError { id: Some(id), .. }) =
                &message
            {
                tool_calls
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(id);
            }
            Some(message)
        }
        Err(error) => {
            tracing::debug!(%error, "an upstream wrote a line that is not a message");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_line_too_long_is_skipped_and_its_awaited_call_answered() {
        let huge = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
            "x".repeat(MAX_LINE)
        );
        let input = format!(
            "{huge}\n{}\n",
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#
        );
        let mut read = BufReader::with_capacity(64 * 1024, input.as_bytes());
        let (mut line, mut skipped) = (Vec::new(), None);
        let Line::Oversized(start) = read_capped(&mut read, &mut line, &mut skipped)
            .await
            .unwrap()
        else {
            panic!("the long line is skipped");
        };
        assert!(start.len() <= ID_PREFIX && line.capacity() < MAX_LINE);
        let calls = Mutex::new(HashSet::from([RequestId::Number(7)]));
        let answer = too_large(&calls, &start).expect("call 7 is answered");
        let ServerJsonRpcMessage::Error(error) = answer else {
            panic!("an error answer")
        };
        assert_eq!(error.id, Some(RequestId::Number(7)));
        assert!(calls.lock().unwrap().is_empty());
        // The next line reads whole, then the stream ends.
        assert!(matches!(
            read_capped(&mut read, &mut line, &mut skipped)
                .await
                .unwrap(),
            Line::Complete
        ));
        assert!(line.ends_with(b"list_changed\"}\n"));
        line.clear();
        assert!(matches!(
            read_capped(&mut read, &mut line, &mut skipped)
                .await
                .unwrap(),
            Line::End
        ));
    }

    /// The fast read gives what rmcp's own read gives, for tool results of every shape.
    #[test]
    fn tool_answers_read_fast_are_read_as_rmcp_reads_them() {
        let results = [
            r#"{"content":[{"type":"text","text":"{\"id\":\"INV-7\"}"}],"structuredContent":{"ok":true,"data":{"id":"INV-7","n":[1,2.5,null]}},"isError":false}"#,
            r#"{"content":[{"type":"text","text":"a\nb","annotations":{"audience":["user"],"priority":0.5},"_meta":{"k":1}},{"type":"text","text":"c","extra":true}],"_meta":{"m":"x"},"resultType":"complete"}"#,
            r#"{"content":[],"structuredContent":null}"#,
            r#"{"isError":true,"unknown":{"deep":[1]}}"#,
            // Not text first, or not text: read the generic way.
            r#"{"content":[{"text":"t","type":"text"}]}"#,
            r#"{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"}]}"#,
        ];
        for (index, result) in results.iter().enumerate() {
            let id = RequestId::Number(i64::try_from(index).unwrap());
            let line = format!(r#"{{"jsonrpc":"2.0","id":{index},"result":{result}}}"#);
            let calls = Mutex::new(HashSet::from([id.clone()]));
            let fast = parse(&calls, line.as_bytes()).expect("a message");
            let generic: ServerJsonRpcMessage = serde_json::from_str(&line).unwrap();
            assert_eq!(
                serde_json::to_value(&fast).unwrap(),
                serde_json::to_value(&generic).unwrap(),
                "{result}"
            );
            let ServerJsonRpcMessage::Response(response) = fast else {
                panic!("not a response: {result}");
            };
            assert!(
                matches!(response.result, ServerResult::CallToolResult(_)),
                "{result}"
            );
            assert!(calls.lock().unwrap().is_empty(), "{result}: still awaited");
        }
        // Not one of our tool calls: rmcp's reading, whatever it fits.
        let calls = Mutex::new(HashSet::new());
        let line = r#"{"jsonrpc":"2.0","id":9,"result":{"tools":[]}}"#;
        let message = parse(&calls, line.as_bytes()).unwrap();
        assert_eq!(
            serde_json::to_value(&message).unwrap(),
            serde_json::to_value(serde_json::from_str::<ServerJsonRpcMessage>(line).unwrap())
                .unwrap()
        );
        // An error answers a call too.
        let calls = Mutex::new(HashSet::from([RequestId::Number(3)]));
        let line = r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad"}}"#;
        assert!(matches!(
            parse(&calls, line.as_bytes()),
            Some(ServerJsonRpcMessage::Error(_))
        ));
        assert!(calls.lock().unwrap().is_empty());
        assert!(parse(&calls, b"not json").is_none());
    }
}

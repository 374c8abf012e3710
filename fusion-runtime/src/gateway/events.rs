//! The messages of an upstream's answer to a proxied call: an event stream cut into its
//! messages ([`EventParser`]), and what each message means for the call ([`step`]).

use std::time::Duration;

use rmcp::model::{
    CallToolResult, ProgressNotificationParam, RequestId, ServerJsonRpcMessage, ServerNotification,
    ServerRequest, ServerResult,
};

use super::failure::Failure;

/// The largest JSON answer or event read, as rmcp's client allows.
pub(super) const MAX_MESSAGE: usize = 16 * 1024 * 1024;

pub(super) const BOM: &[u8] = b"\xEF\xBB\xBF";

/// What one message from the upstream means for the call with id `id`.
#[derive(Debug)]
pub(crate) enum Step {
    /// The call's answer.
    Answer(Result<CallToolResult, Failure>),
    /// Progress (of this call, if its token is the call's).
    Progress(ProgressNotificationParam),
    /// The upstream's tools changed.
    ListChanged,
    /// A log message (of this call, when it comes on the call's stream).
    #[allow(deprecated)] // logging (SEP-2577), for the callers that ask
    Log(rmcp::model::LoggingMessageNotificationParam),
    /// A request of the upstream's, to answer.
    Request(RequestId, ServerRequest),
    /// Nothing for this call.
    Other,
}

/// Reads one message: the answer straight as a tool result when it is one, anything else as
/// rmcp reads it.
pub(crate) fn step(bytes: &[u8], id: &RequestId) -> Step {
    if let Some((_, result)) = super::read::tool_answer(bytes, |candidate| candidate == id) {
        return Step::Answer(Ok(result));
    }
    let bytes = bytes.strip_prefix(BOM).unwrap_or(bytes);
    let message = match serde_json::from_slice::<ServerJsonRpcMessage>(bytes) {
        Ok(message) => message,
        Err(error) => {
            // rmcp skips such an event too.
            tracing::debug!(%error, "an upstream sent something that is not a message");
            return Step::Other;
        }
    };
    match message {
        ServerJsonRpcMessage::Response(response) if response.id == *id => match response.result {
            ServerResult::CallToolResult(result) => Step::Answer(Ok(result)),
            ServerResult::InputRequiredResult(result) => {
                Step::Answer(Err(Failure::InputRequired(Box::new(result))))
            }
            other => Step::Answer(Err(Failure::Unexpected(format!(
                "tools/call answered with something else than a tool result: {other:?}"
            )))),
        },
        // An error without an id on the call's own exchange can only be about the call.
        ServerJsonRpcMessage::Error(error) if error.id.as_ref().is_none_or(|error| error == id) => {
            Step::Answer(Err(Failure::Rpc(error.error)))
        }
        ServerJsonRpcMessage::Notification(notification) => match notification.notification {
            ServerNotification::ProgressNotification(progress) => Step::Progress(progress.params),
            ServerNotification::ToolListChangedNotification(_) => Step::ListChanged,
            #[allow(deprecated)] // logging (SEP-2577), for the callers that ask
            ServerNotification::LoggingMessageNotification(message) => Step::Log(message.params),
            _ => Step::Other,
        },
        ServerJsonRpcMessage::Request(request) => Step::Request(request.id, request.request),
        ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_) => Step::Other,
    }
}

/// Server-sent events, parsed as their bytes arrive (the WHATWG event stream format): the data
/// of each message event, the last event id, the last retry hint.
#[derive(Default)]
pub(crate) struct EventParser {
    /// Bytes not parsed yet (an incomplete line).
    pending: Vec<u8>,
    /// The data of the event being read.
    data: Vec<u8>,
    has_data: bool,
    /// The event being read has a type other than `message`.
    other_type: bool,
    /// The last chunk ended with a `\r`.
    after_cr: bool,
    started: bool,
    /// Complete events' data, not taken yet.
    ready: std::collections::VecDeque<Vec<u8>>,
    pub(crate) last_id: Option<String>,
    pub(crate) retry: Option<Duration>,
}

impl EventParser {
    /// A parser for a resumed stream: the last id is kept.
    pub(super) fn resumed(self) -> EventParser {
        EventParser {
            last_id: self.last_id,
            ..EventParser::default()
        }
    }

    /// Parses `chunk`; an error when an event grows past the limit.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<(), String> {
        if self.started && self.pending.is_empty() {
            return self.lines(chunk);
        }
        let mut joined = std::mem::take(&mut self.pending);
        joined.extend_from_slice(chunk);
        let mut start = 0;
        if !self.started {
            // A byte order mark may open the stream, even split across chunks.
            if joined.len() < BOM.len() && BOM.starts_with(&joined) {
                self.pending = joined;
                return Ok(());
            }
            self.started = true;
            if joined.starts_with(BOM) {
                start = BOM.len();
            }
        }
        self.lines(&joined[start..])
    }

    fn lines(&mut self, mut bytes: &[u8]) -> Result<(), String> {
        if self.after_cr {
            // The `\n` of a `\r\n` cut between chunks.
            self.after_cr = false;
            bytes = bytes.strip_prefix(b"\n").unwrap_or(bytes);
        }
        while let Some(end) = memchr::memchr2(b'\n', b'\r', bytes) {
            let line = &bytes[..end];
            let mut next = end + 1;
            if bytes[end] == b'\r' {
                match bytes.get(end + 1) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            self.line(line);
            bytes = &bytes[next..];
        }
        if self.pending.len() + bytes.len() + self.data.len() > MAX_MESSAGE {
            return Err(format!("an event is larger than {MAX_MESSAGE} bytes"));
        }
        self.pending.extend_from_slice(bytes);
        Ok(())
    }

    fn line(&mut self, line: &[u8]) {
        if line.is_empty() {
            // An event without data (a priming event, say) is no message; rmcp skips it too.
            if self.has_data && !self.other_type && !self.data.is_empty() {
                self.ready.push_back(std::mem::take(&mut self.data));
            }
            self.data.clear();
            self.has_data = false;
            self.other_type = false;
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => self.other_type = !(value.is_empty() || value == b"message"),
            b"id" if !value.contains(&0) => {
                self.last_id = Some(String::from_utf8_lossy(value).into_owned());
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                self.retry = std::str::from_utf8(value)
                    .ok()
                    .and_then(|digits| digits.parse().ok())
                    .map(Duration::from_millis);
            }
            _ => {}
        }
    }

    /// The data of the next complete message event.
    pub(crate) fn next_message(&mut self) -> Option<Vec<u8>> {
        self.ready.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt as _;
    use rmcp::model::NumberOrString;
    use serde_json::{Value, json};

    use super::*;

    fn id() -> RequestId {
        NumberOrString::String("fusion-7".into())
    }

    /// What rmcp's client reads from a response body: the message, and from it the call's
    /// result, or why it is not one.
    fn rmcp_reads(body: &[u8]) -> Result<Value, String> {
        match serde_json::from_slice::<ServerJsonRpcMessage>(body) {
            Ok(ServerJsonRpcMessage::Response(response)) => match response.result {
                ServerResult::CallToolResult(result) => Ok(serde_json::to_value(result).unwrap()),
                ServerResult::InputRequiredResult(result) => Err(format!(
                    "input required {}",
                    serde_json::to_value(result).unwrap()
                )),
                _ => Err("not a tool result".into()),
            },
            Ok(ServerJsonRpcMessage::Error(error)) => Err(format!(
                "rpc {}",
                serde_json::to_value(error.error).unwrap()
            )),
            Ok(_) => Err("not an answer".into()),
            Err(_) => Err("not a message".into()),
        }
    }

    /// What the gateway's path reads from the same body.
    fn fast_reads(body: &[u8]) -> Result<Value, String> {
        match step(body, &id()) {
            Step::Answer(Ok(result)) => Ok(serde_json::to_value(result).unwrap()),
            Step::Answer(Err(Failure::Rpc(error))) => {
                Err(format!("rpc {}", serde_json::to_value(error).unwrap()))
            }
            Step::Answer(Err(Failure::Unexpected(_))) => Err("not a tool result".into()),
            // Passed back untouched to a caller that asks in rounds.
            Step::Answer(Err(Failure::InputRequired(result))) => Err(format!(
                "input required {}",
                serde_json::to_value(result).unwrap()
            )),
            Step::Answer(Err(other)) => panic!("{other:?}"),
            _ => Err("not an answer".into()),
        }
    }

    const RESULTS: &[&str] = &[
        r#"{"content":[{"type":"text","text":"{\"id\":\"INV-7\"}"}],"structuredContent":{"ok":true,"data":{"id":"INV-7","n":[1,2.5,null]}},"isError":false}"#,
        r#"{"content":[{"type":"text","text":"a\nb","annotations":{"audience":["user"],"priority":0.5},"_meta":{"k":1}},{"type":"text","text":"c","extra":true}],"_meta":{"m":"x"},"resultType":"complete"}"#,
        r#"{"content":[],"structuredContent":null}"#,
        r#"{"isError":true,"unknown":{"deep":[1]}}"#,
        r#"{"content":[{"type":"text","text":"Invoice not found."}],"structuredContent":{"ok":false,"error":{"code":"NOT_FOUND"}},"isError":true}"#,
        // Read the generic way: `type` not first, or not text.
        r#"{"content":[{"text":"t","type":"text"}]}"#,
        r#"{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"},{"type":"text","text":"x"}]}"#,
        r#"{"content":[{"type":"resource","resource":{"uri":"file:///a","text":"b"}}]}"#,
        // Every escape, raw UTF-8, whitespace everywhere, nulls.
        r#" { "content" : [ { "type" : "text" , "text" : "q\" s\\ l\/ \b\f\n\r\t \u00e9\u20AC \ud83d\ude00 é😀" , "annotations" : null , "_meta" : null } ] , "isError" : null , "_meta" : { "a" : [ 1 , { } ] } } "#,
        r#"{"content":[{"type":"text","text":""},{"type":"text","text":"\\\\\"\""}],"structuredContent":{"s":"\u0000x"}}"#,
        // Values of every kind in structuredContent: numbers read by serde_json, keys with
        // escapes, a repeated key (the last wins), empty containers, nesting, whitespace.
        r#"{"structuredContent":{"n":[0,-0,1,-1,1.5,-2.5e-3,1E10,18446744073709551615,-9223372036854775808,123456789012345678901234567890],"k\"ey\u00e9":{"a":[],"b":{},"c":[[[{"d":null}]]]},"t":true,"f":false,"z":null,"r":1,"r":2, "w" : [ 1 , "x" , { } ] }}"#,
    ];

    /// Answers neither reader takes: the same failure either way.
    const BROKEN: &[&str] = &[
        // Duplicate keys, a control character, lone surrogates, a bad escape, a truncation,
        // another version, trailing bytes.
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"content":[],"content":[]}}"#,
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"content":[{"type":"text","text":"a","text":"b"}]}}"#,
        "{\"jsonrpc\":\"2.0\",\"id\":\"fusion-7\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"a\u{1}b\"}]}}",
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"content":[{"type":"text","text":"\ud800"}]}}"#,
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"content":[{"type":"text","text":"\ude00"}]}}"#,
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"content":[{"type":"text","text":"\x"}]}}"#,
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"content":[{"type":"text","text":"a"}]"#,
        r#"{"jsonrpc":"1.0","id":"fusion-7","result":{"content":[]}}"#,
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"content":[]}} x"#,
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"structuredContent":{"a":tru}}}"#,
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"structuredContent":{"a":1x}}}"#,
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"structuredContent":{"a":[1,]}}}"#,
        r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"structuredContent":{"a":1e400}}}"#,
    ];

    /// A JSON body: the same result, or the same failure, as rmcp's read gives, for every
    /// shape of answer.
    #[test]
    fn json_answers_read_as_rmcp_reads_them() {
        for result in RESULTS {
            let body = format!(r#"{{"jsonrpc":"2.0","id":"fusion-7","result":{result}}}"#);
            let fast = fast_reads(body.as_bytes());
            assert!(fast.is_ok(), "{result}: {fast:?}");
            assert_eq!(fast, rmcp_reads(body.as_bytes()), "{result}");
            // Keys in another order (read the generic way), a byte order mark: the same.
            let body = format!(r#"{{"result":{result},"id":"fusion-7","jsonrpc":"2.0"}}"#);
            assert_eq!(fast_reads(body.as_bytes()), fast, "{result}");
            assert_eq!(
                fast_reads(format!("\u{feff}{body}").as_bytes()),
                fast,
                "{result}"
            );
        }
        // Nesting past serde_json's limit is refused by both; within it, read by both.
        for depth in [100, 126, 127, 128, 129, 200] {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":"fusion-7","result":{{"structuredContent":{}1{}}}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            );
            assert_eq!(
                fast_reads(body.as_bytes()).is_ok(),
                rmcp_reads(body.as_bytes()).is_ok(),
                "depth {depth}"
            );
            if let Ok(value) = rmcp_reads(body.as_bytes()) {
                assert_eq!(fast_reads(body.as_bytes()), Ok(value), "depth {depth}");
            }
        }
        for broken in BROKEN {
            assert!(rmcp_reads(broken.as_bytes()).is_err(), "{broken}");
            assert!(fast_reads(broken.as_bytes()).is_err(), "{broken}");
        }
        let error = br#"{"jsonrpc":"2.0","id":"fusion-7","error":{"code":-32602,"message":"Unknown tool: x","data":{"n":1}}}"#;
        assert!(fast_reads(error).unwrap_err().starts_with("rpc "));
        assert_eq!(fast_reads(error), rmcp_reads(error));
        // Answers that are not tool results are refused, as rmcp's client refuses them, except
        // `input_required`, read as rmcp reads it.
        for other in [
            r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"tools":[]}}"#,
            r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"resultType":"input_required","inputRequests":{"q1":{"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object","properties":{}}}}}}}"#,
            r#"{"jsonrpc":"2.0","id":"fusion-7","result":{"resultType":"complete"}}"#,
        ] {
            assert_eq!(
                fast_reads(other.as_bytes()),
                rmcp_reads(other.as_bytes()),
                "{other}"
            );
        }
        // Not the call's answer.
        for other in [
            r#"{"jsonrpc":"2.0","id":"fusion-8","result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":8,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#,
            "not json",
        ] {
            assert_eq!(
                fast_reads(other.as_bytes()),
                Err("not an answer".into()),
                "{other}"
            );
        }
    }

    /// The messages rmcp's client reads from an event stream cut into `chunks`: its SSE reader,
    /// message events only, data that is not a message skipped.
    async fn rmcp_reads_stream(chunks: &[&[u8]]) -> Vec<Value> {
        let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = chunks
            .iter()
            .map(|chunk| Ok(bytes::Bytes::copy_from_slice(chunk)))
            .collect();
        let mut events = sse_stream::SseStream::from_bytes_stream(futures::stream::iter(chunks));
        let mut read = Vec::new();
        while let Some(event) = events.next().await {
            let event = event.unwrap();
            if !matches!(event.event.as_deref(), None | Some("" | "message")) {
                continue;
            }
            let Some(data) = event.data else { continue };
            let Ok(message) = serde_json::from_str::<ServerJsonRpcMessage>(&data) else {
                continue;
            };
            read.push(match message {
                ServerJsonRpcMessage::Response(response) => match response.result {
                    ServerResult::CallToolResult(result) => {
                        json!({"result": serde_json::to_value(result).unwrap()})
                    }
                    _ => json!("not a tool result"),
                },
                ServerJsonRpcMessage::Error(error) => json!({"error": error.error}),
                ServerJsonRpcMessage::Notification(notification) => {
                    match notification.notification {
                        ServerNotification::ProgressNotification(progress) => {
                            json!({"progress": progress.params})
                        }
                        ServerNotification::ToolListChangedNotification(_) => json!("changed"),
                        #[allow(deprecated)] // logging (SEP-2577)
                        ServerNotification::LoggingMessageNotification(message) => {
                            json!({"log": message.params})
                        }
                        _ => continue,
                    }
                }
                ServerJsonRpcMessage::Request(request) => json!({"request": request.id}),
            });
        }
        read
    }

    /// What the gateway's path reads from the same chunks, up to the answer.
    fn fast_reads_stream(chunks: &[&[u8]]) -> Vec<Value> {
        let mut events = EventParser::default();
        let mut read = Vec::new();
        for chunk in chunks {
            events.push(chunk).unwrap();
            while let Some(data) = events.next_message() {
                read.push(match step(&data, &id()) {
                    Step::Answer(Ok(result)) => {
                        json!({"result": serde_json::to_value(result).unwrap()})
                    }
                    Step::Answer(Err(Failure::Rpc(error))) => json!({"error": error}),
                    Step::Answer(Err(_)) => json!("not a tool result"),
                    Step::Progress(progress) => json!({"progress": progress}),
                    Step::ListChanged => json!("changed"),
                    Step::Log(message) => json!({"log": message}),
                    Step::Request(id, _) => json!({"request": id}),
                    Step::Other => continue,
                });
            }
        }
        read
    }

    /// An event stream: progress, then the answer, with what a stream may hold besides
    /// (a priming event, comments, other event types, ids, retry hints, data over several
    /// lines, CRLF or CR line ends), read whole and cut at every size.
    #[tokio::test]
    async fn streamed_answers_read_as_rmcp_reads_them() {
        let mut streams = Vec::new();
        for (index, result) in RESULTS.iter().enumerate() {
            let newline = ["\n", "\r\n", "\r"][index % 3];
            let events = [
                "id: 0\ndata:\n".to_owned(),
                ": keep-alive\nretry: 500\n".to_owned(),
                r#"id: 1
data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"fusion-7","progress":1,"total":2,"message":"half"}}
"#
                .to_owned(),
                "event: ping\ndata: {}\n".to_owned(),
                r#"data: {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}
"#
                .to_owned(),
                r#"data: {"jsonrpc":"2.0","method":"notifications/progress",
data: "params":{"progressToken":"fusion-7","progress":2,"total":2}}
"#
                .to_owned(),
                r#"data: {"jsonrpc":"2.0","id":"ping-1","method":"ping"}
"#
                .to_owned(),
                "data: not json\n".to_owned(),
                format!("id: 2\nevent: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":\"fusion-7\",\"result\":{result}}}\n"),
            ];
            let stream = events.join("\n").replace('\n', newline) + newline;
            streams.push(stream);
        }
        streams.push(
            "data: {\"jsonrpc\":\"2.0\",\"id\":\"fusion-7\",\"error\":{\"code\":-32603,\"message\":\"boom\"}}\n\n"
                .to_owned(),
        );
        streams.push(
            "\u{feff}data: {\"jsonrpc\":\"2.0\",\"id\":\"fusion-7\",\"result\":{\"tools\":[]}}\n\n"
                .to_owned(),
        );
        for stream in &streams {
            let bytes = stream.as_bytes();
            let expected = rmcp_reads_stream(&[bytes]).await;
            assert!(
                expected
                    .last()
                    .is_some_and(|last| last.get("result").is_some()
                        || last.get("error").is_some()
                        || *last == "not a tool result"),
                "{stream:?}: {expected:?}"
            );
            for size in [1, 2, 3, 5, 8, 13, 64, bytes.len()] {
                let chunks: Vec<&[u8]> = bytes.chunks(size).collect();
                // rmcp reads a `\r` at the end of the stream as a line end; so does everyone
                // once the next chunk comes, which it does here but for the very last byte.
                let fast = fast_reads_stream(&chunks);
                assert_eq!(fast, expected, "{stream:?} in chunks of {size}");
            }
        }
    }

    /// The last event id and retry hint (to resume a stream), limits.
    #[test]
    fn event_streams_keep_what_resuming_needs() {
        let mut events = EventParser::default();
        events
            .push(b"id: 41\nretry: 250\ndata: a\n\nid: 42\ndata: b\n\ndata: c\n")
            .unwrap();
        assert_eq!(events.next_message().as_deref(), Some(&b"a"[..]));
        assert_eq!(events.next_message().as_deref(), Some(&b"b"[..]));
        // `c` is not complete until its blank line.
        assert_eq!(events.next_message(), None);
        assert_eq!(events.last_id.as_deref(), Some("42"));
        assert_eq!(events.retry, Some(Duration::from_millis(250)));
        let resumed = events.resumed();
        assert_eq!(resumed.last_id.as_deref(), Some("42"));
        let mut big = EventParser::default();
        let line = vec![b'x'; 1024 * 1024];
        let mut refused = false;
        for _ in 0..17 {
            big.push(b"data: ").unwrap();
            if big.push(&line).is_err() {
                refused = true;
                break;
            }
        }
        assert!(refused, "an event past the limit is refused");
    }
}

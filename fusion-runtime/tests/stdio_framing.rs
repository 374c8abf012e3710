//! The stdio framing, driven line by line over `tokio::io::duplex` the way a client writes to
//! a server's stdin: bad input is answered (parse error, invalid request, message too large),
//! with the request's id where it can be read, and the server keeps serving.

#![cfg(feature = "stdio")]

use std::time::Duration;

use fusion_runtime::serve::{Mcp, McpOptions};
use fusion_runtime::{CallContext, ServerBuilder, ToolError, ToolSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

const TEST_TIMEOUT: Duration = Duration::from_secs(20);
const LIMIT: usize = 64 * 1024;

#[derive(Deserialize, JsonSchema)]
struct Text {
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct Echoed {
    text: String,
}

/// A client speaking raw lines to a server served with [`Mcp::serve_lines`].
struct Client {
    write: tokio::io::WriteHalf<DuplexStream>,
    lines: Lines<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
    server: tokio::task::JoinHandle<()>,
}

impl Client {
    async fn start() -> Client {
        let server = ServerBuilder::new("lines", "1")
            .tool_spec(ToolSpec::query("lines.echo", "Repeats the text.").handler(
                |_: CallContext, args: Text| async move {
                    Ok::<_, ToolError>(Echoed { text: args.text })
                },
            ))
            .build()
            .unwrap();
        let mcp = Mcp::new(server).options(McpOptions {
            max_message_bytes: LIMIT,
            ..McpOptions::default()
        });
        let (client, server_io) = tokio::io::duplex(256 * 1024);
        let (server_read, server_write) = tokio::io::split(server_io);
        let server = tokio::spawn(async move {
            mcp.serve_lines(server_read, server_write)
                .await
                .expect("served until the client left");
        });
        let (read, write) = tokio::io::split(client);
        let mut client = Client {
            write,
            lines: BufReader::new(read).lines(),
            server,
        };
        client
            .send(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"}
                }}),
            )
            .await;
        assert_eq!(client.reply().await["id"], 0);
        client
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        client
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.write.write_all(bytes).await.unwrap();
        self.write.flush().await.unwrap();
    }

    async fn send(&mut self, message: &Value) {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.send_raw(&line).await;
    }

    async fn reply(&mut self) -> Value {
        let line = self
            .lines
            .next_line()
            .await
            .unwrap()
            .expect("the server answers");
        serde_json::from_str(&line).expect("every line the server writes is JSON")
    }

    /// Calls `lines_echo`, proving the server still serves.
    async fn echo(&mut self, id: i64, text: &str) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "lines_echo", "arguments": {"text": text}
            }}),
        )
        .await;
        let reply = self.reply().await;
        assert_eq!(reply["id"], id, "{reply}");
        assert_eq!(
            reply["result"]["structuredContent"]["data"]["text"], text,
            "{reply}"
        );
    }

    async fn close(mut self) {
        // The end of the server's input, as when a client exits.
        self.write.shutdown().await.unwrap();
        tokio::time::timeout(TEST_TIMEOUT, self.server)
            .await
            .expect("the server stops when its input ends")
            .unwrap();
    }
}

async fn within<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(TEST_TIMEOUT, future)
        .await
        .expect("the test did not finish in time")
}

#[tokio::test]
async fn a_line_that_is_not_json_is_answered_with_a_parse_error() {
    within(async {
        let mut client = Client::start().await;
        client
            .send_raw(b"{\"jsonrpc\": \"2.0\", \"id\": 1, oops\n")
            .await;
        let reply = client.reply().await;
        assert_eq!(reply["error"]["code"], -32700, "{reply}");
        assert!(reply.get("result").is_none());
        client.echo(2, "still here").await;
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn json_that_is_not_a_message_is_an_invalid_request_with_its_id() {
    within(async {
        let mut client = Client::start().await;
        client.send(&json!({"jsonrpc": "2.0", "id": 7})).await;
        let reply = client.reply().await;
        assert_eq!(reply["error"]["code"], -32600, "{reply}");
        assert_eq!(reply["id"], 7, "the waiting client can match it");
        client.send(&json!([1, 2, 3])).await;
        let reply = client.reply().await;
        assert_eq!(reply["error"]["code"], -32600, "{reply}");
        client.echo(8, "ok").await;
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn an_oversized_line_is_skipped_and_answered_with_its_id() {
    within(async {
        let mut client = Client::start().await;
        let huge = "x".repeat(LIMIT * 4);
        let message = json!({"jsonrpc": "2.0", "id": "big-1", "method": "tools/call", "params": {
            "name": "lines_echo", "arguments": {"text": huge}
        }});
        client.send(&message).await;
        let reply = client.reply().await;
        assert_eq!(reply["id"], "big-1", "{reply}");
        assert_eq!(reply["error"]["code"], -32600);
        assert!(
            reply["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&LIMIT.to_string()),
            "{reply}"
        );
        // A message just under the limit is served.
        client.echo(9, &"y".repeat(LIMIT - 200)).await;
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn notifications_are_never_answered_even_unknown_or_malformed_ones() {
    within(async {
        let mut client = Client::start().await;
        client
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/whatever", "params": 1}))
            .await;
        client
            .send(&json!({"jsonrpc": "2.0", "method": "$/lsp-thing"}))
            .await;
        client.send_raw(b"\n\r\n   \n").await;
        // The next line the server writes answers the next request.
        client
            .send(&json!({"jsonrpc": "2.0", "id": 11, "method": "ping"}))
            .await;
        let reply = client.reply().await;
        assert_eq!(reply["id"], 11, "{reply}");
        assert!(reply.get("result").is_some(), "{reply}");
        client.close().await;
    })
    .await;
}

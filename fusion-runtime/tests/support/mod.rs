//! Shared by the HTTP test binaries: a small server, an in-process `serve_http_on` on
//! `127.0.0.1:0` that stops with its test, and a raw HTTP/1.1 client for what a client library
//! hides (half-sent requests, streams nobody reads, exact statuses and headers).
#![allow(dead_code, unreachable_pub)]

pub mod calls;

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fusion_runtime::serve::{HttpOptions, Mcp, ServeError};
use fusion_runtime::{CallContext, Server, ServerBuilder, ToolError, ToolSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Every test finishes well within this, or fails instead of hanging CI.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(30);

pub async fn within<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(TEST_TIMEOUT, future)
        .await
        .expect("the test did not finish in time")
}

/// Polls `condition` every 10 ms until it holds, or fails with `what` after `deadline`.
pub async fn eventually<F, Fut>(deadline: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = tokio::time::Instant::now();
    loop {
        if condition().await {
            return;
        }
        assert!(
            start.elapsed() < deadline,
            "{what}: not within {deadline:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Logs

/// The events fusion-runtime logs on one thread: a test on a current-thread runtime sees its
/// server's, and no other test's.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<Logged>>>);

/// One event: its level, and its message followed by its other fields (`name=value`).
#[derive(Debug, Clone)]
pub struct Logged {
    pub level: tracing::Level,
    pub text: String,
}

impl Logs {
    /// Records the events of this thread until the guard is dropped.
    pub fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let guard = tracing::subscriber::set_default(logs.clone());
        (logs, guard)
    }

    /// The events so far whose text contains `needle`.
    pub fn containing(&self, needle: &str) -> Vec<Logged> {
        let events = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        events
            .iter()
            .filter(|event| event.text.contains(needle))
            .cloned()
            .collect()
    }
}

impl tracing::Subscriber for Logs {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        metadata.target().starts_with("fusion_runtime")
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        struct Text(String);
        impl tracing::field::Visit for Text {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
                if field.name() == "message" {
                    self.0.insert_str(0, &format!("{value:?}"));
                } else {
                    self.0.push_str(&format!(" {}={value:?}", field.name()));
                }
            }
        }
        let mut text = Text(String::new());
        event.record(&mut text);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Logged {
                level: *event.metadata().level(),
                text: text.0,
            });
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

// ---------------------------------------------------------------------------------------------
// The server

#[derive(Deserialize, JsonSchema)]
struct Text {
    text: String,
}

#[derive(Deserialize, JsonSchema)]
struct Size {
    bytes: usize,
}

#[derive(Serialize, JsonSchema)]
struct Echoed {
    text: String,
}

/// `demo_echo` repeats its text; `demo_big` answers with a text of the size asked for (to fill
/// socket buffers).
pub fn demo_server() -> Server {
    ServerBuilder::new("demo", "1.0.0")
        .tool_spec(
            ToolSpec::query("demo.echo", "Repeats the text.").handler(
                |_: CallContext, args: Text| async move {
                    Ok::<_, ToolError>(Echoed { text: args.text })
                },
            ),
        )
        .tool_spec(
            ToolSpec::query("demo.big", "Answers with a text of the size asked for.").handler(
                |_: CallContext, args: Size| async move {
                    Ok::<_, ToolError>(Echoed {
                        text: "x".repeat(args.bytes.min(64 << 20)),
                    })
                },
            ),
        )
        .build()
        .expect("the demo server builds")
}

/// An in-process `Mcp::serve_http_on` on `127.0.0.1:0`. Dropping it cancels its shutdown token
/// and aborts the task, so the server never outlives its test.
pub struct Served {
    pub address: SocketAddr,
    pub options: HttpOptions,
    task: Option<tokio::task::JoinHandle<Result<(), ServeError>>>,
}

impl Served {
    pub async fn start(mcp: Mcp, options: HttpOptions) -> Served {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let address = listener.local_addr().expect("bound address");
        let options = options.bind(address);
        let task = tokio::spawn({
            let options = options.clone();
            async move { mcp.serve_http_on(listener, options).await }
        });
        Served {
            address,
            options,
            task: Some(task),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.address)
    }

    /// Cancels the shutdown token and returns how long `serve_http_on` took to return.
    pub async fn stop(mut self) -> Duration {
        let start = std::time::Instant::now();
        self.options.shutdown.cancel();
        let task = self.task.take().expect("running");
        tokio::time::timeout(Duration::from_secs(20), task)
            .await
            .expect("serve_http_on returns after the shutdown signal")
            .expect("the server task did not panic")
            .expect("serve_http_on returns Ok");
        start.elapsed()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.options.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A raw HTTP/1.1 client

/// One response: status, headers (names in lower case) and the whole body.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The JSON-RPC message of a JSON body, or of the last `data:` line of an SSE body.
    pub fn message(&self) -> Value {
        let text = self.text();
        let json = text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(str::trim)
            .rfind(|data| !data.is_empty())
            .unwrap_or(&text);
        serde_json::from_str(json).unwrap_or_else(|error| panic!("{error}: {text}"))
    }
}

/// A keep-alive HTTP/1.1 connection written and read by hand.
pub struct Raw {
    pub stream: TcpStream,
    buffer: Vec<u8>,
    host: String,
}

impl Raw {
    pub async fn connect(address: SocketAddr) -> std::io::Result<Raw> {
        let stream = TcpStream::connect(address).await?;
        stream.set_nodelay(true)?;
        Ok(Raw {
            stream,
            buffer: Vec::with_capacity(16 * 1024),
            host: address.to_string(),
        })
    }

    /// A connection whose receive buffer is small, so that a response it does not read soon
    /// fills the socket buffers and makes the server wait.
    pub async fn connect_with_small_buffer(address: SocketAddr) -> std::io::Result<Raw> {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.set_recv_buffer_size(4096)?;
        let stream = socket.connect(address).await?;
        stream.set_nodelay(true)?;
        Ok(Raw {
            stream,
            buffer: Vec::new(),
            host: address.to_string(),
        })
    }

    /// Sends raw bytes.
    pub async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    /// Sends one request; `headers` come after `Host`, `Content-Length` is added for a body.
    pub async fn send(
        &mut self,
        method: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> std::io::Result<()> {
        let mut request = format!("{method} /mcp HTTP/1.1\r\nHost: {}\r\n", self.host);
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        if let Some(body) = body {
            request.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            ));
        } else {
            request.push_str("\r\n");
        }
        self.stream.write_all(request.as_bytes()).await
    }

    /// A JSON-RPC POST in the 2025-11-25 protocol, in `session` when given.
    pub async fn post(
        &mut self,
        token: Option<&str>,
        session: Option<&str>,
        message: &Value,
    ) -> std::io::Result<RawResponse> {
        let authorization = token.map(|token| format!("Bearer {token}"));
        let mut headers = vec![("Accept", "application/json, text/event-stream")];
        if let Some(authorization) = &authorization {
            headers.push(("Authorization", authorization));
        }
        if let Some(session) = session {
            headers.push(("Mcp-Session-Id", session));
            headers.push(("MCP-Protocol-Version", "2025-11-25"));
        }
        self.send("POST", &headers, Some(&message.to_string()))
            .await?;
        self.response().await
    }

    /// A stateless 2026-07-28 `tools/call`: no session, the protocol in headers and `_meta`.
    pub async fn stateless_call(
        &mut self,
        token: Option<&str>,
        tool: &str,
        arguments: Value,
    ) -> std::io::Result<RawResponse> {
        let authorization = token.map(|token| format!("Bearer {token}"));
        let mut headers = vec![
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", tool),
        ];
        if let Some(authorization) = &authorization {
            headers.push(("Authorization", authorization));
        }
        let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": tool, "arguments": arguments, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1.0.0"},
                "io.modelcontextprotocol/clientCapabilities": {}}}});
        self.send("POST", &headers, Some(&message.to_string()))
            .await?;
        self.response().await
    }

    /// `initialize` then `notifications/initialized`: a session id.
    pub async fn open_session(&mut self, token: Option<&str>) -> std::io::Result<RawResponse> {
        let response = self.post(token, None, &initialize()).await?;
        if response.status != 200 {
            return Ok(response);
        }
        let session = response
            .header("mcp-session-id")
            .expect("a session id")
            .to_owned();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let accepted = self.post(token, Some(&session), &initialized).await?;
        assert_eq!(accepted.status, 202, "{}", accepted.text());
        Ok(response)
    }

    pub async fn delete(
        &mut self,
        token: Option<&str>,
        session: &str,
    ) -> std::io::Result<RawResponse> {
        let authorization = token.map(|token| format!("Bearer {token}"));
        let mut headers = vec![
            ("Mcp-Session-Id", session),
            ("MCP-Protocol-Version", "2025-11-25"),
        ];
        if let Some(authorization) = &authorization {
            headers.push(("Authorization", authorization));
        }
        self.send("DELETE", &headers, None).await?;
        self.response().await
    }

    async fn fill(&mut self) -> std::io::Result<()> {
        let mut chunk = [0u8; 8192];
        let read = self.stream.read(&mut chunk).await?;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.buffer.extend_from_slice(&chunk[..read]);
        Ok(())
    }

    /// Reads a response head only (the body, an event stream, stays unread).
    pub async fn head(&mut self) -> std::io::Result<RawResponse> {
        let (status, headers) = self.read_head().await?;
        Ok(RawResponse {
            status,
            headers,
            body: Vec::new(),
        })
    }

    async fn read_head(&mut self) -> std::io::Result<(u16, Vec<(String, String)>)> {
        let head_end = loop {
            if let Some(end) = find(&self.buffer, b"\r\n\r\n") {
                break end;
            }
            self.fill().await?;
        };
        let head = String::from_utf8_lossy(&self.buffer[..head_end]).into_owned();
        self.buffer.drain(..head_end + 4);
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|line| line.split(' ').nth(1))
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line: {head}")))?;
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
            .collect();
        Ok((status, headers))
    }

    /// Reads one whole response (`Content-Length` or chunked).
    pub async fn response(&mut self) -> std::io::Result<RawResponse> {
        let (status, headers) = self.read_head().await?;
        let header = |name: &str| {
            headers
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.clone())
        };
        let mut body = Vec::new();
        if let Some(length) = header("content-length") {
            let length: usize = length.parse().map_err(std::io::Error::other)?;
            while self.buffer.len() < length {
                self.fill().await?;
            }
            body.extend(self.buffer.drain(..length));
        } else if header("transfer-encoding").is_some_and(|value| value.contains("chunked")) {
            loop {
                let line_end = loop {
                    if let Some(end) = find(&self.buffer, b"\r\n") {
                        break end;
                    }
                    self.fill().await?;
                };
                let size = String::from_utf8_lossy(&self.buffer[..line_end]).into_owned();
                let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
                    .map_err(std::io::Error::other)?;
                self.buffer.drain(..line_end + 2);
                while self.buffer.len() < size + 2 {
                    self.fill().await?;
                }
                body.extend(self.buffer.drain(..size));
                self.buffer.drain(..2);
                if size == 0 {
                    break;
                }
            }
        }
        Ok(RawResponse {
            status,
            headers,
            body,
        })
    }

    /// Whether the server closed the connection: reads whatever comes until EOF or an error,
    /// and says how many bytes came then, or `None` if the connection is still open at
    /// `deadline`.
    pub async fn closed_within(&mut self, deadline: Duration) -> Option<usize> {
        let mut chunk = vec![0u8; 64 * 1024];
        let mut received = std::mem::take(&mut self.buffer).len();
        tokio::time::timeout(deadline, async {
            loop {
                match self.stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return received,
                    Ok(read) => received += read,
                }
            }
        })
        .await
        .ok()
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// A 2025-11-25 `initialize` request.
pub fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "http-bounds-test", "version": "1.0.0"}}})
}

/// A `tools/call` request.
pub fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}})
}

/// A plain HTTP client builder that never goes through a proxy (the servers are on loopback).
///
/// Fusion's `http-client` feature builds reqwest on rustls without a crypto provider (its
/// upstream client brings ring itself), and features are shared by everything in one build:
/// any other reqwest client in the process then needs a process-wide provider, which this
/// installs once.
pub(crate) fn http_client_builder() -> reqwest::ClientBuilder {
    install_crypto_provider();
    reqwest::Client::builder().no_proxy()
}

/// Installs rustls's ring provider as the process default, unless one is installed already.
pub(crate) fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

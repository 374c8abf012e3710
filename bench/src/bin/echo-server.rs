//! `echo-server`: the cheapest MCP server that satisfies the load driver, to measure the
//! driver's own ceiling. It answers every request with a canned result that echoes the request
//! id, without parsing JSON beyond finding `"id":`, over stdio or HTTP/1.1.
//!
//! ```text
//! loadgen --stdio "target/release/echo-server" --check-every 0
//! echo-server --http 127.0.0.1:0 &   # prints `echo-server: listening on http://…/mcp`
//! loadgen --http http://127.0.0.1:PORT/mcp --check-every 0
//! ```
//!
//! Not an MCP implementation: it ignores methods and headers (but hands out a session id on
//! `initialize` and answers notifications with 202, so both HTTP protocol modes work).

use std::convert::Infallible;
use std::io::{BufRead as _, Write as _};
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    match (args.next().as_deref(), args.next()) {
        (Some("--http"), Some(address)) => {
            let address: SocketAddr = address
                .parse()
                .map_err(|error| std::io::Error::other(format!("bad address: {error}")))?;
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(serve_http(address))
        }
        (None, _) => serve_stdio(),
        _ => Err(std::io::Error::other(
            "usage: echo-server [--http ADDR]  (stdio without arguments)",
        )),
    }
}

/// The request id as it appears in the body (digits or a quoted string), if any.
fn request_id(body: &[u8]) -> Option<&[u8]> {
    let at = body.windows(5).position(|window| window == b"\"id\":")? + 5;
    let rest = &body[at..];
    let end = rest
        .iter()
        .position(|&byte| byte == b',' || byte == b'}')
        .unwrap_or(rest.len());
    Some(rest[..end].trim_ascii())
}

fn is_initialize(body: &[u8]) -> bool {
    body.windows(12).any(|window| window == b"\"initialize\"")
}

fn reply(id: &[u8], initialize: bool, out: &mut Vec<u8>) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id);
    if initialize {
        out.extend_from_slice(
            br#","result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"echo","version":"0"}}}"#,
        );
    } else {
        out.extend_from_slice(
            br#","result":{"content":[{"type":"text","text":"{}"}],"structuredContent":{"ok":true,"data":{},"meta":{}},"isError":false}}"#,
        );
    }
}

fn serve_stdio() -> std::io::Result<()> {
    let mut input = std::io::BufReader::with_capacity(64 * 1024, std::io::stdin().lock());
    let mut output = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return output.flush();
        }
        if let Some(id) = request_id(&line) {
            let mut out = Vec::with_capacity(256);
            reply(id, is_initialize(&line), &mut out);
            out.push(b'\n');
            output.write_all(&out)?;
        }
        // Flush once nothing more is waiting: one write for a whole pipelined batch.
        if input.buffer().is_empty() {
            output.flush()?;
        }
    }
}

async fn serve_http(address: SocketAddr) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    eprintln!(
        "echo-server: listening on http://{}/mcp",
        listener.local_addr()?
    );
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        tokio::spawn(async move {
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service_fn(answer))
                .await;
        });
    }
}

async fn answer(
    request: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = match request.into_body().collect().await {
        Ok(body) => body.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let Some(id) = request_id(&body) else {
        let mut response = Response::new(Full::new(Bytes::new()));
        *response.status_mut() = StatusCode::ACCEPTED;
        return Ok(response);
    };
    let initialize = is_initialize(&body);
    let mut out = Vec::with_capacity(256);
    reply(id, initialize, &mut out);
    let mut response = Response::new(Full::new(Bytes::from(out)));
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    if initialize {
        headers.insert(
            "mcp-session-id",
            hyper::header::HeaderValue::from_static("echo-session"),
        );
    }
    Ok(response)
}

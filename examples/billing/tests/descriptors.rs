//! The connection cap knows the file-descriptor limit (issue 24, finding 4): started under
//! `ulimit -n 256` with the default `--max-connections` (512), the server caps connections
//! below what it can open, so that 300 idle sockets get the ones past the cap refused at once
//! (a `503`, or closed at once when too many refusals are in flight) instead of exhausting its
//! descriptors, a new caller is refused at once rather than left hanging (today: no answer
//! within 3 s, and "Too many open files" in the log), and once the idle sockets go a call
//! succeeds.
#![cfg(unix)]

mod support;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use support::{BillingHttp, billing_bin};
use testkit_harness::ServerHttp;

/// `billing --in-memory --allow-anonymous --http 127.0.0.1:0` with at most 256 open files.
fn spawn_with_256_files() -> BillingHttp {
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg("ulimit -n 256 && exec \"$0\" \"$@\"")
        .arg(billing_bin())
        .args(["--in-memory", "--allow-anonymous", "--http", "127.0.0.1:0"]);
    BillingHttp::from(ServerHttp::start(command, "billing"))
}

/// Sends a `tools/list` on a new connection; the status line, or `None` when the connection
/// is closed without one, or nothing comes within `wait`.
fn list_tools(address: &str, wait: Duration) -> Option<String> {
    let mut stream = TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(wait)).ok()?;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"probe","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n\
         mcp-method: tools/list\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    answer.lines().next().map(str::to_owned)
}

#[test]
fn under_a_low_descriptor_limit_excess_connections_are_refused_early_not_starved() {
    let server = spawn_with_256_files();
    let address = server
        .url()
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let idle: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect(&address).ok())
        .collect();
    assert_eq!(idle.len(), 300, "the test's own sockets");
    std::thread::sleep(Duration::from_millis(500));
    // A new caller is answered or refused at once, not left waiting.
    let started = Instant::now();
    let status = list_tools(&address, Duration::from_secs(3));
    assert!(
        started.elapsed() < Duration::from_secs(2)
            && status
                .as_deref()
                .is_none_or(|status| { status.contains(" 200 ") || status.contains(" 503 ") }),
        "{status:?} after {:?}; server log:\n{}",
        started.elapsed(),
        server.logs()
    );
    drop(idle);
    std::thread::sleep(Duration::from_millis(500));
    let status = list_tools(&address, Duration::from_secs(3));
    assert!(
        status
            .as_deref()
            .is_some_and(|status| status.contains(" 200 ")),
        "{status:?}; server log:\n{}",
        server.logs()
    );
    assert!(
        !server.logs().contains("Too many open files"),
        "{}",
        server.logs()
    );
}

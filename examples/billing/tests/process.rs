//! The billing binary as a process: stdout carries nothing but protocol messages in stdio mode,
//! and Ctrl-C stops the HTTP server gracefully.
#![cfg(unix)]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use fusion::serde_json::{Value, json};

#[test]
fn stdout_carries_only_protocol_messages_in_stdio_mode() {
    let mut child = Command::new(support::billing_bin())
        .arg("--in-memory")
        // The most verbose logging: every log line must still go to stderr.
        .env("RUST_LOG", "trace")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn billing");
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "stdout-test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "billing_get_invoice", "arguments": {"id": "INV-7"}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "billing_void_invoice", "arguments": {"id": "INV-3"}}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "billing_get_invoice", "arguments": {"id": 5}}}),
    ];
    // Drained meanwhile: a full stderr pipe would block the server.
    let mut stderr = child.stderr.take().unwrap();
    let logs = std::thread::spawn(move || {
        let mut logs = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut logs);
        logs
    });
    let mut stdin = child.stdin.take().unwrap();
    for request in &requests {
        writeln!(stdin, "{request}").unwrap();
    }
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut answered = Vec::new();
        for line in stdout.lines() {
            let line = line.expect("a line of stdout");
            let message: Value = fusion::serde_json::from_str(&line).unwrap_or_else(|error| {
                panic!("stdout carried a non-protocol line ({error}): {line}")
            });
            assert_eq!(message["jsonrpc"], "2.0", "{line}");
            answered.push(message["id"].as_u64().unwrap_or(0));
            if answered.len() == 5 {
                break;
            }
        }
        answered
    });
    let mut answered = reader.join().expect("stdout reader");
    // Requests are served concurrently: answers may come in any order.
    answered.sort_unstable();
    assert_eq!(answered, [1, 2, 3, 4, 5]);
    drop(stdin);
    let status = child.wait().expect("billing exits when stdin closes");
    assert!(status.success(), "{status}");
    let logs = logs.join().expect("stderr reader");
    assert!(
        logs.contains("billing store ready"),
        "the logs went to stderr"
    );
}

#[test]
fn ctrl_c_stops_the_http_server_gracefully() {
    let mut server = support::BillingHttp::spawn();
    let status = server
        .interrupt(Duration::from_secs(10))
        .unwrap_or_else(|| panic!("still running 10 s after SIGINT; logs:\n{}", server.logs()));
    assert!(status.success(), "{status}; logs:\n{}", server.logs());
    assert!(
        server.logs().contains("billing stopped"),
        "{}",
        server.logs()
    );
}

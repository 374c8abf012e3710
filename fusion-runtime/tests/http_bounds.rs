//! What a slow, idle, greedy or foreign client can hold of an HTTP server, and for how long
//! (issue 10): each bound of [`HttpOptions`] set small, attacked with a raw socket, while
//! legitimate calls (raw, or rmcp's own client) are still served.
#![cfg(feature = "http")]

mod support;

use std::time::{Duration, Instant};

use fusion_runtime::principal::Principal;
use fusion_runtime::serve::{HttpOptions, Mcp, StaticTokens};
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use support::{Logs, Raw, Served, call, demo_server, eventually, initialize, within};

/// The bound every test sets to what it attacks; the others stay long.
const BOUND: Duration = Duration::from_millis(300);
/// How much later than its bound a connection may be closed on a loaded CI machine.
const SLACK: Duration = Duration::from_secs(3);
const LONG: Duration = Duration::from_secs(60);

/// Every timeout long: each test shortens the one it checks.
fn options() -> HttpOptions {
    HttpOptions {
        header_read_timeout: LONG,
        body_read_timeout: LONG,
        idle_timeout: LONG,
        write_timeout: LONG,
        shutdown_timeout: LONG,
        ..HttpOptions::default()
    }
}

async fn serve(options: HttpOptions) -> Served {
    Served::start(Mcp::new(demo_server()), options).await
}

/// Two tokens of one principal (alpha of tenant t1) and one of another (beta).
fn tokens() -> StaticTokens {
    let alpha = Principal::new("alpha").with_tenant("t1");
    StaticTokens::new()
        .with("alpha-1", alpha.clone())
        .with("alpha-2", alpha)
        .with("beta", Principal::new("beta").with_tenant("t2"))
}

/// A call that works, from a raw connection: in `session`, or stateless (2026-07-28).
async fn echo(raw: &mut Raw, token: Option<&str>, session: Option<&str>) -> u16 {
    let arguments = json!({"text": "hello"});
    let response = match session {
        Some(_) => {
            raw.post(token, session, &call(7, "demo_echo", arguments))
                .await
        }
        None => raw.stateless_call(token, "demo_echo", arguments).await,
    }
    .expect("a call");
    if response.status == 200 {
        assert!(response.text().contains("hello"), "{}", response.text());
    }
    response.status
}

fn session_of(response: &support::RawResponse) -> String {
    assert_eq!(response.status, 200, "{}", response.text());
    response
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned()
}

// ---------------------------------------------------------------------------------------------
// Connections

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_dribbled_byte_by_byte_is_cut_at_the_header_timeout() {
    within(async {
        let served = serve(HttpOptions {
            header_read_timeout: BOUND,
            ..options()
        })
        .await;
        let mut slow = Raw::connect(served.address).await.expect("connect");
        let start = Instant::now();
        let head = format!("POST /mcp HTTP/1.1\r\nHost: {}\r\nX-Slow: ", slow.host());
        slow.write(head.as_bytes()).await.expect("write");
        // One more byte every 50 ms: activity does not extend the deadline.
        let (mut reader, mut writer) = slow.stream.into_split();
        let dribble = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            while writer.write_all(b"a").await.is_ok() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        let closed = tokio::time::timeout(BOUND + SLACK, async {
            use tokio::io::AsyncReadExt;
            let mut sink = [0u8; 1024];
            while matches!(reader.read(&mut sink).await, Ok(read) if read > 0) {}
        })
        .await;
        dribble.abort();
        assert!(
            closed.is_ok(),
            "a slowloris head is still open after {:?}",
            start.elapsed()
        );
        assert!(start.elapsed() >= BOUND, "closed before the timeout");

        // The server goes on serving others.
        let mut raw = Raw::connect(served.address).await.expect("connect");
        assert_eq!(echo(&mut raw, None, None).await, 200);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_closed_at_the_idle_timeout_before_and_between_requests() {
    within(async {
        let served = serve(HttpOptions {
            idle_timeout: BOUND,
            ..options()
        })
        .await;
        // Connected, nothing sent. Each clock starts before the server's can (here, before it
        // accepts), so that a late wake-up of this test cannot make the server look early.
        let start = Instant::now();
        let mut silent = Raw::connect(served.address).await.expect("connect");
        assert_eq!(silent.closed_within(BOUND + SLACK).await, Some(0));
        assert!(start.elapsed() >= BOUND, "closed before the timeout");

        // Kept alive after a call: usable within the timeout, closed after it.
        let mut kept = Raw::connect(served.address).await.expect("connect");
        assert_eq!(echo(&mut kept, None, None).await, 200);
        // The idle clock starts when the second response has been sent.
        let start = Instant::now();
        assert_eq!(echo(&mut kept, None, None).await, 200);
        assert_eq!(kept.closed_within(BOUND + SLACK).await, Some(0));
        assert!(start.elapsed() >= BOUND, "closed before the timeout");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dribbled_body_gets_408_at_the_body_timeout_and_its_connection_closed() {
    within(async {
        let served = serve(HttpOptions {
            body_read_timeout: BOUND,
            ..options()
        })
        .await;
        let mut slow = Raw::connect(served.address).await.expect("connect");
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAccept: application/json, text/event-stream\r\n\
             Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"jsonrpc\"",
            slow.host()
        );
        let start = Instant::now();
        slow.write(head.as_bytes()).await.expect("write");
        let response = tokio::time::timeout(BOUND + SLACK, slow.response())
            .await
            .expect("an answer within the body timeout")
            .expect("a response");
        assert_eq!(response.status, 408, "{}", response.text());
        assert!(start.elapsed() >= BOUND, "answered before the timeout");
        assert!(
            !response.text().contains("timed out\""),
            "{}",
            response.text()
        );
        assert!(
            slow.closed_within(SLACK).await.is_some(),
            "the connection stays open"
        );

        // A body that arrives in time is served.
        let mut raw = Raw::connect(served.address).await.expect("connect");
        assert_eq!(echo(&mut raw, None, None).await, 200);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_its_sse_stream_is_cut_off_at_the_write_timeout() {
    within(async {
        // One connection at a time: the server is free again once it has cut the reader off,
        // which tells the test so without reading (reading would let the server go on).
        let served = serve(HttpOptions {
            write_timeout: BOUND,
            max_connections: 1,
            ..options()
        })
        .await;
        let mut reader = Raw::connect_with_small_buffer(served.address)
            .await
            .expect("connect");
        let session = session_of(&reader.open_session(None).await.expect("initialize"));
        // In a 2025-11-25 session, the answer comes on an SSE stream: 8 MB of it, never read.
        let size = 8 << 20;
        let body = call(1, "demo_big", json!({"bytes": size})).to_string();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAccept: application/json, text/event-stream\r\n\
             Content-Type: application/json\r\nMcp-Session-Id: {session}\r\n\
             MCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\n\r\n{body}",
            reader.host(),
            body.len()
        );
        reader.write(request.as_bytes()).await.expect("write");
        let address = served.address;
        let session_for_others = session.clone();
        eventually(Duration::from_secs(15), "the reader cut off", move || {
            let session = session_for_others.clone();
            async move {
                let mut raw = Raw::connect(address).await.expect("connect");
                // 503 while the reader holds the only connection.
                echo(&mut raw, None, Some(&session)).await == 200
            }
        })
        .await;
        let received = reader
            .closed_within(SLACK)
            .await
            .expect("the server closed the connection");
        assert!(
            received < size,
            "{received} bytes received: the server waited for the client to read"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_get_503_while_those_open_are_served() {
    within(async {
        let served = serve(HttpOptions {
            max_connections: 2,
            ..options()
        })
        .await;
        let mut first = Raw::connect(served.address).await.expect("connect");
        assert_eq!(echo(&mut first, None, None).await, 200);
        // An idle squatter takes the second slot.
        let mut squatter = Raw::connect(served.address).await.expect("connect");
        assert_eq!(echo(&mut squatter, None, None).await, 200);

        let mut excess = Raw::connect(served.address).await.expect("connect");
        // The answer waits for the request: a client library that gets a response before it
        // has sent its request reports a broken connection, not the 503 (hyper's client does).
        assert_eq!(
            excess.closed_within(BOUND).await,
            None,
            "the server answered (or closed) before the request"
        );
        excess
            .send("POST", &[], Some(&initialize().to_string()))
            .await
            .expect("write");
        let refused = excess.response().await.expect("an answer");
        assert_eq!(refused.status, 503, "{}", refused.text());
        assert_eq!(refused.header("retry-after"), Some("1"));
        let error = refused.message();
        assert_eq!(error["error"]["code"], -32000, "{error}");
        assert!(excess.closed_within(SLACK).await.is_some());
        // So a client library's request gets the 503, every time.
        let http = support::http_client_builder().build().expect("HTTP client");
        for _ in 0..20 {
            let response = http
                .post(served.url())
                .header("Content-Type", "application/json")
                .header("Accept", "application/json, text/event-stream")
                .body(initialize().to_string())
                .send()
                .await
                .expect("a 503, not a broken connection");
            assert_eq!(response.status(), 503);
            assert_eq!(response.headers()["retry-after"], "1");
        }

        // The connections already open are served.
        assert_eq!(echo(&mut first, None, None).await, 200);
        // Once one closes, a new client gets its slot.
        drop(squatter);
        let address = served.address;
        eventually(
            SLACK,
            "a slot freed by a closed connection",
            move || async move {
                let mut raw = Raw::connect(address).await.expect("connect");
                echo(&mut raw, None, None).await == 200
            },
        )
        .await;
        // And rmcp's own client, with a session, once the other clients have gone.
        drop(first);
        let url = served.url();
        eventually(SLACK, "rmcp's client served", move || {
            let url = url.clone();
            async move {
                let http = support::http_client_builder().build().expect("HTTP client");
                let transport = StreamableHttpClientTransport::with_client(
                    http,
                    StreamableHttpClientTransportConfig::with_uri(url),
                );
                match ().serve(transport).await {
                    Ok(client) => {
                        let listed = client.peer().list_all_tools().await.is_ok();
                        let _ = client.cancel().await;
                        listed
                    }
                    Err(_) => false,
                }
            }
        })
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_within_its_timeout_with_half_sent_requests_and_open_streams() {
    within(async {
        let served = serve(HttpOptions {
            shutdown_timeout: BOUND,
            ..options()
        })
        .await;
        // A session with its event stream open.
        let mut listener = Raw::connect(served.address).await.expect("connect");
        let session = session_of(&listener.open_session(None).await.expect("initialize"));
        listener
            .send(
                "GET",
                &[
                    ("Accept", "text/event-stream"),
                    ("Mcp-Session-Id", &session),
                    ("MCP-Protocol-Version", "2025-11-25"),
                ],
                None,
            )
            .await
            .expect("write");
        assert_eq!(listener.head().await.expect("a stream").status, 200);
        // Half a request head.
        let mut half_head = Raw::connect(served.address).await.expect("connect");
        half_head
            .write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .expect("write");
        // A whole head and half its body: a request in flight that will never complete.
        let mut half_body = Raw::connect(served.address).await.expect("connect");
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAccept: application/json, text/event-stream\r\n\
             Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{",
            half_body.host()
        );
        half_body.write(head.as_bytes()).await.expect("write");
        // Let the server see all three.
        tokio::time::sleep(Duration::from_millis(100)).await;

        let took = served.stop().await;
        eprintln!("shutdown took {took:?} (timeout {BOUND:?})");
        assert!(took < BOUND + SLACK, "shutdown took {took:?}");
        for (name, raw) in [
            ("the event stream", &mut listener),
            ("the half head", &mut half_head),
            ("the half body", &mut half_body),
        ] {
            assert!(
                raw.closed_within(SLACK).await.is_some(),
                "{name} is still open"
            );
        }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Sessions

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_capped_per_principal_and_in_total_with_a_readable_error() {
    within(async {
        let served = serve(options().auth(tokens()).max_sessions(3, 2)).await;
        let mut raw = Raw::connect(served.address).await.expect("connect");
        let first = session_of(&raw.open_session(Some("alpha-1")).await.expect("initialize"));
        // Another token of the same principal counts against the same cap.
        session_of(&raw.open_session(Some("alpha-2")).await.expect("initialize"));
        let refused = raw
            .post(Some("alpha-1"), None, &initialize())
            .await
            .expect("initialize");
        assert_eq!(refused.status, 429, "{}", refused.text());
        assert!(refused.header("retry-after").is_some());
        let error = refused.message();
        assert_eq!(error["jsonrpc"], "2.0", "{error}");
        assert_eq!(error["error"]["code"], -32000, "{error}");
        assert_eq!(error["error"]["data"]["sessionLimit"], 2, "{error}");
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("Too many open sessions"), "{message}");
        assert!(refused.header("mcp-session-id").is_none());

        // Another principal fills the server.
        session_of(&raw.open_session(Some("beta")).await.expect("initialize"));
        let full = raw
            .post(Some("beta"), None, &initialize())
            .await
            .expect("initialize");
        assert_eq!(full.status, 503, "{}", full.text());
        assert!(full.header("retry-after").is_some());
        assert_eq!(full.message()["error"]["code"], -32000);
        assert_eq!(full.message()["error"]["data"]["sessionLimit"], 3);
        // rmcp's client reads that error and reports it.
        let http = support::http_client_builder().build().expect("HTTP client");
        let transport = StreamableHttpClientTransport::with_client(
            http,
            StreamableHttpClientTransportConfig::with_uri(served.url()).auth_header("beta"),
        );
        let error = ().serve(transport).await.expect_err("the server is full");
        assert!(
            error.to_string().contains("too many open sessions"),
            "{error}"
        );
        // Stateless calls do not need a session, and are still served.
        assert_eq!(echo(&mut raw, Some("beta"), None).await, 200);

        // Closing a session frees its slot.
        let closed = raw.delete(Some("alpha-1"), &first).await.expect("DELETE");
        assert!(closed.status < 300, "{}", closed.status);
        session_of(&raw.open_session(Some("alpha-1")).await.expect("initialize"));
    })
    .await;
}

// On this thread's runtime, so that the server's logs (which tell when the session is parked
// and restored) are this test's alone.
#[tokio::test]
async fn a_session_answers_only_the_credential_that_opened_it_parked_or_not() {
    let (logs, _capture) = Logs::capture();
    within(async {
        let served = serve(HttpOptions {
            session_park_after: BOUND,
            ..options().auth(tokens())
        })
        .await;
        let mut raw = Raw::connect(served.address).await.expect("connect");
        let session = session_of(&raw.open_session(Some("alpha-1")).await.expect("initialize"));
        for round in ["live", "parked"] {
            if round == "parked" {
                eventually(SLACK + BOUND, "the idle session parked", || {
                    std::future::ready(!logs.containing("parked an idle session").is_empty())
                })
                .await;
            }
            // The same principal with its other token: as if the session did not exist.
            assert_eq!(
                echo(&mut raw, Some("alpha-2"), Some(&session)).await,
                404,
                "{round}"
            );
            raw.send(
                "GET",
                &[
                    ("Accept", "text/event-stream"),
                    ("Authorization", "Bearer alpha-2"),
                    ("Mcp-Session-Id", &session),
                    ("MCP-Protocol-Version", "2025-11-25"),
                ],
                None,
            )
            .await
            .expect("write");
            assert_eq!(raw.response().await.expect("GET").status, 404, "{round}");
            let deleted = raw.delete(Some("alpha-2"), &session).await.expect("DELETE");
            assert_eq!(deleted.status, 404, "{round}");
            assert_eq!(
                echo(&mut raw, Some("beta"), Some(&session)).await,
                404,
                "{round}"
            );
            // Its own token still uses it.
            assert_eq!(
                echo(&mut raw, Some("alpha-1"), Some(&session)).await,
                200,
                "{round}"
            );
        }
        // The last call did restore the parked session (the refused ones did not).
        assert_eq!(logs.containing("restored a parked session").len(), 1);
        let deleted = raw.delete(Some("alpha-1"), &session).await.expect("DELETE");
        assert!(deleted.status < 300, "{}", deleted.status);
        assert_eq!(echo(&mut raw, Some("alpha-1"), Some(&session)).await, 404);
    })
    .await;
}

/// A server whose `demo.log` tool says whether an `info` message would reach the client. (Over
/// a session rmcp sends log messages on the session's GET stream, which would keep it from
/// being parked: the tool's answer shows the level instead.)
fn logging_server() -> fusion_runtime::Server {
    use fusion_runtime::logging::{Log, LogLevel};
    use fusion_runtime::{CallContext, FromContext, ServerBuilder, ToolError, ToolSpec};

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct NoArguments {}

    ServerBuilder::new("demo", "1.0.0")
        .tool_spec(
            ToolSpec::query("demo.log", "Says whether info messages are sent.").handler(
                |context: CallContext, _: NoArguments| async move {
                    let log = Log::from_context(&context)?;
                    Ok::<_, ToolError>(log.enabled(LogLevel::Info))
                },
            ),
        )
        .build()
        .expect("the server builds")
}

// On this thread's runtime, so that the server's logs (which tell when the session is parked
// and restored) are this test's alone.
#[tokio::test]
async fn a_sessions_log_level_outlives_its_parked_worker() {
    let (logs, _capture) = Logs::capture();
    within(async {
        let served = Served::start(
            Mcp::new(logging_server()),
            HttpOptions {
                session_park_after: BOUND,
                ..options()
            },
        )
        .await;
        let mut raw = Raw::connect(served.address).await.expect("connect");
        let session = session_of(&raw.open_session(None).await.expect("initialize"));
        let mut id = 1;
        let mut info_enabled = async |raw: &mut Raw| {
            id += 1;
            let response = raw
                .post(None, Some(&session), &call(id, "demo_log", json!({})))
                .await
                .expect("a call");
            assert_eq!(response.status, 200, "{}", response.text());
            response.message()["result"]["structuredContent"]["data"].clone()
        };
        assert_eq!(info_enabled(&mut raw).await, false, "no level set yet");
        let set = json!({"jsonrpc": "2.0", "id": 100, "method": "logging/setLevel",
                         "params": {"level": "info"}});
        let set = raw
            .post(None, Some(&session), &set)
            .await
            .expect("setLevel");
        assert_eq!(set.message()["result"], json!({}), "{}", set.text());
        assert_eq!(info_enabled(&mut raw).await, true);
        eventually(SLACK + BOUND, "the idle session parked", || {
            std::future::ready(!logs.containing("parked an idle session").is_empty())
        })
        .await;
        // Restored with a new worker, the session still has its level.
        assert_eq!(info_enabled(&mut raw).await, true);
        assert_eq!(logs.containing("restored a parked session").len(), 1);
        // Another session has none.
        let other = session_of(&raw.open_session(None).await.expect("initialize"));
        let response = raw
            .post(None, Some(&other), &call(200, "demo_log", json!({})))
            .await
            .expect("a call");
        assert_eq!(
            response.message()["result"]["structuredContent"]["data"],
            false
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_expires_and_frees_its_slot() {
    within(async {
        let served = serve(HttpOptions {
            session_idle_timeout: Some(BOUND),
            ..options().auth(tokens()).max_sessions(10, 1)
        })
        .await;
        let mut raw = Raw::connect(served.address).await.expect("connect");
        // Before the session's last request (`notifications/initialized`), so not after its
        // idle clock started.
        let start = Instant::now();
        let idle = session_of(&raw.open_session(Some("alpha-1")).await.expect("initialize"));
        // The principal's only slot is taken until the session expires (a request in it would
        // keep it alive: this waits by asking for another one).
        let mut next = None;
        while next.is_none() {
            let response = raw
                .post(Some("alpha-1"), None, &initialize())
                .await
                .expect("initialize");
            match response.status {
                200 => next = Some(session_of(&response)),
                429 => {
                    assert!(
                        start.elapsed() < BOUND + SLACK,
                        "the idle session never expired"
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                status => panic!("{status}: {}", response.text()),
            }
        }
        assert!(start.elapsed() >= BOUND, "expired before its idle timeout");
        assert_eq!(echo(&mut raw, Some("alpha-1"), Some(&idle)).await, 404);
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Logs

// On this thread's runtime, so that the server's logs are this test's alone.
#[tokio::test]
async fn refused_tokens_are_logged_at_debug_with_one_counted_warning_not_a_line_each() {
    let (logs, _capture) = Logs::capture();
    within(async {
        let served = serve(options().auth(tokens())).await;
        let mut raw = Raw::connect(served.address).await.expect("connect");
        // Anyone can send bad tokens, as many as they like.
        for attempt in 0..50 {
            let token = format!("guess-{attempt}");
            let response = raw
                .stateless_call(Some(&token), "demo_echo", json!({"text": "hello"}))
                .await
                .expect("an answer");
            assert_eq!(response.status, 401, "{}", response.text());
        }
        assert_eq!(echo(&mut raw, Some("alpha-1"), None).await, 200);
    })
    .await;
    let refused = logs.containing("bearer token");
    let each = refused
        .iter()
        .filter(|event| event.level == tracing::Level::DEBUG)
        .count();
    let loud: Vec<_> = refused
        .iter()
        .filter(|event| event.level <= tracing::Level::INFO)
        .collect();
    assert_eq!(each, 50, "{refused:?}");
    // The first refusal warns (counted); the next 49 fall in its one-minute window.
    assert_eq!(loud.len(), 1, "{loud:?}");
    assert_eq!(loud[0].level, tracing::Level::WARN);
    assert!(loud[0].text.contains("refused=1"), "{}", loud[0].text);
}

//! `loadgen`: a load driver that speaks MCP to any billing server, over stdio or Streamable
//! HTTP, and prints one JSON line of results.
//!
//! ```text
//! loadgen --stdio "target/release/billing --in-memory" --concurrency 16 --duration 10
//! loadgen --http http://127.0.0.1:8080/mcp --protocol 2026-07-28 --clients 8 --server-pid 1234
//! ```
//!
//! The mix is 80% `billing_get_invoice` (random ids `INV-1..=INV-N`), 15%
//! `billing_list_invoices` with limit 20 and 5% `billing_void_invoice` (random ids; an
//! `AlreadyVoided` error result is expected and correct). Every `--check-every`th response is
//! checked in full as billing answers since its envelope carries only what varies per call:
//! the envelope's `ok` agreeing with `isError`, no `meta.tool`, `data.id`, a list of 20 items,
//! no hidden column in the data; the first text block of a single invoice is its JSON and
//! equals `data`, that of a list is its table (`[20]{id,customer_id,total_cents,status}:` and
//! one row per item, each starting with the item's id); a failure's first block is its
//! `<tool_error>`. Every response is at least parsed for its JSON-RPC id and error.
//!
//! `--workload notes` drives `examples/hello` and `plain-hello` instead: it first adds
//! `--notes N` notes (`note I tagJ`, J = I mod 10), then the mix's gets are `notes_get` (random
//! ids `N-1..=N-N`), its lists `notes_list` with `containing: "tag3"` and its voids `notes_add`.
//! A full check then reads the data from Fusion's envelope (`data`) or from plain rmcp's
//! structured content (`notes` for a list) and checks ids, the filter and that no `author`
//! appears.
//!
//! `--tool-prefix acct_` calls the same tools under a prefix (`acct_billing_get_invoice`), for
//! billing mounted in a gateway; responses are checked as billing's own.
//!
//! Over stdio the driver spawns the server (`sh -c 'exec COMMAND'`, so the child is the server
//! itself), runs `initialize` (protocol 2025-11-25) or sends self-contained requests (2026-07-28),
//! and keeps `--concurrency` requests in flight on the one pipe. Over HTTP each of `--clients`
//! clients owns one keep-alive HTTP/1.1 connection and one request at a time: with
//! `--protocol 2025-11-25` it runs `initialize` and uses its own session (`Mcp-Session-Id`);
//! with `--protocol 2026-07-28` it is stateless: `server/discover` once, then every request
//! carries `_meta` (`io.modelcontextprotocol/protocolVersion`, `clientInfo`,
//! `clientCapabilities`) and the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers.
//!
//! Only calls that complete inside the measured window (after `--warmup`, for `--duration`
//! seconds) count for `calls`, `calls_per_s` and the percentiles; `errors` and
//! `bad_responses` count over the whole run, warm-up included. Server CPU is the change of
//! `utime + stime` in `/proc/PID/stat` over the window; peak RSS is `VmHWM` from
//! `/proc/PID/status` at the end. `client_cpu_s` is the driver's own CPU over the window.
//! `server_cs_per_call` is the server's context switches (voluntary and involuntary, summed over
//! its threads in `/proc/PID/task/*/status`) over the window, divided by the calls measured.

use std::collections::HashMap;
use std::io::Write as _;
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, BufWriter};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// Drives an MCP billing server with a fixed mix of tool calls and reports one JSON line.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Spawn this command line and speak MCP over its stdin/stdout.
    #[arg(
        long,
        value_name = "COMMAND",
        conflicts_with = "http",
        required_unless_present = "http"
    )]
    stdio: Option<String>,
    /// Speak Streamable HTTP to this endpoint, e.g. http://127.0.0.1:8080/mcp.
    #[arg(long, value_name = "URL")]
    http: Option<String>,
    /// Protocol revision: 2025-11-25 (initialize, sessions) or 2026-07-28 (stateless).
    #[arg(long, default_value = "2025-11-25", value_parser = ["2025-11-25", "2026-07-28"])]
    protocol: String,
    /// HTTP: concurrent clients, each with its own connection (and session, for 2025-11-25).
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// stdio: requests kept in flight on the pipe.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Seconds measured, after the warm-up.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Seconds of load before the measurement starts.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// HTTP: the server's process id, for its CPU time and peak RSS.
    #[arg(long, value_name = "PID")]
    server_pid: Option<u32>,
    /// Extra HTTP header on every request, e.g. 'Authorization: Bearer abc' (repeatable).
    #[arg(long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// A label for the output line (e.g. fusion or raw).
    #[arg(long, default_value = "server")]
    target: String,
    /// Check every Nth response in full (0: never; every response is still parsed).
    #[arg(long, default_value_t = 50)]
    check_every: u64,
    /// Percentages of get, list and void calls (they must add up to 100).
    #[arg(long, default_value = "80,15,5", value_parser = parse_mix)]
    mix: Mix,
    /// Invoice ids are drawn from INV-1..=INV-N.
    #[arg(long, default_value_t = 1000)]
    invoices: u32,
    /// Driver threads (1: a single-threaded runtime, the lightest).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Seed of the random mix (default: random).
    #[arg(long)]
    seed: Option<u64>,
    /// stdio: let the server's stderr through (default: discarded).
    #[arg(long)]
    server_stderr: bool,
    /// Call the tools under this prefix (`acct_` calls `acct_billing_get_invoice`): billing
    /// mounted in a gateway. Responses are checked as billing's own.
    #[arg(long, value_name = "PREFIX", default_value = "")]
    tool_prefix: String,
    /// What the server serves: billing's invoices, or hello's notes.
    #[arg(long, value_enum, default_value = "billing")]
    workload: Workload,
    /// notes: how many notes to add before the run (at least 1).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    notes: u32,
}

/// The tools a run calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Workload {
    /// `billing_get_invoice`, `billing_list_invoices`, `billing_void_invoice`.
    Billing,
    /// `notes_get`, `notes_list`, `notes_add` (examples/hello and bench/plain-hello).
    Notes,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = if args.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.threads)
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("loadgen: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        // A run that completed no call in the window measured nothing: still print the line,
        // but fail.
        Ok((line, calls)) => {
            println!("{line}");
            if calls > 0 {
                ExitCode::SUCCESS
            } else {
                eprintln!("loadgen: no call completed in the measured window");
                ExitCode::FAILURE
            }
        }
        Err(error) => {
            eprintln!("loadgen: {error}");
            ExitCode::FAILURE
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

// ---------------------------------------------------------------------------------------------
// The mix

/// One tool call of the mix.
#[derive(Debug, Clone, Copy)]
enum Call {
    Get(u32),
    List,
    Void(u32),
}

/// Percentages of `billing_get_invoice` and `billing_list_invoices`; the rest is voids.
#[derive(Debug, Clone, Copy)]
struct Mix {
    get: u32,
    list: u32,
}

fn parse_mix(text: &str) -> Result<Mix, String> {
    let parts: Vec<u32> = text
        .split(',')
        .map(|part| {
            part.trim()
                .parse::<u32>()
                .map_err(|error| error.to_string())
        })
        .collect::<Result<_, _>>()?;
    match parts[..] {
        [get, list, void] if get + list + void == 100 => Ok(Mix { get, list }),
        _ => Err("expected three percentages adding up to 100: GET,LIST,VOID".into()),
    }
}

impl Call {
    fn pick(rng: &mut fastrand::Rng, mix: Mix, invoices: u32) -> Call {
        let draw = rng.u32(0..100);
        if draw < mix.get {
            Call::Get(rng.u32(1..=invoices))
        } else if draw < mix.get + mix.list {
            Call::List
        } else {
            Call::Void(rng.u32(1..=invoices))
        }
    }

    fn tool(self, workload: Workload) -> &'static str {
        match (workload, self) {
            (Workload::Billing, Call::Get(_)) => "billing_get_invoice",
            (Workload::Billing, Call::List) => "billing_list_invoices",
            (Workload::Billing, Call::Void(_)) => "billing_void_invoice",
            (Workload::Notes, Call::Get(_)) => "notes_get",
            (Workload::Notes, Call::List) => "notes_list",
            (Workload::Notes, Call::Void(_)) => "notes_add",
        }
    }

    /// Appends the JSON-RPC request (no newline), calling the tool under `prefix`.
    fn write(self, workload: Workload, id: u64, meta: &str, prefix: &str, out: &mut Vec<u8>) {
        let tool = self.tool(workload);
        let _ = match (workload, self) {
            (Workload::Notes, Call::Get(n)) => write!(
                out,
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{prefix}{tool}","arguments":{{"id":"N-{n}"}}{meta}}}}}"#
            ),
            (Workload::Notes, Call::List) => write!(
                out,
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{prefix}{tool}","arguments":{{"containing":"tag3"}}{meta}}}}}"#
            ),
            (Workload::Notes, Call::Void(n)) => write!(
                out,
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{prefix}{tool}","arguments":{{"text":"note {n} tag{}"}}{meta}}}}}"#,
                n % 10
            ),
            (Workload::Billing, Call::Get(n) | Call::Void(n)) => write!(
                out,
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{prefix}{tool}","arguments":{{"id":"INV-{n}"}}{meta}}}}}"#
            ),
            (Workload::Billing, Call::List) => write!(
                out,
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{prefix}{tool}","arguments":{{"limit":20}}{meta}}}}}"#
            ),
        };
    }
}

const CLIENT_NAME: &str = "fusion-loadgen";
const STATELESS: &str = "2026-07-28";

/// The `_meta` member a 2026-07-28 request carries (with its leading comma), or nothing.
fn request_meta(protocol: &str) -> String {
    if protocol == STATELESS {
        format!(
            r#","_meta":{{"io.modelcontextprotocol/protocolVersion":"{protocol}","io.modelcontextprotocol/clientInfo":{{"name":"{CLIENT_NAME}","version":"{}"}},"io.modelcontextprotocol/clientCapabilities":{{}}}}"#,
            env!("CARGO_PKG_VERSION")
        )
    } else {
        String::new()
    }
}

fn initialize_body(protocol: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{protocol}","capabilities":{{}},"clientInfo":{{"name":"{CLIENT_NAME}","version":"{}"}}}}}}"#,
        env!("CARGO_PKG_VERSION")
    )
}

const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

fn discover_body(meta: &str) -> String {
    // `meta` starts with a comma; `params` has nothing else.
    format!(
        r#"{{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{{{}}}}}"#,
        &meta[1..]
    )
}

// ---------------------------------------------------------------------------------------------
// Checking responses

/// What every response is parsed for (the rest is skipped without allocating).
#[derive(Deserialize)]
struct Head {
    id: Option<u64>,
    method: Option<IgnoredAny>,
    result: Option<IgnoredAny>,
    error: Option<Value>,
}

/// Parses what every response is read for. A response that starts
/// `{"jsonrpc":"2.0","id":N,"result":` (rmcp writes that order) takes a fast path that does not
/// scan the result, so that reading the server's answers costs the driver little CPU; any other
/// shape is parsed in full. The sampled full checks parse whole responses either way.
fn parse_head(message: &[u8]) -> Result<Head, serde_json::Error> {
    const PREFIX: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
    if let Some(rest) = message.strip_prefix(PREFIX) {
        let digits = rest.iter().take_while(|byte| byte.is_ascii_digit()).count();
        let id = std::str::from_utf8(&rest[..digits])
            .ok()
            .and_then(|digits| digits.parse::<u64>().ok());
        if let Some(id) = id
            && rest[digits..].starts_with(br#","result":"#)
            && message.ends_with(b"}")
        {
            return Ok(Head {
                id: Some(id),
                method: None,
                result: Some(IgnoredAny),
                error: None,
            });
        }
    }
    serde_json::from_slice(message)
}

const HIDDEN: [&str; 3] = ["tenant_id", "webhook_secret", "internal_flags"];

fn check_invoice(item: &Value) -> Result<(), String> {
    let Some(object) = item.as_object() else {
        return Err(format!("invoice is not an object: {item}"));
    };
    for field in ["id", "customer_id", "total_cents", "status"] {
        if !object.contains_key(field) {
            return Err(format!("invoice without `{field}`: {item}"));
        }
    }
    if let Some(field) = HIDDEN.iter().find(|field| object.contains_key(**field)) {
        return Err(format!("hidden field `{field}` leaked: {item}"));
    }
    Ok(())
}

/// The full check of one `tools/call` response.
fn check(call: Call, workload: Workload, message: &Value) -> Result<(), String> {
    if workload == Workload::Notes {
        return check_notes(call, message);
    }
    let result = message
        .get("result")
        .ok_or_else(|| format!("no result: {message}"))?;
    let envelope = result
        .get("structuredContent")
        .ok_or("no structuredContent")?;
    let ok = envelope
        .get("ok")
        .and_then(Value::as_bool)
        .ok_or("envelope without a boolean `ok`")?;
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if is_error == ok {
        return Err(format!("isError {is_error} but ok {ok}"));
    }
    if let Some(meta) = envelope.get("meta")
        && meta.get("tool").is_some()
    {
        return Err(format!(
            "meta names the tool, which the listing says: {meta}"
        ));
    }
    let content = result
        .get("content")
        .and_then(Value::as_array)
        .ok_or("no content array")?;
    let first = content
        .first()
        .and_then(|block| block.get("text"))
        .and_then(Value::as_str)
        .ok_or("no text content block")?;
    if !ok {
        let code = envelope.pointer("/error/code").and_then(Value::as_str);
        return match (call, code) {
            (Call::Void(_), Some("AlreadyVoided")) if first.starts_with("<tool_error") => Ok(()),
            _ => Err(format!("unexpected error result {code:?} for {call:?}")),
        };
    }
    let data = envelope.get("data").ok_or("no data")?;
    match call {
        Call::Get(n) | Call::Void(n) => {
            // A single item's text is its JSON.
            let text: Value = serde_json::from_str(first)
                .map_err(|error| format!("first block is not JSON: {error}"))?;
            if &text != data {
                return Err("first text block differs from data".into());
            }
            check_invoice(data)?;
            let expected = format!("INV-{n}");
            if data.get("id").and_then(Value::as_str) != Some(expected.as_str()) {
                return Err(format!("data.id is not {expected}: {data}"));
            }
            if matches!(call, Call::Void(_)) && data.get("status") != Some(&Value::from("voided")) {
                return Err(format!("voided invoice is not voided: {data}"));
            }
        }
        Call::List => {
            let items = data.as_array().ok_or("list data is not an array")?;
            if items.len() != 20 {
                return Err(format!("list of {} items, expected 20", items.len()));
            }
            items.iter().try_for_each(check_invoice)?;
            check_table(first, items)?;
        }
    }
    Ok(())
}

/// The columns of a list's table: the invoice's fields, in the presenter's order.
const TABLE_HEADER: &str = "{id,customer_id,total_cents,status}:";

/// A list's first text block is a table of `items` (`[N]{id,customer_id,total_cents,status}:`,
/// then one line per item): its count, header and row count match, and each row starts with
/// its item's id.
fn check_table(text: &str, items: &[Value]) -> Result<(), String> {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    let expected = format!("[{}]{TABLE_HEADER}", items.len());
    if header != expected {
        return Err(format!(
            "list table header is {header:?}, expected {expected:?}"
        ));
    }
    let mut rows = 0;
    for (row, item) in lines.zip(items) {
        let id = item.get("id").and_then(Value::as_str).unwrap_or_default();
        if row.split(',').next() != Some(id) || row.split(',').count() != 4 {
            return Err(format!(
                "table row {row:?} is not invoice {id}'s four values"
            ));
        }
        rows += 1;
    }
    if rows != items.len() || text.lines().count() != items.len() + 1 {
        return Err(format!(
            "list table has {} rows, data {} items",
            text.lines().count() - 1,
            items.len()
        ));
    }
    Ok(())
}

/// The full check of a notes response, from Fusion (an envelope whose `data` is the value) or
/// from plain rmcp (the value itself, a list under `notes`).
fn check_notes(call: Call, message: &Value) -> Result<(), String> {
    let result = message
        .get("result")
        .ok_or_else(|| format!("no result: {message}"))?;
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(format!("error result: {result}"));
    }
    let structured = result
        .get("structuredContent")
        .ok_or("no structuredContent")?;
    let data = structured.get("data").unwrap_or(structured);
    let check_note = |note: &Value| -> Result<(), String> {
        let object = note.as_object().ok_or("a note is not an object")?;
        if object.contains_key("author") {
            return Err(format!("the author leaked: {note}"));
        }
        match (object.get("id"), object.get("text")) {
            (Some(Value::String(_)), Some(Value::String(_))) => Ok(()),
            _ => Err(format!("a note without its id and text: {note}")),
        }
    };
    match call {
        Call::Get(n) => {
            check_note(data)?;
            let expected = format!("N-{n}");
            if data.get("id").and_then(Value::as_str) != Some(expected.as_str()) {
                return Err(format!("data.id is not {expected}: {data}"));
            }
        }
        Call::List => {
            let items = data
                .as_array()
                .or_else(|| data.get("notes").and_then(Value::as_array))
                .ok_or("list data is not an array")?;
            if items.len() < 10 {
                return Err(format!(
                    "list of {} notes, expected 10 or more",
                    items.len()
                ));
            }
            for item in items {
                check_note(item)?;
                let text = item.get("text").and_then(Value::as_str).unwrap_or("");
                if !text.contains("tag3") {
                    return Err(format!("a listed note does not contain tag3: {item}"));
                }
            }
        }
        Call::Void(_) => check_note(data)?,
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Results

/// The measured window.
#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    end: Instant,
}

impl Window {
    fn contains(&self, at: Instant) -> bool {
        at >= self.start && at < self.end
    }
}

#[derive(Debug, Default)]
struct Stats {
    calls: u64,
    latencies_ns: Vec<u64>,
    errors: u64,
    bad: u64,
    responses: u64,
    first_problem: Option<String>,
}

impl Stats {
    fn problem(&mut self, bad: bool, text: impl FnOnce() -> String) {
        if bad {
            self.bad += 1;
        } else {
            self.errors += 1;
        }
        if self.first_problem.is_none() {
            self.first_problem = Some(text());
        }
    }

    fn merge(&mut self, other: Stats) {
        self.calls += other.calls;
        self.latencies_ns.extend(other.latencies_ns);
        self.errors += other.errors;
        self.bad += other.bad;
        self.responses += other.responses;
        if self.first_problem.is_none() {
            self.first_problem = other.first_problem;
        }
    }

    /// Accounts one response to `call`, sent at `sent`, received now.
    fn record(
        &mut self,
        call: Call,
        sent: Instant,
        window: &Window,
        message: &[u8],
        check: (u64, Workload),
    ) {
        match parse_head(message) {
            Ok(head) => self.record_head(call, sent, window, head, message, check),
            Err(error) => {
                self.latency(sent, window);
                self.problem(true, || {
                    format!("unparsable response ({error}): {}", preview(message))
                });
            }
        }
    }

    fn latency(&mut self, sent: Instant, window: &Window) {
        let now = Instant::now();
        self.responses += 1;
        if window.contains(now) {
            self.calls += 1;
            self.latencies_ns
                .push(u64::try_from((now - sent).as_nanos()).unwrap_or(u64::MAX));
        }
    }

    /// Accounts a response already parsed as `head`.
    fn record_head(
        &mut self,
        call: Call,
        sent: Instant,
        window: &Window,
        head: Head,
        message: &[u8],
        (check_every, workload): (u64, Workload),
    ) {
        self.latency(sent, window);
        if let Some(error) = head.error {
            return self.problem(false, || format!("JSON-RPC error for {call:?}: {error}"));
        }
        if head.result.is_none() {
            return self.problem(true, || format!("no result: {}", preview(message)));
        }
        if check_every > 0 && self.responses.is_multiple_of(check_every) {
            let verdict = serde_json::from_slice::<Value>(message)
                .map_err(|error| error.to_string())
                .and_then(|message| check(call, workload, &message));
            if let Err(problem) = verdict {
                self.problem(true, || format!("bad response to {call:?}: {problem}"));
            }
        }
    }
}

fn preview(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    text.chars().take(300).collect()
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let index = rank.clamp(1, sorted.len()) - 1;
    (sorted[index] as f64 / 1000.0 * 10.0).round() / 10.0
}

// ---------------------------------------------------------------------------------------------
// /proc

/// `utime + stime` of a process, in clock ticks.
fn cpu_ticks(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(3) … utime(14) stime(15), so indexes 11 and 12 here.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Linux's USER_HZ: `/proc` counts CPU time in 1/100 s on every architecture Rust targets.
const TICKS_PER_SECOND: f64 = 100.0;

/// Context switches of every thread of a process: the sums of `voluntary_ctxt_switches` and
/// `nonvoluntary_ctxt_switches` over `/proc/PID/task/*/status`, and the number of threads.
/// A thread that exits between two readings takes its count with it; tokio's worker threads
/// live as long as the runtime, so over a window of steady load the difference is exact.
#[derive(Clone, Copy, Default)]
struct Switches {
    voluntary: u64,
    involuntary: u64,
    threads: u64,
}

fn context_switches(pid: &str) -> Option<Switches> {
    let mut total = Switches::default();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(status) = std::fs::read_to_string(entry.ok()?.path().join("status")) else {
            continue; // the thread exited after the listing
        };
        for line in status.lines() {
            let count = |prefix: &str| {
                line.strip_prefix(prefix)
                    .and_then(|rest| rest.trim().parse::<u64>().ok())
            };
            if let Some(count) = count("voluntary_ctxt_switches:") {
                total.voluntary += count;
            } else if let Some(count) = count("nonvoluntary_ctxt_switches:") {
                total.involuntary += count;
            }
        }
        total.threads += 1;
    }
    Some(total)
}

fn peak_rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

// ---------------------------------------------------------------------------------------------
// The run

struct Config {
    workload: Workload,
    notes: u32,
    protocol: String,
    mix: Mix,
    meta: String,
    prefix: String,
    check_every: u64,
    invoices: u32,
    seed: u64,
}

/// Runs the load; returns the JSON line and the number of calls measured.
async fn run(args: Args) -> Result<(String, u64), BoxError> {
    let seed = args.seed.unwrap_or_else(|| fastrand::u64(..));
    let config = Config {
        workload: args.workload,
        notes: args.notes,
        meta: request_meta(&args.protocol),
        prefix: args.tool_prefix.clone(),
        protocol: args.protocol.clone(),
        mix: args.mix,
        check_every: args.check_every,
        // The ids gets are drawn from: the invoices, or the notes added before the run.
        invoices: match args.workload {
            Workload::Billing => args.invoices.max(1),
            Workload::Notes => args.notes.max(1),
        },
        seed,
    };
    let warmup = Duration::from_secs_f64(args.warmup.max(0.0));
    let duration = Duration::from_secs_f64(args.duration.max(0.1));

    let (transport, mut child, server_pid, tasks, window, stdin_release);
    if let Some(command) = &args.stdio {
        transport = "stdio";
        let mut spawned = spawn(command, args.server_stderr)?;
        server_pid = spawned.id();
        let stdin = spawned.stdin.take().ok_or("no stdin")?;
        let stdout = spawned.stdout.take().ok_or("no stdout")?;
        let mut pipe = Pipe::new(stdin, stdout);
        if config.protocol != STATELESS {
            pipe.initialize(&config.protocol).await?;
        }
        if config.workload == Workload::Notes {
            pipe.seed(&config).await?;
        }
        let now = Instant::now();
        window = Window {
            start: now + warmup,
            end: now + warmup + duration,
        };
        let concurrency = args.concurrency.max(1);
        let mut set = tokio::task::JoinSet::new();
        let (release, hold) = tokio::sync::oneshot::channel();
        set.spawn(pipe.run(config, window, concurrency, hold));
        stdin_release = Some(release);
        tasks = set;
        child = Some(spawned);
    } else {
        transport = "http";
        let url = args
            .http
            .as_deref()
            .ok_or("--stdio or --http is required")?;
        let endpoint = Endpoint::parse(url, &args.headers, &config.protocol)?;
        let mut clients = Vec::with_capacity(args.clients.max(1));
        for index in 0..args.clients.max(1) {
            clients.push(HttpClient::start(endpoint.clone(), &config, index).await?);
        }
        if config.workload == Workload::Notes {
            clients[0].seed(&config).await?;
        }
        let now = Instant::now();
        window = Window {
            start: now + warmup,
            end: now + warmup + duration,
        };
        let config = std::sync::Arc::new(config);
        let mut set = tokio::task::JoinSet::new();
        for (index, client) in clients.into_iter().enumerate() {
            set.spawn(client.run(config.clone(), window, index as u64));
        }
        tasks = set;
        server_pid = args.server_pid;
        child = None;
        stdin_release = None;
    }

    let server = server_pid.map(|pid| pid.to_string());
    tokio::time::sleep_until(window.start.into()).await;
    let server_before = server.as_deref().and_then(cpu_ticks);
    let switches_before = server.as_deref().and_then(context_switches);
    let client_before = cpu_ticks("self");
    tokio::time::sleep_until(window.end.into()).await;
    let server_after = server.as_deref().and_then(cpu_ticks);
    let switches_after = server.as_deref().and_then(context_switches);
    let client_after = cpu_ticks("self");
    let peak_rss = server_pid.and_then(peak_rss_kb);
    // Only now may the stdio server see its stdin close and exit.
    if let Some(release) = stdin_release {
        let _ = release.send(());
    }

    let mut stats = Stats::default();
    let mut tasks = tasks;
    let drained = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(Ok(part)) => stats.merge(part),
                Ok(Err(error)) => stats.problem(false, || format!("client failed: {error}")),
                Err(error) => stats.problem(false, || format!("client task failed: {error}")),
            }
        }
    })
    .await;
    if drained.is_err() {
        stats.problem(false, || {
            "clients did not finish within 30 s of the end".into()
        });
    }
    if let Some(child) = child.as_mut() {
        stop(child).await;
    }

    let mut latencies = std::mem::take(&mut stats.latencies_ns);
    latencies.sort_unstable();
    let seconds = duration.as_secs_f64();
    let cpu = |before: Option<u64>, after: Option<u64>| {
        before
            .zip(after)
            .map(|(before, after)| after.saturating_sub(before) as f64 / TICKS_PER_SECOND)
    };
    let switches = switches_before
        .zip(switches_after)
        .map(|(before, after)| Switches {
            voluntary: after.voluntary.saturating_sub(before.voluntary),
            involuntary: after.involuntary.saturating_sub(before.involuntary),
            threads: after.threads,
        });
    let per_call = |count: u64| {
        (stats.calls > 0).then(|| (count as f64 / stats.calls as f64 * 1000.0).round() / 1000.0)
    };
    if let Some(problem) = &stats.first_problem {
        eprintln!("loadgen: first problem: {problem}");
    }
    let line = serde_json::json!({
        "target": args.target,
        "transport": transport,
        "protocol": args.protocol,
        "clients": if transport == "stdio" { args.concurrency.max(1) } else { args.clients.max(1) },
        "calls": stats.calls,
        "duration_s": seconds,
        "calls_per_s": (stats.calls as f64 / seconds).round(),
        "p50_us": percentile(&latencies, 50.0),
        "p99_us": percentile(&latencies, 99.0),
        "errors": stats.errors,
        "bad_responses": stats.bad,
        "server_peak_rss_kb": peak_rss,
        "server_cpu_s": cpu(server_before, server_after),
        "client_cpu_s": cpu(client_before, client_after),
        "server_cs_per_call": switches.and_then(|s| per_call(s.voluntary + s.involuntary)),
        "server_voluntary_cs": switches.map(|s| s.voluntary),
        "server_nonvoluntary_cs": switches.map(|s| s.involuntary),
        "server_threads": switches.map(|s| s.threads),
        "mix": format!("{},{},{}", args.mix.get, args.mix.list, 100 - args.mix.get - args.mix.list),
        "seed": seed,
    });
    Ok((line.to_string(), stats.calls))
}

// ---------------------------------------------------------------------------------------------
// stdio

fn spawn(command: &str, show_stderr: bool) -> Result<Child, BoxError> {
    Command::new("sh")
        .arg("-c")
        .arg(format!("exec {command}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(if show_stderr {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| format!("cannot spawn `{command}`: {error}").into())
}

/// Closes the server's stdin (done when the pipe was dropped) and waits for it to exit.
async fn stop(child: &mut Child) {
    if tokio::time::timeout(Duration::from_secs(5), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
}

struct Pipe {
    writer: BufWriter<ChildStdin>,
    reader: BufReader<ChildStdout>,
    line: Vec<u8>,
}

impl Pipe {
    fn new(stdin: ChildStdin, stdout: ChildStdout) -> Self {
        Pipe {
            writer: BufWriter::with_capacity(64 * 1024, stdin),
            reader: BufReader::with_capacity(256 * 1024, stdout),
            line: Vec::with_capacity(64 * 1024),
        }
    }

    async fn read_message(&mut self) -> Result<(), BoxError> {
        self.line.clear();
        let read = tokio::time::timeout(
            Duration::from_secs(30),
            self.reader.read_until(b'\n', &mut self.line),
        )
        .await
        .map_err(|_| "no response from the server within 30 s")??;
        if read == 0 {
            return Err("the server closed its stdout".into());
        }
        Ok(())
    }

    async fn initialize(&mut self, protocol: &str) -> Result<(), BoxError> {
        self.writer
            .write_all(initialize_body(protocol).as_bytes())
            .await?;
        self.writer.write_all(b"\n").await?;
        self.writer.flush().await?;
        loop {
            self.read_message().await?;
            let head: Head = serde_json::from_slice(&self.line)
                .map_err(|error| format!("bad initialize response: {error}"))?;
            if head.id == Some(0) && head.method.is_none() {
                if let Some(error) = head.error {
                    return Err(format!("initialize failed: {error}").into());
                }
                break;
            }
        }
        self.writer.write_all(INITIALIZED.as_bytes()).await?;
        self.writer.write_all(b"\n").await?;
        self.writer.flush().await?;
        Ok(())
    }

    /// Adds `config.notes` notes, one request at a time, before the load starts.
    async fn seed(&mut self, config: &Config) -> Result<(), BoxError> {
        let mut request = Vec::with_capacity(512);
        for n in 1..=config.notes {
            request.clear();
            Call::Void(n).write(
                config.workload,
                u64::from(n),
                &config.meta,
                &config.prefix,
                &mut request,
            );
            request.push(b'\n');
            self.writer.write_all(&request).await?;
            self.writer.flush().await?;
            loop {
                self.read_message().await?;
                let head = parse_head(self.line.trim_ascii())?;
                if head.method.is_none() && head.id == Some(u64::from(n)) {
                    if head.error.is_some() {
                        return Err(
                            format!("adding note {n} failed: {}", preview(&self.line)).into()
                        );
                    }
                    break;
                }
            }
        }
        Ok(())
    }

    /// Keeps `concurrency` requests in flight until the window ends, then drains; closes the
    /// server's stdin (by dropping the pipe) once `hold` fires or is dropped.
    async fn run(
        mut self,
        config: Config,
        window: Window,
        concurrency: usize,
        hold: tokio::sync::oneshot::Receiver<()>,
    ) -> Result<Stats, BoxError> {
        let mut rng = fastrand::Rng::with_seed(config.seed);
        let mut pending: HashMap<u64, (Instant, Call)> = HashMap::with_capacity(concurrency * 2);
        let mut stats = Stats {
            latencies_ns: Vec::with_capacity(1 << 20),
            ..Stats::default()
        };
        let mut next_id = 1u64;
        let mut request = Vec::with_capacity(1024);
        loop {
            if Instant::now() < window.end {
                if pending.len() < concurrency {
                    request.clear();
                    let mut batch = Vec::with_capacity(concurrency);
                    while pending.len() + batch.len() < concurrency {
                        let call = Call::pick(&mut rng, config.mix, config.invoices);
                        call.write(
                            config.workload,
                            next_id,
                            &config.meta,
                            &config.prefix,
                            &mut request,
                        );
                        request.push(b'\n');
                        batch.push((next_id, call));
                        next_id += 1;
                    }
                    self.writer.write_all(&request).await?;
                    self.writer.flush().await?;
                    let sent = Instant::now();
                    pending.extend(batch.into_iter().map(|(id, call)| (id, (sent, call))));
                }
            } else if pending.is_empty() {
                break;
            }
            self.read_message().await?;
            let check = (config.check_every, config.workload);
            self.account(&mut pending, &mut stats, &window, check);
            // Whatever else already arrived, without another system call.
            while self.reader.buffer().contains(&b'\n') {
                self.read_message().await?;
                self.account(&mut pending, &mut stats, &window, check);
            }
        }
        let _ = hold.await;
        Ok(stats)
    }

    fn account(
        &self,
        pending: &mut HashMap<u64, (Instant, Call)>,
        stats: &mut Stats,
        window: &Window,
        check: (u64, Workload),
    ) {
        let line = self.line.trim_ascii();
        if line.is_empty() {
            return;
        }
        let head = match parse_head(line) {
            Ok(head) => head,
            Err(error) => {
                return stats.problem(true, || {
                    format!("unparsable line ({error}): {}", preview(line))
                });
            }
        };
        if head.method.is_some() {
            return; // a server request or notification
        }
        let Some(id) = head.id else {
            return stats.problem(false, || format!("error without id: {}", preview(line)));
        };
        match pending.remove(&id) {
            Some((sent, call)) => stats.record_head(call, sent, window, head, line, check),
            None => stats.problem(true, || format!("response to unknown id {id}")),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Streamable HTTP

#[derive(Debug, Clone)]
struct Endpoint {
    address: String,
    authority: HeaderValue,
    path: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    protocol: HeaderValue,
    stateless: bool,
}

impl Endpoint {
    fn parse(url: &str, headers: &[String], protocol: &str) -> Result<Endpoint, BoxError> {
        let uri: hyper::Uri = url.parse()?;
        if uri.scheme_str() != Some("http") {
            return Err(format!("only http:// URLs are supported: {url}").into());
        }
        let authority = uri.authority().ok_or("the URL has no host")?;
        let port = authority.port_u16().unwrap_or(80);
        let host = authority.host().trim_matches(['[', ']']);
        let address = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let headers = headers
            .iter()
            .map(|header| {
                let (name, value) = header
                    .split_once(':')
                    .ok_or_else(|| format!("a header is `Name: value`, not `{header}`"))?;
                Ok((
                    HeaderName::from_bytes(name.trim().as_bytes())?,
                    HeaderValue::from_str(value.trim())?,
                ))
            })
            .collect::<Result<Vec<_>, BoxError>>()?;
        Ok(Endpoint {
            address,
            authority: HeaderValue::from_str(authority.as_str())?,
            path: uri
                .path_and_query()
                .map_or("/".into(), |path| path.as_str().to_owned()),
            headers,
            protocol: HeaderValue::from_str(protocol)?,
            stateless: protocol == STATELESS,
        })
    }
}

/// One reply: the HTTP status and the JSON-RPC message (the JSON body, or the SSE event that
/// answers the request).
struct Reply {
    status: StatusCode,
    session: Option<HeaderValue>,
    message: Bytes,
}

struct HttpClient {
    endpoint: Endpoint,
    sender: SendRequest<Full<Bytes>>,
    session: Option<HeaderValue>,
}

const JSON: HeaderValue = HeaderValue::from_static("application/json");
const ACCEPT: HeaderValue = HeaderValue::from_static("application/json, text/event-stream");
const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");

async fn connect(endpoint: &Endpoint) -> Result<SendRequest<Full<Bytes>>, BoxError> {
    let stream = tokio::net::TcpStream::connect(&endpoint.address).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// Whether a message starts like a response (`{"jsonrpc":"2.0","id":N,"result"|"error":`),
/// without reading the rest.
fn is_response(message: &[u8]) -> bool {
    const PREFIX: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
    message.strip_prefix(PREFIX).is_some_and(|rest| {
        let digits = rest.iter().take_while(|byte| byte.is_ascii_digit()).count();
        digits > 0
            && (rest[digits..].starts_with(br#","result":"#)
                || rest[digits..].starts_with(br#","error":"#))
    })
}

/// The JSON-RPC message of a body: the body itself (JSON), or the SSE `data:` payload that is
/// a response (not a notification or a server request).
fn message_of(body: Bytes, sse: bool) -> Bytes {
    #[derive(Deserialize)]
    struct Kind {
        method: Option<IgnoredAny>,
    }
    if !sse {
        return body;
    }
    let mut last = Bytes::new();
    let mut start = 0;
    while start < body.len() {
        let end = body[start..]
            .iter()
            .position(|&byte| byte == b'\n')
            .map_or(body.len(), |at| start + at);
        if let Some(data) = body[start..end].strip_prefix(b"data:") {
            let lead = data.len() - data.trim_ascii_start().len();
            let payload = data.trim_ascii();
            if payload.first() == Some(&b'{') {
                let from = start + b"data:".len() + lead;
                let message = body.slice(from..from + payload.len());
                if is_response(&message) {
                    return message;
                }
                match serde_json::from_slice::<Kind>(&message) {
                    Ok(Kind { method: None }) => return message,
                    _ => last = message,
                }
            }
        }
        start = end + 1;
    }
    last
}

impl HttpClient {
    async fn start(endpoint: Endpoint, config: &Config, index: usize) -> Result<Self, BoxError> {
        let sender = connect(&endpoint).await?;
        let mut client = HttpClient {
            endpoint,
            sender,
            session: None,
        };
        let what = |step: &str, reply: &Reply| {
            format!(
                "client {index}: {step} failed: HTTP {}: {}",
                reply.status,
                preview(&reply.message)
            )
        };
        if client.endpoint.stateless {
            let reply = client
                .post(discover_body(&config.meta).into(), "server/discover", None)
                .await?;
            let head: Head = serde_json::from_slice(&reply.message)
                .map_err(|_| what("server/discover", &reply))?;
            if reply.status != StatusCode::OK || head.result.is_none() {
                return Err(what("server/discover", &reply).into());
            }
        } else {
            let reply = client
                .post(initialize_body(&config.protocol).into(), "initialize", None)
                .await?;
            let head: Head =
                serde_json::from_slice(&reply.message).map_err(|_| what("initialize", &reply))?;
            if reply.status != StatusCode::OK || head.result.is_none() {
                return Err(what("initialize", &reply).into());
            }
            client.session = reply.session;
            let reply = client
                .post(
                    Bytes::from_static(INITIALIZED.as_bytes()),
                    "notifications/initialized",
                    None,
                )
                .await?;
            if !reply.status.is_success() {
                return Err(what("notifications/initialized", &reply).into());
            }
        }
        Ok(client)
    }

    fn request(
        &self,
        method: Method,
        body: Bytes,
        rpc_method: &str,
        name: Option<&str>,
    ) -> Result<Request<Full<Bytes>>, BoxError> {
        let mut builder = Request::builder()
            .method(method)
            .uri(self.endpoint.path.as_str())
            .header(hyper::header::HOST, self.endpoint.authority.clone())
            .header(hyper::header::CONTENT_TYPE, JSON)
            .header(hyper::header::ACCEPT, ACCEPT)
            .header(MCP_PROTOCOL_VERSION, self.endpoint.protocol.clone());
        if self.endpoint.stateless {
            builder = builder.header(MCP_METHOD, HeaderValue::from_str(rpc_method)?);
            if let Some(name) = name {
                builder = builder.header(MCP_NAME, HeaderValue::from_str(name)?);
            }
        }
        if let Some(session) = &self.session {
            builder = builder.header(MCP_SESSION_ID, session.clone());
        }
        for (name, value) in &self.endpoint.headers {
            builder = builder.header(name, value);
        }
        Ok(builder.body(Full::new(body))?)
    }

    async fn send(&mut self, request: Request<Full<Bytes>>) -> Result<Reply, BoxError> {
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        let sse = response
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
        let session = response.headers().get(MCP_SESSION_ID).cloned();
        let body = response.into_body().collect().await?.to_bytes();
        Ok(Reply {
            status,
            session,
            message: message_of(body, sse),
        })
    }

    async fn post(
        &mut self,
        body: Bytes,
        rpc_method: &str,
        name: Option<&str>,
    ) -> Result<Reply, BoxError> {
        let request = self.request(Method::POST, body, rpc_method, name)?;
        self.send(request).await
    }

    /// Adds `config.notes` notes, one request at a time, before the load starts.
    async fn seed(&mut self, config: &Config) -> Result<(), BoxError> {
        let mut body = Vec::with_capacity(512);
        let mut name = config.prefix.clone();
        name.push_str(Call::Void(0).tool(config.workload));
        for n in 1..=config.notes {
            body.clear();
            Call::Void(n).write(
                config.workload,
                u64::from(n),
                &config.meta,
                &config.prefix,
                &mut body,
            );
            let reply = self
                .post(Bytes::from(body.clone()), "tools/call", Some(&name))
                .await?;
            let head = parse_head(&reply.message);
            if reply.status != StatusCode::OK
                || !matches!(
                    head,
                    Ok(Head {
                        result: Some(_),
                        ..
                    })
                )
            {
                return Err(format!(
                    "adding note {n} failed: HTTP {}: {}",
                    reply.status,
                    preview(&reply.message)
                )
                .into());
            }
        }
        Ok(())
    }

    /// One request at a time until the window ends; then closes its session.
    async fn run(
        mut self,
        config: std::sync::Arc<Config>,
        window: Window,
        index: u64,
    ) -> Result<Stats, BoxError> {
        let mut rng = fastrand::Rng::with_seed(
            config
                .seed
                .wrapping_add(index.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        );
        let mut stats = Stats {
            latencies_ns: Vec::with_capacity(1 << 18),
            ..Stats::default()
        };
        let mut next_id = 1u64;
        let mut body = Vec::with_capacity(1024);
        let mut name = String::new();
        while Instant::now() < window.end {
            let call = Call::pick(&mut rng, config.mix, config.invoices);
            body.clear();
            call.write(
                config.workload,
                next_id,
                &config.meta,
                &config.prefix,
                &mut body,
            );
            next_id += 1;
            name.clear();
            name.push_str(&config.prefix);
            name.push_str(call.tool(config.workload));
            let sent = Instant::now();
            match self
                .post(Bytes::copy_from_slice(&body), "tools/call", Some(&name))
                .await
            {
                Ok(reply) if reply.status == StatusCode::OK => {
                    let check = (config.check_every, config.workload);
                    stats.record(call, sent, &window, &reply.message, check);
                }
                Ok(reply) => {
                    stats.problem(false, || {
                        format!(
                            "HTTP {} for {call:?}: {}",
                            reply.status,
                            preview(&reply.message)
                        )
                    });
                }
                Err(error) => {
                    stats.problem(false, || format!("request failed: {error}"));
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    match connect(&self.endpoint).await {
                        Ok(sender) => self.sender = sender,
                        Err(error) => {
                            stats.problem(false, || format!("reconnect failed: {error}"));
                        }
                    }
                }
            }
        }
        if self.session.is_some()
            && let Ok(request) = self.request(Method::DELETE, Bytes::new(), "", None)
        {
            let _ = tokio::time::timeout(Duration::from_secs(2), self.send(request)).await;
        }
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn invoice(n: u32) -> Value {
        json!({"id": format!("INV-{n}"), "customer_id": "C-1", "total_cents": 5, "status": "paid"})
    }

    fn row(item: &Value) -> String {
        format!(
            "{},{},{},{}",
            item["id"].as_str().unwrap(),
            item["customer_id"].as_str().unwrap(),
            item["total_cents"],
            item["status"].as_str().unwrap()
        )
    }

    /// A tools/call response as billing writes it: `text` first, then a rule.
    fn answer(text: String, data: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": text}, {"type": "text", "text": "<domain_rules>\n- r\n</domain_rules>"}],
            "structuredContent": {"ok": true, "data": data},
            "isError": false
        }})
    }

    fn get(data: Value) -> Value {
        answer(data.to_string(), data)
    }

    fn list(items: Vec<Value>, table: String) -> Value {
        answer(table, Value::Array(items))
    }

    fn table(items: &[Value]) -> String {
        let mut text = format!("[{}]{TABLE_HEADER}", items.len());
        for item in items {
            text.push('\n');
            text.push_str(&row(item));
        }
        text
    }

    fn twenty() -> Vec<Value> {
        (1..=20).map(invoice).collect()
    }

    #[test]
    fn billings_answers_pass() {
        check(Call::Get(7), Workload::Billing, &get(invoice(7))).unwrap();
        let mut voided = invoice(3);
        voided["status"] = "voided".into();
        check(Call::Void(3), Workload::Billing, &get(voided)).unwrap();
        let items = twenty();
        check(
            Call::List,
            Workload::Billing,
            &list(items.clone(), table(&items)),
        )
        .unwrap();
        let already = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "<tool_error code=\"AlreadyVoided\">\n</tool_error>"}],
            "structuredContent": {"ok": false, "error": {"code": "AlreadyVoided"}},
            "isError": true
        }});
        check(Call::Void(3), Workload::Billing, &already).unwrap();
    }

    #[test]
    fn wrong_answers_are_caught() {
        let reject = |call: Call, message: Value, why: &str| {
            let error = check(call, Workload::Billing, &message).unwrap_err();
            assert!(error.contains(why), "{error}");
        };
        reject(Call::Get(8), get(invoice(7)), "data.id is not INV-8");
        let mut leaked = invoice(7);
        leaked["webhook_secret"] = "whsec_7".into();
        reject(Call::Get(7), get(leaked), "hidden field `webhook_secret`");
        let mut named = get(invoice(7));
        named["result"]["structuredContent"]["meta"] = json!({"tool": "billing_get_invoice"});
        reject(Call::Get(7), named, "meta names the tool");
        reject(
            Call::Get(7),
            answer(invoice(8).to_string(), invoice(7)),
            "differs from data",
        );
        reject(Call::Void(7), get(invoice(7)), "not voided");
        let mut failed = get(invoice(7));
        failed["result"]["isError"] = true.into();
        reject(Call::Get(7), failed, "isError true but ok true");
        // Lists: the wrong length, a table that does not match its data.
        let nineteen: Vec<Value> = (1..=19).map(invoice).collect();
        reject(
            Call::List,
            list(nineteen.clone(), table(&nineteen)),
            "list of 19 items",
        );
        let items = twenty();
        reject(
            Call::List,
            list(items.clone(), items.len().to_string()),
            "header",
        );
        let mut json_text = list(items.clone(), Value::Array(items.clone()).to_string());
        json_text["result"]["content"][0]["text"] = Value::Array(items.clone()).to_string().into();
        reject(Call::List, json_text, "header");
        let short = table(&items[..19]).replacen("[19]", "[20]", 1);
        reject(Call::List, list(items.clone(), short), "rows");
        let long = format!("{}\nINV-99,C-1,5,paid", table(&items));
        reject(Call::List, list(items.clone(), long), "rows");
        let swapped = table(&items).replacen("INV-2,", "INV-9,", 1);
        reject(
            Call::List,
            list(items.clone(), swapped),
            "not invoice INV-2",
        );
        let mut hidden_column = items.clone();
        hidden_column[4]["tenant_id"] = "t_777".into();
        reject(
            Call::List,
            list(hidden_column, table(&items)),
            "hidden field `tenant_id`",
        );
    }
}

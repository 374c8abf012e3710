//! `cargo fusion tokens`: what MCP servers cost an agent, in tokens. It starts each server as
//! a child process speaking MCP over stdio, lists its tools and makes the calls it is given,
//! and prints, as Markdown tables: the tokens of `tools/list` and of each tool's definition,
//! and of each answer's text blocks and `structuredContent`. Several servers side by side
//! make a comparison (`bench/tokens.sh` writes TOKENS.md with it).
//!
//! Counted with the o200k tokenizer, whose vocabulary ships inside the binary: nothing is
//! downloaded. Any MCP server can be measured, built with Fusion or not.
//!
//! ```text
//! cargo fusion tokens --server "billing=target/debug/billing --in-memory" \
//!     --call 'one=billing_get_invoice {"id":"INV-1"}'
//! ```

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use clap::Args;
use fusion_lock::tokens::{self, AnswerTokens, O200k, Tokenizer};
use serde_json::{Value, json};

use crate::Failure;

/// How long one answer may take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// `cargo fusion tokens …`.
#[derive(Debug, Args)]
pub(crate) struct TokensCommand {
    /// A server to measure, as `NAME=COMMAND [ARGS…]` (split on spaces), speaking MCP over
    /// stdio. Repeat it to compare servers side by side.
    #[arg(long = "server", value_name = "NAME=COMMAND", required = true)]
    servers: Vec<String>,
    /// A call to make and measure, as `LABEL=TOOL JSON-ARGUMENTS`; the arguments default to
    /// `{}`. Made on every server, in order.
    #[arg(long = "call", value_name = "LABEL=TOOL JSON")]
    calls: Vec<String>,
    /// The MCP protocol version to ask for.
    #[arg(long, default_value = "2025-11-25")]
    protocol: String,
}

/// One server's numbers.
struct Measured {
    name: String,
    /// The tokens of the instructions the handshake gave (paid once per session).
    instructions: usize,
    listing_bytes: usize,
    listing_tokens: usize,
    definitions: Vec<(String, usize)>,
    answers: Vec<AnswerTokens>,
}

/// A call to make, parsed from `LABEL=TOOL JSON`.
struct Call {
    label: String,
    tool: String,
    arguments: Value,
}

pub(crate) fn run(command: TokensCommand) -> Result<ExitCode, Failure> {
    let calls = command
        .calls
        .iter()
        .map(|call| parse_call(call))
        .collect::<Result<Vec<_>, _>>()?;
    let mut measured = Vec::with_capacity(command.servers.len());
    for server in &command.servers {
        let (name, line) = server
            .split_once('=')
            .ok_or_else(|| Failure(format!("--server `{server}` is not NAME=COMMAND [ARGS…]")))?;
        measured.push(measure(name, line, &calls, &command.protocol, &O200k)?);
    }
    print!("{}", report(&measured, &calls, &O200k));
    Ok(ExitCode::SUCCESS)
}

fn parse_call(call: &str) -> Result<Call, Failure> {
    let bad = |why: &str| Failure(format!("--call `{call}` {why}"));
    let (label, rest) = call
        .split_once('=')
        .ok_or_else(|| bad("is not LABEL=TOOL JSON"))?;
    let (tool, arguments) = rest.trim().split_once(' ').unwrap_or((rest.trim(), "{}"));
    let arguments: Value = serde_json::from_str(arguments)
        .map_err(|error| bad(&format!("has arguments that are not JSON: {error}")))?;
    if !arguments.is_object() || tool.is_empty() {
        return Err(bad("needs a tool name and a JSON object of arguments"));
    }
    Ok(Call {
        label: label.to_owned(),
        tool: tool.to_owned(),
        arguments,
    })
}

/// A server under measurement: its process, its stdin, and its stdout's lines.
struct Session {
    child: Child,
    input: ChildStdin,
    lines: Receiver<String>,
    next_id: u64,
}

impl Session {
    fn start(line: &str) -> Result<Self, Failure> {
        let mut words = line.split_whitespace();
        let program = words
            .next()
            .ok_or_else(|| Failure(format!("the server command `{line}` is empty")))?;
        let mut child = Command::new(program)
            .args(words)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| Failure(format!("cannot start `{line}`: {error}")))?;
        let (Some(input), Some(output)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(Failure(format!("`{line}` has no stdio pipes")));
        };
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(output).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Session {
            child,
            input,
            lines,
            next_id: 1,
        })
    }

    fn send(&mut self, message: &Value) -> Result<(), Failure> {
        writeln!(self.input, "{message}")
            .and_then(|()| self.input.flush())
            .map_err(|error| Failure(format!("the server stopped reading: {error}")))
    }

    /// Sends a request and returns its `result`.
    fn request(&mut self, method: &str, params: Value) -> Result<Value, Failure> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let line = match self.lines.recv_timeout(ANSWER_TIMEOUT) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(Failure(format!("no answer to `{method}` in 30 s")));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Failure(format!(
                        "the server exited before answering `{method}`"
                    )));
                }
            };
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message.get("id") != Some(&json!(id)) {
                continue;
            }
            if let Some(error) = message.get("error") {
                return Err(Failure(format!("`{method}` failed: {error}")));
            }
            return Ok(message.get("result").cloned().unwrap_or(Value::Null));
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn measure(
    name: &str,
    line: &str,
    calls: &[Call],
    protocol: &str,
    tokenizer: &dyn Tokenizer,
) -> Result<Measured, Failure> {
    let mut session = Session::start(line)?;
    let initialized = session.request(
        "initialize",
        json!({
            "protocolVersion": protocol,
            "capabilities": {},
            "clientInfo": {"name": "cargo-fusion-tokens", "version": env!("CARGO_PKG_VERSION")}
        }),
    )?;
    session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
    let instructions = initialized
        .get("instructions")
        .and_then(Value::as_str)
        .map_or(0, |text| tokenizer.count(text));
    let mut tools = Vec::new();
    let mut listing_bytes = 0;
    let mut listing_tokens = 0;
    let mut cursor: Option<Value> = None;
    loop {
        let params = match &cursor {
            Some(cursor) => json!({"cursor": cursor}),
            None => json!({}),
        };
        let page = session.request("tools/list", params)?;
        let text = page.to_string();
        listing_bytes += text.len();
        listing_tokens += tokenizer.count(&text);
        tools.extend(
            page.get("tools")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        );
        cursor = page
            .get("nextCursor")
            .filter(|next| !next.is_null())
            .cloned();
        if cursor.is_none() {
            break;
        }
    }
    let definitions = tools
        .iter()
        .map(|tool| {
            let tool_name = tool.get("name").and_then(Value::as_str).unwrap_or("?");
            (tool_name.to_owned(), tokens::definition(tool, tokenizer))
        })
        .collect();
    let mut answers = Vec::with_capacity(calls.len());
    for call in calls {
        let result = session.request(
            "tools/call",
            json!({"name": call.tool, "arguments": call.arguments}),
        )?;
        answers.push(tokens::answer(&result, tokenizer));
    }
    Ok(Measured {
        name: name.to_owned(),
        instructions,
        listing_bytes,
        listing_tokens,
        definitions,
        answers,
    })
}

/// The Markdown report: the listing, each call, then each server's tools.
fn report(measured: &[Measured], calls: &[Call], tokenizer: &dyn Tokenizer) -> String {
    let mut out = format!("Tokens counted with {}.\n\n", tokenizer.name());
    let header = |first: &str| {
        let mut line = format!("| {first} |");
        let mut rule = String::from("|---|");
        for server in measured {
            line.push_str(&format!(" {} |", server.name));
            rule.push_str("---:|");
        }
        format!("{line}\n{rule}\n")
    };
    out.push_str(&header("what the agent receives"));
    out.push_str("| server instructions (once per session) |");
    for server in measured {
        out.push_str(&format!(" {} |", thousands(server.instructions)));
    }
    out.push('\n');
    out.push_str("| tools/list |");
    for server in measured {
        let count = server.definitions.len().max(1);
        out.push_str(&format!(
            " {} bytes, **{} tokens** for {} tools (≈{} a tool) |",
            thousands(server.listing_bytes),
            thousands(server.listing_tokens),
            server.definitions.len(),
            thousands(server.listing_tokens / count)
        ));
    }
    out.push('\n');
    if let Some(shared) = shared_tools(measured) {
        out.push_str(&format!(
            "| the {} tools all of them list, definitions only |",
            shared.len()
        ));
        for server in measured {
            let sum: usize = server
                .definitions
                .iter()
                .filter(|(tool, _)| shared.contains(tool))
                .map(|(_, count)| count)
                .sum();
            out.push_str(&format!(" {} |", thousands(sum)));
        }
        out.push('\n');
    }
    for (index, call) in calls.iter().enumerate() {
        out.push_str(&format!("| {} (text + structuredContent) |", call.label));
        for server in measured {
            let answer = server.answers[index];
            out.push_str(&format!(
                " {} + {} = **{}** |",
                thousands(answer.text),
                thousands(answer.structured),
                thousands(answer.total())
            ));
        }
        out.push('\n');
    }
    for server in measured {
        out.push_str(&format!(
            "\n{}: each tool's definition as listed\n\n| tool | tokens |\n|---|---:|\n",
            server.name
        ));
        for (tool, count) in &server.definitions {
            out.push_str(&format!("| `{tool}` | {} |\n", thousands(*count)));
        }
    }
    out
}

/// The tools every server lists, when several are compared and they share any.
fn shared_tools(measured: &[Measured]) -> Option<Vec<String>> {
    let (first, others) = measured.split_first()?;
    let shared: Vec<String> = first
        .definitions
        .iter()
        .map(|(tool, _)| tool.clone())
        .filter(|tool| {
            others
                .iter()
                .all(|server| server.definitions.iter().any(|(other, _)| other == tool))
        })
        .collect();
    (!others.is_empty() && !shared.is_empty()).then_some(shared)
}

/// `19571` as `19,571`.
fn thousands(number: usize) -> String {
    let digits = number.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_a_label_a_tool_and_json_arguments() {
        let call = parse_call(r#"one=billing_get_invoice {"id": "INV-1"}"#).unwrap();
        assert_eq!(
            (call.label.as_str(), call.tool.as_str()),
            ("one", "billing_get_invoice")
        );
        assert_eq!(call.arguments, json!({"id": "INV-1"}));
        assert_eq!(parse_call("all=t").unwrap().arguments, json!({}));
        assert!(parse_call("no label").is_err());
        assert!(parse_call("x=t [1]").is_err());
        assert!(parse_call("x=t {").is_err());
    }

    #[test]
    fn numbers_are_grouped_by_thousands() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(845), "845");
        assert_eq!(thousands(1139), "1,139");
        assert_eq!(thousands(1234567), "1,234,567");
    }
}

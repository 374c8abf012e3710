//! Calls one target of a Fusion server in-process, `N` times, for callgrind's marginal
//! instructions per call of the request path alone (no transport):
//!
//!   inproc tool|failing-tool|read|failing-read|prompt N
//!
//! Run twice under callgrind (two values of N) and divide the difference. With
//! `INPROC_SERVER_CONCURRENCY=off` the server has no limit of its own (the path without it, to
//! measure what the limit costs).

use fusion::{PromptMessages, ServerBuilder, ToolError, prompt, resource, tool};
use serde_json::json;

/// Echoes a word.
#[tool(query, name = "echo")]
async fn echo(word: String) -> Result<String, ToolError> {
    Ok(word)
}

/// Always fails.
#[tool(query, name = "fail")]
async fn fail() -> Result<String, ToolError> {
    Err(ToolError::not_found("nothing here"))
}

/// A short guide.
#[resource(uri = "demo://guide", name = "demo.guide", mime = "text/markdown")]
async fn guide() -> Result<String, ToolError> {
    Ok("# Guide".to_owned())
}

/// A resource that fails.
#[resource(uri = "demo://broken", name = "demo.broken")]
async fn broken() -> Result<String, ToolError> {
    Err(ToolError::internal_message("broken"))
}

/// A greeting prompt.
#[prompt(name = "demo.greet")]
async fn greet(name: String) -> Result<PromptMessages, ToolError> {
    Ok(PromptMessages::new().user(format!("Greet {name}.")))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let what = args.next().expect("what to call");
    let n: usize = args.next().expect("how many").parse().expect("a count");
    let server_concurrency = match std::env::var("INPROC_SERVER_CONCURRENCY").as_deref() {
        Ok("off") => None,
        // The default: 512 running, 512 waiting, each tenant at most half.
        _ => Some(fusion::Concurrency::new(512, 512)),
    };
    let server = ServerBuilder::new("demo", "1.0.0")
        .server_concurrency(server_concurrency)
        .tool::<echo>()
        .tool::<fail>()
        .resource::<guide>()
        .resource::<broken>()
        .prompt::<greet>()
        .build()
        .expect("the server builds");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        for _ in 0..n {
            let context = server.new_context();
            match what.as_str() {
                "tool" => {
                    let args = json!({"word": "hi"}).as_object().cloned();
                    std::hint::black_box(server.call_tool("echo", args, context).await.unwrap());
                }
                "failing-tool" => {
                    std::hint::black_box(server.call_tool("fail", None, context).await.unwrap());
                }
                "read" => {
                    std::hint::black_box(
                        server.read_resource("demo://guide", context).await.unwrap(),
                    );
                }
                "failing-read" => {
                    std::hint::black_box(
                        server
                            .read_resource("demo://broken", context)
                            .await
                            .unwrap_err(),
                    );
                }
                "prompt" => {
                    let args = json!({"name": "Ada"}).as_object().cloned();
                    std::hint::black_box(
                        server
                            .get_prompt("demo_greet", args, context)
                            .await
                            .unwrap(),
                    );
                }
                other => panic!("unknown target {other}"),
            }
        }
    });
}

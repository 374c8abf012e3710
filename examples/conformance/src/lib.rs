//! The server fixtures of the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`), written as a Fusion user writes a connector: plain
//! `async fn`s under `#[tool]`, `#[prompt]` and `#[resource]`, context extractors for what a
//! handler needs from the client, and one [`ServerBuilder`].
//!
//! Each fixture does what the suite's scenario asks for, by name (the names are the suite's,
//! hence `test_simple_text` rather than a namespaced key). Nothing here knows it is being
//! tested: the same code answers any client.

mod prompts;
mod resources;
mod tasks;
mod tools;

use fusion::{BuildError, Server, ServerBuilder};

/// A 1×1 red PNG: the picture the image fixtures show.
pub const PIXEL_PNG: &[u8] = include_bytes!("fixtures/pixel.png");

/// A minimal WAV file: the sound the audio fixture plays.
pub const TONE_WAV: &[u8] = include_bytes!("fixtures/tone.wav");

/// The server with every fixture.
pub fn server() -> Result<Server, BuildError> {
    let builder = ServerBuilder::new("mcp-conformance-test-server", "1.0.0").instructions(
        "Fixtures of the MCP conformance suite: tools, prompts and resources named test_*.",
    );
    let builder = tools::register(builder);
    let builder = tasks::register(builder);
    let builder = prompts::register(builder);
    let builder = resources::register(builder);
    builder.build()
}

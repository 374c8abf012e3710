//! Content that is not text: images, sounds, embedded resources and raw bytes.
//!
//! A tool's data reaches the agent as JSON text (and `structuredContent`); some results are
//! pictures or recordings instead, or carry a document along. [`Media`] is one such block,
//! built from bytes the author holds; [`WithMedia`] attaches blocks to a tool's result (after
//! its text blocks), and [`PromptMessages::user_media`](crate::PromptMessages::user_media)
//! puts one in a prompt. A resource whose handler returns a [`Blob`] is read as binary
//! contents (`blob`, base64).
//!
//! Media never carries a model: it is made of bytes and strings the author passes explicitly,
//! as a prompt's text is, so the egress firewall of presenters is not bypassed by it. The
//! egress budget counts media blocks but never cuts them.
//!
//! ```
//! use fusion_runtime::media::{Media, WithMedia};
//! use fusion_runtime::{CallContext, ServerBuilder, ToolError, ToolSpec};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Chart {
//!     /// Which quarter.
//!     quarter: u8,
//! }
//!
//! const PIXEL: &[u8] = b"\x89PNG\r\n\x1a\n"; // a picture's bytes
//!
//! let spec = ToolSpec::query("charts.render", "Renders the chart of a quarter.").handler(
//!     |_: CallContext, chart: Chart| async move {
//!         let title = format!("Q{}", chart.quarter);
//!         Ok::<_, ToolError>(WithMedia::new(title).with(Media::image(PIXEL, "image/png")))
//!     },
//! );
//! let server = ServerBuilder::new("charts", "1.0.0").tool_spec(spec).build().unwrap();
//! # let _ = server;
//! ```

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rmcp::model::{ContentBlock, ResourceContents};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Serialize, Serializer};

/// One block of non-text content: an image, a sound, or an embedded resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Media(ContentBlock);

impl Media {
    /// An image (`image/png`, `image/jpeg`…); `bytes` are sent base64-encoded.
    pub fn image(bytes: impl AsRef<[u8]>, mime_type: impl Into<String>) -> Media {
        Media(ContentBlock::image(STANDARD.encode(bytes), mime_type))
    }

    /// A sound (`audio/wav`, `audio/mpeg`…); `bytes` are sent base64-encoded.
    pub fn audio(bytes: impl AsRef<[u8]>, mime_type: impl Into<String>) -> Media {
        Media(ContentBlock::audio(STANDARD.encode(bytes), mime_type))
    }

    /// An embedded text resource: `text` as the contents of `uri`.
    pub fn resource_text(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        text: impl Into<String>,
    ) -> Media {
        Media(ContentBlock::resource(
            ResourceContents::text(text, uri).with_mime_type(mime_type),
        ))
    }

    /// An embedded binary resource: `bytes` (base64-encoded) as the contents of `uri`.
    pub fn resource_blob(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        bytes: impl AsRef<[u8]>,
    ) -> Media {
        Media(ContentBlock::resource(
            ResourceContents::blob(STANDARD.encode(bytes), uri).with_mime_type(mime_type),
        ))
    }

    /// The block as it goes on the wire.
    pub fn block(&self) -> &ContentBlock {
        &self.0
    }

    pub(crate) fn into_block(self) -> ContentBlock {
        self.0
    }
}

/// A tool's result with media attached: `value` is presented as usual (its presenter, its
/// envelope), and each [`Media`] follows the text blocks in `content`, in order.
#[derive(Debug, Clone)]
pub struct WithMedia<T> {
    pub(crate) value: T,
    pub(crate) media: Vec<Media>,
}

impl<T> WithMedia<T> {
    /// `value` with nothing attached yet.
    pub fn new(value: T) -> Self {
        WithMedia {
            value,
            media: Vec::new(),
        }
    }

    /// Attaches one more block.
    #[must_use]
    pub fn with(mut self, media: Media) -> Self {
        self.media.push(media);
        self
    }
}

/// Raw bytes, sent base64-encoded (`"contentEncoding": "base64"` in the schema). A resource
/// whose handler returns a `Blob` is read as one binary content (`blob`) of the resource's MIME
/// type (`application/octet-stream` unless declared).
#[derive(Clone, PartialEq, Eq)]
pub struct Blob(pub Vec<u8>);

impl std::fmt::Debug for Blob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Blob({} bytes)", self.0.len())
    }
}

impl From<Vec<u8>> for Blob {
    fn from(bytes: Vec<u8>) -> Self {
        Blob(bytes)
    }
}

impl From<&[u8]> for Blob {
    fn from(bytes: &[u8]) -> Self {
        Blob(bytes.to_vec())
    }
}

impl Serialize for Blob {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&STANDARD.encode(&self.0))
    }
}

impl JsonSchema for Blob {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Blob".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({ "type": "string", "contentEncoding": "base64" })
    }
}

/// Whether a data schema is [`Blob`]'s: a base64-encoded string.
pub(crate) fn is_blob_schema(schema: &serde_json::Value) -> bool {
    schema.get("type") == Some(&serde_json::Value::from("string"))
        && schema.get("contentEncoding") == Some(&serde_json::Value::from("base64"))
}

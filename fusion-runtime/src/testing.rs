//! The in-memory tester (SPEC L2): runs a server's real pipeline — exposition names,
//! validation, handler, presenter, state sync, envelope — with a test context and no
//! transport, and reads the result back the way an agent receives it.
//!
//! ```
//! use fusion_runtime::testing::Tester;
//! use fusion_runtime::{CallContext, ServerBuilder, ToolError, ToolSpec};
//! # use schemars::JsonSchema; use serde::{Deserialize, Serialize};
//! # #[derive(Deserialize, JsonSchema)] struct Args { text: String }
//! # #[derive(Serialize, JsonSchema)] struct Echoed { text: String }
//! # tokio_test_runtime(async {
//! let server = ServerBuilder::new("demo", "1.0.0")
//!     .tool_spec(ToolSpec::query("demo.echo", "Repeats the text.").handler(
//!         |_: CallContext, args: Args| async move { Ok::<_, ToolError>(Echoed { text: args.text }) },
//!     ))
//!     .build()
//!     .unwrap();
//! let tester = Tester::new(server);
//! assert_eq!(tester.list_tools()[0].name, "demo_echo");
//! let result = tester.call("demo.echo", serde_json::json!({"text": "hi"})).await;
//! assert!(!result.is_error());
//! assert_eq!(result.data()["text"], "hi");
//! let bad = tester.call("demo.echo", serde_json::json!({"text": 5})).await;
//! assert_eq!(bad.error_code(), Some("VALIDATION_ERROR"));
//! # });
//! # fn tokio_test_runtime(f: impl std::future::Future<Output = ()>) {
//! #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
//! # }
//! ```

use std::sync::Arc;

use rmcp::model::{CallToolResult, JsonObject, Tool as ToolDefinition};
use serde_json::Value;

use crate::context::CallContext;
pub use crate::envelope::Dropped;
use crate::envelope::{Envelope, ErrorBody, Meta, Sealed, SuggestedCall, Truncated};
use crate::server::{Server, UnknownTool};

#[cfg(feature = "tokens")]
pub use fusion_lock::tokens::{AnswerTokens, O200k, Tokenizer};

type ContextSetup = Arc<dyn Fn(&mut CallContext) + Send + Sync>;

/// Calls a server's tools in memory.
#[derive(Clone)]
pub struct Tester {
    server: Server,
    setup: Option<ContextSetup>,
}

impl std::fmt::Debug for Tester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tester")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl Tester {
    /// A tester of `server`.
    pub fn new(server: Server) -> Self {
        Tester {
            server,
            setup: None,
        }
    }

    /// Prepares every call's context, like a transport or middleware would: attach a tenant,
    /// a principal, request metadata.
    #[must_use]
    pub fn with_context(
        mut self,
        setup: impl Fn(&mut CallContext) + Send + Sync + 'static,
    ) -> Self {
        self.setup = Some(Arc::new(setup));
        self
    }

    /// The server under test.
    pub fn server(&self) -> &Server {
        &self.server
    }

    fn context(&self) -> CallContext {
        let mut context = self.server.new_context();
        if let Some(setup) = &self.setup {
            setup(&mut context);
        }
        context
    }

    /// The tools `tools/list` shows the tester's caller (the context of
    /// [`Tester::with_context`]), its pages together: the built-in tools it may see, then
    /// the tools of mounted upstreams it may call, as their upstreams list them now.
    pub fn list_tools(&self) -> Vec<ToolDefinition> {
        let context = self.context();
        #[cfg(feature = "gateway")]
        let tools = self.server.listed_tools(&context);
        #[cfg(not(feature = "gateway"))]
        let tools = self.server.visible_tools(&context);
        tools
    }

    /// What each tool the tester's caller sees costs an agent in tokens before any call: its
    /// definition as `tools/list` shows it (name, title, description, input and output
    /// schemas, annotations), in listing order (feature `tokens`).
    #[cfg(feature = "tokens")]
    pub fn definition_tokens(&self, tokenizer: &dyn Tokenizer) -> Vec<(String, usize)> {
        self.list_tools()
            .iter()
            .map(|tool| {
                let listed = serde_json::to_value(tool).unwrap_or(Value::Null);
                (
                    tool.name.to_string(),
                    fusion_lock::tokens::definition(&listed, tokenizer),
                )
            })
            .collect()
    }

    /// Calls the tool with canonical key `key` (`billing.get_invoice`) through its exposed
    /// name, adding the `action` discriminator in grouped exposition. An exposed name
    /// (`billing_get_invoice`) is called as it is, with `arguments` as given.
    ///
    /// # Panics
    /// When the server has no tool with this key or name (saying which key was meant), or
    /// `arguments` is not an object: both are mistakes in the test itself.
    pub async fn call(&self, key: &str, arguments: Value) -> TestResult {
        let arguments = into_object(arguments);
        let (name, arguments) = match self.server.exposed_call(key, Some(arguments.clone())) {
            Some(exposed) => exposed,
            None if self.server.tool(key).is_some() => (key.to_owned(), arguments),
            None => panic!("{}", self.no_such_key(key)),
        };
        match self.call_exposed(&name, Value::Object(arguments)).await {
            Ok(result) => result,
            Err(unknown) => panic!("{unknown}"),
        }
    }

    /// Why `key` names nothing, and what it probably meant.
    #[cold]
    fn no_such_key(&self, key: &str) -> String {
        let keys: Vec<&str> = self
            .server
            .actions()
            .map(|action| action.key().as_str())
            .collect();
        let mut message = format!("the server has no tool with key or name `{key}`");
        let closest = keys
            .iter()
            .map(|candidate| (edit_distance(key, candidate), *candidate))
            .min();
        match closest {
            Some((distance, candidate)) if distance <= key.len().max(3) / 3 => {
                message.push_str(&format!("; did you mean `{candidate}`?"));
            }
            _ => {}
        }
        message.push_str(&format!(" Its keys: {}.", keys.join(", ")));
        message
    }

    /// Calls an exposed tool by the name agents use, with raw arguments.
    pub async fn call_exposed(
        &self,
        name: &str,
        arguments: Value,
    ) -> Result<TestResult, UnknownTool> {
        let arguments = match arguments {
            Value::Null => None,
            other => Some(into_object(other)),
        };
        let mut sealed: Sealed = self
            .server
            .call_sealed(name, arguments, self.context())
            .await?;
        let dropped = std::mem::take(&mut sealed.dropped);
        let mut result = TestResult::new(crate::serve::reply::call_tool_result(
            sealed,
            crate::envelope::DataText::default(),
        ));
        result.dropped = dropped;
        Ok(result)
    }
}

/// The Levenshtein distance between two keys, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, from) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, to) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(from != *to);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

fn into_object(arguments: Value) -> JsonObject {
    match arguments {
        Value::Object(object) => object,
        other => panic!("tool arguments are a JSON object, not {other}"),
    }
}

/// A tool result as the agent receives it, with readers for each part. Its envelope is read
/// through the [`Envelope`] types: a result whose `structuredContent` does not match them makes
/// the test panic (the advertised output schema is generated from the same types).
#[derive(Debug, Clone)]
pub struct TestResult {
    raw: CallToolResult,
    envelope: Value,
    typed: Envelope,
    meta: Value,
    error: Value,
    dropped: Vec<Dropped>,
}

static NULL: Value = Value::Null;

/// A UI block as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedUiBlock {
    /// The block's `type`: `markdown`, `table`, `mermaid`, `chart`, `code`.
    pub kind: String,
    /// The block's body, unescaped.
    pub body: String,
}

impl TestResult {
    fn new(raw: CallToolResult) -> Self {
        let envelope = raw.structured_content.clone().unwrap_or(Value::Null);
        let typed: Envelope = serde_json::from_value(envelope.clone()).unwrap_or_else(|error| {
            panic!("structuredContent is not a Fusion envelope ({error}): {envelope}")
        });
        let (meta, error) = match &typed {
            Envelope::Success(success) => (to_value(&success.meta), Value::Null),
            Envelope::Failure(failure) => (to_value(&failure.meta), to_value(&failure.error)),
        };
        TestResult {
            raw,
            envelope,
            typed,
            meta,
            error,
            dropped: Vec::new(),
        }
    }

    /// What the tool's code put in the result that the agent was not shown: suggestions
    /// naming a tool the presenter did not declare (or with arguments that are not an
    /// object), and error actions naming no tool. A server only logs these; a test can
    /// assert there are none.
    pub fn dropped(&self) -> &[Dropped] {
        &self.dropped
    }

    /// The MCP result itself.
    pub fn raw(&self) -> &CallToolResult {
        &self.raw
    }

    /// The whole result as JSON text, exactly as it would be sent.
    pub fn raw_text(&self) -> String {
        serde_json::to_string(&self.raw).unwrap_or_default()
    }

    /// What this answer costs an agent in tokens: its text blocks and its
    /// `structuredContent`, apart (feature `tokens`).
    #[cfg(feature = "tokens")]
    pub fn tokens(&self, tokenizer: &dyn Tokenizer) -> AnswerTokens {
        let raw = serde_json::to_value(&self.raw).unwrap_or(Value::Null);
        fusion_lock::tokens::answer(&raw, tokenizer)
    }

    /// `isError`.
    pub fn is_error(&self) -> bool {
        self.raw.is_error == Some(true)
    }

    /// The envelope (`structuredContent`) as JSON.
    pub fn envelope(&self) -> &Value {
        &self.envelope
    }

    /// The envelope, read through its types.
    pub fn typed(&self) -> &Envelope {
        &self.typed
    }

    /// The envelope's `data` (`null` on errors).
    pub fn data(&self) -> &Value {
        match &self.typed {
            Envelope::Success(success) => &success.data,
            Envelope::Failure(_) => &NULL,
        }
    }

    /// The envelope's `meta`, as JSON.
    pub fn meta(&self) -> &Value {
        &self.meta
    }

    /// The envelope's `error` as JSON (`null` on success).
    pub fn error(&self) -> &Value {
        &self.error
    }

    /// The error, on errors.
    pub fn error_body(&self) -> Option<&ErrorBody> {
        match &self.typed {
            Envelope::Success(_) => None,
            Envelope::Failure(failure) => Some(&failure.error),
        }
    }

    /// The error code, on errors.
    pub fn error_code(&self) -> Option<&str> {
        self.error_body().map(|error| error.code.as_str())
    }

    fn typed_meta(&self) -> &Meta {
        match &self.typed {
            Envelope::Success(success) => &success.meta,
            Envelope::Failure(failure) => &failure.meta,
        }
    }

    /// The text blocks, in order.
    pub fn texts(&self) -> Vec<&str> {
        self.raw
            .content
            .iter()
            .filter_map(|block| block.as_text().map(|text| text.text.as_str()))
            .collect()
    }

    /// The domain rules the agent received.
    pub fn rules(&self) -> Vec<String> {
        self.block_body("<domain_rules>", "</domain_rules>")
            .map(|body| {
                body.lines()
                    .filter_map(|line| line.strip_prefix("- "))
                    .map(unescape)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The UI blocks the agent received.
    pub fn ui_blocks(&self) -> Vec<ReceivedUiBlock> {
        self.texts()
            .into_iter()
            .filter_map(|text| {
                let rest = text.strip_prefix("<ui_passthrough type=\"")?;
                let (kind, rest) = rest.split_once('"')?;
                let (_, body) = rest.split_once(">\n")?;
                let body = body.strip_suffix("\n</ui_passthrough>")?;
                Some(ReceivedUiBlock {
                    kind: kind.to_owned(),
                    body: unescape(body),
                })
            })
            .collect()
    }

    /// The suggested next calls, with exposed names and arguments.
    pub fn suggestions(&self) -> &[SuggestedCall] {
        &self.typed_meta().suggestions
    }

    /// The domains the agent was told to fetch again, from the `<cache_invalidation/>` block.
    pub fn invalidations(&self) -> Vec<String> {
        self.texts()
            .into_iter()
            .find_map(|text| {
                let rest = text.strip_prefix("<cache_invalidation ")?;
                let (_, domains) = rest.split_once("domains=\"")?;
                let (domains, _) = domains.split_once('"')?;
                Some(unescape(domains).split(',').map(str::to_owned).collect())
            })
            .unwrap_or_default()
    }

    /// `(shown, total)` when a collection was cut and its total is known (see
    /// [`truncated`](Self::truncated) for the rest).
    pub fn truncation(&self) -> Option<(u64, u64)> {
        let truncated = self.truncated()?;
        Some((truncated.shown, truncated.total?))
    }

    /// How a collection was cut (`meta.truncated`), if it was.
    pub fn truncated(&self) -> Option<&Truncated> {
        self.typed_meta().truncated.as_ref()
    }

    /// The truncation notice the agent read, if any.
    pub fn truncation_notice(&self) -> Option<&str> {
        self.texts()
            .into_iter()
            .find(|text| text.starts_with("<truncation"))
    }

    fn block_body(&self, open: &str, close: &str) -> Option<&str> {
        self.texts().into_iter().find_map(|text| {
            text.strip_prefix(open)
                .and_then(|rest| rest.strip_suffix(close))
        })
    }
}

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

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

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::model::{
    CallToolResult, ClientCapabilities, ElicitRequestParams, InputRequest, JsonObject,
    Tool as ToolDefinition,
};
use serde_json::{Value, json};

use crate::context::CallContext;
use crate::elicit::{Asked, Era, INPUT_REQUIRED, Need, Pending, Round};
pub use crate::envelope::Dropped;
use crate::envelope::{
    ClientForm, Envelope, ErrorBody, Meta, Reply, Sealed, SuggestedCall, Truncated,
};
use crate::principal::Principal;
use crate::server::{Server, UnknownTool};

#[cfg(feature = "tokens")]
pub use fusion_lock::tokens::{AnswerTokens, O200k, Tokenizer};

type ContextSetup = Arc<dyn Fn(&mut CallContext) + Send + Sync>;
type Answering<T> = Arc<dyn Fn(&Question) -> T + Send + Sync>;

/// Calls a server's tools in memory.
#[derive(Clone)]
pub struct Tester {
    server: Server,
    setup: Option<ContextSetup>,
    principal: Option<Principal>,
    script: Script,
    /// Whether the tester's client renders UI (see [`Tester::rendering_ui`]).
    ui: bool,
}

/// How the tester's client answers the questions a tool asks; `None`: it cannot be asked that.
#[derive(Clone, Default)]
struct Script {
    elicitation: Option<Answering<Elicited>>,
    sampling: Option<Answering<String>>,
    roots: Option<Arc<[String]>>,
}

impl Script {
    fn is_empty(&self) -> bool {
        self.elicitation.is_none() && self.sampling.is_none() && self.roots.is_none()
    }

    /// What a client that answers these questions declares.
    fn capabilities(&self) -> ClientCapabilities {
        let mut capabilities = ClientCapabilities::default();
        for (scripted, need) in [
            (self.elicitation.is_some(), Need::Elicitation),
            (self.sampling.is_some(), Need::Sampling),
            (self.roots.is_some(), Need::Roots),
        ] {
            if scripted {
                let declared = need.capabilities();
                capabilities.elicitation = capabilities.elicitation.or(declared.elicitation);
                capabilities.sampling = capabilities.sampling.or(declared.sampling);
                capabilities.roots = capabilities.roots.or(declared.roots);
            }
        }
        capabilities
    }

    /// The answer to `question`, as the client sends it (a result of its request's method).
    /// Only questions of a declared capability reach here.
    fn answer(&self, question: &Question) -> Value {
        match question {
            Question::Elicitation { .. } => {
                let answer = self.elicitation.as_ref().map(|answer| answer(question));
                match answer {
                    Some(Elicited::Accept(content)) => {
                        json!({"action": "accept", "content": content})
                    }
                    Some(Elicited::Decline) => json!({"action": "decline"}),
                    Some(Elicited::Cancel) | None => json!({"action": "cancel"}),
                }
            }
            Question::Sampling { .. } => {
                let text = self
                    .sampling
                    .as_ref()
                    .map(|answer| answer(question))
                    .unwrap_or_default();
                json!({
                    "model": SAMPLING_MODEL,
                    "stopReason": "endTurn",
                    "role": "assistant",
                    "content": {"type": "text", "text": text},
                })
            }
            Question::Roots => {
                let roots: Vec<Value> = self
                    .roots
                    .iter()
                    .flat_map(|roots| roots.iter())
                    .map(|uri| json!({"uri": uri}))
                    .collect();
                json!({ "roots": roots })
            }
        }
    }
}

/// The model a scripted sampling answer says wrote it.
pub const SAMPLING_MODEL: &str = "fusion-tester";

/// How many times a call may ask before the tester gives up on it (a tool that asks again
/// whatever it is answered).
const MAX_ROUNDS: usize = 16;

/// The user's scripted answer to an elicitation ([`Tester::answer_elicitation`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Elicited {
    /// The user accepted and filled the form with this object.
    Accept(Value),
    /// The user said no.
    Decline,
    /// The user dismissed the question.
    Cancel,
}

impl Elicited {
    /// The user accepted with `content`, the form's fields (a struct or a `json!` object).
    ///
    /// # Panics
    /// When `content` is not a JSON object: a mistake in the test itself.
    pub fn accept(content: impl serde::Serialize) -> Self {
        match serde_json::to_value(content) {
            Ok(content @ Value::Object(_)) => Elicited::Accept(content),
            Ok(other) => panic!("an elicitation's answer is a JSON object, not {other}"),
            Err(error) => panic!("an elicitation's answer does not serialize: {error}"),
        }
    }

    /// The user accepted and confirmed: the answer [`Elicit::confirm`](crate::elicit::Elicit::confirm)
    /// reads as `true`.
    pub fn confirm() -> Self {
        Elicited::Accept(json!({"confirm": true}))
    }
}

/// A question a tool asked during a call ([`TestResult::questions`]), as the client received
/// it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Question {
    /// Elicitation: what the user is asked, and the form's schema.
    Elicitation {
        /// The message shown to the user.
        message: String,
        /// The requested schema (`null` for a URL elicitation).
        schema: Value,
    },
    /// Sampling: what the client's model is asked.
    Sampling {
        /// The text of each message, in order.
        messages: Vec<String>,
        /// The system prompt, if any.
        system_prompt: Option<String>,
        /// The token budget.
        max_tokens: u32,
    },
    /// The client's roots.
    Roots,
}

impl Question {
    fn of(request: &InputRequest) -> Self {
        match request {
            InputRequest::Elicitation(request) => match &request.params {
                ElicitRequestParams::FormElicitationParams {
                    message,
                    requested_schema,
                    ..
                } => Question::Elicitation {
                    message: message.clone(),
                    schema: serde_json::to_value(requested_schema).unwrap_or(Value::Null),
                },
                ElicitRequestParams::UrlElicitationParams { message, .. } => {
                    Question::Elicitation {
                        message: message.clone(),
                        schema: Value::Null,
                    }
                }
                _ => Question::Elicitation {
                    message: String::new(),
                    schema: Value::Null,
                },
            },
            InputRequest::CreateMessage(request) => {
                let params = serde_json::to_value(&request.params).unwrap_or(Value::Null);
                Question::Sampling {
                    messages: params["messages"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|message| {
                            message["content"]["text"]
                                .as_str()
                                .unwrap_or_default()
                                .to_owned()
                        })
                        .collect(),
                    system_prompt: params["systemPrompt"].as_str().map(str::to_owned),
                    max_tokens: params["maxTokens"]
                        .as_u64()
                        .and_then(|tokens| u32::try_from(tokens).ok())
                        .unwrap_or_default(),
                }
            }
            // Fusion asks these three only: the last is `roots/list`.
            _ => Question::Roots,
        }
    }
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
            principal: None,
            script: Script::default(),
            ui: false,
        }
    }

    /// The tester's client renders UI: it declares the
    /// [`UI_EXTENSION`](crate::envelope::UI_EXTENSION), and answers carry their presenters' UI
    /// blocks (left out for a client that does not, as by default).
    #[must_use]
    pub fn rendering_ui(mut self) -> Self {
        self.ui = true;
        self
    }

    /// Every call acts for `principal`, with its tenant, scopes and roles
    /// (`Principal::new("ann").with_tenant("t_1")`), as an authenticated transport would set
    /// it. A [`with_context`](Self::with_context) setup runs after, and may replace it.
    #[must_use]
    pub fn with_principal(mut self, principal: Principal) -> Self {
        self.principal = Some(principal);
        self
    }

    /// The user answers every elicitation of a call with `answer` (the tester's client then
    /// declares the `elicitation` capability). A tool that asks runs again with its answer, as
    /// on protocol 2026-07-28; [`TestResult::questions`] shows what it asked.
    ///
    /// Without an answer scripted, a tool that asks gets `ELICITATION_UNSUPPORTED`.
    #[must_use]
    pub fn answer_elicitation(self, answer: Elicited) -> Self {
        self.answer_elicitation_with(move |_| answer.clone())
    }

    /// The user answers each elicitation with what `answer` returns for it (by its message
    /// or schema, say).
    #[must_use]
    pub fn answer_elicitation_with(
        mut self,
        answer: impl Fn(&Question) -> Elicited + Send + Sync + 'static,
    ) -> Self {
        self.script.elicitation = Some(Arc::new(answer));
        self
    }

    /// The client's model answers every sampling request with `text` (the client then
    /// declares the `sampling` capability). Without it, a tool that samples gets
    /// `SAMPLING_UNSUPPORTED`.
    #[must_use]
    pub fn answer_sampling(self, text: impl Into<String>) -> Self {
        let text = text.into();
        self.answer_sampling_with(move |_| text.clone())
    }

    /// The client's model answers each sampling request with what `answer` returns for it.
    #[must_use]
    pub fn answer_sampling_with(
        mut self,
        answer: impl Fn(&Question) -> String + Send + Sync + 'static,
    ) -> Self {
        self.script.sampling = Some(Arc::new(answer));
        self
    }

    /// The client's roots are these URIs (`file:///home/ann/project`), and it declares the
    /// `roots` capability. Without them, a tool that lists roots gets `ROOTS_UNSUPPORTED`.
    #[must_use]
    pub fn answer_roots<I: IntoIterator<Item = S>, S: Into<String>>(mut self, uris: I) -> Self {
        self.script.roots = Some(uris.into_iter().map(Into::into).collect());
        self
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
        if let Some(principal) = &self.principal {
            context.extensions_mut().insert(principal.clone());
        }
        if let Some(setup) = &self.setup {
            setup(&mut context);
        }
        context
    }

    /// The context of a tool call: the tester's, and whether its client draws UI blocks.
    fn call_context(&self) -> CallContext {
        let mut context = self.context();
        context.set_renders_ui(self.ui);
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

    /// How the tester's client reads answers: the current protocol's, with UI blocks when it
    /// [renders UI](Self::rendering_ui).
    fn form(&self) -> ClientForm {
        ClientForm {
            ui: self.ui,
            ..ClientForm::default()
        }
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
        if self.script.is_empty() {
            let sealed = self
                .server
                .call_sealed(name, arguments, self.call_context())
                .await?;
            return Ok(TestResult::sealed(sealed, Vec::new(), self.form()));
        }
        // A client that answers: the call runs in rounds, as on 2026-07-28, each run with the
        // answers to the questions of the runs before.
        let capabilities = self.script.capabilities();
        let mut asked: BTreeMap<String, Asked> = BTreeMap::new();
        let mut questions = Vec::new();
        for _ in 0..MAX_ROUNDS {
            let round = Arc::new(Round::new(Era::Rounds(asked.clone()), Some(&capabilities)));
            let mut context = self.call_context();
            context.extensions_mut().insert(Arc::clone(&round));
            let sealed: Sealed = self
                .server
                .call_sealed(name, arguments.clone(), context)
                .await?;
            let pending = round.take_pending();
            if pending.is_empty() || sealed.outcome.label() != INPUT_REQUIRED {
                return Ok(TestResult::sealed(sealed, questions, self.form()));
            }
            for (
                key,
                Pending {
                    asked: question,
                    request,
                },
            ) in pending
            {
                let put = Question::of(&request);
                let answer = self.script.answer(&put);
                questions.push(put);
                asked.insert(
                    key,
                    Asked {
                        answer: Some(answer),
                        ..question
                    },
                );
            }
        }
        panic!("`{name}` still asked after {MAX_ROUNDS} rounds of answers: {questions:?}")
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
    /// The error as the agent was told it (text block and envelope together).
    error_body: Option<ErrorBody>,
    error: Value,
    suggestions: Vec<SuggestedCall>,
    dropped: Vec<Dropped>,
    questions: Vec<Question>,
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
    fn sealed(mut sealed: Sealed, questions: Vec<Question>, form: ClientForm) -> Self {
        let dropped = std::mem::take(&mut sealed.dropped);
        let told = match &sealed.reply {
            Reply::Failure { body, .. } => Some(ErrorBody::clone(body)),
            Reply::Success { .. } | Reply::Passed(_) => None,
        };
        let mut result = TestResult::new(crate::serve::reply::call_tool_result(sealed, form));
        if let Some(told) = told {
            result.error = to_value(&told);
            result.error_body = Some(told);
        }
        result.dropped = dropped;
        result.questions = questions;
        result
    }

    fn new(raw: CallToolResult) -> Self {
        let envelope = raw.structured_content.clone().unwrap_or(Value::Null);
        let typed: Envelope = serde_json::from_value(envelope.clone()).unwrap_or_else(|error| {
            panic!("structuredContent is not a Fusion envelope ({error}): {envelope}")
        });
        let meta = match &typed {
            Envelope::Success(success) => to_value(&success.meta),
            Envelope::Failure(failure) => to_value(&failure.meta),
        };
        let texts: Vec<&str> = raw
            .content
            .iter()
            .filter_map(|block| block.as_text().map(|text| text.text.as_str()))
            .collect();
        let suggestions = texts
            .iter()
            .find_map(|text| {
                text.strip_prefix("<action_suggestions>")?
                    .strip_suffix("\n</action_suggestions>")
            })
            .map(read_suggestions)
            .unwrap_or_default();
        // A result passed through from elsewhere: the error as its text block tells it.
        let error_body = match &typed {
            Envelope::Failure(failure) => Some(read_error(&failure.error, &texts)),
            Envelope::Success(_) => None,
        };
        let error = error_body.as_ref().map_or(Value::Null, to_value);
        TestResult {
            raw,
            envelope,
            typed,
            meta,
            error_body,
            error,
            suggestions,
            dropped: Vec::new(),
            questions: Vec::new(),
        }
    }

    /// The questions the tool asked during the call, in order, each answered as the tester
    /// scripted ([`Tester::answer_elicitation`], [`Tester::answer_sampling`],
    /// [`Tester::answer_roots`]).
    pub fn questions(&self) -> &[Question] {
        &self.questions
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

    /// The envelope's `meta`, as JSON (`{}` when the envelope has none).
    pub fn meta(&self) -> &Value {
        &self.meta
    }

    /// The error as the agent was told it, as JSON (`null` on success): the envelope's facts
    /// (`code`, `retryable`, …) with the message, recovery and tools to call of the
    /// `<tool_error>` block.
    pub fn error(&self) -> &Value {
        &self.error
    }

    /// The error as the agent was told it, on errors (see [`error`](Self::error)).
    pub fn error_body(&self) -> Option<&ErrorBody> {
        self.error_body.as_ref()
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

    /// The suggested next calls, with exposed names and arguments, as the
    /// `<action_suggestions>` block says them.
    pub fn suggestions(&self) -> &[SuggestedCall] {
        &self.suggestions
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

/// The lines of an `<action_suggestions>` block: `- tool {arguments}: reason`.
fn read_suggestions(body: &str) -> Vec<SuggestedCall> {
    body.lines()
        .filter_map(|line| {
            let line = unescape(line.strip_prefix("- ")?);
            let (tool, rest) = line.split_once(' ')?;
            let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
            let arguments = stream.next()?.ok()?;
            let reason = rest[stream.byte_offset()..].strip_prefix(": ")?;
            Some(SuggestedCall {
                tool: tool.to_owned(),
                arguments,
                reason: reason.to_owned(),
            })
        })
        .collect()
}

/// An error as its `<tool_error>` block and its envelope's facts say it.
fn read_error(facts: &crate::envelope::ErrorFacts, texts: &[&str]) -> ErrorBody {
    let block = texts
        .iter()
        .find(|text| text.starts_with("<tool_error"))
        .copied()
        .unwrap_or_default();
    let element = |name: &str| {
        let open = format!("<{name}>");
        let close = format!("</{name}>");
        let (_, rest) = block.split_once(&open)?;
        let (body, _) = rest.split_once(&close)?;
        Some(unescape(body))
    };
    ErrorBody {
        code: facts.code.clone(),
        message: element("message").unwrap_or_default(),
        retryable: facts.retryable,
        recovery: element("recovery"),
        available_actions: element("available_actions")
            .map(|actions| actions.split(", ").map(str::to_owned).collect())
            .unwrap_or_default(),
        details: facts.details.clone(),
        retry_after_ms: facts.retry_after_ms,
        error_id: facts.error_id.clone(),
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

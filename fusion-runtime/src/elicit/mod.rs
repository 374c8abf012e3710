//! Asking the client during a call (SPEC P6), in both protocol eras, through one API: the user
//! ([`Elicit`], elicitation), the client's model ([`Sample`], sampling) and the client's
//! workspace roots ([`Roots`]).
//!
//! A tool, prompt or resource handler takes one of them from its context and asks:
//!
//! - on a **2025-11-25** session the server sends the request (`elicitation/create`,
//!   `sampling/createMessage`, `roots/list`) to the client and awaits the answer;
//! - on **2026-07-28** (no session) the request answers `input_required` with the question in
//!   `inputRequests` and a `requestState` sealed by the server's
//!   [`StateKeys`](crate::request_state::StateKeys) (bound to the tool or prompt, the arguments
//!   and the caller, and expiring). The client retries with the answers and the state; the
//!   handler runs again from the start and this time gets its answers. A state that was
//!   altered, has expired, or is sent with another tool, other arguments or by another caller
//!   is refused (a JSON-RPC error whose `data.code` is a `REQUEST_STATE_*` code) and the handler
//!   does not run. Answers sent without a state are not trusted: the questions are asked again.
//!
//! Questions asked at the same time (`tokio::join!` of several asks) travel together, in one
//! `input_required` result. Each question has a key in `inputRequests`: `q1`, `q2`… in the
//! order asked, or the one given with `named`.
//!
//! Because the handler runs again on 2026-07-28, everything before a question must be free of
//! effects (read, check, then ask, then write). A client that did not declare the capability is
//! never asked: on a session the call fails with `ELICITATION_UNSUPPORTED` (or
//! `SAMPLING_UNSUPPORTED`, `ROOTS_UNSUPPORTED`); on 2026-07-28 the request fails with
//! `MissingRequiredClientCapability` (`-32021`, HTTP 400) naming the capability. `supported()`
//! tells a handler beforehand, so that it can do without.
//!
//! Sampling and roots are deprecated by the protocol (SEP-2577); they are served to clients
//! that still declare them, behind Fusion's own types.

// rmcp marks sampling and roots deprecated (SEP-2577); this module is where Fusion speaks them.
#![allow(deprecated)]

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    ClientCapabilities, CreateMessageRequest, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, ListRootsRequest, ListRootsResult,
};
use rmcp::service::{ElicitationMode, Peer, RoleServer};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::context::Waiting;
use crate::context::{CallContext, FromContext};
use crate::error::ToolError;
use crate::guarded::{GuardedNames, InputSurface, UndeclaredKeys};

mod roots;
mod sampling;
pub use roots::{Root, Roots};
pub use sampling::{Sample, Sampled, SamplingRequest};

/// The code of a call whose client cannot be asked for elicitation.
pub const ELICITATION_UNSUPPORTED: &str = "ELICITATION_UNSUPPORTED";
/// The code of a call whose client cannot be asked for sampling.
pub const SAMPLING_UNSUPPORTED: &str = "SAMPLING_UNSUPPORTED";
/// The code of a call whose client cannot be asked for its roots.
pub const ROOTS_UNSUPPORTED: &str = "ROOTS_UNSUPPORTED";
/// The code under which a handler's question travels out of it on 2026-07-28 (the transport
/// turns it into an `input_required` result; an agent never sees it).
pub const INPUT_REQUIRED: &str = "INPUT_REQUIRED";

/// How long a question to the client waits for its answer when neither the action nor the
/// server says: two minutes, long enough for a person to read and decide.
pub const DEFAULT_ASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// The call's question was not answered in time: retryable, since the person may answer the
/// next time.
pub(crate) fn no_answer(what: &str, within: std::time::Duration) -> ToolError {
    ToolError::new(
        crate::error::codes::NO_ANSWER,
        format!(
            "The client did not answer the request for {what} within its {} ms limit; nothing \
             was changed.",
            within.as_millis()
        ),
    )
    .with_recovery("Call again when the user is ready to answer.")
    .with_retryable(true)
}

/// The user's answer to [`Elicit::ask`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer<T> {
    /// The user answered.
    Accepted(T),
    /// The user said no.
    Declined,
    /// The user dismissed the question.
    Cancelled,
}

/// What a handler can ask the client for: a capability the client declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    Elicitation,
    Sampling,
    Roots,
}

impl Need {
    /// Every way to ask (the gateway passes an upstream's questions on to a caller that
    /// declared any of them).
    #[cfg(feature = "gateway")]
    pub(crate) const ALL: [Need; 3] = [Need::Elicitation, Need::Sampling, Need::Roots];

    /// Whether a client that declared `capabilities` can be asked this way.
    pub(crate) fn declared_by(self, capabilities: &ClientCapabilities) -> bool {
        match self {
            Need::Elicitation => capabilities.elicitation.is_some(),
            Need::Sampling => capabilities.sampling.is_some(),
            Need::Roots => capabilities.roots.is_some(),
        }
    }

    fn code(self) -> &'static str {
        match self {
            Need::Elicitation => ELICITATION_UNSUPPORTED,
            Need::Sampling => SAMPLING_UNSUPPORTED,
            Need::Roots => ROOTS_UNSUPPORTED,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Need::Elicitation => "elicitation",
            Need::Sampling => "sampling",
            Need::Roots => "roots",
        }
    }

    /// The request method that asks for it.
    fn method(self) -> &'static str {
        match self {
            Need::Elicitation => "elicitation/create",
            Need::Sampling => "sampling/createMessage",
            Need::Roots => "roots/list",
        }
    }

    /// The capability, as `MissingRequiredClientCapability` names it.
    pub(crate) fn capabilities(self) -> ClientCapabilities {
        let mut capabilities = ClientCapabilities::default();
        match self {
            Need::Elicitation => capabilities.elicitation = Some(Default::default()),
            Need::Sampling => capabilities.sampling = Some(Default::default()),
            Need::Roots => capabilities.roots = Some(Default::default()),
        }
        capabilities
    }

    /// Whether `answer` is a result of this kind of request.
    pub(crate) fn accepts(self, answer: &Value) -> bool {
        match self {
            Need::Elicitation => serde_json::from_value::<ElicitResult>(answer.clone()).is_ok(),
            Need::Sampling => serde_json::from_value::<CreateMessageResult>(answer.clone()).is_ok(),
            Need::Roots => serde_json::from_value::<ListRootsResult>(answer.clone()).is_ok(),
        }
    }

    pub(crate) fn of_method(method: &str) -> Option<Need> {
        [Need::Elicitation, Need::Sampling, Need::Roots]
            .into_iter()
            .find(|need| need.method() == method)
    }
}

/// What the transport knows about asking, put in the call's extensions.
pub(crate) struct Round {
    pub(crate) era: Era,
    /// The capabilities the client declared.
    elicitation: bool,
    sampling: bool,
    roots: bool,
    /// Questions asked without a name so far in this run of the handler.
    unnamed: Mutex<usize>,
    /// The questions that end this run (2026-07-28), by key.
    pending: Mutex<BTreeMap<String, Pending>>,
    /// A capability the handler needed and the client did not declare (2026-07-28).
    missing: Mutex<Option<Need>>,
    /// The shortest deadline of this run's questions, when its tool or server set one
    /// (2026-07-28: the sealed state expires with it).
    deadline: Mutex<Option<std::time::Duration>>,
}

pub(crate) enum Era {
    /// 2025-11-25: ask over the session.
    Session(Peer<RoleServer>),
    /// 2026-07-28: questions asked in earlier rounds, by key, with the answers given.
    Rounds(BTreeMap<String, Asked>),
}

/// One question asked in an earlier round and, once given, its answer.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Asked {
    /// The request method (`elicitation/create`…): what the answer must be.
    pub(crate) method: String,
    /// A digest of the request as asked: an answer counts only for the same question.
    pub(crate) question: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) answer: Option<Value>,
}

/// A question of this run, to be sent in `inputRequests`.
pub(crate) struct Pending {
    pub(crate) asked: Asked,
    pub(crate) request: InputRequest,
}

impl Round {
    /// A round of `era` for a client that declared `capabilities` (from the request's `_meta`,
    /// or the session's `initialize`).
    pub(crate) fn new(era: Era, capabilities: Option<&ClientCapabilities>) -> Round {
        let declared =
            |need: Need| capabilities.is_some_and(|capabilities| need.declared_by(capabilities));
        let elicitation = declared(Need::Elicitation)
            || matches!(&era, Era::Session(peer) if peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Form));
        Round {
            era,
            elicitation,
            sampling: declared(Need::Sampling),
            roots: declared(Need::Roots),
            unnamed: Mutex::new(0),
            pending: Mutex::new(BTreeMap::new()),
            missing: Mutex::new(None),
            deadline: Mutex::new(None),
        }
    }

    /// A session's round in which the client cannot be asked anything.
    pub(crate) fn mute(era: Era) -> Round {
        Round {
            era,
            elicitation: false,
            sampling: false,
            roots: false,
            unnamed: Mutex::new(0),
            pending: Mutex::new(BTreeMap::new()),
            missing: Mutex::new(None),
            deadline: Mutex::new(None),
        }
    }

    fn supports(&self, need: Need) -> bool {
        match need {
            Need::Elicitation => self.elicitation,
            Need::Sampling => self.sampling,
            Need::Roots => self.roots,
        }
    }

    /// The questions that end this run, with the state of every question so far.
    pub(crate) fn take_pending(&self) -> BTreeMap<String, Pending> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The capability the handler needed and the client did not declare, if any.
    pub(crate) fn take_missing(&self) -> Option<Need> {
        self.missing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// How long the sealed state of this run's questions lives, when a deadline was set.
    pub(crate) fn deadline(&self) -> Option<std::time::Duration> {
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks `request` under `key` (or the next `qN`): the answer, as the client sent it.
    async fn ask(
        &self,
        key: Option<&str>,
        request: Outgoing,
        waiting: &Waiting,
    ) -> Result<Value, ToolError> {
        let need = request.need();
        if !self.supports(need) {
            if matches!(self.era, Era::Rounds(_)) {
                self.missing
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert(need);
            }
            return Err(unsupported(
                need,
                &format!("the client did not declare the {} capability", need.name()),
            ));
        }
        match &self.era {
            Era::Session(peer) => {
                let within = waiting.ask_timeout.unwrap_or(DEFAULT_ASK_TIMEOUT);
                match waiting.lending(request.send(peer, within)).await? {
                    Ok(answer) => Ok(to_value(answer)),
                    Err(rmcp::service::ServiceError::Timeout { .. }) => {
                        Err(no_answer(need.name(), within))
                    }
                    Err(error) => Err(ToolError::new(
                        need.code(),
                        format!("The client did not answer the request: {error}."),
                    )),
                }
            }
            Era::Rounds(answers) => {
                let key = match key {
                    Some(key) => key.to_owned(),
                    None => {
                        let mut unnamed =
                            self.unnamed.lock().unwrap_or_else(PoisonError::into_inner);
                        *unnamed += 1;
                        format!("q{unnamed}")
                    }
                };
                if let Some(within) = waiting.ask_timeout {
                    let mut deadline = self.deadline.lock().unwrap_or_else(PoisonError::into_inner);
                    *deadline = Some(deadline.map_or(within, |earlier| earlier.min(within)));
                }
                let request = request.into_input_request();
                let question = digest(&request);
                if let Some(Asked {
                    question: asked,
                    answer: Some(answer),
                    ..
                }) = answers.get(&key)
                    && *asked == question
                {
                    return Ok(answer.clone());
                }
                self.pending
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .entry(key)
                    .or_insert(Pending {
                        asked: Asked {
                            method: need.method().to_owned(),
                            question,
                            answer: None,
                        },
                        request,
                    });
                Err(ToolError::new(
                    INPUT_REQUIRED,
                    "The call waits for the client's answer.",
                ))
            }
        }
    }
}

fn to_value<T: serde::Serialize>(value: T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// A digest of a request as asked (its JSON): short, and the same for the same question.
fn digest(request: &InputRequest) -> String {
    let hash = Sha256::digest(to_value(request).to_string().as_bytes());
    hash.iter()
        .take(16)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// A request to the client, before it goes out.
enum Outgoing {
    Elicit(ElicitRequestParams),
    Sample(CreateMessageRequestParams),
    Roots,
}

impl Outgoing {
    fn need(&self) -> Need {
        match self {
            Outgoing::Elicit(_) => Need::Elicitation,
            Outgoing::Sample(_) => Need::Sampling,
            Outgoing::Roots => Need::Roots,
        }
    }

    /// Sends it over the session; past `within` the client is told it is cancelled.
    async fn send(
        self,
        peer: &Peer<RoleServer>,
        within: std::time::Duration,
    ) -> Result<rmcp::model::ClientResult, rmcp::service::ServiceError> {
        use rmcp::model::ServerRequest;
        let request = match self {
            Outgoing::Elicit(params) => ServerRequest::ElicitRequest(ElicitRequest::new(params)),
            Outgoing::Sample(params) => {
                params.validate().map_err(|error| {
                    rmcp::service::ServiceError::McpError(rmcp::ErrorData::invalid_params(
                        error, None,
                    ))
                })?;
                ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params))
            }
            Outgoing::Roots => ServerRequest::ListRootsRequest(ListRootsRequest::default()),
        };
        peer.send_request_with_option(
            request,
            rmcp::service::PeerRequestOptions::with_timeout(within),
        )
        .await?
        .await_response()
        .await
    }

    fn into_input_request(self) -> InputRequest {
        match self {
            Outgoing::Elicit(params) => InputRequest::Elicitation(ElicitRequest::new(params)),
            Outgoing::Sample(params) => {
                InputRequest::CreateMessage(CreateMessageRequest::new(params))
            }
            Outgoing::Roots => InputRequest::ListRoots(ListRootsRequest::default()),
        }
    }
}

/// Asks through `round` (none: the call did not come through an MCP transport).
async fn ask_through(
    round: Option<&Arc<Round>>,
    key: Option<&str>,
    request: Outgoing,
    waiting: &Waiting,
) -> Result<Value, ToolError> {
    match round {
        Some(round) => round.ask(key, request, waiting).await,
        None => Err(unsupported(
            request.need(),
            "this call did not come through an MCP transport",
        )),
    }
}

/// A typed answer out of what the client sent (checked when the retry came in, so a failure
/// here is a bug of the client's answer that passed that check).
fn answer_of<T: DeserializeOwned>(need: Need, answer: Value) -> Result<T, ToolError> {
    serde_json::from_value(answer).map_err(|error| {
        ToolError::new(
            crate::error::codes::VALIDATION_ERROR,
            format!(
                "The client's answer is not a {} result: {error}.",
                need.method()
            ),
        )
    })
}

/// The error for a caller that did not declare a capability an upstream server refused the
/// call without (`-32021` naming it in `requiredCapabilities`): the same classified error a
/// built-in tool gives, so the agent reads one code whoever asked. `None` when the refusal names
/// no capability Fusion knows.
#[cfg(feature = "gateway")]
pub(crate) fn unsupported_by_caller(required: Option<&Value>) -> Option<ToolError> {
    let named = required?.get("requiredCapabilities")?.as_object()?;
    let need = Need::ALL
        .into_iter()
        .find(|need| named.contains_key(need.name()))?;
    Some(unsupported(
        need,
        &format!("the client did not declare the {} capability", need.name()),
    ))
}

fn unsupported(need: Need, why: &str) -> ToolError {
    let (what, instead) = match need {
        Need::Elicitation => ("an answer from the user", "ask the user yourself"),
        Need::Sampling => ("text from the client's model", "write it yourself"),
        Need::Roots => ("the client's roots", "pass the paths as arguments"),
    };
    ToolError::new(need.code(), format!("This call needs {what}, and {why}.")).with_recovery(
        format!(
            "Use a client that declares the `{}` capability, or {instead} and use a tool that does \
         not need it.",
            need.name()
        ),
    )
}

fn round_of(context: &CallContext) -> Option<Arc<Round>> {
    context.extensions().get::<Arc<Round>>().cloned()
}

/// Whether a call of `context` may wait on its client: it asks over a session (2025-11-25)
/// whose client declared something it can be asked. Only such a call lends its guards
/// (see [`waiting`](crate::waiting)); in rounds (2026-07-28) a question ends the run instead.
pub(crate) fn may_wait(context: &CallContext) -> bool {
    context
        .extensions()
        .get::<Arc<Round>>()
        .is_some_and(|round| {
            matches!(round.era, Era::Session(_))
                && (round.elicitation || round.sampling || round.roots)
        })
}

// ---------------------------------------------------------------------------------------------
// Elicitation

/// Asks the user during a call (see the [module docs](self)).
#[derive(Clone)]
pub struct Elicit {
    round: Option<Arc<Round>>,
    key: Option<String>,
    /// The guarded fields of the server's models: never asked for.
    guarded: Option<Arc<GuardedNames>>,
    waiting: Waiting,
}

impl std::fmt::Debug for Elicit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elicit")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl FromContext for Elicit {
    fn from_context(context: &CallContext) -> Result<Self, ToolError> {
        Ok(Elicit {
            round: round_of(context),
            key: None,
            guarded: context.state.get::<GuardedNames>(),
            waiting: context.request.waiting.clone(),
        })
    }
}

impl Elicit {
    /// Whether the client can be asked (it declared the `elicitation` capability).
    pub fn supported(&self) -> bool {
        self.round
            .as_ref()
            .is_some_and(|round| round.supports(Need::Elicitation))
    }

    /// The same, asking its next question under `key` in `inputRequests` (2026-07-28) instead
    /// of `qN`.
    #[must_use]
    pub fn named(&self, key: impl Into<String>) -> Elicit {
        Elicit {
            round: self.round.clone(),
            key: Some(key.into()),
            guarded: self.guarded.clone(),
            waiting: self.waiting.clone(),
        }
    }

    /// Asks the user to confirm: `true` only when they accept and confirm; `false` when they
    /// decline, cancel or answer no.
    ///
    /// The future owns what it needs (as do those of the other questions), so that questions
    /// asked together can be joined: `tokio::join!(ask.named("a").confirm(..), …)`.
    pub fn confirm(
        &self,
        message: impl Into<String>,
    ) -> impl Future<Output = Result<bool, ToolError>> + Send + 'static {
        let (this, message) = (self.clone(), message.into());
        async move {
            let schema = ElicitationSchema::builder()
                .required_bool("confirm")
                .build()
                .map_err(ToolError::internal_message)?;
            let answer = this.raw(message, schema).await?;
            Ok(answer.action == ElicitationAction::Accept
                && answer
                    .content
                    .as_ref()
                    .and_then(|content| content.get("confirm"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false))
        }
    }

    /// Asks the user for a value of `T`: a struct of the fields elicitation allows (strings,
    /// numbers, booleans, enums of strings, `Vec`s of such enums), each described by its doc
    /// comment. An `Option` field is not required; `#[serde(default = ..)]` sends a default; an
    /// enum whose variants have `#[schemars(title = ..)]` is a titled choice. An answer that
    /// does not fit `T` is a `VALIDATION_ERROR`.
    ///
    /// The answer comes from the client's user, not from the server's credentials: a field of
    /// `T` named like a guarded field of a model the server knows (any spelling) is refused
    /// before anything is sent, with an `INTERNAL_ERROR` whose logged cause names it. A field
    /// that is not that guarded field says so with
    /// `#[schemars(extend("x-fusion-not-guarded" = "why"))]`.
    pub fn ask<T: JsonSchema + DeserializeOwned + Send + 'static>(
        &self,
        message: impl Into<String>,
    ) -> impl Future<Output = Result<Answer<T>, ToolError>> + Send + 'static {
        let (this, message) = (self.clone(), message.into());
        async move { this.ask_now(message).await }
    }

    async fn ask_now<T: JsonSchema + DeserializeOwned>(
        &self,
        message: String,
    ) -> Result<Answer<T>, ToolError> {
        let (schema, undeclared) = form_schema::<T>(self.guarded.as_ref())?;
        let answer = self.raw(message, schema).await?;
        Ok(match answer.action {
            ElicitationAction::Accept => {
                let content = answer.content.unwrap_or_else(|| json!({}));
                // An answer key that names a guarded field sets nothing, even where serde would
                // read it (an alias).
                if let Some(path) = undeclared.and_then(|keys| keys.find(&content)) {
                    return Err(ToolError::new(
                        crate::error::codes::VALIDATION_ERROR,
                        format!(
                            "The user's answer does not fit what was asked: unknown field `{path}`."
                        ),
                    ));
                }
                match serde_json::from_value(content) {
                    Ok(value) => Answer::Accepted(value),
                    Err(error) => {
                        return Err(ToolError::new(
                            crate::error::codes::VALIDATION_ERROR,
                            format!("The user's answer does not fit what was asked: {error}."),
                        ));
                    }
                }
            }
            ElicitationAction::Decline => Answer::Declined,
            _ => Answer::Cancelled,
        })
    }

    async fn raw(
        &self,
        message: String,
        schema: ElicitationSchema,
    ) -> Result<ElicitResult, ToolError> {
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        };
        let answer = ask_through(
            self.round.as_ref(),
            self.key.as_deref(),
            Outgoing::Elicit(params),
            &self.waiting,
        )
        .await?;
        answer_of(Need::Elicitation, answer)
    }
}

/// The form of `T` as elicitation takes it: a flat object of primitive fields, each inline (a
/// type in `definitions` is copied where it is used), and an optional field is one that is not
/// required (elicitation has no `null`: an `Option` adds none).
fn form_schema<T: JsonSchema>(
    guarded: Option<&Arc<GuardedNames>>,
) -> Result<(ElicitationSchema, Option<UndeclaredKeys>), ToolError> {
    let schema = schemars::generate::SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<T>();
    let Ok(Value::Object(mut object)) = serde_json::to_value(schema) else {
        return Err(ToolError::internal_message(
            "elicitation schema is not an object",
        ));
    };
    // Refused before the question leaves: the user's answer would set a guarded field.
    let scan = crate::guarded::scan(
        &mut object,
        guarded.map_or(&GuardedNames::default(), |names| names),
        InputSurface::Elicitation,
        std::any::type_name::<T>(),
        &|_| false,
    );
    let mut problems = Vec::new();
    scan.report(&mut problems);
    if !problems.is_empty() {
        return Err(ToolError::internal_message(format!(
            "{} cannot be asked for: {}",
            std::any::type_name::<T>(),
            problems.join("; ")
        )));
    }
    let undeclared =
        guarded.and_then(|names| UndeclaredKeys::new(&Value::Object(object.clone()), names));
    let definitions = object.remove("definitions").unwrap_or(Value::Null);
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        for property in properties.values_mut() {
            *property = form_field(property.take(), &definitions);
        }
    }
    let schema = ElicitationSchema::from_json_schema(object).map_err(|error| {
        ToolError::internal_message(format!(
            "{} cannot be asked for: {error}",
            std::any::type_name::<T>()
        ))
    })?;
    Ok((schema, undeclared))
}

/// One field of a form: `$ref`s resolved, `null` taken out.
fn form_field(schema: Value, definitions: &Value) -> Value {
    let Value::Object(mut object) = schema else {
        return schema;
    };
    // `allOf [X]` (draft 7's way of annotating a reference): X, with the annotations.
    if let Some(Value::Array(all_of)) = object.get("allOf")
        && let [Value::Object(inner)] = all_of.as_slice()
    {
        let mut inline = inner.clone();
        object.remove("allOf");
        inline.extend(object);
        return form_field(Value::Object(inline), definitions);
    }
    // A referenced type, in place; the annotations written at the use win.
    if let Some(Value::String(reference)) = object.get("$ref")
        && let Some(Value::Object(definition)) = reference
            .strip_prefix("#/definitions/")
            .and_then(|name| definitions.get(name))
    {
        let mut inline = definition.clone();
        object.remove("$ref");
        inline.extend(object);
        return form_field(Value::Object(inline), definitions);
    }
    // `anyOf [X, null]` (an optional enum or object): X.
    let is_null = |schema: &Value| {
        schema.get("type") == Some(&Value::from("null"))
            || schema.get("const") == Some(&Value::Null)
    };
    if let Some(Value::Array(any_of)) = object.get("anyOf")
        && any_of.len() == 2
        && any_of.iter().any(is_null)
        && let Some(Value::Object(inner)) = any_of.iter().find(|schema| !is_null(schema)).cloned()
    {
        object.remove("anyOf");
        let mut inline = inner;
        inline.extend(object);
        return form_field(Value::Object(inline), definitions);
    }
    if let Some(Value::Array(types)) = object.get_mut("type") {
        types.retain(|kind| kind != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            object.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = object.get_mut("enum") {
        values.retain(|value| !value.is_null());
    }
    // Titled options (`oneOf` of `const`/`title`, as schemars writes an enum whose variants
    // have titles) are strings.
    if !object.contains_key("type")
        && let Some(Value::Array(options)) = object.get("oneOf")
        && !options.is_empty()
        && options
            .iter()
            .all(|option| option.get("const").is_some_and(Value::is_string))
    {
        object.insert("type".into(), "string".into());
    }
    if let Some(items) = object.remove("items") {
        object.insert("items".into(), form_field(items, definitions));
    }
    Value::Object(object)
}

// ---------------------------------------------------------------------------------------------
// The sealed state of a round

/// The sealed state of a round: every question asked and the answers given so far.
pub(crate) fn state_data(answers: &BTreeMap<String, Asked>) -> Value {
    json!({ "asked": answers })
}

/// Reads back [`state_data`].
pub(crate) fn from_state_data(data: Value) -> Option<BTreeMap<String, Asked>> {
    serde_json::from_value(data.get("asked")?.clone()).ok()
}

//! Elicitation (SPEC P6): a tool asks the user a question in the middle of a call, in both
//! protocol eras, through one API.
//!
//! A handler takes [`Elicit`] from its context and calls [`Elicit::confirm`] or
//! [`Elicit::ask`]:
//!
//! - on a **2025-11-25** session the server sends `elicitation/create` to the client and awaits
//!   the answer;
//! - on **2026-07-28** (no session) the call answers `input_required` with the question in
//!   `inputRequests` and a `requestState` sealed by the server's
//!   [`StateKeys`](crate::request_state::StateKeys) (bound to the tool, the arguments and the
//!   caller, and expiring). The client retries with the answers and the state; the handler runs
//!   again from the start and this time gets its answer. A state that was altered, has expired,
//!   or is sent with another tool, other arguments or by another caller is refused with its
//!   own code (`REQUEST_STATE_*`) and the handler does not run.
//!
//! Because the handler runs again on 2026-07-28, everything before the question must be free of
//! effects (read, check, then ask, then write). A client that did not declare the
//! `elicitation` capability is never asked: the call fails with `ELICITATION_UNSUPPORTED`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, Peer, RoleServer};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::context::{CallContext, FromContext};
use crate::error::ToolError;

/// The code of a call whose client cannot be asked.
pub const ELICITATION_UNSUPPORTED: &str = "ELICITATION_UNSUPPORTED";
/// The code under which a handler's question travels out of it on 2026-07-28 (the transport
/// turns it into an `input_required` result; an agent never sees it).
pub const INPUT_REQUIRED: &str = "INPUT_REQUIRED";

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

/// Asks the user during a call (see the [module docs](self)).
#[derive(Clone)]
pub struct Elicit {
    round: Option<Arc<Round>>,
}

impl std::fmt::Debug for Elicit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elicit").finish_non_exhaustive()
    }
}

/// What the transport knows about asking, put in the call's extensions.
pub(crate) struct Round {
    pub(crate) era: Era,
    /// The client declared the `elicitation` capability (form mode).
    pub(crate) supported: bool,
    /// Questions asked so far in this run of the handler.
    asked: Mutex<usize>,
    /// The question that ends this run (2026-07-28).
    pub(crate) pending: Mutex<Option<(String, ElicitRequestParams)>>,
}

pub(crate) enum Era {
    /// 2025-11-25: ask over the session.
    Session(Peer<RoleServer>),
    /// 2026-07-28: answers so far, by question key, with the message they answer.
    Rounds(BTreeMap<String, Asked>),
}

/// One question and, once given, its answer.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Asked {
    pub(crate) message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) answer: Option<Value>,
}

impl Round {
    pub(crate) fn new(era: Era, supported: bool) -> Round {
        Round {
            era,
            supported,
            asked: Mutex::new(0),
            pending: Mutex::new(None),
        }
    }

    pub(crate) fn take_pending(&self) -> Option<(String, ElicitRequestParams)> {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// Whether a session peer declared form elicitation.
pub(crate) fn peer_supports(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
}

impl FromContext for Elicit {
    fn from_context(context: &CallContext) -> Result<Self, ToolError> {
        Ok(Elicit {
            round: context.extensions().get::<Arc<Round>>().cloned(),
        })
    }
}

impl Elicit {
    /// Asks the user to confirm: `true` only when they accept and confirm; `false` when they
    /// decline, cancel or answer no.
    pub async fn confirm(&self, message: impl Into<String>) -> Result<bool, ToolError> {
        let schema = ElicitationSchema::builder()
            .required_bool("confirm")
            .build()
            .map_err(ToolError::internal_message)?;
        let answer = self.raw(message.into(), schema).await?;
        Ok(answer.action == ElicitationAction::Accept
            && answer
                .content
                .as_ref()
                .and_then(|content| content.get("confirm"))
                .and_then(Value::as_bool)
                .unwrap_or(false))
    }

    /// Asks the user for a value of `T` (an object of primitive fields, as elicitation
    /// allows). An answer that does not fit `T` is a `VALIDATION_ERROR`.
    pub async fn ask<T: JsonSchema + DeserializeOwned>(
        &self,
        message: impl Into<String>,
    ) -> Result<Answer<T>, ToolError> {
        let mut settings = schemars::generate::SchemaSettings::draft07();
        settings.transforms = vec![Box::new(schemars::transform::AddNullable::default())];
        let schema = settings.into_generator().into_root_schema_for::<T>();
        let Ok(Value::Object(object)) = serde_json::to_value(schema) else {
            return Err(ToolError::internal_message(
                "elicitation schema is not an object",
            ));
        };
        let schema = ElicitationSchema::from_json_schema(object).map_err(|error| {
            ToolError::internal_message(format!(
                "{} cannot be asked for: {error}",
                std::any::type_name::<T>()
            ))
        })?;
        let answer = self.raw(message.into(), schema).await?;
        Ok(match answer.action {
            ElicitationAction::Accept => {
                let content = answer.content.unwrap_or_else(|| json!({}));
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

    async fn raw(&self, message: String, schema: ElicitationSchema) -> Result<Answered, ToolError> {
        let Some(round) = &self.round else {
            return Err(unsupported(
                "this call did not come through an MCP transport",
            ));
        };
        if !round.supported {
            return Err(unsupported(
                "the client did not declare the elicitation capability",
            ));
        }
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message.clone(),
            requested_schema: schema,
        };
        match &round.era {
            Era::Session(peer) => {
                let result: ElicitResult =
                    peer.create_elicitation(params).await.map_err(|error| {
                        ToolError::new(
                            ELICITATION_UNSUPPORTED,
                            format!("The client did not answer the question: {error}."),
                        )
                    })?;
                Ok(Answered {
                    action: result.action,
                    content: result.content,
                })
            }
            Era::Rounds(answers) => {
                let key = {
                    let mut asked = round.asked.lock().unwrap_or_else(PoisonError::into_inner);
                    *asked += 1;
                    format!("q{asked}")
                };
                if let Some(Asked {
                    message: asked,
                    answer: Some(answer),
                }) = answers.get(&key)
                    && *asked == message
                {
                    let result: ElicitResult =
                        serde_json::from_value(answer.clone()).map_err(|error| {
                            ToolError::new(
                                crate::error::codes::VALIDATION_ERROR,
                                format!(
                                    "inputResponses.{key} is not an elicitation result: {error}."
                                ),
                            )
                        })?;
                    return Ok(Answered {
                        action: result.action,
                        content: result.content,
                    });
                }
                let mut pending = round.pending.lock().unwrap_or_else(PoisonError::into_inner);
                pending.get_or_insert((key, params));
                Err(ToolError::new(
                    INPUT_REQUIRED,
                    "The call waits for the user's answer.",
                ))
            }
        }
    }
}

struct Answered {
    action: ElicitationAction,
    content: Option<Value>,
}

fn unsupported(why: &str) -> ToolError {
    ToolError::new(
        ELICITATION_UNSUPPORTED,
        format!("This call needs an answer from the user, and {why}."),
    )
    .with_recovery(
        "Use a client that supports elicitation (declare the `elicitation` capability), or ask \
         the user yourself and use a tool that does not need to ask.",
    )
}

/// The sealed state of a round: every question asked and the answers given so far.
pub(crate) fn state_data(answers: &BTreeMap<String, Asked>) -> Value {
    json!({ "asked": answers })
}

/// Reads back [`state_data`].
pub(crate) fn from_state_data(data: Value) -> Option<BTreeMap<String, Asked>> {
    serde_json::from_value(data.get("asked")?.clone()).ok()
}

//! The question rounds (elicitation, SPEC E3): a handler asks its client over the session
//! (2025-11-25), or (2026-07-28) answers `input_required` with the questions and a sealed state
//! the client sends back with its answers.

use std::sync::Arc;

use rmcp::model::InputRequiredResult;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;

use super::{McpHandler, unknown_tool};
use crate::error::ToolError;

/// What a request tells about asking its client: the protocol era and the capabilities the
/// client declared.
pub(super) struct Asking {
    /// 2026-07-28: ask by answering `input_required`; otherwise over the session.
    pub(super) rounds: bool,
    pub(super) peer: rmcp::Peer<RoleServer>,
    pub(super) capabilities: Option<rmcp::model::ClientCapabilities>,
    /// A session's call answered beside its worker (`session_calls.rs`): nothing it sends
    /// would ride the call's own stream, so nothing in it may ask the client.
    pub(super) mute: bool,
}

impl Asking {
    pub(super) fn of(context: &RequestContext<RoleServer>) -> Asking {
        Asking {
            rounds: context
                .protocol_version()
                .is_some_and(|version| !version.has_initialize()),
            peer: context.peer.clone(),
            capabilities: context.client_capabilities(),
            mute: cfg!(feature = "http")
                && context.extensions.get::<super::BesideWorker>().is_some(),
        }
    }
}

/// What a sealed request state is bound to (target, arguments, principal). Only 2026-07-28
/// rounds open or seal a state, and only when one comes in or goes out, so the arguments'
/// digest is taken then: it was a sha256 of every call's arguments, about 7k instructions.
pub(super) struct LazyBinding<'a> {
    target: &'a str,
    /// The arguments and the principal's subject, kept only when the call asks in rounds.
    kept: Option<(Value, Option<String>)>,
}

impl<'a> LazyBinding<'a> {
    pub(super) fn new(
        asking: &Asking,
        target: &'a str,
        arguments: impl FnOnce() -> Value,
        call: &crate::context::CallContext,
    ) -> LazyBinding<'a> {
        let kept = asking.rounds.then(|| {
            let subject = call.principal().map(|principal| principal.subject.clone());
            (arguments(), subject)
        });
        LazyBinding { target, kept }
    }

    fn get(&self) -> crate::request_state::Binding {
        // `open_round` and `close_round` return before this unless the call asks in rounds.
        let (arguments, subject) = self.kept.as_ref().expect("a round's binding is kept");
        crate::request_state::Binding::new(self.target, arguments, subject.as_deref())
    }
}

impl McpHandler {
    /// The round a handler asks in: over the session, or (2026-07-28) with the questions asked
    /// and answered in earlier rounds: none on a first call; on a retry, those of its verified
    /// state with the new answers added. Answers without a state are not trusted (the
    /// questions are asked again) and answers to no open question are ignored; a state that
    /// does not verify, or an answer that is not a result of its question's kind, is refused.
    pub(super) fn open_round(
        &self,
        asking: Asking,
        binding: &LazyBinding<'_>,
        state: Option<String>,
        responses: Option<rmcp::model::InputResponses>,
    ) -> Result<Arc<crate::elicit::Round>, ToolError> {
        use crate::elicit::{Era, Round};
        let capabilities = asking.capabilities.as_ref();
        if !asking.rounds {
            if asking.mute {
                return Ok(Arc::new(Round::mute(Era::Session(asking.peer))));
            }
            return Ok(Arc::new(Round::new(
                Era::Session(asking.peer),
                capabilities,
            )));
        }
        let Some(state) = state else {
            return Ok(Arc::new(Round::new(
                Era::Rounds(Default::default()),
                capabilities,
            )));
        };
        let data = self
            .shared
            .server
            .open_request_state(&state, &binding.get())?;
        let mut asked = crate::elicit::from_state_data(data)
            .ok_or_else(|| ToolError::from(crate::request_state::StateError::Malformed))?;
        answer(&mut asked, responses.unwrap_or_default())?;
        Ok(Arc::new(Round::new(Era::Rounds(asked), capabilities)))
    }

    /// After the handler: the `input_required` result asking this run's questions (with the
    /// sealed state of every question so far), or `-32021` when the handler failed for want of
    /// a capability the client did not declare (2026-07-28); `None` when the result stands.
    pub(super) fn close_round(
        &self,
        round: &crate::elicit::Round,
        binding: &LazyBinding<'_>,
        failed: bool,
    ) -> Result<Option<InputRequiredResult>, ErrorData> {
        let crate::elicit::Era::Rounds(asked) = &round.era else {
            return Ok(None);
        };
        if let Some(need) = round.take_missing()
            && failed
        {
            return Err(ErrorData::missing_required_client_capability(
                need.capabilities(),
            ));
        }
        let pending = round.take_pending();
        if pending.is_empty() {
            return Ok(None);
        }
        let mut asked = asked.clone();
        let mut requests = rmcp::model::InputRequests::new();
        for (key, pending) in pending {
            asked.insert(key.clone(), pending.asked);
            requests.insert(key, pending.request);
        }
        let state = self.shared.server.seal_request_state(
            &binding.get(),
            &crate::elicit::state_data(&asked),
            round.deadline(),
        );
        Ok(Some(InputRequiredResult::new(Some(requests), Some(state))))
    }

    /// A request refused before its handler ran (a request state that does not verify, an
    /// answer of the wrong kind): a JSON-RPC invalid-params error whose `data` is the error
    /// body a tool would send, recorded as the call's failure.
    pub(super) fn refuse_request(
        &self,
        name: &str,
        error: ToolError,
    ) -> Result<ErrorData, ErrorData> {
        let result = self
            .shared
            .server
            .refuse_call(name, error)
            .map_err(|unknown| unknown_tool(&unknown.0))?;
        Ok(invalid_params_with_body(crate::envelope::failure(
            result.into_sealed(),
        )))
    }
}

impl McpHandler {
    /// A prompt or read refused before its handler ran: as [`McpHandler::refuse_request`],
    /// naming the prompt or resource.
    pub(super) fn refuse_content(&self, name: &str, error: ToolError) -> ErrorData {
        let sealed = self.shared.server.seal_refusal(name, error);
        invalid_params_with_body(crate::envelope::failure(sealed))
    }
}

/// `-32602` with the error body of a sealed failure envelope as `data`.
fn invalid_params_with_body(error: Option<(String, Value)>) -> ErrorData {
    let (message, body) =
        error.unwrap_or_else(|| ("The request was refused.".to_owned(), Value::Null));
    ErrorData::invalid_params(message, Some(body))
}

/// Records `responses` as the answers of the open questions of `asked` they are keyed to
/// (answers to no open question are ignored); an answer that is not a result of its question's
/// kind is refused. Returns the keys answered.
pub(super) fn answer(
    asked: &mut std::collections::BTreeMap<String, crate::elicit::Asked>,
    responses: rmcp::model::InputResponses,
) -> Result<Vec<String>, ToolError> {
    let mut answered = Vec::new();
    for (key, answer) in responses {
        let Some(question) = asked
            .get_mut(&key)
            .filter(|question| question.answer.is_none())
        else {
            continue;
        };
        if !crate::elicit::Need::of_method(&question.method)
            .is_some_and(|need| need.accepts(&answer))
        {
            return Err(ToolError::new(
                crate::error::codes::VALIDATION_ERROR,
                format!(
                    "inputResponses.{key} is not a result of {}.",
                    question.method
                ),
            )
            .with_recovery("Answer each inputRequest with the result of its method."));
        }
        question.answer = Some(answer);
        answered.push(key);
    }
    Ok(answered)
}

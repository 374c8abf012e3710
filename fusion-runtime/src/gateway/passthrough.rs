//! The rounds of a proxied call that are the upstream's: what the caller sent for it, passed on
//! untouched, and what it answered that is not a tool result, passed back untouched.

use std::sync::PoisonError;

use rmcp::{Peer, RoleServer};

/// A proxied call of a 2026-07-28 caller, which asks for input in rounds (or of a session
/// caller, see [`Passthrough::session`]): what the caller sent
/// for the upstream (its `requestState` and `inputResponses`, its capabilities), passed on
/// untouched, and what the upstream answered that is not a tool result, passed back untouched
/// by the transport. The upstream seals and verifies its own state: the gateway's keys never
/// see it.
pub(crate) struct Passthrough {
    pub(crate) request_state: Option<String>,
    pub(crate) input_responses: Option<rmcp::model::InputResponses>,
    /// The caller's capabilities, sent to a stateless upstream instead of the gateway's own
    /// (none): what the upstream may ask the caller for.
    pub(crate) capabilities: Option<rmcp::model::ClientCapabilities>,
    /// A caller on a session (2025-11-25, stdio), asked over it: the gateway answers a
    /// stateless upstream's `input_required` itself, with what it asked the caller, and calls
    /// again under the upstream's state.
    pub(crate) session: Option<Peer<RoleServer>>,
    answer: std::sync::Mutex<Option<Answer>>,
}

/// What an upstream answered a round-asking call, other than a tool result.
pub(crate) enum Answer {
    /// `input_required`: the caller answers, then calls again with the upstream's state.
    InputRequired(rmcp::model::InputRequiredResult),
    /// A protocol error that belongs to the caller's request: a client capability it did not
    /// declare (`-32021`), or a state or answers the upstream refused.
    Error(rmcp::ErrorData),
}

impl Passthrough {
    pub(crate) fn new(
        request_state: Option<String>,
        input_responses: Option<rmcp::model::InputResponses>,
        capabilities: Option<rmcp::model::ClientCapabilities>,
    ) -> Self {
        Passthrough {
            request_state,
            input_responses,
            capabilities,
            session: None,
            answer: Default::default(),
        }
    }

    /// A caller on a session, with these capabilities: asked over it.
    pub(crate) fn over_session(
        peer: Peer<RoleServer>,
        capabilities: Option<rmcp::model::ClientCapabilities>,
    ) -> Self {
        Passthrough {
            session: Some(peer),
            ..Passthrough::new(None, None, capabilities)
        }
    }

    /// Whether the call answers an earlier `input_required` (the upstream judges the state).
    pub(crate) fn answers(&self) -> bool {
        self.request_state.is_some() || self.input_responses.is_some()
    }

    pub(crate) fn set(&self, answer: Answer) {
        *self.answer.lock().unwrap_or_else(PoisonError::into_inner) = Some(answer);
    }

    pub(crate) fn take(&self) -> Option<Answer> {
        self.answer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

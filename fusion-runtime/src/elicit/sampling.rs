//! Asking the client's model to write (sampling), one kind of question a handler asks.

use std::future::Future;
use std::sync::Arc;

use rmcp::model::{CreateMessageRequestParams, CreateMessageResult, SamplingMessage};

use super::{Need, Outgoing, Round, answer_of, ask_through, round_of};
use crate::context::Waiting;
use crate::context::{CallContext, FromContext};
use crate::error::ToolError;

/// What to ask the client's model: messages, an optional system prompt and a token budget.
#[derive(Debug, Clone)]
pub struct SamplingRequest {
    messages: Vec<SamplingMessage>,
    system_prompt: Option<String>,
    max_tokens: u32,
}

impl SamplingRequest {
    /// An empty conversation whose answer may take up to `max_tokens` tokens.
    pub fn new(max_tokens: u32) -> Self {
        SamplingRequest {
            messages: Vec::new(),
            system_prompt: None,
            max_tokens,
        }
    }

    /// Adds a user message.
    #[must_use]
    pub fn user(mut self, text: impl Into<String>) -> Self {
        self.messages.push(SamplingMessage::user_text(text));
        self
    }

    /// Adds an assistant message.
    #[must_use]
    pub fn assistant(mut self, text: impl Into<String>) -> Self {
        self.messages.push(SamplingMessage::assistant_text(text));
        self
    }

    /// Sets the system prompt.
    #[must_use]
    pub fn system(mut self, text: impl Into<String>) -> Self {
        self.system_prompt = Some(text.into());
        self
    }

    fn into_params(self) -> CreateMessageRequestParams {
        let mut params = CreateMessageRequestParams::new(self.messages, self.max_tokens);
        if let Some(system) = self.system_prompt {
            params = params.with_system_prompt(system);
        }
        params
    }
}

/// What the client's model answered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sampled {
    /// The model that wrote it.
    pub model: String,
    /// The text of its message (its text blocks, joined).
    pub text: String,
    /// Why it stopped (`endTurn`, `maxTokens`…), when said.
    pub stop_reason: Option<String>,
}

/// Asks the client's model to write (sampling, see the [module docs](crate::elicit)).
#[derive(Clone)]
pub struct Sample {
    round: Option<Arc<Round>>,
    key: Option<String>,
    waiting: Waiting,
}

impl std::fmt::Debug for Sample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sample")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl FromContext for Sample {
    fn from_context(context: &CallContext) -> Result<Self, ToolError> {
        Ok(Sample {
            round: round_of(context),
            key: None,
            waiting: context.request.waiting.clone(),
        })
    }
}

impl Sample {
    /// Whether the client can be asked (it declared the `sampling` capability).
    pub fn supported(&self) -> bool {
        self.round
            .as_ref()
            .is_some_and(|round| round.supports(Need::Sampling))
    }

    /// The same, asking its next request under `key` in `inputRequests` (2026-07-28).
    #[must_use]
    pub fn named(&self, key: impl Into<String>) -> Sample {
        Sample {
            round: self.round.clone(),
            key: Some(key.into()),
            waiting: self.waiting.clone(),
        }
    }

    /// Asks the client's model to answer `request`.
    pub fn create(
        &self,
        request: SamplingRequest,
    ) -> impl Future<Output = Result<Sampled, ToolError>> + Send + 'static {
        let this = self.clone();
        async move { this.create_now(request).await }
    }

    async fn create_now(&self, request: SamplingRequest) -> Result<Sampled, ToolError> {
        let answer = ask_through(
            self.round.as_ref(),
            self.key.as_deref(),
            Outgoing::Sample(request.into_params()),
            &self.waiting,
        )
        .await?;
        let result: CreateMessageResult = answer_of(Need::Sampling, answer)?;
        let text = result
            .message
            .content
            .iter()
            .filter_map(|block| block.as_text().map(|text| text.text.as_str()))
            .collect::<Vec<_>>()
            .join("\n");
        Ok(Sampled {
            model: result.model,
            text,
            stop_reason: result.stop_reason,
        })
    }

    /// Asks the client's model one question (a user message) and returns the text it wrote.
    pub fn text(
        &self,
        prompt: impl Into<String>,
        max_tokens: u32,
    ) -> impl Future<Output = Result<String, ToolError>> + Send + 'static {
        let answer = self.create(SamplingRequest::new(max_tokens).user(prompt));
        async move { answer.await.map(|sampled| sampled.text) }
    }
}

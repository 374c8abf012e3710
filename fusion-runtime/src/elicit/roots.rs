//! Asking the client for its roots, one kind of question a handler asks.

use std::future::Future;
use std::sync::Arc;

use rmcp::model::ListRootsResult;

use super::{Need, Outgoing, Round, answer_of, ask_through, round_of};
use crate::context::Waiting;
use crate::context::{CallContext, FromContext};
use crate::error::ToolError;

/// One root the client works in (a directory, a repository).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Root {
    /// Its URI (`file:///home/ann/project`).
    pub uri: String,
    /// A name for people, when given.
    pub name: Option<String>,
}

/// Asks the client for its roots (see the [module docs](crate::elicit)).
#[derive(Clone)]
pub struct Roots {
    round: Option<Arc<Round>>,
    key: Option<String>,
    waiting: Waiting,
}

impl std::fmt::Debug for Roots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Roots")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl FromContext for Roots {
    fn from_context(context: &CallContext) -> Result<Self, ToolError> {
        Ok(Roots {
            round: round_of(context),
            key: None,
            waiting: context.request.waiting.clone(),
        })
    }
}

impl Roots {
    /// Whether the client can be asked (it declared the `roots` capability).
    pub fn supported(&self) -> bool {
        self.round
            .as_ref()
            .is_some_and(|round| round.supports(Need::Roots))
    }

    /// The same, asking under `key` in `inputRequests` (2026-07-28).
    #[must_use]
    pub fn named(&self, key: impl Into<String>) -> Roots {
        Roots {
            round: self.round.clone(),
            key: Some(key.into()),
            waiting: self.waiting.clone(),
        }
    }

    /// The client's roots.
    pub fn list(&self) -> impl Future<Output = Result<Vec<Root>, ToolError>> + Send + 'static {
        let this = self.clone();
        async move { this.list_now().await }
    }

    async fn list_now(&self) -> Result<Vec<Root>, ToolError> {
        let answer = ask_through(
            self.round.as_ref(),
            self.key.as_deref(),
            Outgoing::Roots,
            &self.waiting,
        )
        .await?;
        let result: ListRootsResult = answer_of(Need::Roots, answer)?;
        Ok(result
            .roots
            .into_iter()
            .map(|root| Root {
                uri: root.uri,
                name: root.name,
            })
            .collect())
    }
}

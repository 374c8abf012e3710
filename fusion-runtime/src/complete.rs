//! Completions (MCP `completion/complete`): suggested values for a prompt's argument or a
//! resource template's variable, from a function of the author's.
//!
//! A completion is access-checked like what it completes: a caller who may not see a prompt
//! or resource gets no completion for it (the request is refused as if it did not exist).
//! At most 100 values are sent (the protocol's limit); `hasMore` says when there were more.
//!
//! ```
//! use fusion_runtime::complete::CompletionRequest;
//! use fusion_runtime::{CallContext, ToolError};
//!
//! async fn statuses(_: CallContext, request: CompletionRequest) -> Result<Vec<String>, ToolError> {
//!     Ok(["open", "paid", "void"]
//!         .into_iter()
//!         .filter(|status| status.starts_with(request.value()))
//!         .map(str::to_owned)
//!         .collect())
//! }
//! # let _ = fusion_runtime::PromptSpec::new("billing.summary", "Summary.").with_completion("status", statuses);
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::context::CallContext;
use crate::error::ToolError;

/// What is being completed: the argument (or template variable), what the user typed so far,
/// and the values of the other arguments already resolved.
#[derive(Debug, Clone)]
pub struct CompletionRequest {
    pub(crate) argument: String,
    pub(crate) value: String,
    pub(crate) resolved: HashMap<String, String>,
}

impl CompletionRequest {
    /// The argument or template variable completed.
    pub fn argument(&self) -> &str {
        &self.argument
    }

    /// What was typed so far.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The value already chosen for another argument, if any.
    pub fn resolved(&self, argument: &str) -> Option<&str> {
        self.resolved.get(argument).map(String::as_str)
    }
}

/// The future a completion function returns.
pub(crate) type CompletionFuture =
    Pin<Box<dyn Future<Output = Result<Vec<String>, ToolError>> + Send>>;

/// A completion function, erased.
pub(crate) type CompletionFn =
    Arc<dyn Fn(CallContext, CompletionRequest) -> CompletionFuture + Send + Sync>;

pub(crate) fn erase<F, Fut>(complete: F) -> CompletionFn
where
    F: Fn(CallContext, CompletionRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Vec<String>, ToolError>> + Send + 'static,
{
    Arc::new(move |context, request| Box::pin(complete(context, request)))
}

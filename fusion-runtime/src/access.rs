//! Access and toolsets (SPEC R5).
//!
//! Tools belong to toolsets that a server enables or disables when it is built: a disabled
//! tool does not exist for that server. An [`AccessPolicy`] is evaluated per request: it decides
//! what `tools/list` shows and what may be called; a denied call gets `FORBIDDEN` before its
//! arguments are parsed.

use crate::action::ActionInfo;
use crate::context::CallContext;

/// Decides, per request, whether the caller may see and call an action.
///
/// Any `Fn(&CallContext, ActionInfo<'_>) -> bool` is one:
///
/// ```
/// use fusion_runtime::{AccessPolicy, ActionInfo, CallContext, Verb};
///
/// // Writes need the `billing:write` scope.
/// let policy = |call: &CallContext, action: ActionInfo<'_>| {
///     action.verb() == Verb::Query
///         || call.principal().is_some_and(|principal| principal.has_scope("billing:write"))
/// };
/// fn takes(_: impl AccessPolicy) {}
/// takes(policy);
/// ```
pub trait AccessPolicy: Send + Sync + 'static {
    /// Whether the caller of `call` may see and call `action`.
    fn allows(&self, call: &CallContext, action: ActionInfo<'_>) -> bool;
}

impl<F> AccessPolicy for F
where
    F: Fn(&CallContext, ActionInfo<'_>) -> bool + Send + Sync + 'static,
{
    fn allows(&self, call: &CallContext, action: ActionInfo<'_>) -> bool {
        self(call, action)
    }
}

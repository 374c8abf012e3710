//! Access and toolsets (SPEC R5).
//!
//! Tools belong to toolsets that a server enables or disables when it is built: a disabled
//! tool does not exist for that server. An [`AccessPolicy`] is evaluated per request: it decides
//! what `tools/list` shows and what may be called; a denied call gets `FORBIDDEN` before its
//! arguments are parsed.
//!
//! Resources and prompts are checked by the same policy, through
//! [`allows_resource`](AccessPolicy::allows_resource) and
//! [`allows_prompt`](AccessPolicy::allows_prompt): a caller lists, reads and completes only
//! what these allow. Both refuse unless implemented, so that a policy written for tools never
//! opens data it was not written for; a closure policy therefore serves tools only.

use crate::action::ActionInfo;
use crate::context::CallContext;
use crate::prompt::PromptInfo;
use crate::resource::ResourceInfo;

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

    /// Whether the caller of `call` may list and read `resource` (and complete its
    /// variables). Refuses unless implemented.
    ///
    /// ```
    /// use fusion_runtime::{AccessPolicy, ActionInfo, CallContext, ResourceInfo, Verb};
    ///
    /// /// Reads for everyone with a principal; writes for `billing:write`.
    /// struct Billing;
    ///
    /// impl AccessPolicy for Billing {
    ///     fn allows(&self, call: &CallContext, action: ActionInfo<'_>) -> bool {
    ///         call.principal().is_some_and(|principal| {
    ///             action.verb() == Verb::Query || principal.has_scope("billing:write")
    ///         })
    ///     }
    ///     fn allows_resource(&self, call: &CallContext, _: ResourceInfo<'_>) -> bool {
    ///         call.principal().is_some()
    ///     }
    /// }
    /// ```
    fn allows_resource(&self, call: &CallContext, resource: ResourceInfo<'_>) -> bool {
        let _ = (call, resource);
        false
    }

    /// Whether the caller of `call` may list and get `prompt` (and complete its arguments).
    /// Refuses unless implemented.
    fn allows_prompt(&self, call: &CallContext, prompt: PromptInfo<'_>) -> bool {
        let _ = (call, prompt);
        false
    }

    /// The OAuth scopes calling `action` needs, named to a caller it refuses (step-up: the
    /// client can ask for a token with them). None by default.
    fn required_scopes(&self, action: ActionInfo<'_>) -> Vec<String> {
        let _ = action;
        Vec::new()
    }

    /// The OAuth scopes reading `resource` needs, named to a caller it refuses. None by
    /// default.
    fn required_resource_scopes(&self, resource: ResourceInfo<'_>) -> Vec<String> {
        let _ = resource;
        Vec::new()
    }

    /// The OAuth scopes getting `prompt` needs, named to a caller it refuses. None by default.
    fn required_prompt_scopes(&self, prompt: PromptInfo<'_>) -> Vec<String> {
        let _ = prompt;
        Vec::new()
    }
}

impl<F> AccessPolicy for F
where
    F: Fn(&CallContext, ActionInfo<'_>) -> bool + Send + Sync + 'static,
{
    fn allows(&self, call: &CallContext, action: ActionInfo<'_>) -> bool {
        self(call, action)
    }
}

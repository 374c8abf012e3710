//! Who a call acts for, as the runtime scopes by it (issue 24): concurrency shares, FIFO turns,
//! rate limits and resource subscriptions are per tenant by construction, not by each
//! connector's care.

use std::borrow::Cow;

use serde_json::Value;

use crate::context::CallContext;

/// The tenant a call acts for, from its verified principal.
pub(crate) fn tenant_of(context: &CallContext) -> Option<&str> {
    context
        .principal()
        .and_then(|principal| principal.tenant.as_deref())
}

/// The rate-limit bucket of the caller of `context`: its tenant and its verified subject,
/// since a subject is only unique within its tenant's identity provider (anonymous callers
/// share one bucket).
pub(crate) fn caller_key(context: &CallContext) -> Cow<'_, str> {
    let Some(principal) = context.principal() else {
        return "".into();
    };
    match &principal.tenant {
        Some(tenant) => format!("{}/{}", Value::from(tenant.as_str()), principal.subject).into(),
        None => principal.subject.as_str().into(),
    }
}

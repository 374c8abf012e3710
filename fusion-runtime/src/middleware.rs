//! Middleware (SPEC T5).
//!
//! Middleware runs before a tool's handler: it may reject the call with a [`ToolError`], or
//! derive typed values that the handler then takes as parameters (a `Tenant` from a verified
//! credential, say). Chains are composed once per action when the server is built.
//!
//! **Order.** Middleware runs after the access check and after the call's arguments were read
//! and validated (an invalid call never reaches it). Server middleware runs first, then the
//! router's, then the action's own, in the order each was added; then the guards, then the
//! handler. A middleware that rejects stops the chain: nothing after it runs.
//!
//! **Resources and prompts.** The server's middleware (not a router's) also runs before every
//! `resources/read` and `prompts/get`, after the access check and the arguments, with an
//! [`ActionInfo`] whose [`surface`](ActionInfo::surface) says which, whose verb is
//! [`Verb::Query`] and whose key is the resource's or prompt's.

use std::any::TypeId;
use std::future::Future;
use std::pin::Pin;

use crate::action::{ActionInfo, Verb};
use crate::context::CallContext;
use crate::error::ToolError;
use crate::key::ToolKey;

/// Runs `chain` in order before the call of `info`: the one middleware loop of every request
/// path (tools, resources, prompts, proxied tools). The first refusal stops the call.
pub(crate) async fn run_chain(
    chain: &[std::sync::Arc<dyn Middleware>],
    context: &mut CallContext,
    info: ActionInfo<'_>,
) -> Result<(), ToolError> {
    for middleware in chain {
        middleware.before(context, info).await?;
    }
    Ok(())
}

/// The future a middleware returns.
pub type MiddlewareFuture<'a> = Pin<Box<dyn Future<Output = Result<(), ToolError>> + Send + 'a>>;

/// Runs before a handler: rejects the call or adds typed values to its context.
///
/// ```
/// use fusion_runtime::middleware::{Middleware, MiddlewareFuture};
/// use fusion_runtime::{ActionInfo, CallContext, ToolError};
/// use std::any::TypeId;
///
/// #[derive(Clone)]
/// struct Tenant(String);
///
/// /// Derives the tenant from the verified principal.
/// struct TenantFromPrincipal;
///
/// impl Middleware for TenantFromPrincipal {
///     fn before<'a>(&'a self, call: &'a mut CallContext, _action: ActionInfo<'a>) -> MiddlewareFuture<'a> {
///         Box::pin(async move {
///             let tenant = call
///                 .principal()
///                 .and_then(|principal| principal.tenant.clone())
///                 .ok_or_else(|| ToolError::forbidden("This credential is not bound to a tenant."))?;
///             call.extensions_mut().insert(Tenant(tenant));
///             Ok(())
///         })
///     }
///
///     fn provides(&self) -> Vec<TypeId> {
///         vec![TypeId::of::<Tenant>()]
///     }
/// }
/// ```
pub trait Middleware: Send + Sync + 'static {
    /// Runs before the handler.
    fn before<'a>(
        &'a self,
        call: &'a mut CallContext,
        action: ActionInfo<'a>,
    ) -> MiddlewareFuture<'a>;

    /// The types this middleware puts in the context. A handler parameter that needs a value
    /// no middleware of its chain provides (see [`Ext`](crate::context::Ext)) makes the server
    /// refuse to build.
    fn provides(&self) -> Vec<TypeId> {
        Vec::new()
    }
}

/// What a middleware made by [`from_async`] knows of the action it runs for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionRef {
    key: ToolKey,
    verb: Verb,
}

impl ActionRef {
    /// The action's canonical key.
    pub fn key(&self) -> &ToolKey {
        &self.key
    }

    /// The action's verb.
    pub fn verb(&self) -> Verb {
        self.verb
    }
}

/// A middleware from an `async` closure that owns the call's context while it runs and hands
/// it back (a lookup in a database or a remote service, say); an error stops the call.
///
/// ```
/// use fusion_runtime::middleware::from_async;
/// use fusion_runtime::{CallContext, ToolError, Verb};
///
/// #[derive(Clone)]
/// struct Quota(u32);
///
/// let quota = from_async(|mut call: CallContext, action| async move {
///     if action.verb() != Verb::Query {
///         // e.g. `let left = quotas.remaining(call.principal()).await?;`
///         call.extensions_mut().insert(Quota(10));
///     }
///     Ok(call)
/// })
/// .providing::<Quota>();
/// # let _ = quota;
/// ```
pub fn from_async<F, Fut>(f: F) -> FromAsync<F>
where
    F: Fn(CallContext, ActionRef) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<CallContext, ToolError>> + Send + 'static,
{
    FromAsync {
        f,
        provides: Vec::new(),
    }
}

/// A middleware made by [`from_async`].
pub struct FromAsync<F> {
    f: F,
    provides: Vec<TypeId>,
}

impl<F> FromAsync<F> {
    /// Declares that this middleware puts a `T` in the context.
    #[must_use]
    pub fn providing<T: 'static>(mut self) -> Self {
        self.provides.push(TypeId::of::<T>());
        self
    }
}

impl<F> std::fmt::Debug for FromAsync<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FromAsync").finish_non_exhaustive()
    }
}

impl<F, Fut> Middleware for FromAsync<F>
where
    F: Fn(CallContext, ActionRef) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<CallContext, ToolError>> + Send + 'static,
{
    fn before<'a>(
        &'a self,
        call: &'a mut CallContext,
        action: ActionInfo<'a>,
    ) -> MiddlewareFuture<'a> {
        let action = ActionRef {
            key: action.key().clone(),
            verb: action.verb(),
        };
        let running = (self.f)(call.take(), action);
        Box::pin(async move {
            *call = running.await?;
            Ok(())
        })
    }

    fn provides(&self) -> Vec<TypeId> {
        self.provides.clone()
    }
}

/// A middleware that puts a `T` in every call's context, made by `provide` on a router or a
/// server: what handlers taking a [`Provided`](crate::context::Provided) `T` receive.
pub struct Provide<T, F> {
    f: F,
    provided: std::marker::PhantomData<fn() -> T>,
}

impl<T, F> Provide<T, F> {
    pub(crate) fn new(f: F) -> Self {
        Provide {
            f,
            provided: std::marker::PhantomData,
        }
    }
}

impl<T, F> std::fmt::Debug for Provide<T, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Provide<{}>", std::any::type_name::<T>())
    }
}

impl<T, F> Middleware for Provide<T, F>
where
    T: Send + Sync + Clone + 'static,
    F: Fn(&CallContext) -> Result<T, ToolError> + Send + Sync + 'static,
{
    fn before<'a>(
        &'a self,
        call: &'a mut CallContext,
        _action: ActionInfo<'a>,
    ) -> MiddlewareFuture<'a> {
        let outcome = (self.f)(call).map(|value| {
            call.extensions_mut().insert(value);
        });
        Box::pin(std::future::ready(outcome))
    }

    fn provides(&self) -> Vec<TypeId> {
        vec![TypeId::of::<T>()]
    }
}

/// A middleware from a synchronous function.
///
/// ```
/// use fusion_runtime::middleware::from_fn;
/// use fusion_runtime::{ToolError, Verb};
///
/// let read_only = from_fn(|_call, action| {
///     if action.verb() == Verb::Query {
///         Ok(())
///     } else {
///         Err(ToolError::forbidden("This server is read-only today."))
///     }
/// });
/// # let _ = read_only;
/// ```
pub fn from_fn<F>(f: F) -> FromFn<F>
where
    F: Fn(&mut CallContext, ActionInfo<'_>) -> Result<(), ToolError> + Send + Sync + 'static,
{
    FromFn {
        f,
        provides: Vec::new(),
    }
}

/// A middleware made by [`from_fn`].
pub struct FromFn<F> {
    f: F,
    provides: Vec<TypeId>,
}

impl<F> std::fmt::Debug for FromFn<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FromFn").finish_non_exhaustive()
    }
}

impl<F> FromFn<F> {
    /// Declares that this middleware puts a `T` in the context.
    #[must_use]
    pub fn providing<T: 'static>(mut self) -> Self {
        self.provides.push(TypeId::of::<T>());
        self
    }
}

impl<F> Middleware for FromFn<F>
where
    F: Fn(&mut CallContext, ActionInfo<'_>) -> Result<(), ToolError> + Send + Sync + 'static,
{
    fn before<'a>(
        &'a self,
        call: &'a mut CallContext,
        action: ActionInfo<'a>,
    ) -> MiddlewareFuture<'a> {
        Box::pin(std::future::ready((self.f)(call, action)))
    }

    fn provides(&self) -> Vec<TypeId> {
        self.provides.clone()
    }
}

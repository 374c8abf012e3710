//! Middleware (SPEC T5).
//!
//! Middleware runs before a tool's handler: it may reject the call with a [`ToolError`], or
//! derive typed values that the handler then takes as parameters (a `Tenant` from a verified
//! credential, say). Chains are composed once per action when the server is built.
//!
//! **Order.** Server middleware runs first, then the router's, then the action's own, in the
//! order each was added; then the guards, then the handler. A middleware that rejects stops
//! the chain: nothing after it runs.

use std::any::TypeId;
use std::future::Future;
use std::pin::Pin;

use crate::action::ActionInfo;
use crate::context::CallContext;
use crate::error::ToolError;

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

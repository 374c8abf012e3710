//! Middleware and routers (SPEC T5).
//!
//! Middleware runs before a tool's handler: it may reject the call with a [`ToolError`], or
//! derive typed values that the handler then takes as parameters (a `Tenant` from a verified
//! credential, say). Chains are composed once per action when the server is built.
//!
//! **Order.** Server middleware runs first, then the router's, then the action's own, in the
//! order each was added; then the guards, then the handler. A middleware that rejects stops
//! the chain: nothing after it runs.

use std::any::TypeId;
use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::context::CallContext;
use crate::error::ToolError;
use crate::registry::ActionInfo;
use crate::tool::{Tool, ToolSpec};

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

/// A group of tools under a namespace, sharing middleware, tags and a toolset.
///
/// A tool without a namespace gets the router's (`get` under `billing` is `billing.get`); a
/// tool already in the router's namespace keeps its key; a tool in another namespace makes the
/// server refuse to build.
pub struct Router {
    pub(crate) prefix: Cow<'static, str>,
    pub(crate) middleware: Vec<Arc<dyn Middleware>>,
    pub(crate) tags: Vec<Cow<'static, str>>,
    pub(crate) toolset: Option<Cow<'static, str>>,
    pub(crate) specs: Vec<ToolSpec>,
}

impl Router {
    /// A router for namespace `prefix`.
    pub fn new(prefix: impl Into<Cow<'static, str>>) -> Self {
        Router {
            prefix: prefix.into(),
            middleware: Vec::new(),
            tags: Vec::new(),
            toolset: None,
            specs: Vec::new(),
        }
    }

    /// Adds middleware that runs for every tool of the router, after the server's and before
    /// the tool's own.
    #[must_use]
    pub fn middleware(mut self, middleware: impl Middleware) -> Self {
        self.middleware.push(Arc::new(middleware));
        self
    }

    /// Adds tags to every tool of the router.
    #[must_use]
    pub fn tags<I, S>(mut self, tags: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<Cow<'static, str>>,
    {
        self.tags.extend(tags.into_iter().map(Into::into));
        self
    }

    /// Puts every tool of the router in a toolset (unless the tool names its own).
    #[must_use]
    pub fn toolset(mut self, toolset: impl Into<Cow<'static, str>>) -> Self {
        self.toolset = Some(toolset.into());
        self
    }

    /// Adds a tool generated by `#[tool]`.
    #[must_use]
    pub fn tool<T: Tool>(self) -> Self {
        self.tool_spec(T::spec())
    }

    /// Adds a tool declared without macros.
    #[must_use]
    pub fn tool_spec(mut self, spec: ToolSpec) -> Self {
        self.specs.push(spec);
        self
    }

    /// The router's tools, with its namespace, middleware, tags and toolset applied.
    pub(crate) fn into_specs(self) -> Vec<ToolSpec> {
        let Router {
            prefix,
            middleware,
            tags,
            toolset,
            specs,
        } = self;
        specs
            .into_iter()
            .map(|mut spec| {
                spec.key = spec.key.and_then(|key| match key.namespace() {
                    Some(namespace) if namespace == prefix => Ok(key),
                    _ => key.under(&prefix),
                });
                let mut chain = middleware.clone();
                chain.append(&mut spec.middleware);
                spec.middleware = chain;
                spec.tags.splice(0..0, tags.iter().cloned());
                if spec.toolset.is_none() {
                    spec.toolset.clone_from(&toolset);
                }
                spec
            })
            .collect()
    }
}

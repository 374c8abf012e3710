//! The per-call context and the extractors handlers take as parameters (SPEC R1, T5).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use rmcp::model::{
    Extensions, Implementation, ProgressNotificationParam, ProgressToken, ProtocolVersion,
    RequestMetaObject,
};
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use crate::error::ToolError;

/// Values shared by every call of a server: registered with
/// [`ServerBuilder::state`](crate::ServerBuilder::state) and taken by handlers as [`State<T>`].
#[derive(Default, Clone)]
pub(crate) struct StateMap {
    values: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl StateMap {
    pub(crate) fn insert<T: Send + Sync + 'static>(&mut self, value: Arc<T>) {
        self.values.insert(TypeId::of::<T>(), value);
    }

    pub(crate) fn get<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.values
            .get(&TypeId::of::<T>())
            .and_then(|value| Arc::clone(value).downcast::<T>().ok())
    }

    pub(crate) fn contains<T: 'static>(&self) -> bool {
        self.values.contains_key(&TypeId::of::<T>())
    }
}

/// What a server offers the calls of one action, read when the server is built to check that
/// each handler's parameters can be extracted (fail closed).
pub struct ServerParts {
    pub(crate) state: StateMap,
    pub(crate) provided: Vec<TypeId>,
}

impl fmt::Debug for ServerParts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerParts")
            .field("state", &self.state.values.len())
            .field("provided", &self.provided.len())
            .finish()
    }
}

impl ServerParts {
    /// Whether shared state of type `T` was registered.
    pub fn has_state<T: 'static>(&self) -> bool {
        self.state.contains::<T>()
    }

    /// Whether a middleware of the action's chain declares that it provides a `T`.
    pub fn provides<T: 'static>(&self) -> bool {
        self.provided.contains(&TypeId::of::<T>())
    }
}

/// Everything one call knows: the server's shared state, the request's `_meta`, its
/// cancellation, and typed values put there by the transport (e.g. HTTP request parts), by
/// middleware (e.g. a verified tenant) or by a test.
///
/// A new context is made for every request, so nothing leaks from one call to the next.
pub struct CallContext {
    pub(crate) state: Arc<StateMap>,
    pub(crate) extensions: Extensions,
    pub(crate) meta: RequestMetaObject,
    pub(crate) cancellation: CancellationToken,
    pub(crate) request: RequestFacts,
}

/// What the transport knows about the request; read on demand, so that a call that never asks
/// costs nothing.
#[derive(Default, Clone)]
pub(crate) struct RequestFacts {
    pub(crate) peer: Option<Peer<RoleServer>>,
    /// The JSON-RPC id of the request, for the call's span.
    pub(crate) id: Option<rmcp::model::RequestId>,
    /// The deadline of the call's questions, and the guards it lends while they wait.
    pub(crate) waiting: Waiting,
    /// Whether the client draws UI blocks, when the transport says.
    pub(crate) renders_ui: Option<bool>,
}

/// What a call knows about waiting on its client (see [`waiting`](crate::waiting)): the
/// deadline of its questions, when its tool or server set one, and the guards it lends while
/// they wait.
#[derive(Clone, Default)]
pub(crate) struct Waiting {
    pub(crate) ask_timeout: Option<std::time::Duration>,
    pub(crate) held: Option<Arc<dyn crate::guard::Lend>>,
}

impl Waiting {
    /// Runs `wait` (a question to the client) with the call's guards lent out, and takes them
    /// back once it is answered (or failed).
    pub(crate) async fn lending<T>(
        &self,
        wait: impl std::future::Future<Output = T>,
    ) -> Result<T, ToolError> {
        let Some(held) = &self.held else {
            return Ok(wait.await);
        };
        held.lend();
        let answer = wait.await;
        held.resume().await?;
        Ok(answer)
    }
}

impl CallContext {
    pub(crate) fn new(state: Arc<StateMap>) -> Self {
        CallContext {
            state,
            extensions: Extensions::new(),
            meta: RequestMetaObject::default(),
            cancellation: CancellationToken::new(),
            request: RequestFacts::default(),
        }
    }

    /// Replaces the request's `_meta` (a transport, or a test, sets it).
    pub fn set_meta(&mut self, meta: RequestMetaObject) {
        self.meta = meta;
    }

    /// Whether the client draws UI blocks (it declared
    /// [`UI_EXTENSION`](crate::envelope::UI_EXTENSION)), when the transport said: a tool's
    /// presenter builds its UI blocks only for such a client, or when nobody said (a resource
    /// read, a call made in-process).
    pub fn renders_ui(&self) -> Option<bool> {
        self.request.renders_ui
    }

    /// Says whether the client draws UI blocks (the transports set it for every tool call).
    pub fn set_renders_ui(&mut self, renders: bool) {
        self.request.renders_ui = Some(renders);
    }

    /// Whether a presenter builds its UI blocks for this call: unless the client is known not
    /// to draw them.
    pub(crate) fn wants_ui(&self) -> bool {
        self.request.renders_ui != Some(false)
    }

    /// The protocol version of this request (from its `_meta`, or negotiated by the session),
    /// when the transport knows it.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.meta.protocol_version().or_else(|| {
            let peer = self.request.peer.as_ref()?;
            peer.peer_info().map(|info| info.protocol_version.clone())
        })
    }

    /// The client's name and version (from the request's `_meta`, or the session's
    /// `initialize`), when the transport knows them.
    pub fn client_info(&self) -> Option<Implementation> {
        self.meta.client_info().or_else(|| {
            let peer = self.request.peer.as_ref()?;
            peer.peer_info().map(|info| info.client_info.clone())
        })
    }

    /// The HTTP request this call came in, when it came over HTTP.
    #[cfg(feature = "http")]
    pub fn http_request(&self) -> Option<&http::request::Parts> {
        self.extensions.get::<http::request::Parts>()
    }

    /// The progress token the client sent, if it asked for progress.
    pub fn progress_token(&self) -> Option<ProgressToken> {
        self.meta.get_progress_token()
    }

    /// The verified caller, when the transport authenticated one.
    pub fn principal(&self) -> Option<&crate::principal::Principal> {
        self.extensions.get::<crate::principal::Principal>()
    }

    /// Typed values attached to this call.
    pub fn extensions(&self) -> &Extensions {
        &self.extensions
    }

    /// Typed values attached to this call, to add to.
    pub fn extensions_mut(&mut self) -> &mut Extensions {
        &mut self.extensions
    }

    /// The request's `_meta`.
    pub fn meta(&self) -> &RequestMetaObject {
        &self.meta
    }

    /// Cancelled when the client cancels the request.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancellation
    }

    /// Shared state of type `T`, if registered.
    pub fn state<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.state.get::<T>()
    }
}

impl CallContext {
    /// Takes the context out, leaving an empty one with the same state and cancellation in
    /// its place (no allocation): for middleware that owns the context while it runs.
    pub(crate) fn take(&mut self) -> CallContext {
        let empty = CallContext {
            state: Arc::clone(&self.state),
            extensions: Extensions::new(),
            meta: RequestMetaObject::default(),
            cancellation: self.cancellation.clone(),
            request: RequestFacts::default(),
        };
        std::mem::replace(self, empty)
    }
}

impl fmt::Debug for CallContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallContext")
            .field("meta", &self.meta)
            .field("cancelled", &self.cancellation.is_cancelled())
            .finish_non_exhaustive()
    }
}

/// A handler parameter taken from the call's context rather than from the agent's arguments:
/// shared state, request metadata, values derived by middleware.
///
/// Implement it for your own types (a `Tenant` derived from a verified credential, say): an
/// agent can never set a value that comes from here.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be taken from the call context",
    label = "not extractable",
    note = "context parameters implement `fusion::FromContext`; agent arguments implement `Deserialize + JsonSchema`"
)]
pub trait FromContext: Sized + Send + 'static {
    /// Takes the value for this call.
    fn from_context(context: &CallContext) -> Result<Self, ToolError>;

    /// Checks, when the server is built, that every call will be able to provide the value.
    /// Return a sentence saying what is missing.
    fn check(server: &ServerParts) -> Result<(), String> {
        let _ = server;
        Ok(())
    }
}

/// Shared state registered with [`ServerBuilder::state`](crate::ServerBuilder::state).
///
/// A handler that takes `State<T>` makes the server refuse to build unless a `T` was
/// registered. It dereferences to `T` (so `db.0` reaches the first field of a tuple struct
/// `Db`); [`State::arc`] gives the shared pointer itself.
pub struct State<T: ?Sized>(Arc<T>);

impl<T: ?Sized> State<T> {
    /// Wraps shared state.
    pub fn new(value: Arc<T>) -> Self {
        State(value)
    }

    /// The shared pointer.
    pub fn arc(this: &Self) -> &Arc<T> {
        &this.0
    }
}

impl<T: ?Sized> Deref for State<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: ?Sized> Clone for State<T> {
    fn clone(&self) -> Self {
        State(Arc::clone(&self.0))
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for State<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("State").field(&&*self.0).finish()
    }
}

impl<T: Send + Sync + 'static> FromContext for State<T> {
    fn from_context(context: &CallContext) -> Result<Self, ToolError> {
        context.state.get::<T>().map(State).ok_or_else(|| {
            ToolError::internal_message(format!(
                "no shared state of type {}",
                std::any::type_name::<T>()
            ))
        })
    }

    fn check(server: &ServerParts) -> Result<(), String> {
        if server.has_state::<T>() {
            Ok(())
        } else {
            Err(format!(
                "it takes `State<{}>` but no such state was registered with `ServerBuilder::state`",
                std::any::type_name::<T>()
            ))
        }
    }
}

impl FromContext for CancellationToken {
    fn from_context(context: &CallContext) -> Result<Self, ToolError> {
        Ok(context.cancellation.clone())
    }
}

impl FromContext for RequestMetaObject {
    fn from_context(context: &CallContext) -> Result<Self, ToolError> {
        Ok(context.meta.clone())
    }
}

/// A value that a provider puts in the call's context ([`Router::provide`](crate::Router::provide)
/// or [`ServerBuilder::provide`](crate::ServerBuilder::provide)), taken by handlers as a
/// parameter of its own type.
///
/// Implementing it is one line; a handler that takes the type then builds only where a
/// provider of it runs before the handler.
///
/// ```
/// use fusion_runtime::{CallContext, Provided, Router, ToolError};
///
/// #[derive(Clone)]
/// pub struct Tenant(pub String);
/// impl Provided for Tenant {}
///
/// fn tenant_of(call: &CallContext) -> Result<Tenant, ToolError> {
///     call.principal()
///         .and_then(|principal| principal.tenant.clone())
///         .map(Tenant)
///         .ok_or_else(|| ToolError::unauthorized("This call acts for no tenant."))
/// }
///
/// let router = Router::new("billing").provide(tenant_of);
/// # let _ = router;
/// ```
pub trait Provided: Clone + Send + Sync + 'static {}

impl<T: Provided> FromContext for T {
    fn from_context(context: &CallContext) -> Result<Self, ToolError> {
        context.extensions.get::<T>().cloned().ok_or_else(|| {
            ToolError::internal_message(format!(
                "no {} in the call context: its provider did not run",
                std::any::type_name::<T>()
            ))
        })
    }

    fn check(server: &ServerParts) -> Result<(), String> {
        if server.provides::<T>() {
            Ok(())
        } else {
            Err(format!(
                "no provider of `{}` runs before it: add `.provide(...)` to its router or server",
                std::any::type_name::<T>()
            ))
        }
    }
}

/// A value that a middleware put in the call's context.
///
/// A handler taking `Ext<T>` makes the server refuse to build unless a middleware of its chain
/// declares that it provides a `T` ([`Middleware::provides`](crate::Middleware::provides)).
#[derive(Debug, Clone)]
pub struct Ext<T>(pub T);

impl<T> Deref for Ext<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Clone + Send + Sync + 'static> FromContext for Ext<T> {
    fn from_context(context: &CallContext) -> Result<Self, ToolError> {
        context
            .extensions
            .get::<T>()
            .cloned()
            .map(Ext)
            .ok_or_else(|| {
                ToolError::internal_message(format!(
                    "no {} in the call context: its middleware did not run",
                    std::any::type_name::<T>()
                ))
            })
    }

    fn check(server: &ServerParts) -> Result<(), String> {
        if server.provides::<T>() {
            Ok(())
        } else {
            Err(format!(
                "no middleware of its chain provides a `{}`",
                std::any::type_name::<T>()
            ))
        }
    }
}

/// The HTTP request a call came in (`None` over stdio or in the tester).
#[cfg(feature = "http")]
#[derive(Debug, Clone)]
pub struct HttpRequest(pub Option<http::request::Parts>);

#[cfg(feature = "http")]
impl FromContext for HttpRequest {
    fn from_context(context: &CallContext) -> Result<Self, ToolError> {
        Ok(HttpRequest(context.http_request().cloned()))
    }
}

/// Reports progress of a long call to the client, when the client asked for it (by sending
/// a progress token); does nothing otherwise.
///
/// ```
/// # use fusion_runtime::{Progress, ToolError};
/// async fn import(progress: Progress) -> Result<(), ToolError> {
///     for step in 0..10 {
///         progress.report(step as f64, Some(10.0), "importing").await;
///     }
///     Ok(())
/// }
/// ```
#[derive(Clone)]
pub struct Progress {
    sink: Option<(Peer<RoleServer>, ProgressToken)>,
}

impl Progress {
    /// Whether the client asked for progress.
    pub fn is_requested(&self) -> bool {
        self.sink.is_some()
    }

    /// Sends one progress notification. Failures (the client went away) are logged, not
    /// returned: progress is advice, the call goes on.
    pub async fn report(&self, progress: f64, total: Option<f64>, message: impl Into<String>) {
        let Some((peer, token)) = &self.sink else {
            return;
        };
        let mut notification =
            ProgressNotificationParam::new(token.clone(), progress).with_message(message);
        if let Some(total) = total {
            notification = notification.with_total(total);
        }
        if let Err(error) = peer.notify_progress(notification).await {
            tracing::debug!(%error, "progress notification not delivered");
        }
    }
}

impl fmt::Debug for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Progress")
            .field("requested", &self.is_requested())
            .finish()
    }
}

impl FromContext for Progress {
    fn from_context(context: &CallContext) -> Result<Self, ToolError> {
        let sink = context.request.peer.clone().zip(context.progress_token());
        Ok(Progress { sink })
    }
}

/// A handler or middleware can take the caller; a call without one is `UNAUTHORIZED`.
impl FromContext for crate::principal::Principal {
    fn from_context(context: &CallContext) -> Result<Self, ToolError> {
        context
            .principal()
            .cloned()
            .ok_or_else(|| ToolError::unauthorized("This call has no verified caller."))
    }
}

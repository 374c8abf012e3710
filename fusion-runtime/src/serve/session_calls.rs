//! A 2025-11-25 session's `tools/call` answered beside the session's worker.
//!
//! rmcp hands every request of a session to the session's worker task, which forwards it to
//! the session's service loop, which spawns a task for the handler; the answer travels back
//! the same way to the HTTP response. Both hops are places where the call changes threads,
//! and together they are most of what a session's call costs (plain rmcp included).
//!
//! Once rmcp has checked the request (the session exists and belongs to the caller, the
//! headers, the body), [`BoundedSessions`](super::sessions::BoundedSessions) gives a plain call
//! to [`SessionCalls`], which runs the handler as the response's single event, on the
//! connection's task, with the session's own peer: what the handler sends the client outside
//! the call (resource updates, list changes, task status) goes where it went before.
//!
//! It takes only a call that cannot need the call's own stream: no progress token, no log
//! level set for the session, and a tool that takes nothing that asks the client or tells it
//! something tied to the call (elicitation, sampling, roots, log messages, an upstream's
//! forwarded questions). Everything else, and a session whose peer is not known yet (its first
//! call), goes to the worker as before. A client's `notifications/cancelled` cancels a call
//! answered here, and so does the end of its session; a client that leaves cancels it, and the
//! rest of it (the seal, the audit record) still runs on a task of its own.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use futures::Stream;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, JsonRpcNotification, JsonRpcRequest,
    RequestId, RequestMetaObject, ServerJsonRpcMessage,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};
use tokio_util::sync::CancellationToken;

use super::direct::{Detaching, dispatch_call};
use super::{ConnectionState, McpHandler, locked};

/// The calls of sessions answered here, and how to cancel those still running.
pub(crate) struct SessionCalls {
    handler: McpHandler,
    /// The server's tools whose actions never talk to the client while they run.
    quiet_tools: HashSet<String>,
    running: Mutex<HashMap<(SessionId, RequestId), CancellationToken>>,
}

impl SessionCalls {
    /// The session calls of `handler`'s server, or none when its search mode answers
    /// `tools/call` itself.
    pub(crate) fn new(handler: McpHandler) -> Option<SessionCalls> {
        if handler.shared.search.is_some() {
            return None;
        }
        let inner = &handler.shared.server.inner;
        // Nothing that talks to the client, and no task: a task's later questions and status
        // belong to the worker's session.
        let quiet = |index: &usize| {
            let action = &inner.actions[*index];
            !action.talks_to_client && action.facts.task == crate::task::TaskSupport::Forbidden
        };
        let quiet_tools = inner
            .tools
            .iter()
            .filter(|tool| match &tool.dispatch {
                crate::server::Dispatch::Single(index) => quiet(index),
                crate::server::Dispatch::Grouped { members, .. } => members.iter().all(quiet),
            })
            .map(|tool| tool.definition.name.to_string())
            .collect();
        Some(SessionCalls {
            handler,
            quiet_tools,
            running: Mutex::default(),
        })
    }

    fn running(&self) -> MutexGuard<'_, HashMap<(SessionId, RequestId), CancellationToken>> {
        // Plain data: a panic elsewhere cannot leave it half-updated.
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Answers `message` of session `session` if it is a plain call; gives it back otherwise.
    // Handed back as it came, for rmcp's path: boxed, every request would pay an allocation.
    #[expect(clippy::result_large_err)]
    pub(crate) fn answer(
        self: &Arc<Self>,
        session: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, ClientJsonRpcMessage>
    {
        let Some(peer) = self.takes(&message) else {
            return Err(message);
        };
        let ClientJsonRpcMessage::Request(JsonRpcRequest { id, .. }) = &message else {
            return Err(message);
        };
        let cancellation = CancellationToken::new();
        // A request id already running here is the worker's to route, as it routes a reused id:
        // one entry per id, so that a cancellation reaches every call that has it.
        let Some(running) = Running::new(self, session, id, &cancellation) else {
            return Err(message);
        };
        let ClientJsonRpcMessage::Request(JsonRpcRequest {
            id,
            request: ClientRequest::CallToolRequest(mut request),
            ..
        }) = message
        else {
            return Err(message);
        };
        let mut context = RequestContext::new(id.clone(), peer);
        context.ct = cancellation.clone();
        context.meta = request
            .extensions
            .remove::<RequestMetaObject>()
            .unwrap_or_default();
        context.extensions = std::mem::take(&mut request.extensions);
        context.extensions.insert(super::BesideWorker);
        let handler = self.handler.for_new_session();
        let params = request.params;
        // Run when rmcp's response polls the stream, on the connection's task.
        let answer = async move {
            let outcome = Detaching::new(
                Box::pin(async move { dispatch_call(&handler, params, context).await }),
                cancellation,
            )
            .await;
            drop(running);
            let message = match outcome {
                Ok(result) => ServerJsonRpcMessage::response(result, id),
                Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
            };
            ServerSseMessage::from_message(message)
        };
        Ok(OneAnswer(Mutex::new(Some(Box::pin(answer)))))
    }

    /// The session's peer, when `message` is a call this path may answer.
    fn takes(&self, message: &ClientJsonRpcMessage) -> Option<rmcp::Peer<rmcp::RoleServer>> {
        let ClientJsonRpcMessage::Request(JsonRpcRequest {
            request: ClientRequest::CallToolRequest(request),
            ..
        }) = message
        else {
            return None;
        };
        let params = &request.params;
        let meta = request.extensions.get::<RequestMetaObject>();
        let plain = self.quiet_tools.contains(params.name.as_ref())
            // What would make the handler stream notifications before its answer, or ask.
            // A request that states its own protocol version is rmcp's to check.
            && meta.is_none_or(|meta| {
                meta.get_progress_token().is_none()
                    && meta.log_level().is_none()
                    && meta.protocol_version().is_none()
            })
            && params.input_responses.is_none()
            && params.request_state.is_none();
        if !plain {
            return None;
        }
        let connection = request
            .extensions
            .get::<http::request::Parts>()?
            .extensions
            .get::<Arc<ConnectionState>>()?;
        if locked(&connection.log_level).is_some() {
            return None;
        }
        // The peer of the session's worker, known once a call went through it.
        locked(&connection.worker_peer)
            .as_ref()
            .filter(|peer| !peer.is_transport_closed())
            .cloned()
    }

    /// Cancels every call of `session` still running here: the session has ended.
    pub(crate) fn end_session(&self, session: &str) {
        for ((of, _), token) in self.running().iter() {
            if of.as_ref() == session {
                token.cancel();
            }
        }
    }

    /// Cancels the call `message` names if it is a `notifications/cancelled` of one of
    /// `session`'s calls running here.
    pub(crate) fn cancel(&self, session: &SessionId, message: &ClientJsonRpcMessage) {
        if let ClientJsonRpcMessage::Notification(JsonRpcNotification {
            notification: ClientNotification::CancelledNotification(cancelled),
            ..
        }) = message
            && let Some(request) = &cancelled.params.request_id
            && let Some(token) = self.running().get(&(session.clone(), request.clone()))
        {
            token.cancel();
        }
    }
}

/// The response stream of a call answered here: its one message, made when first polled.
/// (In a `Mutex` only to be `Sync`, as rmcp's streams must: `poll_next` has it exclusively and
/// never locks it.)
struct OneAnswer(Mutex<Option<Pin<Box<dyn Future<Output = ServerSseMessage> + Send>>>>);

impl Stream for OneAnswer {
    type Item = ServerSseMessage;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ServerSseMessage>> {
        let slot = self
            .get_mut()
            .0
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(answer) = slot.as_mut() else {
            return Poll::Ready(None);
        };
        let message = std::task::ready!(answer.as_mut().poll(cx));
        *slot = None;
        Poll::Ready(Some(message))
    }
}

/// A call's entry in [`SessionCalls::running`], removed when the call ends or is dropped;
/// none while a call of the same session with the same id runs here.
struct Running {
    calls: Arc<SessionCalls>,
    key: (SessionId, RequestId),
}

impl Running {
    fn new(
        calls: &Arc<SessionCalls>,
        session: &SessionId,
        id: &RequestId,
        cancellation: &CancellationToken,
    ) -> Option<Self> {
        let key = (session.clone(), id.clone());
        let mut running = calls.running();
        let Entry::Vacant(entry) = running.entry(key.clone()) else {
            return None;
        };
        entry.insert(cancellation.clone());
        drop(running);
        Some(Running {
            calls: Arc::clone(calls),
            key,
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.calls.running().remove(&self.key);
    }
}

//! Progress of proxied calls, forwarded to the caller in the order the upstream sent it, and
//! all of it before the call's result.
//!
//! rmcp's client hands each notification to its handler in a task of its own, while a response
//! goes straight to the request's waiter: a result sent right after a progress notification
//! could reach the caller first, and the notification, routed after the call had ended, was
//! lost. Instead, the transport ([`Routed`]) takes the progress of calls in flight out of the
//! message stream as it reads it, in order, and queues it on the call; the call
//! ([`Relay::around`]) forwards what is queued while it waits, and what is left once its
//! answer is there, before returning it. The HTTP path queues the progress it reads the same
//! way.
//!
//! An upstream that floods progress does not flood the caller (issue 24): each call forwards
//! at most [`Flood`]'s burst at once and then a few a second; past that only the latest
//! notification waits for its turn (progress supersedes the progress before it), and the
//! latest is always forwarded before the result.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, GetExtensions as _, GetMeta as _,
    ProgressNotificationParam, ProgressToken, ServerJsonRpcMessage, ServerNotification,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{Peer, RoleClient, RoleServer};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// Where the progress of each call in flight goes, by the upstream request's progress token.
pub(crate) type Routes =
    Arc<Mutex<HashMap<ProgressToken, UnboundedSender<ProgressNotificationParam>>>>;

/// Carried in a `tools/call` request's extensions: the queue of its progress. The transport
/// routes the request's progress token to it as it sends the request, so that no notification
/// can come before its route.
#[derive(Clone)]
pub(crate) struct ProgressSink(UnboundedSender<ProgressNotificationParam>);

/// A transport to an upstream that routes the progress of calls in flight to their queues.
pub(crate) struct Routed<T> {
    inner: T,
    routes: Routes,
}

impl<T> Routed<T> {
    pub(crate) fn new(inner: T, routes: Routes) -> Self {
        Routed { inner, routes }
    }

    /// `None` when `message` was progress routed to a call.
    fn route(&self, message: ServerJsonRpcMessage) -> Option<ServerJsonRpcMessage> {
        let ServerJsonRpcMessage::Notification(notification) = &message else {
            return Some(message);
        };
        let ServerNotification::ProgressNotification(progress) = &notification.notification else {
            return Some(message);
        };
        let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        let token = &progress.params.progress_token;
        let sink = routes.get(token)?;
        if sink.send(progress.params.clone()).is_err() {
            // The call is over.
            routes.remove(token);
        }
        None
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Routed<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let ClientJsonRpcMessage::Request(request) = &item
            && let ClientRequest::CallToolRequest(call) = &request.request
            && let Some(ProgressSink(sink)) = call.extensions().get::<ProgressSink>()
            && let Some(token) = request.request.get_meta().get_progress_token()
        {
            self.routes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(token, sink.clone());
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            // Cancel-safe as the inner transport is: nothing is awaited once a message is in.
            let message = self.inner.receive().await?;
            if let Some(message) = self.route(message) {
                return Some(message);
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// The caller's side of one call's progress: the queue the upstream's progress is routed to,
/// forwarded to the caller under the caller's own token.
pub(crate) struct Relay {
    caller: Peer<RoleServer>,
    token: ProgressToken,
    sink: UnboundedSender<ProgressNotificationParam>,
    queue: UnboundedReceiver<ProgressNotificationParam>,
    /// The route to remove when the call ends.
    routed: Option<(Routes, ProgressToken)>,
    /// The rate progress is forwarded at.
    flood: super::bounds::Flood,
    /// The latest progress held back by the rate.
    held: Option<ProgressNotificationParam>,
}

impl Relay {
    /// For a caller that asked for progress with `token`.
    pub(crate) fn new(caller: Peer<RoleServer>, token: ProgressToken) -> Self {
        let (sink, queue) = unbounded_channel();
        Relay {
            caller,
            token,
            sink,
            queue,
            routed: None,
            flood: super::bounds::Flood::for_progress(),
            held: None,
        }
    }

    /// What a request carries for [`Routed`] to route its progress here.
    pub(crate) fn sink(&self) -> ProgressSink {
        ProgressSink(self.sink.clone())
    }

    /// Queues progress read by the caller itself (the HTTP path).
    pub(crate) fn queue(&self) -> &UnboundedSender<ProgressNotificationParam> {
        &self.sink
    }

    /// Routes the upstream's progress with `token` here until the relay is dropped (it may be
    /// routed already, by the transport).
    pub(crate) fn route(&mut self, routes: &Routes, token: ProgressToken) {
        self.unroute();
        routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(token.clone(), self.sink.clone());
        self.routed = Some((Arc::clone(routes), token));
    }

    /// Awaits `exchange`, forwarding the progress queued meanwhile, then what is still queued
    /// once it is over: progress queued before the answer reaches the caller before it.
    pub(crate) async fn around<T>(
        &mut self,
        mut exchange: std::pin::Pin<&mut impl Future<Output = T>>,
    ) -> T {
        loop {
            let next_turn = self.flood.next_turn();
            tokio::select! {
                biased;
                Some(progress) = self.queue.recv() => self.offer(progress).await,
                () = tokio::time::sleep_until(next_turn), if self.held.is_some() => {
                    if let Some(progress) = self.held.take() {
                        self.offer(progress).await;
                    }
                }
                outcome = exchange.as_mut() => {
                    while let Ok(progress) = self.queue.try_recv() {
                        self.offer(progress).await;
                    }
                    if let Some(progress) = self.held.take() {
                        self.forward(progress).await;
                    }
                    return outcome;
                }
            }
        }
    }

    /// Forwards `progress` if the rate allows, else holds it back in place of what was held.
    async fn offer(&mut self, progress: ProgressNotificationParam) {
        if self.flood.admit() {
            self.held = None;
            self.forward(progress).await;
        } else {
            self.held = Some(progress);
        }
    }

    async fn forward(&self, mut progress: ProgressNotificationParam) {
        progress.progress_token = self.token.clone();
        if let Err(error) = self.caller.notify_progress(progress).await {
            tracing::debug!(%error, "progress not delivered");
        }
    }

    fn unroute(&mut self) {
        if let Some((routes, token)) = self.routed.take() {
            routes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&token);
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.unroute();
    }
}

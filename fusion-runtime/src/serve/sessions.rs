//! Bounded 2025-11-25 sessions: a cap per principal and in total, an idle timeout, idle
//! sessions parked at a fraction of their live cost, and each session bound to the credential
//! that opened it.
//!
//! rmcp's [`LocalSessionManager`] does the work; [`BoundedSessions`] wraps it and keeps a
//! registry beside it. A live session costs what rmcp's worker costs (about 95 kB, mostly the
//! channel blocks of its message types). A session with no request in flight and no open
//! stream for [`SessionLimits::park_after`] gives its worker up and keeps only its `initialize`
//! parameters (rmcp's [`SessionState`], through the [`SessionStore`] hook rmcp restores
//! sessions from); its next request restores it transparently.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager, SessionState,
    SessionStore, SessionStoreError,
};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::ReplicaName;

/// Who sent a request, as the bearer layer verified it: the credential (a digest of the token)
/// owns the sessions it opens; the principal (subject and tenant) is what the per-principal
/// cap counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Caller {
    pub(crate) credential: [u8; 32],
    pub(crate) principal: u64,
}

/// The bounds of [`BoundedSessions`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct SessionLimits {
    pub(crate) max_sessions: usize,
    pub(crate) max_per_principal: usize,
    /// A session with nothing in flight for this long is parked.
    pub(crate) park_after: Duration,
    /// A session with no request for this long is closed.
    pub(crate) idle_timeout: Option<Duration>,
}

/// Why a session was not opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The caller's principal already has `limit` sessions open.
    Principal { limit: usize },
    /// The server already has `limit` sessions open.
    Server { limit: usize },
}

tokio::task_local! {
    /// Set around a request that may open a session, so that `create_session` (which rmcp
    /// calls without the request) knows who asks, and can say why it refused.
    static OPENER: Opener;
}

pub(crate) struct Opener {
    caller: Option<Caller>,
    refusal: Cell<Option<Refusal>>,
}

impl Opener {
    pub(crate) fn new(caller: Option<Caller>) -> Self {
        Opener {
            caller,
            refusal: Cell::new(None),
        }
    }

    pub(crate) fn refusal(&self) -> Option<Refusal> {
        self.refusal.get()
    }

    /// Runs `future` (rmcp handling one request) with this opener in reach of
    /// `create_session`; gives the opener back with the output.
    pub(crate) async fn around<F: Future>(self, future: F) -> (F::Output, Opener) {
        let mut scoped = std::pin::pin!(OPENER.scope(self, future));
        let output = (&mut scoped).await;
        let opener = scoped
            .as_mut()
            .take_value()
            .unwrap_or_else(|| Opener::new(None));
        (output, opener)
    }
}

/// rmcp's in-memory session manager with bounds: a cap per principal and in total, an idle
/// timeout, and idle sessions parked (their worker dropped, their `initialize` parameters kept
/// for rmcp to restore them from) as [`HttpOptions`](super::HttpOptions) says.
/// [`Mcp::http_service`](super::Mcp::http_service) and [`Mcp::router`](super::Mcp::router)
/// serve sessions through it.
#[derive(Clone)]
pub struct BoundedSessions {
    shared: Arc<Shared>,
}

impl fmt::Debug for BoundedSessions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let registry = self.shared.lock();
        f.debug_struct("BoundedSessions")
            .field("limits", &self.shared.limits)
            .field("sessions", &registry.sessions.len())
            .finish_non_exhaustive()
    }
}

struct Shared {
    inner: LocalSessionManager,
    /// Carried in every session id this server issues, for a load balancer to route by.
    replica: Option<ReplicaName>,
    registry: Mutex<Registry>,
    limits: SessionLimits,
    /// Woken when a session has finished parking.
    parked: Notify,
    sweeping: AtomicBool,
    stop: CancellationToken,
    /// Plain calls answered beside the session's worker, when the endpoint set it.
    calls: OnceLock<Arc<super::session_calls::SessionCalls>>,
}

#[derive(Default)]
struct Registry {
    sessions: HashMap<SessionId, Entry>,
    /// Sessions open (and reserved) per principal.
    per_principal: HashMap<u64, usize>,
    /// Sessions open and reserved in total.
    total: usize,
}

struct Entry {
    /// `None` when the session was opened without authentication.
    owner: Option<Caller>,
    /// What rmcp restores the session from; `None` until its handshake has succeeded. Boxed:
    /// the registry's table holds a slot per session, and twice as many when it has just grown.
    state: Option<Box<SessionState>>,
    phase: Phase,
    /// How many `close_session` calls are still to come from workers retired by parking; they
    /// must not close the worker a later request restored.
    stale_closes: u8,
    /// Request streams open (a call in flight, or a resumed stream).
    calls: u32,
    /// Standalone (GET) streams open.
    listeners: u32,
    last_seen: Instant,
    /// What the session keeps across its requests (its log level, its subscriptions): here,
    /// so that it outlives the worker of a parked session. Made at its first use.
    connection: Option<Arc<super::ConnectionState>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Live,
    /// Its worker is being closed; requests wait, then restore it.
    Parking,
    /// Only its state is kept.
    Parked,
}

#[derive(Clone, Copy)]
enum StreamKind {
    Call,
    Listener,
}

/// A session refused, or rmcp's own session error.
#[derive(Debug)]
pub struct SessionsError {
    kind: ErrorKind,
}

#[derive(Debug)]
enum ErrorKind {
    Refused(Refusal),
    Local(LocalSessionManagerError),
    /// A fresh session id already names a session (a 122-bit random collision).
    IdTaken,
}

impl fmt::Display for SessionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Refused(Refusal::Principal { limit }) => {
                write!(
                    f,
                    "too many open sessions for this principal (limit {limit})"
                )
            }
            ErrorKind::Refused(Refusal::Server { limit }) => {
                write!(f, "too many open sessions (limit {limit})")
            }
            ErrorKind::Local(error) => fmt::Display::fmt(error, f),
            ErrorKind::IdTaken => f.write_str("a fresh session id was already in use"),
        }
    }
}

impl std::error::Error for SessionsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Local(error) => Some(error),
            ErrorKind::Refused(_) | ErrorKind::IdTaken => None,
        }
    }
}

impl From<LocalSessionManagerError> for SessionsError {
    fn from(error: LocalSessionManagerError) -> Self {
        SessionsError {
            kind: ErrorKind::Local(error),
        }
    }
}

/// Releases a reservation unless the session it was for got registered.
struct Reservation<'a> {
    shared: &'a Shared,
    caller: Option<Caller>,
    armed: bool,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.shared.lock().release(self.caller.as_ref());
        }
    }
}

impl Registry {
    fn release(&mut self, owner: Option<&Caller>) {
        self.total = self.total.saturating_sub(1);
        if let Some(owner) = owner
            && let Some(count) = self.per_principal.get_mut(&owner.principal)
        {
            *count -= 1;
            if *count == 0 {
                self.per_principal.remove(&owner.principal);
            }
        }
    }

    fn remove(&mut self, id: &str) -> Option<Entry> {
        let entry = self.sessions.remove(id)?;
        self.release(entry.owner.as_ref());
        Some(entry)
    }
}

impl BoundedSessions {
    /// Sessions bounded by `limits`; parked sessions are dropped when `stop` is cancelled
    /// (the server's shutdown).
    pub(crate) fn new(
        limits: SessionLimits,
        replica: Option<ReplicaName>,
        stop: CancellationToken,
    ) -> Self {
        let mut inner = LocalSessionManager::default();
        // Idle sessions are parked and expired by the sweeper below, which knows whether a call
        // is in flight; rmcp's own keep-alive would end a session in the middle of a long call.
        inner.session_config.keep_alive = None;
        BoundedSessions {
            shared: Arc::new(Shared {
                inner,
                replica,
                registry: Mutex::default(),
                limits,
                parked: Notify::new(),
                sweeping: AtomicBool::new(false),
                stop,
                calls: OnceLock::new(),
            }),
        }
    }

    /// Answers the sessions' plain calls with `calls` (once; later calls keep the first).
    pub(crate) fn answer_calls_with(&self, calls: super::session_calls::SessionCalls) {
        let _ = self.shared.calls.set(Arc::new(calls));
    }

    /// The [`SessionStore`] rmcp keeps parked sessions in (and restores them from).
    pub(crate) fn store(&self) -> Arc<dyn SessionStore> {
        Arc::new(ParkedStates(Arc::clone(&self.shared)))
    }

    /// Whether `session` was opened by `caller`'s credential. A session this registry does not
    /// know is nobody's.
    pub(crate) fn belongs_to(&self, session: &str, caller: Option<&Caller>) -> bool {
        let registry = self.shared.lock();
        match (registry.sessions.get(session), caller) {
            (Some(entry), Some(caller)) => entry
                .owner
                .is_some_and(|owner| owner.credential == caller.credential),
            _ => false,
        }
    }

    /// What session `session` keeps across its requests, when this registry knows it.
    pub(crate) fn connection(&self, session: &str) -> Option<Arc<super::ConnectionState>> {
        let mut registry = self.shared.lock();
        let entry = registry.sessions.get_mut(session)?;
        Some(Arc::clone(entry.connection.get_or_insert_default()))
    }

    /// How many sessions are open, parked ones included.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.shared.lock().sessions.len()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Registry> {
        // The registry holds plain data: a panic elsewhere cannot leave it half-updated.
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn reserve(&self, caller: Option<Caller>) -> Result<Reservation<'_>, Refusal> {
        let mut registry = self.lock();
        if let Some(caller) = &caller {
            let count = registry
                .per_principal
                .get(&caller.principal)
                .copied()
                .unwrap_or(0);
            if count >= self.limits.max_per_principal {
                return Err(Refusal::Principal {
                    limit: self.limits.max_per_principal,
                });
            }
        }
        if registry.total >= self.limits.max_sessions {
            return Err(Refusal::Server {
                limit: self.limits.max_sessions,
            });
        }
        registry.total += 1;
        if let Some(caller) = &caller {
            *registry.per_principal.entry(caller.principal).or_default() += 1;
        }
        Ok(Reservation {
            shared: self,
            caller,
            armed: true,
        })
    }

    fn touch(&self, id: &str) {
        if let Some(entry) = self.lock().sessions.get_mut(id) {
            entry.last_seen = Instant::now();
        }
    }

    fn stream_opened(&self, id: &str, kind: StreamKind) {
        if let Some(entry) = self.lock().sessions.get_mut(id) {
            entry.last_seen = Instant::now();
            match kind {
                StreamKind::Call => entry.calls += 1,
                StreamKind::Listener => entry.listeners += 1,
            }
        }
    }

    fn stream_closed(&self, id: &str, kind: StreamKind) {
        if let Some(entry) = self.lock().sessions.get_mut(id) {
            entry.last_seen = Instant::now();
            match kind {
                StreamKind::Call => entry.calls = entry.calls.saturating_sub(1),
                StreamKind::Listener => entry.listeners = entry.listeners.saturating_sub(1),
            }
        }
    }

    fn start_sweeper(self: &Arc<Self>) {
        if self.sweeping.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut tick = self.limits.park_after;
        if let Some(idle) = self.limits.idle_timeout {
            tick = tick.min(idle);
        }
        // Often enough to hold each bound within half of it, and never a busy loop.
        let tick = (tick / 2).clamp(Duration::from_millis(10), Duration::from_secs(30));
        let shared = Arc::downgrade(self);
        let stop = self.stop.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(tick) => {}
                }
                let Some(shared) = Weak::upgrade(&shared) else {
                    return;
                };
                shared.sweep();
            }
        });
    }

    /// Expires sessions idle past the idle timeout and parks those with nothing in flight.
    fn sweep(self: &Arc<Self>) {
        let now = Instant::now();
        let limits = self.limits;
        let mut expired = Vec::new();
        let mut parking = Vec::new();
        {
            let mut registry = self.lock();
            let mut released = Vec::new();
            registry.sessions.retain(|id, entry| {
                let idle = now.saturating_duration_since(entry.last_seen);
                if entry.calls == 0 && limits.idle_timeout.is_some_and(|limit| idle >= limit) {
                    released.push(entry.owner);
                    if entry.phase != Phase::Parked {
                        expired.push(Arc::clone(id));
                    }
                    return false;
                }
                if entry.phase == Phase::Live
                    && entry.calls == 0
                    && entry.listeners == 0
                    && entry.state.is_some()
                    && idle >= limits.park_after
                {
                    entry.phase = Phase::Parking;
                    entry.stale_closes = entry.stale_closes.saturating_add(1);
                    parking.push(Arc::clone(id));
                }
                true
            });
            for owner in released {
                registry.release(owner.as_ref());
            }
        }
        for id in expired {
            tracing::debug!(session = %id, "closing an idle session");
            let shared = Arc::clone(self);
            // Closing waits for room in the worker's queue: never inside the sweep.
            tokio::spawn(async move {
                let _ = shared.inner.close_session(&id).await;
            });
        }
        for id in parking {
            let shared = Arc::clone(self);
            tokio::spawn(async move {
                let _ = shared.inner.close_session(&id).await;
                let parked = match shared.lock().sessions.get_mut(&id) {
                    Some(entry) if entry.phase == Phase::Parking => {
                        entry.phase = Phase::Parked;
                        true
                    }
                    _ => false,
                };
                if parked {
                    tracing::debug!(session = %id, "parked an idle session");
                }
                shared.parked.notify_waiters();
            });
        }
    }
}

/// A session's response stream, counted while it is open.
struct Tracked {
    inner: Pin<Box<dyn Stream<Item = ServerSseMessage> + Send + Sync>>,
    shared: Arc<Shared>,
    id: SessionId,
    kind: StreamKind,
}

impl Tracked {
    fn new(
        shared: &Arc<Shared>,
        id: &SessionId,
        kind: StreamKind,
        inner: impl Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    ) -> Self {
        shared.stream_opened(id, kind);
        Tracked {
            inner: Box::pin(inner),
            shared: Arc::clone(shared),
            id: Arc::clone(id),
            kind,
        }
    }
}

impl Stream for Tracked {
    type Item = ServerSseMessage;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.shared.stream_closed(&self.id, self.kind);
    }
}

impl SessionManager for BoundedSessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.shared.start_sweeper();
        let caller = OPENER.try_with(|opener| opener.caller).ok().flatten();
        let mut reservation = match self.shared.reserve(caller) {
            Ok(reservation) => reservation,
            Err(refusal) => {
                let _ = OPENER.try_with(|opener| opener.refusal.set(Some(refusal)));
                tracing::debug!(?refusal, "refused to open a session");
                return Err(SessionsError {
                    kind: ErrorKind::Refused(refusal),
                });
            }
        };
        let (id, transport) = match &self.shared.replica {
            None => self.shared.inner.create_session().await?,
            Some(replica) => {
                let id: SessionId = format!("{replica}.{}", uuid::Uuid::new_v4()).into();
                // rmcp's `create_session` draws an id of its own; `restore_session` builds the
                // same worker (same configuration) under the id it is given.
                match self.shared.inner.restore_session(Arc::clone(&id)).await? {
                    RestoreOutcome::Restored(transport) => (id, transport),
                    _ => {
                        return Err(SessionsError {
                            kind: ErrorKind::IdTaken,
                        });
                    }
                }
            }
        };
        reservation.armed = false;
        self.shared.lock().sessions.insert(
            Arc::clone(&id),
            Entry {
                owner: caller,
                state: None,
                phase: Phase::Live,
                stale_closes: 0,
                calls: 0,
                listeners: 0,
                last_seen: Instant::now(),
                connection: None,
            },
        );
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.shared.touch(id);
        Ok(self.shared.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        loop {
            let parked = self.shared.parked.notified();
            let mut parked = std::pin::pin!(parked);
            parked.as_mut().enable();
            {
                let mut registry = self.shared.lock();
                match registry.sessions.get_mut(id.as_ref()) {
                    None => return Ok(false),
                    Some(entry) => match entry.phase {
                        Phase::Live => {
                            entry.last_seen = Instant::now();
                            return Ok(true);
                        }
                        // rmcp restores it from its state.
                        Phase::Parked => return Ok(false),
                        Phase::Parking => {}
                    },
                }
            }
            parked.await;
        }
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        {
            let mut registry = self.shared.lock();
            match registry.sessions.get_mut(id.as_ref()) {
                // The retired worker of a parked session has ended: nothing else to close.
                Some(entry) if entry.stale_closes > 0 => {
                    entry.stale_closes -= 1;
                    return Ok(());
                }
                // A session that never finished its handshake cannot be restored: forget it.
                Some(entry) if entry.state.is_none() => {
                    registry.remove(id);
                }
                // Parked until its idle timeout or a DELETE (which rmcp follows with
                // `SessionStore::delete`).
                Some(entry) => entry.phase = Phase::Parked,
                None => {}
            }
        }
        Ok(self.shared.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let message = match self.shared.calls.get() {
            Some(calls) => match calls.answer(id, message) {
                Ok(answer) => return Ok(Tracked::new(&self.shared, id, StreamKind::Call, answer)),
                Err(message) => message,
            },
            None => message,
        };
        let stream = self.shared.inner.create_stream(id, message).await?;
        Ok(Tracked::new(&self.shared, id, StreamKind::Call, stream))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.shared.touch(id);
        if let Some(calls) = self.shared.calls.get() {
            calls.cancel(id, &message);
        }
        Ok(self.shared.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.shared.inner.create_standalone_stream(id).await?;
        Ok(Tracked::new(&self.shared, id, StreamKind::Listener, stream))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = self.shared.inner.resume(id, last_event_id).await?;
        Ok(Tracked::new(&self.shared, id, StreamKind::Call, stream))
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        if !self.shared.lock().sessions.contains_key(id.as_ref()) {
            return Ok(RestoreOutcome::NotSupported);
        }
        let outcome = self.shared.inner.restore_session(Arc::clone(&id)).await?;
        if let Some(entry) = self.shared.lock().sessions.get_mut(id.as_ref()) {
            entry.phase = Phase::Live;
            entry.last_seen = Instant::now();
        }
        tracing::debug!(session = %id, "restored a parked session");
        Ok(outcome)
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.shared.inner.event_store()
    }
}

/// Where rmcp keeps the state of each session after its handshake: in the registry entry, so
/// that a parked session costs its entry alone.
struct ParkedStates(Arc<Shared>);

#[async_trait::async_trait]
impl SessionStore for ParkedStates {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        Ok(self
            .0
            .lock()
            .sessions
            .get(session_id)
            .and_then(|entry| entry.state.as_deref().cloned()))
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        if let Some(entry) = self.0.lock().sessions.get_mut(session_id) {
            entry.state = Some(Box::new(state.clone()));
        }
        Ok(())
    }

    /// The session was closed with `DELETE`: it is gone, and its slot free.
    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        // Its calls answered beside the worker end with it, as the worker's own would.
        if let Some(calls) = self.0.calls.get() {
            calls.end_session(session_id);
        }
        let removed = self.0.lock().remove(session_id);
        if removed.is_some_and(|entry| entry.phase != Phase::Parked) {
            let _ = self
                .0
                .inner
                .close_session(&SessionId::from(session_id))
                .await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> SessionLimits {
        SessionLimits {
            max_sessions: 3,
            max_per_principal: 2,
            park_after: Duration::from_secs(3600),
            idle_timeout: None,
        }
    }

    fn caller(credential: u8, principal: u64) -> Caller {
        Caller {
            credential: [credential; 32],
            principal,
        }
    }

    async fn open(
        sessions: &BoundedSessions,
        caller: Option<Caller>,
    ) -> Result<SessionId, Refusal> {
        let (result, opener) = Opener::new(caller).around(sessions.create_session()).await;
        match result {
            Ok((id, _transport)) => Ok(id),
            Err(_) => Err(opener
                .refusal()
                .expect("a refusal is reported to the opener")),
        }
    }

    #[tokio::test]
    async fn caps_count_per_principal_and_in_total_and_free_on_close() {
        let sessions = BoundedSessions::new(limits(), None, CancellationToken::new());
        let alpha = caller(1, 1);
        let alpha_again = caller(2, 1);
        let beta = caller(3, 2);
        let first = open(&sessions, Some(alpha)).await.unwrap();
        open(&sessions, Some(alpha_again)).await.unwrap();
        // Two credentials of one principal share its cap.
        assert_eq!(
            open(&sessions, Some(alpha)).await,
            Err(Refusal::Principal { limit: 2 })
        );
        open(&sessions, Some(beta)).await.unwrap();
        assert_eq!(
            open(&sessions, None).await,
            Err(Refusal::Server { limit: 3 })
        );
        // A session that ends before its handshake frees its slot at once.
        sessions.close_session(&first).await.unwrap();
        assert_eq!(sessions.len(), 2);
        open(&sessions, Some(alpha)).await.unwrap();
    }

    #[tokio::test]
    async fn a_session_belongs_to_its_credential_alone() {
        let sessions = BoundedSessions::new(limits(), None, CancellationToken::new());
        let alpha = caller(1, 1);
        let id = open(&sessions, Some(alpha)).await.unwrap();
        assert!(sessions.belongs_to(&id, Some(&alpha)));
        // The same principal with another token, and a request without a token, are others.
        assert!(!sessions.belongs_to(&id, Some(&caller(2, 1))));
        assert!(!sessions.belongs_to(&id, None));
        assert!(!sessions.belongs_to("unknown", Some(&alpha)));
        let anonymous = open(&sessions, None).await.unwrap();
        assert!(!sessions.belongs_to(&anonymous, Some(&alpha)));
    }

    #[tokio::test]
    async fn a_named_replica_issues_session_ids_that_start_with_its_name() {
        let replica = ReplicaName::new("r2").unwrap();
        let sessions = BoundedSessions::new(limits(), Some(replica), CancellationToken::new());
        let first = open(&sessions, None).await.unwrap();
        let second = open(&sessions, None).await.unwrap();
        for id in [&first, &second] {
            let random = id
                .strip_prefix("r2.")
                .expect("the replica's name, then a dot");
            assert!(uuid::Uuid::parse_str(random).is_ok(), "{id}");
            assert!(sessions.has_session(id).await.unwrap());
        }
        assert_ne!(first, second);
        // Counted and closed like any other session.
        assert_eq!(sessions.len(), 2);
        sessions.close_session(&first).await.unwrap();
        assert!(!sessions.has_session(&first).await.unwrap());
        assert_eq!(sessions.len(), 1);
    }
}

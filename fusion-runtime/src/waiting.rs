//! Waiting on a client or a person (issue 24): every question a handler asks over a session
//! (elicitation, sampling, roots) has a deadline, and while it waits the call holds nothing
//! another call needs.
//!
//! - **Deadline.** A question waits at most its action's `ask_timeout`
//!   (`#[tool(ask_timeout = "30s")]`), else the server's
//!   ([`ServerBuilder::ask_timeout`](crate::ServerBuilder::ask_timeout)), else
//!   [`DEFAULT_ASK_TIMEOUT`](crate::DEFAULT_ASK_TIMEOUT). Past it the client is told the
//!   request is cancelled and the call fails with a retryable `NO_ANSWER`. On 2026-07-28
//!   nothing waits: the call ends with its questions, and their sealed state expires with the
//!   tool's or server's deadline when one is set (the request-state lifetime otherwise).
//! - **Lend, then take back.** The design chosen is release and re-acquire: while a question
//!   waits, the call gives back its running slots (the tool's and the server's, and its
//!   tenant's of both) and its FIFO turn (and the replicas' shared lock); once answered it
//!   takes them back, in the order the request path takes them, before the handler goes on. It keeps one thing: its seat in its
//!   own tenant's share, so that one tenant's unanswered questions fill only that tenant's
//!   share. Both eras thus behave alike: on 2026-07-28 the handler ends at its question and
//!   runs again from the start with the answer. A serialized handler therefore checks again
//!   after a question what it checked before (a store's conditional write does it: voiding an
//!   invoice another call voided meanwhile answers `AlreadyVoided`).
//! - **A session that goes away** ends its calls: rmcp stops a closed session's handlers
//!   (after draining their answers, a few seconds at most), their pending questions with them,
//!   and each call's guards and tenant seat are released as it ends.

use std::sync::{Arc, Mutex, PoisonError};

use crate::context::CallContext;
use crate::error::ToolError;
use crate::guard::{ConcurrencyGuard, Lend, SerialGuard, SerializationLock, Slot, Turn};
use crate::server::CompiledAction;

/// A held lock of the server's [`SerializationLock`]; released on drop.
type SharedTurn = Box<dyn Send + 'static>;

/// Guards a call holds and gives back while it waits on its client: the tool's own
/// ([`ToolGuards`]) or the server's slot ([`ServerGuards`]), each lent through one [`Lent`].
pub(crate) trait Guards: Send + Sync + 'static {
    /// What the call holds.
    type Held: Send + 'static;
    /// What lending gives up, dropped once the lending record's lock is released.
    type Released: Send;

    /// Gives back what other calls need while this one waits.
    fn lend(held: &mut Self::Held) -> Self::Released;

    /// Takes it back, in the order the request path took it.
    fn take_back<'a>(
        &'a self,
        held: &'a mut Self::Held,
    ) -> impl Future<Output = Result<(), ToolError>> + Send + 'a;
}

/// Kept by the request path while the call runs: everything is released when it drops. A call
/// that cannot wait on its client (no session, or a client that declared nothing it could be
/// asked) holds its guards as they are, without a lending record.
pub(crate) enum Holding<G: Guards> {
    Still { _held: G::Held },
    Lent(Arc<Lent<G>>),
}

/// The lending record of a call that may wait on its client: what it holds, and what it needs
/// to take it back.
pub(crate) struct Lent<G: Guards> {
    guards: G,
    /// What the call's earlier guards registered to lend (the target's, under the server's
    /// slot): lent after these, taken back before them, in the order they were entered.
    earlier: Option<Arc<dyn Lend>>,
    state: Mutex<LentState<G::Held>>,
}

struct LentState<H> {
    /// Questions waiting now (several when asked together).
    asking: usize,
    /// The call ended: nothing is taken back.
    closed: bool,
    held: Option<H>,
}

impl<G: Guards> Holding<G> {
    /// Holds `held` for the call of `context`, lent from now on while the call waits on its
    /// client (`guards` says how to take it back).
    pub(crate) fn new(
        held: G::Held,
        context: &mut CallContext,
        guards: impl FnOnce() -> G,
    ) -> Self {
        if !crate::elicit::may_wait(context) {
            return Holding::Still { _held: held };
        }
        let lent = Arc::new(Lent {
            guards: guards(),
            earlier: context.request.waiting.held.take(),
            state: Mutex::new(LentState {
                asking: 0,
                closed: false,
                held: Some(held),
            }),
        });
        context.request.waiting.held = Some(Arc::clone(&lent) as Arc<dyn Lend>);
        Holding::Lent(lent)
    }
}

impl<G: Guards> Drop for Holding<G> {
    fn drop(&mut self) {
        if let Holding::Lent(lent) = self {
            let released = {
                let mut state = lent.state.lock().unwrap_or_else(PoisonError::into_inner);
                state.closed = true;
                state.held.take()
            };
            drop(released);
        }
    }
}

impl<G: Guards> Lend for Lent<G> {
    /// A question starts: the first one lends what is held, then the earlier guards lend
    /// theirs (each counts its questions).
    fn lend(&self) {
        let released = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.asking += 1;
            let first = state.asking == 1;
            match &mut state.held {
                Some(held) if first => Some(G::lend(held)),
                _ => None,
            }
        };
        drop(released);
        if let Some(earlier) = &self.earlier {
            earlier.lend();
        }
    }

    /// A question is answered: the earlier guards take theirs back first, then the last
    /// question takes back what this holds (so no two calls wait on each other).
    fn resume(&self) -> futures::future::BoxFuture<'_, Result<(), ToolError>> {
        Box::pin(self.take_back())
    }
}

impl<G: Guards> Lent<G> {
    async fn take_back(&self) -> Result<(), ToolError> {
        let mut held = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.asking -= 1;
            if state.asking > 0 || state.closed {
                None
            } else {
                state.held.take()
            }
        };
        let earlier = match &self.earlier {
            Some(earlier) => earlier.resume().await,
            None => Ok(()),
        };
        let Some(mut held) = held.take() else {
            return earlier;
        };
        let result = match earlier {
            Ok(()) => self.guards.take_back(&mut held).await,
            Err(error) => Err(error),
        };
        let released = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if state.closed {
                return result;
            }
            // Another question started meanwhile (it waits with nothing held either), or the
            // guards could not be taken back (the call ends without running on).
            let released = (state.asking > 0 || result.is_err()).then(|| G::lend(&mut held));
            state.held = Some(held);
            released
        };
        drop(released);
        result
    }
}

/// The guards of a tool's call: its concurrency slot (within its tenant's share), its FIFO
/// turn keyed by tenant and value, and the replicas' shared lock.
pub(crate) struct ToolGuards {
    concurrency: Option<ConcurrencyGuard>,
    serial: Option<(SerialGuard, String)>,
    shared: Option<(Arc<dyn SerializationLock>, String)>,
}

/// What a tool's call holds of its [`ToolGuards`].
pub(crate) struct ToolHeld {
    slot: Option<Slot>,
    turn: Option<Turn>,
    shared: Option<SharedTurn>,
}

impl ToolGuards {
    /// Takes the guards of `action` for a call: its concurrency slot, then its FIFO turn keyed
    /// by tenant and `value`, then the replicas' shared lock; and tells the call's questions
    /// about them.
    pub(crate) async fn enter(
        action: &CompiledAction,
        context: &mut CallContext,
        value: Option<String>,
    ) -> Result<Holding<ToolGuards>, ToolError> {
        let tenant = crate::tenancy::tenant_of(context);
        let slot = match &action.concurrency {
            Some(guard) => Some(guard.enter(tenant).await?),
            None => None,
        };
        let serial = match &action.serial {
            Some(guard) => {
                let key = SerialGuard::scoped(tenant, value.as_deref());
                Some((guard, key))
            }
            None => None,
        };
        let turn = match &serial {
            Some((guard, key)) => Some(guard.turn(key).await),
            None => None,
        };
        // Across replicas: the shared lock, once this process's FIFO turn has come, so that a
        // process waits on it with at most one call per key.
        let shared = match (&action.shared_lock, &serial) {
            (Some(lock), Some((_, key))) => {
                let shared_key = format!("{}/{key}", action.facts.key.as_str());
                let held = lock.acquire(&shared_key).await?;
                Some((lock, shared_key, held))
            }
            _ => None,
        };
        let (shared_lock, shared) = match shared {
            Some((lock, key, held)) => (Some((Arc::clone(lock), key)), Some(held)),
            None => (None, None),
        };
        let held = ToolHeld { slot, turn, shared };
        Ok(Holding::new(held, context, || ToolGuards {
            concurrency: action.concurrency.clone(),
            serial: serial.map(|(guard, key)| (guard.clone(), key)),
            shared: shared_lock,
        }))
    }
}

impl Guards for ToolGuards {
    type Held = ToolHeld;
    type Released = (Option<Turn>, Option<SharedTurn>);

    /// Lends the running slot and gives up the turn and the shared lock.
    fn lend(held: &mut ToolHeld) -> Self::Released {
        if let Some(slot) = &mut held.slot {
            slot.lend();
        }
        (held.turn.take(), held.shared.take())
    }

    /// The slot, then the turn, then the shared lock, in the request path's order.
    async fn take_back(&self, held: &mut ToolHeld) -> Result<(), ToolError> {
        if let (Some(guard), Some(slot)) = (&self.concurrency, &mut held.slot) {
            guard.resume(slot).await;
        }
        if let Some((guard, key)) = &self.serial {
            held.turn = Some(guard.turn(key).await);
        }
        if let Some((lock, key)) = &self.shared {
            held.shared = Some(lock.acquire(key).await?);
        }
        Ok(())
    }
}

/// A call's slot of the server as a whole, taken after its target's own guards and lent with
/// them while the call waits on a person.
pub(crate) struct ServerGuards(ConcurrencyGuard);

impl ServerGuards {
    /// A slot of `guard` for the call of `context`, within its tenant's share, or
    /// `SERVER_BUSY` at once when full; the call's questions lend it from now on.
    pub(crate) async fn enter(
        guard: &ConcurrencyGuard,
        context: &mut CallContext,
    ) -> Result<Holding<ServerGuards>, ToolError> {
        let slot = guard.enter(crate::tenancy::tenant_of(context)).await?;
        Ok(Holding::new(slot, context, || ServerGuards(guard.clone())))
    }
}

impl Guards for ServerGuards {
    type Held = Slot;
    type Released = ();

    fn lend(slot: &mut Slot) {
        slot.lend();
    }

    async fn take_back(&self, slot: &mut Slot) -> Result<(), ToolError> {
        self.0.resume(slot).await;
        Ok(())
    }
}

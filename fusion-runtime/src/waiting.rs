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

/// The guards of one call: what it holds, and what it needs to take them back.
pub(crate) struct Held {
    concurrency: Option<ConcurrencyGuard>,
    serial: Option<(SerialGuard, String)>,
    shared: Option<(Arc<dyn SerializationLock>, String)>,
    state: Mutex<HeldState>,
}

#[derive(Default)]
struct HeldState {
    /// Questions waiting now (several when asked together).
    asking: usize,
    /// The call ended: nothing is taken back.
    closed: bool,
    slot: Option<Slot>,
    turn: Option<Turn>,
    shared: Option<SharedTurn>,
}

/// Kept by the request path while the handler runs: everything is released when it drops.
pub(crate) struct Holding(Arc<Held>);

impl Drop for Holding {
    fn drop(&mut self) {
        let released = {
            let mut state = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.closed = true;
            (state.slot.take(), state.turn.take(), state.shared.take())
        };
        drop(released);
    }
}

impl Held {
    /// Takes the guards of `action` for a call: its concurrency slot (within its tenant's
    /// share), then its FIFO turn keyed by tenant and `value`, then the replicas' shared lock;
    /// and tells the call's questions about them.
    pub(crate) async fn enter(
        action: &CompiledAction,
        context: &mut CallContext,
        value: Option<String>,
    ) -> Result<Holding, ToolError> {
        let tenant = crate::tenancy::tenant_of(context);
        let key = SerialGuard::scoped(tenant, value.as_deref());
        let slot = match &action.concurrency {
            Some(guard) => Some(guard.enter(tenant).await?),
            None => None,
        };
        let turn = match &action.serial {
            Some(guard) => Some(guard.turn(&key).await),
            None => None,
        };
        // Across replicas: the shared lock, once this process's FIFO turn has come, so that a
        // process waits on it with at most one call per key.
        let shared_key = format!("{}/{key}", action.facts.key.as_str());
        let shared = match &action.shared_lock {
            Some(lock) if action.serial.is_some() => Some(lock.acquire(&shared_key).await?),
            _ => None,
        };
        let held = Arc::new(Held {
            concurrency: action.concurrency.clone(),
            serial: action.serial.clone().map(|serial| (serial, key)),
            shared: action
                .shared_lock
                .clone()
                .filter(|_| action.serial.is_some())
                .map(|lock| (lock, shared_key)),
            state: Mutex::new(HeldState {
                slot,
                turn,
                shared,
                ..HeldState::default()
            }),
        });
        context.request.waiting.held = Some(Arc::clone(&held) as Arc<dyn Lend>);
        Ok(Holding(held))
    }
}

impl Lend for Held {
    /// A question starts: the first one lends the running slot and gives up the turn and the
    /// shared lock.
    fn lend(&self) {
        let released = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.asking += 1;
            if state.asking > 1 {
                return;
            }
            if let Some(slot) = &mut state.slot {
                slot.lend();
            }
            (state.turn.take(), state.shared.take())
        };
        drop(released);
    }

    /// A question is answered: the last one takes back the slot, then the turn, then the
    /// shared lock, in the request path's order (so no two calls wait on each other).
    fn resume(&self) -> futures::future::BoxFuture<'_, Result<(), ToolError>> {
        Box::pin(self.take_back())
    }
}

impl Held {
    async fn take_back(&self) -> Result<(), ToolError> {
        let mut slot = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.asking -= 1;
            if state.asking > 0 || state.closed {
                return Ok(());
            }
            state.slot.take()
        };
        if let (Some(guard), Some(slot)) = (&self.concurrency, &mut slot) {
            guard.resume(slot).await;
        }
        let turn = match &self.serial {
            Some((guard, key)) => Some(guard.turn(key).await),
            None => None,
        };
        let shared = match &self.shared {
            Some((lock, key)) => Some(lock.acquire(key).await),
            None => None,
        }
        .transpose();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.closed {
            return Ok(());
        }
        state.slot = slot;
        if state.asking > 0 {
            // Another question started meanwhile: it waits with nothing held either.
            if let Some(slot) = &mut state.slot {
                slot.lend();
            }
            return shared.map(drop);
        }
        state.turn = turn;
        state.shared = shared?;
        Ok(())
    }
}

/// A call's slot of the server as a whole, taken after its target's own guards and lent with
/// them while the call waits on a person: it wraps what the target registered to lend (if
/// anything), so that lending gives back both and resuming takes back the target's first, in
/// the order they were entered.
pub(crate) struct ServerSeat {
    guard: ConcurrencyGuard,
    target: Option<Arc<dyn Lend>>,
    state: Mutex<SeatState>,
}

#[derive(Default)]
struct SeatState {
    asking: usize,
    closed: bool,
    slot: Option<Slot>,
}

/// Kept by the request path while the target runs: the server's slot is released when it drops.
pub(crate) struct Seated(Arc<ServerSeat>);

impl Drop for Seated {
    fn drop(&mut self) {
        let slot = {
            let mut state = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.closed = true;
            state.slot.take()
        };
        drop(slot);
    }
}

impl ServerSeat {
    /// A slot of `guard` for the call of `context`, within its tenant's share, or
    /// `SERVER_BUSY` at once when full; the call's questions lend it from now on.
    pub(crate) async fn enter(
        guard: &ConcurrencyGuard,
        context: &mut CallContext,
    ) -> Result<Seated, ToolError> {
        let slot = guard.enter(crate::tenancy::tenant_of(context)).await?;
        let seat = Arc::new(ServerSeat {
            guard: guard.clone(),
            target: context.request.waiting.held.take(),
            state: Mutex::new(SeatState {
                slot: Some(slot),
                ..SeatState::default()
            }),
        });
        context.request.waiting.held = Some(Arc::clone(&seat) as Arc<dyn Lend>);
        Ok(Seated(seat))
    }

    async fn take_back(&self) -> Result<(), ToolError> {
        let mut slot = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.asking -= 1;
            if state.asking > 0 || state.closed {
                return Ok(());
            }
            state.slot.take()
        };
        let target = match &self.target {
            Some(target) => target.resume().await,
            None => Ok(()),
        };
        if target.is_ok()
            && let Some(slot) = &mut slot
        {
            self.guard.resume(slot).await;
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.closed {
            return target;
        }
        state.slot = slot;
        if state.asking > 0 || target.is_err() {
            // Another question started meanwhile (it waits with nothing held either), or the
            // target's guards could not be taken back: the call ends without running on.
            if let Some(slot) = &mut state.slot {
                slot.lend();
            }
        }
        target
    }
}

impl Lend for ServerSeat {
    fn lend(&self) {
        {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.asking += 1;
            if state.asking == 1
                && let Some(slot) = &mut state.slot
            {
                slot.lend();
            }
        }
        if let Some(target) = &self.target {
            target.lend();
        }
    }

    fn resume(&self) -> futures::future::BoxFuture<'_, Result<(), ToolError>> {
        Box::pin(self.take_back())
    }
}

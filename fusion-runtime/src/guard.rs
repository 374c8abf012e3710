//! Guards around the handler (SPEC G1–G3), configured per action and free when not configured.
//!
//! - **Concurrency** ([`Concurrency`]): at most `max_active` calls run at once, at most
//!   `max_queued` wait; beyond that a call gets `SERVER_BUSY` with a retry hint at once. One
//!   tenant may take only its share of both (half, by default), so that its flood or its stuck
//!   calls never deny another tenant. The server as a whole has such a limit too, over every
//!   tool, read and prompt ([`DEFAULT_SERVER_CONCURRENCY`] unless set), shared the same way.
//! - **Serialization** ([`Serialization`]): calls of a destructive action run one at a time, in
//!   arrival order (FIFO), per action or per value of one argument, and always per tenant:
//!   invoice `INV-3` of one tenant is not another's.
//! - **Egress budget** (`max_bytes`): a result whose data is larger is cut at item boundaries.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::JsonObject;
use serde_json::Value;
use tokio::sync::{Notify, OwnedMutexGuard};

use crate::error::ToolError;

/// Concurrency limits of one action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Concurrency {
    /// Calls running at once.
    pub max_active: usize,
    /// Calls waiting for a slot; one more is refused with `SERVER_BUSY`.
    pub max_queued: usize,
    /// The retry hint given with `SERVER_BUSY`.
    pub retry_after: Duration,
    /// The part of `max_active` and of `max_active + max_queued` (in percent, at least one
    /// call) that the calls of one tenant may take; a tenant past it gets `SERVER_BUSY` while
    /// others still get in. 100 turns the share off.
    pub tenant_share_percent: u8,
}

/// The default share of one tenant: half of a tool's slots and seats.
pub const DEFAULT_TENANT_SHARE_PERCENT: u8 = 50;

/// The default limit of the server as a whole, over every tool, read and prompt: as many
/// calls running as tokio's blocking pool has threads (512; past that, blocking handlers
/// queue there anyway), as many waiting, and each tenant at most half of both.
pub const DEFAULT_SERVER_CONCURRENCY: Concurrency = Concurrency {
    max_active: 512,
    max_queued: 512,
    retry_after: Duration::from_secs(1),
    tenant_share_percent: DEFAULT_TENANT_SHARE_PERCENT,
};

impl Concurrency {
    /// `max_active` at once, `max_queued` waiting, retry hint of one second, each tenant at
    /// most half of both.
    pub fn new(max_active: usize, max_queued: usize) -> Self {
        Concurrency {
            max_active: max_active.max(1),
            max_queued,
            retry_after: Duration::from_secs(1),
            tenant_share_percent: DEFAULT_TENANT_SHARE_PERCENT,
        }
    }

    /// The same, each tenant taking at most `percent` of the slots and seats (1 to 100).
    #[must_use]
    pub fn with_tenant_share(mut self, percent: u8) -> Self {
        self.tenant_share_percent = percent.clamp(1, 100);
        self
    }

    /// How many of `total` one tenant may take: its share, at least one.
    fn tenant_part(&self, total: usize) -> usize {
        (total * usize::from(self.tenant_share_percent) / 100).max(1)
    }
}

/// How calls of an action are serialized.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Serialization {
    /// The verb decides: destructive actions are serialized per action, others are not.
    #[default]
    ByVerb,
    /// One call at a time for the whole action.
    PerAction,
    /// One call at a time per value of this argument (e.g. per invoice id).
    PerArgument(String),
    /// No serialization.
    Off,
}

/// A lock shared by every replica of a server (a database's advisory lock, say), taken by each
/// serialized call after its turn of the in-process FIFO lock and held until the call ends.
///
/// The in-process lock orders the calls of one process; this one makes the serialization hold
/// across processes. Install it with
/// [`ServerBuilder::serialization_lock`](crate::ServerBuilder::serialization_lock).
pub trait SerializationLock: Send + Sync + 'static {
    /// Waits until this process holds the lock named `key`, and returns what releases it when
    /// dropped. `key` is the action's key, a `/`, then its FIFO key: for a call of a tenant,
    /// the tenant's id as a JSON string and a `/`; then the JSON of the serializing argument
    /// once validated (`billing.void_invoice/"t_777"/"INV-7"`), or `*` for a per-action lock.
    /// An error (the lock's store is down, the wait timed out) is the call's
    /// answer; make it retryable when a later call may succeed.
    fn acquire<'a>(
        &'a self,
        key: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<Box<dyn Send + 'static>, ToolError>>;
}

/// What a call holds and gives back while it waits on its client (see
/// [`waiting`](crate::waiting)): lent when a question starts, taken back once it is answered.
pub(crate) trait Lend: Send + Sync {
    fn lend(&self);
    fn resume(&self) -> futures::future::BoxFuture<'_, Result<(), ToolError>>;
}

/// A rate limit: at most `max` calls per `per`, for each caller (SPEC G1). Beyond it a call gets
/// `RATE_LIMITED` with the time to wait, before its arguments are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Calls allowed in a window.
    pub max: u32,
    /// The window.
    pub per: Duration,
}

impl RateLimit {
    /// At most `max` calls per `per` (a token bucket: `max` at once, refilled over `per`).
    pub fn new(max: u32, per: Duration) -> Self {
        RateLimit {
            max: max.max(1),
            per: per.max(Duration::from_millis(1)),
        }
    }
}

/// The buckets of one rate limit, one per caller. Buckets that are full again are forgotten
/// when the map grows, so idle callers cost no memory.
pub(crate) struct RateLimiter {
    limit: RateLimit,
    buckets: Mutex<HashMap<String, Bucket>>,
}

struct Bucket {
    tokens: f64,
    updated: std::time::Instant,
}

/// How many callers' buckets are kept before the full ones are swept.
const BUCKETS_BEFORE_SWEEP: usize = 4096;

impl RateLimiter {
    pub(crate) fn new(limit: RateLimit) -> Self {
        RateLimiter {
            limit,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one call's token for `caller`, or says how long to wait for one.
    pub(crate) fn admit(&self, caller: &str) -> Result<(), Duration> {
        let now = std::time::Instant::now();
        let capacity = f64::from(self.limit.max);
        let per_token = self.limit.per.as_secs_f64() / capacity;
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if buckets.len() >= BUCKETS_BEFORE_SWEEP && !buckets.contains_key(caller) {
            buckets.retain(|_, bucket| {
                let refilled =
                    bucket.tokens + now.duration_since(bucket.updated).as_secs_f64() / per_token;
                refilled < capacity
            });
        }
        let bucket = buckets.entry(caller.to_owned()).or_insert(Bucket {
            tokens: capacity,
            updated: now,
        });
        let refilled = now.duration_since(bucket.updated).as_secs_f64() / per_token;
        bucket.tokens = (bucket.tokens + refilled).min(capacity);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) * per_token))
        }
    }

    pub(crate) fn limit(&self) -> RateLimit {
        self.limit
    }
}

/// The concurrency limit of one action (or upstream); cloning shares it.
#[derive(Clone)]
pub(crate) struct ConcurrencyGuard(Arc<Limiter>);

struct Limiter {
    limits: Concurrency,
    /// Whether it is the server's limit, not one tool's: the refusal says which.
    whole_server: bool,
    slots: Arc<Gate>,
    queued: AtomicUsize,
    /// The tenants with calls in the guard (running, queued, or waiting on a person).
    tenants: Mutex<HashMap<Arc<str>, TenantCalls>>,
}

struct TenantCalls {
    /// The tenant's id, shared by its seats.
    id: Arc<str>,
    /// Its calls in the guard.
    seats: usize,
    /// Its share of the running slots.
    running: Arc<Gate>,
}

/// A call's place in the guard; released on drop. While the call waits on a person its
/// permits are given back ([`Slot::lend`]) and its tenant's seat is kept: the waiting call
/// counts against its own tenant's share only.
pub(crate) struct Slot {
    permit: Option<Taken>,
    tenant: Option<TenantSeat>,
}

/// One of a tenant's seats in a guard, with its running permit while it runs.
struct TenantSeat {
    limiter: Arc<Limiter>,
    /// The key of its tenant in the guard's map (shared, not copied, per call).
    tenant: Arc<str>,
    running: Arc<Gate>,
    permit: Option<Taken>,
}

impl Drop for TenantSeat {
    fn drop(&mut self) {
        self.permit.take();
        let mut tenants = self
            .limiter
            .tenants
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(calls) = tenants.get_mut(&*self.tenant) {
            calls.seats -= 1;
            if calls.seats == 0 {
                tenants.remove(&*self.tenant);
            }
        }
    }
}

impl ConcurrencyGuard {
    pub(crate) fn new(limits: Concurrency) -> Self {
        Self::limiting(limits, false)
    }

    /// The limit of the server as a whole (see [`ServerBuilder::server_concurrency`]).
    ///
    /// [`ServerBuilder::server_concurrency`]: crate::ServerBuilder::server_concurrency
    pub(crate) fn for_server(limits: Concurrency) -> Self {
        Self::limiting(limits, true)
    }

    fn limiting(limits: Concurrency, whole_server: bool) -> Self {
        ConcurrencyGuard(Arc::new(Limiter {
            limits,
            whole_server,
            slots: Arc::new(Gate::new(limits.max_active)),
            queued: AtomicUsize::new(0),
            tenants: Mutex::new(HashMap::new()),
        }))
    }

    fn busy(&self) -> ToolError {
        let retry_after = self.0.limits.retry_after;
        if self.0.whole_server {
            ToolError::server_full(retry_after)
        } else {
            ToolError::server_busy(retry_after)
        }
    }

    /// A slot now, or after waiting in the bounded queue, or `SERVER_BUSY` at once; for a call
    /// of `tenant`, within that tenant's share.
    pub(crate) async fn enter(&self, tenant: Option<&str>) -> Result<Slot, ToolError> {
        let mut seat = match tenant {
            Some(tenant) if self.0.limits.tenant_share_percent < 100 => Some(self.seat(tenant)?),
            _ => None,
        };
        if let Some(seat) = &mut seat {
            seat.run().await;
        }
        let limiter = &self.0;
        if let Some(permit) = Gate::try_take(&limiter.slots) {
            return Ok(Slot {
                permit: Some(permit),
                tenant: seat,
            });
        }
        let position = limiter.queued.fetch_add(1, Ordering::AcqRel);
        let _leave = QueueSeat(&limiter.queued);
        if position >= limiter.limits.max_queued {
            return Err(self.busy());
        }
        Ok(Slot {
            permit: Some(Gate::take(&limiter.slots).await),
            tenant: seat,
        })
    }

    /// A seat of `tenant`, or `SERVER_BUSY` when its calls fill its share already.
    fn seat(&self, tenant: &str) -> Result<TenantSeat, ToolError> {
        let limits = &self.0.limits;
        let mut tenants = self
            .0
            .tenants
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Looked up by `&str`: the tenant's id is copied only when it has no call in the guard.
        let calls = if tenants.contains_key(tenant) {
            tenants.get_mut(tenant)
        } else {
            let id: Arc<str> = Arc::from(tenant);
            Some(tenants.entry(Arc::clone(&id)).or_insert(TenantCalls {
                id,
                seats: 0,
                running: Arc::new(Gate::new(limits.tenant_part(limits.max_active))),
            }))
        }
        .ok_or_else(|| self.busy())?;
        if calls.seats >= limits.tenant_part(limits.max_active + limits.max_queued) {
            return Err(self.busy());
        }
        calls.seats += 1;
        Ok(TenantSeat {
            limiter: Arc::clone(&self.0),
            tenant: Arc::clone(&calls.id),
            running: Arc::clone(&calls.running),
            permit: None,
        })
    }

    /// Takes back the permits `slot` lent while its call waited on a person: it waits for a
    /// running slot like a queued call, without counting against the queue (it was let in).
    pub(crate) async fn resume(&self, slot: &mut Slot) {
        if let Some(seat) = &mut slot.tenant {
            seat.run().await;
        }
        if slot.permit.is_none() {
            slot.permit = Some(Gate::take(&self.0.slots).await);
        }
    }
}

impl TenantSeat {
    /// Waits for one of the tenant's running slots.
    async fn run(&mut self) {
        if self.permit.is_none() {
            self.permit = Some(Gate::take(&self.running).await);
        }
    }
}

impl Slot {
    /// Gives back the running permits (the tool's and the tenant's) while the call waits on a
    /// person; the tenant's seat stays taken.
    pub(crate) fn lend(&mut self) {
        self.permit.take();
        if let Some(seat) = &mut self.tenant {
            seat.permit.take();
        }
    }
}

/// Counted running slots: taken with one atomic operation while some are free (the path of
/// nearly every call, with no lock and no allocation), waited for otherwise, each freed slot
/// waking a waiter. Not strictly first come, first served: a call arriving as a slot frees may
/// take it before a woken waiter, which then waits again (each tenant's share bounds what it
/// can take meanwhile).
pub(crate) struct Gate {
    free: AtomicUsize,
    /// Calls waiting for a slot: a freed slot wakes one only when some wait.
    waiting: AtomicUsize,
    freed: Notify,
}

/// A slot taken from a [`Gate`], freed when dropped.
pub(crate) struct Taken(Arc<Gate>);

impl Drop for Taken {
    fn drop(&mut self) {
        let gate = &self.0;
        // Sequentially consistent with `take`'s count of waiters: either this sees the waiter,
        // or the waiter sees the slot this frees.
        gate.free.fetch_add(1, Ordering::SeqCst);
        if gate.waiting.load(Ordering::SeqCst) > 0 {
            gate.freed.notify_one();
        }
    }
}

impl Gate {
    fn new(slots: usize) -> Self {
        Gate {
            free: AtomicUsize::new(slots),
            waiting: AtomicUsize::new(0),
            freed: Notify::new(),
        }
    }

    /// A slot if one is free now.
    fn try_take(gate: &Arc<Gate>) -> Option<Taken> {
        gate.free
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |free| {
                free.checked_sub(1)
            })
            .ok()
            .map(|_| Taken(Arc::clone(gate)))
    }

    /// A slot, once one is free.
    async fn take(gate: &Arc<Gate>) -> Taken {
        if let Some(taken) = Gate::try_take(gate) {
            return taken;
        }
        gate.waiting.fetch_add(1, Ordering::SeqCst);
        let _leave = QueueSeat(&gate.waiting);
        loop {
            // Registered before looking again, so that a slot freed in between wakes it.
            let notified = gate.freed.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if let Some(taken) = Gate::try_take(gate) {
                return taken;
            }
            notified.await;
        }
    }
}

/// Leaves the queue when dropped, whether the call got a slot, was refused or was cancelled.
struct QueueSeat<'a>(&'a AtomicUsize);

impl Drop for QueueSeat<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The FIFO locks of an action (tokio's mutex queues waiters in arrival order), one per tenant
/// and, for a per-argument lock, per value; cloning shares them.
#[derive(Clone)]
pub(crate) struct SerialGuard {
    /// The serializing argument; none for a per-action lock.
    argument: Option<String>,
    locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

/// A held serialization lock; released on drop (and forgotten when nobody else wants it).
pub(crate) struct Turn {
    key: String,
    guard: Option<OwnedMutexGuard<()>>,
    locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        // Release first, then forget the key if nobody else holds or waits for it: under the
        // map's lock, no one can clone the entry meanwhile.
        self.guard.take();
        if let Some(lock) = locks.get(&self.key)
            && Arc::strong_count(lock) == 1
        {
            locks.remove(&self.key);
        }
    }
}

impl SerialGuard {
    pub(crate) fn per_action() -> Self {
        SerialGuard {
            argument: None,
            locks: Arc::default(),
        }
    }

    pub(crate) fn per_argument(name: String) -> Self {
        SerialGuard {
            argument: Some(name),
            locks: Arc::default(),
        }
    }

    /// The serializing argument; none for a per-action lock.
    pub(crate) fn argument(&self) -> Option<&str> {
        self.argument.as_deref()
    }

    /// The value part of a call's key: the JSON of its serializing argument (`null` when
    /// absent), or nothing for a per-action lock. Taken before the handler reads the
    /// arguments, and used only once they are validated, so that equal values of the right
    /// type share a lock.
    pub(crate) fn key_of(&self, args: &JsonObject) -> Option<String> {
        self.argument.as_ref().map(|name| {
            args.get(name)
                .map_or_else(|| "null".to_owned(), ToString::to_string)
        })
    }

    /// The whole FIFO key of a call of `tenant` whose value part is `value`: the tenant's id
    /// as a JSON string and a `/` (so that no id can pass for another tenant's), then the
    /// value or `*`. Without a tenant, the value alone.
    pub(crate) fn scoped(tenant: Option<&str>, value: Option<&str>) -> String {
        let value = value.unwrap_or("*");
        match tenant {
            Some(tenant) => format!("{}/{value}", Value::from(tenant)),
            None => value.to_owned(),
        }
    }

    /// Waits for the turn of the calls of `key` (from [`SerialGuard::scoped`]).
    pub(crate) async fn turn(&self, key: &str) -> Turn {
        let lock = {
            let mut map = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(map.entry(key.to_owned()).or_default())
        };
        let guard = lock.lock_owned().await;
        Turn {
            key: key.to_owned(),
            guard: Some(guard),
            locks: Arc::clone(&self.locks),
        }
    }

    #[cfg(test)]
    fn live_keys(&self) -> usize {
        self.locks.lock().map(|map| map.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn beyond_active_and_queued_calls_are_refused_at_once() {
        let guard = ConcurrencyGuard::new(Concurrency::new(1, 1));
        let running = guard.enter(None).await.expect("a free slot");
        let waiting = {
            let guard = guard.clone();
            tokio::spawn(async move { guard.enter(None).await.map(|_| ()) })
        };
        // Let the second call take its seat in the queue.
        while guard.0.queued.load(Ordering::Acquire) == 0 {
            tokio::task::yield_now().await;
        }
        let refused = guard.enter(None).await.err().expect("the queue is full");
        assert_eq!(refused.code(), "SERVER_BUSY");
        assert_eq!(refused.retry_after(), Some(Duration::from_secs(1)));
        drop(running);
        waiting
            .await
            .unwrap()
            .expect("the queued call runs once a slot frees");
        assert_eq!(guard.0.queued.load(Ordering::Acquire), 0);
    }

    #[tokio::test]
    async fn one_tenant_takes_only_its_share_and_leaves_the_rest_to_others() {
        // 4 running, 4 queued; a tenant may hold 2 running and 4 in all.
        let guard = ConcurrencyGuard::new(Concurrency::new(4, 4));
        let mut b_calls = Vec::new();
        for _ in 0..2 {
            b_calls.push(guard.enter(Some("b")).await.expect("within B's share"));
        }
        let b_waiting: Vec<_> = (0..2)
            .map(|_| {
                let guard = guard.clone();
                tokio::spawn(async move { guard.enter(Some("b")).await.map(|_| ()) })
            })
            .collect();
        tokio::task::yield_now().await;
        while guard.0.tenants.lock().unwrap()["b"].seats < 4 {
            tokio::task::yield_now().await;
        }
        let refused = guard
            .enter(Some("b"))
            .await
            .err()
            .expect("B's share is full");
        assert_eq!(refused.code(), "SERVER_BUSY");
        // A still runs at once, on the slots B may not take.
        let a = guard.enter(Some("a")).await.expect("A's share");
        let a_too = guard.enter(Some("a")).await.expect("A's share");
        drop((a, a_too));
        // A call that waits on a person lends its running slots but keeps its seat.
        let mut asking = b_calls.pop().unwrap();
        asking.lend();
        for waiting in b_waiting.into_iter().take(1) {
            waiting
                .await
                .unwrap()
                .expect("B's queued call runs on the lent slot");
        }
        guard.resume(&mut asking).await;
        drop(asking);
        drop(b_calls);
        assert!(guard.0.tenants.lock().unwrap().len() <= 1);
    }

    #[tokio::test]
    async fn a_serialized_call_waits_only_for_its_own_tenants_call_on_the_same_value() {
        let guard = SerialGuard::per_argument("id".into());
        let args = json!({"id": "INV-3"}).as_object().cloned().unwrap();
        let value = guard.key_of(&args);
        let b_key = SerialGuard::scoped(Some("b"), value.as_deref());
        let a_key = SerialGuard::scoped(Some("a"), value.as_deref());
        assert_eq!(b_key, r#""b"/"INV-3""#);
        let b_turn = guard.turn(&b_key).await;
        // A's INV-3 is another invoice: its turn comes at once.
        let a_turn = tokio::time::timeout(Duration::from_secs(1), guard.turn(&a_key))
            .await
            .expect("A does not wait for B");
        // B's second call on its INV-3 waits.
        assert!(
            tokio::time::timeout(Duration::from_millis(50), guard.turn(&b_key))
                .await
                .is_err()
        );
        drop((a_turn, b_turn));
        // Per action, too: one turn per tenant.
        let per_action = SerialGuard::per_action();
        let _b = per_action.turn(&SerialGuard::scoped(Some("b"), None)).await;
        tokio::time::timeout(
            Duration::from_secs(1),
            per_action.turn(&SerialGuard::scoped(Some("a"), None)),
        )
        .await
        .expect("A does not wait for B");
    }

    #[test]
    fn a_rate_limit_admits_a_burst_then_says_how_long_to_wait_per_caller() {
        let limiter = RateLimiter::new(RateLimit::new(2, Duration::from_secs(60)));
        assert_eq!(limiter.admit("a"), Ok(()));
        assert_eq!(limiter.admit("a"), Ok(()));
        let wait = limiter.admit("a").expect_err("the third call waits");
        assert!(
            wait > Duration::from_secs(29) && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        // Another caller has a bucket of its own.
        assert_eq!(limiter.admit("b"), Ok(()));
    }

    #[test]
    fn full_buckets_are_swept_when_the_map_grows() {
        let limiter = RateLimiter::new(RateLimit::new(1, Duration::from_millis(1)));
        for caller in 0..BUCKETS_BEFORE_SWEEP {
            let _ = limiter.admit(&caller.to_string());
        }
        std::thread::sleep(Duration::from_millis(5));
        let _ = limiter.admit("new");
        assert_eq!(limiter.buckets.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn keyed_locks_are_forgotten_when_released() {
        let guard = SerialGuard::per_argument("id".into());
        let one = json!({"id": "INV-1"}).as_object().cloned().unwrap();
        let two = json!({"id": "INV-2"}).as_object().cloned().unwrap();
        let first = guard
            .turn(&SerialGuard::scoped(None, guard.key_of(&one).as_deref()))
            .await;
        let other = guard
            .turn(&SerialGuard::scoped(None, guard.key_of(&two).as_deref()))
            .await;
        assert_eq!(guard.live_keys(), 2);
        drop(first);
        drop(other);
        assert_eq!(guard.live_keys(), 0);
    }
}

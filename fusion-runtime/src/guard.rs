//! Guards around the handler (SPEC G1–G3), configured per action and free when not configured.
//!
//! - **Concurrency** ([`Concurrency`]): at most `max_active` calls run at once, at most
//!   `max_queued` wait; beyond that a call gets `SERVER_BUSY` with a retry hint at once.
//! - **Serialization** ([`Serialization`]): calls of a destructive action run one at a time, in
//!   arrival order (FIFO), per action or per value of one argument.
//! - **Egress budget** (`max_bytes`): a result whose data is larger is cut at item boundaries.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::JsonObject;
use tokio::sync::{OwnedMutexGuard, OwnedSemaphorePermit, Semaphore};

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
}

impl Concurrency {
    /// `max_active` at once, `max_queued` waiting, retry hint of one second.
    pub fn new(max_active: usize, max_queued: usize) -> Self {
        Concurrency {
            max_active: max_active.max(1),
            max_queued,
            retry_after: Duration::from_secs(1),
        }
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
    /// dropped. `key` is the action's key, a `/`, then its FIFO key: the JSON of the
    /// serializing argument once validated (`billing.void_invoice/"INV-7"`), or `*` for a
    /// per-action lock. An error (the lock's store is down, the wait timed out) is the call's
    /// answer; make it retryable when a later call may succeed.
    fn acquire<'a>(
        &'a self,
        key: &'a str,
    ) -> futures::future::BoxFuture<'a, Result<Box<dyn Send + 'static>, ToolError>>;
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

pub(crate) struct ConcurrencyGuard {
    limits: Concurrency,
    slots: Arc<Semaphore>,
    queued: AtomicUsize,
}

/// A running call's slot; released on drop.
pub(crate) struct Slot {
    _permit: OwnedSemaphorePermit,
}

impl ConcurrencyGuard {
    pub(crate) fn new(limits: Concurrency) -> Self {
        ConcurrencyGuard {
            limits,
            slots: Arc::new(Semaphore::new(limits.max_active)),
            queued: AtomicUsize::new(0),
        }
    }

    /// A slot now, or after waiting in the bounded queue, or `SERVER_BUSY` at once.
    pub(crate) async fn enter(&self) -> Result<Slot, ToolError> {
        if let Ok(permit) = Arc::clone(&self.slots).try_acquire_owned() {
            return Ok(Slot { _permit: permit });
        }
        let position = self.queued.fetch_add(1, Ordering::AcqRel);
        let _leave = QueueSeat(&self.queued);
        if position >= self.limits.max_queued {
            return Err(ToolError::server_busy(self.limits.retry_after));
        }
        match Arc::clone(&self.slots).acquire_owned().await {
            Ok(permit) => Ok(Slot { _permit: permit }),
            Err(_) => Err(ToolError::server_busy(self.limits.retry_after)),
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

/// The FIFO lock of an action (tokio's mutex queues waiters in arrival order).
pub(crate) enum SerialGuard {
    Action(Arc<tokio::sync::Mutex<()>>),
    Argument {
        name: String,
        locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
    },
}

/// A held serialization lock; released on drop.
// Held for its `Drop`: the lock is released when the call ends.
#[allow(dead_code)]
pub(crate) enum Turn {
    Action(OwnedMutexGuard<()>),
    Argument(KeyedTurn),
}

pub(crate) struct KeyedTurn {
    key: String,
    guard: Option<OwnedMutexGuard<()>>,
    locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

impl Drop for KeyedTurn {
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
        SerialGuard::Action(Arc::new(tokio::sync::Mutex::new(())))
    }

    pub(crate) fn per_argument(name: String) -> Self {
        SerialGuard::Argument {
            name,
            locks: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The key of a call's turn: the JSON of its serializing argument (`null` when absent), or
    /// nothing for a per-action lock. Taken before the handler reads the arguments, and used
    /// only once they are validated, so that equal values of the right type share a lock.
    pub(crate) fn key_of(&self, args: &JsonObject) -> Option<String> {
        match self {
            SerialGuard::Action(_) => None,
            SerialGuard::Argument { name, .. } => Some(
                args.get(name)
                    .map_or_else(|| "null".to_owned(), ToString::to_string),
            ),
        }
    }

    /// Waits for this call's turn.
    pub(crate) async fn turn(&self, key: Option<String>) -> Turn {
        match self {
            SerialGuard::Action(lock) => Turn::Action(Arc::clone(lock).lock_owned().await),
            SerialGuard::Argument { locks, .. } => {
                let key = key.unwrap_or_else(|| "null".to_owned());
                let lock = {
                    let mut map = locks.lock().unwrap_or_else(PoisonError::into_inner);
                    Arc::clone(map.entry(key.clone()).or_default())
                };
                let guard = lock.lock_owned().await;
                Turn::Argument(KeyedTurn {
                    key,
                    guard: Some(guard),
                    locks: Arc::clone(locks),
                })
            }
        }
    }

    #[cfg(test)]
    fn live_keys(&self) -> usize {
        match self {
            SerialGuard::Action(_) => 0,
            SerialGuard::Argument { locks, .. } => locks.lock().map(|map| map.len()).unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn beyond_active_and_queued_calls_are_refused_at_once() {
        let guard = Arc::new(ConcurrencyGuard::new(Concurrency::new(1, 1)));
        let running = guard.enter().await.expect("a free slot");
        let waiting = {
            let guard = Arc::clone(&guard);
            tokio::spawn(async move { guard.enter().await.map(|_| ()) })
        };
        // Let the second call take its seat in the queue.
        while guard.queued.load(Ordering::Acquire) == 0 {
            tokio::task::yield_now().await;
        }
        let refused = guard.enter().await.err().expect("the queue is full");
        assert_eq!(refused.code(), "SERVER_BUSY");
        assert_eq!(refused.retry_after(), Some(Duration::from_secs(1)));
        drop(running);
        waiting
            .await
            .unwrap()
            .expect("the queued call runs once a slot frees");
        assert_eq!(guard.queued.load(Ordering::Acquire), 0);
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
        let first = guard.turn(guard.key_of(&one)).await;
        let other = guard.turn(guard.key_of(&two)).await;
        assert_eq!(guard.live_keys(), 2);
        drop(first);
        drop(other);
        assert_eq!(guard.live_keys(), 0);
    }
}

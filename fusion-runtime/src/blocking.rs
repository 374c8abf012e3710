//! Blocking work off the async workers (SPEC R1): a handler that calls a synchronous store
//! (SQLite, a file, a blocking client) runs that call with [`blocking`].
//!
//! Why it matters: a server has a few async worker threads (one per core) shared by every
//! call of every client. A synchronous call that waits on a lock, a busy database or a disk
//! holds one of them for as long as it waits; a handful of such waits and every other call —
//! reads, other tenants, `tools/list` — waits behind them. [`blocking`] moves the work to
//! tokio's blocking pool, so only the calls that need the slow resource wait for it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::task::JoinHandle;

use crate::error::{ToolError, panicked};

/// Runs `work` on tokio's blocking pool and waits for it without holding an async worker.
///
/// - **Result**: whatever `work` returns, as `Ok`; a closure returning a `Result` gives
///   `Result<Result<T, E>, ToolError>`, hence the `??` below.
/// - **Panics** in `work` become an `INTERNAL_ERROR` (the panic text is logged under the
///   `errorId`, never shown), as a panic in the handler itself does.
/// - **Cancellation**: when the call is cancelled, the pipeline drops the handler's future, and
///   with it this one; work that has not started yet then never starts. Work that has started
///   runs to its end (a thread cannot be stopped safely) and its result is dropped, so a
///   cancelled write may still have happened: give retried writes an idempotency key.
///
/// Call it from a handler (or anything running on a tokio runtime); outside a runtime it panics,
/// as [`tokio::task::spawn_blocking`] does.
///
/// ```
/// use fusion_runtime::{ToolError, blocking};
///
/// /// A synchronous store: each call may wait on a lock.
/// fn total_of(id: &str) -> Result<i64, std::io::Error> {
///     Ok(id.len() as i64 * 100)
/// }
///
/// async fn handler(id: String) -> Result<i64, ToolError> {
///     // The outer `?` is the blocking pool's (a panic), the inner one the store's own error.
///     let total = blocking(move || total_of(&id)).await??;
///     Ok(total)
/// }
/// # tokio::runtime::Builder::new_multi_thread().build().unwrap().block_on(async {
/// assert_eq!(handler("INV-7".into()).await.unwrap(), 500);
/// let panicked = blocking(|| -> i64 { panic!("bug") }).await.unwrap_err();
/// assert_eq!(panicked.code(), "INTERNAL_ERROR");
/// # });
/// ```
pub async fn blocking<T, F>(work: F) -> Result<T, ToolError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Blocking(tokio::task::spawn_blocking(work)).await
}

/// The blocking task of one [`blocking`] call; dropping it before the task started keeps the
/// task from ever starting.
struct Blocking<T>(JoinHandle<T>);

impl<T> Future for Blocking<T> {
    type Output = Result<T, ToolError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map(|joined| {
            joined.map_err(|error| match error.try_into_panic() {
                Ok(panic) => panicked("a blocking task", panic),
                // Aborted from outside (only this type aborts it, on drop) or the runtime is
                // shutting down: the work did not finish.
                Err(_) => ToolError::internal_message(
                    "a blocking task was cancelled: the runtime is shutting down",
                ),
            })
        })
    }
}

impl<T> Drop for Blocking<T> {
    fn drop(&mut self) {
        // A no-op once the task has started or finished; before that, it never starts.
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn blocking_work_leaves_the_worker_free() {
        // One worker: if the sleep held it, the timer below could not fire before the sleep ends.
        let slow = tokio::spawn(blocking(|| std::thread::sleep(Duration::from_millis(400))));
        let started = Instant::now();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(started.elapsed() < Duration::from_millis(300));
        slow.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_panic_is_an_internal_error() {
        let error = blocking(|| -> u8 { panic!("the store broke") })
            .await
            .unwrap_err();
        assert!(error.is_internal());
        assert!(!error.message().contains("the store broke"));
    }

    #[test]
    fn work_dropped_before_it_starts_never_runs() {
        // Keep the only blocking thread busy, so the second task waits in the queue.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(1)
            .enable_time()
            .build()
            .unwrap();
        let ran = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ran);
        runtime.block_on(async move {
            let busy = tokio::spawn(blocking(|| std::thread::sleep(Duration::from_millis(200))));
            tokio::time::sleep(Duration::from_millis(20)).await;
            let queued = blocking(move || flag.store(true, Ordering::SeqCst));
            // Polled once, then dropped: what a cancelled call does to its handler.
            let _ = tokio::time::timeout(Duration::from_millis(10), queued).await;
            busy.await.unwrap().unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        });
        runtime.shutdown_timeout(Duration::from_secs(1));
        assert!(!ran.load(Ordering::SeqCst), "dropped work must not start");
    }
}

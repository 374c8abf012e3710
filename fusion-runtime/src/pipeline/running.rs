//! What runs user code on the request path: panics become `INTERNAL_ERROR`s (logged, never
//! shown) and the server keeps serving; a cancelled request stops its handler.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::context::CallContext;
use crate::error::{ToolError, codes, panicked};
use crate::present::Presentation;
use crate::spec::ReadyCall;

/// A handler's future, once started.
type Started<T> = Pin<Box<dyn Future<Output = Result<T, ToolError>> + Send>>;

/// A running handler (a tool's or a prompt's): a panic becomes an `INTERNAL_ERROR` and the
/// server keeps serving; a cancelled request drops the handler's future and yields `CANCELLED`.
/// One future doing both, polled directly: the cancellation is only armed once the handler has
/// had to wait (cheaper than racing the two, which builds the cancellation's future per call).
pub(crate) struct Running<T: Ran = Presentation> {
    handler: Option<Started<T>>,
    early: Option<ToolError>,
    cancellation: CancellationToken,
    cancelled: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
}

/// What a handler gives: it names the handler in a panic's log (a constant, so that a running
/// handler carries no more than it did when only tools had one).
pub(crate) trait Ran {
    const STAGE: &'static str;
}

impl Ran for Presentation {
    const STAGE: &'static str = "the handler";
}

impl Ran for crate::prompt::PromptMessages {
    const STAGE: &'static str = "the prompt";
}

impl Running {
    /// A tool's handler with its arguments read, running.
    pub(crate) fn new(call: ReadyCall, context: CallContext) -> Self {
        Running::start(context, |context| call.run(context))
    }
}

impl<T: Ran> Running<T> {
    /// Starts the handler `start` gives for `context`.
    pub(crate) fn start(
        context: CallContext,
        start: impl FnOnce(CallContext) -> Started<T>,
    ) -> Self {
        let cancellation = context.cancellation.clone();
        let (handler, early) = match std::panic::catch_unwind(AssertUnwindSafe(|| start(context))) {
            Ok(future) => (Some(future), None),
            Err(panic) => (None, Some(panicked(T::STAGE, panic))),
        };
        Running {
            handler,
            early,
            cancellation,
            cancelled: None,
        }
    }
}

impl<T: Ran> Future for Running<T> {
    type Output = Result<T, ToolError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(error) = this.early.take() {
            return Poll::Ready(Err(error));
        }
        let Some(handler) = this.handler.as_mut() else {
            return Poll::Ready(Err(ToolError::internal_message(
                "a finished handler was polled again",
            )));
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| handler.as_mut().poll(cx))) {
            Ok(Poll::Ready(outcome)) => return Poll::Ready(outcome),
            Err(panic) => {
                this.handler = None;
                return Poll::Ready(Err(panicked(T::STAGE, panic)));
            }
            Ok(Poll::Pending) => {}
        }
        let cancellation = &this.cancellation;
        let cancelled = this
            .cancelled
            .get_or_insert_with(|| Box::pin(cancellation.clone().cancelled_owned()));
        if cancelled.as_mut().poll(cx).is_ready() {
            // Dropping the handler's future stops it.
            this.handler = None;
            return Poll::Ready(Err(ToolError::new(
                codes::CANCELLED,
                "The request was cancelled.",
            )));
        }
        Poll::Pending
    }
}

/// A future of the call's path (middleware and guards) whose panic becomes an `INTERNAL_ERROR`:
/// the panic is logged under the error id and the server keeps serving. Only wrapped around
/// calls that have middleware or guards; a bare call has [`Running`] alone.
pub(crate) struct CatchPanic<F> {
    future: Option<F>,
    stage: &'static str,
}

impl<F> CatchPanic<F> {
    pub(crate) fn new(future: F, stage: &'static str) -> Self {
        CatchPanic {
            future: Some(future),
            stage,
        }
    }
}

impl<F, T> Future for CatchPanic<F>
where
    F: Future<Output = Result<T, ToolError>> + Unpin,
{
    type Output = Result<T, ToolError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Some(future) = this.future.as_mut() else {
            return Poll::Ready(Err(ToolError::internal_message(
                "a finished call was polled again",
            )));
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| Pin::new(future).poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(outcome)) => {
                this.future = None;
                Poll::Ready(outcome)
            }
            Err(panic) => {
                // Never polled again: dropped now, releasing whatever it held.
                this.future = None;
                Poll::Ready(Err(panicked(this.stage, panic)))
            }
        }
    }
}

/// Runs synchronous user code (an access policy, an argument reader), its panic an
/// `INTERNAL_ERROR` that logs it.
pub(crate) fn catch_panic<T>(stage: &str, f: impl FnOnce() -> T) -> Result<T, ToolError> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|panic| panicked(stage, panic))
}

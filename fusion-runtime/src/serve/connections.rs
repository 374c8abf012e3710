//! The HTTP server behind [`Mcp::serve_http_on`](super::Mcp::serve_http_on): hyper on an accept
//! loop of our own, so that every connection is bounded. A connection is refused beyond the
//! cap; one that sends a request head too slowly, stays idle too long between requests, or
//! stops reading what it is sent is closed; shutdown waits for open connections only so long.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::Body;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;

use super::Tally;

/// The bounds of each connection, from [`HttpOptions`](super::HttpOptions).
#[derive(Debug, Clone, Copy)]
pub(super) struct ConnectionLimits {
    pub(super) header_read_timeout: Duration,
    pub(super) idle_timeout: Duration,
    pub(super) write_timeout: Duration,
    pub(super) max_connections: usize,
    pub(super) shutdown_timeout: Duration,
}

/// Refused connections answered at once (a 503, then a short wait for the client's close);
/// beyond this many, an excess connection is closed without a word.
const REFUSALS_IN_FLIGHT: usize = 64;
/// How long a refused connection is kept for its client to send a request and read the 503.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);
/// How much of a refused connection's request is read, at most, before the 503 is sent.
const REFUSAL_HEAD_BYTES: usize = 16 * 1024;
/// What an excess connection is told: a JSON-RPC error a client can show.
static BUSY: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| {
    let body = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Server busy: too many open connections, retry later"}}"#;
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
});

/// Serves `router` on `listener` until `signal` completes, then shuts down: no new
/// connections, open ones told to finish (hyper closes idle ones at once and each busy one
/// after its response), and after `shutdown_timeout` whatever is left is dropped.
pub(super) async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: ConnectionLimits,
    signal: impl Future<Output = ()>,
) {
    let mut builder = Builder::new(TokioExecutor::new());
    // The header and idle deadlines are kept by `BoundedIo`: hyper's own header timer starts
    // when a connection becomes idle, so it cannot tell the two apart.
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(None);
    let builder = Arc::new(builder);
    let limits = capped_by_open_files(limits);
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let refusals = Arc::new(Semaphore::new(REFUSALS_IN_FLIGHT));
    let refused = Tally::default();
    let closing = CancellationToken::new();
    let mut connections = JoinSet::new();
    let mut signal = std::pin::pin!(signal);
    loop {
        tokio::select! {
            biased;
            () = &mut signal => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => match Arc::clone(&permits).try_acquire_owned() {
                    Ok(permit) => {
                        let connection = Connection {
                            router: router.clone(),
                            builder: Arc::clone(&builder),
                            limits,
                            closing: closing.clone(),
                        };
                        connections.spawn(async move {
                            connection.serve(stream).await;
                            drop(permit);
                        });
                    }
                    Err(_) => {
                        if let Some(count) = refused.record() {
                            tracing::warn!(
                                refused = count,
                                max_connections = limits.max_connections,
                                "refused connections over the connection cap"
                            );
                        }
                        refuse(stream, &refusals);
                    }
                },
                Err(error) if is_per_connection(&error) => {}
                Err(error) => {
                    // Out of file descriptors, most likely: wait for some to close.
                    tracing::warn!(%error, "cannot accept connections");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
    drop(listener);
    closing.cancel();
    let drained = tokio::time::timeout(limits.shutdown_timeout, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = connections.len(),
            timeout = ?limits.shutdown_timeout,
            "closing the connections still open at the shutdown timeout"
        );
        connections.shutdown().await;
    }
}

/// `limits`, with the connection cap below the process's open-files limit (raised to its hard
/// limit first), so that excess connections are refused before descriptors run out.
fn capped_by_open_files(mut limits: ConnectionLimits) -> ConnectionLimits {
    let Some(files) = super::descriptors::open_files_limit() else {
        return limits;
    };
    let cap = super::descriptors::cap_for(limits.max_connections, files, REFUSALS_IN_FLIGHT);
    if cap < limits.max_connections {
        tracing::warn!(
            max_connections = cap,
            configured = limits.max_connections,
            open_files = files,
            "the connection cap is lowered to fit the open-files limit (raise `ulimit -n`)"
        );
        limits.max_connections = cap;
    }
    limits
}

/// An accept error that concerns one connection only (the client gave up already).
fn is_per_connection(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Answers a connection over the cap with a 503 and closes it.
fn refuse(mut stream: TcpStream, slots: &Arc<Semaphore>) {
    let Ok(slot) = Arc::clone(slots).try_acquire_owned() else {
        return;
    };
    tokio::spawn(async move {
        let _slot = slot;
        let _ = tokio::time::timeout(REFUSAL_LINGER, async {
            // A client that gets a response before it has sent its request reports a broken
            // connection instead of the 503 (hyper's client does): the request head first.
            if !read_head(&mut stream).await? {
                return Ok(());
            }
            stream.write_all(&BUSY).await?;
            stream.shutdown().await?;
            // Closing with unread input would reset the connection, and the client could lose
            // the 503: read until it closes its side.
            let mut sink = [0u8; 1024];
            while stream.read(&mut sink).await? > 0 {}
            io::Result::Ok(())
        })
        .await;
    });
}

/// Reads until the end of a request head (a blank line), [`REFUSAL_HEAD_BYTES`] or the
/// client's close; says whether the client is still there to be answered.
async fn read_head(stream: &mut TcpStream) -> io::Result<bool> {
    let mut chunk = [0u8; 1024];
    // The last three bytes of the previous read, for a blank line split across two reads.
    let mut carry = [0u8; 3];
    let mut read_total = 0;
    while read_total < REFUSAL_HEAD_BYTES {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Ok(false);
        }
        read_total += read;
        let mut window = carry.to_vec();
        window.extend_from_slice(&chunk[..read]);
        if window.windows(4).any(|bytes| bytes == b"\r\n\r\n") {
            break;
        }
        let tail = &window[window.len() - 3..];
        carry.copy_from_slice(tail);
    }
    Ok(true)
}

struct Connection {
    router: axum::Router,
    builder: Arc<Builder<TokioExecutor>>,
    limits: ConnectionLimits,
    closing: CancellationToken,
}

impl Connection {
    async fn serve(self, stream: TcpStream) {
        // Without TCP_NODELAY, Nagle's algorithm meets delayed ACKs: 44 ms per call instead
        // of 0.5 ms, measured on our machines.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::warn!(%error, "could not set TCP_NODELAY");
        }
        let activity = Arc::new(Activity::new());
        let io = TokioIo::new(BoundedIo::new(stream, Arc::clone(&activity), self.limits));
        let router = self.router;
        let service = hyper::service::service_fn(move |request: http::Request<_>| {
            let request = request.map(Body::new);
            let in_flight = InFlight::new(Arc::clone(&activity));
            let response = tower::Service::call(&mut router.clone(), request);
            async move {
                let response = response.await?;
                Ok::<_, std::convert::Infallible>(response.map(|body| {
                    Body::new(Tracked {
                        body,
                        _in_flight: in_flight,
                    })
                }))
            }
        });
        let connection = self.builder.serve_connection(io, service);
        let mut connection = std::pin::pin!(connection);
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "connection ended with an error");
                }
                return;
            }
            () = self.closing.cancelled() => connection.as_mut().graceful_shutdown(),
        }
        if let Err(error) = connection.await {
            tracing::debug!(%error, "connection ended with an error during shutdown");
        }
    }
}

/// What the IO layer of a connection must know of its requests.
struct Activity {
    start: Instant,
    /// Requests whose response has not been sent in full.
    in_flight: AtomicUsize,
    /// Requests begun so far.
    begun: AtomicU64,
    /// When the connection last became idle, in nanoseconds since `start`.
    idle_since: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Activity {
            start: Instant::now(),
            in_flight: AtomicUsize::new(0),
            begun: AtomicU64::new(0),
            idle_since: AtomicU64::new(0),
        }
    }

    fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) == 0
    }

    fn idle_since(&self) -> Instant {
        self.start + Duration::from_nanos(self.idle_since.load(Ordering::SeqCst))
    }
}

/// One request, from its head until its response is sent or dropped.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn new(activity: Arc<Activity>) -> Self {
        activity.begun.fetch_add(1, Ordering::SeqCst);
        activity.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let elapsed = u64::try_from(self.0.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.0.idle_since.store(elapsed, Ordering::SeqCst);
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response body that keeps its request in flight until it is sent or dropped.
struct Tracked {
    body: Body,
    _in_flight: InFlight,
}

impl http_body::Body for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A deadline that many timeouts cannot reach: `Instant` arithmetic must not overflow.
fn after(start: Instant, timeout: Duration) -> Instant {
    start
        .checked_add(timeout)
        .unwrap_or_else(|| start + Duration::from_secs(365 * 24 * 3600))
}

/// A TCP stream with the connection's read and write deadlines.
///
/// While no request is in flight, a read must bring a whole request head within the header
/// timeout of its first byte, and the first byte within the idle timeout of the last response.
/// A write that cannot proceed for the write timeout (the client reads nothing) fails. Either
/// way hyper gets an error and closes the connection.
struct BoundedIo {
    stream: TcpStream,
    activity: Arc<Activity>,
    limits: ConnectionLimits,
    /// When the first byte of the next request head arrived, and how many requests had begun
    /// then (a later request makes it stale).
    head_started: Option<(Instant, u64)>,
    read_timer: Pin<Box<Sleep>>,
    read_deadline: Option<Instant>,
    write_timer: Option<Pin<Box<Sleep>>>,
    write_deadline: Option<Instant>,
}

impl BoundedIo {
    fn new(stream: TcpStream, activity: Arc<Activity>, limits: ConnectionLimits) -> Self {
        let now = Instant::now();
        BoundedIo {
            stream,
            activity,
            limits,
            head_started: None,
            read_timer: Box::pin(tokio::time::sleep_until(after(now, limits.idle_timeout))),
            read_deadline: None,
            write_timer: None,
            write_deadline: None,
        }
    }

    fn read_deadline(&mut self) -> Option<Instant> {
        if !self.activity.is_idle() {
            return None;
        }
        let begun = self.activity.begun.load(Ordering::SeqCst);
        match self.head_started {
            Some((start, seen)) if seen == begun => {
                Some(after(start, self.limits.header_read_timeout))
            }
            _ => {
                self.head_started = None;
                Some(after(self.activity.idle_since(), self.limits.idle_timeout))
            }
        }
    }

    /// A write could not proceed: fails once it has not been able to for the write timeout.
    fn write_blocked<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let deadline = match self.write_deadline {
            Some(deadline) => deadline,
            None => {
                let deadline = after(Instant::now(), self.limits.write_timeout);
                self.write_deadline = Some(deadline);
                match &mut self.write_timer {
                    Some(timer) => timer.as_mut().reset(deadline),
                    None => self.write_timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
                }
                deadline
            }
        };
        let Some(timer) = &mut self.write_timer else {
            return Poll::Pending;
        };
        ready!(timer.as_mut().poll(cx));
        tracing::debug!(
            ?deadline,
            "closing a connection that reads nothing of its response"
        );
        Poll::Ready(Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the client stopped reading",
        )))
    }

    fn wrote<T>(
        &mut self,
        result: Poll<io::Result<T>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        match result {
            Poll::Pending => self.write_blocked(cx),
            ready => {
                self.write_deadline = None;
                ready
            }
        }
    }
}

impl AsyncRead for BoundedIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let filled = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > filled
                    && this.head_started.is_none()
                    && this.activity.is_idle()
                {
                    let begun = this.activity.begun.load(Ordering::SeqCst);
                    this.head_started = Some((Instant::now(), begun));
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => loop {
                // While a request is in flight (hyper may poll for the next one before it
                // drops the last response body) the reader rechecks after the idle timeout
                // from now: no deadline the request's end can set comes earlier, so nothing
                // has to wake the reader when it ends. Waking it after every request cost
                // about two context switches a call (an idle worker woken to steal it).
                let (deadline, provisional) = match this.read_deadline() {
                    Some(deadline) => (deadline, false),
                    None => (after(Instant::now(), this.limits.idle_timeout), true),
                };
                if this.read_deadline != Some(deadline) {
                    this.read_timer.as_mut().reset(deadline);
                    this.read_deadline = Some(deadline);
                }
                ready!(this.read_timer.as_mut().poll(cx));
                if provisional {
                    continue;
                }
                let message = if this.head_started.is_some() {
                    "the request head did not arrive in time"
                } else {
                    "the connection was idle for too long"
                };
                tracing::debug!(message, "closing a connection");
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, message)));
            },
        }
    }
}

impl AsyncWrite for BoundedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.stream).poll_write(cx, data);
        this.wrote(result, cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.stream).poll_write_vectored(cx, data);
        this.wrote(result, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.stream).poll_flush(cx);
        this.wrote(result, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.stream).poll_shutdown(cx);
        this.wrote(result, cx)
    }
}

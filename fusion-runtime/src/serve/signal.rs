//! Serving until the process is told to stop: what every connector's `main` needs once.
//!
//! SIGINT (Ctrl-C) and SIGTERM (systemd, Kubernetes, test harnesses) stop the server the same
//! way: it stops taking requests, lets the calls in flight finish within a bound, then the
//! serving function returns, so that `main` can flush what it owns and exit 0.

use super::{Mcp, ServeError};

/// Resolves on the process's first SIGINT or SIGTERM (on other platforms, Ctrl-C). If the
/// signals cannot be watched, that is logged and this never resolves: the server then stops
/// only when its client goes away, as it would without this.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(mut interrupt), Ok(mut terminate)) => {
                tokio::select! {
                    _ = interrupt.recv() => tracing::info!("SIGINT: stopping"),
                    _ = terminate.recv() => tracing::info!("SIGTERM: stopping"),
                }
            }
            (Err(error), _) | (_, Err(error)) => {
                tracing::warn!(%error, "cannot watch SIGINT and SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    }
    #[cfg(not(unix))]
    match tokio::signal::ctrl_c().await {
        Ok(()) => tracing::info!("Ctrl-C: stopping"),
        Err(error) => {
            tracing::warn!(%error, "cannot watch Ctrl-C");
            std::future::pending::<()>().await;
        }
    }
}

impl Mcp {
    /// Serves over stdio until the client closes the stream or the process gets SIGINT or
    /// SIGTERM. On a signal, standard input is no longer read (as if the client had closed
    /// it); calls in flight get 5 seconds to answer, then this returns `Ok`.
    #[cfg(feature = "stdio")]
    pub fn serve_stdio_until_signal(
        &self,
    ) -> impl Future<Output = Result<(), ServeError>> + Send + '_ {
        super::erased(async move {
            let (read, write) = rmcp::transport::stdio_pipes();
            let stop = tokio_util::sync::CancellationToken::new();
            let watcher = tokio::spawn({
                let stop = stop.clone();
                async move {
                    shutdown_signal().await;
                    stop.cancel();
                }
            });
            let read = until_cancelled::UntilCancelled {
                read,
                stop: Box::pin(stop.cancelled_owned()),
                stopped: false,
            };
            let served = self.serve_lines(read, write).await;
            watcher.abort();
            served
        })
    }

    /// Serves Streamable HTTP on `listener` until the process gets SIGINT or SIGTERM (or
    /// `options.shutdown` is cancelled): the listener closes, requests in flight get
    /// [`HttpOptions::shutdown_timeout`](super::HttpOptions::shutdown_timeout) to finish, then
    /// this returns `Ok`. The listener's address is the one `options` protect (its
    /// `bind`), whatever they said before.
    #[cfg(feature = "http")]
    pub fn serve_http_until_signal(
        &self,
        listener: tokio::net::TcpListener,
        options: super::HttpOptions,
    ) -> impl Future<Output = Result<(), ServeError>> + Send + '_ {
        super::erased(async move {
            let address = listener
                .local_addr()
                .map_err(|error| ServeError::new("the listener has no address", error))?;
            let options = options.bind(address);
            let shutdown = options.shutdown.clone();
            let watcher = tokio::spawn(async move {
                shutdown_signal().await;
                shutdown.cancel();
            });
            let served = self.serve_http_on(listener, options).await;
            watcher.abort();
            served
        })
    }
}

#[cfg(feature = "stdio")]
mod until_cancelled {
    use std::future::Future as _;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::io::{AsyncRead, ReadBuf};
    use tokio_util::sync::WaitForCancellationFutureOwned;

    /// A reader that ends (reads nothing, which is end of stream) once `stop` is cancelled.
    pub(super) struct UntilCancelled<R> {
        pub(super) read: R,
        pub(super) stop: Pin<Box<WaitForCancellationFutureOwned>>,
        pub(super) stopped: bool,
    }

    impl<R: AsyncRead + Unpin> AsyncRead for UntilCancelled<R> {
        fn poll_read(
            self: Pin<&mut Self>,
            context: &mut Context<'_>,
            buffer: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            let this = self.get_mut();
            if !this.stopped && this.stop.as_mut().poll(context).is_ready() {
                this.stopped = true;
            }
            if this.stopped {
                return Poll::Ready(Ok(()));
            }
            Pin::new(&mut this.read).poll_read(context, buffer)
        }
    }
}

#[cfg(all(test, feature = "stdio"))]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio_util::sync::CancellationToken;

    use super::until_cancelled::UntilCancelled;

    #[tokio::test]
    async fn the_reader_passes_bytes_until_cancelled_then_ends_with_the_writer_still_open() {
        let (mut writer, read) = tokio::io::duplex(64);
        let stop = CancellationToken::new();
        let mut reader = UntilCancelled {
            read,
            stop: Box::pin(stop.clone().cancelled_owned()),
            stopped: false,
        };
        writer.write_all(b"line\n").await.unwrap();
        let mut buffer = [0u8; 16];
        let read = reader.read(&mut buffer).await.unwrap();
        assert_eq!(&buffer[..read], b"line\n");
        stop.cancel();
        writer.write_all(b"more\n").await.unwrap();
        assert_eq!(reader.read(&mut buffer).await.unwrap(), 0, "end of stream");
        assert_eq!(
            reader.read(&mut buffer).await.unwrap(),
            0,
            "and it stays ended"
        );
    }
}

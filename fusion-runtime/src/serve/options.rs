//! What an MCP endpoint is configured with and what it reports: its protocol options, what a
//! context factory learns of a request, the errors of a transport, and the tally that keeps
//! client-caused events from flooding the log.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{CacheScope, Implementation};
use rmcp::service::RequestContext;
use tokio_util::sync::CancellationToken;

use crate::context::CallContext;

/// Protocol-level options of an MCP endpoint.
#[derive(Debug, Clone)]
pub struct McpOptions {
    /// Tools per `tools/list` page (default 100).
    pub page_size: usize,
    /// How long a client may reuse a `tools/list` result (`ttlMs`, protocol 2026-07-28).
    /// The list only changes when the server is rebuilt, so the default is 5 minutes; with
    /// mounted upstreams, never longer than their shortest refresh interval.
    pub list_ttl: Duration,
    /// Who may share a cached `tools/list` result (`cacheScope`). `Public` by default: the list
    /// is the same for every caller. Use `Private` when it depends on who asks.
    pub list_cache_scope: CacheScope,
    /// The largest message read over stdio (one line), in bytes: 16 MiB by default, as rmcp's.
    /// A longer line is skipped as it arrives, never held, and answered with an error.
    pub max_message_bytes: usize,
}

impl Default for McpOptions {
    fn default() -> Self {
        McpOptions {
            page_size: 100,
            list_ttl: Duration::from_secs(300),
            list_cache_scope: CacheScope::Public,
            max_message_bytes: 16 * 1024 * 1024,
        }
    }
}

/// What a context factory learns about a request.
pub struct RequestInfo<'r> {
    pub(super) context: &'r RequestContext<RoleServer>,
}

impl std::fmt::Debug for RequestInfo<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestInfo")
            .field("request_id", self.request_id())
            .finish_non_exhaustive()
    }
}

impl RequestInfo<'_> {
    /// The request's `_meta`.
    pub fn meta(&self) -> &rmcp::model::RequestMetaObject {
        &self.context.meta
    }

    /// The HTTP request, when the request came over HTTP.
    #[cfg(feature = "http")]
    pub fn http_request(&self) -> Option<&http::request::Parts> {
        self.context.extensions.get::<http::request::Parts>()
    }

    /// The negotiated or declared protocol version.
    pub fn protocol_version(&self) -> Option<rmcp::model::ProtocolVersion> {
        self.context.protocol_version()
    }

    /// The client's identity, when known.
    pub fn client_info(&self) -> Option<Implementation> {
        self.context.client_info()
    }

    /// The client's capabilities, when known (from the request's `_meta`, or the session's
    /// `initialize`).
    pub fn client_capabilities(&self) -> Option<rmcp::model::ClientCapabilities> {
        self.context.client_capabilities()
    }

    /// The JSON-RPC id of the request.
    pub fn request_id(&self) -> &rmcp::model::RequestId {
        &self.context.id
    }

    /// The progress token the client sent, if it asked for progress.
    pub fn progress_token(&self) -> Option<rmcp::model::ProgressToken> {
        self.context.meta.get_progress_token()
    }

    /// Cancelled when the client cancels the request (the call's
    /// [`CallContext::cancellation`] is the same token).
    pub fn cancellation(&self) -> &CancellationToken {
        &self.context.ct
    }
}

/// Runs once per request, before the tool: derives values for the call's context from what
/// the transport knows (a verified principal, a tenant, a trace id…).
///
/// When it runs, the call already holds the request's `_meta`, its cancellation token and what
/// the session knows (protocol version, client info). The transport's own values (the HTTP
/// request parts, the verified [`Principal`](crate::principal::Principal)) are read from the [`RequestInfo`]; they are added
/// to the call after the factory, over anything it inserted, so a factory cannot forge them.
pub type ContextFactory = Arc<dyn Fn(&RequestInfo<'_>, &mut CallContext) + Send + Sync>;

/// Counts events that a client can cause at will (refused tokens, refused connections), so
/// that they are logged at most once per [`Tally::WINDOW`] instead of once each.
#[cfg(feature = "http")]
#[derive(Debug, Default)]
pub(crate) struct Tally {
    state: std::sync::Mutex<TallyState>,
}

#[cfg(feature = "http")]
#[derive(Debug, Default)]
struct TallyState {
    unreported: u64,
    last_report: Option<std::time::Instant>,
}

#[cfg(feature = "http")]
impl Tally {
    pub(crate) const WINDOW: Duration = Duration::from_secs(60);

    /// Counts one event; says how many to report when a report is due (the first event, then
    /// the first one a window after the last report).
    pub(crate) fn record(&self) -> Option<u64> {
        self.record_at(std::time::Instant::now())
    }

    fn record_at(&self, now: std::time::Instant) -> Option<u64> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.unreported += 1;
        match state.last_report {
            Some(last) if now.duration_since(last) < Self::WINDOW => None,
            _ => {
                state.last_report = Some(now);
                Some(std::mem::take(&mut state.unreported))
            }
        }
    }
}

/// A transport could not start or stopped with an error: what failed, and why.
#[derive(Debug)]
pub struct ServeError {
    what: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl ServeError {
    // Unused when no transport is built in.
    #[cfg_attr(not(any(feature = "stdio", feature = "http")), allow(dead_code))]
    pub(crate) fn new(
        what: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        ServeError {
            what: what.into(),
            source: Some(source.into()),
        }
    }
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn std::error::Error + 'static))
    }
}

#[cfg(all(test, feature = "http"))]
mod tests {
    use super::*;

    #[test]
    fn a_tally_reports_the_first_event_then_at_most_once_a_window() {
        let tally = Tally::default();
        let start = std::time::Instant::now();
        assert_eq!(tally.record_at(start), Some(1));
        for second in 1..60 {
            assert_eq!(tally.record_at(start + Duration::from_secs(second)), None);
        }
        // The 59 events counted meanwhile, and this one.
        assert_eq!(tally.record_at(start + Tally::WINDOW), Some(60));
        assert_eq!(tally.record_at(start + Tally::WINDOW), None);
    }
}

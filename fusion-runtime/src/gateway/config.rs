//! What a mount is configured with: the upstream's transport (a child process over stdio, or
//! Streamable HTTP), its protocol, timeouts, limits and how its tools are named.

use std::sync::Arc;
use std::time::Duration;

use super::credentials::{ClientCredentials, TokenSource};
use crate::guard::Concurrency;

/// The protocol an upstream is spoken to in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum UpstreamProtocol {
    /// Over HTTP, stateless 2026-07-28 when the server speaks it (asked with `server/discover`),
    /// else a 2025-11-25 session. Over stdio, a 2025-11-25 session.
    #[default]
    Auto,
    /// A 2025-11-25 session: `initialize`, then the session's id on every HTTP request; the
    /// server may send notifications (list changes) at any time.
    Session,
    /// Stateless 2026-07-28: `server/discover`, then every request on its own, with its
    /// protocol version and client facts. A server that does not speak it cannot be reached.
    Stateless,
}

/// An upstream MCP server to mount with [`ServerBuilder::mount`](crate::ServerBuilder::mount).
#[derive(Clone)]
pub struct Upstream {
    pub(crate) transport: UpstreamTransport,
    pub(crate) timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) concurrency: Option<Concurrency>,
    pub(crate) refresh_every: Option<Duration>,
    pub(crate) toolset: Option<String>,
    pub(crate) backoff: (Duration, Duration),
    pub(crate) protocol: UpstreamProtocol,
    pub(crate) unprefixed: bool,
    /// The largest result passed on to a caller, in bytes (see [`Upstream::max_bytes`]).
    pub(crate) max_bytes: usize,
    /// The most tokens of a result passed on to a caller (see [`Upstream::max_tokens`]).
    pub(crate) max_tokens: Option<usize>,
}

#[derive(Clone)]
pub(crate) enum UpstreamTransport {
    Stdio {
        program: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        current_dir: Option<std::path::PathBuf>,
    },
    Http {
        url: String,
        headers: Vec<(String, String)>,
        /// The gateway's own OAuth client, whose token every request carries.
        credentials: Option<Arc<TokenSource>>,
    },
}

impl std::fmt::Debug for Upstream {
    // Header values (tokens) and environment values are secrets: only their names show.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut debug = f.debug_struct("Upstream");
        match &self.transport {
            UpstreamTransport::Stdio {
                program, args, env, ..
            } => debug
                .field("program", program)
                .field("args", args)
                .field("env", &env.iter().map(|(name, _)| name).collect::<Vec<_>>()),
            UpstreamTransport::Http {
                url,
                headers,
                credentials,
            } => debug
                .field("url", url)
                .field(
                    "headers",
                    &headers.iter().map(|(name, _)| name).collect::<Vec<_>>(),
                )
                .field(
                    "client_credentials",
                    &credentials.as_ref().map(|source| source.credentials()),
                ),
        };
        debug
            .field("timeout", &self.timeout)
            .field("concurrency", &self.concurrency)
            .field("refresh_every", &self.refresh_every)
            .field("protocol", &self.protocol)
            .field("unprefixed", &self.unprefixed)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    fn new(transport: UpstreamTransport) -> Self {
        Upstream {
            transport,
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(30),
            concurrency: None,
            refresh_every: None,
            toolset: None,
            backoff: (Duration::from_millis(100), Duration::from_secs(30)),
            protocol: UpstreamProtocol::Auto,
            unprefixed: false,
            max_bytes: super::bounds::DEFAULT_PROXIED_MAX_BYTES,
            max_tokens: None,
        }
    }

    /// A server the gateway starts as a child process and talks to over its stdin and stdout
    /// (its stderr is the gateway's). It is restarted, with backoff, whenever it dies, and
    /// stopped when the server is dropped or [`Server::shutdown_upstreams`](crate::Server::shutdown_upstreams) runs.
    pub fn stdio(program: impl Into<String>) -> Self {
        Upstream::new(UpstreamTransport::Stdio {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            current_dir: None,
        })
    }

    /// A server reached over Streamable HTTP at `url` (2025-11-25 sessions or stateless
    /// 2026-07-28, whichever it speaks).
    pub fn http(url: impl Into<String>) -> Self {
        Upstream::new(UpstreamTransport::Http {
            url: url.into(),
            headers: Vec::new(),
            credentials: None,
        })
    }

    /// Adds an argument to a stdio upstream's command (ignored for HTTP).
    #[must_use]
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        if let UpstreamTransport::Stdio { args, .. } = &mut self.transport {
            args.push(arg.into());
        }
        self
    }

    /// Adds arguments to a stdio upstream's command (ignored for HTTP).
    #[must_use]
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, more: I) -> Self {
        if let UpstreamTransport::Stdio { args, .. } = &mut self.transport {
            args.extend(more.into_iter().map(Into::into));
        }
        self
    }

    /// Sets an environment variable of a stdio upstream (ignored for HTTP).
    #[must_use]
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let UpstreamTransport::Stdio { env, .. } = &mut self.transport {
            env.push((name.into(), value.into()));
        }
        self
    }

    /// The working directory of a stdio upstream (ignored for HTTP).
    #[must_use]
    pub fn current_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        if let UpstreamTransport::Stdio { current_dir, .. } = &mut self.transport {
            *current_dir = Some(dir.into());
        }
        self
    }

    /// Sets an HTTP header sent with every request to an HTTP upstream (ignored for stdio),
    /// replacing one of the same name: an API key (`X-Api-Key`), `Authorization` with any
    /// scheme. Values are secrets: they are never logged, nor shown by `Debug` or in build
    /// errors. The transport's own headers (`Accept`, `Mcp-Session-Id`,
    /// `MCP-Protocol-Version`, `Last-Event-Id`) cannot be set.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let UpstreamTransport::Http { headers, .. } = &mut self.transport {
            let name = name.into();
            headers.retain(|(known, _)| !known.eq_ignore_ascii_case(&name));
            headers.push((name, value.into()));
        }
        self
    }

    /// Sends `Authorization: Bearer <token>` to an HTTP upstream (ignored for stdio).
    #[must_use]
    pub fn bearer_token(self, token: impl AsRef<str>) -> Self {
        let value = format!("Bearer {}", token.as_ref());
        self.header("Authorization", value)
    }

    /// Authenticates to an HTTP upstream as the gateway's own OAuth client (ignored for
    /// stdio): every request carries `Authorization: Bearer` with a token from the client
    /// credentials grant, fetched once, reused until shortly before it expires (a tenth of its
    /// lifetime, at most a minute), fetched again after the upstream refuses it. A caller's
    /// token never goes to an upstream (the confused-deputy rule); name the upstream with
    /// [`ClientCredentials::resource`] so that the token is good for it alone. Replaces an
    /// `Authorization` header set with [`header`](Self::header) or
    /// [`bearer_token`](Self::bearer_token).
    #[must_use]
    pub fn client_credentials(mut self, credentials: ClientCredentials) -> Self {
        if let UpstreamTransport::Http {
            headers,
            credentials: source,
            ..
        } = &mut self.transport
        {
            headers.retain(|(name, _)| !name.eq_ignore_ascii_case("authorization"));
            *source = Some(Arc::new(TokenSource::new(credentials)));
        }
        self
    }

    /// How many tokens the upstream's [`client_credentials`](Self::client_credentials) fetched
    /// so far (shared by clones of this value); `None` without them.
    pub fn tokens_fetched(&self) -> Option<u64> {
        match &self.transport {
            UpstreamTransport::Http {
                credentials: Some(source),
                ..
            } => Some(source.fetched()),
            _ => None,
        }
    }

    /// How many callers' tokens the upstream's
    /// [`token_exchange`](ClientCredentials::token_exchange) exchanged so far (shared by clones
    /// of this value); `None` without client credentials.
    pub fn tokens_exchanged(&self) -> Option<u64> {
        match &self.transport {
            UpstreamTransport::Http {
                credentials: Some(source),
                ..
            } => Some(source.exchanged()),
            _ => None,
        }
    }

    /// How long a proxied call may take, from the middleware on (60 s by default); past it the
    /// call is cancelled upstream and answered `TIMEOUT`, retryable.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long starting the upstream and fetching its catalog may take (30 s by default).
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The largest result of this upstream's tools passed on to a caller, in bytes (1 MiB by
    /// default): a larger one is cut at its content blocks (the first that does not fit is cut
    /// short if it is text), its structured content left out, and the truncation notice
    /// built-in tools use says so.
    #[must_use]
    pub fn max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes.max(1);
        self
    }

    /// The most tokens (o200k: the text of its text blocks and its structured content) of a
    /// result of this upstream's tools passed on to a caller, none by default: a larger one is
    /// cut like one over [`max_bytes`](Self::max_bytes), in tokens. Needs fusion's `tokens`
    /// feature: a server built without it refuses to build with this set.
    #[must_use]
    pub fn max_tokens(mut self, max_tokens: usize) -> Self {
        self.max_tokens = Some(max_tokens.max(1));
        self
    }

    /// At most `max_active` calls to this upstream at once and `max_queued` waiting; beyond
    /// that `SERVER_BUSY` (the guard of built-in tools, for the whole upstream).
    #[must_use]
    pub fn concurrency(mut self, limits: Concurrency) -> Self {
        self.concurrency = Some(limits);
        self
    }

    /// Fetches the catalog again at this interval, for upstreams that do not say when their
    /// tools change. The `ttlMs` hint of this server's `tools/list` is never longer than the
    /// shortest such interval.
    #[must_use]
    pub fn refresh_every(mut self, interval: Duration) -> Self {
        self.refresh_every = Some(interval);
        self
    }

    /// The toolset of this upstream's tools (the mount's prefix by default), for
    /// [`ServerBuilder::enable_toolsets`](crate::ServerBuilder::enable_toolsets) and access policies.
    #[must_use]
    pub fn toolset(mut self, toolset: impl Into<String>) -> Self {
        self.toolset = Some(toolset.into());
        self
    }

    /// The protocol to speak to the upstream ([`UpstreamProtocol::Auto`] by default): force a
    /// 2025-11-25 session, say, for a server whose `server/discover` answers wrongly, or
    /// stateless 2026-07-28 to refuse anything older.
    #[must_use]
    pub fn protocol(mut self, protocol: UpstreamProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Serves the upstream's tools under their own names instead of `{prefix}_{tool}`: policy
    /// and audit in front of one existing server, its tools not renamed. The prefix stays the
    /// mount's namespace everywhere else: canonical keys (`prefix.tool`) for access policies
    /// and audit, the default toolset, [`UpstreamStatus`](super::UpstreamStatus), logs.
    ///
    /// A name that two tools would have fails closed, and each time the catalog is rebuilt the
    /// collision is logged at error level with its owners: a built-in tool keeps its name, and
    /// a name two upstreams offer (unprefixed or not) is served by neither, whatever the mount
    /// order and whichever came first, so an upstream that gains a tool on a refresh never takes
    /// over the calls meant for another's. Nor is a tool served whose key is a built-in tool's
    /// (mounted as `health`, a tool `ping` is `health.ping`): a policy or an audit record could
    /// not tell them apart.
    #[must_use]
    pub fn unprefixed(mut self) -> Self {
        self.unprefixed = true;
        self
    }

    /// The wait before restarting a dead upstream: `initial`, doubled after each failed start
    /// up to `max`, back to `initial` once a start succeeds (100 ms and 30 s by default).
    #[must_use]
    pub fn restart_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.backoff = (initial, max.max(initial));
        self
    }
}

//! A Fusion gateway: upstream MCP servers mounted under prefixes beside a built-in status tool,
//! served over stdio or Streamable HTTP under one access policy, one audit trail and one set
//! of spans and metrics.
//!
//! ```sh
//! gateway --upstream billing=stdio:'billing --in-memory' \
//!         --upstream crm=http:http://127.0.0.1:9000/mcp \
//!         --upstream-header crm='Authorization: Bearer ${CRM_TOKEN}'
//! gateway --upstream docs=http:http://127.0.0.1:9100/mcp --unprefixed docs --http 127.0.0.1:8090
//! gateway --config gateway.toml --http 127.0.0.1:8090 --audit-db audit.db
//! ```

mod config;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use clap::{CommandFactory as _, FromArgMatches as _, Parser};
use fusion::audit::{AuditSink, TracingAuditSink};
use fusion::auth::StaticTokens;
use fusion::observe::CallStats;
use fusion::serve::oauth::{OAuthArgs, ResourceServer};
use fusion::serve::{Discovery, HttpOptions, Mcp, ToolSearch};
use fusion::{
    ActionInfo, CallContext, Principal, Server, ServerBuilder, ToolError, ToolSpec, Verb,
};

/// The scope that lets a caller use tools that are not read-only.
const WRITE_SCOPE: &str = "gateway:write";

/// Mounts upstream MCP servers under prefixes and serves them, with a built-in
/// `gateway_status` tool, over MCP.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// An upstream: `NAME=stdio:COMMAND ARGS` (a child process, its command line split like a
    /// shell's) or `NAME=http:URL` (Streamable HTTP). Its tools are served as `NAME_tool`
    /// (see --unprefixed). Upstreams are mounted in order: those of --config (by name), then
    /// these.
    #[arg(long = "upstream", value_name = "NAME=stdio:CMD|NAME=http:URL")]
    upstreams: Vec<String>,
    /// A header sent to an HTTP upstream: `NAME=Header: value`, any header
    /// (`X-Api-Key: …`, `Authorization: Bearer …` or another scheme). `${VAR}` in the value is
    /// read from the environment, so that a secret stays out of the process list; values are
    /// never logged.
    #[arg(long = "upstream-header", value_name = "NAME=HEADER: VALUE")]
    upstream_headers: Vec<String>,
    /// The protocol spoken to an HTTP upstream: `NAME=session` (2025-11-25), `NAME=stateless`
    /// (2026-07-28) or `NAME=auto` (the default: stateless if the server speaks it).
    #[arg(long = "upstream-protocol", value_name = "NAME=auto|session|stateless")]
    upstream_protocols: Vec<String>,
    /// The gateway's own OAuth client for HTTP upstream NAME (client_credentials grant):
    /// `NAME=token_endpoint=URL,client_id=ID,client_secret=${VAR}`, then optionally
    /// `,scope=S1 S2`, `,resource=URI` (default: the upstream's URL), `,audience=A`. The
    /// secret is `${VAR}` (read from the environment) or `client_secret_file=PATH`, never the
    /// secret itself: a command line is in the process list, readable by every local user.
    /// The upstream gets the gateway's token, never a caller's.
    #[arg(
        long = "upstream-client-credentials",
        value_name = "NAME=token_endpoint=URL,client_id=ID,client_secret=${VAR}"
    )]
    upstream_client_credentials: Vec<String>,
    /// Token exchange (RFC 8693) for upstream NAME (which needs
    /// --upstream-client-credentials): each call carries a token the authorization server
    /// issued for its caller and that upstream (the caller as `sub`, the gateway as actor),
    /// for the caller's verified token; never the caller's token itself.
    #[arg(long = "upstream-token-exchange", value_name = "NAME")]
    upstream_token_exchange: Vec<String>,
    /// Serve the tools of upstream NAME under their own names, not as `NAME_tool`: policy and
    /// audit in front of one existing server without renaming its tools. Policies and audit
    /// still see `NAME.tool`. A name another tool also has fails closed (a built-in tool keeps
    /// it; one two upstreams offer is served by neither), and that is logged as an error.
    #[arg(long = "unprefixed", value_name = "NAME")]
    unprefixed: Vec<String>,
    /// A TOML file of upstreams (see the README), besides those given with --upstream.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// How long a proxied call may take, in seconds (per upstream in the config file).
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    timeout: u64,
    /// List `find_tools` and `call_tool` (and `gateway_status`) instead of every tool, for
    /// many mounted tools: an agent finds those of its task, then calls them by name. A caller
    /// finds only the tools it may call.
    #[arg(long)]
    tool_search: bool,
    /// Serve Streamable HTTP at this address (e.g. 127.0.0.1:8090) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// A bearer token accepted over HTTP: `TOKEN=NAME` (every tool) or `TOKEN=NAME:read`
    /// (read-only tools only), comma-separated. Prefer --token-file or GATEWAY_TOKENS: a
    /// command line is in the process list. Without any, a random one is printed on stderr.
    #[arg(
        long = "token",
        value_name = "TOKEN=NAME[:read]",
        env = "GATEWAY_TOKENS",
        hide_env_values = true,
        value_delimiter = ',',
        conflicts_with = "oauth_issuer"
    )]
    tokens: Vec<String>,
    /// A file of bearer tokens, one `TOKEN=NAME[:read]` per line (`#` comments allowed).
    #[arg(long, value_name = "FILE", conflicts_with = "oauth_issuer")]
    token_file: Option<PathBuf>,
    /// Serve HTTP without authentication, every caller with every right. For local demos and
    /// protocol test suites only.
    #[arg(long, conflicts_with_all = ["tokens", "token_file", "oauth_issuer"])]
    allow_anonymous: bool,
    // `--oauth-issuer URL --oauth-audience URI` and the claim names: accept OAuth access
    // tokens instead of static tokens. Callers' tokens are never passed to an upstream: each
    // upstream gets the credentials configured for it.
    #[command(flatten)]
    oauth: OAuthArgs,
    /// Write the audit trail (every successful proxied call) to this SQLite database, in an
    /// append-only `audit_events` table, instead of the log. A call whose record cannot be
    /// written answers `AUDIT_FAILED`.
    #[cfg(feature = "audit-sqlite")]
    #[arg(long, value_name = "PATH")]
    audit_db: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let command = OAuthArgs::env(
        Args::command(),
        "GATEWAY_OAUTH_ISSUER",
        "GATEWAY_OAUTH_AUDIENCE",
    );
    let matches = command.get_matches();
    fusion::serve::log_to_stderr();
    let args = match Args::from_arg_matches(&matches) {
        Ok(args) => args,
        Err(error) => error.exit(),
    };
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut upstreams = match &args.config {
        Some(path) => config::read_file(path)?,
        None => Vec::new(),
    };
    upstreams.extend(config::from_flags(config::Flags {
        upstreams: &args.upstreams,
        headers: &args.upstream_headers,
        protocols: &args.upstream_protocols,
        unprefixed: &args.unprefixed,
        client_credentials: &args.upstream_client_credentials,
        token_exchange: &args.upstream_token_exchange,
        timeout: std::time::Duration::from_secs(args.timeout),
    })?);
    if upstreams.is_empty() {
        return Err("no upstream: give --upstream NAME=stdio:COMMAND or --config FILE".into());
    }
    let stats = Arc::new(CallStats::new());
    let this: Arc<OnceLock<Server>> = Arc::new(OnceLock::new());
    let mut builder = ServerBuilder::new("gateway", env!("CARGO_PKG_VERSION"))
        .instructions("Tools of several servers, each under its own prefix.")
        .tool_spec(status_tool(Arc::clone(&this)))
        .access(|call: &CallContext, action: ActionInfo<'_>| {
            action.verb() == Verb::Query
                || call
                    .principal()
                    .is_some_and(|principal| principal.has_scope(WRITE_SCOPE))
        })
        // Every proxied call is a write: its record goes to the audit database, or to the log
        // under `fusion::audit`.
        .audit(audit_sink(&args)?)
        .metrics(stats.clone());
    for (prefix, upstream) in upstreams {
        builder = builder.mount(prefix, upstream);
    }
    let server = builder.build()?;
    let _ = this.set(server.clone());
    server.upstreams_ready().await;
    let discovery = if args.tool_search {
        Discovery::Search(ToolSearch::default().pin("gateway_status"))
    } else {
        Discovery::Full
    };
    let result = match args.http {
        None => {
            // The process owner is the caller: every right.
            let mcp = Mcp::new(server.clone())
                .discovery(discovery)
                .context(|_request, call| {
                    call.extensions_mut().insert(local_principal());
                });
            mcp.serve_stdio().await.map_err(Into::into)
        }
        Some(address) => {
            let mut tokens = args.tokens;
            if let Some(file) = &args.token_file {
                tokens.extend(read_token_file(file)?);
            }
            let oauth = args.oauth.resource_server();
            let mcp = Mcp::new(server.clone()).discovery(discovery);
            serve_http(mcp, address, tokens, args.allow_anonymous, oauth).await
        }
    };
    server.shutdown_upstreams().await;
    tracing::info!(stats = ?stats.snapshot(), "gateway stopped");
    result
}

/// Where audit records go: `--audit-db`, or the log.
fn audit_sink(args: &Args) -> Result<Box<dyn AuditSink>, Box<dyn std::error::Error>> {
    #[cfg(feature = "audit-sqlite")]
    if let Some(path) = &args.audit_db {
        let sink = fusion::audit::SqliteAuditSink::open(path)
            .map_err(|error| format!("--audit-db {}: {error}", path.display()))?;
        tracing::info!(path = %path.display(), "audit records go to SQLite");
        return Ok(Box::new(sink));
    }
    let _ = args;
    Ok(Box::new(TracingAuditSink))
}

fn local_principal() -> Principal {
    Principal::new("local").with_scopes([WRITE_SCOPE.to_owned()])
}

/// What `gateway_status` says of one upstream.
#[fusion::data(serialize, schema)]
struct UpstreamView {
    prefix: String,
    connected: bool,
    tools: usize,
    starts: u64,
    /// `2025-11-25` (a session) or `2026-07-28` (stateless), while connected.
    protocol: Option<String>,
}

#[fusion::data(deserialize, schema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// The built-in tool: which upstreams are connected, and how many tools each offers.
fn status_tool(server: Arc<OnceLock<Server>>) -> ToolSpec {
    ToolSpec::query(
        "gateway.status",
        "Lists the mounted upstream servers: whether each is connected, in which protocol, \
         how many tools it offers and how many times it was started.",
    )
    .handler(move |_: CallContext, _: NoArgs| {
        let server = Arc::clone(&server);
        async move {
            let server = server
                .get()
                .ok_or_else(|| ToolError::internal_message("the gateway is starting"))?;
            Ok::<_, ToolError>(
                server
                    .upstreams()
                    .into_iter()
                    .map(|status| UpstreamView {
                        prefix: status.prefix,
                        connected: status.connected,
                        tools: status.tools,
                        starts: status.starts,
                        protocol: status.protocol,
                    })
                    .collect::<Vec<_>>(),
            )
        }
    })
}

async fn serve_http(
    mut mcp: Mcp,
    address: SocketAddr,
    tokens: Vec<String>,
    allow_anonymous: bool,
    oauth: Option<ResourceServer>,
) -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    let mut options = HttpOptions::default();
    if allow_anonymous {
        tracing::warn!("serving HTTP without authentication: every caller has every right");
        mcp = mcp.context(|_request, call| {
            call.extensions_mut().insert(local_principal());
        });
    } else if let Some(oauth) = oauth {
        options = oauth.protect(options, [WRITE_SCOPE.to_owned()]).await?;
    } else {
        options = options.auth(static_tokens(&tokens)?);
    }
    // One plain line on stderr that scripts and tests can wait for (port 0 picks a port).
    eprintln!("gateway: listening on http://{bound}/mcp");
    // Until SIGINT or SIGTERM; calls in flight finish first.
    mcp.serve_http_until_signal(listener, options).await?;
    Ok(())
}

/// The token specs of a token file: one per line, blank lines and `#` comments skipped.
fn read_token_file(path: &std::path::Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("--token-file {}: {error}", path.display()))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect())
}

/// The accepted tokens; without any, one random token with every right, printed once.
fn static_tokens(specs: &[String]) -> Result<StaticTokens, String> {
    let mut tokens = StaticTokens::new();
    if specs.is_empty() {
        let token = uuid::Uuid::new_v4().simple().to_string();
        eprintln!("gateway: bearer token: {token}");
        return Ok(tokens.with(token, local_principal()));
    }
    // Errors name the token's position, never the token: it is a secret.
    for (index, spec) in specs.iter().enumerate() {
        let which = index + 1;
        let (token, rest) = spec
            .split_once('=')
            .ok_or_else(|| format!("token #{which}: expected TOKEN=NAME[:read]"))?;
        let (name, read_only) = match rest.split_once(':') {
            Some((name, "read")) => (name, true),
            Some((_, other)) => return Err(format!("token #{which}: unknown mode `{other}`")),
            None => (rest, false),
        };
        if token.is_empty() || name.is_empty() {
            return Err(format!(
                "token #{which}: the token and the name cannot be empty"
            ));
        }
        let mut principal = Principal::new(format!("token:{name}"));
        if !read_only {
            principal = principal.with_scopes([WRITE_SCOPE.to_owned()]);
        }
        tokens = tokens.with(token, principal);
    }
    Ok(tokens)
}

//! Run with `cargo run -p billing` (MCP over stdio) or
//! `cargo run -p billing -- --http 127.0.0.1:8080` (Streamable HTTP on `/mcp`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use billing::{
    Invoices, MemoryStore, PgAuditSink, PgLock, PgStore, PgTaskStore, Store, WRITE_SCOPE,
    local_principal,
};
use clap::{CommandFactory as _, FromArgMatches as _, Parser};
use fusion::Exposition;
use fusion::audit::{AuditSink, SqliteAuditSink, TracingAuditSink};
use fusion::auth::StaticTokens;
use fusion::observe::CallStats;
use fusion::serve::oauth::OAuthArgs;
use fusion::serve::{HttpOptions, Mcp, ReplicaName};
use fusion::{Principal, ServerBuilder, SqliteTaskStore, TaskOptions, TaskStore};

/// The billing connector: invoices in front of AI agents, over MCP.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Serve Streamable HTTP at this address (e.g. 127.0.0.1:8080) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Where the SQLite database lives; created and seeded with demo invoices on first run.
    #[arg(long, value_name = "DIR", env = "BILLING_DATA_DIR", default_value_os_t = default_data_dir())]
    data_dir: PathBuf,
    /// Keep the data in memory only (fresh demo data on every start).
    #[arg(long, conflicts_with = "data_dir")]
    in_memory: bool,
    /// Keep the invoices in PostgreSQL instead of SQLite (`postgres://user@host:port/db`), so
    /// that several replicas can serve the same data; migrated and seeded at start-up.
    /// Serialized writes then take PostgreSQL advisory locks, which hold across replicas.
    #[arg(long, value_name = "URL", env = "BILLING_DATABASE_URL", hide_env_values = true,
          conflicts_with_all = ["data_dir", "in_memory"])]
    database_url: Option<String>,
    /// PostgreSQL connections of this replica's store pool (its advisory locks have a pool of
    /// the same size besides).
    #[arg(long, value_name = "N", default_value_t = 16)]
    pool_size: usize,
    /// On SIGTERM, answer `/readyz` with 503 for this many seconds before closing the listener
    /// (so that a load balancer stops sending new calls), then let in-flight calls finish.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    drain_seconds: u64,
    /// This replica's name among several behind a load balancer (letters, digits, `-`, `_`):
    /// every 2025-11-25 session id it issues starts with `NAME.`, so the balancer can send a
    /// session's requests to the replica that holds it (see the replicas guide).
    #[arg(long, value_name = "NAME", env = "BILLING_REPLICA")]
    replica: Option<ReplicaName>,
    /// Expose one `billing` tool with an `action` argument instead of one tool per action.
    #[arg(long)]
    grouped: bool,
    /// A bearer token accepted over HTTP: `TOKEN=TENANT` (read and write) or
    /// `TOKEN=TENANT:read` (read only), comma-separated for several. Prefer --token-file or the
    /// BILLING_TOKENS variable: a command line is in the process list, where every local user
    /// can read it (the environment and a 0600 file are not). Without any token, a random one
    /// for the demo tenant is generated and printed on stderr.
    #[arg(
        long = "token",
        value_name = "TOKEN=TENANT[:read]",
        env = "BILLING_TOKENS",
        hide_env_values = true,
        value_delimiter = ',',
        conflicts_with = "oauth_issuer"
    )]
    tokens: Vec<String>,
    /// A file of bearer tokens, one `TOKEN=TENANT[:read]` per line (blank lines and `#`
    /// comments are skipped). Keep it private (chmod 600): unlike --token, it never shows in
    /// the process list.
    #[arg(long, value_name = "FILE", conflicts_with = "oauth_issuer")]
    token_file: Option<PathBuf>,
    /// Serve HTTP without authentication, every call acting for the demo tenant. For local
    /// demos and protocol test suites only.
    #[arg(long, conflicts_with_all = ["tokens", "token_file", "oauth_issuer"])]
    allow_anonymous: bool,
    // `--oauth-issuer URL --oauth-audience URI` and the claim names: accept OAuth access
    // tokens instead of static tokens.
    #[command(flatten)]
    oauth: OAuthArgs,
    /// Serve only these toolsets (`reports`, `reminders`), besides the core invoice tools.
    #[arg(long, value_delimiter = ',')]
    toolsets: Option<Vec<String>>,
    /// HTTP connections served at once; more are answered 503 and closed. Keep it under the
    /// file descriptor limit (`ulimit -n`).
    #[arg(long, value_name = "N", default_value_t = HttpOptions::default().max_connections)]
    max_connections: usize,
    /// HTTP sessions (2025-11-25 clients) open at once; `initialize` gets 503 beyond. Each
    /// tenant may hold at most --max-sessions-per-tenant of them.
    #[arg(long, value_name = "N", default_value_t = HttpOptions::default().max_sessions)]
    max_sessions: usize,
    /// HTTP sessions one tenant may hold at once; its `initialize` gets 429 beyond.
    #[arg(long, value_name = "N", default_value_t = HttpOptions::default().max_sessions_per_principal)]
    max_sessions_per_tenant: usize,
    /// How long a replica vouches for a task (an export) it runs without renewing, in
    /// milliseconds (it renews every third of a lease, or every second if that is sooner). A task whose replica
    /// died is reported failed once this ran out: shorter finds out sooner, longer rides out
    /// a slower database.
    #[arg(long, value_name = "MS", default_value_t = task_lease_ms_default(),
          value_parser = clap::value_parser!(u64).range(300..))]
    task_lease_ms: u64,
}

fn task_lease_ms_default() -> u64 {
    u64::try_from(TaskOptions::default().lease.as_millis()).unwrap_or(u64::MAX)
}

/// `$XDG_DATA_HOME/fusion-billing`, else `~/.local/share/fusion-billing`, else `./billing-data`.
fn default_data_dir() -> PathBuf {
    std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/share")))
        .map(|base| base.join("fusion-billing"))
        .unwrap_or_else(|| PathBuf::from("billing-data"))
}

#[tokio::main]
async fn main() -> ExitCode {
    // Billing's tools act for a tenant: a token must name one.
    let command = OAuthArgs::env(
        Args::command(),
        "BILLING_OAUTH_ISSUER",
        "BILLING_OAUTH_AUDIENCE",
    )
    .mut_arg("oauth_tenant_claim", |arg| arg.default_value("tenant"));
    let matches = command.get_matches();
    fusion::serve::log_to_stderr();
    let args = match Args::from_arg_matches(&matches) {
        Ok(args) => args,
        Err(error) => error.exit(),
    };
    if matches.value_source("tokens") == Some(clap::parser::ValueSource::CommandLine) {
        tracing::warn!(
            "tokens given with --token are visible to every local user in the process list; \
             use --token-file or BILLING_TOKENS instead"
        );
    }
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // The whole chain: what failed, then each cause.
            let mut text = error.to_string();
            let mut source = error.source();
            while let Some(cause) = source {
                text.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            tracing::error!("{text}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(url) = &args.database_url {
        let store = PgStore::connect(url, args.pool_size).await?;
        tracing::info!(pool = args.pool_size, "billing store ready on PostgreSQL");
        let stats = Arc::new(CallStats::new());
        let mut builder = billing::builder_on(Invoices::Postgres(store.clone()))
            .serialization_lock(PgLock::new(url, args.pool_size)?)
            .audit(PgAuditSink::new(store.clone()))
            .metrics(stats.clone());
        if args.grouped {
            builder = builder.exposition(Exposition::Grouped);
        }
        if let Some(toolsets) = args.toolsets.clone() {
            builder = builder.enable_toolsets(toolsets);
        }
        let server = builder.build()?;
        // The replicas' tasks live in the database they share: any of them answers for one.
        let tasks: Arc<dyn TaskStore> = Arc::new(PgTaskStore::new(store.clone()));
        let ready = Readiness::new(Some(store));
        let result = serve(server, Some(tasks), &args, ready).await;
        tracing::info!(stats = ?stats.snapshot(), "billing stopped");
        return result;
    }
    let (invoices, audit): (Invoices, Box<dyn AuditSink>) = if args.in_memory {
        // No SQLite and no blocking pool: the store keeps the audit records of changes, the log
        // those of the other calls that are not reads.
        tracing::info!("billing store ready in memory");
        (
            Invoices::Memory(Arc::new(MemoryStore::new())),
            Box::new(TracingAuditSink),
        )
    } else {
        let store = Store::open(&args.data_dir)?;
        tracing::info!(data = ?store.path(), "billing store ready");
        // The audit trail lives in the billing database itself (append-only table). Changes
        // to invoices write their records in their own transactions; the sink records the
        // other calls that are not reads (reminders), off the async workers, waiting for the
        // database no longer than the store does.
        let connection =
            rusqlite::Connection::open(args.data_dir.join(billing::store::DB_FILE_NAME))?;
        let sink = SqliteAuditSink::with_connection(connection)?;
        sink.with(|connection| connection.busy_timeout(billing::store::BUSY_TIMEOUT))?;
        (Invoices::Sqlite(Arc::new(store)), Box::new(sink))
    };
    // Tasks (the export) live in the billing database too: they outlive a restart, and a task
    // found running by nobody after one is reported failed.
    let tasks: Option<Arc<dyn TaskStore>> = if args.in_memory {
        None
    } else {
        let connection =
            rusqlite::Connection::open(args.data_dir.join(billing::store::DB_FILE_NAME))?;
        connection.busy_timeout(billing::store::BUSY_TIMEOUT)?;
        Some(Arc::new(SqliteTaskStore::with_connection(connection)?))
    };
    let stats = Arc::new(CallStats::new());
    let mut builder: ServerBuilder = billing::builder_on(invoices)
        .exposition(if args.grouped {
            Exposition::Grouped
        } else {
            Exposition::Flat
        })
        .audit(audit)
        .metrics(stats.clone());
    if let Some(toolsets) = args.toolsets.clone() {
        builder = builder.enable_toolsets(toolsets);
    }
    let server = builder.build()?;
    let result = serve(server, tasks, &args, Readiness::new(None)).await;
    tracing::info!(stats = ?stats.snapshot(), "billing stopped");
    result
}

/// Serves `server` over stdio or HTTP, as the arguments say.
async fn serve(
    server: fusion::Server,
    tasks: Option<Arc<dyn TaskStore>>,
    args: &Args,
    ready: Readiness,
) -> Result<(), Box<dyn std::error::Error>> {
    let mcp = match tasks {
        Some(store) => {
            let options = TaskOptions {
                lease: std::time::Duration::from_millis(args.task_lease_ms),
                ..TaskOptions::default()
            };
            Mcp::new(server).tasks(store, options)
        }
        None => Mcp::new(server),
    };
    match args.http {
        None => {
            // The process owner is the caller: a trusted local session of the demo tenant.
            let mcp = mcp.context(|_request, call| {
                call.extensions_mut().insert(local_principal());
            });
            mcp.serve_stdio().await.map_err(Into::into)
        }
        Some(address) => {
            let mut tokens = args.tokens.clone();
            if let Some(file) = &args.token_file {
                tokens.extend(read_token_file(file)?);
            }
            let mut options = HttpOptions::default()
                .max_connections(args.max_connections)
                .max_sessions(args.max_sessions, args.max_sessions_per_tenant);
            if let Some(name) = &args.replica {
                options = options.replica(name.clone());
            }
            if let Some(oauth) = args.oauth.resource_server() {
                options = oauth.protect(options, [WRITE_SCOPE.to_owned()]).await?;
            }
            let drain = std::time::Duration::from_secs(args.drain_seconds);
            serve_http(
                mcp,
                address,
                options,
                tokens,
                args.allow_anonymous,
                ready,
                drain,
            )
            .await
        }
    }
}

/// What `/healthz` and `/readyz` answer.
///
/// `/healthz` is liveness: 200 while the process serves HTTP at all. `/readyz` is readiness:
/// 200 when the store answers and the replica is not draining, else 503. Both are answered
/// before authentication and never touch a tool.
#[derive(Clone)]
struct Readiness {
    draining: Arc<std::sync::atomic::AtomicBool>,
    store: Option<PgStore>,
}

impl Readiness {
    fn new(store: Option<PgStore>) -> Self {
        Readiness {
            draining: Arc::default(),
            store,
        }
    }

    async fn ready(&self) -> Result<(), String> {
        if self.draining.load(std::sync::atomic::Ordering::Acquire) {
            return Err("draining".into());
        }
        match &self.store {
            Some(store) => store.ping().await.map_err(|error| error.to_string()),
            None => Ok(()),
        }
    }

    /// Answers `/healthz` and `/readyz`; passes every other request on.
    async fn layer(
        self,
        request: axum::extract::Request,
        next: axum::middleware::Next,
    ) -> axum::response::Response {
        use axum::response::IntoResponse as _;
        match request.uri().path() {
            "/healthz" => (axum::http::StatusCode::OK, "ok\n").into_response(),
            "/readyz" => match self.ready().await {
                Ok(()) => (axum::http::StatusCode::OK, "ready\n").into_response(),
                Err(why) => {
                    tracing::debug!(%why, "not ready");
                    (
                        axum::http::StatusCode::SERVICE_UNAVAILABLE,
                        format!("not ready: {why}\n"),
                    )
                        .into_response()
                }
            },
            _ => next.run(request).await,
        }
    }
}

async fn serve_http(
    mcp: Mcp,
    address: SocketAddr,
    options: HttpOptions,
    tokens: Vec<String>,
    allow_anonymous: bool,
    ready: Readiness,
    drain: std::time::Duration,
) -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    let mut options = options.bind(bound);
    // Ctrl-C is caught from here on, before anyone is told the server is listening.
    #[cfg(unix)]
    {
        let shutdown = options.shutdown.clone();
        let mut interrupt =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
        tokio::spawn(async move {
            interrupt.recv().await;
            shutdown.cancel();
        });
        // SIGTERM (systemd, Kubernetes): not ready first, so that the load balancer stops
        // sending new calls; after the drain delay the listener closes and in-flight calls get
        // HttpOptions::shutdown_timeout to finish.
        let shutdown = options.shutdown.clone();
        let draining = ready.draining.clone();
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::spawn(async move {
            terminate.recv().await;
            eprintln!("billing: SIGTERM: draining for {drain:?}");
            draining.store(true, std::sync::atomic::Ordering::Release);
            tokio::time::sleep(drain).await;
            shutdown.cancel();
        });
    }
    let mut mcp = mcp.layer(axum::middleware::from_fn_with_state(
        ready,
        |axum::extract::State(ready): axum::extract::State<Readiness>, request, next| {
            ready.layer(request, next)
        },
    ));
    if allow_anonymous {
        tracing::warn!(
            "serving HTTP without authentication: every caller acts for the demo tenant"
        );
        mcp = mcp.context(|_request, call| {
            call.extensions_mut().insert(local_principal());
        });
    } else if options.auth.is_none() {
        options = options.auth(static_tokens(&tokens)?);
    }
    // One plain line on stderr that scripts and tests can wait for (port 0 picks a port).
    eprintln!("billing: listening on http://{bound}/mcp");
    mcp.serve_http_on(listener, options).await?;
    Ok(())
}

/// The token specs of a token file: one per line, blank lines and `#` comments skipped. A file
/// others may read is used, with a warning.
fn read_token_file(path: &std::path::Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("--token-file {}: {error}", path.display()))?;
    #[cfg(unix)]
    if let Ok(metadata) = std::fs::metadata(path) {
        use std::os::unix::fs::PermissionsExt as _;
        if metadata.permissions().mode() & 0o077 != 0 {
            tracing::warn!(
                file = %path.display(),
                "the token file is readable by other users: chmod 600 it"
            );
        }
    }
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect())
}

/// The accepted tokens; without any, one random token for the demo tenant, printed once.
fn static_tokens(specs: &[String]) -> Result<StaticTokens, String> {
    let mut tokens = StaticTokens::new();
    if specs.is_empty() {
        let token = uuid::Uuid::new_v4().simple().to_string();
        eprintln!(
            "billing: bearer token for tenant {}: {token}",
            billing::DEMO_TENANT
        );
        return Ok(tokens.with(token, local_principal()));
    }
    // Errors name the token's position, never the token: it is a secret.
    for (index, spec) in specs.iter().enumerate() {
        let which = index + 1;
        let (token, rest) = spec
            .split_once('=')
            .ok_or_else(|| format!("token #{which}: expected TOKEN=TENANT[:read]"))?;
        let (tenant, read_only) = match rest.split_once(':') {
            Some((tenant, "read")) => (tenant, true),
            Some((tenant, other)) => {
                return Err(format!(
                    "token #{which} (tenant {tenant}): unknown mode `{other}`"
                ));
            }
            None => (rest, false),
        };
        if token.is_empty() || tenant.is_empty() {
            return Err(format!(
                "token #{which}: the token and the tenant cannot be empty"
            ));
        }
        // A read-only token is its own principal: it neither reaches the tasks of the tenant's
        // writers nor passes for one in the audit trail.
        let principal = if read_only {
            Principal::new(format!("token:{tenant}:read")).with_tenant(tenant)
        } else {
            Principal::new(format!("token:{tenant}"))
                .with_tenant(tenant)
                .with_scopes([WRITE_SCOPE.to_owned()])
        };
        tokens = tokens.with(token, principal);
    }
    Ok(tokens)
}

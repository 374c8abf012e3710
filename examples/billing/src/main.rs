//! Run with `cargo run -p billing` (MCP over stdio) or
//! `cargo run -p billing -- --http 127.0.0.1:8080` (Streamable HTTP on `/mcp`).

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use billing::{Store, WRITE_SCOPE, local_principal};
use clap::Parser;
use fusion::Exposition;
use fusion::audit::{AuditSink, SqliteAuditSink, TracingAuditSink};
use fusion::auth::StaticTokens;
use fusion::observe::CallStats;
use fusion::serve::{HttpOptions, Mcp};
use fusion::{Principal, ServerBuilder};

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
    /// Expose one `billing` tool with an `action` argument instead of one tool per action.
    #[arg(long)]
    grouped: bool,
    /// A bearer token accepted over HTTP: `TOKEN=TENANT` (read and write) or
    /// `TOKEN=TENANT:read` (read only). Repeat for several. Without any, a random token for
    /// the demo tenant is generated and printed on stderr.
    #[arg(
        long = "token",
        value_name = "TOKEN=TENANT[:read]",
        env = "BILLING_TOKENS",
        value_delimiter = ','
    )]
    tokens: Vec<String>,
    /// Serve HTTP without authentication, every call acting for the demo tenant. For local
    /// demos and protocol test suites only.
    #[arg(long, conflicts_with = "tokens")]
    allow_anonymous: bool,
    /// Serve only these toolsets (`reports`, `reminders`), besides the core invoice tools.
    #[arg(long, value_delimiter = ',')]
    toolsets: Option<Vec<String>>,
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
    // stdout belongs to the protocol in stdio mode: logs go to stderr, always.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn")),
        )
        .init();
    let args = Args::parse();
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
    let store = if args.in_memory {
        Store::open_in_memory()?
    } else {
        Store::open(&args.data_dir)?
    };
    tracing::info!(data = ?store.path(), "billing store ready");
    // The audit trail lives in the billing database itself (append-only table).
    let audit: Box<dyn AuditSink> = match store.path() {
        Some(path) => Box::new(SqliteAuditSink::open(path)?),
        None => Box::new(TracingAuditSink),
    };
    let stats = Arc::new(CallStats::new());
    let mut builder: ServerBuilder = billing::builder(Arc::new(store))
        .exposition(if args.grouped {
            Exposition::Grouped
        } else {
            Exposition::Flat
        })
        .audit(audit)
        .metrics(stats.clone());
    if let Some(toolsets) = args.toolsets {
        builder = builder.enable_toolsets(toolsets);
    }
    let server = builder.build()?;
    let result = match args.http {
        None => {
            // The process owner is the caller: a trusted local session of the demo tenant.
            let mcp = Mcp::new(server).context(|_request, call| {
                call.extensions_mut().insert(local_principal());
            });
            mcp.serve_stdio().await.map_err(Into::into)
        }
        Some(address) => serve_http(server, address, args.tokens, args.allow_anonymous).await,
    };
    tracing::info!(stats = ?stats.snapshot(), "billing stopped");
    result
}

async fn serve_http(
    server: fusion::Server,
    address: SocketAddr,
    tokens: Vec<String>,
    allow_anonymous: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    let mut options = HttpOptions::default().bind(bound);
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
    }
    let mut mcp = Mcp::new(server);
    if allow_anonymous {
        tracing::warn!(
            "serving HTTP without authentication: every caller acts for the demo tenant"
        );
        mcp = mcp.context(|_request, call| {
            call.extensions_mut().insert(local_principal());
        });
    } else {
        options = options.auth(static_tokens(&tokens)?);
    }
    // One plain line on stderr that scripts and tests can wait for (port 0 picks a port).
    eprintln!("billing: listening on http://{bound}/mcp");
    mcp.serve_http_on(listener, options).await?;
    Ok(())
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
    for spec in specs {
        let (token, rest) = spec
            .split_once('=')
            .ok_or_else(|| format!("--token `{spec}`: expected TOKEN=TENANT[:read]"))?;
        let (tenant, read_only) = match rest.split_once(':') {
            Some((tenant, "read")) => (tenant, true),
            Some((_, other)) => return Err(format!("--token `{spec}`: unknown mode `{other}`")),
            None => (rest, false),
        };
        if token.is_empty() || tenant.is_empty() {
            return Err(format!(
                "--token `{spec}`: the token and the tenant cannot be empty"
            ));
        }
        let mut principal = Principal::new(format!("token:{tenant}")).with_tenant(tenant);
        if !read_only {
            principal = principal.with_scopes([WRITE_SCOPE.to_owned()]);
        }
        tokens = tokens.with(token, principal);
    }
    Ok(tokens)
}

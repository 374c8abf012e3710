//! Run with `cargo run -p billing` (MCP over stdio) or
//! `cargo run -p billing -- --http 127.0.0.1:8080` (Streamable HTTP on `/mcp`).

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use billing::{DEMO_TENANT, Store, Tenant};
use clap::Parser;
use fusion::Exposition;
use fusion::serve::{HttpOptions, Mcp};

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
            tracing::error!("{error}");
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
    let exposition = if args.grouped {
        Exposition::Grouped
    } else {
        Exposition::Flat
    };
    let server = billing::server(Arc::new(store), exposition)?;
    // Demo mode: every call acts for the demo tenant.
    let mcp = Mcp::new(server).context(|_request, call| {
        call.extensions_mut().insert(Tenant(DEMO_TENANT.to_owned()));
    });
    match args.http {
        Some(address) => {
            let listener = tokio::net::TcpListener::bind(address).await?;
            let bound = listener.local_addr()?;
            // One plain line on stderr that scripts and tests can wait for (port 0 picks a port).
            eprintln!("billing: listening on http://{bound}/mcp");
            mcp.serve_http_on(listener, HttpOptions::default().bind(bound))
                .await?;
        }
        None => mcp.serve_stdio().await?,
    }
    Ok(())
}

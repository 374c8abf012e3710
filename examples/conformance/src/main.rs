//! Run with `cargo run -p conformance-server -- --http 127.0.0.1:8931` (Streamable HTTP on
//! `/mcp`, both protocol eras) or without `--http` (MCP over stdio), then point the official
//! conformance suite at it: `testkit/conformance.sh http://127.0.0.1:8931/mcp --baseline none`.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use fusion::serve::{HttpOptions, Mcp};

/// The fixtures of the MCP conformance suite, served by Fusion.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Serve Streamable HTTP at this address (e.g. 127.0.0.1:8931; port 0 picks one) instead
    /// of stdio. The suite checks DNS-rebinding protection, so keep it on loopback.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // stdout belongs to the protocol in stdio mode: logs go to stderr, always.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn")),
        )
        .init();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let server = conformance_server::server()?;
    let mcp = Mcp::new(server);
    let Some(address) = args.http else {
        return mcp.serve_stdio().await.map_err(Into::into);
    };
    let listener = tokio::net::TcpListener::bind(address).await?;
    let bound = listener.local_addr()?;
    let options = HttpOptions::default().bind(bound);
    // `serve_http_on` stops on Ctrl-C; SIGTERM (what test harnesses send) stops it too.
    #[cfg(unix)]
    {
        let shutdown = options.shutdown.clone();
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::spawn(async move {
            terminate.recv().await;
            shutdown.cancel();
        });
    }
    // One plain line on stderr that scripts and tests can wait for (port 0 picks a port).
    eprintln!("conformance-server: listening on http://{bound}/mcp");
    mcp.serve_http_on(listener, options).await?;
    Ok(())
}

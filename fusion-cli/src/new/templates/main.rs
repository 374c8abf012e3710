//! Serves the __NAME__ connector over stdio (the default) or Streamable HTTP.
//!
//! - `cargo run`: MCP over stdio. The process owner is the caller: a trusted local session
//!   acting for the tenant named by `MCP_TENANT` (default `local`).
//! - `cargo run -- --http 127.0.0.1:8080`: Streamable HTTP on `/mcp`. Clients present a bearer
//!   token listed in `MCP_TOKENS` (`TOKEN=TENANT`, comma-separated): the tenant always comes
//!   from the verified token, never from an agent's arguments.
//! - `--version`: the version, and for a build made by `cargo fusion bundle` its content hash
//!   and the digest of the lockfile it was built against.

use std::net::SocketAddr;

const USAGE: &str = "usage: __NAME__ [--http ADDRESS] [--version]
  --http ADDRESS  serve Streamable HTTP on ADDRESS (such as 127.0.0.1:8080) instead of stdio
  --version       print the version (and the bundle's hash and lockfile digest)
environment: MCP_TENANT (the stdio caller's tenant), MCP_TOKENS (TOKEN=TENANT,... for HTTP)__ENV_USAGE__";

/// Set by `cargo fusion bundle` for the build: the content hash of the sources it built.
const BUNDLE_HASH: Option<&str> = option_env!("FUSION_BUNDLE_HASH");
/// Set by `cargo fusion bundle` for the build: the digest of the verified `fusion.lock`.
const BUNDLE_LOCK: Option<&str> = option_env!("FUSION_BUNDLE_LOCK");

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut http: Option<SocketAddr> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--http" => http = Some(args.next().ok_or("--http needs an address")?.parse()?),
            "--version" | "-V" => {
                println!("{}", version_line());
                return Ok(());
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => return Err(format!("unknown argument `{other}`\n{USAGE}").into()),
        }
    }
    let server = __IDENT__::server_from_env().await?;
    let mcp = fusion::serve::Mcp::new(server);
    match http {
        None => {
            let tenant = std::env::var("MCP_TENANT").unwrap_or_else(|_| "local".to_owned());
            let principal = __IDENT__::principal_of(&tenant);
            mcp.context(move |_request, call| {
                call.extensions_mut().insert(principal.clone());
            })
            .serve_stdio()
            .await?;
        }
        Some(address) => {
            let tokens = std::env::var("MCP_TOKENS").map_err(|_| {
                "serving HTTP needs MCP_TOKENS: the bearer tokens clients present, as TOKEN=TENANT,..."
            })?;
            let mut auth = fusion::auth::StaticTokens::new();
            for (index, spec) in tokens.split(',').enumerate() {
                // Errors name the token's position, never the token: it is a secret.
                let (token, tenant) = spec
                    .split_once('=')
                    .filter(|(token, tenant)| !token.is_empty() && !tenant.is_empty())
                    .ok_or_else(|| format!("MCP_TOKENS: token #{} is not TOKEN=TENANT", index + 1))?;
                auth = auth.with(token, __IDENT__::principal_of(tenant));
            }
            let listener = tokio::net::TcpListener::bind(address).await?;
            let bound = listener.local_addr()?;
            let options = fusion::serve::HttpOptions::default().bind(bound).auth(auth);
            // One plain line that scripts and tests can wait for (port 0 picks a port).
            eprintln!("__NAME__: listening on http://{bound}/mcp");
            mcp.serve_http_on(listener, options).await?;
        }
    }
    Ok(())
}

/// `NAME VERSION`, then the bundle's content hash and lockfile digest when there are some.
fn version_line() -> String {
    let mut line = format!("__NAME__ {}", env!("CARGO_PKG_VERSION"));
    if let Some(hash) = BUNDLE_HASH {
        line.push_str(&format!(" bundle {hash}"));
    }
    if let Some(lock) = BUNDLE_LOCK {
        line.push_str(&format!(" lock {lock}"));
    }
    line
}

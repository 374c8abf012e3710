//! Helpers of the gateway tests: the binaries under test, and rmcp clients.

// Each test binary uses its own subset.
#![allow(dead_code)]

pub(crate) mod recorder;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use fusion::serde_json::Value;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::ServiceError;
use rmcp::{Peer, RoleClient};

/// Every test finishes well within this, or fails instead of hanging.
pub(crate) const TEST_TIMEOUT: Duration = Duration::from_secs(120);

pub(crate) async fn within<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(TEST_TIMEOUT, future)
        .await
        .expect("the test did not finish in time")
}

/// The cargo workspace root.
pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

pub(crate) fn gateway_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gateway"))
}

/// The `billing` binary the tests drive, beside `gateway` in the same target directory and
/// profile (see [`sibling_bin`]).
pub(crate) fn billing_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| sibling_bin("billing", "billing", "examples/billing"))
        .clone()
}

/// The `conformance-server` binary (the official conformance suite's fixtures), beside
/// `gateway` (see [`sibling_bin`]).
pub(crate) fn conformance_server_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            sibling_bin(
                "conformance-server",
                "conformance-server",
                "examples/conformance",
            )
        })
        .clone()
}

/// The binary `bin` of package `package` (sources in `dir`), beside `gateway` in the same
/// target directory and profile.
///
/// Cargo builds only the binaries of the packages under test, and a binary of another package
/// cannot be a dependency on stable Rust. So: `cargo test --workspace` builds it (its own
/// package's tests need it), and it is used as it is; `cargo test -p gateway` alone finds it
/// missing, or older than the sources it is built from, and builds it here with the same cargo,
/// into the same target directory and profile (`.ci/run` runs that path from a fresh clone).
/// Cargo does not hold its build lock while tests run, so this nested build does not wait on
/// the outer one.
fn sibling_bin(package: &str, bin: &str, dir: &str) -> PathBuf {
    let gateway = gateway_bin();
    let path = gateway.with_file_name(format!("{bin}{}", std::env::consts::EXE_SUFFIX));
    if !path.exists() || older_than_its_sources(&path, dir) {
        build_sibling(&gateway, package, bin);
    }
    assert!(path.exists(), "no {bin} binary at {}", path.display());
    path
}

/// Whether a source of a binary (its crate in `dir`, the SDK's crates, the lock file) changed
/// after it was built.
fn older_than_its_sources(binary: &Path, dir: &str) -> bool {
    fn newest(path: &Path) -> Option<std::time::SystemTime> {
        let metadata = std::fs::metadata(path).ok()?;
        if metadata.is_file() {
            return metadata.modified().ok();
        }
        std::fs::read_dir(path)
            .ok()?
            .filter_map(Result::ok)
            .filter_map(|entry| newest(&entry.path()))
            .max()
    }
    let Some(built) = std::fs::metadata(binary).and_then(|m| m.modified()).ok() else {
        return true;
    };
    let root = workspace_root();
    let own = [format!("{dir}/src"), format!("{dir}/Cargo.toml")];
    own.iter()
        .map(String::as_str)
        .chain([
            "fusion/src",
            "fusion-runtime/src",
            "fusion-macros/src",
            "fusion-names/src",
            "Cargo.lock",
        ])
        .filter_map(|source| newest(&root.join(source)))
        .any(|changed| changed > built)
}

/// `cargo build -p PACKAGE --bin BIN` into the target directory and profile of `gateway`
/// (`<target>/<profile>/gateway`, or `<target>/<triple>/<profile>/gateway` when built with
/// `--target`).
fn build_sibling(gateway: &Path, package: &str, bin: &str) {
    let profile_dir = gateway.parent().expect("a profile directory");
    let profile = profile_dir
        .file_name()
        .and_then(|name| name.to_str())
        .expect("a profile name");
    let mut target_dir = profile_dir.parent().expect("a target directory");
    let mut triple = None;
    // The target directory holds `CACHEDIR.TAG`; a directory in between is a target triple.
    if !target_dir.join("CACHEDIR.TAG").exists()
        && let Some(parent) = target_dir.parent()
        && parent.join("CACHEDIR.TAG").exists()
    {
        triple = target_dir.file_name().and_then(|name| name.to_str());
        target_dir = parent;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = std::process::Command::new(cargo);
    command
        .args(["build", "--quiet", "-p", package, "--bin", bin])
        .arg("--target-dir")
        .arg(target_dir)
        .current_dir(workspace_root());
    match profile {
        "debug" => {}
        "release" => {
            command.arg("--release");
        }
        other => {
            command.args(["--profile", other]);
        }
    }
    if let Some(triple) = triple {
        command.args(["--target", triple]);
    }
    let status = command
        .status()
        .unwrap_or_else(|error| panic!("running cargo build -p {package}: {error}"));
    assert!(status.success(), "cargo build -p {package} failed");
}

pub(crate) fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        other => panic!("not a JSON object: {other}"),
    }
}

pub(crate) async fn call(
    client: &Peer<RoleClient>,
    tool: &str,
    arguments: Value,
) -> Result<CallToolResult, ServiceError> {
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(object(arguments)))
        .await
}

/// The `error` of a Fusion envelope in a failed result.
pub(crate) fn error_of(result: &CallToolResult) -> Value {
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let envelope = result
        .structured_content
        .clone()
        .expect("structuredContent");
    assert_eq!(envelope["ok"], false, "{envelope}");
    envelope["error"].clone()
}

/// Every text block of a result, joined.
pub(crate) fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Serves `server` in process (newline-delimited JSON-RPC over a duplex pipe, as over stdio)
/// to an rmcp client with `handler`; every call acts for `principal`.
pub(crate) async fn connect<C: rmcp::ClientHandler>(
    server: &fusion::Server,
    principal: fusion::Principal,
    handler: C,
) -> rmcp::service::RunningService<RoleClient, C> {
    use rmcp::ServiceExt as _;
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(server_io);
    let mcp = fusion::serve::Mcp::new(server.clone()).context(move |_request, call| {
        call.extensions_mut().insert(principal.clone());
    });
    tokio::spawn(async move {
        let _ = mcp.serve_lines(read, write).await;
    });
    handler.serve(client_io).await.expect("client handshake")
}

/// A `tools/call` with this `_meta`.
pub(crate) async fn call_with_meta(
    client: &Peer<RoleClient>,
    tool: &str,
    arguments: Value,
    meta: rmcp::model::RequestMetaObject,
) -> Result<CallToolResult, ServiceError> {
    use rmcp::model::{CallToolRequest, ClientRequest, ServerResult};
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new(tool.to_owned()).with_arguments(object(arguments)),
    ));
    let handle = client
        .send_request_with_option(
            request,
            rmcp::service::PeerRequestOptions::no_options().with_meta(meta),
        )
        .await?;
    match handle.await_response().await? {
        ServerResult::CallToolResult(result) => Ok(result),
        other => panic!("not a tool result: {other:?}"),
    }
}

/// `server` over Streamable HTTP on 127.0.0.1 (anonymous), until the returned guard drops.
pub(crate) struct HttpServing {
    pub(crate) url: String,
    shutdown: tokio_util::sync::CancellationToken,
}

impl Drop for HttpServing {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub(crate) async fn serve_http(server: &fusion::Server) -> HttpServing {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let options = fusion::serve::HttpOptions::default().bind(address);
    let shutdown = options.shutdown.clone();
    let mcp = fusion::serve::Mcp::new(server.clone());
    tokio::spawn(async move {
        let _ = mcp.serve_http_on(listener, options).await;
    });
    HttpServing {
        url: format!("http://{address}/mcp"),
        shutdown,
    }
}

/// An rmcp client over Streamable HTTP: a 2025-11-25 session (`modern: false`) or stateless
/// 2026-07-28.
pub(crate) async fn http_client<C: rmcp::ClientHandler>(
    url: &str,
    modern: bool,
    handler: C,
) -> rmcp::service::RunningService<RoleClient, C> {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _};
    install_crypto_provider();
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url.to_owned());
    let lifecycle = if modern {
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        }
    } else {
        ClientLifecycleMode::Initialize
    };
    handler
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .expect("HTTP client handshake")
}

/// Polls `check` every 20 ms until it holds; panics with `what` after 10 s.
pub(crate) async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !check() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "not within 10 s: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `billing --in-memory --http 127.0.0.1:0` with a write token (`tok-w`) and a read-only
/// one (`tok-r`), both of tenant `t_777`; killed when dropped.
pub(crate) fn billing_http() -> testkit_harness::ServerHttp {
    let mut command = std::process::Command::new(billing_bin());
    command
        .args(["--in-memory", "--http", "127.0.0.1:0"])
        .env("BILLING_TOKENS", "tok-w=t_777,tok-r=t_777:read");
    testkit_harness::ServerHttp::start(command, "billing")
}

/// The `gateway` binary over stdio, driven by rmcp's client; everything it logs is kept.
pub(crate) struct GatewayStdio {
    pub(crate) client: rmcp::service::RunningService<RoleClient, ()>,
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl GatewayStdio {
    /// Starts `gateway ARGS` with these environment variables (and `RUST_LOG` as given).
    pub(crate) async fn start(args: &[String], env: &[(&str, &str)]) -> GatewayStdio {
        use rmcp::ServiceExt as _;
        use tokio::io::AsyncBufReadExt as _;
        let mut command = tokio::process::Command::new(gateway_bin());
        command.args(args).envs(env.iter().copied());
        let (process, stderr) = rmcp::transport::TokioChildProcess::builder(command)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("gateway");
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let kept = std::sync::Arc::clone(&log);
        let stderr = stderr.expect("piped stderr");
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut log = kept.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let client = ().serve(process).await.expect("gateway handshake");
        GatewayStdio { client, log }
    }

    /// What it logged so far.
    pub(crate) fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Closes its stdin and waits for it to exit (it stops its upstreams first).
    pub(crate) async fn stop(self) -> String {
        let GatewayStdio { client, log } = self;
        let _ = client.cancel().await;
        // stderr closes when the process exits.
        let started = std::time::Instant::now();
        while std::sync::Arc::strong_count(&log) > 1 && started.elapsed() < Duration::from_secs(15)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        log.lock().unwrap().clone()
    }
}

/// The `gateway` binary over HTTP on a free port (`--http 127.0.0.1:0`), killed when dropped.
pub(crate) struct GatewayHttp {
    child: std::process::Child,
    pub(crate) url: String,
}

impl Drop for GatewayHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl GatewayHttp {
    /// Starts `gateway --http 127.0.0.1:0 ARGS` with these environment variables.
    pub(crate) fn start(args: &[String], env: &[(&str, &str)]) -> GatewayHttp {
        use std::io::BufRead as _;
        let mut child = std::process::Command::new(gateway_bin())
            .args(["--http", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("gateway --http");
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines
                .next()
                .expect("the gateway said where it listens")
                .unwrap();
            if let Some(url) = line.strip_prefix("gateway: listening on ") {
                break url.to_owned();
            }
        };
        // Keep draining its logs.
        std::thread::spawn(move || for _ in lines {});
        GatewayHttp { child, url }
    }

    /// An rmcp client (2025-11-25 session) with this bearer token.
    pub(crate) async fn client(
        &self,
        token: &str,
    ) -> rmcp::service::RunningService<RoleClient, ()> {
        use rmcp::ServiceExt as _;
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let config =
            StreamableHttpClientTransportConfig::with_uri(self.url.clone()).auth_header(token);
        install_crypto_provider();
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .expect("client handshake with the gateway")
    }
}

/// Installs rustls's ring provider as the process default, unless one is installed already:
/// fusion's `http-client` feature builds reqwest with `rustls-no-provider`, and cargo shares
/// that with rmcp's HTTP client here, which would panic without a provider.
pub(crate) fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

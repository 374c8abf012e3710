//! Two tests. `corpus_generates_connectors_that_compile_and_cover_the_operations`: every real
//! document of tests/corpus (see its CORPUS.md) is generated into ONE cargo workspace checked
//! by one `cargo check` (fusion is built once, the target directory is kept between runs); the
//! compile rate and the share of operations that became tools are printed and asserted.
//!
//! The end-to-end test: the documents of [`END_TO_END`] are generated into ONE
//! temporary cargo workspace that shares one target directory (kept between runs, so later
//! runs are incremental), which must pass `cargo clippy -D warnings` and `cargo fmt --check`.
//! Then the Swagger Petstore 3.0 connector is built and run over stdio against a real
//! upstream (axum on 127.0.0.1), by rmcp's client and by the five official MCP clients of
//! `testkit/` (TypeScript SDK 1.x and 2.x, Python SDK 2.x, both protocol eras; installed by
//! `testkit/install.sh`, like the billing tests): calls succeed, hidden fields are stripped,
//! upstream errors are classified and a path-traversal id stays one encoded segment.
//!
//! Run with `-- --nocapture` to see the table of what each document generated.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fusion::axum;
use fusion_openapi::{FusionDependency, Options, Overlay, generate};
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use rmcp::{Peer, RoleClient, ServiceExt};
use serde_json::{Value, json};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// The documents the end-to-end test builds with clippy and runs (the corpus's first fifteen:
/// the rest are large, and only checked).
const END_TO_END: &[&str] = &[
    "learn-v3.0-api-with-examples.yaml",
    "learn-v3.0-callback-example.yaml",
    "learn-v3.0-link-example.yaml",
    "learn-v3.0-petstore-expanded.json",
    "learn-v3.0-petstore.yaml",
    "learn-v3.0-uspto.yaml",
    "learn-v3.1-non-oauth-scopes.json",
    "learn-v3.1-tictactoe.yaml",
    "learn-v3.1-webhook-example.yaml",
    "redocly-museum-3.1.yaml",
    "swagger-petstore3-3.0.yaml",
    "swagger-petstore31-3.1.yaml",
    "twilio-api-v2010-3.0.json",
    "twilio-studio-v2-3.0.json",
];

/// Every document of tests/corpus.
fn corpus() -> Vec<PathBuf> {
    let mut documents: Vec<PathBuf> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| {
                path.extension()
                    .is_some_and(|ext| ext == "yaml" || ext == "json")
            })
            .collect();
    documents.sort();
    documents
}

fn documents() -> Vec<PathBuf> {
    corpus()
        .into_iter()
        .filter(|path| END_TO_END.contains(&path.file_name().unwrap().to_str().unwrap()))
        .collect()
}

fn package_name(document: &Path) -> String {
    let stem = document.file_stem().unwrap().to_string_lossy();
    format!("gen-{}", stem.replace('.', "-"))
}

fn cargo(workspace: &Path, target: &Path, args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO"))
        .args(args)
        .current_dir(workspace)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        // Fourteen crates and their binaries: without debug info or incremental state, their
        // target directory stays around 1 GB instead of several.
        .env("CARGO_PROFILE_DEV_DEBUG", "0")
        .env("CARGO_INCREMENTAL", "0")
        .stdin(Stdio::null())
        .output()
        .expect("cargo runs");
    let text = String::from_utf8_lossy(&output.stderr).into_owned()
        + &String::from_utf8_lossy(&output.stdout);
    (output.status.success(), text)
}

/// Writes every document's crate into one workspace; returns it and the per-document reports.
fn workspace() -> (PathBuf, Vec<(String, fusion_openapi::Report)>) {
    let crates: Vec<(String, PathBuf, Overlay)> = documents()
        .into_iter()
        .map(|document| (package_name(&document), document, Overlay::default()))
        .collect();
    workspace_of("fusion-openapi-generated", &crates)
}

/// Writes each `(package, document, overlay)` crate into the workspace `dir` (under the
/// target directory, kept between runs); returns it and the per-crate reports.
fn workspace_of(
    dir: &str,
    crates: &[(String, PathBuf, Overlay)],
) -> (PathBuf, Vec<(String, fusion_openapi::Report)>) {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(dir);
    // Written beside, then copied over only where they changed: unchanged crates keep their
    // files' times, and cargo does not check them again.
    let staging = root.join("staging");
    let _ = std::fs::remove_dir_all(&staging);
    let mut members = Vec::new();
    let mut reports = Vec::new();
    let started = Instant::now();
    for (name, document, overlay) in crates {
        let text = std::fs::read_to_string(document).unwrap();
        let name = name.clone();
        let options = Options {
            name: Some(name.clone()),
            fusion: FusionDependency::Path(repository()),
            standalone: false,
            overlay: overlay.clone(),
        };
        let generated = generate(&text, &options)
            .unwrap_or_else(|error| panic!("{}: {error}", document.display()));
        assert!(
            generated.write_to(&staging.join(&name)).unwrap(),
            "rustfmt runs"
        );
        let crate_dir = root.join("crates").join(&name);
        for (file, _) in &generated.files {
            let fresh = std::fs::read(staging.join(&name).join(file)).unwrap();
            let kept = crate_dir.join(file);
            if std::fs::read(&kept).ok().as_deref() != Some(fresh.as_slice()) {
                std::fs::create_dir_all(kept.parent().unwrap()).unwrap();
                std::fs::write(&kept, fresh).unwrap();
            }
        }
        members.push(format!("\"crates/{name}\""));
        reports.push((name, generated.report));
    }
    eprintln!(
        "generated {} crates in {:?}",
        members.len(),
        started.elapsed()
    );
    std::fs::write(
        root.join("Cargo.toml"),
        format!(
            "[workspace]\nmembers = [{}]\nresolver = \"3\"\n",
            members.join(", ")
        ),
    )
    .unwrap();
    // The same versions as this repository: no resolution, nothing new to download.
    std::fs::copy(repository().join("Cargo.lock"), root.join("Cargo.lock")).unwrap();
    (root, reports)
}

/// The crates whose `cargo check` reported an error (`could not compile `NAME``).
fn failed_crates(output: &str) -> Vec<String> {
    let mut failed: Vec<String> = output
        .lines()
        .filter_map(|line| line.split("could not compile `").nth(1))
        .filter_map(|rest| rest.split('`').next())
        .map(str::to_owned)
        .collect();
    failed.sort();
    failed.dedup();
    failed
}

#[test]
fn corpus_generates_connectors_that_compile_and_cover_the_operations() {
    let documents = corpus();
    assert!(
        documents.len() >= 12,
        "the corpus has {} documents",
        documents.len()
    );
    let mut crates: Vec<(String, PathBuf, Overlay)> = documents
        .iter()
        .map(|document| (package_name(document), document.clone(), Overlay::default()))
        .collect();
    // Every shape the generator writes, `rules.rs`'s document, plain and with its overlay
    // (guarded and hidden fields): the macros must take them all. Not in the measures.
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let overlay =
        Overlay::parse(&std::fs::read_to_string(tests.join("shapes.overlay.yaml")).unwrap())
            .unwrap();
    crates.push((
        "shapes".into(),
        tests.join("shapes.json"),
        Overlay::default(),
    ));
    crates.push(("shapes-overlaid".into(), tests.join("shapes.json"), overlay));
    // And with its API key in the query string (a credential no corpus document takes there).
    let mut query_key: Value =
        serde_json::from_str(&std::fs::read_to_string(tests.join("shapes.json")).unwrap()).unwrap();
    query_key["components"]["securitySchemes"] =
        json!({"queryKey": {"type": "apiKey", "in": "query", "name": "api_key"}});
    let query_key_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("shapes-query-key.json");
    std::fs::write(&query_key_path, query_key.to_string()).unwrap();
    crates.push((
        "shapes-query-key".into(),
        query_key_path,
        Overlay::default(),
    ));
    let (root, reports) = workspace_of("fusion-openapi-corpus", &crates);
    let mut table = format!(
        "{:<36} {:>10} {:>6} {:>8} {:>7}\n",
        "document", "operations", "tools", "skipped", "models"
    );
    let (mut operations, mut tools) = (0, 0);
    let documents_count = documents.len();
    for (name, report) in &reports[..documents_count] {
        let _ = writeln!(
            table,
            "{:<36} {:>10} {:>6} {:>8} {:>7}",
            name.trim_start_matches("gen-"),
            report.operations,
            report.tools,
            report.skipped.len(),
            report.models
        );
        for (operation, reason) in &report.skipped {
            let _ = writeln!(table, "    skipped {operation}: {reason}");
        }
        operations += report.operations;
        tools += report.tools;
        assert_eq!(
            report.tools + report.skipped.len(),
            report.operations,
            "{name}"
        );
    }
    let started = Instant::now();
    let (ok, output) = cargo(
        &root,
        &root.join("target"),
        &[
            "check",
            "--workspace",
            "--keep-going",
            "--message-format",
            "short",
        ],
    );
    let failed = failed_crates(&output);
    let compiled = documents_count
        - failed
            .iter()
            .filter(|name| !name.starts_with("shapes"))
            .count();
    let coverage = 100.0 * tools as f64 / operations as f64;
    eprintln!(
        "{table}\ncorpus: {compiled} of {documents_count} documents compile ({:.0} %); {tools} of {operations} operations became tools ({coverage:.1} %); cargo check took {:?}",
        100.0 * compiled as f64 / documents_count as f64,
        started.elapsed()
    );
    assert!(
        ok && failed.is_empty(),
        "{failed:?} do not compile:\n{output}"
    );
    // What is left out is responses that are not JSON (see fusion-openapi's README).
    assert!(
        coverage >= 99.0,
        "only {coverage:.1} % of the operations became tools"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_connectors_compile_pass_clippy_and_fmt_and_one_runs_against_a_real_upstream() {
    let (root, reports) = workspace();
    for (name, report) in &reports {
        eprintln!("== {name}\n{report}");
    }
    let mut table = format!(
        "{:<40} {:>10} {:>6} {:>8} {:>7}\n",
        "document", "operations", "tools", "skipped", "models"
    );
    for (name, report) in &reports {
        let _ = writeln!(
            table,
            "{:<40} {:>10} {:>6} {:>8} {:>7}",
            name.trim_start_matches("gen-"),
            report.operations,
            report.tools,
            report.skipped.len(),
            report.models
        );
    }
    eprintln!("{table}");
    // Every operation is a tool or a reported skip.
    for (name, report) in &reports {
        assert_eq!(
            report.tools + report.skipped.len(),
            report.operations,
            "{name}"
        );
    }
    let target = root.join("target");
    let started = Instant::now();
    let (ok, output) = cargo(
        &root,
        &target,
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--quiet",
            "--",
            "-D",
            "warnings",
        ],
    );
    assert!(ok, "clippy failed:\n{output}");
    eprintln!("clippy -D warnings on every crate: {:?}", started.elapsed());
    // `cargo fmt --check` on each generated package (not `--all`, which would also check the
    // path dependency on this repository).
    let mut fmt = vec!["fmt", "--check"];
    for (name, _) in &reports {
        fmt.extend(["-p", name.as_str()]);
    }
    let (ok, output) = cargo(&root, &target, &fmt);
    assert!(ok, "fmt --check failed:\n{output}");
    // Every crate compiles and links, its server binary included.
    let started = Instant::now();
    let (ok, output) = cargo(&root, &target, &["build", "--workspace", "--quiet"]);
    assert!(ok, "build failed:\n{output}");
    eprintln!("build of every crate and binary: {:?}", started.elapsed());
    let petstore = "gen-swagger-petstore3-3-0";
    let binary = target.join("debug").join(petstore);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let base = petstore_upstream(Arc::clone(&seen)).await;
    tokio::time::timeout(Duration::from_secs(60), run_petstore(&binary, &base, &seen))
        .await
        .expect("the rmcp run finishes in time");
    tokio::time::timeout(
        Duration::from_secs(60),
        run_petstore_over_http(&binary, &base),
    )
    .await
    .expect("the HTTP run finishes in time");
    let started = Instant::now();
    tokio::time::timeout(
        Duration::from_secs(20 * 60),
        run_official_clients(&binary, &base, &seen),
    )
    .await
    .expect("the official clients finish in time");
    eprintln!("official clients: {:?}", started.elapsed());
}

/// Where `testkit/install.sh` puts the official clients: `$FUSION_TEST_DEPS`, else
/// `<repository>/.test-deps` (as for the billing tests).
fn test_deps() -> PathBuf {
    match std::env::var_os("FUSION_TEST_DEPS") {
        Some(dir) if !dir.is_empty() => std::path::absolute(PathBuf::from(dir)).unwrap(),
        _ => repository().join(".test-deps"),
    }
}

/// `words` as one POSIX shell command line, the form the testkit clients take for `--stdio`.
fn shell_line(words: &[&str]) -> String {
    words
        .iter()
        .map(|word| format!("'{}'", word.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The Petstore connector through every official client (`testkit/matrix.sh`, plan
/// `tests/plans/petstore.json`), each spawning it over stdio with the same upstream.
async fn run_official_clients(binary: &Path, base: &str, seen: &Mutex<Vec<Seen>>) {
    let deps = test_deps();
    std::fs::create_dir_all(&deps).unwrap();
    // The repository's installer, under the lock the billing tests' installer takes (an
    // exclusive `flock` on `.install.lock`): idempotent, ~1 s when up to date.
    let install = tokio::process::Command::new("flock")
        .arg(deps.join(".install.lock"))
        .arg("bash")
        .arg(repository().join("testkit/install.sh"))
        .env("FUSION_TEST_DEPS", &deps)
        .current_dir(repository())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("flock and bash run");
    assert!(
        install.status.success(),
        "testkit/install.sh could not install the official MCP clients into {} (needs node >= 20 \
         with npm, python3 >= 3.10 with venv, and access to npm and PyPI):\n{}",
        deps.display(),
        String::from_utf8_lossy(&install.stderr)
    );
    let before = seen.lock().unwrap().len();
    let command = shell_line(&[&binary.to_string_lossy(), "--base-url", base]);
    let plan = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plans/petstore.json");
    let matrix = tokio::process::Command::new("bash")
        .arg(repository().join("testkit/matrix.sh"))
        .args(["--stdio", &command, "--plan"])
        .arg(&plan)
        .env("FUSION_TEST_DEPS", &deps)
        // The clients pass their whole environment to the server they spawn.
        .env("API_TOKEN", "upstream-token")
        .env_remove("API_KEY_HEADER")
        .env_remove("API_BASE_URL")
        .current_dir(repository())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&matrix.stdout);
    let stderr = String::from_utf8_lossy(&matrix.stderr);
    let summary = stdout.lines().last().unwrap_or_default();
    eprintln!("{summary}");
    for line in stdout.lines() {
        let Some((client, report)) = line.split_once(' ') else {
            continue;
        };
        if let Ok(report) = serde_json::from_str::<Value>(report) {
            eprintln!(
                "  {client}: {} {} over {}, protocol {}, {} checks, ok={}",
                report["sdk"]["name"].as_str().unwrap_or("?"),
                report["sdk"]["version"].as_str().unwrap_or("?"),
                report["transport"].as_str().unwrap_or("?"),
                report["protocolVersion"].as_str().unwrap_or("?"),
                report["checks"],
                report["ok"]
            );
        }
    }
    assert!(
        matrix.status.success() && summary == "matrix: 5 passed, 0 failed",
        "the official clients failed the Petstore plan:\n{stdout}\n{stderr}"
    );
    // What the upstream received from the five runs: the traversal attempt stayed one
    // encoded segment every time, and every call carried the server's credential.
    let seen = seen.lock().unwrap();
    let runs = &seen[before..];
    assert_eq!(
        runs.iter()
            .filter(|request| request.path == "/api/v3/user/..%2Fadmin")
            .count(),
        5
    );
    assert!(
        !runs
            .iter()
            .any(|request| request.path.contains("/admin") && !request.path.contains("%2F"))
    );
    assert!(
        runs.iter()
            .all(|request| request.authorization.as_deref() == Some("Bearer upstream-token"))
    );
}

#[derive(Debug, Clone)]
struct Seen {
    path: String,
    query: Option<String>,
    authorization: Option<String>,
    content_type: Option<String>,
    body: Vec<u8>,
}

/// The happy paths of the Petstore 3.0 document, and its errors, on 127.0.0.1.
async fn petstore_upstream(seen: Arc<Mutex<Vec<Seen>>>) -> String {
    use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
    use axum::response::IntoResponse;

    let app = axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: axum::body::Bytes| {
        let seen = Arc::clone(&seen);
        async move {
            let header_text = |name: header::HeaderName| {
                headers
                    .get(name)
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_owned)
            };
            seen.lock().unwrap().push(Seen {
                path: uri.path().to_owned(),
                query: uri.query().map(str::to_owned),
                authorization: header_text(header::AUTHORIZATION),
                content_type: header_text(header::CONTENT_TYPE),
                body: body.to_vec(),
            });
            let pet = |id: i64| json!({"id": id, "name": "doggie", "photoUrls": ["u"], "status": "available",
                "category": {"id": 1, "name": "Dogs"}, "tags": []});
            let path = uri.path().strip_prefix("/api/v3").unwrap_or_default();
            let reply = |status: StatusCode, value: Value| {
                (status, [(header::CONTENT_TYPE, "application/json")], value.to_string()).into_response()
            };
            match (method.as_str(), path) {
                ("GET", "/pet/401") => reply(StatusCode::UNAUTHORIZED, json!({"message": "bad token sk_live_z"})),
                ("GET", "/pet/404") => reply(StatusCode::NOT_FOUND, json!({"message": "Pet not found sk_live_x"})),
                ("GET", "/pet/500") => reply(StatusCode::INTERNAL_SERVER_ERROR, json!({"trace": "sk_live_y"})),
                ("GET", "/pet/findByStatus") => reply(StatusCode::OK, json!([pet(1), pet(2)])),
                ("GET", path) if path.starts_with("/pet/") => reply(StatusCode::OK, pet(path[5..].parse().unwrap_or(0))),
                ("POST", "/pet") => reply(StatusCode::OK, pet(10)),
                ("POST", "/pet/3/uploadImage") => {
                    reply(StatusCode::OK, json!({"code": 200, "type": "ok", "message": "stored"}))
                }
                ("POST", "/user/createWithList") => reply(StatusCode::OK, json!({
                    "id": 8, "username": "alan", "password": "hunter2-secret"})),
                ("GET", path) if path.starts_with("/user/") => reply(StatusCode::OK, json!({
                    "id": 7, "username": percent_encoding::percent_decode_str(&path[6..]).decode_utf8_lossy(),
                    "firstName": "Ada", "email": "ada@example.com", "password": "hunter2-secret", "userStatus": 1})),
                ("DELETE", _) => StatusCode::OK.into_response(),
                _ => StatusCode::NOT_FOUND.into_response(),
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}/api/v3")
}

async fn call(client: &Peer<RoleClient>, tool: &str, arguments: Value) -> (Value, String) {
    let Value::Object(arguments) = arguments else {
        panic!()
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
        .await
        .unwrap_or_else(|error| panic!("{tool}: {error}"));
    let text = serde_json::to_string(&result).unwrap();
    (
        result.structured_content.clone().unwrap_or(Value::Null),
        text,
    )
}

/// The generated `main.rs` serving Streamable HTTP (`--http`), clients presenting `MCP_TOKEN`.
async fn run_petstore_over_http(binary: &Path, base: &str) {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use tokio::io::AsyncBufReadExt as _;

    let address = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let mut child = tokio::process::Command::new(binary)
        .arg("--base-url")
        .arg(base)
        .arg("--http")
        .arg(address.to_string())
        .env("API_TOKEN", "upstream-token")
        .env("MCP_TOKEN", "mcp-client-token")
        .env_remove("API_KEY_HEADER")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the generated connector");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("the connector exited before listening");
        if line.contains("listening on") {
            break;
        }
    }
    let url = format!("http://{address}/mcp");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    // Without the token, no session.
    let refused = ()
        .serve(StreamableHttpClientTransport::with_client(
            http.clone(),
            StreamableHttpClientTransportConfig::with_uri(url.clone()),
        ))
        .await;
    assert!(refused.is_err(), "a client without MCP_TOKEN got in");
    let client = ()
        .serve(StreamableHttpClientTransport::with_client(
            http,
            StreamableHttpClientTransportConfig::with_uri(url).auth_header("mcp-client-token"),
        ))
        .await
        .expect("handshake over Streamable HTTP");
    let (envelope, text) = call(
        client.peer(),
        "petstore_get_user_by_name",
        json!({"username": "ada"}),
    )
    .await;
    assert_eq!(envelope["data"]["first_name"], "Ada", "{envelope}");
    assert!(!text.contains("hunter2"), "{text}");
    client.cancel().await.unwrap();
}

async fn run_petstore(binary: &Path, base: &str, seen: &Mutex<Vec<Seen>>) {
    let mut command = tokio::process::Command::new(binary);
    command
        .arg("--base-url")
        .arg(base)
        .env("API_TOKEN", "upstream-token")
        .env_remove("API_KEY_HEADER")
        .kill_on_drop(true);
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the generated connector");
    let client = ().serve(transport).await.expect("handshake over stdio");
    let peer = client.peer();
    let tools = peer.list_all_tools().await.unwrap();
    // Every one of the 19 operations, `uploadFile` (an octet-stream body) and
    // `createUsersWithListInput` (a JSON array body) included.
    assert_eq!(tools.len(), 19);

    // The image goes as raw bytes, given as base64; the query parameter beside it.
    let (envelope, _) = call(
        peer,
        "petstore_upload_file",
        json!({"pet_id": 3, "additional_metadata": "front", "body": "iVBORw0KGgo="}),
    )
    .await;
    assert_eq!(envelope["ok"], true, "{envelope}");
    let last = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last.path, "/api/v3/pet/3/uploadImage");
    assert_eq!(last.query.as_deref(), Some("additionalMetadata=front"));
    assert_eq!(
        last.content_type.as_deref(),
        Some("application/octet-stream")
    );
    assert_eq!(last.body, b"\x89PNG\r\n\x1a\n");
    // A JSON array body is sent whole; the answer's password stays hidden.
    let users = json!([{"username": "alan", "password": "p1"}, {"username": "grace"}]);
    let (envelope, text) = call(
        peer,
        "petstore_create_users_with_list_input",
        json!({ "body": users }),
    )
    .await;
    assert_eq!(envelope["ok"], true, "{envelope}");
    assert!(!text.contains("hunter2"), "{text}");
    let last = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last.content_type.as_deref(), Some("application/json"));
    assert_eq!(serde_json::from_slice::<Value>(&last.body).unwrap(), users);

    let (envelope, _) = call(peer, "petstore_get_pet_by_id", json!({"pet_id": 3})).await;
    assert_eq!(envelope["ok"], true, "{envelope}");
    assert_eq!(envelope["data"]["name"], "doggie");
    assert_eq!(envelope["data"]["id"], 3);
    let last = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last.path, "/api/v3/pet/3");
    assert_eq!(last.authorization.as_deref(), Some("Bearer upstream-token"));

    let (envelope, _) = call(
        peer,
        "petstore_find_pets_by_status",
        json!({"status": "available"}),
    )
    .await;
    assert_eq!(
        envelope["data"].as_array().map(Vec::len),
        Some(2),
        "{envelope}"
    );

    let (envelope, _) = call(
        peer,
        "petstore_add_pet",
        json!({"name": "rex", "photo_urls": ["p"]}),
    )
    .await;
    assert_eq!(envelope["ok"], true, "{envelope}");

    // `password` is writeOnly-looking: hidden, never reaches the agent.
    let (envelope, text) = call(
        peer,
        "petstore_get_user_by_name",
        json!({"username": "ada"}),
    )
    .await;
    assert_eq!(envelope["data"]["first_name"], "Ada", "{envelope}");
    assert!(!text.contains("hunter2"), "{text}");
    assert!(envelope["data"].get("password").is_none());

    // A traversal attempt stays one encoded segment.
    let (envelope, _) = call(
        peer,
        "petstore_get_user_by_name",
        json!({"username": "../admin"}),
    )
    .await;
    assert_eq!(envelope["ok"], true, "{envelope}");
    assert_eq!(
        seen.lock().unwrap().last().unwrap().path,
        "/api/v3/user/..%2Fadmin"
    );
    let (envelope, _) = call(peer, "petstore_get_user_by_name", json!({"username": ".."})).await;
    assert_eq!(envelope["error"]["code"], "VALIDATION_ERROR", "{envelope}");

    // Upstream errors are classified and never echoed.
    let (envelope, text) = call(peer, "petstore_get_pet_by_id", json!({"pet_id": 404})).await;
    assert_eq!(envelope["error"]["code"], "NOT_FOUND", "{envelope}");
    // The recovery names the tool that lists pets (`petstore.find_pets_by_status`), by the
    // name this server serves it under (flat exposition).
    // The recovery is said once, in the `<tool_error>` block the agent reads.
    let recovery = text
        .split_once("<recovery>")
        .and_then(|(_, rest)| rest.split_once("</recovery>"))
        .map(|(recovery, _)| recovery)
        .unwrap_or_default();
    assert!(
        recovery.contains("`petstore_find_pets_by_status`"),
        "{text}"
    );
    assert!(
        tools
            .iter()
            .any(|tool| tool.name == "petstore_find_pets_by_status")
    );
    assert!(!text.contains("sk_live"));
    let (envelope, text) = call(peer, "petstore_get_pet_by_id", json!({"pet_id": 500})).await;
    assert_eq!(
        envelope["error"]["code"], "UPSTREAM_UNAVAILABLE",
        "{envelope}"
    );
    assert_eq!(envelope["error"]["retryable"], true);
    assert!(envelope["error"]["errorId"].is_string());
    assert!(!text.contains("sk_live"));

    client.cancel().await.unwrap();
}

//! `cargo fusion new` and `cargo fusion bundle`, end to end: each kind of connector is
//! generated into one shared cargo workspace (so that `fusion` builds once, into one target
//! directory kept between runs), built, its own tests run (writing then checking its
//! `fusion.lock`), then run as a process and called over stdio (initialize, tools/list, a call)
//! and over Streamable HTTP on 127.0.0.1.
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

use serde_json::{Value, json};
use testkit_harness::ServerHttp;
use testkit_harness::postgres::TempPostgres;

/// The tests share one workspace: one generates and builds at a time.
static WORKSPACE: Mutex<()> = Mutex::new(());

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// The shared workspace (every generated crate is a member) and its target directory.
fn workspace() -> (PathBuf, PathBuf) {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fusion-new");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("Cargo.toml"),
        "[workspace]\nmembers = [\"crates/*\"]\nresolver = \"3\"\n\n\
         [profile.dev]\ndebug = \"line-tables-only\"\n\n[profile.dev.package.\"*\"]\ndebug = false\n",
    )
    .unwrap();
    // The repository's versions: nothing new to resolve or download.
    if !root.join("Cargo.lock").exists() {
        std::fs::copy(repo().join("Cargo.lock"), root.join("Cargo.lock")).unwrap();
    }
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fusion-new-target");
    (root, target)
}

fn cargo_fusion() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cargo-fusion"))
}

/// Runs `command`, panicking with its output unless it succeeds; its stdout.
fn succeed(command: &mut Command) -> String {
    let out = command
        .output()
        .unwrap_or_else(|error| panic!("{command:?}: {error}"));
    assert!(
        out.status.success(),
        "{command:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `cargo fusion new NAME ARGS…` into the shared workspace: the crate's directory.
fn generate(name: &str, args: &[&str]) -> PathBuf {
    let (root, _) = workspace();
    let dir = root.join("crates").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    succeed(
        cargo_fusion()
            .args(["new", name, "--member", "--no-lock", "--fusion-path"])
            .arg(repo())
            .arg("--dir")
            .arg(&dir)
            .args(args),
    );
    dir
}

/// `cargo ARGS…` in the shared workspace.
fn cargo(args: &[&str], env: &[(&str, &str)]) -> String {
    let (root, target) = workspace();
    let mut command = Command::new(env!("CARGO"));
    command
        .args(args)
        .current_dir(&root)
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("FUSION_LOCK");
    for (key, value) in env {
        command.env(key, value);
    }
    succeed(&mut command)
}

/// Builds the crate, writes its lockfile with its lock test, then runs all its tests in check
/// mode and verifies the lockfile with `cargo fusion lock verify`: the connector's binary.
fn build_and_test(name: &str, dir: &Path, env: &[(&str, &str)]) -> PathBuf {
    let mut update = env.to_vec();
    update.push(("FUSION_LOCK", "update"));
    cargo(&["test", "-p", name, "--test", "lock"], &update);
    let tests = cargo(&["test", "-p", name], env);
    assert!(!tests.contains("FAILED"), "{tests}");
    succeed(
        cargo_fusion()
            .args(["lock", "verify"])
            .arg(dir.join("fusion.lock")),
    );
    cargo(&["build", "-p", name], env);
    workspace().1.join("debug").join(name)
}

/// A connector process spoken to over stdio, one JSON-RPC message a line.
struct StdioSession {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    next_id: u64,
    /// The server's answer to `initialize`.
    initialized: Value,
}

impl StdioSession {
    fn start(binary: &Path, env: &[(&str, &str)]) -> StdioSession {
        let mut command = Command::new(binary);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().unwrap();
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        let mut session = StdioSession {
            child,
            input,
            output,
            next_id: 0,
            initialized: Value::Null,
        };
        let initialized = session.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "fusion-cli-test", "version": "1"}}),
        );
        assert!(
            initialized["result"]["serverInfo"]["name"].is_string(),
            "{initialized}"
        );
        session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        session.initialized = initialized;
        session
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.input, "{message}").unwrap();
        self.input.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.output.read_line(&mut line).unwrap() > 0,
                "the server closed stdout"
            );
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    fn tool_names(&mut self) -> Vec<String> {
        let listed = self.request("tools/list", json!({}));
        listed["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{listed}"))
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// A tool's result as text (the whole JSON-RPC answer).
    fn call(&mut self, tool: &str, arguments: Value) -> String {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
            .to_string()
    }
}

impl Drop for StdioSession {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 POST of `body` to the MCP endpoint `url`: (status line and headers, body).
fn post(url: &str, token: &str, session: Option<&str>, body: &Value) -> (String, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (address, path) = rest.split_at(rest.find('/').unwrap());
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let body = body.to_string();
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nAuthorization: Bearer {token}\r\n\
         MCP-Protocol-Version: 2025-06-18\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(session) = session {
        request.push_str(&format!("Mcp-Session-Id: {session}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (head.to_owned(), body.to_owned())
}

/// Serves `binary` over HTTP with one token for `tenant`; initializes a session and calls
/// `tool`: the call's raw answer.
fn over_http(
    binary: &Path,
    name: &str,
    env: &[(&str, &str)],
    tool: &str,
    arguments: Value,
) -> String {
    let mut command = Command::new(binary);
    command
        .args(["--http", "127.0.0.1:0"])
        .env("MCP_TOKENS", "tok-acme=acme");
    for (key, value) in env {
        command.env(key, value);
    }
    let server = ServerHttp::start(command, name);
    let (head, body) = post(
        server.url(),
        "tok-acme",
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "fusion-cli-test", "version": "1"}}}),
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
    assert!(body.contains("serverInfo"), "{body}");
    let session = head
        .lines()
        .find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .expect("a session id");
    let (head, _) = post(
        server.url(),
        "tok-acme",
        Some(&session),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert!(head.starts_with("HTTP/1.1 202"), "{head}");
    let (refused, _) = post(
        server.url(),
        "wrong-token",
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
    );
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    let (head, body) = post(
        server.url(),
        "tok-acme",
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}),
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
    body
}

#[test]
fn a_vanilla_connector_builds_passes_its_tests_and_serves_stdio_and_http() {
    let _one = WORKSPACE
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    let dir = generate("vanilla-notes", &[]);
    let binary = build_and_test("vanilla-notes", &dir, &[]);
    let mut stdio = StdioSession::start(&binary, &[]);
    let tools = stdio.tool_names();
    assert!(
        tools.contains(&"vanilla_notes_list_notes".to_owned()),
        "{tools:?}"
    );
    let listed = stdio.call("vanilla_notes_list_notes", json!({}));
    assert!(listed.contains("Welcome"), "{listed}");
    assert!(!listed.contains("share_"), "{listed}");
    let created = over_http(
        &binary,
        "vanilla-notes",
        &[],
        "vanilla_notes_create_note",
        json!({"title": "Over HTTP", "body": "b"}),
    );
    assert!(created.contains("Over HTTP"), "{created}");
    assert!(!created.contains("share_"), "{created}");

    // The bundle: the same sources give the same hash, another source another.
    let hash = |dir: &Path| {
        succeed(
            cargo_fusion()
                .args(["bundle", "--hash-only", "--manifest-path"])
                .arg(dir),
        )
        .trim()
        .to_owned()
    };
    let first = hash(&dir);
    assert!(first.starts_with("sha256:") && first.len() == 71, "{first}");
    assert_eq!(hash(&dir), first);
    let lib = dir.join("src/lib.rs");
    let source = std::fs::read_to_string(&lib).unwrap();
    std::fs::write(&lib, format!("{source}\n// changed\n")).unwrap();
    assert_ne!(hash(&dir), first);
    std::fs::write(&lib, &source).unwrap();
    assert_eq!(hash(&dir), first);
    // Over the budget: the measured size, and a failure.
    let (_, target) = workspace();
    let bundle = |budget: &str| {
        cargo_fusion()
            .args([
                "bundle",
                "--profile",
                "dev",
                "--skip-lock-test",
                "--max-size",
                budget,
                "--manifest-path",
            ])
            .arg(&dir)
            .env("CARGO_TARGET_DIR", &target)
            .output()
            .unwrap()
    };
    let over = bundle("1KB");
    assert_eq!(
        over.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&over.stderr)
    );
    let stderr = String::from_utf8_lossy(&over.stderr);
    assert!(
        stderr.contains("over its budget of 0.0 MB (1000 bytes)"),
        "{stderr}"
    );
    let within = bundle("1GB");
    assert!(
        within.status.success(),
        "{}",
        String::from_utf8_lossy(&within.stderr)
    );
    let report = String::from_utf8_lossy(&within.stdout);
    assert!(report.contains(&format!("hash {first}")), "{report}");
    // The running binary reports what it was built from.
    let version = succeed(Command::new(&binary).arg("--version"));
    let lock: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("fusion.lock")).unwrap()).unwrap();
    let surface = lock["digests"]["surface"].as_str().unwrap();
    assert_eq!(
        version.trim(),
        format!("vanilla-notes 0.1.0 bundle {first} lock {surface}")
    );
    // And so does the running server, in the `_meta` of its `initialize` answer.
    let bundled = StdioSession::start(&binary, &[]);
    assert_eq!(
        bundled.initialized["result"]["_meta"]["dev.fusion/bundle"],
        json!({"hash": first, "lock": surface}),
        "{}",
        bundled.initialized
    );
}

/// customers, invoices (a foreign key to customers) and line items (to invoices), each with a
/// tenant column; customers have a secret column. Rows of two tenants.
const SHOP: &str = "
CREATE TABLE customers (id INTEGER PRIMARY KEY, tenant_id TEXT NOT NULL, name TEXT NOT NULL,
    email TEXT, password_hash TEXT NOT NULL DEFAULT '', created_at TEXT DEFAULT 'now');
CREATE INDEX customers_email ON customers (email);
CREATE TABLE invoices (id INTEGER PRIMARY KEY, tenant_id TEXT NOT NULL,
    customer_id INTEGER NOT NULL REFERENCES customers (id), total_cents BIGINT NOT NULL,
    paid BOOLEAN NOT NULL DEFAULT FALSE, note TEXT);
CREATE INDEX invoices_customer ON invoices (customer_id);
CREATE TABLE line_items (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL,
    invoice_id INTEGER NOT NULL REFERENCES invoices (id), description TEXT NOT NULL, amount REAL NOT NULL);
INSERT INTO customers (id, tenant_id, name, email, password_hash) VALUES
    (1, 'acme', 'Ann Acme', 'ann@acme.test', 'pbkdf2$ann-secret'),
    (2, 'globex', 'Gus Globex', 'gus@globex.test', 'pbkdf2$gus-secret');
INSERT INTO invoices (id, tenant_id, customer_id, total_cents, paid, note) VALUES
    (1, 'acme', 1, 1200, FALSE, 'first'), (2, 'globex', 2, 9900, TRUE, NULL);
INSERT INTO line_items VALUES ('L-1', 'acme', 1, 'Widget', 12.0), ('L-2', 'globex', 2, 'Gadget', 99.0);
";

/// What a database connector must do over stdio, as tenant `acme`.
fn check_database_connector(binary: &Path, name: &str, env: &[(&str, &str)]) {
    let prefix = name.replace('-', "_");
    let mut acme_env = env.to_vec();
    acme_env.push(("MCP_TENANT", "acme"));
    let mut stdio = StdioSession::start(binary, &acme_env);
    let tools = stdio.tool_names();
    for tool in [
        "list_customers",
        "get_customer",
        "create_customer",
        "update_customer",
        "delete_customer",
        "list_invoices",
        "list_line_items",
    ] {
        assert!(
            tools.contains(&format!("{prefix}_{tool}")),
            "{tool}: {tools:?}"
        );
    }
    let listed = stdio.call(&format!("{prefix}_list_customers"), json!({}));
    assert!(listed.contains("Ann Acme"), "{listed}");
    // Another tenant's rows are unreachable; secrets and the tenant column are never shown.
    assert!(!listed.contains("Gus Globex"), "{listed}");
    assert!(!listed.contains("pbkdf2"), "{listed}");
    assert!(!listed.contains("password"), "{listed}");
    assert!(!listed.contains("tenant_id"), "{listed}");
    let theirs = stdio.call(&format!("{prefix}_get_customer"), json!({"id": 2}));
    assert!(
        theirs.contains("\"isError\":true") && !theirs.contains("Gus"),
        "{theirs}"
    );
    let changed = stdio.call(
        &format!("{prefix}_update_customer"),
        json!({"id": 2, "name": "Hacked"}),
    );
    assert!(changed.contains("\"isError\":true"), "{changed}");
    let deleted = stdio.call(&format!("{prefix}_delete_invoice"), json!({"id": 2}));
    assert!(deleted.contains("\"isError\":true"), "{deleted}");
    // Filters on indexed columns.
    let filtered = stdio.call(
        &format!("{prefix}_list_invoices"),
        json!({"customer_id": 1}),
    );
    assert!(filtered.contains("first"), "{filtered}");
    // The tenant cannot be sent.
    let smuggled = stdio.call(
        &format!("{prefix}_create_customer"),
        json!({"name": "Eve", "tenant_id": "globex"}),
    );
    assert!(smuggled.contains("\"isError\":true"), "{smuggled}");
    // An insert with an idempotency key happens once.
    let create = json!({"name": "Carl", "email": "carl@acme.test", "idempotency_key": "k-1"});
    let first = stdio.call(&format!("{prefix}_create_customer"), create.clone());
    assert!(
        first.contains("Carl") && !first.contains("\"isError\":true"),
        "{first}"
    );
    let again = stdio.call(&format!("{prefix}_create_customer"), create);
    assert!(
        again.contains("Carl") && !again.contains("\"isError\":true"),
        "{again}"
    );
    let listed = stdio.call(&format!("{prefix}_list_customers"), json!({}));
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let carls = listed["result"]["structuredContent"]["data"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter(|row| row["name"] == "Carl")
        .count();
    assert_eq!(
        carls, 1,
        "the retry returned the first insert's row: {listed}"
    );
    // And over HTTP, the token's tenant.
    let over_http = over_http(
        binary,
        name,
        env,
        &format!("{prefix}_list_invoices"),
        json!({}),
    );
    assert!(
        over_http.contains("first") && !over_http.contains("9900"),
        "{over_http}"
    );
}

#[test]
fn a_sqlite_schema_becomes_a_tenant_scoped_connector() {
    let _one = WORKSPACE
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    let data = tempfile::tempdir().unwrap();
    let file = data.path().join("shop.db");
    let connection = rusqlite::Connection::open(&file).unwrap();
    connection.execute_batch(SHOP).unwrap();
    drop(connection);
    let dir = generate("sqlite-shop", &["--from-sqlite", file.to_str().unwrap()]);
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    assert!(
        !lib.contains("pub password_hash"),
        "a secret column is never in the model"
    );
    let path = file.to_str().unwrap();
    let binary = build_and_test("sqlite-shop", &dir, &[("DATABASE_PATH", path)]);
    check_database_connector(&binary, "sqlite-shop", &[("DATABASE_PATH", path)]);
}

#[test]
fn a_postgres_schema_becomes_a_tenant_scoped_connector() {
    let _one = WORKSPACE
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    let Some(postgres) = TempPostgres::start() else {
        return;
    };
    // The ids are numbered by sequences there; the rows above take the first numbers.
    let schema = SHOP
        .replace("id INTEGER PRIMARY KEY", "id SERIAL PRIMARY KEY")
        .replace("REAL", "double precision")
        + "SELECT setval('customers_id_seq', 100); SELECT setval('invoices_id_seq', 100);";
    let url = postgres.database_with("shop", &schema);
    let dir = generate("pg-shop", &["--from-postgres", &url]);
    let binary = build_and_test("pg-shop", &dir, &[("DATABASE_URL", &url)]);
    check_database_connector(&binary, "pg-shop", &[("DATABASE_URL", &url)]);
}

#[test]
fn an_openapi_connector_builds_and_writes_its_lockfile() {
    let _one = WORKSPACE
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    let spec = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        spec.path(),
        r#"{"openapi": "3.0.3", "info": {"title": "Pets", "version": "1"},
            "servers": [{"url": "http://127.0.0.1:9"}],
            "paths": {"/pets/{id}": {"get": {"operationId": "getPet",
              "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
              "responses": {"200": {"description": "ok", "content": {"application/json": {"schema":
                {"type": "object", "properties": {"id": {"type": "string"}, "password": {"type": "string"}}}}}}}}}}}"#,
    )
    .unwrap();
    let dir = generate(
        "openapi-pets",
        &["--openapi", spec.path().to_str().unwrap()],
    );
    let binary = build_and_test("openapi-pets", &dir, &[]);
    let mut stdio = StdioSession::start(&binary, &[]);
    assert_eq!(stdio.tool_names().len(), 1);
    // Not built by `cargo fusion bundle`: the version alone, no hash to claim.
    let version = succeed(Command::new(&binary).arg("--version"));
    assert_eq!(version.trim(), "openapi-pets 0.1.0");
}

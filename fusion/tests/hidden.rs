//! Hidden values never leave and guarded values never enter, on the routes a hurried author
//! writes (SPEC M2–M4, P1): `Debug`, logs, panics, nested models, every profile in every
//! exposition. The routes that must not compile are in `ui-tests`.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use common::*;
use fusion::testing::Tester;
use fusion::{
    Create, Exposition, Hidden, Params, ServerBuilder, State, ToolError, model, presenter, tool,
};
use serde_json::{Value, json};

/// Captures what the server logs.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn logged<F: std::future::Future>(future: F) -> (F::Output, String) {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let output = future.await;
    let text = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    (output, text)
}

/// A type without `Debug`, as a column type might be.
struct Geometry;

#[model]
struct Site {
    #[cast("Site name")]
    name: String,
    shape: Geometry,
    #[hidden]
    door_code: Hidden<String>,
    #[guarded]
    #[hidden]
    tenant_id: Hidden<u64>,
}

fn site() -> Site {
    Site {
        name: "Depot".into(),
        shape: Geometry,
        door_code: Hidden::new("4711-secret".into()),
        tenant_id: Hidden::new(987_654),
    }
}

#[test]
fn a_models_debug_shows_hidden_fields_as_hidden() {
    let site = site();
    assert_eq!(
        format!("{site:?}"),
        "Site { name: \"Depot\", shape: .., door_code: [hidden], tenant_id: [hidden] }"
    );
    let pretty = format!("{:#?}", Some(&site));
    assert!(pretty.contains("door_code: [hidden]"), "{pretty}");
    for text in [format!("{site:?}"), pretty] {
        assert!(!text.contains("4711") && !text.contains("987654"), "{text}");
    }
    // The author can still read it, deliberately.
    assert_eq!(site.door_code.expose(), "4711-secret");
}

#[test]
fn a_derived_debug_on_a_model_is_the_redacting_one() {
    // `common::Invoice` derives `Debug`: `#[model]` replaces it with its own.
    let invoice = invoice(7, Status::Open);
    let text = format!("{invoice:?}");
    assert!(text.contains("webhook_secret: [hidden]"), "{text}");
    assert!(text.contains("tenant_id: [hidden]"), "{text}");
    assert!(
        !text.contains("whsec_7") && !text.contains("t_777"),
        "{text}"
    );
}

#[presenter(Site, fields(name))]
struct SiteView;

/// Inspects a site, failing the way a hurried author writes failures.
#[tool(query, name = "sites.inspect", returns = SiteView)]
async fn inspect(how: String) -> Result<Site, ToolError> {
    let site = site();
    match how.as_str() {
        "internal" => Err(ToolError::internal_message(format!(
            "could not inspect {site:?}"
        ))),
        "message" => Err(ToolError::conflict(format!("Conflicts with {site:?}."))),
        "panic" => panic!("inspecting {site:?} failed"),
        _ => Ok(site),
    }
}

fn sites() -> fusion::Server {
    ServerBuilder::new("sites", "1.0.0")
        .tool::<inspect>()
        .build()
        .unwrap()
}

fn assert_redacted(text: &str) {
    // An error id is 32 random hex digits, so it holds `4711` or `987654` now and then
    // (CI met one): look for the secrets only in what is not an id.
    let text = without_error_ids(text);
    assert!(!text.contains("4711"), "a hidden value leaked: {text}");
    assert!(!text.contains("987654"), "a hidden value leaked: {text}");
}

/// `text` with every run of 32 hexadecimal digits (an error id) replaced by `<id>`.
fn without_error_ids(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_hexdigit() {
            run.push(c);
            continue;
        }
        out.push_str(if run.len() == 32 { "<id>" } else { &run });
        run.clear();
        out.push(c);
    }
    out.pop();
    out
}

#[test]
fn error_ids_are_masked_and_secrets_are_not() {
    let masked = without_error_ids("id f5d627e26b1d43d1a009474711955b13, code 4711-secret.");
    assert_eq!(masked, "id <id>, code 4711-secret.");
}

#[tokio::test(flavor = "current_thread")]
async fn an_internal_error_that_formats_a_model_logs_it_redacted() {
    let tester = Tester::new(sites());
    let (result, logs) = logged(tester.call("sites.inspect", json!({"how": "internal"}))).await;
    assert_eq!(result.error_code(), Some("INTERNAL_ERROR"));
    assert_redacted(&result.raw_text());
    let error_id = result.error()["errorId"].as_str().unwrap().to_owned();
    let line = logs
        .lines()
        .find(|line| line.contains(&error_id))
        .unwrap_or_else(|| panic!("no log line for {error_id}: {logs}"));
    assert!(line.contains("door_code: [hidden]"), "{line}");
    assert_redacted(&logs);
}

#[tokio::test(flavor = "current_thread")]
async fn a_panic_that_formats_a_model_logs_it_redacted() {
    let tester = Tester::new(sites());
    let (result, logs) = logged(tester.call("sites.inspect", json!({"how": "panic"}))).await;
    assert_eq!(result.error_code(), Some("INTERNAL_ERROR"));
    assert!(logs.contains("door_code: [hidden]"), "{logs}");
    assert_redacted(&logs);
    assert_redacted(&result.raw_text());
}

#[tokio::test(flavor = "current_thread")]
async fn an_agent_facing_message_that_formats_a_model_carries_no_hidden_value() {
    let tester = Tester::new(sites());
    let result = tester
        .call("sites.inspect", json!({"how": "message"}))
        .await;
    assert_eq!(result.error_code(), Some("CONFLICT"));
    assert_redacted(&result.raw_text());
    assert_redacted(&result.envelope().to_string());
}

/// Every profile, in both expositions: a guarded or hidden name sent by an agent is refused
/// before any handler runs, and no input schema lists one.
#[tokio::test]
async fn guarded_and_hidden_names_never_come_in_through_any_profile_or_exposition() {
    let attempts: [(&str, Value); 3] = [
        (
            "billing.create_invoice",
            json!({"customer_id": "C-1", "total_cents": 5}),
        ),
        ("billing.update_invoice", json!({"id": "INV-1"})),
        ("billing.list_invoices", json!({})),
    ];
    for exposition in [Exposition::Flat, Exposition::Grouped] {
        let server = server_with(exposition);
        let tester = Tester::new(server.clone());
        for tool in server.tools() {
            let schema = serde_json::to_string(&tool.definition().input_schema).unwrap();
            for name in ["tenant_id", "webhook_secret"] {
                assert!(
                    !schema.contains(name),
                    "{exposition:?}: `{}` lists `{name}`: {schema}",
                    tool.name()
                );
            }
        }
        for (key, valid) in &attempts {
            for (name, value) in [
                ("tenant_id", json!("t_other")),
                ("webhook_secret", json!("x")),
            ] {
                let runs = db(&server).runs();
                let mut arguments = valid.clone();
                arguments[name] = value;
                let result = tester.call(key, arguments).await;
                assert_eq!(
                    result.error_code(),
                    Some("VALIDATION_ERROR"),
                    "{exposition:?} {key} with `{name}`: {}",
                    result.raw_text()
                );
                let issue = &result.error()["details"]["issues"][0];
                assert_eq!(issue["field"], name, "{exposition:?} {key}");
                assert_eq!(issue["problem"], "unknown field", "{exposition:?} {key}");
                assert_eq!(db(&server).runs(), runs, "{exposition:?} {key} ran");
            }
        }
    }
}

/// A tool built without the macros is checked when the server is built: its plain argument
/// cannot take a guarded or hidden field's name either.
#[test]
fn arguments_named_like_guarded_or_hidden_fields_are_refused_at_build() {
    for (name, kind) in [("tenant_id", "guarded"), ("webhook_secret", "hidden")] {
        let mut params = Params::new();
        params.group::<Create<Invoice>>();
        params.field::<Option<String>>(name, None);
        let problems = params
            .compile("billing.create_invoice")
            .expect_err("the argument is refused")
            .problems()
            .to_vec();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with(&format!(
                "argument `{name}` has the name of `Invoice.{name}`, a {kind} field of the model behind `"
            )),
            "{problems:?}"
        );
    }
    // Other names are fine.
    let mut params = Params::new();
    params.group::<Create<Invoice>>();
    params.field::<Option<bool>>("notify", None);
    assert!(params.compile("billing.create_invoice").is_ok());
}

#[model]
struct Contact {
    #[cast("Contact name")]
    name: String,
    #[hidden]
    phone: Hidden<String>,
}

#[presenter(Contact, fields(name), rules = ["Call contacts by their first name."])]
struct ContactView;

#[model]
struct Customer {
    #[cast("Customer name")]
    name: String,
    #[cast("The main contact, if any")]
    main_contact: Option<Contact>,
    #[cast("Every contact")]
    contacts: Vec<Contact>,
    #[cast("The account manager")]
    manager: Contact,
    #[hidden]
    credit_limit: Hidden<i64>,
}

#[presenter(Customer, fields(name, main_contact = ContactView, contacts = ContactView, manager = ContactView))]
struct CustomerView;

struct Crm {
    customers: Vec<Customer>,
}

/// Gets a customer.
#[tool(query, name = "crm.get_customer", returns = CustomerView)]
async fn get_customer(crm: State<Crm>, index: usize) -> Result<Customer, ToolError> {
    let customer = crm
        .customers
        .get(index)
        .ok_or_else(|| ToolError::not_found("No such customer."))?;
    let contact = |contact: &Contact| Contact {
        name: contact.name.clone(),
        phone: contact.phone.clone(),
    };
    Ok(Customer {
        name: customer.name.clone(),
        main_contact: customer.main_contact.as_ref().map(contact),
        contacts: customer.contacts.iter().map(contact).collect(),
        manager: contact(&customer.manager),
        credit_limit: customer.credit_limit,
    })
}

fn contact(name: &str) -> Contact {
    Contact {
        name: name.into(),
        phone: Hidden::new(format!("+1-555-{}", name.len())),
    }
}

#[tokio::test]
async fn nested_models_are_presented_by_their_own_presenters() {
    let crm = Crm {
        customers: vec![
            Customer {
                name: "Acme".into(),
                main_contact: Some(contact("Ada")),
                contacts: vec![contact("Ada"), contact("Grace")],
                manager: contact("Linus"),
                credit_limit: Hidden::new(90_000),
            },
            Customer {
                name: "Initech".into(),
                main_contact: None,
                contacts: Vec::new(),
                manager: contact("Bill"),
                credit_limit: Hidden::new(1),
            },
        ],
    };
    let server = ServerBuilder::new("crm", "1.0.0")
        .state(crm)
        .tool::<get_customer>()
        .build()
        .unwrap();
    let output_schema = Value::Object(
        (*server
            .tool("crm_get_customer")
            .unwrap()
            .definition()
            .output_schema
            .clone()
            .unwrap())
        .clone(),
    );
    let tester = Tester::new(server);
    let acme = tester.call("crm.get_customer", json!({"index": 0})).await;
    assert_eq!(
        acme.data(),
        &json!({
            "name": "Acme",
            "main_contact": {"name": "Ada"},
            "contacts": [{"name": "Ada"}, {"name": "Grace"}],
            "manager": {"name": "Linus"},
        })
    );
    let initech = tester.call("crm.get_customer", json!({"index": 1})).await;
    assert_eq!(initech.data()["main_contact"], Value::Null);
    for result in [&acme, &initech] {
        assert!(!result.raw_text().contains("555"), "{}", result.raw_text());
        assert!(
            !result.raw_text().contains("90000"),
            "{}",
            result.raw_text()
        );
        assert!(
            !result.raw_text().contains("phone"),
            "{}",
            result.raw_text()
        );
        assert_valid(&output_schema, result.envelope());
    }
    // The schema describes the nested view once and forbids anything else in it.
    let contact_view = &output_schema["$defs"]["ContactView"];
    assert_eq!(contact_view["additionalProperties"], false);
    assert_eq!(contact_view["required"], json!(["name"]));
    // The nested presenter's own rule follows each field it presents; its labels are the
    // descriptions of the listed schema, not sent again with the answer.
    assert_eq!(
        contact_view["properties"]["name"]["description"],
        "Contact name"
    );
    let rules = acme.rules();
    for rule in [
        "In main_contact: Call contacts by their first name.",
        "In contacts: Call contacts by their first name.",
        "In manager: Call contacts by their first name.",
    ] {
        assert!(
            rules.contains(&rule.to_owned()),
            "{rule} missing: {rules:?}"
        );
    }
    assert!(
        !rules.iter().any(|rule| rule.ends_with(": Contact name")),
        "{rules:?}"
    );
}

/// The same failures over Streamable HTTP, as a 2026-07-28 client calls (the stateless call the
/// server answers on the connection's own task): the answer and the log hold no hidden value.
#[cfg(feature = "http")]
#[tokio::test(flavor = "current_thread")]
async fn hidden_values_stay_hidden_on_the_stateless_http_path() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let options = fusion::serve::HttpOptions::default().bind(address);
    let shutdown = options.shutdown.clone();
    let (answers, logs) = logged(async {
        let server = tokio::spawn(async move {
            let mcp = fusion::serve::Mcp::new(sites());
            mcp.serve_http_on(listener, options).await
        });
        let mut answers = Vec::new();
        for how in ["none", "internal", "message", "panic"] {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "sites_inspect", "arguments": {"how": how}, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": {"name": "hurried", "version": "1"},
                    "io.modelcontextprotocol/clientCapabilities": {}}}})
            .to_string();
            let request = format!(
                "POST /mcp HTTP/1.1\r\nHost: {address}\r\nAccept: application/json, text/event-stream\r\n\
                 MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: sites_inspect\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.unwrap();
            answers.push(answer);
        }
        shutdown.cancel();
        server.await.unwrap().unwrap();
        answers
    })
    .await;
    assert!(answers[0].contains("Depot"), "{}", answers[0]);
    assert_failed_redacted(&answers[1..], &answers, &logs);
}

/// `failed`, the HTTP answers to `sites_inspect` with `how` "internal", "message" and "panic",
/// are error results with their codes; no hidden value is in any of `answers` or in `logs`,
/// which show the model's `Debug` with the hidden field redacted.
#[cfg(feature = "http")]
fn assert_failed_redacted(failed: &[String], answers: &[String], logs: &str) {
    assert_eq!(failed.len(), 3);
    for (answer, code) in failed
        .iter()
        .zip(["INTERNAL_ERROR", "CONFLICT", "INTERNAL_ERROR"])
    {
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.contains(code), "{answer}");
    }
    for answer in answers {
        assert_redacted(answer);
    }
    assert!(logs.contains("door_code: [hidden]"), "{logs}");
    assert_redacted(logs);
}

/// The same over a 2025-11-25 session, whose plain calls after the first are answered beside
/// its worker (`serve/session_calls.rs`): the same redaction on that path.
// On this thread, as the stateless case: the log capture is this thread's subscriber.
#[cfg(feature = "http")]
#[tokio::test(flavor = "current_thread")]
async fn hidden_values_stay_hidden_in_a_sessions_calls() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let options = fusion::serve::HttpOptions::default().bind(address);
    let shutdown = options.shutdown.clone();
    // One request on its own connection: the whole answer, head included.
    let exchange = move |session: Option<String>, body: String| async move {
        let session = session
            .map(|id| format!("Mcp-Session-Id: {id}\r\nMCP-Protocol-Version: 2025-11-25\r\n"))
            .unwrap_or_default();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {address}\r\nAccept: application/json, text/event-stream\r\n\
             {session}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    };
    let (answers, logs) = logged(async {
        let server = tokio::spawn(async move {
            let mcp = fusion::serve::Mcp::new(sites());
            mcp.serve_http_on(listener, options).await
        });
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "hurried", "version": "1"}}});
        let opened = exchange(None, initialize.to_string()).await;
        let session = opened
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("mcp-session-id")
                    .then(|| value.trim().to_owned())
            })
            .unwrap_or_else(|| panic!("a session: {opened}"));
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        exchange(Some(session.clone()), initialized.to_string()).await;
        let mut answers = Vec::new();
        // The first call goes through the worker, the others beside it.
        for how in ["none", "none", "internal", "message", "panic"] {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "sites_inspect", "arguments": {"how": how}}});
            answers.push(exchange(Some(session.clone()), body.to_string()).await);
        }
        shutdown.cancel();
        server.await.unwrap().unwrap();
        answers
    })
    .await;
    // The worker's stream starts with an event id; an answer made beside it has none.
    assert!(answers[0].contains("\nid: "), "{}", answers[0]);
    assert!(!answers[1].contains("\nid: "), "{}", answers[1]);
    assert!(answers[1].contains("Depot"), "{}", answers[1]);
    assert_failed_redacted(&answers[2..], &answers, &logs);
}

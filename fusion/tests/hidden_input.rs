//! A hidden value an agent sends in (a `create` profile may set one) goes no further than the
//! handler: a `VALIDATION_ERROR` names the field and the rule it broke but never the value,
//! the audit record's digest of it is keyed, and the log at `TRACE` carries none of it
//! (issue 23). The routes that must not compile (`==`, `Hash`, `Ord` on `Hidden`) are in
//! `ui-tests/tests/ui/hidden`.

mod common;

use std::sync::{Arc, Mutex};

use common::Logs;
use fusion::audit::{AuditError, KEYED_DIGEST_PREFIX, arguments_digest, keyed_arguments_digest};
use fusion::keyed::DigestKey;
use fusion::testing::Tester;
use fusion::{AuditRecord, AuditSink, Create, Hidden, ToolError, Update, model, tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt as _;

/// How much an API key may do.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Tier {
    Read,
    Write,
}

/// An API key: every field but the id is set on create, and all but the owner are hidden.
#[model(fillable(create = [owner, secret, pin, tier, quota, contact], update = [owner]))]
struct ApiKey {
    #[cast("Key id")]
    id: String,
    #[cast("Who owns the key")]
    #[schemars(length(max = 8))]
    owner: String,
    #[cast("The key itself")]
    #[hidden]
    #[schemars(length(max = 12))]
    secret: Hidden<String>,
    #[cast("Four digits")]
    #[hidden]
    #[schemars(regex(pattern = "^[0-9]{4}$"))]
    pin: Hidden<String>,
    #[cast("read or write")]
    #[hidden]
    tier: Hidden<Tier>,
    #[cast("Calls a day")]
    #[hidden]
    #[schemars(range(max = 1000))]
    quota: Hidden<u32>,
    #[cast("Where to send a rotated key")]
    #[hidden]
    #[schemars(email)]
    contact: Hidden<String>,
}

/// Creates a key.
#[tool(mutation, name = "keys.create", destructive = false)]
async fn create_key(key: Create<ApiKey>) -> Result<String, ToolError> {
    // A deliberate, constant-time check, as the author would write it.
    Ok(if key.pin.matches("0000") {
        "weak"
    } else {
        "created"
    }
    .to_owned())
}

/// Renames a key's owner.
#[tool(mutation, name = "keys.rename", destructive = false)]
async fn rename_key(id: String, changes: Update<ApiKey>) -> Result<String, ToolError> {
    Ok(format!("{id}: {}", changes.owner.unwrap_or_default()))
}

/// Keeps every audit record.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<AuditRecord>>>);

impl AuditSink for Recorder {
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError> {
        self.0.lock().unwrap().push(record.clone());
        Ok(())
    }
}

impl Recorder {
    fn digests(&self) -> Vec<String> {
        let records = self.0.lock().unwrap();
        records.iter().map(|r| r.arguments_digest.clone()).collect()
    }
}

fn keys(recorder: &Recorder, key: Option<DigestKey>) -> fusion::Server {
    let builder = fusion::ServerBuilder::new("keys", "1.0.0")
        .tool::<create_key>()
        .tool::<rename_key>()
        .audit(recorder.clone());
    match key {
        Some(key) => builder.audit_digest_key(key),
        None => builder,
    }
    .build()
    .unwrap()
}

fn valid() -> Value {
    json!({
        "owner": "ann",
        "secret": "k_1",
        "pin": "1234",
        "tier": "read",
        "quota": 10,
        "contact": "ann@example.com"
    })
}

async fn logged_at_trace<F: std::future::Future>(future: F) -> (F::Output, String) {
    let logs = Logs::default();
    let writer = logs.clone();
    // Spans too, with their fields, as they open and close. Every target at `TRACE` but rmcp's,
    // at `INFO`: rmcp logs each whole request, arguments included, at `DEBUG` and `TRACE`
    // (its own events, before Fusion sees the request), so a server that logs below `INFO`
    // sets `rmcp=info` or above, as the threat model says.
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::FULL)
        .with_ansi(false)
        .finish()
        .with(
            tracing_subscriber::filter::Targets::new()
                .with_default(tracing::Level::TRACE)
                .with_target("rmcp", tracing::Level::INFO),
        );
    let _guard = tracing::subscriber::set_default(subscriber);
    let output = future.await;
    (output, logs.text())
}

/// Each kind of issue that would echo what was sent, on a hidden field: the answer names the
/// field and the rule, and neither it, the log at `TRACE` nor the audit trail holds the value.
#[tokio::test(flavor = "current_thread")]
async fn validation_errors_name_a_hidden_field_and_its_rule_never_its_value() {
    // (field, value sent, its secret part, the problem named, words of the rule expected)
    let cases: [(&str, Value, &str, &str, &str); 7] = [
        (
            "secret",
            json!("SECRET_FAR_TOO_LONG_FOR_IT"),
            "SECRET_FAR",
            "too long",
            "at most 12",
        ),
        (
            "pin",
            json!("12x4SECRETPIN"),
            "SECRETPIN",
            "not allowed by the schema",
            "^[0-9]{4}$",
        ),
        (
            "tier",
            json!("SECRETTIER"),
            "SECRETTIER",
            "not one of the allowed values",
            "\"read\"",
        ),
        (
            "tier",
            json!(["SECRETLIST"]),
            "SECRETLIST",
            "wrong type",
            "one of",
        ),
        (
            "quota",
            json!("SECRETQUOTA"),
            "SECRETQUOTA",
            "wrong type",
            "integer",
        ),
        ("quota", json!(4_242_424), "4242424", "too large", "1000"),
        (
            "contact",
            json!("SECRETMAIL"),
            "SECRETMAIL",
            "not allowed by the schema",
            "email",
        ),
    ];
    let recorder = Recorder::default();
    let tester = Tester::new(keys(&recorder, None));
    for (field, value, secret, problem, rule) in cases {
        let mut arguments = valid();
        arguments[field] = value;
        let (result, logs) = logged_at_trace(tester.call("keys.create", arguments)).await;
        let raw = result.raw_text();
        assert_eq!(
            result.error_code(),
            Some("VALIDATION_ERROR"),
            "{field}: {raw}"
        );
        assert!(!raw.contains(secret), "{field}: the value came back: {raw}");
        assert!(
            !logs.contains(secret),
            "{field}: the value was logged: {logs}"
        );
        let issues = result.error()["details"]["issues"].as_array().unwrap();
        assert_eq!(issues.len(), 1, "{field}: {raw}");
        let issue = &issues[0];
        assert_eq!(issue["field"], field, "{raw}");
        assert_eq!(issue["problem"], problem, "{field}: {raw}");
        assert_eq!(issue["sent"], "[hidden]", "{field}: {raw}");
        let expected = issue["expected"].as_str().unwrap();
        assert!(expected.contains(rule), "{field}: {expected}");
        let message = result.error()["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("`{field}`: {problem}")),
            "{message}"
        );
    }
    assert_eq!(
        recorder.digests(),
        Vec::<String>::new(),
        "a refused call is not audited"
    );
}

/// The withholding is by field: a plain field's value is still echoed beside a hidden one, so
/// the agent can still see what it got wrong there.
#[tokio::test(flavor = "current_thread")]
async fn a_plain_fields_value_is_still_echoed() {
    let tester = Tester::new(keys(&Recorder::default(), None));
    let mut arguments = valid();
    arguments["owner"] = json!("far_too_long_owner");
    arguments["secret"] = json!("SECRET_FAR_TOO_LONG_FOR_IT");
    let result = tester.call("keys.create", arguments).await;
    let raw = result.raw_text();
    let issues = &result.error()["details"]["issues"];
    assert_eq!(issues[0]["field"], "owner", "{raw}");
    assert_eq!(issues[0]["sent"], "\"far_too_long_owner\"", "{raw}");
    assert_eq!(issues[1]["field"], "secret", "{raw}");
    assert_eq!(issues[1]["sent"], "[hidden]", "{raw}");
    assert!(!raw.contains("SECRET_FAR"), "{raw}");
}

/// A hidden field's name sent where its profile does not take it (an `update` that leaves it
/// out) is an unknown field, and its value is not echoed either.
#[tokio::test(flavor = "current_thread")]
async fn a_hidden_name_sent_where_it_is_not_fillable_is_refused_without_its_value() {
    let tester = Tester::new(keys(&Recorder::default(), None));
    let result = tester
        .call(
            "keys.rename",
            json!({"id": "K-1", "owner": "bob", "secret": "SECRET_GUESS"}),
        )
        .await;
    let raw = result.raw_text();
    assert_eq!(result.error_code(), Some("VALIDATION_ERROR"), "{raw}");
    let issue = &result.error()["details"]["issues"][0];
    assert_eq!(issue["field"], "secret", "{raw}");
    assert_eq!(issue["problem"], "unknown field", "{raw}");
    assert!(!raw.contains("SECRET_GUESS"), "{raw}");
}

/// The audit digest of arguments with a low-entropy hidden value (a four-digit PIN) is keyed:
/// no one reading the trail can find the PIN by hashing the 10,000 candidates, and the log at
/// `TRACE` of the successful call holds none of the hidden values.
#[tokio::test(flavor = "current_thread")]
async fn the_audit_digest_of_hidden_arguments_is_keyed_and_no_oracle() {
    let recorder = Recorder::default();
    let tester = Tester::new(keys(&recorder, None));
    let arguments = json!({
        "owner": "ann",
        "secret": "k_SECRETKEY",
        "pin": "4711",
        "tier": "write",
        "quota": 987,
        "contact": "SECRETMAIL@example.com"
    });
    let (result, logs) = logged_at_trace(tester.call("keys.create", arguments.clone())).await;
    assert!(!result.is_error(), "{}", result.raw_text());
    // The PIN as a JSON string would be logged (digits alone may be in a duration or an id).
    for secret in ["k_SECRETKEY", "\"4711\"", "SECRETMAIL"] {
        assert!(!logs.contains(secret), "`{secret}` was logged: {logs}");
        assert!(!result.raw_text().contains(secret), "{}", result.raw_text());
    }
    let digests = recorder.digests();
    assert_eq!(digests.len(), 1);
    let digest = &digests[0];
    assert!(digest.starts_with(KEYED_DIGEST_PREFIX), "{digest}");
    assert_eq!(digest.len(), KEYED_DIGEST_PREFIX.len() + 64, "{digest}");
    // The offline attack: every PIN, hashed as the trail used to hash arguments (the plain
    // SHA-256 of their canonical JSON).
    for pin in 0..10_000 {
        let mut guess = arguments.clone();
        guess["pin"] = json!(format!("{pin:04}"));
        let guess = arguments_digest(&guess);
        assert!(
            !digest.ends_with(&guess),
            "PIN {pin:04} found from the trail"
        );
    }
    // A random key per process: another server digests the same arguments differently.
    let other = Recorder::default();
    let tester = Tester::new(keys(&other, None));
    assert!(
        !tester
            .call("keys.create", arguments.clone())
            .await
            .is_error()
    );
    assert_ne!(other.digests(), digests);
}

/// With a key the author configures, replicas agree: the digest is
/// `keyed_arguments_digest(arguments, key)`, the same on every server given the key.
#[tokio::test(flavor = "current_thread")]
async fn a_configured_audit_digest_key_makes_digests_comparable_across_replicas() {
    let key = DigestKey::new(b"a 32-byte key shared by replicas").unwrap();
    let arguments = valid();
    let mut digests = Vec::new();
    for _replica in 0..2 {
        let recorder = Recorder::default();
        let tester = Tester::new(keys(&recorder, Some(key.clone())));
        assert!(
            !tester
                .call("keys.create", arguments.clone())
                .await
                .is_error()
        );
        digests.extend(recorder.digests());
    }
    let expected = keyed_arguments_digest(&arguments, &key);
    assert_eq!(digests, [expected.clone(), expected]);
    // Arguments without a hidden value keep their plain digest, as before.
    let recorder = Recorder::default();
    let tester = Tester::new(keys(&recorder, Some(key)));
    let plain = json!({"id": "K-1", "owner": "bob"});
    assert!(!tester.call("keys.rename", plain.clone()).await.is_error());
    assert_eq!(recorder.digests(), [arguments_digest(&plain)]);
}

/// The whole path a client's call takes (rmcp's transport, session and service, then Fusion's
/// pipeline), logged at `TRACE` with every span (rmcp's own events at `INFO`, see
/// `logged_at_trace`): neither a call that succeeds nor one refused for its hidden value
/// leaves the value in the log.
#[tokio::test(flavor = "current_thread")]
async fn the_trace_log_of_calls_over_a_transport_holds_no_hidden_value() {
    use fusion::protocol::ServiceExt;
    use fusion::protocol::model::CallToolRequestParams;

    let mcp = fusion::serve::Mcp::new(keys(&Recorder::default(), None));
    let call = |arguments: Value| {
        let mcp = mcp.clone();
        async move {
            let (client_io, server_io) = tokio::io::duplex(64 * 1024);
            let handler = mcp.handler();
            tokio::spawn(async move {
                let running = handler.serve(server_io).await.expect("server handshake");
                let _ = running.waiting().await;
            });
            let client = ().serve(client_io).await.expect("client handshake");
            let params = CallToolRequestParams::new("keys_create")
                .with_arguments(arguments.as_object().unwrap().clone());
            let result = client.call_tool(params).await.expect("an answer");
            let _ = client.cancel().await;
            serde_json::to_string(&result).unwrap()
        }
    };
    let mut accepted = valid();
    accepted["secret"] = json!("k_SECRETKEY");
    accepted["contact"] = json!("SECRETMAIL@example.com");
    let mut refused = valid();
    refused["secret"] = json!("SECRET_FAR_TOO_LONG_FOR_IT");
    for (arguments, secret, refusal) in [
        (accepted, "k_SECRETKEY", false),
        (refused, "SECRET_FAR", true),
    ] {
        let (answer, logs) = logged_at_trace(call(arguments)).await;
        assert_eq!(answer.contains("VALIDATION_ERROR"), refusal, "{answer}");
        assert!(!answer.contains(secret), "{answer}");
        assert!(
            logs.contains("keys_create"),
            "the call was not traced: {logs}"
        );
        assert!(!logs.contains(secret), "`{secret}` was logged: {logs}");
        assert!(
            !logs.contains("SECRETMAIL"),
            "a hidden value was logged: {logs}"
        );
    }
}

//! HTTP proxy tools (SPEC T6) against a real upstream: an axum server on 127.0.0.1, called by
//! the real reqwest client through the real pipeline. Path parameters stay one segment, hidden
//! fields never reach the agent, and every upstream failure is classified.
#![cfg(all(feature = "http-client", feature = "http"))]
#![allow(missing_docs, missing_debug_implementations)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fusion::axum;
use fusion::testing::Tester;
use fusion::{
    Create, Hidden, HttpUpstream, ServerBuilder, ToolError, Update, model, presenter, tool,
};
use serde_json::{Value, json};

#[model(upstream, fillable(create = [customer_id, total_cents, note, signing_key], update = [total_cents, note]))]
pub struct Invoice {
    #[cast("Invoice id")]
    pub id: String,
    #[cast("Customer id")]
    #[upstream(name = "customerId")]
    pub customer_id: String,
    #[cast("Total in integer cents")]
    #[upstream(name = "totalCents")]
    pub total_cents: i64,
    #[cast("open, paid or voided")]
    pub status: String,
    #[cast("A note")]
    pub note: Option<String>,
    #[hidden]
    #[upstream(name = "webhookSecret")]
    pub webhook_secret: Hidden<String>,
    #[cast("A signing key for the invoice's webhooks")]
    #[hidden]
    #[upstream(name = "signingKey")]
    pub signing_key: Hidden<Option<String>>,
    #[guarded]
    #[hidden]
    #[upstream(name = "tenantId")]
    pub tenant_id: Hidden<String>,
}

#[presenter(Invoice, fields(id, customer_id, total_cents, status, note))]
pub struct InvoiceView;

/// Reads one invoice.
#[tool(query, name = "billing.get_invoice", http = "GET /invoices/{id}", returns = InvoiceView)]
pub async fn get_invoice(id: String) -> Result<Invoice, ToolError>;

/// Reads one invoice, as a file.
#[tool(query, name = "billing.get_invoice_file", http = "GET /invoices/{id}.json", returns = InvoiceView)]
pub async fn get_invoice_file(id: String) -> Result<Invoice, ToolError>;

/// Lists invoices.
#[tool(query, name = "billing.list_invoices", http = "GET /invoices", returns = InvoiceView)]
pub async fn list_invoices(
    /// Only invoices in this status.
    status: Option<String>,
    /// How many per page.
    #[upstream(name = "pageSize")]
    page_size: Option<u32>,
) -> Result<Vec<Invoice>, ToolError>;

/// Creates an invoice.
#[tool(mutation, name = "billing.create_invoice", http = "POST /invoices", returns = InvoiceView)]
pub async fn create_invoice(
    invoice: Create<Invoice>,
    /// Sent in the query, not the body.
    #[upstream(query)]
    dry_run: Option<bool>,
) -> Result<Invoice, ToolError>;

/// Changes an invoice.
#[tool(mutation, name = "billing.update_invoice", http = "PATCH /invoices/{id}", returns = InvoiceView)]
pub async fn update_invoice(id: String, changes: Update<Invoice>) -> Result<Invoice, ToolError>;

/// Deletes an invoice.
#[tool(
    mutation,
    name = "billing.delete_invoice",
    http = "DELETE /invoices/{id}/lines/{line}"
)]
pub async fn delete_line(id: String, line: u32) -> Result<(), ToolError>;

/// What the upstream received: method, raw path and query, authorization, body.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    query: Option<String>,
    authorization: Option<String>,
    body: Value,
}

fn invoice(id: &str) -> Value {
    json!({
        "id": id, "customerId": "C-1", "totalCents": 500, "status": "open", "note": null,
        "webhookSecret": "whsec_upstream_1", "signingKey": "sk_sign_1", "tenantId": "t_secret_tenant",
        "extra": "ignored",
    })
}

/// The upstream: answers by the last path segment, and records every request.
async fn upstream(seen: Arc<Mutex<Vec<Seen>>>) -> String {
    use axum::body::Bytes;
    use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
    use axum::response::{IntoResponse, Response};

    let app = axum::Router::new().fallback(
        move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let seen = Arc::clone(&seen);
            async move {
                let body_json = serde_json::from_slice(&body).unwrap_or(Value::Null);
                seen.lock().unwrap().push(Seen {
                    method: method.to_string(),
                    path: uri.path().to_owned(),
                    query: uri.query().map(str::to_owned),
                    authorization: headers
                        .get(header::AUTHORIZATION)
                        .and_then(|value| value.to_str().ok())
                        .map(str::to_owned),
                    body: body_json.clone(),
                });
                let last = uri.path().rsplit('/').next().unwrap_or_default().to_owned();
                let json = |status: StatusCode, value: Value| -> Response {
                    (
                        status,
                        [(header::CONTENT_TYPE, "application/json")],
                        value.to_string(),
                    )
                        .into_response()
                };
                match (method.as_str(), last.as_str()) {
                    ("GET", "invoices") => {
                        json(StatusCode::OK, json!([invoice("INV-1"), invoice("INV-2")]))
                    }
                    ("POST", "invoices") => {
                        let mut created = invoice("INV-9");
                        created["totalCents"] = body_json["totalCents"].clone();
                        json(StatusCode::CREATED, created)
                    }
                    ("PATCH", _) => json(StatusCode::OK, invoice(&last)),
                    ("DELETE", _) => StatusCode::NO_CONTENT.into_response(),
                    (_, "missing") => json(
                        StatusCode::NOT_FOUND,
                        json!({"error": "no invoice sk_live_404"}),
                    ),
                    (_, "conflict") => json(StatusCode::CONFLICT, json!({"error": "voided"})),
                    (_, "unauthorized") => json(
                        StatusCode::UNAUTHORIZED,
                        json!({"error": "bad token sk_live_401"}),
                    ),
                    (_, "forbidden") => json(
                        StatusCode::FORBIDDEN,
                        json!({"error": "tenant sk_live_403"}),
                    ),
                    (_, "limited") => (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "7")])
                        .into_response(),
                    (_, "busy") => {
                        let at = httpdate::fmt_http_date(
                            std::time::SystemTime::now() + Duration::from_secs(30),
                        );
                        (StatusCode::SERVICE_UNAVAILABLE, [(header::RETRY_AFTER, at)])
                            .into_response()
                    }
                    (_, "gone") => json(StatusCode::GONE, json!({"error": "sk_live_410"})),
                    (_, "stale") => json(
                        StatusCode::PRECONDITION_FAILED,
                        json!({"error": "etag sk_live_412"}),
                    ),
                    (_, "invalid") => json(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        json!({"error": "field sk_live_422"}),
                    ),
                    (_, "bad") => {
                        json(StatusCode::BAD_REQUEST, json!({"error": "bad sk_live_400"}))
                    }
                    (_, "limited-silent") => StatusCode::TOO_MANY_REQUESTS.into_response(),
                    (_, "busy-silent") => {
                        (StatusCode::SERVICE_UNAVAILABLE, "down sk_live_503").into_response()
                    }
                    (_, "gateway") => {
                        (StatusCode::BAD_GATEWAY, "proxy sk_live_502").into_response()
                    }
                    (_, "boom") => (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "stack trace with sk_live_500",
                    )
                        .into_response(),
                    (_, "malformed") => {
                        json(StatusCode::OK, json!({"id": 5, "secret": "sk_live_shape"}))
                    }
                    (_, "huge") => json(StatusCode::OK, json!({"id": "x".repeat(200_000)})),
                    // The same size, streamed without a `Content-Length`: cut while reading.
                    (_, "streamed") => {
                        let chunks = (0..200).map(|_| {
                            Ok::<_, std::convert::Infallible>(Bytes::from(vec![b' '; 1024]))
                        });
                        let body = axum::body::Body::from_stream(futures::stream::iter(chunks));
                        (
                            StatusCode::OK,
                            [(header::CONTENT_TYPE, "application/json")],
                            body,
                        )
                            .into_response()
                    }
                    (_, "html") => (
                        StatusCode::OK,
                        [(header::CONTENT_TYPE, "text/html")],
                        "<html>sk_live_html</html>",
                    )
                        .into_response(),
                    (_, "loop") => (
                        StatusCode::FOUND,
                        [(header::LOCATION, "/api/invoices/loop")],
                    )
                        .into_response(),
                    (_, "slow") => {
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        json(StatusCode::OK, invoice("slow"))
                    }
                    (_, "elsewhere") => (
                        StatusCode::FOUND,
                        [(header::LOCATION, "http://169.254.169.254/latest/meta-data")],
                    )
                        .into_response(),
                    (_, "moved") => {
                        (StatusCode::FOUND, [(header::LOCATION, "/invoices/INV-1")]).into_response()
                    }
                    ("GET", id) => json(StatusCode::OK, invoice(&percent_decode(id))),
                    _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
                }
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}/api")
}

fn json_body(value: Value) -> ([(axum::http::HeaderName, &'static str); 1], String) {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
}

fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

async fn tester() -> (Tester, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let base = upstream(Arc::clone(&seen)).await;
    let server = ServerBuilder::new("proxy", "1.0.0")
        .upstream(
            HttpUpstream::builder(base)
                .bearer("sk_test_config")
                .timeout(Duration::from_millis(800))
                .max_response_bytes(64 * 1024)
                .max_request_bytes(4 * 1024)
                .build()
                .unwrap(),
        )
        .tool::<get_invoice>()
        .tool::<get_invoice_file>()
        .tool::<list_invoices>()
        .tool::<create_invoice>()
        .tool::<update_invoice>()
        .tool::<delete_line>()
        .build()
        .unwrap();
    (Tester::new(server), seen)
}

fn last(seen: &Mutex<Vec<Seen>>) -> Seen {
    seen.lock().unwrap().last().cloned().unwrap()
}

#[tokio::test]
async fn a_proxy_call_reaches_the_upstream_and_comes_back_through_the_presenter() {
    let (tester, seen) = tester().await;
    let result = tester
        .call("billing.get_invoice", json!({"id": "INV-1"}))
        .await;
    assert!(!result.is_error(), "{}", result.raw_text());
    assert_eq!(
        result.data(),
        &json!({"id": "INV-1", "customer_id": "C-1", "total_cents": 500, "status": "open", "note": null})
    );
    // Hidden and guarded fields the upstream sent never reach the agent.
    let text = result.raw_text();
    for secret in ["whsec_upstream_1", "sk_sign_1", "t_secret_tenant", "extra"] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
    let request = last(&seen);
    assert_eq!(request.method, "GET");
    assert_eq!(request.path, "/api/invoices/INV-1");
    assert_eq!(
        request.authorization.as_deref(),
        Some("Bearer sk_test_config")
    );
}

#[tokio::test]
async fn a_path_traversal_id_stays_one_encoded_segment() {
    let (tester, seen) = tester().await;
    let result = tester
        .call("billing.get_invoice", json!({"id": "../admin"}))
        .await;
    assert!(!result.is_error(), "{}", result.raw_text());
    assert_eq!(last(&seen).path, "/api/invoices/..%2Fadmin");
    assert_eq!(result.data()["id"], "../admin");
    for (id, path) in [
        ("a/b?c=1#d", "/api/invoices/a%2Fb%3Fc%3D1%23d"),
        ("%2e%2e", "/api/invoices/%252e%252e"),
        ("x y", "/api/invoices/x%20y"),
    ] {
        let result = tester
            .call("billing.get_invoice", json!({ "id": id }))
            .await;
        assert!(!result.is_error(), "{}", result.raw_text());
        assert_eq!(last(&seen).path, path);
    }
    // Dot segments and empty values are refused before any request.
    let before = seen.lock().unwrap().len();
    for id in ["..", ".", ""] {
        let result = tester
            .call("billing.get_invoice", json!({ "id": id }))
            .await;
        assert_eq!(result.error_code(), Some("VALIDATION_ERROR"), "{id}");
    }
    assert_eq!(seen.lock().unwrap().len(), before);

    // With text around the parameter in its segment (`{id}.json`), the value still stays
    // inside it; `..` next to `.json` is a file name, not a dot segment.
    for (id, path) in [
        ("INV-1", "/api/invoices/INV-1.json"),
        ("../admin", "/api/invoices/..%2Fadmin.json"),
        ("..", "/api/invoices/...json"),
        ("a/../../b", "/api/invoices/a%2F..%2F..%2Fb.json"),
    ] {
        let result = tester
            .call("billing.get_invoice_file", json!({ "id": id }))
            .await;
        assert!(!result.is_error(), "{id}: {}", result.raw_text());
        assert_eq!(last(&seen).path, path);
    }
    let empty = tester
        .call("billing.get_invoice_file", json!({"id": ""}))
        .await;
    assert_eq!(empty.error_code(), Some("VALIDATION_ERROR"));
}

#[tokio::test]
async fn query_and_body_come_from_the_arguments_and_profiles() {
    let (tester, seen) = tester().await;
    let list = tester
        .call(
            "billing.list_invoices",
            json!({"status": "open & paid", "page_size": 2}),
        )
        .await;
    assert!(!list.is_error(), "{}", list.raw_text());
    assert_eq!(list.data().as_array().unwrap().len(), 2);
    assert!(!list.raw_text().contains("whsec_"));
    assert_eq!(
        last(&seen).query.as_deref(),
        Some("status=open+%26+paid&pageSize=2")
    );

    // A create profile goes to the body under upstream names; the hidden key it fills goes
    // upstream and never comes back; `dry_run` is placed in the query.
    let created = tester
        .call(
            "billing.create_invoice",
            json!({"customer_id": "C-7", "total_cents": 900, "signing_key": "sk_new", "dry_run": true}),
        )
        .await;
    assert!(!created.is_error(), "{}", created.raw_text());
    assert_eq!(created.data()["total_cents"], 900);
    let request = last(&seen);
    assert_eq!(request.method, "POST");
    assert_eq!(request.query.as_deref(), Some("dry_run=true"));
    assert_eq!(
        request.body,
        json!({"customerId": "C-7", "totalCents": 900, "signingKey": "sk_new"})
    );
    assert!(!created.raw_text().contains("sk_new"));

    // A guarded field is not an argument: it is refused, and never sent.
    let before = seen.lock().unwrap().len();
    let refused = tester
        .call(
            "billing.create_invoice",
            json!({"customer_id": "C-7", "total_cents": 1, "tenant_id": "t_other"}),
        )
        .await;
    assert_eq!(refused.error_code(), Some("VALIDATION_ERROR"));
    assert_eq!(seen.lock().unwrap().len(), before);

    // An update sends what was given, `null` included.
    let updated = tester
        .call(
            "billing.update_invoice",
            json!({"id": "INV-3", "note": null}),
        )
        .await;
    assert!(!updated.is_error(), "{}", updated.raw_text());
    let request = last(&seen);
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("PATCH", "/api/invoices/INV-3")
    );
    assert_eq!(request.body, json!({"note": null}));

    let deleted = tester
        .call("billing.delete_invoice", json!({"id": "INV-3", "line": 2}))
        .await;
    assert!(!deleted.is_error(), "{}", deleted.raw_text());
    assert_eq!(last(&seen).path, "/api/invoices/INV-3/lines/2");
}

#[tokio::test]
async fn upstream_failures_are_classified_and_never_echoed() {
    let (tester, _seen) = tester().await;
    // Every row of the table in `fusion::http`: (the upstream's answer, code, retryable,
    // errorId).
    let cases = [
        ("missing", "NOT_FOUND", false, false),                 // 404
        ("gone", "NOT_FOUND", false, false),                    // 410
        ("conflict", "CONFLICT", false, false),                 // 409
        ("stale", "CONFLICT", false, false),                    // 412
        ("unauthorized", "UPSTREAM_UNAUTHORIZED", false, true), // 401
        ("forbidden", "FORBIDDEN", false, false),               // 403
        ("bad", "UPSTREAM_REJECTED", false, true),              // 400
        ("invalid", "UPSTREAM_REJECTED", false, true),          // 422
        ("limited", "RATE_LIMITED", true, false),               // 429, Retry-After: 7
        ("limited-silent", "RATE_LIMITED", true, false),        // 429 without Retry-After
        ("busy", "UPSTREAM_UNAVAILABLE", true, true),           // 503, Retry-After: a date
        ("busy-silent", "UPSTREAM_UNAVAILABLE", true, true),    // 503 without Retry-After
        ("boom", "UPSTREAM_UNAVAILABLE", true, true),           // 500
        ("gateway", "UPSTREAM_UNAVAILABLE", true, true),        // 502
        ("slow", "UPSTREAM_UNAVAILABLE", true, true),           // past the timeout
        ("malformed", "INTERNAL_ERROR", false, true),           // 200 not fitting the model
        ("html", "INTERNAL_ERROR", false, true),                // 200 not JSON
        ("huge", "INTERNAL_ERROR", false, true),                // Content-Length over the limit
        ("streamed", "INTERNAL_ERROR", false, true),            // streamed over the limit
        ("elsewhere", "INTERNAL_ERROR", false, true),           // redirect to another origin
        ("loop", "INTERNAL_ERROR", false, true),                // too many redirects
    ];
    for (id, code, retryable, error_id) in cases {
        let result = tester
            .call("billing.get_invoice", json!({ "id": id }))
            .await;
        assert_eq!(
            result.error_code(),
            Some(code),
            "{id}: {}",
            result.raw_text()
        );
        let error = result.error();
        assert_eq!(error["retryable"], retryable, "{id}");
        assert_eq!(error.get("errorId").is_some(), error_id, "{id}: {error}");
        let text = result.raw_text();
        assert!(
            !text.contains("sk_live"),
            "{id} echoed the upstream: {text}"
        );
        assert!(!text.contains("169.254"), "{id}: {text}");
    }
    let limited = tester
        .call("billing.get_invoice", json!({"id": "limited"}))
        .await;
    assert_eq!(limited.error()["retryAfterMs"], 7000);
    let busy = tester
        .call("billing.get_invoice", json!({"id": "busy"}))
        .await;
    let wait = busy.error()["retryAfterMs"].as_u64().unwrap();
    assert!((25_000..=30_000).contains(&wait), "{wait}");
    // "Later" without saying when: one second.
    for id in ["limited-silent", "busy-silent", "boom", "slow"] {
        let result = tester
            .call("billing.get_invoice", json!({ "id": id }))
            .await;
        assert_eq!(result.error()["retryAfterMs"], 1000, "{id}");
    }
    // A redirect to the same origin is followed.
    let moved = tester
        .call("billing.get_invoice", json!({"id": "moved"}))
        .await;
    assert!(!moved.is_error(), "{}", moved.raw_text());
    assert_eq!(moved.data()["id"], "INV-1");
}

#[tokio::test]
async fn an_unreachable_upstream_is_retryable() {
    // A port that was just free: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let server = ServerBuilder::new("proxy", "1.0.0")
        .upstream(
            HttpUpstream::builder(format!("http://{address}"))
                .build()
                .unwrap(),
        )
        .tool::<get_invoice>()
        .build()
        .unwrap();
    let result = Tester::new(server)
        .call("billing.get_invoice", json!({"id": "INV-1"}))
        .await;
    assert_eq!(result.error_code(), Some("UPSTREAM_UNAVAILABLE"));
    assert_eq!(result.error()["retryable"], true);
    assert!(result.error().get("errorId").is_some());
}

#[test]
fn a_proxy_tool_needs_an_upstream() {
    let error = ServerBuilder::new("proxy", "1.0.0")
        .tool::<get_invoice>()
        .build()
        .unwrap_err();
    assert!(
        error.to_string().contains("no upstream was configured"),
        "{error}"
    );
}

#[test]
fn the_upstream_configuration_is_checked() {
    for base in [
        "ftp://x",
        "not a url",
        "http://user:pw@host",
        "http://host/?q=1",
    ] {
        assert!(HttpUpstream::builder(base).build().is_err(), "{base}");
    }
    assert!(
        HttpUpstream::builder("http://host")
            .header("x-api-key", "a\r\nInjected: 1")
            .build()
            .is_err()
    );
}

/// Captures what the server logs.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn what_the_agent_is_not_shown_is_logged_under_the_error_id() {
    // One global subscriber for the whole binary: a scoped one (`set_default`) races with the
    // other tests' threads over tracing's cached callsite interest and lost every line in about
    // half of the runs of this file. Lines are told apart by their errorId.
    static LOGS: std::sync::OnceLock<Logs> = std::sync::OnceLock::new();
    let logs = LOGS
        .get_or_init(|| {
            let logs = Logs::default();
            let writer = logs.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_writer(move || writer.clone())
                .with_ansi(false)
                .finish();
            tracing::subscriber::set_global_default(subscriber)
                .expect("the only global subscriber");
            logs
        })
        .clone();
    let (tester, _seen) = tester().await;
    for (id, logged) in [
        // An answer that does not fit the model: what did not fit.
        ("malformed", "does not fit at `id`"),
        // The upstream's own words, for the operator only.
        ("unauthorized", "bad token sk_live_401"),
        ("boom", "stack trace with sk_live_500"),
    ] {
        let result = tester
            .call("billing.get_invoice", json!({ "id": id }))
            .await;
        let error_id = result.error()["errorId"].as_str().unwrap().to_owned();
        assert!(!result.raw_text().contains("sk_live"), "{id}");
        let text = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
        let line = text
            .lines()
            .find(|line| line.contains(&error_id))
            .unwrap_or_else(|| panic!("{id}: no log line with {error_id}: {text}"));
        assert!(line.contains(logged), "{id}: {line}");
    }
}

#[tokio::test]
async fn a_redirect_to_another_origin_is_never_followed() {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;

    // Another origin that would answer, and counts who reaches it.
    let reached = Arc::new(Mutex::new(0_u32));
    let counter = Arc::clone(&reached);
    let other = axum::Router::new().fallback(move || {
        let counter = Arc::clone(&counter);
        async move {
            *counter.lock().unwrap() += 1;
            (
                [(header::CONTENT_TYPE, "application/json")],
                invoice("INV-EVIL").to_string(),
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other_url = format!("http://{}/steal", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, other).await.unwrap() });

    let target = other_url.clone();
    let app = axum::Router::new().fallback(move || {
        let target = target.clone();
        async move { (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, target)]).into_response() }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let server = ServerBuilder::new("proxy", "1.0.0")
        .upstream(
            HttpUpstream::builder(base)
                .bearer("sk_test_config")
                .build()
                .unwrap(),
        )
        .tool::<get_invoice>()
        .build()
        .unwrap();
    let result = Tester::new(server)
        .call("billing.get_invoice", json!({"id": "INV-1"}))
        .await;
    assert_eq!(
        result.error_code(),
        Some("INTERNAL_ERROR"),
        "{}",
        result.raw_text()
    );
    assert!(!result.raw_text().contains("INV-EVIL"));
    assert!(!result.raw_text().contains("/steal"));
    assert_eq!(*reached.lock().unwrap(), 0, "the other origin was reached");
}

#[tokio::test]
async fn a_request_over_the_size_limit_is_refused_before_it_is_sent() {
    let (tester, seen) = tester().await;
    let before = seen.lock().unwrap().len();
    let result = tester
        .call(
            "billing.create_invoice",
            json!({"customer_id": "C-7", "total_cents": 1, "note": "n".repeat(5_000)}),
        )
        .await;
    assert_eq!(
        result.error_code(),
        Some("VALIDATION_ERROR"),
        "{}",
        result.raw_text()
    );
    assert!(
        result.error()["message"]
            .as_str()
            .unwrap()
            .contains("over the upstream's limit")
    );
    assert_eq!(seen.lock().unwrap().len(), before);
    // Under the limit, it goes.
    let result = tester
        .call(
            "billing.create_invoice",
            json!({"customer_id": "C-7", "total_cents": 1, "note": "n".repeat(1_000)}),
        )
        .await;
    assert!(!result.is_error(), "{}", result.raw_text());
}

#[tokio::test]
async fn every_call_shares_one_pooled_client() {
    // Calls of every tool go through the upstream's one client: its pooled connection is
    // reused, and the upstream sees one connection for many calls.
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::serve::ListenerExt as _;

    let app = axum::Router::new()
        .route(
            "/invoices",
            axum::routing::get(|| async { json_body(json!([invoice("INV-1")])) }),
        )
        .route(
            "/invoices/{id}",
            axum::routing::get(|| async { json_body(invoice("INV-1")) }),
        );
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&connections);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let listener = listener.tap_io(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let server = ServerBuilder::new("proxy", "1.0.0")
        .upstream(HttpUpstream::builder(base).build().unwrap())
        .tool::<get_invoice>()
        .tool::<list_invoices>()
        .build()
        .unwrap();
    let tester = Tester::new(server);
    for n in 0..10 {
        let result = if n % 2 == 0 {
            tester
                .call("billing.get_invoice", json!({"id": format!("INV-{n}")}))
                .await
        } else {
            tester.call("billing.list_invoices", json!({})).await
        };
        assert!(!result.is_error(), "{}", result.raw_text());
    }
    assert_eq!(connections.load(Ordering::SeqCst), 1);
}

/// The arguments of a proxy tool declared at run time.
#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct FetchArgs {
    /// The invoice id.
    id: String,
    /// Only with this status.
    status: Option<String>,
}

#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct TenantArgs {
    id: String,
    tenant_id: String,
}

/// The guarded field under its upstream name.
#[derive(serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
struct TenantWireArgs {
    id: String,
    #[serde(rename = "tenantId")]
    owner: String,
}

#[tokio::test]
async fn a_proxy_tool_declared_at_run_time_behaves_the_same() {
    use fusion::ToolSpec;

    let seen = Arc::new(Mutex::new(Vec::new()));
    let base = upstream(Arc::clone(&seen)).await;
    let server = ServerBuilder::new("proxy", "1.0.0")
        .upstream(HttpUpstream::builder(base.clone()).build().unwrap())
        .tool_spec(
            ToolSpec::query("billing.fetch", "Reads one invoice.")
                .http::<InvoiceView, FetchArgs, Invoice>("GET /invoices/{id}"),
        )
        .build()
        .unwrap();
    let tester = Tester::new(server);
    let result = tester
        .call("billing.fetch", json!({"id": "../admin", "status": "open"}))
        .await;
    assert!(!result.is_error(), "{}", result.raw_text());
    assert_eq!(result.data()["id"], "../admin");
    assert!(!result.raw_text().contains("whsec_"));
    let request = last(&seen);
    assert_eq!(request.path, "/api/invoices/..%2Fadmin");
    assert_eq!(request.query.as_deref(), Some("status=open"));
    let missing = tester.call("billing.fetch", json!({"id": "missing"})).await;
    assert_eq!(missing.error_code(), Some("NOT_FOUND"));
    let dots = tester.call("billing.fetch", json!({"id": ".."})).await;
    assert_eq!(dots.error_code(), Some("VALIDATION_ERROR"));

    // Mistakes are reported when the server is built.
    for (route, problem) in [
        ("GET /invoices/{number}", "`{number}`"),
        ("GET /invoices/{id}?x=1", "query string"),
    ] {
        let error = ServerBuilder::new("proxy", "1.0.0")
            .upstream(HttpUpstream::builder(base.clone()).build().unwrap())
            .tool_spec(
                ToolSpec::query("billing.fetch", "Reads one invoice.")
                    .http::<InvoiceView, FetchArgs, Invoice>(route),
            )
            .build()
            .unwrap_err();
        assert!(error.to_string().contains(problem), "{route}: {error}");
    }
    // No argument may carry a guarded field, under its Rust or its upstream name.
    let error = ServerBuilder::new("proxy", "1.0.0")
        .upstream(HttpUpstream::builder(base.clone()).build().unwrap())
        .tool_spec(
            ToolSpec::query("billing.fetch", "Reads one invoice.")
                .http::<InvoiceView, TenantArgs, Invoice>("GET /invoices/{id}"),
        )
        .build()
        .unwrap_err();
    assert!(
        error.to_string().contains("`tenant_id` is a guarded field"),
        "{error}"
    );
    let error = ServerBuilder::new("proxy", "1.0.0")
        .upstream(HttpUpstream::builder(base).build().unwrap())
        .tool_spec(
            ToolSpec::mutation("billing.make", "Creates an invoice.")
                .http::<InvoiceView, TenantWireArgs, Invoice>("POST /invoices"),
        )
        .build()
        .unwrap_err();
    assert!(
        error.to_string().contains("`tenantId` is a guarded field"),
        "{error}"
    );
}

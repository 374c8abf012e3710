//! What an upstream call may send besides a JSON object, against a real upstream (axum on
//! 127.0.0.1) through the real reqwest client: a form, a multipart body with text and file
//! parts, a JSON array, raw bytes given as base64, a header the operation fixes, and an API
//! key in the query string. The tools build their requests as fusion-openapi's generated
//! tools do.
#![cfg(all(feature = "http-client", feature = "http"))]
#![allow(missing_docs, missing_debug_implementations)]

use std::sync::{Arc, Mutex};

use fusion::axum;
use fusion::testing::Tester;
use fusion::upstream::{BodyEncoding, HttpMethod, Placement, UpstreamRequest};
use fusion::{Create, Hidden, HttpUpstream, ServerBuilder, State, ToolError, model, tool};
use serde_json::{Value, json};

#[model(upstream, fillable(create = [to, body_text, media_url, auth_token]))]
pub struct Message {
    #[cast("Message sid")]
    pub sid: String,
    #[cast("Recipient")]
    #[upstream(name = "To")]
    pub to: String,
    #[cast("Text")]
    #[upstream(name = "Body")]
    pub body_text: Option<String>,
    #[cast("Media URLs")]
    #[upstream(name = "MediaUrl")]
    pub media_url: Option<Vec<String>>,
    #[cast("A token the upstream needs")]
    #[hidden]
    #[upstream(name = "AuthToken")]
    pub auth_token: Hidden<Option<String>>,
}

/// Sends a message (a form body).
#[tool(mutation, destructive = false, name = "sms.send")]
pub async fn send_message(
    upstream: State<HttpUpstream>,
    account: String,
    message: Create<Message>,
) -> Result<Value, ToolError> {
    let mut request =
        UpstreamRequest::new(HttpMethod::Post, "POST /Accounts/{account}/Messages.json");
    request.literal("Accounts");
    request.param_between("", "account", &account, "")?;
    request.literal("Messages.json");
    request.group(Placement::Body, &message)?;
    request.set_encoding(BodyEncoding::Form);
    upstream.send(request).await
}

/// Uploads a file (a multipart body; `file` is base64).
#[tool(mutation, destructive = false, name = "files.upload")]
pub async fn upload_file(
    upstream: State<HttpUpstream>,
    purpose: String,
    /// The file's bytes, base64-encoded.
    file: String,
) -> Result<Value, ToolError> {
    let mut request = UpstreamRequest::new(HttpMethod::Post, "POST /files");
    request.literal("files");
    request.arg(Placement::Body, "purpose", &purpose)?;
    request.arg(Placement::Body, "file", &file)?;
    request.set_encoding(BodyEncoding::Multipart);
    request.file_fields(&["file"]);
    upstream.send(request).await
}

/// Creates several users (a JSON array body).
#[tool(mutation, destructive = false, name = "users.create_many")]
pub async fn create_users(
    upstream: State<HttpUpstream>,
    users: Vec<Value>,
) -> Result<Value, ToolError> {
    let mut request = UpstreamRequest::new(HttpMethod::Post, "POST /users/createWithList");
    request.literal("users");
    request.literal("createWithList");
    request.json_body(&users)?;
    upstream.send(request).await
}

/// Uploads an image (raw bytes, given as base64), with a header the operation fixes.
#[tool(mutation, destructive = false, name = "pets.upload_image")]
pub async fn upload_image(
    upstream: State<HttpUpstream>,
    /// Sent in the query.
    note: Option<String>,
    /// The image, base64-encoded.
    body: String,
) -> Result<Value, ToolError> {
    let mut request = UpstreamRequest::new(HttpMethod::Post, "POST /pet/uploadImage");
    request.literal("pet");
    request.literal("uploadImage");
    request.arg(Placement::Query, "note", &note)?;
    request.header("X-Amz-Target", "PetStore.UploadImage")?;
    request.base64_body("body", "application/octet-stream", &body)?;
    upstream.send(request).await
}

/// Reads a report (an answer that is not JSON).
#[tool(query, name = "reports.csv")]
pub async fn report_csv(upstream: State<HttpUpstream>) -> Result<String, ToolError> {
    let mut request = UpstreamRequest::new(HttpMethod::Get, "GET /report.csv");
    request.literal("report.csv");
    request.header("accept", "text/csv")?;
    let bytes = upstream.send_bytes(request).await?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// What the upstream received.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    query: Option<String>,
    content_type: Option<String>,
    target: Option<String>,
    accept: Vec<String>,
    body: Vec<u8>,
}

async fn upstream(seen: Arc<Mutex<Vec<Seen>>>) -> String {
    use axum::body::Bytes;
    use axum::http::{HeaderMap, Uri, header};

    let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
        let seen = Arc::clone(&seen);
        async move {
            let text = |name: &str| {
                headers
                    .get(name)
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_owned)
            };
            seen.lock().unwrap().push(Seen {
                path: uri.path().to_owned(),
                query: uri.query().map(str::to_owned),
                content_type: text(header::CONTENT_TYPE.as_str()),
                target: text("x-amz-target"),
                accept: headers
                    .get_all(header::ACCEPT)
                    .iter()
                    .filter_map(|value| value.to_str().ok())
                    .map(str::to_owned)
                    .collect(),
                body: body.to_vec(),
            });
            if uri.path().ends_with(".csv") {
                return (
                    [(header::CONTENT_TYPE, "text/csv")],
                    "id,total\nINV-1,500\n".to_owned(),
                );
            }
            (
                [(header::CONTENT_TYPE, "application/json")],
                json!({"received": body.len()}).to_string(),
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}/api")
}

async fn tester() -> (Tester, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let base = upstream(Arc::clone(&seen)).await;
    let upstream = HttpUpstream::builder(base)
        .query_credential("api_key", "k_secret_1")
        .build()
        .unwrap();
    assert!(!format!("{upstream:?}").contains("k_secret_1"));
    let server = ServerBuilder::new("bodies", "1.0.0")
        .upstream(upstream)
        .tool::<send_message>()
        .tool::<upload_file>()
        .tool::<create_users>()
        .tool::<upload_image>()
        .tool::<report_csv>()
        .build()
        .unwrap();
    (Tester::new(server), seen)
}

fn last(seen: &Mutex<Vec<Seen>>) -> Seen {
    seen.lock().unwrap().last().cloned().unwrap()
}

#[tokio::test]
async fn a_form_body_carries_the_profile_under_its_upstream_names() {
    let (tester, seen) = tester().await;
    let result = tester
        .call(
            "sms.send",
            json!({
                "account": "AC1", "to": "+1 555 0100", "body_text": "Hi & bye",
                "media_url": ["https://a/1", "https://a/2"], "auth_token": "tok"
            }),
        )
        .await;
    assert!(!result.is_error(), "{}", result.raw_text());
    let request = last(&seen);
    assert_eq!(request.path, "/api/Accounts/AC1/Messages.json");
    assert_eq!(
        request.content_type.as_deref(),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(
        String::from_utf8(request.body).unwrap(),
        "AuthToken=tok&Body=Hi+%26+bye&MediaUrl=https%3A%2F%2Fa%2F1&MediaUrl=https%3A%2F%2Fa%2F2&To=%2B1+555+0100"
    );
    // The credential in the query string goes on every call, after the call's own query.
    assert_eq!(request.query.as_deref(), Some("api_key=k_secret_1"));
}

#[tokio::test]
async fn a_multipart_body_sends_text_parts_and_the_decoded_file() {
    let (tester, seen) = tester().await;
    let result = tester
        .call(
            "files.upload",
            json!({"purpose": "batch", "file": "AAEC/w=="}),
        )
        .await;
    assert!(!result.is_error(), "{}", result.raw_text());
    let request = last(&seen);
    let content_type = request.content_type.unwrap();
    let boundary = content_type
        .strip_prefix("multipart/form-data; boundary=")
        .unwrap_or_else(|| panic!("{content_type}"));
    let mut expected = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"file\"\r\nContent-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    expected.extend_from_slice(&[0, 1, 2, 255]);
    expected.extend_from_slice(
        format!(
            "\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--{boundary}--\r\n"
        )
        .as_bytes(),
    );
    assert_eq!(request.body, expected);

    // A file that is not base64 is the agent's mistake, named, and nothing is sent.
    let before = seen.lock().unwrap().len();
    let result = tester
        .call(
            "files.upload",
            json!({"purpose": "batch", "file": "not base64!"}),
        )
        .await;
    assert_eq!(
        result.error_code(),
        Some("VALIDATION_ERROR"),
        "{}",
        result.raw_text()
    );
    assert!(result.raw_text().contains("`file` is not base64"));
    assert_eq!(seen.lock().unwrap().len(), before);
}

#[tokio::test]
async fn a_json_array_is_sent_as_the_whole_body() {
    let (tester, seen) = tester().await;
    let users = json!([{"username": "ada"}, {"username": "alan"}]);
    let result = tester
        .call("users.create_many", json!({ "users": users }))
        .await;
    assert!(!result.is_error(), "{}", result.raw_text());
    let request = last(&seen);
    assert_eq!(request.content_type.as_deref(), Some("application/json"));
    assert_eq!(
        serde_json::from_slice::<Value>(&request.body).unwrap(),
        users
    );
}

#[tokio::test]
async fn raw_bytes_go_with_their_content_type_and_the_fixed_header() {
    let (tester, seen) = tester().await;
    let result = tester
        .call(
            "pets.upload_image",
            json!({"note": "a b", "body": "iVBORw0KGgo"}),
        )
        .await;
    assert!(!result.is_error(), "{}", result.raw_text());
    let request = last(&seen);
    assert_eq!(
        request.content_type.as_deref(),
        Some("application/octet-stream")
    );
    assert_eq!(request.body, b"\x89PNG\r\n\x1a\n");
    assert_eq!(request.target.as_deref(), Some("PetStore.UploadImage"));
    assert_eq!(
        request.query.as_deref(),
        Some("note=a+b&api_key=k_secret_1")
    );
    let result = tester
        .call("pets.upload_image", json!({"body": "%%%"}))
        .await;
    assert_eq!(result.error_code(), Some("VALIDATION_ERROR"));
}

#[tokio::test]
async fn an_answer_that_is_not_json_comes_back_as_its_bytes() {
    let (tester, seen) = tester().await;
    let result = tester.call("reports.csv", json!({})).await;
    assert!(!result.is_error(), "{}", result.raw_text());
    assert_eq!(result.data(), &json!("id,total\nINV-1,500\n"));
    // The request's own `accept` replaces the JSON default: one value, not two.
    assert_eq!(last(&seen).accept, ["text/csv"]);
    // A JSON call still asks for JSON.
    tester.call("users.create_many", json!({"users": []})).await;
    assert_eq!(last(&seen).accept, ["application/json"]);
}

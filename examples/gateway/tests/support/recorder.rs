//! A small rmcp server over Streamable HTTP (2025-11-25 sessions and stateless 2026-07-28 on
//! one endpoint, as rmcp serves them) that records what reaches it: every call with its `_meta`
//! and HTTP headers, the `notifications/cancelled` it gets, the cancellations its handlers see,
//! every `tools/list`. Its catalog can be changed while it runs; sessions are told with
//! `notifications/tools/list_changed`. Bound to 127.0.0.1, stopped when dropped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fusion::axum;
use fusion::serde_json::{Value, json};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ContentBlock, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ProtocolVersion, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use tokio_util::sync::CancellationToken;

/// What one `tools/call` brought.
#[derive(Debug, Clone)]
pub(crate) struct SeenCall {
    /// The request's JSON-RPC id.
    pub(crate) id: rmcp::model::RequestId,
    pub(crate) tool: String,
    pub(crate) arguments: Value,
    pub(crate) traceparent: Option<String>,
    pub(crate) tracestate: Option<String>,
    pub(crate) protocol: Option<ProtocolVersion>,
    /// The request's HTTP headers, lower-case names.
    pub(crate) headers: Vec<(String, String)>,
    /// The `requestState` and `inputResponses` it carried (2026-07-28 rounds).
    pub(crate) request_state: Option<String>,
    pub(crate) input_responses: Option<Value>,
    /// The client capabilities in its `_meta` (stateless requests).
    pub(crate) client_capabilities: Option<Value>,
}

#[derive(Default)]
struct Seen {
    calls: Mutex<Vec<SeenCall>>,
    /// `notifications/cancelled` received (sessions).
    cancel_notifications: Mutex<Vec<CancelledNotificationParam>>,
    /// `wait` calls whose handler saw its cancellation token fire (any era).
    handler_cancellations: AtomicUsize,
    lists: AtomicUsize,
    /// Protocol versions of the `tools/list` requests.
    list_protocols: Mutex<Vec<Option<ProtocolVersion>>>,
    /// Every header of every request, for secrets that must not be lost or leaked.
    request_headers: Mutex<Vec<(String, String)>>,
}

struct State {
    /// Speaks only 2025-11-25 (sessions), like a server of an older SDK.
    legacy_only: bool,
    /// Knows `server/discover` but supports only 2025-11-25.
    legacy_discover: bool,
    tools: Mutex<Vec<Tool>>,
    /// Bumped when the catalog changes loudly: `subscriptions/listen` streams are told.
    changes: tokio::sync::watch::Sender<u64>,
    listens: AtomicUsize,
    seen: Seen,
    /// Session peers, told when the catalog changes.
    sessions: Mutex<Vec<Peer<RoleServer>>>,
    /// How `tools/call` requests are refused now, if they are.
    refusal: Mutex<Option<Refusal>>,
}

/// How the recorder refuses `tools/call` requests (before rmcp sees them), for the failures
/// a gateway must classify.
#[derive(Debug, Clone)]
pub(crate) enum Refusal {
    /// This HTTP status, with a plain text body.
    Status(u16),
    /// `307 Temporary Redirect` to this URL.
    Redirect(String),
    /// `400` with a JSON-RPC `invalid params` error for the request's id.
    InvalidParams,
}

#[derive(Clone)]
struct Handler(Arc<State>);

fn schema(properties: Value) -> Arc<rmcp::model::JsonObject> {
    let Value::Object(object) = json!({"type": "object", "properties": properties}) else {
        unreachable!()
    };
    Arc::new(object)
}

/// `echo` (read-only), `wait` (until cancelled, or `ms`), `progress` (`steps` notifications
/// sent at once, then the result after `then_ms`), `progress_header` (the same, its `steps`
/// also sent as an `Mcp-Param-Steps` header, SEP-2243), `ping_client` (pings the client) and
/// `delete` (destructive).
pub(crate) fn default_tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "echo",
            "Echoes its message.",
            schema(json!({"message": {"type": "string"}})),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        Tool::new(
            "wait",
            "Waits `ms` milliseconds, or until cancelled.",
            schema(json!({"ms": {"type": "integer"}})),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        Tool::new(
            "progress",
            "Reports `steps` progress notifications at once, then answers.",
            schema(json!({"steps": {"type": "integer"}})),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        Tool::new(
            "progress_header",
            "Reports `steps` progress notifications at once, then answers.",
            schema(json!({"steps": {"type": "integer", "x-mcp-header": "Steps"}})),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        Tool::new(
            "ping_client",
            "Pings the client (on the call's stream), and says whether it answered.",
            schema(json!({})),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        Tool::new(
            "delete",
            "Deletes everything.",
            schema(json!({"what": {"type": "string"}})),
        )
        .with_annotations(ToolAnnotations::new().read_only(false).destructive(true)),
    ]
}

/// A plain tool named `name`, for catalog changes.
pub(crate) fn tool(name: &str) -> Tool {
    Tool::new(name.to_owned(), "Added later.", schema(json!({})))
        .with_annotations(ToolAnnotations::new().read_only(true))
}

fn text(result: String) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(result)]))
}

impl ServerHandler for Handler {
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        if self.0.legacy_discover {
            std::borrow::Cow::Owned(vec![ProtocolVersion::V_2025_11_25])
        } else {
            std::borrow::Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
        }
    }

    /// A 2025-11-25 server does not know `server/discover`.
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::DiscoverResult, ErrorData> {
        if self.0.legacy_only {
            return Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "Method not found: server/discover",
                None,
            ));
        }
        Ok(rmcp::model::DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(rmcp::model::Implementation::new("recorder", "9.9.9"))
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.0.sessions.lock().unwrap().push(context.peer);
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        self.0
            .seen
            .cancel_notifications
            .lock()
            .unwrap()
            .push(notification);
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        Some(
            rmcp::model::SubscriptionFilter::builder()
                .tools_list_changed()
                .build(),
        )
    }

    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), ErrorData> {
        self.0.listens.fetch_add(1, Ordering::SeqCst);
        let mut changes = self.0.changes.subscribe();
        changes.mark_unchanged();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    let _ = context.sink().notify_tool_list_changed().await;
                }
            }
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.0.seen.lists.fetch_add(1, Ordering::SeqCst);
        self.0
            .seen
            .list_protocols
            .lock()
            .unwrap()
            .push(context.protocol_version());
        Ok(ListToolsResult::with_all_items(
            self.0.tools.lock().unwrap().clone(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.0
            .tools
            .lock()
            .unwrap()
            .iter()
            .find(|tool| tool.name == name)
            .cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let headers = context
            .extensions
            .get::<http::request::Parts>()
            .map(|parts| {
                parts
                    .headers
                    .iter()
                    .map(|(name, value)| {
                        (
                            name.as_str().to_owned(),
                            value.to_str().unwrap_or_default().to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.0.seen.calls.lock().unwrap().push(SeenCall {
            id: context.id.clone(),
            tool: request.name.to_string(),
            arguments: arguments.clone(),
            traceparent: context.meta.get_traceparent().map(str::to_owned),
            tracestate: context.meta.get_tracestate().map(str::to_owned),
            protocol: context.protocol_version(),
            headers,
            request_state: request.request_state.clone(),
            input_responses: request
                .input_responses
                .as_ref()
                .map(|responses| fusion::serde_json::to_value(responses).unwrap()),
            client_capabilities: context
                .meta
                .client_capabilities()
                .map(|capabilities| fusion::serde_json::to_value(capabilities).unwrap()),
        });
        match request.name.as_ref() {
            "echo" => Ok(text(format!(
                "echo: {}",
                arguments["message"].as_str().unwrap_or_default()
            ))),
            "wait" => {
                let ms = arguments["ms"].as_u64().unwrap_or(60_000);
                tokio::select! {
                    _ = context.ct.cancelled() => {
                        self.0.seen.handler_cancellations.fetch_add(1, Ordering::SeqCst);
                        Ok(text("cancelled".into()))
                    }
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => Ok(text("waited".into())),
                }
            }
            "progress" | "progress_header" => {
                let steps = arguments["steps"].as_u64().unwrap_or(3);
                if let Some(token) = context.meta.get_progress_token() {
                    for step in 1..=steps {
                        let _ = context
                            .peer
                            .notify_progress(
                                ProgressNotificationParam::new(token.clone(), step as f64)
                                    .with_total(steps as f64),
                            )
                            .await;
                    }
                }
                // The result after a pause, if asked: the race under test is at the start.
                let then = arguments["then_ms"].as_u64().unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(then)).await;
                Ok(text(format!("{steps} steps")))
            }
            "delete" => Ok(text("deleted".into())),
            // `count` log messages (two by default) on the call's stream, at the level the
            // request asked for.
            "log" => {
                #[allow(deprecated)] // logging (SEP-2577)
                if context.meta.log_level().is_some() {
                    for n in 1..=arguments["count"].as_u64().unwrap_or(2) {
                        let _ = context
                            .peer
                            .notify_logging_message(
                                rmcp::model::LoggingMessageNotificationParam::new(
                                    rmcp::model::LoggingLevel::Info,
                                    json!(format!("line {n}")),
                                ),
                            )
                            .await;
                    }
                }
                Ok(text("logged".into()))
            }
            // 2026-07-28 rounds: asks its question under its own state until it is answered.
            "ask" | "ask_header" => match request.request_state.as_deref() {
                Some("recorder-state-1") => match request
                    .input_responses
                    .as_ref()
                    .and_then(|responses| fusion::serde_json::to_value(responses).ok())
                {
                    Some(responses) => Ok(text(format!("answered: {responses}"))),
                    None => Err(ErrorData::invalid_params("no answer", None)),
                },
                // With an internal detail in `data` and a long message, which the gateway must
                // not pass on whole.
                Some(_) => Err(ErrorData::invalid_params(
                    format!(
                        "requestState failed verification{}",
                        " (detail)".repeat(100)
                    ),
                    Some(json!({"internal": "/srv/recorder/keys.pem"})),
                )),
                None => {
                    let question: rmcp::model::InputRequest =
                        fusion::serde_json::from_value(json!({
                            "method": "elicitation/create",
                            "params": {
                                "message": "Which one?",
                                "requestedSchema": {
                                    "type": "object",
                                    "properties": {"pick": {"type": "string"}}
                                }
                            }
                        }))
                        .unwrap();
                    let mut requests = rmcp::model::InputRequests::new();
                    requests.insert("q1".to_owned(), question);
                    Ok(CallToolResponse::InputRequired(
                        rmcp::model::InputRequiredResult::new(
                            Some(requests),
                            Some("recorder-state-1".to_owned()),
                        ),
                    ))
                }
            },
            "ping_client" => match context
                .peer
                .send_request(rmcp::model::ServerRequest::PingRequest(Default::default()))
                .await
            {
                Ok(_) => Ok(text("pong".into())),
                Err(error) => Ok(text(format!("the ping failed: {error}"))),
            },
            other => Ok(text(format!("{other} called"))),
        }
    }
}

/// How a recorder behaves.
#[derive(Default)]
pub(crate) struct Options {
    /// Every request without this header and value is refused with 401.
    pub(crate) required_header: Option<(&'static str, String)>,
    /// Speaks only 2025-11-25, and does not know `server/discover`.
    pub(crate) legacy_only: bool,
    /// Speaks only 2025-11-25, and says so when asked with `server/discover`.
    pub(crate) legacy_discover: bool,
}

/// `request` refused as `refusal` says if it is a `tools/call`, else served.
async fn refused(
    request: axum::extract::Request,
    next: axum::middleware::Next,
    refusal: Refusal,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let message: Value = fusion::serde_json::from_slice(&bytes).unwrap_or_default();
    if message["method"] != "tools/call" {
        let request = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
        return next.run(request).await;
    }
    match refusal {
        Refusal::Status(status) => (
            http::StatusCode::from_u16(status).unwrap(),
            "internal details the agent must not see",
        )
            .into_response(),
        Refusal::Redirect(to) => (
            http::StatusCode::TEMPORARY_REDIRECT,
            [(http::header::LOCATION, to)],
        )
            .into_response(),
        Refusal::InvalidParams => (
            http::StatusCode::BAD_REQUEST,
            [(http::header::CONTENT_TYPE, "application/json")],
            json!({"jsonrpc": "2.0", "id": message["id"], "error": {
                "code": -32602, "message": "steps must be a number",
            }})
            .to_string(),
        )
            .into_response(),
    }
}

fn state(legacy_only: bool, legacy_discover: bool) -> Arc<State> {
    Arc::new(State {
        legacy_only,
        legacy_discover,
        tools: Mutex::new(default_tools()),
        changes: tokio::sync::watch::channel(0).0,
        listens: AtomicUsize::new(0),
        seen: Seen::default(),
        sessions: Mutex::new(Vec::new()),
        refusal: Mutex::new(None),
    })
}

/// The running recorder.
pub(crate) struct Recorder {
    state: Arc<State>,
    sessions: Arc<LocalSessionManager>,
    pub(crate) url: String,
    stop: CancellationToken,
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Recorder {
    /// Serves [`default_tools`] on `http://127.0.0.1:<free port>/mcp`, both protocol eras.
    pub(crate) async fn start() -> Recorder {
        Recorder::start_with(Options::default()).await
    }

    /// Like [`Recorder::start`], but speaking only 2025-11-25 (a session per client) and not
    /// knowing `server/discover`, like a server of an SDK older than 2026-07-28.
    pub(crate) async fn start_legacy() -> Recorder {
        Recorder::start_with(Options {
            legacy_only: true,
            ..Options::default()
        })
        .await
    }

    /// Serves [`default_tools`] on this process's stdin and stdout until stdin closes (a
    /// 2025-11-25 session, as stdio servers speak).
    pub(crate) async fn serve_stdio() {
        use rmcp::ServiceExt as _;
        let handler = Handler(state(false, false));
        let running = handler
            .serve(rmcp::transport::stdio())
            .await
            .expect("stdio handshake");
        let _ = running.waiting().await;
    }

    pub(crate) async fn start_with(options: Options) -> Recorder {
        let Options {
            required_header: required,
            legacy_only,
            legacy_discover,
        } = options;
        let state = state(legacy_only, legacy_discover);
        let stop = CancellationToken::new();
        let handler = Handler(Arc::clone(&state));
        let sessions = Arc::new(LocalSessionManager::default());
        let service = StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::clone(&sessions),
            StreamableHttpServerConfig::default()
                .with_legacy_session_mode(true)
                .with_cancellation_token(stop.child_token()),
        );
        let recorded = Arc::clone(&state);
        let router =
            axum::Router::new()
                .route_service("/mcp", service)
                .layer(axum::middleware::from_fn(
                    move |request: axum::extract::Request, next: axum::middleware::Next| {
                        let state = Arc::clone(&recorded);
                        let required = required.clone();
                        async move {
                            state.seen.request_headers.lock().unwrap().extend(
                                request.headers().iter().map(|(name, value)| {
                                    (
                                        name.as_str().to_owned(),
                                        value.to_str().unwrap_or_default().to_owned(),
                                    )
                                }),
                            );
                            if let Some((name, value)) = &required {
                                let given =
                                    request.headers().get(*name).and_then(|v| v.to_str().ok());
                                if given != Some(value.as_str()) {
                                    return axum::response::IntoResponse::into_response((
                                        http::StatusCode::UNAUTHORIZED,
                                        "missing or wrong API key",
                                    ));
                                }
                            }
                            let refusal = state.refusal.lock().unwrap().clone();
                            match refusal {
                                Some(refusal) => refused(request, next, refusal).await,
                                None => next.run(request).await,
                            }
                        }
                    },
                ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let stopped = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async move { stopped.cancelled().await })
                .await;
        });
        Recorder {
            state,
            sessions,
            url,
            stop,
        }
    }

    /// Refuses `tools/call` requests this way from now on (`None`: serves them again).
    pub(crate) fn refuse(&self, refusal: Option<Refusal>) {
        *self.state.refusal.lock().unwrap() = refusal;
    }

    /// Forgets every session, as a restarted server would: requests in them get 404.
    pub(crate) async fn forget_sessions(&self) {
        use rmcp::transport::streamable_http_server::session::SessionManager as _;
        let ids: Vec<_> = self
            .sessions
            .sessions
            .read()
            .await
            .keys()
            .cloned()
            .collect();
        for id in ids {
            let _ = self.sessions.close_session(&id).await;
        }
    }

    pub(crate) fn calls(&self) -> Vec<SeenCall> {
        self.state.seen.calls.lock().unwrap().clone()
    }

    pub(crate) fn calls_of(&self, tool: &str) -> Vec<SeenCall> {
        self.calls()
            .into_iter()
            .filter(|call| call.tool == tool)
            .collect()
    }

    pub(crate) fn cancel_notifications(&self) -> Vec<CancelledNotificationParam> {
        self.state.seen.cancel_notifications.lock().unwrap().clone()
    }

    pub(crate) fn handler_cancellations(&self) -> usize {
        self.state.seen.handler_cancellations.load(Ordering::SeqCst)
    }

    pub(crate) fn lists(&self) -> usize {
        self.state.seen.lists.load(Ordering::SeqCst)
    }

    pub(crate) fn list_protocols(&self) -> Vec<Option<ProtocolVersion>> {
        self.state.seen.list_protocols.lock().unwrap().clone()
    }

    pub(crate) fn request_headers(&self) -> Vec<(String, String)> {
        self.state.seen.request_headers.lock().unwrap().clone()
    }

    /// Replaces the catalog without telling anyone (a server that cannot notify).
    pub(crate) fn set_tools_quietly(&self, tools: Vec<Tool>) {
        *self.state.tools.lock().unwrap() = tools;
    }

    /// `subscriptions/listen` streams opened so far (2026-07-28 clients).
    pub(crate) fn listens(&self) -> usize {
        self.state.listens.load(Ordering::SeqCst)
    }

    /// Replaces the catalog and sends `notifications/tools/list_changed` to every session and
    /// every listen stream.
    pub(crate) async fn set_tools(&self, tools: Vec<Tool>) {
        self.set_tools_quietly(tools);
        self.state.changes.send_modify(|version| *version += 1);
        let sessions = self.state.sessions.lock().unwrap().clone();
        for peer in sessions {
            if !peer.is_transport_closed() {
                let _ = peer.notify_tool_list_changed().await;
            }
        }
    }
}

//! rmcp's HTTP client for an upstream, which keeps the session id each `initialize` answer
//! gives, for the gateway's own path to send with its calls.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest};

use super::TokenSource;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

/// The session id of an upstream's 2025-11-25 session, as rmcp's client has it now.
#[derive(Default)]
pub(crate) struct SessionId(RwLock<Option<Arc<str>>>);

impl SessionId {
    pub(super) fn get(&self) -> Option<Arc<str>> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(super) fn set(&self, id: Option<&str>) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = id.map(Arc::from);
    }
}

/// rmcp's reqwest client, keeping the session id each `initialize` answer gives (the first,
/// and those of the sessions rmcp opens again after one expired).
#[derive(Clone)]
pub(crate) struct Snoop {
    pub(crate) client: reqwest::Client,
    pub(crate) session: Arc<SessionId>,
    /// The gateway's own OAuth client: its token replaces any configured bearer token.
    pub(crate) credentials: Option<Arc<TokenSource>>,
}

impl Snoop {
    /// The bearer token a request carries: the client credentials' current token, else the
    /// one configured.
    async fn bearer(
        &self,
        configured: Option<String>,
    ) -> Result<Option<String>, StreamableHttpError<reqwest::Error>> {
        match &self.credentials {
            None => Ok(configured),
            Some(source) => source
                .token()
                .await
                .map(|token| Some(token.to_string()))
                .map_err(|error| StreamableHttpError::UnexpectedServerResponse(error.into())),
        }
    }

    /// After the upstream answered 401 to `token`: the next request fetches another.
    async fn refused(&self, token: Option<&str>, unauthorized: bool) {
        if let (Some(source), Some(token), true) = (&self.credentials, token, unauthorized) {
            source.refused(token).await;
        }
    }
}

impl StreamableHttpClient for Snoop {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let initialize = matches!(
            &message,
            ClientJsonRpcMessage::Request(request)
                if matches!(request.request, ClientRequest::InitializeRequest(_))
        );
        let auth_header = self.bearer(auth_header).await?;
        let response = self
            .client
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header.clone(),
                custom_headers,
                limits,
            )
            .await;
        let unauthorized = matches!(response, Err(StreamableHttpError::AuthRequired(_)));
        self.refused(auth_header.as_deref(), unauthorized).await;
        if initialize
            && let Ok(
                StreamableHttpPostResponse::Json(_, session)
                | StreamableHttpPostResponse::Sse(_, session),
            ) = &response
        {
            self.session.set(session.as_deref());
        }
        response
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let auth_header = self.bearer(auth_header).await?;
        self.client
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<
        BoxStream<'static, Result<sse_stream::Sse, SseError>>,
        StreamableHttpError<Self::Error>,
    > {
        let auth_header = self.bearer(auth_header).await?;
        self.client
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<
        BoxStream<'static, Result<sse_stream::Sse, SseError>>,
        StreamableHttpError<Self::Error>,
    > {
        let auth_header = self.bearer(auth_header).await?;
        self.client
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

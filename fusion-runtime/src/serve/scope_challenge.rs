//! Step-up at the HTTP level (MCP authorization, "scope challenge handling"): a verified token
//! that lacks a scope the called tool needs gets `403` with
//! `WWW-Authenticate: Bearer error="insufficient_scope", scope="…", resource_metadata="…"`, so
//! that the client can ask the authorization server for those scopes and retry.
//!
//! Only where the tool is known before the body is read: a 2026-07-28 request names it in its
//! `Mcp-Method: tools/call` and `Mcp-Name` headers (which the endpoint checks against the body
//! before anything runs, so a header naming another tool changes only which refusal comes
//! first). A 2025-11-25 session request names its tool only in the body, which this layer does
//! not read: reading it here would do it outside the body-read timeout and parse it twice; that
//! call is refused by the pipeline instead, as a `FORBIDDEN` tool result naming the same scopes.
//! A grouped tool's action is in its arguments, so it is refused the same way.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use crate::principal::Principal;
use crate::server::Server;

/// The state of the layer: the server whose tools are called, and where its metadata is.
#[derive(Clone)]
pub(crate) struct ScopeChallenge {
    pub(crate) server: Server,
    pub(crate) resource_metadata: String,
}

impl ScopeChallenge {
    /// The scopes `principal` lacks to call the tool `name`, when the access policy refuses it
    /// for that reason; `None` when it may call it, or is refused for another one.
    fn missing(&self, name: &str, principal: &Principal) -> Option<Vec<String>> {
        let tool = self.server.tool(name)?;
        let [action] = tool.actions()[..] else {
            return None;
        };
        let mut context = self.server.new_context();
        context.extensions_mut().insert(principal.clone());
        if self.server.may_call(action, &context) {
            return None;
        }
        let missing = self.server.scopes_missing(action, &context);
        (!missing.is_empty()).then_some(missing)
    }

    fn forbid(&self, missing: &[String]) -> Response {
        let scopes = missing.join(" ");
        let challenge = format!(
            "Bearer error=\"insufficient_scope\", scope=\"{scopes}\", resource_metadata=\"{}\", \
             error_description=\"the token lacks a scope this tool needs\"",
            self.resource_metadata
        );
        let mut response = Response::new(Body::from(format!(
            "Forbidden: the token lacks the scope `{scopes}`"
        )));
        *response.status_mut() = StatusCode::FORBIDDEN;
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

/// The axum middleware, inside the bearer check (the principal is verified).
pub(crate) async fn challenge(
    State(check): State<ScopeChallenge>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() == Method::POST {
        let headers = request.headers();
        let called = headers
            .get("mcp-method")
            .is_some_and(|method| method.as_bytes() == b"tools/call");
        let name = headers.get("mcp-name").and_then(|name| name.to_str().ok());
        let principal = request.extensions().get::<Principal>();
        if let (true, Some(name), Some(principal)) = (called, name, principal)
            && let Some(missing) = check.missing(name, principal)
        {
            return check.forbid(&missing);
        }
    }
    next.run(request).await
}

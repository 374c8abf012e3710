//! Step-up at the HTTP level (MCP authorization, "scope challenge handling"): a verified token
//! that lacks a scope the called tool needs gets `403` with
//! `WWW-Authenticate: Bearer error="insufficient_scope", scope="…", resource_metadata="…"`, so
//! that the client can ask the authorization server for those scopes and retry.
//!
//! The same for a resource read or a prompt get (`Mcp-Method: resources/read` or
//! `prompts/get`, `Mcp-Name` the URI or the prompt's name) whose resource or prompt needs a
//! scope the token lacks.
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
    /// The scopes `principal` lacks for `method` on `name` (a tool, a resource's URI or a
    /// prompt), when the access policy refuses it for that reason; `None` when it may, or is
    /// refused for another one.
    fn missing(&self, method: &[u8], name: &str, principal: &Principal) -> Option<Vec<String>> {
        let mut context = self.server.new_context();
        context.extensions_mut().insert(principal.clone());
        let missing = match method {
            b"tools/call" => {
                let tool = self.server.tool(name)?;
                let [action] = tool.actions()[..] else {
                    return None;
                };
                if self.server.may_call(action, &context) {
                    return None;
                }
                self.server.scopes_missing(action, &context)
            }
            b"resources/read" => self.server.read_scopes_missing(name, &context),
            b"prompts/get" => self.server.prompt_scopes_missing(name, &context),
            _ => return None,
        };
        (!missing.is_empty()).then_some(missing)
    }

    /// The 403 for a `what` (tool, resource, prompt) that needs `missing`.
    fn forbid(&self, what: &str, missing: &[String]) -> Response {
        let scopes = missing.join(" ");
        let challenge = format!(
            "Bearer error=\"insufficient_scope\", scope=\"{scopes}\", resource_metadata=\"{}\", \
             error_description=\"the token lacks a scope this {what} needs\"",
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
        let method = headers.get("mcp-method").map(HeaderValue::as_bytes);
        let name = headers.get("mcp-name").and_then(|name| name.to_str().ok());
        let principal = request.extensions().get::<Principal>();
        if let (Some(method), Some(name), Some(principal)) = (method, name, principal)
            && let Some(missing) = check.missing(method, name, principal)
        {
            let what = match method {
                b"resources/read" => "resource",
                b"prompts/get" => "prompt",
                _ => "tool",
            };
            return check.forbid(what, &missing);
        }
    }
    next.run(request).await
}

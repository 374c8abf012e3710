//! OAuth 2.0 Protected Resource Metadata (RFC 9728): where a client learns which
//! authorization server issues tokens for this endpoint, and which scopes it knows.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};

/// What this endpoint tells clients about itself as an OAuth protected resource (RFC 9728),
/// served at `/.well-known/oauth-protected-resource` and at the same path followed by the
/// resource's own path (`/.well-known/oauth-protected-resource/mcp` for
/// `https://mcp.example.com/mcp`), outside the bearer check. A 401 then carries
/// `WWW-Authenticate: Bearer resource_metadata="…"` naming it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedResource {
    /// The canonical URI of this MCP endpoint, the audience tokens must name
    /// (`https://mcp.example.com/mcp`).
    pub resource: String,
    /// The issuers whose tokens are accepted.
    pub authorization_servers: Vec<String>,
    /// The scopes tools, resources and prompts require (see
    /// [`ScopeRules::supported`](crate::scopes::ScopeRules::supported)).
    pub scopes_supported: Vec<String>,
}

impl ProtectedResource {
    /// The metadata of `resource`, whose tokens `authorization_server` issues.
    pub fn new(resource: impl Into<String>, authorization_server: impl Into<String>) -> Self {
        ProtectedResource {
            resource: resource.into(),
            authorization_servers: vec![authorization_server.into()],
            scopes_supported: Vec::new(),
        }
    }

    /// Announces the scopes this endpoint knows.
    #[must_use]
    pub fn scopes<I: IntoIterator<Item = String>>(mut self, scopes: I) -> Self {
        self.scopes_supported = scopes.into_iter().collect();
        self.scopes_supported.sort();
        self.scopes_supported.dedup();
        self
    }

    /// The resource's path (`/mcp`), empty for a resource at the root.
    fn path(&self) -> &str {
        let after_scheme = self
            .resource
            .split_once("://")
            .map_or(self.resource.as_str(), |(_, rest)| rest);
        let path = after_scheme
            .find('/')
            .map_or("", |start| &after_scheme[start..]);
        let path = path.split(['?', '#']).next().unwrap_or("");
        path.trim_end_matches('/')
    }

    /// The metadata document's paths on this server: the path-suffixed form (RFC 9728 §3.1)
    /// and, for clients that look only there, the root form.
    pub(crate) fn well_known_paths(&self) -> Vec<String> {
        let root = "/.well-known/oauth-protected-resource".to_owned();
        match self.path() {
            "" => vec![root],
            path => vec![format!("{root}{path}"), root],
        }
    }

    /// The URL of the metadata document, announced in `WWW-Authenticate`.
    pub fn metadata_url(&self) -> String {
        let path = self.path();
        let origin = self
            .resource
            .strip_suffix(path)
            .unwrap_or(&self.resource)
            .trim_end_matches('/');
        let origin = origin.split(['?', '#']).next().unwrap_or(origin);
        format!("{origin}/.well-known/oauth-protected-resource{path}")
    }

    pub(crate) fn document(&self) -> serde_json::Value {
        serde_json::json!({
            "resource": self.resource,
            "authorization_servers": self.authorization_servers,
            "scopes_supported": self.scopes_supported,
            "bearer_methods_supported": ["header"],
        })
    }
}

/// The metadata document as an HTTP response (cacheable for a while: it changes with a
/// deployment, not per request).
pub(crate) fn respond(body: &[u8]) -> Response {
    let mut response = (StatusCode::OK, body.to_vec()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_below_the_root_has_a_path_suffixed_metadata_url() {
        let resource = ProtectedResource::new("https://mcp.example.com/mcp", "https://auth");
        assert_eq!(
            resource.metadata_url(),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            resource.well_known_paths(),
            [
                "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource"
            ]
        );
        let root = ProtectedResource::new("http://127.0.0.1:8080/", "https://auth");
        assert_eq!(
            root.metadata_url(),
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            root.well_known_paths(),
            ["/.well-known/oauth-protected-resource"]
        );
    }
}

//! The gateway's own OAuth credentials for an HTTP upstream (the confused-deputy rule): a token
//! from the client credentials grant (RFC 6749 §4.4) at the authorization server's token
//! endpoint, cached until shortly before it expires, then fetched again. A caller's token is
//! never sent to an upstream: every request to it carries this token instead (rmcp's requests
//! through [`Snoop`](super::session::Snoop), tool calls on the gateway's own path).
//!
//! The client secret and the tokens are secrets: they are in no error, `Debug` output or log.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde::Deserialize;

/// The client credentials grant (RFC 6749 §4.4): the gateway's own client at an authorization
/// server, whose access token an HTTP upstream receives as `Authorization: Bearer …` (see
/// [`Upstream::client_credentials`](super::Upstream::client_credentials)).
///
/// ```
/// use fusion_runtime::gateway::{ClientCredentials, Upstream};
///
/// let secret = std::env::var("CRM_CLIENT_SECRET").unwrap_or_default();
/// let upstream = Upstream::http("https://crm.example/mcp").client_credentials(
///     ClientCredentials::new("https://auth.example/token", "gateway", secret)
///         .resource("https://crm.example/mcp")
///         .scope("crm:read crm:write"),
/// );
/// # let _ = upstream;
/// ```
#[derive(Clone)]
pub struct ClientCredentials {
    pub(crate) token_endpoint: String,
    pub(crate) client_id: String,
    client_secret: String,
    scope: Option<String>,
    resource: Option<String>,
}

impl std::fmt::Debug for ClientCredentials {
    // The secret is never shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("token_endpoint", &self.token_endpoint)
            .field("client_id", &self.client_id)
            .field("scope", &self.scope)
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

impl ClientCredentials {
    /// The client `client_id` with `client_secret` (sent with HTTP Basic authentication,
    /// `client_secret_basic`) at the token endpoint `token_endpoint`.
    pub fn new(
        token_endpoint: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
    ) -> Self {
        ClientCredentials {
            token_endpoint: token_endpoint.into(),
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            scope: None,
            resource: None,
        }
    }

    /// The scopes to ask for, space-separated (none: the server's default).
    #[must_use]
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }

    /// The resource indicator (RFC 8707): the upstream's canonical URI, so that the token is
    /// bound to that upstream and useless anywhere else.
    #[must_use]
    pub fn resource(mut self, resource: impl Into<String>) -> Self {
        self.resource = Some(resource.into());
        self
    }

    /// The form body of a token request.
    fn form(&self) -> String {
        use crate::upstream::encode_form;
        let mut body = "grant_type=client_credentials".to_owned();
        for (name, value) in [("scope", &self.scope), ("resource", &self.resource)] {
            if let Some(value) = value {
                body.push_str(&format!("&{name}={}", encode_form(value)));
            }
        }
        body
    }
}

/// How long before it expires a token is replaced: a tenth of its lifetime, at most a minute,
/// so that a request never leaves with a token about to expire on the way.
fn refresh_margin(lifetime: Duration) -> Duration {
    (lifetime / 10).min(Duration::from_secs(60))
}

/// The lifetime assumed for a token whose response gives no `expires_in`.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);

/// The token response's fields read (RFC 6749 §5.1).
#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    token_type: String,
    expires_in: Option<u64>,
}

/// An error response's code (RFC 6749 §5.2): a fixed ASCII word, safe to show.
#[derive(Deserialize)]
struct TokenError {
    error: String,
}

struct Cached {
    token: Arc<str>,
    refresh_at: Instant,
}

/// Where an upstream's bearer token comes from: the grant, its cached token, and how many
/// times it was fetched (for [`UpstreamStatus`](super::UpstreamStatus)-like checks in tests).
pub(crate) struct TokenSource {
    credentials: ClientCredentials,
    http: OnceLock<reqwest::Client>,
    /// Held while a token is fetched, so that concurrent requests wait for one fetch.
    cached: tokio::sync::Mutex<Option<Cached>>,
    fetched: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSource")
            .field("credentials", &self.credentials)
            .finish_non_exhaustive()
    }
}

impl TokenSource {
    pub(crate) fn new(credentials: ClientCredentials) -> Self {
        TokenSource {
            credentials,
            http: OnceLock::new(),
            cached: tokio::sync::Mutex::new(None),
            fetched: std::sync::atomic::AtomicU64::new(0),
        }
    }

    pub(crate) fn credentials(&self) -> &ClientCredentials {
        &self.credentials
    }

    /// How many tokens were fetched so far.
    pub(crate) fn fetched(&self) -> u64 {
        self.fetched.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The current access token: the cached one while it is fresh, else a new one.
    pub(crate) async fn token(&self) -> Result<Arc<str>, String> {
        let mut cached = self.cached.lock().await;
        if let Some(current) = &*cached
            && Instant::now() < current.refresh_at
        {
            return Ok(Arc::clone(&current.token));
        }
        let fresh = self.fetch().await?;
        let token = Arc::clone(&fresh.token);
        *cached = Some(fresh);
        Ok(token)
    }

    /// Forgets `token` (the upstream refused it): the next request fetches another. A token
    /// already replaced by a concurrent request is left alone.
    pub(crate) async fn refused(&self, token: &str) {
        let mut cached = self.cached.lock().await;
        if cached
            .as_ref()
            .is_some_and(|current| &*current.token == token)
        {
            *cached = None;
        }
    }

    async fn fetch(&self) -> Result<Cached, String> {
        let endpoint = &self.credentials.token_endpoint;
        let http = match self.http.get() {
            Some(http) => http,
            None => {
                let built = super::upstream::http_client()?;
                self.http.get_or_init(|| built)
            }
        };
        let started = Instant::now();
        let response = http
            .post(endpoint)
            .basic_auth(
                crate::upstream::encode_form(&self.credentials.client_id),
                Some(crate::upstream::encode_form(
                    &self.credentials.client_secret,
                )),
            )
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(self.credentials.form())
            .timeout(Duration::from_secs(30))
            .send()
            .await
            // reqwest's error names the URL, never the request's headers.
            .map_err(|error| format!("the token endpoint {endpoint} is unreachable: {error}"))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|error| format!("the token endpoint {endpoint}: {error}"))?;
        if !status.is_success() {
            let code = serde_json::from_slice::<TokenError>(&body)
                .ok()
                .map(|error| error.error)
                .filter(|code| code.bytes().all(|byte| byte.is_ascii_graphic()))
                .map(|code| format!(" ({code})"))
                .unwrap_or_default();
            return Err(format!(
                "the token endpoint {endpoint} refused client `{}`: HTTP {}{code}",
                self.credentials.client_id,
                status.as_u16()
            ));
        }
        let answer: TokenResponse = serde_json::from_slice(&body).map_err(|_| {
            format!("the token endpoint {endpoint} did not answer with a token response")
        })?;
        if !answer.token_type.eq_ignore_ascii_case("bearer") {
            return Err(format!(
                "the token endpoint {endpoint} gave a `{}` token, not a bearer token",
                answer.token_type
            ));
        }
        if http::HeaderValue::try_from(format!("Bearer {}", answer.access_token)).is_err() {
            return Err(format!(
                "the token endpoint {endpoint} gave a token that cannot be sent in a header"
            ));
        }
        self.fetched
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let lifetime = answer
            .expires_in
            .map_or(DEFAULT_LIFETIME, Duration::from_secs);
        tracing::debug!(
            token_endpoint = %endpoint,
            client_id = %self.credentials.client_id,
            expires_in_s = lifetime.as_secs(),
            "upstream token fetched"
        );
        Ok(Cached {
            token: answer.access_token.into(),
            refresh_at: started + lifetime.saturating_sub(refresh_margin(lifetime)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_secret() {
        let credentials =
            ClientCredentials::new("https://as.test/token", "gw", "s3cr3t-value").scope("crm:read");
        let shown = format!(
            "{credentials:?} {:?}",
            TokenSource::new(credentials.clone())
        );
        assert!(!shown.contains("s3cr3t-value"), "{shown}");
        assert!(shown.contains("gw"), "{shown}");
    }

    #[test]
    fn the_form_asks_for_the_scope_and_the_resource() {
        let credentials = ClientCredentials::new("https://as.test/token", "gw", "secret")
            .scope("crm:read crm:write")
            .resource("https://crm.test/mcp");
        assert_eq!(
            credentials.form(),
            "grant_type=client_credentials&scope=crm%3Aread+crm%3Awrite\
             &resource=https%3A%2F%2Fcrm.test%2Fmcp"
        );
    }

    #[test]
    fn a_token_is_replaced_before_it_expires() {
        assert_eq!(
            refresh_margin(Duration::from_secs(600)),
            Duration::from_secs(60)
        );
        assert_eq!(
            refresh_margin(Duration::from_secs(100)),
            Duration::from_secs(10)
        );
    }
}

//! The gateway's own OAuth credentials for an HTTP upstream (the confused-deputy rule): a token
//! from the client credentials grant (RFC 6749 §4.4) at the authorization server's token
//! endpoint, cached until shortly before it expires, then fetched again. A caller's token is
//! never sent to an upstream: every request to it carries this token instead (rmcp's requests
//! through [`Snoop`](super::session::Snoop), tool calls on the gateway's own path).
//!
//! With [`ClientCredentials::token_exchange`], a tool call carries instead a token for the
//! caller, from token exchange (RFC 8693): the gateway trades the caller's verified access token
//! (the `subject_token`, held for that request only) for one whose audience is the upstream,
//! authenticating as itself, so that the upstream sees who calls (`sub`) and through whom
//! (`act`), and never the caller's own token. Exchanged tokens are cached per caller.
//!
//! The client secret and the tokens are secrets: they are in no error, `Debug` output or log.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, PoisonError};
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
    audience: Option<String>,
    exchange: bool,
}

impl std::fmt::Debug for ClientCredentials {
    // The secret is never shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("token_endpoint", &self.token_endpoint)
            .field("client_id", &self.client_id)
            .field("scope", &self.scope)
            .field("resource", &self.resource)
            .field("audience", &self.audience)
            .field("token_exchange", &self.exchange)
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
            audience: None,
            exchange: false,
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

    /// The audience (RFC 8693 `audience`) to name in a token exchange: the upstream's name at
    /// the authorization server, for servers that know resources by a logical name rather than
    /// by URI (then [`resource`](Self::resource) may stay unset).
    #[must_use]
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = Some(audience.into());
        self
    }

    /// Each tool call carries a token for its caller, from token exchange (RFC 8693): the
    /// caller's verified access token is exchanged, by this client, for a token for the
    /// upstream ([`resource`](Self::resource) and/or [`audience`](Self::audience)) with
    /// [`scope`](Self::scope) (none: what the caller's token holds). The upstream sees the
    /// caller as `sub` and this client as the actor (`act`, when the server issues it). The
    /// gateway's own connection (catalog, notifications) keeps the client credentials grant.
    ///
    /// The caller's token is used for the exchange only, never kept; exchanged tokens are
    /// cached per caller (principal and tenant) until shortly before they expire. A caller
    /// without an exchangeable token (stdio, static tokens the server refuses) gets a
    /// `FORBIDDEN` error, and nothing reaches the upstream; an authorization server that cannot
    /// be reached gives a retryable `UPSTREAM_UNAVAILABLE`.
    ///
    /// Each caller's token travels on its own request, so the upstream must speak 2026-07-28
    /// (no sessions): [`UpstreamProtocol::Session`](super::UpstreamProtocol::Session) is
    /// refused when the server is built, and a server that speaks only 2025-11-25 is not
    /// connected. The upstream's tools are not offered as tasks: task requests would carry the
    /// gateway's own token.
    #[must_use]
    pub fn token_exchange(mut self) -> Self {
        self.exchange = true;
        self
    }

    /// The form body of a client credentials request.
    fn form(&self) -> String {
        let mut body = "grant_type=client_credentials".to_owned();
        self.add_target(&mut body, false);
        body
    }

    /// The form body of a token exchange for `subject_token`.
    fn exchange_form(&self, subject_token: &str) -> String {
        use crate::upstream::encode_form;
        let mut body = format!(
            "grant_type={}&subject_token={}&subject_token_type={}&requested_token_type={}",
            encode_form(TOKEN_EXCHANGE),
            encode_form(subject_token),
            encode_form(ACCESS_TOKEN_TYPE),
            encode_form(ACCESS_TOKEN_TYPE),
        );
        self.add_target(&mut body, true);
        body
    }

    fn add_target(&self, body: &mut String, with_audience: bool) {
        use crate::upstream::encode_form;
        let audience = self.audience.as_ref().filter(|_| with_audience);
        for (name, value) in [
            ("scope", self.scope.as_ref()),
            ("resource", self.resource.as_ref()),
            ("audience", audience),
        ] {
            if let Some(value) = value {
                body.push_str(&format!("&{name}={}", encode_form(value)));
            }
        }
    }
}

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// How many callers' exchanged tokens an upstream keeps: past it, expired ones go first, then
/// those due soonest for renewal.
const MAX_EXCHANGED: usize = 1024;

/// Who a tool call is for, to exchange its token: the cache key (the caller's principal and
/// tenant) and the caller's verified access token, borrowed from the request.
#[derive(Clone, Copy)]
pub(crate) struct Caller<'a> {
    pub(crate) subject: &'a str,
    pub(crate) tenant: Option<&'a str>,
    pub(crate) token: &'a str,
}

/// Why no token came for a call: what the caller is told depends on it.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The authorization server could not be asked, or answered nonsense (for the log).
    Unavailable(String),
    /// The authorization server refused the grant: its error code (RFC 6749 §5.2), safe to
    /// show, and the status.
    Refused { status: u16, code: Option<String> },
    /// Token exchange is configured and the call has no caller's token to exchange.
    NoCallerToken,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Unavailable(cause) => f.write_str(cause),
            Refusal::Refused { status, code } => {
                write!(f, "HTTP {status}")?;
                if let Some(code) = code {
                    write!(f, " ({code})")?;
                }
                Ok(())
            }
            Refusal::NoCallerToken => f.write_str("the call carries no caller's token to exchange"),
        }
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
    /// The callers' exchanged tokens. A plain lock, never held across an exchange: two first
    /// calls of one caller may both exchange (the later token wins), which is cheaper than
    /// making every caller wait for another's exchange.
    exchanged: std::sync::Mutex<HashMap<(String, Option<String>), Cached>>,
    exchanges: std::sync::atomic::AtomicU64,
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
            exchanged: std::sync::Mutex::new(HashMap::new()),
            exchanges: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Whether tool calls carry their caller's exchanged token.
    pub(crate) fn exchanges_tokens(&self) -> bool {
        self.credentials.exchange
    }

    /// How many tokens were exchanged so far.
    pub(crate) fn exchanged(&self) -> u64 {
        self.exchanges.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The token a tool call of `caller` carries: with token exchange, the caller's exchanged
    /// token (cached while fresh); else the gateway's own.
    pub(crate) async fn token_for(&self, caller: Option<Caller<'_>>) -> Result<Arc<str>, Refusal> {
        if !self.credentials.exchange {
            return self.token().await.map_err(Refusal::Unavailable);
        }
        let caller = caller.ok_or(Refusal::NoCallerToken)?;
        let key = (caller.subject.to_owned(), caller.tenant.map(str::to_owned));
        let now = Instant::now();
        if let Some(current) = self.exchanged_map().get(&key)
            && now < current.refresh_at
        {
            return Ok(Arc::clone(&current.token));
        }
        let fresh = self
            .grant(&self.credentials.exchange_form(caller.token))
            .await?;
        self.exchanges
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let token = Arc::clone(&fresh.token);
        let mut exchanged = self.exchanged_map();
        if exchanged.len() >= MAX_EXCHANGED && !exchanged.contains_key(&key) {
            exchanged.retain(|_, cached| now < cached.refresh_at);
            if exchanged.len() >= MAX_EXCHANGED
                && let Some(soonest) = exchanged
                    .iter()
                    .min_by_key(|(_, cached)| cached.refresh_at)
                    .map(|(key, _)| key.clone())
            {
                exchanged.remove(&soonest);
            }
        }
        exchanged.insert(key, fresh);
        Ok(token)
    }

    fn exchanged_map(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(String, Option<String>), Cached>> {
        self.exchanged
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
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
        drop(cached);
        self.exchanged_map()
            .retain(|_, cached| &*cached.token != token);
    }

    async fn fetch(&self) -> Result<Cached, String> {
        let fetched =
            self.grant(&self.credentials.form())
                .await
                .map_err(|refusal| match refusal {
                    Refusal::Refused { .. } => format!(
                        "the token endpoint {} refused client `{}`: {refusal}",
                        self.credentials.token_endpoint, self.credentials.client_id
                    ),
                    other => other.to_string(),
                })?;
        self.fetched
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(fetched)
    }

    /// A token from the token endpoint for the form `form`, authenticating as the client.
    async fn grant(&self, form: &str) -> Result<Cached, Refusal> {
        let endpoint = &self.credentials.token_endpoint;
        let unavailable = |cause: String| Refusal::Unavailable(cause);
        let http = match self.http.get() {
            Some(http) => http,
            None => {
                let built = super::upstream::http_client().map_err(unavailable)?;
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
            .body(form.to_owned())
            .timeout(Duration::from_secs(30))
            .send()
            .await
            // reqwest's error names the URL, never the request's headers or body.
            .map_err(|error| {
                unavailable(format!(
                    "the token endpoint {endpoint} is unreachable: {error}"
                ))
            })?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|error| unavailable(format!("the token endpoint {endpoint}: {error}")))?;
        if !status.is_success() {
            let code = serde_json::from_slice::<TokenError>(&body)
                .ok()
                .map(|error| error.error)
                .filter(|code| code.bytes().all(|byte| byte.is_ascii_graphic()));
            if status.is_server_error() {
                return Err(unavailable(format!(
                    "the token endpoint {endpoint} failed: HTTP {}",
                    status.as_u16()
                )));
            }
            return Err(Refusal::Refused {
                status: status.as_u16(),
                code,
            });
        }
        let answer: TokenResponse = serde_json::from_slice(&body).map_err(|_| {
            unavailable(format!(
                "the token endpoint {endpoint} did not answer with a token response"
            ))
        })?;
        if !answer.token_type.eq_ignore_ascii_case("bearer") {
            return Err(unavailable(format!(
                "the token endpoint {endpoint} gave a `{}` token, not a bearer token",
                answer.token_type
            )));
        }
        if http::HeaderValue::try_from(format!("Bearer {}", answer.access_token)).is_err() {
            return Err(unavailable(format!(
                "the token endpoint {endpoint} gave a token that cannot be sent in a header"
            )));
        }
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
    fn the_exchange_form_names_the_callers_token_and_the_upstream() {
        let credentials = ClientCredentials::new("https://as.test/token", "gw", "secret")
            .resource("https://crm.test/mcp")
            .audience("crm")
            .scope("crm:read")
            .token_exchange();
        assert_eq!(
            credentials.exchange_form("caller.jwt"),
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange\
             &subject_token=caller.jwt\
             &subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token\
             &requested_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token\
             &scope=crm%3Aread&resource=https%3A%2F%2Fcrm.test%2Fmcp&audience=crm"
        );
        // The catalog's own token names no audience: that is the exchange's parameter.
        assert!(!credentials.form().contains("audience"));
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

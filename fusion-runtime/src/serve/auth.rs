//! Who is calling (SPEC T5, R5): a pluggable verifier turns `Authorization: Bearer …` into a
//! [`Principal`] before any tool runs; a missing or bad token is answered with HTTP 401 and a
//! `WWW-Authenticate` header.
//!
//! # Plugging a JWT verifier
//!
//! Implement [`TokenVerifier`] with the JWT library of your choice; verify the signature, the
//! issuer, the audience (your MCP endpoint) and the expiry, then map the claims:
//!
//! ```ignore
//! use fusion_runtime::auth::{AuthError, Principal, TokenVerifier, VerifyFuture};
//! use jsonwebtoken::{decode, Algorithm, DecodingKey, Validation};
//!
//! #[derive(serde::Deserialize)]
//! struct Claims { sub: String, tenant: String, scope: String }
//!
//! struct JwtVerifier { key: DecodingKey, validation: Validation }
//!
//! impl TokenVerifier for JwtVerifier {
//!     fn verify<'a>(&'a self, token: &'a str) -> VerifyFuture<'a> {
//!         Box::pin(async move {
//!             let data = decode::<Claims>(token, &self.key, &self.validation)
//!                 .map_err(|error| AuthError::invalid(error.to_string()))?;
//!             Ok(Principal::new(data.claims.sub)
//!                 .with_tenant(data.claims.tenant)
//!                 .with_scopes(data.claims.scope.split(' ').map(str::to_owned)))
//!         })
//!     }
//! }
//! // HttpOptions::default().auth(JwtVerifier { key, validation: Validation::new(Algorithm::RS256) })
//! ```

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};

pub use crate::principal::Principal;

/// Why a token was refused. The text is logged, never sent to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthError {
    reason: String,
}

impl AuthError {
    /// The token is not valid (bad signature, expired, unknown…).
    pub fn invalid(reason: impl Into<String>) -> Self {
        AuthError {
            reason: reason.into(),
        }
    }
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for AuthError {}

/// The future a verifier returns.
pub type VerifyFuture<'a> = Pin<Box<dyn Future<Output = Result<Principal, AuthError>> + Send + 'a>>;

/// Turns a bearer token into a principal.
pub trait TokenVerifier: Send + Sync + 'static {
    /// Verifies `token` (the text after `Bearer `).
    fn verify<'a>(&'a self, token: &'a str) -> VerifyFuture<'a>;
}

/// A fixed set of tokens, for examples, tests and internal tools. Tokens are compared in
/// constant time.
#[derive(Clone, Default)]
pub struct StaticTokens {
    tokens: HashMap<String, Principal>,
}

impl StaticTokens {
    /// No tokens yet.
    pub fn new() -> Self {
        StaticTokens::default()
    }

    /// Accepts `token` as `principal`.
    #[must_use]
    pub fn with(mut self, token: impl Into<String>, principal: Principal) -> Self {
        self.tokens.insert(token.into(), principal);
        self
    }
}

impl fmt::Debug for StaticTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticTokens")
            .field("tokens", &self.tokens.len())
            .finish()
    }
}

impl TokenVerifier for StaticTokens {
    fn verify<'a>(&'a self, token: &'a str) -> VerifyFuture<'a> {
        // Every known token is compared, so the time taken does not say which one came close.
        let mut found = None;
        for (known, principal) in &self.tokens {
            if constant_time_eq(known.as_bytes(), token.as_bytes()) {
                found = Some(principal.clone());
            }
        }
        Box::pin(std::future::ready(
            found.ok_or_else(|| AuthError::invalid("unknown token")),
        ))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// The state of the HTTP authentication layer.
#[derive(Clone)]
pub(crate) struct Authenticator {
    pub(crate) verifier: Arc<dyn TokenVerifier>,
    pub(crate) challenge: HeaderValue,
    sessions: Arc<SessionOwners>,
}

/// Who opened each 2025-11-25 session. A session id proves nothing about its bearer, and a
/// session's SSE stream carries its owner's responses and notifications, so a request that
/// presents another caller's session id (or one this layer never saw opened) is answered as
/// if the session did not exist: 404, the answer rmcp gives for an unknown session.
#[derive(Default)]
struct SessionOwners {
    state: Mutex<Owners>,
}

#[derive(Default)]
struct Owners {
    by_session: HashMap<Box<str>, Owner>,
    /// The map is swept for sessions rmcp has already closed once it grows past this size.
    sweep_at: usize,
}

struct Owner {
    subject: Box<str>,
    tenant: Option<Box<str>>,
    last_seen: Instant,
}

/// rmcp closes a session idle for its keep-alive (five minutes by default); an owner entry
/// idle for twice that belongs to a closed session.
const OWNER_IDLE_LIMIT: Duration = Duration::from_secs(2 * 300);
const MIN_SWEEP_SIZE: usize = 1024;

impl Owner {
    fn is(&self, principal: &Principal) -> bool {
        *self.subject == *principal.subject && self.tenant.as_deref() == principal.tenant.as_deref()
    }
}

impl SessionOwners {
    fn lock(&self) -> std::sync::MutexGuard<'_, Owners> {
        // The map holds plain data: a panic elsewhere cannot leave it half-updated.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `principal` opened `session`; a session this layer never saw is nobody's.
    fn owned_by(&self, session: &str, principal: &Principal) -> bool {
        let mut owners = self.lock();
        match owners.by_session.get_mut(session) {
            Some(owner) if owner.is(principal) => {
                owner.last_seen = Instant::now();
                true
            }
            _ => false,
        }
    }

    fn open(&self, session: &str, principal: &Principal) {
        self.open_at(session, principal, Instant::now());
    }

    fn open_at(&self, session: &str, principal: &Principal, now: Instant) {
        let mut owners = self.lock();
        if owners.by_session.len() >= owners.sweep_at.max(MIN_SWEEP_SIZE) {
            owners
                .by_session
                .retain(|_, owner| now.duration_since(owner.last_seen) < OWNER_IDLE_LIMIT);
            owners.sweep_at = owners.by_session.len() * 2;
        }
        owners.by_session.insert(
            session.into(),
            Owner {
                subject: principal.subject.as_str().into(),
                tenant: principal.tenant.as_deref().map(Into::into),
                last_seen: now,
            },
        );
    }

    fn close(&self, session: &str) {
        self.lock().by_session.remove(session);
    }
}

const SESSION_HEADER: &str = "mcp-session-id";

impl Authenticator {
    pub(crate) fn new(verifier: Arc<dyn TokenVerifier>, resource_metadata: Option<&str>) -> Self {
        let challenge = match resource_metadata {
            Some(url) => format!("Bearer realm=\"mcp\", resource_metadata=\"{url}\""),
            None => "Bearer realm=\"mcp\"".to_owned(),
        };
        Authenticator {
            verifier,
            challenge: HeaderValue::from_str(&challenge)
                .unwrap_or_else(|_| HeaderValue::from_static("Bearer realm=\"mcp\"")),
            sessions: Arc::default(),
        }
    }

    fn refuse(&self, error: &str, description: &str) -> Response {
        let challenge = format!(
            "{}, error=\"{error}\", error_description=\"{description}\"",
            self.challenge.to_str().unwrap_or("Bearer realm=\"mcp\"")
        );
        let mut response = Response::new(Body::from(format!("Unauthorized: {description}")));
        *response.status_mut() = StatusCode::UNAUTHORIZED;
        let value = HeaderValue::from_str(&challenge).unwrap_or_else(|_| self.challenge.clone());
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
        response
    }
}

/// The axum middleware: verifies the bearer token and attaches the principal to the request,
/// where the MCP handler finds it. Nothing reaches a tool without a verified principal.
pub(crate) async fn authenticate(
    State(authenticator): State<Authenticator>,
    mut request: Request,
    next: Next,
) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("bearer "))
        })
        .map(str::trim)
        .map(str::to_owned);
    let Some(token) = token else {
        return authenticator.refuse("invalid_request", "a bearer token is required");
    };
    match authenticator.verifier.verify(&token).await {
        Ok(principal) => {
            let session = request
                .headers()
                .get(SESSION_HEADER)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            let sessions = &authenticator.sessions;
            if let Some(session) = &session
                && !sessions.owned_by(session, &principal)
            {
                tracing::info!(
                    subject = %principal.subject,
                    "refused a session id that this caller did not open"
                );
                let mut response = Response::new(Body::from("Not Found: Session not found"));
                *response.status_mut() = StatusCode::NOT_FOUND;
                return response;
            }
            let closing = request.method() == http::Method::DELETE;
            request.extensions_mut().insert(principal.clone());
            let response = next.run(request).await;
            match &session {
                None => {
                    if let Some(opened) = response
                        .headers()
                        .get(SESSION_HEADER)
                        .and_then(|value| value.to_str().ok())
                    {
                        sessions.open(opened, &principal);
                    }
                }
                Some(session) => {
                    if (closing && response.status().is_success())
                        || response.status() == StatusCode::NOT_FOUND
                    {
                        sessions.close(session);
                    }
                }
            }
            response
        }
        Err(error) => {
            tracing::info!(%error, "refused a bearer token");
            authenticator.refuse("invalid_token", "the bearer token is not valid")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(subject: &str, tenant: &str) -> Principal {
        Principal::new(subject).with_tenant(tenant)
    }

    #[test]
    fn a_session_is_its_openers_alone() {
        let sessions = SessionOwners::default();
        let alpha = owner("alpha", "t_1");
        sessions.open("s-1", &alpha);
        assert!(sessions.owned_by("s-1", &alpha));
        // The same subject with other scopes is the same caller; another tenant is not.
        assert!(sessions.owned_by("s-1", &alpha.clone().with_scopes(["read".to_owned()])));
        assert!(!sessions.owned_by("s-1", &owner("alpha", "t_2")));
        assert!(!sessions.owned_by("s-1", &owner("beta", "t_1")));
        assert!(!sessions.owned_by("s-unknown", &alpha));
        sessions.close("s-1");
        assert!(!sessions.owned_by("s-1", &alpha));
    }

    #[test]
    fn the_sweep_forgets_only_sessions_idle_past_the_limit() {
        let sessions = SessionOwners::default();
        let alpha = owner("alpha", "t_1");
        for index in 0..MIN_SWEEP_SIZE {
            sessions.open(&format!("s-{index}"), &alpha);
        }
        // Later, half of them have been idle for longer than rmcp keeps a session.
        let later = Instant::now() + OWNER_IDLE_LIMIT + Duration::from_secs(1);
        for (index, owner) in sessions.lock().by_session.iter_mut() {
            if index[2..].parse::<usize>().unwrap() % 2 == 1 {
                owner.last_seen = later;
            }
        }
        // Opening one more sweeps the map first.
        sessions.open_at("s-new", &alpha, later);
        let owners = sessions.lock();
        assert_eq!(owners.by_session.len(), MIN_SWEEP_SIZE / 2 + 1);
        assert!(owners.by_session.contains_key("s-1"));
        assert!(!owners.by_session.contains_key("s-0"));
        assert!(owners.by_session.contains_key("s-new"));
        assert_eq!(owners.sweep_at, MIN_SWEEP_SIZE);
    }
}

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
use std::hash::{BuildHasher, RandomState};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};
use sha2::{Digest, Sha256};

use super::Tally;
use super::sessions::Caller;

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
            if crate::keyed::bytes_match(known.as_bytes(), token.as_bytes()) {
                found = Some(principal.clone());
            }
        }
        Box::pin(std::future::ready(
            found.ok_or_else(|| AuthError::invalid("unknown token")),
        ))
    }
}

/// The state of the HTTP authentication layer.
#[derive(Clone)]
pub(crate) struct Authenticator {
    pub(crate) verifier: Arc<dyn TokenVerifier>,
    pub(crate) challenge: HeaderValue,
    /// Refused tokens, logged as a count at most once a minute: anyone can send bad tokens,
    /// and one log line each would let them fill the log.
    refused: Arc<Tally>,
}

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
            refused: Arc::default(),
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

/// Who a verified request comes from, for the session layer: the exact credential (a digest,
/// so that the token itself is not kept) and the principal (subject and tenant).
fn caller(token: &str, principal: &Principal) -> Caller {
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    let keys = KEYS.get_or_init(RandomState::new);
    Caller {
        credential: Sha256::digest(token.as_bytes()).into(),
        principal: keys.hash_one((principal.subject.as_str(), principal.tenant.as_deref())),
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
        .and_then(crate::principal::bearer_token)
        .map(str::to_owned);
    let Some(token) = token else {
        return authenticator.refuse("invalid_request", "a bearer token is required");
    };
    match authenticator.verifier.verify(&token).await {
        Ok(principal) => {
            request.extensions_mut().insert(caller(&token, &principal));
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Err(error) => {
            tracing::debug!(%error, "refused a bearer token");
            if let Some(count) = authenticator.refused.record() {
                tracing::warn!(
                    refused = count,
                    "refused invalid bearer tokens (each one is logged at debug level)"
                );
            }
            authenticator.refuse("invalid_token", "the bearer token is not valid")
        }
    }
}

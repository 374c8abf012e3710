//! Opaque access tokens, checked with the issuer's introspection endpoint (RFC 7662).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::claims::ClaimNames;
use super::{OAuthError, fetch};
use crate::principal::Principal;
use crate::serve::auth::{AuthError, TokenVerifier, VerifyFuture};

/// Verifies opaque tokens by asking the authorization server (RFC 7662), authenticated as a
/// client of it. An active answer must name this server's audience (and the issuer, when the
/// answer names one) and must not be expired; its claims make the principal as for a JWT.
///
/// Answers are cached for a short time ([`cache`](IntrospectionVerifierBuilder::cache): 30 s
/// and 10 000 tokens by default, never past the token's `exp`), keyed by a digest of the
/// token; refusals are not cached, so a revoked token stays refused.
#[derive(Clone)]
pub struct IntrospectionVerifier {
    inner: Arc<Inner>,
}

struct Inner {
    endpoint: String,
    client_id: String,
    client_secret: String,
    issuer: String,
    audience: String,
    claims: ClaimNames,
    client: reqwest::Client,
    ttl: Duration,
    max_entries: usize,
    cache: Mutex<HashMap<[u8; 32], (Principal, Instant)>>,
}

/// Configures an [`IntrospectionVerifier`].
#[derive(Debug, Clone)]
pub struct IntrospectionVerifierBuilder {
    issuer: String,
    audience: String,
    client_id: String,
    client_secret: String,
    endpoint: Option<String>,
    claims: ClaimNames,
    ttl: Duration,
    max_entries: usize,
}

impl IntrospectionVerifier {
    /// Introspects tokens at `issuer`'s endpoint as client `client_id`; tokens must be for
    /// `audience`, this server's resource URI.
    pub fn builder(
        issuer: impl Into<String>,
        audience: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
    ) -> IntrospectionVerifierBuilder {
        IntrospectionVerifierBuilder {
            issuer: issuer.into(),
            audience: audience.into(),
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            endpoint: None,
            claims: ClaimNames::default(),
            ttl: Duration::from_secs(30),
            max_entries: 10_000,
        }
    }

    fn cached(&self, digest: &[u8; 32]) -> Option<Principal> {
        let cache = self.inner.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .get(digest)
            .filter(|(_, until)| Instant::now() < *until)
            .map(|(principal, _)| principal.clone())
    }

    fn remember(&self, digest: [u8; 32], principal: &Principal, until: Instant) {
        let mut cache = self.inner.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= self.inner.max_entries {
            let now = Instant::now();
            cache.retain(|_, (_, expires)| now < *expires);
        }
        // Still full of live answers: this one is not kept (the cache stays bounded).
        if cache.len() < self.inner.max_entries {
            cache.insert(digest, (principal.clone(), until));
        }
    }

    async fn introspect(&self, token: &str) -> Result<(Principal, Instant), AuthError> {
        let inner = &self.inner;
        let body = format!(
            "token={}&token_type_hint=access_token",
            percent_encoding::utf8_percent_encode(token, percent_encoding::NON_ALPHANUMERIC)
        );
        let response = inner
            .client
            .post(&inner.endpoint)
            .basic_auth(&inner.client_id, Some(&inner.client_secret))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(body)
            .send()
            .await;
        let answer = fetch::json(response, &inner.endpoint)
            .await
            .map_err(|error| AuthError::invalid(error.to_string()))?;
        let claims = answer
            .as_object()
            .ok_or_else(|| AuthError::invalid("the introspection answer is not an object"))?;
        check_answer(claims, &inner.issuer, &inner.audience)?;
        let principal = inner
            .claims
            .principal(claims)
            .map_err(|error| AuthError::invalid(error.to_string()))?;
        let mut until = Instant::now() + inner.ttl;
        if let Some(left) = claims
            .get("exp")
            .and_then(Value::as_u64)
            .and_then(|exp| exp.checked_sub(now_secs()))
        {
            until = until.min(Instant::now() + Duration::from_secs(left));
        }
        Ok((principal, until))
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// An active answer, for this audience, from this issuer (when it names one), not expired.
fn check_answer(
    claims: &Map<String, Value>,
    issuer: &str,
    audience: &str,
) -> Result<(), AuthError> {
    if claims.get("active") != Some(&Value::Bool(true)) {
        return Err(AuthError::invalid("the token is not active"));
    }
    if let Some(named) = claims.get("iss")
        && named.as_str() != Some(issuer)
    {
        return Err(AuthError::invalid("the token is from another issuer"));
    }
    let for_us = match claims.get("aud") {
        Some(Value::String(aud)) => aud == audience,
        Some(Value::Array(auds)) => auds.iter().any(|aud| aud.as_str() == Some(audience)),
        _ => false,
    };
    if !for_us {
        return Err(AuthError::invalid("the token is not for this resource"));
    }
    match claims.get("exp").map(Value::as_u64) {
        Some(Some(exp)) if exp <= now_secs() => Err(AuthError::invalid("the token expired")),
        Some(None) => Err(AuthError::invalid("the token's `exp` is not a number")),
        _ => Ok(()),
    }
}

impl std::fmt::Debug for IntrospectionVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntrospectionVerifier")
            .field("endpoint", &self.inner.endpoint)
            .field("audience", &self.inner.audience)
            .finish_non_exhaustive()
    }
}

impl TokenVerifier for IntrospectionVerifier {
    fn verify<'a>(&'a self, token: &'a str) -> VerifyFuture<'a> {
        Box::pin(async move {
            let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
            if let Some(principal) = self.cached(&digest) {
                return Ok(principal);
            }
            let (principal, until) = self.introspect(token).await?;
            self.remember(digest, &principal, until);
            Ok(principal)
        })
    }
}

impl IntrospectionVerifierBuilder {
    /// Which claims of the answer name the subject, tenant, scopes and roles.
    #[must_use]
    pub fn claims(mut self, claims: ClaimNames) -> Self {
        self.claims = claims;
        self
    }

    /// Keeps an active answer for `ttl` (never past the token's expiry), for at most
    /// `max_entries` tokens at once.
    #[must_use]
    pub fn cache(mut self, ttl: Duration, max_entries: usize) -> Self {
        self.ttl = ttl;
        self.max_entries = max_entries;
        self
    }

    /// Uses this introspection endpoint instead of the one the issuer's metadata names.
    #[must_use]
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// Reads the issuer's metadata for its `introspection_endpoint`, unless one was given.
    pub async fn discover(self) -> Result<IntrospectionVerifier, OAuthError> {
        let client = fetch::client(Duration::from_secs(10))?;
        let endpoint = match self.endpoint {
            Some(endpoint) => endpoint,
            None => {
                let metadata = fetch::issuer_metadata(&client, &self.issuer).await?;
                fetch::endpoint(&metadata, "introspection_endpoint")?
            }
        };
        Ok(IntrospectionVerifier {
            inner: Arc::new(Inner {
                endpoint,
                client_id: self.client_id,
                client_secret: self.client_secret,
                issuer: self.issuer,
                audience: self.audience,
                claims: self.claims,
                client,
                ttl: self.ttl,
                max_entries: self.max_entries,
                cache: Mutex::new(HashMap::new()),
            }),
        })
    }
}

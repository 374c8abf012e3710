//! JWT access tokens checked against the issuer's published keys (JWKS).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation};
use serde_json::{Map, Value};

use super::claims::ClaimNames;
use super::{OAuthError, fetch};
use crate::serve::auth::{AuthError, TokenVerifier, VerifyFuture};

/// Clock skew allowed on `exp` and `nbf` by default, and the most that can be configured.
const DEFAULT_LEEWAY: Duration = Duration::from_secs(30);
const MAX_LEEWAY: Duration = Duration::from_secs(300);

/// Verifies JWT access tokens issued for this server (SPEC T5): the signature against the
/// issuer's JWKS, an allowed asymmetric algorithm that the key itself is for, the issuer, the
/// audience (this server's canonical resource URI, RFC 8707), and `exp`/`nbf` within a
/// bounded clock skew; then maps the claims to a [`Principal`](crate::Principal) with
/// [`ClaimNames`].
///
/// The key set is fetched once and kept; a token signed with a key id it does not know makes
/// it fetch the set again (a rotation), at most once per
/// [`jwks_refresh_interval`](JwtVerifierBuilder::jwks_refresh_interval), so that a flood of
/// made-up key ids cannot make the server hammer the issuer. A call with a known key makes no
/// network round trip.
///
/// ```no_run
/// # async fn run() -> Result<(), fusion_runtime::serve::oauth::OAuthError> {
/// use fusion_runtime::serve::HttpOptions;
/// use fusion_runtime::serve::oauth::{ClaimNames, JwtVerifier};
///
/// let verifier = JwtVerifier::builder("https://auth.example.com", "https://mcp.example.com/mcp")
///     .claims(ClaimNames::default().tenant("org_id"))
///     .discover()
///     .await?;
/// let options = HttpOptions::default().auth(verifier);
/// # let _ = options; Ok(()) }
/// ```
#[derive(Clone)]
pub struct JwtVerifier {
    inner: Arc<Inner>,
}

struct Inner {
    audience: String,
    claims: ClaimNames,
    /// One validation per allowed algorithm, built once: issuer, audience, skew.
    validations: Vec<(Algorithm, Validation)>,
    jwks_uri: String,
    client: reqwest::Client,
    keys: RwLock<Arc<KeySet>>,
    /// When the key set was last fetched; held while a fetch runs, so that concurrent
    /// unknown key ids wait for one fetch rather than start their own.
    last_fetch: tokio::sync::Mutex<Instant>,
    refresh_interval: Duration,
    fetches: AtomicU64,
}

/// The usable keys of a JWKS: signature keys of an allowed algorithm, HMAC ones left out.
#[derive(Default)]
struct KeySet {
    by_id: HashMap<String, Key>,
    without_id: Vec<Key>,
}

struct Key {
    key: DecodingKey,
    /// The algorithm the JWK names, if it names one: a token must use exactly it.
    algorithm: Option<Algorithm>,
    family: AlgorithmFamily,
}

impl Key {
    fn fits(&self, algorithm: Algorithm) -> bool {
        self.family == algorithm.family() && self.algorithm.is_none_or(|own| own == algorithm)
    }
}

/// Configures a [`JwtVerifier`].
#[derive(Debug, Clone)]
pub struct JwtVerifierBuilder {
    issuer: String,
    audience: String,
    algorithms: Vec<Algorithm>,
    leeway: Duration,
    claims: ClaimNames,
    refresh_interval: Duration,
    jwks_uri: Option<String>,
    timeout: Duration,
}

impl JwtVerifier {
    /// A verifier for tokens from `issuer` whose audience is `audience`, this server's
    /// canonical resource URI (`https://mcp.example.com/mcp`).
    pub fn builder(issuer: impl Into<String>, audience: impl Into<String>) -> JwtVerifierBuilder {
        JwtVerifierBuilder {
            issuer: issuer.into(),
            audience: audience.into(),
            algorithms: vec![
                Algorithm::RS256,
                Algorithm::RS384,
                Algorithm::RS512,
                Algorithm::PS256,
                Algorithm::PS384,
                Algorithm::PS512,
                Algorithm::ES256,
                Algorithm::ES384,
                Algorithm::EdDSA,
            ],
            leeway: DEFAULT_LEEWAY,
            claims: ClaimNames::default(),
            refresh_interval: Duration::from_secs(30),
            jwks_uri: None,
            timeout: Duration::from_secs(10),
        }
    }

    /// How many times the key set was fetched (start-up included).
    pub fn jwks_fetches(&self) -> u64 {
        self.inner.fetches.load(Ordering::Relaxed)
    }

    /// The audience tokens must name.
    pub fn audience(&self) -> &str {
        &self.inner.audience
    }

    fn verify_now(&self, token: &str, keys: &KeySet) -> Result<Verdict, AuthError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|error| AuthError::invalid(format!("not a JWT: {error}")))?;
        let Some((algorithm, validation)) = self
            .inner
            .validations
            .iter()
            .find(|(allowed, _)| *allowed == header.alg)
        else {
            return Err(AuthError::invalid(format!(
                "algorithm {:?} is not allowed",
                header.alg
            )));
        };
        let key = match &header.kid {
            Some(id) => match keys.by_id.get(id) {
                Some(key) => key,
                None => return Ok(Verdict::UnknownKey),
            },
            None => {
                let mut fitting = keys.without_id.iter().filter(|key| key.fits(*algorithm));
                match (fitting.next(), fitting.next()) {
                    (Some(key), None) => key,
                    _ => return Err(AuthError::invalid("the token names no key id")),
                }
            }
        };
        // The algorithm is the key's, never the token's: a token claiming another one (say
        // HS256 with the public key as secret) is refused before any signature check.
        if !key.fits(*algorithm) {
            return Err(AuthError::invalid(format!(
                "the key is not for algorithm {algorithm:?}"
            )));
        }
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, validation)
            .map_err(|error| AuthError::invalid(format!("JWT refused: {error}")))?;
        let principal = self
            .inner
            .claims
            .principal(&data.claims)
            .map_err(|error| AuthError::invalid(error.to_string()))?;
        Ok(Verdict::Valid(principal))
    }

    fn keys(&self) -> Arc<KeySet> {
        Arc::clone(&self.inner.keys.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Fetches the key set again unless it was fetched less than the refresh interval ago.
    async fn refresh(&self, seen: &Arc<KeySet>) {
        let mut last = self.inner.last_fetch.lock().await;
        // Another call refreshed while this one waited: use its keys.
        if !Arc::ptr_eq(seen, &self.keys()) || last.elapsed() < self.inner.refresh_interval {
            return;
        }
        *last = Instant::now();
        match fetch_keys(
            &self.inner.client,
            &self.inner.jwks_uri,
            &self.inner.validations,
        )
        .await
        {
            Ok(keys) => {
                *self.inner.keys.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(keys);
            }
            Err(error) => tracing::warn!(%error, "cannot refresh the issuer's keys"),
        }
        self.inner.fetches.fetch_add(1, Ordering::Relaxed);
    }
}

enum Verdict {
    Valid(crate::Principal),
    UnknownKey,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("audience", &self.inner.audience)
            .field("jwks_uri", &self.inner.jwks_uri)
            .field("jwks_fetches", &self.jwks_fetches())
            .finish_non_exhaustive()
    }
}

impl TokenVerifier for JwtVerifier {
    fn verify<'a>(&'a self, token: &'a str) -> VerifyFuture<'a> {
        Box::pin(async move {
            let keys = self.keys();
            match self.verify_now(token, &keys)? {
                Verdict::Valid(principal) => return Ok(principal),
                Verdict::UnknownKey => self.refresh(&keys).await,
            }
            match self.verify_now(token, &self.keys())? {
                Verdict::Valid(principal) => Ok(principal),
                Verdict::UnknownKey => Err(AuthError::invalid("the token's key id is unknown")),
            }
        })
    }
}

impl JwtVerifierBuilder {
    /// Accepts only these algorithms (asymmetric ones: HMAC algorithms are never accepted,
    /// since a resource server holds no shared secret with the issuer).
    #[must_use]
    pub fn algorithms(mut self, algorithms: impl IntoIterator<Item = Algorithm>) -> Self {
        self.algorithms = algorithms.into_iter().collect();
        self
    }

    /// The clock skew allowed on `exp` and `nbf` (30 s by default, 5 minutes at most).
    #[must_use]
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway.min(MAX_LEEWAY);
        self
    }

    /// Which claims name the subject, tenant, scopes and roles.
    #[must_use]
    pub fn claims(mut self, claims: ClaimNames) -> Self {
        self.claims = claims;
        self
    }

    /// The shortest time between two fetches of the key set (30 s by default).
    #[must_use]
    pub fn jwks_refresh_interval(mut self, interval: Duration) -> Self {
        self.refresh_interval = interval;
        self
    }

    /// Uses this key set URL instead of the one the issuer's metadata names.
    #[must_use]
    pub fn jwks_uri(mut self, uri: impl Into<String>) -> Self {
        self.jwks_uri = Some(uri.into());
        self
    }

    /// Reads the issuer's metadata (RFC 8414, or OpenID Connect discovery) for its key set
    /// unless [`jwks_uri`](Self::jwks_uri) was given, then fetches the keys.
    pub async fn discover(self) -> Result<JwtVerifier, OAuthError> {
        let algorithms: Vec<Algorithm> = self
            .algorithms
            .iter()
            .copied()
            .filter(|algorithm| algorithm.family() != AlgorithmFamily::Hmac)
            .collect();
        if algorithms.is_empty() {
            return Err(OAuthError::new("no asymmetric algorithm is allowed"));
        }
        if self.audience.is_empty() {
            return Err(OAuthError::new("the audience (resource URI) is empty"));
        }
        let validations = algorithms
            .into_iter()
            .map(|algorithm| {
                let mut validation = Validation::new(algorithm);
                validation.set_issuer(&[&self.issuer]);
                validation.set_audience(&[&self.audience]);
                validation.set_required_spec_claims(&["exp", "iss", "aud"]);
                validation.validate_nbf = true;
                validation.leeway = self.leeway.as_secs();
                (algorithm, validation)
            })
            .collect::<Vec<_>>();
        let client = fetch::client(self.timeout)?;
        let jwks_uri = match self.jwks_uri {
            Some(uri) => uri,
            None => {
                let metadata = fetch::issuer_metadata(&client, &self.issuer).await?;
                fetch::endpoint(&metadata, "jwks_uri")?
            }
        };
        let keys = fetch_keys(&client, &jwks_uri, &validations).await?;
        Ok(JwtVerifier {
            inner: Arc::new(Inner {
                audience: self.audience,
                claims: self.claims,
                validations,
                jwks_uri,
                client,
                keys: RwLock::new(Arc::new(keys)),
                last_fetch: tokio::sync::Mutex::new(Instant::now()),
                refresh_interval: self.refresh_interval,
                fetches: AtomicU64::new(1),
            }),
        })
    }
}

async fn fetch_keys(
    client: &reqwest::Client,
    uri: &str,
    validations: &[(Algorithm, Validation)],
) -> Result<KeySet, OAuthError> {
    let document = fetch::json(client.get(uri).send().await, uri).await?;
    let Some(entries) = document.get("keys").and_then(Value::as_array) else {
        return Err(OAuthError::new(format!("{uri} is not a JWKS (no `keys`)")));
    };
    let mut keys = KeySet::default();
    // A key of a type this crate cannot read is skipped, not a reason to refuse the others.
    for entry in entries {
        let Ok(jwk) = serde_json::from_value::<Jwk>(entry.clone()) else {
            continue;
        };
        if matches!(&jwk.common.public_key_use, Some(usage) if *usage != PublicKeyUse::Signature) {
            continue;
        }
        let algorithm = match jwk.common.key_algorithm {
            Some(named) => match Algorithm::try_from(named) {
                Ok(algorithm) => Some(algorithm),
                Err(_) => continue,
            },
            None => None,
        };
        let Ok(key) = DecodingKey::from_jwk(&jwk) else {
            continue;
        };
        let family = key.family();
        let usable = family != AlgorithmFamily::Hmac
            && validations.iter().any(|(allowed, _)| {
                allowed.family() == family && algorithm.is_none_or(|own| own == *allowed)
            });
        if !usable {
            continue;
        }
        let key = Key {
            key,
            algorithm,
            family,
        };
        match jwk.common.key_id {
            Some(id) => {
                keys.by_id.insert(id, key);
            }
            None => keys.without_id.push(key),
        }
    }
    if keys.by_id.is_empty() && keys.without_id.is_empty() {
        return Err(OAuthError::new(format!(
            "{uri} has no signature key for an allowed algorithm"
        )));
    }
    Ok(keys)
}

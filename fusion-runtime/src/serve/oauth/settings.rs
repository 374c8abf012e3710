//! A resource server configured in one value, as command lines set it up.

use super::{ClaimNames, JwtVerifier, OAuthError};
use crate::serve::{HttpOptions, ProtectedResource};

/// What a binary's `--oauth-issuer URL --oauth-audience URI` and claim flags configure: JWT
/// access tokens from `issuer` for `audience`, and the RFC 9728 metadata that names them.
#[derive(Debug, Clone)]
pub struct ResourceServer {
    /// The authorization server's issuer URL.
    pub issuer: String,
    /// This endpoint's canonical resource URI (`https://mcp.example.com/mcp`).
    pub audience: String,
    /// Which claims name the caller.
    pub claims: ClaimNames,
}

impl ResourceServer {
    /// Tokens from `issuer` for `audience`, with the default claims.
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>) -> Self {
        ResourceServer {
            issuer: issuer.into(),
            audience: audience.into(),
            claims: ClaimNames::default(),
        }
    }

    /// Discovers the issuer's keys, then requires its tokens on every request of `options`
    /// and serves the metadata announcing `scopes`.
    pub async fn protect(
        &self,
        options: HttpOptions,
        scopes: impl IntoIterator<Item = String>,
    ) -> Result<HttpOptions, OAuthError> {
        let verifier = JwtVerifier::builder(&self.issuer, &self.audience)
            .claims(self.claims.clone())
            .discover()
            .await?;
        let resource = ProtectedResource::new(&self.audience, &self.issuer).scopes(scopes);
        Ok(options.auth(verifier).protected_resource(resource))
    }
}

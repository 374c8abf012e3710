//! An OAuth 2.1 resource server (the `oauth` feature): JWT access tokens checked against the
//! issuer's keys ([`JwtVerifier`]), opaque ones through introspection
//! ([`IntrospectionVerifier`]), and the claims that name the caller ([`ClaimNames`]).
//!
//! Serve them with [`HttpOptions::auth`](super::HttpOptions::auth) and announce the
//! authorization server with [`HttpOptions::protected_resource`](super::HttpOptions::protected_resource)
//! (RFC 9728 metadata, which clients discover from the 401's `WWW-Authenticate`).

mod claims;
#[cfg(feature = "cli")]
mod cli;
mod fetch;
mod introspect;
mod jwt;
mod settings;

pub use claims::{ClaimError, ClaimNames};
#[cfg(feature = "cli")]
pub use cli::OAuthArgs;
pub use introspect::{IntrospectionVerifier, IntrospectionVerifierBuilder};
pub use jsonwebtoken::Algorithm;
pub use jwt::{JwtVerifier, JwtVerifierBuilder};
pub use settings::ResourceServer;

/// The authorization server could not be used: its metadata or keys could not be fetched or
/// read, or the configuration is not usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthError(String);

impl OAuthError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        OAuthError(message.into())
    }
}

impl std::fmt::Display for OAuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OAuthError {}

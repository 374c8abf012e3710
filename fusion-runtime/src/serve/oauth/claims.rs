//! Which claims of a verified token say who is calling, and the principal they make.

use serde_json::{Map, Value};

use crate::principal::Principal;

/// The claims a verifier reads the principal from. By default: the subject from `sub`, scopes
/// from `scope` (a space-separated string) or `scp` (a string or an array), no tenant and no
/// roles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimNames {
    subject: String,
    tenant: Option<String>,
    scopes: Vec<String>,
    roles: Option<String>,
}

impl Default for ClaimNames {
    fn default() -> Self {
        ClaimNames {
            subject: "sub".into(),
            tenant: None,
            scopes: vec!["scope".into(), "scp".into()],
            roles: None,
        }
    }
}

/// A claim the principal needs is missing or is not what it must be. The verifier refuses the
/// token (401); the claim's name is logged, never sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimError {
    /// A required claim (the subject, or the tenant when one is configured) is absent.
    Missing {
        /// The claim's name.
        claim: String,
    },
    /// The claim is present but is not a string (or, for scopes and roles, a list of them).
    Malformed {
        /// The claim's name.
        claim: String,
    },
}

impl std::fmt::Display for ClaimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClaimError::Missing { claim } => write!(f, "the token has no `{claim}` claim"),
            ClaimError::Malformed { claim } => {
                write!(f, "the token's `{claim}` claim is not a string")
            }
        }
    }
}

impl std::error::Error for ClaimError {}

impl ClaimNames {
    /// The subject claim (`sub` by default).
    #[must_use]
    pub fn subject(mut self, claim: impl Into<String>) -> Self {
        self.subject = claim.into();
        self
    }

    /// Binds every principal to the tenant in `claim`: a token without it is refused.
    #[must_use]
    pub fn tenant(mut self, claim: impl Into<String>) -> Self {
        self.tenant = Some(claim.into());
        self
    }

    /// The claims scopes are read from, first found wins (`scope`, then `scp`, by default).
    #[must_use]
    pub fn scopes<I, S>(mut self, claims: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes = claims.into_iter().map(Into::into).collect();
        self
    }

    /// Reads roles from `claim` (a list of strings, or a space-separated string).
    #[must_use]
    pub fn roles(mut self, claim: impl Into<String>) -> Self {
        self.roles = Some(claim.into());
        self
    }

    /// The principal the claims of a verified token name.
    pub fn principal(&self, claims: &Map<String, Value>) -> Result<Principal, ClaimError> {
        let subject = required_string(claims, &self.subject)?;
        let mut principal = Principal::new(subject);
        if let Some(tenant) = &self.tenant {
            principal = principal.with_tenant(required_string(claims, tenant)?);
        }
        if let Some(claim) = self.scopes.iter().find(|claim| claims.contains_key(*claim)) {
            principal = principal.with_scopes(words(claims, claim)?);
        }
        if let Some(claim) = &self.roles
            && claims.contains_key(claim)
        {
            principal = principal.with_roles(words(claims, claim)?);
        }
        Ok(principal)
    }
}

fn required_string(claims: &Map<String, Value>, claim: &str) -> Result<String, ClaimError> {
    match claims.get(claim) {
        None | Some(Value::Null) => Err(ClaimError::Missing {
            claim: claim.to_owned(),
        }),
        Some(Value::String(value)) if !value.is_empty() => Ok(value.clone()),
        Some(Value::String(_)) => Err(ClaimError::Missing {
            claim: claim.to_owned(),
        }),
        Some(_) => Err(ClaimError::Malformed {
            claim: claim.to_owned(),
        }),
    }
}

/// A space-separated string (RFC 8693's `scope`) or an array of strings (`scp`, `roles`).
fn words(claims: &Map<String, Value>, claim: &str) -> Result<Vec<String>, ClaimError> {
    let malformed = || ClaimError::Malformed {
        claim: claim.to_owned(),
    };
    match claims.get(claim) {
        Some(Value::String(text)) => Ok(text.split_whitespace().map(str::to_owned).collect()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned).ok_or_else(malformed))
            .collect(),
        Some(Value::Null) | None => Ok(Vec::new()),
        Some(_) => Err(malformed()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn subject_tenant_scopes_and_roles_come_from_the_named_claims() {
        let names = ClaimNames::default().tenant("org").roles("roles");
        let principal = names
            .principal(&claims(json!({
                "sub": "ana", "org": "acme", "scope": "billing:read billing:write",
                "roles": ["admin"]
            })))
            .unwrap();
        assert_eq!(principal.subject, "ana");
        assert_eq!(principal.tenant.as_deref(), Some("acme"));
        assert_eq!(principal.scopes, ["billing:read", "billing:write"]);
        assert!(principal.has_role("admin"));
        let scp = ClaimNames::default()
            .principal(&claims(json!({"sub": "bo", "scp": ["a", "b"]})))
            .unwrap();
        assert_eq!(scp.scopes, ["a", "b"]);
    }

    #[test]
    fn a_missing_or_malformed_required_claim_is_a_typed_error() {
        let names = ClaimNames::default().tenant("org");
        assert_eq!(
            names.principal(&claims(json!({"sub": "ana"}))),
            Err(ClaimError::Missing {
                claim: "org".into()
            })
        );
        assert_eq!(
            names.principal(&claims(json!({"org": "acme"}))),
            Err(ClaimError::Missing {
                claim: "sub".into()
            })
        );
        assert_eq!(
            names.principal(&claims(json!({"sub": "ana", "org": 7}))),
            Err(ClaimError::Malformed {
                claim: "org".into()
            })
        );
        assert_eq!(
            names.principal(&claims(json!({"sub": "ana", "org": "acme", "scope": 3}))),
            Err(ClaimError::Malformed {
                claim: "scope".into()
            })
        );
    }
}

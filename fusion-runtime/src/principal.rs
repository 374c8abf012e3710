//! Who is calling: the verified caller a transport attaches to each call (SPEC T5, R5).

/// The verified caller of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Who: a user or service id.
    pub subject: String,
    /// The tenant the credential is bound to, if any.
    pub tenant: Option<String>,
    /// What the credential allows.
    pub scopes: Vec<String>,
    /// The roles the credential carries (from a roles claim, for an [`AccessPolicy`]).
    ///
    /// [`AccessPolicy`]: crate::AccessPolicy
    pub roles: Vec<String>,
}

impl Principal {
    /// A principal with a subject and nothing else.
    pub fn new(subject: impl Into<String>) -> Self {
        Principal {
            subject: subject.into(),
            tenant: None,
            scopes: Vec::new(),
            roles: Vec::new(),
        }
    }

    /// Binds the principal to a tenant.
    #[must_use]
    pub fn with_tenant(mut self, tenant: impl Into<String>) -> Self {
        self.tenant = Some(tenant.into());
        self
    }

    /// Grants scopes.
    #[must_use]
    pub fn with_scopes<I: IntoIterator<Item = String>>(mut self, scopes: I) -> Self {
        self.scopes.extend(scopes);
        self
    }

    /// Grants roles.
    #[must_use]
    pub fn with_roles<I: IntoIterator<Item = String>>(mut self, roles: I) -> Self {
        self.roles.extend(roles);
        self
    }

    /// Whether the principal has a role.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|granted| granted == role)
    }

    /// Whether the principal has a scope.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|granted| granted == scope)
    }
}

/// The token of an `Authorization` header's value in the bearer scheme (`Bearer` or `bearer`),
/// trimmed: what the server verifies, and what the gateway exchanges for its caller.
#[cfg(any(feature = "http", feature = "gateway"))]
pub(crate) fn bearer_token(authorization: &str) -> Option<&str> {
    authorization
        .strip_prefix("Bearer ")
        .or_else(|| authorization.strip_prefix("bearer "))
        .map(str::trim)
}

#[cfg(all(test, any(feature = "http", feature = "gateway")))]
mod tests {
    use super::bearer_token;

    #[test]
    fn a_bearer_token_is_read_in_either_case_and_trimmed_and_nothing_else_is() {
        assert_eq!(bearer_token("Bearer abc.def "), Some("abc.def"));
        assert_eq!(bearer_token("bearer abc"), Some("abc"));
        assert_eq!(bearer_token("Basic dXNlcjpwYXNz"), None);
        assert_eq!(bearer_token("Bearerabc"), None);
    }
}

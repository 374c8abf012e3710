//! The name a replica carries in its session ids, so that a load balancer can pin a session to
//! the replica that holds it.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// The name of one replica among several behind a load balancer (`r1`, `billing-7f9c`).
///
/// With [`HttpOptions::replica`](super::HttpOptions::replica) set, every 2025-11-25 session id
/// the server issues starts with it and a dot: `r1.6f1c0d2e-…`. A session lives in the memory
/// of the replica that answered its `initialize`, and that request carries no session id, so
/// hashing on `Mcp-Session-Id` cannot send a session's later requests where it lives; routing
/// on this prefix can (the replicas guide, `fusion::replicas`, has an nginx configuration).
///
/// A name is 1 to 63 ASCII letters, digits, `-` or `_`: it never contains the dot that ends
/// it, and it is valid in a header value and in a load balancer's pattern without escaping.
/// Built with [`ReplicaName::new`] or parsed (`"r1".parse()`), so a server never starts with a
/// name that would make its session ids ambiguous.
///
/// ```
/// use fusion_runtime::serve::ReplicaName;
///
/// let name: ReplicaName = "r1".parse().unwrap();
/// assert_eq!(name.as_str(), "r1");
/// assert!("r1.a".parse::<ReplicaName>().is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ReplicaName(Arc<str>);

/// The longest replica name accepted.
/// A DNS label's limit, so that a Kubernetes pod name always fits.
const MAX_LEN: usize = 63;

impl ReplicaName {
    /// Checks `name` (see the [type docs](ReplicaName) for the rules).
    ///
    /// # Errors
    ///
    /// [`InvalidReplicaName`] names the rule `name` breaks.
    pub fn new(name: &str) -> Result<Self, InvalidReplicaName> {
        if name.is_empty() {
            return Err(InvalidReplicaName::Empty);
        }
        if name.len() > MAX_LEN {
            return Err(InvalidReplicaName::TooLong { len: name.len() });
        }
        if let Some(found) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            return Err(InvalidReplicaName::Character { found });
        }
        Ok(ReplicaName(name.into()))
    }

    /// The name as given.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ReplicaName {
    type Err = InvalidReplicaName;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        ReplicaName::new(name)
    }
}

impl fmt::Display for ReplicaName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ReplicaName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// Why a replica name was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvalidReplicaName {
    /// The name is empty.
    Empty,
    /// The name is longer than 63 bytes.
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The name holds a character other than an ASCII letter, digit, `-` or `_`.
    Character {
        /// The first such character.
        found: char,
    },
}

impl fmt::Display for InvalidReplicaName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidReplicaName::Empty => f.write_str("a replica name cannot be empty"),
            InvalidReplicaName::TooLong { len } => write!(
                f,
                "a replica name has at most {MAX_LEN} characters (this one has {len})"
            ),
            InvalidReplicaName::Character { found } => write!(
                f,
                "a replica name holds only ASCII letters, digits, '-' and '_' (found {found:?})"
            ),
        }
    }
}

impl std::error::Error for InvalidReplicaName {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_route_unambiguously_are_accepted() {
        for name in ["r1", "billing-7f9c", "A_b-0", &"x".repeat(63)] {
            assert_eq!(ReplicaName::new(name).unwrap().as_str(), name);
        }
    }

    #[test]
    fn each_broken_rule_is_named() {
        assert_eq!(ReplicaName::new(""), Err(InvalidReplicaName::Empty));
        assert_eq!(
            ReplicaName::new(&"x".repeat(64)),
            Err(InvalidReplicaName::TooLong { len: 64 })
        );
        for (name, found) in [("r.1", '.'), ("r 1", ' '), ("ré", 'é'), ("r\n", '\n')] {
            assert_eq!(
                ReplicaName::new(name),
                Err(InvalidReplicaName::Character { found }),
                "{name:?}"
            );
        }
        assert_eq!(
            "r.1".parse::<ReplicaName>().unwrap_err().to_string(),
            "a replica name holds only ASCII letters, digits, '-' and '_' (found '.')"
        );
    }
}

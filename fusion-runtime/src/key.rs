//! Canonical tool keys (`namespace.action`) and the dot-segmented globs that match them
//! (SPEC T2, S1).

use std::borrow::Cow;
use std::fmt;

/// The canonical key of a tool: `billing.get_invoice` is action `get_invoice` of namespace
/// `billing`; `ping` is an action without a namespace. Every setting, glob, suggestion and
/// error action names tools by this key, whatever the exposition mode.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolKey {
    full: Cow<'static, str>,
    dot: Option<usize>,
}

impl ToolKey {
    /// Parses `namespace.action` or `action`.
    ///
    /// Segments are ASCII letters, digits, `_` and `-`, start with a letter or `_`, and there
    /// is at most one dot.
    pub fn parse(key: impl Into<Cow<'static, str>>) -> Result<Self, String> {
        let full = key.into();
        // The same rule as `#[tool]` applies at compile time.
        fusion_names::check_key(&full)?;
        let dot = full.find('.');
        Ok(ToolKey { full, dot })
    }

    /// The key as written: `billing.get_invoice`.
    pub fn as_str(&self) -> &str {
        &self.full
    }

    /// The namespace, if any: `billing`.
    pub fn namespace(&self) -> Option<&str> {
        self.dot.map(|dot| &self.full[..dot])
    }

    /// The action: `get_invoice`.
    pub fn action(&self) -> &str {
        match self.dot {
            Some(dot) => &self.full[dot + 1..],
            None => &self.full,
        }
    }

    /// The flat exposed name: `billing_get_invoice`.
    pub fn flat_name(&self) -> String {
        match self.namespace() {
            Some(namespace) => format!("{namespace}_{}", self.action()),
            None => self.full.to_string(),
        }
    }

    /// This key with a namespace put in front (used by routers): `get` under `billing`
    /// becomes `billing.get`.
    pub fn under(&self, namespace: &str) -> Result<Self, String> {
        match self.namespace() {
            None => ToolKey::parse(format!("{namespace}.{}", self.action())),
            Some(existing) => Err(format!(
                "`{self}` already has the namespace `{existing}` and cannot be put under `{namespace}`"
            )),
        }
    }
}

impl fmt::Display for ToolKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full)
    }
}

impl fmt::Debug for ToolKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.full)
    }
}

/// A dot-segmented glob over canonical keys: `*` matches one segment, `**` any number of
/// segments (zero included), anything else matches itself.
///
/// ```
/// use fusion_runtime::Glob;
/// let glob = Glob::parse("billing.*").unwrap();
/// assert!(glob.matches("billing.get_invoice"));
/// assert!(!glob.matches("crm.get_contact"));
/// assert!(Glob::parse("**").unwrap().matches("ping"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Glob {
    pattern: Cow<'static, str>,
}

impl Glob {
    /// Parses a glob; the `#[tool]` macro applies the same rule at compile time.
    pub fn parse(pattern: impl Into<Cow<'static, str>>) -> Result<Self, String> {
        let pattern = pattern.into();
        fusion_names::check_glob(&pattern)?;
        Ok(Glob { pattern })
    }

    /// The glob as written.
    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    /// Whether the glob matches a canonical key.
    pub fn matches(&self, key: &str) -> bool {
        fusion_names::glob_matches(&self.pattern, key)
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.pattern)
    }
}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Glob({:?})", self.pattern)
    }
}

/// MCP tool names: 1–128 characters of `A-Z a-z 0-9 _ - .`.
pub(crate) fn check_exposed_name(name: &str, problems: &mut Vec<String>) {
    let valid_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if name.is_empty() || name.len() > 128 || !valid_chars {
        problems.push(format!(
            "`{name}` is not a valid MCP tool name (1 to 128 of A-Z, a-z, 0-9, `_`, `-`, `.`)"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_into_namespace_and_action() {
        let key = ToolKey::parse("billing.get_invoice").unwrap();
        assert_eq!(key.namespace(), Some("billing"));
        assert_eq!(key.action(), "get_invoice");
        assert_eq!(key.flat_name(), "billing_get_invoice");
        let bare = ToolKey::parse("ping").unwrap();
        assert_eq!(bare.namespace(), None);
        assert_eq!(bare.flat_name(), "ping");
    }

    #[test]
    fn bad_keys_are_rejected() {
        for bad in ["a.b.c", "", ".x", "x.", "1abc", "a b", "bill*.x"] {
            assert!(ToolKey::parse(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn globs_match_by_segment() {
        let cases = [
            ("billing.*", "billing.get_invoice", true),
            ("billing.*", "billing", false),
            ("billing.*", "crm.get", false),
            ("*.get_invoice", "billing.get_invoice", true),
            ("**", "billing.get_invoice", true),
            ("billing.**", "billing", true),
            ("billing.**", "billing.void_invoice", true),
            ("billing.void_invoice", "billing.void_invoice", true),
            ("billing.void_invoice", "billing.void", false),
            ("*", "ping", true),
            ("*", "billing.ping", false),
        ];
        for (glob, key, expected) in cases {
            assert_eq!(
                Glob::parse(glob).unwrap().matches(key),
                expected,
                "{glob} vs {key}"
            );
        }
    }

    #[test]
    fn malformed_globs_are_rejected() {
        for bad in [
            "",
            "billing.",
            "bill*",
            "billing..x",
            "billing.***",
            "a b.*",
        ] {
            assert!(Glob::parse(bad).is_err(), "{bad} should be rejected");
        }
    }
}

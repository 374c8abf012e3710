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
        check_key(&full)?;
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

/// Checks a canonical key's syntax; the `#[tool]` macro applies the same rule at compile time.
fn check_key(key: &str) -> Result<(), String> {
    let segments: Vec<&str> = key.split('.').collect();
    if segments.len() > 2 {
        return Err(format!(
            "`{key}` has more than one dot: a tool name is `namespace.action`"
        ));
    }
    for segment in segments {
        check_segment(key, segment)?;
    }
    Ok(())
}

fn check_segment(key: &str, segment: &str) -> Result<(), String> {
    let mut chars = segment.chars();
    match chars.next() {
        None => Err(format!("`{key}` has an empty segment")),
        Some(first) if !(first.is_ascii_alphabetic() || first == '_') => Err(format!(
            "`{key}`: each segment must start with an ASCII letter or `_`"
        )),
        Some(_) if chars.any(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')) => Err(
            format!("`{key}`: segments may only contain ASCII letters, digits, `_` and `-`"),
        ),
        Some(_) => Ok(()),
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
        for segment in pattern.split('.') {
            match segment {
                "*" | "**" => {}
                "" => return Err(format!("glob `{pattern}` has an empty segment")),
                literal if literal.contains('*') => {
                    return Err(format!(
                        "glob `{pattern}`: `*` and `**` must stand alone in a segment"
                    ));
                }
                literal => {
                    check_segment(&pattern, literal).map_err(|problem| format!("glob {problem}"))?
                }
            }
        }
        Ok(Glob { pattern })
    }

    /// The glob as written.
    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    /// Whether the glob matches a canonical key.
    pub fn matches(&self, key: &str) -> bool {
        let pattern: Vec<&str> = self.pattern.split('.').collect();
        let key: Vec<&str> = key.split('.').collect();
        matches_segments(&pattern, &key)
    }
}

fn matches_segments(pattern: &[&str], key: &[&str]) -> bool {
    match (pattern.split_first(), key.split_first()) {
        (None, None) => true,
        (Some((&"**", rest)), _) => {
            (0..=key.len()).any(|skip| matches_segments(rest, &key[skip..]))
        }
        (Some((&"*", rest)), Some((_, key_rest))) => matches_segments(rest, key_rest),
        (Some((literal, rest)), Some((segment, key_rest))) => {
            literal == segment && matches_segments(rest, key_rest)
        }
        _ => false,
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

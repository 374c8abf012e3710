//! Implementation detail of the `fusion` crate: the syntax of tool keys, globs and upstream
//! routes ([`route`]), written once and applied twice, by the macros at compile time and by the runtime when a server is built.
//!
//! A problem is a sentence that names what was written, such as
//! "`a.b.c` has more than one dot: a tool name is `namespace.action`"; each side says where
//! (a span, or the tool being registered).

pub mod route;

/// Checks a tool key: `namespace.action` or `action` (SPEC T2).
///
/// Segments are ASCII letters, digits, `_` and `-`, start with a letter or `_`, and there is
/// at most one dot.
///
/// ```
/// assert!(fusion_names::check_key("billing.get_invoice").is_ok());
/// assert_eq!(
///     fusion_names::check_key("a.b.c").unwrap_err(),
///     "`a.b.c` has more than one dot: a tool name is `namespace.action`"
/// );
/// ```
pub fn check_key(key: &str) -> Result<(), String> {
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

/// Checks a dot-segmented glob over tool keys (SPEC S1): each segment is `*` (one segment),
/// `**` (any number of segments, zero included) or a key segment.
///
/// ```
/// assert!(fusion_names::check_glob("billing.*").is_ok());
/// assert_eq!(
///     fusion_names::check_glob("bill*.list").unwrap_err(),
///     "glob `bill*.list`: `*` and `**` must stand alone in a segment"
/// );
/// ```
pub fn check_glob(glob: &str) -> Result<(), String> {
    for segment in glob.split('.') {
        match segment {
            "*" | "**" => {}
            "" => return Err(format!("glob `{glob}` has an empty segment")),
            literal if literal.contains('*') => {
                return Err(format!(
                    "glob `{glob}`: `*` and `**` must stand alone in a segment"
                ));
            }
            literal => check_segment(glob, literal).map_err(|problem| format!("glob {problem}"))?,
        }
    }
    Ok(())
}

/// A field name as guarded names are compared (SPEC M3): lowercase, without `_` and `-`, so
/// that every case convention serde or an upstream may use is one name.
///
/// ```
/// for spelling in ["owner_id", "ownerId", "OwnerId", "owner-id", "OWNER_ID"] {
///     assert_eq!(fusion_names::field_name_key(spelling), "ownerid");
/// }
/// ```
pub fn field_name_key(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether a glob (checked by [`check_glob`]) matches a tool key: `*` matches one segment,
/// `**` any number of segments (zero included), anything else matches itself.
///
/// ```
/// assert!(fusion_names::glob_matches("billing.*", "billing.get_invoice"));
/// assert!(!fusion_names::glob_matches("billing.*", "crm.get_contact"));
/// assert!(fusion_names::glob_matches("**", "ping"));
/// ```
pub fn glob_matches(glob: &str, key: &str) -> bool {
    let pattern: Vec<&str> = glob.split('.').collect();
    let key: Vec<&str> = key.split('.').collect();
    matches_segments(&pattern, &key)
}

/// A segment of `written` (a key or a glob): ASCII letters, digits, `_` and `-`, starting with
/// a letter or `_`.
fn check_segment(written: &str, segment: &str) -> Result<(), String> {
    let mut chars = segment.chars();
    match chars.next() {
        None => Err(format!("`{written}` has an empty segment")),
        Some(first) if !(first.is_ascii_alphabetic() || first == '_') => Err(format!(
            "`{written}`: each segment must start with an ASCII letter or `_`"
        )),
        Some(_) if chars.any(|c| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')) => Err(
            format!("`{written}`: segments may only contain ASCII letters, digits, `_` and `-`"),
        ),
        Some(_) => Ok(()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_one_dot_at_most_and_plain_segments() {
        for good in ["ping", "billing.get_invoice", "_a.b-c", "A1.z9"] {
            assert_eq!(check_key(good), Ok(()), "{good}");
        }
        let cases = [
            (
                "a.b.c",
                "`a.b.c` has more than one dot: a tool name is `namespace.action`",
            ),
            ("", "`` has an empty segment"),
            (".x", "`.x` has an empty segment"),
            ("x.", "`x.` has an empty segment"),
            (
                "1abc",
                "`1abc`: each segment must start with an ASCII letter or `_`",
            ),
            (
                "a b",
                "`a b`: segments may only contain ASCII letters, digits, `_` and `-`",
            ),
            (
                "bill*.x",
                "`bill*.x`: segments may only contain ASCII letters, digits, `_` and `-`",
            ),
        ];
        for (bad, problem) in cases {
            assert_eq!(check_key(bad).unwrap_err(), problem, "{bad}");
        }
    }

    #[test]
    fn glob_segments_are_stars_or_key_segments() {
        for good in ["*", "**", "billing.*", "*.get", "billing.**", "a.b.c.d"] {
            assert_eq!(check_glob(good), Ok(()), "{good}");
        }
        let cases = [
            ("", "glob `` has an empty segment"),
            ("billing.", "glob `billing.` has an empty segment"),
            ("billing..x", "glob `billing..x` has an empty segment"),
            (
                "bill*",
                "glob `bill*`: `*` and `**` must stand alone in a segment",
            ),
            (
                "billing.***",
                "glob `billing.***`: `*` and `**` must stand alone in a segment",
            ),
            (
                "a b.*",
                "glob `a b.*`: segments may only contain ASCII letters, digits, `_` and `-`",
            ),
            (
                "1a.*",
                "glob `1a.*`: each segment must start with an ASCII letter or `_`",
            ),
        ];
        for (bad, problem) in cases {
            assert_eq!(check_glob(bad).unwrap_err(), problem, "{bad}");
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
            ("**.void_invoice", "billing.void_invoice", true),
            ("billing.void_invoice", "billing.void_invoice", true),
            ("billing.void_invoice", "billing.void", false),
            ("*", "ping", true),
            ("*", "billing.ping", false),
        ];
        for (glob, key, expected) in cases {
            assert_eq!(glob_matches(glob, key), expected, "{glob} vs {key}");
        }
    }
}

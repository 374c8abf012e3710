//! What a scope may be spelt as, on its own so that the build's checks and the catalog read it
//! without depending on the server (`scopes` does).

/// A `scope-token` of RFC 6749 §3.3: printable ASCII but space, `"` and `\`.
pub(crate) fn is_scope_token(scope: &str) -> bool {
    !scope.is_empty()
        && scope.bytes().all(|byte| {
            byte == 0x21 || (0x23..=0x5B).contains(&byte) || (0x5D..=0x7E).contains(&byte)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_tokens_are_printable_ascii_without_space_quote_or_backslash() {
        assert!(is_scope_token("billing:write"));
        assert!(is_scope_token("https://api.example/read"));
        for bad in ["", "a b", "a\"b", "a\\b", "é"] {
            assert!(!is_scope_token(bad), "{bad:?}");
        }
    }
}

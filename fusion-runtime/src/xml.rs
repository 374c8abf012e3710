//! XML escaping for the text blocks agents read (`<domain_rules>`, `<tool_error>`, …).

use std::borrow::Cow;

/// Escapes text content: `&`, `<` and `>`.
pub fn escape(text: &str) -> Cow<'_, str> {
    escape_with(text, false)
}

/// Escapes an attribute value: `&`, `<`, `>` and `"`.
pub fn escape_attr(text: &str) -> Cow<'_, str> {
    escape_with(text, true)
}

fn escape_with(text: &str, quotes: bool) -> Cow<'_, str> {
    let needs = |c: char| matches!(c, '&' | '<' | '>') || (quotes && c == '"');
    if !text.contains(needs) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if quotes => out.push_str("&quot;"),
            other => out.push(other),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_but_borrows_clean_text() {
        assert!(matches!(escape("plain"), Cow::Borrowed(_)));
        assert_eq!(escape("a<b>&\"c\""), "a&lt;b&gt;&amp;\"c\"");
        assert_eq!(escape_attr("a\"b"), "a&quot;b");
    }
}

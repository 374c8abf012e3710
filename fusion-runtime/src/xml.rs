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

/// Appends `text`, escaped as text content, to `out`.
pub fn escape_into(out: &mut String, text: &str) {
    write_escaped(out, text, false);
}

fn escape_with(text: &str, quotes: bool) -> Cow<'_, str> {
    if !text.bytes().any(|byte| special(byte, quotes)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    write_escaped(&mut out, text, quotes);
    Cow::Owned(out)
}

fn special(byte: u8, quotes: bool) -> bool {
    matches!(byte, b'&' | b'<' | b'>') || (quotes && byte == b'"')
}

/// Copies runs of plain text at once; only the special bytes (all ASCII, so never inside a
/// multi-byte character) are replaced.
fn write_escaped(out: &mut String, text: &str, quotes: bool) {
    let mut start = 0;
    for (index, byte) in text.bytes().enumerate() {
        if !special(byte, quotes) {
            continue;
        }
        out.push_str(&text[start..index]);
        out.push_str(match byte {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            _ => "&quot;",
        });
        start = index + 1;
    }
    out.push_str(&text[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_but_borrows_clean_text() {
        assert!(matches!(escape("plain"), Cow::Borrowed(_)));
        assert_eq!(escape("a<b>&\"c\""), "a&lt;b&gt;&amp;\"c\"");
        assert_eq!(escape_attr("a\"b"), "a&quot;b");
        assert_eq!(escape("é<ü>€"), "é&lt;ü&gt;€");
        let mut out = String::from("x");
        escape_into(&mut out, "1 < 2");
        assert_eq!(out, "x1 &lt; 2");
    }
}

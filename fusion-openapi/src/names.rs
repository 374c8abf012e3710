//! Rust names for whatever an OpenAPI document calls things: snake_case fields, functions
//! and tools, CamelCase types; keywords, leading digits, dashes and duplicates handled.

use std::collections::HashSet;

/// Keywords of Rust 2024 (strict and reserved), which an identifier may only be as `r#…`.
const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "dyn", "else", "enum", "extern", "false",
    "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "static", "struct", "trait", "true", "type", "unsafe", "use", "where",
    "while", "abstract", "become", "box", "do", "final", "macro", "override", "priv", "try",
    "typeof", "unsized", "virtual", "yield", "union",
];

/// Keywords that cannot be raw identifiers: they get a trailing `_`.
const NOT_RAW: &[&str] = &["self", "Self", "super", "crate", "_"];

/// The words of a name: split at non-alphanumerics and at lower→upper case changes
/// (`petId` → `pet`, `id`; `HTTPServer` → `http`, `server`).
pub(crate) fn words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = name.chars().collect();
    for (index, &c) in chars.iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            continue;
        }
        let boundary = c.is_ascii_uppercase()
            && !current.is_empty()
            && (chars[index - 1].is_ascii_lowercase()
                || chars[index - 1].is_ascii_digit()
                || chars
                    .get(index + 1)
                    .is_some_and(|next| next.is_ascii_lowercase())
                    && chars[index - 1].is_ascii_uppercase());
        if boundary {
            words.push(std::mem::take(&mut current));
        }
        current.push(c.to_ascii_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// A snake_case identifier (`r#type` for a keyword, `n_1st` for a leading digit, `field` for
/// a name with no letters or digits).
pub(crate) fn snake(name: &str, fallback: &str) -> String {
    let mut text = words(name).join("_");
    if text.is_empty() {
        text = fallback.to_owned();
    }
    if text.starts_with(|c: char| c.is_ascii_digit()) {
        text = format!("n_{text}");
    }
    keyword_safe(text)
}

/// A CamelCase type name.
pub(crate) fn camel(name: &str, fallback: &str) -> String {
    let mut text: String = words(name)
        .iter()
        .map(|word| {
            let mut chars = word.chars();
            match chars.next() {
                Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
                None => String::new(),
            }
        })
        .collect();
    if text.is_empty() {
        text = fallback.to_owned();
    }
    if text.starts_with(|c: char| c.is_ascii_digit()) {
        text = format!("N{text}");
    }
    keyword_safe(text)
}

fn keyword_safe(text: String) -> String {
    if NOT_RAW.contains(&text.as_str()) {
        format!("{text}_")
    } else if KEYWORDS.contains(&text.as_str()) {
        format!("r#{text}")
    } else {
        text
    }
}

/// The name without `r#`: what serde and the agent see.
pub(crate) fn unraw(ident: &str) -> &str {
    ident.strip_prefix("r#").unwrap_or(ident)
}

/// Hands out names unique within one scope: a taken name gets `_2`, `_3`… (`2`, `3`… for
/// types).
#[derive(Default)]
pub(crate) struct Scope {
    taken: HashSet<String>,
}

impl Scope {
    pub(crate) fn reserve(&mut self, name: &str) {
        self.taken.insert(unraw(name).to_owned());
    }

    pub(crate) fn unique(&mut self, name: String, separator: &str) -> String {
        if self.taken.insert(unraw(&name).to_owned()) {
            return name;
        }
        let base = unraw(&name).to_owned();
        for n in 2.. {
            let candidate = format!("{base}{separator}{n}");
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
        }
        unreachable!()
    }
}

/// Whether a field's name looks like it holds a secret: password, token, secret, API key…
/// A bare `key` (a tag's key, a sort key) and a paging token (`nextToken`, `pageToken`) are
/// not secrets.
pub(crate) fn secret_looking(name: &str) -> bool {
    let words = words(name);
    let joined = words.concat();
    let has = |word: &str| words.iter().any(|w| w == word);
    let paging = [
        "next",
        "page",
        "continuation",
        "pagination",
        "cursor",
        "sync",
        "previous",
        "prev",
    ]
    .iter()
    .any(|word| has(word));
    let key_of_something_secret = (has("key") || has("keys"))
        && [
            "api",
            "private",
            "secret",
            "access",
            "signing",
            "encryption",
            "auth",
            "license",
        ]
        .iter()
        .any(|word| has(word));
    key_of_something_secret
        || ((has("token") || has("tokens")) && !paging)
        || words.iter().any(|word| {
            matches!(
                word.as_str(),
                "password"
                    | "passwd"
                    | "pwd"
                    | "secret"
                    | "secrets"
                    | "apikey"
                    | "credential"
                    | "credentials"
                    | "passphrase"
                    | "pin"
                    | "ssn"
                    | "cvv"
                    | "cvc"
                    | "otp"
                    | "salt"
            )
        })
        || [
            "password",
            "secret",
            "apikey",
            "accesstoken",
            "privatekey",
            "refreshtoken",
        ]
        .iter()
        .any(|needle| joined.contains(needle))
}

/// What a string `format` means, in words an agent reads in a label.
pub(crate) fn format_words(format: &str) -> Option<&'static str> {
    Some(match format {
        "int32" | "int64" | "integer" => "an integer",
        "float" | "double" | "decimal" => "a number",
        "date-time" => "a date and time, RFC 3339",
        "date" => "a date, YYYY-MM-DD",
        "time" => "a time of day",
        "email" | "idn-email" => "an email address",
        "uri" | "url" | "iri" | "uri-reference" => "a URL",
        "uuid" => "a UUID",
        "hostname" | "idn-hostname" => "a host name",
        "ipv4" => "an IPv4 address",
        "ipv6" => "an IPv6 address",
        "byte" => "base64 text",
        "duration" => "a duration, ISO 8601",
        _ => return None,
    })
}

/// A sentence's first letter in upper case (`pet id` → `Pet id`).
pub(crate) fn sentence(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().collect::<String>() + chars.as_str(),
        None => String::new(),
    }
}

/// A tool namespace from an API's title: its first two meaningful words in snake_case
/// (`Swagger Petstore - OpenAPI 3.0` → `petstore`, `AWS CodeStar connections` → `aws_code`).
pub(crate) fn namespace(title: &str) -> String {
    let mut all = words(title);
    // `OpenAPI` reads as `open`, `api`: neither names the API.
    while let Some(at) = all
        .windows(2)
        .position(|pair| pair[0] == "open" && pair[1] == "api")
    {
        all.drain(at..at + 2);
    }
    let kept: Vec<String> = all
        .into_iter()
        .filter(|word| {
            let filler = matches!(
                word.as_str(),
                "api"
                    | "apis"
                    | "openapi"
                    | "swagger"
                    | "the"
                    | "rest"
                    | "http"
                    | "service"
                    | "spec"
                    | "specification"
                    | "example"
            );
            let number = word.chars().all(|c| c.is_ascii_digit());
            // `v`, `v2`, `v10`: a version, not a name.
            let version = word
                .strip_prefix('v')
                .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit()));
            !(filler || number || version)
        })
        .take(2)
        .collect();
    let name = kept.join("_");
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        "api".to_owned()
    } else {
        name
    }
}

/// Text fit for a one-line doc comment or label: whitespace collapsed, at most `max` chars.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.chars().count() <= max {
        return collapsed;
    }
    let cut: String = collapsed.chars().take(max).collect();
    format!("{}…", cut.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_identifiers() {
        assert_eq!(snake("petId", "f"), "pet_id");
        assert_eq!(snake("HTTPServer", "f"), "http_server");
        assert_eq!(snake("type", "f"), "r#type");
        assert_eq!(snake("self", "f"), "self_");
        assert_eq!(snake("1st-place", "f"), "n_1st_place");
        assert_eq!(snake("x-rate-limit", "f"), "x_rate_limit");
        assert_eq!(snake("$$", "field"), "field");
        assert_eq!(camel("pet_store", "M"), "PetStore");
        assert_eq!(camel("123", "M"), "N123");
        assert_eq!(camel("Self", "M"), "Self_");
        let mut scope = Scope::default();
        assert_eq!(scope.unique("id".into(), "_"), "id");
        assert_eq!(scope.unique("id".into(), "_"), "id_2");
        assert_eq!(scope.unique("r#type".into(), "_"), "r#type");
        assert_eq!(scope.unique("r#type".into(), "_"), "type_2");
    }

    #[test]
    fn namespaces_come_from_titles() {
        assert_eq!(namespace("Swagger Petstore - OpenAPI 3.0"), "petstore");
        assert_eq!(namespace("AWS CodeStar connections"), "aws_code");
        assert_eq!(namespace("Twilio - Api"), "twilio");
        assert_eq!(namespace("API v2"), "api");
    }

    #[test]
    fn secrets_are_recognised() {
        for name in [
            "password",
            "apiKey",
            "api_key",
            "client_secret",
            "accessToken",
            "privateKey",
            "refresh_token",
            "token",
            "AccessKeyId",
        ] {
            assert!(secret_looking(name), "{name}");
        }
        for name in [
            "keyboard",
            "monkey",
            "name",
            "tokenize_mode",
            "Key",
            "TagKeys",
            "NextToken",
            "page_token",
            "commit_hash",
        ] {
            assert!(!secret_looking(name), "{name}");
        }
    }
}

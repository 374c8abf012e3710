//! URI templates of resources: RFC 6570 level 1 (`billing://invoices/{id}`), which is what
//! resource templates use in practice. A variable matches one non-empty run of characters up to
//! the next literal part, never across a `/`, and is percent-decoded.

use serde_json::{Map, Value};

/// A parsed URI template: literal parts and variables, alternating.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UriTemplate {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Variable(String),
}

impl UriTemplate {
    /// Parses `template`; `Ok(None)` when it has no variable (a fixed URI).
    pub(crate) fn parse(template: &str) -> Result<Option<UriTemplate>, String> {
        if !template.contains(['{', '}']) {
            return Ok(None);
        }
        let mut parts = Vec::new();
        let mut rest = template;
        while !rest.is_empty() {
            match rest.find('{') {
                Some(start) => {
                    let literal = &rest[..start];
                    if literal.contains('}') {
                        return Err(format!("URI template `{template}` has an unmatched `}}`"));
                    }
                    if !literal.is_empty() {
                        parts.push(Part::Literal(literal.to_owned()));
                    }
                    let after = &rest[start + 1..];
                    let end = after.find('}').ok_or_else(|| {
                        format!("URI template `{template}` has an unmatched `{{`")
                    })?;
                    let name = &after[..end];
                    if name.is_empty()
                        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                        || name.starts_with(|c: char| c.is_ascii_digit())
                    {
                        return Err(format!(
                            "URI template `{template}`: `{{{name}}}` is not a simple variable \
                             (only `{{name}}` is supported: no operators, no lists)"
                        ));
                    }
                    if matches!(parts.last(), Some(Part::Variable(_))) {
                        return Err(format!(
                            "URI template `{template}`: two variables follow each other, so \
                             neither can be told apart"
                        ));
                    }
                    if parts
                        .iter()
                        .any(|part| matches!(part, Part::Variable(other) if other == name))
                    {
                        return Err(format!(
                            "URI template `{template}` names `{{{name}}}` twice"
                        ));
                    }
                    parts.push(Part::Variable(name.to_owned()));
                    rest = &after[end + 1..];
                }
                None => {
                    if rest.contains('}') {
                        return Err(format!("URI template `{template}` has an unmatched `}}`"));
                    }
                    parts.push(Part::Literal(rest.to_owned()));
                    rest = "";
                }
            }
        }
        Ok(Some(UriTemplate { parts }))
    }

    /// The variables, in order.
    pub(crate) fn variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|part| match part {
            Part::Variable(name) => Some(name.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// The variables of `uri`, when it matches: name to decoded value.
    pub(crate) fn matches(&self, uri: &str) -> Option<Vec<(String, String)>> {
        let mut rest = uri;
        let mut values = Vec::new();
        let mut parts = self.parts.iter().peekable();
        while let Some(part) = parts.next() {
            match part {
                Part::Literal(literal) => rest = rest.strip_prefix(literal.as_str())?,
                Part::Variable(name) => {
                    let end = match parts.peek() {
                        Some(Part::Literal(next)) => rest.find(next.as_str())?,
                        _ => rest.len(),
                    };
                    let raw = &rest[..end];
                    if raw.is_empty() || raw.contains('/') {
                        return None;
                    }
                    values.push((name.clone(), percent_decode(raw)?));
                    rest = &rest[end..];
                }
            }
        }
        rest.is_empty().then_some(values)
    }
}

/// Decodes `%XX` escapes; `None` when an escape is malformed or the result is not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    if !text.contains('%') {
        return Some(text.to_owned());
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = text.get(index + 1..index + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Turns text values (URI variables, prompt arguments: strings on the wire) into the JSON
/// types the input schema declares, so that `id: u64` reads `"42"` as `42`. A value that does
/// not parse stays a string, for validation to explain.
pub(crate) fn typed_arguments(
    values: impl IntoIterator<Item = (String, String)>,
    input_schema: &Map<String, Value>,
) -> Map<String, Value> {
    let properties = input_schema.get("properties").and_then(Value::as_object);
    values
        .into_iter()
        .map(|(name, text)| {
            let types = properties
                .and_then(|properties| properties.get(&name))
                .map(declared_types)
                .unwrap_or_default();
            let value = typed(&text, &types).unwrap_or(Value::String(text));
            (name, value)
        })
        .collect()
}

fn declared_types(property: &Value) -> Vec<String> {
    let mut types = Vec::new();
    match property.get("type") {
        Some(Value::String(kind)) => types.push(kind.clone()),
        Some(Value::Array(kinds)) => {
            types.extend(kinds.iter().filter_map(Value::as_str).map(str::to_owned))
        }
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = property.get(key) {
            for option in options {
                types.extend(declared_types(option));
            }
        }
    }
    types
}

fn typed(text: &str, types: &[String]) -> Option<Value> {
    if types.iter().any(|kind| kind == "string") {
        return None;
    }
    for kind in types {
        let value = match kind.as_str() {
            "integer" => text
                .parse::<i64>()
                .map(Value::from)
                .or_else(|_| text.parse::<u64>().map(Value::from))
                .ok(),
            "number" => text.parse::<f64>().ok().map(Value::from),
            "boolean" => text.parse::<bool>().ok().map(Value::from),
            _ => None,
        };
        if value.is_some() {
            return value;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_uris_are_not_templates() {
        assert_eq!(UriTemplate::parse("billing://summary"), Ok(None));
    }

    #[test]
    fn variables_match_one_segment_and_are_decoded() {
        let template = UriTemplate::parse("billing://invoices/{id}/lines/{line}")
            .unwrap()
            .unwrap();
        assert_eq!(template.variables().collect::<Vec<_>>(), ["id", "line"]);
        assert_eq!(
            template.matches("billing://invoices/INV%2D1/lines/3"),
            Some(vec![
                ("id".to_owned(), "INV-1".to_owned()),
                ("line".to_owned(), "3".to_owned())
            ])
        );
        assert_eq!(template.matches("billing://invoices//lines/3"), None);
        assert_eq!(template.matches("billing://invoices/a/b/lines/3"), None);
        assert_eq!(template.matches("billing://invoices/1/lines/3/x"), None);
        assert_eq!(template.matches("billing://invoices/%zz/lines/3"), None);
    }

    #[test]
    fn malformed_templates_are_refused() {
        for bad in [
            "a://{",
            "a://}",
            "a://{+path}",
            "a://{x}{y}",
            "a://{x}/{x}",
            "a://{}",
        ] {
            assert!(UriTemplate::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn text_values_take_the_declared_type() {
        let schema = serde_json::json!({"properties": {
            "id": {"type": "integer"},
            "name": {"type": "string"},
            "flag": {"type": ["boolean", "null"]},
        }});
        let typed = typed_arguments(
            [
                ("id".to_owned(), "42".to_owned()),
                ("name".to_owned(), "42".to_owned()),
                ("flag".to_owned(), "true".to_owned()),
            ],
            schema.as_object().unwrap(),
        );
        assert_eq!(
            Value::Object(typed),
            serde_json::json!({"id": 42, "name": "42", "flag": true})
        );
    }
}

//! How the data of an answer reads in its text block: the copy the model reads (most clients
//! put `content` in the model's context, and `structuredContent` in front of code).
//!
//! A page of uniform items is written as a table, TOON's tabular form: the item count and the
//! field names once, then one line per item with the values in the same order,
//!
//! ```text
//! [2]{id,customer_id,total_cents,status}:
//! INV-1,C-1,12345,paid
//! INV-2,C-2,900,open
//! ```
//!
//! instead of JSON, which repeats every key in every item (about half the tokens of a list
//! of small records). TOON is an established notation for exactly this (models read it as
//! readily as CSV, and it says how many rows to expect); only its tabular form is used, and
//! only where it is exact: every item an object with the same keys in the same order, every
//! value a string, number, boolean or null. A string that would read as something else (one
//! with a comma, a quote, a line break, leading or trailing spaces, or one that looks like a
//! number, a boolean or null) is written as a JSON string. Anything else stays JSON, so the
//! text is always exact; `structuredContent` carries the data as JSON in every case.
//!
//! Sealing writes the data block as JSON (the egress budget measures that, an upper bound of
//! the table); the conversion to the protocol's result applies the client's [`ClientForm`].

use std::fmt::Write as _;

use std::ops::Range;

use rmcp::model::{ClientCapabilities, ContentBlock, ProtocolVersion};

pub use crate::action::DataText;
use serde_json::Value;

use crate::present::json_text;

impl DataText {
    /// The form for a client on `version` (the default when unknown): JSON for the versions
    /// before `structuredContent` (2024-11-05 and 2025-03-26).
    pub fn for_protocol(version: Option<&ProtocolVersion>) -> Self {
        match version {
            Some(version) if *version < ProtocolVersion::V_2025_06_18 => DataText::Json,
            _ => DataText::Compact,
        }
    }
}

/// The extension a client declares (in its capabilities' `extensions` or `experimental`) to
/// say that it renders UI: only such a client receives a presenter's UI blocks.
pub const UI_EXTENSION: &str = "io.modelcontextprotocol/ui";

/// How an answer is written for the client that asked: the form of its data block, and
/// whether its UI blocks are sent.
///
/// UI blocks (a table, a chart, a diagram of the data) repeat what the data block already
/// says, for a client that draws them; a model reading them pays for the data twice. They are
/// opt-in: sent to a client that declares [`UI_EXTENSION`], left out for any other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientForm {
    /// The data block's form.
    pub data_text: DataText,
    /// Whether the presenter's UI blocks are sent.
    pub ui: bool,
}

impl ClientForm {
    /// The form for a client on `version` that declared `capabilities` (either unknown: the
    /// defaults, compact data and no UI blocks).
    pub fn of(
        version: Option<&ProtocolVersion>,
        capabilities: Option<&ClientCapabilities>,
    ) -> Self {
        let declares = |map: Option<&std::collections::BTreeMap<String, _>>| {
            map.is_some_and(|map| map.contains_key(UI_EXTENSION))
        };
        ClientForm {
            data_text: DataText::for_protocol(version),
            ui: capabilities.is_some_and(|capabilities| {
                declares(capabilities.extensions.as_ref())
                    || declares(capabilities.experimental.as_ref())
            }),
        }
    }

    /// This form for a tool whose data block is `tool_form` for clients that read
    /// `structuredContent` (a client before it keeps the JSON copy).
    pub(crate) fn for_tool(self, tool_form: DataText) -> Self {
        ClientForm {
            data_text: match self.data_text {
                DataText::Json => DataText::Json,
                DataText::Compact => tool_form,
            },
            ..self
        }
    }

    /// Writes the text blocks of a success (sealed with the data block first, and its UI
    /// blocks at `ui`) in this form; `envelope` is its `structuredContent`, `columns` its
    /// presenter's fields in order (empty for data without a presenter). The data block is
    /// JSON, or empty when `data_pending`: a list of flat records whose text is written here,
    /// as a table or (for a client that reads JSON) as JSON.
    pub(crate) fn apply(
        self,
        content: &mut Vec<ContentBlock>,
        ui: Range<usize>,
        envelope: &Value,
        columns: &[&str],
        data_pending: bool,
    ) {
        if !self.ui && ui.end <= content.len() {
            content.drain(ui);
        }
        let Some(block) = content.first_mut() else {
            return;
        };
        let data = &envelope["data"];
        if data_pending {
            let table = (self.data_text == DataText::Compact && same_keys(data, columns))
                .then(|| tabular(data, Some(columns)))
                .flatten();
            *block = ContentBlock::text(table.unwrap_or_else(|| json_text(data, columns)));
            return;
        }
        if self.data_text == DataText::Json {
            return;
        }
        // Only a list of two items or more has a tabular form: anything else keeps its JSON,
        // without reading the text's key order first (most answers are one record).
        if data.as_array().is_none_or(|items| items.len() < 2) {
            return;
        }
        // `data` is a sorted map: the columns are the presenter's fields, in its order, or
        // (plain data) the keys in the order the sealed JSON text wrote them.
        let table = if !columns.is_empty() && same_keys(data, columns) {
            tabular(data, Some(columns))
        } else {
            let order = block.as_text().and_then(|text| first_keys(&text.text));
            let order: Option<Vec<&str>> = order
                .as_ref()
                .map(|order| order.iter().map(String::as_str).collect());
            tabular(data, order.as_deref())
        };
        if let Some(table) = table {
            *block = ContentBlock::text(table);
        }
    }
}

/// Whether the first item of `data` (a list) has exactly `columns` as its keys.
fn same_keys(data: &Value, columns: &[&str]) -> bool {
    data.get(0).and_then(Value::as_object).is_some_and(|first| {
        first.len() == columns.len() && columns.iter().all(|key| first.contains_key(*key))
    })
}

/// The keys of the first item of a JSON array of objects, in the order written.
fn first_keys(json: &str) -> Option<Vec<String>> {
    struct Keys(Vec<String>);
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Visitor;
            impl<'de> serde::de::Visitor<'de> for Visitor {
                type Value = Keys;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Keys, A::Error> {
                    let mut keys = Vec::new();
                    while let Some(key) = map.next_key::<String>()? {
                        map.next_value::<serde::de::IgnoredAny>()?;
                        keys.push(key);
                    }
                    Ok(Keys(keys))
                }
            }
            deserializer.deserialize_map(Visitor)
        }
    }
    struct First(Option<Keys>);
    impl<'de> serde::Deserialize<'de> for First {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Visitor;
            impl<'de> serde::de::Visitor<'de> for Visitor {
                type Value = First;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("an array")
                }
                fn visit_seq<A: serde::de::SeqAccess<'de>>(
                    self,
                    mut seq: A,
                ) -> Result<First, A::Error> {
                    let first = seq.next_element::<Keys>()?;
                    while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                    Ok(First(first))
                }
            }
            deserializer.deserialize_seq(Visitor)
        }
    }
    serde_json::from_str::<First>(json)
        .ok()?
        .0
        .map(|keys| keys.0)
}

/// The text block's form of `data`: the tabular form for a uniform list of two items or
/// more, `None` (JSON) for anything else. The columns are in `order` when it names exactly
/// the items' keys (the presenter's field order), else in the items' own.
pub(crate) fn tabular(data: &Value, order: Option<&[&str]>) -> Option<String> {
    let items = data.as_array().filter(|items| items.len() >= 2)?;
    let first = items
        .first()?
        .as_object()
        .filter(|first| !first.is_empty())?;
    let keys: Vec<&str> = match order {
        Some(order)
            if order.len() == first.len() && order.iter().all(|key| first.contains_key(*key)) =>
        {
            order.to_vec()
        }
        _ => first.keys().map(String::as_str).collect(),
    };
    if keys.iter().any(|key| !plain(key)) {
        return None;
    }
    let mut text = format!("[{}]{{", items.len());
    for (index, key) in keys.iter().enumerate() {
        if index > 0 {
            text.push(',');
        }
        text.push_str(key);
    }
    text.push_str("}:");
    for item in items {
        let item = item.as_object()?;
        if item.len() != keys.len() {
            return None;
        }
        text.push('\n');
        for (index, key) in keys.iter().enumerate() {
            if index > 0 {
                text.push(',');
            }
            cell(&mut text, item.get(*key)?)?;
        }
    }
    Some(text)
}

/// Writes one value, or `None` when it is not a primitive.
fn cell(text: &mut String, value: &Value) -> Option<()> {
    match value {
        Value::String(string) if plain(string) => text.push_str(string),
        // `Number`'s own `Display` is the JSON text, without `Value`'s serializer around it.
        Value::Number(number) => {
            let _ = write!(text, "{number}");
        }
        Value::Bool(true) => text.push_str("true"),
        Value::Bool(false) => text.push_str("false"),
        Value::Null => text.push_str("null"),
        Value::String(_) => {
            let _ = write!(text, "{value}");
        }
        Value::Array(_) | Value::Object(_) => return None,
    }
    Some(())
}

/// Whether a string reads as itself unquoted: no delimiter, quote, brace, bracket, colon or
/// control character, no spaces at its ends, and not a number, boolean or null.
fn plain(string: &str) -> bool {
    let (Some(first), Some(last)) = (string.chars().next(), string.chars().next_back()) else {
        return false;
    };
    // One pass over the bytes for the ASCII delimiters and controls; a string with other
    // characters is checked again by character (C1 controls are two bytes in UTF-8).
    let mut ascii = true;
    for &byte in string.as_bytes() {
        match byte {
            b',' | b'"' | b'\\' | b':' | b'[' | b']' | b'{' | b'}' | 0..=0x1f | 0x7f => {
                return false;
            }
            0x80.. => ascii = false,
            _ => {}
        }
    }
    (ascii || !string.chars().any(char::is_control))
        && !first.is_whitespace()
        && !last.is_whitespace()
        && !matches!(string, "true" | "false" | "null")
        && first != '-'
        && !reads_as_number(string)
}

/// Whether `string` parses as a number (`f64` reads `1e3`, `.5`, `+7`, `inf`, `NaN`, …): only
/// a string that starts like one is parsed.
fn reads_as_number(string: &str) -> bool {
    let starts_like_one = match string.as_bytes() {
        [first, ..] if first.is_ascii_digit() || matches!(first, b'+' | b'.') => true,
        [a, b, c, ..] => {
            let start = [a, b, c].map(u8::to_ascii_lowercase);
            start == *b"inf" || start == *b"nan"
        }
        _ => false,
    };
    starts_like_one && string.parse::<f64>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Reads the tabular form back, as a model or a TOON decoder would.
    fn read_back(text: &str) -> Value {
        let (header, rows) = text.split_once(":\n").unwrap();
        let (count, keys) = header.split_once("]{").unwrap();
        let count: usize = count.trim_start_matches('[').parse().unwrap();
        let keys: Vec<&str> = keys.trim_end_matches('}').split(',').collect();
        let mut items = Vec::new();
        for row in rows.lines() {
            let mut item = serde_json::Map::new();
            let mut rest = row;
            for key in &keys {
                let (value, tail) = if rest.starts_with('"') {
                    let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
                    let value = stream.next().unwrap().unwrap();
                    let used = stream.byte_offset();
                    (value, rest[used..].strip_prefix(',').unwrap_or(""))
                } else {
                    let (raw, tail) = rest.split_once(',').unwrap_or((rest, ""));
                    let value = serde_json::from_str(raw).unwrap_or_else(|_| Value::from(raw));
                    (value, tail)
                };
                item.insert((*key).to_owned(), value);
                rest = tail;
            }
            items.push(Value::Object(item));
        }
        assert_eq!(items.len(), count);
        Value::Array(items)
    }

    #[test]
    fn a_uniform_list_is_a_table_that_reads_back_exactly() {
        let data = json!([
            {"id": "INV-1", "customer_id": "C-1", "total_cents": 12345, "status": "paid", "memo": null},
            {"id": "INV-2", "customer_id": "C-2", "total_cents": -900, "status": "open", "memo": "a, \"b\"\nc"},
            {"id": "42", "customer_id": " C-3", "total_cents": 1.5, "status": "true", "memo": "-x"},
        ]);
        let text = tabular(&data, None).unwrap();
        assert!(
            text.starts_with(
                "[3]{customer_id,id,memo,status,total_cents}:\nC-1,INV-1,null,paid,12345\n"
            ),
            "{text}"
        );
        assert_eq!(read_back(&text), data);
    }

    #[test]
    fn the_columns_follow_the_presenters_field_order() {
        // `data` is a sorted map; the sealed JSON text keeps the order the presenter wrote.
        let written = r#"[{"id":"INV-1","total_cents":5,"status":"paid"},{"id":"INV-2","total_cents":7,"status":"open"}]"#;
        let data: Value = serde_json::from_str(written).unwrap();
        let envelope = json!({"ok": true, "data": data, "meta": {}});
        let mut content = vec![ContentBlock::text(written)];
        ClientForm::default().apply(&mut content, 1..1, &envelope, &[], false);
        assert_eq!(
            content[0].as_text().unwrap().text,
            "[2]{id,total_cents,status}:\nINV-1,5,paid\nINV-2,7,open"
        );
        // The presenter's columns, when they name exactly the items' keys, without reading
        // the text; any other order is not used.
        let mut content = vec![ContentBlock::text("not read")];
        ClientForm::default().apply(
            &mut content,
            1..1,
            &envelope,
            &["status", "id", "total_cents"],
            false,
        );
        assert_eq!(
            content[0].as_text().unwrap().text,
            "[2]{status,id,total_cents}:\npaid,INV-1,5\nopen,INV-2,7"
        );
        assert!(
            tabular(&data, Some(&["id", "status"]))
                .unwrap()
                .starts_with("[2]{id,status,total_cents}:")
        );
    }

    #[test]
    fn a_string_is_plain_unless_it_would_read_as_something_else() {
        for plain_text in [
            "INV-1", "in", "inv", "Nano", "+", ".", "x1e3", "C 1", "é", "Zoë B", "a\u{a0}b",
        ] {
            assert!(plain(plain_text), "{plain_text}");
        }
        for quoted in [
            "1",
            "1e3",
            ".5",
            "+7",
            "inf",
            "-inf",
            "Infinity",
            "NaN",
            "nan",
            "true",
            "null",
            "-x",
            " a",
            "a,b",
            "a:b",
            "a\nb",
            "",
            "a\u{7f}",
            "a\u{85}b",
            "\u{a0}a",
            "a\u{3000}",
            "\"",
            "a\\b",
            "{",
            "]",
        ] {
            assert!(!plain(quoted), "{quoted}");
        }
    }

    #[test]
    fn ui_blocks_reach_only_a_client_that_declares_it_renders_them() {
        let envelope = json!({"ok": true, "data": {"id": "INV-1"}, "meta": {}});
        let sealed = || {
            vec![
                ContentBlock::text(r#"{"id":"INV-1"}"#),
                ContentBlock::text("<ui_passthrough type=\"markdown\">\nINV-1\n</ui_passthrough>"),
                ContentBlock::text("<domain_rules>\n- r\n</domain_rules>"),
            ]
        };
        let mut declares = ClientCapabilities::default();
        declares.extensions = Some([(UI_EXTENSION.to_owned(), Default::default())].into());
        let mut experimental = ClientCapabilities::default();
        experimental.experimental = Some([(UI_EXTENSION.to_owned(), Default::default())].into());
        for (capabilities, blocks) in [
            (None, 2),
            (Some(ClientCapabilities::default()), 2),
            (Some(declares), 3),
            (Some(experimental), 3),
        ] {
            let form = ClientForm::of(None, capabilities.as_ref());
            let mut content = sealed();
            form.apply(&mut content, 1..2, &envelope, &[], false);
            assert_eq!(content.len(), blocks, "{capabilities:?}");
            assert!(
                content
                    .last()
                    .unwrap()
                    .as_text()
                    .unwrap()
                    .text
                    .starts_with("<domain_rules>")
            );
        }
    }

    #[test]
    fn clients_before_structured_content_get_the_json_copy() {
        let data = json!([{"id": "INV-1"}, {"id": "INV-2"}]);
        let envelope = json!({"ok": true, "data": data, "meta": {}});
        let json_text = data.to_string();
        for (version, expected) in [
            (Some(ProtocolVersion::V_2024_11_05), json_text.clone()),
            (Some(ProtocolVersion::V_2025_03_26), json_text.clone()),
            (
                Some(ProtocolVersion::V_2025_06_18),
                "[2]{id}:\nINV-1\nINV-2".to_owned(),
            ),
            (
                Some(ProtocolVersion::V_2026_07_28),
                "[2]{id}:\nINV-1\nINV-2".to_owned(),
            ),
            (None, "[2]{id}:\nINV-1\nINV-2".to_owned()),
        ] {
            let mut content = vec![ContentBlock::text(json_text.clone())];
            ClientForm::of(version.as_ref(), None).apply(&mut content, 1..1, &envelope, &[], false);
            assert_eq!(content[0].as_text().unwrap().text, expected, "{version:?}");
        }
    }

    #[test]
    fn anything_but_a_uniform_list_of_flat_records_stays_json() {
        for data in [
            json!({"id": "INV-1"}),
            json!([{"id": "INV-1"}]),
            json!([1, 2]),
            json!([{"id": "INV-1"}, {"id": "INV-2", "extra": 1}]),
            json!([{"id": "INV-1", "n": 1}, {"id": "INV-2", "m": 1}]),
            json!([{"id": "INV-1", "tags": []}, {"id": "INV-2", "tags": []}]),
            json!([{"a,b": 1}, {"a,b": 2}]),
            json!([{}, {}]),
        ] {
            assert_eq!(tabular(&data, None), None, "{data}");
        }
    }
}

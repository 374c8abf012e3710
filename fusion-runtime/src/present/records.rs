//! Lists of flat records (a presenter's views of several models, every field a string,
//! number, boolean or null): the lists most clients read as a table, whose JSON text is then
//! written only for a client that reads JSON.

use serde_json::Value;

/// Whether `data` is a list of two records or more, each with exactly `columns` as its keys
/// and only strings, numbers, booleans and nulls as its values: a list whose JSON text
/// [`json_text`] writes as the records' own serializer does, and that reads as a table.
pub(crate) fn flat_records(data: &Value, columns: &[&str]) -> bool {
    let Some(items) = data.as_array().filter(|items| items.len() >= 2) else {
        return false;
    };
    let Some(first) = items[0].as_object() else {
        return false;
    };
    let flat = |record: &serde_json::Map<String, Value>| {
        record
            .values()
            .all(|value| !value.is_array() && !value.is_object())
    };
    !columns.is_empty()
        && first.len() == columns.len()
        && columns.iter().all(|key| first.contains_key(*key))
        && flat(first)
        // The others against the first: the same keys, in the map's (sorted) order.
        && items[1..].iter().all(|item| {
            item.as_object().is_some_and(|record| {
                record.len() == first.len() && record.keys().eq(first.keys()) && flat(record)
            })
        })
}

/// `data` as compact JSON. A list of [`flat_records`] has each record's keys in `columns`'
/// order (a presenter's fields, the order its view writes them), not `Value`'s sorted order.
pub(crate) fn json_text(data: &Value, columns: &[&str]) -> String {
    if !flat_records(data, columns) {
        return data.to_string();
    }
    let items = data.as_array().map_or(&[][..], Vec::as_slice);
    let mut text = Vec::with_capacity(64 * items.len());
    text.push(b'[');
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            text.push(b',');
        }
        text.push(b'{');
        for (position, key) in columns.iter().enumerate() {
            if position > 0 {
                text.push(b',');
            }
            // Writing JSON into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut text, key);
            text.push(b':');
            let _ = serde_json::to_writer(&mut text, &item[*key]);
        }
        text.push(b'}');
    }
    text.push(b']');
    String::from_utf8(text).unwrap_or_else(|_| data.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;
    use serde_json::json;

    /// A view as `#[presenter]` generates it: its fields in the presenter's order, which is not
    /// the alphabetical order `Value` keeps.
    #[derive(Serialize)]
    struct View {
        id: &'static str,
        total_cents: i64,
        ratio: f64,
        paid: bool,
        memo: Option<&'static str>,
    }

    const COLUMNS: &[&str] = &["id", "total_cents", "ratio", "paid", "memo"];

    #[test]
    fn a_flat_list_is_written_as_its_view_writes_it() {
        let views = [
            View {
                id: "INV-1",
                total_cents: -12_345,
                ratio: 0.1,
                paid: true,
                memo: None,
            },
            View {
                id: "a \"quoted\", \\ line\nbreak \u{1f} é 😀",
                total_cents: i64::MAX,
                ratio: 1e300,
                paid: false,
                memo: Some("</data>"),
            },
        ];
        let data = serde_json::to_value(views.as_slice()).unwrap();
        assert!(flat_records(&data, COLUMNS));
        assert_eq!(
            json_text(&data, COLUMNS),
            serde_json::to_string(views.as_slice()).unwrap()
        );
    }

    #[test]
    fn anything_else_is_value_json() {
        let nested = json!([{"id": "a", "tags": ["x"]}, {"id": "b", "tags": []}]);
        let one = json!([{"id": "a", "n": 1}]);
        let uneven = json!([{"id": "a", "n": 1}, {"id": "b"}]);
        let other_keys = json!([{"id": "a", "n": 1}, {"id": "b", "m": 1}]);
        let not_records = json!([1, 2]);
        let nested_later = json!([{"id": "a", "n": 1}, {"id": "b", "n": {"x": 1}}]);
        let not_records_later = json!([{"id": "a", "n": 1}, 2]);
        for data in [
            &nested,
            &one,
            &uneven,
            &other_keys,
            &not_records,
            &nested_later,
            &not_records_later,
        ] {
            let columns: &[&str] = if data == &nested {
                &["id", "tags"]
            } else {
                &["id", "n"]
            };
            assert!(!flat_records(data, columns), "{data}");
            assert_eq!(json_text(data, columns), data.to_string());
        }
        let flat = json!([{"b": 1, "a": 2}, {"b": 3, "a": 4}]);
        // Without the presenter's order, `Value`'s own.
        assert!(!flat_records(&flat, &[]));
        assert_eq!(json_text(&flat, &[]), r#"[{"a":2,"b":1},{"a":4,"b":3}]"#);
        assert_eq!(
            json_text(&flat, &["b", "a"]),
            r#"[{"b":1,"a":2},{"b":3,"a":4}]"#
        );
    }
}

//! Canonical JSON: object keys sorted (by bytes), arrays in their order, no insignificant
//! whitespace in the compact form and one value per line in the pretty form. Written here
//! rather than by `serde_json`'s own writers, whose key order depends on whether some crate in
//! the build enabled `preserve_order`.

use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// `value` on one line, keys sorted: the text every digest is computed over.
pub(crate) fn compact(value: &Value) -> String {
    let mut out = String::new();
    write(value, None, &mut out);
    out
}

/// `value` with one member or element per line, indented by two spaces, keys sorted.
pub(crate) fn pretty(value: &Value) -> String {
    let mut out = String::new();
    write(value, Some(0), &mut out);
    out.push('\n');
    out
}

/// `sha256:` and the hex digest of `value`'s compact canonical form.
pub(crate) fn digest(value: &Value) -> String {
    let hash = Sha256::digest(compact(value).as_bytes());
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in hash {
        out.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
    }
    out
}

/// `indent`: `None` for the compact form, else the depth of `value`.
fn write(value: &Value, indent: Option<usize>, out: &mut String) {
    match value {
        Value::Array(items) if !items.is_empty() => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                new_line(indent.map(|depth| depth + 1), out);
                write(item, indent.map(|depth| depth + 1), out);
            }
            new_line(indent, out);
            out.push(']');
        }
        Value::Object(members) if !members.is_empty() => {
            let mut keys: Vec<&String> = members.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                new_line(indent.map(|depth| depth + 1), out);
                out.push_str(&string(key));
                out.push(':');
                if indent.is_some() {
                    out.push(' ');
                }
                write(&members[key], indent.map(|depth| depth + 1), out);
            }
            new_line(indent, out);
            out.push('}');
        }
        Value::Array(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
        Value::String(text) => out.push_str(&string(text)),
        // `null`, booleans and numbers have one spelling in serde_json (ryu for floats).
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn new_line(indent: Option<usize>, out: &mut String) {
    if let Some(depth) = indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    }
}

fn string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_and_arrays_keep_their_order() {
        let value =
            json!({"b": [3, 1, 2], "a": {"z": null, "é": "x\ny", "A": 1.5}, "c": {}, "d": []});
        assert_eq!(
            compact(&value),
            r#"{"a":{"A":1.5,"z":null,"é":"x\ny"},"b":[3,1,2],"c":{},"d":[]}"#
        );
        assert_eq!(
            pretty(&value),
            "{\n  \"a\": {\n    \"A\": 1.5,\n    \"z\": null,\n    \"é\": \"x\\ny\"\n  },\n  \"b\": [\n    3,\n    1,\n    2\n  ],\n  \"c\": {},\n  \"d\": []\n}\n"
        );
    }

    #[test]
    fn the_pretty_form_reads_back_as_the_same_value() {
        let value = json!({"x": [{"k": "v\"q\\"}, [], {}], "n": -3, "u": 18446744073709551615u64});
        let back: Value = serde_json::from_str(&pretty(&value)).unwrap();
        assert_eq!(back, value);
        assert_eq!(compact(&back), compact(&value));
    }

    #[test]
    fn a_digest_depends_on_the_value_not_on_key_order() {
        let one: Value = serde_json::from_str(r#"{"a":1,"b":2}"#).unwrap();
        let other: Value = serde_json::from_str(r#"{"b":2,"a":1}"#).unwrap();
        assert_eq!(digest(&one), digest(&other));
        assert_ne!(digest(&one), digest(&json!({"a": 1, "b": 3})));
        // The digest of `{}`, as `sha256sum` computes it.
        assert_eq!(
            digest(&json!({})),
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }
}

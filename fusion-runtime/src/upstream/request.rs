//! What a proxy call sends: the path with its parameters encoded, the query and the body (JSON,
//! a form, multipart or raw bytes), all built from typed arguments, and the headers the tool
//! itself fixes. Nothing of it comes from anywhere else: the base URL, the credentials and the
//! limits are the upstream's configuration.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::{Map, Value};

use super::route::{
    HttpMethod, HttpRoute, RouteSegment, SegmentError, encode_part, encode_segment,
};
use crate::error::{ToolError, codes, echo};

/// A value that can fill a path segment: strings, integers, booleans, characters and UUIDs.
/// Anything else (an `Option`, a list, a struct, a float) would make the path ambiguous.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a path segment",
    label = "a path parameter must be a string, an integer, a boolean, a `char` or a `Uuid`",
    note = "an optional or structured value cannot fill a path segment: take it as a query or body argument instead"
)]
pub trait PathSegment {
    /// The segment's text, before encoding.
    fn segment_text(&self) -> Cow<'_, str>;
}

impl PathSegment for str {
    fn segment_text(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}
impl PathSegment for String {
    fn segment_text(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}
impl<T: PathSegment + ?Sized> PathSegment for &T {
    fn segment_text(&self) -> Cow<'_, str> {
        (**self).segment_text()
    }
}
impl PathSegment for uuid::Uuid {
    fn segment_text(&self) -> Cow<'_, str> {
        Cow::Owned(self.to_string())
    }
}
macro_rules! display_segments {
    ($($ty:ty),*) => {$(
        impl PathSegment for $ty {
            fn segment_text(&self) -> Cow<'_, str> {
                Cow::Owned(self.to_string())
            }
        }
    )*};
}
display_segments!(
    u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, bool, char
);

/// A value that is a set of named upstream fields: a fillable profile of a model declared
/// `#[model(upstream)]` (generated), whose fields go to the query or the body under their
/// upstream names. A guarded field is never among them: profiles never hold one.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be sent to an upstream",
    note = "profiles (`Create<M>`, `Update<M>`, `Filter<M>`) of a model declared `#[model(upstream, …)]` can"
)]
pub trait UpstreamFields {
    /// Appends the fields that were given, as `(upstream name, value)`; a field left out is
    /// absent, a field sent as `null` (an `update` clearing a value) is `Value::Null`.
    fn upstream_fields(
        &self,
        out: &mut Vec<(&'static str, Value)>,
    ) -> Result<(), serde_json::Error>;
}

/// One call to an upstream: built from the route and the arguments, sent by an
/// `HttpUpstream` (feature `http-client`).
#[derive(Debug, Clone)]
pub struct UpstreamRequest {
    method: HttpMethod,
    template: Cow<'static, str>,
    path: String,
    query: Vec<(String, String)>,
    body: Option<Map<String, Value>>,
    encoding: BodyEncoding,
    /// Body fields sent as file parts of a multipart body, their values base64 text.
    file_fields: Vec<Cow<'static, str>>,
    /// A body that is not a set of fields: a JSON array or scalar, or bytes.
    whole: Option<WholeBody>,
    headers: Vec<(Cow<'static, str>, String)>,
}

/// How the fields of a request's body are written (see [`UpstreamRequest::encode_body`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BodyEncoding {
    /// A JSON object (`application/json`), the default.
    #[default]
    Json,
    /// `application/x-www-form-urlencoded`: `name=value` pairs; a list repeats its name, an
    /// object is its JSON text, `null` (a value cleared) is empty.
    Form,
    /// `multipart/form-data`: a text part per field (as in a form), and a file part per field
    /// named with [`UpstreamRequest::file_fields`].
    Multipart,
}

/// A body sent whole rather than as fields.
#[derive(Debug, Clone)]
enum WholeBody {
    Json(Value),
    Bytes {
        content_type: Cow<'static, str>,
        bytes: Vec<u8>,
    },
}

/// A request's body as it goes on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedBody {
    /// The `Content-Type` header (with the boundary of a multipart body).
    pub content_type: String,
    /// The bytes.
    pub bytes: Vec<u8>,
}

impl UpstreamRequest {
    /// An empty request: `template` (the route as written) names it in logs; the path is built
    /// with [`literal`](Self::literal) and [`param`](Self::param), in order.
    pub fn new(method: HttpMethod, template: impl Into<Cow<'static, str>>) -> Self {
        UpstreamRequest {
            method,
            template: template.into(),
            path: String::new(),
            query: Vec::new(),
            body: method.has_body().then(Map::new),
            encoding: BodyEncoding::Json,
            file_fields: Vec::new(),
            whole: None,
            headers: Vec::new(),
        }
    }

    /// The request of `route` with its path parameters and the rest of the arguments taken
    /// from `arguments`, a JSON object (used by [`ToolSpec::http`](crate::ToolSpec::http)):
    /// path parameters by name, every other non-null field to the query (`GET`, `HEAD`,
    /// `DELETE`) or the body (`POST`, `PUT`, `PATCH`).
    pub fn from_arguments(route: &HttpRoute, arguments: Value) -> Result<Self, ToolError> {
        let mut arguments = match arguments {
            Value::Object(object) => object,
            Value::Null => Map::new(),
            other => {
                return Err(ToolError::internal_message(format!(
                    "the arguments of an upstream call are not an object: {other}"
                )));
            }
        };
        let mut request = UpstreamRequest::new(route.method(), route.to_string());
        for segment in route.segments() {
            match segment {
                RouteSegment::Literal(text) => request.literal(text),
                RouteSegment::Param {
                    prefix,
                    name,
                    suffix,
                } => {
                    let text = match arguments.remove(name.as_ref()) {
                        Some(Value::String(text)) => text,
                        Some(value @ (Value::Number(_) | Value::Bool(_))) => value.to_string(),
                        Some(other) => {
                            return Err(ToolError::internal_message(format!(
                                "the path parameter `{name}` is not a string, number or boolean: {other}"
                            )));
                        }
                        None => {
                            return Err(ToolError::internal_message(format!(
                                "no argument fills the path parameter `{name}`"
                            )));
                        }
                    };
                    request.param_between(prefix, name, &text, suffix)?;
                }
            }
        }
        for (name, value) in arguments {
            request.push(Placement::Default, name, value);
        }
        Ok(request)
    }

    /// Appends a literal segment (already valid in a path).
    pub fn literal(&mut self, text: &str) {
        self.path.push('/');
        self.path.push_str(text);
    }

    /// Appends the segment of path parameter `name`, percent-encoded so that it stays one
    /// segment. An empty value and `.`/`..` are refused with `VALIDATION_ERROR`.
    pub fn param<T: PathSegment + ?Sized>(
        &mut self,
        name: &str,
        value: &T,
    ) -> Result<(), ToolError> {
        self.param_between("", name, value, "")
    }

    /// Appends a segment made of `prefix`, the value of path parameter `name` percent-encoded
    /// (it stays inside the segment) and `suffix` (`{sid}.json`). An empty value is refused
    /// with `VALIDATION_ERROR`, and so are `.` and `..` when nothing stands around them.
    pub fn param_between<T: PathSegment + ?Sized>(
        &mut self,
        prefix: &str,
        name: &str,
        value: &T,
        suffix: &str,
    ) -> Result<(), ToolError> {
        let text = value.segment_text();
        let encoded = if prefix.is_empty() && suffix.is_empty() {
            encode_segment(&text)
        } else if text.is_empty() {
            Err(SegmentError::Empty)
        } else {
            // `..` next to other text is not a dot segment: `...json` is a file name.
            Ok(encode_part(&text))
        };
        match encoded {
            Ok(encoded) => {
                self.path.push('/');
                self.path.push_str(prefix);
                self.path.push_str(&encoded);
                self.path.push_str(suffix);
                Ok(())
            }
            Err(error) => {
                let expected = match error {
                    SegmentError::Empty => "a non-empty value",
                    SegmentError::DotSegment => "a value other than `.` or `..`",
                };
                Err(ToolError::new(
                    codes::VALIDATION_ERROR,
                    format!(
                        "`{name}` cannot be `{}`: {expected} is expected.",
                        echo(&text, 16)
                    ),
                )
                .with_recovery(format!("Call again with a real `{name}`."))
                .with_details(serde_json::json!({
                    "field": name,
                    "received": echo(&text, 16),
                    "expected": expected,
                })))
            }
        }
    }

    /// Adds a plain argument under its upstream name: to the query (`GET`, `HEAD`, `DELETE`) or
    /// the body (`POST`, `PUT`, `PATCH`), or where `placement` says. `None` is left out.
    pub fn arg<T: Serialize + ?Sized>(
        &mut self,
        placement: Placement,
        name: &str,
        value: &T,
    ) -> Result<(), ToolError> {
        let value = serde_json::to_value(value).map_err(ToolError::internal)?;
        self.push(placement, name.to_owned(), value);
        Ok(())
    }

    /// Adds the fields of a profile under their upstream names, as [`arg`](Self::arg) does.
    pub fn group<G: UpstreamFields + ?Sized>(
        &mut self,
        placement: Placement,
        group: &G,
    ) -> Result<(), ToolError> {
        let mut fields = Vec::new();
        group
            .upstream_fields(&mut fields)
            .map_err(ToolError::internal)?;
        for (name, value) in fields {
            // A profile field sent as `null` clears the value: kept in a body.
            if value.is_null() && self.goes_to_body(placement) {
                self.body
                    .get_or_insert_with(Map::new)
                    .insert(name.to_owned(), Value::Null);
            } else {
                self.push(placement, name.to_owned(), value);
            }
        }
        Ok(())
    }

    fn goes_to_body(&self, placement: Placement) -> bool {
        match placement {
            Placement::Default => self.method.has_body(),
            Placement::Query => false,
            Placement::Body => true,
        }
    }

    fn push(&mut self, placement: Placement, name: String, value: Value) {
        if value.is_null() {
            return;
        }
        if self.goes_to_body(placement) {
            self.body.get_or_insert_with(Map::new).insert(name, value);
            return;
        }
        match value {
            Value::Array(items) => {
                for item in items {
                    if !item.is_null() {
                        self.query.push((name.clone(), query_text(item)));
                    }
                }
            }
            other => self.query.push((name, query_text(other))),
        }
    }

    /// Writes the body's fields as `encoding` says (JSON by default).
    pub fn set_encoding(&mut self, encoding: BodyEncoding) {
        self.encoding = encoding;
    }

    /// In a multipart body, the fields with these upstream names are files: their values are
    /// base64 text (a list of them, several files), sent decoded as file parts named after the
    /// field. A value that is not base64 is refused with `VALIDATION_ERROR` when the body is
    /// encoded.
    pub fn file_fields(&mut self, names: &[&'static str]) {
        self.file_fields
            .extend(names.iter().map(|name| Cow::Borrowed(*name)));
    }

    /// Sends `value` as the whole JSON body (an array or a scalar the upstream takes as it is),
    /// instead of an object of fields.
    pub fn json_body<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), ToolError> {
        let value = serde_json::to_value(value).map_err(ToolError::internal)?;
        self.whole = Some(WholeBody::Json(value));
        Ok(())
    }

    /// Sends `bytes` as the whole body, with this `Content-Type`.
    pub fn bytes_body(&mut self, content_type: impl Into<Cow<'static, str>>, bytes: Vec<u8>) {
        self.whole = Some(WholeBody::Bytes {
            content_type: content_type.into(),
            bytes,
        });
    }

    /// Sends the bytes that the argument `name` holds as base64 text as the whole body, with
    /// this `Content-Type` (how an agent passes a file). Text that is not base64 is refused with
    /// `VALIDATION_ERROR`.
    pub fn base64_body(
        &mut self,
        name: &str,
        content_type: impl Into<Cow<'static, str>>,
        text: &str,
    ) -> Result<(), ToolError> {
        let bytes = decode_base64(name, text)?;
        self.bytes_body(content_type, bytes);
        Ok(())
    }

    /// Sends this header with the call (a value the API fixes for the operation, such as
    /// `X-Amz-Target`), on top of the upstream's own headers. A name or value that cannot be
    /// a header is an internal error: tools fix them, agents never do.
    pub fn header(
        &mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<String>,
    ) -> Result<(), ToolError> {
        let name = name.into();
        let value = value.into();
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if name.is_empty() || !name.chars().all(token) {
            return Err(ToolError::internal_message(format!(
                "`{name}` is not a header name"
            )));
        }
        if value.chars().any(|c| c.is_control() && c != '\t') {
            return Err(ToolError::internal_message(format!(
                "the value of header `{name}` holds a control character"
            )));
        }
        self.headers.push((name, value));
        Ok(())
    }

    /// The headers this call adds, in order.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.headers
            .iter()
            .map(|(name, value)| (name.as_ref(), value.as_str()))
    }

    /// How the body's fields are written.
    pub fn encoding(&self) -> BodyEncoding {
        self.encoding
    }

    /// The body as it goes on the wire, `None` when the call has none: the whole body when one
    /// was given, else the fields in the request's [`BodyEncoding`].
    pub fn encode_body(&self) -> Result<Option<EncodedBody>, ToolError> {
        match &self.whole {
            Some(WholeBody::Json(value)) => {
                return Ok(Some(EncodedBody {
                    content_type: "application/json".to_owned(),
                    bytes: serde_json::to_vec(value).map_err(ToolError::internal)?,
                }));
            }
            Some(WholeBody::Bytes {
                content_type,
                bytes,
            }) => {
                return Ok(Some(EncodedBody {
                    content_type: content_type.clone().into_owned(),
                    bytes: bytes.clone(),
                }));
            }
            None => {}
        }
        let Some(fields) = &self.body else {
            return Ok(None);
        };
        let encoded = match self.encoding {
            BodyEncoding::Json => EncodedBody {
                content_type: "application/json".to_owned(),
                bytes: serde_json::to_vec(fields).map_err(ToolError::internal)?,
            },
            BodyEncoding::Form => {
                let mut form = String::new();
                for (name, value) in fields {
                    for text in field_texts(value) {
                        if !form.is_empty() {
                            form.push('&');
                        }
                        form.push_str(&encode_form(name));
                        form.push('=');
                        form.push_str(&encode_form(&text));
                    }
                }
                EncodedBody {
                    content_type: "application/x-www-form-urlencoded".to_owned(),
                    bytes: form.into_bytes(),
                }
            }
            BodyEncoding::Multipart => self.multipart(fields)?,
        };
        Ok(Some(encoded))
    }

    fn multipart(&self, fields: &Map<String, Value>) -> Result<EncodedBody, ToolError> {
        // (name, file bytes or text)
        let mut parts: Vec<(&str, Result<Vec<u8>, String>)> = Vec::new();
        for (name, value) in fields {
            if self.file_fields.iter().any(|file| file == name) {
                let items = match value {
                    Value::Array(items) => items.as_slice(),
                    Value::Null => &[],
                    other => std::slice::from_ref(other),
                };
                for item in items {
                    let Value::String(text) = item else {
                        return Err(ToolError::new(
                            codes::VALIDATION_ERROR,
                            format!("`{name}` is a file: base64 text is expected."),
                        )
                        .with_recovery(format!("Call again with `{name}` as base64 text.")));
                    };
                    parts.push((name, Ok(decode_base64(name, text)?)));
                }
            } else {
                for text in field_texts(value) {
                    parts.push((name, Err(text)));
                }
            }
        }
        // A boundary that none of the parts holds.
        let boundary = loop {
            let boundary = format!("fusion-{}", uuid::Uuid::new_v4().simple());
            let needle = boundary.as_bytes();
            let clashes = parts.iter().any(|(_, part)| {
                let bytes = match part {
                    Ok(bytes) => bytes.as_slice(),
                    Err(text) => text.as_bytes(),
                };
                bytes.windows(needle.len()).any(|window| window == needle)
            });
            if !clashes {
                break boundary;
            }
        };
        let mut bytes = Vec::new();
        for (name, part) in &parts {
            let name = quoted_name(name);
            bytes.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
            match part {
                Ok(file) => {
                    bytes.extend_from_slice(
                        format!(
                            "Content-Disposition: form-data; name=\"{name}\"; filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
                        )
                        .as_bytes(),
                    );
                    bytes.extend_from_slice(file);
                }
                Err(text) => {
                    bytes.extend_from_slice(
                        format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n")
                            .as_bytes(),
                    );
                    bytes.extend_from_slice(text.as_bytes());
                }
            }
            bytes.extend_from_slice(b"\r\n");
        }
        bytes.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        Ok(EncodedBody {
            content_type: format!("multipart/form-data; boundary={boundary}"),
            bytes,
        })
    }

    /// The method.
    pub fn method(&self) -> HttpMethod {
        self.method
    }

    /// The route as written, `GET /invoices/{id}`.
    pub fn template(&self) -> &str {
        &self.template
    }

    /// The encoded path, `/invoices/..%2Fadmin`, relative to the upstream's base URL.
    pub fn path(&self) -> &str {
        if self.path.is_empty() {
            "/"
        } else {
            &self.path
        }
    }

    /// The query pairs, before form encoding.
    pub fn query(&self) -> &[(String, String)] {
        &self.query
    }

    /// The body's fields (`POST`, `PUT`, `PATCH`, or when an argument was placed in the body),
    /// written as [`encoding`](Self::encoding) says.
    pub fn body(&self) -> Option<&Map<String, Value>> {
        self.body.as_ref()
    }
}

fn query_text(value: Value) -> String {
    match value {
        Value::String(text) => text,
        // Numbers and booleans as JSON writes them; objects as JSON text.
        other => other.to_string(),
    }
}

/// A body field's values in a form or a multipart body: a list gives one per item, `null` (a
/// value cleared) an empty one.
fn field_texts(value: &Value) -> Vec<String> {
    match value {
        Value::Null => vec![String::new()],
        Value::Array(items) => items
            .iter()
            .filter(|item| !item.is_null())
            .map(|item| query_text(item.clone()))
            .collect(),
        other => vec![query_text(other.clone())],
    }
}

/// `application/x-www-form-urlencoded` text: unreserved characters as they are, spaces as `+`,
/// everything else percent-encoded.
pub(crate) fn encode_form(text: &str) -> String {
    const FORM: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'*')
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b' ');
    percent_encoding::utf8_percent_encode(text, FORM)
        .to_string()
        .replace(' ', "+")
}

/// A multipart part's name between quotes: `"`, CR and LF percent-encoded, as browsers do.
fn quoted_name(name: &str) -> String {
    name.replace('"', "%22")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// The bytes of base64 text (standard or URL-safe alphabet, padded or not); anything else is a
/// `VALIDATION_ERROR` naming the argument.
fn decode_base64(name: &str, text: &str) -> Result<Vec<u8>, ToolError> {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let trimmed = text.trim().trim_end_matches('=');
    STANDARD_NO_PAD
        .decode(trimmed)
        .or_else(|_| URL_SAFE_NO_PAD.decode(trimmed))
        .map_err(|_| {
            ToolError::new(
                codes::VALIDATION_ERROR,
                format!("`{name}` is not base64: a file is passed as base64 text."),
            )
            .with_recovery(format!(
                "Call again with the file's bytes in `{name}` as base64."
            ))
            .with_details(serde_json::json!({
                "field": name,
                "expected": "base64 text",
            }))
        })
}

/// Where an argument goes: by the method (`Default`), or always in the query or the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The query for `GET`, `HEAD` and `DELETE`, the body for `POST`, `PUT` and `PATCH`.
    Default,
    /// The query string.
    Query,
    /// The body.
    Body,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_fill_path_query_and_body() {
        let route = HttpRoute::parse("GET /invoices/{id}").unwrap();
        let request = UpstreamRequest::from_arguments(
            &route,
            serde_json::json!({"id": "../admin", "status": "open", "tags": ["a", "b"], "limit": null}),
        )
        .unwrap();
        assert_eq!(request.path(), "/invoices/..%2Fadmin");
        assert_eq!(
            request.query(),
            [
                ("status".to_owned(), "open".to_owned()),
                ("tags".to_owned(), "a".to_owned()),
                ("tags".to_owned(), "b".to_owned())
            ]
        );
        assert!(request.body().is_none());

        let route = HttpRoute::parse("POST /invoices/{id}/void").unwrap();
        let request =
            UpstreamRequest::from_arguments(&route, serde_json::json!({"id": 7, "reason": "dup"}))
                .unwrap();
        assert_eq!(request.path(), "/invoices/7/void");
        assert_eq!(request.body().unwrap()["reason"], "dup");

        let route = HttpRoute::parse("GET /Calls/{sid}.json").unwrap();
        for (sid, path) in [
            ("CA1", "/Calls/CA1.json"),
            ("..", "/Calls/...json"),
            ("../x", "/Calls/..%2Fx.json"),
            ("a?b", "/Calls/a%3Fb.json"),
        ] {
            let request =
                UpstreamRequest::from_arguments(&route, serde_json::json!({ "sid": sid })).unwrap();
            assert_eq!(request.path(), path);
        }
        let error =
            UpstreamRequest::from_arguments(&route, serde_json::json!({"sid": ""})).unwrap_err();
        assert_eq!(error.code(), codes::VALIDATION_ERROR);
    }

    fn post(fields: Value) -> UpstreamRequest {
        let route = HttpRoute::parse("POST /Calls.json").unwrap();
        UpstreamRequest::from_arguments(&route, fields).unwrap()
    }

    #[test]
    fn a_form_body_repeats_lists_encodes_text_and_empties_cleared_values() {
        let mut request = post(serde_json::json!({
            "To": "+1 555 0100", "Tags": ["a&b", "c=d"], "Record": true, "Meta": {"k": 1}
        }));
        request.set_encoding(BodyEncoding::Form);
        request
            .body
            .as_mut()
            .unwrap()
            .insert("Note".into(), Value::Null);
        let body = request.encode_body().unwrap().unwrap();
        assert_eq!(body.content_type, "application/x-www-form-urlencoded");
        assert_eq!(
            String::from_utf8(body.bytes).unwrap(),
            "Meta=%7B%22k%22%3A1%7D&Note=&Record=true&Tags=a%26b&Tags=c%3Dd&To=%2B1+555+0100"
        );
    }

    #[test]
    fn a_multipart_body_has_text_parts_and_decoded_file_parts() {
        let mut request = post(serde_json::json!({
            "purpose": "fine-tune", "file": "aGVsbG8=", "n": 2, "weird\"name": "x"
        }));
        request.set_encoding(BodyEncoding::Multipart);
        request.file_fields(&["file"]);
        let body = request.encode_body().unwrap().unwrap();
        let boundary = body
            .content_type
            .strip_prefix("multipart/form-data; boundary=")
            .unwrap()
            .to_owned();
        let text = String::from_utf8(body.bytes).unwrap();
        let expected = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"file\"\r\nContent-Type: application/octet-stream\r\n\r\nhello\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"n\"\r\n\r\n2\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nfine-tune\r\n\
             --{boundary}\r\nContent-Disposition: form-data; name=\"weird%22name\"\r\n\r\nx\r\n\
             --{boundary}--\r\n"
        );
        assert_eq!(text, expected);

        let mut request = post(serde_json::json!({"file": "not base64!"}));
        request.set_encoding(BodyEncoding::Multipart);
        request.file_fields(&["file"]);
        let error = request.encode_body().unwrap_err();
        assert_eq!(error.code(), codes::VALIDATION_ERROR);
        assert!(
            error.message().contains("`file` is not base64"),
            "{}",
            error.message()
        );
    }

    #[test]
    fn whole_bodies_replace_the_fields() {
        let mut request = post(serde_json::json!({"ignored": 1}));
        request.json_body(&["a", "b"]).unwrap();
        let body = request.encode_body().unwrap().unwrap();
        assert_eq!(body.content_type, "application/json");
        assert_eq!(body.bytes, br#"["a","b"]"#);

        request.base64_body("body", "image/png", "iVBORw").unwrap();
        let body = request.encode_body().unwrap().unwrap();
        assert_eq!(body.content_type, "image/png");
        assert_eq!(body.bytes, [0x89, b'P', b'N', b'G']);
        let error = request.base64_body("body", "image/png", "%%").unwrap_err();
        assert_eq!(error.code(), codes::VALIDATION_ERROR);

        let get = UpstreamRequest::new(HttpMethod::Get, "GET /x");
        assert_eq!(get.encode_body().unwrap(), None);
    }

    #[test]
    fn headers_a_tool_fixes_must_be_headers() {
        let mut request = post(Value::Null);
        request
            .header("X-Amz-Target", "CodeStar_20191201.ListHosts")
            .unwrap();
        assert_eq!(
            request.headers().collect::<Vec<_>>(),
            [("X-Amz-Target", "CodeStar_20191201.ListHosts")]
        );
        assert!(request.header("Bad Name", "x").is_err());
        assert!(request.header("X-Ok", "a\r\nInjected: 1").is_err());
        assert_eq!(request.headers().count(), 1);
    }

    #[test]
    fn dot_and_empty_segments_are_validation_errors() {
        let route = HttpRoute::parse("GET /invoices/{id}").unwrap();
        for id in ["..", ".", ""] {
            let error = UpstreamRequest::from_arguments(&route, serde_json::json!({ "id": id }))
                .unwrap_err();
            assert_eq!(error.code(), codes::VALIDATION_ERROR, "{id}");
        }
    }
}

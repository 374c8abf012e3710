//! What a proxy call sends: the path with its parameters encoded, the query and the JSON body,
//! all built from typed arguments. Nothing of it comes from anywhere else: the base URL, the
//! headers and the credentials are the upstream's configuration.

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

    /// The JSON body (`POST`, `PUT`, `PATCH`, or when an argument was placed in it).
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

/// Where an argument goes: by the method (`Default`), or always in the query or the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The query for `GET`, `HEAD` and `DELETE`, the JSON body for `POST`, `PUT` and `PATCH`.
    Default,
    /// The query string.
    Query,
    /// The JSON body.
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

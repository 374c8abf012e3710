//! `GET /invoices/{id}`: an upstream route, parsed once, and the encoding of path segments.

use std::borrow::Cow;
use std::fmt;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// The HTTP method of an upstream route: `GET`, `HEAD`, `POST`, `PUT`, `PATCH` or `DELETE`
/// (the same type the route syntax is checked with at compile time).
pub use fusion_names::route::Method as HttpMethod;

/// One segment of a route's path: literal text or a parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteSegment {
    /// Text written as it is (already valid in a path).
    Literal(Cow<'static, str>),
    /// `{name}`, filled from the argument `name`, percent-encoded so that it stays inside its
    /// segment; literal text may stand around it in the segment (`{sid}.json`, `v{major}`).
    Param {
        /// Literal text before the parameter in its segment (usually empty).
        prefix: Cow<'static, str>,
        /// The parameter's (and its argument's) name.
        name: Cow<'static, str>,
        /// Literal text after the parameter in its segment (`.json`; usually empty).
        suffix: Cow<'static, str>,
    },
}

/// An upstream route: a method and a path template with at most one parameter per segment,
/// `GET /invoices/{id}/lines`, `GET /Calls/{sid}.json`. Parsed and checked once (by `#[tool(http = …)]` at compile
/// time, by [`ToolSpec::http`](crate::ToolSpec::http) when the server is built).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRoute {
    method: HttpMethod,
    segments: Vec<RouteSegment>,
}

impl HttpRoute {
    /// Parses `METHOD /path/{param}`. A segment holds at most one parameter (`/a/{id}`, or
    /// with literal text around it, `/a/{id}.json`), named like a Rust identifier, and a
    /// parameter appears once; literal text holds only characters that need no encoding, and
    /// a literal segment is never `.` or `..`; there is no query string or fragment (the query
    /// comes from arguments).
    ///
    /// ```
    /// use fusion_runtime::upstream::HttpRoute;
    ///
    /// let route = HttpRoute::parse("GET /invoices/{id}").unwrap();
    /// assert_eq!(route.params().collect::<Vec<_>>(), ["id"]);
    /// assert!(HttpRoute::parse("GET /invoices/{id}?x=1").is_err());
    /// assert!(HttpRoute::parse("GET /calls/{sid}.json").is_ok());
    /// assert!(HttpRoute::parse("GET /invoices/{a}-{b}").is_err());
    /// ```
    pub fn parse(template: &str) -> Result<Self, String> {
        let route = fusion_names::route::parse(template)?;
        let segments = route
            .segments
            .into_iter()
            .map(|segment| match segment {
                fusion_names::route::Segment::Literal(text) => RouteSegment::Literal(text.into()),
                fusion_names::route::Segment::Param {
                    prefix,
                    name,
                    suffix,
                } => RouteSegment::Param {
                    prefix: prefix.into(),
                    name: name.into(),
                    suffix: suffix.into(),
                },
            })
            .collect();
        Ok(HttpRoute {
            method: route.method,
            segments,
        })
    }

    /// The method.
    pub fn method(&self) -> HttpMethod {
        self.method
    }

    /// The path's segments.
    pub fn segments(&self) -> &[RouteSegment] {
        &self.segments
    }

    /// The names of the path parameters, in order.
    pub fn params(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().filter_map(|segment| match segment {
            RouteSegment::Param { name, .. } => Some(name.as_ref()),
            RouteSegment::Literal(_) => None,
        })
    }
}

impl fmt::Display for HttpRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ", self.method)?;
        if self.segments.is_empty() {
            return f.write_str("/");
        }
        for segment in &self.segments {
            match segment {
                RouteSegment::Literal(text) => write!(f, "/{text}")?,
                RouteSegment::Param {
                    prefix,
                    name,
                    suffix,
                } => write!(f, "/{prefix}{{{name}}}{suffix}")?,
            }
        }
        Ok(())
    }
}

/// Everything but the unreserved characters of RFC 3986 (`A-Z a-z 0-9 - . _ ~`) is encoded:
/// `/`, `?`, `#`, `%`, `;`, spaces and control characters never reach the path as such.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Why a value cannot fill a path segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegmentError {
    /// An empty value would change the route (`/invoices/` instead of `/invoices/7`).
    Empty,
    /// `.` or `..` are dot segments: URL parsers resolve them even when percent-encoded, so
    /// they are refused rather than encoded.
    DotSegment,
}

/// Encodes one path segment: the value stays ONE segment, whatever it holds (`../admin`
/// becomes `..%2Fadmin`). Empty values and `.`/`..` are refused.
///
/// ```
/// use fusion_runtime::upstream::encode_segment;
///
/// assert_eq!(encode_segment("../admin").unwrap(), "..%2Fadmin");
/// assert_eq!(encode_segment("a b?c#d").unwrap(), "a%20b%3Fc%23d");
/// assert!(encode_segment("..").is_err());
/// assert!(encode_segment("").is_err());
/// ```
pub fn encode_segment(value: &str) -> Result<String, SegmentError> {
    match value {
        "" => Err(SegmentError::Empty),
        "." | ".." => Err(SegmentError::DotSegment),
        _ => Ok(encode_part(value)),
    }
}

/// Percent-encodes a value that goes inside a segment next to literal text (`{sid}.json`):
/// nothing in it can end the segment.
pub(crate) fn encode_part(value: &str) -> String {
    utf8_percent_encode(value, SEGMENT).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_parse_and_print() {
        let route = HttpRoute::parse("DELETE /v1/invoices/{id}/lines/{line_no}").unwrap();
        assert_eq!(route.method(), HttpMethod::Delete);
        assert_eq!(route.params().collect::<Vec<_>>(), ["id", "line_no"]);
        assert_eq!(
            route.to_string(),
            "DELETE /v1/invoices/{id}/lines/{line_no}"
        );
        assert_eq!(HttpRoute::parse("GET /").unwrap().to_string(), "GET /");
        let route = HttpRoute::parse("GET /Calls/{sid}.json/v{major}").unwrap();
        assert_eq!(route.params().collect::<Vec<_>>(), ["sid", "major"]);
        assert_eq!(route.to_string(), "GET /Calls/{sid}.json/v{major}");
    }

    #[test]
    fn bad_routes_are_refused() {
        for bad in [
            "GET",
            "get /a",
            "TRACE /a",
            "GET a",
            "GET /a/{id",
            "GET /a/{}",
            "GET /a/{1x}",
            "GET /a/{x}{id}",
            "GET /a/{x}-{id}",
            "GET /a/}x{",
            "GET /a/x{id",
            "GET /a/{id}%2F",
            "GET /a/{id}/{id}",
            "GET /a//b",
            "GET /a/",
            "GET /a/../b",
            "GET /a?x=1",
            "GET /a#f",
            "GET /a%2Fb",
            "GET /a b",
        ] {
            assert!(HttpRoute::parse(bad).is_err(), "{bad} was accepted");
        }
        let error = HttpRoute::parse("GET /a/{id}?expand=lines").unwrap_err();
        assert!(
            error.contains("a query string (`?expand=lines`)"),
            "{error}"
        );
    }

    #[test]
    fn every_value_stays_one_segment() {
        for (value, encoded) in [
            ("../admin", "..%2Fadmin"),
            ("a/b", "a%2Fb"),
            ("x?y=1", "x%3Fy%3D1"),
            ("x#y", "x%23y"),
            ("%2e%2e", "%252e%252e"),
            ("...", "..."),
            ("é", "%C3%A9"),
            ("a\r\nb", "a%0D%0Ab"),
        ] {
            assert_eq!(encode_segment(value).unwrap(), encoded);
        }
        assert_eq!(encode_segment("."), Err(SegmentError::DotSegment));
        assert_eq!(encode_segment(".."), Err(SegmentError::DotSegment));
        assert_eq!(encode_segment(""), Err(SegmentError::Empty));
    }
}

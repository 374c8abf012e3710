//! `GET /invoices/{id}`: the syntax of an upstream route, checked by `#[tool(http = …)]` at
//! compile time and by `HttpRoute::parse` when a server is built.

use std::fmt;

/// The HTTP method of a route (`fusion::upstream::HttpMethod`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `GET`
    Get,
    /// `HEAD`
    Head,
    /// `POST`
    Post,
    /// `PUT`
    Put,
    /// `PATCH`
    Patch,
    /// `DELETE`
    Delete,
}

impl Method {
    /// The method's name, upper case.
    pub const fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }

    /// Whether the arguments that are not path parameters go in a JSON body (`POST`, `PUT`,
    /// `PATCH`) rather than in the query string.
    pub const fn has_body(self) -> bool {
        matches!(self, Method::Post | Method::Put | Method::Patch)
    }

    /// The method called `name` (upper case), if it is one a route may use.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "PATCH" => Method::Patch,
            "DELETE" => Method::Delete,
            _ => return None,
        })
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One segment of a route's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// Text written as it is (already valid in a path).
    Literal(String),
    /// `{name}`, with literal text around it in its segment (`{sid}.json`), usually none.
    Param {
        /// Literal text before the parameter.
        prefix: String,
        /// The parameter's (and its argument's) name.
        name: String,
        /// Literal text after the parameter.
        suffix: String,
    },
}

/// A parsed route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Its method.
    pub method: Method,
    /// Its path's segments; none for `/`.
    pub segments: Vec<Segment>,
}

/// Parses `METHOD /path`: at most one parameter per segment (`{id}`, or with literal text
/// around it, `{sid}.json`), named like an argument, each once; literal text needs no encoding
/// and a literal segment is never `.` or `..`; no query string or fragment (the arguments that
/// are not path parameters fill the query or the body).
pub fn parse(template: &str) -> Result<Route, String> {
    let (method, path) = template.trim().split_once(' ').ok_or_else(|| {
        format!("`{template}` is not `METHOD /path`, such as `GET /invoices/{{id}}`")
    })?;
    let method = Method::parse(method).ok_or_else(|| {
        format!(
            "`{method}` is not an HTTP method a route may use: GET, HEAD, POST, PUT, PATCH or DELETE (upper case)"
        )
    })?;
    let path = path.trim();
    let Some(rest) = path.strip_prefix('/') else {
        return Err(format!("the path `{path}` must start with `/`"));
    };
    if let Some(at) = path.find(['?', '#']) {
        let what = if path[at..].starts_with('?') {
            "a query string"
        } else {
            "a fragment"
        };
        return Err(format!(
            "`{path}` has {what} (`{}`): a route is a path only; the arguments that are not path parameters fill the query",
            &path[at..]
        ));
    }
    let mut segments: Vec<Segment> = Vec::new();
    if !rest.is_empty() {
        for text in rest.split('/') {
            let segment = parse_segment(text, path)?;
            if let Segment::Param { name, .. } = &segment
                && segments
                    .iter()
                    .any(|other| matches!(other, Segment::Param { name: seen, .. } if seen == name))
            {
                return Err(format!("the path parameter `{{{name}}}` appears twice"));
            }
            segments.push(segment);
        }
    }
    Ok(Route { method, segments })
}

fn parse_segment(segment: &str, path: &str) -> Result<Segment, String> {
    let opens = segment.matches('{').count();
    let closes = segment.matches('}').count();
    if opens > 1 || closes > 1 {
        return Err(format!(
            "`{segment}` in `{path}`: a segment holds at most one path parameter"
        ));
    }
    if let (Some(open), Some(close)) = (segment.find('{'), segment.find('}'))
        && open < close
    {
        let (prefix, name, suffix) = (
            &segment[..open],
            &segment[open + 1..close],
            &segment[close + 1..],
        );
        let valid = name
            .chars()
            .next()
            .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!(
                "`{{{name}}}` in `{path}`: a path parameter is named like an argument (letters, digits and `_`)"
            ));
        }
        for text in [prefix, suffix] {
            check_literal(text, segment, path)?;
        }
        return Ok(Segment::Param {
            prefix: prefix.to_owned(),
            name: name.to_owned(),
            suffix: suffix.to_owned(),
        });
    }
    if opens + closes > 0 {
        return Err(format!(
            "`{segment}` in `{path}`: a path parameter is written `{{name}}`"
        ));
    }
    if segment.is_empty() {
        return Err(format!(
            "`{path}` has an empty segment (`//` or a trailing `/`)"
        ));
    }
    if segment == "." || segment == ".." {
        return Err(format!("`{path}` has a `{segment}` segment"));
    }
    check_literal(segment, segment, path)?;
    Ok(Segment::Literal(segment.to_owned()))
}

/// Literal text of a route holds only characters that need no encoding in a path.
fn check_literal(text: &str, segment: &str, path: &str) -> Result<(), String> {
    match text
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@".contains(*c)))
    {
        Some(bad) => Err(format!(
            "`{segment}` in `{path}` holds `{bad}`, which a route may not: a route has no query string, fragment or encoding (arguments fill the query)"
        )),
        None => Ok(()),
    }
}

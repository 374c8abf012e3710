//! HTTP proxy tools: a tool declared as a call to an upstream REST API (SPEC T6).
//!
//! `#[tool(query, http = "GET /invoices/{id}", returns = InvoiceView)]` on a function without
//! a body, or [`ToolSpec::http`](crate::ToolSpec::http) for code that builds tools at run
//! time, makes a tool whose handler:
//! - fills the route's path parameters from typed arguments, each percent-encoded as ONE
//!   segment ([`encode_segment`]: `../admin` is `..%2Fadmin`; `.`, `..` and empty values are
//!   refused);
//! - puts the other arguments (plain ones, or a fillable profile's fields) in the query for
//!   `GET`/`HEAD`/`DELETE`, in a JSON body for `POST`/`PUT`/`PATCH` (code that builds its
//!   [`UpstreamRequest`] may send a form, a multipart body, a JSON array or raw bytes instead,
//!   and add headers the operation fixes);
//! - sends it with the server's [`HttpUpstream`] (base URL, credentials, timeouts, size
//!   limits: configuration, never arguments) over one pooled client;
//! - reads the answer into the model ([`FromUpstream`], which `#[model(upstream)]`
//!   implements without making the model `Deserialize`), which then goes through the
//!   tool's presenter like any handler's result: hidden fields never leave;
//! - classifies failures ([`classify`]).
//!
//! The client is behind the `http-client` feature; routes, requests and decoding are not.

#[cfg(feature = "http-client")]
mod client;
#[cfg(any(feature = "gateway", feature = "oauth"))]
pub(crate) use client::tls_config;
mod decode;
#[cfg(not(feature = "http-client"))]
mod disabled;
mod request;
#[cfg(feature = "gateway")]
pub(crate) use request::encode_form;
mod route;

#[cfg(feature = "http-client")]
pub use client::{
    HttpUpstream, HttpUpstreamBuilder, Upstream, UpstreamConfigError, classify, upstream_codes,
};
pub use decode::{DecodeError, FromUpstream, kinds, object};
#[cfg(not(feature = "http-client"))]
pub use disabled::Upstream;
pub use request::{
    BodyEncoding, EncodedBody, PathSegment, Placement, UpstreamFields, UpstreamRequest,
};
pub use route::{HttpMethod, HttpRoute, RouteSegment, SegmentError, encode_segment};

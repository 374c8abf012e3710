//! Without the `http-client` feature, a stand-in for the context parameter generated proxy
//! tools take: such a tool then fails to compile with one error, the missing feature (see
//! `kinds::HttpClientEnabled`), and no other.

use super::decode::FromUpstream;
use super::request::UpstreamRequest;
use crate::context::{CallContext, FromContext, ServerParts};
use crate::error::ToolError;

const OFF: &str = "HTTP proxy tools need the `http-client` feature";

/// The server's upstream, as a context parameter of HTTP proxy tools; without the
/// `http-client` feature, a server with a proxy tool does not build.
#[derive(Debug, Clone)]
pub struct Upstream(());

impl Upstream {
    /// Never sends anything: without the `http-client` feature, there is no client.
    pub async fn send<T: FromUpstream>(&self, request: UpstreamRequest) -> Result<T, ToolError> {
        let _ = request;
        Err(ToolError::internal_message(OFF))
    }
}

impl FromContext for Upstream {
    fn from_context(_: &CallContext) -> Result<Self, ToolError> {
        Err(ToolError::internal_message(OFF))
    }

    fn check(_: &ServerParts) -> Result<(), String> {
        Err(OFF.to_owned())
    }
}

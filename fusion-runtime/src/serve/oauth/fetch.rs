//! Fetching the issuer's metadata and keys: one HTTP client (rustls with the ring provider,
//! the `http-client` feature's), bounded bodies, no redirects followed off the issuer.

use std::time::Duration;

use serde_json::Value;

use super::OAuthError;

/// Metadata and key sets are small; anything larger is refused rather than buffered.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// The client every OAuth fetch goes through.
pub(super) fn client(timeout: Duration) -> Result<reqwest::Client, OAuthError> {
    let tls = crate::upstream::tls_config().map_err(|error| OAuthError::new(error.to_string()))?;
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .user_agent(concat!("fusion/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|error| OAuthError::new(format!("the HTTP client failed: {error}")))
}

/// Reads a JSON document from a successful response, at most [`MAX_DOCUMENT_BYTES`] of it.
pub(super) async fn json(
    response: Result<reqwest::Response, reqwest::Error>,
    url: &str,
) -> Result<Value, OAuthError> {
    let mut response =
        response.map_err(|error| OAuthError::new(format!("cannot fetch {url}: {error}")))?;
    if !response.status().is_success() {
        return Err(OAuthError::new(format!(
            "{url} answered {}",
            response.status()
        )));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| OAuthError::new(format!("cannot read {url}: {error}")))?
    {
        if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
            return Err(OAuthError::new(format!(
                "{url} sent more than {MAX_DOCUMENT_BYTES} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body)
        .map_err(|error| OAuthError::new(format!("{url} did not send JSON: {error}")))
}

/// The authorization server's metadata: RFC 8414 first, then OpenID Connect discovery. Its
/// `issuer` must be the one configured, so that a document served elsewhere is not trusted.
pub(super) async fn issuer_metadata(
    client: &reqwest::Client,
    issuer: &str,
) -> Result<Value, OAuthError> {
    let mut failures = Vec::new();
    for url in metadata_urls(issuer)? {
        match json(client.get(&url).send().await, &url).await {
            Ok(metadata) => {
                let named = metadata.get("issuer").and_then(Value::as_str);
                if named != Some(issuer) {
                    return Err(OAuthError::new(format!(
                        "{url} names issuer {named:?}, not `{issuer}`"
                    )));
                }
                return Ok(metadata);
            }
            Err(error) => failures.push(error.to_string()),
        }
    }
    Err(OAuthError::new(format!(
        "no authorization server metadata for `{issuer}`: {}",
        failures.join("; ")
    )))
}

/// RFC 8414 puts the well-known segment between the host and the issuer's path; OpenID
/// Connect appends it to the issuer.
fn metadata_urls(issuer: &str) -> Result<Vec<String>, OAuthError> {
    let url = reqwest::Url::parse(issuer)
        .map_err(|error| OAuthError::new(format!("the issuer `{issuer}` is not a URL: {error}")))?;
    if !matches!(url.scheme(), "https" | "http") || url.query().is_some() {
        return Err(OAuthError::new(format!(
            "the issuer `{issuer}` must be an http(s) URL without a query"
        )));
    }
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    Ok(vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{origin}{path}/.well-known/openid-configuration"),
    ])
}

/// A URL the metadata names (`jwks_uri`, `introspection_endpoint`).
pub(super) fn endpoint(metadata: &Value, field: &str) -> Result<String, OAuthError> {
    metadata
        .get(field)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| OAuthError::new(format!("the issuer's metadata has no `{field}`")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_8414_inserts_the_well_known_segment_before_the_issuer_path() {
        assert_eq!(
            metadata_urls("https://auth.example/tenant1/").unwrap(),
            [
                "https://auth.example/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example/tenant1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            metadata_urls("http://127.0.0.1:9000").unwrap(),
            [
                "http://127.0.0.1:9000/.well-known/oauth-authorization-server",
                "http://127.0.0.1:9000/.well-known/openid-configuration",
            ]
        );
        assert!(metadata_urls("ftp://auth.example").is_err());
    }
}

//! DNS-rebinding protection, in front of everything else on the HTTP endpoint: the `Host` and
//! `Origin` allow-lists of [`HttpOptions`], checked before authentication and any layer.

use std::sync::Arc;

use axum::response::IntoResponse;
use http::StatusCode;

use super::streamable::HttpOptions;

/// The `Host` and `Origin` allow-lists of [`HttpOptions`], parsed once. The same rules as
/// rmcp's own check inside the endpoint: an allowed host without a port matches any port, an
/// empty host list allows every host, an allowed origin ending in `:*` matches any port, a
/// request without `Origin` passes, and with an empty origin list every `Origin` is refused.
#[derive(Clone)]
pub(super) struct HostOriginGuard {
    /// Only an empty configured list allows every host: entries that do not parse (blank
    /// ones) must not turn a restrictive list into an open one.
    any_host: bool,
    hosts: Arc<[Authority]>,
    /// An allowed origin's `port` is `None` for any port (`:*`, or no port written).
    origins: Arc<[Origin]>,
}

#[derive(Debug, PartialEq, Eq)]
struct Authority {
    host: String,
    port: Option<u16>,
}

/// An origin as written: a request's has `port: None` when it omits its scheme's default.
#[derive(Debug, PartialEq, Eq)]
enum Origin {
    Null,
    Tuple {
        scheme: String,
        host: String,
        port: Option<u16>,
    },
}

impl Origin {
    /// The origin with its scheme's default port made explicit (RFC 6454), so that
    /// `https://app.example` and `https://app.example:443` are the same origin.
    fn with_default_port(self) -> Origin {
        match self {
            Origin::Tuple { scheme, host, port } => {
                let default_port = match scheme.as_str() {
                    "http" => Some(80),
                    "https" => Some(443),
                    _ => None,
                };
                Origin::Tuple {
                    port: port.or(default_port),
                    scheme,
                    host,
                }
            }
            Origin::Null => Origin::Null,
        }
    }
}

impl HostOriginGuard {
    pub(super) fn new(options: &HttpOptions) -> Self {
        HostOriginGuard {
            any_host: options.allowed_hosts.is_empty(),
            hosts: options
                .allowed_hosts
                .iter()
                .map(String::as_str)
                .filter_map(allowed_authority)
                .collect(),
            origins: options
                .allowed_origins
                .iter()
                .map(String::as_str)
                .filter_map(allowed_origin)
                .collect(),
        }
    }

    fn check(&self, uri: &http::Uri, headers: &http::HeaderMap) -> Result<(), StatusCode> {
        let host = match headers.get(http::header::HOST) {
            Some(value) => value
                .to_str()
                .ok()
                .and_then(|text| http::uri::Authority::try_from(text).ok())
                .map(|authority| authority_of(authority.host(), authority.port_u16())),
            // HTTP/2 carries the host in `:authority`.
            None => uri
                .authority()
                .map(|authority| authority_of(authority.host(), authority.port_u16())),
        };
        let Some(host) = host else {
            return Err(StatusCode::BAD_REQUEST);
        };
        if !self.any_host
            && !self.hosts.iter().any(|allowed| {
                allowed.host == host.host && allowed.port.is_none_or(|port| host.port == Some(port))
            })
        {
            tracing::warn!(
                ?host,
                "refused a request with a foreign Host (DNS rebinding?)"
            );
            return Err(StatusCode::FORBIDDEN);
        }
        let Some(origin) = headers.get(http::header::ORIGIN) else {
            return Ok(());
        };
        let allowed = origin
            .to_str()
            .ok()
            .and_then(origin_of)
            .map(Origin::with_default_port)
            .is_some_and(|origin| {
                self.origins
                    .iter()
                    .any(|allowed| origin_matches(allowed, &origin))
            });
        if allowed {
            Ok(())
        } else {
            tracing::warn!(?origin, "refused a request with a foreign Origin");
            Err(StatusCode::FORBIDDEN)
        }
    }
}

fn authority_of(host: &str, port: Option<u16>) -> Authority {
    Authority {
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase(),
        port,
    }
}

fn allowed_authority(text: &str) -> Option<Authority> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    // `::1` is not an authority (`[::1]` is): take it as a bare host.
    Some(match http::uri::Authority::try_from(text) {
        Ok(authority) => authority_of(authority.host(), authority.port_u16()),
        Err(_) => authority_of(text, None),
    })
}

fn origin_of(text: &str) -> Option<Origin> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("null") {
        return Some(Origin::Null);
    }
    let uri = http::Uri::try_from(text).ok()?;
    let authority = uri.authority()?;
    let Authority { host, port } = authority_of(authority.host(), authority.port_u16());
    Some(Origin::Tuple {
        scheme: uri.scheme_str()?.to_ascii_lowercase(),
        host,
        port,
    })
}

/// An allowed origin: as written, with `:*` (any port) kept as no port.
fn allowed_origin(text: &str) -> Option<Origin> {
    let text = text.trim();
    let (base, any_port) = match text.strip_suffix(":*") {
        Some(base) => (base, true),
        None => (text, false),
    };
    match origin_of(base)? {
        Origin::Null | Origin::Tuple { port: Some(_), .. } if any_port => None,
        origin => Some(origin),
    }
}

/// Whether a request's `origin` (its default port explicit) is the `allowed` one.
fn origin_matches(allowed: &Origin, origin: &Origin) -> bool {
    match (allowed, origin) {
        (Origin::Null, Origin::Null) => true,
        (
            Origin::Tuple { scheme, host, port },
            Origin::Tuple {
                scheme: origin_scheme,
                host: origin_host,
                port: origin_port,
            },
        ) => {
            scheme == origin_scheme
                && host == origin_host
                && port.is_none_or(|port| *origin_port == Some(port))
        }
        _ => false,
    }
}

/// [`HostOriginGuard`] as a tower layer. The check is synchronous, so unlike an
/// `axum::middleware::from_fn` layer it calls the inner service directly, without cloning it
/// for every request.
#[derive(Clone)]
pub(super) struct HostOriginLayer(pub(super) HostOriginGuard);

impl<S> tower::Layer<S> for HostOriginLayer {
    type Service = HostOriginService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        HostOriginService {
            guard: self.0.clone(),
            inner,
        }
    }
}

#[derive(Clone)]
pub(super) struct HostOriginService<S> {
    guard: HostOriginGuard,
    inner: S,
}

impl<S, B> tower::Service<http::Request<B>> for HostOriginService<S>
where
    S: tower::Service<http::Request<B>, Response = axum::response::Response>,
{
    type Response = axum::response::Response;
    type Error = S::Error;
    type Future = futures::future::Either<
        std::future::Ready<Result<axum::response::Response, S::Error>>,
        S::Future,
    >;

    fn poll_ready(
        &mut self,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(context)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        match self.guard.check(request.uri(), request.headers()) {
            Ok(()) => futures::future::Either::Right(self.inner.call(request)),
            Err(status) => {
                let message = if status == StatusCode::FORBIDDEN {
                    "Forbidden: Host or Origin header is not allowed"
                } else {
                    "Bad Request: invalid or missing Host header"
                };
                futures::future::Either::Left(std::future::ready(Ok(
                    (status, message).into_response()
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(options: &HttpOptions, host: Option<&str>, origin: Option<&str>) -> Option<u16> {
        let mut request = http::Request::builder().uri("/mcp");
        if let Some(host) = host {
            request = request.header(http::header::HOST, host);
        }
        if let Some(origin) = origin {
            request = request.header(http::header::ORIGIN, origin);
        }
        let request = request.body(()).unwrap();
        HostOriginGuard::new(options)
            .check(request.uri(), request.headers())
            .err()
            .map(|status| status.as_u16())
    }

    #[test]
    fn the_default_lists_accept_loopback_only() {
        let options = HttpOptions::default();
        for host in ["localhost:8080", "127.0.0.1:1", "[::1]:8080", "LOCALHOST"] {
            assert_eq!(check(&options, Some(host), None), None, "{host}");
        }
        for host in ["evil.example", "localhost.evil.example:8080", "127.0.0.2"] {
            assert_eq!(check(&options, Some(host), None), Some(403), "{host}");
        }
        assert_eq!(check(&options, Some("bad host"), None), Some(400));
        assert_eq!(check(&options, None, None), Some(400));
        for origin in [
            "http://localhost:5173",
            "http://[::1]:3000",
            "https://127.0.0.1",
            "HTTP://LocalHost:1",
        ] {
            assert_eq!(
                check(&options, Some("localhost"), Some(origin)),
                None,
                "{origin}"
            );
        }
        for origin in [
            "http://evil.example",
            "null",
            "",
            "localhost:5173",
            "file://localhost",
            "http://localhost.evil.example",
        ] {
            assert_eq!(
                check(&options, Some("localhost"), Some(origin)),
                Some(403),
                "{origin:?}"
            );
        }
    }

    #[test]
    fn ports_in_the_lists_are_exact_and_an_empty_origin_list_refuses_every_origin() {
        let options = HttpOptions {
            allowed_hosts: vec!["api.example:8443".into()],
            allowed_origins: vec!["https://app.example:443".into(), "null".into()],
            ..HttpOptions::default()
        };
        assert_eq!(check(&options, Some("api.example:8443"), None), None);
        assert_eq!(check(&options, Some("api.example:8080"), None), Some(403));
        assert_eq!(check(&options, Some("api.example"), None), Some(403));
        let host = Some("api.example:8443");
        assert_eq!(check(&options, host, Some("https://app.example")), None);
        assert_eq!(check(&options, host, Some("https://app.example:443")), None);
        assert_eq!(check(&options, host, Some("null")), None);
        assert_eq!(
            check(&options, host, Some("https://app.example:444")),
            Some(403)
        );
        assert_eq!(check(&options, host, Some("http://app.example")), Some(403));

        let any_host = HttpOptions {
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            ..HttpOptions::default()
        };
        assert_eq!(check(&any_host, Some("anything.example"), None), None);
        assert_eq!(
            check(
                &any_host,
                Some("anything.example"),
                Some("http://localhost:1")
            ),
            Some(403)
        );
    }

    #[test]
    fn a_list_of_blank_hosts_allows_no_host() {
        let options = HttpOptions {
            allowed_hosts: vec![" ".into(), String::new()],
            ..HttpOptions::default()
        };
        assert_eq!(check(&options, Some("evil.example"), None), Some(403));
        assert_eq!(check(&options, Some("localhost"), None), Some(403));
    }
}

//! Upstreams from the command line (`--upstream`, `--upstream-header`,
//! `--upstream-client-credentials`, `--upstream-token-exchange`) or a TOML file:
//!
//! ```toml
//! [upstreams.billing]
//! stdio = "billing --in-memory"      # a command line, split like a shell's
//! timeout_secs = 30
//!
//! [upstreams.crm]
//! http = "http://127.0.0.1:9000/mcp"
//! headers = { Authorization = "Bearer ${CRM_TOKEN}" }   # ${VAR} from the environment
//! protocol = "session"               # or "stateless" (2026-07-28), "auto" (the default)
//! refresh_secs = 60                  # for servers that cannot notify list changes
//! max_active = 8                     # calls at once (16 more may wait)
//!
//! [upstreams.ledger]
//! http = "https://ledger.example/mcp"
//! # The gateway's own OAuth client (client_credentials grant): its token, fetched once and
//! # refreshed before it expires, is what the upstream gets; never a caller's token.
//! client_credentials = { token_endpoint = "https://auth.example/token", client_id = "gateway", client_secret = "${LEDGER_CLIENT_SECRET}", scope = "ledger:read" }
//! # `resource` (RFC 8707) is the upstream's URL unless given.
//!
//! [upstreams.orders]
//! http = "https://orders.example/mcp"
//! # Token exchange (RFC 8693): each call carries a token the authorization server issued for
//! # its caller and this upstream (the caller as `sub`, the gateway as actor), exchanged for the
//! # caller's token by the gateway's client; the catalog is fetched with client_credentials.
//! client_credentials = { token_endpoint = "https://auth.example/token", client_id = "gateway", client_secret = "${ORDERS_CLIENT_SECRET}", scope = "orders:read", token_exchange = true }
//!
//! [upstreams.docs]
//! http = "http://127.0.0.1:9100/mcp"
//! unprefixed = true                  # its tools as `search`, not `docs_search`
//! ```

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use fusion::Concurrency;
use fusion::gateway::{ClientCredentials, Upstream, UpstreamProtocol};

#[fusion::data(deserialize)]
#[derive(Debug)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    upstreams: BTreeMap<String, Entry>,
}

#[fusion::data(deserialize)]
#[derive(Debug)]
#[serde(deny_unknown_fields)]
struct Entry {
    stdio: Option<String>,
    http: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    timeout_secs: Option<u64>,
    refresh_secs: Option<u64>,
    max_active: Option<usize>,
    protocol: Option<String>,
    #[serde(default)]
    unprefixed: bool,
    client_credentials: Option<ClientCredentialsEntry>,
}

#[fusion::data(deserialize)]
#[derive(Debug)]
#[serde(deny_unknown_fields)]
struct ClientCredentialsEntry {
    token_endpoint: String,
    client_id: String,
    /// `${VAR}` from the environment: a secret is not written in the file.
    client_secret: String,
    scope: Option<String>,
    resource: Option<String>,
    /// RFC 8693 `audience`, for token exchange.
    audience: Option<String>,
    #[serde(default)]
    token_exchange: bool,
}

impl ClientCredentialsEntry {
    /// The credentials for the upstream at `url`, with the client secret `secret` (read from
    /// where `client_secret` says).
    fn credentials(self, url: &str, secret: String) -> ClientCredentials {
        let mut credentials = ClientCredentials::new(self.token_endpoint, self.client_id, secret)
            .resource(self.resource.unwrap_or_else(|| url.to_owned()));
        if let Some(scope) = self.scope {
            credentials = credentials.scope(scope);
        }
        if let Some(audience) = self.audience {
            credentials = credentials.audience(audience);
        }
        if self.token_exchange {
            credentials = credentials.token_exchange();
        }
        credentials
    }

    /// `--upstream-client-credentials NAME=token_endpoint=URL,client_id=ID,client_secret=${VAR}`
    /// (or `client_secret_file=PATH`), then optionally `scope=…`, `resource=…`, `audience=…`:
    /// the entry and the secret.
    fn from_flag(name: &str, spec: &str) -> Result<(ClientCredentialsEntry, String), String> {
        let flag = format!("--upstream-client-credentials {name}");
        let (mut token_endpoint, mut client_id, mut client_secret) = (None, None, None);
        let mut entry = ClientCredentialsEntry {
            token_endpoint: String::new(),
            client_id: String::new(),
            client_secret: String::new(),
            scope: None,
            resource: None,
            audience: None,
            token_exchange: false,
        };
        for pair in spec.split(',') {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("{flag}: expected KEY=VALUE pairs, not `{pair}`"))?;
            let value = value.trim().to_owned();
            match key.trim() {
                "token_endpoint" => token_endpoint = Some(value),
                "client_id" => client_id = Some(value),
                // Only a reference: argv is in the process list, readable by every user.
                "client_secret" if value.starts_with("${") && value.ends_with('}') => {
                    client_secret = Some(expand(name, &value)?);
                }
                "client_secret" => {
                    return Err(format!(
                        "{flag}: give client_secret=${{VAR}} (an environment variable) or                          client_secret_file=PATH, not the secret itself: a command line is in                          the process list"
                    ));
                }
                "client_secret_file" => {
                    let text = std::fs::read_to_string(&value)
                        .map_err(|error| format!("{flag}: client_secret_file {value}: {error}"))?;
                    client_secret = Some(text.trim().to_owned());
                }
                "scope" => entry.scope = Some(value),
                "resource" => entry.resource = Some(value),
                "audience" => entry.audience = Some(value),
                other => {
                    return Err(format!(
                        "{flag}: unknown key `{other}` (token_endpoint, client_id,                          client_secret, client_secret_file, scope, resource, audience)"
                    ));
                }
            }
        }
        let missing = |key: &str| format!("{flag}: `{key}` is missing");
        entry.token_endpoint = token_endpoint.ok_or_else(|| missing("token_endpoint"))?;
        entry.client_id = client_id.ok_or_else(|| missing("client_id"))?;
        let secret = client_secret.ok_or_else(|| missing("client_secret"))?;
        Ok((entry, secret))
    }
}

/// The upstreams of a TOML file, in the order of their names (the order they are mounted in).
pub(crate) fn read_file(path: &Path) -> Result<Vec<(String, Upstream)>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("--config {}: {error}", path.display()))?;
    let file: File =
        toml::from_str(&text).map_err(|error| format!("--config {}: {error}", path.display()))?;
    file.upstreams
        .into_iter()
        .map(|(name, entry)| {
            let mut upstream = match (entry.stdio, entry.http) {
                (Some(_), None) if entry.client_credentials.is_some() => {
                    return Err(format!(
                        "--config: upstream `{name}`: `client_credentials` are for an `http` \
                         upstream"
                    ));
                }
                (Some(command), None) => stdio(&name, &command)?,
                (None, Some(url)) => match entry.client_credentials {
                    None => Upstream::http(url),
                    Some(client) => {
                        let secret = expand(&name, &client.client_secret)?;
                        let credentials = client.credentials(&url, secret);
                        Upstream::http(url).client_credentials(credentials)
                    }
                },
                _ => {
                    return Err(format!(
                        "--config: upstream `{name}` needs exactly one of `stdio` and `http`"
                    ));
                }
            };
            for (header, value) in entry.headers {
                upstream = upstream.header(header, expand(&name, &value)?);
            }
            if let Some(secs) = entry.timeout_secs {
                upstream = upstream.timeout(Duration::from_secs(secs));
            }
            if let Some(secs) = entry.refresh_secs {
                upstream = upstream.refresh_every(Duration::from_secs(secs.max(1)));
            }
            if let Some(max_active) = entry.max_active {
                upstream = upstream.concurrency(Concurrency::new(max_active, 16));
            }
            if let Some(protocol) = &entry.protocol {
                upstream = upstream.protocol(protocol_of(&name, protocol)?);
            }
            if entry.unprefixed {
                upstream = upstream.unprefixed();
            }
            Ok((name, upstream))
        })
        .collect()
}

/// `auto`, `session` (2025-11-25) or `stateless` (2026-07-28).
fn protocol_of(name: &str, protocol: &str) -> Result<UpstreamProtocol, String> {
    match protocol {
        "auto" => Ok(UpstreamProtocol::Auto),
        "session" | "2025-11-25" => Ok(UpstreamProtocol::Session),
        "stateless" | "2026-07-28" => Ok(UpstreamProtocol::Stateless),
        other => Err(format!(
            "upstream {name}: protocol `{other}` is not auto, session or stateless"
        )),
    }
}

/// The flags that make upstreams: `--upstream NAME=stdio:CMD` / `NAME=http:URL`, and those
/// that set one of them up.
pub(crate) struct Flags<'a> {
    pub(crate) upstreams: &'a [String],
    /// `--upstream-header NAME=Header: value`.
    pub(crate) headers: &'a [String],
    /// `--upstream-protocol NAME=session`.
    pub(crate) protocols: &'a [String],
    /// `--unprefixed NAME`.
    pub(crate) unprefixed: &'a [String],
    /// `--upstream-client-credentials NAME=token_endpoint=…,client_id=…,client_secret=${VAR}`.
    pub(crate) client_credentials: &'a [String],
    /// `--upstream-token-exchange NAME`.
    pub(crate) token_exchange: &'a [String],
    pub(crate) timeout: Duration,
}

/// The upstreams of the command line's flags.
pub(crate) fn from_flags(flags: Flags<'_>) -> Result<Vec<(String, Upstream)>, String> {
    let Flags {
        upstreams: specs,
        headers,
        protocols,
        unprefixed,
        client_credentials,
        token_exchange,
        timeout,
    } = flags;
    let mut upstreams: Vec<(String, Upstream)> = Vec::new();
    let mut urls: Vec<(&str, &str)> = Vec::new();
    for spec in specs {
        let (name, target) = spec.split_once('=').ok_or_else(|| {
            format!("--upstream `{spec}`: expected NAME=stdio:COMMAND or NAME=http:URL")
        })?;
        let upstream = if let Some(command) = target.strip_prefix("stdio:") {
            stdio(name, command)?
        } else if let Some(url) = target.strip_prefix("http:") {
            urls.push((name, url));
            Upstream::http(url)
        } else {
            return Err(format!(
                "--upstream {name}: expected stdio:COMMAND or http:URL after `{name}=`"
            ));
        };
        upstreams.push((name.to_owned(), upstream.timeout(timeout)));
    }
    for spec in headers {
        let (name, header) = spec
            .split_once('=')
            .ok_or_else(|| "--upstream-header: expected NAME=Header: value".to_owned())?;
        let (header, value) = header
            .split_once(':')
            .ok_or_else(|| format!("--upstream-header {name}: expected Header: value"))?;
        let value = expand(name, value.trim())?;
        let Some((_, upstream)) = upstreams.iter_mut().find(|(known, _)| known == name) else {
            return Err(format!(
                "--upstream-header {name}: no --upstream is called `{name}`"
            ));
        };
        *upstream = upstream.clone().header(header.trim(), value);
    }
    for spec in protocols {
        let (name, protocol) = spec.split_once('=').ok_or_else(|| {
            "--upstream-protocol: expected NAME=auto|session|stateless".to_owned()
        })?;
        let protocol = protocol_of(name, protocol.trim())?;
        let Some((_, upstream)) = upstreams.iter_mut().find(|(known, _)| known == name) else {
            return Err(format!(
                "--upstream-protocol {name}: no --upstream is called `{name}`"
            ));
        };
        *upstream = upstream.clone().protocol(protocol);
    }
    for spec in client_credentials {
        let (name, spec) = spec.split_once('=').ok_or_else(|| {
            "--upstream-client-credentials: expected NAME=token_endpoint=URL,client_id=ID,\
             client_secret=${VAR}"
                .to_owned()
        })?;
        let Some(&(_, url)) = urls.iter().find(|(known, _)| *known == name) else {
            return Err(format!(
                "--upstream-client-credentials {name}: no --upstream is called `{name}` with \
                 http:URL"
            ));
        };
        let (mut entry, secret) = ClientCredentialsEntry::from_flag(name, spec)?;
        entry.token_exchange = token_exchange.iter().any(|known| known == name);
        let credentials = entry.credentials(url, secret);
        if let Some((_, upstream)) = upstreams.iter_mut().find(|(known, _)| known == name) {
            *upstream = upstream.clone().client_credentials(credentials);
        }
    }
    for name in token_exchange {
        if !client_credentials
            .iter()
            .any(|spec| spec.split_once('=').is_some_and(|(known, _)| known == name))
        {
            return Err(format!(
                "--upstream-token-exchange {name}: the gateway exchanges tokens as its own \
                 client: give --upstream-client-credentials {name}=…"
            ));
        }
    }
    for name in unprefixed {
        let Some((_, upstream)) = upstreams.iter_mut().find(|(known, _)| known == name) else {
            return Err(format!(
                "--unprefixed {name}: no --upstream is called `{name}`"
            ));
        };
        *upstream = upstream.clone().unprefixed();
    }
    Ok(upstreams)
}

fn stdio(name: &str, command: &str) -> Result<Upstream, String> {
    let words = split(command).map_err(|problem| format!("upstream {name}: {problem}"))?;
    let (program, args) = words
        .split_first()
        .ok_or_else(|| format!("upstream {name}: the command is empty"))?;
    Ok(Upstream::stdio(program.clone()).args(args.iter().cloned()))
}

/// `${VAR}` replaced by the variable's value: tokens come from the environment, never from a
/// command line others can read.
fn expand(name: &str, value: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("upstream {name}: an unclosed `${{` in a header"))?;
        let variable = &after[..end];
        let found = std::env::var(variable).map_err(|_| {
            format!("upstream {name}: the environment variable {variable} is not set")
        })?;
        out.push_str(&found);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Splits a command line like a POSIX shell, without expansions: words separated by
/// whitespace, `'…'` literal, `"…"` with `\"` and `\\`, `\` escaping outside quotes.
fn split(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("an unclosed `'`".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("an unclosed `\"`".into()),
                        },
                        Some(c) => word.push(c),
                        None => return Err("an unclosed `\"`".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = chars.next() {
                    word.push(c);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_split_like_a_shell() {
        assert_eq!(
            split(r#"npx -y "@scope/server x" 'a b' c\ d "q\"q""#).unwrap(),
            ["npx", "-y", "@scope/server x", "a b", "c d", "q\"q"]
        );
        assert_eq!(split("  ").unwrap(), Vec::<String>::new());
        assert!(split("'open").is_err());
    }

    #[test]
    fn protocols_are_read_from_flags() {
        let upstreams = from_flags(flags(
            &["a=http:http://127.0.0.1:1/mcp".into()],
            &["a=session".into()],
            &[],
        ))
        .unwrap();
        assert!(format!("{:?}", upstreams[0].1).contains("protocol: Session"));
        for wrong in ["a=modern", "b=session", "a"] {
            let error = from_flags(flags(
                &["a=http:http://127.0.0.1:1/mcp".into()],
                &[wrong.into()],
                &[],
            ))
            .unwrap_err();
            assert!(
                error.contains("--upstream-protocol") || error.contains("protocol `"),
                "{error}"
            );
        }
    }

    fn flags<'a>(
        upstreams: &'a [String],
        protocols: &'a [String],
        unprefixed: &'a [String],
    ) -> Flags<'a> {
        Flags {
            upstreams,
            headers: &[],
            protocols,
            unprefixed,
            client_credentials: &[],
            token_exchange: &[],
            timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn client_credentials_and_token_exchange_are_read_from_flags_without_the_secret() {
        let upstreams = ["crm=http:http://127.0.0.1:1/mcp".to_owned()];
        let with = |credentials: &[String], exchange: &[String]| {
            from_flags(Flags {
                client_credentials: credentials,
                token_exchange: exchange,
                ..flags(&upstreams, &[], &[])
            })
        };
        let spec = "crm=token_endpoint=http://127.0.0.1:2/token,client_id=gw,\
                    client_secret=${PATH},scope=crm:read crm:write"
            .to_owned();
        let read = with(std::slice::from_ref(&spec), &["crm".into()]).unwrap();
        let shown = format!("{:?}", read[0].1);
        assert!(shown.contains("client_id: \"gw\""), "{shown}");
        assert!(
            shown.contains("scope: Some(\"crm:read crm:write\")"),
            "{shown}"
        );
        assert!(
            shown.contains("resource: Some(\"http://127.0.0.1:1/mcp\")"),
            "{shown}"
        );
        assert!(shown.contains("token_exchange: true"), "{shown}");
        assert!(!shown.contains(&std::env::var("PATH").unwrap()), "{shown}");
        let plain = with(std::slice::from_ref(&spec), &[]).unwrap();
        assert!(format!("{:?}", plain[0].1).contains("token_exchange: false"));

        // A secret written on the command line is refused, and not repeated.
        let error = with(
            &["crm=token_endpoint=http://a/token,client_id=gw,client_secret=hunter2".into()],
            &[],
        )
        .unwrap_err();
        assert!(
            error.contains("process list") && !error.contains("hunter2"),
            "{error}"
        );
        let error = with(&[], &["crm".into()]).unwrap_err();
        assert!(
            error.contains("--upstream-client-credentials crm="),
            "{error}"
        );
        let error = with(
            &["crm=token_endpoint=http://a/token,client_secret=${PATH}".into()],
            &[],
        )
        .unwrap_err();
        assert!(error.contains("`client_id` is missing"), "{error}");
        let error = with(
            &["ledger=token_endpoint=http://a/token,client_id=gw,client_secret=${PATH}".into()],
            &[],
        )
        .unwrap_err();
        assert!(
            error.contains("no --upstream is called `ledger`"),
            "{error}"
        );
    }

    #[test]
    fn unprefixed_mounts_are_read_from_flags_and_files() {
        let upstreams = from_flags(flags(
            &[
                "a=http:http://127.0.0.1:1/mcp".into(),
                "b=http:http://127.0.0.1:2/mcp".into(),
            ],
            &[],
            &["b".into()],
        ))
        .unwrap();
        assert!(format!("{:?}", upstreams[0].1).contains("unprefixed: false"));
        assert!(format!("{:?}", upstreams[1].1).contains("unprefixed: true"));
        let error = from_flags(flags(
            &["a=http:http://127.0.0.1:1/mcp".into()],
            &[],
            &["c".into()],
        ))
        .unwrap_err();
        assert!(error.contains("--unprefixed c"), "{error}");

        let dir = std::env::temp_dir().join(format!("gateway-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("gateway.toml");
        std::fs::write(
            &path,
            "[upstreams.a]\nhttp = \"http://127.0.0.1:1/mcp\"\nunprefixed = true\n\n\
             [upstreams.b]\nhttp = \"http://127.0.0.1:2/mcp\"\n",
        )
        .unwrap();
        let upstreams = read_file(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(format!("{:?}", upstreams[0].1).contains("unprefixed: true"));
        assert!(format!("{:?}", upstreams[1].1).contains("unprefixed: false"));
    }

    #[test]
    fn client_credentials_are_read_with_the_secret_from_the_environment() {
        let dir = std::env::temp_dir().join(format!("gateway-cc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("gateway.toml");
        std::fs::write(
            &path,
            "[upstreams.ledger]\nhttp = \"http://127.0.0.1:1/mcp\"\n\
             client_credentials = { token_endpoint = \"http://127.0.0.1:2/token\", \
             client_id = \"gw\", client_secret = \"${PATH}\", scope = \"ledger:read\" }\n",
        )
        .unwrap();
        let upstreams = read_file(&path);
        std::fs::write(
            &path,
            "[upstreams.ledger]\nstdio = \"ledger\"\n\
             client_credentials = { token_endpoint = \"http://127.0.0.1:2/token\", \
             client_id = \"gw\", client_secret = \"s\" }\n",
        )
        .unwrap();
        let on_stdio = read_file(&path).unwrap_err();
        let _ = std::fs::remove_dir_all(&dir);
        let shown = format!("{:?}", upstreams.unwrap()[0].1);
        assert!(shown.contains("client_id: \"gw\""), "{shown}");
        assert!(shown.contains("scope: Some(\"ledger:read\")"), "{shown}");
        // Bound to the upstream's own URL unless the file names another resource.
        assert!(
            shown.contains("resource: Some(\"http://127.0.0.1:1/mcp\")"),
            "{shown}"
        );
        let path_value = std::env::var("PATH").unwrap();
        assert!(
            !shown.contains(&path_value),
            "the secret is never shown: {shown}"
        );
        assert!(on_stdio.contains("for an `http` upstream"), "{on_stdio}");
    }

    #[test]
    fn header_values_read_variables() {
        let value = expand("x", "Bearer ${PATH}").unwrap();
        assert!(value.starts_with("Bearer /"), "{value}");
        assert!(expand("x", "${FUSION_GATEWAY_SURELY_UNSET_VARIABLE}").is_err());
    }
}

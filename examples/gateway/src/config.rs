//! Upstreams from the command line (`--upstream`, `--upstream-header`) or a TOML file:
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
                        let mut credentials = ClientCredentials::new(
                            client.token_endpoint,
                            client.client_id,
                            expand(&name, &client.client_secret)?,
                        )
                        .resource(client.resource.unwrap_or_else(|| url.clone()));
                        if let Some(scope) = client.scope {
                            credentials = credentials.scope(scope);
                        }
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
    pub(crate) timeout: Duration,
}

/// The upstreams of the command line's flags.
pub(crate) fn from_flags(flags: Flags<'_>) -> Result<Vec<(String, Upstream)>, String> {
    let Flags {
        upstreams: specs,
        headers,
        protocols,
        unprefixed,
        timeout,
    } = flags;
    let mut upstreams: Vec<(String, Upstream)> = Vec::new();
    for spec in specs {
        let (name, target) = spec.split_once('=').ok_or_else(|| {
            format!("--upstream `{spec}`: expected NAME=stdio:COMMAND or NAME=http:URL")
        })?;
        let upstream = if let Some(command) = target.strip_prefix("stdio:") {
            stdio(name, command)?
        } else if let Some(url) = target.strip_prefix("http:") {
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
            timeout: Duration::from_secs(1),
        }
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

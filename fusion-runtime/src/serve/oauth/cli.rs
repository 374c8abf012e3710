//! The resource server's command-line flags, written once for every binary (the `cli`
//! feature): `#[command(flatten)] oauth: OAuthArgs` in a binary's `clap::Parser`.

use super::{ClaimNames, ResourceServer};

/// `--oauth-issuer URL --oauth-audience URI` and the claim names.
///
/// The environment variables of the issuer and the audience are the binary's to name
/// ([`OAuthArgs::env`]), and so is what the flags conflict with (its static tokens, say). A
/// connector whose tools act for a tenant gives `--oauth-tenant-claim` a default
/// (`command.mut_arg("oauth_tenant_claim", |arg| arg.default_value("tenant"))`), so that a
/// token without it is refused.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct OAuthArgs {
    /// Accept OAuth access tokens (JWTs) from this issuer instead of static tokens; its keys
    /// are found through its metadata (RFC 8414 or OpenID Connect discovery).
    #[arg(long, value_name = "URL", requires = "oauth_audience")]
    pub oauth_issuer: Option<String>,
    /// This server's canonical resource URI, which tokens must name as their audience
    /// (`https://mcp.example.com/mcp`).
    #[arg(long, value_name = "URI", requires = "oauth_issuer")]
    pub oauth_audience: Option<String>,
    /// The claim naming the caller.
    #[arg(long, value_name = "CLAIM", default_value = "sub")]
    pub oauth_subject_claim: String,
    /// The claim naming the caller's tenant; a token without it is refused.
    #[arg(long, value_name = "CLAIM")]
    pub oauth_tenant_claim: Option<String>,
    /// The claims holding the granted scopes, first found wins.
    #[arg(
        long,
        value_name = "CLAIM",
        value_delimiter = ',',
        default_value = "scope,scp"
    )]
    pub oauth_scope_claims: Vec<String>,
    /// The claim holding the caller's roles.
    #[arg(long, value_name = "CLAIM")]
    pub oauth_roles_claim: Option<String>,
}

impl OAuthArgs {
    /// Lets the environment variables `issuer` and `audience` stand for the two flags in
    /// `command` (the binary's command, with these flags flattened in).
    #[must_use]
    pub fn env(
        command: clap::Command,
        issuer: &'static str,
        audience: &'static str,
    ) -> clap::Command {
        command
            .mut_arg("oauth_issuer", |arg| arg.env(issuer))
            .mut_arg("oauth_audience", |arg| arg.env(audience))
    }

    /// The resource server the flags configure, `None` without `--oauth-issuer`.
    pub fn resource_server(&self) -> Option<ResourceServer> {
        let (issuer, audience) = (self.oauth_issuer.as_ref()?, self.oauth_audience.as_ref()?);
        let mut claims = ClaimNames::default()
            .subject(&self.oauth_subject_claim)
            .scopes(&self.oauth_scope_claims);
        if let Some(tenant) = &self.oauth_tenant_claim {
            claims = claims.tenant(tenant);
        }
        if let Some(roles) = &self.oauth_roles_claim {
            claims = claims.roles(roles);
        }
        Some(ResourceServer {
            claims,
            ..ResourceServer::new(issuer, audience)
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory as _, FromArgMatches as _, Parser};

    use super::*;

    #[derive(Parser, Debug)]
    struct Binary {
        #[command(flatten)]
        oauth: OAuthArgs,
    }

    fn parse(args: &[&str]) -> Result<OAuthArgs, clap::Error> {
        let command = OAuthArgs::env(
            Binary::command(),
            "TEST_OAUTH_ISSUER",
            "TEST_OAUTH_AUDIENCE",
        )
        // As a connector whose tools act for a tenant sets it.
        .mut_arg("oauth_tenant_claim", |arg| arg.default_value("tenant"));
        let matches =
            command.try_get_matches_from(std::iter::once("binary").chain(args.iter().copied()))?;
        Ok(Binary::from_arg_matches(&matches)?.oauth)
    }

    #[test]
    fn the_flags_configure_the_issuer_the_audience_and_the_claims() {
        let args = parse(&[
            "--oauth-issuer",
            "https://issuer.example",
            "--oauth-audience",
            "https://mcp.example/mcp",
            "--oauth-scope-claims",
            "scp",
            "--oauth-roles-claim",
            "roles",
        ])
        .unwrap();
        let server = args.resource_server().unwrap();
        assert_eq!(server.issuer, "https://issuer.example");
        assert_eq!(server.audience, "https://mcp.example/mcp");
        assert_eq!(
            server.claims,
            ClaimNames::default()
                .scopes(["scp"])
                .tenant("tenant")
                .roles("roles")
        );
        let named = parse(&[
            "--oauth-issuer",
            "https://issuer.example",
            "--oauth-audience",
            "https://mcp.example/mcp",
            "--oauth-tenant-claim",
            "org",
        ])
        .unwrap();
        assert_eq!(
            named.resource_server().unwrap().claims,
            ClaimNames::default().tenant("org")
        );
    }

    #[test]
    fn one_flag_without_the_other_is_refused_and_none_means_no_resource_server() {
        for alone in [
            ["--oauth-issuer", "https://issuer.example"],
            ["--oauth-audience", "https://mcp.example/mcp"],
        ] {
            let error = parse(&alone).unwrap_err();
            assert_eq!(
                error.kind(),
                clap::error::ErrorKind::MissingRequiredArgument
            );
        }
        assert!(parse(&[]).unwrap().resource_server().is_none());
    }
}

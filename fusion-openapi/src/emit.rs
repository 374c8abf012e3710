//! The crate's files, written from what `schema` read. The Rust is written plainly and then
//! formatted by `rustfmt` (see `GeneratedCrate::write_to`).

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::names::{self, one_line};
use crate::schema::{Api, Location, Model, Returns, Tool};
use crate::{FusionDependency, GeneratedCrate, Options};

/// A Rust string literal.
fn lit(text: &str) -> String {
    format!("{text:?}")
}

pub(crate) fn emit(api: &Api, options: &Options) -> GeneratedCrate {
    let name = options.name.clone().unwrap_or_else(|| {
        let base = names::words(&api.title).join("-");
        if base.is_empty() {
            "openapi-connector".to_owned()
        } else {
            format!("{base}-connector")
        }
    });
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = if name.starts_with(|c: char| c.is_ascii_digit()) {
        format!("api-{name}")
    } else {
        name
    };
    let lib_ident = name.replace('-', "_");
    let files = vec![
        (PathBuf::from("Cargo.toml"), cargo_toml(&name, options)),
        (PathBuf::from("src/lib.rs"), lib_rs(api)),
        (PathBuf::from("src/main.rs"), main_rs(api, &lib_ident)),
        (PathBuf::from("README.md"), readme(api, &name)),
    ];
    GeneratedCrate {
        name,
        files,
        report: api.report.clone(),
    }
}

fn cargo_toml(name: &str, options: &Options) -> String {
    let fusion = match &options.fusion {
        FusionDependency::Version(version) => format!("{version:?}"),
        FusionDependency::Path(path) => {
            let path = if path.join("fusion").join("Cargo.toml").exists() {
                path.join("fusion")
            } else {
                path.clone()
            };
            format!("{{ path = {:?} }}", path.display().to_string())
        }
    };
    let workspace = if options.standalone {
        "\n[workspace]\n"
    } else {
        ""
    };
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false
description = "An MCP connector generated from an OpenAPI document by fusion-openapi"

[dependencies]
fusion = {fusion}
tokio = {{ version = "1", features = ["rt-multi-thread", "macros"] }}
{workspace}"#
    )
}

fn model_rs(model: &Model, out: &mut String) {
    let mut profiles = Vec::new();
    let fillable: Vec<&str> = model.fillable().map(|field| field.ident.as_str()).collect();
    if model.create && !fillable.is_empty() {
        profiles.push(format!("create = [{}]", fillable.join(", ")));
    }
    if model.update && !fillable.is_empty() {
        profiles.push(format!("update = [{}]", fillable.join(", ")));
    }
    let profiles = if profiles.is_empty() {
        String::new()
    } else {
        format!(", fillable({})", profiles.join(", "))
    };
    let doc = model
        .description
        .clone()
        .unwrap_or_else(|| format!("{} as the upstream returns it.", model.ident));
    let _ = writeln!(out, "#[doc = {}]", lit(&doc));
    let _ = writeln!(out, "#[fusion::model(upstream{profiles})]");
    let _ = writeln!(out, "pub struct {} {{", model.ident);
    for field in &model.fields {
        if field.cast {
            let _ = writeln!(out, "    #[cast({})]", lit(&field.label));
        } else {
            let _ = writeln!(
                out,
                "    /// Not cast: nested data holding fields an agent must not see."
            );
        }
        if field.hidden {
            let _ = writeln!(out, "    #[hidden]");
        }
        if names::unraw(&field.ident) != field.wire {
            let _ = writeln!(out, "    #[upstream(name = {})]", lit(&field.wire));
        }
        let mut ty = field.ty.rust();
        if field.optional {
            ty = format!("Option<{ty}>");
        }
        if field.hidden {
            ty = format!("fusion::Hidden<{ty}>");
        }
        let _ = writeln!(out, "    pub {}: {ty},", field.ident);
    }
    let _ = writeln!(out, "}}\n");
    let fields: Vec<&str> = model
        .presentable()
        .map(|field| field.ident.as_str())
        .collect();
    let _ = writeln!(
        out,
        "/// What an agent sees of [`{}`]: every cast field that is not hidden.",
        model.ident
    );
    let _ = writeln!(
        out,
        "#[fusion::presenter({}, fields({}))]",
        model.ident,
        fields.join(", ")
    );
    let _ = writeln!(out, "#[derive(Debug)]");
    let _ = writeln!(out, "pub struct {}View;\n", model.ident);
}

fn tool_rs(api: &Api, tool: &Tool, out: &mut String) {
    let verb = match tool.method {
        "GET" | "HEAD" => "query",
        "DELETE" => "mutation",
        "PUT" => "mutation, destructive = false, idempotent",
        _ => "mutation, destructive = false",
    };
    let (returns, output) = match &tool.returns {
        Returns::Model(index) => {
            let model = &api.models[*index];
            (
                format!(", returns = {}View", model.ident),
                model.ident.clone(),
            )
        }
        Returns::List(index) => {
            let model = &api.models[*index];
            (
                format!(", returns = {}View", model.ident),
                format!("Vec<{}>", model.ident),
            )
        }
        Returns::Unit => (String::new(), "()".to_owned()),
        Returns::Json => (String::new(), "fusion::serde_json::Value".to_owned()),
    };
    let _ = writeln!(out, "#[doc = {}]", lit(&tool.description));
    let _ = writeln!(
        out,
        "#[fusion::tool({verb}, name = {}, http = {}{returns})]",
        lit(names::unraw(&tool.ident)),
        lit(&format!("{} {}", tool.method, tool.template)),
    );
    let _ = writeln!(out, "pub async fn {}(", tool.ident);
    let has_body = matches!(tool.method, "POST" | "PUT" | "PATCH");
    for param in &tool.params {
        if let Some(doc) = &param.doc {
            let _ = writeln!(out, "    #[doc = {}]", lit(doc));
        }
        let mut upstream = Vec::new();
        if names::unraw(&param.ident) != param.wire && param.location == Location::Query {
            upstream.push(format!("name = {}", lit(&param.wire)));
        }
        if param.location == Location::Query && has_body {
            upstream.push("query".to_owned());
        }
        if !upstream.is_empty() {
            let _ = writeln!(out, "    #[upstream({})]", upstream.join(", "));
        }
        let mut ty = param.ty.rust();
        if param.optional {
            ty = format!("Option<{ty}>");
        }
        let _ = writeln!(out, "    {}: {ty},", param.ident);
    }
    if let Some((argument, index, create)) = &tool.body {
        let profile = if *create { "Create" } else { "Update" };
        let _ = writeln!(
            out,
            "    {argument}: fusion::{profile}<{}>,",
            api.models[*index].ident
        );
    }
    let _ = writeln!(out, ") -> Result<{output}, fusion::ToolError>;\n");
}

fn lib_rs(api: &Api) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "//! {}: an MCP connector generated by fusion-openapi from the API's OpenAPI document \
         (version {}).",
        one_line(&api.title, 120),
        one_line(&api.version, 40)
    );
    let _ = writeln!(out, "//!");
    let _ = writeln!(
        out,
        "//! Every tool is an HTTP proxy: its arguments fill the route, the query and the body; \
         the upstream's base URL and credentials come from [`server`]'s caller, never from an \
         agent. Fields the document marks `writeOnly` or that look secret are hidden: they never \
         reach an agent."
    );
    let _ = writeln!(
        out,
        "// One argument per API parameter: operations with many parameters take many arguments."
    );
    let _ = writeln!(out, "#![allow(clippy::too_many_arguments)]\n");
    let base = match &api.base_url {
        Some(url) => format!("Some({})", lit(url)),
        None => "None".to_owned(),
    };
    let _ = writeln!(
        out,
        "/// The base URL the document names, if it names an absolute one.\npub const DEFAULT_BASE_URL: Option<&str> = {base};\n"
    );
    for model in &api.models {
        model_rs(model, &mut out);
    }
    for tool in &api.tools {
        tool_rs(api, tool, &mut out);
    }
    let _ = writeln!(
        out,
        "/// The connector's server: every tool, calling `upstream`.\npub fn server(upstream: fusion::HttpUpstream) -> Result<fusion::Server, fusion::BuildError> {{"
    );
    let instructions = match &api.description {
        Some(description) => format!("{}: {description}", one_line(&api.title, 120)),
        None => one_line(&api.title, 120),
    };
    let _ = writeln!(
        out,
        "    fusion::ServerBuilder::new({}, {})",
        lit(&names::words(&api.title).join("-")),
        lit(&api.version)
    );
    let _ = writeln!(out, "        .instructions({})", lit(&instructions));
    let _ = writeln!(out, "        .upstream(upstream)");
    for tool in &api.tools {
        let _ = writeln!(out, "        .tool::<{}>()", tool.ident);
    }
    let _ = writeln!(out, "        .build()\n}}");
    out
}

fn main_rs(api: &Api, lib: &str) -> String {
    format!(
        r#"//! Serves the {title} connector over stdio (the default) or Streamable HTTP.
//!
//! Run with `cargo run -- [--base-url URL] [--http ADDRESS]`. The upstream's credentials come
//! from the environment, never from the command line: `API_TOKEN` is sent as a bearer token,
//! or in the header named by `API_KEY_HEADER` when it is set. Over HTTP, clients present the
//! bearer token in `MCP_TOKEN`.

use std::time::Duration;

const USAGE: &str = "usage: {lib} [--base-url URL] [--http ADDRESS]
  --base-url URL    the upstream API (or API_BASE_URL; default: the document's server)
  --http ADDRESS    serve Streamable HTTP on ADDRESS (such as 127.0.0.1:8080) instead of stdio
environment: API_TOKEN (upstream credential), API_KEY_HEADER (send API_TOKEN in this header
instead of as a bearer token), MCP_TOKEN (the token HTTP clients present)";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {{
    let mut base_url = std::env::var("API_BASE_URL").ok();
    let mut http: Option<std::net::SocketAddr> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {{
        match arg.as_str() {{
            "--base-url" => base_url = Some(args.next().ok_or("--base-url needs a URL")?),
            "--http" => http = Some(args.next().ok_or("--http needs an address")?.parse()?),
            "--help" | "-h" => {{
                println!("{{USAGE}}");
                return Ok(());
            }}
            other => return Err(format!("unknown argument `{{other}}`\n{{USAGE}}").into()),
        }}
    }}
    let base_url = base_url
        .or_else(|| {lib}::DEFAULT_BASE_URL.map(str::to_owned))
        .ok_or("no base URL: pass --base-url or set API_BASE_URL")?;
    let mut upstream = fusion::HttpUpstream::builder(base_url).timeout(Duration::from_secs(30));
    if let Ok(token) = std::env::var("API_TOKEN") {{
        upstream = match std::env::var("API_KEY_HEADER") {{
            Ok(header) => upstream.header(header, token),
            Err(_) => upstream.bearer(token),
        }};
    }}
    let mcp = fusion::serve::Mcp::new({lib}::server(upstream.build()?)?);
    match http {{
        None => mcp.serve_stdio().await?,
        Some(address) => {{
            let token = std::env::var("MCP_TOKEN")
                .map_err(|_| "serving HTTP needs MCP_TOKEN, the bearer token clients present")?;
            let auth = fusion::auth::StaticTokens::new().with(token, fusion::Principal::new("client"));
            let options = fusion::serve::HttpOptions::default().bind(address).auth(auth);
            eprintln!("listening on http://{{address}}/mcp");
            mcp.serve_http(options).await?;
        }}
    }}
    Ok(())
}}
"#,
        title = one_line(&api.title, 120),
    )
}

fn readme(api: &Api, name: &str) -> String {
    let mut out = format!(
        "# {name}\n\nAn MCP connector for {} ({}), generated by fusion-openapi.\n\n\
         ```sh\nAPI_TOKEN=... cargo run -- --base-url https://api.example.com\n```\n\n## Report\n\n",
        one_line(&api.title, 120),
        one_line(&api.version, 40)
    );
    for line in api.report.to_string().lines() {
        let _ = writeln!(out, "- {line}");
    }
    out
}

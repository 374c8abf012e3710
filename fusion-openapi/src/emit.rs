//! The crate's files, written from what `schema` read. The Rust is written plainly and then
//! formatted by `rustfmt` (see `GeneratedCrate::write_to`).

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::names::{self, one_line};
use crate::schema::{Api, Auth, Body, Encoding, Location, Model, Piece, Returns, Tool};
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
        if field.guarded {
            let _ = writeln!(out, "    #[guarded]");
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
    if !model.presented {
        return;
    }
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
    let mut verb = match tool.method {
        "GET" | "HEAD" => "query".to_owned(),
        "DELETE" => "mutation".to_owned(),
        "PUT" => "mutation, destructive = false, idempotent".to_owned(),
        _ => "mutation, destructive = false".to_owned(),
    };
    if !tool.invalidates.is_empty() {
        let names: Vec<String> = tool.invalidates.iter().map(|name| lit(name)).collect();
        let _ = write!(verb, ", invalidates = [{}]", names.join(", "));
    }
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
        Returns::Text(_) => (String::new(), "String".to_owned()),
        Returns::Media(_) => (String::new(), "fusion::WithMedia<String>".to_owned()),
    };
    let direct = tool.direct() || tool.lookup.is_some();
    let _ = writeln!(out, "#[doc = {}]", lit(&tool.description));
    if direct {
        let _ = writeln!(
            out,
            "#[fusion::tool({verb}, name = {}{returns})]",
            lit(&tool.name)
        );
    } else {
        let _ = writeln!(
            out,
            "#[fusion::tool({verb}, name = {}, http = {}{returns})]",
            lit(&tool.name),
            lit(&format!("{} {}", tool.method, tool.template)),
        );
    }
    let _ = writeln!(out, "pub async fn {}(", tool.ident);
    if direct {
        let _ = writeln!(out, "    upstream: fusion::State<fusion::HttpUpstream>,");
    }
    let has_body = matches!(tool.method, "POST" | "PUT" | "PATCH");
    for param in &tool.params {
        if let Some(doc) = &param.doc {
            let _ = writeln!(out, "    #[doc = {}]", lit(doc));
        }
        if !direct {
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
        }
        let mut ty = param.ty.rust();
        if param.optional {
            ty = format!("Option<{ty}>");
        }
        let _ = writeln!(out, "    {}: {ty},", param.ident);
    }
    match &tool.body {
        Some(Body::Profile {
            argument,
            model,
            create,
            ..
        }) => {
            let profile = if *create { "Create" } else { "Update" };
            let _ = writeln!(
                out,
                "    {argument}: fusion::{profile}<{}>,",
                api.models[*model].ident
            );
        }
        Some(Body::Object { argument, doc, .. }) => {
            let _ = writeln!(out, "    #[doc = {}]", lit(doc));
            let _ = writeln!(
                out,
                "    {argument}: fusion::serde_json::Map<String, fusion::serde_json::Value>,"
            );
        }
        Some(Body::Whole {
            argument,
            ty,
            optional,
            doc,
        }) => {
            let _ = writeln!(out, "    #[doc = {}]", lit(doc));
            let ty = ty.rust();
            let ty = if *optional {
                format!("Option<{ty}>")
            } else {
                ty
            };
            let _ = writeln!(out, "    {argument}: {ty},");
        }
        Some(Body::Raw {
            argument,
            optional,
            doc,
            ..
        }) => {
            let _ = writeln!(out, "    #[doc = {}]", lit(doc));
            let ty = if *optional {
                "Option<String>"
            } else {
                "String"
            };
            let _ = writeln!(out, "    {argument}: {ty},");
        }
        None => {}
    }
    if !direct {
        let _ = writeln!(out, ") -> Result<{output}, fusion::ToolError>;\n");
        return;
    }
    let _ = writeln!(out, ") -> Result<{output}, fusion::ToolError> {{");
    let method = match tool.method {
        "GET" => "Get",
        "HEAD" => "Head",
        "POST" => "Post",
        "PUT" => "Put",
        "PATCH" => "Patch",
        _ => "Delete",
    };
    let _ = writeln!(
        out,
        "    let mut request = fusion::upstream::UpstreamRequest::new(fusion::upstream::HttpMethod::{method}, {});",
        lit(&format!("{} {}", tool.method, tool.template))
    );
    let ident_of = |name: &str| {
        tool.params
            .iter()
            .find(|param| names::unraw(&param.ident) == name)
            .map_or_else(|| name.to_owned(), |param| param.ident.clone())
    };
    for segment in &tool.segments {
        // One parameter, maybe with text around it in its segment: `(prefix, name, suffix)`.
        let single = match segment.as_slice() {
            [Piece::Param(name)] => Some(("", name, "")),
            [Piece::Text(prefix), Piece::Param(name)] => Some((prefix.as_str(), name, "")),
            [Piece::Param(name), Piece::Text(suffix)] => Some(("", name, suffix.as_str())),
            [Piece::Text(prefix), Piece::Param(name), Piece::Text(suffix)] => {
                Some((prefix.as_str(), name, suffix.as_str()))
            }
            _ => None,
        };
        match (segment.as_slice(), single) {
            ([Piece::Text(text)], _) => {
                let _ = writeln!(out, "    request.literal({});", lit(text));
            }
            (_, Some(("", name, ""))) => {
                let _ = writeln!(
                    out,
                    "    request.param({}, &{})?;",
                    lit(name),
                    ident_of(name)
                );
            }
            (_, Some((prefix, name, suffix))) => {
                let _ = writeln!(
                    out,
                    "    request.param_between({}, {}, &{}, {})?;",
                    lit(prefix),
                    lit(name),
                    ident_of(name),
                    lit(suffix)
                );
            }
            (pieces, None) => {
                // Several parameters in one segment: each value encoded on its own, so that
                // none can end the segment or hold another's place.
                let parts: Vec<String> = pieces
                    .iter()
                    .map(|piece| match piece {
                        Piece::Text(text) => format!("{}.to_owned()", lit(text)),
                        Piece::Param(name) => {
                            format!("segment_part({}, &{})?", lit(name), ident_of(name))
                        }
                    })
                    .collect();
                let _ = writeln!(
                    out,
                    "    request.literal(&[{}].concat());",
                    parts.join(", ")
                );
            }
        }
    }
    for param in tool
        .params
        .iter()
        .filter(|param| param.location == Location::Query)
    {
        let _ = writeln!(
            out,
            "    request.arg(fusion::upstream::Placement::Query, {}, &{})?;",
            lit(&param.wire),
            param.ident
        );
    }
    body_rs(tool, out);
    // Headers the document fixes for the operation: sent by the tool, never chosen by agents.
    for (name, value) in &tool.headers {
        let _ = writeln!(out, "    request.header({}, {})?;", lit(name), lit(value));
    }
    let send = match &tool.returns {
        Returns::Text(kind) | Returns::Media(kind) => {
            let _ = writeln!(out, "    request.header(\"accept\", {})?;", lit(kind));
            "send_bytes"
        }
        _ => "send",
    };
    let call = match &tool.lookup {
        Some(lookup) => format!(
            "upstream.{send}(request).await.map_err(|error| look_up_with(error, {}))",
            lit(lookup)
        ),
        None => format!("upstream.{send}(request).await"),
    };
    match &tool.returns {
        Returns::Text(_) => {
            let _ = writeln!(out, "    let bytes = {call}?;");
            let _ = writeln!(out, "    Ok(String::from_utf8_lossy(&bytes).into_owned())");
        }
        Returns::Media(kind) => {
            let (what, make) = if kind.starts_with("image/") {
                ("image", "image")
            } else {
                ("sound", "audio")
            };
            let _ = writeln!(out, "    let bytes = {call}?;");
            let _ = writeln!(
                out,
                "    let about = format!(\"The upstream's {what} ({}, {{}} bytes) follows.\", bytes.len());",
                kind
            );
            let _ = writeln!(
                out,
                "    Ok(fusion::WithMedia::new(about).with(fusion::Media::{make}(bytes, {})))",
                lit(kind)
            );
        }
        _ => {
            let _ = writeln!(out, "    {call}");
        }
    }
    let _ = writeln!(out, "}}\n");
}

/// The statements that put a direct tool's body in its request.
fn body_rs(tool: &Tool, out: &mut String) {
    let encoding = match &tool.body {
        Some(Body::Profile {
            argument, encoding, ..
        }) => {
            let _ = writeln!(
                out,
                "    request.group(fusion::upstream::Placement::Body, &{argument})?;"
            );
            encoding
        }
        Some(Body::Object {
            argument, encoding, ..
        }) => {
            let _ = writeln!(out, "    for (name, value) in &{argument} {{");
            let _ = writeln!(
                out,
                "        request.arg(fusion::upstream::Placement::Body, name, value)?;"
            );
            let _ = writeln!(out, "    }}");
            encoding
        }
        Some(Body::Whole {
            argument, optional, ..
        }) => {
            optional_rs(argument, *optional, out, |value| {
                format!("request.json_body(&{value})?;")
            });
            return;
        }
        Some(Body::Raw {
            argument,
            content_type,
            base64,
            optional,
            ..
        }) => {
            optional_rs(argument, *optional, out, |value| {
                if *base64 {
                    format!(
                        "request.base64_body({}, {}, &{value})?;",
                        lit(names::unraw(argument)),
                        lit(content_type)
                    )
                } else {
                    format!(
                        "request.bytes_body({}, {value}.into_bytes());",
                        lit(content_type)
                    )
                }
            });
            return;
        }
        None => return,
    };
    match encoding {
        Encoding::Json => {}
        Encoding::Form => {
            let _ = writeln!(
                out,
                "    request.set_encoding(fusion::upstream::BodyEncoding::Form);"
            );
        }
        Encoding::Multipart(files) => {
            let _ = writeln!(
                out,
                "    request.set_encoding(fusion::upstream::BodyEncoding::Multipart);"
            );
            if !files.is_empty() {
                let files: Vec<String> = files.iter().map(|name| lit(name)).collect();
                let _ = writeln!(out, "    request.file_fields(&[{}]);", files.join(", "));
            }
        }
    }
}

/// The statement `send` writes for a value, run on the argument, or on what it holds when it
/// is optional.
fn optional_rs(argument: &str, optional: bool, out: &mut String, send: impl Fn(&str) -> String) {
    if optional {
        let _ = writeln!(
            out,
            "    if let Some(value) = {argument} {{\n        {}\n    }}",
            send("value")
        );
    } else {
        let _ = writeln!(out, "    {}", send(argument));
    }
}

/// Helpers the direct tools call, each written only when a tool uses it.
fn helpers_rs(api: &Api, out: &mut String) {
    let several = api.tools.iter().any(|tool| {
        tool.segments.iter().any(|segment| {
            segment
                .iter()
                .filter(|piece| matches!(piece, Piece::Param(_)))
                .count()
                > 1
        })
    });
    if several {
        let _ = writeln!(
            out,
            r#"/// One parameter's part of a path segment that holds several: percent-encoded on its own,
/// so that it can neither end the segment nor take another parameter's place.
fn segment_part(name: &str, value: &dyn std::fmt::Display) -> Result<String, fusion::ToolError> {{
    fusion::upstream::encode_segment(&value.to_string()).map_err(|_| {{
        fusion::ToolError::new(
            fusion::codes::VALIDATION_ERROR,
            format!("`{{name}}` cannot be empty, `.` or `..`."),
        )
        .with_recovery(format!("Call again with a real `{{name}}`."))
    }})
}}
"#
        );
    }
    if api.tools.iter().any(|tool| tool.lookup.is_some()) {
        let _ = writeln!(
            out,
            r#"/// An upstream `NOT_FOUND` names the tool that lists valid identifiers.
fn look_up_with(error: fusion::ToolError, tool: &str) -> fusion::ToolError {{
    if error.code() == fusion::codes::NOT_FOUND {{
        error.with_recovery(format!(
            "Call `{{tool}}` to find a valid identifier, then call again with it."
        ))
    }} else {{
        error
    }}
}}
"#
        );
    }
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
        "//! Every tool is an HTTP call to the upstream: its arguments fill the route, the query and \
         the body; the upstream's base URL and credentials come from [`server`]'s caller, never \
         from an agent. Fields the document marks `writeOnly` or `format: password`, or that are \
         named like secrets, are hidden: they never reach an agent."
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
    if let Some((template, variables)) = &api.base_url_template {
        let defaults: Vec<String> = variables
            .iter()
            .map(|(name, default)| format!("({}, {})", lit(name), lit(default)))
            .collect();
        let _ = writeln!(
            out,
            r#"/// The document's server URL as written, with its variables' defaults: it has variables
/// or is relative, so it is no base URL by itself (see [`base_url_from_template`]).
pub const BASE_URL_TEMPLATE: (&str, &[(&str, &str)]) = ({}, &[{}]);

/// The base URL [`BASE_URL_TEMPLATE`] gives: each `{{variable}}` replaced by `value(variable)`
/// or else its default. `None` when the result is not an absolute `http(s)://` URL (a relative
/// server such as `/v1`: the base URL must then be given).
pub fn base_url_from_template(value: impl Fn(&str) -> Option<String>) -> Option<String> {{
    let (template, defaults) = BASE_URL_TEMPLATE;
    let mut url = template.to_owned();
    for (name, default) in defaults {{
        let chosen = value(name).unwrap_or_else(|| (*default).to_owned());
        url = url.replace(&format!("{{{{{{name}}}}}}"), &chosen);
    }}
    ((url.starts_with("https://") || url.starts_with("http://")) && !url.contains('{{'))
        .then_some(url)
}}
"#,
            lit(template),
            defaults.join(", ")
        );
    }
    if !api.common_headers.is_empty() {
        let headers: Vec<String> = api
            .common_headers
            .iter()
            .map(|(name, value)| format!("({}, {})", lit(name), lit(value)))
            .collect();
        let _ = writeln!(
            out,
            "/// Headers the document fixes for every operation (an API version): the upstream\n/// given to [`server`] must send them on every call.\npub const COMMON_HEADERS: &[(&str, &str)] = &[{}];\n",
            headers.join(", ")
        );
    }
    for model in &api.models {
        if model.presented || model.create || model.update {
            model_rs(model, &mut out);
        }
    }
    helpers_rs(api, &mut out);
    for tool in &api.tools {
        tool_rs(api, tool, &mut out);
    }
    let _ = writeln!(
        out,
        "/// The connector's server: every tool, calling `upstream`.\npub fn server(upstream: fusion::HttpUpstream) -> Result<fusion::Server, fusion::BuildError> {{"
    );
    let _ = writeln!(out, "    fusion::ServerBuilder::new(");
    let mut instructions = match &api.description {
        Some(description) => format!("{}: {description}", one_line(&api.title, 120)),
        None => one_line(&api.title, 120),
    };
    for rule in &api.rules {
        let _ = write!(instructions, "\n- {}", one_line(rule, 400));
    }
    let _ = writeln!(
        out,
        "        {}, {})",
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

/// `main.rs`'s credential: which environment variables set the upstream's authentication,
/// after the document's security schemes.
fn credential_rs(api: &Api) -> (String, String) {
    // A token scheme (bearer, OAuth 2, OpenID Connect) where the document has one, else its
    // API key header, else its API key query parameter.
    let token = api
        .auth
        .iter()
        .any(|auth| matches!(auth, Auth::Bearer | Auth::ClientCredentials(_)));
    let header = api.auth.iter().find_map(|auth| match auth {
        Auth::Header(name) if !token => Some(name.clone()),
        _ => None,
    });
    let query = api.auth.iter().find_map(|auth| match auth {
        Auth::Query(name) if !token && header.is_none() => Some(name.clone()),
        _ => None,
    });
    let mut doc = String::new();
    let code = match (&header, &query) {
        (None, Some(name)) => {
            let _ = write!(
                doc,
                "`API_TOKEN` is sent in the query parameter `{name}` of every call (the document's API key; `API_KEY_QUERY` names another parameter)"
            );
            format!(
                "upstream = upstream.query_credential(std::env::var(\"API_KEY_QUERY\").unwrap_or_else(|_| {}.to_owned()), token);",
                lit(name)
            )
        }
        (Some(name), _) => {
            let _ = write!(
                doc,
                "`API_TOKEN` is sent in the `{name}` header (the document's API key; `API_KEY_HEADER` names another header)"
            );
            format!(
                "upstream = upstream.header(std::env::var(\"API_KEY_HEADER\").unwrap_or_else(|_| {}.to_owned()), token);",
                lit(name)
            )
        }
        (None, None) => {
            let _ = write!(
                doc,
                "`API_TOKEN` is sent as a bearer token (or in the header `API_KEY_HEADER` names)"
            );
            "upstream = match std::env::var(\"API_KEY_HEADER\") {\n            Ok(header) => upstream.header(header, token),\n            Err(_) => upstream.bearer(token),\n        };".to_owned()
        }
    };
    for auth in &api.auth {
        match auth {
            Auth::ClientCredentials(url) => {
                let _ = write!(
                    doc,
                    "; for OAuth client credentials, `API_TOKEN` is an access token obtained from {url}"
                );
            }
            Auth::Bearer | Auth::Header(_) | Auth::Query(_) => {}
        }
    }
    (doc, code)
}

fn main_rs(api: &Api, lib: &str) -> String {
    let (credential_doc, credential) = credential_rs(api);
    let template = match &api.base_url_template {
        Some((url, _)) => format!(
            "the document's server `{url}`, its variables from API_SERVER_<NAME> or their defaults"
        ),
        None if api.base_url.is_some() => "the document's server".to_owned(),
        None => "none: the document names no server".to_owned(),
    };
    let fallback = if api.base_url_template.is_some() {
        format!(
            "\n        .or_else(|| {{\n            {lib}::base_url_from_template(|name| {{\n                std::env::var(format!(\"API_SERVER_{{}}\", name.to_uppercase())).ok()\n            }})\n        }})"
        )
    } else {
        String::new()
    };
    format!(
        r#"//! Serves the {title} connector over stdio (the default) or Streamable HTTP.
//!
//! Run with `cargo run -- [--base-url URL] [--http ADDRESS]`. The upstream's credentials come
//! from the environment, never from the command line nor from an agent: {credential_doc}.
//! Over HTTP, clients present the bearer token in `MCP_TOKEN`. `--version` prints the version,
//! and for a build made by `cargo fusion bundle` its content hash and lockfile digest.

use std::time::Duration;

const USAGE: &str = "usage: {lib} [--base-url URL] [--http ADDRESS] [--version]
  --base-url URL    the upstream API (or API_BASE_URL; default: {template})
  --http ADDRESS    serve Streamable HTTP on ADDRESS (such as 127.0.0.1:8080) instead of stdio
  --version         print the version (and the bundle's hash and lockfile digest)
environment: API_TOKEN (upstream credential), {key_variable},
MCP_TOKEN (the token HTTP clients present)";

/// The upstream at `base_url`, with the credential from the environment.
fn upstream(base_url: &str) -> Result<fusion::HttpUpstream, fusion::upstream::UpstreamConfigError> {{
    let mut upstream = fusion::HttpUpstream::builder(base_url).timeout(Duration::from_secs(30));{common_headers}
    if let Ok(token) = std::env::var("API_TOKEN") {{
        {credential}
    }}
    upstream.build()
}}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {{
    let mut base_url = std::env::var("API_BASE_URL").ok();
    let mut http: Option<std::net::SocketAddr> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {{
        match arg.as_str() {{
            "--base-url" => base_url = Some(args.next().ok_or("--base-url needs a URL")?),
            "--http" => http = Some(args.next().ok_or("--http needs an address")?.parse()?),
            "--version" | "-V" => {{
                println!("{{}}", version_line());
                return Ok(());
            }}
            "--help" | "-h" => {{
                println!("{{USAGE}}");
                return Ok(());
            }}
            other => return Err(format!("unknown argument `{{other}}`
{{USAGE}}").into()),
        }}
    }}
    let base_url = base_url
        .or_else(|| {lib}::DEFAULT_BASE_URL.map(str::to_owned)){fallback}
        .ok_or("no base URL: pass --base-url or set API_BASE_URL")?;
    let server = {lib}::server(upstream(&base_url)?)?;
    let mcp = fusion::serve::Mcp::new(server);
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

/// `NAME VERSION`, then the bundle's content hash and lockfile digest when there are some.
fn version_line() -> String {{
    let mut line = format!("{{}} {{}}", env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"));
    if let Some(bundle) = fusion::serve::Bundle::built() {{
        line.push_str(&format!(" bundle {{}}", bundle.hash()));
        if let Some(lock) = bundle.lock() {{
            line.push_str(&format!(" lock {{lock}}"));
        }}
    }}
    line
}}
"#,
        title = one_line(&api.title, 120),
        key_variable = if credential.contains("API_KEY_QUERY") {
            "API_KEY_QUERY (send API_TOKEN in this query parameter)"
        } else {
            "API_KEY_HEADER (send API_TOKEN in this header)"
        },
        common_headers = if api.common_headers.is_empty() {
            String::new()
        } else {
            format!(
                "\n    for (name, value) in {lib}::COMMON_HEADERS {{\n        upstream = upstream.header(*name, *value);\n    }}"
            )
        },
    )
}

fn readme(api: &Api, name: &str) -> String {
    let mut out = format!(
        "# {name}\n\nAn MCP connector for {} ({}), generated by fusion-openapi. Its tools are \
         `{ns}.<tool>` in its code and `fusion.lock`, and agents call them `{ns}_<tool>`.\n\n```sh\nAPI_TOKEN=... cargo run -- --base-url https://api.example.com\n```\n\n\
         The base URL is `--base-url`, else `API_BASE_URL`, else {}.\n\n## Report\n\n",
        one_line(&api.title, 120),
        one_line(&api.version, 40),
        match &api.base_url_template {
            Some((url, _)) => format!(
                "the document's server `{url}` with each `{{variable}}` from `API_SERVER_<VARIABLE>` (upper case) or its default"
            ),
            None => match &api.base_url {
                Some(url) => format!("the document's server `{url}`"),
                None =>
                    "nothing: the document names no server, so one of them is required".to_owned(),
            },
        },
        ns = api.namespace,
    );
    for line in api.report.to_string().lines() {
        let _ = writeln!(out, "- {line}");
    }
    out
}

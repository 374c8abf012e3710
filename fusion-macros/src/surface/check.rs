//! The rules of a resource or prompt, one function each. They all run, so that every mistake is
//! reported in one go; what passes is the checked item that `expand` turns into code.

use darling::{Error, Result};
use syn::{FnArg, Ident, ItemFn, LitStr, Pat, ReturnType, Signature, Type};

use super::Kind;
use super::parse::{Surface, SurfaceArgs};
use crate::common::{check_key, check_scopes, docs, not_guarded};
use crate::paths::Krate;

/// A parameter: its name is the argument's name (or the template variable's).
pub(super) struct Param<'a> {
    pub(super) ident: &'a Ident,
    pub(super) ty: &'a Type,
    pub(super) doc: Option<String>,
    /// `#[not_guarded("why")]`: named like a guarded field, but not that field.
    pub(super) not_guarded: Option<LitStr>,
}

/// A resource or prompt that follows every rule.
pub(super) struct Checked<'a> {
    pub(super) kind: Kind,
    pub(super) function: &'a ItemFn,
    pub(super) args: &'a SurfaceArgs,
    pub(super) krate: &'a Krate,
    pub(super) key: String,
    pub(super) description: String,
    pub(super) params: Vec<Param<'a>>,
    pub(super) output: &'a Type,
    /// A resource's URI template variables (none for a prompt).
    pub(super) variables: Vec<String>,
}

/// The checked item, or `None` when a rule fails (its error is in `errors`).
pub(super) fn check<'a>(
    surface: &'a Surface,
    errors: &mut darling::error::Accumulator,
) -> Option<Checked<'a>> {
    let kind = surface.kind;
    let sig = &surface.function.sig;
    let args = surface.args.as_ref();
    errors.handle(check_async(kind, sig));
    errors.handle(check_not_generic(kind, sig));
    errors.handle(check_free_function(kind, sig));
    let params = errors.handle(check_plain_parameters(kind, sig));
    let output = errors.handle(check_return_type(kind, sig));
    let mut key = None;
    let mut description = None;
    let mut template_variables = Vec::new();
    if let Some(args) = args {
        key = errors.handle(check_key_syntax(args, sig));
        description = errors.handle(check_description(kind, args, &surface.function));
        errors.handle(check_keys_of_the_kind(kind, args));
        errors.handle(check_scopes(&args.scopes));
        if kind == Kind::Resource {
            let variables = errors.handle(check_uri(args, sig));
            errors.handle(check_cache(args));
            if let (Some(variables), Some(params)) = (&variables, &params) {
                errors.handle(check_variables_are_arguments(args, variables, params));
                errors.handle(check_completions(kind, args, variables));
            }
            template_variables = variables.unwrap_or_default();
        } else if let Some(params) = &params {
            let names: Vec<String> = params.iter().map(|param| unraw(param.ident)).collect();
            errors.handle(check_completions(kind, args, &names));
        }
    }
    Some(Checked {
        kind,
        function: &surface.function,
        args: args?,
        krate: &args?.krate,
        key: key?,
        description: description?,
        params: params?,
        output: output?,
        variables: template_variables,
    })
}

fn unraw(ident: &Ident) -> String {
    ident.to_string().trim_start_matches("r#").to_owned()
}

// A resource or prompt is awaited by the runtime: it is an `async fn`.
fn check_async(kind: Kind, sig: &Signature) -> Result<()> {
    match sig.asyncness {
        Some(_) => Ok(()),
        None => {
            Err(Error::custom(format!("a {} is an `async fn`", kind.noun()))
                .with_span(&sig.fn_token))
        }
    }
}

// One declaration, one dispatch entry: it cannot be generic.
fn check_not_generic(kind: Kind, sig: &Signature) -> Result<()> {
    if sig.generics.params.is_empty() {
        Ok(())
    } else {
        Err(Error::custom(format!("a {} cannot be generic", kind.noun())).with_span(&sig.generics))
    }
}

// The runtime calls it with its arguments only: a free function, not a method.
fn check_free_function(kind: Kind, sig: &Signature) -> Result<()> {
    match sig.receiver() {
        None => Ok(()),
        Some(receiver) => Err(Error::custom(format!(
            "a {} is a free function, not a method",
            kind.noun()
        ))
        .with_span(receiver)),
    }
}

// Each parameter is a plain name (`id: String`): the name is the argument's name.
fn check_plain_parameters(kind: Kind, sig: &Signature) -> Result<Vec<Param<'_>>> {
    let mut errors = Error::accumulator();
    let mut params = Vec::new();
    for input in &sig.inputs {
        let FnArg::Typed(typed) = input else { continue };
        match &*typed.pat {
            Pat::Ident(pat) if pat.subpat.is_none() && pat.by_ref.is_none() => {
                let not_guarded = errors.handle(not_guarded(&typed.attrs)).flatten();
                params.push(Param {
                    ident: &pat.ident,
                    ty: &typed.ty,
                    doc: docs(&typed.attrs),
                    not_guarded,
                })
            }
            other => errors.push(
                Error::custom(format!(
                    "{} parameters are plain names (`id: String`): the name is the argument's name",
                    kind.noun()
                ))
                .with_span(other),
            ),
        }
    }
    errors.finish_with(params)
}

// It says how it went: it returns `Result<T, E>`, so it has a return type.
fn check_return_type(kind: Kind, sig: &Signature) -> Result<&Type> {
    match &sig.output {
        ReturnType::Type(_, ty) => Ok(ty),
        ReturnType::Default => Err(Error::custom(format!(
            "a {} returns `Result<T, E>`: add a return type",
            kind.noun()
        ))
        .with_span(&sig.ident)),
    }
}

// The key is `namespace.name` or `name`, as a tool's; without `name`, the function's name.
fn check_key_syntax(args: &SurfaceArgs, sig: &Signature) -> Result<String> {
    match &args.name {
        Some(name) => check_key(name).map(|()| name.value()),
        None => Ok(unraw(&sig.ident)),
    }
}

// A client shows the description to choose: `description = "…"` or the doc comment.
fn check_description(kind: Kind, args: &SurfaceArgs, function: &ItemFn) -> Result<String> {
    args.description
        .as_ref()
        .map(LitStr::value)
        .or_else(|| docs(&function.attrs))
        .ok_or_else(|| {
            Error::custom(format!(
                "a {} needs a description: add a doc comment (`/// …`) to the function",
                kind.noun()
            ))
            .with_span(&function.sig.ident)
        })
}

// `uri`, `returns`, `mime` and `cache` describe a resource; `uses` a prompt.
fn check_keys_of_the_kind(kind: Kind, args: &SurfaceArgs) -> Result<()> {
    let mut errors = Error::accumulator();
    match kind {
        Kind::Prompt => {
            if let Some(uri) = &args.uri {
                errors.push(
                    Error::custom("a prompt has no `uri`; did you mean `#[resource]`?")
                        .with_span(uri),
                );
            }
            if let Some(returns) = &args.returns {
                errors.push(
                    Error::custom("a prompt returns messages; name the presenters of its data with `uses = …`")
                        .with_span(returns),
                );
            }
            if let Some(mime) = &args.mime {
                errors.push(Error::custom("a prompt has no `mime`").with_span(mime));
            }
            if let Some(cache) = &args.cache {
                errors.push(Error::custom("a prompt has no `cache`").with_span(cache));
            }
        }
        Kind::Resource => {
            if let Some(uses) = args.uses.0.first() {
                errors.push(
                    Error::custom("a resource's data goes through `returns = Presenter`")
                        .with_span(uses),
                );
            }
        }
    }
    errors.finish()
}

// A resource has a URI, fixed (`billing://summary`) or an RFC 6570 level 1 template
// (`billing://invoices/{id}`): simple variables only, none twice, never two in a row.
fn check_uri(args: &SurfaceArgs, sig: &Signature) -> Result<Vec<String>> {
    let Some(uri) = &args.uri else {
        return Err(Error::custom(
            "a resource has a URI: `#[resource(uri = \"scheme://path/{variable}\")]`",
        )
        .with_span(&sig.ident));
    };
    let text = uri.value();
    if !text.contains("://") {
        return Err(Error::custom("expected a URI: `scheme://…`").with_span(uri));
    }
    let mut variables = Vec::new();
    let mut rest = text.as_str();
    let mut previous_was_variable = false;
    while !rest.is_empty() {
        let Some(start) = rest.find(['{', '}']) else {
            break;
        };
        if &rest[start..=start] == "}" {
            return Err(Error::custom("unmatched `}` in the URI template").with_span(uri));
        }
        previous_was_variable &= start == 0;
        let after = &rest[start + 1..];
        let Some(end) = after.find('}') else {
            return Err(Error::custom("unmatched `{` in the URI template").with_span(uri));
        };
        let name = &after[..end];
        let simple = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        if !simple {
            return Err(Error::custom(format!(
                "`{{{name}}}` is not a simple variable: only `{{name}}` is supported (no operators, no lists)"
            ))
            .with_span(uri));
        }
        if previous_was_variable {
            return Err(Error::custom(
                "two variables follow each other in the URI template: neither can be told apart",
            )
            .with_span(uri));
        }
        if variables.iter().any(|known| known == name) {
            return Err(
                Error::custom(format!("the URI template names `{{{name}}}` twice")).with_span(uri),
            );
        }
        variables.push(name.to_owned());
        previous_was_variable = true;
        rest = &after[end + 1..];
    }
    Ok(variables)
}

// A template's variables are the function's arguments: `{id}` is read into parameter `id`.
fn check_variables_are_arguments(
    args: &SurfaceArgs,
    variables: &[String],
    params: &[Param<'_>],
) -> Result<()> {
    let mut errors = Error::accumulator();
    for variable in variables {
        if !params.iter().any(|param| unraw(param.ident) == *variable) {
            errors.push(
                Error::custom(format!(
                    "URI template variable `{{{variable}}}` has no matching argument: add a parameter `{variable}`"
                ))
                .with_span(args.uri.as_ref().expect("checked before")),
            );
        }
    }
    errors.finish()
}

// `cache` is `immutable` or `volatile`.
fn check_cache(args: &SurfaceArgs) -> Result<()> {
    match &args.cache {
        Some(cache) if cache != "immutable" && cache != "volatile" => {
            Err(Error::custom("`cache` is `immutable` or `volatile`").with_span(cache))
        }
        _ => Ok(()),
    }
}

// A completion completes one of the arguments (a resource: one of its template's variables).
fn check_completions(kind: Kind, args: &SurfaceArgs, names: &[String]) -> Result<()> {
    let mut errors = Error::accumulator();
    for (name, _) in &args.complete.0 {
        if !names.iter().any(|known| known == &name.to_string()) {
            let what = match kind {
                Kind::Resource => "a variable of the URI template",
                Kind::Prompt => "an argument of the prompt",
            };
            errors.push(Error::custom(format!("`{name}` is not {what}")).with_span(name));
        }
    }
    errors.finish()
}

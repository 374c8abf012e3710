//! The resources and prompts of a server, compiled once when it is built (SPEC T4): their
//! definitions as listed, URI templates, argument layouts, the parts of each error that never
//! change, and the tables that find them. [`content`](crate::content) runs their requests.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use rmcp::model::{
    JsonObject, Prompt as PromptDefinition, PromptArgument, Resource as ResourceDefinition,
    ResourceTemplate,
};
use serde_json::Value;

use crate::action::{ActionFacts, Surface};
use crate::args::ArgLayout;
use crate::complete::CompletionFn;
use crate::context::ServerParts;
use crate::envelope::SealedParts;
use crate::guarded::{GuardedInput, GuardedNames, InputSurface};
use crate::key::ToolKey;
use crate::middleware::Middleware;
use crate::present::PresenterInfo;
use crate::prompt::{PromptFacts, PromptHandler, PromptSpec};
use crate::resource::template::UriTemplate;
use crate::resource::{ResourceFacts, ResourceSpec};
use crate::spec::Handler;

/// The compiled resources and prompts of a server.
#[derive(Default)]
pub(crate) struct Content {
    pub(crate) resources: Vec<CompiledResource>,
    pub(crate) by_uri: HashMap<String, usize>,
    /// Indices of the templated resources, in registration order (matched in that order).
    pub(crate) templates: Vec<usize>,
    pub(crate) prompts: Vec<CompiledPrompt>,
    pub(crate) by_prompt_name: HashMap<String, usize>,
}

pub(crate) struct CompiledResource {
    pub(crate) facts: ResourceFacts,
    pub(crate) template: Option<UriTemplate>,
    pub(crate) handler: Arc<dyn Handler>,
    pub(crate) layout: ArgLayout,
    pub(crate) completions: HashMap<String, CompletionFn>,
    /// Serves text as it is (a handler returning a `String` with a non-JSON MIME type).
    pub(crate) raw_text: bool,
    /// Serves bytes as one `blob` content (a handler returning a `Blob`).
    pub(crate) binary: bool,
    pub(crate) sealed: SealedParts,
    pub(crate) definition: Definition,
    /// What middleware and reports see: a read under the resource's key.
    pub(crate) action: ActionFacts,
    /// The server's middleware.
    pub(crate) middleware: Box<[Arc<dyn Middleware>]>,
}

pub(crate) enum Definition {
    Fixed(ResourceDefinition),
    Template(ResourceTemplate),
}

pub(crate) struct CompiledPrompt {
    pub(crate) facts: PromptFacts,
    pub(crate) handler: PromptHandler,
    pub(crate) layout: ArgLayout,
    pub(crate) completions: HashMap<String, CompletionFn>,
    pub(crate) sealed: SealedParts,
    pub(crate) definition: PromptDefinition,
    /// What middleware and reports see: a read under the prompt's key.
    pub(crate) action: ActionFacts,
    /// The server's middleware.
    pub(crate) middleware: Box<[Arc<dyn Middleware>]>,
}

/// What compiling resources and prompts needs of the server: its state and middleware (whose
/// provided types their handlers may take), its version and default timeout.
pub(crate) struct ContentContext<'a> {
    pub(crate) parts: ServerParts,
    pub(crate) middleware: &'a [Arc<dyn Middleware>],
    pub(crate) version: &'a str,
    pub(crate) timeout: Option<std::time::Duration>,
    /// The guarded fields of every model the server knows.
    pub(crate) guarded: &'a Arc<GuardedNames>,
}

/// The keys of the resources and prompts to compile, for checks that need every key (globs).
pub(crate) fn keys_of(resources: &[ResourceSpec], prompts: &[PromptSpec]) -> Vec<ToolKey> {
    resources
        .iter()
        .filter_map(|spec| spec.key.clone().ok())
        .chain(prompts.iter().filter_map(|spec| spec.key.clone().ok()))
        .collect()
}

/// The request paths of resources and prompts (`content::ContentPaths`), opaque here: the
/// builder and the server carry them without importing `content`, which imports them.
#[derive(Clone, Copy)]
pub(crate) struct ContentHook(pub(crate) &'static (dyn std::any::Any + Send + Sync));

/// Compiles the resources and prompts; every problem is pushed to `problems`.
pub(crate) fn compile(
    resources: Vec<ResourceSpec>,
    prompts: Vec<PromptSpec>,
    context: &ContentContext<'_>,
    tool_keys: &[ToolKey],
    problems: &mut Vec<String>,
    guarded_inputs: &mut Vec<GuardedInput>,
) -> Content {
    let mut content = Content::default();
    let mut keys: Vec<String> = tool_keys
        .iter()
        .map(|key| key.as_str().to_owned())
        .collect();
    for spec in resources {
        let Some(resource) = compile_resource(spec, context, problems, guarded_inputs) else {
            continue;
        };
        let key = resource.facts.key.as_str().to_owned();
        if keys.contains(&key) {
            problems.push(format!("two tools, resources or prompts are named `{key}`"));
            continue;
        }
        keys.push(key);
        let index = content.resources.len();
        if resource.template.is_some() {
            if content
                .resources
                .iter()
                .any(|other| other.facts.uri == resource.facts.uri)
            {
                problems.push(format!(
                    "two resources have the URI template `{}`",
                    resource.facts.uri
                ));
            }
            content.templates.push(index);
        } else if content
            .by_uri
            .insert(resource.facts.uri.clone(), index)
            .is_some()
        {
            problems.push(format!(
                "two resources have the URI `{}`",
                resource.facts.uri
            ));
        }
        content.resources.push(resource);
    }
    for spec in prompts {
        let Some(prompt) = compile_prompt(spec, context, problems, guarded_inputs) else {
            continue;
        };
        let key = prompt.facts.key.as_str().to_owned();
        if keys.contains(&key) {
            problems.push(format!("two tools, resources or prompts are named `{key}`"));
            continue;
        }
        keys.push(key);
        if content
            .by_prompt_name
            .insert(prompt.facts.name.clone(), content.prompts.len())
            .is_some()
        {
            problems.push(format!("two prompts are listed as `{}`", prompt.facts.name));
        }
        content.prompts.push(prompt);
    }
    content
}

fn compile_resource(
    spec: ResourceSpec,
    context: &ContentContext<'_>,
    problems: &mut Vec<String>,
    guarded_inputs: &mut Vec<GuardedInput>,
) -> Option<CompiledResource> {
    let before = problems.len();
    let ResourceSpec {
        key,
        uri,
        description,
        title,
        mime_type,
        cache,
        toolset,
        scopes,
        params,
        data_schema,
        presenter,
        handler,
        completions,
    } = spec;
    let key = match key {
        Ok(key) => key,
        Err(problem) => {
            problems.push(format!("invalid resource name {problem}"));
            return None;
        }
    };
    let Some(handler) = handler else {
        problems.push(format!("resource `{key}` has no handler"));
        return None;
    };
    if description.trim().is_empty() {
        problems.push(format!("resource `{key}` has no description for the agent"));
    }
    let scopes = checked_scopes("resource", &key, scopes, problems);
    if !uri.contains("://") {
        problems.push(format!(
            "resource `{key}`: `{uri}` is not a URI (`scheme://…`)"
        ));
    }
    let template = match UriTemplate::parse(&uri) {
        Ok(template) => template,
        Err(problem) => {
            problems.push(format!("resource `{key}`: {problem}"));
            None
        }
    };
    params.check_context(&context.parts, problems, key.as_str());
    let mut input_schema = params.input_schema(problems);
    let not_guarded = check_guarded(
        &mut input_schema,
        &params,
        InputSurface::ResourceVariable,
        &key,
        completions.iter().map(|(name, _)| name.as_ref()),
        context.guarded,
        problems,
        guarded_inputs,
    );
    let properties: Vec<String> = input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| properties.keys().cloned().collect())
        .unwrap_or_default();
    let variables: Vec<String> = template
        .as_ref()
        .map(|template| template.variables().map(str::to_owned).collect())
        .unwrap_or_default();
    for variable in &variables {
        if !properties.contains(variable) {
            problems.push(format!(
                "resource `{key}`: URI template variable `{{{variable}}}` has no matching argument"
            ));
        }
    }
    for property in &properties {
        if !variables.contains(property) {
            problems.push(format!(
                "resource `{key}` takes argument `{property}`, which its URI `{uri}` does not provide"
            ));
        }
    }
    for (variable, _) in &completions {
        if !variables.iter().any(|name| name == variable) {
            problems.push(format!(
                "resource `{key}` completes `{variable}`, which is not a variable of `{uri}`"
            ));
        }
    }
    // With the definitions it uses, so that the lockfile describes it whole.
    let data = data_schema.map(|schema| {
        let mut generator = crate::schema::output_generator();
        let mut data = schema(&mut generator).to_value();
        let definitions = generator.take_definitions(true);
        if let Value::Object(keywords) = &mut data
            && !definitions.is_empty()
        {
            keywords.insert("$defs".into(), Value::Object(definitions));
        }
        data
    });
    // Bytes are read as one binary content.
    let binary = data.as_ref().is_some_and(crate::media::is_blob_schema);
    let raw_text = !binary
        && data
            .as_ref()
            .is_some_and(|data| data.get("type") == Some(&Value::from("string")));
    let mime_type = mime_type.map(Cow::into_owned).unwrap_or_else(|| {
        if binary {
            "application/octet-stream".to_owned()
        } else if raw_text {
            "text/plain".to_owned()
        } else {
            "application/json".to_owned()
        }
    });
    let raw_text = raw_text && !mime_type.contains("json");
    let input_schema = Arc::new(input_schema);
    let mut layout = match params.layout(Arc::new(Value::Object((*input_schema).clone()))) {
        Ok(layout) => layout,
        Err(problem) => {
            problems.push(format!("resource `{key}`: {problem}"));
            return None;
        }
    };
    layout.refuse_undeclared_guarded(context.guarded);
    if problems.len() > before {
        return None;
    }
    let description = description.into_owned();
    let title = title.map(Cow::into_owned);
    let name = key.as_str().to_owned();
    let definition = if template.is_some() {
        let mut definition = ResourceTemplate::new(uri.as_ref(), name)
            .with_description(description.clone())
            .with_mime_type(mime_type.clone());
        if let Some(title) = &title {
            definition = definition.with_title(title.clone());
        }
        Definition::Template(definition)
    } else {
        let mut definition = ResourceDefinition::new(uri.as_ref(), name)
            .with_description(description.clone())
            .with_mime_type(mime_type.clone());
        if let Some(title) = &title {
            definition = definition.with_title(title.clone());
        }
        Definition::Fixed(definition)
    };
    let sealed = SealedParts::for_tool(key.as_str());
    let sealed = SealedParts {
        rules_block: presenter
            .as_ref()
            .map(PresenterInfo::all_rules)
            .filter(|rules| !rules.is_empty())
            .map(|rules| crate::envelope::rules_block(&rules)),
        ..sealed
    };
    let action = ActionFacts::for_content(
        Surface::Resource,
        key.clone(),
        key.as_str(),
        &description,
        title.as_deref(),
        toolset.as_deref(),
        Arc::clone(&input_schema),
        presenter.clone(),
        context.timeout,
        context.version,
    );
    Some(CompiledResource {
        action,
        middleware: context.middleware.into(),
        facts: ResourceFacts {
            key,
            uri: uri.into_owned(),
            description,
            title,
            mime_type,
            cache,
            toolset: toolset.map(Cow::into_owned),
            scopes,
            presenter,
            input_schema,
            data_schema: data.unwrap_or(Value::Null),
            variables,
            not_guarded,
        },
        template,
        handler,
        layout,
        completions: completions
            .into_iter()
            .map(|(name, complete)| (name.into_owned(), complete))
            .collect(),
        raw_text,
        binary,
        sealed,
        definition,
    })
}

/// The scopes a resource or prompt declares, each an OAuth scope token (or a problem).
fn checked_scopes(
    kind: &str,
    key: &ToolKey,
    scopes: Vec<Cow<'static, str>>,
    problems: &mut Vec<String>,
) -> Vec<String> {
    scopes
        .into_iter()
        .filter(|scope| {
            let token = crate::scope_token::is_scope_token(scope);
            if !token {
                problems.push(format!(
                    "{kind} `{key}` requires scope `{scope}`, which is not an OAuth scope token (printable ASCII without spaces, `\"` or `\\`)"
                ));
            }
            token
        })
        .map(Cow::into_owned)
        .collect()
}

fn compile_prompt(
    spec: PromptSpec,
    context: &ContentContext<'_>,
    problems: &mut Vec<String>,
    guarded_inputs: &mut Vec<GuardedInput>,
) -> Option<CompiledPrompt> {
    let before = problems.len();
    let PromptSpec {
        key,
        description,
        title,
        toolset,
        scopes,
        params,
        presenters,
        handler,
        completions,
    } = spec;
    let key = match key {
        Ok(key) => key,
        Err(problem) => {
            problems.push(format!("invalid prompt name {problem}"));
            return None;
        }
    };
    let Some(handler) = handler else {
        problems.push(format!("prompt `{key}` has no handler"));
        return None;
    };
    if description.trim().is_empty() {
        problems.push(format!("prompt `{key}` has no description"));
    }
    let scopes = checked_scopes("prompt", &key, scopes, problems);
    params.check_context(&context.parts, problems, key.as_str());
    let mut input_schema = params.input_schema(problems);
    let not_guarded = check_guarded(
        &mut input_schema,
        &params,
        InputSurface::PromptArgument,
        &key,
        completions.iter().map(|(name, _)| name.as_ref()),
        context.guarded,
        problems,
        guarded_inputs,
    );
    let required: Vec<&str> = input_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|required| required.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let arguments: Vec<PromptArgument> = input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .map(|(name, property)| {
                    let mut argument = PromptArgument::new(name.clone())
                        .with_required(required.contains(&name.as_str()));
                    if let Some(description) = property.get("description").and_then(Value::as_str) {
                        argument = argument.with_description(description);
                    }
                    argument
                })
                .collect()
        })
        .unwrap_or_default();
    for (argument, _) in &completions {
        if !arguments.iter().any(|listed| listed.name == *argument) {
            problems.push(format!(
                "prompt `{key}` completes `{argument}`, which is not one of its arguments"
            ));
        }
    }
    let input_schema = Arc::new(input_schema);
    let mut layout = match params.layout(Arc::new(Value::Object((*input_schema).clone()))) {
        Ok(layout) => layout,
        Err(problem) => {
            problems.push(format!("prompt `{key}`: {problem}"));
            return None;
        }
    };
    layout.refuse_undeclared_guarded(context.guarded);
    if problems.len() > before {
        return None;
    }
    let name = key.flat_name();
    let description = description.into_owned();
    let title = title.map(Cow::into_owned);
    let mut definition = PromptDefinition::new(
        name.clone(),
        Some(description.clone()),
        (!arguments.is_empty()).then(|| arguments.clone()),
    );
    if let Some(title) = &title {
        definition = definition.with_title(title.clone());
    }
    let action = ActionFacts::for_content(
        Surface::Prompt,
        key.clone(),
        &name,
        &description,
        title.as_deref(),
        toolset.as_deref(),
        Arc::clone(&input_schema),
        None,
        context.timeout,
        context.version,
    );
    Some(CompiledPrompt {
        action,
        middleware: context.middleware.into(),
        sealed: SealedParts::for_tool(&name),
        facts: PromptFacts {
            key,
            name,
            description,
            title,
            toolset: toolset.map(Cow::into_owned),
            scopes,
            arguments,
            presenters,
            input_schema,
            not_guarded,
        },
        handler,
        layout,
        completions: completions
            .into_iter()
            .map(|(name, complete)| (name.into_owned(), complete))
            .collect(),
        definition,
    })
}

/// Refuses the arguments (or template variables) of a resource or prompt named like a guarded
/// field, and the completions of those arguments; returns the statements of those that are not.
#[allow(clippy::too_many_arguments)]
fn check_guarded<'c>(
    input_schema: &mut JsonObject,
    params: &crate::args::Params,
    surface: InputSurface,
    key: &ToolKey,
    completed: impl Iterator<Item = &'c str>,
    guarded: &GuardedNames,
    problems: &mut Vec<String>,
    guarded_inputs: &mut Vec<GuardedInput>,
) -> BTreeMap<String, String> {
    let mut scan = crate::guarded::scan(input_schema, guarded, surface, key.as_str(), &|name| {
        params.reserved_by_a_group(name)
    });
    // A completion offers values for an argument: one named like a guarded field is a second
    // route for its value (the completion function receives what the user typed).
    for argument in completed {
        if let Some((model, field)) = guarded.find(argument)
            && !scan.stated.contains_key(argument)
        {
            scan.found.push(GuardedInput {
                surface: InputSurface::CompletionArgument,
                owner: key.as_str().to_owned(),
                path: argument.to_owned(),
                model,
                field,
            });
        }
    }
    scan.report(problems);
    guarded_inputs.extend(scan.found);
    scan.stated
}

impl Content {
    pub(crate) fn has_resources(&self) -> bool {
        !self.resources.is_empty()
    }

    pub(crate) fn has_prompts(&self) -> bool {
        !self.prompts.is_empty()
    }

    pub(crate) fn has_completions(&self) -> bool {
        self.resources
            .iter()
            .any(|resource| !resource.completions.is_empty())
            || self
                .prompts
                .iter()
                .any(|prompt| !prompt.completions.is_empty())
    }

    /// The resource that serves `uri` and its template's variables.
    pub(crate) fn resolve(&self, uri: &str) -> Option<(&CompiledResource, Vec<(String, String)>)> {
        if let Some(&index) = self.by_uri.get(uri) {
            return Some((&self.resources[index], Vec::new()));
        }
        self.templates.iter().find_map(|&index| {
            let resource = &self.resources[index];
            let values = resource.template.as_ref()?.matches(uri)?;
            Some((resource, values))
        })
    }
}

//! Compiling one action (SPEC T4): its checks against its verb and the rest of the server,
//! and the parts of its answers computed once, before the first request.

use std::any::TypeId;
use std::sync::Arc;

use rmcp::model::{JsonObject, ToolAnnotations};
use serde_json::Value;

use crate::action::{ActionFacts, Exposition, Exposure, Verb};
use crate::audit::AuditEntry;
use crate::context::{ServerParts, StateMap};
use crate::envelope::SealedParts;
use crate::guard::{ConcurrencyGuard, RateLimiter, SerialGuard, Serialization};
use crate::guarded::{GuardedInput, GuardedNames, InputSurface};
use crate::key::ToolKey;
use crate::middleware::Middleware;
use crate::schema;
use crate::server::CompiledAction;
use crate::spec::ToolSpec;

/// What compiling an action needs to know about the rest of the server.
pub(super) struct CompileContext<'a> {
    pub(super) all_keys: &'a [ToolKey],
    /// The keys of the resources and prompts.
    pub(super) content_keys: &'a [ToolKey],
    pub(super) state: &'a StateMap,
    pub(super) server_middleware: &'a [Arc<dyn Middleware>],
    pub(super) server_version: &'a str,
    pub(super) max_bytes: Option<usize>,
    pub(super) max_tokens: Option<usize>,
    pub(super) data_text: crate::action::DataText,
    pub(super) default_timeout: Option<std::time::Duration>,
    pub(super) serialization_lock: Option<&'a Arc<dyn crate::guard::SerializationLock>>,
    /// The guarded fields of every model the server knows.
    pub(super) guarded: &'a Arc<GuardedNames>,
}

/// How an action is exposed: in grouped exposition, a namespaced key is an action of its
/// namespace's tool and a bare key a tool of its own.
pub(super) fn exposure_of(key: &ToolKey, exposition: Exposition) -> Exposure {
    match (exposition, key.namespace()) {
        (Exposition::Grouped, Some(namespace)) => Exposure::Grouped {
            tool: Arc::from(namespace),
            action: Arc::from(key.action()),
        },
        (Exposition::Grouped, None) => Exposure::Tool(Arc::from(key.action())),
        (Exposition::Flat, _) => Exposure::Tool(Arc::from(key.flat_name())),
    }
}

/// Checks one tool against its verb and the rest of the server, and precomputes its parts.
pub(super) fn compile_action(
    key: ToolKey,
    exposure: Exposure,
    spec: ToolSpec,
    context: &CompileContext<'_>,
    problems: &mut Vec<String>,
    guarded_inputs: &mut Vec<GuardedInput>,
) -> Option<CompiledAction> {
    let all_keys = context.all_keys;
    let before = problems.len();
    let ToolSpec {
        key: _,
        verb,
        description,
        title,
        tags,
        scopes,
        invalidates,
        cache,
        idempotent,
        destructive,
        open_world,
        version,
        params,
        data_schema,
        paged,
        presenter,
        error_actions,
        recovery_tools: _,
        handler,
        middleware,
        concurrency,
        serialization,
        max_bytes,
        max_tokens,
        data_text,
        toolset,
        timeout,
        ask_timeout,
        rate_limit,
        task,
        // Taken by the server when it is built.
        task_service: _,
        problems: declared,
    } = spec;
    for problem in declared {
        problems.push(format!("tool `{key}`: {problem}"));
    }
    let Some(handler) = handler else {
        problems.push(format!("tool `{key}` has no handler"));
        return None;
    };
    let Some(data_schema) = data_schema else {
        problems.push(format!("tool `{key}` has no output"));
        return None;
    };
    if description.trim().is_empty() {
        problems.push(format!("tool `{key}` has no description for the agent"));
    }
    if cache.is_some() && verb != Verb::Query {
        problems.push(format!(
            "tool `{key}` is a {}: only queries declare `cache`",
            verb.as_str()
        ));
    }
    if !invalidates.is_empty() && verb == Verb::Query {
        problems.push(format!(
            "tool `{key}` is a query: a read cannot invalidate anything"
        ));
    }
    for scope in &scopes {
        if !crate::scope_token::is_scope_token(scope) {
            problems.push(format!(
                "tool `{key}` requires scope `{scope}`, which is not an OAuth scope token (printable ASCII without spaces, `\"` or `\\`)"
            ));
        }
    }
    let mut globs = Vec::new();
    for glob in invalidates {
        match glob {
            Ok(glob)
                if all_keys
                    .iter()
                    .chain(context.content_keys)
                    .any(|other| glob.matches(other.as_str())) =>
            {
                globs.push(glob)
            }
            Ok(glob) => problems.push(format!(
                "tool `{key}` invalidates `{glob}`, which matches no tool, resource or prompt of this server"
            )),
            Err(problem) => problems.push(format!("tool `{key}`: {problem}")),
        }
    }
    let mut check_action = |origin: &str, action: &str| {
        if !all_keys.iter().any(|other| other.as_str() == action) {
            problems.push(format!(
                "tool `{key}`: {origin} names `{action}`, which is not a tool of this server"
            ));
        }
    };
    // A presenter's actions are checked once for all its tools (`unknown_suggestions`).
    for action in error_actions {
        check_action("an error's available actions", action);
    }
    // Recovery lines are checked once for all the tools returning an error (`unknown_recoveries`).
    // The chain, composed once: server middleware first, then the router's and the tool's.
    let chain: Vec<Arc<dyn Middleware>> = context
        .server_middleware
        .iter()
        .cloned()
        .chain(middleware)
        .collect();
    let parts = ServerParts {
        state: context.state.clone(),
        provided: chain
            .iter()
            .flat_map(|middleware| middleware.provides())
            .collect::<Vec<TypeId>>(),
    };
    params.check_context(&parts, problems, key.as_str());
    let audit_entry = params.takes_context::<AuditEntry>();
    let asks_user = params.takes_context::<crate::elicit::Elicit>();
    // What can send the client a request, or a notification tied to the call, while it runs.
    let talks_to_client = asks_user
        || params.whole_context
        || params.takes_context::<crate::elicit::Sample>()
        || params.takes_context::<crate::elicit::Roots>()
        || params.takes_context::<crate::logging::Log>()
        || params.takes_context::<crate::upstream::Upstream>();

    let mut input_schema = params.input_schema(problems);
    let scan = crate::guarded::scan(
        &mut input_schema,
        context.guarded,
        InputSurface::ToolArgument,
        key.as_str(),
        &|name| params.reserved_by_a_group(name),
    );
    scan.report(problems);
    guarded_inputs.extend(scan.found);
    let not_guarded = scan.stated;
    if let Serialization::PerArgument(argument) = &serialization
        && !input_schema
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|properties| properties.contains_key(argument))
    {
        problems.push(format!(
            "tool `{key}` is serialized by argument `{argument}`, which it does not take"
        ));
    }
    let mut output_generator = schema::output_generator();
    let data = data_schema(&mut output_generator);
    let output_schema = schema::envelope(data.clone(), &mut output_generator);
    if problems.len() > before {
        return None;
    }
    // An integer `offset` argument pages the results: a cut collection (agent limit or egress
    // budget) or a page tells the agent the offset of the next items; a page's next cursor is
    // given back through a string `cursor` argument.
    let max_bytes = max_bytes.or(context.max_bytes);
    // The tool's own budget, else its presenter's, else the server's.
    let max_tokens = max_tokens
        .or(presenter
            .as_ref()
            .and_then(|presenter| presenter.max_tokens))
        .or(context.max_tokens);
    if max_tokens.is_some() && !crate::envelope::COUNTS_TOKENS {
        problems.push(format!(
            "tool `{key}` has a token budget, but this server was built without a tokenizer: enable fusion's `tokens` feature"
        ));
    }
    let can_cut = paged
        || max_bytes.is_some()
        || max_tokens.is_some()
        || presenter
            .as_ref()
            .is_some_and(|presenter| presenter.limit.is_some());
    let pages_by_offset = can_cut && takes(&input_schema, "offset", "integer");
    let takes_cursor = paged && takes(&input_schema, "cursor", "string");
    let input_schema = Arc::new(input_schema);
    let mut layout = match params.layout(Arc::new(Value::Object((*input_schema).clone()))) {
        Ok(layout) => layout,
        Err(problem) => {
            problems.push(format!("tool `{key}`: {problem}"));
            return None;
        }
    };
    layout.refuse_undeclared_guarded(context.guarded);
    let annotations = annotations(verb, idempotent, destructive, open_world);
    let version = version.map_or_else(
        || context.server_version.to_owned(),
        |version| version.into_owned(),
    );
    let destructive_write = verb != Verb::Query && annotations.destructive_hint == Some(true);
    let serial = match &serialization {
        Serialization::ByVerb if destructive_write => Some(SerialGuard::per_action()),
        Serialization::ByVerb | Serialization::Off => None,
        Serialization::PerAction => Some(SerialGuard::per_action()),
        Serialization::PerArgument(argument) => Some(SerialGuard::per_argument(argument.clone())),
    };
    let facts = ActionFacts {
        key,
        verb,
        description: description.into_owned(),
        title: title.map(|title| title.into_owned()),
        tags: tags.into_iter().map(|tag| tag.into_owned()).collect(),
        scopes: scopes.into_iter().map(|scope| scope.into_owned()).collect(),
        invalidates: globs,
        // Named once every action is compiled (`ServerBuilder::build`).
        stale: Vec::new(),
        cache,
        annotations,
        version,
        input_schema,
        output_schema: Arc::new(output_schema),
        data_schema: data.to_value(),
        presenter,
        error_actions,
        concurrency,
        serialization,
        max_bytes,
        max_tokens,
        data_text: data_text.unwrap_or(context.data_text),
        timeout: timeout.or(context.default_timeout),
        rate_limit,
        toolset: toolset.map(|toolset| toolset.into_owned()),
        exposure,
        takes_cursor,
        surface: crate::action::Surface::Tool,
        not_guarded,
        task,
    };
    Some(CompiledAction {
        sealed: SealedParts::new(&facts),
        bare: chain.is_empty() && concurrency.is_none() && serial.is_none(),
        audit_entry,
        asks_user,
        talks_to_client,
        facts,
        handler,
        layout,
        middleware: chain.into(),
        concurrency: concurrency.map(ConcurrencyGuard::new),
        shared_lock: serial
            .as_ref()
            .and(context.serialization_lock.map(Arc::clone)),
        serial,
        ask_timeout,
        rate_limiter: rate_limit.map(RateLimiter::new),
        pages_by_offset,
    })
}

/// Each presenter's `actions` entry that is not a tool of this server, as one problem naming
/// every tool that returns the presenter: one mistake, one line.
pub(super) fn unknown_suggestions(
    specs: &[(ToolKey, ToolSpec)],
    all_keys: &[ToolKey],
    problems: &mut Vec<String>,
) {
    // (presenter, action) → the tools returning it, in the order they were added.
    let mut unknown: Vec<((&str, &str), Vec<String>)> = Vec::new();
    for (key, spec) in specs {
        let Some(presenter) = &spec.presenter else {
            continue;
        };
        for action in presenter.actions {
            if all_keys.iter().any(|other| other.as_str() == *action) {
                continue;
            }
            let tool = format!("`{key}`");
            match unknown
                .iter_mut()
                .find(|(at, _)| *at == (presenter.name, *action))
            {
                Some((_, tools)) => tools.push(tool),
                None => unknown.push(((presenter.name, action), vec![tool])),
            }
        }
    }
    for ((presenter, action), tools) in unknown {
        let (noun, tools) = match tools.as_slice() {
            [one] => ("tool", one.clone()),
            _ => ("tools", tools.join(", ")),
        };
        problems.push(format!(
            "presenter `{presenter}` suggests an action that names `{action}`, which is not a tool of this server ({noun} returning it: {tools})"
        ));
    }
}

/// Each recovery line that names a missing tool, as one problem naming every tool whose error
/// has it: a recovery sends the agent to call that name, so it is refused as an unknown action
/// is, once per mistake. Only a span in a namespace of this server is read as a tool's key
/// (`customer.id` may be a field).
pub(super) fn unknown_recoveries(
    specs: &[(ToolKey, ToolSpec)],
    all_keys: &[ToolKey],
    problems: &mut Vec<String>,
) {
    // (error, variant, named) → the tools whose errors have it, in the order they were added.
    type Recovery = (&'static str, &'static str, &'static str);
    let mut unknown: Vec<(Recovery, Vec<String>)> = Vec::new();
    for (key, spec) in specs {
        for &(error, variant, named) in spec.recovery_tools {
            let namespace = named.split('.').next().unwrap_or_default();
            let in_a_namespace = all_keys
                .iter()
                .any(|other| other.namespace() == Some(namespace));
            if !in_a_namespace || all_keys.iter().any(|other| other.as_str() == named) {
                continue;
            }
            let tool = format!("`{key}`");
            match unknown
                .iter_mut()
                .find(|(at, _)| *at == (error, variant, named))
            {
                Some((_, tools)) if !tools.contains(&tool) => tools.push(tool),
                Some(_) => {}
                None => unknown.push(((error, variant, named), vec![tool])),
            }
        }
    }
    for ((error, variant, named), tools) in unknown {
        let namespace = named.split('.').next().unwrap_or_default();
        let siblings: Vec<String> = all_keys
            .iter()
            .filter(|other| other.namespace() == Some(namespace))
            .map(|other| format!("`{other}`"))
            .collect();
        let noun = if tools.len() == 1 { "tool" } else { "tools" };
        problems.push(format!(
            "{noun} {}: the recovery of `{error}::{variant}` names `{named}`, which is not a tool of this server (the tools of `{namespace}` are {})",
            tools.join(", "),
            siblings.join(", ")
        ));
    }
}

/// Names, for each action that invalidates, the queries its globs match as the agent calls
/// them, and seals its answers with those names: the agent reads tools it can call, while
/// state sync keeps matching the globs over keys.
pub(super) fn name_stale(actions: &mut [CompiledAction]) {
    let stale: Vec<Vec<Exposure>> = actions
        .iter()
        .map(|action| {
            let globs = &action.facts.invalidates;
            if globs.is_empty() {
                return Vec::new();
            }
            actions
                .iter()
                .map(|query| &query.facts)
                .filter(|query| {
                    query.verb == Verb::Query
                        && globs.iter().any(|glob| glob.matches(query.key.as_str()))
                })
                .map(|query| query.exposure.clone())
                .collect()
        })
        .collect();
    for (action, stale) in actions.iter_mut().zip(stale) {
        if !stale.is_empty() {
            action.facts.stale = stale;
            action.sealed = SealedParts::new(&action.facts);
        }
    }
}

/// Whether an input schema has a property `name` of JSON type `kind` (or an optional one).
fn takes(input_schema: &JsonObject, name: &str, kind: &str) -> bool {
    let Some(property) = input_schema
        .get("properties")
        .and_then(|properties| properties.get(name))
    else {
        return false;
    };
    match property.get("type") {
        Some(Value::String(given)) => given == kind,
        Some(Value::Array(given)) => given.iter().any(|given| given == kind),
        _ => false,
    }
}

/// The hints of an action. Its title is the tool's own (`Tool::title`, which clients show
/// first), not repeated here, where every listing would pay for it twice.
fn annotations(
    verb: Verb,
    idempotent: bool,
    destructive: Option<bool>,
    open_world: Option<bool>,
) -> ToolAnnotations {
    let mut annotations = ToolAnnotations::new();
    annotations = match verb {
        Verb::Query => annotations
            .read_only(true)
            .destructive(false)
            .idempotent(true),
        Verb::Mutation => annotations
            .read_only(false)
            .destructive(destructive.unwrap_or(true))
            .idempotent(idempotent),
        Verb::Action => annotations
            .read_only(false)
            .destructive(destructive.unwrap_or(false))
            .idempotent(idempotent),
    };
    if let Some(open_world) = open_world {
        annotations = annotations.open_world(open_world);
    }
    annotations
}

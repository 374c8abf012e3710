//! Exposition (SPEC T2): the MCP tools a server's actions become, flat (one tool per action) or
//! grouped (one tool per namespace, with an `action` discriminator), with their definitions as
//! `tools/list` serves them.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{Tool as ToolDefinition, ToolAnnotations};
use serde_json::{Map, Value, json};

use crate::action::{ActionFacts, CacheHint, Exposure, Names, Verb};
use crate::context::CallContext;
use crate::schema;
use crate::server::{CompiledAction, Dispatch, ExposedTool, Server};

/// The exposed tools of `actions`, in order of first appearance: an action of its own tool,
/// or the actions of a namespace under one grouped tool.
pub(crate) fn expose(
    actions: &[CompiledAction],
    names: &Names,
    problems: &mut Vec<String>,
) -> Vec<ExposedTool> {
    enum Slot<'a> {
        Single(usize),
        Group(&'a Arc<str>),
    }
    let mut slots = Vec::new();
    let mut members: HashMap<&Arc<str>, Vec<usize>> = HashMap::new();
    for (index, action) in actions.iter().enumerate() {
        match &action.facts.exposure {
            Exposure::Tool(_) => slots.push(Slot::Single(index)),
            Exposure::Grouped { tool, .. } => {
                let group = members.entry(tool).or_default();
                if group.is_empty() {
                    slots.push(Slot::Group(tool));
                }
                group.push(index);
            }
        }
    }
    slots
        .into_iter()
        .map(|slot| match slot {
            Slot::Single(index) => {
                let facts = &actions[index].facts;
                let name = facts.exposure.tool();
                ExposedTool {
                    definition: single_definition(facts, name, names),
                    name: Arc::from(name),
                    dispatch: Dispatch::Single(index),
                }
            }
            Slot::Group(name) => {
                let members = &members[name];
                let key_action = |index: &usize| actions[*index].facts.key.action().to_owned();
                ExposedTool {
                    definition: grouped_definition(name, members, actions, names, problems),
                    name: Arc::clone(name),
                    dispatch: Dispatch::Grouped {
                        actions: members
                            .iter()
                            .map(|index| (key_action(index), *index))
                            .collect(),
                        names: members.iter().map(key_action).collect(),
                        members: members.clone(),
                    },
                }
            }
        })
        .collect()
}

fn single_definition(action: &ActionFacts, name: &str, names: &Names) -> ToolDefinition {
    let mut definition = ToolDefinition::new(
        name.to_owned(),
        described(action, names),
        Arc::clone(&action.input_schema),
    )
    .with_raw_output_schema(Arc::clone(&action.output_schema))
    .with_annotations(action.annotations.clone())
    .with_meta(rmcp::model::MetaObject(tool_meta(action)));
    if let Some(title) = &action.title {
        definition = definition.with_title(title.clone());
    }
    definition
}

/// The description the agent reads: the tool's own (tool keys between backticks rewritten to
/// the exposed call), plus what its settings mean.
fn described(action: &ActionFacts, names: &Names) -> String {
    let mut description = names.rewrite(&action.description).into_owned();
    match action.cache {
        Some(CacheHint::Immutable) => description
            .push_str("\n\nCache: immutable (reuse the result rather than calling again)."),
        Some(CacheHint::Volatile) => {
            description.push_str("\n\nCache: volatile (fetch it again before relying on it).")
        }
        None => {}
    }
    // The tools as the agent calls them (and, in prose, as a gateway renames them).
    if !action.stale.is_empty() {
        let stale: Vec<String> = action.stale.iter().map(Exposure::in_text).collect();
        description.push_str(&format!(
            "\n\nAfter it succeeds, earlier results of {} are stale.",
            stale.join(", ")
        ));
    }
    description
}

/// Fusion's own facts about an action, in the tool's `_meta`.
fn tool_meta(action: &ActionFacts) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert("dev.fusion/key".into(), action.key.as_str().into());
    meta.insert("dev.fusion/verb".into(), action.verb.as_str().into());
    if let Some(cache) = action.cache {
        meta.insert("dev.fusion/cache".into(), cache.as_str().into());
    }
    if !action.invalidates.is_empty() {
        meta.insert(
            "dev.fusion/invalidates".into(),
            action
                .invalidates
                .iter()
                .map(|glob| glob.as_str())
                .collect::<Vec<_>>()
                .into(),
        );
    }
    if !action.tags.is_empty() {
        meta.insert("dev.fusion/tags".into(), action.tags.clone().into());
    }
    meta
}

/// One tool for a namespace: a discriminator `action`, every action's arguments, and a
/// `oneOf` that keeps each action's own required fields. `members` may be a subset of the
/// namespace's actions (what one caller may call): the enum, the branches, the description
/// and the annotations then describe that subset only.
pub(crate) fn grouped_definition(
    name: &str,
    members: &[usize],
    actions: &[CompiledAction],
    names: &Names,
    problems: &mut Vec<String>,
) -> ToolDefinition {
    let action_names: Vec<&str> = members
        .iter()
        .map(|&index| actions[index].facts.key.action())
        .collect();
    let mut properties = Map::new();
    let mut definitions = Map::new();
    let mut branches = Vec::new();
    let mut conflicting: Vec<String> = Vec::new();
    for &index in members {
        let action = &actions[index].facts;
        let schema = &action.input_schema;
        if let Some(Value::Object(defs)) = schema.get("$defs") {
            for (def_name, def) in defs {
                if let Some(existing) = definitions.insert(def_name.clone(), def.clone())
                    && &existing != def
                {
                    problems.push(format!(
                        "grouped tool `{name}`: actions define different types named `{def_name}`"
                    ));
                }
            }
        }
        let mut branch_properties = Map::new();
        branch_properties.insert("action".into(), json!({"const": action.key.action()}));
        if let Some(Value::Object(own)) = schema.get("properties") {
            for (property, property_schema) in own {
                match properties.get(property) {
                    Some(existing) if existing != property_schema => {
                        conflicting.push(property.clone());
                    }
                    _ => {
                        properties.insert(property.clone(), property_schema.clone());
                    }
                }
                branch_properties.insert(property.clone(), property_schema.clone());
            }
        }
        let mut required = vec![Value::from("action")];
        if let Some(Value::Array(own)) = schema.get("required") {
            required.extend(own.iter().cloned());
        }
        let mut branch = json!({
            "type": "object",
            "properties": branch_properties,
            "required": required,
            "additionalProperties": false,
        });
        // The action's rules across its fields (a type taken whole) hold in its branch.
        for keyword in crate::args::WHOLE_KEYWORDS {
            if let Some(rule) = schema.get(*keyword) {
                branch[*keyword] = rule.clone();
            }
        }
        branches.push(branch);
    }
    // A property whose schema differs between actions is described by the branches only.
    for property in conflicting {
        properties.remove(&property);
    }
    let descriptions: Vec<String> = members
        .iter()
        .map(|&index| {
            let action = &actions[index].facts;
            format!(
                "- {}: {}",
                action.key.action(),
                described(action, names).replace('\n', "\n  ")
            )
        })
        .collect();
    properties.insert(
        "action".into(),
        json!({
            "type": "string",
            "enum": action_names,
            "description": "The action to perform; its own arguments are listed in the matching branch.",
        }),
    );
    let mut input = Map::new();
    input.insert(
        "$schema".into(),
        "https://json-schema.org/draft/2020-12/schema".into(),
    );
    input.insert("type".into(), "object".into());
    input.insert("properties".into(), Value::Object(properties));
    input.insert("required".into(), json!(["action"]));
    input.insert("oneOf".into(), Value::Array(branches));
    if !definitions.is_empty() {
        input.insert("$defs".into(), Value::Object(definitions));
    }

    let mut output_generator = schema::output_generator();
    let data = schema::any_of(
        members
            .iter()
            .map(|&index| actions[index].facts.data_schema.clone())
            .collect(),
    );
    let mut output = schema::envelope(data, &mut output_generator);
    // Same rule as the input side: two actions may share a type only if it is the same type.
    let mut output_definitions = Map::new();
    for &index in members {
        if let Some(Value::Object(defs)) = actions[index].facts.output_schema.get("$defs") {
            for (def_name, def) in defs {
                if let Some(existing) = output_definitions.insert(def_name.clone(), def.clone())
                    && &existing != def
                {
                    problems.push(format!(
                        "grouped tool `{name}`: actions return different types named `{def_name}`"
                    ));
                }
            }
        }
    }
    if !output_definitions.is_empty() {
        output.insert("$defs".into(), Value::Object(output_definitions));
    }

    let member_actions: Vec<&ActionFacts> =
        members.iter().map(|&index| &actions[index].facts).collect();
    let read_only = member_actions
        .iter()
        .all(|action| action.verb == Verb::Query);
    let destructive = member_actions
        .iter()
        .any(|action| action.annotations.destructive_hint == Some(true));
    let idempotent = member_actions
        .iter()
        .all(|action| action.annotations.idempotent_hint == Some(true));
    let annotations = ToolAnnotations::new()
        .read_only(read_only)
        .destructive(destructive)
        .idempotent(idempotent);
    let mut meta = Map::new();
    meta.insert(
        "dev.fusion/actions".into(),
        member_actions
            .iter()
            .map(|action| Value::Object(tool_meta(action)))
            .collect::<Vec<_>>()
            .into(),
    );
    ToolDefinition::new(
        name.to_owned(),
        format!(
            "Actions of `{name}`; choose one with the `action` argument.\n{}",
            descriptions.join("\n")
        ),
        Arc::new(input),
    )
    .with_raw_output_schema(Arc::new(output))
    .with_annotations(annotations)
    .with_meta(rmcp::model::MetaObject(meta))
}

impl Server {
    /// The tool definitions `tools/list` shows the caller of `context`: every tool without an
    /// access policy; under one, the tools it may call, and each grouped tool restricted to the
    /// actions it may call (its `action` enum, branches, description and annotations). A
    /// restricted definition is built once per set of visible actions and then reused.
    pub fn visible_tools(&self, context: &CallContext) -> Vec<ToolDefinition> {
        self.visible_tools_with(context, true)
    }

    /// [`Server::visible_tools`] building every restricted definition again: what the cache
    /// saves.
    #[cfg(feature = "bench-hooks")]
    #[doc(hidden)]
    pub fn visible_tools_uncached(&self, context: &CallContext) -> Vec<ToolDefinition> {
        self.visible_tools_with(context, false)
    }

    fn visible_tools_with(&self, context: &CallContext, cached: bool) -> Vec<ToolDefinition> {
        let inner = &*self.inner;
        if inner.access.is_none() {
            return inner
                .tools
                .iter()
                .map(|tool| tool.definition.clone())
                .collect();
        }
        let may_call = |index: usize| self.may_call(inner.actions[index].info(), context);
        let mut definitions = Vec::with_capacity(inner.tools.len());
        let mut visible = Vec::new();
        for tool in &inner.tools {
            match &tool.dispatch {
                Dispatch::Single(index) => {
                    if may_call(*index) {
                        definitions.push(tool.definition.clone());
                    }
                }
                Dispatch::Grouped { members, .. } => {
                    visible.clear();
                    visible.extend(members.iter().copied().filter(|&index| may_call(index)));
                    if visible.len() == members.len() {
                        definitions.push(tool.definition.clone());
                    } else if !visible.is_empty() {
                        // The subset of a valid group is valid: its problems were reported
                        // when the server was built.
                        let build = || {
                            grouped_definition(
                                &tool.name,
                                &visible,
                                &inner.actions,
                                &inner.names,
                                &mut Vec::new(),
                            )
                        };
                        definitions.push(if cached {
                            inner.grouped_views.get_or_build(&visible, build)
                        } else {
                            build()
                        });
                    }
                }
            }
        }
        definitions
    }
}

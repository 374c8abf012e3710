//! Progressive discovery for large surfaces: in search mode `tools/list` holds two tools, one
//! that finds the tools matching a task ([`FIND_TOOLS`]) and one that calls a tool found
//! ([`CALL_TOOL`]), beside the tools pinned to the listing. Every tool stays callable by its
//! own name without being listed.
//!
//! What a caller finds is what `tools/list` would list to it in full: the same access policy
//! decides (roles, scopes, tenants), so a search never names a tool the caller may not list,
//! and a call of a found tool passes the same checks as any other call.
//!
//! Off by default ([`Discovery::Full`]): then nothing here runs, and the listing and the lock
//! file are what they were.

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResult, ContentBlock, JsonObject, ListToolsResult,
    Tool as ToolDefinition,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use super::listing::{Listed, page};
use super::{McpHandler, protocol_error};

/// The tool that finds tools.
pub const FIND_TOOLS: &str = "find_tools";
/// The tool that calls a tool found, for clients that call only what they listed.
pub const CALL_TOOL: &str = "call_tool";

/// How `tools/list` presents a server's tools ([`Mcp::discovery`](super::Mcp::discovery)).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum Discovery {
    /// Every tool the caller may call, in full (the default).
    #[default]
    Full,
    /// A short index: `find_tools` and `call_tool`, and the tools pinned to the listing.
    Search(ToolSearch),
}

impl Discovery {
    /// Search mode with default settings (8 results a search, no pinned tools).
    pub fn search() -> Discovery {
        Discovery::Search(ToolSearch::default())
    }
}

/// The settings of search mode.
#[derive(Debug, Clone)]
pub struct ToolSearch {
    max_results: usize,
    pinned: Vec<String>,
}

impl Default for ToolSearch {
    fn default() -> Self {
        ToolSearch {
            max_results: 8,
            pinned: Vec::new(),
        }
    }
}

impl ToolSearch {
    /// The most tools one search answers with, whatever its `limit` asks (at least 1;
    /// default 8).
    #[must_use]
    pub fn max_results(mut self, max_results: usize) -> Self {
        self.max_results = max_results.max(1);
        self
    }

    /// Keeps tool `name` listed in full beside the search tools (to a caller who may call it):
    /// a tool the agent needs in every conversation.
    #[must_use]
    pub fn pin(mut self, name: impl Into<String>) -> Self {
        self.pinned.push(name.into());
        self
    }
}

impl McpHandler {
    /// The tools `context`'s caller may see, as `tools/list` lists them in full.
    fn callers_tools(
        &self,
        context: RequestContext<RoleServer>,
        method: &str,
    ) -> Result<Arc<[ToolDefinition]>, ErrorData> {
        let shared = &*self.shared;
        let server = &shared.server;
        if server.has_access_policy() {
            let call = self
                .call_context(context)
                .map_err(|error| protocol_error(method, error))?;
            #[cfg(feature = "gateway")]
            return Ok(server.listed_tools(&call).into());
            #[cfg(not(feature = "gateway"))]
            return Ok(server.visible_tools(&call).into());
        }
        #[cfg(feature = "gateway")]
        if let Some(gateway) = server.gateway() {
            return Ok(Arc::clone(gateway.catalog().listed()));
        }
        Ok(Arc::clone(&shared.listings.tools))
    }

    /// `tools/list` in search mode: the search tools, their index written for this caller,
    /// then the pinned tools it may call.
    pub(super) fn list_index(
        &self,
        search: &ToolSearch,
        cursor: Option<String>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.callers_tools(context, "tools/list")?;
        let mut listed = search_tools(&tools);
        listed.extend(
            tools
                .iter()
                .filter(|tool| search.pinned.iter().any(|name| *name == tool.name))
                .cloned(),
        );
        let (items, next) = page(&listed, self.shared.page_size, cursor.as_deref())?;
        // The index is the caller's own under an access policy.
        let scope = if self.shared.server.has_access_policy() {
            CacheScope::Private
        } else {
            self.shared.discover_cache_scope
        };
        #[cfg(feature = "gateway")]
        let ttl = match self.shared.server.gateway() {
            Some(gateway) => {
                let ttl = gateway.list_ttl(std::time::Duration::from_millis(self.shared.list_ttl));
                u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)
            }
            None => self.shared.list_ttl,
        };
        #[cfg(not(feature = "gateway"))]
        let ttl = self.shared.list_ttl;
        Ok(ToolDefinition::page(items, next, ttl, scope))
    }

    /// A call of one of the search tools: `find_tools` answers here; `call_tool` becomes the
    /// call of the tool it names, which the caller's request then is. Any other call passes
    /// as it came.
    pub(super) fn intercept(
        &self,
        search: &ToolSearch,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Intercepted {
        match &*request.name {
            FIND_TOOLS => {
                let query = match Query::parse(request.arguments.as_ref(), search.max_results) {
                    Ok(query) => query,
                    Err(message) => return Intercepted::Answer(Ok(refusal(message))),
                };
                Intercepted::Answer(
                    self.callers_tools(context, "tools/call")
                        .map(|tools| found(&tools, &query)),
                )
            }
            CALL_TOOL => {
                let mut arguments = request.arguments.take().unwrap_or_default();
                let Some(Value::String(name)) = arguments.remove("name") else {
                    return Intercepted::Answer(Ok(refusal(format!(
                        "`{CALL_TOOL}` needs `name`: the name of a tool `{FIND_TOOLS}` found"
                    ))));
                };
                request.arguments = match arguments.remove("arguments") {
                    None | Some(Value::Null) => None,
                    Some(Value::Object(arguments)) => Some(arguments),
                    Some(_) => {
                        return Intercepted::Answer(Ok(refusal(format!(
                            "`{CALL_TOOL}`'s `arguments` must be an object: the arguments of `{name}`"
                        ))));
                    }
                };
                if let Some(unknown) = arguments.keys().next() {
                    return Intercepted::Answer(Ok(refusal(format!(
                        "`{CALL_TOOL}` takes `name` and `arguments`, not `{unknown}`"
                    ))));
                }
                request.name = name.into();
                Intercepted::Call(request, context)
            }
            _ => Intercepted::Call(request, context),
        }
    }

    /// The definition of a search tool, for rmcp's look-ups by name.
    pub(super) fn search_tool(&self, name: &str) -> Option<ToolDefinition> {
        [FIND_TOOLS, CALL_TOOL]
            .contains(&name)
            .then(|| search_tools(&[]).into_iter().find(|tool| tool.name == name))
            .flatten()
    }
}

/// What [`McpHandler::intercept`] made of a call.
pub(super) enum Intercepted {
    /// The answer of a search tool.
    Answer(Result<CallToolResult, ErrorData>),
    /// A call to make as usual.
    Call(CallToolRequestParams, RequestContext<RoleServer>),
}

/// A tool result refusing a search tool's arguments: the agent reads why and asks again.
fn refusal(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// What a `find_tools` call asks for.
#[derive(Debug)]
struct Query {
    /// The words of its query, lower-cased.
    terms: Vec<String>,
    namespace: Option<String>,
    limit: usize,
}

impl Query {
    fn parse(arguments: Option<&JsonObject>, max_results: usize) -> Result<Query, String> {
        let empty = JsonObject::new();
        let arguments = arguments.unwrap_or(&empty);
        let text = |key: &str| match arguments.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.as_str())),
            Some(_) => Err(format!("`{FIND_TOOLS}`'s `{key}` must be a string")),
        };
        let terms = words(text("query")?.unwrap_or_default());
        let namespace = text("namespace")?.map(str::to_owned);
        let limit = match arguments.get("limit") {
            None | Some(Value::Null) => max_results,
            Some(limit) => match limit.as_u64() {
                Some(limit @ 1..) => usize::try_from(limit).unwrap_or(usize::MAX),
                _ => {
                    return Err(format!(
                        "`{FIND_TOOLS}`'s `limit` must be a positive integer"
                    ));
                }
            },
        };
        if let Some(unknown) = arguments
            .keys()
            .find(|key| !matches!(key.as_str(), "query" | "namespace" | "limit"))
        {
            return Err(format!(
                "`{FIND_TOOLS}` takes `query`, `namespace` and `limit`, not `{unknown}`"
            ));
        }
        if terms.is_empty() && namespace.is_none() {
            return Err(format!(
                "`{FIND_TOOLS}` needs a `query` (words of the task) or a `namespace` (see its description)"
            ));
        }
        Ok(Query {
            terms,
            namespace,
            limit: limit.min(max_results),
        })
    }
}

/// The lower-cased words of `text`: its runs of letters and digits, of two characters or more.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.chars().count() > 1)
        .map(str::to_lowercase)
        .collect()
}

/// The namespace of a tool: its name up to the first `_` (a gateway's mount prefix, a
/// connector's name), or its whole name.
fn namespace(name: &str) -> &str {
    name.split_once('_')
        .map_or(name, |(namespace, _)| namespace)
}

/// Whether `word` matches `term`: the same word, or one of them a longer form of the other
/// (`invoice` and `invoices`), never for terms of fewer than three characters.
fn matches(word: &str, term: &str) -> bool {
    word == term
        || (term.len() >= 3 && word.starts_with(term))
        || (word.len() >= 4 && term.starts_with(word))
}

/// How well `tool` answers `terms`: for each term, 3 when a word of the name matches it, 1 when
/// a word of its title, description or argument names does.
fn score(tool: &ToolDefinition, terms: &[String]) -> usize {
    let name = words(&tool.name);
    let mut text = String::new();
    if let Some(title) = &tool.title {
        text.push_str(title);
        text.push(' ');
    }
    if let Some(description) = &tool.description {
        text.push_str(description);
        text.push(' ');
    }
    if let Some(Value::Object(properties)) = tool.input_schema.get("properties") {
        for property in properties.keys() {
            text.push_str(property);
            text.push(' ');
        }
    }
    let text = words(&text);
    terms
        .iter()
        .map(|term| {
            if name.iter().any(|word| matches(word, term)) {
                3
            } else if text.iter().any(|word| matches(word, term)) {
                1
            } else {
                0
            }
        })
        .sum()
}

/// The answer of a search: the best matches first (ties in listing order), each as the agent
/// calls it (name, title, description, input schema, annotations; the output schema is left
/// out: each answer says its own shape), and how many more matched.
fn found(tools: &[ToolDefinition], query: &Query) -> CallToolResult {
    let mut ranked: Vec<(usize, &ToolDefinition)> = tools
        .iter()
        .filter(|tool| !is_search_tool(&tool.name))
        .filter(|tool| {
            query
                .namespace
                .as_deref()
                .is_none_or(|wanted| namespace(&tool.name) == wanted)
        })
        .map(|tool| (score(tool, &query.terms), tool))
        .filter(|(score, _)| query.terms.is_empty() || *score > 0)
        .collect();
    // Stable: equal scores keep the listing's order.
    ranked.sort_by_key(|(score, _)| std::cmp::Reverse(*score));
    let more = ranked.len().saturating_sub(query.limit);
    let tools: Vec<Value> = ranked
        .into_iter()
        .take(query.limit)
        .map(|(_, tool)| {
            let mut found = serde_json::Map::new();
            found.insert("name".into(), json!(tool.name));
            if let Some(title) = &tool.title {
                found.insert("title".into(), json!(title));
            }
            if let Some(description) = &tool.description {
                found.insert("description".into(), json!(description));
            }
            found.insert("inputSchema".into(), json!(tool.input_schema));
            if let Some(annotations) = &tool.annotations {
                found.insert("annotations".into(), json!(annotations));
            }
            Value::Object(found)
        })
        .collect();
    let mut answer = json!({ "tools": tools });
    if more > 0 {
        answer["more"] = json!(more);
    }
    CallToolResult::success(vec![ContentBlock::text(answer.to_string())])
}

fn is_search_tool(name: &str) -> bool {
    name == FIND_TOOLS || name == CALL_TOOL
}

/// `find_tools` (its description holding the namespaces of `tools`, with their counts) and
/// `call_tool`.
fn search_tools(tools: &[ToolDefinition]) -> Vec<ToolDefinition> {
    let mut namespaces: BTreeMap<&str, usize> = BTreeMap::new();
    for tool in tools.iter().filter(|tool| !is_search_tool(&tool.name)) {
        *namespaces.entry(namespace(&tool.name)).or_default() += 1;
    }
    let index = namespaces
        .iter()
        .map(|(namespace, count)| format!("{namespace} ({count})"))
        .collect::<Vec<_>>()
        .join(", ");
    let find = format!(
        "Finds the tools for a task among this server's {} (listed here only when found), \
         with their descriptions and input schemas. Call a tool found by its name, or through \
         `{CALL_TOOL}`. Namespaces: {}.",
        tools.len(),
        if index.is_empty() { "none" } else { &index },
    );
    let find_schema = json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words of the task"},
            "namespace": {"type": "string", "description": "Only this namespace's tools"},
            "limit": {"type": "integer", "minimum": 1},
        },
        "additionalProperties": false,
    });
    let call_schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "A tool found"},
            "arguments": {"type": "object", "description": "Its arguments"},
        },
        "required": ["name"],
        "additionalProperties": false,
    });
    let object = |schema: Value| match schema {
        Value::Object(object) => Arc::new(object),
        _ => unreachable!("written as an object"),
    };
    let read_only = rmcp::model::ToolAnnotations::new()
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false);
    vec![
        ToolDefinition::new(FIND_TOOLS, find, object(find_schema)).annotate(read_only),
        ToolDefinition::new(
            CALL_TOOL,
            format!("Calls a tool `{FIND_TOOLS}` found, with its arguments."),
            object(call_schema),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str) -> ToolDefinition {
        ToolDefinition::new(
            name.to_owned(),
            description.to_owned(),
            Arc::new(JsonObject::new()),
        )
    }

    fn names(result: &CallToolResult) -> Vec<String> {
        let text = result.content[0].as_text().unwrap().text.clone();
        let answer: Value = serde_json::from_str(&text).unwrap();
        answer["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect()
    }

    fn query(arguments: Value) -> Result<Query, String> {
        Query::parse(arguments.as_object(), 8)
    }

    #[test]
    fn a_name_match_ranks_above_a_description_match() {
        let tools = [
            tool("crm_list_contacts", "Lists contacts, with their invoices."),
            tool("billing_list_invoices", "Lists invoices."),
            tool("billing_get_invoice", "One invoice by id."),
        ];
        // `invoice` is a shorter form of `invoices`: it matches too.
        let result = found(&tools, &query(json!({"query": "invoices"})).unwrap());
        assert_eq!(
            names(&result),
            [
                "billing_list_invoices",
                "billing_get_invoice",
                "crm_list_contacts"
            ]
        );
        // Two words of the name beat one.
        let result = found(&tools, &query(json!({"query": "list invoices"})).unwrap());
        assert_eq!(names(&result)[0], "billing_list_invoices");
    }

    #[test]
    fn a_namespace_alone_lists_it_and_limits_say_what_is_left() {
        let tools = [
            tool("crm_a", "x"),
            tool("billing_b", "y"),
            tool("crm_c", "z"),
            tool("crm_d", "w"),
        ];
        let result = found(
            &tools,
            &query(json!({"namespace": "crm", "limit": 2})).unwrap(),
        );
        assert_eq!(names(&result), ["crm_a", "crm_c"]);
        let text = &result.content[0].as_text().unwrap().text;
        assert!(text.contains("\"more\":1"), "{text}");
    }

    #[test]
    fn bad_arguments_say_what_is_wrong() {
        for (arguments, expected) in [
            (json!({}), "needs a `query`"),
            (json!({"query": 3}), "`query` must be a string"),
            (json!({"query": "x y", "limit": 0}), "positive integer"),
            (
                json!({"query": "invoices", "verbose": true}),
                "not `verbose`",
            ),
        ] {
            let error = query(arguments.clone()).unwrap_err();
            assert!(error.contains(expected), "{arguments}: {error}");
        }
    }

    #[test]
    fn the_index_counts_each_namespace() {
        let tools = [
            tool("crm_a", "x"),
            tool("billing_b", "y"),
            tool("crm_c", "z"),
        ];
        let listed = search_tools(&tools);
        let description = listed[0].description.as_deref().unwrap();
        assert!(
            description.contains("Namespaces: billing (1), crm (2)."),
            "{description}"
        );
    }
}

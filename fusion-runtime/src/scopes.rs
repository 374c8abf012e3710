//! OAuth scopes per tool (SPEC R5): what a token must grant to see and call each action,
//! declared (`#[tool(scopes = ["billing:admin"])]`) or derived from the verb.

use crate::access::AccessPolicy;
use crate::action::{ActionInfo, Verb};
use crate::context::CallContext;
use crate::key::ToolKey;
use crate::prompt::PromptInfo;
use crate::resource::ResourceInfo;
use crate::server::Server;

/// An access policy by OAuth scopes: an action needs the scopes it declares, or else the
/// read scope (a query) or the write scope (a mutation or an action) of its namespace;
/// resources and prompts need the scopes they declare (`#[resource(scopes = [...])]`), or else
/// the read scope of theirs. A caller sees in `tools/list`, `resources/list`,
/// `resources/templates/list` and `prompts/list` only what its token's scopes let it use, and
/// a call, read or get it may not make is refused (`FORBIDDEN`, naming the scopes needed)
/// before its arguments are read.
///
/// The scope names are templates: `{namespace}:read` and `{namespace}:write` by default, with
/// `{namespace}` the key's namespace (`billing` for `billing.create_invoice`), or the
/// [`default_namespace`](Self::default_namespace) for a key without one.
///
/// ```
/// use fusion_runtime::scopes::ScopeRules;
/// let rules = ScopeRules::new().read("{namespace}.read").write("{namespace}.admin");
/// # let _ = rules;
/// ```
#[derive(Debug, Clone)]
pub struct ScopeRules {
    read: String,
    write: String,
    default_namespace: String,
}

impl Default for ScopeRules {
    fn default() -> Self {
        ScopeRules {
            read: "{namespace}:read".into(),
            write: "{namespace}:write".into(),
            default_namespace: "mcp".into(),
        }
    }
}

impl ScopeRules {
    /// `{namespace}:read` for queries, `{namespace}:write` for the rest.
    pub fn new() -> Self {
        ScopeRules::default()
    }

    /// The scope a query (and a resource or prompt) needs, as a template.
    #[must_use]
    pub fn read(mut self, template: impl Into<String>) -> Self {
        self.read = template.into();
        self
    }

    /// The scope a mutation or an action needs, as a template.
    #[must_use]
    pub fn write(mut self, template: impl Into<String>) -> Self {
        self.write = template.into();
        self
    }

    /// What `{namespace}` stands for in a key without a namespace (`mcp` by default).
    #[must_use]
    pub fn default_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.default_namespace = namespace.into();
        self
    }

    /// The scopes `action` needs: those it declares, or the default of its verb.
    pub fn required(&self, action: ActionInfo<'_>) -> Vec<String> {
        if !action.scopes().is_empty() {
            return action.scopes().to_vec();
        }
        let template = match action.verb() {
            Verb::Query => &self.read,
            Verb::Mutation | Verb::Action => &self.write,
        };
        vec![self.fill(template, action.key())]
    }

    /// The scopes reading `resource` needs: those it declares, or the read scope.
    pub fn required_for_resource(&self, resource: ResourceInfo<'_>) -> Vec<String> {
        self.declared_or_read(resource.scopes(), resource.key())
    }

    /// The scopes getting `prompt` needs: those it declares, or the read scope.
    pub fn required_for_prompt(&self, prompt: PromptInfo<'_>) -> Vec<String> {
        self.declared_or_read(prompt.scopes(), prompt.key())
    }

    fn declared_or_read(&self, declared: &[String], key: &ToolKey) -> Vec<String> {
        if declared.is_empty() {
            vec![self.fill(&self.read, key)]
        } else {
            declared.to_vec()
        }
    }

    fn fill(&self, template: &str, key: &ToolKey) -> String {
        template.replace(
            "{namespace}",
            key.namespace().unwrap_or(&self.default_namespace),
        )
    }

    /// Every scope the actions, resources and prompts of `server` need, and the read scope of
    /// each of the actions' namespaces: the `scopes_supported` of its protected-resource
    /// metadata.
    pub fn supported(&self, server: &Server) -> Vec<String> {
        let mut scopes: Vec<String> = server
            .actions()
            .flat_map(|action| {
                let mut needed = self.required(action);
                needed.push(self.fill(&self.read, action.key()));
                needed
            })
            .chain(
                server
                    .resources()
                    .flat_map(|resource| self.required_for_resource(resource)),
            )
            .chain(
                server
                    .prompts()
                    .flat_map(|prompt| self.required_for_prompt(prompt)),
            )
            .collect();
        scopes.sort();
        scopes.dedup();
        scopes
    }

    fn granted(call: &CallContext, needed: &[String]) -> bool {
        call.principal()
            .is_some_and(|principal| needed.iter().all(|scope| principal.has_scope(scope)))
    }
}

impl AccessPolicy for ScopeRules {
    fn allows(&self, call: &CallContext, action: ActionInfo<'_>) -> bool {
        ScopeRules::granted(call, &self.required(action))
    }

    fn allows_resource(&self, call: &CallContext, resource: ResourceInfo<'_>) -> bool {
        ScopeRules::granted(call, &self.required_for_resource(resource))
    }

    fn allows_prompt(&self, call: &CallContext, prompt: PromptInfo<'_>) -> bool {
        ScopeRules::granted(call, &self.required_for_prompt(prompt))
    }

    fn required_scopes(&self, action: ActionInfo<'_>) -> Vec<String> {
        self.required(action)
    }

    fn required_resource_scopes(&self, resource: ResourceInfo<'_>) -> Vec<String> {
        self.required_for_resource(resource)
    }

    fn required_prompt_scopes(&self, prompt: PromptInfo<'_>) -> Vec<String> {
        self.required_for_prompt(prompt)
    }
}

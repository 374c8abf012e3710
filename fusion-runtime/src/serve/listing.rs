//! `tools/list`, `resources/list`, `resources/templates/list` and `prompts/list`: one listing,
//! paged the same way for each kind of item. Computed once when every caller sees the same
//! items (no access policy), per caller and never shared otherwise.

use std::sync::Arc;

use rmcp::model::{
    CacheScope, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, Prompt as PromptDefinition,
    Resource as ResourceDefinition, ResourceTemplate, Tool as ToolDefinition,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::{McpHandler, protocol_error};
use crate::context::CallContext;
use crate::server::Server;

/// One kind of listed item: the method that lists it, the items a caller may see, and how a
/// page of them is answered.
pub(super) trait Listed: Clone + Sized {
    /// The method, as failures name it.
    const METHOD: &'static str;
    /// The answer of one page.
    type Page;

    /// The items `call`'s caller may see.
    fn visible(server: &Server, call: &CallContext) -> Vec<Self>;

    /// The answer carrying `items`, `next` (the cursor of the next page) and caching hints.
    fn page(items: Vec<Self>, next: Option<String>, ttl_ms: u64, scope: CacheScope) -> Self::Page;
}

/// Implements [`Listed`] for an rmcp item whose page type has `with_all_items`, `with_ttl_ms`,
/// `with_cache_scope` and `next_cursor` (all four of them do, each on its own type).
macro_rules! listed {
    ($item:ty, $page:ty, $method:literal, $visible:ident) => {
        impl Listed for $item {
            const METHOD: &'static str = $method;
            type Page = $page;

            fn visible(server: &Server, call: &CallContext) -> Vec<Self> {
                server.$visible(call)
            }

            fn page(
                items: Vec<Self>,
                next: Option<String>,
                ttl_ms: u64,
                scope: CacheScope,
            ) -> Self::Page {
                let mut page = <$page>::with_all_items(items)
                    .with_ttl_ms(ttl_ms)
                    .with_cache_scope(scope);
                page.next_cursor = next;
                page
            }
        }
    };
}

listed!(ToolDefinition, ListToolsResult, "tools/list", visible_tools);
listed!(
    ResourceDefinition,
    ListResourcesResult,
    "resources/list",
    visible_resources
);
listed!(
    ResourceTemplate,
    ListResourceTemplatesResult,
    "resources/templates/list",
    visible_resource_templates
);
listed!(
    PromptDefinition,
    ListPromptsResult,
    "prompts/list",
    visible_prompts
);

/// What every caller sees, when no access policy decides (empty otherwise: never read).
#[derive(Debug, Clone, Default)]
pub(super) struct Listings {
    pub(super) tools: Arc<[ToolDefinition]>,
    pub(super) resources: Arc<[ResourceDefinition]>,
    pub(super) templates: Arc<[ResourceTemplate]>,
    pub(super) prompts: Arc<[PromptDefinition]>,
}

impl Listings {
    /// What `server` lists to everyone.
    pub(super) fn of(server: &Server) -> Listings {
        let everyone = server.new_context();
        Listings {
            tools: server
                .tools()
                .map(|tool| tool.definition().clone())
                .collect(),
            resources: server.visible_resources(&everyone).into(),
            templates: server.visible_resource_templates(&everyone).into(),
            prompts: server.visible_prompts(&everyone).into(),
        }
    }
}

/// The page of `items` that `cursor` names (the first without one), and the next page's cursor
/// when there is one. An empty listing has one page, empty.
pub(super) fn page<T: Clone>(
    items: &[T],
    page_size: usize,
    cursor: Option<&str>,
) -> Result<(Vec<T>, Option<String>), ErrorData> {
    let pages = items.len().div_ceil(page_size).max(1);
    let index = match cursor {
        None => 0,
        Some(cursor) => page_of(cursor)
            .filter(|index| *index < pages)
            .ok_or_else(|| ErrorData::invalid_params(format!("invalid cursor: {cursor}"), None))?,
    };
    let start = index * page_size;
    let end = (start + page_size).min(items.len());
    let next = (index + 1 < pages).then(|| cursor_of(index + 1));
    Ok((items[start..end].to_vec(), next))
}

fn cursor_of(page: usize) -> String {
    format!("page-{page}")
}

fn page_of(cursor: &str) -> Option<usize> {
    cursor.strip_prefix("page-")?.parse().ok()
}

impl McpHandler {
    /// One page of the items of kind `T`: those this caller may see under an access policy
    /// (cached by no one else), those everyone sees otherwise.
    pub(super) fn list<T: Listed>(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
        everyone: impl FnOnce(&Listings) -> &Arc<[T]>,
    ) -> Result<T::Page, ErrorData> {
        let cursor = request.and_then(|request| request.cursor);
        let shared = &*self.shared;
        let (items, next) = if shared.server.has_access_policy() {
            let call = self
                .call_context(context)
                .map_err(|error| protocol_error(T::METHOD, error))?;
            page(
                &T::visible(&shared.server, &call),
                shared.page_size,
                cursor.as_deref(),
            )?
        } else {
            page(
                everyone(&shared.listings),
                shared.page_size,
                cursor.as_deref(),
            )?
        };
        Ok(T::page(
            items,
            next,
            shared.list_ttl,
            shared.list_cache_scope,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_their_cursors_to_the_end() {
        let items: Vec<u32> = (0..5).collect();
        assert_eq!(
            page(&items, 2, None).unwrap(),
            (vec![0, 1], Some("page-1".into()))
        );
        assert_eq!(
            page(&items, 2, Some("page-1")).unwrap(),
            (vec![2, 3], Some("page-2".into()))
        );
        assert_eq!(page(&items, 2, Some("page-2")).unwrap(), (vec![4], None));
        assert!(page(&items, 2, Some("page-3")).is_err());
        assert!(page(&items, 2, Some("3")).is_err());
    }

    #[test]
    fn an_empty_listing_is_one_empty_page() {
        let items: Vec<u32> = Vec::new();
        assert_eq!(page(&items, 2, None).unwrap(), (Vec::new(), None));
        assert_eq!(page(&items, 2, Some("page-0")).unwrap(), (Vec::new(), None));
        assert!(page(&items, 2, Some("page-1")).is_err());
    }
}

//! `resources/list`, `resources/templates/list` and `prompts/list`, paged like `tools/list`:
//! precomputed once when no access policy decides, per caller (and never shared) otherwise.

use rmcp::ErrorData;
use rmcp::model::{
    CacheScope, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    Prompt as PromptDefinition, Resource as ResourceDefinition, ResourceTemplate,
};

use super::{cursor_of, page_of};

/// The pages of one listing.
#[derive(Debug, Clone)]
pub(super) struct Listing<T> {
    pages: Vec<(Vec<T>, Option<String>)>,
}

impl<T> Default for Listing<T> {
    fn default() -> Self {
        Listing {
            pages: vec![(Vec::new(), None)],
        }
    }
}

impl<T: Clone> Listing<T> {
    pub(super) fn new(items: Vec<T>, page_size: usize) -> Self {
        Listing {
            pages: pages(items, page_size),
        }
    }

    /// The page `cursor` names (the first without one).
    pub(super) fn page(&self, cursor: Option<&str>) -> Result<(Vec<T>, Option<String>), ErrorData> {
        let index = index_of(cursor, self.pages.len())?;
        Ok(self.pages[index].clone())
    }
}

/// `items` cut into pages of `page_size`, each with the cursor of the next (one empty page when
/// there is nothing).
pub(super) fn pages<T: Clone>(items: Vec<T>, page_size: usize) -> Vec<(Vec<T>, Option<String>)> {
    if items.is_empty() {
        return vec![(Vec::new(), None)];
    }
    let chunks: Vec<&[T]> = items.chunks(page_size).collect();
    chunks
        .iter()
        .enumerate()
        .map(|(index, chunk)| {
            let next = (index + 1 < chunks.len()).then(|| cursor_of(index + 1));
            (chunk.to_vec(), next)
        })
        .collect()
}

/// One page of a listing computed for one caller.
pub(super) fn page_for_caller<T: Clone>(
    items: Vec<T>,
    page_size: usize,
    cursor: Option<&str>,
) -> Result<(Vec<T>, Option<String>), ErrorData> {
    let mut pages = pages(items, page_size);
    let index = index_of(cursor, pages.len())?;
    Ok(pages.swap_remove(index))
}

fn index_of(cursor: Option<&str>, pages: usize) -> Result<usize, ErrorData> {
    match cursor {
        None => Ok(0),
        Some(cursor) => page_of(cursor)
            .filter(|index| *index < pages)
            .ok_or_else(|| ErrorData::invalid_params(format!("invalid cursor: {cursor}"), None)),
    }
}

/// The listings of a server's resources and prompts, for callers who may see everything.
#[derive(Debug, Clone, Default)]
pub(super) struct ContentListings {
    pub(super) resources: Listing<ResourceDefinition>,
    pub(super) templates: Listing<ResourceTemplate>,
    pub(super) prompts: Listing<PromptDefinition>,
}

pub(super) fn resources_result(
    (items, next): (Vec<ResourceDefinition>, Option<String>),
    ttl: u64,
    scope: CacheScope,
) -> ListResourcesResult {
    let mut result = ListResourcesResult::with_all_items(items)
        .with_ttl_ms(ttl)
        .with_cache_scope(scope);
    result.next_cursor = next;
    result
}

pub(super) fn templates_result(
    (items, next): (Vec<ResourceTemplate>, Option<String>),
    ttl: u64,
    scope: CacheScope,
) -> ListResourceTemplatesResult {
    let mut result = ListResourceTemplatesResult::with_all_items(items)
        .with_ttl_ms(ttl)
        .with_cache_scope(scope);
    result.next_cursor = next;
    result
}

pub(super) fn prompts_result(
    (items, next): (Vec<PromptDefinition>, Option<String>),
    ttl: u64,
    scope: CacheScope,
) -> ListPromptsResult {
    let mut result = ListPromptsResult::with_all_items(items)
        .with_ttl_ms(ttl)
        .with_cache_scope(scope);
    result.next_cursor = next;
    result
}

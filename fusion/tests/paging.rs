//! Collections paged at the source (SPEC P3, G3): a handler returns a `Page`, and the agent is
//! told how many items exist, how many it sees and how to get the next ones, in one notice
//! that covers the page, the agent limit and the egress budget together.

mod common;

use common::*;
use fusion::envelope::CutReason;
use fusion::testing::{TestResult, Tester};
use fusion::{Page, ServerBuilder, ToolError, presenter, tool};
use serde_json::{Value, json};

/// How many invoices the paged collection has.
const ALL: u32 = 23;

fn slice(from: u64, size: u32) -> Vec<Invoice> {
    (from..u64::from(ALL))
        .take(size as usize)
        .map(|n| invoice(n as u32 + 1, Status::Open))
        .collect()
}

/// At most 3 invoices per response.
#[presenter(Invoice, fields(id, status), limit = 3)]
#[derive(Debug)]
pub struct PagedList;

/// Pages by offset, with the total (`PagedList` shows at most 3).
#[tool(query, name = "pages.by_offset", returns = PagedList)]
async fn by_offset(offset: Option<u32>, size: Option<u32>) -> Result<Page<Invoice>, ToolError> {
    let offset = u64::from(offset.unwrap_or(0));
    Ok(Page::new(slice(offset, size.unwrap_or(2)))
        .with_total(u64::from(ALL))
        .at_offset(offset))
}

/// Pages by offset without counting: the total is unknown.
#[tool(query, name = "pages.uncounted", returns = PagedList)]
async fn uncounted(offset: Option<u32>, size: Option<u32>) -> Result<Page<Invoice>, ToolError> {
    let offset = u64::from(offset.unwrap_or(0));
    let items = slice(offset, size.unwrap_or(2));
    let next = offset + items.len() as u64;
    let page = Page::new(items).at_offset(offset);
    // Knows only that more exist: it says so with a cursor.
    Ok(if next < u64::from(ALL) {
        page.with_next_cursor(format!("after:{next}"))
    } else {
        page
    })
}

/// Pages by offset without counting, as `LIMIT size + 1` does: one item more is fetched than
/// returned, and says whether more follow.
#[tool(query, name = "pages.one_more", returns = PagedList)]
async fn one_more(offset: Option<u32>, size: Option<u32>) -> Result<Page<Invoice>, ToolError> {
    let offset = u64::from(offset.unwrap_or(0));
    let size = size.unwrap_or(2);
    let mut items = slice(offset, size + 1);
    let more = items.len() > size as usize;
    items.truncate(size as usize);
    Ok(Page::new(items).at_offset(offset).with_more(more))
}

fn after(cursor: Option<&str>) -> u64 {
    cursor
        .and_then(|cursor| cursor.strip_prefix("after:"))
        .map_or(0, |n| n.parse().unwrap())
}

/// Pages by an opaque cursor; the total is known only when asked.
#[tool(query, name = "pages.by_cursor", returns = PagedList)]
async fn by_cursor(
    cursor: Option<String>,
    size: Option<u32>,
    counted: Option<bool>,
) -> Result<Page<Invoice>, ToolError> {
    let from = after(cursor.as_deref());
    let items = slice(from, size.unwrap_or(2));
    let next = from + items.len() as u64;
    let mut page = Page::new(items);
    if counted == Some(true) {
        page = page.with_total(u64::from(ALL));
    }
    if next < u64::from(ALL) {
        page = page.with_next_cursor(format!("after:{next}"));
    }
    Ok(page)
}

/// Returns a cursor but takes none back: the author's mistake, never shown to the agent.
#[tool(query, name = "pages.cursor_not_taken", returns = PagedList)]
async fn cursor_not_taken() -> Result<Page<Invoice>, ToolError> {
    Ok(Page::new(slice(0, 2)).with_next_cursor("after:2"))
}

/// Long memos, at most 6 per response.
#[presenter(Invoice, fields(id, memo), limit = 6)]
#[derive(Debug)]
pub struct WideList;

fn wide(from: u64, size: u32) -> Vec<Invoice> {
    slice(from, size)
        .into_iter()
        .map(|mut invoice| {
            invoice.memo = Some("m".repeat(200));
            invoice
        })
        .collect()
}

/// Pages of wide invoices under a byte budget: page, agent limit and budget all cut.
#[tool(query, name = "pages.wide", returns = WideList, max_bytes = 2000)]
async fn wide_pages(offset: Option<u32>, size: Option<u32>) -> Result<Page<Invoice>, ToolError> {
    let offset = u64::from(offset.unwrap_or(0));
    Ok(Page::new(wide(offset, size.unwrap_or(10)))
        .with_total(u64::from(ALL))
        .at_offset(offset))
}

/// Pages of wide invoices by cursor under a byte budget.
#[tool(query, name = "pages.wide_cursor", returns = WideList, max_bytes = 2000)]
async fn wide_cursor(cursor: Option<String>) -> Result<Page<Invoice>, ToolError> {
    let from = after(cursor.as_deref());
    let items = wide(from, 4);
    let next = from + items.len() as u64;
    Ok(Page::new(items)
        .with_total(u64::from(ALL))
        .with_next_cursor(format!("after:{next}")))
}

/// Pages of invoices in which invoices 3 and 4 are each over the budget on their own.
#[tool(query, name = "pages.oversized", returns = WideList, max_bytes = 2000)]
async fn oversized(offset: Option<u32>) -> Result<Page<Invoice>, ToolError> {
    let offset = u64::from(offset.unwrap_or(0));
    let items = slice(offset, 6)
        .into_iter()
        .map(|mut invoice| {
            if invoice.id == "INV-3" || invoice.id == "INV-4" {
                invoice.memo = Some("m".repeat(5000));
            }
            invoice
        })
        .collect();
    Ok(Page::new(items)
        .with_total(u64::from(ALL))
        .at_offset(offset))
}

fn tester() -> Tester {
    Tester::new(
        ServerBuilder::new("pages", "1")
            .tool::<by_offset>()
            .tool::<oversized>()
            .tool::<uncounted>()
            .tool::<one_more>()
            .tool::<by_cursor>()
            .tool::<cursor_not_taken>()
            .tool::<wide_pages>()
            .tool::<wide_cursor>()
            .build()
            .expect("the paging server builds"),
    )
}

fn ids(result: &TestResult) -> Vec<String> {
    result
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_str().unwrap().to_owned())
        .collect()
}

fn notice(result: &TestResult) -> &str {
    result
        .truncation_notice()
        .unwrap_or_else(|| panic!("a truncation notice in {}", result.raw_text()))
}

/// Validates the result against the tool's advertised output schema.
fn assert_advertised(tester: &Tester, key: &str, result: &TestResult) {
    let server = tester.server();
    let tool = server
        .tool(server.action(key).unwrap().exposed_tool())
        .unwrap();
    let schema = Value::Object((**tool.definition().output_schema.as_ref().unwrap()).clone());
    assert_valid(&schema, result.envelope());
}

#[tokio::test]
async fn a_page_with_a_total_says_how_many_exist_and_the_next_offset() {
    let tester = tester();
    let first = tester.call("pages.by_offset", json!({})).await;
    assert_eq!(ids(&first), ["INV-1", "INV-2"]);
    assert_advertised(&tester, "pages.by_offset", &first);
    assert_eq!(
        first.meta()["truncated"],
        json!({"shown": 2, "total": 23, "hidden": 21, "reason": "page", "offset": 0, "nextOffset": 2})
    );
    let text = notice(&first);
    assert!(
        text.contains("Only 2 of 23 items are shown; 21 are hidden."),
        "{text}"
    );
    assert!(text.contains("They are items 1 to 2."), "{text}");
    assert!(
        text.contains("Call `pages_by_offset` again with the same arguments and \"offset\": 2"),
        "{text}"
    );
    // The next page starts where this one stopped.
    let second = tester.call("pages.by_offset", json!({"offset": 2})).await;
    assert_eq!(ids(&second), ["INV-3", "INV-4"]);
    assert_eq!(second.truncated().unwrap().next_offset, Some(4));
    assert_eq!(second.truncated().unwrap().offset, Some(2));
}

#[tokio::test]
async fn a_whole_collection_in_one_page_is_not_cut() {
    let tester = tester();
    let all = tester
        .call("pages.by_offset", json!({"size": 100, "offset": 21}))
        .await;
    // The last 2 items: the page is the end, and the agent sees it is not all there is.
    assert_eq!(ids(&all), ["INV-22", "INV-23"]);
    let truncated = all.truncated().unwrap();
    assert_eq!(
        (truncated.total, truncated.next_offset),
        (Some(23), None),
        "the last page has no next offset"
    );
    assert!(
        notice(&all).contains("There are no more after these."),
        "{}",
        notice(&all)
    );
    // A page that holds the whole collection is no cut at all.
    let server = ServerBuilder::new("s", "1")
        .tool::<uncounted>()
        .build()
        .unwrap();
    let whole = Tester::new(server)
        .call("pages.uncounted", json!({"size": 3, "offset": 20}))
        .await;
    assert_eq!(ids(&whole), ["INV-21", "INV-22", "INV-23"]);
    assert_eq!(whole.truncated(), None);
    assert_eq!(whole.truncation_notice(), None);
}

#[tokio::test]
async fn the_agent_limit_inside_a_page_continues_after_the_last_item_shown() {
    let tester = tester();
    // A page of 5 from offset 4; the presenter shows 3 of them.
    let cut = tester
        .call("pages.by_offset", json!({"offset": 4, "size": 5}))
        .await;
    assert_eq!(ids(&cut), ["INV-5", "INV-6", "INV-7"]);
    assert_advertised(&tester, "pages.by_offset", &cut);
    let truncated = cut.truncated().unwrap();
    assert_eq!(truncated.reason, CutReason::Limit);
    assert_eq!((truncated.shown, truncated.total), (3, Some(23)));
    assert_eq!(truncated.hidden, Some(20));
    assert_eq!(
        truncated.next_offset,
        Some(7),
        "never skips INV-8 and INV-9"
    );
    let text = notice(&cut);
    assert!(
        text.contains("Cut by the page the tool fetched (5 items) and the agent limit (3 items)."),
        "{text}"
    );
    // Walking the next offsets sees every item once, in order.
    let mut seen = Vec::new();
    let mut arguments = json!({"size": 5});
    for _ in 0..20 {
        let page = tester.call("pages.by_offset", arguments.clone()).await;
        seen.extend(ids(&page));
        match page.truncated().and_then(|truncated| truncated.next_offset) {
            Some(next) => arguments["offset"] = next.into(),
            None => break,
        }
    }
    let expected: Vec<String> = (1..=ALL).map(|n| format!("INV-{n}")).collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn an_unknown_total_says_that_more_exist() {
    let tester = tester();
    let first = tester.call("pages.uncounted", json!({})).await;
    assert_advertised(&tester, "pages.uncounted", &first);
    let truncated = first.truncated().unwrap();
    assert_eq!((truncated.total, truncated.hidden), (None, None));
    assert_eq!(truncated.next_offset, Some(2));
    assert!(first.meta()["truncated"].get("total").is_none());
    assert_eq!(
        first.truncation(),
        None,
        "no (shown, total) without a total"
    );
    let text = notice(&first);
    assert!(
        text.contains("Only 2 items are shown; more exist."),
        "{text}"
    );
    assert!(!text.contains("total="), "{text}");
}

#[tokio::test]
async fn a_page_that_knows_only_that_more_follow_gives_the_next_offset_until_the_end() {
    let tester = tester();
    let mut seen = Vec::new();
    let mut arguments = json!({"size": 5});
    let mut last = None;
    for _ in 0..20 {
        let page = tester.call("pages.one_more", arguments.clone()).await;
        assert_advertised(&tester, "pages.one_more", &page);
        seen.extend(ids(&page));
        match page.truncated().and_then(|truncated| truncated.next_offset) {
            Some(next) => {
                let text = notice(&page);
                assert!(
                    text.contains("Only 3 items are shown; more exist."),
                    "{text}"
                );
                assert!(!text.contains("total="), "{text}");
                assert_eq!(page.truncated().unwrap().total, None);
                arguments["offset"] = next.into();
            }
            None => {
                last = Some(page);
                break;
            }
        }
    }
    let expected: Vec<String> = (1..=ALL).map(|n| format!("INV-{n}")).collect();
    assert_eq!(seen, expected, "every item once, in order");
    // The last page (INV-22 and INV-23) says nothing, as a whole collection would not.
    let last = last.expect("a last page");
    assert_eq!(last.truncated(), None, "{}", last.raw_text());
    // Without `with_more`, a full page that does not count says nothing of what follows.
    let page = Page::new(vec![1, 2]).at_offset(4);
    assert!(!page.has_more());
    assert!(page.with_more(true).has_more());
    assert!(Page::new(vec![1, 2]).at_offset(0).with_total(3).has_more());
    assert!(!Page::new(vec![1, 2]).at_offset(1).with_total(3).has_more());
}

#[tokio::test]
async fn a_cursor_is_given_back_and_walks_every_item_once() {
    let tester = tester();
    let first = tester.call("pages.by_cursor", json!({})).await;
    assert_advertised(&tester, "pages.by_cursor", &first);
    let truncated = first.truncated().unwrap();
    assert_eq!(truncated.next_cursor.as_deref(), Some("after:2"));
    assert_eq!(truncated.next_offset, None);
    assert_eq!(truncated.reason, CutReason::Page);
    assert_eq!(first.meta()["truncated"]["nextCursor"], "after:2");
    let text = notice(&first);
    assert!(
        text.contains("next_cursor=\"after:2\"")
            && text.contains("\"cursor\": \"after:2\" for the next ones."),
        "{text}"
    );
    let mut seen = Vec::new();
    let mut arguments = json!({"size": 3});
    for _ in 0..20 {
        let page = tester.call("pages.by_cursor", arguments.clone()).await;
        seen.extend(ids(&page));
        match page.truncated().and_then(|t| t.next_cursor.clone()) {
            Some(next) => arguments["cursor"] = next.into(),
            None => break,
        }
    }
    let expected: Vec<String> = (1..=ALL).map(|n| format!("INV-{n}")).collect();
    assert_eq!(seen, expected);
    // With a total, the same cursor, and the count.
    let counted = tester
        .call("pages.by_cursor", json!({"counted": true}))
        .await;
    assert_eq!(counted.truncation(), Some((2, 23)));
    assert_eq!(
        counted.truncated().unwrap().next_cursor.as_deref(),
        Some("after:2")
    );
}

#[tokio::test]
async fn a_cursor_that_would_skip_items_is_not_given() {
    let tester = tester();
    // A page of 5, of which the agent limit shows 3: the cursor points after the fifth.
    let cut = tester.call("pages.by_cursor", json!({"size": 5})).await;
    assert_eq!(ids(&cut), ["INV-1", "INV-2", "INV-3"]);
    let truncated = cut.truncated().unwrap();
    assert_eq!(truncated.next_cursor, None);
    assert_eq!(truncated.next_offset, None);
    assert_eq!(truncated.reason, CutReason::Limit);
    assert!(
        notice(&cut).contains("Narrow the request with filters"),
        "{}",
        notice(&cut)
    );
    // A tool that takes no `cursor` never tells the agent to send one.
    let not_taken = tester.call("pages.cursor_not_taken", json!({})).await;
    let truncated = not_taken.truncated().unwrap();
    assert_eq!(truncated.next_cursor, None);
    assert!(
        !notice(&not_taken).contains("cursor"),
        "{}",
        notice(&not_taken)
    );
}

/// The size of the whole result as sent.
fn wire_size(result: &TestResult) -> usize {
    serde_json::to_string(result.raw()).unwrap().len()
}

#[tokio::test]
async fn page_agent_limit_and_budget_cut_together_in_one_notice() {
    let tester = tester();
    // A page of 10 from offset 5; the presenter keeps 6; 2000 bytes keep fewer.
    let cut = tester
        .call("pages.wide", json!({"offset": 5, "size": 10}))
        .await;
    assert!(!cut.is_error());
    assert!(wire_size(&cut) <= 2000, "{} bytes", wire_size(&cut));
    assert_advertised(&tester, "pages.wide", &cut);
    let shown = ids(&cut);
    assert!(!shown.is_empty() && shown.len() < 6, "{shown:?}");
    assert_eq!(shown[0], "INV-6");
    let truncated = cut.truncated().unwrap();
    assert_eq!(truncated.reason, CutReason::Budget);
    assert_eq!(truncated.shown, shown.len() as u64);
    assert_eq!(truncated.total, Some(23), "the page's total, not the page");
    assert_eq!(truncated.hidden, Some(23 - shown.len() as u64));
    assert_eq!(truncated.offset, Some(5));
    assert_eq!(truncated.next_offset, Some(5 + shown.len() as u64));
    let notices: Vec<&str> = cut
        .texts()
        .into_iter()
        .filter(|text| text.starts_with("<truncation"))
        .collect();
    assert_eq!(notices.len(), 1, "one notice: {notices:?}");
    let text = notices[0];
    assert!(
        text.contains(&format!(
            "Cut by the page the tool fetched (10 items), the agent limit (6 items) and the response size limit ({} items fit).",
            shown.len()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("\"offset\": {}", 5 + shown.len())),
        "{text}"
    );
    // Following the offsets under the budget sees every item once, in order.
    let mut seen = Vec::new();
    let mut arguments = json!({"size": 10});
    for _ in 0..50 {
        let page = tester.call("pages.wide", arguments.clone()).await;
        assert!(wire_size(&page) <= 2000);
        seen.extend(ids(&page));
        match page.truncated().and_then(|truncated| truncated.next_offset) {
            Some(next) => arguments["offset"] = next.into(),
            None => break,
        }
    }
    let expected: Vec<String> = (1..=ALL).map(|n| format!("INV-{n}")).collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn a_budget_cut_drops_the_cursor_of_the_whole_page() {
    let tester = tester();
    let cut = tester.call("pages.wide_cursor", json!({})).await;
    let shown = ids(&cut);
    assert!(shown.len() < 4, "{shown:?}");
    let truncated = cut.truncated().unwrap();
    assert_eq!(truncated.reason, CutReason::Budget);
    assert_eq!(truncated.next_cursor, None, "it would skip the items cut");
    assert_eq!(truncated.total, Some(23));
    assert!(
        notice(&cut).contains("ask for fewer items")
            || notice(&cut).contains("Ask for fewer items")
    );
}

#[tokio::test]
async fn an_item_over_the_budget_on_its_own_is_left_out_and_paging_moves_past_it() {
    let tester = tester();
    let first = tester.call("pages.oversized", json!({})).await;
    assert_eq!(ids(&first), ["INV-1", "INV-2"]);
    assert_eq!(first.truncated().unwrap().next_offset, Some(2));

    let stuck = tester.call("pages.oversized", json!({"offset": 2})).await;
    assert!(!stuck.is_error());
    assert!(ids(&stuck).is_empty());
    assert_advertised(&tester, "pages.oversized", &stuck);
    let truncated = stuck.truncated().unwrap();
    assert_eq!(truncated.reason, CutReason::Budget);
    assert_eq!(truncated.skipped, Some(1));
    assert_eq!(
        truncated.next_offset,
        Some(3),
        "never the same offset twice"
    );
    let text = notice(&stuck);
    assert!(
        text.contains("Item 3 is larger than the response size limit on its own and is left out."),
        "{text}"
    );
    assert!(text.contains("\"offset\": 3"), "{text}");

    // Following the offsets reaches the end, every offset asked once, every other item seen.
    let mut seen = Vec::new();
    let mut asked = Vec::new();
    let mut offset = 0;
    loop {
        assert!(!asked.contains(&offset), "offset {offset} asked twice");
        asked.push(offset);
        let page = tester
            .call("pages.oversized", json!({"offset": offset}))
            .await;
        assert!(wire_size(&page) <= 2000);
        seen.extend(ids(&page));
        match page.truncated().and_then(|truncated| truncated.next_offset) {
            Some(next) => offset = next,
            None => break,
        }
    }
    let expected: Vec<String> = (1..=ALL)
        .filter(|n| *n != 3 && *n != 4)
        .map(|n| format!("INV-{n}"))
        .collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn grouped_exposition_names_the_grouped_tool_in_the_notice() {
    let server = ServerBuilder::new("pages", "1")
        .exposition(fusion::Exposition::Grouped)
        .tool::<by_offset>()
        .tool::<wide_pages>()
        .build()
        .unwrap();
    let tester = Tester::new(server);
    let first = tester.call("pages.by_offset", json!({})).await;
    assert_advertised(&tester, "pages.by_offset", &first);
    assert!(
        notice(&first).contains("Call `pages` again with the same arguments and \"offset\": 2"),
        "{}",
        notice(&first)
    );
}

#[test]
fn a_page_is_advertised_as_a_list_within_the_agent_limit() {
    let tester = tester();
    let server = tester.server();
    let tool = server.tool("pages_by_offset").unwrap();
    let output = Value::Object((**tool.definition().output_schema.as_ref().unwrap()).clone());
    let text = output.to_string();
    assert!(text.contains("\"maxItems\":3"), "{text}");
    // How a cut page continues is the same for every tool: said once, in the instructions
    // the client receives, not in each tool's output schema.
    assert!(!text.contains("nextCursor"), "{text}");
    let instructions = server.served_instructions().unwrap();
    assert!(instructions.contains("nextCursor"), "{instructions}");
}

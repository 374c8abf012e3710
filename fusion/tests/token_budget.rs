//! Token budgets (issue 21): a presenter's or a tool's `max_tokens` cuts a collection at an
//! item boundary so that what the agent reads (the text blocks and `structuredContent`,
//! counted with o200k) stays within it, and the truncation notice says how to see the rest.

use fusion::testing::Tester;
use fusion::{ServerBuilder, ToolError, model, presenter, tool};
use fusion_runtime::testing::{O200k, Tokenizer as _};
use serde_json::json;

/// A support ticket, with a secret column.
#[model]
#[derive(Debug)]
pub struct Ticket {
    /// Its id.
    #[cast("Ticket id, such as T-7")]
    pub id: String,
    /// Its subject.
    #[cast("What the customer wrote")]
    pub subject: String,
    /// Who reported it: never shown.
    #[hidden]
    pub reporter_email: fusion::Hidden<String>,
}

/// Tickets as an agent reads them: at most 100, within 600 tokens an answer.
#[presenter(Ticket, fields(id, subject), limit = 100, max_tokens = 600)]
#[derive(Debug)]
pub struct TicketRow;

fn tickets(count: usize) -> Vec<Ticket> {
    (1..=count)
        .map(|n| Ticket {
            id: format!("T-{n}"),
            subject: format!("The printer on floor {n} jams whenever a long report is sent"),
            reporter_email: format!("user{n}@example.com").into(),
        })
        .collect()
}

/// Lists tickets.
#[tool(query, name = "desk.list_tickets", returns = TicketRow)]
async fn list_tickets(
    /// How many tickets there are.
    count: usize,
) -> Result<Vec<Ticket>, ToolError> {
    Ok(tickets(count))
}

/// Lists tickets within a tighter budget than its presenter's.
#[tool(query, name = "desk.brief_tickets", returns = TicketRow, max_tokens = 250)]
async fn brief_tickets(
    /// How many tickets there are.
    count: usize,
) -> Result<Vec<Ticket>, ToolError> {
    Ok(tickets(count))
}

/// Lists tickets within a budget smaller than one ticket: what a hurried author might set.
#[tool(query, name = "desk.tiny_tickets", returns = TicketRow, max_tokens = 5)]
async fn tiny_tickets(
    /// How many tickets there are.
    count: usize,
) -> Result<Vec<Ticket>, ToolError> {
    Ok(tickets(count))
}

fn tester() -> Tester {
    let server = ServerBuilder::new("desk", "1.0.0")
        .tool::<list_tickets>()
        .tool::<brief_tickets>()
        .tool::<tiny_tickets>()
        .build()
        .expect("the desk builds");
    Tester::new(server)
}

#[tokio::test]
async fn an_answer_within_the_budget_is_whole() {
    let whole = tester()
        .call("desk.list_tickets", json!({"count": 3}))
        .await;
    assert!(!whole.is_error());
    assert_eq!(whole.data().as_array().map(Vec::len), Some(3));
    assert_eq!(whole.truncation(), None);
}

#[tokio::test]
async fn a_presenters_budget_cuts_whole_items_and_says_how_many() {
    let tester = tester();
    let cut = tester.call("desk.list_tickets", json!({"count": 60})).await;
    assert!(!cut.is_error());
    let spent = cut.tokens(&O200k).total();
    assert!(spent <= 600, "{spent} tokens");
    let shown = cut.data().as_array().expect("a list").len();
    eprintln!("{shown} of 60 items in {spent} tokens");
    assert!(shown > 0 && shown < 60, "{shown} shown");
    // Whole items, the first ones, each with both fields.
    for (index, item) in cut.data().as_array().unwrap().iter().enumerate() {
        assert_eq!(item["id"], format!("T-{}", index + 1));
        assert!(
            item["subject"]
                .as_str()
                .unwrap()
                .ends_with("report is sent")
        );
    }
    assert_eq!(cut.meta()["truncated"]["reason"], "budget");
    let notice = cut.truncation_notice().expect("a truncation notice");
    assert!(
        notice.contains(&format!("Only {shown} of 60 items are shown")),
        "{notice}"
    );
    assert!(notice.contains("the response size limit"), "{notice}");
    // As many as fit: one more item would not have.
    let one_more = spent + O200k.count(&cut.data()[0].to_string()) * 2;
    assert!(
        one_more > 600 - 40,
        "{spent} tokens spent, {one_more} with one more item"
    );
    assert!(!cut.raw_text().contains("@example.com"));
}

#[tokio::test]
async fn a_tools_budget_overrides_its_presenters() {
    let cut = tester()
        .call("desk.brief_tickets", json!({"count": 60}))
        .await;
    let spent = cut.tokens(&O200k).total();
    assert!(spent <= 250, "{spent} tokens");
    let brief = cut.data().as_array().unwrap().len();
    let listed = tester()
        .call("desk.list_tickets", json!({"count": 60}))
        .await;
    assert!(brief < listed.data().as_array().unwrap().len());
    assert!(brief > 0);
}

#[tokio::test]
async fn a_budget_smaller_than_one_item_leaves_it_out_and_says_so() {
    let cut = tester()
        .call("desk.tiny_tickets", json!({"count": 3}))
        .await;
    assert!(!cut.is_error());
    assert_eq!(cut.data(), &json!([]));
    let notice = cut.truncation_notice().expect("a truncation notice");
    assert!(
        notice.contains("larger than the response size limit"),
        "{notice}"
    );
    assert!(!cut.raw_text().contains("@example.com"));
}

#[test]
fn the_budget_is_in_the_actions_facts_and_the_lockfile() {
    let server = tester().server().clone();
    let listed = server.action("desk.list_tickets").unwrap();
    assert_eq!(listed.max_tokens(), Some(600));
    assert_eq!(
        server.action("desk.brief_tickets").unwrap().max_tokens(),
        Some(250)
    );
    let surface = fusion::lock::surface(&server);
    assert_eq!(
        surface.actions["desk.list_tickets"].guards.max_tokens,
        Some(600)
    );
}

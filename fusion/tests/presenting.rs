//! What the agent perceives besides data (SPEC P2–P5): rules, suggestions, UI blocks.

mod common;

use common::*;
use fusion::testing::{ReceivedUiBlock, Tester};
use fusion::{Presenter, ServerBuilder, ToolError, presenter, tool};
use serde_json::json;

#[tokio::test]
async fn rules_are_the_presenters_own_and_the_labels_are_in_the_listing() {
    let tester = Tester::new(server());
    let result = tester
        .call("billing.get_invoice", json!({"id": "INV-1"}))
        .await;
    // The labels of the presented fields are the descriptions of the tool's output schema,
    // which the agent read in the listing: an answer does not send them again.
    let listed = tester
        .server()
        .tool("billing_get_invoice")
        .unwrap()
        .definition()
        .output_schema
        .clone()
        .unwrap();
    let listed = serde_json::to_string(&listed).unwrap();
    for label in [
        "Invoice id, such as INV-7",
        "Customer id",
        "Total in integer cents",
        "open, paid or voided",
        "A note for <humans> & agents",
    ] {
        assert!(
            listed.contains(&format!("\"description\":\"{label}\"")),
            "{label}: {listed}"
        );
    }
    assert_eq!(
        result.rules(),
        ["Amounts are cents: divide by 100 for display."]
    );
    // Rules are attached only to the entity they describe.
    let health = tester.call("ops.health", json!({})).await;
    assert!(health.rules().is_empty());
    // A presenter with labels only has nothing left to say.
    let summary = tester.call("billing.summaries", json!({})).await;
    assert!(summary.rules().is_empty(), "{:?}", summary.rules());
    assert!(
        !summary
            .texts()
            .iter()
            .any(|text| text.starts_with("<domain_rules>"))
    );
}

#[tokio::test]
async fn suggestions_follow_the_data_with_exposed_names_and_arguments() {
    let tester = Tester::new(server());
    let open = tester
        .call("billing.get_invoice", json!({"id": "INV-1"}))
        .await;
    assert_eq!(
        serde_json::to_value(open.suggestions()).unwrap(),
        json!([{"tool": "billing_void_invoice", "arguments": {"id": "INV-1"}, "reason": "The invoice is open: it can be voided."}])
    );
    assert!(open.texts().contains(&"<action_suggestions>\n- billing_void_invoice {\"id\":\"INV-1\"}: The invoice is open: it can be voided.\n</action_suggestions>"));
    let paid = tester
        .call("billing.get_invoice", json!({"id": "INV-3"}))
        .await;
    assert!(paid.suggestions().is_empty());
    assert!(
        paid.texts()
            .iter()
            .all(|text| !text.starts_with("<action_suggestions"))
    );
}

#[tokio::test]
async fn ui_blocks_are_rendered_by_the_server_deterministically() {
    let tester = Tester::new(server()).rendering_ui();
    let first = tester
        .call("billing.get_invoice", json!({"id": "INV-1"}))
        .await;
    let second = tester
        .call("billing.get_invoice", json!({"id": "INV-1"}))
        .await;
    assert_eq!(first.ui_blocks(), second.ui_blocks());
    let kinds: Vec<String> = first
        .ui_blocks()
        .into_iter()
        .map(|block| block.kind)
        .collect();
    assert_eq!(kinds, ["markdown", "table", "mermaid", "chart", "code"]);
    assert_eq!(
        first.ui_blocks()[1],
        ReceivedUiBlock {
            kind: "table".into(),
            body: "| id | total_cents |\n| --- | --- |\n| INV-1 | 1000 |".into()
        }
    );
    assert_eq!(first.ui_blocks()[0].body, "**1 invoice(s)** <shown>");
    assert!(first.raw_text().contains("**1 invoice(s)** &lt;shown&gt;"));
    let chart: serde_json::Value = serde_json::from_str(&first.ui_blocks()[3].body).unwrap();
    assert_eq!(chart["mark"], "bar");
    let code = first
        .texts()
        .into_iter()
        .find(|text| text.contains("type=\"code\""))
        .unwrap();
    assert!(code.starts_with("<ui_passthrough type=\"code\" language=\"sql\">"));
    assert!(code.contains("total &lt; 10"));
}

#[test]
fn presenters_can_be_read_back() {
    assert_eq!(InvoiceView::NAME, "InvoiceView");
    assert_eq!(
        InvoiceView::FIELDS,
        ["id", "customer_id", "total_cents", "status", "memo"]
    );
    assert_eq!(InvoiceView::LIMIT, Some(3));
    assert_eq!(
        InvoiceView::ACTIONS,
        ["billing.void_invoice", "billing.get_invoice"]
    );
    assert_eq!(InvoiceSummary::LIMIT, None);
    let paid = invoice(7, Status::Paid);
    let item = InvoiceView::item(&paid);
    assert_eq!(*item.total_cents, 7000);
}

fn rogue(_shown: fusion::Presented<'_, RogueViewItem<'_>>) -> Vec<fusion::Suggestion> {
    vec![
        fusion::Suggestion::new("billing.get_invoice", "declared"),
        fusion::Suggestion::new(
            "billing.void_invoice",
            "exists, but this presenter did not declare it",
        ),
        fusion::Suggestion::new("billing.get_invoice", "arguments that are not an object")
            .with_arguments(json!(5)),
    ]
}

/// A presenter whose suggestion function misbehaves.
#[presenter(Invoice, fields(id), suggest = rogue, actions = ["billing.get_invoice"])]
#[derive(Debug)]
pub struct RogueView;

/// Shows an invoice with a presenter whose suggestion function misbehaves.
#[tool(query, name = "billing.rogue", returns = RogueView)]
async fn rogue_tool() -> Result<Invoice, ToolError> {
    Ok(invoice(1, Status::Open))
}

#[tokio::test]
async fn a_suggestion_the_presenter_did_not_declare_is_dropped_never_shown() {
    let server = tools(ServerBuilder::new("billing", "1").state(Db::seeded()))
        .tool::<rogue_tool>()
        .build()
        .unwrap();
    let result = Tester::new(server).call("billing.rogue", json!({})).await;
    assert!(!result.is_error());
    let suggestions = result.suggestions();
    assert_eq!(suggestions.len(), 1, "{suggestions:?}");
    assert_eq!(suggestions[0].reason, "declared");
    // The agent never sees the other two; the test sees why they went.
    let dropped: Vec<String> = result.dropped().iter().map(ToString::to_string).collect();
    assert_eq!(
        dropped,
        [
            "suggestion of `billing.void_invoice` dropped: it names a tool the presenter did not declare in `actions`, or a key no tool has",
            "suggestion of `billing.get_invoice` dropped: its arguments are not a JSON object",
        ]
    );
    assert!(!result.raw_text().contains("billing_void_invoice"));
}

fn charts_too(_shown: fusion::Presented<'_, TableOnlyItem<'_>>) -> Vec<fusion::UiBlock> {
    vec![
        fusion::UiBlock::table(["id"], [vec!["INV-1".to_owned()]]),
        fusion::UiBlock::chart(json!({"mark": "bar"})),
    ]
}

/// A presenter that declares tables only, and whose UI function renders a chart too.
#[presenter(Invoice, fields(id), ui = charts_too, ui_kinds = ["table"])]
#[derive(Debug)]
pub struct TableOnly;

/// Shows an invoice through `TableOnly`.
#[tool(query, name = "billing.table_only", returns = TableOnly)]
async fn table_only() -> Result<Invoice, ToolError> {
    Ok(invoice(1, Status::Open))
}

fn every_kind(_shown: fusion::Presented<'_, EveryKindItem<'_>>) -> Vec<fusion::UiBlock> {
    Vec::new()
}

/// A presenter that lists every kind of block, in another order.
#[presenter(Invoice, fields(id), ui = every_kind,
            ui_kinds = ["table", "markdown", "code", "chart", "mermaid"])]
#[derive(Debug)]
pub struct EveryKind;

#[tokio::test]
async fn a_ui_block_of_a_kind_the_presenter_did_not_declare_is_dropped_never_shown() {
    assert_eq!(TableOnly::UI_KINDS, ["table"]);
    // `#[presenter]` knows every kind the runtime renders.
    let mut every = EveryKind::UI_KINDS.to_vec();
    every.sort_unstable();
    assert_eq!(every, fusion::UiBlock::KINDS);
    // Without `ui_kinds`, every kind; without `ui`, none.
    assert_eq!(InvoiceView::UI_KINDS, fusion::UiBlock::KINDS);
    assert!(RogueView::UI_KINDS.is_empty());

    let server = tools(ServerBuilder::new("billing", "1").state(Db::seeded()))
        .tool::<table_only>()
        .build()
        .unwrap();
    let result = Tester::new(server)
        .rendering_ui()
        .call("billing.table_only", json!({}))
        .await;
    let kinds: Vec<String> = result
        .ui_blocks()
        .into_iter()
        .map(|block| block.kind)
        .collect();
    assert_eq!(kinds, ["table"]);
    assert!(!result.raw_text().contains("type=\"chart\""));
    assert_eq!(
        result.dropped(),
        [fusion::testing::Dropped::UiBlock { kind: "chart" }]
    );
    assert_eq!(
        result.dropped()[0].to_string(),
        "UI block of kind `chart` dropped: the presenter did not declare this kind in `ui_kinds`"
    );
}

/// Fails naming a next step that is a typo of a real tool key.
#[tool(query, name = "billing.misdirect")]
async fn misdirect() -> Result<Health, ToolError> {
    Err(ToolError::not_found("Nothing here.")
        .with_actions(["billing.get_invoice", "billing.get_invoce"]))
}

#[tokio::test]
async fn an_error_action_naming_no_tool_is_dropped_and_the_tester_shows_it() {
    let server = tools(ServerBuilder::new("billing", "1").state(Db::seeded()))
        .tool::<misdirect>()
        .build()
        .unwrap();
    let tester = Tester::new(server);
    let failed = tester.call("billing.misdirect", json!({})).await;
    assert_eq!(
        failed.error()["availableActions"],
        json!(["billing_get_invoice"])
    );
    assert_eq!(
        failed.dropped(),
        [fusion::testing::Dropped::AvailableAction {
            key: "billing.get_invoce".into()
        }]
    );
    // A clean call drops nothing.
    let clean = tester
        .call("billing.get_invoice", json!({"id": "INV-1"}))
        .await;
    assert!(clean.dropped().is_empty());
}

#[tokio::test]
async fn the_agent_is_told_how_many_items_were_shown_and_how_many_hidden() {
    let tester = Tester::new(server());
    let result = tester.call("billing.list_invoices", json!({})).await;
    assert_eq!(result.data().as_array().map(Vec::len), Some(3));
    let truncated = &result.meta()["truncated"];
    assert_eq!(
        (
            &truncated["shown"],
            &truncated["total"],
            &truncated["hidden"]
        ),
        (&json!(3), &json!(10), &json!(7))
    );
    assert_eq!(truncated["reason"], "limit");
    let notice = result
        .texts()
        .into_iter()
        .find(|text| text.starts_with("<truncation"))
        .expect("a truncation notice");
    assert!(notice.contains("hidden=\"7\""), "{notice}");
    assert!(
        notice.contains("Only 3 of 10 items are shown; 7 are hidden."),
        "{notice}"
    );
    // The tool takes no `offset`: the notice does not invent one.
    assert!(!notice.contains("offset"), "{notice}");
    assert!(truncated.get("nextOffset").is_none());
}

#[tokio::test]
async fn over_the_budget_the_ui_blocks_go_before_any_item() {
    let list = |server| async move {
        Tester::new(server)
            .rendering_ui()
            .call("billing.list_invoices", json!({"status": "paid"}))
            .await
    };
    let whole = list(server()).await;
    assert!(!whole.ui_blocks().is_empty());
    assert_eq!(whole.truncation(), None);
    let size = serde_json::to_string(whole.raw()).unwrap().len();
    // One byte short: dropping the UI blocks is enough, every item stays.
    let tight = tools(
        ServerBuilder::new("billing", "1.4.0")
            .state(Db::seeded())
            .max_bytes(size - 1),
    )
    .build()
    .unwrap();
    let cut = list(tight).await;
    assert!(!cut.is_error());
    assert!(cut.ui_blocks().is_empty());
    assert_eq!(cut.data(), whole.data());
    assert_eq!(cut.truncation(), None);
    assert!(serde_json::to_string(cut.raw()).unwrap().len() < size);
}

/// The usual "find" shape: nothing found is a result, not an error.
#[tool(query, name = "billing.find_invoice", returns = InvoiceView)]
async fn find_invoice(
    db: fusion::State<Db>,
    /// The customer whose first invoice is wanted.
    customer_id: String,
) -> Result<Option<Invoice>, BillingError> {
    let invoices = db.invoices.lock().unwrap();
    Ok(invoices
        .iter()
        .find(|invoice| invoice.customer_id == customer_id)
        .cloned())
}

#[tokio::test]
async fn an_optional_model_is_presented_and_absent_is_a_null_result() {
    let server = tools(ServerBuilder::new("find", "1").state(Db::seeded()))
        .tool::<find_invoice>()
        .build()
        .unwrap();
    let output = serde_json::Value::Object(
        (**server
            .tool("billing_find_invoice")
            .unwrap()
            .definition()
            .output_schema
            .as_ref()
            .unwrap())
        .clone(),
    );
    let tester = Tester::new(server);
    let customer = invoice(1, Status::Open).customer_id;
    let found = tester
        .call("billing.find_invoice", json!({"customer_id": customer}))
        .await;
    assert!(!found.is_error());
    assert_eq!(found.data()["id"], "INV-1");
    // Presented: only the presenter's fields, with its rules and suggestions.
    assert!(found.data().get("internal_notes").is_none());
    assert!(!found.rules().is_empty());
    assert_eq!(found.suggestions().len(), 1);
    assert_no_secret(found.raw_text().as_str());
    assert_valid(&output, found.envelope());

    let missing = tester
        .call("billing.find_invoice", json!({"customer_id": "nobody"}))
        .await;
    assert!(!missing.is_error(), "absence is not an error");
    assert_eq!(missing.data(), &serde_json::Value::Null);
    assert!(missing.suggestions().is_empty() && missing.rules().is_empty());
    assert_valid(&output, missing.envelope());
}

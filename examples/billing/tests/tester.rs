//! The billing connector through Fusion's in-memory tester: the real pipeline, no transport.
//! This is also how a connector's own unit tests read.

use std::sync::Arc;

use billing::{Store, local_principal};
use fusion::serde_json::json;
use fusion::testing::{Elicited, Question, Tester};
use fusion::{Exposition, Principal};

fn tester(exposition: Exposition) -> Tester {
    let store = Arc::new(Store::open_in_memory().expect("an in-memory store"));
    let server = billing::server(store, exposition).expect("the billing server builds");
    // A client that draws UI, so that answers carry the presenters' blocks.
    Tester::new(server)
        .with_principal(local_principal())
        .rendering_ui()
}

#[tokio::test]
async fn a_large_void_asks_the_user_and_does_what_they_answer() {
    let tester = tester(Exposition::Flat);
    let created = tester
        .call(
            "billing.create_invoice",
            json!({"customer_id": "C-1", "total_cents": 250_000}),
        )
        .await;
    let id = created.data()["id"].clone();
    // Declined: the invoice stays as it was, and the agent is told not to insist.
    let declined = tester
        .clone()
        .answer_elicitation(Elicited::Decline)
        .call("billing.void_invoice", json!({"id": id}))
        .await;
    assert_eq!(declined.error_code(), Some("VoidNotConfirmed"));
    let [Question::Elicitation { message, .. }] = declined.questions() else {
        panic!("one question: {:?}", declined.questions());
    };
    assert!(message.contains("$2500.00"), "{message}");
    let still = tester.call("billing.get_invoice", json!({"id": id})).await;
    assert_eq!(still.data()["status"], "open");
    // Confirmed: voided.
    let voided = tester
        .clone()
        .answer_elicitation(Elicited::confirm())
        .call("billing.void_invoice", json!({"id": id}))
        .await;
    assert_eq!(voided.data()["status"], "voided", "{}", voided.raw_text());
}

#[tokio::test]
async fn voiding_never_leaks_and_says_what_is_stale() {
    let tester = tester(Exposition::Flat);
    let voided = tester
        .call("billing.void_invoice", json!({"id": "INV-3"}))
        .await;
    assert!(!voided.is_error(), "{}", voided.raw_text());
    assert_eq!(voided.data()["status"], "voided");
    assert!(!voided.raw_text().contains("whsec_"));
    assert!(!voided.raw_text().contains("t_777"));
    // `billing.*`'s queries, as the agent calls them.
    assert_eq!(
        voided.invalidations(),
        [
            "billing_get_invoice",
            "billing_list_invoices",
            "billing_invoice_stats",
            "billing_statuses",
            "billing_export_invoices"
        ]
    );
    assert_eq!(
        voided.rules(),
        ["Amounts are integer cents: divide by 100 and show two decimals."],
        "the presenter's own rules; its labels, and the rule that is the meaning of `voided`, \
         are in the listed output schema"
    );
    let kinds: Vec<String> = voided
        .ui_blocks()
        .into_iter()
        .map(|block| block.kind)
        .collect();
    assert_eq!(kinds, ["markdown", "mermaid", "code"]);
    let again = tester
        .call("billing.void_invoice", json!({"id": "INV-3"}))
        .await;
    assert_eq!(again.error_code(), Some("AlreadyVoided"));
    assert!(again.invalidations().is_empty());
}

#[tokio::test]
async fn a_missing_invoice_points_to_the_list_as_the_agent_calls_it() {
    for (exposition, reference, in_text) in [
        (
            Exposition::Flat,
            "billing_list_invoices",
            "`billing_list_invoices`",
        ),
        (
            Exposition::Grouped,
            "billing {\"action\":\"list_invoices\"}",
            "`billing` with `{\"action\":\"list_invoices\"}`",
        ),
    ] {
        let tester = tester(exposition);
        let missing = tester
            .call("billing.get_invoice", json!({"id": "INV-99999"}))
            .await;
        assert_eq!(missing.error_code(), Some("InvoiceNotFound"));
        assert_eq!(missing.error()["availableActions"], json!([reference]));
        assert_eq!(
            missing.error()["recovery"],
            format!("Call {in_text} to find valid invoice ids.")
        );
    }
}

#[tokio::test]
async fn instructions_and_descriptions_name_tools_as_the_agent_calls_them() {
    let flat = tester(Exposition::Flat);
    assert_eq!(
        flat.server().instructions(),
        Some(
            "Invoices of one tenant. Amounts are integer cents. Look invoices up with \
             `billing_list_invoices` or `billing_get_invoice` before changing them."
        )
    );
    let get = flat.server().tool("billing_get_invoice").unwrap();
    assert_eq!(
        get.definition().description.as_deref(),
        Some("Gets one invoice by its id (`billing_list_invoices` finds ids).")
    );
    let grouped = tester(Exposition::Grouped);
    let instructions = grouped.server().instructions().unwrap();
    assert!(
        instructions.contains(
            "Look invoices up with `billing` with `{\"action\":\"list_invoices\"}` or \
             `billing` with `{\"action\":\"get_invoice\"}` before changing them."
        ),
        "{instructions}"
    );
    let billing = grouped.server().tool("billing").unwrap();
    let description = billing.definition().description.as_deref().unwrap();
    assert!(
        description.contains(
            "- get_invoice: Gets one invoice by its id (`billing` with `{\"action\":\"list_invoices\"}` finds ids)."
        ),
        "{description}"
    );
    // No flat name and no canonical key is left in grouped text.
    for text in [instructions, description] {
        assert!(!text.contains("billing_"), "{text}");
        assert!(!text.contains("`billing."), "{text}");
    }
}

#[tokio::test]
async fn a_read_only_caller_sees_and_hears_of_reads_only_in_grouped_exposition() {
    let store = Arc::new(Store::open_in_memory().expect("an in-memory store"));
    let server = billing::server(store, Exposition::Grouped).expect("the billing server builds");
    let reader = || Principal::new("reader").with_tenant(billing::DEMO_TENANT);
    let mut context = server.new_context();
    context.extensions_mut().insert(reader());
    let listed = server.visible_tools(&context);
    assert_eq!(listed.len(), 1);
    let input = fusion::serde_json::Value::Object((*listed[0].input_schema).clone());
    assert_eq!(
        input["properties"]["action"]["enum"],
        json!([
            "get_invoice",
            "list_invoices",
            "invoice_stats",
            "statuses",
            "export_invoices"
        ])
    );
    assert_eq!(
        listed[0].annotations.as_ref().unwrap().read_only_hint,
        Some(true)
    );
    let description = listed[0].description.as_deref().unwrap();
    for write in [
        "void_invoice",
        "create_invoice",
        "update_invoice",
        "send_reminder",
    ] {
        assert!(!description.contains(write), "{description}");
    }
    let tester = Tester::new(server).with_context(move |call| {
        call.extensions_mut().insert(reader());
    });
    let unknown = tester
        .call_exposed("billing", json!({"action": "refund"}))
        .await
        .unwrap();
    assert_eq!(unknown.error_code(), Some("UNKNOWN_ACTION"));
    assert_eq!(
        unknown.error()["details"]["validActions"],
        json!([
            "get_invoice",
            "list_invoices",
            "invoice_stats",
            "statuses",
            "export_invoices"
        ])
    );
    assert!(!unknown.raw_text().contains("void_invoice"));
}

#[tokio::test]
async fn lists_are_limited_charted_and_suggest_the_next_step() {
    let tester = tester(Exposition::Flat);
    let list = tester
        .call(
            "billing.list_invoices",
            json!({"status": "open", "limit": 80}),
        )
        .await;
    assert_eq!(list.data().as_array().unwrap().len(), 50);
    // 333 open invoices exist; a page of 80 was fetched and the agent limit shows 50.
    assert_eq!(list.truncation(), Some((50, 333)));
    assert_eq!(list.truncated().unwrap().next_offset, Some(50));
    let kinds: Vec<String> = list
        .ui_blocks()
        .into_iter()
        .map(|block| block.kind)
        .collect();
    assert_eq!(kinds, ["table", "chart"]);
    assert_eq!(list.suggestions()[0].tool, "billing_get_invoice");
    assert_eq!(list.meta()["cache"], "volatile");
}

#[tokio::test]
async fn the_default_list_says_how_many_invoices_exist_and_how_to_see_the_next() {
    let tester = tester(Exposition::Flat);
    let open = tester
        .call("billing.list_invoices", json!({"status": "open"}))
        .await;
    assert_eq!(open.data().as_array().unwrap().len(), 20);
    assert_eq!(
        open.meta()["truncated"],
        json!({"shown": 20, "total": 333, "hidden": 313, "reason": "page", "offset": 0, "nextOffset": 20})
    );
    let notice = open.truncation_notice().expect("a notice");
    assert!(
        notice.contains("Only 20 of 333 items are shown; 313 are hidden."),
        "{notice}"
    );
    assert!(
        notice.contains(
            "Call `billing_list_invoices` again with the same arguments and \"offset\": 20 for the next ones."
        ),
        "{notice}"
    );
    // Without a filter: every invoice of the tenant, and only of the tenant.
    let all = tester.call("billing.list_invoices", json!({})).await;
    assert_eq!(all.truncation(), Some((20, 1000)));
    tester
        .call(
            "billing.create_invoice",
            json!({"customer_id": "C-1", "total_cents": 1}),
        )
        .await;
    let after = tester.call("billing.list_invoices", json!({})).await;
    assert_eq!(after.truncation(), Some((20, 1001)));
}

#[tokio::test]
async fn following_the_next_offsets_lists_every_invoice_once_then_stops() {
    let tester = tester(Exposition::Flat);
    let mut seen = Vec::new();
    let mut arguments = json!({"status": "open", "limit": 80});
    let mut last = None;
    for _ in 0..20 {
        let page = tester
            .call("billing.list_invoices", arguments.clone())
            .await;
        assert!(!page.is_error(), "{}", page.raw_text());
        seen.extend(
            page.data()
                .as_array()
                .unwrap()
                .iter()
                .map(|invoice| invoice["id"].as_str().unwrap().to_owned()),
        );
        match page.truncated().and_then(|truncated| truncated.next_offset) {
            Some(next) => arguments["offset"] = next.into(),
            None => {
                last = Some(page);
                break;
            }
        }
    }
    let expected: Vec<String> = (1..=333).map(|n| format!("INV-{}", 3 * n)).collect();
    assert_eq!(seen, expected, "every open invoice, once, in order");
    // The last page still says how many exist, and that there is nothing after it.
    let last = last.expect("a last page");
    assert_eq!(last.truncation(), Some((33, 333)));
    assert!(
        last.truncation_notice()
            .unwrap()
            .contains("There are no more after these."),
        "{}",
        last.raw_text()
    );
}

#[tokio::test]
async fn grouped_exposition_keeps_each_actions_settings() {
    let tester = tester(Exposition::Grouped);
    let names: Vec<&str> = tester.server().tools().map(|tool| tool.name()).collect();
    assert_eq!(names, ["billing"]);
    let created = tester
        .call(
            "billing.create_invoice",
            json!({"customer_id": "C-1", "total_cents": 1250}),
        )
        .await;
    assert_eq!(created.data()["id"], "INV-1001");
    assert_eq!(created.invalidations(), ["billing"]);
    assert_eq!(created.meta()["action"], "create_invoice");
    let guide = tester.call("billing.statuses", json!({})).await;
    assert_eq!(guide.meta()["cache"], "immutable");
    let unknown = tester
        .call_exposed("billing", json!({"action": "refund"}))
        .await
        .unwrap();
    assert_eq!(unknown.error_code(), Some("UNKNOWN_ACTION"));
}

#[tokio::test]
async fn calls_without_a_verified_caller_are_refused() {
    let store = Arc::new(Store::open_in_memory().unwrap());
    let anonymous = Tester::new(billing::server(store, Exposition::Flat).unwrap());
    let refused = anonymous
        .call("billing.get_invoice", json!({"id": "INV-1"}))
        .await;
    assert_eq!(refused.error_code(), Some("UNAUTHORIZED"));
}
